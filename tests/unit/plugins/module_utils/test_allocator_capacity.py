"""Consumable capacity and distinct attributes in the allocator (KEP-5075; design.md §12, issue 24 item 3).

Upstream cases from kubernetes/kubernetes
``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go``
(k8s.io/dynamic-resource-allocation v0.36.3, the allocator of the local fleet's kube-scheduler 1.36.3): the
``consumable-capacity-*``, ``allow-multiple-allocations-*`` and distinct-constraint cases our model expresses. Each
test id is the upstream case name.

How they are transcribed: upstream's capacity names ``capacity-0`` / ``capacity-1`` are ``capacity0`` / ``capacity1``
(ours are C identifiers, as the API server requires of a published capacity); ``withCapacityRequestPolicyRange`` is
``default 2, validRange {min 2, step 2, max 4}`` (``{min 2}`` on a device of capacity 2, where the API server refuses a
range beyond the capacity: requests round up the same way), ``withCapacityRequestPolicyValidValues(d, ...)``
``default d, validValues [d, ...]``. Several claims of one upstream case (one pod's claims, allocated together) are allocated one
after the other here, each seeing what the earlier ones hold (as placement's ledger sees earlier pods); upstream's
"nothing allocated" for such a case is "the last claim does not fit". ``allocatedCapacityDevices`` is capacity other
claims consume (the ledger's shared state), ``allocatedDevices`` devices they hold. A DeviceClass that selects
``device.allowMultipleAllocations == b`` is the request selector ``device.allowMultipleAllocations == b``.

Not transcribed: cases whose device has a ``requestPolicy`` without ``allowMultipleAllocations``
(``consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request``,
``allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable``: the API server
refuses such a device, and so does our model), an attribute without a value
(``with-distinct-constraints-unknown-type-attribute``), list-typed attributes (``list-attributes-distinct-*``),
and ``distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint`` (two slices of one pool: the same as
one slice here, covered by the ``-one-`` case's contrast below).
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
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.state import EMPTY, NodeUse
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

DRIVER = "driver-a"
CLASS = "class-a"
RANGE = {"default": "2", "valid_range": {"min": "2", "step": "2", "max": "4"}}
MULTI = "device.allowMultipleAllocations == true"
SINGLE = "device.allowMultipleAllocations == false"


def dev(
    name: str, capacity: dict[str, Any] | None = None, attributes: dict[str, Any] | None = None, multi: bool = True
) -> dict[str, Any]:
    """upstream ``device(name, capacity, attributes)[.withAllowMultipleAllocations()]``: one entry of one device, named
    ``<name>-0``. A capacity value is a quantity, or ``(quantity, policy)``."""
    cap = {}
    for k, v in (capacity or {}).items():
        cap[k] = {"value": v[0], "request_policy": v[1]} if isinstance(v, tuple) else {"value": v}
    out: dict[str, Any] = {"name": name, "driver": DRIVER, "device_class_name": CLASS, "count": 1, "capacity": cap}
    if attributes:
        out["attributes"] = attributes
    if multi:
        out["allow_multiple_allocations"] = True
    return out


def ranged(value: str) -> tuple[str, dict[str, Any]]:
    """upstream ``withCapacityRequestPolicyRange``: (2, 2, 4); on a device of capacity 2, which the API server refuses
    that policy on (max and one step over the capacity), the range that rounds the same way, {min 2}."""
    return value, RANGE if value != "2" else {"default": "2", "valid_range": {"min": "2"}}


def valid(default: str, value: str, *more: str) -> tuple[str, dict[str, Any]]:
    return value, {"default": default, "valid_values": [default, *more]}


def req(
    name: str,
    capacity: str | None = None,
    *cels: str,
    count: int = 1,
    mode: str | None = None,
    named: str = "capacity0",
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "device_class_name": CLASS}
    if mode == "All":
        out["allocation_mode"] = "All"
    else:
        out["count"] = count
    if capacity is not None:
        out["capacity"] = {"requests": {named: capacity}}
    if cels:
        out["selectors"] = [{"cel": c} for c in cels]
    return out


def run(
    devices: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    *,
    taken: set[str] = frozenset(),
    shared: dict[str, dict[str, str]] | None = None,
    features: Any = ALL,
) -> list[Any]:
    """Allocate ``claims`` one after the other on one node; per claim None, or ``[(request, alternative)], devices
    (names, in the order picked), {device: {capacity: consumed}}``."""
    cls = models.parse(models.InferenceClass, {"devices": devices}, "classes.upstream")
    devs = node_devices(cls)
    index = {d.name: i for i, d in enumerate(devs)}
    use = NodeUse(frozenset(index[n] for n in taken)).plus(
        (), {index[n]: {k: parse_quantity(v) for k, v in caps.items()} for n, caps in (shared or {}).items()}
    )
    out: list[Any] = []
    for c in claims:
        ns = models.parse(models.NodeSelector, c, "node_selector")
        r = allocate(ns, devs, check, use.taken, features, use.consumed, node_counters(cls))
        if not r.ok:
            out.append(None)
            continue
        out.append(
            (
                [(x.request, x.sub) for x in r.chosen],
                [devs[d].name for d in r.devices],
                {devs[d].name: {k: str(v) for k, v in caps.items()} for d, caps in r.consumed.items()},
            )
        )
        use = use.plus([d for d in r.devices if d not in r.consumed], r.consumed)
    return out


def test_consumable_capacity_disabled_feature():
    # upstream: "consumable-capacity-disabled-feature" -- error "has capacity requests, but the DRAConsumableCapacity
    # feature is disabled"; ours: the member does not fit a cluster without the feature, and explain says why.
    cls = models.parse(models.InferenceClass, {"devices": [dev("device1", multi=False)]}, "c")
    ns = models.parse(models.NodeSelector, claim(req("req-0", "1")), "ns")
    result = allocate(ns, node_devices(cls), check, features=for_version("1.35"))
    assert not result.ok
    assert result.why == (
        "request req-0: capacity requests needs the DRAConsumableCapacity feature, on by default from Kubernetes 1.36"
    )
    # upstream: "consumable-capacity-disabled-feature-with-prioritized-list"
    ns = models.parse(
        models.NodeSelector, claim(first_available("req-0", req("subreq-0", "1"), req("subreq-1", "1"))), "ns"
    )
    result = allocate(ns, node_devices(cls), check, features=for_version("1.35"))
    assert not result.ok and "req-0/subreq-0: capacity requests needs the DRAConsumableCapacity" in result.why


ONE_ONE = {"capacity0": "1"}
CASES = [
    # upstream: "consumable-capacity-multi-allocatable-device-with-missing-capacity-request" -- the request names
    # capacity0, the device has only capacity1: nothing.
    pytest.param(
        [dev("device1", {"capacity1": "1"})],
        [claim(req("req-0", "1"))],
        {},
        [None],
        id="consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request"
    pytest.param(
        [dev("device1", {"capacity1": "1"})],
        [claim(req("req-0", "1", MULTI, mode="All"))],
        {},
        [None],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request" -- both share
    # the device; no capacity is consumed since none is defined.
    pytest.param(
        [dev("device1")],
        [claim(req("req-0", None, MULTI)), claim(req("req-0", None, MULTI))],
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {}}), ([("req-0", None)], ["device1-0"], {"device1-0": {}})],
        id="consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request" -- each claim
    # consumes a device's whole capacity: device1, then device2.
    pytest.param(
        [dev("device1", ONE_ONE), dev("device2", ONE_ONE)],
        [claim(req("req-0", None, MULTI)), claim(req("req-0", None, MULTI))],
        {},
        [
            ([("req-0", None)], ["device1-0"], {"device1-0": ONE_ONE}),
            ([("req-0", None)], ["device2-0"], {"device2-0": ONE_ONE}),
        ],
        id="consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block"
    pytest.param(
        [dev("device1", {"capacity0": "2"})],
        [claim(req("req-0", None, MULTI))] * 2,
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "2"}}), None],
        id="consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request"
    pytest.param(
        [dev("device1", {"capacity0": "2"})],
        [claim(req("req-0", "1", MULTI))] * 2,
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": ONE_ONE})] * 2,
        id="consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request" -- the default (2)
    pytest.param(
        [dev("device1", {"capacity0": ranged("4")})],
        [claim(req("req-0", None, MULTI))] * 2,
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "2"}})] * 2,
        id="consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-zero-request-policy"
    pytest.param(
        [dev("device1", {"capacity0": valid("0", "1")})],
        [claim(req("req-0", None, MULTI))] * 2,
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "0"}})] * 2,
        id="consumable-capacity-multi-allocatable-device-with-zero-request-policy",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-violates-zero-request-policy" -- 1 rounds to no valid value
    pytest.param(
        [dev("device1", {"capacity0": valid("0", "1")})],
        [claim(req("req-0", "1", MULTI))],
        {},
        [None],
        id="consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request" -- 1 rounds up to 2
    pytest.param(
        [dev("device1", {"capacity0": ranged("4")})],
        [claim(req("req-0", "1", MULTI))] * 2,
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "2"}})] * 2,
        id="consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-range-policy-step" -- 3 rounds up to 2 + 2 = 4
    pytest.param(
        [dev("device1", {"capacity0": ranged("4")})],
        [claim(req("req-0", "3", MULTI))],
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "4"}})],
        id="consumable-capacity-multi-allocatable-device-with-range-policy-step",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-valid-values-policy"
    pytest.param(
        [dev("device1", {"capacity0": valid("1", "4", "2")})],
        [claim(req("req-0", "2", MULTI))],
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "2"}})],
        id="consumable-capacity-multi-allocatable-device-with-valid-values-policy",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up" -- 2 rounds up to 3
    pytest.param(
        [dev("device1", {"capacity0": valid("1", "3", "3")})],
        [claim(req("req-0", "2", MULTI))],
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "3"}})],
        id="consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request" -- 1 rounds to
    # 2 of 2, nothing is left for the second claim.
    pytest.param(
        [dev("device1", {"capacity0": ranged("2")})],
        [claim(req("req-0", "1", MULTI)), claim(req("req-0", "2", MULTI))],
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "2"}}), None],
        id="consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy" -- 6 > max 4
    pytest.param(
        [dev("device1", {"capacity0": ranged("10")})],
        [claim(req("req-0", "6", MULTI))],
        {},
        [None],
        id="consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining"
    pytest.param(
        [dev("device1", {"capacity0": ranged("4")})],
        [claim(req("req-0", "2", MULTI))],
        {"shared": {"device1-0": {"capacity0": "2"}}},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "2"}})],
        id="consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device"
    pytest.param(
        [dev("device1", {"capacity0": ranged("2")}), dev("device2", {"capacity0": ranged("2")})],
        [claim(req("req-0", "2", MULTI))],
        {"shared": {"device1-0": {"capacity0": "2"}}},
        [([("req-0", None)], ["device2-0"], {"device2-0": {"capacity0": "2"}})],
        id="consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
    ),
    # upstream: "consumable-capacity-with-multi-allocatable-device-backtrack" -- claim-0's requests must share the
    # string attribute: both end on device1 (4 of capacity), claim-1 then takes device2.
    pytest.param(
        [
            dev("device2", {"capacity0": ranged("2")}, {"stringAttribute": {"string": "stringAttributeValue1"}}),
            dev("device1", {"capacity0": ranged("4")}, {"stringAttribute": {"string": "stringAttributeValue2"}}),
        ],
        [
            claim(req("req-0", "2"), req("req-1", "2"), constraints=[{"match_attribute": f"{DRIVER}/stringAttribute"}]),
            claim(req("req-0", "2")),
        ],
        {},
        [
            ([("req-0", None), ("req-1", None)], ["device1-0"], {"device1-0": {"capacity0": "4"}}),
            ([("req-0", None)], ["device2-0"], {"device2-0": {"capacity0": "2"}}),
        ],
        id="consumable-capacity-with-multi-allocatable-device-backtrack",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-subrequest" -- 4 is over the device's 2: the next
    # alternative (2) is chosen. (Upstream's third alternative repeats a name, which our model refuses; it is never
    # reached.)
    pytest.param(
        [dev("device1", {"capacity0": ranged("2")})],
        [claim(first_available("req-0", req("subreq-0", "4", MULTI), req("subreq-1", "2", MULTI)))],
        {},
        [([("req-0", "subreq-1")], ["device1-0"], {"device1-0": {"capacity0": "2"}})],
        id="consumable-capacity-multi-allocatable-device-with-subrequest",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity"
    pytest.param(
        [dev("device1", {"capacity0": ranged("2")})],
        [claim(req("req-0", "2", MULTI))],
        {"shared": {"device1-0": {"capacity0": "2"}}},
        [None],
        id="consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity"
    pytest.param(
        [dev("device1", {"capacity0": "2"}), dev("device2")],
        [claim(req("req-0", "2", MULTI, mode="All"))],
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "2"}})],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity"
    pytest.param(
        [dev("device1", {"capacity0": "2"}), dev("device2", ONE_ONE)],
        [claim(req("req-0", "2", MULTI, mode="All"))],
        {},
        [([("req-0", None)], ["device1-0"], {"device1-0": {"capacity0": "2"}})],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient" -- req-0 and
    # req-1 (All) both on device1, req-1 also on device2.
    pytest.param(
        [dev("device1", {"capacity0": "2"}), dev("device2", ONE_ONE)],
        [claim(req("req-0", "1"), req("req-1", "1", mode="All"))],
        {},
        [
            (
                [("req-0", None), ("req-1", None)],
                ["device1-0", "device2-0"],
                {"device1-0": {"capacity0": "2"}, "device2-0": ONE_ONE},
            )
        ],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient"
    pytest.param(
        [dev("device1", {"capacity0": "2"}), dev("device2", ONE_ONE)],
        [claim(req("req-0", "1", mode="All"))],
        {"shared": {"device1-0": ONE_ONE}},
        [([("req-0", None)], ["device1-0", "device2-0"], {"device1-0": ONE_ONE, "device2-0": ONE_ONE})],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient"
    pytest.param(
        [dev("device1", ONE_ONE), dev("device2", ONE_ONE)],
        [claim(req("req-0", "1"), req("req-1", "1", mode="All"))],
        {},
        [None],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
    ),
    # upstream: "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient"
    pytest.param(
        [dev("device1", ONE_ONE), dev("device2", ONE_ONE)],
        [claim(req("req-0", "1", mode="All"))],
        {"shared": {"device1-0": ONE_ONE}},
        [([("req-0", None)], ["device2-0"], {"device2-0": ONE_ONE})],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
    ),
    # upstream: "consumable-capacity-dedicated-device-with-consumable-capacity-request" -- a dedicated device with
    # enough capacity is allocated whole (nothing is recorded as consumed).
    pytest.param(
        [dev("device1", ONE_ONE, multi=False)],
        [claim(req("req-0", "1", SINGLE))],
        {},
        [([("req-0", None)], ["device1-0"], {})],
        id="consumable-capacity-dedicated-device-with-consumable-capacity-request",
    ),
    # upstream: "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector"
    pytest.param(
        [dev("device1", ONE_ONE)],
        [claim(req("req-0", "1", SINGLE))],
        {},
        [None],
        id="allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",
    ),
    # upstream: "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated"
    pytest.param(
        [dev("device1", {"capacity0": ranged("2")})],
        [claim(req("req-0", "1", MULTI))],
        {"taken": {"device1-0"}},
        [None],
        id="allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
    ),
]


@pytest.mark.parametrize(("devices", "claims", "state", "expected"), CASES)
def test_consumable_capacity_as_upstream(devices: Any, claims: Any, state: dict[str, Any], expected: Any) -> None:
    assert run(devices, claims, **state) == expected


BOOL, VERSION, INT, STRING = (f"{DRIVER}/{a}" for a in ("boolAttribute", "driverVersion", "numa", "stringAttribute"))


def distinct(attribute: str, *requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"distinct_attribute": attribute}
    if requests:
        out["requests"] = list(requests)
    return out


def test_with_distinct_constraints():
    # upstream: "with-distinct-constraints" -- four requests, three distinct constraints over nested request sets.
    def attrs(version: str, numa: int, flag: bool) -> dict[str, Any]:
        return {"driverVersion": {"version": version}, "numa": {"int": numa}, "boolAttribute": {"bool": flag}}

    devices = [
        dev("device1", None, attrs("1.0.0", 0, True)),
        dev("device2", None, attrs("1.0.1", 1, False)),
        dev("device3", None, attrs("1.0.2", 2, True)),
        dev("device4", None, attrs("1.0.0", 3, True)),
    ]
    ns = claim(
        req("req-0"),
        req("req-1"),
        req("req-2"),
        req("req-3"),
        constraints=[
            distinct(BOOL, "req-0", "req-1"),
            distinct(VERSION, "req-0", "req-1", "req-2"),
            distinct(INT, "req-0", "req-1", "req-2", "req-3"),
        ],
    )
    ((chosen, names, _consumed),) = run(devices, [ns])
    assert chosen == [(f"req-{k}", None) for k in range(4)]
    assert names == ["device1-0", "device2-0", "device3-0", "device4-0"]


def test_with_distinct_constraints_attribute_not_set():
    # upstream: "with-distinct-constraints-attribute-not-set"
    assert run([dev("device1")], [claim(req("req-0"), constraints=[distinct(BOOL, "req-0")])]) == [None]


def test_with_distinct_constraints_with_subrequests():
    # upstream: "with-distinct-constraints-with-subrequests" -- the constraint covers req-0 and req-1 only: req-1 takes
    # its second alternative (device2), req-2 its first (device1 again: it allows multiple allocations).
    flag = f'device.attributes["{DRIVER}"].boolAttribute'
    devices = [
        dev("device1", None, {"boolAttribute": {"bool": True}}),
        dev("device2", None, {"boolAttribute": {"bool": False}}),
    ]
    ns = claim(
        *[first_available(f"req-{k}", req("subreq-0", None, flag), req("subreq-1")) for k in range(3)],
        constraints=[distinct(BOOL, "req-0", "req-1")],
    )
    ((chosen, names, consumed),) = run(devices, [ns])
    assert chosen == [("req-0", "subreq-0"), ("req-1", "subreq-1"), ("req-2", "subreq-0")]
    assert consumed == {"device1-0": {}, "device2-0": {}}  # shared, no capacity: nothing consumed
    assert names == ["device1-0", "device2-0"]


def test_distinct_constraint_one_multi_allocatable_device():
    # upstream: "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint" -- two requests, one shared
    # device: the distinct constraint keeps them off the same device, so nothing fits. With two devices (upstream's
    # "...-two-multi-allocatable-devices-..."), each request takes one.
    one = [dev("device1", {"capacity0": ranged("2")}, {"stringAttribute": {"string": "v"}})]
    ns = claim(req("req-0", "1", MULTI), req("req-1", "1", MULTI), constraints=[distinct(STRING)])
    assert run(one, [ns]) == [None]
    two = [
        dev("device1", {"capacity0": ranged("4")}, {"stringAttribute": {"string": "v1"}}),
        dev("device2", {"capacity0": ranged("4")}, {"stringAttribute": {"string": "v2"}}),
    ]
    ns = claim(req("req-0", "2", MULTI), req("req-1", "2", MULTI), constraints=[distinct(STRING)])
    assert run(two, [ns]) == [
        (
            [("req-0", None), ("req-1", None)],
            ["device1-0", "device2-0"],
            {"device1-0": {"capacity0": "2"}, "device2-0": {"capacity0": "2"}},
        )
    ]


def test_ours_two_models_share_a_gpu_by_memory():
    # The worked example (docs/placement.md): an 80Gi GPU shared by memory; 20Gi and 40Gi requests round up to the
    # policy's 10Gi steps; a third 40Gi request does not fit what is left (80 - 20 - 40 = 20).
    gpu = dev("gpu", {"memory": ("80Gi", {"default": "10Gi", "valid_range": {"min": "10Gi", "step": "10Gi"}})})
    claims = [
        claim(req("a", "15Gi", named="memory")),
        claim(req("b", "40Gi", named="memory")),
        claim(req("c", "40Gi", named="memory")),
    ]
    assert run([gpu], claims) == [
        ([("a", None)], ["gpu-0"], {"gpu-0": {"memory": "20Gi"}}),
        ([("b", None)], ["gpu-0"], {"gpu-0": {"memory": "40Gi"}}),
        None,
    ]


@pytest.mark.parametrize(
    ("capacity", "reason"),
    [
        ({"value": "4", "request_policy": {"default": "2", "valid_values": ["2", "1"]}}, "ascending order"),
        ({"value": "4", "request_policy": {"default": "3", "valid_values": ["1", "2"]}}, "not one of valid_values"),
        ({"value": "4", "request_policy": {"valid_values": ["1"]}}, "default is required"),
        ({"value": "4", "request_policy": {"default": "1", "valid_values": [str(k) for k in range(11)]}}, "at most 10"),
        ({"value": "4", "request_policy": {"default": "1", "valid_values": ["1", "8"]}}, "larger than the capacity"),
        (
            {"value": "4", "request_policy": {"default": "2", "valid_range": {"min": "2", "step": "3"}}},
            "one valid_range.step from min is larger",
        ),
        (
            {"value": "8", "request_policy": {"default": "3", "valid_range": {"min": "2", "step": "2"}}},
            "is not min 2 plus a multiple of step 2",
        ),
        ({"value": "8", "request_policy": {"default": "1", "valid_range": {"min": "2"}}}, "less than valid_range.min"),
        (
            {"value": "8", "request_policy": {"default": "2", "valid_values": ["2"], "valid_range": {"min": "2"}}},
            "not both",
        ),
    ],
)
def test_request_policies_are_validated_as_the_api_server_does(capacity: dict[str, Any], reason: str) -> None:
    entry = {**dev("device1"), "capacity": {"memory": capacity}}
    with pytest.raises(FleetValidationError) as err:
        models.parse(models.InferenceClass, {"devices": [entry]}, "classes.x")
    assert any(path.startswith("classes.x.devices[0].capacity") and reason in why for path, why in err.value.errors), (
        err.value.errors
    )


def test_a_request_policy_needs_multiple_allocations_and_constraints_one_kind():
    entry = {**dev("device1", multi=False), "capacity": {"memory": {"value": "4", "request_policy": {"default": "1"}}}}
    with pytest.raises(FleetValidationError, match="request_policy needs allow_multiple_allocations"):
        models.parse(models.InferenceClass, {"devices": [entry]}, "c")
    with pytest.raises(FleetValidationError, match="exactly one of match_attribute, distinct_attribute"):
        models.parse(
            models.NodeSelector, claim(req("a"), constraints=[{**distinct(STRING), "match_attribute": INT}]), "n"
        )
    with pytest.raises(FleetValidationError, match="capacity cannot be set beside first_available"):
        models.parse(models.NodeSelector, claim({**first_available("a", req("b")), "capacity": {"requests": {}}}), "n")
    with pytest.raises(FleetValidationError, match="not a Kubernetes quantity"):
        models.parse(models.NodeSelector, claim(req("a", "lots")), "n")


def test_distinct_attribute_needs_the_feature():
    cls = models.parse(models.InferenceClass, {"devices": [dev("device1", None, {"numa": {"int": 0}})]}, "c")
    ns = models.parse(models.NodeSelector, claim(req("a"), constraints=[distinct(INT)]), "ns")
    result = allocate(ns, node_devices(cls), check, features=for_version("1.35"))
    assert not result.ok and "distinct_attribute needs the DRAConsumableCapacity feature" in result.why
    assert NodeUse() == EMPTY
