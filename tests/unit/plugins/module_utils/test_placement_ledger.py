"""Device-level capacity (design.md §12, issue 24): placement packs claims per node as the structured allocator does.

Each pool keeps what is allocated on each of its nodes; a member's pod is allocated on the first node where its claim
fits beside what is there (devices other pods hold are in use), so many pods of many deployments share a node until
its devices run out. ``placement.exclusive_nodes`` opts back into whole nodes; members that take every device of
their node are counted by nodes (the fast path, and the record shape of every earlier release).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from test_placement import (
    CLASSES,
    IS_H100,
    cluster,
    deployment,
    engine,
    member,
    observed,
    request,
    run,
)

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import ReplicaRecord

H8 = [("p", "h100x8-ib", 1)]


def members_of(result: dict) -> list[dict]:
    return [m for r in result["replicas"] for e in r["engines"] for m in e["members"]]


def allocations(result: dict) -> list[tuple[int, list[str]]]:
    return [(a["node"], a["devices"]) for m in members_of(result) for a in m.get("allocations", [])]


def test_eight_one_gpu_replicas_share_one_eight_gpu_node():
    # The first complaint: a 1-GPU replica took a whole 8xH100 node. Now eight fit on it, each on its own GPU.
    result = run(deployment(replicas=9, requests=[request(selectors=[IS_H100])]), [cluster("a", H8)])
    assert result["scheduled"] == 8
    assert allocations(result) == [(0, [f"gpu-{k}"]) for k in range(8)]
    assert all(m["nodes"] == 1 for m in members_of(result))
    why = result["unschedulable"]["a"]
    assert why["code"] == "InsufficientCapacity"
    assert why["pools"]["p"] == (
        "engine main: no node has the devices its 1 pod(s) claim free (1 node(s), 0 unused; devices free: node 0 0 of 8)"
    )


def test_the_next_deployment_packs_into_what_is_left():
    # A 1-GPU replica leaves 7 GPUs of its node for another deployment's members.
    first = run(deployment("one", replicas=1, requests=[request(selectors=[IS_H100])]), [cluster("a", H8)])
    other = deployment("four", replicas=2, requests=[request(count=4, selectors=[IS_H100])])
    second = run(other, [cluster("a", H8)], first["replicas"])
    assert second["scheduled"] == 1  # gpu-1..gpu-4; the 3 GPUs left cannot hold another 4
    assert allocations(second) == [(0, ["gpu-1", "gpu-2", "gpu-3", "gpu-4"])]
    three = run(
        deployment("three", replicas=2, requests=[request(count=3, selectors=[IS_H100])]),
        [cluster("a", H8)],
        first["replicas"] + second["replicas"],
    )
    assert allocations(three) == [(0, ["gpu-5", "gpu-6", "gpu-7"])]


def test_exclusive_nodes_charges_whole_nodes():
    dep = deployment(replicas=3, requests=[request(selectors=[IS_H100])])
    dep["placement"] = {"exclusive_nodes": True}
    result = run(dep, [cluster("a", [("p", "h100x8-ib", 2)])])
    assert result["scheduled"] == 2
    assert [(m["nodes"], "allocations" in m) for m in members_of(result)] == [(1, False), (1, False)]
    assert result["unschedulable"]["a"]["pools"]["p"] == "engine main needs 1 node(s), 0 of 2 free"
    # Another deployment finds those nodes held whole.
    other = run(
        deployment("other", replicas=1, requests=[request(selectors=[IS_H100])]),
        [cluster("a", [("p", "h100x8-ib", 2)])],
        result["replicas"],
    )
    assert other["scheduled"] == 0


def test_exclusive_nodes_is_validated():
    dep = deployment()
    dep["placement"] = {"exclusive_nodes": "yes"}
    with pytest.raises(FleetValidationError, match=r"deployment\.placement\.exclusive_nodes: must be true or false"):
        run(dep, [cluster("a")])


def test_a_member_that_takes_every_device_keeps_the_node_count_shape():
    # The fast path: eight of eight GPUs is a whole node, recorded as before (no allocations).
    result = run(
        deployment(replicas=2, requests=[request(count=8, selectors=[IS_H100])]),
        [cluster("a", [("p", "h100x8-ib", 1)])],
    )
    assert result["scheduled"] == 1
    assert [(m["nodes"], "allocations" in m) for m in members_of(result)] == [(1, False)]
    assert result["unschedulable"]["a"]["pools"]["p"] == "engine main needs 1 node(s), 0 of 1 free"
    # A whole-node member needs an untouched node: one GPU in use there is enough to keep it off.
    one = run(deployment("one", requests=[request(selectors=[IS_H100])]), [cluster("a", H8)])
    eight = run(
        deployment(replicas=1, requests=[request(count=8, selectors=[IS_H100])]), [cluster("a", H8)], one["replicas"]
    )
    assert eight["scheduled"] == 0


def test_a_first_available_member_is_never_a_whole_node_member():
    # "8 GPUs, else 4": on an empty node it takes all 8, but beside another pod the scheduler would give it 4 -- it is
    # packed device by device, not counted by nodes.
    one = run(deployment("one", requests=[request(selectors=[IS_H100])]), [cluster("a", H8)])
    accel = {
        "name": "accel",
        "first_available": [
            {"name": "eight", "count": 8, "selectors": [{"cel": IS_H100}]},
            {"name": "four", "count": 4, "selectors": [{"cel": IS_H100}]},
        ],
    }
    result = run(deployment(replicas=2, requests=[accel]), [cluster("a", H8)], one["replicas"])
    assert result["scheduled"] == 1
    assert allocations(result) == [(0, ["gpu-1", "gpu-2", "gpu-3", "gpu-4"])]


def test_two_gpus_and_a_nic_on_one_pcie_root_fit_four_times_on_one_node():
    # The "2 GPUs + 1 NIC on one PCIe root" on a node of 8 GPUs and 8 NICs over 4 roots: four such pods fit
    # (the allocator keeps the constraint per claim, beside what earlier claims hold).
    roots = [{"attributes": {"pcieRoot": {"string": f"pci{k // 2:04x}:00"}}} for k in range(8)]
    nics = {
        "name": "nic",
        "driver": "rdma.example.com",
        "device_class_name": "rdma.example.com",
        "count": 8,
        "instances": [{"attributes": {"gpu.nvidia.com/pcieRoot": {"string": f"pci{k // 2:04x}:00"}}} for k in range(8)],
    }
    gpus = {**CLASSES["h100x8-ib"]["devices"][0], "instances": roots}
    classes = {**CLASSES, "hgx": {"devices": [gpus, nics]}}
    node_selector = [
        request(count=2, selectors=[IS_H100]),
        {"name": "nic", "count": 1, "selectors": [{"cel": 'device.driver == "rdma.example.com"'}]},
    ]
    dep = deployment(replicas=6, requests=node_selector)
    dep["engines"][0]["members"][0]["node_selector"]["constraints"] = [
        {"requests": ["gpu", "nic"], "match_attribute": "gpu.nvidia.com/pcieRoot"}
    ]
    result = run(dep, [cluster("a", [("hgx", "hgx", 1)])], classes=classes)
    assert result["scheduled"] == 4
    assert allocations(result) == [(0, [f"gpu-{2 * k}", f"gpu-{2 * k + 1}", f"nic-{2 * k}"]) for k in range(4)]


def test_a_gang_packs_its_pods_and_copies():
    # Leader + 2 workers, 1 GPU each, two copies: six pods on one 8-GPU node, in scheduling order (copy by copy).
    dep = deployment(engines=[engine(requests=[request(selectors=[IS_H100])], pipeline=3, copies=2)])
    result = run(dep, [cluster("a", H8)])
    leader, worker = members_of(result)
    assert leader["allocations"] == [{"node": 0, "devices": ["gpu-0"]}, {"node": 0, "devices": ["gpu-3"]}]
    assert worker["allocations"] == [{"node": 0, "devices": [f"gpu-{k}"]} for k in (1, 2, 4, 5)]
    assert (leader["nodes"], worker["nodes"]) == (1, 1)


def test_feeding_the_result_back_changes_nothing_and_reads_back_from_the_annotation():
    dep = deployment(replicas=5, requests=[request(selectors=[IS_H100])])
    first = run(dep, [cluster("a", [("p", "h100x8-ib", 2)])])
    again = run(dep, [cluster("a", [("p", "h100x8-ib", 2)])], first["replicas"])
    assert not again["changed"] and again["replicas"] == first["replicas"]
    # The annotation carries the allocations (compact: no device requests) and reads back to the same placement.
    texts = [ReplicaRecord.parse(r, "r").to_annotation() for r in first["replicas"]]
    assert '"allocations": [{"devices": ["gpu-0"], "node": 0}]' in texts[0]
    read = [ReplicaRecord.from_annotation(t).to_compact() for t in texts]
    back = run(dep, [cluster("a", [("p", "h100x8-ib", 2)])], read)
    assert not back["changed"] and back["replicas"] == first["replicas"]


def test_annotations_without_allocations_mean_whole_nodes():
    # Every annotation written before device-level placement says "N nodes": another deployment's such replica holds
    # its node whole; this deployment's own is allocated devices again (it packs from now on).
    legacy = observed("old", "a", 0, pool="p")
    result = run(
        deployment(replicas=8, requests=[request(selectors=[IS_H100])]),
        [cluster("a", [("p", "h100x8-ib", 2)])],
        [legacy],
    )
    assert result["scheduled"] == 8
    assert {a[0] for a in allocations(result)} == {0}  # node 0 of ours; the legacy replica holds the other whole
    ours = run(
        deployment("old", replicas=2, requests=[request(selectors=[IS_H100])]),
        [cluster("a", [("p", "h100x8-ib", 1)])],
        [legacy],
    )
    assert ours["changed"] and ours["scheduled"] == 2
    assert allocations(ours) == [(0, ["gpu-0"]), (0, ["gpu-1"])]


def test_a_retained_replica_keeps_its_devices_while_they_still_make_its_claim():
    dep = deployment(replicas=2, requests=[request(selectors=[IS_H100])])
    first = run(dep, [cluster("a", H8)])
    moved = copy.deepcopy(first["replicas"])
    moved[0]["engines"][0]["members"][0]["allocations"] = [{"node": 0, "devices": ["gpu-5"]}]
    again = run(dep, [cluster("a", H8)], moved)
    assert allocations(again) == [(0, ["gpu-5"]), (0, ["gpu-1"])]
    assert again["changed"] is False
    # Asked for 2 GPUs now: the recorded single GPU no longer makes the claim; the replica is allocated again.
    dep2 = deployment(replicas=2, requests=[request(count=2, selectors=[IS_H100])])
    grown = run(dep2, [cluster("a", H8)], moved)
    assert allocations(grown) == [(0, ["gpu-0", "gpu-1"]), (0, ["gpu-2", "gpu-3"])]


def test_two_records_holding_one_device_show_as_overcommit():
    # State read from two runs that did not see each other: both replicas say gpu-0 of node 0 of a 1-node pool. The
    # second is charged on another node, which the pool does not have.
    dep = deployment(replicas=2, requests=[request(selectors=[IS_H100])])
    clash = []
    for index in (0, 1):
        r = copy.deepcopy(run(dep, [cluster("a", H8)])["replicas"][0])
        r["index"] = index
        r["name"] = f"my-model-{index}x"
        r["engines"][0]["members"][0]["allocations"] = [{"node": 0, "devices": ["gpu-0"]}]
        clash.append(r)
    other = run(deployment("other", requests=[request(selectors=[IS_H100])]), [cluster("a", H8)], clash)
    assert other["scheduled"] == 1  # gpu-1 is free on node 0
    ours = run(dep, [cluster("a", H8)], clash)
    assert list(allocations(ours)) == [(0, ["gpu-0"]), (1, ["gpu-0"])]
    assert ours["overcommitted"] == [{"cluster": "a", "pool": "p", "nodes": 1, "used": 2}]
    assert ours["condition"]["reason"] == "PoolOvercommitted"


def test_a_shrunken_pool_is_overcommitted():
    dep = deployment(replicas=12, requests=[request(selectors=[IS_H100])])
    first = run(dep, [cluster("a", [("p", "h100x8-ib", 2)])])
    assert first["scheduled"] == 12 and {a[0] for a in allocations(first)} == {0, 1}
    shrunk = run(dep, [cluster("a", [("p", "h100x8-ib", 1)])], first["replicas"])
    assert shrunk["scheduled"] == 12  # replicas are never moved just to fit
    assert shrunk["overcommitted"] == [{"cluster": "a", "pool": "p", "nodes": 1, "used": 2}]


def test_allocations_are_validated_with_their_path():
    bad = observed("my-model", "a", 0, pool="p")
    bad["engines"][0]["members"][0]["allocations"] = [{"node": -1, "devices": []}]
    with pytest.raises(FleetValidationError) as err:
        run(deployment(), [cluster("a", H8)], [bad])
    text = str(err.value)
    assert "replicas[0].engines[0].members[0].allocations[0].node: must be an integer >= 0 (got -1)" in text
    assert "replicas[0].engines[0].members[0].allocations[0].devices: must have at least 1 item(s)" in text
    with pytest.raises(GpufleetError, match=r"unreadable gpufleet\.io/placement annotation"):
        ReplicaRecord.from_annotation(json.dumps({**bad, "engines": bad["engines"]}))


def test_other_deployments_records_are_read_with_their_allocations():
    # Another deployment's replica as the ledger reads it (a LedgerRecord): its allocations are validated too.
    other = observed("other", "a", 0, pool="p")
    other["engines"][0]["members"][0]["allocations"] = [{"node": 0, "devices": ["gpu-0", "gpu-1"]}]
    result = run(deployment(replicas=7, requests=[request(selectors=[IS_H100])]), [cluster("a", H8)], [other])
    assert result["scheduled"] == 6 and allocations(result)[0] == (0, ["gpu-2"])
    other["engines"][0]["members"][0]["allocations"] = [{"node": "zero", "devices": ["gpu-0"]}]
    with pytest.raises(
        FleetValidationError, match=r"replicas\[0\]\.engines\[0\]\.members\[0\]\.allocations\[0\]\.node"
    ):
        run(deployment(), [cluster("a", H8)], [other])


def test_a_synthetic_only_member_holds_nothing_beside_a_packed_one():
    # A claimless Leader (it matches only the synthetic fabric) rides along, at no cost, beside a packed Worker.
    dep = deployment(
        engines=[
            engine(
                members=[
                    member(
                        "Leader",
                        [request("nic", 8, ['device.attributes["fabric.gpufleet.io"].linkType == "InfiniBand"'])],
                    ),
                    member("Worker", [request(selectors=[IS_H100])], workers=1),
                ]
            )
        ]
    )
    result = run(dep, [cluster("a", H8)])
    leader, worker = members_of(result)
    assert (leader["nodes"], "allocations" in leader) == (0, False)
    assert worker["allocations"] == [{"node": 0, "devices": ["gpu-0"]}]


def test_member_spec_types() -> None:
    # Types the module boundary accepts for the placement options.
    dep: dict[str, Any] = deployment()
    dep["placement"] = {}
    assert run(dep, [cluster("a")])["scheduled"] == 1


# --------------------------------------------------------------------------------------------------------------------
# The claim limit counts only claimed devices (issue 24 item 5)
# --------------------------------------------------------------------------------------------------------------------

P5 = {
    "devices": [
        {**CLASSES["h100x8-ib"]["devices"][0]},
        {
            "name": "efa",
            "claim": "Synthetic",
            "driver": "efa.amazonaws.com",
            "count": 32,
            "attributes": {"linkType": {"string": "EFA"}},
        },
    ]
}
EFA = 'device.attributes["efa.amazonaws.com"].linkType == "EFA"'


def test_synthetic_devices_do_not_count_toward_the_claim_limit():
    # A p5.48xlarge: 8 GPUs and 32 EFA interfaces without a DRA driver. 8 + 32 = 40 devices matched, 8 claimed.
    dep = deployment(requests=[request(count=8, selectors=[IS_H100]), request("efa", 32, [EFA])])
    result = run(dep, [cluster("a", [("p5", "p5", 1)])], classes={**CLASSES, "p5": P5})
    assert result["scheduled"] == 1, result["unschedulable"]
    (m,) = members_of(result)
    assert [r["name"] for r in m["device_requests"]] == ["gpu"] and m["nodes"] == 1


def test_a_claim_over_the_limit_on_a_class_is_explained_not_rejected():
    # The same member on a class where the 32 "efa" devices are DRA devices: 40 claimed, over the limit there.
    dra_efa = {
        "devices": [P5["devices"][0], {**P5["devices"][1], "claim": "DRA", "device_class_name": "efa.amazonaws.com"}]
    }
    dep = deployment(requests=[request(count=8, selectors=[IS_H100]), request("efa", 32, [EFA])])
    result = run(dep, [cluster("a", [("p5", "p5-dra", 1)])], classes={**CLASSES, "p5-dra": dra_efa})
    assert result["scheduled"] == 0
    assert "Kubernetes allocates at most 32 devices to one claim" in result["unschedulable"]["a"]["pools"]["p5"]
    # A member whose claimed requests alone exceed the limit is still a validation error.
    bad = deployment(
        requests=[
            request(count=20, device_class_name="gpu.nvidia.com"),
            request("more", 13, device_class_name="gpu.nvidia.com"),
        ]
    )
    with pytest.raises(FleetValidationError, match="needs at least 33 devices whatever it chooses"):
        run(bad, [cluster("a", [("p5", "p5", 1)])], classes={**CLASSES, "p5": P5})


# --------------------------------------------------------------------------------------------------------------------
# Device taints, consumable capacity, partitionable devices through placement (issue 24 items 2-4)
# --------------------------------------------------------------------------------------------------------------------

XID = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}


def h8(**extra: Any) -> dict:
    return {"devices": [{**CLASSES["h100x8-ib"]["devices"][0], **extra}]}


def test_a_tainted_gpu_is_skipped_unless_tolerated():
    tainted = h8(instances=[{"taints": [XID]} if k == 0 else {} for k in range(8)])
    classes = {**CLASSES, "tainted": tainted}
    result = run(
        deployment(replicas=9, requests=[request(selectors=[IS_H100])]),
        [cluster("a", [("p", "tainted", 1)])],
        classes=classes,
    )
    assert result["scheduled"] == 7 and "gpu-0" not in {d for _n, ds in allocations(result) for d in ds}
    tolerant = request(selectors=[IS_H100], tolerations=[{"key": "gpu.nvidia.com/xid", "operator": "Exists"}])
    result = run(deployment(replicas=9, requests=[tolerant]), [cluster("a", [("p", "tainted", 1)])], classes=classes)
    assert result["scheduled"] == 8
    (m, *_rest) = members_of(result)
    assert m["device_requests"][0]["tolerations"] == [{"key": "gpu.nvidia.com/xid", "operator": "Exists"}]
    # Every GPU tainted, none tolerated: explain names the taint.
    all_tainted = {**CLASSES, "bad": h8(taints=[XID])}
    result = run(
        deployment(requests=[request(selectors=[IS_H100])]), [cluster("a", [("p", "bad", 1)])], classes=all_tainted
    )
    assert (
        "device gpu-0 is tainted gpu.nvidia.com/xid=79:NoSchedule, which gpu does not tolerate"
        in (result["unschedulable"]["a"]["pools"]["p"])
    )


def test_a_cluster_without_the_feature_is_not_a_candidate_and_explain_says_so():
    tolerant = request(selectors=[IS_H100], tolerations=[{"key": "gpu.nvidia.com/xid", "operator": "Exists"}])
    old = {**cluster("old", H8), "kubernetes_version": "1.35"}
    new = {**cluster("new", H8), "kubernetes_version": "1.36"}
    result = run(deployment(replicas=2, requests=[tolerant]), [old, new])
    assert {r["cluster"] for r in result["replicas"]} == {"new"}
    assert result["unschedulable"]["old"]["pools"]["p"] == (
        "engine main member Standalone request gpu: tolerations needs the DRADeviceTaints feature, on by default from "
        "Kubernetes 1.36"
    )


SHARED = {
    "devices": [
        {
            "name": "gpu",
            "driver": "gpu.nvidia.com",
            "device_class_name": "gpu.nvidia.com",
            "count": 2,
            "allow_multiple_allocations": True,
            "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
            "capacity": {
                "memory": {
                    "value": "80Gi",
                    "request_policy": {"default": "10Gi", "valid_range": {"min": "10Gi", "step": "10Gi"}},
                }
            },
        }
    ]
}


def test_two_models_share_a_gpu_by_memory():
    classes = {**CLASSES, "shared": SHARED}
    small = request(selectors=[IS_H100], capacity={"requests": {"memory": "30Gi"}})
    big = request(selectors=[IS_H100], capacity={"requests": {"memory": "45Gi"}})
    one = run(deployment("small", replicas=3, requests=[small]), [cluster("a", [("p", "shared", 1)])], classes=classes)
    assert one["scheduled"] == 3
    assert [a["capacity"] for m in members_of(one) for a in m["allocations"]] == [
        {"gpu-0": {"memory": "30Gi"}},
        {"gpu-0": {"memory": "30Gi"}},
        {"gpu-1": {"memory": "30Gi"}},
    ]
    # 45Gi rounds up to 50Gi: gpu-0 has 20Gi left, gpu-1 50Gi.
    two = run(
        deployment("big", replicas=2, requests=[big]),
        [cluster("a", [("p", "shared", 1)])],
        one["replicas"],
        classes=classes,
    )
    assert two["scheduled"] == 1
    assert allocations(two) == [(0, ["gpu-1"])]
    assert members_of(two)[0]["allocations"][0]["capacity"] == {"gpu-1": {"memory": "50Gi"}}
    assert members_of(two)[0]["device_requests"][0]["capacity"] == {"requests": {"memory": "45Gi"}}
    # Fed back, both stay as they are (the shared capacity is rebuilt from the records).
    again = run(
        deployment("big", replicas=2, requests=[big]),
        [cluster("a", [("p", "shared", 1)])],
        one["replicas"] + two["replicas"],
        classes=classes,
    )
    assert not again["changed"] and again["replicas"] == two["replicas"]


MIG = {
    "shared_counters": [{"name": "gpu-{i}-counters", "count": 2, "counters": {"memory": {"value": "80Gi"}}}],
    "devices": [
        {
            "name": "gpu",
            "driver": "gpu.nvidia.com",
            "device_class_name": "gpu.nvidia.com",
            "count": 2,
            "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
            "consumes_counters": [{"counter_set": "gpu-{i}-counters", "counters": {"memory": {"value": "80Gi"}}}],
        },
        {
            "name": "mig-3g40gb",
            "driver": "gpu.nvidia.com",
            "device_class_name": "gpu.nvidia.com",
            "count": 4,
            "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3 MIG 3g.40gb"}},
            "consumes_counters": [{"counter_set": "gpu-{i//2}-counters", "counters": {"memory": {"value": "40Gi"}}}],
        },
    ],
}
IS_3G = 'device.attributes["gpu.nvidia.com"].productName.endsWith("MIG 3g.40gb")'
IS_FULL = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'


def test_mig_slices_consume_their_gpus_counters():
    classes = {**CLASSES, "mig": MIG}
    slices = run(
        deployment("slices", replicas=3, requests=[request(selectors=[IS_3G])]),
        [cluster("a", [("p", "mig", 1)])],
        classes=classes,
    )
    assert allocations(slices) == [(0, ["mig-3g40gb-0"]), (0, ["mig-3g40gb-1"]), (0, ["mig-3g40gb-2"])]
    # A whole GPU beside them: gpu-0's memory is taken by two slices, gpu-1's half by one -- no whole GPU is left.
    full = run(
        deployment("full", requests=[request(selectors=[IS_FULL])]),
        [cluster("a", [("p", "mig", 1)])],
        slices["replicas"],
        classes=classes,
    )
    assert full["scheduled"] == 0
    one_slice = run(
        deployment("slices", replicas=1, requests=[request(selectors=[IS_3G])]),
        [cluster("a", [("p", "mig", 1)])],
        classes=classes,
    )
    full = run(
        deployment("full", requests=[request(selectors=[IS_FULL])]),
        [cluster("a", [("p", "mig", 1)])],
        one_slice["replicas"],
        classes=classes,
    )
    assert allocations(full) == [(0, ["gpu-1"])]
    # Without the feature (Kubernetes 1.35) a slice cannot be allocated at all, and explain says why.
    old = {**cluster("old", [("p", "mig", 1)]), "kubernetes_version": "1.35"}
    result = run(deployment("slices", requests=[request(selectors=[IS_3G])]), [old], classes=classes)
    assert (
        "consumes counters, which needs the DRAPartitionableDevices feature"
        in result["unschedulable"]["old"]["pools"]["p"]
    )


def test_recorded_capacity_is_a_quantity():
    bad = observed("other", "a", 0, pool="p")
    bad["engines"][0]["members"][0]["allocations"] = [
        {"node": 0, "devices": ["gpu-0"], "capacity": {"gpu-0": {"memory": "lots"}}}
    ]
    with pytest.raises(
        FleetValidationError, match=r"allocations\[0\]\.capacity\['gpu-0'\]\.memory: 'lots' is not a Kubernetes"
    ):
        run(deployment(), [cluster("a", H8)], [bad])


# --------------------------------------------------------------------------------------------------------------------
# A claim that stops at a CEL runtime error on a node of its own may fit beside other claims (differential k008)
# --------------------------------------------------------------------------------------------------------------------

NUMA0 = 'device.attributes["gpu.nvidia.com"].numaNode == 0'
#: Two GPUs without ``numaNode`` (a selector on it errors there), listed first, then two with it.
CEL_ORDER = {
    "devices": [
        {**CLASSES["h100x8-ib"]["devices"][0], "name": "bare", "count": 2},
        {
            **CLASSES["h100x8-ib"]["devices"][0],
            "name": "local",
            "count": 2,
            "instances": [{"attributes": {"numaNode": {"int": k}}} for k in range(2)],
        },
    ]
}


def test_a_claim_whose_selector_errors_fits_beside_claims_holding_those_devices():
    # kube-scheduler skips devices in use before it evaluates selectors (allocateOne: "Checking for 'in use' is cheap
    # and thus gets done first"): once another claim holds bare-0 and bare-1, the numaNode selector never meets them.
    classes = {**CLASSES, "cel-order": CEL_ORDER}
    pool = [cluster("a", [("p", "cel-order", 1)])]
    numa = deployment("numa", replicas=2, requests=[request(selectors=[NUMA0])])
    alone = run(numa, pool, classes=classes)
    assert alone["scheduled"] == 0
    why = alone["unschedulable"]["a"]
    assert why["code"] == "NoMatchingPool"
    assert why["pools"]["p"].startswith(
        f"engine main member Standalone selector `{NUMA0}` failed on device bare (NVIDIA H100 80GB HBM3): no such key: "
        "numaNode; kube-scheduler stops allocating the claim at a CEL runtime error"
    )
    two = run(deployment("two", requests=[request(count=2, selectors=[IS_H100])]), pool, classes=classes)
    assert allocations(two) == [(0, ["bare-0", "bare-1"])]
    beside = run(numa, pool, two["replicas"], classes=classes)
    assert beside["scheduled"] == 1 and allocations(beside) == [(0, ["local-0"])]
    assert members_of(beside)[0]["device_requests"][0]["device_class_name"] == "gpu.nvidia.com"
    assert beside["unschedulable"]["a"]["code"] == "InsufficientCapacity"
    assert (
        "member Standalone fits only beside claims that hold bare-0, bare-1"
        in beside["unschedulable"]["a"]["pools"]["p"]
    )
    # Fed back, the replica keeps its device.
    again = run(numa, pool, two["replicas"] + beside["replicas"], classes=classes)
    assert again["replicas"] == beside["replicas"] and not again["changed"]


def test_an_exclusive_pod_never_sits_beside_the_claims_its_selector_needs():
    classes = {**CLASSES, "cel-order": CEL_ORDER}
    pool = [cluster("a", [("p", "cel-order", 1)])]
    two = run(deployment("two", requests=[request(count=2, selectors=[IS_H100])]), pool, classes=classes)
    numa = {**deployment("numa", requests=[request(selectors=[NUMA0])]), "placement": {"exclusive_nodes": True}}
    result = run(numa, pool, two["replicas"], classes=classes)
    assert result["scheduled"] == 0 and result["unschedulable"]["a"]["code"] == "NoMatchingPool"
