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
#: How long a wait distrusts the status of a workload whose kind has no ``observedGeneration`` after a spec change,
#: when its controller writes nothing (see :func:`wait_ready`).
STALE_SETTLE_SECONDS = 30.0


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


#: By workload kind (the backends' kinds: ``render/backends/*.py`` delegate their ``ready()`` here).
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


def unreported(applied: Mapping[str, Any], before: Mapping[str, Any] | None) -> bool:
    """Whether the status of ``applied`` (a workload as an apply stored it; ``before``: as it was listed before) cannot
    tell yet whether the change is rolled out: the apply changed its spec (``metadata.generation`` moved) and its status
    carries no ``observedGeneration`` to say when its controller has seen the change. A LeaderWorkerSet is such a
    kind: right after its template changes, its status still counts the old groups as updated and ready."""
    if before is None or str(applied.get("kind")) not in PREDICATES:
        return False
    moved = _int((applied.get("metadata") or {}).get("generation")) != _int(
        (before.get("metadata") or {}).get("generation")
    )
    return moved and "observedGeneration" not in (applied.get("status") or {})


def pending_workloads(
    observed: Sequence[Mapping[str, Any]],
    desired: Sequence[Mapping[str, Any]],
    stale: Mapping[tuple[str, str, str, str], str] | None = None,
) -> list[dict[str, str]]:
    """Each desired workload that is not ready yet (missing from ``observed`` counts as not ready):
    ``{kind, namespace, name, deployment, message}``; ``deployment`` is its ``gpufleet.io/deployment`` label.
    ``stale``: workloads whose status predates a change just applied (:func:`unreported`), by key, with the
    ``resourceVersion`` the apply stored; such a workload is not ready until its controller has written it since."""
    seen = {_key(o): o for o in observed}
    out = []
    for want in desired:
        if str(want.get("kind")) not in PREDICATES:
            continue
        key = _key(want)
        got = seen.get(key)
        why = "not found" if got is None else not_ready(got)
        if (
            not why
            and got is not None
            and stale
            and key in stale
            and str((got.get("metadata") or {}).get("resourceVersion")) == stale[key]
        ):
            why = "its controller has not reported on the applied change yet"
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
    stale: Mapping[tuple[str, str, str, str], str] | None = None,
    settle: float = STALE_SETTLE_SECONDS,
) -> tuple[list[dict[str, str]], int]:
    """Poll until every desired workload is ready or ``timeout`` seconds pass; return (pending, polls).

    ``list_kind(api_version, kind)`` lists the objects of one kind (one call per waited kind and poll); its errors
    propagate (a cluster that stops answering is a failure, not a timeout). ``stale``: see :func:`pending_workloads`;
    after ``settle`` seconds a controller that wrote nothing is taken to have had nothing to report (a spec change
    that is no new revision), and the replica counts are trusted.
    """
    kinds = sorted({(str(o.get("apiVersion")), str(o.get("kind"))) for o in desired if o.get("kind") in PREDICATES})
    start = clock()
    deadline = start + timeout
    polls = 0
    while True:
        polls += 1
        observed: list[Mapping[str, Any]] = []
        for api_version, kind in kinds:
            observed.extend(list_kind(api_version, kind))
        pending = pending_workloads(observed, desired, stale if clock() - start < settle else None)
        if not pending or clock() >= deadline:
            return pending, polls
        sleep(min(interval, max(deadline - clock(), 0)))
