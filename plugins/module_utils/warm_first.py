# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Warm-first placement and cold starts (issue 30, item 2).

Where a cache is **warm**:

* apply mode (``basis: hydrated``): its PVC on the cluster records that it holds the cache's *current* source — the
  model_cache role writes ``gpufleet.io/hydrated-source`` (``<uri>@<revision>``) and ``gpufleet.io/hydration-seconds``
  on the PVC when the hydration Job succeeded (the Job succeeds only after the hydrator wrote the completion manifest).
  A volume hydrated from an older source is cold.
* render mode (``basis: staged``): nothing in a render directory says whether a Job finished; a cluster whose render
  directory already holds the cache's PVC (staged by an earlier render, so the GitOps tool has been hydrating it since)
  counts as warm. It is a proxy, and the report says ``staged``, never ``hydrated``.

Placement (``placement.plan(..., warm=)``) prefers, among equally loaded candidate clusters, those where every cache
the deployment mounts is warm; an existing replica never moves for it. Every placed replica of a deployment that
mounts a cache is reported ``cold: true/false``; a cold one with an ETA: the cache's size ÷ the cluster's hydration
throughput, *measured* (the sizes of the caches hydrated there ÷ the seconds their Jobs ran) when there is a
measurement, else *declared* (``gpufleet_hydration_throughput``), else unknown (``eta_seconds: null``).

Pure: the action passes the objects in; nothing here reads a cluster or a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ANNOTATION_HYDRATED_SOURCE,
    ANNOTATION_HYDRATION_SECONDS,
    LABEL_CACHE,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

HYDRATED = "hydrated"
STAGED = "staged"


def _bytes(quantity: Any) -> float | None:
    from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

    try:
        value = parse_quantity(str(quantity)).as_approximate_float()
    except (ValueError, GpufleetError):
        return None
    return value if value > 0 else None


def source_key(cache: Mapping[str, Any]) -> str:
    """``<uri>@<revision>`` of a cache as fleet_info returns it: what a volume hydrated from it records. The same as
    the role writes from the PVC's ``gpufleet.io/source`` / ``gpufleet.io/revision`` annotations."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import as_cache

    model = as_cache(cache)
    return f"{model.source.uri}@{model.source.revision or ''}"


@dataclass
class Warmth:
    """Which caches are warm on which clusters (``{cache: {cluster}}``), on what ``basis``, and the seconds each
    measured hydration took (``{cache: {cluster: seconds}}``)."""

    basis: str = HYDRATED
    warm: dict[str, set[str]] = field(default_factory=dict)
    seconds: dict[str, dict[str, int]] = field(default_factory=dict)

    def is_warm(self, cache: str, cluster: str) -> bool:
        return cluster in self.warm.get(cache, set())


def _pvc_facts(obj: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or obj.get("kind") != "PersistentVolumeClaim":
        return None, {}
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    ann = meta.get("annotations") if isinstance(meta.get("annotations"), Mapping) else {}
    cache = labels.get(LABEL_CACHE) if isinstance(labels, Mapping) else None
    return (str(cache) if cache else None), (ann if isinstance(ann, Mapping) else {})


def warmth_from_volumes(
    volumes: Iterable[tuple[str, Mapping[str, Any]]], caches: Iterable[Mapping[str, Any]], basis: str = HYDRATED
) -> Warmth:
    """Warmth from the caches' PVCs, each given with its cluster: ``hydrated`` (apply mode: read from the clusters;
    warm when the volume records the cache's current source) or ``staged`` (render mode: the PVC files of the render
    directory; warm when there is one). Objects that are not a cache's PVC are ignored."""
    if basis not in (HYDRATED, STAGED):
        raise GpufleetError(f"warmth basis must be {HYDRATED} or {STAGED} (got {basis!r})")
    keys = {str(c["name"]): source_key(c) for c in caches}
    out = Warmth(basis=basis)
    for cluster, obj in volumes:
        cache, ann = _pvc_facts(obj)
        if cache is None or cache not in keys:
            continue
        if basis == HYDRATED and ann.get(ANNOTATION_HYDRATED_SOURCE) != keys[cache]:
            continue  # never hydrated, or hydrated from another source/revision: cold
        out.warm.setdefault(cache, set()).add(str(cluster))
        raw = ann.get(ANNOTATION_HYDRATION_SECONDS)
        if basis == HYDRATED and raw is not None and str(raw).isdigit() and int(str(raw)) > 0:
            out.seconds.setdefault(cache, {})[str(cluster)] = int(str(raw))
    return out


