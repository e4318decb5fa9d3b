# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Device-aware replica placement (design.md §4): a pure function of the fleet it is given.

``place(deployment=..., clusters=..., classes=..., replicas=...)`` returns the deployment's replicas, the counts, a
``ReplicasScheduled`` condition and an explanation of every candidate cluster that cannot take another replica.

How it works, in the order the rules apply:

1. **Validate** the deployment (``ModelDeployment``), every inference class (``InferenceClass``), the candidate clusters
   and the replicas already in the fleet. Malformed input raises :class:`FleetValidationError` (``path: reason``).
2. **Compile** every CEL selector once. An expression that does not compile yields the ``InvalidNodeSelector``
   condition; nothing is placed, moved or dropped (the deployment's replicas are returned unchanged).
3. **Retain** each of this deployment's replicas while its cluster is still a candidate, carries no untolerated
   ``NoExecute`` taint, and its pool still satisfies every member with the *current* selectors. A retained replica is
   returned as the deployment is now (current selectors, copies and node cost). Identity is ``(cluster, index)``.
4. **Scale down** when more are retained than wanted: the most-loaded cluster first, its highest index first; between
   equally loaded clusters the later name first.
5. **Fill** the shortfall one replica at a time on the eligible cluster with the fewest of this deployment's replicas
   (ties by name), taking the lowest free index there, against a ledger per ``(cluster, pool)`` of what is allocated
   on each node (:class:`dra.state.PoolLedger`, design.md §12) that charges every other deployment's replicas and this
   deployment's retained ones (their ``allocations``, or whole ``nodes``). Eligible: ``ready``, every
   ``NoSchedule``/``NoExecute`` taint tolerated, and every engine fits one pool with room.
6. **Explain**: every candidate cluster that cannot take one more replica is listed in ``unschedulable`` with the
   reason, per pool where pools matter.

Matching (the part that needs devices): a node's devices are its pool's inference class's devices, one by one
(``count`` devices per entry, each with its ``instances`` values). Whether a node can hold one pod's claim beside what
other claims hold there is decided by :mod:`allocator`, which has the shape of Kubernetes' own allocator: requests in
order, ``ExactCount`` / ``All`` / ``first_available`` alternatives, ``match_attribute`` / ``distinct_attribute``
constraints, the per-claim device limit, device taints, consumable capacity, counters, an exact search. A pod goes to
the first node of the pool where its claim fits (nodes in use first); a member that takes every device of its node,
or one of a deployment with ``placement.exclusive_nodes``, takes whole nodes (counted, the fast path). An engine lands
on the first pool, in the cluster's pool order, where every member matches and which has room for all its pods; its
members share that pool. A match on ``Synthetic`` devices forms no claim: a member that resolves only synthetic
devices costs no nodes and carries no ``device_requests``, an engine in which no member claims a DRA device is never
placed, and a member that could claim a DRA device on another pool of the cluster is not stranded claimless on a
synthetic-only pool.

A cluster's ``kubernetes_version`` decides which CEL library functions its selectors may use (a selector that does not
compile for that version matches nothing there) and which allocator features its scheduler has (:mod:`dra.features`);
the explanation says which.

A CEL selector is compiled once per process and evaluated once per distinct device shape (memoised by expression and
canonical device JSON), not once per pool, cluster or replica. An evaluation error (e.g. a missing attribute on a
device of another driver) counts as "no match" for that device and is explained.

Replica names are ``<deployment>-<h>`` where ``h`` is the first 5 hex digits of
``sha256(f"{deployment}/{cluster}/{index}")``. Should two replicas of one deployment collide, the newer one takes one
more digit (a retained replica keeps the name it came with); the deployment part is shortened when needed so the name
stays a 63-character DNS label.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils import dra_cel, semver
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import DRAIN_TAINT, replica_name
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
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import KubernetesVersion
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    DeviceSubRequest,
    InferenceClass,
    ModelDeployment,
    NodeSelector,
    PlacementCluster,
    Taint,
    ValidationError,
    format_loc,
    list_adapter,
    parse,
    require_pydantic,
    translate_errors,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import Quantity, parse_quantity
from ansible_collections.gpufleet.serving.plugins.module_utils.records import (
    LedgerRecord,
    ReplicaRecord,
    copy_request,
)

CONDITION_TYPE = "ReplicasScheduled"
REASON_CREATED = "ReplicasCreated"
REASON_INSUFFICIENT_CAPACITY = "InsufficientCapacity"
REASON_INVALID_NODE_SELECTOR = "InvalidNodeSelector"
REASON_NO_CLUSTERS = "NoClusters"
REASON_OVERCOMMITTED = "PoolOvercommitted"

# Codes of ``unschedulable[cluster].code``.
CODE_NOT_READY = "NotReady"
CODE_TAINTED = "TaintNotTolerated"
CODE_NO_POOLS = "NoPools"
CODE_NO_MATCHING_POOL = "NoMatchingPool"
CODE_INSUFFICIENT_CAPACITY = "InsufficientCapacity"

NAME_HASH_DIGITS = 5
_MEMO_LIMIT = 200_000


# --------------------------------------------------------------------------------------------------------------------
# Selector engine: compile once, evaluate once per distinct device shape
# --------------------------------------------------------------------------------------------------------------------


