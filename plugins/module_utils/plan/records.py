# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The persisted placement: ``ReplicaRecord -> EngineRecord -> MemberRecord -> ResolvedRequest``.

One owner for the replica record. Placement (``placement.plan``) writes records, rendering
(``render.serving.render_replicas``) reads them, the per-replica Service carries one as its ``gpufleet.io/placement``
annotation (:meth:`ReplicaRecord.to_annotation`) and a later run reads it back (:meth:`ReplicaRecord.from_annotation`).
The dict form (``to_dict``) is the ``replicas`` shape of ``replica_placement`` / ``fleet_placement`` (design.md §4).

Validation is the same everywhere: integers are integers (``"3"`` is not an index), names are what Kubernetes
accepts. Checks that need the deployment (engine and member names, request names) are
:meth:`ReplicaRecord.check_against`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    DNS_SUBDOMAIN_RE,
    LABEL_VALUE_RE,
    is_dns_label,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.api import CapacityRequirements, DeviceToleration
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    BaseModel,
    ConfigDict,
    Field,
    Member,
    ModelDeployment,
    ValidationError,
    model_validator,
    require_pydantic,
    translate_errors,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    list_adapter as _list_adapter,
)

try:
    from typing import NotRequired  # pydantic needs it before Python 3.12

    from typing_extensions import TypedDict
except ImportError:  # pragma: no cover - exercised by ansible-test's import sanity test
    from typing import NotRequired, TypedDict

try:
    from pydantic import BeforeValidator
except ImportError:  # pragma: no cover - exercised by ansible-test's import sanity test

    def BeforeValidator(func: Any) -> Any:  # type: ignore[no-redef]
        return func


def _selectors(value: Any) -> Any:
    """Selectors as CEL strings; the deployment's ``[{cel: ...}]`` spelling is accepted too."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("must be a list of CEL expressions")
    out = []
    for item in value:
        if isinstance(item, Mapping):
            item = item.get("cel")
        if not isinstance(item, str) or not item:
            raise ValueError(f"must be a list of CEL expressions (got {item!r})")
        out.append(item)
    return out


# Native (pydantic-core) constraints wherever possible: records are validated in bulk on every placement and render.
# _reason_for() gives their errors the collection's wording.
NonNegInt = Annotated[int, Field(strict=True, ge=0)]
PosInt = Annotated[int, Field(strict=True, ge=1)]
PoolName = Annotated[str, Field(strict=True, min_length=1, max_length=63, pattern=LABEL_VALUE_RE.pattern)]
DeviceClassName = Annotated[str, Field(strict=True, max_length=253, pattern=r"^$|" + DNS_SUBDOMAIN_RE.pattern)]
Selectors = Annotated[list[str], BeforeValidator(_selectors)]

_BOUNDS = {"index": 0, "nodes": 0, "node": 0, "copies": 1, "count": 1}
_INT_ERRORS = frozenset({"int_type", "int_parsing", "int_from_float", "greater_than_equal"})
_STR_ERRORS = frozenset({"string_type", "string_too_short", "string_too_long", "string_pattern_mismatch"})


def _reason_for(err: Mapping[str, Any]) -> str | None:
    """The collection's wording for the native constraints above (``None``: the generic wording applies)."""
    loc = err.get("loc") or ()
    field = loc[-1] if loc else None
    kind = err.get("type")
    if field in _BOUNDS and kind in _INT_ERRORS:
        return f"must be an integer >= {_BOUNDS[field]} (got {err.get('input')!r})"
    if field == "pool" and kind in _STR_ERRORS:
        return f"must be the node pool's name (got {err.get('input')!r})"
    if field == "device_class_name" and kind in _STR_ERRORS:
        return f"must be a DeviceClass name (got {err.get('input')!r})"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        what = "a replica mapping" if len(loc) <= 1 else "a mapping"
        return f"must be {what} (got {type(err.get('input')).__name__})"
    return None


class _Record(BaseModel):
    # Read-backs and older records may carry keys we do not read (``claim``, ``zones``): tolerated and dropped.
    model_config = ConfigDict(extra="ignore", frozen=True)


