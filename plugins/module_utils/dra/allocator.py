# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The DRA allocator: can one node of an inference class satisfy one member's claim, and how.

It has the shape of Kubernetes' structured allocator (``k8s.io/dynamic-resource-allocation/structured``,
``allocateOne``) so that placement's verdict equals what kube-scheduler does with the rendered claim on a node of
the pool:

* requests are allocated in order; a ``first_available`` request tries its alternatives in order and the first
  alternative with which the *whole* claim can be allocated is chosen (backtracking, as upstream does);
* ``ExactCount`` takes ``count`` unused devices that match the request's device class and every selector;
  ``All`` takes every matching device on the node, fails when any of them is already taken, and needs at least one;
* constraints have upstream's ``add``/``remove`` interface (:class:`MatchAttribute`): a device may be added when it
  has the attribute and its value equals the value of the devices already in the set;
* a claim holds at most :data:`CLAIM_DEVICES_MAX` devices: a claim that needs more whatever it chooses does not fit
  (upstream: "number of requested devices exceeds the claim limit"), and an alternative that would exceed it is skipped;
* the search is exact: it answers "no" only when no assignment exists.

Unlike upstream it searches over *runs* of interchangeable devices rather than single devices: two devices are
interchangeable when every request alternative sees them the same way (class, selectors) and every constrained
attribute has the same value on both, and a run is a stretch of them in node order. Eight identical GPUs are one
run of eight, so "4 of 8 GPUs" is one step, not C(8, 4) combinations. The verdict (fits or not) is the same as a
device-by-device search, and so is the alternative chosen, up to interchangeable devices. Where upstream stops early
(a CEL runtime error on a device it reaches, an ``All`` device a constraint rejects) the search is device by device in
upstream's order (:class:`_DeviceSearch`).

The node need not be empty (design.md §12): devices other claims hold (``taken``) are skipped before selectors are
evaluated on them, as upstream's "in use" check comes first, and an ``All`` request fails on them; capacity other
claims consume on devices that allow multiple allocations (``shared``) and the counter sets the node publishes
(``counters``) are checked device by device as upstream's ``allocateDevice`` does, with device taints (the class's,
and those observed on the node's devices: ``taints``), per request tolerations and the allocator features of the
cluster's Kubernetes version (:mod:`dra.features`). The result names the devices picked (``devices``, upstream's choice
up to devices nothing tells apart) and the capacity consumed (``consumed``), which placement's ledger records. A claim
that stops at a CEL runtime error names the devices it stopped on (``stopped``): on a node where other claims hold
them, upstream never evaluates the selector there, and the claim may fit.