class SelectorEngine:
    """Compiles each CEL expression once and evaluates it once per distinct device shape.

    ``evaluations`` counts real evaluations (calls into the CEL engine); ``lookups`` counts every question asked.
    The module-level :data:`SELECTORS` is shared by every placement in the process.
    """

    def __init__(self) -> None:
        self._compiled: dict[str, Any] = {}
        self._results: dict[tuple[str, str], tuple[bool, str | None]] = {}
        self._version_errors: dict[tuple[str, str], str | None] = {}
        self.evaluations = 0
        self.lookups = 0

    def compile(self, expression: str) -> None:
        """Compile ``expression`` (once); raises ``ValueError`` (``SelectorCompileError``) when it is invalid."""
        if expression in self._compiled:
            return
        self._compiled[expression] = dra_cel.compile_selector(expression)

    def version_error(self, expression: str, version: str) -> str | None:
        """Why ``expression`` does not compile for Kubernetes ``version`` (``"1.34"``), or None when it does."""
        key = (expression, version)
        # dra_cel caches what compiles, not what raises: an expression too new for a cluster's version would be
        # compiled again for every device of the cluster.
        if key not in self._version_errors:
            try:
                dra_cel.compile_selector(expression, version)
                self._version_errors[key] = None
            except ValueError as exc:
                self._version_errors[key] = str(exc)
        return self._version_errors[key]

    def check(
        self, expression: str, shape: str, device: Mapping[str, Any], version: str | None = None
    ) -> tuple[bool, str | None]:
        """``(matches, error)`` for ``expression`` on a device whose canonical JSON is ``shape``, on a cluster of
        Kubernetes ``version`` (None: the newest)."""
        self.lookups += 1
        if version is not None:
            err = self.version_error(expression, version)
            if err is not None:
                return False, f"does not compile for Kubernetes {version}: {err}"
        key = (expression, shape)
        hit = self._results.get(key)
        if hit is not None:
            return hit
        compiled = self._compiled.get(expression)
        if compiled is None:
            self.compile(expression)
            compiled = self._compiled[expression]
        self.evaluations += 1
        try:
            result: tuple[bool, str | None] = (bool(compiled.matches(device)), None)
        except ValueError as exc:  # SelectorEvalError: the device does not match, and we say why
            result = (False, str(exc) or type(exc).__name__)
        if len(self._results) >= _MEMO_LIMIT:
            self._results.clear()
        self._results[key] = result
        return result

    def reset_stats(self) -> None:
        self.evaluations = 0
        self.lookups = 0

    @property
    def distinct_pairs(self) -> int:
        return len(self._results)


SELECTORS = SelectorEngine()


# --------------------------------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------------------------------


def _is_derived_name(name: str | None, deployment: str, cluster: str, index: int) -> bool:
    if not name:
        return False
    digits = len(name) - name.rfind("-") - 1
    return NAME_HASH_DIGITS <= digits <= 64 and replica_name(deployment, cluster, index, digits) == name


def _unique_name(deployment: str, cluster: str, index: int, taken: set[str]) -> str:
    for digits in range(NAME_HASH_DIGITS, 65):
        name = replica_name(deployment, cluster, index, digits)
        if name not in taken:
            return name
    raise GpufleetError(
        f"cannot name replica ({cluster}, {index}) of {deployment}: every hash prefix is taken"
    )  # pragma: no cover


# --------------------------------------------------------------------------------------------------------------------
# Input shapes
# --------------------------------------------------------------------------------------------------------------------


def validate_classes(classes: Any) -> dict[str, InferenceClass]:
    if not isinstance(classes, Mapping):
        raise FleetValidationError(
            [("classes", f"must be a mapping of class name to class (got {type(classes).__name__})")]
        )
    errors: list[tuple[str, str]] = []
    parsed: dict[str, InferenceClass] = {}
    for name, data in classes.items():
        try:
            parsed[str(name)] = parse(InferenceClass, data, format_loc("classes", (str(name),)))
        except FleetValidationError as exc:
            errors.extend(exc.errors)
    if errors:
        raise FleetValidationError(errors)
    return parsed


def validate_clusters(clusters: Any, classes: Mapping[str, Any]) -> list[PlacementCluster]:
    """Candidate clusters as models; every pool's class must be one of ``classes``, names unique."""
    if clusters is None:
        return []
    if not isinstance(clusters, list):
        raise FleetValidationError([("clusters", f"must be a list (got {type(clusters).__name__})")])
    # ``pools: null`` / ``taints: null`` mean none (as a read-back may spell it).
    data = [
        {**c, "pools": c.get("pools") or [], "taints": c.get("taints") or []}
        if isinstance(c, dict) and (c.get("pools") is None or c.get("taints") is None)
        else c
        for c in clusters
    ]
    try:
        out: list[PlacementCluster] = list_adapter(PlacementCluster).validate_python(data)
    except ValidationError as exc:
        raise FleetValidationError(translate_errors("clusters", exc)) from None
    errors: list[tuple[str, str]] = []
    seen: set[str] = set()
    for ci, cluster in enumerate(out):
        if cluster.name in seen:
            errors.append((f"clusters[{ci}].name", f"duplicate cluster name {cluster.name!r}"))
        seen.add(cluster.name)
        pools = cluster.pools
        if len({p.name for p in pools}) == len(pools) and all(p.class_name in classes for p in pools):
            continue  # the common case, checked in one pass
        path = f"clusters[{ci}]"
        pool_names: set[str] = set()
        for pi, pool in enumerate(pools):
            if pool.name in pool_names:
                errors.append((f"{path}.pools[{pi}].name", f"duplicate pool name {pool.name!r}"))
            pool_names.add(pool.name)
            if pool.class_name not in classes:
                known = ", ".join(sorted(classes)) or "none given"
                errors.append(
                    (f"{path}.pools[{pi}].class", f"unknown inference class {pool.class_name!r} (known: {known})")
                )
    if errors:
        raise FleetValidationError(errors)
    return out


_CLUSTERS_SEEN: dict[str, list[PlacementCluster]] = {}