class ResolvedSubRequest(_Record):
    """One ``first_available`` alternative as rendered: its device class resolved on the replica's pool."""

    name: str
    device_class_name: DeviceClassName | None = None
    allocation_mode: Literal["ExactCount", "All"] = "ExactCount"
    count: PosInt | None = None
    selectors: Selectors = Field(default_factory=list)
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    capacity: CapacityRequirements | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "device_class_name": self.device_class_name}
        if self.allocation_mode == "All":
            out["allocation_mode"] = "All"
        else:
            out["count"] = self.count or 1
        out["selectors"] = list(self.selectors)
        out.update(_extras(self))
        return out


def _extras(r: ResolvedSubRequest | ResolvedRequest) -> dict[str, Any]:
    """Fields a resolved request carries only when set (design.md §12), so earlier shapes are unchanged."""
    out: dict[str, Any] = {}
    if r.tolerations:
        out["tolerations"] = [t if isinstance(t, dict) else t.to_k8s() for t in r.tolerations]
    if r.capacity is not None:
        cap = r.capacity
        out["capacity"] = {"requests": dict(cap["requests"] if isinstance(cap, dict) else cap.requests)}
    return out


class ResolvedRequest(_Record):
    """A device request as placement resolved it: what the member's ResourceClaimTemplate requests.

    ``count`` is the devices the request takes on a node of the pool (for ``All``: how many it found; for
    ``first_available``: what the ``chosen`` alternative takes)."""

    name: str
    device_class_name: DeviceClassName | None = None
    count: PosInt = 1
    selectors: Selectors = Field(default_factory=list)
    allocation_mode: Literal["ExactCount", "All"] = "ExactCount"
    first_available: list[ResolvedSubRequest] | None = None
    chosen: str | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    capacity: CapacityRequirements | None = None

    @property
    def claimed(self) -> bool:
        """A request without a device class matched only synthetic devices: never claimed."""
        return bool(self.device_class_name)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "device_class_name": self.device_class_name,
            "count": self.count,
            "selectors": list(self.selectors),
        }
        if self.allocation_mode == "All":
            out["allocation_mode"] = "All"
        out.update(_extras(self))
        if self.first_available is not None:
            out["first_available"] = [a.to_dict() for a in self.first_available]
            out["chosen"] = self.chosen
        return out


# Defaults given explicitly: model_construct() computing a default_factory inspects its signature (slow, per call).
def _unset() -> dict[str, Any]:
    return {"tolerations": [], "capacity": None}


def _trusted_request(r: Mapping[str, Any]) -> ResolvedRequest:
    alts = r.get("first_available")
    if alts is None:
        return ResolvedRequest.model_construct(**{**_unset(), **r})
    return ResolvedRequest.model_construct(
        **{
            **_unset(),
            **r,
            "first_available": [ResolvedSubRequest.model_construct(**{**_unset(), **a}) for a in alts],
        }
    )


