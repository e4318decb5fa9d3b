# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Observed capacity and drift (design.md §11): what each pool of a cluster really has, from what was read.

Placement keeps per pool what is allocated on each node (design.md §12). With ``gpufleet_capacity: observed`` a pool
counts only its *usable* nodes: labelled ``gpufleet.io/pool=<pool>``, schedulable (not cordoned), ``Ready``,
publishing every device of the pool's class in ResourceSlices with the class's attributes and capacity. What holds or
blocks single devices costs those devices, not the node:

* a ResourceClaim of a workload that is not ours (not the collection's, or another fleet's: a claim is this fleet's
  when the replica it serves is one of the fleet's) holds its devices: the node stays usable with those devices in use
  (``held_devices``);
* a ``NoSchedule``/``NoExecute`` taint a ResourceSlice publishes on a device (a driver's verdict on an unhealthy GPU)
  that the class does not declare enters placement's ledger on that device: a claim that does not tolerate it is not
  allocated the device, the node's other devices stay usable (``device_taints``);

unless that is every device of the class the node has (then the node is held, or tainted, whole). Everything else is
drift, reported per cluster and pool with its cause. A pure function of the objects read (Nodes, ResourceSlices,
ResourceClaims), so it is unit-tested without a cluster.

The objects are read and observed in one place, ``fleet_read`` (the raw objects are about 75 KiB a cluster and cost
Ansible seconds to template and pass on); what travels on through Ansible variables is :meth:`ClusterState.to_dict`,
a few hundred bytes per pool, which placement reads back with :func:`usable_nodes` and :func:`pool_notes`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    LABEL_DEPLOYMENT,
    LABEL_REPLICA,
    NODE_POOL_LABEL,
    SERVING_OWNER,
    FleetIdentity,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import InferenceClass
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import QuantityError, parse_quantity

_BLOCKING = ("NoSchedule", "NoExecute")

#: What is listed on every cluster to observe it, ``(apiVersion, kind)``: one list per kind, every namespace.
CAPACITY_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "Node"),
    ("resource.k8s.io/v1", "ResourceSlice"),
    ("resource.k8s.io/v1", "ResourceClaim"),
)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _meta(obj).get("labels") or {}


def _ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


#: ``(namespace, replica)`` of the replicas a fleet owns on a cluster (:func:`owned_replicas`).
ReplicaKeys = frozenset[tuple[str, str]]


def _ours(claim: Mapping[str, Any], owned: ReplicaKeys | None = None) -> bool:
    """A claim of one of our serving pods. Claims carry the labels of their claim template but not the fleet's (a
    claim template's spec is immutable, so it never got one): with ``owned``, a claim is ours only when the replica it
    serves is one of this fleet's; another fleet's claims on a shared cluster then hold their devices like any other
    workload's."""
    labels = _labels(claim)
    if not all(labels.get(k) == v for k, v in SERVING_OWNER.items()):
        return False
    return owned is None or (str(_meta(claim).get("namespace") or ""), str(labels.get(LABEL_REPLICA))) in owned


def owned_replicas(objects: Iterable[Mapping[str, Any]], fleet: FleetIdentity) -> ReplicaKeys:
    """``(namespace, replica)`` of every replica that ``objects`` (read from one cluster) show ``fleet`` owns."""
    out = set()
    for obj in objects:
        labels = _labels(obj)
        if labels.get(LABEL_REPLICA) and fleet.owns(labels):
            out.add((str(_meta(obj).get("namespace") or ""), str(labels[LABEL_REPLICA])))
    return frozenset(out)


def _claim_name(claim: Mapping[str, Any]) -> str:
    return f"{_meta(claim).get('namespace', '')}/{_meta(claim).get('name', '')}"


def _same_quantity(a: Any, b: Any) -> bool:
    try:
        return parse_quantity(str(a)).cmp(parse_quantity(str(b))) == 0
    except QuantityError:
        return a == b


def _qualified(table: Mapping[str, Any] | None, driver: str) -> dict[str, Any]:
    """Attribute or capacity names as Kubernetes compares them: an unqualified name is in the driver's domain."""
    return {(k if "/" in k else f"{driver}/{k}"): v for k, v in (table or {}).items()}


