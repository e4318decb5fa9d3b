# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""LoRA adapters of a deployment (docs/adapters.md).

- :func:`adapter_caches`: each adapter as a model cache of its own (artifact kind ``adapter``): hydrated and verified
  by the same Job as a model's weights (the completion manifest), into a PVC of its own.
- :func:`adapter_cache_objects`: those caches' objects on the clusters the deployment is placed on, and only there.
- :func:`staged_adapter_caches`: the same caches as the model_cache role stages them (filter ``cache_staged``, over
  ``fleet_info``'s dict shapes): each follows its deployment's placement in the plan, exactly as a ``clusters:
  follow`` cache does (cache_placement.py), so render mode writes them in the caches sync wave on the placed clusters
  only and apply mode hydrates them before the workloads (playbooks/site.yml: plan, caches, deploy).
- :func:`adapter_objects`: a cluster's rendered serving objects with every adapter PVC mounted read-only at
  ``/mnt/adapters/<name>`` in the engine container and vLLM's ``--enable-lora --max-loras N --lora-modules
  name=path ...``; an engine that is not vLLM is refused naming ``adapters``.

Routing (the adapter names in the fleet routing artifact) is routing.py's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cache_placement import (
    ADAPTER_KEY,
    FOLLOW,
    deployment_clusters,
    follow_staging,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    Adapter,
    ModelCache,
    ModelDeployment,
    parse,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.containers import is_vllm

#: Where the engine container finds adapter ``<name>``.
ADAPTERS_ROOT = "/mnt/adapters"
#: The size of an adapter's PVC: LoRA adapters are megabytes to a few hundred megabytes.
ADAPTER_CACHE_SIZE = "4Gi"
#: The annotation that says what kind of artifact a cache object holds.
ANNOTATION_ARTIFACT_KIND = "gpufleet.io/artifact-kind"
ARTIFACT_ADAPTER = "adapter"
#: The annotation with the adapter's pinned revision (when it has one).
ANNOTATION_ADAPTER_REVISION = "gpufleet.io/adapter-revision"
#: On the engine's pod template: a digest of the adapters it loads (names, sources, revisions). A new revision of an
#: adapter re-hydrates the same PVC, which a running engine would not reload: the digest changes the pod template, so
#: the replicas roll (under the deployment's rollout budget, rollout.py) and load what was staged.
ANNOTATION_ADAPTERS_DIGEST = "gpufleet.io/adapters-digest"
_WORKLOAD_TEMPLATES: dict[str, tuple[tuple[str, ...], ...]] = {
    "Deployment": (("spec", "template"),),
    "LeaderWorkerSet": (("spec", "leaderWorkerTemplate", "leaderTemplate"),),
}


def adapter_cache_name(dep: ModelDeployment, adapter: Adapter) -> str:
    """A DNS label for the adapter's cache: ``<deployment>-lora-<adapter>`` lowercased, cut with a hash when long."""
    return _cache_name(dep.name, adapter.name)


def _cache_name(deployment: str, adapter: str) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in adapter.lower()).strip("-")
    name = f"{deployment}-lora-{slug}"
    if len(name) > 48:  # the cache's PVC is gpufleet-cache-<name> (15 more): a DNS label of at most 63
        digest = hashlib.sha256(f"{deployment}/{adapter}".encode()).hexdigest()[:8]
        name = f"{name[:39].rstrip('-')}-{digest}"
    return name


def adapter_path(adapter: Adapter) -> str:
    return f"{ADAPTERS_ROOT}/{adapter.name}"


def adapter_caches(dep: ModelDeployment) -> list[ModelCache]:
    """Each adapter of ``dep`` as a cache in its namespace, its source pinned at the adapter's revision."""
    return _caches(dep.name, dep.namespace, dep.adapters)


def _caches(deployment: str, namespace: str, adapters: Iterable[Adapter]) -> list[ModelCache]:
    out = []
    for adapter in adapters:
        source = adapter.source.model_dump(exclude_none=True)
        if adapter.source.hugging_face is not None and adapter.pinned_revision:
            source["hugging_face"]["revision"] = adapter.pinned_revision
        out.append(
            ModelCache.model_validate(
                {
                    "name": _cache_name(deployment, adapter.name),
                    "namespace": namespace,
                    "source": source,
                    "size": ADAPTER_CACHE_SIZE,
                }
            )
        )
    return out


