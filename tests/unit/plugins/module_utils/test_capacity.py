"""Observed capacity and drift (design.md §11): usable nodes per pool, and every cause named."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import (
    DeclaredPool,
    observe_cluster,
    observe_fleet,
    observed_pools,
    pool_notes,
    usable_nodes,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import InferenceClass

CLASSES = {
    "l4-2x": InferenceClass.model_validate(
        {
            "devices": [
                {
                    "name": "gpu",
                    "driver": "gpu.nvidia.com",
                    "device_class_name": "gpu.nvidia.com",
                    "count": 2,
                    "attributes": {"productName": {"string": "NVIDIA L4"}},
                    "capacity": {"memory": {"value": "23034Mi"}},
                },
                {"name": "ib", "driver": "ib.example.com", "claim": "Synthetic", "count": 1},
            ]
        }
    )
}
POOLS = [DeclaredPool("l4", "l4-2x", 3)]


def node(name, pool="l4", cordoned=False, ready=True):
    labels = {"gpufleet.io/pool": pool} if pool else {}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


XID = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}


def slice_for(node_name, count=2, memory="23034Mi", taint_device=None, taint=None):
    taint = XID if taint is None else taint
    devices = []
    tainted = {taint_device} if isinstance(taint_device, int) else set(taint_device or ())
    for i in range(count):
        dev = {
            "name": f"gpu-{i}",
            "attributes": {"productName": {"string": "NVIDIA L4"}},
            "capacity": {"memory": {"value": memory}},
        }
        if i in tainted:
            dev["taints"] = [{**taint, "timeAdded": "2026-11-25T10:00:00Z"}]
        devices.append(dev)
    return {
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpu"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node_name, "pool": {"name": node_name}, "devices": devices},
    }


def claim(name, node_name, devices, ours=False):
    labels = {"app.kubernetes.io/managed-by": "gpufleet.serving", "gpufleet.io/component": "serving"} if ours else {}
    return {
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "other-team", "labels": labels},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node_name, "device": d} for d in devices
                    ]
                }
            }
        },
    }


def healthy():
    nodes = [node(f"l4-{i}") for i in range(3)]
    slices = [slice_for(f"l4-{i}") for i in range(3)]
    return nodes, slices, []


def observe(nodes, slices, claims):
    return observe_cluster("c1", POOLS, CLASSES, nodes, slices, claims)


def test_a_healthy_pool_has_its_declared_nodes_and_no_drift():
    state = observe(*healthy())
    assert observed_pools([state]) == {"c1": {"l4": 3}}
    assert state.drift() == []


def test_our_own_claims_do_not_reduce_capacity():
    nodes, slices, _claims = healthy()
    state = observe(nodes, slices, [claim("chat-x", "l4-0", ["gpu-0", "gpu-1"], ours=True)])
    assert observed_pools([state]) == {"c1": {"l4": 3}} and state.foreign_claims == []


@pytest.mark.parametrize(
    ("fault", "note"),
    [
        (lambda n, s, c: n.__setitem__(1, node("l4-1", cordoned=True)), "c1/l4: 1 of 3 nodes cordoned"),
        (lambda n, s, c: n.__setitem__(1, node("l4-1", ready=False)), "c1/l4: 1 of 3 nodes NotReady"),
        (lambda n, s, c: s.pop(1), "c1/l4: node l4-1: 0 of 2 gpu devices (gpu.nvidia.com) published"),
        (
            lambda n, s, c: s.__setitem__(1, slice_for("l4-1", memory="16Gi")),
            "c1/l4: node l4-1: device gpu-0: capacity gpu.nvidia.com/memory is 16Gi, the class says 23034Mi",
        ),
        (
            lambda n, s, c: s.__setitem__(1, slice_for("l4-1", taint_device=(0, 1))),
            "c1/l4: node l4-1: device gpu-1 tainted gpu.nvidia.com/xid=79:NoSchedule",
        ),
        (
            lambda n, s, c: c.append(claim("batch", "l4-1", ["gpu-0", "gpu-1"])),
            "c1/l4: node l4-1: 2 device(s) (gpu-0, gpu-1) held by claim other-team/batch of another workload",
        ),
        (lambda n, s, c: n.pop(1), "c1/l4: 2 of 3 declared nodes carry the label gpufleet.io/pool=l4"),
    ],
    ids=[
        "cordoned",
        "not-ready",
        "slice-deleted",
        "less-memory",
        "every-device-tainted",
        "foreign-claim",
        "unlabelled",
    ],
)
def test_each_fault_costs_one_node_and_is_named(fault, note):
    nodes, slices, claims = (copy.deepcopy(x) for x in healthy())
    fault(nodes, slices, claims)
    state = observe(nodes, slices, claims)
    assert observed_pools([state]) == {"c1": {"l4": 2}}
    assert note in state.drift(), state.drift()


def test_a_foreign_claim_holds_its_devices_not_the_node():
    # Issue 24 item 6: another team's claim on one of a node's two GPUs leaves the node usable, with that GPU in use.
    nodes, slices, claims = healthy()
    claims.append(claim("batch", "l4-1", ["gpu-1"]))
    state = observe(nodes, slices, claims)
    assert observed_pools([state]) == {"c1": {"l4": {"nodes": 3, "held": [["gpu-1"]]}}}
    assert usable_nodes([state.to_dict()]) == observed_pools([state])
    assert state.to_dict()["pools"][0]["held_devices"] == [["gpu-1"]]
    assert state.foreign_claims == ["other-team/batch"]
    assert "c1/l4: node l4-1: 1 device(s) (gpu-1) held by claim other-team/batch of another workload" in state.drift()
    # Two claims holding both GPUs between them hold the node.
    claims.append(claim("etl", "l4-1", ["gpu-0"]))
    assert observed_pools([observe(nodes, slices, claims)]) == {"c1": {"l4": 2}}


def test_a_tainted_device_costs_that_device_not_the_node():
    # A driver taints one GPU of a node (an XID error): the node stays usable with its other GPU, and the taint reaches
    # placement on that device (in the dict shape fleet_read returns, too).
    nodes, slices, claims = healthy()
    slices[1] = slice_for("l4-1", taint_device=1)
    state = observe(nodes, slices, claims)
    tainted = {"devices": [], "taints": {"gpu-1": [XID]}}
    assert observed_pools([state]) == {"c1": {"l4": {"nodes": 3, "held": [tainted]}}}
    assert usable_nodes([state.to_dict()]) == observed_pools([state])
    assert state.to_dict()["pools"][0]["nodes"] == {}  # no unusable node
    assert "c1/l4: node l4-1: device gpu-1 tainted gpu.nvidia.com/xid=79:NoSchedule" in state.drift()
    # With a foreign claim on another node: the held node first (the ledger and the fleet view number from the top).
    claims.append(claim("batch", "l4-2", ["gpu-0"]))
    state = observe(nodes, slices, claims)
    assert observed_pools([state]) == {"c1": {"l4": {"nodes": 3, "held": [["gpu-0"], tainted]}}}
    assert usable_nodes([state.to_dict()]) == observed_pools([state])
    assert state.to_dict()["pools"][0]["held_devices"] == [["gpu-0"]]


def test_taints_the_class_declares_or_that_do_not_block_are_not_observed_faults():
    nodes, slices, claims = healthy()
    slices[0] = slice_for(
        "l4-0", taint_device=0, taint={"key": "gpu.nvidia.com/info", "value": "hot", "effect": "None"}
    )
    assert observed_pools([observe(nodes, slices, claims)]) == {"c1": {"l4": 3}}
    declared = copy.deepcopy(CLASSES["l4-2x"].model_dump(by_alias=True, exclude_none=True))
    declared["devices"][0]["instances"] = [{"taints": [XID]}, {}]
    classes = {"l4-2x": InferenceClass.model_validate(declared)}
    slices[0] = slice_for("l4-0", taint_device=0)
    state = observe_cluster("c1", POOLS, classes, nodes, slices, claims)
    assert observed_pools([state]) == {"c1": {"l4": 3}} and state.drift() == []


def test_placement_packs_around_a_tainted_gpu_and_explain_names_it():
    # Issue 24: one tainted GPU of a node leaves the others usable for placement; a request that tolerates the taint
    # may take it; explain names the tainted device.
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet

    nodes, slices, claims = healthy()
    nodes, slices = nodes[:1], slices[:1]
    slices[0] = slice_for("l4-0", taint_device=0)
    pools = [DeclaredPool("l4", "l4-2x", 1)]
    capacity = usable_nodes([observe_cluster("c1", pools, CLASSES, nodes, slices, claims).to_dict()])
    classes = {"l4-2x": CLASSES["l4-2x"].model_dump(by_alias=True, exclude_none=True)}

    def dep(name, replicas, tolerations=None):
        request = {"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 1}
        if tolerations:
            request["tolerations"] = tolerations
        member = {"role": "Standalone", "node_selector": {"devices": [request]}}
        return {
            "name": name,
            "replicas": replicas,
            "engines": [{"name": "main", "members": [member]}],
            "candidate_clusters": ["c1"],
        }

    fleet = {
        "classes": classes,
        "clusters": [{"name": "c1", "pools": [{"name": "l4", "class": "l4-2x", "nodes": 1}]}],
        "deployments": [dep("plain", 2), dep("tolerant", 1, [{"key": "gpu.nvidia.com/xid", "operator": "Exists"}])],
    }
    outcome = place_fleet(fleet, [], observed_nodes=capacity)
    plain = outcome.results["plain"]
    assert plain["scheduled"] == 1
    assert outcome.by_deployment()["plain"][0]["engines"][0]["members"][0]["allocations"] == [
        {"node": 0, "devices": ["gpu-1"]}
    ]
    assert plain["unschedulable"]["c1"]["pools"]["l4"] == (
        "engine main: no node has the devices its 1 pod(s) claim free (1 node(s), 0 unused; devices free: node 0 1 of "
        "2 (gpu-0 tainted gpu.nvidia.com/xid=79:NoSchedule))"
    )
    # The tolerating deployment takes the tainted GPU.
    assert outcome.by_deployment()["tolerant"][0]["engines"][0]["members"][0]["allocations"] == [
        {"node": 0, "devices": ["gpu-0"]}
    ]
    # Declared capacity knows nothing of the taint: both plain replicas fit.
    assert place_fleet(fleet, []).results["plain"]["scheduled"] == 2


def test_placement_allocates_around_devices_other_workloads_hold():
    # fleet.deploy: observed {nodes, held} reach placement as the pool's held devices: a 1-GPU replica fills the free
    # GPU of the half-held node before an untouched one (the ledger's first fit), a 2-GPU one needs an untouched node.
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet

    nodes, slices, claims = healthy()
    claims.append(claim("batch", "l4-1", ["gpu-1"]))
    capacity = usable_nodes([observe(nodes, slices, claims).to_dict()])
    classes = {"l4-2x": CLASSES["l4-2x"].model_dump(by_alias=True, exclude_none=True)}

    def dep(name, count, replicas):
        request = {"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": count}
        member = {"role": "Standalone", "node_selector": {"devices": [request]}}
        return {
            "name": name,
            "replicas": replicas,
            "engines": [{"name": "main", "members": [member]}],
            "candidate_clusters": ["c1"],
        }

    fleet = {
        "classes": classes,
        "clusters": [{"name": "c1", "pools": [{"name": "l4", "class": "l4-2x", "nodes": 3}]}],
        "deployments": [dep("one", 1, 1), dep("two", 2, 3)],
    }
    outcome = place_fleet(fleet, [], observed_nodes=capacity)
    one = outcome.by_deployment()["one"][0]["engines"][0]["members"][0]
    # Beside the foreign claim's gpu-1, on the node the ledger numbers from the top of the pool (design.md §12).
    assert one["allocations"] == [{"node": 2, "devices": ["gpu-0"]}]
    assert outcome.results["two"]["scheduled"] == 2  # two untouched nodes; the half-held one has no pair
    assert outcome.results["one"]["overcommitted"] == []
    # The next run observes the same claim: the replica is found beside it again, nothing changes.
    again = place_fleet(fleet, outcome.replicas, observed_nodes=capacity)
    assert not again.changed and again.replicas == outcome.replicas


def test_a_node_without_a_pool_label_that_publishes_gpus_is_named():
    nodes, slices, claims = healthy()
    nodes[2] = node("l4-2", pool=None)
    state = observe(nodes, slices, claims)
    assert state.unlabelled == ["l4-2"]
    assert "c1: node l4-2 publishes GPU-class devices but has no gpufleet.io/pool label" in state.drift()


def test_a_pool_never_counts_more_than_declared():
    nodes, slices, claims = healthy()
    nodes.append(node("l4-3"))
    slices.append(slice_for("l4-3"))
    assert observed_pools([observe(nodes, slices, claims)]) == {"c1": {"l4": 3}}


def test_observe_fleet_reads_only_the_clusters_it_has_objects_for():
    nodes, slices, claims = healthy()
    nodes[0] = node("l4-0", cordoned=True)
    fleet = {
        "clusters": [
            {"name": "c1", "pools": [{"name": "l4", "class": "l4-2x", "nodes": 3}]},
            {"name": "c2", "pools": [{"name": "l4", "class": "l4-2x", "nodes": 3}]},
        ]
    }
    states = observe_fleet(fleet, CLASSES, {"c1": nodes + slices + claims})
    assert observed_pools(states) == {"c1": {"l4": 2}}
    assert states[0].to_dict()["pools"][0]["nodes"] == {"l4-0": ["cordoned"]}


def test_placement_reads_the_same_capacity_back_from_the_returned_dicts():
    """fleet_read returns ClusterState.to_dict(); fleet_placement reads usable nodes and notes back from it."""
    nodes, slices, claims = healthy()
    nodes[0] = node("l4-0", cordoned=True)
    claims.append(claim("batch", "l4-1", ["gpu-0"]))
    cordoned, clean = observe(nodes, slices, claims), observe_cluster("c2", POOLS, CLASSES, *healthy())
    dicts = [cordoned.to_dict(), clean.to_dict()]
    assert usable_nodes(dicts) == observed_pools([cordoned, clean])
    assert usable_nodes(dicts) == {"c1": {"l4": {"nodes": 2, "held": [["gpu-0"]]}}, "c2": {"l4": 3}}
    assert pool_notes(dicts) == {"c1": {"l4": cordoned.pools[0].notes()}, "c2": {}}
    assert len(pool_notes(dicts)["c1"]["l4"]) == 2


def test_a_malformed_observation_is_named():
    with pytest.raises(GpufleetError, match=r"cluster_capacity\[1\]: not an observed cluster"):
        usable_nodes([observe(*healthy()).to_dict(), {"drift": []}])


def test_per_device_instances_are_expected_on_their_own_device():
    # design.md §2a: gpu-1 sits on another PCIe root. A node that publishes both GPUs on one root has drifted; one that
    # publishes the two roots, under either name, has not.
    klass = InferenceClass.model_validate(
        {
            "devices": [
                {
                    "name": "gpu",
                    "driver": "gpu.nvidia.com",
                    "device_class_name": "gpu.nvidia.com",
                    "count": 2,
                    "attributes": {"productName": {"string": "NVIDIA L4"}},
                    "capacity": {"memory": {"value": "23034Mi"}},
                    "instances": [
                        {"attributes": {"pcieRoot": {"string": "pci0000:00"}}},
                        {"attributes": {"pcieRoot": {"string": "pci0001:00"}}},
                    ],
                }
            ]
        }
    )
    nodes, slices, _claims = healthy()
    for s in slices:
        for i, dev in enumerate(s["spec"]["devices"]):
            dev["attributes"]["pcieRoot"] = {"string": f"pci000{i}:00"}
    state = observe_cluster("c1", POOLS, {"l4-2x": klass}, nodes, slices, [])
    assert observed_pools([state]) == {"c1": {"l4": 3}} and state.drift() == []
    swapped = slices[2]["spec"]["devices"]
    swapped[0]["attributes"]["pcieRoot"], swapped[1]["attributes"]["pcieRoot"] = (
        swapped[1]["attributes"]["pcieRoot"],
        swapped[0]["attributes"]["pcieRoot"],
    )
    # Published in another order (or under other names), the node still has the two GPUs the class declares: the
    # scheduler matches attributes, not names.
    state = observe_cluster("c1", POOLS, {"l4-2x": klass}, nodes, slices, [])
    assert observed_pools([state]) == {"c1": {"l4": 3}} and state.drift() == []
    # Both on one PCIe root: one declared GPU has no published match, and the drift names the device and value.
    swapped[1]["attributes"]["pcieRoot"] = {"string": "pci0001:00"}
    state = observe_cluster("c1", POOLS, {"l4-2x": klass}, nodes, slices, [])
    assert observed_pools([state]) == {"c1": {"l4": 2}}
    assert state.drift() == [
        "c1/l4: node l4-2: device gpu-0: attribute gpu.nvidia.com/pcieRoot is 'pci0001:00', the class says 'pci0000:00'"
    ]


def test_devices_are_matched_one_to_one_whatever_the_order():
    from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import compare_devices, match_devices

    numa0 = {"name": "a", "attributes": {"numa": {"int": 0}}}
    numa0_root = {"name": "b", "attributes": {"numa": {"int": 0}, "root": {"string": "x"}}}
    p1 = {"name": "p1", "attributes": {"numa": {"int": 0}, "root": {"string": "x"}}}
    p2 = {"name": "p2", "attributes": {"numa": {"int": 0}, "root": {"string": "y"}}}
    # A greedy first fit would give p1 to `a` and leave `b` without a device; the matching finds both.
    assert match_devices([numa0, numa0_root], "d", [p1, p2]) == {0: 1, 1: 0}
    assert compare_devices([numa0, numa0_root], "d", [p1, p2]) == (2, [])
    # One published device cannot satisfy two declared ones.
    assert compare_devices([numa0_root, numa0_root], "d", [p1, p2]) == (
        1,
        ["p2: attribute d/root is 'y', the class says 'x'"],
    )
    assert compare_devices([numa0, numa0], "d", [p1]) == (1, [])  # a missing device is counted, not explained
