# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Prefill/decode instances (design.md §14): placement and rendering rules of a deployment whose engines have roles.

A P/D deployment declares two engines, ``role: prefill`` and ``role: decode`` (each with its own members, claims and
template) and a ``ratio`` (``{prefill: N, decode: M}``, each a count or a band ``[min, max]``). One replica is one
*instance*: the ratio's top of each role's engine (``ModelDeployment`` sets the engines' ``copies`` from it), placed
all-or-nothing on one cluster (placement places every engine of a replica on the replica's cluster or none) and, with
``colocate: fabric``, in one pool (:func:`place_colocated`: the KV cache moves between the roles over the pool's
fabric). Explain names each engine by its role (:func:`engine_label`).

Rendering is ``render/pd.py`` (placement ships without it), whatever the backend (``render.pd.adapt_pod``, called by
the renderer for every pod of a role engine):

- both roles' vLLM get the same ``--kv-transfer-config`` (``{"kv_connector": "NixlConnector", "kv_role": "kv_both"}``,
  the connector from ``pd.kv_connector``) and ``VLLM_NIXL_SIDE_CHANNEL_HOST`` = the pod IP (NIXL's handshake address),
  as llm-d's P/D guide (guides/pd-disaggregation, modelserver patch-prefill.yaml / patch-decode.yaml) sets them;
- pods carry ``llm-d.ai/role: prefill|decode``, the label llm-d's ``prefill-filter`` / ``decode-filter`` select on;
- decode pods run llm-d's P/D routing sidecar (``pd.routing_sidecar_image``, ``/app/pd-sidecar``) as a native
  sidecar (an init container with ``restartPolicy: Always``) on the deployment's port with ``--vllm-port`` /
  ``--kv-connector=nixlv2``, as KServe v0.20.0's ``config/llmisvcconfig/config-llm-decode-template.yaml`` does;
  vLLM moves to ``pd.engine_port`` and its probes with it. Only decode pods are endpoints of the replica's and the
  model's Services: a request enters at a decode pod, whose sidecar has it prefilled remotely first
  (``x-prefiller-host-port``, set by the router);
- per cluster, the router's configuration (``render.pd.router_config``): an ``EndpointPickerConfig`` with
  ``disagg-headers-handler``, the prefill decider (``prefix-based-pd-decider`` with ``nonCachedTokens``, or
  ``always-disagg-pd-decider``), ``disagg-profile-handler`` (``deciders: {prefill: ...}``), ``by-label-selector``
  filters named ``prefill-filter`` / ``decode-filter`` over this deployment's pods, scorers and a picker, and the
  ``prefill`` / ``decode`` scheduling profiles (llm-d-inference-scheduler's disaggregation docs and
  guides/pd-disaggregation/router/pd-disaggregation.values.yaml), in a ConfigMap for the llm-d EPP.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import k8s_name
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Engine

#: The API of the llm-d router's configuration (EndpointPickerConfig), rendered by ``render.pd.router_config``.
EPP_API_VERSION = "inference.networking.x-k8s.io/v1alpha1"

Attempt = tuple[Any, str, dict[str, str], str]


def engine_label(engine: Engine) -> str:
    """How explain names an engine: ``prefill engine p: `` in a P/D instance, else ``engine main: ``."""
    return f"{engine.role} engine {engine.name}: " if engine.role else f"engine {engine.name}: "


def place_colocated(planner: Any, cluster: Any) -> Attempt:
    """``colocate: fabric``: the whole instance in one pool of ``cluster`` -- the first pool, in the cluster's order,
    where every engine fits (``planner.try_place`` restricted to it) -- or why none can take it, per pool."""
    if not cluster.pools:
        result: Attempt = planner.try_place(cluster, only_pool="")
        return result
    failures: list[tuple[str, Attempt]] = []
    for pool in cluster.pools:
        attempt: Attempt = planner.try_place(cluster, only_pool=pool.name)
        if attempt[0] is not None:
            return attempt
        failures.append((pool.name, attempt))
    reasons = {name: a[2].get(name) or a[3] for name, a in failures}
    capacity = [a for _name, a in failures if a[3].startswith("insufficient capacity")]
    code = (capacity or [failures[0][1]])[0][1]
    what = "room for" if capacity else "every engine of"
    return (
        None,
        code,
        reasons,
        f"{'insufficient capacity: ' if capacity else ''}no single pool has {what} the whole instance "
        "(colocate: fabric)",
    )


def router_config_name(deployment: str) -> str:
    """The ConfigMap holding the llm-d router's configuration of ``deployment``'s instances on a cluster."""
    return k8s_name(f"{deployment}-pd-router")