def warm_clusters(deployment: Mapping[str, Any], warmth: Warmth | None) -> set[str]:
    """Clusters where every cache ``deployment`` mounts is warm (empty when it mounts none: no preference)."""
    mounted = [str(deployment["cache"])] if deployment.get("cache") else []
    if warmth is None or not mounted:
        return set()
    sets = [warmth.warm.get(cache, set()) for cache in mounted]
    return set.intersection(*sets) if sets else set()


def throughput(
    cluster: str, clusters: Mapping[str, Mapping[str, Any]], caches: Mapping[str, Mapping[str, Any]], warmth: Warmth
) -> tuple[float | None, str | None]:
    """Bytes per second a cache hydrates at on ``cluster``, and whether it was ``measured`` (the sizes of the caches
    hydrated there ÷ the seconds their Jobs ran) or ``declared`` (``gpufleet_hydration_throughput``); ``(None,
    None)`` when neither is known."""
    size = seconds = 0.0
    for name, per in warmth.seconds.items():
        took = per.get(cluster)
        bytes_ = _bytes((caches.get(name) or {}).get("size"))
        if took and bytes_:
            size += bytes_
            seconds += took
    if seconds > 0:
        return size / seconds, "measured"
    declared = _bytes((clusters.get(cluster) or {}).get("hydration_throughput"))
    if declared:
        return declared, "declared"
    return None, None


def cold_starts(
    fleet: Mapping[str, Any], replicas: Iterable[Mapping[str, Any]], warmth: Warmth | None
) -> list[dict[str, Any]]:
    """Per placed replica of a deployment that mounts a cache: ``{deployment, cluster, index, cache, cold, basis,
    eta_seconds, throughput, throughput_source}`` (sorted by deployment, cluster, index). Without ``warmth`` (nothing
    observed) every such replica is cold."""
    warmth = warmth or Warmth()
    mounts = {str(d["name"]): d.get("cache") for d in fleet.get("deployments") or []}
    caches = {str(c["name"]): c for c in fleet.get("caches") or []}
    clusters = {str(c["name"]): c for c in fleet.get("clusters") or []}
    out = []
    for rec in replicas:
        cache = mounts.get(str(rec.get("deployment")))
        if not cache:
            continue
        if ((caches.get(str(cache)) or {}).get("source") or {}).get("oci"):
            continue  # an OCI model image is pulled by the kubelet with the pod, never hydrated: no cold start to report
        cluster = str(rec.get("cluster"))
        cold = not warmth.is_warm(str(cache), cluster)
        item: dict[str, Any] = {
            "deployment": str(rec.get("deployment")),
            "cluster": cluster,
            "index": int(rec.get("index") or 0),
            "cache": str(cache),
            "cold": cold,
            "basis": warmth.basis,
            "eta_seconds": 0 if not cold else None,
            "throughput": None,
            "throughput_source": None,
        }
        if cold:
            rate, source = throughput(cluster, clusters, caches, warmth)
            size = _bytes((caches.get(str(cache)) or {}).get("size"))
            if rate and size:
                item["eta_seconds"] = round(size / rate)
                item["throughput"] = int(rate)
                item["throughput_source"] = source
        out.append(item)
    return sorted(out, key=lambda i: (i["deployment"], i["cluster"], i["index"]))


def _duration(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _rate(bps: int) -> str:
    return f"{bps / 2**20:.0f} MiB/s"


def cold_lines(starts: Iterable[Mapping[str, Any]], caches: Iterable[Mapping[str, Any]] = ()) -> list[str]:
    """One line per cold replica (explain and the report): where, which cache, and the ETA with its basis."""
    sizes = {str(c["name"]): c.get("size") for c in caches}
    lines = []
    for s in starts:
        if not s.get("cold"):
            continue
        what = f"cache {s['cache']}" + (f" ({sizes[s['cache']]})" if sizes.get(s["cache"]) else "")
        state = "not staged yet" if s.get("basis") == STAGED else "not hydrated"
        if s.get("eta_seconds") is not None:
            eta = f"ETA ~{_duration(int(s['eta_seconds']))} at {_rate(int(s['throughput']))} ({s['throughput_source']})"
        else:
            eta = "ETA unknown (no measured hydration there; set gpufleet_hydration_throughput)"
        lines.append(f"{s['deployment']} replica ({s['cluster']}, {s['index']}): cold start, {what} {state}; {eta}")
    return lines
