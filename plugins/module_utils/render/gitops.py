# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""GitOps-native render (``gpufleet_gitops``): what makes a render directory something Flux or Argo CD syncs as is.

The render directory holds one directory per cluster (``<render_dir>/<cluster>/<namespace>/<kind>-<name>.yaml``) and
the fleet directory ``<render_dir>/_fleet/`` (never a cluster): the generator that points the GitOps tool at every
cluster directory (``serving_stack.fleet_generator``) and the plan document.

Sync order is stack → caches → serving. Every rendered object gets a **sync wave** (an int, :func:`wave_of`):

=====  ============================================================================================================
 -30   Namespaces (the stack's and the workloads'), the critical-pods ResourceQuota
 -25   GKE's NVIDIA driver installer DaemonSets
 -20+i the stack's Helm releases in install order (i = index in ``serving_stack.COMPONENTS``: -20 … -13) and their
       Flux sources
  -5   the stack's objects whose kinds a release may install: DeviceClasses, KServe presets, GatewayClass, Gateway
   0   model caches (PVC, hydrator ConfigMap, hydration Job)
  10   serving objects
=====  ============================================================================================================

* ``argocd``: the wave is the ``argocd.argoproj.io/sync-wave`` annotation of every object;
* ``flux``: the wave's **layer** (:data:`LAYERS`: stack, stack-config, caches, serving) is the
  ``gpufleet.io/sync-layer`` annotation; the fleet generator renders one Flux Kustomization per cluster and layer,
  each keeping only its layer's objects and depending on the previous layer (``wait: true``), because Flux's
  kustomize-controller dry-runs a whole Kustomization before applying any of it and would refuse a custom resource
  whose CRD a HelmRelease of the same Kustomization installs;
* Namespaces are never deleted by the GitOps tool (``Prune=false,Delete=false`` / ``kustomize.toolkit.fluxcd.io/prune:
  disabled``): a namespace holds what the collection does not render (the Secrets hydration Jobs read, for one), and
  apply mode never deletes one either.

Pure functions over plain dicts; imports only the contract, so the render-directory writer stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ANNOTATION_SYNC_LAYER,
    COMPONENT_CACHE,
    COMPONENT_NAMESPACE,
    COMPONENT_SERVING,
    COMPONENT_STACK,
    LABEL_COMPONENT,
    LABEL_FLEET,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    NAMESPACE_OWNER,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

FLUX = "flux"
ARGOCD = "argocd"
NONE = "none"
#: ``gpufleet_gitops``: the GitOps tool the render directory is for.
TOOLS: tuple[str, ...] = (FLUX, ARGOCD, NONE)
DEFAULT_TOOL = FLUX

#: Argo CD's annotations: the sync wave of an object; per-object sync options.
ARGOCD_SYNC_WAVE = "argocd.argoproj.io/sync-wave"
ARGOCD_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
ARGOCD_KEEP = "Prune=false,Delete=false"
#: Flux kustomize-controller's annotation that keeps an object when it leaves Git or its Kustomization is deleted.
FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
FLUX_KEEP = "disabled"

WAVE_NAMESPACES = -30
WAVE_DRIVER = -25
WAVE_RELEASES = -20
WAVE_STACK_CONFIG = -5
WAVE_CACHES = 0
WAVE_SERVING = 10

#: Flux layers in sync order: ``(name, lowest wave)``; a wave belongs to the last layer whose lowest wave it reaches.
LAYERS: tuple[tuple[str, int], ...] = (
    ("stack", WAVE_NAMESPACES),
    ("stack-config", WAVE_STACK_CONFIG),
    ("caches", WAVE_CACHES),
    ("serving", WAVE_SERVING),
)
LAYER_NAMES: tuple[str, ...] = tuple(name for name, _low in LAYERS)

_COMPONENT_WAVES: dict[str, int] = {
    COMPONENT_NAMESPACE: WAVE_NAMESPACES,
    COMPONENT_STACK: WAVE_STACK_CONFIG,
    COMPONENT_CACHE: WAVE_CACHES,
    COMPONENT_SERVING: WAVE_SERVING,
}


