# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Rendering of prefill/decode instances (design.md §14; the rules are in ``pd_instances``' docstring): the pods'
KV connector, NIXL address and llm-d role label, the decode pods' routing sidecar, and the llm-d router's
configuration."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Engine, Member, ModelDeployment
from ansible_collections.gpufleet.serving.plugins.module_utils.pd_instances import EPP_API_VERSION, router_config_name
from ansible_collections.gpufleet.serving.plugins.module_utils.render.containers import (
    container_tokens,
    flag_value,
    is_shell,
    is_vllm,
    set_env,
)

LLMD_ROLE_LABEL = "llm-d.ai/role"
KV_TRANSFER_FLAG = "--kv-transfer-config"
NIXL_HOST_ENV = "VLLM_NIXL_SIDE_CHANNEL_HOST"
ROUTING_SIDECAR = "routing-proxy"
ROUTER_CONFIG_KEY = "config.yaml"
DECIDERS = {"prefix": "prefix-based-pd-decider", "always": "always-disagg-pd-decider"}


# --------------------------------------------------------------------------------------------------------------------
# Pods
# --------------------------------------------------------------------------------------------------------------------


def kv_transfer_config(dep: ModelDeployment) -> str:
    return json.dumps({"kv_connector": dep.pd.kv_connector, "kv_role": "kv_both"}, separators=(",", ":"))


def _set_flag(container: dict[str, Any], flag: str, value: str) -> None:
    """``flag=value`` in the container's args, replacing the flag where the args set it."""
    args = [str(a) for a in container.get("args") or []]
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == flag:
            skip = i + 1 < len(args)
            continue
        if arg.startswith(f"{flag}="):
            continue
        out.append(arg)
    container["args"] = [*out, f"{flag}={value}"]


def adapt_pod(
    dep: ModelDeployment,
    engine: Engine,
    member: Member,
    container: dict[str, Any],
    spec: dict[str, Any],
    where: str,
    *,
    sidecar: bool = True,
) -> dict[str, str]:
    """A role engine's pod (see the module docstring); returns the pod labels to add. The decode pods' sidecar is
    added by :func:`add_routing_sidecar` once the renderer has given the engine its port and probes; ``sidecar``
    False: the backend's controller brings its own (KServe's decode preset), vLLM keeps its port."""
    if engine.role is None:
        return {}
    if is_vllm(container) or flag_value(container_tokens(container), KV_TRANSFER_FLAG) is not None:
        if flag_value(container_tokens(container), KV_TRANSFER_FLAG) is None:
            if is_shell(container):
                raise GpufleetError(
                    f"{where}: runs a shell script, so {KV_TRANSFER_FLAG} cannot be added for the {engine.role} role; "
                    f"pass {KV_TRANSFER_FLAG}='{kv_transfer_config(dep)}' to vllm in the script (both roles alike)"
                )
            _set_flag(container, KV_TRANSFER_FLAG, kv_transfer_config(dep))
        set_env(
            container,
            {"name": NIXL_HOST_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            override=False,
        )
    if sidecar and engine.role == "decode" and member.role in ("Standalone", "Leader") and is_vllm(container):
        if is_shell(container):
            raise GpufleetError(
                f"{where}: runs a shell script, so vLLM cannot be moved to port {dep.pd.engine_port} behind the "
                "routing sidecar; use the image's entrypoint or a plain command"
            )
        _set_flag(container, "--port", str(dep.pd.engine_port))
    return {LLMD_ROLE_LABEL: engine.role}


def serves_clients(engine: Engine, member: Member) -> bool:
    """Whether the member's pods are endpoints of the replica's and the model's Services: serving members (Standalone,
    Leader), and in a P/D instance only the decode engine's."""
    return member.role in ("Standalone", "Leader") and engine.role != "prefill"


def add_routing_sidecar(dep: ModelDeployment, engine: Engine, member: Member, spec: dict[str, Any]) -> None:
    """A decode pod's routing sidecar on the deployment's port, in front of vLLM on ``pd.engine_port``: the engine
    container's port and probes move to the engine port (the sidecar only proxies the API)."""
    if engine.role != "decode" or member.role not in ("Standalone", "Leader"):
        return
    container = spec["containers"][0]
    if not is_vllm(container):
        return
    port = dep.port
    engine_port = dep.pd.engine_port
    if engine_port == port:
        raise GpufleetError(
            f"deployment {dep.name!r}: pd.engine_port must differ from port ({port}): the routing sidecar takes it"
        )
    for item in container.get("ports") or []:
        if item.get("containerPort") == port:
            item["containerPort"] = engine_port
            if item.get("name") == "http":
                item["name"] = "engine"
    for key in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = container.get(key) or {}
        for kind in ("httpGet", "tcpSocket"):
            if isinstance(probe.get(kind), dict) and probe[kind].get("port") == port:
                probe[kind]["port"] = engine_port
    inits = spec.setdefault("initContainers", [])
    if any(c.get("name") == ROUTING_SIDECAR for c in inits):
        return
    inits.append(
        {
            "name": ROUTING_SIDECAR,
            "image": dep.pd.routing_sidecar_image,
            "command": ["/app/pd-sidecar"],
            "args": [f"--port={port}", f"--vllm-port={engine_port}", "--kv-connector=nixlv2", "--secure-proxy=false"],
            "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
            "restartPolicy": "Always",
            "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 10},
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
        }
    )


# --------------------------------------------------------------------------------------------------------------------
# The router
# --------------------------------------------------------------------------------------------------------------------


def router_config(dep: ModelDeployment, pod_labels: dict[str, str]) -> dict[str, Any]:
    """The llm-d EPP's ``EndpointPickerConfig`` for ``dep``'s instances on one cluster: decode first (the request's
    entry), then, when the decider says so, a prefill pod of the same deployment; ``pod_labels`` narrow both filters
    to this deployment's pods."""
    decider = DECIDERS[dep.pd.decider]
    decider_plugin: dict[str, Any] = {"type": decider}
    if dep.pd.decider == "prefix":
        decider_plugin["parameters"] = {"nonCachedTokens": dep.pd.non_cached_tokens}

    def role_filter(role: str) -> dict[str, Any]:
        return {
            "type": "by-label-selector",
            "name": f"{role}-filter",
            "parameters": {"matchLabels": {**pod_labels, LLMD_ROLE_LABEL: role}},
        }

    def profile(role: str) -> dict[str, Any]:
        return {
            "name": role,
            "plugins": [
                {"pluginRef": f"{role}-filter"},
                {"pluginRef": "prefix-cache-scorer", "weight": 3},
                {"pluginRef": "queue-scorer", "weight": 2},
                {"pluginRef": "max-score-picker"},
            ],
        }

    return {
        "apiVersion": EPP_API_VERSION,
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "disagg-headers-handler"},
            decider_plugin,
            {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": decider}}},
            role_filter("prefill"),
            role_filter("decode"),
            {"type": "prefix-cache-scorer"},
            {"type": "queue-scorer"},
            {"type": "max-score-picker"},
        ],
        "schedulingProfiles": [profile("prefill"), profile("decode")],
    }


def router_config_map(
    dep: ModelDeployment, pod_labels: dict[str, str], metadata: Callable[[str], dict[str, Any]]
) -> dict[str, Any]:
    """The ConfigMap holding :func:`router_config` (``config.yaml``; JSON, which YAML readers accept)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(router_config_name(dep.name)),
        "data": {ROUTER_CONFIG_KEY: json.dumps(router_config(dep, pod_labels), indent=2) + "\n"},
    }