def copy_request(r: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved request in the dict shape, its lists copied (a caller may change the copy)."""
    out = _copy_lists(r)
    if r.get("first_available") is not None:
        out["first_available"] = [_copy_lists(a) for a in r["first_available"]]
    return out


def _copy_lists(r: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(r, selectors=list(r["selectors"]))
    if "tolerations" in r:
        out["tolerations"] = [dict(t) for t in r["tolerations"]]
    if "capacity" in r:
        out["capacity"] = {"requests": dict(r["capacity"]["requests"])}
    return out


def _claim_fields(requests: list[dict[str, Any]], constraints: list[dict[str, Any]]) -> dict[str, Any]:
    """A member's ``device_requests``, and its ``constraints`` when it has any (absent otherwise: the shape of
    records without constraints is unchanged)."""
    out: dict[str, Any] = {"device_requests": requests}
    if constraints:
        out["constraints"] = constraints
    return out


class ConstraintRecord(_Record):
    """A ``match_attribute`` (or ``distinct_attribute``, design.md §12) constraint of the member's claim (``requests``
    empty: every request)."""

    requests: list[str] = Field(default_factory=list)
    match_attribute: str | None = Field(default=None, min_length=1)
    distinct_attribute: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_kind(self) -> ConstraintRecord:
        if (self.match_attribute is None) == (self.distinct_attribute is None):
            raise ValueError("must set exactly one of match_attribute, distinct_attribute")
        return self

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requests": list(self.requests)}
        if self.match_attribute is not None:
            out["match_attribute"] = self.match_attribute
        if self.distinct_attribute is not None:
            out["distinct_attribute"] = self.distinct_attribute
        return out


DeviceName = Annotated[str, Field(strict=True, min_length=1, max_length=128)]


def _quantity(value: Any) -> Any:
    from ansible_collections.gpufleet.serving.plugins.module_utils.dra.api import quantity

    return quantity(value)


# A Kubernetes quantity as a record holds it (``20Gi``): checked, so the ledger never meets one it cannot read.
QuantityText = Annotated[str, BeforeValidator(_quantity)]


class PodAllocation(_Record):
    """The devices one pod of a member holds on one node of its pool (design.md §12): ``node`` is placement's index of
    the node in the pool (its bookkeeping, not a Kubernetes Node), ``devices`` the names of the node's devices its claim
    is allocated (``gpu-3``, as the class publishes them), ``capacity`` what it consumes of those that several claims
    may share."""

    node: NonNegInt
    devices: list[DeviceName] = Field(min_length=1)
    #: Capacity the pod consumes on the devices among ``devices`` that allow multiple allocations (design.md §12).
    capacity: dict[DeviceName, dict[str, QuantityText]] = Field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "devices": list(self.devices)}
        if self.capacity:
            out["capacity"] = {d: dict(c) for d, c in self.capacity.items()}
        return out


class MemberRecord(_Record):
    """One member of a placed engine. ``nodes`` is how many nodes of ``pool`` its pods run on. Without
    ``allocations`` it holds them whole (every device of each: a member that takes every device of its node, one of a
    deployment with ``placement.exclusive_nodes``, and every record written before device-level placement); with
    them, one entry per pod that claims devices says which devices of which node the pod holds, and the nodes are
    shared with other pods."""

    role: str = Field(min_length=1)
    pool: PoolName
    nodes: NonNegInt
    #: ``None``: the record does not say (a compact read-back from the placement annotation).
    device_requests: list[ResolvedRequest] | None = None
    constraints: list[ConstraintRecord] = Field(default_factory=list)
    allocations: list[PodAllocation] = Field(default_factory=list)

    @property
    def claimed_requests(self) -> list[ResolvedRequest]:
        return [r for r in self.device_requests or [] if r.claimed]


class EngineRecord(_Record):
    name: str = Field(min_length=1)
    copies: PosInt = 1
    members: list[MemberRecord]

    def member(self, role: str) -> MemberRecord:
        for m in self.members:
            if m.role == role:
                return m
        raise GpufleetError(f"engine {self.name!r} has no {role} member")  # pragma: no cover - checked first


class ReplicaRecord(_Record):
    """One replica of one deployment on one cluster; identity is ``(deployment, cluster, index)``."""

    name: str | None = None
    deployment: str = Field(min_length=1)
    namespace: str | None = None
    cluster: str = Field(min_length=1)
    index: NonNegInt
    engines: list[EngineRecord]

    # -- conversions -------------------------------------------------------------------------------------------------

    @classmethod
    def parse(cls, data: Any, prefix: str) -> ReplicaRecord:
        """Validate one record; raise :class:`FleetValidationError` naming ``prefix`` and the field path."""
        require_pydantic()
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise FleetValidationError(translate_errors(prefix, exc, reason=_reason_for)) from None

    @classmethod
    def parse_list(cls, data: Any, prefix: str = "replicas") -> list[ReplicaRecord]:
        if data is None:
            return []
        if not isinstance(data, list):
            raise FleetValidationError([(prefix, f"must be a list (got {type(data).__name__})")])
        try:  # the whole list in one validation call; item by item only to name what is wrong
            return list(_list_adapter(cls).validate_python(data))
        except ValidationError:
            pass
        errors: list[tuple[str, str]] = []
        out = []
        for i, item in enumerate(data):
            try:
                out.append(cls.parse(item, f"{prefix}[{i}]"))
            except FleetValidationError as exc:
                errors.extend(exc.errors)
        if errors:
            raise FleetValidationError(errors)
        return out

    @classmethod
    def trusted(cls, data: Mapping[str, Any]) -> ReplicaRecord:
        """A record from data this collection built from validated models (``to_dict`` shape): no re-validation."""
        engines = [
            EngineRecord.model_construct(
                name=e["name"],
                copies=e["copies"],
                members=[
                    MemberRecord.model_construct(
                        role=m["role"],
                        pool=m["pool"],
                        nodes=m["nodes"],
                        device_requests=None
                        if m.get("device_requests") is None
                        else [_trusted_request(r) for r in m["device_requests"]],
                        constraints=[ConstraintRecord.model_construct(**c) for c in m.get("constraints") or []],
                        allocations=[
                            PodAllocation.model_construct(**{"capacity": {}, **a}) for a in m.get("allocations") or []
                        ],
                    )
                    for m in e["members"]
                ],
            )
            for e in data["engines"]
        ]
        return cls.model_construct(
            name=data.get("name"),
            deployment=data["deployment"],
            namespace=data.get("namespace"),
            cluster=data["cluster"],
            index=data["index"],
            engines=engines,
        )

    def to_dict(self, like: ReplicaRecord | Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The ``replicas`` shape. Where a member's ``device_requests`` are unknown, take them from ``like`` (the same
        replica as placed now, a record or its dict shape) if its shape lines up, else ``[]``: a read-back without
        them is no change."""

        def requests(ei: int, mi: int, m: MemberRecord) -> dict[str, Any]:
            if m.device_requests is not None:
                return _claim_fields([r.to_dict() for r in m.device_requests], [c.to_dict() for c in m.constraints])
            if isinstance(like, ReplicaRecord):
                try:
                    theirs = like.engines[ei].members[mi]
                except IndexError:
                    return {"device_requests": []}
                return _claim_fields(
                    [r.to_dict() for r in theirs.device_requests or []], [c.to_dict() for c in theirs.constraints]
                )
            if like is not None:
                try:
                    theirs = like["engines"][ei]["members"][mi]
                    return _claim_fields(
                        [copy_request(r) for r in theirs["device_requests"]],
                        [dict(c, requests=list(c["requests"])) for c in theirs.get("constraints") or []],
                    )
                except (IndexError, KeyError, TypeError):
                    return {"device_requests": []}
            return {"device_requests": []}

        return self._shape(requests)

    def to_compact(self) -> dict[str, Any]:
        """The record without device requests (what the annotation holds); reads back with ``device_requests`` unknown.
        Allocations are kept: the ledger rebuilds a pool's allocated state from them."""
        return self._shape(lambda ei, mi, m: {})

    def _shape(self, member_extra: Callable[[int, int, MemberRecord], dict[str, Any]]) -> dict[str, Any]:
        """The record as plain data; ``member_extra(engine index, member index, member)`` adds fields per member."""
        return {
            "name": self.name,
            "deployment": self.deployment,
            "namespace": self.namespace,
            "cluster": self.cluster,
            "index": self.index,
            "engines": [
                {
                    "name": e.name,
                    "copies": e.copies,
                    "members": [
                        {
                            "role": m.role,
                            "pool": m.pool,
                            "nodes": m.nodes,
                            **({"allocations": [a.to_dict() for a in m.allocations]} if m.allocations else {}),
                            **member_extra(ei, mi, m),
                        }
                        for mi, m in enumerate(e.members)
                    ],
                }
                for ei, e in enumerate(self.engines)
            ],
        }

    def to_annotation(self) -> str:
        """The record as the ``gpufleet.io/placement`` annotation: JSON, sorted keys, no device requests."""
        return json.dumps(self.to_compact(), sort_keys=True)

    @classmethod
    def from_annotation(cls, text: str, where: str = "object") -> ReplicaRecord:
        """Read a record back from its annotation; a record that cannot be read is a :class:`GpufleetError`."""
        from ansible_collections.gpufleet.serving.plugins.module_utils.contract import ANNOTATION_PLACEMENT

        try:
            data = json.loads(text)
            return cls.parse(data, "record")
        except (ValueError, FleetValidationError) as exc:
            raise GpufleetError(f"{where} carries an unreadable {ANNOTATION_PLACEMENT} annotation: {exc}") from None

    # -- the deployment's view ---------------------------------------------------------------------------------------

    def ordered_like(self, dep: ModelDeployment) -> ReplicaRecord:
        """The record with engines and members in the deployment's order (call after :meth:`check_against`)."""
        by_name = {e.name: e for e in self.engines}
        engines = []
        for engine in dep.engines:
            placed = by_name[engine.name]
            members = [placed.member(m.role) for m in engine.members]
            engines.append(placed.model_copy(update={"members": members}))
        return self.model_copy(update={"engines": engines})

    def check_against(self, dep: ModelDeployment, at: str) -> list[tuple[str, str]]:
        """``(path, reason)`` for every way this record does not fit ``dep`` (names, engines, members, requests)."""
        errors: list[tuple[str, str]] = []
        if not is_dns_label(self.name):
            errors.append(
                (f"{at}.name", f"must be the replica's name, a DNS label of at most 63 characters (got {self.name!r})")
            )
        if self.deployment != dep.name:
            errors.append((f"{at}.deployment", f"{self.deployment!r} does not match the deployment {dep.name!r}"))
        if self.namespace is not None and self.namespace != dep.namespace:
            errors.append((f"{at}.namespace", f"{self.namespace!r} does not match the deployment's {dep.namespace!r}"))
        engines = {e.name: e for e in dep.engines}
        placed: set[str] = set()
        for ei, rengine in enumerate(self.engines):
            eat = f"{at}.engines[{ei}]"
            engine = engines.get(rengine.name)
            if engine is None:
                errors.append(
                    (
                        f"{eat}.name",
                        f"{rengine.name!r} is not an engine of deployment {dep.name!r} ({', '.join(engines)})",
                    )
                )
                continue
            if rengine.name in placed:
                errors.append((f"{eat}.name", f"engine {rengine.name!r} is listed twice"))
                continue
            placed.add(rengine.name)
            wanted: dict[str, Member] = {m.role: m for m in engine.members}
            seen: set[str] = set()
            for mi, rmember in enumerate(rengine.members):
                mat = f"{eat}.members[{mi}]"
                member = wanted.get(rmember.role)
                if member is None or rmember.role in seen:
                    errors.append(
                        (
                            f"{mat}.role",
                            f"{rmember.role!r} does not match engine {engine.name!r} (members: {', '.join(wanted)})",
                        )
                    )
                    continue
                seen.add(rmember.role)
                known = {r.name for r in member.node_selector.devices}
                for qi, rq in enumerate(rmember.device_requests or []):
                    if rq.name not in known:
                        errors.append(
                            (
                                f"{mat}.device_requests[{qi}].name",
                                f"{rq.name!r} is not a device request of the {member.role} member "
                                f"({', '.join(sorted(known)) or 'none'})",
                            )
                        )
            if seen != set(wanted) and len(seen) == len(rengine.members):
                errors.append(
                    (f"{eat}.members", f"must place every member of engine {engine.name!r} ({', '.join(wanted)})")
                )
        missing = [e for e in engines if e not in placed and e not in {r.name for r in self.engines}]
        if missing:
            errors.append((f"{at}.engines", f"has no placement for engine(s) {', '.join(missing)} of {dep.name!r}"))
        return errors


