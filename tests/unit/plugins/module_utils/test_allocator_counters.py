"""Partitionable devices (shared counters) in the allocator (KEP-4815; design.md §12, issue 24 item 4).

Upstream cases from kubernetes/kubernetes
``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go``
(k8s.io/dynamic-resource-allocation v0.36.3): the ``partitionable-devices-*`` cases about what one node's devices
consume, and ``allow-multiple-allocations-with-partitionable-device``. Each test id is the upstream case name.

How they are transcribed: the counter sets of a node are the class's ``shared_counters``; a device's
``consumesCounters`` is its entry's ``consumes_counters``; upstream's ``device(name, fromCounters, ...)`` (capacity
equal to what the device consumes) is given that capacity explicitly; ``allocatedDevices`` are devices other claims
hold (``taken``); ``Features{PartitionableDevices: false}`` is a cluster whose Kubernetes lacks the feature (1.35).

Not transcribed: cases about several pools, slices or nodes (multiple-pools, multiple-capacity-pools,
same-counter-set-name-in-different-resource-slices, devices-on-different-nodes-consume-same-counter-set,
device-counter-consumption-references-counter-set-in-other-pool, validation-error-on-non-targeting-slice), per-device
node selection (per-device-node-selection-*), binding conditions (with-binding-conditions*), and the references to
unknown counter sets or counters (``device-counter-consumption-references-unknown-*``): a validation error here, as in
the API server (:func:`test_counter_references_are_validated`).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_allocator_upstream import check, claim, first_available

from ansible_collections.gpufleet.serving.plugins.module_utils import models
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.allocator import (
    allocate,
    node_counters,
    node_devices,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.features import ALL, for_version
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError

DRIVER, CLASS = "driver-a", "class-a"
SET1, SET2 = "counter-set-1", "counter-set-2"


def dev(
    name: str,
    *consumes: tuple[str, dict[str, str]],
    capacity: bool = False,
    multi: bool = False,
    attributes: dict[str, Any] | None = None,
    taints: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """upstream ``device(name, capacity, attributes).withDeviceCounterConsumption(...)``: one device, ``<name>-0``;
    ``capacity`` is upstream's ``fromCounters``."""
    out: dict[str, Any] = {
        "name": name,
        "driver": DRIVER,
        "device_class_name": CLASS,
        "consumes_counters": [
            {"counter_set": s, "counters": {k: {"value": v} for k, v in c.items()}} for s, c in consumes
        ],
    }
    if capacity:
        out["capacity"] = {k: {"value": v} for _s, c in consumes for k, v in c.items()}
    if multi:
        out["allow_multiple_allocations"] = True
    if attributes:
        out["attributes"] = attributes
    if taints:
        out["taints"] = taints
    return out


def sets(**counter_sets: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {"name": n.replace("_", "-"), "counters": {k: {"value": v} for k, v in c.items()}}
        for n, c in counter_sets.items()
    ]


def req(name: str, count: int = 1, *cels: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "device_class_name": CLASS, "count": count}
    if cels:
        out["selectors"] = [{"cel": c} for c in cels]
    return out


def run(
    devices: list[dict[str, Any]],
    counter_sets: list[dict[str, Any]],
    node_selector: dict[str, Any],
    taken: set[str] = frozenset(),
    features: Any = ALL,
) -> tuple[Any, list[str]]:
    cls = models.parse(models.InferenceClass, {"devices": devices, "shared_counters": counter_sets}, "classes.c")
    devs = node_devices(cls)
    index = {d.name: i for i, d in enumerate(devs)}
    ns = models.parse(models.NodeSelector, node_selector, "node_selector")
    result = allocate(ns, devs, check, frozenset(index[n] for n in taken), features, None, node_counters(cls))
    return result, [devs[d].name for d in result.devices]


def mem(q):
    return {"memory": q}


S1_8 = sets(counter_set_1=mem("8Gi"))
S1_18 = sets(counter_set_1=mem("18Gi"))
MIN_6 = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("6Gi")) >= 0'
MIN_4 = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("4Gi")) >= 0'
NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}

