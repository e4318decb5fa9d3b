"""DRA depth (design.md §2a, §3a): per-device instances, allocation_mode All, first_available alternatives and
match_attribute constraints — validated, placed, explained, recorded and rendered the way Kubernetes allocates them.

Upstream's own allocator table is transcribed in test_allocator_upstream.py; the differential test against a real
kube-scheduler is tests/e2e/test_dra_differential.py.
"""

from __future__ import annotations

import copy
from typing import Any

import k8s_schemas
import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.dra.allocator import (
    allocate,
    lookup_attribute,
    node_devices,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.constraints import MatchAttribute
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    InferenceClass,
    ModelDeployment,
    NodeSelector,
    parse,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import SELECTORS, place
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import ReplicaRecord
from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import (
    claim_devices,
    render_serving_manifests,
)

IS_H100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
IS_A100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"'
RDMA = 'device.driver == "rdma.example.com"'
PCIE = "gpu.nvidia.com/pcieRoot"


def hgx(gpus: int = 8, nics: int = 2, roots: int = 2) -> dict[str, Any]:
    """An HGX-like node: ``gpus`` H100s spread over ``roots`` PCIe roots, one NIC per root (its own driver)."""
    per_root = gpus // roots
    return {
        "devices": [
            {
                "name": "gpu",
                "driver": "gpu.nvidia.com",
                "device_class_name": "gpu.nvidia.com",
                "count": gpus,
                "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}, "nvlinkDomain": {"int": 0}},
                "capacity": {"memory": {"value": "81559Mi"}},
                "instances": [
                    {"attributes": {"pcieRoot": {"string": f"pci000{i // per_root}:00"}, "index": {"int": i}}}
                    for i in range(gpus)
                ],
            },
            {
                "name": "nic",
                "driver": "rdma.example.com",
                "device_class_name": "rdma.example.com",
                "count": nics,
                "instances": [
                    {"attributes": {"gpu.nvidia.com/pcieRoot": {"string": f"pci000{i}:00"}}} for i in range(nics)
                ],
            },
        ]
    }


A100X2 = {
    "devices": [
        {
            "name": "gpu",
            "driver": "gpu.nvidia.com",
            "device_class_name": "gpu.nvidia.com",
            "count": 2,
            "attributes": {"productName": {"string": "NVIDIA A100-SXM4-80GB"}},
        }
    ]
}
CLASSES = {"hgx": hgx(), "a100x2": A100X2, "a100x1": {"devices": [{**A100X2["devices"][0], "count": 1}]}}

TP8_ONE_ROOT_PLUS_NIC = {
    "devices": [
        {"name": "gpu", "count": 4, "selectors": [{"cel": IS_H100}]},
        {"name": "nic", "selectors": [{"cel": RDMA}]},
    ],
    "constraints": [{"requests": ["gpu", "nic"], "match_attribute": PCIE}],
}
H100_ELSE_2_A100 = {
    "devices": [
        {
            "name": "accel",
            "first_available": [
                {"name": "h100", "device_class_name": "gpu.nvidia.com", "selectors": [{"cel": IS_H100}]},
                {"name": "a100", "device_class_name": "gpu.nvidia.com", "count": 2, "selectors": [{"cel": IS_A100}]},
            ],
        }
    ]
}


def deployment(node_selector: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
    return {
        "name": "llm",
        "namespace": "ml",
        "replicas": replicas,
        "engines": [
            {
                "name": "main",
                "members": [
                    {
                        "role": "Standalone",
                        "node_selector": node_selector,
                        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm"}]}},
                    }
                ],
            }
        ],
    }


def cluster(*pools: tuple[str, str, int], version: str | None = None, name: str = "c") -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "pools": [{"name": p, "class": k, "nodes": n} for p, k, n in pools]}
    if version:
        out["kubernetes_version"] = version
    return out


def run(node_selector: dict[str, Any], *pools: tuple[str, str, int], version: str | None = None) -> dict[str, Any]:
    return place(deployment=deployment(node_selector), clusters=[cluster(*pools, version=version)], classes=CLASSES)


def member_of(result: dict[str, Any]) -> dict[str, Any]:
    return result["replicas"][0]["engines"][0]["members"][0]


def alloc(node_selector: dict[str, Any], klass: dict[str, Any]):
    ns = parse(NodeSelector, node_selector, "node_selector")
    devices = node_devices(parse(InferenceClass, klass, "class"))
    return allocate(ns, devices, lambda expr, dev: SELECTORS.check(expr, dev.shape, dev.slice))


# --------------------------------------------------------------------------------------------------------------------
# Per-device instances (design.md §2a)
# --------------------------------------------------------------------------------------------------------------------


def test_instances_overlay_the_shared_values_and_name_devices_by_index():
    klass = parse(InferenceClass, hgx(gpus=4, nics=2, roots=2), "class")
    gpus = klass.devices[0].slice_devices()
    assert [d["name"] for d in gpus] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert gpus[3]["attributes"] == {
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "nvlinkDomain": {"int": 0},
        "pcieRoot": {"string": "pci0001:00"},
        "index": {"int": 3},
    }
    assert gpus[0]["capacity"] == {"memory": {"value": "81559Mi"}}
    nic = node_devices(klass)[-1]
    assert lookup_attribute(nic, PCIE) == ("string", "pci0001:00")  # another domain's attribute, fully qualified
    assert lookup_attribute(node_devices(klass)[0], PCIE) == ("string", "pci0000:00")  # the driver's own domain
    assert lookup_attribute(node_devices(klass)[0], "other.example.com/pcieRoot") is None


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c["devices"][0]["instances"].pop(), "instances lists 7 device(s) but count is 8"),
        (
            lambda c: c["devices"][0]["instances"][0]["attributes"].update({"pcieRoot": {"string": "x" * 65}}),
            "Kubernetes allows at most 64",
        ),
        (
            lambda c: c["devices"][0]["instances"][1]["attributes"].update({"bad name!": {"int": 1}}),
            "is not a DRA attribute/capacity name",
        ),
        (lambda c: c["devices"][0]["instances"][2].update({"colour": "red"}), "colour"),
        (
            lambda c: c["devices"][0]["instances"][0]["attributes"].update({"index": {"int": 2**63}}),
            "outside the int64 range",
        ),
        (
            lambda c: (
                c["devices"][0].update(count=100, instances=None)
                or c["devices"][1].update(count=28, instances=None)
                or c["devices"].append({**c["devices"][0], "name": "spare", "count": 28})
            ),
            None,
        ),
    ],
    ids=["too-few", "string-too-long", "bad-name", "unknown-key", "int64", "ok-128-per-driver"],
)
def test_instance_validation_names_the_field(mutate, message):
    klass = copy.deepcopy(hgx())
    mutate(klass)
    if message is None:
        parse(InferenceClass, klass, "classes.hgx")
        return
    with pytest.raises(FleetValidationError) as err:
        parse(InferenceClass, klass, "classes.hgx")
    assert message in str(err.value)
    assert "classes.hgx.devices" in str(err.value)