def adapter_cache_objects(
    dep: ModelDeployment,
    placed_clusters: Iterable[str],
    hydrator: str,
    *,
    storage_classes: Mapping[str, str | None] | None = None,
    fleet: str | None = None,
    options: Any = None,
) -> dict[str, list[dict[str, Any]]]:
    """``{cluster: objects}``: every adapter's cache objects (PVC, hydrator ConfigMap, Job) on each cluster the
    deployment is placed on, annotated ``gpufleet.io/artifact-kind: adapter`` (with the adapter's revision).
    ``storage_classes``: each cluster's ``gpufleet_cache_storage_class`` (the adapters' ReadWriteMany volumes)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import cache_objects

    caches = list(zip(dep.adapters, adapter_caches(dep), strict=True))
    out: dict[str, list[dict[str, Any]]] = {}
    for cluster in sorted(set(placed_clusters)):
        objects: list[dict[str, Any]] = []
        for adapter, cache in caches:
            storage = (storage_classes or {}).get(cluster)
            built = cache_objects(cache, cluster, hydrator, storage_class=storage, fleet=fleet, options=options)
            objects.extend(annotate_adapter_objects(built, adapter.pinned_revision))
        out[cluster] = objects
    return out


def annotate_adapter_objects(objects: list[dict[str, Any]], revision: str | None) -> list[dict[str, Any]]:
    """``objects`` (an adapter cache's PVC, ConfigMap, Job) annotated ``gpufleet.io/artifact-kind: adapter`` and with
    the adapter's revision, edited in place. The Job's pod template is not touched (its name hashes it)."""
    for obj in objects:
        notes = obj["metadata"].setdefault("annotations", {})
        notes[ANNOTATION_ARTIFACT_KIND] = ARTIFACT_ADAPTER
        if revision:
            notes[ANNOTATION_ADAPTER_REVISION] = revision
    return objects


def staged_adapter_caches(
    deployments: Iterable[Mapping[str, Any]], replicas: Iterable[Mapping[str, Any]] | None
) -> list[dict[str, Any]]:
    """Every adapter of every deployment (``fleet_info``'s ``fleet.deployments``) as a cache the model_cache role
    stages, in the shape :func:`cache_placement.staged_clusters` returns: ``clusters: follow``, ``candidate_clusters``
    the clusters holding a replica of its deployment in ``replicas`` (the plan's), never outside the deployment's own
    ``candidate_clusters`` (kept as ``may_stage_on``); with no plan (``replicas`` None) every cluster the deployment
    may use, so no replica waits for an adapter that was never staged. ``adapter`` (``{deployment, name,
    revision}``) marks it, so its objects are annotated as adapter artifacts (:func:`annotate_adapter_objects`)."""
    deployments = list(deployments)
    placed = deployment_clusters(replicas) if replicas is not None else None
    out: list[dict[str, Any]] = []
    for i, dep in enumerate(deployments):
        if not isinstance(dep, Mapping) or not dep.get("adapters"):
            continue
        name, namespace = dep.get("name"), dep.get("namespace") or "default"
        if not isinstance(name, str) or not name:
            raise GpufleetError(f"deployments[{i}] has no name (pass fleet_info's fleet.deployments)")
        raw = dep["adapters"]
        if isinstance(raw, (str, Mapping)) or not isinstance(raw, (list, tuple)):
            raise GpufleetError(f"deployment {name}: adapters must be a list (pass fleet_info's fleet.deployments)")
        adapters = [parse(Adapter, a, f"deployment {name}.adapters[{j}]") for j, a in enumerate(raw)]
        may = [str(c) for c in dep.get("candidate_clusters") or []]
        for adapter, cache in zip(adapters, _caches(name, str(namespace), adapters), strict=True):
            item = cache.model_dump(by_alias=True, exclude_none=True)
            item["clusters"] = FOLLOW
            item[ADAPTER_KEY] = {"deployment": name, "name": adapter.name, "revision": adapter.pinned_revision}
            staged = follow_staging(item, may, None if placed is None else placed.get(name, set()))
            staged["staged_note"] = staged["staged_note"].replace(
                f"cache {item['name']} ", f"adapter {adapter.name} of {name} (cache {item['name']}) ", 1
            )
            out.append(staged)
    return out


def lora_flags(dep: ModelDeployment) -> list[str]:
    """vLLM's arguments for ``dep``'s adapters (every adapter loaded: ``--max-loras`` is their count)."""
    if not dep.adapters:
        return []
    modules = [f"{a.name}={adapter_path(a)}" for a in dep.adapters]
    return ["--enable-lora", "--max-loras", str(len(dep.adapters)), "--lora-modules", *modules]


def adapters_digest(dep: ModelDeployment) -> str:
    """16 hex digits over the adapters' names, sources and pinned revisions, in order (``--lora-modules``'s order)."""
    parts = [
        {"name": a.name, "source": a.source.model_dump(by_alias=True, exclude_none=True), "revision": a.pinned_revision}
        for a in dep.adapters
    ]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _template(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def adapter_objects(dep: ModelDeployment, objects: list[dict[str, Any]], prefix: str = "deployment") -> list[dict]:
    """``objects`` (one cluster's serving render of ``dep``) with the adapters mounted and loaded, edited in place."""
    if not dep.adapters:
        return objects
    if dep.ray:
        raise FleetValidationError(
            [
                (
                    f"{prefix}.adapters",
                    "LoRA adapters are not supported with ray: true (the engine is started by a Ray launch script, "
                    "not with the container's arguments); drop ray or the adapters",
                )
            ]
        )
    caches = adapter_caches(dep)
    flags = lora_flags(dep)
    digest = adapters_digest(dep)
    for obj in objects:
        for path in _WORKLOAD_TEMPLATES.get(str(obj.get("kind")), ()):
            template = _template(obj, path)
            spec = template.get("spec") if isinstance(template, Mapping) else None
            if not isinstance(spec, dict) or not spec.get("containers"):
                continue
            template.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_ADAPTERS_DIGEST] = digest
            container = spec["containers"][0]
            if not is_vllm(container):
                raise FleetValidationError(
                    [
                        (
                            f"{prefix}.adapters",
                            f"LoRA adapters need a vLLM engine; workload {obj['metadata']['name']!r} runs "
                            f"{container.get('image', 'an engine')!r} (only vLLM's --lora-modules is supported)",
                        )
                    ]
                )
            if "--enable-lora" in (container.get("args") or []) + (container.get("command") or []):
                continue  # already rendered (an idempotent second pass)
            container["args"] = [*(container.get("args") or []), *flags]
            mounts = container.setdefault("volumeMounts", [])
            volumes = spec.setdefault("volumes", [])
            for adapter, cache in zip(dep.adapters, caches, strict=True):
                volume = f"lora-{hashlib.sha256(adapter.name.encode()).hexdigest()[:10]}"
                volumes.append(
                    {"name": volume, "persistentVolumeClaim": {"claimName": cache.claim_name, "readOnly": True}}
                )
                mounts.append({"name": volume, "mountPath": adapter_path(adapter), "readOnly": True})
    return objects
