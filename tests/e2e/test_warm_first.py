"""Caches that follow placement and warm-first placement on the local fleet (issue 30, items 1-2), apply mode:
plan -> caches -> deploy stages a follow cache only where its deployment runs and the hydration Job records on the
PVC what it holds; a second deployment of the same model then lands on that warm cluster (lf-alpha would be first by
name), and the plan marks which replicas start cold."""

from __future__ import annotations

import copy
import json
import re

import yaml
from conftest import Fleet, wait_for

CACHE = "tiny-weights"
PVC = f"gpufleet-cache-{CACHE}"


#: Force every value fleet_info and fleet_plan return through a file (the role's threshold is 200,000 characters).
HANDED_OFF = ("-e", "__model_cache_handoff_over=0")


def deployments(fleet: Fleet) -> tuple[dict, list]:
    path = fleet.inventory / "group_vars" / "all" / "deployments.yml"
    data = yaml.safe_load(path.read_text())
    return data, data["gpufleet_model_deployments"]


def write(fleet: Fleet, name: str, data: dict) -> None:
    (fleet.inventory / "group_vars" / "all" / name).write_text("---\n" + yaml.safe_dump(data, sort_keys=False))


def warm_deployment(chat: dict, name: str, clusters: str) -> dict:
    dep = copy.deepcopy(chat)
    dep.update(name=name, replicas=1, clusters=clusters, cache=CACHE)
    engine = dep["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
    engine["args"] = []  # the cache is used: --model=/mnt/models is added
    return dep


def pvcs(fleet: Fleet) -> dict[str, dict]:
    out = {}
    for host in fleet.names:
        for pvc in fleet.list(host, "", "v1", "persistentvolumeclaims"):
            if pvc["metadata"]["name"] == PVC:
                out[host] = pvc["metadata"].get("annotations") or {}
    return out


def cold(fleet: Fleet) -> dict[tuple[str, str], dict]:
    plan = json.loads((fleet.work / "placement-state.plan.json").read_text())
    return {(c["deployment"], c["cluster"]): c for c in plan["placement"]["cold"]}


def test_a_follow_cache_is_hydrated_where_its_model_runs_and_a_second_deployment_lands_there(fleet: Fleet) -> None:
    caches = yaml.safe_load((fleet.inventory / "group_vars" / "all" / "caches.yml").read_text())
    del caches["gpufleet_model_caches"][0]["clusters"]  # follow: a deployment mounts it
    write(fleet, "caches.yml", caches)
    data, deps = deployments(fleet)
    chat = next(d for d in deps if d["name"] == "chat")
    chat["replicas"] = 1  # lf-gamma keeps a free GPU node for warm-b (its other one is warm-a's)
    # The scale-down first, in its own run: on the session fleet chat may hold lf-gamma's nodes, and a run applies and
    # awaits new replicas before it removes the ones placement dropped, so warm-a would wait for nodes that only that
    # same run's prune frees (reported as not reconciled; see the session notes of 2026-11-26).
    write(fleet, "deployments.yml", data)
    fleet.playbook("deploy.yml")
    deps.append(warm_deployment(chat, "warm-a", "lf-gamma"))
    write(fleet, "deployments.yml", data)

    out = fleet.playbook("plan.yml").stdout
    assert cold(fleet)[("warm-a", "lf-gamma")]["cold"] is True, out[-3000:]
    out = fleet.playbook("caches.yml").stdout
    assert f"cache {CACHE} follows placement: staged on lf-gamma" in out, out[-3000:]
    assert re.search(rf"{CACHE}.*lf-gamma.*Ready", out), out[-3000:]
    fleet.playbook("deploy.yml")
    annotations = pvcs(fleet)
    assert set(annotations) == {"lf-gamma"}, annotations  # not on lf-alpha / lf-beta
    assert annotations["lf-gamma"]["gpufleet.io/hydrated-source"] == "http://127.0.0.1:9/tiny/model.safetensors@"

    deps.append(warm_deployment(chat, "warm-b", "gpufleet_clusters"))
    write(fleet, "deployments.yml", data)
    out = fleet.playbook("plan.yml").stdout
    starts = cold(fleet)
    assert ("warm-b", "lf-gamma") in starts, (starts, out[-3000:])  # lf-alpha is first by name
    assert starts[("warm-a", "lf-gamma")]["cold"] is False  # hydrated there now
    assert starts[("warm-b", "lf-gamma")] | {"eta_seconds": 0} == {
        "deployment": "warm-b",
        "cluster": "lf-gamma",
        "index": 0,
        "cache": CACHE,
        "cold": False,
        "basis": "hydrated",
        "eta_seconds": 0,
        "throughput": None,
        "throughput_source": None,
    }


def test_a_follow_cache_leaves_a_cluster_only_once_nothing_there_mounts_it(fleet: Fleet) -> None:
    """Apply mode: when the placement moves a follow cache's only deployment to another cluster, the cache's PVC,
    Job and ConfigMap stay on the old cluster while the old replica still mounts them, stay in a play narrower than
    the fleet (--limit), and are removed, and reported, once the replica was drained."""
    caches = yaml.safe_load((fleet.inventory / "group_vars" / "all" / "caches.yml").read_text())
    caches["gpufleet_model_caches"][0].pop("clusters", None)  # follow: a deployment mounts it
    write(fleet, "caches.yml", caches)
    data, deps = deployments(fleet)
    chat = next(d for d in deps if d["name"] == "chat")
    chat["replicas"] = 1
    deps[:] = [d for d in deps if d.get("cache") != CACHE] + [warm_deployment(chat, "move-a", "lf-gamma")]
    write(fleet, "deployments.yml", data)
    for playbook in ("plan.yml", "caches.yml", "deploy.yml"):
        fleet.playbook(playbook)
    assert set(pvcs(fleet)) == {"lf-gamma"}

    # The deployment moves to lf-beta: the cache is staged there; lf-gamma's old replica still mounts its volume.
    next(d for d in deps if d["name"] == "move-a")["clusters"] = "lf-beta"
    write(fleet, "deployments.yml", data)
    fleet.playbook("plan.yml")
    # The fleet and the plan's replicas handed over through files (as past 200,000 characters: issue 26) on the
    # runs that decide about leaving: the decision reads the replicas back from the handle.
    out = fleet.playbook("caches.yml", *HANDED_OFF).stdout
    assert f"cache {CACHE} on cluster lf-gamma: kept, " in out and "still mount(s) its volume" in out, out[-4000:]
    assert set(pvcs(fleet)) == {"lf-beta", "lf-gamma"}

    fleet.playbook("deploy.yml")  # the replacement on lf-beta is Ready, then lf-gamma's replica is drained

    # A play narrower than the fleet never removes it.
    out = fleet.playbook("caches.yml", "--limit", "lf-beta,lf-gamma").stdout
    assert "the play is narrower than the fleet (outside it: lf-alpha)" in out, out[-4000:]
    assert set(pvcs(fleet)) == {"lf-beta", "lf-gamma"}

    out = fleet.playbook("caches.yml", *HANDED_OFF).stdout
    assert re.search(
        rf"cache {CACHE} on cluster lf-gamma: removed \(Job [\w-]+, ConfigMap [\w-]+, "
        rf"PersistentVolumeClaim {PVC}\)",
        out,
    ), out[-4000:]
    wait_for("the cache volume to leave lf-gamma", lambda: set(pvcs(fleet)) == {"lf-beta"}, timeout=120)
    owned = [
        o["metadata"]["name"]
        for kind in (("batch", "v1", "jobs"), ("", "v1", "configmaps"))
        for o in fleet.list("lf-gamma", *kind, selector=f"gpufleet.io/cache={CACHE}")
    ]
    assert owned == [], owned
    again = fleet.playbook("caches.yml").stdout  # nothing left to remove: nothing said
    assert "lf-gamma: removed" not in again and "lf-gamma: kept" not in again, again[-3000:]