def test_a_node_publishes_at_most_128_devices_per_driver():
    klass = copy.deepcopy(hgx())
    klass["devices"][0].update(count=128, instances=None)
    klass["devices"].append({**klass["devices"][0], "name": "more", "count": 1})
    with pytest.raises(FleetValidationError, match="a ResourceSlice holds at most 128"):
        parse(InferenceClass, klass, "classes.hgx")


def test_per_device_attributes_decide_which_devices_a_selector_takes():
    # Only GPUs 4..7 sit on the second root: a request for 4 of them fits, for 5 it does not.
    second_root = 'device.attributes["gpu.nvidia.com"].pcieRoot == "pci0001:00"'
    assert alloc({"devices": [{"name": "gpu", "count": 4, "selectors": [{"cel": second_root}]}]}, hgx()).ok
    no = alloc({"devices": [{"name": "gpu", "count": 5, "selectors": [{"cel": second_root}]}]}, hgx())
    assert not no.ok
    # The NIC publishes gpu.nvidia.com/pcieRoot too, so a selector without a device class matches it as well.
    assert no.why == ("request gpu: needs 5 devices, a node has 4 (gpu (NVIDIA H100 80GB HBM3)) or 1 (nic) that match")


# --------------------------------------------------------------------------------------------------------------------
# Validation of requests (design.md §3a)
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "node_selector, message",
    [
        (
            {"devices": [{"name": "nic", "allocation_mode": "All", "count": 2}]},
            "count is not allowed with allocation_mode All",
        ),
        ({"devices": [{"name": "accel", "first_available": []}]}, "at least 1 item"),
        (
            {"devices": [{"name": "accel", "count": 2, "first_available": [{"name": "a"}]}]},
            "count cannot be set beside first_available",
        ),
        (
            {"devices": [{"name": "accel", "first_available": [{"name": "a"}, {"name": "a"}]}]},
            "duplicate first_available alternative name",
        ),
        (
            {"devices": [{"name": "accel", "first_available": [{"name": f"a{i}"} for i in range(9)]}]},
            "at most 8 items",
        ),
        (
            {"devices": [{"name": "gpu"}], "constraints": [{"requests": ["nic"], "match_attribute": PCIE}]},
            "constraints[0].requests[0]: 'nic' names no device request of this member (gpu)",
        ),
        (
            {
                "devices": [{"name": "accel", "first_available": [{"name": "h100"}]}],
                "constraints": [{"requests": ["accel/a100"], "match_attribute": PCIE}],
            },
            "'accel/a100' names no first_available alternative of request 'accel'",
        ),
        (
            {"devices": [{"name": "gpu"}], "constraints": [{"match_attribute": "pcieRoot"}]},
            "must be a fully qualified attribute name",
        ),
        (
            # Requests that name a device class are claimed whatever devices they get (issue 24: one that may resolve
            # to synthetic devices is checked per class by the allocator instead).
            {
                "devices": [
                    {"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 20},
                    {"name": "more", "device_class_name": "gpu.nvidia.com", "count": 13},
                ]
            },
            "needs at least 33 devices whatever it chooses; Kubernetes allocates at most 32",
        ),
        (
            {
                "devices": [
                    {"name": "accel", "first_available": [{"name": "big", "count": 33}, {"name": "x", "count": 40}]}
                ]
            },
            "needs at least 33 devices",
        ),
        ({"devices": [{"name": "GPU"}]}, "must be a DNS label"),
        ({"devices": [{"name": "gpu", "allocation_mode": "Some"}]}, "ExactCount"),
    ],
    ids=[
        "count-with-all",
        "empty-alternatives",
        "count-beside-alternatives",
        "duplicate-alternative",
        "nine-alternatives",
        "constraint-unknown-request",
        "constraint-unknown-alternative",
        "constraint-unqualified",
        "claim-over-32",
        "every-alternative-over-32",
        "request-name",
        "allocation-mode",
    ],
)
def test_request_validation_names_the_field_and_reason(node_selector, message):
    with pytest.raises(FleetValidationError) as err:
        parse(ModelDeployment, deployment(node_selector), "gpufleet_model_deployments[0]")
    text = str(err.value)
    assert message in text
    assert "gpufleet_model_deployments[0].engines[0].members[0].node_selector" in text


