"""Builders for tests of the serving render (``render/serving.py``): a deployment, its members and caches, a replica
record placed on a cluster, one render, and readers of the objects it returns. Shared by
``tests/unit/plugins/module_utils/render/test_render.py`` and the tests of what builds on the render (routing, model
endpoint, caches, autoscaling, adapters)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import render_serving_manifests

VLLM = "vllm/vllm-openai:v0.11.0"
CEL = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("16Gi")) >= 0'
REPO = "Qwen/Qwen2.5-0.5B-Instruct"
PLACEMENT_LABELS = ("gpufleet.io/deployment", "gpufleet.io/cluster", "gpufleet.io/replica-index", "gpufleet.io/pool")


def gpu_request(count: int = 1) -> dict[str, Any]:
    return {"name": "gpu", "count": count, "selectors": [{"cel": CEL}]}


def container(**kw: Any) -> dict[str, Any]:
    return {"name": "engine", "image": VLLM, **kw}


def standalone(template_container: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "role": "Standalone",
        "node_selector": {"devices": [gpu_request()]},
        "template": {"spec": {"containers": [template_container or container()], **spec}},
    }


def gang(nodes: int = 1, leader: dict[str, Any] | None = None, worker: dict[str, Any] | None = None) -> list:
    return [
        {
            "role": "Leader",
            "node_selector": {"devices": [gpu_request(8)]},
            "template": {"spec": {"containers": [leader or container(args=["--model=org/big", "-tp", "8"])]}},
        },
        {
            "role": "Worker",
            "worker": {"nodes": nodes},
            "node_selector": {"devices": [gpu_request(8)]},
            "template": {"spec": {"containers": [worker or container()]}},
        },
    ]


def deployment(members: list[dict[str, Any]] | None = None, **kw: Any) -> dict[str, Any]:
    dep = {
        "name": "chat",
        "namespace": "ml",
        "replicas": 2,
        "engines": [{"name": "main", "members": members or [standalone(container(args=["--model=org/small"]))]}],
    }
    dep.update(kw)
    return dep


def cache(**kw: Any) -> dict[str, Any]:
    data = {
        "name": "qwen",
        "namespace": "ml",
        "source": {"hugging_face": {"repo": REPO}},
        "size": "20Gi",
    }
    data.update(kw)
    return data


def replica(dep: dict[str, Any], cluster: str = "c1", index: int = 0, pool: str = "l4", **kw: Any) -> dict[str, Any]:
    engines = []
    for engine in dep["engines"]:
        members = []
        for m in engine["members"]:
            reqs = [
                {"name": r["name"], "device_class_name": "gpu.nvidia.com", "count": r.get("count", 1),
                 "selectors": [s["cel"] for s in r.get("selectors", [])]}
                for r in (m.get("node_selector") or {}).get("devices", [])
            ]  # fmt: skip
            members.append({"role": m["role"], "pool": pool, "nodes": 1, "device_requests": reqs})
        engines.append({"name": engine["name"], "copies": engine.get("copies", 1), "members": members})
    rep = {
        "name": f"{dep['name']}-{cluster}-{index}",
        "deployment": dep["name"],
        "namespace": dep["namespace"],
        "cluster": cluster,
        "index": index,
        "engines": engines,
    }
    rep.update(kw)
    return rep


def render(dep: dict[str, Any], replicas: list[dict[str, Any]] | None = None, **kw: Any) -> list[dict[str, Any]]:
    kw.setdefault("cluster", "c1")
    return render_serving_manifests(replicas if replicas is not None else [replica(dep)], dep, **kw)


def kinds(objs: list[dict[str, Any]]) -> list[str]:
    return [o["kind"] for o in objs]


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The one object of ``kind`` a replica's objects hold (the model endpoint's are :func:`model_endpoint`'s)."""
    found = [o for o in replica_objects(objs) if o["kind"] == kind]
    assert len(found) == 1, kinds(objs)
    return found[0]


def replica_objects(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects of replicas (they carry ``gpufleet.io/replica``), without the model endpoint of the cluster."""
    return [o for o in objs if "gpufleet.io/replica" in o["metadata"]["labels"]]


def model_endpoint(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The model endpoint's objects by kind (the model Service, the HTTPRoute): those of no replica."""
    found = [o for o in objs if "gpufleet.io/replica" not in o["metadata"]["labels"]]
    by_kind = {o["kind"]: o for o in found}
    assert len(by_kind) == len(found), kinds(found)
    return by_kind


def pod_templates(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, labels, pod spec) of every pod template in a rendered object."""
    if obj["kind"] == "Deployment":
        t = obj["spec"]["template"]
        yield "template", t["metadata"]["labels"], t["spec"]
    elif obj["kind"] == "LeaderWorkerSet":
        for role in ("leaderTemplate", "workerTemplate"):
            t = obj["spec"]["leaderWorkerTemplate"][role]
            yield role, t["metadata"]["labels"], t["spec"]
    elif obj["kind"] == "LLMInferenceService":
        for role in ("template", "worker"):
            if role in obj["spec"]:
                yield role, obj["spec"]["labels"], obj["spec"][role]


def pods(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {where: spec for where, _labels, spec in pod_templates(obj)}


def engine_container(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["containers"][0]


def env(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}
