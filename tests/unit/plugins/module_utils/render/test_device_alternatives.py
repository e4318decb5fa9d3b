"""Alternatives reach the engine (issue 28 item 4, design.md §14): the ``first_available`` alternative placement chose
for a replica sets the engine's arguments, environment and a pod label, so vLLM's tensor parallelism follows the
devices actually claimed."""

from __future__ import annotations

import copy
import json
from typing import Any

import k8s_schemas
import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import DeviceAlternative
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import place
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import ResolvedRequest
from ansible_collections.gpufleet.serving.plugins.module_utils.render.device_alternatives import (
    ENV_DEVICE_REQUESTS,
    LABEL_DEVICES,
    devices_label,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import render_serving_manifests

IS_H100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
IS_A100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"'


def gpus(product: str, count: int) -> dict[str, Any]:
    return {
        "devices": [
            {
                "name": "gpu",
                "driver": "gpu.nvidia.com",
                "device_class_name": "gpu.nvidia.com",
                "count": count,
                "attributes": {"productName": {"string": product}},
            }
        ]
    }


CLASSES = {"h100x8": gpus("NVIDIA H100 80GB HBM3", 8), "a100x2": gpus("NVIDIA A100-SXM4-80GB", 2)}
CLUSTERS = [
    {"name": "east", "pools": [{"name": "h100", "class": "h100x8", "nodes": 1}]},
    {"name": "west", "pools": [{"name": "a100", "class": "a100x2", "nodes": 1}]},
]


def deployment(alternatives: list[dict[str, Any]] | None = None, **container: Any) -> dict[str, Any]:
    """ "1 x H100, else 2 x A100", two replicas (one lands on each cluster: spread first)."""
    alternatives = alternatives or [
        {"name": "h100", "device_class_name": "gpu.nvidia.com", "selectors": [{"cel": IS_H100}]},
        {"name": "a100", "device_class_name": "gpu.nvidia.com", "count": 2, "selectors": [{"cel": IS_A100}]},
    ]
    engine_container = {"name": "engine", "image": "vllm/vllm-openai:v0.11.0", "args": ["--model=Qwen/Qwen3-8B"]}
    engine_container.update(container)
    engine_container = {k: v for k, v in engine_container.items() if v is not None}
    return {
        "name": "llm",
        "namespace": "ml",
        "replicas": 2,
        "engines": [
            {
                "name": "main",
                "members": [
                    {
                        "role": "Standalone",
                        "node_selector": {"devices": [{"name": "accel", "first_available": alternatives}]},
                        "template": {"spec": {"containers": [engine_container]}},
                    }
                ],
            }
        ],
    }


def rendered(dep: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per cluster, the engine's pod template (the Deployment's), after placing ``dep`` on the two clusters."""
    result = place(deployment=dep, clusters=CLUSTERS, classes=CLASSES)
    assert result["scheduled"] == 2, result["unschedulable"]
    out = {}
    for cluster in ("east", "west"):
        objects = render_serving_manifests(result["replicas"], dep, cluster=cluster)
        k8s_schemas.validate_objects(objects)
        (workload,) = [o for o in objects if o["kind"] == "Deployment"]
        out[cluster] = workload["spec"]["template"]
    return out


def env_of(template: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in template["spec"]["containers"][0].get("env", [])}


def test_the_a100_replica_runs_tensor_parallel_2_and_says_what_it_claimed():
    pods = rendered(deployment())
    east, west = pods["east"], pods["west"]
    assert east["spec"]["containers"][0]["args"] == ["--model=Qwen/Qwen3-8B", "--tensor-parallel-size=1"]
    assert west["spec"]["containers"][0]["args"] == ["--model=Qwen/Qwen3-8B", "--tensor-parallel-size=2"]
    assert json.loads(env_of(west)[ENV_DEVICE_REQUESTS]) == {"accel": {"alternative": "a100", "count": 2}}
    assert json.loads(env_of(east)[ENV_DEVICE_REQUESTS]) == {"accel": {"alternative": "h100", "count": 1}}
    assert west["metadata"]["labels"][LABEL_DEVICES] == "accel.a100.2"
    assert east["metadata"]["labels"][LABEL_DEVICES] == "accel.h100.1"


def test_an_alternatives_args_replace_the_templates_flag_and_its_env_is_set():
    alternatives = [
        {
            "name": "h100",
            "device_class_name": "gpu.nvidia.com",
            "selectors": [{"cel": IS_H100}],
            "env": [{"name": "VLLM_ATTENTION_BACKEND", "value": "FLASHINFER"}],
        },
        {
            "name": "a100",
            "device_class_name": "gpu.nvidia.com",
            "count": 2,
            "selectors": [{"cel": IS_A100}],
            "args": ["--tensor-parallel-size=2", "--max-model-len=8192"],
            "env": [{"name": "VLLM_ATTENTION_BACKEND", "value": "FLASH_ATTN"}],
        },
    ]
    dep = deployment(
        alternatives,
        args=["--model=Qwen/Qwen3-8B", "--tensor-parallel-size", "1", "--max-model-len=32768"],
        env=[{"name": "VLLM_ATTENTION_BACKEND", "value": "XFORMERS"}],
    )
    pods = rendered(dep)
    # The template's own flags stay where no alternative replaces them (the H100 keeps its TP 1 and length).
    assert pods["east"]["spec"]["containers"][0]["args"] == [
        "--model=Qwen/Qwen3-8B",
        "--tensor-parallel-size",
        "1",
        "--max-model-len=32768",
    ]
    assert pods["west"]["spec"]["containers"][0]["args"] == [
        "--model=Qwen/Qwen3-8B",
        "--tensor-parallel-size=2",
        "--max-model-len=8192",
    ]
    assert env_of(pods["east"])["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"
    assert env_of(pods["west"])["VLLM_ATTENTION_BACKEND"] == "FLASH_ATTN"


def test_a_shell_script_cannot_take_an_alternatives_args_but_reads_the_env():
    alternatives = copy.deepcopy(deployment()["engines"][0]["members"][0]["node_selector"]["devices"][0])
    alternatives["first_available"][1]["args"] = ["--tensor-parallel-size=2"]
    dep = deployment(alternatives["first_available"], command=["/bin/sh", "-c", "vllm serve /m"], args=None)
    result = place(deployment=dep, clusters=CLUSTERS, classes=CLASSES)
    with pytest.raises(GpufleetError, match=r"runs a shell script, so the arguments of alternative.*a100"):
        render_serving_manifests(result["replicas"], dep, cluster="west")
    # Without args, a script gets the env and no TP flag (its arguments are its own).
    plain = deployment(command=["/bin/sh", "-c", "vllm serve /m --tensor-parallel-size=$TP"], args=None)
    pods = rendered(plain)
    assert "args" not in pods["west"]["spec"]["containers"][0]
    assert ENV_DEVICE_REQUESTS in env_of(pods["west"])


def test_a_member_without_alternatives_is_rendered_as_before():
    dep = deployment()
    dep["engines"][0]["members"][0]["node_selector"] = {
        "devices": [{"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 2}]
    }
    result = place(deployment=dep, clusters=CLUSTERS[1:], classes=CLASSES)
    objects = render_serving_manifests(result["replicas"], dep, cluster="west")
    (workload,) = [o for o in objects if o["kind"] == "Deployment"]
    container = workload["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["--model=Qwen/Qwen3-8B"]
    assert ENV_DEVICE_REQUESTS not in env_of(workload["spec"]["template"])
    assert LABEL_DEVICES not in workload["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"name": "gpu", "count": 1, "args": ["--tensor-parallel-size=1"]}, "args"),
        ({"name": "accel", "first_available": [{"name": "a", "env": [{"name": "1BAD", "value": "x"}]}]}, "name"),
        ({"name": "accel", "first_available": [{"name": "a", "args": [3]}]}, "args"),
    ],
)
def test_alternative_args_and_env_are_validated_with_their_path(request_, message):
    dep = deployment()
    dep["engines"][0]["members"][0]["node_selector"] = {"devices": [request_]}
    with pytest.raises(FleetValidationError) as info:
        place(deployment=dep, clusters=CLUSTERS, classes=CLASSES)
    assert any("node_selector.devices[0]" in path and message in path for path, _reason in info.value.errors), (
        info.value.errors
    )


def test_the_label_stays_a_label_value_when_long():
    choices = [
        (
            ResolvedRequest(name=f"request-number-{i}", count=8, chosen="alt"),
            DeviceAlternative(name=f"alternative-with-a-long-name-{i}"),
        )
        for i in range(3)
    ]
    value = devices_label(choices)
    assert len(value) <= 63
    assert k8s_schemas.label_errors({"k": value}, "labels") == []
    assert value != devices_label(choices[:2])