def test_an_alternative_over_the_limit_is_allowed_when_another_fits_the_claim():
    # "A first_available alternative that would exceed it is skipped, as upstream's allocator does."
    ns = {"devices": [{"name": "accel", "first_available": [{"name": "big", "count": 40}, {"name": "small"}]}]}
    parse(ModelDeployment, deployment(ns), "d")
    got = alloc(ns, {"devices": [{**hgx()["devices"][0], "count": 64, "instances": None}]})
    assert got.ok and got.chosen[0].sub == "small"


# --------------------------------------------------------------------------------------------------------------------
# Placement: the two worked examples of docs/placement.md, All, and explain
# --------------------------------------------------------------------------------------------------------------------


def test_tp4_on_one_pcie_root_with_a_nic_on_the_same_root():
    result = run(TP8_ONE_ROOT_PLUS_NIC, ("hgx", "hgx", 1))
    assert result["scheduled"] == 1
    m = member_of(result)
    assert [(r["name"], r["device_class_name"], r["count"]) for r in m["device_requests"]] == [
        ("gpu", "gpu.nvidia.com", 4),
        ("nic", "rdma.example.com", 1),
    ]
    assert m["constraints"] == [{"requests": ["gpu", "nic"], "match_attribute": PCIE}]


def test_docs_worked_example_tp8_on_one_nvlink_domain_with_a_nic():
    # docs/placement.md, "TP-8 on one NVLink domain, with a NIC on the same PCIe root".
    tp8 = {
        "devices": [
            {"name": "gpu", "count": 8, "selectors": [{"cel": IS_H100}]},
            {"name": "nic", "selectors": [{"cel": RDMA}]},
        ],
        "constraints": [{"requests": ["gpu"], "match_attribute": "gpu.nvidia.com/nvlinkDomain"}],
    }
    assert run(tp8, ("hgx", "hgx", 1))["scheduled"] == 1
    tp8["constraints"] = [{"requests": ["gpu", "nic"], "match_attribute": PCIE}]
    result = run(tp8, ("hgx", "hgx", 1))
    assert result["unschedulable"]["c"]["pools"]["hgx"] == (
        "engine main member Standalone constraint match_attribute gpu.nvidia.com/pcieRoot over gpu, nic cannot be "
        "met: one value must serve gpu 8, nic 1; matching devices per value: pci0000:00: gpu 4, nic 1; "
        "pci0001:00: gpu 4, nic 1"
    )
    tp8["devices"][0]["count"] = 4
    assert run(tp8, ("hgx", "hgx", 1))["scheduled"] == 1


