"""Inputs for the serving_manifests tests: deployments from the example fleet and replicas in placement's shape."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from example_fleet import example_fleet

# What placement resolves a request's device class to on the example fleet's classes (design.md §2/§4).
DEVICE_CLASSES = {"gpu": "gpu.nvidia.com"}
SYNTHETIC = {"ib"}  # the InfiniBand fabric of h100-8x-ib: matched for placement, never claimed


def example_deployment(name: str) -> dict[str, Any]:
    for dep in example_fleet()["deployments"]:
        if dep["name"] == name:
            return dep
    raise KeyError(name)


def example_caches() -> list[dict[str, Any]]:
    return example_fleet()["caches"]


def replica_name(deployment: str, cluster: str, index: int) -> str:
    """design.md §4: ``<deployment>-<5 hex of a hash of deployment, cluster, index>``."""
    return f"{deployment}-{hashlib.sha256(f'{deployment}/{cluster}/{index}'.encode()).hexdigest()[:5]}"


def replica(
    dep: dict[str, Any],
    cluster: str,
    index: int,
    pool: str | dict[str, str],
    *,
    include_synthetic: bool = False,
) -> dict[str, Any]:
    """A replica as replica_placement returns it: synthetic requests are left out unless ``include_synthetic``
    (then they carry ``device_class_name: None``, which the renderer must also never claim)."""
    engines = []
    for engine in dep["engines"]:
        engine_pool = pool if isinstance(pool, str) else pool[engine["name"]]
        copies = engine.get("copies", 1)
        members = []
        for member in engine["members"]:
            requests = []
            for req in (member.get("node_selector") or {}).get("devices", []):
                synthetic = req["name"] in SYNTHETIC
                if synthetic and not include_synthetic:
                    continue
                requests.append(
                    {
                        "name": req["name"],
                        "device_class_name": None if synthetic else DEVICE_CLASSES[req["name"]],
                        "count": req.get("count", 1),
                        "selectors": [s["cel"] for s in req.get("selectors", [])],
                    }
                )
            pods = (member.get("worker") or {}).get("nodes", 1)
            claims = any(r["device_class_name"] for r in requests)
            members.append(
                {
                    "role": member["role"],
                    "pool": engine_pool,
                    "nodes": pods * copies if claims else 0,
                    "device_requests": requests,
                }
            )
        engines.append({"name": engine["name"], "copies": copies, "members": members})
    return {
        "name": replica_name(dep["name"], cluster, index),
        "deployment": dep["name"],
        "namespace": dep.get("namespace", "default"),
        "cluster": cluster,
        "index": index,
        "engines": engines,
    }


def single_gpu_deployment() -> dict[str, Any]:
    """A small chat model on one GPU, served through a gateway, no cache."""
    dep = example_deployment("qwen-demo")
    dep.update(name="chat-small", cache=None, gateway={"name": "inference", "namespace": "gateway-system"})
    container = dep["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
    container["args"] = ["--model=Qwen/Qwen2.5-0.5B-Instruct", "--max-model-len=8192"]
    return dep


def tp8_deployment() -> dict[str, Any]:
    """Llama 3.3 70B tensor-parallel over 8 GPUs of one node; the user also asked for nvidia.com/gpu (stripped)."""
    dep = example_deployment("llama-70b")
    dep["tolerations"] = [{"key": "gpufleet.io/maintenance", "operator": "Exists", "effect": "NoSchedule"}]
    spec = dep["engines"][0]["members"][0]["template"]["spec"]
    spec["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 8, "memory": "400Gi"},
        "requests": {"nvidia.com/gpu": 8, "cpu": "32"},
    }
    spec["imagePullSecrets"] = [{"name": "registry-creds"}]
    return dep


def cached_gang_deployment() -> dict[str, Any]:
    """DeepSeek-V3 over a 2-node Ray gang, weights from a cache in its namespace; its own probe timing and /dev/shm."""
    dep = example_deployment("deepseek-v3")
    dep.update(
        name="deepseek-cached",
        cache="deepseek-v3-weights",
        health={"startup_timeout": "2h", "liveness_timeout": "2m", "period_seconds": 15},
        shm_size="64Gi",
    )
    return dep


def cached_gang_caches() -> list[dict[str, Any]]:
    return [
        {
            "name": "deepseek-v3-weights",
            "namespace": "research",
            "source": {"hugging_face": {"repo": "deepseek-ai/DeepSeek-V3", "token_secret": "hf-token"}},
            "size": "1500Gi",
        }
    ]


def kserve_deployment() -> dict[str, Any]:
    """DeepSeek-V3 as a 2-node pipeline-parallel gang under KServe's LLMInferenceService."""
    dep = example_deployment("deepseek-v3")
    dep.update(name="deepseek-kserve", backend="kserve", ray=False)
    return dep


