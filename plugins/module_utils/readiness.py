# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""When is a serving workload ready? Per kind, from the workload's own replica counts, never a bare condition.

A Deployment with one replica and ``maxUnavailable: 1`` reports ``Available=True`` with no pod ready, so the
``Available`` condition proves nothing during a rollout or a drain. Readiness here means: the controller has seen the
current generation, and the updated, ready and available replica counts all equal the desired count (the checks of
kubernetes.core's Deployment waiter, plus ``readyReplicas``). A LeaderWorkerSet is ready when its ``readyReplicas``
and ``updatedReplicas`` equal ``spec.replicas`` (a group counts as ready only when its leader and every worker are).
KServe's LLMInferenceService publishes no replica counts: its controller's ``Ready`` condition is what there is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import LABEL_DEPLOYMENT

Predicate = Callable[[Mapping[str, Any]], "str | None"]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _generation_seen(obj: Mapping[str, Any]) -> str | None:
    generation = _int(obj.get("metadata", {}).get("generation"))
    observed = _int((obj.get("status") or {}).get("observedGeneration"))
    if generation and observed < generation:
        return f"its controller has not seen generation {generation} yet (observed {observed})"
    return None


def _counts(obj: Mapping[str, Any], fields: tuple[str, ...]) -> str | None:
    desired = (obj.get("spec") or {}).get("replicas")
    desired = 1 if desired is None else _int(desired)
    status = obj.get("status") or {}
    short = [
        f"{_int(status.get(f))}/{desired} {f.removesuffix('Replicas')}"
        for f in fields
        if _int(status.get(f)) != desired
    ]
    return ", ".join(short) if short else None


def deployment_pending(obj: Mapping[str, Any]) -> str | None:
    status = obj.get("status") or {}
    return (
        _generation_seen(obj)
        or _counts(obj, ("updatedReplicas", "readyReplicas", "availableReplicas"))
        or (
            f"{_int(status.get('unavailableReplicas'))} unavailable"
            if _int(status.get("unavailableReplicas"))
            else None
        )
    )


def leaderworkerset_pending(obj: Mapping[str, Any]) -> str | None:
    return _counts(obj, ("updatedReplicas", "readyReplicas"))


def condition_pending(condition: str) -> Predicate:
    def pending(obj: Mapping[str, Any]) -> str | None:
        conds = (obj.get("status") or {}).get("conditions") or []
        match = next((c for c in conds if isinstance(c, Mapping) and c.get("type") == condition), None)
        if match is None:
            return f"no {condition} condition yet"
        if match.get("status") != "True":
            return (
                f"{condition}={match.get('status')}: {match.get('reason') or ''} {match.get('message') or ''}".strip()
            )
        return _generation_seen(obj)

    return pending


#: By workload kind (the backends' kinds: ``backends/*.py`` delegate their ``ready()`` here).
PREDICATES: dict[str, Predicate] = {
    "Deployment": deployment_pending,
    "LeaderWorkerSet": leaderworkerset_pending,
    "LLMInferenceService": condition_pending("Ready"),
}


def not_ready(obj: Mapping[str, Any]) -> str | None:
    """Why an observed object is not ready, or None; objects of other kinds are ready once they exist."""
    predicate = PREDICATES.get(str(obj.get("kind")))
    return None if predicate is None else predicate(obj)


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))


def pending_workloads(
    observed: Sequence[Mapping[str, Any]], desired: Sequence[Mapping[str, Any]]
) -> list[dict[str, str]]:
    """Each desired workload that is not ready yet (missing from ``observed`` counts as not ready):
    ``{kind, namespace, name, deployment, message}``; ``deployment`` is its ``gpufleet.io/deployment`` label."""
    seen = {_key(o): o for o in observed}
    out = []
    for want in desired:
        if str(want.get("kind")) not in PREDICATES:
            continue
        key = _key(want)
        got = seen.get(key)
        why = "not found" if got is None else not_ready(got)
        if why:
            out.append(
                {
                    "kind": key[1],
                    "namespace": key[2],
                    "name": key[3],
                    "deployment": str(((want.get("metadata") or {}).get("labels") or {}).get(LABEL_DEPLOYMENT, "")),
                    "message": f"{key[1]} {key[2]}/{key[3]}: {why}",
                }
            )
    return out


def wait_ready(
    list_kind: Callable[[str, str], Sequence[Mapping[str, Any]]],
    desired: Sequence[Mapping[str, Any]],
    timeout: float,
    interval: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> tuple[list[dict[str, str]], int]:
    """Poll until every desired workload is ready or ``timeout`` seconds pass; return (pending, polls).

    ``list_kind(api_version, kind)`` lists the objects of one kind (one call per waited kind and poll); its errors
    propagate (a cluster that stops answering is a failure, not a timeout).
    """
    kinds = sorted({(str(o.get("apiVersion")), str(o.get("kind"))) for o in desired if o.get("kind") in PREDICATES})
    deadline = clock() + timeout
    polls = 0
    while True:
        polls += 1
        observed: list[Mapping[str, Any]] = []
        for api_version, kind in kinds:
            observed.extend(list_kind(api_version, kind))
        pending = pending_workloads(observed, desired)
        if not pending or clock() >= deadline:
            return pending, polls
        sleep(min(interval, max(deadline - clock(), 0)))
