# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fleet's occupancy as one picture: clusters x pools x nodes x devices, and the report document.

A pure function of what the model_deployment role already has at its report step: the normalised fleet
(``fleet_info``'s ``fleet``), the placement (``fleet_placement``'s result: replicas, per-deployment results, and in
apply mode the observed capacity of every reachable cluster, ``drift``) and, after an apply, ``fleet_apply``'s result.
:func:`build_view` turns them into a :class:`FleetView`; :func:`report_document` into the machine-readable report
(``gpufleet_report_file``, :func:`report_text` its text); ``fleet.html.render_picture`` draws the view (``fleet.html``,
and past ``fleet.html.SPLIT_OVER`` clusters its cluster pages beside it).

Nodes are placement's node slots of a pool (``node 0`` .. ``node N-1``: its bookkeeping, not Kubernetes Node names):
a member recorded with device allocations holds the named devices of the slot its record names; a member that holds
whole nodes takes the lowest slots nothing else uses, as placement counts them. Devices that other workloads' claims
hold (observed capacity) are on the last slots, as placement's ledger puts them. Nodes observed unusable (cordoned,
NotReady, tainted devices, devices missing or unlike the class, held whole by other workloads) and declared nodes not
found are drawn beside the slots, named, with their causes.

Nothing secret reaches the view: it reads names, pools, devices, counts and reasons, never pod templates,
environments, connections or provisioning settings; every free text in it is passed through ``redact.redact_text``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.redact import redact_text

#: Readiness of a replica, as the view can tell it.
READY = "Ready"
PENDING = "Pending"
NOT_RECONCILED = "NotReconciled"
RENDERED = "Rendered"
APPLIED = "Applied"
NOT_READ = "NotRead"

#: States of a device cell.
USED, FREE, FOREIGN, CONTENDED = "used", "free", "foreign", "contended"
#: States of a node tile: a slot of the pool, or a node observed unusable / declared but not found.
IN_USE, IDLE, OVERCOMMITTED = "in-use", "free", "overcommitted"
UNAVAILABLE, TAINTED, DRIFTED, HELD, MISSING = "unavailable", "tainted", "drifted", "foreign", "missing"

#: Slots of a pool drawn one by one; beyond it, the free slots are summed up in one tile.
MAX_DRAWN_SLOTS = 48

#: The report's shape. 2: a node lists what holds its devices once per holder (``holders``), not every device as an
#: object; a pool's wholly free slots are ranges (``free_slots``) with their count (``free_nodes``), not node objects;
#: each class's devices and hardware once (``classes``); a cluster names why it needs attention (``attention``); a
#: replica's ``detail`` only where it says more than its readiness (Pending, NotReconciled).
VERSION = 2

#: A replica's detail that says nothing its readiness does not: left out of the report (version 2).
STANDARD_DETAIL = {
    RENDERED: "rendered, not applied (render mode)",
    NOT_READ: "readiness not read (status reads placements, not workloads)",
    APPLIED: "applied, readiness not awaited",
}
#: Node states that need a look (the page draws such clusters first; the report names them in ``attention``).
ATTENTION_STATES = (OVERCOMMITTED, UNAVAILABLE, TAINTED, DRIFTED, HELD, MISSING)


def _text(value: Any) -> str:
    return redact_text(str(value))


@dataclass
class DeviceCell:
    name: str
    #: The class's device entry (``gpu``, ``nic``) and its label (``gpu (NVIDIA H100 80GB HBM3)``).
    entry: str
    label: str
    state: str = FREE
    deployment: str | None = None
    replica: str | None = None
    index: int | None = None
    engine: str | None = None
    role: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "entry": self.entry, "state": self.state}
        if self.deployment is not None:
            out.update(
                deployment=self.deployment, replica=self.replica, index=self.index, engine=self.engine, role=self.role
            )
        return out