def _shown(value: Any) -> str:
    """A typed attribute value (``{"string": "x"}``) as the user wrote it: ``'x'``, ``int 3``, ``bool true``."""
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, v),) = value.items()
        return f"{v!r}" if kind == "string" else f"{kind} {v}"
    return repr(value)


def device_drift(want: Mapping[str, Any], driver: str, published: Mapping[str, Any]) -> list[str]:
    """How a published ResourceSlice device differs from a device the class declares (empty: it matches).

    ``want`` is one of ``Device.slice_devices()``: the shared attributes and capacity overlaid with the device's own
    ``instances`` entry. Every attribute and capacity the class names must be published with the same value
    (quantities compared as quantities); extra ones on the published device are fine. The one comparison of declared
    and published devices, for observed capacity here and for the existing-cluster preflight.
    """
    out = []
    attributes = _qualified(published.get("attributes"), driver)
    for key, value in sorted(_qualified(want.get("attributes"), driver).items()):
        got = attributes.get(key)
        if got is None:
            out.append(f"attribute {key} is missing (class: {_shown(value)})")
        elif got != value:
            out.append(f"attribute {key} is {_shown(got)}, the class says {_shown(value)}")
    capacity = _qualified(published.get("capacity"), driver)
    for key, cap in sorted(_qualified(want.get("capacity"), driver).items()):
        got = (capacity.get(key) or {}).get("value")
        if got is None:
            out.append(f"capacity {key} is missing (class: {cap['value']})")
        elif not _same_quantity(got, cap["value"]):
            out.append(f"capacity {key} is {got}, the class says {cap['value']}")
    return out


def match_devices(
    wanted: Sequence[Mapping[str, Any]], driver: str, published: Sequence[Mapping[str, Any]]
) -> dict[int, int]:
    """The most declared devices (``wanted``, indexes) that distinct published devices (indexes) each satisfy, by
    :func:`device_drift`, whatever their names: a maximum bipartite matching (declared devices with their own
    ``instances`` values need not be published in the same order, or under the same names)."""

    def fitting(want: Mapping[str, Any]) -> list[int]:
        # Same-named devices are tried first, so a difference is reported on the device of the declared name.
        fit = [j for j, dev in enumerate(published) if not device_drift(want, driver, dev)]
        return sorted(fit, key=lambda j: published[j].get("name") != want.get("name"))

    fits = [fitting(w) for w in wanted]
    owner: dict[int, int] = {}  # published index -> wanted index

    def place(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(wanted)):
        place(i, set())
    return {i: j for j, i in owner.items()}


def device_report(
    wanted: Sequence[Mapping[str, Any]], driver: str, published: Sequence[Mapping[str, Any]]
) -> tuple[set[int], dict[int, str]]:
    """Which ``wanted`` devices (indexes) distinct ``published`` ones satisfy (:func:`match_devices`), and for each
    other one, how the published device left to compare it with differs: ``"<published name>: <reason>, ..."`` (the
    one of the same name, else the one with the fewest differences; no entry when no published device is left)."""
    # The usual case, on the hot path of observing every node: each declared device is published under its own name
    # as declared. Only otherwise is the matching (a comparison per pair) needed.
    by_name = {d.get("name"): d for d in published}
    names = [w.get("name") for w in wanted]
    if (
        len(by_name) == len(published)
        and len(set(names)) == len(names)
        and all((dev := by_name.get(w.get("name"))) is not None and not device_drift(w, driver, dev) for w in wanted)
    ):
        return set(range(len(wanted))), {}
    matched = match_devices(wanted, driver, published)
    used = set(matched.values())
    spare = [d for j, d in enumerate(published) if j not in used]
    details: dict[int, str] = {}
    for i, want in enumerate(wanted):
        if i in matched or not spare:
            continue
        same = [d for d in spare if d.get("name") == want.get("name")]
        reasons, closest = min(((device_drift(want, driver, d), d) for d in same or spare), key=lambda c: len(c[0]))
        spare.remove(closest)
        details[i] = f"{closest.get('name', '?')}: {', '.join(reasons)}"
    return set(matched), details


def compare_devices(
    wanted: Sequence[Mapping[str, Any]], driver: str, published: Sequence[Mapping[str, Any]]
) -> tuple[int, list[str]]:
    """How many ``wanted`` devices distinct ``published`` ones satisfy, and how the others differ, in order
    (:func:`device_report`)."""
    matched, details = device_report(wanted, driver, published)
    return len(matched), [details[i] for i in sorted(details)]


