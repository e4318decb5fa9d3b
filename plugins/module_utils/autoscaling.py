# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Autoscaling of a deployment's replicas with KEDA (docs/autoscaling.md).

A deployment with ``autoscaling: {min_replicas, max_replicas, metric, reserve}`` is placed with
``Autoscaling.placed`` replicas (``max_replicas`` with ``reserve: true``, otherwise ``min_replicas``, at least one).
The fleet's bounds are split over the clusters that hold its replicas (:func:`cluster_bounds`: the per-cluster
bounds sum to the fleet's), then over each cluster's replica workloads (:func:`workload_bounds`), and every workload
gets a KEDA ``ScaledObject`` (:func:`scaled_object`) that targets its scale subresource with a Prometheus trigger on
the engine's metrics. A workload's bounds count fleet replicas; its ``minReplicaCount`` / ``maxReplicaCount`` count
its own units (pods of a Deployment, groups of a LeaderWorkerSet): the bounds times the replica's ``copies``.

With ``autoscaling.kind: hpa`` each workload gets a Kubernetes ``autoscaling/v2`` HorizontalPodAutoscaler instead
(:func:`horizontal_pod_autoscaler`): a ``Pods`` metric named as the Prometheus adapter serves the engine's series
(:data:`HPA_METRICS`), ``AverageValue`` the metric's target; an HPA keeps at least one pod per workload.

Pure functions over validated models; the renderer calls :func:`autoscale_objects` on each cluster's objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    LABEL_DEPLOYMENT,
    LABEL_ENGINE,
    LABEL_REPLICA,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Autoscaling, ModelDeployment
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import ReplicaRecord

#: The workload kinds KEDA scales through their scale subresource, and the regex of their pods' names after the
#: workload's name (a Deployment's ``<name>-<template hash>-<5 random>``, a LeaderWorkerSet's ``<name>-<group>[-<i>]``).
SCALABLE_KINDS: dict[tuple[str, str], str] = {
    ("apps/v1", "Deployment"): "-[a-z0-9]+-[a-z0-9]+",
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "-[0-9]+(-[0-9]+)?",
}
SCALED_OBJECT_API = "keda.sh/v1alpha1"
#: Where KEDA's Prometheus triggers query when the cluster sets no ``gpufleet_prometheus_url``.
DEFAULT_PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"
#: The built-in query of each metric kind: a sum over the workload's pods (KEDA's ``AverageValue`` divides it by the
#: target, so the result is the replicas wanted). ``$namespace`` / ``$pods`` are the workload's namespace and the
#: regex of its pods' names.
METRIC_QUERIES: dict[str, str] = {
    "queue_depth": 'sum(vllm:num_requests_waiting{namespace="$namespace",pod=~"$pods"})',
    "kv_cache": 'sum(vllm:kv_cache_usage_perc{namespace="$namespace",pod=~"$pods"})',
    "rps": 'sum(rate(vllm:request_success_total{namespace="$namespace",pod=~"$pods"}[1m]))',
}
#: With ``min_replicas: 0`` a workload at zero pods has no engine metrics: it is activated by requests the gateway
#: could not route (Envoy's ``upstream_cx_none_healthy`` on the model Service's cluster), docs/autoscaling.md.
ACTIVATION_QUERY = (
    'sum(rate(envoy_cluster_upstream_cx_none_healthy{envoy_cluster_name=~".*$namespace.*$deployment.*"}[1m]))'
)
#: Seconds KEDA waits after the last active trigger before it scales a workload to its minimum (zero included).
COOLDOWN_SECONDS = 300
HPA_API = "autoscaling/v2"
#: The custom-metrics names an HPA's ``Pods`` metric reads per metric kind, as the Prometheus adapter serves them with
#: the rules of docs/autoscaling.md ("HPA"): the engine's gauges by their own name, the request rate as a per-second
#: rate of ``vllm:request_success_total``.
HPA_METRICS: dict[str, str] = {
    "queue_depth": "vllm:num_requests_waiting",
    "kv_cache": "vllm:kv_cache_usage_perc",
    "rps": "vllm:request_success_per_second",
}
#: Seconds an HPA waits before it scales down (its ``behavior``), as KEDA's cooldown: a model takes minutes to load.
HPA_SCALE_DOWN_WINDOW = COOLDOWN_SECONDS


def _apportion(total: int, weights: Mapping[str, int], caps: Mapping[str, int] | None = None) -> dict[str, int]:
    """``total`` split over ``weights``' keys in proportion to their weights (largest remainder, ties by name), each
    share at most its cap when ``caps`` is given (what a cap refuses goes to the others)."""
    names = sorted(weights)
    out = dict.fromkeys(names, 0)
    left = total
    while left > 0:
        open_ = [n for n in names if caps is None or out[n] < caps[n]]
        weight = sum(weights[n] for n in open_)
        if not open_ or weight <= 0:
            break
        exact = {n: left * weights[n] / weight for n in open_}
        given = 0
        for n in open_:
            share = int(exact[n])
            if caps is not None:
                share = min(share, caps[n] - out[n])
            out[n] += share
            given += share
        rest = left - given
        for n in sorted(open_, key=lambda n: (-(exact[n] - int(exact[n])), n)):
            if rest <= 0:
                break
            if caps is None or out[n] < caps[n]:
                out[n] += 1
                rest -= 1
        if left - given == rest:  # nobody could take more
            break
        left = rest
    return out