@dataclass
class NodeTile:
    label: str
    state: str
    #: Placement's slot index (None: a node observed unusable or missing).
    slot: int | None = None
    devices: list[DeviceCell] = field(default_factory=list)
    #: Why an observed node is not usable (its causes), or what an overcommitted slot is.
    causes: list[str] = field(default_factory=list)
    #: The replicas on the node: ``(deployment, replica name, index)``.
    replicas: list[tuple[str, str, int]] = field(default_factory=list)
    #: Held whole by a member (every device of it).
    whole: bool = False
    #: Who holds which devices: ``(deployment, replica, index, engine, role)`` -> device names, in claim order.
    holders: dict[tuple[str, str, int, str, str], list[str]] = field(default_factory=dict)

    @property
    def free(self) -> bool:
        """A slot nothing holds and nothing is wrong with (summed up as a range in the report)."""
        return self.slot is not None and self.state == IDLE and not self.causes and not _any_held(self)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.label, "state": self.state, "slot": self.slot}
        if self.holders:
            out["holders"] = [
                {"deployment": d, "replica": r, "index": i, "engine": e, "role": role, "devices": list(names)}
                for (d, r, i, e, role), names in self.holders.items()
            ]
        for state in (FOREIGN, CONTENDED):
            names = [c.name for c in self.devices if c.state == state]
            if names:
                out[state] = names
        if self.causes:
            out["causes"] = list(self.causes)
        if self.whole:
            out["whole"] = True
        return out


@dataclass
class PoolView:
    name: str
    class_name: str
    #: The class's device summary (``8x gpu (NVIDIA H100 80GB HBM3)``).
    hardware: str
    declared: int
    #: The nodes placement counted (declared, or usable with observed capacity).
    slots: int
    labelled: int | None = None
    usable: int | None = None
    nodes: list[NodeTile] = field(default_factory=list)
    #: Free slots not drawn one by one (a large pool).
    hidden_free: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def used_slots(self) -> int:
        return sum(1 for n in self.nodes if n.slot is not None and n.state in (IN_USE, OVERCOMMITTED))

    def free_slots(self) -> list[int]:
        """The pool's slots nothing holds and nothing is wrong with (drawn or summed up)."""
        listed = {n.slot for n in self.nodes if n.slot is not None and not n.free}
        return [s for s in range(self.slots) if s not in listed]

    def to_dict(self) -> dict[str, Any]:
        free = self.free_slots()
        out: dict[str, Any] = {
            "pool": self.name,
            "class": self.class_name,
            "declared_nodes": self.declared,
            "slots": self.slots,
            "nodes_in_use": self.used_slots,
            "free_nodes": len(free),
            "free_slots": _ranges(free),
            "nodes": [n.to_dict() for n in self.nodes if not n.free],
        }
        if self.labelled is not None:
            out["labelled_nodes"] = self.labelled
            out["usable_nodes"] = self.usable
        if self.notes:
            out["notes"] = list(self.notes)
        return out


@dataclass
class ClusterView:
    name: str
    provider: str | None = None
    #: ``unreachable``, ``drained``, ``cordoned``, ``not reconciled``, ``outside the play`` ...
    badges: list[str] = field(default_factory=list)
    pools: list[PoolView] = field(default_factory=list)
    #: Cluster-level drift and failure lines (unlabelled nodes, unknown pools, why it was not reconciled).
    notes: list[str] = field(default_factory=list)
    observed: bool = False
    #: Why the cluster needs a look (set by :func:`build_view`, see :func:`_attention`); empty for a healthy one.
    attention: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.name,
            "provider": self.provider,
            "badges": list(self.badges),
            "observed": self.observed,
            "attention": list(self.attention),
            "pools": [p.to_dict() for p in self.pools],
            "notes": list(self.notes),
        }


@dataclass
class ReplicaView:
    deployment: str
    name: str
    cluster: str
    index: int
    pools: list[str]
    readiness: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "replica": self.name,
            "cluster": self.cluster,
            "index": self.index,
            "pools": list(self.pools),
            "readiness": self.readiness,
        }
        if self.detail and self.detail != STANDARD_DETAIL.get(self.readiness):
            out["detail"] = self.detail
        return out