CASES = [
    # upstream: "partitionable-devices-single-device"
    pytest.param(
        [dev("device1", (SET1, mem("4Gi")))],
        S1_8,
        claim(req("req-0")),
        set(),
        ALL,
        [("req-0", None)],
        ["device1-0"],
        id="partitionable-devices-single-device",
    ),
    # upstream: "partitionable-devices-taint-releases-counter" -- device1 is rejected by its taint after its counter is
    # reserved; releasing that reservation lets device2 take the only counter.
    pytest.param(
        [dev("device1", (SET1, {"c": "1"}), taints=[NO_SCHEDULE]), dev("device2", (SET1, {"c": "1"}))],
        sets(counter_set_1={"c": "1"}),
        claim(req("req-0")),
        set(),
        ALL,
        [("req-0", None)],
        ["device2-0"],
        id="partitionable-devices-taint-releases-counter",
    ),
    # upstream: "partitionable-devices-constraint-releases-counter" -- red first, then two blues that share the value.
    pytest.param(
        [
            dev("device1", (SET1, {"c": "1"}), attributes={"stringAttribute": {"string": "red"}}),
            dev("device2", (SET1, {"c": "1"}), attributes={"stringAttribute": {"string": "blue"}}),
            dev("device3", (SET1, {"c": "1"}), attributes={"stringAttribute": {"string": "blue"}}),
        ],
        sets(counter_set_1={"c": "2"}),
        claim(req("req-0", 2), constraints=[{"match_attribute": f"{DRIVER}/stringAttribute"}]),
        set(),
        ALL,
        [("req-0", None)],
        ["device2-0", "device3-0"],
        id="partitionable-devices-constraint-releases-counter",
    ),
    # upstream: "partitionable-consumable-capacity-backtrack-releases-counter"
    pytest.param(
        [
            dev("device1", (SET1, {"c": "1"}), multi=True, attributes={"kind": {"string": "shared"}}),
            {
                "name": "device2",
                "driver": DRIVER,
                "device_class_name": CLASS,
                "attributes": {"kind": {"string": "shared"}},
            },
            dev("device3", (SET1, {"c": "1"}), attributes={"kind": {"string": "counteronly"}}),
        ],
        sets(counter_set_1={"c": "1"}),
        claim(
            req("req-0", 1, f'device.attributes["{DRIVER}"].kind == "shared"'),
            req("req-1", 1, f'device.attributes["{DRIVER}"].kind == "counteronly"'),
        ),
        set(),
        ALL,
        [("req-0", None), ("req-1", None)],
        ["device2-0", "device3-0"],
        id="partitionable-consumable-capacity-backtrack-releases-counter",
    ),
    # upstream: "partitionable-devices-prioritized-list" -- device1 (4Gi) for req-0; the 6Gi device would exceed the
    # 8Gi counter beside it, so req-1 takes its second alternative, device3.
    pytest.param(
        [
            dev("device1", (SET1, mem("4Gi")), capacity=True),
            dev("device2", (SET1, mem("6Gi")), capacity=True),
            dev("device3", (SET1, mem("4Gi")), capacity=True),
        ],
        S1_8,
        claim(req("req-0"), first_available("req-1", req("subreq-0", 1, MIN_6), req("subreq-1", 1, MIN_4))),
        set(),
        ALL,
        [("req-0", None), ("req-1", "subreq-1")],
        ["device1-0", "device3-0"],
        id="partitionable-devices-prioritized-list",
    ),
    # upstream: "partitionable-devices-multiple-devices"
    pytest.param(
        [dev("device1", (SET1, mem("4Gi"))), dev("device2", (SET1, mem("6Gi"))), dev("device3", (SET1, mem("4Gi")))],
        S1_8,
        claim(req("req-0"), req("req-1")),
        set(),
        ALL,
        [("req-0", None), ("req-1", None)],
        ["device1-0", "device3-0"],
        id="partitionable-devices-multiple-devices",
    ),
    # upstream: "partitionable-devices-multiple-counters" -- device1 + anything exceeds cpus 8 in set 1.
    pytest.param(
        [
            dev("device1", (SET1, {"memory": "4Gi", "cpus": "6"}), (SET2, {"cpus": "4", "memory": "2Gi"})),
            dev("device2", (SET1, {"memory": "6Gi", "cpus": "4"}), (SET2, {"cpus": "6", "memory": "6Gi"})),
            dev("device3", (SET1, {"memory": "4Gi", "cpus": "4"}), (SET2, {"cpus": "4", "memory": "4Gi"})),
        ],
        sets(counter_set_1={"cpus": "8", "memory": "18Gi"}, counter_set_2={"cpus": "12", "memory": "18Gi"}),
        claim(req("req-0"), req("req-1")),
        set(),
        ALL,
        [("req-0", None), ("req-1", None)],
        ["device2-0", "device3-0"],
        id="partitionable-devices-multiple-counters",
    ),
    # upstream: "partitionable-devices-unused-counters-in-counter-set"
    pytest.param(
        [dev("device1", (SET1, mem("5Gi"))), dev("device2", (SET1, mem("4Gi"))), dev("device3", (SET1, mem("4Gi")))],
        sets(counter_set_1={"memory": "8Gi", "unused": "1Gi"}),
        claim(req("req-0", 2)),
        set(),
        ALL,
        [("req-0", None)],
        ["device2-0", "device3-0"],
        id="partitionable-devices-unused-counters-in-counter-set",
    ),
    # upstream: "partitionable-devices-no-capacity-available" -- device2 (16Gi of 18Gi) is allocated: nothing left.
    pytest.param(
        [dev("device1", (SET1, mem("4Gi"))), dev("device2", (SET1, mem("16Gi")))],
        S1_18,
        claim(req("req-0")),
        {"device2-0"},
        ALL,
        None,
        None,
        id="partitionable-devices-no-capacity-available",
    ),
    # upstream: "partitionable-devices-overallocated-capacity-pool" -- 20Gi of 18Gi allocated: every counter-consuming
    # device is blocked.
    pytest.param(
        [dev("device1", (SET1, mem("4Gi"))), dev("device2", (SET1, mem("20Gi")))],
        S1_18,
        claim(req("req-0")),
        {"device2-0"},
        ALL,
        None,
        None,
        id="partitionable-devices-overallocated-capacity-pool",
    ),
    # upstream: "partitionable-devices-disabled-device-consumes-counters"
    pytest.param(
        [dev("device1", (SET1, mem("4Gi")))],
        S1_18,
        claim(req("req-0")),
        set(),
        for_version("1.35"),
        None,
        None,
        id="partitionable-devices-disabled-device-consumes-counters",
    ),
    # upstream: "partitionable-devices-disabled-other-device-do-not-consume-counters"
    pytest.param(
        [dev("device1", (SET1, mem("4Gi"))), {"name": "device2", "driver": DRIVER, "device_class_name": CLASS}],
        S1_18,
        claim(req("req-0")),
        set(),
        for_version("1.35"),
        [("req-0", None)],
        ["device2-0"],
        id="partitionable-devices-disabled-other-device-do-not-consume-counters",
    ),
    # upstream: "partitionable-devices-with-attribute-selector"
    pytest.param(
        [
            dev("device1", (SET1, {"cpu1": "1"}), (SET2, {"mem": "10Gi"}), attributes={"special": {"bool": True}}),
            dev("device2", (SET1, {"cpu2": "1"}), (SET2, {"mem": "10Gi"}), attributes={"special": {"bool": False}}),
            dev("device3", (SET1, {"cpu3": "1"}), (SET2, {"mem": "10Gi"}), attributes={"special": {"bool": False}}),
        ],
        sets(counter_set_1={"cpu1": "1", "cpu2": "1", "cpu3": "1"}, counter_set_2={"mem": "30Gi"}),
        claim(req("req-0", 2), req("req-1", 1, f'device.attributes["{DRIVER}"].special')),
        set(),
        ALL,
        [("req-0", None), ("req-1", None)],
        ["device2-0", "device3-0", "device1-0"],
        id="partitionable-devices-with-attribute-selector",
    ),
    # upstream: "allow-multiple-allocations-with-partitionable-device"
    pytest.param(
        [
            dev("device1", (SET1, mem("4Gi")), capacity=True, multi=True),
            dev("device2", (SET1, mem("6Gi")), capacity=True, multi=True),
            dev("device3", (SET1, mem("4Gi")), capacity=True, multi=True),
        ],
        S1_8,
        claim(req("req-0"), first_available("req-1", req("subreq-0", 1, MIN_6), req("subreq-1", 1, MIN_4))),
        set(),
        ALL,
        [("req-0", None), ("req-1", "subreq-1")],
        ["device1-0", "device3-0"],
        id="allow-multiple-allocations-with-partitionable-device",
    ),
]


