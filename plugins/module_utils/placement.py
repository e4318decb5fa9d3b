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

The code lives in ``scheduling/``: ``common.py`` (reasons and codes, the selector engine, replica names, validation
of classes, clusters and records), ``matching.py`` (engines and members against a class's devices, the options on a
cluster's pools, the pool ledgers: ``_Matcher``), ``planner.py`` (retain, drain, scale down, charge the ledgers, pack
and fill: ``_Placer``) and ``explain.py`` (why not: ``explain()``, ``candidates()``, ``selector_reads()``; the
``_Planner`` :func:`plan` runs). This module keeps the entry points (:func:`plan`, :func:`place`,
:class:`PlacementResult`) and re-exports the names other code uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import replica_name
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    InferenceClass,
    ModelDeployment,
    PlacementCluster,
    parse,
    require_pydantic,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import (
    LedgerRecord,
    ReplicaRecord,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.scheduling.common import (
    _CLUSTERS_SEEN,
    _MEMO_LIMIT,
    CODE_INSUFFICIENT_CAPACITY,
    CODE_NO_MATCHING_POOL,
    CODE_NO_POOLS,
    CODE_NOT_READY,
    CODE_TAINTED,
    CONDITION_TYPE,
    NAME_HASH_DIGITS,
    REASON_CREATED,
    REASON_INSUFFICIENT_CAPACITY,
    REASON_INVALID_NODE_SELECTOR,
    REASON_NO_CLUSTERS,
    REASON_OVERCOMMITTED,
    SELECTORS,
    SelectorEngine,
    _is_derived_name,
    _replica_index,
    _unique_name,
    _validated_clusters,
    validate_classes,
    validate_clusters,
    validate_records,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.scheduling.explain import (
    _COMPARISONS,
    _FALSE_SELECTOR,
    _FLIPPED,
    _NEGATED,
    _device_value,
    _holder_text,
    _holds,
    _literal,
    _Planner,
    _reference,
    _shown,
    selector_reads,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.scheduling.matching import (
    _MISS,
    Fitted,
    Pod,
    RecordedPod,
    _canonical,
    _Engine,
    _engines_of,
    _extras,
    _is_drain_taint,
    _Landing,
    _ledger_members,
    _Ledgers,
    _match_member,
    _Member,
    _MemberLanding,
    _MemberMatch,
    _minor,
    _Option,
    _Placed,
    _resolve,
    _resolved_class,
    _sub_dict,
    _taint_text,
    _untolerated,
)

__all__ = [
    "CODE_INSUFFICIENT_CAPACITY",
    "CODE_NOT_READY",
    "CODE_NO_MATCHING_POOL",
    "CODE_NO_POOLS",
    "CODE_TAINTED",
    "CONDITION_TYPE",
    "NAME_HASH_DIGITS",
    "REASON_CREATED",
    "REASON_INSUFFICIENT_CAPACITY",
    "REASON_INVALID_NODE_SELECTOR",
    "REASON_NO_CLUSTERS",
    "REASON_OVERCOMMITTED",
    "SELECTORS",
    "_CLUSTERS_SEEN",
    "_COMPARISONS",
    "_FALSE_SELECTOR",
    "_FLIPPED",
    "_MEMO_LIMIT",
    "_MISS",
    "_NEGATED",
    "Fitted",
    "PlacementResult",
    "Pod",
    "RecordedPod",
    "SelectorEngine",
    "_Engine",
    "_Landing",
    "_Ledgers",
    "_Member",
    "_MemberLanding",
    "_MemberMatch",
    "_Option",
    "_Placed",
    "_Planner",
    "_canonical",
    "_condition",
    "_device_value",
    "_engines_of",
    "_extras",
    "_holder_text",
    "_holds",
    "_is_derived_name",
    "_is_drain_taint",
    "_ledger_members",
    "_literal",
    "_match_member",
    "_minor",
    "_reference",
    "_replica_index",
    "_resolve",
    "_resolved_class",
    "_shown",
    "_sub_dict",
    "_taint_text",
    "_unique_name",
    "_untolerated",
    "_validated_clusters",
    "place",
    "plan",
    "replica_name",
    "selector_reads",
    "validate_classes",
    "validate_clusters",
    "validate_records",
]


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
    warm: Iterable[str] = (),
) -> PlacementResult:
    """Place ``dep``'s replicas over validated models. ``records`` are every replica in the fleet (any deployment);
    every pool's class must be in ``classes`` (:func:`validate_clusters` checks it).

    A drain is safe unless ``force_drain``: a replica on a cluster carrying the fleet's drain taint moves only when
    its replacement can be placed elsewhere; the others stay where they are, with a warning.

    ``explain_pools`` (``gpufleet_explain``) adds ``candidates``: per cluster and pool, why each is or is not a
    candidate after this placement (:meth:`_Planner.candidates`). ``warm``: clusters where every cache the deployment
    mounts is hydrated; fill prefers them among equally loaded clusters (warm_first.py)."""
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
    planner.warm = frozenset(warm)
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
