"""Issue 33, item 3: a deployment's own Kueue queue (``queue: {kind: kueue, name}``, not only a cluster's default
``gpufleet_queue``) bounds where it is placed. Observed capacity reads, on each cluster, the deployment's LocalQueue in
its namespace and the ClusterQueue it submits to (what fleet_read lists), and placement never puts more of its
replicas there than nominalQuota minus usage admits; its replicas already admitted keep their slots; explain names the
queue."""

from __future__ import annotations

import copy
from typing import Any

from test_capacity import CLASSES, healthy

from ansible_collections.gpufleet.serving.plugins.module_utils import queues
from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import observe_fleet, queue_quotas, usable_nodes
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet


def cluster_queue(name: str, quota: int, used: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["gpu.nvidia.com"],
                    "flavors": [{"name": "l4", "resources": [{"name": "gpu.nvidia.com", "nominalQuota": quota}]}],
                }
            ]
        },
        "status": {"flavorsUsage": [{"name": "l4", "resources": [{"name": "gpu.nvidia.com", "total": str(used)}]}]},
    }


def local_queue(namespace: str, name: str, target: str) -> dict[str, Any]:
    return {"kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": target}}


def fleet(replicas: int = 3, queue: str | None = "team-a") -> dict[str, Any]:
    pools = [{"name": "l4", "class": "l4-2x", "nodes": 3}]
    request = {"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 1}
    dep: dict[str, Any] = {
        "name": "chat", "namespace": "ml", "replicas": replicas, "candidate_clusters": ["c1", "c2"],
        "engines": [{"name": "main", "members": [{"role": "Standalone", "node_selector": {"devices": [request]}}]}],
    }  # fmt: skip
    if queue:
        dep["queue"] = {"kind": "kueue", "name": queue}
    return {
        "classes": {"l4-2x": CLASSES["l4-2x"].model_dump(by_alias=True, exclude_none=True)},
        "clusters": [{"name": "c1", "pools": pools}, {"name": "c2", "pools": pools}],
        "deployments": [dep],
    }


def kueue_c1(quota: int = 2, used: int = 0) -> list[dict[str, Any]]:
    """c1's Kueue objects: ml/team-a -> gpus (the quota), ml/other and team-b/team-a -> big (100 GPUs: not chat's)."""
    return [
        cluster_queue("gpus", quota, used),
        cluster_queue("big", 100, 0),
        local_queue("ml", "team-a", "gpus"),
        local_queue("ml", "other", "big"),
        local_queue("team-b", "team-a", "big"),
    ]


def place(
    data: dict[str, Any],
    c1_extra: list[dict[str, Any]],
    observed: list[dict[str, Any]] | None = None,
    c2_nodes: int = 3,
):
    nodes, slices, _claims = healthy()
    c2 = [*nodes[:c2_nodes], *slices[:c2_nodes]]  # c2's other nodes are not there (observed capacity)
    states = [s.to_dict() for s in observe_fleet(data, CLASSES, {"c1": [*nodes, *slices, *c1_extra], "c2": c2})]
    return (
        place_fleet(data, observed or [], observed_nodes=usable_nodes(states), queue_quota=queue_quotas(states)),
        states,
    )


def test_observed_capacity_reads_the_deployments_own_localqueue_and_its_clusterqueue():
    data = fleet()
    assert queues.uses_kueue(data)  # fleet_read reads Kueue's kinds for a deployment's own queue too
    assert not queues.uses_kueue(fleet(queue=None))
    _outcome, states = place(data, kueue_c1(quota=5, used=2))
    c1 = next(s for s in states if s["cluster"] == "c1")
    assert c1["queue_quota"] == {"chat": {"queue": "ml/team-a", "cluster_queue": "gpus", "free": {"gpu.nvidia.com": 3}}}
    assert "queue_quota" not in next(s for s in states if s["cluster"] == "c2")  # no Kueue there: nothing applies
    # The cluster's own capacity is not bounded by a deployment's queue (other deployments share the cluster).
    assert usable_nodes(states)["c1"] == {"l4": 3}


def test_placement_never_places_beyond_the_queues_nominal_quota_minus_usage_and_explain_names_it():
    alone, _states = place(fleet(queue=None), kueue_c1())
    assert sorted(r["cluster"] for r in alone.replicas) == ["c1", "c1", "c2"]  # the spread without any queue
    outcome, _states = place(fleet(replicas=6), kueue_c1(quota=3, used=1))
    where = sorted(r["cluster"] for r in outcome.replicas)
    assert where.count("c1") == 2 and where.count("c2") == 4  # 3 - 1 = 2 admitted on c1, c2 takes the rest
    note = outcome.results["chat"]["queue_quota"]["c1"]
    assert "Kueue LocalQueue ml/team-a" in note and "ClusterQueue gpus" in note and "2 gpu.nvidia.com" in note
    assert any("ml/team-a" in line for line in outcome.explain(["chat"]))
    # Quota for none: nothing on c1, though c1 has six free GPUs.
    none, _states = place(fleet(replicas=2), kueue_c1(quota=4, used=4))
    assert sorted(r["cluster"] for r in none.replicas) == ["c2", "c2"]


def test_a_missing_localqueue_admits_nothing_on_a_cluster_that_runs_kueue():
    objects = [o for o in kueue_c1() if o["metadata"].get("name") != "team-a" or o["metadata"]["namespace"] != "ml"]
    outcome, states = place(fleet(replicas=2), objects)
    assert sorted(r["cluster"] for r in outcome.replicas) == ["c2", "c2"]
    c1 = next(s for s in states if s["cluster"] == "c1")
    assert c1["queue_quota"]["chat"]["missing"] == "Kueue LocalQueue ml/team-a not found"
    assert "admits nothing here" in outcome.results["chat"]["queue_quota"]["c1"]


def slots(replicas: list[dict[str, Any]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Each replica's (cluster, index) -> the nodes and devices it is allocated."""
    return {(r["cluster"], r["index"]): r["engines"][0]["members"][0]["allocations"] for r in replicas}


def test_replicas_already_admitted_keep_their_slots_and_take_none_of_the_free_quota():
    """A second run: the two replicas on c1 are admitted (in the ClusterQueue's usage), so they keep their slots and
    do not count again against what is left: with quota 3 and usage 2, c1 takes exactly one more. c2 (one node, two
    GPUs) takes two."""
    first, _states = place(fleet(replicas=3), kueue_c1(quota=2, used=0), c2_nodes=1)
    assert sorted(r["cluster"] for r in first.replicas) == ["c1", "c1", "c2"]
    kept = slots(first.replicas)
    spent, _states = place(fleet(replicas=3), kueue_c1(quota=2, used=2), copy.deepcopy(first.replicas), c2_nodes=1)
    assert slots(spent.replicas) == kept  # the quota is spent by them: each keeps its node and devices
    grown, _states = place(fleet(replicas=5), kueue_c1(quota=3, used=2), copy.deepcopy(first.replicas), c2_nodes=1)
    assert kept.items() <= slots(grown.replicas).items()
    assert sorted(r["cluster"] for r in grown.replicas) == ["c1", "c1", "c1", "c2", "c2"]
    over, _states = place(fleet(replicas=6), kueue_c1(quota=3, used=2), copy.deepcopy(first.replicas), c2_nodes=1)
    assert sorted(r["cluster"] for r in over.replicas) == ["c1", "c1", "c1", "c2", "c2"]  # 5 of 6: never beyond
    assert over.results["chat"]["condition"]["reason"] == "InsufficientCapacity"


def test_replicas_read_back_from_a_cluster_holding_whole_nodes_leave_only_the_free_quota():
    """Apply mode reads the placed replicas back from the clusters' objects (the placement annotation: no device
    requests) and a replica that takes every device of its node has no allocations (it holds the node whole). The
    quota still bounds the rest of the pool: with quota 4 spent by the two two-GPU replicas kept on c1, no third goes
    there though spreading would put it there (found on the local fleet's real Kueue: tests/e2e/test_kueue_queue.py);
    with quota 6, exactly one more."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import ReplicaRecord

    def two_gpus(data: dict[str, Any]) -> dict[str, Any]:
        data["deployments"][0]["engines"][0]["members"][0]["node_selector"]["devices"][0]["count"] = 2
        return data

    first, _states = place(two_gpus(fleet(replicas=3)), kueue_c1(quota=4, used=0))
    assert sorted(r["cluster"] for r in first.replicas) == ["c1", "c1", "c2"]
    assert not any(m.get("allocations") for r in first.replicas for m in r["engines"][0]["members"])  # whole nodes
    read_back = [r.to_compact() for r in ReplicaRecord.parse_list(first.replicas, "observed")]

    def where(outcome: Any) -> list[str]:
        return sorted(r["cluster"] for r in outcome.replicas)

    spent, _states = place(two_gpus(fleet(replicas=5)), kueue_c1(quota=4, used=4), copy.deepcopy(read_back))
    assert where(spent) == ["c1", "c1", "c2", "c2", "c2"]
    assert "leaves 0 gpu.nvidia.com" in spent.results["chat"]["queue_quota"]["c1"]
    alone, _states = place(two_gpus(fleet(replicas=5, queue=None)), kueue_c1(), copy.deepcopy(read_back))
    assert where(alone).count("c1") == 3  # without the queue: the spread puts the third there
    more, _states = place(two_gpus(fleet(replicas=5)), kueue_c1(quota=6, used=4), copy.deepcopy(read_back))
    assert where(more).count("c1") == 3
    assert {(r["cluster"], r["index"]) for r in read_back} <= {(r["cluster"], r["index"]) for r in more.replicas}


def test_a_clusters_default_queue_spent_by_the_fleets_own_replicas_does_not_overcommit_them():
    """The cluster's default ``gpufleet_queue`` with its quota spent by the fleet's own two admitted replicas on c1
    (their ResourceClaims are read with the rest): they keep their devices (in the usage already) and the pool is
    not overcommitted; a third replica still goes elsewhere. A claim of a deployment with a queue of its own is not
    in this queue's usage and gets no such pass."""
    from test_capacity import claim

    data = fleet(replicas=3, queue=None)
    data["clusters"][0]["queue"] = {"kind": "kueue", "name": "team-a"}
    first, _states = place(data, kueue_c1(quota=2, used=0), c2_nodes=1)
    assert sorted(r["cluster"] for r in first.replicas) == ["c1", "c1", "c2"]
    claims = []
    for r in first.replicas:
        if r["cluster"] == "c1":
            (alloc,) = r["engines"][0]["members"][0]["allocations"]
            running = claim(f"{r['name']}-gpu", f"l4-{alloc['node']}", alloc["devices"], ours=True)
            running["metadata"]["labels"]["gpufleet.io/deployment"] = "chat"
            claims.append(running)
    second, states = place(data, [*kueue_c1(quota=2, used=2), *claims], copy.deepcopy(first.replicas), c2_nodes=1)
    assert second.results["chat"]["condition"]["reason"] != "PoolOvercommitted", second.results["chat"]["condition"]
    assert slots(second.replicas) == slots(first.replicas)
    c1 = next(s for s in states if s["cluster"] == "c1")
    assert any("beyond the quota of Kueue queue team-a" in n for p in c1["pools"] for n in p["notes"])
    # The same claims of a deployment that names its own queue: not admitted through team-a, so they get no pass.
    data["deployments"][0]["queue"] = {"kind": "kueue", "name": "other"}  # ml/other -> big (100 GPUs)
    _outcome, states = place(data, [*kueue_c1(quota=2, used=2), *claims], copy.deepcopy(first.replicas), c2_nodes=1)
    c1 = next(s for s in states if s["cluster"] == "c1")
    assert usable_nodes([c1])["c1"] == {"l4": 0}  # every device held: the default queue has nothing left


def test_kueue_refuses_claims_with_cel_selectors_so_placement_puts_none_there_and_says_why():
    """Kueue's DRA accounting (v0.17 pkg/dra/claims.go) marks a Workload whose ResourceClaimTemplate has CEL selectors
    (or constraints, firstAvailable, allocationMode All) Inadmissible: the real Kueue on the local fleet answers
    ``CEL selectors are not supported``. Through a ClusterQueue that counts the DeviceClass, such a deployment is
    admitted nowhere on that cluster; explain says why and what to change."""
    data = fleet(replicas=2)
    request = data["deployments"][0]["engines"][0]["members"][0]["node_selector"]["devices"][0]
    request["selectors"] = [{"cel": 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA L4"'}]
    outcome, states = place(data, kueue_c1(quota=4, used=0))
    assert sorted(r["cluster"] for r in outcome.replicas) == ["c2", "c2"]
    c1 = next(s for s in states if s["cluster"] == "c1")
    assert c1["queue_quota"]["chat"]["refused"] == "CEL selectors are not supported"
    note = outcome.results["chat"]["queue_quota"]["c1"]
    assert "Kueue's DRA accounting refuses this deployment's claims (CEL selectors are not supported" in note
    assert "admits nothing here" in note
    # A ClusterQueue that counts only nvidia.com/gpu (a device plugin's extended resource) is not DRA accounting.
    extended = kueue_c1(quota=4, used=0)
    for group in extended[0]["spec"]["resourceGroups"]:
        group["coveredResources"] = ["nvidia.com/gpu"]
        group["flavors"][0]["resources"][0]["name"] = "nvidia.com/gpu"
    extended[0]["status"] = {}
    outcome, _states = place(data, extended)
    assert sorted(r["cluster"] for r in outcome.replicas) == ["c1", "c2"]
    # Without selectors it is counted: the same queue admits it.
    request["selectors"] = []
    outcome, _states = place(data, kueue_c1(quota=4, used=0))
    assert sorted(r["cluster"] for r in outcome.replicas) == ["c1", "c2"]


def test_what_kueue_dra_accounting_refuses_of_a_deployments_requests():
    def dep(**selector: Any) -> dict[str, Any]:
        return {"engines": [{"members": [{"node_selector": selector}]}]}

    plain = {"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 2, "selectors": []}
    assert queues.kueue_dra_refusal(dep(devices=[plain])) is None
    assert queues.kueue_dra_refusal(dep(devices=[{**plain, "selectors": [{"cel": "true"}]}])) == (
        "CEL selectors are not supported"
    )
    assert "constraints" in str(queues.kueue_dra_refusal(dep(devices=[plain], constraints=[{"match_attribute": "x"}])))
    alternatives = {**plain, "first_available": [{"name": "a", "device_class_name": "gpu.nvidia.com"}]}
    assert "firstAvailable" in str(queues.kueue_dra_refusal(dep(devices=[alternatives])))
    assert "All" in str(queues.kueue_dra_refusal(dep(devices=[{"name": "gpu", "allocation_mode": "All"}])))