@pytest.mark.parametrize(("devices", "counter_sets", "node_selector", "taken", "features", "chosen", "names"), CASES)
def test_partitionable_as_upstream(devices, counter_sets, node_selector, taken, features, chosen, names) -> None:
    result, got = run(devices, counter_sets, node_selector, taken, features)
    if chosen is None:
        assert not result.ok, f"allocated {got}, upstream allocates nothing"
        return
    assert result.ok, result.why
    assert [(c.request, c.sub) for c in result.chosen] == chosen
    assert got == names


def test_ours_mig_profiles_share_their_gpu_counters():
    # The worked example (docs/placement.md): a GPU and its MIG profiles on one counter set per GPU; two 3g.40gb slices
    # take one GPU's memory, so a third lands on the next GPU, and the whole GPU cannot be had beside them.
    klass = {
        "shared_counters": [
            {
                "name": "gpu-{i}-counters",
                "count": 2,
                "counters": {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "132"}},
            }
        ],
        "devices": [
            {
                "name": "gpu",
                "driver": DRIVER,
                "device_class_name": CLASS,
                "count": 2,
                "consumes_counters": [
                    {
                        "counter_set": "gpu-{i}-counters",
                        "counters": {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "132"}},
                    }
                ],
            },
            {
                "name": "mig-3g40gb",
                "driver": DRIVER,
                "device_class_name": CLASS,
                "count": 4,
                "attributes": {"profile": {"string": "3g.40gb"}},
                "consumes_counters": [
                    {
                        "counter_set": "gpu-{i//2}-counters",
                        "counters": {"memory": {"value": "40Gi"}, "multiprocessors": {"value": "60"}},
                    }
                ],
            },
        ],
    }
    cls = models.parse(models.InferenceClass, klass, "classes.mig")
    devs = node_devices(cls)
    assert [d.consumes[0][0] for d in devs] == [
        "gpu-0-counters",
        "gpu-1-counters",
        *["gpu-0-counters"] * 2,
        *["gpu-1-counters"] * 2,
    ]
    attrs = f'device.attributes["{DRIVER}"]'
    mig = models.parse(models.NodeSelector, claim(req("mig", 1, f'{attrs}.?profile.orValue("") == "3g.40gb"')), "n")
    whole = models.parse(models.NodeSelector, claim(req("gpu", 1, f'!("profile" in {attrs})')), "n")
    taken: frozenset[int] = frozenset()
    picked = []
    for _n in range(3):
        r = allocate(mig, devs, check, taken, ALL, None, node_counters(cls))
        picked.append(devs[r.devices[0]].name)
        taken |= set(r.devices)
    assert picked == ["mig-3g40gb-0", "mig-3g40gb-1", "mig-3g40gb-2"]
    r = allocate(whole, devs, check, taken, ALL, None, node_counters(cls))
    assert not r.ok  # both GPUs have a slice in use
    assert allocate(whole, devs, check, frozenset({2, 3}), ALL, None, node_counters(cls)).devices == (1,)