def test_a_constraint_no_value_can_meet_is_explained_with_the_values():
    ns = copy.deepcopy(TP8_ONE_ROOT_PLUS_NIC)
    ns["devices"][0]["count"] = 5  # 4 GPUs per root: 5 cannot share one
    result = run(ns, ("hgx", "hgx", 1))
    assert result["scheduled"] == 0
    assert result["unschedulable"]["c"]["pools"]["hgx"] == (
        "engine main member Standalone constraint match_attribute gpu.nvidia.com/pcieRoot over gpu, nic cannot be "
        "met: one value must serve gpu 5, nic 1; matching devices per value: pci0000:00: gpu 4, nic 1; "
        "pci0001:00: gpu 4, nic 1"
    )
    # Without the constraint the same five GPUs and a NIC fit.
    ns.pop("constraints")
    assert run(ns, ("hgx", "hgx", 1))["scheduled"] == 1


def test_a_constraint_over_an_attribute_the_nic_lacks_fails():
    klass = hgx()
    for inst in klass["devices"][1]["instances"]:
        inst["attributes"] = {}
    got = alloc(TP8_ONE_ROOT_PLUS_NIC, klass)
    assert not got.ok
    assert "2 matching device(s) lack the attribute" in got.why


def test_h100_else_two_a100s_picks_per_pool():
    result = run(H100_ELSE_2_A100, ("hgx", "hgx", 1))
    accel = member_of(result)["device_requests"][0]
    assert (accel["chosen"], accel["count"]) == ("h100", 1)
    assert [a["name"] for a in accel["first_available"]] == ["h100", "a100"]

    result = run(H100_ELSE_2_A100, ("a", "a100x2", 1))
    accel = member_of(result)["device_requests"][0]
    assert (accel["chosen"], accel["count"]) == ("a100", 2)

    result = run(H100_ELSE_2_A100, ("a", "a100x1", 1))
    assert result["scheduled"] == 0
    why = result["unschedulable"]["c"]["pools"]["a"]
    assert why.startswith("engine main member Standalone request accel: no alternative fits: ")
    assert "a100: needs 2 devices, a node has 1 (gpu (NVIDIA A100-SXM4-80GB)) that match" in why
    assert f"h100: selector `{IS_H100}` is false for device gpu" in why


def test_first_available_backtracks_when_a_later_request_needs_the_devices():
    # accel's first choice (4 GPUs on any root) would leave no GPU for "rest"; upstream backtracks to the second.
    ns = {
        "devices": [
            {
                "name": "accel",
                "first_available": [
                    {"name": "four", "device_class_name": "gpu.nvidia.com", "count": 4},
                    {"name": "two", "device_class_name": "gpu.nvidia.com", "count": 2},
                ],
            },
            {"name": "rest", "device_class_name": "gpu.nvidia.com", "count": 6},
        ]
    }
    got = alloc(ns, hgx())
    assert got.ok
    assert [(c.request, c.sub, c.devices) for c in got.chosen] == [("accel", "two", 2), ("rest", None, 6)]


