# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What every part of placement shares: the condition reasons and codes, the selector engine (compiled once per
process, evaluated once per device shape), replica names, and the validation of classes, clusters and records.

Part of placement; ``placement.py`` is the façade other code imports (``plan()``, ``place()``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils import dra_cel
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import replica_name
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    InferenceClass,
    PlacementCluster,
    ValidationError,
    format_loc,
    list_adapter,
    parse,
    translate_errors,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import (
    LedgerRecord,
    ReplicaRecord,
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