def test_counter_references_are_validated():
    # upstream: "partitionable-devices-device-counter-consumption-references-unknown-counter-set" and
    # "...-references-unknown-counter-in-counter-set" -- errors; ours: validation errors naming the device.
    with pytest.raises(
        FleetValidationError, match="consumes counter set 'nope', which shared_counters does not define"
    ):
        models.parse(models.InferenceClass, {"devices": [dev("d", ("nope", mem("1")))], "shared_counters": S1_8}, "c")
    with pytest.raises(FleetValidationError, match=r"consumes counter\(s\) cpus that counter set 'counter-set-1'"):
        models.parse(
            models.InferenceClass, {"devices": [dev("d", (SET1, {"cpus": "1"}))], "shared_counters": S1_8}, "c"
        )
    many = [{"name": f"s{k}", "counters": {"c": {"value": "1"}}} for k in range(9)]
    consumers = [dev(f"d{k}", (f"s{k}", {"c": "1"})) for k in range(9)]
    with pytest.raises(
        FleetValidationError, match="9 counter sets for driver driver-a; a ResourceSlice holds at most 8"
    ):
        models.parse(models.InferenceClass, {"devices": consumers, "shared_counters": many}, "c")
    three = dev("d", (SET1, mem("1")), (SET2, mem("1")), ("x", mem("1")))
    with pytest.raises(FleetValidationError, match="at most 2"):
        models.parse(models.InferenceClass, {"devices": [three], "shared_counters": S1_8}, "c")
    with pytest.raises(FleetValidationError, match="must be a DNS label once"):
        models.parse(models.InferenceClass, {"devices": [dev("d")], "shared_counters": sets(Bad_Name=mem("1"))}, "c")