def test_all_takes_every_matching_device_and_says_how_many():
    ns = {"devices": [{"name": "nics", "allocation_mode": "All", "selectors": [{"cel": RDMA}]}]}
    req = member_of(run(ns, ("hgx", "hgx", 1)))["device_requests"][0]
    assert (req["allocation_mode"], req["count"], req["device_class_name"]) == ("All", 2, "rdma.example.com")
    # All needs at least one device.
    none = run(ns, ("a", "a100x2", 1))
    assert none["scheduled"] == 0
    assert "request nics: selector" in none["unschedulable"]["c"]["pools"]["a"]


def test_all_fails_when_an_earlier_request_took_one_of_its_devices():
    ns = {
        "devices": [
            {"name": "one", "device_class_name": "gpu.nvidia.com"},
            {"name": "every", "device_class_name": "gpu.nvidia.com", "allocation_mode": "All"},
        ]
    }
    got = alloc(ns, hgx())
    assert not got.ok
    assert "an All request would take a device another request needs" in got.why


def test_all_over_the_claim_limit_does_not_fit():
    big = {"devices": [{**hgx()["devices"][0], "count": 40, "instances": None}]}
    got = alloc({"devices": [{"name": "every", "device_class_name": "gpu.nvidia.com", "allocation_mode": "All"}]}, big)
    assert not got.ok
    assert got.why == "the claim needs at least 40 devices here; Kubernetes allocates at most 32 devices to one claim"


def test_constraint_on_a_first_available_parent_covers_the_chosen_alternative():
    ns = {
        "devices": [
            {
                "name": "accel",
                "first_available": [
                    {"name": "eight", "device_class_name": "gpu.nvidia.com", "count": 8},
                    {"name": "four", "device_class_name": "gpu.nvidia.com", "count": 4},
                ],
            }
        ],
        "constraints": [{"requests": ["accel"], "match_attribute": PCIE}],
    }
    got = alloc(ns, hgx())
    assert got.ok and got.chosen[0].sub == "four"  # eight cannot share one root; four can
    ns["constraints"] = [{"requests": ["accel/four"], "match_attribute": PCIE}]
    got = alloc(ns, hgx())
    assert got.ok and got.chosen[0].sub == "eight"  # the constraint only binds the "four" alternative


def test_identical_devices_are_searched_as_groups_not_one_by_one():
    # 128 identical devices, 2 requests of 16 that cannot both be met with a constraint on an attribute all share:
    # a device-by-device search would try C(128, 16) sets; the group search takes a handful of steps.
    klass = {
        "devices": [
            {
                "name": "gpu",
                "driver": "gpu.nvidia.com",
                "device_class_name": "gpu.nvidia.com",
                "count": 128,
                "attributes": {"pcieRoot": {"string": "a"}},
            }
        ]
    }
    ns = {
        "devices": [
            {"name": "a", "device_class_name": "gpu.nvidia.com", "count": 15},
            {"name": "b", "device_class_name": "gpu.nvidia.com", "count": 16},
            {"name": "c", "device_class_name": "rdma.example.com"},
        ],
        "constraints": [{"match_attribute": PCIE}],
    }
    got = alloc(ns, klass)
    assert not got.ok
    assert got.why.startswith("request c: device gpu has device class gpu.nvidia.com, not rdma.example.com")


def test_match_attribute_follows_upstreams_add_and_remove():
    c = MatchAttribute(["gpu"], PCIE)
    assert c.add("nic", None, None, 1)  # not covered: always accepted
    assert not c.add("gpu", None, None, 1)  # covered, attribute missing
    assert c.add("gpu", None, ("string", "a"), 2)
    assert not c.add("gpu", None, ("string", "b"), 1)
    assert not c.add("gpu", None, ("int", "a"), 1)  # same text, another type
    c.remove("gpu", None, 2)
    assert c.add("gpu", None, ("string", "b"), 1)  # the set emptied: any value starts it again
    sub = MatchAttribute(["accel/h100"], PCIE)
    assert sub.applies("accel", "h100") and not sub.applies("accel", "a100") and not sub.applies("accel", None)


# --------------------------------------------------------------------------------------------------------------------
# Kubernetes version: CEL library per cluster
# --------------------------------------------------------------------------------------------------------------------


