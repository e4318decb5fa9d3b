# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Matching: a deployment's engines and members against a class's devices (``allocate()`` per node, the resolved
requests a record carries), the options an engine has on a cluster's pools, and the pool ledgers (:class:`_Matcher`).

Part of placement; ``placement.py`` is the façade other code imports (``plan()``, ``place()``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import DRAIN_TAINT
from ansible_collections.gpufleet.serving.plugins.module_utils.dra import features as dra_features
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.allocator import (
    Allocation,
    Counters,
    NodeDevice,
    allocate,
    node_counters,
    node_devices,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.state import EMPTY, NodeUse, PoolLedger
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import KubernetesVersion
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    DeviceSubRequest,
    InferenceClass,
    ModelDeployment,
    NodeSelector,
    PlacementCluster,
    Taint,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import (
    LedgerRecord,
    ReplicaRecord,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import Quantity, parse_quantity
from ansible_collections.gpufleet.serving.plugins.module_utils.scheduling.common import (
    _MEMO_LIMIT,
    SelectorEngine,
)

# --------------------------------------------------------------------------------------------------------------------
# Devices and matching
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class _Member:
    role: str
    pods: int
    node_selector: NodeSelector


@dataclass
class _Engine:
    name: str
    copies: int
    members: list[_Member]


@dataclass
class _MemberMatch:
    """A member matched against one node's devices (one inference class)."""

    ok: bool
    device_requests: list[dict[str, Any]] = field(default_factory=list)  # resolved DRA requests (output shape)
    synthetic: list[str] = field(default_factory=list)  # names of synthetic devices it matched
    why: str = ""
    constraints: list[dict[str, Any]] = field(default_factory=list)
    #: The devices (indexes) one pod's claim is allocated on a node of its own, and the capacity it consumes on shared
    #: ones (design.md §12).
    devices: tuple[int, ...] = ()
    consumed: dict[int, dict[str, Quantity]] = field(default_factory=dict)
    #: Each pod takes a whole node: it claims every device there (and has no first_available alternative that could
    #: take fewer), or the deployment asks for exclusive nodes. Such members are charged by node count (the fast path).
    whole: bool = False
    #: The claim is allocated on a node of its own (``devices`` are what it gets there). False: it stops at a CEL
    #: runtime error there (``why``), and fits only beside claims that hold the devices its selectors fail on
    #: (``beside``; kube-scheduler skips devices in use before it evaluates selectors); ``device_requests`` are
    #: resolved on such a node.
    alone: bool = True
    beside: tuple[str, ...] = ()

    def beside_text(self) -> str:
        """``gpu-0, gpu-1``: the devices other claims must hold for a member that does not fit alone."""
        names = list(self.beside)
        return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")

    @property
    def claims(self) -> bool:
        return bool(self.device_requests)


@dataclass
class _Option:
    """An engine that fits a pool's devices: per-member matches and the node cost (pods that claim devices)."""

    members: list[_MemberMatch]
    cost: int

    @property
    def whole(self) -> bool:
        """Every member that claims takes whole nodes: the engine is charged ``cost`` nodes, no device bookkeeping."""
        return all(m.whole for m in self.members if m.claims)


#: One pod's place in its pool's ledger: (node index, devices it holds there, capacity it consumes on shared ones).
Pod = tuple[int, tuple[int, ...], dict[int, dict[str, Quantity]]]
#: What a claim is allocated on one node: (devices, capacity consumed on shared ones).
Fitted = tuple[tuple[int, ...], dict[int, dict[str, Quantity]]]


@dataclass
class _MemberLanding:
    """What one member of a placed engine holds in its pool: whole nodes, or devices of nodes, one entry per pod."""

    whole: int = 0
    pods: list[Pod] = field(default_factory=list)
    #: A retained member whose recorded devices no longer make its claim: allocated again while the ledger is built.
    stale: bool = False


@dataclass
class _Landing:
    """An engine on a pool: the option it matched and what its members hold there."""

    pool: str
    option: _Option
    members: list[_MemberLanding]


def _engines_of(dep: ModelDeployment) -> list[_Engine]:
    return [
        _Engine(e.name, e.copies, [_Member(m.role, m.pods, m.node_selector) for m in e.members]) for e in dep.engines
    ]


def _resolved_class(alt: DeviceSubRequest, devices: list[NodeDevice], check: Any, fallback: str | None) -> str | None:
    """The device class a rendered alternative names: its own, else the class of the first DRA device it matches,
    else ``fallback`` (an alternative that matches nothing here needs some existing class to be schema-valid)."""
    if alt.device_class_name:
        return alt.device_class_name
    for dev in devices:
        if dev.claim == "DRA" and all(check(s.cel, dev)[0] for s in alt.selectors):
            return dev.device_class_name
    return fallback


def _extras(alt: DeviceSubRequest) -> dict[str, Any]:
    """What a resolved request carries beyond class, count and selectors (design.md §12), only when set."""
    out: dict[str, Any] = {}
    if alt.tolerations:
        out["tolerations"] = [t.to_k8s() for t in alt.tolerations]
    if alt.capacity is not None:
        out["capacity"] = {"requests": dict(alt.capacity.requests)}
    return out


def _sub_dict(alt: DeviceSubRequest, device_class_name: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": alt.name, "device_class_name": device_class_name}
    if alt.allocation_mode == "All":
        out["allocation_mode"] = "All"
    else:
        out["count"] = alt.devices
    out["selectors"] = [s.cel for s in alt.selectors]
    out.update(_extras(alt))
    return out


def _match_member(
    member: _Member,
    devices: list[NodeDevice],
    check: Any,
    features: dra_features.Features = dra_features.ALL,
    counters: Counters | None = None,
) -> _MemberMatch:
    """Allocate one pod's claim on one node's devices (:func:`allocator.allocate`) and resolve the record's requests.

    A claim that stops at a CEL runtime error on a node of its own may still be allocated beside other claims: upstream
    skips the devices they hold before it evaluates selectors, so where they hold every device a selector errors on,
    the search never meets the error. Such a member matches the class *beside others* (``alone`` False): placement
    puts it only on nodes where that is so, as kube-scheduler would."""
    ns = member.node_selector
    alloc = allocate(ns, devices, check, features=features, counters=counters)
    if alloc.ok:
        return _resolve(ns, devices, check, alloc)
    if alloc.stopped:
        beside = allocate(ns, devices, check, alloc.stopped, features, counters=counters)
        if beside.ok and beside.devices:
            mm = _resolve(ns, devices, check, beside)
            mm.alone, mm.devices, mm.consumed, mm.why = False, (), {}, alloc.why
            mm.beside = tuple(devices[i].name for i in sorted(alloc.stopped))
            return mm
    return _MemberMatch(False, why=alloc.why)


def _resolve(ns: NodeSelector, devices: list[NodeDevice], check: Any, alloc: Allocation) -> _MemberMatch:
    """The record's requests of a member whose claim is allocated ``alloc`` on a node of the class."""
    resolved: list[dict[str, Any]] = []
    for req, chosen in zip(ns.devices, alloc.chosen, strict=True):
        if chosen.device_class_name is None:
            continue  # matched synthetic devices: not claimed
        if req.first_available is None:
            item: dict[str, Any] = {
                "name": req.name,
                "device_class_name": chosen.device_class_name,
                "count": chosen.devices,
                "selectors": [s.cel for s in req.selectors],
            }
            if req.allocation_mode == "All":
                item["allocation_mode"] = "All"
            item.update(_extras(req))
        else:
            item = {
                "name": req.name,
                "device_class_name": chosen.device_class_name,
                "count": chosen.devices,
                "selectors": [],
                "first_available": [
                    _sub_dict(
                        alt,
                        chosen.device_class_name
                        if alt.name == chosen.sub
                        else _resolved_class(alt, devices, check, chosen.device_class_name),
                    )
                    for alt in req.first_available
                ],
                "chosen": chosen.sub,
            }
        resolved.append(item)
    constraints = [
        {
            "requests": list(c.requests),
            **({"match_attribute": c.match_attribute} if c.match_attribute else {}),
            **({"distinct_attribute": c.distinct_attribute} if c.distinct_attribute else {}),
        }
        for c in ns.constraints
    ]
    return _MemberMatch(
        True,
        resolved,
        alloc.synthetic,
        constraints=constraints if resolved else [],
        devices=alloc.devices,
        consumed=alloc.consumed,
    )


def _minor(version: str | None) -> str | None:
    """``"1.34.1-gke.1431000"`` -> ``"1.34"``: the minor release, which decides the CEL library and the allocator
    features (the key placement memoises by); None stays None. ``version`` was validated with its cluster."""
    if version is None:
        return None
    return str(KubernetesVersion.parse(version).minor_version)


def _untolerated(cluster: PlacementCluster, tolerations: list[Any], effects: Iterable[str]) -> list[Taint]:
    wanted = set(effects)
    return [t for t in cluster.taints if t.effect in wanted and not any(tol.tolerates(t) for tol in tolerations)]


def _is_drain_taint(t: Taint) -> bool:
    return t.key == DRAIN_TAINT["key"] and t.effect == DRAIN_TAINT["effect"]


def _taint_text(t: Taint) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


# --------------------------------------------------------------------------------------------------------------------
# The planner's bookkeeping: placed replicas, the pool ledgers, and matching memoised per class and cluster shape
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class _Placed:
    cluster: str
    index: int
    engines: list[_Landing]  # per engine, deployment order
    observed: ReplicaRecord | None = None  # set for a retained replica
    name: str = ""


_MISS: Any = object()


RecordedPod = tuple[int, list[str], "Mapping[str, Mapping[str, str]] | None"]


def _ledger_members(r: ReplicaRecord | LedgerRecord) -> Iterable[tuple[str, str, int, list[RecordedPod]]]:
    """``(cluster, pool, nodes, [(node, device names, capacity)])`` of every member of a replica record."""
    # A LedgerRecord is a plain dict (isinstance on a pydantic class is a slow Python-level check: avoided here).
    if isinstance(r, dict):
        for e in r["engines"]:
            for m in e["members"]:
                allocations = m.get("allocations")
                pods: list[RecordedPod] = (
                    [(a["node"], a["devices"], a.get("capacity")) for a in allocations] if allocations else []
                )
                yield r["cluster"], m["pool"], m["nodes"], pods
        return
    for em in r.engines:
        for mm in em.members:
            recorded: list[RecordedPod] = [(a.node, a.devices, a.capacity) for a in mm.allocations]
            yield r.cluster, mm.pool, mm.nodes, recorded


def _canonical(consumed: Mapping[int, Mapping[str, Quantity]]) -> dict[int, dict[str, str]]:
    return {d: {k: v.canonical() for k, v in caps.items()} for d, caps in consumed.items()}


class _Ledgers(dict[tuple[str, str], PoolLedger]):
    """Per ``(cluster, pool)``, its :class:`PoolLedger`, made by ``make`` when first asked for."""

    def __init__(self, make: Callable[[tuple[str, str]], PoolLedger]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key: tuple[str, str]) -> PoolLedger:
        led = self[key] = self._make(key)
        return led


class _Matcher:
    """Matching, memoised per class and per cluster shape: which devices of a class a member's requests take, whether a
    node's devices (what other claims hold there) fit a member, the options an engine has on a cluster's pools, and
    each pool's ledger as records describe it."""

    def __init__(
        self,
        dep: ModelDeployment,
        classes: dict[str, InferenceClass],
        clusters: list[PlacementCluster],
        replicas: Sequence[ReplicaRecord | LedgerRecord],
        sel: SelectorEngine,
    ) -> None:
        self.dep = dep
        self.engines = _engines_of(dep)
        self.exclusive = dep.placement.exclusive_nodes
        self.classes = classes
        self._devices: dict[str, list[NodeDevice]] = {}
        self._claimable: dict[str, frozenset[int]] = {}
        self._counters: dict[str, Counters] = {}
        self._shared: dict[tuple[str, str | None], dict[int, dict[str, Quantity]]] = {}
        self._index: dict[str, dict[str, int]] = {}
        self.clusters = clusters
        self.by_name = {c.name: c for c in clusters}
        self.replicas = replicas
        self.sel = sel
        self._checks: dict[str | None, Any] = {}
        self._member_memo: dict[tuple[str, int, int, str | None], _MemberMatch] = {}
        self._fit_memo: dict[tuple[str, int, int, str | None, NodeUse], Fitted | None] = {}
        self._options_memo: dict[tuple[tuple[str, ...], str | None], list[list[_Option | str]]] = {}
        self._class_memo: dict[tuple[str, int, str | None], tuple[_Option | None, str | None, bool]] = {}
        self._cluster_options: dict[str, list[list[_Option | str]]] = {}
        #: Per ``(cluster, pool)``: what is allocated on its nodes (:class:`dra.state.PoolLedger`).
        self.ledger: _Ledgers = _Ledgers(self._new_ledger)
        self._pools: dict[tuple[str, str], tuple[PlacementCluster, Any]] = {}
        self.dropped: list[dict[str, Any]] = []
        #: Clusters where every cache the deployment mounts is hydrated: fill prefers them among equally loaded ones
        #: (warm-first, issue 30; warm_first.py decides them).
        self.warm: frozenset[str] = frozenset()
        #: Replicas the fleet's drain taint evicts, with their retained engines: a safe drain keeps those it cannot
        #: replace (see :meth:`keep_unreplaced`).
        self.drained: list[tuple[ReplicaRecord, list[_Landing]]] = []
        self.warnings: list[str] = []

    # -- matching, memoised per class and per cluster shape ----------------------------------------------------------

    def devices(self, class_name: str) -> list[NodeDevice]:
        hit = self._devices.get(class_name)
        if hit is None:
            hit = self._devices[class_name] = node_devices(self.classes[class_name])
        return hit

    def claimable(self, class_name: str) -> frozenset[int]:
        """The devices of a node of the class a claim can hold (``DRA`` ones), as indexes."""
        hit = self._claimable.get(class_name)
        if hit is None:
            hit = frozenset(i for i, d in enumerate(self.devices(class_name)) if d.claim == "DRA")
            self._claimable[class_name] = hit
        return hit

    def counters(self, class_name: str) -> Counters:
        hit = self._counters.get(class_name)
        if hit is None:
            hit = self._counters[class_name] = node_counters(self.classes[class_name])
        return hit

    def shared(self, class_name: str, version: str | None) -> dict[int, dict[str, Quantity]]:
        """Devices of a node of the class several claims may be allocated (where the cluster's Kubernetes has
        consumable capacity), with their capacity."""
        key = (class_name, version)
        hit = self._shared.get(key)
        if hit is None:
            on = dra_features.for_version(version).consumable_capacity
            hit = self._shared[key] = {
                i: {name: value for name, value, _policy in d.capacity}
                for i, d in enumerate(self.devices(class_name))
                if on and d.multi and d.claim == "DRA"
            }
        return hit

    def device_index(self, class_name: str) -> dict[str, int]:
        """Claimable device name -> index, for a node of the class."""
        hit = self._index.get(class_name)
        if hit is None:
            devices = self.devices(class_name)
            hit = self._index[class_name] = {devices[i].name: i for i in sorted(self.claimable(class_name))}
        return hit

    def check(self, version: str | None) -> Any:
        hit = self._checks.get(version)
        if hit is None:
            sel = self.sel

            def hit(expr: str, dev: NodeDevice) -> tuple[bool, str | None]:
                return sel.check(expr, dev.shape, dev.slice, version)

            self._checks[version] = hit
        return hit

    def member_match(self, class_name: str, ei: int, mi: int, version: str | None = None) -> _MemberMatch:
        key = (class_name, ei, mi, version)
        hit = self._member_memo.get(key)
        if hit is None:
            member = self.engines[ei].members[mi]
            hit = _match_member(
                member,
                self.devices(class_name),
                self.check(version),
                dra_features.for_version(version),
                self.counters(class_name),
            )
            if hit.ok and hit.claims and not hit.alone and self.exclusive:
                # An exclusive pod has its node to itself: nothing else holds the devices its selectors fail on.
                hit = _MemberMatch(False, why=hit.why)
            if hit.ok and hit.claims:
                hit.whole = self.exclusive or (
                    frozenset(hit.devices) == self.claimable(class_name)
                    and not self.shared(class_name, version)
                    and all(r.first_available is None for r in member.node_selector.devices)
                )
            self._member_memo[key] = hit
        return hit

    def fit(self, class_name: str, ei: int, mi: int, version: str | None, use: NodeUse) -> Fitted | None:
        """What one pod of member ``mi`` of engine ``ei`` is allocated on a node of the class in state ``use``
        (upstream's allocator over ``AllocatedState``), or None; memoised per node state."""
        key = (class_name, ei, mi, version, use)
        hit = self._fit_memo.get(key, _MISS)
        if hit is _MISS:
            features = dra_features.for_version(version)
            if use == EMPTY:
                mm = self.member_match(class_name, ei, mi, version)
                hit = (mm.devices, mm.consumed) if mm.ok and mm.claims and mm.alone else None
            else:
                ns = self.engines[ei].members[mi].node_selector
                alloc = allocate(
                    ns,
                    self.devices(class_name),
                    self.check(version),
                    use.taken,
                    features,
                    use.consumed,
                    self.counters(class_name),
                    use.tainted,
                )
                hit = (alloc.devices, alloc.consumed) if alloc.ok and alloc.devices else None
            if len(self._fit_memo) >= _MEMO_LIMIT:
                self._fit_memo.clear()
            self._fit_memo[key] = hit
        return hit

    def fitter(self, class_name: str, ei: int, mi: int, version: str | None) -> Callable[[NodeUse], Fitted | None]:
        """:meth:`fit` for one member on one class, as the ledger calls it."""

        def fit(use: NodeUse) -> Fitted | None:
            return self.fit(class_name, ei, mi, version, use)

        return fit

    def engine_on_class(
        self, class_name: str, ei: int, version: str | None = None
    ) -> tuple[list[_MemberMatch], str | None]:
        """Members matched against a class, or the reason the engine cannot run there (ignoring other pools)."""
        engine = self.engines[ei]
        matches = []
        for mi, member in enumerate(engine.members):
            m = self.member_match(class_name, ei, mi, version)
            if not m.ok:
                return [], f"engine {engine.name} member {member.role} {m.why}"
            matches.append(m)
        if not any(m.claims for m in matches):
            synthetic = sorted({s for m in matches for s in m.synthetic})
            if synthetic:
                return [], (
                    f"engine {engine.name}: only synthetic devices matched ({', '.join(synthetic)}); "
                    "no DRA device would be claimed"
                )
            return [], f"engine {engine.name}: no member requests a DRA device"
        return matches, None

    def cost(self, ei: int, matches: list[_MemberMatch]) -> int:
        engine = self.engines[ei]
        return sum(m.pods * engine.copies for m, mm in zip(engine.members, matches, strict=True) if mm.claims)

    def options(self, cluster: PlacementCluster) -> list[list[_Option | str]]:
        """Per engine, per pool (cluster order): the option, or why the pool cannot host the engine."""
        hit = self._cluster_options.get(cluster.name)
        if hit is None:
            key = (cluster.classes, _minor(cluster.kubernetes_version))  # same classes and version: one table
            hit = self._options_memo.get(key)
            if hit is None:
                hit = self._options(key)
            self._cluster_options[cluster.name] = hit
        return hit

    def class_option(self, class_name: str, ei: int, version: str | None) -> tuple[_Option | None, str | None, bool]:
        """Engine ``ei`` on one class, memoised: (option, or None with why; whether every member claims a device)."""
        key = (class_name, ei, version)
        hit = self._class_memo.get(key)
        if hit is None:
            matches, why = self.engine_on_class(class_name, ei, version)
            option = _Option(matches, self.cost(ei, matches)) if why is None else None
            hit = self._class_memo[key] = (option, why, all(m.claims for m in matches))
        return hit

    def _options(self, key: tuple[tuple[str, ...], str | None]) -> list[list[_Option | str]]:
        classes, version = key
        table: list[list[_Option | str]] = []
        for ei, engine in enumerate(self.engines):
            claimable: list[bool] | None = None
            row: list[_Option | str] = []
            for class_name in classes:
                option, why, every_member_claims = self.class_option(class_name, ei, version)
                if option is None:
                    row.append(why or "")
                    continue
                if not every_member_claims:
                    # A member that can claim a DRA device on some pool of this cluster is never stranded claimless.
                    if claimable is None:
                        claimable = [
                            any(self.member_match(c, ei, mi, version).claims for c in dict.fromkeys(classes))
                            for mi in range(len(engine.members))
                        ]
                    for member, mm, can in zip(engine.members, option.members, claimable, strict=True):
                        if can and not mm.claims:
                            what = f"only synthetic devices ({', '.join(mm.synthetic)})" if mm.synthetic else "nothing"
                            why = (
                                f"engine {engine.name} member {member.role} would claim {what} here "
                                "but can claim a DRA device on another pool"
                            )
                            break
                row.append(option if why is None else why)
            table.append(row)
        self._options_memo[key] = table
        return table

    # -- retain ------------------------------------------------------------------------------------------------------

    def _recorded_pods(
        self, class_name: str, ei: int, mi: int, version: str | None, recorded: list[Any], want: int
    ) -> list[Pod] | None:
        """A retained member's recorded pods, when they still make its claim: one per pod, each the very devices (and
        capacity) the claim is allocated on a node where only those are free (else None: it is allocated again)."""
        if len(recorded) != want:
            return None
        index = self.device_index(class_name)
        claimable = self.claimable(class_name)
        out: list[Pod] = []
        for a in recorded:
            devices = tuple(index.get(name, -1) for name in a.devices)
            chosen = frozenset(devices)
            if -1 in chosen or len(chosen) != len(devices):
                return None
            consumed = self._consumed(class_name, version, a.devices, a.capacity)
            got = self.fit(class_name, ei, mi, version, NodeUse(claimable - chosen))
            if got is None or frozenset(got[0]) != chosen or _canonical(got[1]) != _canonical(consumed):
                return None
            out.append((a.node, devices, consumed))
        return out

    def _consumed(
        self, class_name: str, version: str | None, names: list[str], capacity: Mapping[str, Mapping[str, str]] | None
    ) -> dict[int, dict[str, Quantity]]:
        """What a record's pod consumes on the shared devices among ``names`` (a shared device the record gives no
        capacity for: all of it)."""
        shared = self.shared(class_name, version)
        index = self.device_index(class_name)
        out: dict[int, dict[str, Quantity]] = {}
        for name in names:
            d = index.get(name)
            if d is None or d not in shared:
                continue
            given = (capacity or {}).get(name)
            out[d] = {k: parse_quantity(v) for k, v in given.items()} if given else dict(shared[d])
        return out

    # -- ledger and fill ---------------------------------------------------------------------------------------------

    def _new_ledger(self, key: tuple[str, str]) -> PoolLedger:
        """An empty pool's ledger, with what was observed on its nodes: devices other workloads hold, and taints on
        devices beyond the class's (each device by itself: the node's other devices stay usable)."""
        c, p = self._pools[key]
        index = self.device_index(p.class_name)
        shared = self.shared(p.class_name, _minor(c.kubernetes_version))
        held = []
        for node in p.held:
            names, taints = (node, {}) if isinstance(node, list) else (node.devices, node.taints)
            held.append(
                NodeUse(
                    frozenset(index[n] for n in names if n in index and index[n] not in shared),
                    EMPTY.plus(
                        (), {index[n]: shared[index[n]] for n in names if n in index and index[n] in shared}
                    ).shared,
                    tuple(sorted((index[n], tuple(ts)) for n, ts in taints.items() if n in index and ts)),
                )
            )
        return PoolLedger(
            p.nodes, len(self.claimable(p.class_name)) - len(shared), [h for h in held if h != EMPTY], shared
        )

    def _pool_class(self, cluster: str, pool: str) -> str:
        for p in self.by_name[cluster].pools:
            if p.name == pool:
                return p.class_name
        raise KeyError(pool)  # pragma: no cover - only called for pools of the ledger
