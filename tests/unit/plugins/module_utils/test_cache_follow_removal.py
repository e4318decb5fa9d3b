"""Apply mode, caches that follow placement (issue 30): when the placement leaves a cluster, that follow cache's
PVC, Job and ConfigMap are removed from it only when nothing placed, serving or running there mounts the volume, and
never in a play narrower than the fleet (unless gpufleet_allow_partial_play)."""

from __future__ import annotations

import copy

import pytest
from test_cache_placement import PROD, follow_fleet

from ansible_collections.gpufleet.serving.plugins.filter.cache_manifests import cache_follow_removal
from ansible_collections.gpufleet.serving.plugins.module_utils.cache_placement import (
    KEEP,
    NOTHING,
    REMOVE,
    follow_removal,
    staged_clusters,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import cache_objects
from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import render_serving_manifests

FLEET = "demo-fleet"
CACHE = "qwen-2-5-0-5b"


def setup(replica_on: str = PROD[0], left: str = PROD[1]):
    """The fleet, the cache staged by a plan that put qwen-demo's one replica on ``replica_on``, and the cache's
    objects as they were applied on ``left`` (the cluster the placement left)."""
    fleet = follow_fleet(replicas=1)
    replicas = [{"deployment": "qwen-demo", "cluster": replica_on, "index": 0}]
    staged = staged_clusters(fleet["caches"], fleet["deployments"], replicas)
    cache = next(c for c in staged if c["name"] == CACHE)
    assert cache["candidate_clusters"] == [replica_on]
    objects = cache_objects(fleet["caches"][0], left, "print('hydrate')\n", storage_class="rwx", fleet=FLEET)
    return fleet, replicas, cache, objects


def serving_objects(fleet: dict) -> tuple[str, list[dict]]:
    """Where the fleet's own placement puts qwen-demo, and what the collection renders to serve it there (its workload
    mounts the cache's volume)."""
    record = next(r for r in place_fleet(fleet, []).replicas if r["deployment"] == "qwen-demo")
    raw = next(d for d in fleet["deployments"] if d["name"] == "qwen-demo")
    cluster = record["cluster"]
    return cluster, render_serving_manifests([record], raw, cluster=cluster, caches=fleet["caches"], fleet=FLEET)


def decide(cache, cluster, objects, users=(), **kw):
    kw.setdefault("fleet", FLEET)
    kw.setdefault("deployments", follow_fleet(replicas=1)["deployments"])
    return follow_removal(cache, cluster, objects, users, **kw)


def test_the_cluster_the_placement_left_loses_the_cache_job_configmap_and_volume_in_that_order():
    _fleet, replicas, cache, objects = setup()
    out = decide(cache, PROD[1], list(reversed(objects)), replicas=replicas)
    assert out["action"] == REMOVE
    assert [d["kind"] for d in out["delete"]] == ["Job", "ConfigMap", "PersistentVolumeClaim"]
    pvc = next(o for o in objects if o["kind"] == "PersistentVolumeClaim")
    assert {"kind": "PersistentVolumeClaim", "namespace": "ml-team", "name": pvc["metadata"]["name"]} in out["delete"]
    assert out["line"].startswith(f"cache {CACHE} on cluster {PROD[1]}: removed (Job ")
    assert "nothing mounts its volume" in out["line"]


def test_a_pod_or_workload_that_still_mounts_the_volume_keeps_it_and_the_run_says_which():
    # The old replica's workload on the cluster the placement left (model_deployment drains it after the caches).
    old, serving = serving_objects(follow_fleet(replicas=1))
    _fleet, replicas, cache, objects = setup(replica_on=next(c for c in PROD if c != old), left=old)
    workloads = [o for o in serving if o["kind"] in ("Deployment", "LeaderWorkerSet", "StatefulSet")]
    assert workloads, [o["kind"] for o in serving]
    out = decide(cache, old, objects, workloads, replicas=replicas)
    assert out["action"] == KEEP and out["delete"] == []
    assert f"{workloads[0]['kind']} ml-team/{workloads[0]['metadata']['name']}" in out["line"]
    assert "still mount(s) its volume" in out["line"]
    # A user's bare pod mounting the claim keeps it too; once it finished, it does not.
    claim = next(o for o in objects if o["kind"] == "PersistentVolumeClaim")["metadata"]["name"]
    pod = {
        "kind": "Pod",
        "metadata": {"name": "notebook", "namespace": "ml-team"},
        "spec": {"volumes": [{"name": "m", "persistentVolumeClaim": {"claimName": claim}}]},
        "status": {"phase": "Running"},
    }
    assert decide(cache, old, objects, [pod], replicas=replicas)["action"] == KEEP
    pod["status"]["phase"] = "Succeeded"
    assert decide(cache, old, objects, [pod], replicas=replicas)["action"] == REMOVE
    # A pod mounting the same claim name in another namespace is another volume.
    other = copy.deepcopy(pod)
    other["metadata"]["namespace"] = "elsewhere"
    other["status"]["phase"] = "Running"
    assert decide(cache, old, objects, [other], replicas=replicas)["action"] == REMOVE


def test_the_cache_s_own_hydration_pod_does_not_keep_it():
    _fleet, replicas, cache, objects = setup()
    job = next(o for o in objects if o["kind"] == "Job")
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "hydrate-x",
            "namespace": "ml-team",
            "labels": job["spec"]["template"]["metadata"]["labels"],
        },
        "spec": job["spec"]["template"]["spec"],
        "status": {"phase": "Running"},
    }
    assert decide(cache, PROD[1], objects, [pod, job], replicas=replicas)["action"] == REMOVE