def parse_tool(value: Any, var: str = "gpufleet_gitops") -> str:
    """``flux``, ``argocd`` or ``none`` (``None`` and ``""`` are ``none``: nothing GitOps-specific is written)."""
    if value is None or value == "":
        return NONE
    if not isinstance(value, str) or value not in TOOLS:
        raise GpufleetError(f"{var}: must be one of {', '.join(TOOLS)} (got {value!r})")
    return value


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    return ann if isinstance(ann, Mapping) else {}


def wave_of(obj: Mapping[str, Any]) -> int:
    """The default sync wave of a rendered object: from its ``gpufleet.io/component`` label (Namespaces always
    first). The serving stack sets finer waves on its own objects (:func:`decorate` with ``wave``)."""
    if obj.get("kind") == "Namespace":
        return WAVE_NAMESPACES
    labels = _labels(obj)
    if labels.get(LABEL_MANAGED_BY) == MANAGED_BY:
        return _COMPONENT_WAVES.get(str(labels.get(LABEL_COMPONENT)), WAVE_SERVING)
    return WAVE_SERVING


def layer_of(wave: int) -> str:
    """The Flux layer of a sync wave (:data:`LAYERS`)."""
    name = LAYERS[0][0]
    for layer, low in LAYERS:
        if wave >= low:
            name = layer
    return name


def decorate(obj: Mapping[str, Any], tool: str, wave: int | None = None) -> dict[str, Any]:
    """``obj`` with what ``tool`` needs to sync it in order (a copy; ``obj`` is not changed): Argo CD's sync wave, or
    the Flux layer, and on a Namespace the annotation that keeps the GitOps tool from ever deleting it. An
    annotation already set (by the serving stack, or a user's ``annotations``) is kept. ``none`` changes nothing."""
    if tool == NONE:
        return dict(obj)
    if tool not in TOOLS:
        raise GpufleetError(f"gitops: must be one of {', '.join(TOOLS)} (got {tool!r})")
    ours: dict[str, str] = {}
    value = wave_of(obj) if wave is None else wave
    if tool == ARGOCD:
        ours[ARGOCD_SYNC_WAVE] = str(value)
        if obj.get("kind") == "Namespace":
            ours[ARGOCD_SYNC_OPTIONS] = ARGOCD_KEEP
    else:
        ours[ANNOTATION_SYNC_LAYER] = layer_of(value)
        if obj.get("kind") == "Namespace":
            ours[FLUX_PRUNE] = FLUX_KEEP
    have = _annotations(obj)
    missing = {k: v for k, v in ours.items() if k not in have}
    if not missing:
        return dict(obj)
    out = dict(obj)
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**have, **missing}
    out["metadata"] = meta
    return out


def namespace_object(name: str, fleet: str | None = None) -> dict[str, Any]:
    """The Namespace file of a workload namespace (``NAMESPACE_OWNER`` labels, the fleet's label when it has one)."""
    labels = dict(NAMESPACE_OWNER)
    if fleet:
        labels[LABEL_FLEET] = fleet
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def is_workload(obj: Any) -> bool:
    """An object of ours whose namespace must exist: a serving or model cache object."""
    if not isinstance(obj, Mapping):
        return False
    labels = _labels(obj)
    return labels.get(LABEL_MANAGED_BY) == MANAGED_BY and labels.get(LABEL_COMPONENT) in (
        COMPONENT_SERVING,
        COMPONENT_CACHE,
    )


def is_workload_namespace(obj: Any) -> bool:
    """A Namespace file the writer maintains (``NAMESPACE_OWNER``)."""
    if not isinstance(obj, Mapping) or obj.get("kind") != "Namespace":
        return False
    labels = _labels(obj)
    return all(str(labels.get(k)) == v for k, v in NAMESPACE_OWNER.items())


__all__ = [
    "ARGOCD",
    "FLUX",
    "LAYERS",
    "NONE",
    "TOOLS",
    "decorate",
    "layer_of",
    "namespace_object",
    "parse_tool",
    "wave_of",
]