A request without a ``device_class_name`` is resolved to the device class of the devices it matches (tried in the
order the class lists them), which is what rendering writes into the ResourceClaimTemplate. ``Synthetic`` devices
(design.md §2: matched for placement, never claimed) can satisfy only a plain ``ExactCount`` request that no constraint
names; such a request forms no part of the claim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.dra.api import (
    CapacityRequestPolicy,
    DeviceTaint,
    untolerated,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.constraints import (
    Constraint,
    DistinctAttribute,
    make,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.features import ALL, Features
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    CLAIM_DEVICES_MAX,
    DeviceRequest,
    DeviceSubRequest,
    InferenceClass,
    NodeSelector,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import Quantity, parse_quantity

#: Search steps one allocation may take before it gives up (answering "does not fit", with that reason). Far above
#: what any realistic claim needs: the group search is linear in the devices for claims without constraints.
SEARCH_BUDGET = 200_000

SYNTHETIC = "Synthetic"


# --------------------------------------------------------------------------------------------------------------------
# Devices of one node
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeDevice:
    """One device a node of the class publishes (one entry of a ResourceSlice), as CEL selectors see it."""

    name: str  # <entry>-<i>
    entry: str  # the class's device entry
    claim: str  # DRA | Synthetic
    driver: str
    device_class_name: str | None
    slice: dict[str, Any]  # {name, driver, attributes, capacity}
    shape: str  # canonical JSON without the name: devices with equal shapes are identical to selectors
    label: str  # for messages: "gpu (NVIDIA H100 80GB HBM3)"
    taints: tuple[DeviceTaint, ...] = ()  # design.md §12: not visible to CEL; a request must tolerate them
    #: design.md §12, consumable capacity: several claims may be allocated the device (``allowMultipleAllocations``).
    multi: bool = False
    #: Capacity name -> (value, request policy).
    capacity: tuple[tuple[str, Quantity, CapacityRequestPolicy | None], ...] = ()
    #: design.md §12, partitionable devices: (counter set, ((counter, quantity), ...)) it consumes while allocated.
    consumes: tuple[tuple[str, tuple[tuple[str, Quantity], ...]], ...] = ()


def node_devices(cls: InferenceClass) -> list[NodeDevice]:
    """Every device of one node of ``cls``, in the order the class lists them."""
    import json

    out = []
    for d in cls.devices:
        product = d.attributes.get("productName")
        label = f"{d.name} ({product.string})" if product is not None and product.string else d.name
        for i, dev in enumerate(d.slice_devices()):
            shape = json.dumps({k: v for k, v in dev.items() if k != "name"}, sort_keys=True, separators=(",", ":"))
            policies = {k: v.request_policy for k, v in d.capacity.items()}
            if d.instances is not None:
                policies.update({k: v.request_policy for k, v in d.instances[i].capacity.items()})
            capacity = tuple(
                (name, parse_quantity(c["value"]), policies.get(name)) for name, c in sorted(dev["capacity"].items())
            )
            consumes = tuple(
                (name, tuple((k, parse_quantity(v)) for k, v in sorted(counters.items())))
                for name, counters in d.counter_consumption(i)
            )
            out.append(
                NodeDevice(
                    dev["name"],
                    d.name,
                    d.claim,
                    d.driver,
                    d.device_class_name,
                    dev,
                    shape,
                    label,
                    d.device_taints(i),
                    d.allow_multiple_allocations,
                    capacity,
                    consumes,
                )
            )
    return out


Counters = dict[str, dict[str, dict[str, Quantity]]]  # driver -> counter set -> counter -> quantity


def node_counters(cls: InferenceClass) -> Counters:
    """The counter sets one node of ``cls`` publishes, per driver (design.md §12)."""
    return {
        driver: {name: {k: parse_quantity(v) for k, v in counters.items()} for name, counters in sets.items()}
        for driver, sets in cls.counter_sets().items()
    }


Shared = dict[int, dict[str, Quantity]]  # device index -> capacity consumed on it by other claims
Tainted = Mapping[int, "tuple[DeviceTaint, ...]"]  # device index -> taints observed on it beyond the class's


def consume(
    request: dict[str, str] | None, device: NodeDevice, already: dict[str, Quantity] | None = None
) -> dict[str, Quantity] | None:
    """Upstream ``CmpRequestOverCapacity`` + ``GetConsumedCapacityFromRequest``: what a request with capacity
    ``request`` consumes of ``device`` when ``already`` is consumed there (by other claims, and earlier requests of
    this claim), or None when it cannot: it names a capacity the device does not have, a policy rejects the amount,
    or the device does not have that much left."""
    table = {name: (value, policy) for name, value, policy in device.capacity}
    if request and any(name not in table for name in request):
        return None
    out: dict[str, Quantity] = {}
    for name, (value, policy) in table.items():
        asked = parse_quantity(request[name]) if request and name in request else None
        if policy is None:
            used = asked if asked is not None else value
        else:
            used = policy.consumed(asked, value)
            if policy.violated(used):
                return None
        total = used if not already or name not in already else already[name].add(used)
        if total.cmp(value) > 0:
            return None
        out[name] = used
    return out


def lookup_attribute(device: NodeDevice, qualified: str) -> tuple[str, Any] | None:
    """The device's value of a fully qualified attribute (``domain/name``), as upstream's ``lookupAttribute``:
    the qualified key, or the bare name when the domain is the device's driver. ``(type, value)`` or None."""
    attrs = device.slice["attributes"]
    value = attrs.get(qualified)
    if value is None:
        domain, _sep, ident = qualified.rpartition("/")
        if domain == device.driver:
            value = attrs.get(ident)
    if value is None:
        return None
    ((kind, raw),) = value.items()
    return kind, raw


# --------------------------------------------------------------------------------------------------------------------
# Constraints: upstream's interface
# --------------------------------------------------------------------------------------------------------------------


# MatchAttribute / DistinctAttribute: dra/constraints.py (upstream's ``constraint`` interface).


# --------------------------------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class Chosen:
    """What one request got: the alternative (``sub`` is None for a plain request), its device class (None: it
    matched synthetic devices only, and is not claimed) and how many devices."""

    request: str
    sub: str | None
    device_class_name: str | None
    devices: int


@dataclass
class Allocation:
    ok: bool
    chosen: list[Chosen] = field(default_factory=list)
    why: str = ""
    synthetic: list[str] = field(default_factory=list)  # device entries matched by requests that are not claimed
    #: The node's devices (indexes into the node's device list) the claim is allocated, in the order upstream's
    #: allocator picks them; synthetic devices are not claimed and not listed.
    devices: tuple[int, ...] = ()
    #: Capacity the claim consumes on devices that allow multiple allocations (design.md §12).
    consumed: Shared = field(default_factory=dict)
    #: The search stopped at a CEL runtime error (``ok`` is False): the devices an ``ExactCount`` request's selector
    #: fails on with an error (indexes). Upstream skips a device in use before it evaluates selectors on it, so the
    #: same claim may be allocated on a node where other claims hold these devices.
    stopped: frozenset[int] = frozenset()

    @property
    def claims(self) -> bool:
        return any(c.device_class_name for c in self.chosen)


# --------------------------------------------------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------------------------------------------------

Check = Callable[[str, NodeDevice], "tuple[bool, str | None]"]


@dataclass
class _Choice:
    """One way to satisfy one request: an alternative resolved to one device class (or to synthetic devices)."""

    request: str
    sub: str | None
    mode: str
    count: int
    device_class_name: str | None  # None: synthetic
    candidates: list[int]  # device indices that match
    kind_devices: list[int] = field(default_factory=list)  # every device of the class, in node order
    errors: dict[int, str] = field(default_factory=dict)  # devices of the class a selector fails on, and why
    #: Matching devices of an All request that cannot be allocated to it (an untolerated taint): the request fails.
    blocked: frozenset[int] = frozenset()
    #: The alternative's ``capacity.requests`` (consumable capacity).
    capacity: dict[str, str] | None = None

    def __post_init__(self) -> None:
        self.candidate_set = frozenset(self.candidates)


@dataclass
class _Request:
    name: str
    choices: list[_Choice]
    why: list[str]  # why alternatives have no choice, for the explanation


def _match(alt: DeviceSubRequest, dev: NodeDevice, check: Check) -> tuple[str | None, bool]:
    """``(None, False)`` when ``dev`` matches ``alt``'s selectors, else ``(why not, whether a selector failed with an
    error)``. Selectors are evaluated in order and the first that is not true decides, as upstream's
    ``selectorsMatch``."""
    for expr in (s.cel for s in alt.selectors):
        ok, err = check(expr, dev)
        if not ok:
            if err:
                return f"selector `{expr}` failed on device {dev.label}: {err}", True
            return f"selector `{expr}` is false for device {dev.label}", False
    return None, False


def _alt_label(request: DeviceRequest, alt: DeviceSubRequest) -> str:
    return f"{request.name}/{alt.name}" if request.first_available is not None else request.name


def _choices(
    request: DeviceRequest,
    devices: list[NodeDevice],
    check: Check,
    constrained: set[str],
    taken: frozenset[int] = frozenset(),
    features: Features = ALL,
    shared: Shared | None = None,
    observed: Tainted | None = None,
) -> _Request:
    """The ways to satisfy ``request`` on a node whose devices ``taken`` are allocated to other claims (and ``observed``
    carry taints beyond the class's). Upstream skips a
    device in use before it evaluates selectors on it for an ``ExactCount`` request; an ``All`` request evaluates every
    device of the node first (``validateDeviceRequest``) and fails on one that is in use. A device with a taint the
    alternative does not tolerate is skipped after its selectors are evaluated (``allocateDevice``); an ``All``
    request fails on it. With consumable capacity, a device without the capacity the alternative asks for (left) is
    skipped by both (``CmpRequestOverCapacity``); a device that consumes counters is not allocatable without the
    partitionable-devices feature."""
    choices: list[_Choice] = []
    why: list[str] = []
    fa = request.first_available is not None
    for alt in request.alternatives:
        sub = alt.name if fa else None
        label = _alt_label(request, alt)
        reasons: list[str] = []
        by_kind: dict[str | None, list[int]] = {}
        of_kind: dict[str | None, list[int]] = {}
        errors: dict[str | None, dict[int, str]] = {}
        seen_shapes: set[tuple[str, str | None]] = set()
        skip_taken = bool(taken) and alt.allocation_mode != "All"
        tolerations = tuple(alt.tolerations)
        tainted: dict[str | None, set[int]] = {}
        for di, dev in enumerate(devices):
            if skip_taken and di in taken:
                continue
            key = (dev.shape, dev.device_class_name)
            if alt.device_class_name and dev.device_class_name != alt.device_class_name:
                if key not in seen_shapes:
                    seen_shapes.add(key)
                    has = (
                        f"device class {dev.device_class_name}"
                        if dev.device_class_name
                        else "no device class (synthetic)"
                    )
                    reasons.append(f"device {dev.label} has {has}, not {alt.device_class_name}")
                continue
            kind = dev.device_class_name if dev.claim == "DRA" else None
            of_kind.setdefault(kind, []).append(di)
            failed, is_error = _match(alt, dev, check)
            if failed is not None:
                if is_error:
                    errors.setdefault(kind, {})[di] = failed
                if key not in seen_shapes:
                    seen_shapes.add(key)
                    reasons.append(failed)
                continue
            if features.consumable_capacity and dev.claim == "DRA":
                asked = alt.capacity.requests if alt.capacity is not None else None
                if consume(asked, dev, (shared or {}).get(di)) is None:
                    if key not in seen_shapes:
                        seen_shapes.add(key)
                        reasons.append(f"device {dev.label} has not the capacity {label} asks for left")
                    continue
            if dev.consumes and not features.partitionable_devices:
                missing = features.missing("partitionable_devices", f"device {dev.name} consumes counters, which")
                reasons.append(missing or "")
                if alt.allocation_mode != "All":
                    continue
                tainted.setdefault(kind, set()).add(di)
            taints = dev.taints + observed[di] if observed and di in observed else dev.taints
            taint = untolerated(taints, tolerations) if taints and features.device_taints else None
            if taint is not None:
                reasons.append(f"device {dev.name} is tainted {taint.text()}, which {label} does not tolerate")
                if alt.allocation_mode != "All":
                    continue
                tainted.setdefault(kind, set()).add(di)
            by_kind.setdefault(kind, []).append(di)
        if not by_kind:
            why.append(f"{label}: {'; '.join(dict.fromkeys(reasons)) or 'the class has no devices'}")
            continue
        for kind, idx in by_kind.items():
            # Synthetic devices are never claimed: only a plain ExactCount request no constraint names may use them.
            if kind is None and (fa or alt.allocation_mode == "All" or request.name in constrained):
                if fa:
                    what = "a first_available alternative"
                else:
                    what = "an All request" if alt.allocation_mode == "All" else "a constrained request"
                names = ", ".join(dict.fromkeys(devices[i].entry for i in idx))
                why.append(f"{label}: matches only synthetic devices ({names}), which {what} cannot use")
                continue
            count = len(idx) if alt.allocation_mode == "All" else alt.devices
            choices.append(
                _Choice(
                    request.name,
                    sub,
                    alt.allocation_mode,
                    count,
                    kind,
                    idx,
                    of_kind[kind],
                    errors.get(kind, {}),
                    frozenset(tainted.get(kind, ())),
                    dict(alt.capacity.requests) if alt.capacity is not None else None,
                )
            )
    return _Request(request.name, choices, why)


class _Abort(Exception):
    """kube-scheduler stops allocating the claim on this node (a CEL runtime error, an All device a constraint rejects)."""

    def __init__(self, why: str, *, cel: bool = False) -> None:
        super().__init__(why)
        self.cel = cel  # at a selector's runtime error on a device the search reached


class _Walk:
    """What both searches share: requests and their alternatives in order, the claim limit, constraint bookkeeping
    and the step budget. A subclass says how one request takes its devices (:meth:`_all`, :meth:`_exact`)."""

    def __init__(
        self,
        requests: list[_Request],
        devices: list[NodeDevice],
        constraints: list[Constraint],
        taken: frozenset[int] = frozenset(),
    ) -> None:
        self.requests = requests
        self.devices = devices
        self.constraints = constraints
        self.taken = taken
        self.claimed = 0
        self.picked: list[Chosen] = []
        self.steps = 0
        self.exhausted = False
        self.aborted = ""
        self.cel_error = False  # it aborted at a CEL runtime error

    def run(self) -> bool:
        try:
            return self._request(0)
        except _Abort as stop:
            self.aborted = str(stop)
            self.cel_error = stop.cel
            return False

    def _tick(self) -> bool:
        self.steps += 1
        if self.steps > SEARCH_BUDGET:
            self.exhausted = True
        return self.exhausted

    def _constrain(self, choice: _Choice, value: Callable[[str], tuple[str, Any] | None], n: int) -> bool:
        """Add ``n`` devices whose attributes ``value`` gives to every constraint (all or none of them)."""
        done: list[Constraint] = []
        for c in self.constraints:
            if not c.add(choice.request, choice.sub, value(c.attribute), n):
                for d in done:
                    d.remove(choice.request, choice.sub, n)
                return False
            done.append(c)
        if choice.device_class_name:
            self.claimed += n
        return True

    def _unconstrain(self, choice: _Choice, n: int) -> None:
        for c in self.constraints:
            c.remove(choice.request, choice.sub, n)
        if choice.device_class_name:
            self.claimed -= n

    def _request(self, ri: int) -> bool:
        if ri == len(self.requests):
            return True
        for choice in self.requests[ri].choices:
            if self._tick():
                return False
            if choice.device_class_name and self.claimed + choice.count > CLAIM_DEVICES_MAX:
                continue  # upstream: errAllocationResultMaxSizeExceeded, try the next alternative
            self.picked.append(Chosen(choice.request, choice.sub, choice.device_class_name, choice.count))
            ok = self._all(choice, ri) if choice.mode == "All" else self._exact(choice, ri)
            if ok:
                return True
            self.picked.pop()
            if self.exhausted:
                return False
        return False

    def _all(self, choice: _Choice, ri: int) -> bool:
        raise NotImplementedError

    def _exact(self, choice: _Choice, ri: int) -> bool:
        raise NotImplementedError

    def picked_devices(self) -> tuple[int, ...]:
        """The claimed devices of the solution found (call after :meth:`run` returned True)."""
        raise NotImplementedError


class _Search(_Walk):
    def __init__(
        self,
        requests: list[_Request],
        devices: list[NodeDevice],
        constraints: list[Constraint],
        taken: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__(requests, devices, constraints, taken)
        # Interchangeable devices: same membership in every choice and the same value of every constrained attribute.
        member_of: dict[int, list[int]] = {}
        flat = [c for r in requests for c in r.choices]
        for ci, choice in enumerate(flat):
            for di in choice.candidates:
                member_of.setdefault(di, []).append(ci)
        attrs = sorted({c.attribute for c in constraints})
        # Runs of consecutive interchangeable devices (in node order, among devices some request can take): taking k
        # from a run is taking its first k free devices, which is what upstream's device-order search tries first, so
        # the first solution found (and the alternative it chooses) is upstream's, up to interchangeable devices.
        self.groups: list[list[int]] = []
        last: tuple[Any, ...] | None = None
        for di in sorted(member_of):
            key = (tuple(member_of[di]), tuple(lookup_attribute(devices[di], a) for a in attrs))
            if key != last:
                self.groups.append([])
                last = key
            self.groups[-1].append(di)
        # Devices of other claims are in no ExactCount choice; an All choice counts them, and fails on them.
        self.free = (
            [sum(1 for di in g if di not in taken) for g in self.groups] if taken else [len(g) for g in self.groups]
        )
        self.values = [{a: lookup_attribute(devices[g[0]], a) for a in attrs} for g in self.groups]
        self.trail: list[tuple[_Choice, int, int]] = []  # (choice, group, devices taken from it), in search order
        self.choice_groups: dict[int, list[int]] = {
            id(choice): [gi for gi, g in enumerate(self.groups) if g[0] in choice.candidate_set] for choice in flat
        }

    def _add(self, choice: _Choice, gi: int, n: int) -> bool:
        if not self._constrain(choice, self.values[gi].get, n):
            return False
        self.free[gi] -= n
        self.trail.append((choice, gi, n))
        return True

    def _remove(self, choice: _Choice, gi: int, n: int) -> None:
        self._unconstrain(choice, n)
        self.free[gi] += n
        self.trail.pop()

    def picked_devices(self) -> tuple[int, ...]:
        # Taking n devices of a run is taking its first n free ones, in node order (what upstream tries first).
        cursor: dict[int, list[int]] = {}
        out: list[int] = []
        for choice, gi, n in self.trail:
            free = cursor.get(gi)
            if free is None:
                free = cursor[gi] = [di for di in self.groups[gi] if di not in self.taken]
            got, cursor[gi] = free[:n], free[n:]
            if choice.device_class_name:
                out.extend(got)
        return tuple(out)

    def _all(self, choice: _Choice, ri: int) -> bool:
        if choice.blocked:
            return False  # a matching device is tainted and not tolerated: All cannot take it
        taken: list[tuple[int, int]] = []
        ok = True
        for gi in self.choice_groups[id(choice)]:
            n = len(self.groups[gi])
            if self.free[gi] != n or not self._add(choice, gi, n):
                ok = False  # a matching device is taken by an earlier request, or breaks a constraint
                break
            taken.append((gi, n))
        if ok and self._request(ri + 1):
            return True
        for gi, n in reversed(taken):
            self._remove(choice, gi, n)
        return False

    def _exact(self, choice: _Choice, ri: int) -> bool:
        return self._take(choice, self.choice_groups[id(choice)], 0, choice.count, ri)

    def _take(self, choice: _Choice, groups: list[int], start: int, need: int, ri: int) -> bool:
        if need == 0:
            return self._request(ri + 1)
        if sum(self.free[gi] for gi in groups[start:]) < need:
            return False
        for pos in range(start, len(groups)):
            gi = groups[pos]
            for n in range(min(self.free[gi], need), 0, -1):
                if self._tick():
                    return False
                if not self._add(choice, gi, n):
                    break  # the constraint rejects this group's value whatever the number
                if self._take(choice, groups, pos + 1, need - n, ri):
                    return True
                self._remove(choice, gi, n)
                if self.exhausted:
                    return False
        return False


class _DeviceSearch(_Walk):
    """Upstream's ``allocateOne``, device by device in node order, with its two ways to stop early: a selector that
    fails with an error on a device the search looks at, and an ``All`` device a constraint rejects. Used when one of
    them can happen, and for what upstream keeps per device (design.md §12): capacity consumed on devices that allow
    multiple allocations (several requests of the claim may take one), the counters devices consume, and
    ``distinct_attribute`` constraints. Otherwise every exhaustive search gives the same answer and :class:`_Search`
    is faster."""

    def __init__(
        self,
        requests: list[_Request],
        devices: list[NodeDevice],
        constraints: list[Constraint],
        taken: frozenset[int] = frozenset(),
        features: Features = ALL,
        shared: Shared | None = None,
        counters: Counters | None = None,
    ) -> None:
        super().__init__(requests, devices, constraints, taken)
        self.used: set[int] = set(taken)
        self.trail: list[tuple[_Choice, int, dict[str, Quantity] | None, bool]] = []
        self.features = features
        self.shared = shared or {}
        self.allocating: Shared = {}  # capacity this claim consumes on shared devices so far
        self.shares: dict[int, int] = {}  # shared device -> how many of this claim's requests hold it
        self.capacity_asked = {(c.request, c.sub): c.capacity for r in requests for c in r.choices}
        # Counters: what other claims' devices left (upstream ``availableCounters``), and what this claim takes.
        self.available: Counters = {}
        self.counting: Counters = {}
        if counters and features.partitionable_devices:
            in_use = set(taken) | set(self.shared)
            for driver, sets in counters.items():
                avail = {name: dict(values) for name, values in sets.items()}
                for di in in_use:
                    dev = devices[di]
                    if dev.driver != driver:
                        continue
                    for name, values in dev.consumes:
                        for counter, amount in values:
                            if name in avail and counter in avail[name]:
                                avail[name][counter] = avail[name][counter].sub(amount)
                self.available[driver] = avail
                self.counting[driver] = {name: {} for name in avail}

    def _counters(self, dev: NodeDevice, sign: int) -> None:
        pool = self.counting.setdefault(dev.driver, {})
        for name, values in dev.consumes:
            table = pool.setdefault(name, {})
            for counter, amount in values:
                have = table.get(counter)
                delta = amount if sign > 0 else amount.neg()
                table[counter] = delta if have is None else have.add(delta)

    def _counters_fit(self, dev: NodeDevice) -> bool:
        """``checkAvailableCounters``: every counter of every set of the device's pool still covers what is taken."""
        for name, values in self.available.get(dev.driver, {}).items():
            taken = self.counting.get(dev.driver, {}).get(name, {})
            for counter, available in values.items():
                used = taken.get(counter)
                if used is not None and available.cmp(used) < 0:
                    return False
                if used is None and available.sign() < 0:
                    return False
        return True

    def _add(self, choice: _Choice, di: int) -> bool:
        return self._try(choice, di) == ""

    def _try(self, choice: _Choice, di: int) -> str:
        """Allocate ``di`` to ``choice`` as upstream's ``allocateDevice``: "" when done, else "unavailable" (counters,
        capacity) or "constraint"."""
        device = self.devices[di]
        multi = device.multi and self.features.consumable_capacity
        reserved = False
        # A shared device already in use has its counters counted (upstream ``skipCounterCheck``).
        in_use = multi and (di in self.shared or di in self.shares)
        if device.consumes and self.features.partitionable_devices and not in_use:
            self._counters(device, 1)
            if not self._counters_fit(device):
                self._counters(device, -1)
                return "unavailable"
            reserved = True
        if not self._constrain(choice, lambda attribute: lookup_attribute(device, attribute), 1):
            if reserved:
                self._counters(device, -1)
            return "constraint"
        consumed: dict[str, Quantity] | None = None
        if self.features.consumable_capacity and (device.capacity or multi):
            already = _plus(self.shared.get(di), self.allocating.get(di))
            consumed = consume(self.capacity_asked.get((choice.request, choice.sub)), device, already)
            if consumed is None:
                self._unconstrain(choice, 1)
                if reserved:
                    self._counters(device, -1)
                return "unavailable"
            if multi:
                self.allocating[di] = _plus(self.allocating.get(di), consumed) or {}
                self.shares[di] = self.shares.get(di, 0) + 1
            else:
                consumed = None
        if not multi:
            self.used.add(di)
        self.trail.append((choice, di, consumed, reserved))
        return ""

    def _remove(self, choice: _Choice, di: int) -> None:
        _choice, _di, consumed, reserved = self.trail.pop()
        device = self.devices[di]
        self._unconstrain(choice, 1)
        if consumed is not None:
            self.shares[di] -= 1
            if self.shares[di]:
                self.allocating[di] = _minus(self.allocating[di], consumed)
            else:
                del self.shares[di], self.allocating[di]
        if reserved:
            self._counters(device, -1)
        if not (device.multi and self.features.consumable_capacity):
            self.used.discard(di)

    def picked_devices(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(di for choice, di, _c, _r in self.trail if choice.device_class_name))

    def consumed(self) -> Shared:
        return {di: dict(c) for di, c in self.allocating.items()}

    def _all(self, choice: _Choice, ri: int) -> bool:
        taken: list[int] = []
        for di in choice.candidates:
            if di in self.used or di in choice.blocked:
                break
            outcome = self._try(choice, di)
            if outcome == "unavailable":
                break
            if outcome:
                raise _Abort(
                    f"request {choice.request} (All): device {self.devices[di].name} breaks a constraint, and "
                    "kube-scheduler gives up on a claim whose All request a constraint rejects"
                )
            taken.append(di)
        else:
            if self._request(ri + 1):
                return True
        for di in reversed(taken):
            self._remove(choice, di)
        return False

    def _exact(self, choice: _Choice, ri: int) -> bool:
        return self._pick(choice, ri, 0, 0)

    def _pick(self, choice: _Choice, ri: int, k: int, start: int) -> bool:
        if k == choice.count:
            return self._request(ri + 1)
        order = choice.kind_devices
        for pos in range(start, len(order)):
            di = order[pos]
            if di in self.used:
                continue
            if di in choice.errors:
                raise _Abort(
                    f"{choice.errors[di]}; kube-scheduler stops allocating the claim at a CEL runtime error", cel=True
                )
            if di not in choice.candidate_set or self._tick() or not self._add(choice, di):
                if self.exhausted:
                    return False
                continue
            if self._pick(choice, ri, k + 1, pos + 1):
                return True
            self._remove(choice, di)
            if self.exhausted:
                return False
        return False


def _plus(a: dict[str, Quantity] | None, b: dict[str, Quantity] | None) -> dict[str, Quantity] | None:
    if not a:
        return dict(b) if b else None
    if not b:
        return dict(a)
    out = dict(a)
    for k, v in b.items():
        out[k] = v if k not in out else out[k].add(v)
    return out


def _minus(a: dict[str, Quantity], b: dict[str, Quantity]) -> dict[str, Quantity]:
    return {k: (v.sub(b[k]) if k in b else v) for k, v in a.items()}


def allocate(
    node_selector: NodeSelector,
    devices: list[NodeDevice],
    check: Check,
    taken: frozenset[int] = frozenset(),
    features: Features = ALL,
    shared: Shared | None = None,
    counters: Counters | None = None,
    taints: Tainted | None = None,
) -> Allocation:
    """Allocate one member's claim on one node whose devices are ``devices``, of which those in ``taken`` (indexes) are
    allocated to other claims and those in ``taints`` carry these taints beyond the class's (observed in the node's
    ResourceSlices); ``check(cel, device)`` evaluates a selector (``(matches, error)``). Exact: ``ok`` is
    False only when no assignment exists (or the search budget ran out, which ``why`` says). ``devices`` of the result
    are the devices upstream's allocator picks, up to devices no request and constraint tells apart."""
    requests_in = node_selector.devices
    if not requests_in:
        return Allocation(True)
    missing = _missing_features(node_selector, devices, features)
    if missing:
        return Allocation(False, why=missing)
    constrained: set[str] = set()
    for c in node_selector.constraints:
        names = [r.partition("/")[0] for r in c.requests] or [r.name for r in requests_in]
        constrained.update(names)
    requests = [_choices(r, devices, check, constrained, taken, features, shared, taints) for r in requests_in]
    for req in requests:
        if not req.choices:
            return Allocation(False, why=_no_choice(req))
    # Upstream's first check: the fewest devices the claim can take (an All request takes all it matches).
    least = sum(
        min(c.count for c in r.choices if c.device_class_name) if any(c.device_class_name for c in r.choices) else 0
        for r in requests
    )
    if least > CLAIM_DEVICES_MAX:
        return Allocation(
            False,
            why=f"the claim needs at least {least} devices here; Kubernetes allocates at most {CLAIM_DEVICES_MAX} "
            "devices to one claim",
        )
    constraints = [make(c.requests, c.match_attribute, c.distinct_attribute) for c in node_selector.constraints]
    # Upstream evaluates every device of an All request (and of every All alternative) before it searches: a selector
    # error there stops the claim whatever would be chosen.
    for req in requests:
        for choice in req.choices:
            if choice.mode == "All" and choice.errors:
                first = next(iter(choice.errors.values()))
                return Allocation(
                    False,
                    why=f"request {req.name} (All): {first}; kube-scheduler stops allocating the claim at a "
                    "CEL runtime error",
                )
    upstream_order = any(
        choice.errors or (choice.mode == "All" and any(c.applies(choice.request, choice.sub) for c in constraints))
        for req in requests
        for choice in req.choices
    )
    # What upstream keeps per device (shared devices' capacity, counters, distinct values): device by device too.
    per_device = any(isinstance(c, DistinctAttribute) for c in constraints) or any(
        (features.consumable_capacity and devices[di].multi)
        or (features.partitionable_devices and devices[di].consumes)
        for req in requests
        for choice in req.choices
        for di in choice.candidates
    )
    search: _Walk = (
        _DeviceSearch(requests, devices, constraints, taken, features, shared, counters)
        if upstream_order or per_device
        else _Search(requests, devices, constraints, taken)
    )
    if search.run():
        synthetic: list[str] = []
        for chosen, req in zip(search.picked, requests, strict=True):
            if chosen.device_class_name is None:
                choice = next(c for c in req.choices if c.sub == chosen.sub and c.device_class_name is None)
                synthetic.extend(devices[i].entry for i in choice.candidates)
        return Allocation(
            True,
            list(search.picked),
            synthetic=list(dict.fromkeys(synthetic)),
            devices=search.picked_devices(),
            consumed=search.consumed() if isinstance(search, _DeviceSearch) else {},
        )
    if search.aborted:
        stopped: frozenset[int] = frozenset()
        if search.cel_error:
            # Devices several claims share are never "in use" (upstream checks exclusive allocations only): a selector
            # error on one stops the claim whatever else is allocated.
            stopped = frozenset(
                di
                for req in requests
                for choice in req.choices
                if choice.mode != "All"
                for di in choice.errors
                if not (features.consumable_capacity and devices[di].multi)
            )
        return Allocation(False, why=search.aborted, stopped=stopped)
    if search.exhausted:
        return Allocation(False, why=f"gave up after {SEARCH_BUDGET} search steps without finding an allocation")
    return Allocation(False, why=_why_not(requests, devices, constraints, taken))


def _missing_features(node_selector: NodeSelector, devices: list[NodeDevice], features: Features) -> str:
    """Why the claim needs an allocator feature the cluster's Kubernetes lacks ("" when it does not)."""
    for request in node_selector.devices:
        for alt in request.alternatives:
            label = _alt_label(request, alt)
            why = None
            if alt.tolerations:
                why = features.missing("device_taints", f"request {label}: tolerations")
            if why is None and alt.capacity is not None:
                why = features.missing("consumable_capacity", f"request {label}: capacity requests")
            if why:
                return why
    for ci, c in enumerate(node_selector.constraints):
        if c.distinct_attribute is not None:
            why = features.missing("consumable_capacity", f"constraints[{ci}]: distinct_attribute")
            if why:
                return why
    return ""


def _no_choice(req: _Request) -> str:
    if len(req.why) == 1:
        return f"request {req.why[0]}"
    return f"request {req.name}: no alternative fits: " + "; ".join(req.why)


def _why_not(
    requests: list[_Request],
    devices: list[NodeDevice],
    constraints: list[Constraint],
    taken: frozenset[int] = frozenset(),
) -> str:
    """Why a claim whose every request has some matching device still cannot be allocated."""
    # A request that cannot be satisfied on its own (too few matching devices, All over the claim limit).
    for req in requests:
        alone = _Search([req], devices, [], taken)
        if not alone.run():
            parts: list[str] = []
            for sub in dict.fromkeys(c.sub for c in req.choices):
                mine = [c for c in req.choices if c.sub == sub]
                label = f"{sub}: " if sub else ""
                if mine[0].mode == "All":
                    held = sorted({devices[i].name for c in mine for i in c.candidates if i in taken})
                    blocked = sorted({devices[i].name for c in mine for i in c.blocked})
                    if held:
                        parts.append(f"{label}All matches device(s) {', '.join(held)}, which other claims hold")
                    elif blocked:
                        parts.append(f"{label}All matches tainted device(s) {', '.join(blocked)}, not tolerated")
                    else:
                        found = ", ".join(f"{c.count} ({_kind(c)})" for c in mine)
                        parts.append(f"{label}All found {found} devices, over the claim limit of {CLAIM_DEVICES_MAX}")
                    continue
                have = " or ".join(
                    f"{len(c.candidates)} ({', '.join(dict.fromkeys(devices[i].label for i in c.candidates))})"
                    for c in mine
                )
                parts.append(f"{label}needs {mine[0].count} devices, a node has {have} that match")
            parts.extend(req.why)
            alternatives = len(parts) > 1 and any(c.sub for c in req.choices)
            lead = f"request {req.name}: " + ("no alternative fits: " if alternatives else "")
            return lead + "; ".join(parts)
    # Constraints: name each one that alone makes the claim impossible.
    if constraints and _Search(requests, devices, [], taken).run():
        blocking = []
        for constraint in constraints:
            fresh = constraint.fresh()
            if not _Search(requests, devices, [fresh], taken).run():
                blocking.append(_constraint_story(constraint, requests, devices))
        if blocking:
            return "; ".join(blocking)
        return "the constraints together cannot be met: " + ", ".join(c.describe() for c in constraints)
    # Requests compete for the same devices, or an All request finds a device an earlier request took.
    summary = []
    for req in requests:
        first = req.choices[0]
        n_alts = len({choice.sub for choice in req.choices})
        label = f"{req.name} ({'All' if first.mode == 'All' else first.count}"
        summary.append(label + (f", or {n_alts - 1} other alternative(s))" if n_alts > 1 else ")"))
    return (
        f"requests {', '.join(summary)} together need more devices than one node has, or an All request would take a "
        "device another request needs"
    )


def _kind(c: _Choice) -> str:
    return f"class {c.device_class_name}" if c.device_class_name else "synthetic"


def _constraint_story(c: Constraint, requests: list[_Request], devices: list[NodeDevice]) -> str:
    """Per value of the attribute, how many matching devices each constrained request finds, against what it needs."""
    per_value: dict[str, dict[str, int]] = {}
    missing = 0
    needs = []
    for req in requests:
        for choice in req.choices:
            if not c.applies(choice.request, choice.sub):
                continue
            label = f"{choice.request}/{choice.sub}" if choice.sub else choice.request
            needs.append(f"{label} {'all' if choice.mode == 'All' else choice.count}")
            for di in choice.candidates:
                v = lookup_attribute(devices[di], c.attribute)
                if v is None:
                    missing += 1
                else:
                    row = per_value.setdefault(str(v[1]), {})
                    row[label] = row.get(label, 0) + 1
    have = "; ".join(
        f"{value}: " + ", ".join(f"{label} {n}" for label, n in row.items()) for value, row in sorted(per_value.items())
    )
    extra = f"; {missing} matching device(s) lack the attribute" if missing else ""
    return (
        f"{c.describe()} cannot be met: one value must serve {', '.join(needs)}; matching devices per value: "
        f"{have or 'none'}{extra}"
    )