@dataclass
class NodeState:
    name: str
    cordoned: bool = False
    ready: bool = True
    missing: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    tainted: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    #: The class's devices that other workloads' claims hold on the node (their names, as the class names them).
    held_devices: list[str] = field(default_factory=list)
    #: Every device of the class the node has is held (or a held device is not one the class declares).
    held_whole: bool = False
    #: The class's devices published with ``NoSchedule``/``NoExecute`` taints the class does not declare: device name ->
    #: those taints (``{key, value, effect}``). Placement's ledger carries them device by device.
    device_taints: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    #: Every device of the class the node has is tainted so.
    tainted_whole: bool = False

    @property
    def usable(self) -> bool:
        return self.ready and not (
            self.cordoned or self.missing or self.mismatched or self.tainted_whole or self.held_whole
        )

    def causes(self) -> list[str]:
        out = []
        if self.cordoned:
            out.append("cordoned")
        if not self.ready:
            out.append("NotReady")
        return out + self.missing + self.mismatched + self.tainted + self.held


@dataclass
class PoolState:
    cluster: str
    pool: str
    class_name: str
    declared: int
    nodes: list[NodeState] = field(default_factory=list)

    @property
    def observed(self) -> int:
        """Usable nodes, never more than declared (a pool is not grown by what it was not declared to have)."""
        return min(self.declared, sum(1 for n in self.nodes if n.usable))

    @property
    def held_devices(self) -> list[list[str]]:
        """Per usable node that other workloads' claims hold devices of, those devices (at most :attr:`observed`
        nodes: an undeclared node left out is an unused one)."""
        return [n.held_devices for n in self.nodes if n.usable and n.held_devices][: self.observed]

    @property
    def observed_devices(self) -> list[dict[str, Any]]:
        """Per usable node with devices other workloads hold or devices tainted beyond the class, ``{node, held,
        taints}``: first the nodes of :attr:`held_devices` in their order (placement's ledger and the fleet view number
        them from the top of the pool alike), then those with tainted devices only; at most :attr:`observed` nodes."""
        usable = [n for n in self.nodes if n.usable]
        ordered = [n for n in usable if n.held_devices] + [n for n in usable if n.device_taints and not n.held_devices]
        return [
            {"node": n.name, "held": list(n.held_devices), "taints": {d: list(ts) for d, ts in n.device_taints.items()}}
            for n in ordered[: self.observed]
        ]

    def notes(self) -> list[str]:
        """The observed causes, summarised: ``2 of 4 nodes cordoned``, ``node x: ... held by claims of ...``."""
        out = []
        labelled = len(self.nodes)
        if labelled != self.declared:
            out.append(f"{labelled} of {self.declared} declared nodes carry the label {NODE_POOL_LABEL}={self.pool}")
        cordoned = sum(1 for n in self.nodes if n.cordoned)
        if cordoned:
            out.append(f"{cordoned} of {labelled} nodes cordoned")
        not_ready = sum(1 for n in self.nodes if not n.ready)
        if not_ready:
            out.append(f"{not_ready} of {labelled} nodes NotReady")
        for n in self.nodes:
            out.extend(f"node {n.name}: {why}" for why in n.missing + n.mismatched + n.tainted + n.held)
        return out

    def to_dict(self) -> dict[str, Any]:
        observed = self.observed_devices
        return {
            "cluster": self.cluster,
            "pool": self.pool,
            "class": self.class_name,
            "declared_nodes": self.declared,
            "labelled_nodes": len(self.nodes),
            "usable_nodes": self.observed,
            **({"held_devices": self.held_devices} if self.held_devices else {}),
            # The held and tainted devices together, in the ledger's order: only when some device is tainted (else
            # ``held_devices`` says it all).
            **({"observed_devices": observed} if any(n["taints"] for n in observed) else {}),
            "notes": self.notes(),
            "nodes": {n.name: n.causes() for n in self.nodes if not n.usable},
        }