@dataclass
class DeploymentView:
    name: str
    namespace: str | None
    color: int
    desired: int
    scheduled: int
    status: str
    reason: str
    message: str
    replicas: list[ReplicaView] = field(default_factory=list)
    #: Why replicas could not be placed (per cluster and pool), for a deployment short of them.
    why: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "desired": self.desired,
            "scheduled": self.scheduled,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "replicas": [r.to_dict() for r in self.replicas],
        }
        if self.why:
            out["why"] = list(self.why)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


@dataclass
class FleetView:
    fleet: str | None
    mode: str
    capacity: str
    #: Where the picture comes from: ``placement`` (render mode) or ``clusters`` (apply mode, observed).
    source: str
    summary: str
    clusters: list[ClusterView] = field(default_factory=list)
    deployments: list[DeploymentView] = field(default_factory=list)
    #: Per class: its hardware summary and its claimable devices ``(name, entry)``, in the order placement indexes them.
    classes: dict[str, tuple[str, list[tuple[str, str]]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fleet": self.fleet,
            "mode": self.mode,
            "capacity": self.capacity,
            "source": self.source,
            "summary": self.summary,
            "classes": {
                name: {"hardware": hw, "devices": [{"name": d, "entry": e} for d, e in devices]}
                for name, (hw, devices) in self.classes.items()
            },
            "deployments": {d.name: d.to_dict() for d in self.deployments},
            "clusters": [c.to_dict() for c in self.clusters],
        }

    def short(self) -> list[DeploymentView]:
        """The deployments that are not Ready (short of replicas, blocked, unknown)."""
        return [d for d in self.deployments if d.status != "Ready"]


def _ranges(values: Sequence[int]) -> list[list[int]]:
    """Sorted integers as ``[first, last]`` runs: ``[0, 1, 2, 5]`` -> ``[[0, 2], [5, 5]]``."""
    out: list[list[int]] = []
    for v in values:
        if out and out[-1][1] == v - 1:
            out[-1][1] = v
        else:
            out.append([v, v])
    return out


def _attention(cluster: ClusterView, waiting: Mapping[str, int]) -> list[str]:
    """Why ``cluster`` needs a look: its badges (unreachable, drained, a taint ...), nodes in a state that is not
    in use or free, devices claimed twice or held by others' claims beside ours, drift notes, replicas not running."""
    out = list(cluster.badges)
    counts: dict[str, int] = {}
    contended = 0
    for pool in cluster.pools:
        for node in pool.nodes:
            if node.state in ATTENTION_STATES:
                counts[node.state] = counts.get(node.state, 0) + 1
            if node.holders:  # a device is claimed twice only where something holds it
                contended += sum(1 for c in node.devices if c.state == CONTENDED)
    words = {HELD: "held by other workloads"}
    out += [
        f"{n} node(s) {words.get(s, s)}"
        for s, n in sorted(counts.items(), key=lambda kv: ATTENTION_STATES.index(kv[0]))
    ]
    if contended:
        out.append(f"{contended} device(s) claimed twice")
    notes = sum(1 for n in cluster.notes if not n.startswith("not reconciled: ")) + sum(
        len(p.notes) for p in cluster.pools
    )
    if notes:
        out.append(f"{notes} drift note(s)")
    if waiting.get(cluster.name):
        out.append(f"{waiting[cluster.name]} replica(s) pending or not reconciled")
    return out


# -- building the view ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Device:
    name: str
    entry: str
    label: str


def _class_devices(classes: Mapping[str, Any]) -> dict[str, list[_Device]]:
    """The claimable (DRA) devices of one node of every class, in the order placement indexes them."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.dra.allocator import node_devices
    from ansible_collections.gpufleet.serving.plugins.module_utils.placement import validate_classes

    out: dict[str, list[_Device]] = {}
    for name, klass in validate_classes(dict(classes)).items():
        out[name] = [_Device(d.name, d.entry, d.label) for d in node_devices(klass) if d.claim == "DRA"]
    return out


def _hardware(devices: Sequence[_Device]) -> str:
    counts: dict[str, int] = {}
    for d in devices:
        counts[d.label] = counts.get(d.label, 0) + 1
    return ", ".join(f"{n}x {label}" for label, n in counts.items()) or "no DRA devices"


def _classify(causes: Sequence[str]) -> str:
    text = " ".join(causes)
    if "cordoned" in causes or "NotReady" in causes:
        return UNAVAILABLE
    if " tainted " in text:
        return TAINTED
    if "published" in text or "attribute " in text or "capacity " in text or text.startswith("device "):
        return DRIFTED
    if "held by claim" in text:
        return HELD
    return UNAVAILABLE


class _PoolBuilder:
    """The slots of one pool, filled as placement's ledger fills them."""

    def __init__(self, devices: Sequence[_Device], slots: int) -> None:
        self.devices = list(devices)
        self.index = {d.name: i for i, d in enumerate(self.devices)}
        self.slots = slots
        self.tiles: dict[int, NodeTile] = {}

    def tile(self, slot: int) -> NodeTile:
        tile = self.tiles.get(slot)
        if tile is None:
            tile = self.tiles[slot] = NodeTile(
                f"node {slot}",
                IDLE if slot < self.slots else OVERCOMMITTED,
                slot=slot,
                devices=[DeviceCell(d.name, d.entry, d.label) for d in self.devices],
            )
            if slot >= self.slots:
                tile.causes.append(f"beyond the pool's {self.slots} node(s): the pool is overcommitted")
        return tile

    def foreign(self, held: Sequence[Sequence[str]]) -> None:
        for k, names in enumerate(held):
            tile = self.tile(self.slots - 1 - k)
            for cell in tile.devices:
                if cell.name in names:
                    cell.state = FOREIGN
            tile.causes.append(f"{len(names)} device(s) held by claims of other workloads ({', '.join(names)})")

    def _mark(self, tile: NodeTile, cell: DeviceCell, who: tuple[str, str, int, str, str]) -> None:
        cell.state = CONTENDED if cell.state in (USED, FOREIGN) else USED
        cell.deployment, cell.replica, cell.index, cell.engine, cell.role = who
        tile.holders.setdefault(who, []).append(cell.name)
        if tile.state == IDLE:
            tile.state = IN_USE
        if who[:3] not in tile.replicas:
            tile.replicas.append(who[:3])

    def allocate(self, slot: int, names: Iterable[str], who: tuple[str, str, int, str, str]) -> None:
        tile = self.tile(slot)
        for name in names:
            at = self.index.get(name)
            if at is not None:
                self._mark(tile, tile.devices[at], who)

    def whole(self, count: int, who: tuple[str, str, int, str, str]) -> None:
        for _n in range(count):
            slot = 0
            while slot in self.tiles and (self.tiles[slot].state != IDLE or _any_held(self.tiles[slot])):
                slot += 1
            tile = self.tile(slot)
            tile.whole = True
            for cell in tile.devices:
                self._mark(tile, cell, who)
            if not tile.devices and tile.state == IDLE:
                tile.state = IN_USE
                tile.replicas.append(who[:3])
                tile.holders.setdefault(who, [])

    def nodes(self) -> tuple[list[NodeTile], int]:
        """Every slot in order (free ones past :data:`MAX_DRAWN_SLOTS` summed up), then the overcommitted ones."""
        out: list[NodeTile] = []
        hidden = 0
        for slot in range(self.slots):
            tile = self.tiles.get(slot)
            if tile is None:
                if slot >= MAX_DRAWN_SLOTS:
                    hidden += 1
                    continue
                tile = self.tile(slot)
            out.append(tile)
        out.extend(self.tiles[s] for s in sorted(self.tiles) if s >= self.slots)
        return out, hidden


def _any_held(tile: NodeTile) -> bool:
    return any(c.state != FREE for c in tile.devices)


def _states_by_cluster(drift: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str(s.get("cluster")): s for s in drift if isinstance(s, Mapping)}


def _pending_by_cluster(applied: Mapping[str, Any] | None) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for p in (applied or {}).get("pending") or []:
        out.setdefault((str(p.get("cluster")), str(p.get("deployment"))), []).append(p)
    return out


def _readiness(
    replica: Mapping[str, Any],
    mode: str,
    applied: Mapping[str, Any] | None,
    not_reconciled: Mapping[str, str],
    pending: Mapping[tuple[str, str], list[Mapping[str, Any]]],
    waited: bool,
) -> tuple[str, str]:
    cluster, deployment, name = str(replica["cluster"]), str(replica["deployment"]), str(replica.get("name") or "")
    if cluster in not_reconciled:
        return NOT_RECONCILED, _text(not_reconciled[cluster])
    if mode != "apply":
        return RENDERED, STANDARD_DETAIL[RENDERED]
    if applied is None:
        return NOT_READ, STANDARD_DETAIL[NOT_READ]
    # A replica's workloads are named <replica>-<engine>.
    waiting = [
        p for p in pending.get((cluster, deployment)) or [] if name and str(p.get("name") or "").startswith(f"{name}-")
    ]
    if waiting:
        return PENDING, _text("; ".join(str(p.get("message") or p.get("name")) for p in waiting))
    if not waited:
        return APPLIED, STANDARD_DETAIL[APPLIED]
    return READY, ""


def build_view(
    fleet: Mapping[str, Any],
    placement: Mapping[str, Any],
    *,
    mode: str = "render",
    capacity: str = "declared",
    drained: Iterable[str] = (),
    cordoned: Iterable[str] = (),
    unreachable: Iterable[str] = (),
    outside_play: Iterable[str] = (),
    applied: Mapping[str, Any] | None = None,
    not_reconciled: Mapping[str, str] | None = None,
    waited: bool = True,
    summary: str = "",
) -> FleetView:
    """The fleet's occupancy from the normalised ``fleet`` and ``fleet_placement``'s result ``placement`` (and, after
    an apply, ``fleet_apply``'s result ``applied``)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import explain_lines

    devices = _class_devices(fleet.get("classes") or {})
    states = _states_by_cluster(placement.get("drift") or [])
    notes_by_cluster = {
        c: {str(p["pool"]): [str(n) for n in p.get("notes") or []] for p in s.get("pools") or []}
        for c, s in states.items()
    }
    drained, cordoned, unreachable = set(drained), set(cordoned), set(unreachable)
    outside = set(outside_play)
    not_reconciled = dict(not_reconciled or {})
    replicas = [r for r in placement.get("replicas") or [] if isinstance(r, Mapping)]
    # Grouped once: each cluster's pools and each deployment read their own (linear in the fleet, not quadratic).
    by_cluster: dict[str, list[Mapping[str, Any]]] = {}
    by_deployment: dict[str, list[Mapping[str, Any]]] = {}
    for r in replicas:
        by_cluster.setdefault(str(r.get("cluster")), []).append(r)
        by_deployment.setdefault(str(r.get("deployment")), []).append(r)
    deployments_by_name = {str(d["name"]): d for d in fleet.get("deployments") or []}
    order = [str(d["name"]) for d in fleet.get("deployments") or []]
    color = {name: i for i, name in enumerate(order)}

    view = FleetView(
        fleet=_text(fleet["name"]) if fleet.get("name") else None,
        mode=mode,
        capacity=capacity,
        source="clusters" if mode == "apply" else "placement",
        summary=_text(summary),
    )
    view.classes = {
        _text(name): (_text(_hardware(devs)), [(_text(d.name), _text(d.entry)) for d in devs])
        for name, devs in devices.items()
    }
    for cluster in fleet.get("clusters") or []:
        cname = str(cluster["name"])
        cv = ClusterView(_text(cname), provider=_text(cluster["provider"]) if cluster.get("provider") else None)
        state = states.get(cname)
        cv.observed = state is not None
        if cname in outside:
            cv.badges.append("outside the play")
        elif cname in unreachable:
            cv.badges.append("unreachable")
        if cname in drained:
            cv.badges.append("drained")
        if cname in cordoned:
            cv.badges.append("cordoned")
        if cname in not_reconciled:
            cv.badges.append("not reconciled")
            cv.notes.append(_text(f"not reconciled: {not_reconciled[cname]}"))
        for taint in cluster.get("taints") or []:
            cv.badges.append(_text(f"taint {taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}"))
        if state is not None:
            cv.notes.extend(
                _text(f"node {n} publishes GPU-class devices but has no pool label")
                for n in state.get("unlabelled_nodes") or []
            )
            cv.notes.extend(_text(n) for n in state.get("unknown_pools") or [])
        observed_pools = {str(p.get("pool")): p for p in (state or {}).get("pools") or []}
        for pool in cluster.get("pools") or []:
            pname, klass, declared = str(pool["name"]), str(pool["class"]), int(pool["nodes"])
            seen = observed_pools.get(pname)
            slots = declared
            if seen is not None and capacity == "observed":
                slots = min(declared, int(seen.get("usable_nodes", declared)))
            builder = _PoolBuilder(devices.get(klass, []), slots)
            if seen is not None and seen.get("held_devices"):
                builder.foreign([[str(d) for d in node] for node in seen["held_devices"]])
            mine = by_cluster.get(cname, [])
            whole: list[tuple[int, tuple[str, str, int, str, str]]] = []
            for r in mine:
                for engine in r.get("engines") or []:
                    for member in engine.get("members") or []:
                        if member.get("pool") != pname:
                            continue
                        who = (
                            _text(r["deployment"]),
                            _text(r.get("name") or f"{r['deployment']}-{r['index']}"),
                            int(r["index"]),
                            _text(engine.get("name")),
                            _text(member.get("role")),
                        )
                        allocations = member.get("allocations") or []
                        if allocations:
                            for a in allocations:
                                builder.allocate(int(a["node"]), [str(d) for d in a.get("devices") or []], who)
                        elif member.get("nodes"):
                            whole.append((int(member["nodes"]), who))
            for count, who in whole:  # after every recorded allocation, as the ledger counts them
                builder.whole(count, who)
            tiles, hidden = builder.nodes()
            pv = PoolView(
                _text(pname),
                _text(klass),
                _text(_hardware(devices.get(klass, []))),
                declared,
                slots,
                nodes=tiles,
                hidden_free=hidden,
                notes=[_text(n) for n in notes_by_cluster.get(cname, {}).get(pname, [])],
            )
            if seen is not None:
                pv.labelled = int(seen.get("labelled_nodes", 0))
                pv.usable = int(seen.get("usable_nodes", 0))
                for node, causes in sorted((seen.get("nodes") or {}).items()):
                    causes = [str(c) for c in causes or []]
                    pv.nodes.append(NodeTile(_text(node), _classify(causes), causes=[_text(c) for c in causes]))
                for k in range(max(0, declared - pv.labelled)):
                    pv.nodes.append(
                        NodeTile(
                            f"missing {k + 1}",
                            MISSING,
                            causes=[f"declared, but no node carries the pool label ({pv.labelled} of {declared} do)"],
                        )
                    )
            cv.pools.append(pv)
        view.clusters.append(cv)

    results = placement.get("results") or {}
    statuses = placement.get("status") or {}
    pending = _pending_by_cluster(applied)
    notes = {c: dict(p) for c, p in notes_by_cluster.items()}
    for name in order:
        res = results.get(name) or {}
        dep = deployments_by_name[name]
        cond = res.get("condition") or {}
        dv = DeploymentView(
            _text(name),
            _text(dep["namespace"]) if dep.get("namespace") else None,
            color[name],
            int(res.get("desired", dep.get("replicas", 0)) or 0),
            int(res.get("scheduled", 0) or 0),
            _text(statuses.get(name, "Unknown")),
            _text(cond.get("reason", "")),
            _text(cond.get("message", "")),
            warnings=[_text(w) for w in res.get("warnings") or []],
        )
        if dv.status != "Ready":
            dv.why = [_text(line) for line in explain_lines(res.get("unschedulable"), notes)]
        for r in sorted(by_deployment.get(name, []), key=lambda r: (str(r["cluster"]), int(r["index"]))):
            pools = sorted({str(m.get("pool")) for e in r.get("engines") or [] for m in e.get("members") or []})
            readiness, detail = _readiness(r, mode, applied, not_reconciled, pending, waited)
            dv.replicas.append(
                ReplicaView(
                    _text(name),
                    _text(r.get("name") or f"{name}-{r['index']}"),
                    _text(r["cluster"]),
                    int(r["index"]),
                    [_text(p) for p in pools],
                    readiness,
                    detail,
                )
            )
        view.deployments.append(dv)
    waiting: dict[str, int] = {}
    for dv in view.deployments:
        for rv in dv.replicas:
            if rv.readiness in (PENDING, NOT_RECONCILED):
                waiting[rv.cluster] = waiting.get(rv.cluster, 0) + 1
    for cv in view.clusters:
        cv.attention = _attention(cv, waiting)
    return view


# -- the report document ----------------------------------------------------------------------------------------------

#: The keys of fleet_placement's result the report carries (never its replicas' device requests: the view has the
#: devices each replica holds).
_PLACEMENT_KEYS = ("shortfalls", "degraded", "blocked", "held")


def report_document(
    view: FleetView,
    placement: Mapping[str, Any],
    lines: Sequence[str],
    *,
    html_file: str | None = None,
    html_pages: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The machine-readable report (``gpufleet_report_file``): the summary, every deployment with its replicas and
    their readiness, every cluster's pools and nodes with what holds each device, drift, what was removed or lost,
    and the report's text lines. Plain JSON data; nothing secret (see the module's docstring)."""
    doc: dict[str, Any] = {"version": VERSION, **view.to_dict()}
    for key in _PLACEMENT_KEYS:
        doc[key] = [_text(x) for x in placement.get(key) or []]
    doc["dropped"] = [
        {k: _text(v) if isinstance(v, str) else v for k, v in d.items()} for d in placement.get("dropped") or []
    ]
    doc["capacity_loss"] = [_plain_text(x) for x in placement.get("capacity_loss") or []]
    doc["unreadable"] = [_plain_text(x) for x in placement.get("unreadable") or []]
    doc["drift"] = [_text(line) for line in placement.get("drift_lines") or []]
    # Replicas that start before their cache is hydrated, with an ETA (warm_first.py; fleet_placement's cold).
    doc["cold"] = [_plain_text(x) for x in placement.get("cold") or []]
    doc["lines"] = [_text(line) for line in lines]
    if html_file:
        doc["html"] = html_file
    if html_pages:
        doc["html_pages"] = [dict(p) for p in html_pages]
    return doc


def report_text(doc: Mapping[str, Any]) -> str:
    """The report file's text: JSON with sorted keys, indented one space a level down to each node, and each node,
    replica or other record of plain values on one line (indenting every key of every node made the file twice as
    large at thousands of clusters); it stays diffable line by line."""
    out: list[str] = []
    _emit(doc, 0, out)
    return "".join(out) + "\n"


#: Indented down to this depth (the document, clusters, a cluster, its pools, a pool, its nodes); deeper is one line.
_FLAT_BELOW = 6


def _scalar(value: Any) -> bool:
    return not isinstance(value, (Mapping, list))


def _leaf(value: Any) -> bool:
    """A record of plain values (scalars, lists of scalars), or a list of such lists: written on one line."""
    if isinstance(value, Mapping):
        return all(_scalar(v) or (isinstance(v, list) and all(_scalar(x) for x in v)) for v in value.values())
    return isinstance(value, list) and all(isinstance(v, list) and all(_scalar(x) for x in v) for v in value)


def _emit(value: Any, depth: int, out: list[str]) -> None:
    if depth >= _FLAT_BELOW or _scalar(value) or not value or _leaf(value):
        out.append(json.dumps(value, sort_keys=True))
        return
    pad, inner = "\n" + " " * depth, "\n" + " " * (depth + 1)
    if isinstance(value, Mapping):
        out.append("{")
        for n, key in enumerate(sorted(value)):
            out.append(("," if n else "") + inner + json.dumps(str(key)) + ": ")
            _emit(value[key], depth + 1, out)
        out.append(pad + "}")
        return
    out.append("[")
    for n, item in enumerate(value):
        out.append(("," if n else "") + inner)
        _emit(item, depth + 1, out)
    out.append(pad + "]")


def _plain_text(value: Any) -> Any:
    """``value`` with every string in it passed through ``redact_text``."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, Mapping):
        return {str(k): _plain_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_text(v) for v in value]
    return value