def test_a_selector_newer_than_the_cluster_is_explained_not_rendered():
    # device.allowMultipleAllocations (consumable capacity) is in the DRA CEL environment from Kubernetes 1.36.
    newer = "!device.allowMultipleAllocations"
    ns = {"devices": [{"name": "gpu", "selectors": [{"cel": IS_H100}, {"cel": newer}]}]}
    old = run(ns, ("hgx", "hgx", 1), version="1.34")
    assert old["scheduled"] == 0
    assert "does not compile for Kubernetes 1.34" in old["unschedulable"]["c"]["pools"]["hgx"]
    assert run(ns, ("hgx", "hgx", 1), version="1.36.2-gke.100")["scheduled"] == 1


# --------------------------------------------------------------------------------------------------------------------
# Records and rendering
# --------------------------------------------------------------------------------------------------------------------


def test_records_round_trip_alternatives_all_and_constraints():
    ns = copy.deepcopy(TP8_ONE_ROOT_PLUS_NIC)
    ns["devices"].append(H100_ELSE_2_A100["devices"][0])
    ns["devices"].append({"name": "nics", "allocation_mode": "All", "selectors": [{"cel": RDMA}]})
    ns["constraints"][0]["requests"] = ["gpu", "nic"]
    # 4 + 1 + 1 + All(2): the NIC request and the All request compete for the two NICs.
    result = run(ns, ("hgx", "hgx", 1))
    assert result["scheduled"] == 0
    ns["devices"][1] = {"name": "nic", "selectors": [{"cel": RDMA}], "count": 1}
    ns["devices"].pop()  # drop the All request
    result = run(ns, ("hgx", "hgx", 1))
    replica = result["replicas"][0]
    again = ReplicaRecord.parse(replica, "r").to_dict()
    assert again == replica
    trusted = ReplicaRecord.trusted(replica).to_dict()
    assert trusted == replica


def test_claim_devices_render_exactly_first_available_all_and_constraints():
    requests = [
        {"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 4, "selectors": [IS_H100]},
        {
            "name": "nics",
            "device_class_name": "rdma.example.com",
            "count": 2,
            "selectors": [],
            "allocation_mode": "All",
        },
        {
            "name": "accel",
            "device_class_name": "gpu.nvidia.com",
            "count": 2,
            "selectors": [],
            "first_available": [
                {"name": "h100", "device_class_name": "gpu.nvidia.com", "count": 1, "selectors": [IS_H100]},
                {"name": "any", "device_class_name": "gpu.nvidia.com", "allocation_mode": "All", "selectors": []},
            ],
            "chosen": "any",
        },
    ]
    spec = claim_devices(
        requests, [{"requests": ["gpu", "nics"], "match_attribute": PCIE}, {"requests": [], "match_attribute": PCIE}]
    )
    assert spec == {
        "requests": [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": "gpu.nvidia.com",
                    "allocationMode": "ExactCount",
                    "count": 4,
                    "selectors": [{"cel": {"expression": IS_H100}}],
                },
            },
            {"name": "nics", "exactly": {"deviceClassName": "rdma.example.com", "allocationMode": "All"}},
            {
                "name": "accel",
                "firstAvailable": [
                    {
                        "name": "h100",
                        "deviceClassName": "gpu.nvidia.com",
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "selectors": [{"cel": {"expression": IS_H100}}],
                    },
                    {"name": "any", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"},
                ],
            },
        ],
        "constraints": [
            {"requests": ["gpu", "nics"], "matchAttribute": PCIE},
            {"matchAttribute": PCIE},
        ],
    }


def test_rendered_claim_templates_are_schema_valid_in_every_supported_version():
    ns = copy.deepcopy(TP8_ONE_ROOT_PLUS_NIC)
    ns["devices"].append(H100_ELSE_2_A100["devices"][0])
    ns["devices"].append(
        {
            "name": "rest",
            "allocation_mode": "All",
            "device_class_name": "gpu.nvidia.com",
            "selectors": [{"cel": 'device.attributes["gpu.nvidia.com"].index >= 6'}],
        }
    )
    ns["devices"][0]["selectors"].append({"cel": 'device.attributes["gpu.nvidia.com"].index < 4'})
    dep = deployment(ns)
    result = place(deployment=dep, clusters=[cluster(("hgx", "hgx", 1))], classes=CLASSES)
    assert result["scheduled"] == 1, result["unschedulable"]
    objects = render_serving_manifests(result["replicas"], dep, cluster="c")
    claims = [o for o in objects if o["kind"] == "ResourceClaimTemplate"]
    assert len(claims) == 1
    devices = claims[0]["spec"]["spec"]["devices"]
    assert [r["name"] for r in devices["requests"]] == ["gpu", "nic", "accel", "rest"]
    assert devices["constraints"] == [{"requests": ["gpu", "nic"], "matchAttribute": PCIE}]
    k8s_schemas.validate_objects(claims)