def pd_deployment(backend: str) -> dict[str, Any]:
    """A prefill/decode instance (design.md §14): prefill 2 x 1 GPU, decode 1 x 4 GPUs, ratio 2:1."""
    base = example_deployment("qwen-demo")
    member = base["engines"][0]["members"][0]

    def role(name: str, count: int, copies: int) -> dict[str, Any]:
        m = copy.deepcopy(member)
        m["node_selector"]["devices"][0]["count"] = count
        container = m["template"]["spec"]["containers"][0]
        container["args"] = ["--model=meta-llama/Llama-3.1-8B-Instruct", f"--tensor-parallel-size={count}"]
        return {"name": name, "role": name, "copies": copies, "members": [m]}

    base.update(
        name="llama-pd",
        cache=None,
        backend=backend,
        ratio={"prefill": 2, "decode": 1},
        engines=[role("prefill", 1, 2), role("decode", 4, 1)],
    )
    return base


# name -> (description, build() -> (replicas, deployment, kwargs))
def golden_cases() -> dict[str, tuple[str, Any]]:
    def single_gpu():
        dep = single_gpu_deployment()
        reps = [replica(dep, "gke-us-central1", 0, "l4"), replica(dep, "eks-us-east-1", 1, "a10g")]
        return reps, dep, {"cluster": "gke-us-central1"}

    def tp8():
        dep = tp8_deployment()
        return [replica(dep, "eks-us-east-1", 0, "p5")], dep, {"cluster": "eks-us-east-1"}

    def lws_gang_nic():
        dep = example_deployment("deepseek-v3")
        return [replica(dep, "onprem-a", 0, "dgx")], dep, {"cluster": "onprem-a"}

    def cache_mounted():
        dep = example_deployment("qwen-demo")
        reps = [replica(dep, "gke-europe-west4", 0, "l4")]
        return reps, dep, {"cluster": "gke-europe-west4", "caches": example_caches()}

    def kserve():
        dep = kserve_deployment()
        return [replica(dep, "onprem-a", 0, "dgx")], dep, {"cluster": "onprem-a"}

    def two_replicas_one_cluster():
        dep = single_gpu_deployment()
        dep["replicas"] = 3
        reps = [
            replica(dep, "gke-us-central1", 0, "l4"),
            replica(dep, "eks-us-east-1", 1, "a10g"),
            replica(dep, "gke-us-central1", 2, "l4"),
        ]
        return reps, dep, {"cluster": "gke-us-central1"}

    def cache_mounted_gang():
        dep = cached_gang_deployment()
        return [replica(dep, "onprem-a", 0, "dgx")], dep, {"cluster": "onprem-a", "caches": cached_gang_caches()}

    def grove_gang():
        dep = example_deployment("deepseek-v3")
        dep.update(name="deepseek-grove", backend="grove")
        return [replica(dep, "onprem-a", 0, "dgx")], dep, {"cluster": "onprem-a"}

    def pd(backend: str):
        def build():
            dep = pd_deployment(backend)
            return [replica(dep, "eks-us-east-1", 0, "p5")], dep, {"cluster": "eks-us-east-1"}

        return build

    return {
        "grove_gang": ("backend grove: a 2-node Ray gang as one PodCliqueSet, leader found by Grove's env", grove_gang),
        "pd_grove": ("prefill/decode instance as one Grove PodCliqueSet (2 prefill : 1 decode)", pd("grove")),
        "pd_llm_d": ("prefill/decode instance as two Deployments, routing sidecar and the llm-d router", pd("auto")),
        "pd_kserve": ("prefill/decode instance as one LLMInferenceService with spec.prefill", pd("kserve")),
        "single_gpu_deployment": ("one GPU, apps/v1 Deployment, Service + HTTPRoute through a gateway", single_gpu),
        "tp8_node": ("8 GPUs of one node (tensor parallel), user nvidia.com/gpu limits stripped", tp8),
        "lws_gang_nic": (
            "2-node LeaderWorkerSet gang with Ray; the synthetic InfiniBand request is not claimed",
            lws_gang_nic,
        ),
        "cache_mounted": (
            "model cache mounted read-only at /mnt/models, vLLM pointed at it, offline hub",
            cache_mounted,
        ),
        "kserve": ("backend kserve: LLMInferenceService (pipeline-parallel preset) with per-role DRA claims", kserve),
        "two_replicas_one_cluster": (
            "two replicas on one cluster: a Service each, one model Service and one HTTPRoute for both",
            two_replicas_one_cluster,
        ),
        "cache_mounted_gang": (
            "Ray gang with a model cache: leader and worker wait for the cache's manifest; own probe timing and /dev/shm",
            cache_mounted_gang,
        ),
    }


#: The fleet every case renders for (``gpufleet_fleet_name``): the ``gpufleet.io/fleet`` label of every object.
FLEET = "example"


def build(case: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    reps, dep, kwargs = golden_cases()[case][1]()
    return copy.deepcopy(reps), copy.deepcopy(dep), {"fleet": FLEET, **copy.deepcopy(kwargs)}