@dataclass
class ClusterState:
    name: str
    pools: list[PoolState] = field(default_factory=list)
    #: Nodes publishing devices of a driver the cluster's classes use, without a pool label.
    unlabelled: list[str] = field(default_factory=list)
    #: Nodes labelled with a pool the cluster does not declare.
    unknown_pools: list[str] = field(default_factory=list)
    #: Allocated claims of other workloads holding devices on the cluster's pools.
    foreign_claims: list[str] = field(default_factory=list)
    #: Issue 33: per deployment naming its own Kueue queue, what that queue admits here (queues.deployment_queue_quotas).
    queue_quota: dict[str, dict[str, Any]] = field(default_factory=dict)

    def drift(self) -> list[str]:
        """One line per difference between what is declared and what is observed (empty when none)."""
        out = [
            f"{self.name}: node {n} publishes GPU-class devices but has no {NODE_POOL_LABEL} label"
            for n in self.unlabelled
        ]
        out += [f"{self.name}: {n}" for n in self.unknown_pools]
        for pool in self.pools:
            out += [f"{self.name}/{pool.pool}: {note}" for note in pool.notes()]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.name,
            "pools": [p.to_dict() for p in self.pools],
            "unlabelled_nodes": self.unlabelled,
            "unknown_pools": self.unknown_pools,
            "foreign_claims": self.foreign_claims,
            "drift": self.drift(),
            **({"queue_quota": self.queue_quota} if self.queue_quota else {}),
        }


_INDEX_RE = re.compile(r"^(?P<base>.+)-(?P<index>\d+)$")


def _device_order(name: str) -> tuple[str, int]:
    """``gpu-10`` after ``gpu-9``."""
    m = _INDEX_RE.match(name)
    return (m.group("base"), int(m.group("index"))) if m else (name, -1)


@dataclass(frozen=True)
class DeclaredPool:
    name: str
    class_name: str
    nodes: int


def declared_pools(cluster: Mapping[str, Any]) -> list[DeclaredPool]:
    """A cluster of ``fleet_info``'s ``fleet.clusters`` (validated there): its pools as declared."""
    return [DeclaredPool(str(p["name"]), str(p["class"]), int(p["nodes"])) for p in cluster.get("pools") or []]


