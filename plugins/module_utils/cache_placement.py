# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Where each model cache is staged (issue 30, "caches follow placement").

A cache with ``clusters: follow`` (the default for a cache a deployment mounts) is staged exactly on the clusters
that hold a replica of a deployment mounting it, as the placement (the plan document) decided; a cache with a host
pattern is staged on every cluster the pattern matches (pre-warming clusters on purpose). ``fleet.validate_fleet``
gives a follow cache the clusters it *may* be staged on (``candidate_clusters``: wherever its deployments may go), so
placement still only puts a replica where its cache can be; this module narrows that to where it *is* needed.

In apply mode, :func:`follow_removal` decides whether a follow cache's objects (PVC, Job, ConfigMap) are deleted
from a cluster the placement left: only when nothing placed, serving or running there mounts it, and never in a play
narrower than the fleet (unless ``gpufleet_allow_partial_play``).

Pure, over the dict shapes ``fleet_info`` returns (the model_cache role calls it through the filters
``cache_staged`` and ``cache_follow_removal``), no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ADOPT_UNLABELLED_VAR,
    CACHE_OWNER,
    LABEL_CACHE,
    LABEL_FLEET,
    object_labels,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

#: The ``clusters`` value of a cache that follows its deployments' placement (models.CACHE_FOLLOW; spelled here too so
#: this module imports nothing of pydantic's models).
FOLLOW = "follow"

#: Why a follow cache is staged where it is (``staged_by`` of each cache).
BY_PLACEMENT = "placement"
BY_PATTERN = "pattern"
NO_PLAN = "no-plan"
#: An adapter's cache (adapters.staged_adapter_caches) carries ``{deployment, name, revision}`` under this key.
ADAPTER_KEY = "adapter"
#: The keys :func:`staged_clusters` adds to a cache (not fields of the cache: cache_objects drops them).
STAGING_KEYS = frozenset({"may_stage_on", "staged_by", "staged_note", ADAPTER_KEY})
#: The inventory variable that lets a play narrower than the fleet delete (roles/model_deployment reads it too).
PARTIAL_PLAY_VAR = "gpufleet_allow_partial_play"


def _name(item: Mapping[str, Any], what: str, index: int) -> str:
    name = item.get("name") if isinstance(item, Mapping) else None
    if not isinstance(name, str) or not name:
        raise GpufleetError(f"{what}[{index}] has no name (pass fleet_info's fleet.{what})")
    return name


def placed_clusters(
    deployments: Iterable[Mapping[str, Any]], replicas: Iterable[Mapping[str, Any]]
) -> dict[str, set[str]]:
    """``{cache: {clusters holding a replica of a deployment that mounts it}}``."""
    mounts = {str(d["name"]): d.get("cache") for d in deployments if isinstance(d, Mapping) and d.get("name")}
    out: dict[str, set[str]] = {}
    for i, rec in enumerate(replicas):
        if not isinstance(rec, Mapping) or not rec.get("deployment") or not rec.get("cluster"):
            raise GpufleetError(f"replicas[{i}] must be a replica record with a deployment and a cluster")
        cache = mounts.get(str(rec["deployment"]))
        if cache:
            out.setdefault(str(cache), set()).add(str(rec["cluster"]))
    return out


def staged_clusters(
    caches: Iterable[Mapping[str, Any]],
    deployments: Iterable[Mapping[str, Any]],
    replicas: Iterable[Mapping[str, Any]] | None,
) -> list[dict[str, Any]]:
    """Each cache (as fleet_info returns it) with ``candidate_clusters`` narrowed to the clusters it is staged on, the
    clusters it may be staged on kept as ``may_stage_on``, ``staged_note`` (a line saying where a follow cache is
    staged, else empty) and ``staged_by``: ``pattern`` (a host pattern: every
    cluster it matches), ``placement`` (follow: the clusters holding replicas of its deployments, in ``replicas``) or
    ``no-plan`` (follow without a placement to follow: every cluster its deployments may go to, as a pre-warm, so no
    replica ever waits for a cache that was never staged).

    A follow cache is never staged outside ``may_stage_on`` (a replica record naming a cluster the cache's
    deployments cannot use is ignored here; the plan check refuses such a plan before)."""
    deployments = list(deployments)
    placed = placed_clusters(deployments, replicas) if replicas is not None else None
    out = []
    for i, cache in enumerate(caches):
        name = _name(cache, "caches", i)
        may = [str(c) for c in cache.get("candidate_clusters") or []]
        item = dict(cache)
        item["may_stage_on"] = may
        if cache.get("clusters") != FOLLOW:
            item["staged_by"] = BY_PATTERN
        elif placed is None:
            item["staged_by"] = NO_PLAN
        else:
            wanted = placed.get(name, set())
            item["candidate_clusters"] = [c for c in may if c in wanted]
            item["staged_by"] = BY_PLACEMENT
        item["staged_note"] = _note(item)
        out.append(item)
    return out


