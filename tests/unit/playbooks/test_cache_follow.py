"""Caches that follow placement (issue 30, item 1), through the playbooks in render mode on a copy of the example
inventory: a cache a deployment mounts, with no ``clusters`` (so ``follow``), is rendered only on the cluster the plan
placed the model on, though three clusters match the deployment; with no plan it is pre-warmed on all three and the
run says why; when the plan moves, the cache's files follow (the old cluster's are pruned)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from example_fleet import copy_example_inventory
from playbook_run import ANSIBLE_PLAYBOOK, run_playbook

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import ANNOTATION_SYNC_LAYER
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.document import Plan

PROD = {"eks-us-east-1", "gke-us-central1", "onprem-a"}
CACHE = "qwen-2-5-0-5b"


run = run_playbook  # playbooks/<playbook> over the inventory, rendering into render (tests/lib)


def cache_clusters(render: Path) -> set[str]:
    """Clusters whose render directory holds the cache's PVC."""
    out = set()
    for path in render.glob("*/ml-team/*.yaml"):
        obj = yaml.safe_load(path.read_text())
        if obj.get("kind") == "PersistentVolumeClaim" and obj["metadata"]["name"] == f"gpufleet-cache-{CACHE}":
            out.add(path.parts[-3])
    return out


def follow_inventory(tmp_path: Path, replicas: int) -> Path:
    inventory = copy_example_inventory(tmp_path / "inventory")
    caches = inventory / "group_vars" / "all" / "caches.yml"
    data = yaml.safe_load(caches.read_text())
    del data["gpufleet_model_caches"][0]["clusters"]  # unset: follow (a deployment mounts it)
    caches.write_text(yaml.safe_dump(data))
    set_replicas(inventory, replicas)
    return inventory


def set_replicas(inventory: Path, replicas: int) -> None:
    deployments = inventory / "group_vars" / "all" / "deployments.yml"
    data = yaml.safe_load(deployments.read_text())
    qwen = next(d for d in data["gpufleet_model_deployments"] if d["name"] == "qwen-demo")
    qwen["replicas"] = replicas
    qwen["clusters"] = "gpufleet_clusters:&prod"  # three clusters match
    deployments.write_text(yaml.safe_dump(data))


def placed(render: Path) -> set[str]:
    plan = json.loads((render / "_fleet" / "plan.json").read_text())
    return {r["cluster"] for r in plan["replicas"] if r["deployment"] == "qwen-demo"}


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_a_follow_cache_is_rendered_only_where_its_model_is_placed(tmp_path):
    inventory = follow_inventory(tmp_path, replicas=1)
    render = tmp_path / "rendered"

    # No plan yet: staged on every cluster the deployment may use (never fewer), and the run says so.
    out = run(inventory, "caches.yml", render)
    assert "follows placement, but there is no plan to follow" in out
    assert cache_clusters(render) == PROD

    run(inventory, "plan.yml", render)
    where = placed(render)
    assert len(where) == 1 and where <= PROD
    out = run(inventory, "caches.yml", render)
    assert f"cache {CACHE} follows placement: staged on {next(iter(where))}" in out
    assert cache_clusters(render) == where  # the two pre-warmed clusters' files are pruned

    # The cache's objects carry the caches sync wave (before the serving workloads).
    pvc = next((render / next(iter(where)) / "ml-team").glob("persistentvolumeclaim-*.yaml"))
    assert yaml.safe_load(pvc.read_text())["metadata"]["annotations"][ANNOTATION_SYNC_LAYER] == "caches"

    # A second replica: the plan puts it on another prod cluster, and the cache follows.
    set_replicas(inventory, 2)
    run(inventory, "plan.yml", render)
    where2 = placed(render)
    assert len(where2) == 2 and where <= where2
    run(inventory, "caches.yml", render)
    assert cache_clusters(render) == where2


def cold(render: Path) -> dict[tuple[str, str], dict]:
    plan = json.loads((render / "_fleet" / "plan.json").read_text())
    return {(c["deployment"], c["cluster"]): c for c in plan["placement"]["cold"]}


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_a_second_deployment_of_a_staged_model_lands_on_the_warm_cluster_and_the_plan_marks_cold_ones(tmp_path):
    """Render mode (warm = the cache is already staged in the render directory): the plan marks the first replica
    cold; once its cache is staged there, a second deployment mounting it goes to that cluster, not to the first
    cluster by name."""
    inventory = follow_inventory(tmp_path, replicas=1)
    deployments = inventory / "group_vars" / "all" / "deployments.yml"
    data = yaml.safe_load(deployments.read_text())
    qwen = next(d for d in data["gpufleet_model_deployments"] if d["name"] == "qwen-demo")
    qwen["clusters"] = "gpufleet_clusters:&onprem"
    deployments.write_text(yaml.safe_dump(data))
    render = tmp_path / "rendered"

    out = run(inventory, "plan.yml", render)
    assert cold(render)[("qwen-demo", "onprem-a")]["cold"] is True
    out = run(inventory, "caches.yml", render)
    assert f"cache {CACHE} follows placement: staged on onprem-a" in out

    second = {**qwen, "name": "qwen-second", "clusters": "gpufleet_clusters:&prod"}  # eks-us-east-1 first by name
    data["gpufleet_model_deployments"].append(second)
    deployments.write_text(yaml.safe_dump(data))
    run(inventory, "plan.yml", render)
    starts = cold(render)
    assert ("qwen-second", "onprem-a") in starts, starts
    assert starts[("qwen-second", "onprem-a")]["cold"] is False
    assert starts[("qwen-second", "onprem-a")]["basis"] == "staged"
    plan = Plan.from_document((render / "_fleet" / "plan.json").read_text(), "plan.json")
    assert plan.summary()["cold_replicas"] == sum(1 for c in starts.values() if c["cold"])