def observe_cluster(
    cluster: str,
    pools: list[DeclaredPool],
    classes: Mapping[str, InferenceClass],
    nodes: Iterable[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]],
    owned: ReplicaKeys | None = None,
) -> ClusterState:
    """What each declared pool of ``cluster`` really has, from the objects read from it. ``owned``: the replicas of
    this fleet (:func:`owned_replicas`); a claim of any other replica is another workload's."""
    nodes = list(nodes)
    slices = list(slices)
    state = ClusterState(cluster)
    declared = {p.name: p for p in pools}
    drivers = {d.driver for p in pools for d in classes[p.class_name].devices if d.claim == "DRA"}

    # Published devices: by node and driver; and (driver, slice pool, device) -> node for claim results.
    published: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    where: dict[tuple[str, str, str], str] = {}
    for sl in slices:
        spec = sl.get("spec") or {}
        node = spec.get("nodeName")
        if not node:
            continue
        driver = str(spec.get("driver"))
        pool = str((spec.get("pool") or {}).get("name", node))
        for dev in spec.get("devices") or []:
            published.setdefault((node, driver), {})[str(dev.get("name"))] = dev
            where[(driver, pool, str(dev.get("name")))] = node

    # Devices held by other workloads' claims, by node.
    held: dict[str, dict[str, list[str]]] = {}
    for claim in claims:
        if _ours(claim, owned):
            continue
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        for r in results:
            node = where.get((str(r.get("driver")), str(r.get("pool")), str(r.get("device"))))
            if node is None:
                continue
            held.setdefault(node, {}).setdefault(_claim_name(claim), []).append(str(r.get("device")))
            if _claim_name(claim) not in state.foreign_claims:
                state.foreign_claims.append(_claim_name(claim))

    by_pool: dict[str, list[Mapping[str, Any]]] = {}
    for node in nodes:
        name = str(_meta(node).get("name"))
        pool_name = _labels(node).get(NODE_POOL_LABEL)
        if pool_name is None:
            if any((name, d) in published for d in drivers):
                state.unlabelled.append(name)
            continue
        if pool_name not in declared:
            state.unknown_pools.append(f"node {name} is labelled {NODE_POOL_LABEL}={pool_name}, a pool not declared")
            continue
        by_pool.setdefault(str(pool_name), []).append(node)

    for declared_pool in pools:
        klass = classes[declared_pool.class_name]
        expected = {d.name: {x["name"]: x for x in d.slice_devices()} for d in klass.devices if d.claim == "DRA"}
        # Taints the class declares (design.md §12) are modelled by placement; others make the node unusable.
        declared_taints = {
            d.name: {x["name"]: x.get("taints") or [] for x in d.published_devices()}
            for d in klass.devices
            if d.claim == "DRA"
        }
        ps = PoolState(cluster, declared_pool.name, declared_pool.class_name, declared_pool.nodes)
        for node in sorted(by_pool.get(declared_pool.name, []), key=lambda n: str(_meta(n).get("name"))):
            name = str(_meta(node).get("name"))
            ns = NodeState(name, cordoned=bool((node.get("spec") or {}).get("unschedulable")), ready=_ready(node))
            for spec in (d for d in klass.devices if d.claim == "DRA"):
                devices = published.get((name, spec.driver), {})
                mine = {n: d for n, d in devices.items() if (m := _INDEX_RE.match(n)) and m.group("base") == spec.name}
                if len(mine) < spec.count:
                    ns.missing.append(f"{len(mine)} of {spec.count} {spec.name} devices ({spec.driver}) published")
                # Whatever their indexes or order, the published devices must satisfy the declared ones one to one.
                _count, details = compare_devices(
                    list(expected[spec.name].values()), spec.driver, [mine[n] for n in sorted(mine)]
                )
                ns.mismatched.extend(f"device {detail}" for detail in details)
                class_taints = declared_taints[spec.name]
                for dev_name in sorted(mine):
                    dev = mine[dev_name]
                    for taint in dev.get("taints") or []:
                        known = {k: taint.get(k) for k in ("key", "value", "effect") if taint.get(k)}
                        if known in class_taints.get(dev_name, []):
                            continue
                        if taint.get("effect") in _BLOCKING:
                            key = taint.get("key", "")
                            value = f"={taint['value']}" if taint.get("value") else ""
                            ns.tainted.append(f"device {dev_name} tainted {key}{value}:{taint.get('effect')}")
                            ns.device_taints.setdefault(dev_name, []).append(known)
            claimable = {x["name"] for d in klass.devices if d.claim == "DRA" for x in d.slice_devices()}
            # A tainted device costs that device (placement skips it unless a request tolerates the taint); a node
            # whose every device is tainted counts as tainted whole, as one whose devices other claims hold all.
            ns.tainted_whole = bool(ns.device_taints) and claimable <= set(ns.device_taints)
            taken: set[str] = set()
            for claim_name, devs in sorted(held.get(name, {}).items()):
                ns.held.append(
                    f"{len(devs)} device(s) ({', '.join(sorted(devs))}) held by claim {claim_name} of another workload"
                )
                taken.update(devs)
            if taken:
                # A claim holds its devices, not the node (issue 24): the node's other devices stay usable. A held
                # device the class does not declare (another name) cannot be told apart: the node counts as held.
                ns.held_whole = not taken <= claimable or taken >= claimable
                ns.held_devices = sorted(taken & claimable, key=_device_order)
            ps.nodes.append(ns)
        state.pools.append(ps)
    return state


def observed_pools(states: Iterable[ClusterState]) -> dict[str, dict[str, Any]]:
    """``{cluster: {pool: usable nodes}}``: what placement counts in ``observed`` mode; a pool with nodes whose devices
    other workloads' claims hold in part, or whose devices are tainted, is ``{nodes: usable nodes, held: [per such node:
    the held device names, or {devices, taints} when some are tainted]}`` (placement's ``PlacementPool.held``)."""
    return {s.name: {p.pool: _pool_capacity(p.observed, p.observed_devices) for p in s.pools} for s in states}


def _pool_capacity(nodes: int, observed: list[dict[str, Any]]) -> Any:
    held: list[Any] = [
        {"devices": list(n["held"]), "taints": dict(n["taints"])} if n["taints"] else list(n["held"]) for n in observed
    ]
    return {"nodes": nodes, "held": held} if held else nodes