def _validated_clusters(clusters: Any, classes: Mapping[str, Any]) -> list[PlacementCluster]:
    """:func:`validate_clusters`, remembered for the last candidate list by its content (canonical JSON and the class
    names), so placing deployment after deployment over one fleet validates it once. The models are frozen."""
    try:
        key = json.dumps([clusters, sorted(classes)], sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return validate_clusters(clusters, classes)
    hit = _CLUSTERS_SEEN.get(key)
    if hit is None:
        hit = validate_clusters(clusters, classes)
        _CLUSTERS_SEEN.clear()
        _CLUSTERS_SEEN[key] = hit
    return list(hit)


def validate_records(replicas: Any, ours: str) -> list[ReplicaRecord | LedgerRecord]:
    """The fleet's replicas: this deployment's fully (:class:`ReplicaRecord`), the others' as far as the ledger reads
    them (:class:`LedgerRecord`); a record that is not even that is reported with every problem a full record has."""
    if replicas is None:
        return []
    if not isinstance(replicas, list):
        raise FleetValidationError([("replicas", f"must be a list (got {type(replicas).__name__})")])
    mine: list[tuple[int, Any]] = []
    others: list[tuple[int, Any]] = []
    for ri, data in enumerate(replicas):
        deployment = data.get("deployment") if isinstance(data, Mapping) else None
        if isinstance(deployment, str) and deployment and deployment != ours:
            others.append((ri, data))
        else:
            mine.append((ri, data))
    out: list[ReplicaRecord | LedgerRecord | None] = [None] * len(replicas)
    errors: list[tuple[str, str]] = []
    for group, model in ((mine, ReplicaRecord), (others, LedgerRecord)):
        if not group:
            continue
        try:  # the whole group in one validation call; item by item only to name what is wrong
            for (ri, _data), record in zip(
                group, list_adapter(model).validate_python([d for _i, d in group]), strict=True
            ):
                out[ri] = record
        except ValidationError:
            for ri, data in group:
                if model is LedgerRecord:
                    try:
                        out[ri] = list_adapter(LedgerRecord).validate_python([data])[0]
                        continue
                    except ValidationError:
                        pass  # say precisely what is wrong, as for a full record
                try:
                    out[ri] = ReplicaRecord.parse(data, f"replicas[{ri}]")
                except FleetValidationError as exc:
                    errors.extend(exc.errors)
    if errors:
        raise FleetValidationError(sorted(errors, key=lambda e: _replica_index(e[0])))
    return [r for r in out if r is not None]


def _replica_index(path: str) -> int:
    try:
        return int(path.split("[", 1)[1].split("]", 1)[0])
    except (IndexError, ValueError):
        return -1


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
# The planner
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


class _Planner:
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

    def retained_engines(self, r: ReplicaRecord, cluster: PlacementCluster) -> list[_Landing] | str:
        want = [e.name for e in self.engines]
        have = [e.name for e in r.engines]
        if sorted(want) != sorted(have):
            return f"its engines ({', '.join(have) or 'none'}) no longer match the deployment's ({', '.join(want)})"
        observed = {e.name: e for e in r.engines}
        pools = {p.name: p for p in cluster.pools}
        version = _minor(cluster.kubernetes_version)
        out: list[_Landing] = []
        for ei, engine in enumerate(self.engines):
            got = observed[engine.name]
            roles = [m.role for m in got.members]
            if roles != [m.role for m in engine.members]:
                return f"engine {engine.name}: its members ({', '.join(roles)}) no longer match the deployment's"
            pool_names = {m.pool for m in got.members}
            if len(pool_names) != 1:
                return f"engine {engine.name}: its members are split across pools {', '.join(sorted(pool_names))}"
            pool_name = pool_names.pop()
            pool = pools.get(pool_name)
            if pool is None:
                return f"pool {pool_name} no longer exists on cluster {cluster.name}"
            matches, why = self.engine_on_class(pool.class_name, ei, version)
            if why is not None:
                return f"pool {pool_name} no longer satisfies it: {why}"
            # What each member holds: as recorded while that still makes its claim ("charged as it was placed", so a
            # shape change never evicts it); a member recorded by node count alone is allocated devices again.
            members: list[_MemberLanding] = []
            for mi, (member, mm, rm) in enumerate(zip(engine.members, matches, got.members, strict=True)):
                if not mm.claims or mm.whole:
                    held = rm.nodes if not rm.allocations else (member.pods * engine.copies if mm.claims else 0)
                    members.append(_MemberLanding(whole=held))
                    continue
                pods = self._recorded_pods(
                    pool.class_name, ei, mi, version, rm.allocations, member.pods * engine.copies
                )
                members.append(_MemberLanding(pods=pods) if pods is not None else _MemberLanding(stale=True))
            out.append(_Landing(pool_name, _Option(matches, self.cost(ei, matches)), members))
        return out

    def drop(self, r: ReplicaRecord, reason: str) -> None:
        self.dropped.append({"name": r.name, "cluster": r.cluster, "index": r.index, "reason": reason})

    def retain(self, ours: list[ReplicaRecord]) -> list[_Placed]:
        tolerations = self.dep.tolerations
        kept: list[_Placed] = []
        seen: set[tuple[str, int]] = set()
        for r in ours:
            cluster = self.by_name.get(r.cluster)
            if cluster is None:
                self.drop(r, f"cluster {r.cluster} is no longer a candidate")
                continue
            evicting = _untolerated(cluster, tolerations, ("NoExecute",))
            if evicting:
                if (r.cluster, r.index) not in seen and all(_is_drain_taint(t) for t in evicting):
                    engines = self.retained_engines(r, cluster)
                    if not isinstance(engines, str):
                        seen.add((r.cluster, r.index))
                        self.drained.append((r, engines))
                self.drop(r, f"taint {', '.join(map(_taint_text, evicting))} is not tolerated (evicted)")
                continue
            if (r.cluster, r.index) in seen:
                self.drop(r, f"duplicate of replica ({r.cluster}, {r.index})")
                continue
            engines = self.retained_engines(r, cluster)
            if isinstance(engines, str):
                self.drop(r, engines)
                continue
            seen.add((r.cluster, r.index))
            kept.append(_Placed(r.cluster, r.index, engines, observed=r))
        return kept

    def keep_unreplaced(self, placed: int, desired: int) -> list[_Placed]:
        """Safe drain: the drained replicas that no other cluster could take a replacement for stay where they are
        (``kubectl drain`` respects a PodDisruptionBudget the same way). They count against the drained cluster's
        pools again (nothing new was placed there: the drain taint keeps new replicas off it)."""
        target = min(desired, placed + len(self.drained))
        stay = self.drained[: max(0, target - placed)]
        out = []
        for r, engines in stay:
            self.dropped = [d for d in self.dropped if (d["cluster"], d["index"]) != (r.cluster, r.index)]
            self.hold(r.cluster, engines)
            self.warnings.append(
                f"replica ({r.cluster}, {r.index}) stays on drained cluster {r.cluster}: no other cluster can take its "
                "replacement (drain with force to remove it anyway)"
            )
            out.append(_Placed(r.cluster, r.index, engines, observed=r))
        return out

    def scale_down(self, kept: list[_Placed], desired: int) -> list[_Placed]:
        if len(kept) <= desired:
            return kept
        per_cluster: dict[str, list[_Placed]] = {}
        for p in kept:
            per_cluster.setdefault(p.cluster, []).append(p)
        for items in per_cluster.values():
            items.sort(key=lambda p: p.index)
        excess = len(kept) - desired
        victims: set[int] = set()
        for _step in range(excess):
            name = max((n for n in per_cluster if per_cluster[n]), key=lambda n: (len(per_cluster[n]), n))
            victim = per_cluster[name].pop()
            victims.add(id(victim))
            if victim.observed is not None:
                self.drop(victim.observed, f"scaled down to {desired} replica(s)")
        return [p for p in kept if id(p) not in victims]

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

    def build_ledger(self, kept: list[_Placed]) -> None:
        """The allocated state of every candidate pool: what other deployments' replicas hold (their recorded devices,
        or whole nodes), what was observed held by other workloads, and this deployment's kept replicas."""
        # Pools are given their ledger when first needed (most of a large fleet's pools are never asked about).
        self._pools = {(c.name, p.name): (c, p) for c in self.clusters for p in c.pools}
        self.ledger = ledger = _Ledgers(self._new_ledger)
        versions = {c.name: _minor(c.kubernetes_version) for c in self.clusters}
        pools = self._pools
        for r in self.replicas:
            if not isinstance(r, dict) and r.deployment == self.dep.name:
                continue  # ours: the kept ones are charged below, as they are kept now
            for cluster, pool, nodes, pods in _ledger_members(r):
                if (cluster, pool) not in pools:
                    continue
                led = ledger[(cluster, pool)]
                if not pods:
                    if nodes:
                        led.take_whole(nodes, force=True)
                    continue
                class_name = self._pool_class(cluster, pool)
                version = versions[cluster]
                index = self.device_index(class_name)
                for node, names, capacity in pods:
                    consumed = self._consumed(class_name, version, names, capacity)
                    devices = [index[n] for n in names if n in index and index[n] not in consumed]
                    if devices or consumed:
                        led.charge(node, devices, consumed)
                    else:  # devices the class no longer publishes: hold a node, as the record's pod does
                        led.take_whole(1, force=True)
        stale: list[tuple[_Placed, int]] = []
        for placed in kept:
            self.hold(placed.cluster, placed.engines)
            stale.extend(
                (placed, ei) for ei, landing in enumerate(placed.engines) if any(m.stale for m in landing.members)
            )
        # Members whose recorded devices no longer make their claim (or recorded by node count only, before
        # device-level placement) are allocated again, after everything recorded: placed where they fit, or beyond
        # the pool's nodes (an overcommit shows) -- a kept replica is never evicted for it.
        for placed, ei in stale:
            landing = placed.engines[ei]
            led = ledger[(placed.cluster, landing.pool)]
            version = _minor(self.by_name[placed.cluster].kubernetes_version)
            class_name = self._pool_class(placed.cluster, landing.pool)
            engine = self.engines[ei]
            for mi, (member, ml) in enumerate(zip(engine.members, landing.members, strict=True)):
                if not ml.stale:
                    continue
                ml.stale = False
                for _pod in range(member.pods * engine.copies):
                    got = led.fit(self.fitter(class_name, ei, mi, version), force=True)
                    if got is not None:
                        ml.pods.append(got)

    def hold(self, cluster: str, engines: list[_Landing]) -> None:
        """Charge what a kept replica's engines hold; recorded devices another replica holds already move to another
        node (:meth:`PoolLedger.charge`), and the landing says where."""
        for landing in engines:
            led = self.ledger[(cluster, landing.pool)]
            for ml in landing.members:
                if ml.whole:
                    led.take_whole(ml.whole, force=True)
                ml.pods = [
                    (led.charge(node, [d for d in devices if d not in consumed], consumed), devices, consumed)
                    for node, devices, consumed in ml.pods
                ]

    def pack(
        self, led: PoolLedger, class_name: str, ei: int, option: _Option, version: str | None
    ) -> list[_MemberLanding] | None:
        """Allocate one engine's pods on a pool's ledger (changed in place), in the order kube-scheduler would meet them
        (copy by copy, member by member): whole-node members take unused nodes, the others first fit. None: no room."""
        engine = self.engines[ei]
        out = [_MemberLanding() for _m in engine.members]
        for _copy in range(engine.copies):
            for mi, (member, mm) in enumerate(zip(engine.members, option.members, strict=True)):
                if not mm.claims:
                    continue
                if mm.whole:
                    if not led.take_whole(member.pods):
                        return None
                    out[mi].whole += member.pods
                    continue
                for _pod in range(member.pods):
                    got = led.fit(self.fitter(class_name, ei, mi, version))
                    if got is None:
                        return None
                    out[mi].pods.append(got)
        return out

    def try_place(self, cluster: PlacementCluster) -> tuple[list[_Landing] | None, str, dict[str, str], str]:
        """Fit one replica on ``cluster`` against the ledger: (placement, or None with code, per-pool reasons, reason)."""
        table = self.options(cluster)
        version = _minor(cluster.kubernetes_version)
        trial: dict[str, PoolLedger] = {}
        placed: list[_Landing] = []
        for ei, engine in enumerate(self.engines):
            reasons: dict[str, str] = {}
            chosen = None
            capacity = False
            need = 0
            for pool, option in zip(cluster.pools, table[ei], strict=True):
                if isinstance(option, str):
                    reasons[pool.name] = option
                    continue
                led = trial.get(pool.name) or self.ledger[(cluster.name, pool.name)]
                if option.whole:
                    # The fast path: whole nodes, counted.
                    free = led.free()
                    if free < option.cost:
                        capacity = True
                        need = need or option.cost
                        reasons[pool.name] = (
                            f"engine {engine.name} needs {option.cost} node(s), {max(free, 0)} of {pool.nodes} free"
                        )
                        continue
                    after = led.copy()
                    members = self.pack(after, pool.class_name, ei, option, version)
                else:
                    after = led.copy()
                    members = self.pack(after, pool.class_name, ei, option, version)
                    if members is None:
                        beside = [(m, mm) for m, mm in zip(engine.members, option.members, strict=True) if not mm.alone]
                        if beside and not led.nodes:
                            # Nothing holds a device on any node: the claim stops at its CEL error on every one.
                            member, mm = beside[0]
                            reasons[pool.name] = f"engine {engine.name} member {member.role} {mm.why}"
                            continue
                        capacity = True
                        names = [d.name for d in self.devices(pool.class_name)]
                        reasons[pool.name] = (
                            f"engine {engine.name}: no node has the devices its {option.cost} pod(s) claim free "
                            f"({led.describe(names=names)})"
                        ) + "".join(
                            f"; member {m.role} fits only beside claims that hold {mm.beside_text()} ({mm.why})"
                            for m, mm in beside
                        )
                        continue
                if members is None:  # pragma: no cover - whole nodes were counted free above
                    continue
                trial[pool.name] = after
                chosen = _Landing(pool.name, option, members)
                break
            if chosen is None:
                if not cluster.pools:
                    return None, CODE_NO_POOLS, {}, "has no node pools"
                if capacity:
                    room = f"{need} free node(s)" if need else "room for it"
                    return (
                        None,
                        CODE_INSUFFICIENT_CAPACITY,
                        reasons,
                        f"insufficient capacity: no pool that matches engine {engine.name} has {room}",
                    )
                return None, CODE_NO_MATCHING_POOL, reasons, f"no pool can host engine {engine.name}"
            placed.append(chosen)
        return placed, "", {}, ""

    def commit(self, cluster: str, engines: list[_Landing]) -> None:
        self.hold(cluster, engines)

    def eligibility(self, cluster: PlacementCluster) -> tuple[str, str] | None:
        """Why ``cluster`` takes no new replica regardless of capacity, or None."""
        problems = []
        code = ""
        if not cluster.ready:
            problems.append("not ready: takes no new replicas")
            code = CODE_NOT_READY
        tainted = _untolerated(cluster, self.dep.tolerations, ("NoSchedule", "NoExecute"))
        if tainted:
            problems.append(f"taint {', '.join(map(_taint_text, tainted))} is not tolerated")
            code = code or CODE_TAINTED
        return (code, "; ".join(problems)) if problems else None

    def fill(self, kept: list[_Placed], desired: int) -> list[_Placed]:
        load: dict[str, int] = {}
        used: dict[str, set[int]] = {}
        for p in kept:
            load[p.cluster] = load.get(p.cluster, 0) + 1
            used.setdefault(p.cluster, set()).add(p.index)
        placed: list[_Placed] = []
        shortfall = desired - len(kept)
        if shortfall <= 0:
            return placed
        heap = [(load.get(c.name, 0), c.name) for c in self.clusters if self.eligibility(c) is None]
        heapq.heapify(heap)
        while shortfall > 0 and heap:
            count, name = heapq.heappop(heap)
            cluster = self.by_name[name]
            engines = self.try_place(cluster)[0]
            if engines is None:
                continue  # the ledger only fills up during fill: this cluster cannot take any more
            taken = used.setdefault(name, set())
            index = 0
            while index in taken:
                index += 1
            taken.add(index)
            self.commit(name, engines)
            placed.append(_Placed(name, index, engines))
            shortfall -= 1
            heapq.heappush(heap, (count + 1, name))
        return placed

    def explain(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for cluster in sorted(self.clusters, key=lambda c: c.name):
            ineligible = self.eligibility(cluster)
            if ineligible is not None:
                out[cluster.name] = {"code": ineligible[0], "reason": ineligible[1], "pools": {}}
                continue
            engines, code, pools, reason = self.try_place(cluster)
            if engines is None:
                out[cluster.name] = {"code": code, "reason": reason, "pools": pools}
        return out

    def candidates(self, placed: Sequence[_Placed]) -> dict[str, dict[str, Any]]:
        """Explain for a deployment, placed or not (``gpufleet_explain``): per cluster, and per pool of an eligible
        one, whether it is a candidate and why, after this placement (``placed``: this deployment's replicas)::

            {cluster: {"reason": None or why the cluster takes nothing, "pools": {pool: why}}}

        A pool whose devices do not match says which and, for a selector that is false, the values it read on the
        first device of the class it was false for (``memory 81559Mi < 80Gi``); a matching pool says whether it has
        room for another replica, and who holds it (``held by qwen2-5-32b replica 1``)."""
        holders = self._holders(placed)
        out: dict[str, dict[str, Any]] = {}
        for cluster in sorted(self.clusters, key=lambda c: c.name):
            ineligible = self.eligibility(cluster)
            if ineligible is not None:
                out[cluster.name] = {"reason": f"not a candidate: {ineligible[1]}", "pools": {}}
                continue
            if not cluster.pools:
                out[cluster.name] = {"reason": "not a candidate: has no node pools", "pools": {}}
                continue
            table = self.options(cluster)
            version = _minor(cluster.kubernetes_version)
            pools: dict[str, str] = {}
            for pi, pool in enumerate(cluster.pools):
                parts: list[str] = []
                held = holders.get((cluster.name, pool.name), [])
                for ei, engine in enumerate(self.engines):
                    option = table[ei][pi]
                    label = f"engine {engine.name}: " if len(self.engines) > 1 else ""
                    if isinstance(option, str):
                        parts.append(f"{label}not a candidate: {self._with_reads(option, pool.class_name, version)}")
                        continue
                    led = self.ledger[(cluster.name, pool.name)]
                    if option.whole:
                        free = led.free()
                        room = free >= option.cost
                        state = f"{max(free, 0)} of {pool.nodes} node(s) free, {option.cost} needed"
                    else:
                        room = self.pack(led.copy(), pool.class_name, ei, option, version) is not None
                        names = [d.name for d in self.devices(pool.class_name)]
                        state = led.describe(names=names)
                    verdict = "candidate, room for another replica" if room else "candidate, but full"
                    parts.append(f"{label}{verdict} ({state})")
                if held:
                    parts.append(f"held by {_holder_text(held)}")
                pools[pool.name] = "; ".join(parts)
            out[cluster.name] = {"reason": None, "pools": pools}
        return out

    def _holders(self, placed: Sequence[_Placed]) -> dict[tuple[str, str], list[tuple[str, int | None]]]:
        """Per ``(cluster, pool)``, the replicas that hold devices or nodes there: ``(deployment, index)``, other
        deployments' first, then this one's ``placed`` replicas."""
        out: dict[tuple[str, str], list[tuple[str, int | None]]] = {}
        for r in self.replicas:
            index: int | None
            if isinstance(r, dict):
                given = r.get("index")
                name, index = str(r["deployment"]), given if isinstance(given, int) else None
            elif r.deployment == self.dep.name:
                continue
            else:
                name, index = r.deployment, r.index
            for cluster, pool, nodes, pods in _ledger_members(r):
                if nodes or pods:
                    entry = out.setdefault((cluster, pool), [])
                    if (name, index) not in entry:
                        entry.append((name, index))
        for p in sorted(placed, key=lambda p: (p.cluster, p.index)):
            for landing in p.engines:
                entry = out.setdefault((p.cluster, landing.pool), [])
                if (self.dep.name, p.index) not in entry:
                    entry.append((self.dep.name, p.index))
        return out

    def _with_reads(self, why: str, class_name: str, version: str | None) -> str:
        """``why`` with, after each selector it says is false, what that selector read on the first device of the
        class it is false for (``memory 81559Mi < 80Gi``)."""
        check = self.check(version)
        reads = []
        for expr in dict.fromkeys(_FALSE_SELECTOR.findall(why)):
            for dev in self.devices(class_name):
                if check(expr, dev) == (False, None):
                    text = selector_reads(expr, dev.slice)
                    if text:
                        reads.append(f"{text} on {dev.name}")
                    break
        return f"{why} (read: {'; '.join(reads)})" if reads else why

    # -- output ------------------------------------------------------------------------------------------------------

    def replica_dict(self, p: _Placed) -> dict[str, Any]:
        """The placed replica in the record's dict shape (``ReplicaRecord.to_dict``), built directly: every value
        comes from validated models, and the record itself is only built when a caller asks for it."""
        engines = []
        for engine, landing in zip(self.engines, p.engines, strict=True):
            pool = landing.pool
            names: list[NodeDevice] | None = None
            members = []
            for member, mm, ml in zip(engine.members, landing.option.members, landing.members, strict=True):
                out: dict[str, Any] = {"role": member.role, "pool": pool}
                if ml.pods:
                    if names is None:
                        names = self.devices(self._pool_class(p.cluster, pool))
                    out["nodes"] = len({node for node, _devices, _consumed in ml.pods})
                    out["allocations"] = [
                        {
                            "node": node,
                            "devices": [names[i].name for i in devices],
                            **(
                                {
                                    "capacity": {
                                        names[d].name: {k: str(v) for k, v in caps.items()}
                                        for d, caps in consumed.items()
                                    }
                                }
                                if consumed
                                else {}
                            ),
                        }
                        for node, devices, consumed in ml.pods
                    ]
                else:
                    out["nodes"] = member.pods * engine.copies if mm.claims else 0
                out["device_requests"] = [copy_request(r) for r in mm.device_requests]
                members.append(out)
                if mm.constraints:
                    members[-1]["constraints"] = [dict(c, requests=list(c["requests"])) for c in mm.constraints]
            engines.append({"name": engine.name, "copies": engine.copies, "members": members})
        return {
            "name": p.name,
            "deployment": self.dep.name,
            "namespace": self.dep.namespace,
            "cluster": p.cluster,
            "index": p.index,
            "engines": engines,
        }

    def overcommitted(self, ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Pools holding one of ``ours`` whose ledger uses more nodes than the pool has."""
        touched = {(mine["cluster"], m["pool"]) for mine in ours for e in mine["engines"] for m in e["members"]}
        out = []
        for cluster in sorted(self.clusters, key=lambda c: c.name):
            for pool in cluster.pools:
                key = (cluster.name, pool.name)
                led = self.ledger.get(key)
                if key in touched and led is not None and led.used > pool.nodes:
                    out.append({"cluster": cluster.name, "pool": pool.name, "nodes": pool.nodes, "used": led.used})
        return out


# --------------------------------------------------------------------------------------------------------------------
# Explain: what a selector read
# --------------------------------------------------------------------------------------------------------------------

_FALSE_SELECTOR = re.compile(r"selector `((?:[^`])+)` is false for device")
_COMPARISONS = {"_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">=", "_==_": "==", "_!=_": "!="}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _holder_text(held: Sequence[tuple[str, int | None]], shown: int = 4) -> str:
    """``qwen2-5-32b replica 1, llama replicas 0, 2``: who holds a pool, per deployment, in order."""
    by: dict[str, list[int | None]] = {}
    for name, index in held:
        by.setdefault(name, []).append(index)
    parts = []
    for name, indexes in by.items():
        known = [str(i) for i in indexes if i is not None]
        if not known:
            parts.append(f"{name} ({len(indexes)} replica(s))")
            continue
        listed = ", ".join(known[:shown]) + (f" and {len(known) - shown} more" if len(known) > shown else "")
        parts.append(f"{name} replica{'s' if len(known) > 1 else ''} {listed}")
    return ", ".join(parts)


def _reference(node: Any) -> tuple[str, str, str] | None:
    """``(table, domain, name)`` of a literal ``device.attributes["d"].name`` / ``device.capacity["d"]["name"]``."""
    if isinstance(node, dra_cel.Select) and not node.test_only:
        inner, name = node.operand, node.field
    elif isinstance(node, dra_cel.Index) and isinstance(node.index, dra_cel.Const) and node.index.kind == "string":
        inner, name = node.operand, node.index.value
    else:
        return None
    if not (isinstance(inner, dra_cel.Index) and isinstance(inner.index, dra_cel.Const)):
        return None
    table = inner.operand
    if (
        isinstance(table, dra_cel.Select)
        and table.field in ("attributes", "capacity")
        and isinstance(table.operand, dra_cel.Ident)
        and table.operand.name == "device"
        and isinstance(inner.index.value, str)
    ):
        return str(table.field), inner.index.value, str(name)
    return None


def _device_value(device: Mapping[str, Any], ref: tuple[str, str, str]) -> Any:
    """What a device publishes for a reference: a Quantity (capacity), an attribute's value, or None."""
    table, domain, name = ref
    entries = device.get(table) or {}
    entry = entries.get(f"{domain}/{name}")
    if entry is None and device.get("driver") == domain:
        entry = entries.get(name)
    if not isinstance(entry, Mapping):
        return None
    if table == "capacity":
        return parse_quantity(str(entry.get("value")))
    for kind in ("int", "bool", "string", "version"):
        if kind in entry:
            return semver.parse_semver(str(entry[kind])) if kind == "version" else entry[kind]
    return None


def _literal(node: Any) -> Any:
    """The value of a literal operand: a constant, ``quantity("80Gi")``, ``semver("1.2.3")``; else a sentinel."""
    if isinstance(node, dra_cel.Const):
        return node.value
    if (
        isinstance(node, dra_cel.Call)
        and node.target is None
        and node.fn in ("quantity", "semver")
        and len(node.args) == 1
        and isinstance(node.args[0], dra_cel.Const)
        and isinstance(node.args[0].value, str)
    ):
        text = node.args[0].value
        return parse_quantity(text) if node.fn == "quantity" else semver.parse_semver(text)
    return _MISS


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def _holds(left: Any, op: str, right: Any) -> bool | None:
    """``left op right`` for values of one kind, None when they do not compare."""
    if type(left) is not type(right) and not (
        isinstance(left, (int, float)) and isinstance(right, (int, float)) and not isinstance(left, bool)
    ):
        return None
    try:
        if op in ("==", "!="):
            return (left == right) == (op == "==")
        lt, gt = left < right, right < left
    except TypeError:
        return None
    return {"<": lt, "<=": not gt, ">": gt, ">=": not lt}[op]


def selector_reads(expression: str, device: Mapping[str, Any]) -> str:
    """What ``expression`` read on ``device`` (a ResourceSlice device: ``{driver, attributes, capacity}``), for explain:
    each comparison of a device attribute or capacity with a literal that is false, as the device's value and the
    failed bound (``memory 81559Mi < 80Gi``, ``productName "NVIDIA L4" != "NVIDIA H100"``); when none can be shown
    so, every attribute and capacity it names with the device's value (``architecture = "Ada"``; a name the device
    does not publish: ``memory: not published``). Empty when it names none."""
    try:
        tree = dra_cel.parse(expression)
    except (dra_cel.CelSyntaxError, ValueError):
        return ""
    failed: list[str] = []
    refs: dict[tuple[str, str, str], None] = {}
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, dra_cel.Node):
            continue
        ref = _reference(node)
        if ref is not None:
            refs[ref] = None
            continue
        if isinstance(node, dra_cel.Call) and node.fn in _COMPARISONS and len(node.args) == 2:
            op = _COMPARISONS[node.fn]
            left: dra_cel.Node = node.args[0]
            right: dra_cel.Node = node.args[1]
            call = left if isinstance(left, dra_cel.Call) else None
            if (
                call is not None
                and call.fn == "compareTo"
                and call.target is not None
                and len(call.args) == 1
                and isinstance(right, dra_cel.Const)
                and right.value == 0
            ):
                left, right = call.target, call.args[0]  # x.compareTo(q) >= 0  is  x >= q
            if _reference(left) is None and _reference(right) is not None:
                left, right, op = right, left, _FLIPPED[op]
            ref, bound = _reference(left), _literal(right)
            if ref is not None and bound is not _MISS:
                refs[ref] = None
                value = _device_value(device, ref)
                if value is None:
                    failed.append(f"{ref[2]}: not published")
                elif _holds(value, op, bound) is False:
                    failed.append(f"{ref[2]} {_shown(value)} {_NEGATED[op]} {_shown(bound)}")
                continue
        for slot in getattr(type(node), "__slots__", ()):
            value = getattr(node, slot, None)
            if isinstance(value, (list, tuple)):
                for item in value:
                    stack.extend(item if isinstance(item, tuple) else (item,))
            else:
                stack.append(value)
    if failed:
        return ", ".join(dict.fromkeys(reversed(failed)))
    shown = []
    for ref in refs:
        value = _device_value(device, ref)
        shown.append(f"{ref[2]}: not published" if value is None else f"{ref[2]} = {_shown(value)}")
    return ", ".join(shown)


# --------------------------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------------------------


def _condition(status: bool, reason: str, message: str) -> dict[str, str]:
    return {"type": CONDITION_TYPE, "status": "True" if status else "False", "reason": reason, "message": message}


@dataclass
class PlacementResult:
    """What :func:`plan` decides for one deployment (``to_dict()`` is the module's return shape).

    The replicas are kept in their dict shape (what the module returns); :attr:`replicas` gives them as
    :class:`ReplicaRecord` models, built on first use.
    """

    replica_dicts: list[dict[str, Any]]
    desired: int
    scheduled: int
    condition: dict[str, str]
    unschedulable: dict[str, Any] = field(default_factory=dict)
    changed: bool = False
    dropped: list[dict[str, Any]] = field(default_factory=list)
    overcommitted: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Per cluster and pool, why each is or is not a candidate (:meth:`_Planner.candidates`); only when asked for.
    candidates: dict[str, dict[str, Any]] | None = None
    _records: list[ReplicaRecord] | None = None

    @property
    def replicas(self) -> list[ReplicaRecord]:
        if self._records is None:
            self._records = [ReplicaRecord.trusted(d) for d in self.replica_dicts]
        return self._records

    def to_dict(self) -> dict[str, Any]:
        return {
            "replicas": self.replica_dicts,
            "desired": self.desired,
            "scheduled": self.scheduled,
            "condition": self.condition,
            "unschedulable": self.unschedulable,
            "changed": self.changed,
            "dropped": self.dropped,
            "overcommitted": self.overcommitted,
            "warnings": self.warnings,
            **({"candidates": self.candidates} if self.candidates is not None else {}),
        }


def place(
    *,
    deployment: Any,
    clusters: Any,
    classes: Any,
    replicas: Any = None,
    selectors: SelectorEngine | None = None,
    force_drain: bool = False,
) -> dict[str, Any]:
    """Place one deployment's replicas on the candidate clusters (design.md §4). Pure and deterministic.

    The dict boundary of :func:`plan`: validates every argument into models, plans, returns
    ``{replicas, desired, scheduled, condition, unschedulable, changed, dropped, overcommitted, warnings}``.
    Raises :class:`FleetValidationError` for malformed input (``path: reason`` lines).
    """
    require_pydantic()
    dep: ModelDeployment = parse(ModelDeployment, deployment, "deployment")
    parsed_classes = validate_classes(classes)
    parsed_clusters = _validated_clusters(clusters, parsed_classes)
    records = validate_records(replicas, dep.name)
    return plan(dep, parsed_classes, parsed_clusters, records, selectors=selectors, force_drain=force_drain).to_dict()


def plan(
    dep: ModelDeployment,
    classes: Mapping[str, InferenceClass],
    clusters: list[PlacementCluster],
    records: Sequence[ReplicaRecord | LedgerRecord],
    *,
    selectors: SelectorEngine | None = None,
    force_drain: bool = False,
    explain_pools: bool = False,
) -> PlacementResult:
    """Place ``dep``'s replicas over validated models. ``records`` are every replica in the fleet (any deployment);
    every pool's class must be in ``classes`` (:func:`validate_clusters` checks it).

    A drain is safe unless ``force_drain``: a replica on a cluster carrying the fleet's drain taint moves only when
    its replacement can be placed elsewhere; the others stay where they are, with a warning.

    ``explain_pools`` (``gpufleet_explain``) adds ``candidates``: per cluster and pool, why each is or is not a
    candidate after this placement (:meth:`_Planner.candidates`)."""
    sel = selectors if selectors is not None else SELECTORS

    positioned = [
        (i, r) for i, r in enumerate(records) if not isinstance(r, dict) and r.deployment == dep.name
    ]  # LedgerRecords (dicts) are other deployments' replicas
    positioned.sort(key=lambda item: (item[1].cluster, item[1].index, item[1].name or "", item[0]))
    ours = [r for _pos, r in positioned]
    desired = dep.replicas

    invalid = []
    for path, expression in dep.selector_paths():
        try:
            sel.compile(expression)
        except ValueError as exc:
            invalid.append(f"deployment.{path}: `{expression}` does not compile: {exc}")
    if invalid:
        return PlacementResult(
            replica_dicts=[r.to_dict() for r in ours],
            desired=desired,
            scheduled=len(ours),
            condition=_condition(
                False,
                REASON_INVALID_NODE_SELECTOR,
                "invalid CEL selector(s), nothing placed, moved or dropped: " + "; ".join(invalid),
            ),
        )

    planner = _Planner(dep, dict(classes), clusters, records, sel)
    kept = planner.scale_down(planner.retain(ours), desired)
    planner.build_ledger(kept)
    new = planner.fill(kept, desired)
    if not force_drain and planner.drained:
        kept += planner.keep_unreplaced(len(kept) + len(new), desired)

    taken: set[str] = set()
    for p in sorted(kept, key=lambda p: (p.cluster, p.index)):
        old = p.observed.name if p.observed is not None else None
        keep = old is not None and old not in taken and _is_derived_name(old, dep.name, p.cluster, p.index)
        p.name = old if keep and old else _unique_name(dep.name, p.cluster, p.index, taken)
        taken.add(p.name)
    for p in sorted(new, key=lambda p: (p.cluster, p.index)):
        p.name = _unique_name(dep.name, p.cluster, p.index, taken)
        taken.add(p.name)

    result = [planner.replica_dict(p) for p in sorted(kept + new, key=lambda p: (p.cluster, p.index))]
    now = {(r["cluster"], r["index"]): r for r in result}
    before = [r.to_dict(like=now.get((r.cluster, r.index))) for r in ours]
    unschedulable = planner.explain()
    overcommitted = planner.overcommitted(result)
    scheduled = len(result)

    if not clusters and desired > 0:
        condition = _condition(
            False, REASON_NO_CLUSTERS, f"0 of {desired} replica(s) scheduled: the deployment has no candidate clusters"
        )
    elif scheduled >= desired and overcommitted:
        condition = _condition(
            False,
            REASON_OVERCOMMITTED,
            f"{scheduled} of {desired} replica(s) scheduled, but "
            + "; ".join(
                f"pool {o['pool']} of cluster {o['cluster']} holds {o['used']} node(s) of replicas and has {o['nodes']}"
                for o in overcommitted
            )
            + ": some of them cannot run (add nodes, or lower replicas so they move)",
        )
    elif scheduled >= desired:
        spread = len({r["cluster"] for r in result})
        condition = _condition(
            True, REASON_CREATED, f"{scheduled} of {desired} replica(s) scheduled on {spread} cluster(s)"
        )
    else:
        summary = "; ".join(f"{name}: {info['reason']}" for name, info in list(unschedulable.items())[:3])
        more = len(unschedulable) - 3
        if more > 0:
            summary += f"; and {more} more"
        condition = _condition(
            False,
            REASON_INSUFFICIENT_CAPACITY,
            f"{scheduled} of {desired} replica(s) scheduled; no candidate cluster can take another"
            + (f" ({summary})" if summary else ""),
        )

    warnings = planner.warnings + [
        f"pool {o['pool']} of cluster {o['cluster']} is overcommitted: {o['used']} node(s) in use of {o['nodes']}"
        for o in overcommitted
    ]
    return PlacementResult(
        replica_dicts=result,
        desired=desired,
        scheduled=scheduled,
        condition=condition,
        unschedulable=unschedulable,
        changed=result != before,
        dropped=sorted(planner.dropped, key=lambda d: (d["cluster"], d["index"])),
        overcommitted=overcommitted,
        warnings=warnings,
        candidates=planner.candidates(kept + new) if explain_pools else None,
    )
