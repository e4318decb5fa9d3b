# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fleet-wide deploy orchestration: observed state in, every deployment placed in order, a report out.

The deploy playbook calls :func:`place_fleet` once per run (one task, not one per deployment): deployments are placed
in the order they are listed, each placement fed the replicas placed so far, so capacity is shared and never
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
)
from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelDeployment, parse, require_pydantic
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import (
    plan,
    validate_classes,
    validate_clusters,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.records import ReplicaRecord

PLACEMENT_ANNOTATION = ANNOTATION_PLACEMENT  # kept for importers; the contract module owns it
READY = "Ready"
DEGRADED = "Degraded"


def observed_records(objects: Iterable[Mapping[str, Any]]) -> list[ReplicaRecord]:
    """Replica records read back from rendered/applied objects' ``gpufleet.io/placement`` annotations.

    Identity is ``(deployment, cluster, index)``; duplicates (the same replica seen twice) keep the first record.
    """
    seen: dict[tuple[str, str, int], ReplicaRecord] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        raw = (meta.get("annotations") or {}).get(ANNOTATION_PLACEMENT)
        if not raw:
            continue
        record = ReplicaRecord.from_annotation(raw, f"object {meta.get('name', '?')!r}")
        seen.setdefault((record.deployment, record.cluster, record.index), record)
    return [seen[k] for k in sorted(seen)]


def observed_replicas(objects: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`observed_records` in the dict shape (``device_requests`` absent: the annotation does not hold them)."""
    return [r.to_compact() for r in observed_records(objects)]


@dataclass
class FleetPlacement:
    replicas: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Observed capacity: why pools have fewer usable nodes than declared, ``{cluster: {pool: [cause]}}``.
    capacity_notes: dict[str, dict[str, list[str]]] = field(default_factory=dict)

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

    def statuses(self) -> dict[str, str]:
        """``Ready`` when a deployment got every replica it asked for, ``Degraded`` when it is short of some (the run
        may still succeed: see ``gpufleet_fail_on_unschedulable``)."""
        short = set(self.shortfalls())
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

    def explain(self) -> list[str]:
        """One line per reason a replica could not be placed, for every deployment short of its replicas."""
        lines = []
        for name in self.shortfalls():
            res = self.results[name]
            lines.append(f"{name}: {res['scheduled']}/{res['desired']} scheduled - {res['condition']['message']}")
            lines.extend(f"  {line}" for line in explain_lines(res.get("unschedulable"), self.capacity_notes))
        return lines


def explain_lines(
    unschedulable: Mapping[str, Any] | None, capacity_notes: Mapping[str, Mapping[str, list[str]]] | None = None
) -> list[str]:
    """Flatten placement's ``unschedulable`` (``{cluster: {code, reason, pools: {pool: why}}}``) into lines, each pool
    followed by the observed causes of its missing capacity (``capacity_notes``), if any."""
    lines: list[str] = []
    table = unschedulable or {}
    notes = capacity_notes or {}
    for cluster in sorted(table):
        entry = table[cluster]
        lines.append(f"{cluster}: {entry.get('reason') or entry.get('code', '')}")
        for pool, why in (entry.get("pools") or {}).items():
            lines.append(f"  {cluster}/{pool}: {why}")
            lines.extend(f"    observed: {note}" for note in notes.get(cluster, {}).get(pool, []))
    return lines


def fleet_clusters(
    placement_clusters: Iterable[Mapping[str, Any]],
    *,
    unreachable: Iterable[str] = (),
    drained: Iterable[str] = (),
    cordoned: Iterable[str] = (),
    observed_nodes: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Clusters as placement sees them this run: unreachable ones take nothing new (``ready: false``) but keep what
    they have; drained ones get the fleet's ``NoExecute`` drain taint, cordoned ones a ``NoSchedule`` taint; with
    ``observed_nodes`` (``{cluster: {pool: usable nodes}}``, observed capacity) a pool counts its usable nodes."""
    unreachable, drained, cordoned = set(unreachable), set(drained), set(cordoned)
    observed_nodes = observed_nodes or {}
    out = {}
    for c in placement_clusters:
        seen = observed_nodes.get(c["name"], {})
        item = {
            "name": c["name"],
            "pools": [{**p, "nodes": seen[p["name"]]} if p.get("name") in seen else p for p in c.get("pools", [])],
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


def place_fleet(
    fleet: Mapping[str, Any],
    observed: Iterable[Mapping[str, Any]],
    *,
    unreachable: Iterable[str] = (),
    drained: Iterable[str] = (),
    cordoned: Iterable[str] = (),
    observed_nodes: Mapping[str, Mapping[str, int]] | None = None,
    capacity_notes: Mapping[str, Mapping[str, list[str]]] | None = None,
) -> FleetPlacement:
    """Place every deployment of a normalised fleet (``fleet_info``'s ``fleet``), in order, sharing capacity.

    Classes, clusters and observed records are validated once for the whole fleet, each deployment once. With
    ``observed_nodes`` pools count what was observed usable; ``capacity_notes`` (``{cluster: {pool: [cause]}}``)
    name the observed causes in the explain lines.
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
    for dep_data in fleet["deployments"]:
        spec = {k: v for k, v in dep_data.items() if k != "candidate_clusters"}
        dep: ModelDeployment = parse(ModelDeployment, spec, "deployment")
        candidates = [models[name] for name in dep_data.get("candidate_clusters", []) if name in models]
        result = plan(dep, classes, candidates, current)
        current = [r for r in current if r.deployment != dep.name] + list(result.replicas)
        outcome.results[dep.name] = result.to_dict()
    outcome.replicas = [r.to_dict() for r in current]
    return outcome


def fleet_manifests(fleet: Mapping[str, Any], replicas: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every fleet cluster's serving objects: ``serving_manifests`` for each deployment's replicas placed there.

    Every cluster of the fleet has an entry (possibly empty), so a cluster that lost its last replica gets pruned.
    """
    from ansible_collections.gpufleet.serving.plugins.module_utils.render import prepare_deployment, render_replicas

    caches = fleet.get("caches") or []
    placed: dict[str, list[Mapping[str, Any]]] = {}
    for r in replicas:
        placed.setdefault(r["deployment"], []).append(r)
    out: dict[str, list[dict[str, Any]]] = {c["name"]: [] for c in fleet["clusters"]}
    for dep_data in fleet["deployments"]:
        mine = placed.get(dep_data["name"])
        if not mine:
            continue
        spec = {k: v for k, v in dep_data.items() if k != "candidate_clusters"}
        dep, cache = prepare_deployment(spec, caches)
        records = ReplicaRecord.parse_list(mine, "replicas")
        for cluster in sorted(out):
            if any(r.cluster == cluster for r in records):
                out[cluster].extend(render_replicas(dep, records, cluster, cache))
    return out
