"""LoRA adapters are staged where their deployment is placed (issue 33, item 1), through the playbooks in render mode
on a copy of the example inventory: plan.yml places qwen-demo (two adapters) on one of three prod clusters; caches.yml
writes both adapters' PVC, hydrator ConfigMap and Job on that cluster only, in the caches sync wave, annotated as
adapter artifacts; deploy.yml renders vLLM's LoRA flags and mounts the adapters' PVCs there."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from example_fleet import copy_example_inventory
from test_cache_follow import PROD, run

from ansible_collections.gpufleet.serving.plugins.module_utils.adapters import ANNOTATION_ARTIFACT_KIND
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import ANNOTATION_SYNC_LAYER

ADAPTERS = [
    {"name": "sql-lora", "source": {"hugging_face": {"repo": "org/qwen-sql-lora"}}, "revision": "abc123"},
    {"name": "docs-lora", "source": {"s3": {"uri": "s3://adapters/docs-lora"}}},
]
PVCS = {"gpufleet-cache-qwen-demo-lora-sql-lora", "gpufleet-cache-qwen-demo-lora-docs-lora"}


def adapter_inventory(tmp_path: Path) -> Path:
    inventory = copy_example_inventory(tmp_path / "inventory")
    deployments = inventory / "group_vars" / "all" / "deployments.yml"
    data = yaml.safe_load(deployments.read_text())
    qwen = next(d for d in data["gpufleet_model_deployments"] if d["name"] == "qwen-demo")
    qwen["replicas"] = 1
    qwen["clusters"] = "gpufleet_clusters:&prod"  # three clusters match
    qwen["adapters"] = ADAPTERS
    deployments.write_text(yaml.safe_dump(data))
    return inventory


def adapter_objects(render: Path) -> dict[str, list[dict]]:
    """Per cluster, the rendered objects annotated as adapter artifacts."""
    out: dict[str, list[dict]] = {}
    for path in render.glob("*/ml-team/*.yaml"):
        obj = yaml.safe_load(path.read_text())
        if (obj.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_ARTIFACT_KIND) == "adapter":
            out.setdefault(path.parts[-3], []).append(obj)
    return out


def test_two_adapters_are_rendered_in_the_caches_wave_only_where_the_plan_places_their_deployment(tmp_path):
    inventory = adapter_inventory(tmp_path)
    render = tmp_path / "rendered"
    run(inventory, "plan.yml", render)
    plan = json.loads((render / "_fleet" / "plan.json").read_text())
    where = {r["cluster"] for r in plan["replicas"] if r["deployment"] == "qwen-demo"}
    assert len(where) == 1 and where <= PROD
    (cluster,) = where

    out = run(inventory, "caches.yml", render)
    assert (
        f"adapter sql-lora of qwen-demo (cache qwen-demo-lora-sql-lora) follows placement: staged on {cluster}" in out
    )
    staged = adapter_objects(render)
    assert set(staged) == {cluster}  # the two other prod clusters get nothing
    objects = staged[cluster]
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "PersistentVolumeClaim"} == PVCS
    assert sorted(o["kind"] for o in objects).count("Job") == 2
    assert {o["metadata"]["annotations"][ANNOTATION_SYNC_LAYER] for o in objects} == {"caches"}
    sql = next(o for o in objects if o["kind"] == "PersistentVolumeClaim" and "sql" in o["metadata"]["name"])
    assert sql["metadata"]["annotations"]["gpufleet.io/adapter-revision"] == "abc123"

    run(inventory, "deploy.yml", render)
    workloads = [
        yaml.safe_load(p.read_text())
        for p in (render / cluster / "ml-team").glob("*.yaml")
        if yaml.safe_load(p.read_text()).get("kind") == "Deployment"
    ]
    qwen = [w for w in workloads if w["metadata"]["labels"].get("gpufleet.io/deployment") == "qwen-demo"]
    assert qwen, "qwen-demo's workload is rendered on its cluster"
    spec = qwen[0]["spec"]["template"]["spec"]
    args = spec["containers"][0]["args"]
    assert args[args.index("--enable-lora") :][:4] == ["--enable-lora", "--max-loras", "2", "--lora-modules"]
    assert {"sql-lora=/mnt/adapters/sql-lora", "docs-lora=/mnt/adapters/docs-lora"} <= set(args)
    claims = {v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
    assert claims >= PVCS  # the workload mounts exactly what the caches wave staged on this cluster