def test_a_play_narrower_than_the_fleet_keeps_the_volume_unless_partial_plays_may_delete():
    _fleet, replicas, cache, objects = setup()
    out = decide(cache, PROD[1], objects, replicas=replicas, outside_play=[PROD[2], PROD[0]])
    assert out["action"] == KEEP
    assert f"outside it: {PROD[0]}, {PROD[2]}" in out["line"]
    assert "set gpufleet_allow_partial_play to remove it" in out["line"]
    allowed = decide(cache, PROD[1], objects, replicas=replicas, outside_play=[PROD[2]], allow_partial_play=True)
    assert allowed["action"] == REMOVE


def test_a_replica_still_serving_on_the_cluster_keeps_the_cache():
    _fleet, replicas, cache, objects = setup()
    observed = [{"deployment": "qwen-demo", "cluster": PROD[1], "index": 0}]
    out = decide(cache, PROD[1], objects, replicas=replicas, observed=observed)
    assert out["action"] == KEEP
    assert (
        out["line"]
        == f"cache {CACHE} on cluster {PROD[1]}: kept, a replica of qwen-demo (which mounts it) is still serving here"
    )
    # A replica of a deployment that does not mount this cache does not keep it.
    other = [{"deployment": "another-model", "cluster": PROD[1], "index": 0}]
    assert decide(cache, PROD[1], objects, replicas=replicas, observed=other)["action"] == REMOVE


def test_another_fleet_s_objects_and_unadopted_unlabelled_ones_are_never_deleted():
    _fleet, replicas, cache, objects = setup()
    theirs = copy.deepcopy(objects)
    for obj in theirs:
        obj["metadata"]["labels"]["gpufleet.io/fleet"] = "other-fleet"
    out = decide(cache, PROD[1], theirs, replicas=replicas)
    assert out["action"] == NOTHING and out["delete"] == []
    assert len(out["kept"]) == 3 and all("fleet other-fleet's" in k for k in out["kept"])
    unlabelled = copy.deepcopy(objects)
    for obj in unlabelled:
        del obj["metadata"]["labels"]["gpufleet.io/fleet"]
    assert decide(cache, PROD[1], unlabelled, replicas=replicas)["action"] == NOTHING
    adopted = decide(cache, PROD[1], unlabelled, replicas=replicas, adopt_unlabelled=True)
    assert adopted["action"] == REMOVE and len(adopted["delete"]) == 3


def test_objects_of_another_cache_or_namespace_are_not_this_cache_s():
    _fleet, replicas, cache, objects = setup()
    stray = copy.deepcopy(objects)
    for obj in stray:
        obj["metadata"]["labels"]["gpufleet.io/cache"] = "another-cache"
    assert decide(cache, PROD[1], stray, replicas=replicas)["action"] == NOTHING
    assert decide(cache, PROD[1], [], replicas=replicas) == {"action": NOTHING, "delete": [], "kept": [], "line": ""}


def test_an_adopted_volume_is_never_deleted():
    _fleet, replicas, cache, objects = setup()
    cache = {**cache, "storage": {**(cache.get("storage") or {}), "backend": "existing_pvc"}}
    out = decide(cache, PROD[1], objects, replicas=replicas)
    assert "PersistentVolumeClaim" not in [d["kind"] for d in out["delete"]]
    assert any("the cache adopts it" in k for k in out["kept"])


def test_only_a_follow_cache_the_placement_left_can_be_removed():
    fleet, replicas, cache, objects = setup()
    with pytest.raises(GpufleetError, match=f"cache {CACHE} is staged on cluster {PROD[0]}"):
        decide(cache, PROD[0], objects, replicas=replicas)
    no_plan = staged_clusters(fleet["caches"], fleet["deployments"], None)[0]
    with pytest.raises(GpufleetError, match="not staged by placement"):
        decide(no_plan, PROD[1], objects)


def test_the_filter_checks_its_arguments_and_takes_the_fleet_identity():
    fleet, replicas, cache, objects = setup()
    out = cache_follow_removal(
        cache,
        PROD[1],
        objects,
        [],
        deployments=fleet["deployments"],
        replicas=replicas,
        fleet=FLEET,
        adopt_unlabelled=None,
        outside_play=[],
        allow_partial_play=False,
    )
    assert out["action"] == REMOVE
    with pytest.raises(Exception, match="allow_partial_play must be true or false"):
        cache_follow_removal(cache, PROD[1], objects, fleet=FLEET, allow_partial_play="yes")
    with pytest.raises(Exception, match="objects must be a list"):
        cache_follow_removal(cache, PROD[1], {"kind": "Job"}, fleet=FLEET)