def check_records(records: list[ReplicaRecord], dep: ModelDeployment, prefix: str = "replicas") -> None:
    """Every record fits ``dep`` and identities are unique; raise :class:`FleetValidationError` otherwise."""
    errors: list[tuple[str, str]] = []
    seen_names: dict[str, str] = {}
    seen_ids: dict[tuple[str, int], str] = {}
    for ri, record in enumerate(records):
        at = f"{prefix}[{ri}]"
        problems = record.check_against(dep, at)
        if problems:
            errors.extend(problems)
            continue
        name = record.name or ""
        if name in seen_names:
            errors.append((f"{at}.name", f"duplicate replica name {name!r} (also {seen_names[name]})"))
            continue
        ident = (record.cluster, record.index)
        if ident in seen_ids:
            errors.append(
                (
                    at,
                    f"duplicate replica identity (cluster {record.cluster!r}, index {record.index}) "
                    f"(also {seen_ids[ident]})",
                )
            )
            continue
        seen_names[name] = at
        seen_ids[ident] = at
    if errors:
        raise FleetValidationError(errors)


# Another deployment's replica, as far as placement's ledger reads it: which pools of which cluster it holds, and which
# devices of which nodes (``allocations``; absent: whole nodes). Plain dicts (TypedDict): the ledger reads thousands of
# these per placement and needs no model around them.
class LedgerAllocation(TypedDict):
    node: NonNegInt
    devices: list[DeviceName]
    capacity: NotRequired[dict[str, dict[str, QuantityText]]]


class LedgerMember(TypedDict):
    pool: str
    nodes: NonNegInt
    allocations: NotRequired[list[LedgerAllocation]]


class LedgerEngine(TypedDict):
    members: list[LedgerMember]


class LedgerRecord(TypedDict):
    deployment: Annotated[str, Field(min_length=1)]
    cluster: Annotated[str, Field(min_length=1)]
    engines: list[LedgerEngine]