def observe_fleet(
    fleet: Mapping[str, Any],
    classes: Mapping[str, InferenceClass],
    objects: Mapping[str, Iterable[Mapping[str, Any]]],
    owned: Mapping[str, ReplicaKeys] | None = None,
) -> list[ClusterState]:
    """Every cluster of ``fleet`` (``fleet_info``'s) that ``objects`` (cluster -> objects read) has a read of.
    ``owned``: per cluster, the fleet's replicas (:func:`owned_replicas`); without it every claim of the collection's
    is ours."""
    states = []
    for cluster in fleet.get("clusters") or []:
        name = str(cluster["name"])
        if name not in objects:
            continue
        by_kind: dict[str, list[Mapping[str, Any]]] = {"Node": [], "ResourceSlice": [], "ResourceClaim": []}
        for obj in objects[name]:
            by_kind.setdefault(str(obj.get("kind")), []).append(obj)
        state = observe_cluster(
            name,
            declared_pools(cluster),
            classes,
            by_kind["Node"],
            by_kind["ResourceSlice"],
            by_kind["ResourceClaim"],
            None if owned is None else owned.get(name, frozenset()),
        )
        if cluster.get("queue"):  # issue 33: the cluster's Kueue queue admits no more than its quota (queues.py)
            from ansible_collections.gpufleet.serving.plugins.module_utils.queues import apply_queue_quota

            # The fleet's own replicas admitted through this queue (those of deployments naming no queue of their own)
            # are in its usage already: their devices stay theirs.
            own_queue = {str(d.get("name")) for d in fleet.get("deployments") or [] if d.get("queue")}
            mine = None if owned is None else owned.get(name, frozenset())
            own_claims = [
                c
                for c in by_kind["ResourceClaim"]
                if _ours(c, mine) and str(_labels(c).get(LABEL_DEPLOYMENT)) not in own_queue
            ]
            apply_queue_quota(state, cluster["queue"], classes, by_kind, own_claims)
        if by_kind.get("LocalQueue") is not None or by_kind.get("ClusterQueue") is not None:
            # Issue 33: each deployment's own Kueue queue (its LocalQueue -> ClusterQueue), bounding that deployment.
            from ansible_collections.gpufleet.serving.plugins.module_utils.queues import deployment_queue_quotas

            state.queue_quota = deployment_queue_quotas(fleet, name, classes, by_kind)
        states.append(state)
    return states


def queue_quotas(states: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{cluster: {deployment: quota}}`` of observations in their dict shape (``queue_quota``, issue 33): what each
    deployment's own Kueue queue admits on each cluster it was observed on."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for index, state in enumerate(states):
        cluster, _pools = _pools_of(state, index)
        if state.get("queue_quota"):
            out[cluster] = {str(d): dict(q) for d, q in state["queue_quota"].items()}
    return out


# What placement reads back from the observations (:meth:`ClusterState.to_dict`, as ``fleet_read`` returns them).


def _pools_of(state: Mapping[str, Any], index: int) -> tuple[str, list[Mapping[str, Any]]]:
    try:
        return str(state["cluster"]), list(state["pools"])
    except (KeyError, TypeError):
        raise GpufleetError(
            f"cluster_capacity[{index}]: not an observed cluster (fleet_read's capacity), it has no cluster and pools"
        ) from None


def usable_nodes(states: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """:func:`observed_pools` of observations in their dict shape: ``{cluster: {pool: usable nodes}}`` (``{nodes,
    held}`` for a pool with nodes whose devices other workloads' claims hold in part, or are tainted)."""
    out: dict[str, dict[str, Any]] = {}
    for index, state in enumerate(states):
        cluster, pools = _pools_of(state, index)
        out[cluster] = {str(p["pool"]): _pool_capacity(int(p["usable_nodes"]), _observed_of(p)) for p in pools}
    return out


def _observed_of(pool: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A pool dict's observed nodes (:attr:`PoolState.observed_devices`): from ``observed_devices`` when some device is
    tainted, else from ``held_devices``."""
    tainted = pool.get("observed_devices")
    if tainted:
        return [
            {
                "held": [str(d) for d in n.get("held") or []],
                "taints": {str(d): [dict(t) for t in ts] for d, ts in (n.get("taints") or {}).items()},
            }
            for n in tainted
        ]
    return [{"held": [str(d) for d in node], "taints": {}} for node in pool.get("held_devices") or []]


def pool_notes(states: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """``{cluster: {pool: notes}}`` of observations in their dict shape, pools without notes left out."""
    out: dict[str, dict[str, list[str]]] = {}
    for index, state in enumerate(states):
        cluster, pools = _pools_of(state, index)
        out[cluster] = {str(p["pool"]): [str(n) for n in p["notes"]] for p in pools if p.get("notes")}
    return out
