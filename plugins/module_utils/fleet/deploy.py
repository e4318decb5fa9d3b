# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fleet-wide deploy orchestration: observed state in, every deployment placed in order, a report out.

The deploy playbook calls :func:`place_fleet` once per run (one task, not one per deployment): deployments are placed
by ``priority`` (higher first), then in the order they are listed, each placement fed the replicas placed so far, so capacity is shared and never
overcommitted. Observed replicas come back from the ``gpufleet.io/placement`` annotation that the rendered per-replica
Service carries (from the render directory in render mode, from the clusters in apply mode).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ANNOTATION_PLACEMENT,
    CORDON_TAINT,
    DRAIN_TAINT,
    LABEL_CLUSTER,
    LABEL_DEPLOYMENT,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelDeployment, parse, require_pydantic
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import (
    plan,
    validate_classes,
    validate_clusters,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import (
    EXPLAIN_LIMIT,
    GROUP_OVER,
    NAMES_SHOWN,
    fit_size,
    group_unschedulable,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import ReplicaRecord
from ansible_collections.gpufleet.serving.plugins.module_utils.warm_first import (
    Warmth,
    cold_lines,
    cold_starts,
    warm_clusters,
)

PLACEMENT_ANNOTATION = ANNOTATION_PLACEMENT  # kept for importers; the contract module owns it
READY = "Ready"
CODE_CACHE_NOT_HOSTED = "CacheNotHosted"
DEGRADED = "Degraded"


@dataclass(frozen=True)
class SkippedObject:
    """An owned object whose ``gpufleet.io/placement`` annotation could not be read: placement skipped it (its replica
    is not counted as existing), so its deployment is *held*: nothing of it is pruned while the object is unreadable
    (an object that names no deployment is itself kept)."""

    cluster: str
    kind: str
    namespace: str
    name: str
    deployment: str | None
    reason: str
    api_version: str = "v1"
    #: The file it was read from (render mode), relative to the render directory.
    path: str | None = None

    def line(self) -> str:
        held = (
            f"nothing of deployment {self.deployment} is pruned this run"
            if self.deployment
            else "it names no deployment, so it is kept"
        )
        return f"{self.reason} (skipped; {held})"

    def to_dict(self) -> dict[str, Any]:
        out = {
            "cluster": self.cluster,
            "kind": self.kind,
            "api_version": self.api_version,
            "namespace": self.namespace,
            "name": self.name,
            "deployment": self.deployment,
            "reason": self.reason,
        }
        if self.path is not None:
            out["path"] = self.path
        return out


@dataclass
class Observation:
    """What the observed objects say: the replica records read back, and the objects skipped because their placement
    annotation could not be read."""

    records: list[ReplicaRecord] = field(default_factory=list)
    skipped: list[SkippedObject] = field(default_factory=list)

    def replicas(self) -> list[dict[str, Any]]:
        """The records in the dict shape (``device_requests`` absent: the annotation does not hold them)."""
        return [r.to_compact() for r in self.records]

    def held(self) -> list[str]:
        """Deployments with an unreadable object: none of their objects may be pruned this run."""
        return sorted({s.deployment for s in self.skipped if s.deployment})


def observe(objects: Iterable[tuple[str, Mapping[str, Any], str | None]]) -> Observation:
    """Replica records read back from rendered/applied objects' ``gpufleet.io/placement`` annotations, each object
    given with the cluster it was read from and, from a render directory, its file: ``(cluster, object, path)``.

    Each object is read on its own: one whose annotation cannot be read is skipped and reported (cluster, namespace,
    name and why) instead of stopping every deployment of the fleet. Identity is ``(deployment, cluster, index)``;
    duplicates (the same replica seen twice) keep the first record.
    """
    seen: dict[tuple[str, str, int], ReplicaRecord] = {}
    skipped: list[SkippedObject] = []
    for cluster, obj, path in objects:
        meta = obj.get("metadata") or {}
        raw = (meta.get("annotations") or {}).get(ANNOTATION_PLACEMENT)
        if not raw:
            continue
        kind, name = str(obj.get("kind") or "object"), str(meta.get("name"))
        namespace = str(meta.get("namespace") or "")
        try:
            record = ReplicaRecord.from_annotation(str(raw), f"{kind} {cluster}/{namespace}/{name}")
        except GpufleetError as exc:
            label = (meta.get("labels") or {}).get(LABEL_DEPLOYMENT)
            skipped.append(
                SkippedObject(
                    cluster=cluster,
                    kind=kind,
                    namespace=namespace,
                    name=name,
                    deployment=str(label) if label else None,
                    reason=str(exc),
                    api_version=str(obj.get("apiVersion") or "v1"),
                    path=path,
                )
            )
            continue
        seen.setdefault((record.deployment, record.cluster, record.index), record)
    return Observation([seen[k] for k in sorted(seen)], skipped)


def observed_replicas(objects: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The replicas of ``objects`` (each read from the cluster its ``gpufleet.io/cluster`` label names), strictly: an
    unreadable annotation is a :class:`GpufleetError` naming the object. Deploys use :func:`observe`, which skips it."""
    seen = observe(
        (str(((o.get("metadata") or {}).get("labels") or {}).get(LABEL_CLUSTER) or "?"), o, None) for o in objects
    )
    if seen.skipped:
        raise GpufleetError(seen.skipped[0].reason)
    return seen.replicas()


@dataclass
class FleetPlacement:
    replicas: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Observed capacity: why pools have fewer usable nodes than declared, ``{cluster: {pool: [cause]}}``.
    capacity_notes: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: Deployments placed with ``explain``: per cluster and pool, why each is or is not a candidate
    #: (``{deployment: {cluster: {reason, pools: {pool: why}}}}``, placement's ``candidates``).
    candidates: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per placed replica of a deployment mounting a cache: cold or warm, and a cold one's ETA (warm_first.cold_starts).
    cold: list[dict[str, Any]] = field(default_factory=list)
    #: The fleet's caches (sizes for the cold-start lines).
    caches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(r["changed"] for r in self.results.values())

    def by_deployment(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {name: [] for name in self.results}
        for r in self.replicas:
            out.setdefault(r["deployment"], []).append(r)
        return out

    def by_cluster(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for r in self.replicas:
            out.setdefault(r["cluster"], []).append(r)
        return out

    def shortfalls(self) -> list[str]:
        return [name for name, r in self.results.items() if r["scheduled"] < r["desired"]]

    def degraded(self) -> list[str]:
        """The shortfalls, and the deployments with replicas on an overcommitted pool (placed, but not all can run)."""
        return [name for name, r in self.results.items() if r["scheduled"] < r["desired"] or r.get("overcommitted")]

    def statuses(self) -> dict[str, str]:
        """``Ready`` when a deployment got every replica it asked for on pools that hold them, ``Degraded`` when it
        is short of some or a pool of its is overcommitted (the run may still succeed: see
        ``gpufleet_fail_on_unschedulable``)."""
        short = set(self.degraded())
        return {name: DEGRADED if name in short else READY for name in self.results}

    def table(self) -> list[str]:
        rows = [("DEPLOYMENT", "DESIRED", "SCHEDULED", "STATUS", "CONDITION", "PLACEMENT (cluster: replicas/pool)")]
        statuses = self.statuses()
        for name, res in self.results.items():
            per: dict[str, list[str]] = {}
            for r in res["replicas"]:
                pools = sorted({m["pool"] for e in r["engines"] for m in e["members"] if m.get("pool")})
                chosen = sorted(
                    {
                        f"{q['name']}={q['chosen']}"
                        for e in r["engines"]
                        for m in e["members"]
                        for q in m.get("device_requests") or []
                        if q.get("chosen")
                    }
                )
                where = "/".join(pools) or "-"
                per.setdefault(r["cluster"], []).append(f"{where} [{', '.join(chosen)}]" if chosen else where)
            placement = "; ".join(
                f"{cluster}: {len(pools)}x {','.join(sorted(set(pools)))}" for cluster, pools in sorted(per.items())
            )
            cond = res["condition"]
            rows.append(
                (name, str(res["desired"]), str(res["scheduled"]), statuses[name], cond["reason"], placement or "-")
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return ["  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]

    def explain(self, names: Iterable[str] = (), limit: int = EXPLAIN_LIMIT) -> list[str]:
        """One line per reason a replica could not be placed, for every deployment short of its replicas and every
        one named in ``names`` (``gpufleet_explain``). A deployment explained on many clusters has them grouped by
        diagnosis (:func:`artifacts.group_unschedulable`); the lines stay under ``limit`` characters in all."""
        wanted = set(self.degraded()) | set(names)
        chosen = [name for name in self.results if name in wanted]
        steps = [GROUP_OVER, 20, 10, 5, 1]

        def build(step: int) -> list[str]:
            return [line for name in chosen for line in self.explain_deployment(name, steps[step])]

        out: list[str] = fit_size(build, len(steps), limit)
        return out

    def explain_deployment(self, name: str, max_groups: int = GROUP_OVER) -> list[str]:
        """:meth:`explain`'s lines for one deployment: its counts and condition, then why each cluster (or group of
        clusters with the same diagnosis, at most ``max_groups``) could not take a replica."""
        res = self.results[name]
        table, omitted = group_unschedulable(res.get("unschedulable"), max_groups=max_groups)
        lines = [f"{name}: {res['scheduled']}/{res['desired']} scheduled - {res['condition']['message']}"]
        lines.extend(f"  {line}" for line in explain_lines(table, self.capacity_notes))
        if omitted:
            lines.append(f"  ... and {omitted} more cluster(s) with other diagnoses")
        if name in self.candidates:
            lines.extend(
                f"  {line}" for line in candidate_lines(self.candidates[name], self.capacity_notes, max_groups)
            )
        lines.extend(f"  {line}" for line in cold_lines([c for c in self.cold if c["deployment"] == name], self.caches))
        lines.extend(f"  {cluster}: {note}" for cluster, note in (res.get("queue_quota") or {}).items())
        return lines


def explain_lines(
    unschedulable: Mapping[str, Any] | None, capacity_notes: Mapping[str, Mapping[str, list[str]]] | None = None
) -> list[str]:
    """Flatten placement's ``unschedulable`` (``{cluster: {code, reason, pools: {pool: why}}}``) into lines, each pool
    followed by the observed causes of its missing capacity (``capacity_notes``), if any. An entry that stands for
    other clusters with the same diagnosis (``same``, ``same_count``: :func:`artifacts.group_unschedulable`) names
    the first few of them."""
    lines: list[str] = []
    table = unschedulable or {}
    notes = capacity_notes or {}
    for cluster in sorted(table):
        entry = table[cluster]
        label = cluster
        same = list(entry.get("same") or [])
        count = int(entry.get("same_count", len(same)))
        if count:
            shown = same[:NAMES_SHOWN]
            label += f" (and {count} more: {', '.join(shown)}{', ...' if count > len(shown) else ''})"
        lines.append(f"{label}: {entry.get('reason') or entry.get('code', '')}")
        for pool, why in (entry.get("pools") or {}).items():
            lines.append(f"  {cluster}/{pool}: {why}")
            lines.extend(f"    observed: {note}" for note in notes.get(cluster, {}).get(pool, []))
    return lines


def candidate_lines(
    candidates: Mapping[str, Mapping[str, Any]],
    capacity_notes: Mapping[str, Mapping[str, list[str]]] | None = None,
    max_clusters: int = GROUP_OVER,
) -> list[str]:
    """Placement's ``candidates`` (``{cluster: {reason, pools: {pool: why}}}``) as explain lines: every cluster (at
    most ``max_clusters``, the others counted) and each of its pools, why it is or is not a candidate, each pool
    followed by the observed causes of its missing capacity."""
    notes = capacity_notes or {}
    lines = ["candidates (why each cluster and pool is or is not one):"]
    names = sorted(candidates)
    for cluster in names[:max_clusters]:
        entry = candidates[cluster]
        lines.append(f"  {cluster}: {entry.get('reason') or 'eligible'}")
        for pool, why in (entry.get("pools") or {}).items():
            lines.append(f"    {cluster}/{pool}: {why}")
            lines.extend(f"      observed: {note}" for note in notes.get(cluster, {}).get(pool, []))
    if len(names) > max_clusters:
        lines.append(f"  ... and {len(names) - max_clusters} more cluster(s)")
    return lines


def fleet_clusters(
    placement_clusters: Iterable[Mapping[str, Any]],
    *,
    unreachable: Iterable[str] = (),
    drained: Iterable[str] = (),
    cordoned: Iterable[str] = (),
    observed_nodes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Clusters as placement sees them this run: unreachable ones take nothing new (``ready: false``) but keep what
    they have; drained ones get the fleet's ``NoExecute`` drain taint, cordoned ones a ``NoSchedule`` taint; with
    ``observed_nodes`` (``{cluster: {pool: usable nodes}}``, observed capacity) a pool counts its usable nodes, and
    where other workloads' claims hold some devices of a node (``{nodes, held}``), placement allocates around them."""
    unreachable, drained, cordoned = set(unreachable), set(drained), set(cordoned)
    observed_nodes = observed_nodes or {}
    out = {}
    for c in placement_clusters:
        seen = observed_nodes.get(c["name"], {})
        item = {
            "name": c["name"],
            "pools": [_observed_pool(p, seen[p["name"]]) if p.get("name") in seen else p for p in c.get("pools", [])],
            "taints": list(c.get("taints", [])),
            "ready": c.get("ready", True),
        }
        if c.get("kubernetes_version") is not None:
            item["kubernetes_version"] = c["kubernetes_version"]
        if c["name"] in unreachable:
            item["ready"] = False
        if c["name"] in drained:
            item["taints"].append(dict(DRAIN_TAINT))
        if c["name"] in cordoned:
            item["taints"].append(dict(CORDON_TAINT))
        out[c["name"]] = item
    return out


def _observed_pool(pool: Mapping[str, Any], seen: Any) -> dict[str, Any]:
    """A declared pool with what was observed of it: usable nodes (an int), or ``{nodes, held}``."""
    if isinstance(seen, Mapping):
        return {**pool, "nodes": seen["nodes"], "held": seen.get("held") or []}
    return {**pool, "nodes": seen}


def placement_order(deployments: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The order deployments take capacity in: higher ``priority`` first, list order among equal priorities."""
    return sorted(deployments, key=lambda d: -int(d.get("priority") or 0))


def place_fleet(
    fleet: Mapping[str, Any],
    observed: Iterable[Mapping[str, Any]],
    *,
    unreachable: Iterable[str] = (),
    drained: Iterable[str] = (),
    cordoned: Iterable[str] = (),
    observed_nodes: Mapping[str, Mapping[str, Any]] | None = None,
    capacity_notes: Mapping[str, Mapping[str, list[str]]] | None = None,
    force_drain: bool = False,
    explain: Iterable[str] = (),
    warmth: Warmth | None = None,
    queue_quota: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> FleetPlacement:
    """Place every deployment of a normalised fleet (``fleet_info``'s ``fleet``), sharing capacity: higher
    ``priority`` first, list order among equal priorities (:func:`placement_order`); ``results`` are in that order.

    Classes, clusters and observed records are validated once for the whole fleet, each deployment once. With
    ``observed_nodes`` pools count what was observed usable; ``capacity_notes`` (``{cluster: {pool: [cause]}}``)
    name the observed causes in the explain lines. A drain moves only the replicas whose replacement can be placed
    unless ``force_drain`` (see :func:`placement.plan`). Deployments named in ``explain`` (``gpufleet_explain``)
    also get ``candidates``: per cluster and pool, why each is or is not a candidate (:meth:`FleetPlacement.explain`).
    ``warmth`` (warm_first.py): among equally loaded clusters a deployment's new replicas go first where its cache is
    warm; every placed replica of a deployment mounting a cache is reported cold or warm (``cold``).
    ``queue_quota`` (``{cluster: {deployment: quota}}``, capacity.queue_quotas): a deployment naming its own Kueue
    queue is placed on each such cluster within what the queue's ClusterQueue admits (queues.quota_bounded_cluster).
    """
    require_pydantic()
    by_name = fleet_clusters(
        fleet["clusters"], unreachable=unreachable, drained=drained, cordoned=cordoned, observed_nodes=observed_nodes
    )
    classes = validate_classes(fleet["classes"])
    models = {c.name: c for c in validate_clusters(list(by_name.values()), classes)}
    names = [d["name"] for d in fleet["deployments"]]
    # Replicas of deployments that are no longer in the fleet are dropped (their objects get pruned) and free capacity.
    current: list[ReplicaRecord] = ReplicaRecord.parse_list(
        [r for r in observed if r.get("deployment") in names], "observed"
    )
    outcome = FleetPlacement(capacity_notes={k: dict(v) for k, v in (capacity_notes or {}).items()})
    explained = set(explain)
    for dep_data in placement_order(fleet["deployments"]):
        spec = {k: v for k, v in dep_data.items() if k != "candidate_clusters"}
        dep: ModelDeployment = parse(ModelDeployment, spec, "deployment")
        candidates = [models[name] for name in dep_data.get("candidate_clusters", []) if name in models]
        quotas = {c: q[dep.name] for c, q in (queue_quota or {}).items() if dep.name in q and c in models}
        if quotas:  # issue 33: its own Kueue queue admits no more than nominalQuota minus usage (queues.py)
            from ansible_collections.gpufleet.serving.plugins.module_utils.queues import quota_bounded_cluster

            bounded = {
                c: validate_clusters([quota_bounded_cluster(by_name[c], classes, q, current, dep.name)], classes)[0]
                for c, q in quotas.items()
            }
            candidates = [bounded.get(c.name, c) for c in candidates]
        result = plan(
            dep,
            classes,
            candidates,
            current,
            force_drain=force_drain,
            explain_pools=dep.name in explained,
            warm=warm_clusters(dep_data, warmth),
        )
        current = [r for r in current if r.deployment != dep.name] + list(result.replicas)
        outcome.results[dep.name] = result.to_dict()
        if dep.autoscaling is not None:  # the configured bounds and each cluster's (issue 33), not only replicas
            from ansible_collections.gpufleet.serving.plugins.module_utils.autoscaling import bounds_summary

            outcome.results[dep.name]["autoscaling"] = bounds_summary(dep, result.replicas)
        queued = _queues_of(dep, fleet["clusters"], {r.cluster for r in result.replicas})
        if queued:
            outcome.results[dep.name]["queues"] = queued
        if quotas:
            from ansible_collections.gpufleet.serving.plugins.module_utils.queues import quota_note

            outcome.results[dep.name]["queue_quota"] = {c: quota_note(q) for c, q in sorted(quotas.items())}
        if result.candidates is not None:
            outcome.results[dep.name].pop("candidates", None)  # not in results: explain shows it, bounded
            outcome.candidates[dep.name] = result.candidates
            for cluster, why in (fleet.get("cache_exclusions") or {}).get(dep.name, {}).items():
                result.candidates[cluster] = {"reason": f"not a candidate: {why}", "pools": {}}
        for cluster, why in (fleet.get("cache_exclusions") or {}).get(dep.name, {}).items():
            outcome.results[dep.name]["unschedulable"].setdefault(
                cluster, {"code": CODE_CACHE_NOT_HOSTED, "reason": why, "pools": {}}
            )
    outcome.replicas = [r.to_dict() for r in current]
    outcome.cold = cold_starts(fleet, outcome.replicas, warmth)
    outcome.caches = list(fleet.get("caches") or [])
    return outcome


def _queues_of(dep: ModelDeployment, clusters: Iterable[Mapping[str, Any]], placed: set[str]) -> dict[str, str]:
    """``{cluster: "kueue/<name>"}``: the queue the deployment's workloads are admitted through on each cluster that
    holds replicas (its own ``queue``, else the cluster's ``gpufleet_queue``)."""
    out: dict[str, str] = {}
    for cluster in clusters:
        name = str(cluster["name"])
        default = cluster.get("queue")
        queue = dep.queue.model_dump() if dep.queue is not None else default
        if name in placed and queue:
            out[name] = f"{queue['kind']}/{queue['name']}"
    return out


def fleet_manifests(fleet: Mapping[str, Any], replicas: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every fleet cluster's serving objects: ``serving_manifests`` for each deployment's replicas placed there.

    Every cluster of the fleet has an entry (possibly empty), so a cluster that lost its last replica gets pruned.
    Every object carries the fleet's name (``fleet["name"]``, ``gpufleet_fleet_name``) as label ``gpufleet.io/fleet``.
    """
    from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import (
        RenderOptions,
        prepare_deployment,
    )

    options = RenderOptions(fleet=fleet.get("name") or None)

    caches = fleet.get("caches") or []
    placed: dict[str, list[Mapping[str, Any]]] = {}
    for r in replicas:
        placed.setdefault(r["deployment"], []).append(r)
    from ansible_collections.gpufleet.serving.plugins.module_utils.serving_extensions import extend_objects

    out: dict[str, list[dict[str, Any]]] = {c["name"]: [] for c in fleet["clusters"]}
    by_name = {c["name"]: c for c in fleet["clusters"]}
    for dep_data in fleet["deployments"]:
        mine = placed.get(dep_data["name"])
        if not mine:
            continue
        spec = {k: v for k, v in dep_data.items() if k != "candidate_clusters"}
        dep, cache = prepare_deployment(spec, caches)
        records = ReplicaRecord.parse_list(mine, "replicas")
        for cluster, objects in render_deployment(dep, records, out, cache, options).items():
            # Adapters, queue labels, ScaledObjects (issue 33): serving_extensions.py.
            out[cluster].extend(extend_objects(dep, records, cluster, objects, by_name.get(cluster)))
    return out


def render_deployment(
    dep: ModelDeployment,
    records: list[ReplicaRecord],
    clusters: Iterable[str],
    cache: Any,
    options: Any,
) -> dict[str, list[dict[str, Any]]]:
    """The objects of ``dep``'s replicas on each of ``clusters`` that holds some (``{cluster: objects}``, clusters in
    name order): every record is checked against the deployment once (names and identities unique across the
    fleet), then each cluster renders its own records, so the work grows with clusters + records, not their product.
    Records on other clusters are checked and not rendered. ``cache`` / ``options``:
    ``render.serving.prepare_deployment``'s cache and a ``render.serving.RenderOptions``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import check_render, render_checked

    check_render(dep, records)
    by_cluster: dict[str, list[ReplicaRecord]] = {}
    for record in records:
        by_cluster.setdefault(record.cluster, []).append(record)
    wanted = set(clusters)
    return {
        cluster: render_checked(dep, by_cluster[cluster], cluster, cache, options)
        for cluster in sorted(by_cluster)
        if cluster in wanted
    }
