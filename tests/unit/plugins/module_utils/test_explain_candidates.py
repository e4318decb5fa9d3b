"""Issue 31: explain for placed deployments - per cluster and pool why each is or is not a candidate, with the values
a false selector read and who holds a full pool."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import selector_reads

GPU = {"driver": "gpu.nvidia.com", "device_class_name": "gpu.nvidia.com"}
MEM_80 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'


def gpu_class(product: str, memory: str, count: int = 8) -> dict[str, Any]:
    return {
        "devices": [
            {
                "name": "gpu",
                **GPU,
                "count": count,
                "attributes": {"productName": {"string": product}, "architecture": {"string": "Hopper"}},
                "capacity": {"memory": {"value": memory}},
            }
        ]
    }


def deployment(name: str, replicas: int, gpus: int, selectors: list[str] = ()) -> dict[str, Any]:
    request: dict[str, Any] = {"name": "gpu", "count": gpus}
    if selectors:
        request["selectors"] = [{"cel": s} for s in selectors]
    return {
        "name": name,
        "replicas": replicas,
        "engines": [
            {
                "name": "main",
                "members": [
                    {
                        "role": "Standalone",
                        "node_selector": {"devices": [request]},
                        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm"}]}},
                    }
                ],
            }
        ],
    }


def fleet(classes: dict[str, Any], pools: dict[str, list[tuple[str, str, int]]], deps: list[dict[str, Any]]) -> Any:
    hosts = {
        cluster: {
            "gpufleet_provider": "existing",
            "gpufleet_node_pools": [{"name": p, "class": c, "node_count": n} for p, c, n in cluster_pools],
        }
        for cluster, cluster_pools in pools.items()
    }
    return validate_fleet(classes=classes, hosts=hosts, deployments=deps, caches=[]).to_dict()


def explained(outcome: Any, name: str) -> list[str]:
    lines = outcome.explain([name])
    start = lines.index("  candidates (why each cluster and pool is or is not one):")
    return lines[start + 1 :]


def test_a_selector_that_excludes_h100s_names_the_value_it_read_even_when_the_deployment_is_ready():
    """A TP-8 Llama asking ``memory >= 80Gi`` never lands on H100s, which publish 81559Mi: explain says so."""
    classes = {
        "h100-8x": gpu_class("NVIDIA H100 80GB HBM3", "81559Mi"),
        "h200-8x": gpu_class("NVIDIA H200", "143771Mi"),
    }
    data = fleet(
        classes,
        {"dc-1": [("h100", "h100-8x", 2), ("h200", "h200-8x", 2)]},
        [deployment("llama-70b", 1, 8, [MEM_80])],
    )
    outcome = place_fleet(data, [], explain=["llama-70b"])
    assert outcome.statuses() == {"llama-70b": "Ready"}
    lines = explained(outcome, "llama-70b")
    h100 = next(line for line in lines if line.startswith("      dc-1/h100: "))
    assert h100.startswith("      dc-1/h100: not a candidate: engine main member Standalone request gpu: ")
    assert h100.endswith(
        f"selector `{MEM_80}` is false for device gpu (NVIDIA H100 80GB HBM3) (read: memory 81559Mi < 80Gi on gpu-0)"
    )
    h200 = next(line for line in lines if line.startswith("      dc-1/h200: "))
    assert h200 == (
        "      dc-1/h200: candidate, room for another replica (1 of 2 node(s) free, 1 needed); held by llama-70b replica 0"
    )
    assert lines[0] == "    dc-1: eligible"
    # Not asked for: a Ready deployment is not explained, and placement's results keep their shape.
    assert place_fleet(data, []).explain() == []
    assert "candidates" not in outcome.results["llama-70b"]


def test_a_full_pool_names_who_holds_it():
    classes = {"h100-8x": gpu_class("NVIDIA H100", "81559Mi")}
    data = fleet(
        classes,
        {"dc-1": [("a", "h100-8x", 1), ("b", "h100-8x", 1)]},
        [deployment("qwen2-5-32b", 2, 8), deployment("small", 1, 1)],
    )
    outcome = place_fleet(data, [], explain=["small", "qwen2-5-32b"])
    assert outcome.results["small"]["scheduled"] == 0
    pools = {
        line.split(": ", 1)[0].strip(): line.split(": ", 1)[1]
        for line in explained(outcome, "small")
        if line.startswith("      dc-1/")
    }
    assert pools == {
        "dc-1/a": "candidate, but full (1 node(s), 0 unused; 1 held whole); held by qwen2-5-32b replica 0",
        "dc-1/b": "candidate, but full (1 node(s), 0 unused; 1 held whole); held by qwen2-5-32b replica 1",
    }
    # The shortfall's own lines are unchanged, before the candidates.
    assert outcome.explain(["small"])[1:3] == [
        "  dc-1: insufficient capacity: no pool that matches engine main has room for it",
        "    dc-1/a: engine main: no node has the devices its 1 pod(s) claim free (1 node(s), 0 unused; 1 held whole)",
    ]
    # The deployment that holds them is explained too (named in gpufleet_explain though Ready): full, by itself.
    assert outcome.statuses()["qwen2-5-32b"] == "Ready"
    assert (
        "      dc-1/b: candidate, but full (0 of 1 node(s) free, 1 needed); held by qwen2-5-32b replica 1"
        in explained(outcome, "qwen2-5-32b")
    )


def test_an_ineligible_cluster_says_why():
    classes = {"h100-8x": gpu_class("NVIDIA H100", "81559Mi")}
    data = fleet(classes, {"dc-1": [("h100", "h100-8x", 1)], "dc-2": [("h100", "h100-8x", 1)]}, [deployment("x", 1, 1)])
    outcome = place_fleet(data, [], cordoned=["dc-2"], explain=["x"])
    lines = explained(outcome, "x")
    assert "    dc-2: not a candidate: taint gpufleet.io/cordon=true:NoSchedule is not tolerated" in lines
    assert not any(line.startswith("      dc-2/") for line in lines)  # an ineligible cluster's pools are not listed


def test_selector_reads_show_the_failed_comparison_or_the_values_read():
    device = {
        "driver": "gpu.nvidia.com",
        "attributes": {
            "productName": {"string": "NVIDIA L4"},
            "cudaComputeCapability": {"version": "8.9.0"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
        },
        "capacity": {"memory": {"value": "23034Mi"}},
    }
    assert selector_reads(MEM_80, device) == "memory 23034Mi < 80Gi"
    assert selector_reads('device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")', device) == (
        "memory 23034Mi < 40Gi"
    )
    assert selector_reads('device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100"', device) == (
        'productName "NVIDIA L4" != "NVIDIA H100"'
    )
    # Only the comparison that is false.
    both = (
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA L4" && '
        'device.attributes["gpu.nvidia.com"].cudaComputeCapability >= semver("9.0.0")'
    )
    assert selector_reads(both, device) == "cudaComputeCapability 8.9.0 < 9.0.0"
    # Not a comparison with a literal: every value it names.
    assert selector_reads('device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H")', device) == (
        'productName = "NVIDIA L4"'
    )
    assert selector_reads('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:80"', device) == (
        'pcieRoot "pci0000:00" != "pci0000:80"'
    )
    assert selector_reads('device.attributes["gpu.nvidia.com"].architecture == "Hopper"', device) == (
        "architecture: not published"
    )
    assert selector_reads('device.driver == "x"', device) == ""