def _note(cache: Mapping[str, Any]) -> str:
    """Where a follow cache is staged and why (the role prints it); empty for a host pattern."""
    if cache.get("staged_by") == BY_PLACEMENT:
        on = ", ".join(cache.get("candidate_clusters") or []) or "no cluster (no replica of its deployments is placed)"
        return f"cache {cache['name']} follows placement: staged on {on}"
    if cache.get("staged_by") == NO_PLAN:
        return (
            f"cache {cache['name']} follows placement, but there is no plan to follow (run playbooks/plan.yml "
            f"first): staged on every cluster its deployments may use ({', '.join(cache.get('may_stage_on') or [])})"
        )
    return ""


# -- Adapters (issue 33): a deployment's LoRA adapters follow the deployment itself ----------------------------------


def deployment_clusters(replicas: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """``{deployment: {clusters holding one of its replicas}}`` from the plan's replica records."""
    out: dict[str, set[str]] = {}
    for i, rec in enumerate(replicas):
        if not isinstance(rec, Mapping) or not rec.get("deployment") or not rec.get("cluster"):
            raise GpufleetError(f"replicas[{i}] must be a replica record with a deployment and a cluster")
        out.setdefault(str(rec["deployment"]), set()).add(str(rec["cluster"]))
    return out


def follow_staging(item: Mapping[str, Any], may: list[str], placed: set[str] | None) -> dict[str, Any]:
    """``item`` (a follow cache) staged as :func:`staged_clusters` stages one: on the clusters of ``may`` in
    ``placed`` (``staged_by: placement``), or on all of ``may`` when there is no plan (``placed`` None)."""
    out = dict(item)
    out["may_stage_on"] = list(may)
    if placed is None:
        out["candidate_clusters"] = list(may)
        out["staged_by"] = NO_PLAN
    else:
        out["candidate_clusters"] = [c for c in may if c in placed]
        out["staged_by"] = BY_PLACEMENT
    out["staged_note"] = _note(out)
    return out


# --- Apply mode: removing a follow cache from a cluster the placement left -----------------------------------------

#: What :func:`follow_removal` decides for a follow cache on a cluster it is no longer staged on.
REMOVE = "remove"
KEEP = "keep"
NOTHING = "nothing"
#: The kinds of a cache's own objects, in the order they are deleted (the Job and its hydrator ConfigMap before the
#: volume they use). The Secret a Job reads exists only while it hydrates and is deleted by the run that created it.
REMOVABLE_KINDS = ("Job", "ConfigMap", "PersistentVolumeClaim")
_FINISHED_PHASES = ("Succeeded", "Failed")


def _claims_in(obj: Any) -> set[str]:
    """Every ``persistentVolumeClaim.claimName`` anywhere in ``obj`` (a Pod, or a workload's pod templates)."""
    found: set[str] = set()
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            claim = item.get("persistentVolumeClaim")
            if isinstance(claim, Mapping) and isinstance(claim.get("claimName"), str):
                found.add(claim["claimName"])
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _describe(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return f"{obj.get('kind') or 'object'} {meta.get('namespace')}/{meta.get('name')}"


def follow_removal(
    cache: Mapping[str, Any],
    cluster: str,
    objects: Iterable[Mapping[str, Any]],
    users: Iterable[Mapping[str, Any]] = (),
    *,
    deployments: Iterable[Mapping[str, Any]] = (),
    replicas: Iterable[Mapping[str, Any]] = (),
    observed: Iterable[Mapping[str, Any]] = (),
    fleet: str,
    adopt_unlabelled: bool | None = None,
    outside_play: Iterable[str] = (),
    allow_partial_play: bool = False,
) -> dict[str, Any]:
    """What an apply does with the objects of follow cache ``cache`` on ``cluster``, where the placement put no
    replica of its deployments (it is one of :func:`leaving_caches`).

    ``objects``: the cache's objects as read on the cluster (``k8s_info`` resources selected by the cache's owner
    labels and ``gpufleet.io/cache`` label: PVC, Job, ConfigMap). ``users``: the Pods and workloads (Deployments,
    StatefulSets, LeaderWorkerSets, ...) read in the cache's namespace: any that mounts the cache's volume keeps it.
    ``replicas``: the plan's replica records; ``observed``: replicas observed serving (the plan's observed placement,
    or the replicas read from the clusters' Services). ``outside_play``: the fleet's clusters outside this play
    (``--limit``, an AWX slice): then nothing is removed unless ``allow_partial_play`` (``gpufleet_allow_partial_play``).

    Returns ``{action, delete, kept, line}``: ``action`` is ``remove`` (delete ``delete``, a list of ``{kind,
    namespace, name}`` in :data:`REMOVABLE_KINDS` order), ``keep`` (something still needs it, or the play is partial;
    ``line`` says why) or ``nothing`` (none of its objects is on the cluster). ``kept`` lists the objects left alone
    (another fleet's, or unlabelled ones this fleet has not adopted).
    """
    name = _name(cache, "caches", 0)
    if cache.get("staged_by") != BY_PLACEMENT:
        raise GpufleetError(
            f"cache {name} is not staged by placement (staged_by {cache.get('staged_by')!r}): only a follow cache with "
            "a plan to follow leaves a cluster (pass the caches from cache_staged with the plan's replicas)"
        )
    if cluster in [str(c) for c in cache.get("candidate_clusters") or []]:
        raise GpufleetError(f"cache {name} is staged on cluster {cluster}: it is not removed from there")
    namespace = str(cache.get("namespace") or "default")
    backend = str((cache.get("storage") or {}).get("backend") or "pvc")
    mine: list[Mapping[str, Any]] = []
    kept: list[str] = []
    for i, obj in enumerate(objects):
        if not isinstance(obj, Mapping) or not _meta(obj).get("name"):
            raise GpufleetError(f"objects[{i}] must be a Kubernetes object with metadata.name (got {obj!r:.120})")
        meta = _meta(obj)
        labels = object_labels(obj)
        if (
            obj.get("kind") not in REMOVABLE_KINDS
            or meta.get("namespace") != namespace
            or labels.get(LABEL_CACHE) != name
            or any(labels.get(k) != v for k, v in CACHE_OWNER.items())
        ):
            continue  # not this cache's own object (the selector should not have returned it)
        if obj.get("kind") == "PersistentVolumeClaim" and backend != "pvc":
            kept.append(f"{_describe(obj)} (the cache adopts it: storage.backend {backend})")
            continue
        theirs = labels.get(LABEL_FLEET)
        if theirs and str(theirs) != fleet:
            kept.append(f"{_describe(obj)} (fleet {theirs}'s)")
        elif not theirs and adopt_unlabelled is not True:
            kept.append(f"{_describe(obj)} (no fleet label; {ADOPT_UNLABELLED_VAR} is not true)")
        else:
            mine.append(obj)
    if not mine:
        return {"action": NOTHING, "delete": [], "kept": kept, "line": ""}
    where = f"cache {name} on cluster {cluster}"
    outside = sorted({str(c) for c in outside_play})
    if outside and not allow_partial_play:
        return _keep(
            kept,
            f"{where}: no replica of its deployments is placed here any more, but the play is narrower than the fleet "
            f"(outside it: {', '.join(outside)}), so its volume is kept (set {PARTIAL_PLAY_VAR} to remove it)",
        )
    mounting = {str(d.get("name")) for d in deployments if isinstance(d, Mapping) and d.get("cache") == name}
    adapter = cache.get(ADAPTER_KEY)
    if isinstance(adapter, Mapping) and adapter.get("deployment"):
        mounting.add(str(adapter["deployment"]))  # a LoRA adapter's cache is mounted by its deployment
    for what, records in (("placed", replicas), ("still serving", observed)):
        here = sorted(
            {
                str(r.get("deployment"))
                for r in records
                if isinstance(r, Mapping) and r.get("cluster") == cluster and str(r.get("deployment")) in mounting
            }
        )
        if here:
            return _keep(kept, f"{where}: kept, a replica of {', '.join(here)} (which mounts it) is {what} here")
    claims = {str(_meta(o).get("name")) for o in mine if o.get("kind") == "PersistentVolumeClaim"}
    claims.add(str((cache.get("storage") or {}).get("claim_name") or ""))
    claims.discard("")
    busy = []
    for obj in users:
        if not isinstance(obj, Mapping) or _meta(obj).get("namespace") != namespace:
            continue
        labels = object_labels(obj)
        if labels.get(LABEL_CACHE) == name and all(labels.get(k) == v for k, v in CACHE_OWNER.items()):
            continue  # the cache's own hydration Job and its pods go with it
        if obj.get("kind") == "Pod" and (obj.get("status") or {}).get("phase") in _FINISHED_PHASES:
            continue
        if _claims_in(obj.get("spec")) & claims:
            busy.append(_describe(obj))
    if busy:
        shown = ", ".join(sorted(busy)[:5]) + (f" and {len(busy) - 5} more" if len(busy) > 5 else "")
        return _keep(kept, f"{where}: kept, {shown} still mount(s) its volume; it is removed once nothing does")
    order = {kind: i for i, kind in enumerate(REMOVABLE_KINDS)}
    delete = [
        {"kind": str(o["kind"]), "namespace": namespace, "name": str(_meta(o)["name"])}
        for o in sorted(mine, key=lambda o: (order[str(o["kind"])], str(_meta(o)["name"])))
    ]
    return {
        "action": REMOVE,
        "delete": delete,
        "kept": kept,
        "line": f"{where}: removed ({', '.join(d['kind'] + ' ' + d['name'] for d in delete)}): the placement put no "
        "replica of its deployments here and nothing mounts its volume",
    }


def _keep(kept: list[str], line: str) -> dict[str, Any]:
    return {"action": KEEP, "delete": [], "kept": kept, "line": line}