def cluster_bounds(scaling: Autoscaling, placed: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """Per cluster ``(min, max)`` replicas, from the replicas placed there (``{cluster: count}``).

    The minimums sum to ``min_replicas`` (each at most the cluster's placed replicas: a minimum is reserved capacity)
    and the maximums to ``max_replicas``: with ``reserve: true`` a cluster's maximum is what is placed there; without,
    the headroom beyond the placed replicas is split in proportion to them. When placement placed fewer replicas than
    asked (unschedulable), the bounds are those of what was placed plus, without reserve, the headroom."""
    counts = {c: n for c, n in placed.items() if n > 0}
    if not counts:
        return {}
    total = sum(counts.values())
    lows = _apportion(min(scaling.min_replicas, total), counts, caps=counts)
    if scaling.reserve:
        highs = dict(counts)
    else:
        extra = _apportion(max(scaling.max_replicas - total, 0), counts)
        highs = {c: counts[c] + extra[c] for c in counts}
    return {c: (lows[c], highs[c]) for c in sorted(counts)}


def workload_bounds(low: int, high: int, indexes: Sequence[int]) -> dict[int, tuple[int, int]]:
    """A cluster's ``(low, high)`` over its replicas (by index): the lowest indexes keep one replica each as the
    minimum, every replica may grow to one, and the cluster's headroom beyond them goes round-robin from the lowest."""
    order = sorted(indexes)
    out: dict[int, tuple[int, int]] = {}
    extra = max(high - len(order), 0)
    for rank, index in enumerate(order):
        grow = extra // len(order) + (1 if rank < extra % len(order) else 0)
        out[index] = (1 if rank < low else 0, 1 + grow)
    return out


def check_autoscaling(dep: ModelDeployment, backends: Sequence[str], prefix: str = "deployment") -> None:
    """What a render refuses: autoscaling a backend whose workload KEDA cannot scale (KServe's LLMInferenceService
    scales itself: set its own autoscaling in the template)."""
    if dep.autoscaling is None:
        return
    bad = sorted({b for b in backends if b not in ("deployment", "leaderworkerset")})
    if bad:
        raise FleetValidationError(
            [
                (
                    f"{prefix}.autoscaling",
                    f"backend {', '.join(bad)} cannot be autoscaled by gpufleet.serving (only Deployment and "
                    "LeaderWorkerSet workloads, through their scale subresource); remove autoscaling or use backend "
                    "deployment / leaderworkerset",
                )
            ]
        )


def metric_query(dep: ModelDeployment, namespace: str, pods: str) -> str:
    scaling = dep.autoscaling
    if scaling is None:
        raise GpufleetError(f"deployment {dep.name!r} has no autoscaling")  # pragma: no cover - callers check
    text = scaling.metric.query or METRIC_QUERIES[scaling.metric.kind]
    return _substitute(text, namespace=namespace, pods=pods, deployment=dep.name)


def _substitute(text: str, **values: str) -> str:
    for key in sorted(values, key=len, reverse=True):
        text = text.replace(f"${key}", values[key])
    return text


def _number(value: float) -> str:
    return f"{value:g}"


def scaled_object(
    dep: ModelDeployment,
    workload: Mapping[str, Any],
    bounds: tuple[int, int],
    copies: int,
    server: str,
) -> dict[str, Any]:
    """The ScaledObject of one replica workload: ``bounds`` in replicas, times ``copies`` units of the workload."""
    scaling = dep.autoscaling
    if scaling is None:
        raise GpufleetError(f"deployment {dep.name!r} has no autoscaling")  # pragma: no cover - callers check
    meta = workload["metadata"]
    suffix = SCALABLE_KINDS[(workload["apiVersion"], workload["kind"])]
    pods = f"{meta['name']}{suffix}"
    trigger_meta = {
        "serverAddress": server,
        "query": metric_query(dep, meta["namespace"], pods),
        "threshold": _number(scaling.metric.target),
    }
    triggers: list[dict[str, Any]] = [{"type": "prometheus", "metricType": "AverageValue", "metadata": trigger_meta}]
    low, high = bounds
    if low == 0:
        activation = _substitute(ACTIVATION_QUERY, namespace=meta["namespace"], deployment=dep.name)
        triggers.append(
            {
                "type": "prometheus",
                "name": "activation",
                "metricType": "Value",
                "metadata": {
                    "serverAddress": server,
                    "query": activation,
                    "threshold": "1",
                    "activationThreshold": "0",
                },
            }
        )
    labels = dict(meta.get("labels") or {})
    out_meta: dict[str, Any] = {"name": meta["name"], "namespace": meta["namespace"], "labels": labels}
    return {
        "apiVersion": SCALED_OBJECT_API,
        "kind": "ScaledObject",
        "metadata": out_meta,
        "spec": {
            "scaleTargetRef": {"apiVersion": workload["apiVersion"], "kind": workload["kind"], "name": meta["name"]},
            "minReplicaCount": low * copies,
            "maxReplicaCount": high * copies,
            "cooldownPeriod": COOLDOWN_SECONDS,
            "triggers": triggers,
        },
    }


def horizontal_pod_autoscaler(
    dep: ModelDeployment,
    workload: Mapping[str, Any],
    bounds: tuple[int, int],
    copies: int,
) -> dict[str, Any]:
    """The HorizontalPodAutoscaler (autoscaling/v2) of one replica workload: ``bounds`` in replicas times ``copies``
    units, at least one (an HPA's ``minReplicas`` is 1 or more), on the Pods metric of the deployment's metric kind."""
    scaling = dep.autoscaling
    if scaling is None:
        raise GpufleetError(f"deployment {dep.name!r} has no autoscaling")  # pragma: no cover - callers check
    meta = workload["metadata"]
    low, high = bounds
    metric = {
        "type": "Pods",
        "pods": {
            "metric": {"name": HPA_METRICS[scaling.metric.kind]},
            "target": {"type": "AverageValue", "averageValue": _number(scaling.metric.target)},
        },
    }
    return {
        "apiVersion": HPA_API,
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": dict(meta.get("labels") or {})},
        "spec": {
            "scaleTargetRef": {"apiVersion": workload["apiVersion"], "kind": workload["kind"], "name": meta["name"]},
            "minReplicas": max(low, 1) * copies,
            "maxReplicas": max(high, 1) * copies,
            "metrics": [metric],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": HPA_SCALE_DOWN_WINDOW}},
        },
    }


def autoscale_objects(
    dep: ModelDeployment,
    records: Sequence[ReplicaRecord],
    cluster: str,
    objects: list[dict[str, Any]],
    server: str | None = None,
) -> list[dict[str, Any]]:
    """``objects`` (one cluster's render of ``dep``) with a ScaledObject (or, ``kind: hpa``, a
    HorizontalPodAutoscaler) after each replica workload and the
    workloads' ``spec.replicas`` left to KEDA (an apply that set it would fight the autoscaler on every run).
    ``records``: every replica of the deployment, fleet-wide (the bounds are the fleet's, split over clusters)."""
    scaling = dep.autoscaling
    if scaling is None:
        return objects
    placed: dict[str, int] = {}
    for record in records:
        if record.deployment == dep.name:
            placed[record.cluster] = placed.get(record.cluster, 0) + 1
    bounds = cluster_bounds(scaling, placed)
    if cluster not in bounds:
        return objects
    mine = {r.name: r for r in records if r.cluster == cluster and r.deployment == dep.name}
    per_index = workload_bounds(*bounds[cluster], [r.index for r in mine.values()])
    out: list[dict[str, Any]] = []
    for obj in objects:
        out.append(obj)
        key = (obj.get("apiVersion"), obj.get("kind"))
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if key not in SCALABLE_KINDS or labels.get(LABEL_DEPLOYMENT) != dep.name:
            continue
        found = mine.get(labels.get(LABEL_REPLICA))
        if found is None:
            continue
        record = found
        engine = next((e for e in record.engines if e.name == labels.get(LABEL_ENGINE)), None)
        copies = engine.copies if engine is not None else 1
        obj["spec"].pop("replicas", None)
        if scaling.kind == "hpa":
            out.append(horizontal_pod_autoscaler(dep, obj, per_index[record.index], copies))
        else:
            out.append(scaled_object(dep, obj, per_index[record.index], copies, server or DEFAULT_PROMETHEUS_URL))
    return out


def bounds_summary(dep: ModelDeployment, records: Sequence[ReplicaRecord]) -> dict[str, Any] | None:
    """What the plan and explain show of an autoscaled deployment: the configured bounds, what placement placed, and
    each cluster's bounds (``None`` for a deployment without autoscaling)."""
    scaling = dep.autoscaling
    if scaling is None:
        return None
    placed: dict[str, int] = {}
    for record in records:
        if record.deployment == dep.name:
            placed[record.cluster] = placed.get(record.cluster, 0) + 1
    return {
        "min_replicas": scaling.min_replicas,
        "max_replicas": scaling.max_replicas,
        "reserve": scaling.reserve,
        "kind": scaling.kind,
        "metric": {"kind": scaling.metric.kind, "target": scaling.metric.target},
        "placed": sum(placed.values()),
        "clusters": {c: {"min": lo, "max": hi} for c, (lo, hi) in cluster_bounds(scaling, placed).items()},
    }