# --------------------------------------------------------------------------------------------------------------------
# Where kube-scheduler stops early: a CEL runtime error, an All device a constraint rejects
# --------------------------------------------------------------------------------------------------------------------


def tiers(*values: str | None) -> dict[str, Any]:
    """GPUs whose ``tier`` attribute is given per device (None: the device lacks it, so a selector on it errors)."""
    return {
        "devices": [
            {
                "name": "gpu",
                "driver": "gpu.nvidia.com",
                "device_class_name": "gpu.nvidia.com",
                "count": len(values),
                "instances": [{"attributes": {} if v is None else {"tier": {"string": v}}} for v in values],
            }
        ]
    }


TIER_B = 'device.attributes["gpu.nvidia.com"].tier == "b"'


def test_a_selector_error_on_a_device_the_search_reaches_stops_the_claim():
    # Upstream scans gpu-0 (no match), then gpu-1, where the selector errors: allocation stops, although gpu-2 and
    # gpu-3 would match.
    got = alloc({"devices": [{"name": "gpu", "count": 2, "selectors": [{"cel": TIER_B}]}]}, tiers("a", None, "b", "b"))
    assert not got.ok
    assert got.why == (
        f"selector `{TIER_B}` failed on device gpu: no such key: tier; kube-scheduler stops allocating the claim at "
        "a CEL runtime error"
    )
    # A guarded selector does not error, and the same devices fit.
    guarded = f'"tier" in device.attributes["gpu.nvidia.com"] && {TIER_B}'
    assert alloc(
        {"devices": [{"name": "gpu", "count": 2, "selectors": [{"cel": guarded}]}]}, tiers("a", None, "b", "b")
    ).ok


def test_a_selector_error_the_search_never_reaches_does_not_matter():
    # gpu-0 and gpu-1 satisfy the request before the search looks at gpu-2, which lacks the attribute.
    got = alloc({"devices": [{"name": "gpu", "count": 2, "selectors": [{"cel": TIER_B}]}]}, tiers("b", "b", None))
    assert got.ok


def test_an_all_alternative_with_a_selector_error_stops_the_claim_even_if_it_is_not_chosen():
    # Upstream evaluates every device of an All (sub-)request before searching.
    ns = {
        "devices": [
            {
                "name": "accel",
                "first_available": [
                    {"name": "one", "device_class_name": "gpu.nvidia.com"},
                    {
                        "name": "all-b",
                        "device_class_name": "gpu.nvidia.com",
                        "allocation_mode": "All",
                        "selectors": [{"cel": TIER_B}],
                    },
                ],
            }
        ]
    }
    got = alloc(ns, tiers("b", None))
    assert not got.ok
    assert got.why.startswith("request accel (All): selector")
    assert alloc(ns, tiers("b", "a")).ok


def test_an_all_request_a_constraint_rejects_stops_the_claim_instead_of_trying_the_next_alternative():
    ns = {
        "devices": [
            {
                "name": "accel",
                "first_available": [
                    {"name": "every", "device_class_name": "gpu.nvidia.com", "allocation_mode": "All"},
                    {"name": "one", "device_class_name": "gpu.nvidia.com"},
                ],
            }
        ],
        "constraints": [{"requests": ["accel"], "match_attribute": "gpu.nvidia.com/tier"}],
    }
    got = alloc(ns, tiers("a", "b"))
    assert not got.ok
    assert "kube-scheduler gives up on a claim whose All request a constraint rejects" in got.why
    # When All's devices agree, it is chosen.
    got = alloc(ns, tiers("a", "a"))
    assert got.ok and got.chosen[0].sub == "every"
