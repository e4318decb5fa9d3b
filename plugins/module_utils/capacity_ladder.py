# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The capacity ladder of a provisioned pool (docs/provisioning.md, "Capacity ladder"): what a provider's failure
means, the walk over the rungs, and what the report says.

* **error classes**: a *stockout* (the provider has no such capacity in the zone now: GKE
  ``ZONE_RESOURCE_POOL_EXHAUSTED``, ``GCE_STOCKOUT``; EC2 ``InsufficientInstanceCapacity``, ``InsufficientCapacity``,
  a full or inactive capacity reservation / Capacity Block, ...) moves to the next rung; a *quota* (the account's own
  limit: GKE ``QUOTA_EXCEEDED``, EC2 ``VcpuLimitExceeded``, ...) stops the walk with a message naming the quota,
  since falling back past it would hide a limit the user must raise. Anything else is not a capacity failure and
  fails as it always did.
* **the walk** (:func:`walk`): each rung is attempted in order; after a stockout the failed pool is cleared (a GKE
  pool in ERROR, an EKS nodegroup in CREATE_FAILED keep the name) before the next rung, except after the last one,
  whose failure is left for the user to see (the next run clears it and walks again).

Pure: the provider executors (``gke.ensure_node_pool``, ``eks.ensure_nodegroup``) pass their attempts in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

STOCKOUT = "stockout"
QUOTA = "quota"

#: What each rung costs in availability (the report says it next to the rung a pool got).
AVAILABILITY: dict[str, str] = {
    "reservation": "reserved capacity: held for this pool (a Capacity Block until its end time)",
    "flex-start": "flex-start (Dynamic Workload Scheduler): the pool starts empty, nodes come when capacity frees up "
    "and run at most 7 days before they are replaced",
    "spot": "Spot: nodes can be preempted at any time (about 30 s notice on GKE, 2 min on EC2) and are not replaced "
    "while the zone is out of Spot capacity",
    "on-demand": "on-demand without a reservation: a node that goes away (repair, upgrade, scale-up) may not come back "
    "while the zone is out of stock",
}

# --------------------------------------------------------------------------------------------------------------------
# Error classes
# --------------------------------------------------------------------------------------------------------------------

# GKE / Compute Engine. Sources: GKE "Troubleshoot node pools" / Compute Engine "Resource availability" (stockout:
# ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS], "does not have enough resources available"), Compute Engine quota
# errors ("Quota 'NVIDIA_L4_GPUS' exceeded. Limit: 0.0 in region us-central1.", QUOTA_EXCEEDED).
GKE_STOCKOUT_CODES = ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "ZONE_RESOURCE_POOL_EXHAUSTED", "GCE_STOCKOUT")
_GKE_STOCKOUT_TEXT = re.compile(
    r"does not have enough resources available|resource pool exhausted|"
    r"reservation\b[^.]*\b(?:does not have (?:enough|sufficient)|insufficient|exhausted|is not available)",
    re.I,
)
GKE_QUOTA_CODES = ("GCE_QUOTA_EXCEEDED", "QUOTA_EXCEEDED")
_GKE_QUOTA_TEXT = re.compile(r"Quota '[^']+' exceeded|insufficient (?:regional )?quota|quota exceeded", re.I)
_GKE_QUOTA_NAME = (
    re.compile(r"Quota '([A-Za-z0-9_./-]+)' exceeded"),
    re.compile(r'resource "([A-Za-z0-9_./-]+)"'),
    re.compile(r"quota metric '([^']+)'"),
)

# EC2 (what EKS relays in a nodegroup's health issues: AsgInstanceLaunchFailures "... InsufficientInstanceCapacity -
# We currently do not have sufficient p5.48xlarge capacity ..."). Source: Amazon EC2 API "Error codes".
EC2_STOCKOUT_CODES = (
    "InsufficientInstanceCapacity",
    "InsufficientCapacityOnHost",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientCapacity",
    "ReservationCapacityExceeded",
    "UnfulfillableCapacity",
    "SpotMaxPriceTooLow",
    "Unsupported",
)
EC2_QUOTA_CODES = ("VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded")
#: A Capacity Block or capacity reservation that cannot be launched into now (before its start, after its end).
_EC2_RESERVATION_UNAVAILABLE = re.compile(
    r"(?:capacity block|capacity reservation)\b[^.]*\b(?:not (?:yet )?active|expired|has ended|is not available|"
    r"cancel+ed)",
    re.I,
)
CAPACITY_BLOCK_UNAVAILABLE = "CapacityBlockUnavailable"


@dataclass(frozen=True)
class Failure:
    """A classified capacity failure: ``kind`` is :data:`STOCKOUT` or :data:`QUOTA`, ``code`` the provider's code,
    ``quota`` the quota's name (quota failures)."""

    kind: str
    code: str
    message: str
    quota: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"class": self.kind, "code": self.code, "message": self.message}
        if self.quota:
            out["quota"] = self.quota
        return out


def _first_code(text: str, codes: Sequence[str]) -> str | None:
    for code in codes:
        if re.search(rf"(?<![A-Za-z_]){re.escape(code)}(?![A-Za-z_])", text):
            return code
    return None


def classify_gke(message: str) -> Failure | None:
    """The class of a GKE / Compute Engine error message (an operation's error, a pool's ``statusMessage``, an API
    error); ``None`` when it is not about capacity."""
    text = (message or "").strip()
    if not text:
        return None
    code = _first_code(text, GKE_QUOTA_CODES)
    if code or _GKE_QUOTA_TEXT.search(text):
        name = next((m.group(1) for rx in _GKE_QUOTA_NAME if (m := rx.search(text))), None)
        return Failure(QUOTA, code or "QUOTA_EXCEEDED", text, name or "a Compute Engine quota (see the message)")
    code = _first_code(text, GKE_STOCKOUT_CODES)
    if code or _GKE_STOCKOUT_TEXT.search(text):
        return Failure(STOCKOUT, code or "ZONE_RESOURCE_POOL_EXHAUSTED", text)
    return None


def ec2_quota_name(code: str, instance_type: str, capacity_type: str) -> str:
    """The Service Quotas name of the EC2 vCPU quota a launch of ``instance_type`` counts against (quotas are per
    instance family group and purchase option)."""
    family = instance_type.split(".", 1)[0].lower()
    groups = (("inf", "Inf"), ("trn", "Trn"), ("dl", "DL"), ("vt", "G and VT"), ("g", "G and VT"), ("p", "P"),
              ("f", "F"), ("x", "X"))  # fmt: skip
    group = next((g for prefix, g in groups if family.startswith(prefix)), "Standard (A, C, D, H, I, M, R, T, Z)")
    if capacity_type == "SPOT" or code == "MaxSpotInstanceCountExceeded":
        return f"All {group} Spot Instance Requests"
    return f"Running On-Demand {group} instances"


def classify_ec2(code: str, message: str, instance_type: str = "", capacity_type: str = "ON_DEMAND") -> Failure | None:
    """The class of an EC2 launch failure as EKS reports it (a health issue's ``code`` and ``message``); ``None``
    when it is not about capacity."""
    text = f"{code} {message or ''}".strip()
    found = _first_code(text, EC2_QUOTA_CODES)
    if found:
        return Failure(QUOTA, found, (message or code).strip(), ec2_quota_name(found, instance_type, capacity_type))
    found = _first_code(text, EC2_STOCKOUT_CODES)
    if found:
        return Failure(STOCKOUT, found, (message or code).strip())
    if _EC2_RESERVATION_UNAVAILABLE.search(text):
        return Failure(STOCKOUT, CAPACITY_BLOCK_UNAVAILABLE, (message or code).strip())
    return None


class CapacityError(GpufleetError):
    """An attempt failed for capacity: raised by a provider executor with the classified failure and its own
    message (zone and machine named)."""

    def __init__(self, failure: Failure, message: str) -> None:
        super().__init__(message)
        self.failure = failure


class QuotaExceeded(GpufleetError):
    """The walk stopped at a quota."""


class LadderExhausted(GpufleetError):
    """Every rung stocked out."""


# --------------------------------------------------------------------------------------------------------------------
# The walk
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rung:
    """One rung as the walk and the report see it: its position, kind and where / what it asks for."""

    index: int
    total: int
    kind: str
    machine: str
    zones: tuple[str, ...] = ()
    detail: str = ""

    @property
    def label(self) -> str:
        return f"rung {self.index + 1} of {self.total}"

    def describe(self) -> str:
        what = f"{self.kind} ({self.detail})" if self.detail else self.kind
        return f"{what}, {self.machine} in {', '.join(self.zones) or 'the cluster zones'}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rung": self.index + 1,
            "of": self.total,
            "kind": self.kind,
            "machine_type": self.machine,
            "zones": list(self.zones),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Attempt:
    rung: Rung
    failure: Failure

    def to_dict(self) -> dict[str, Any]:
        return {**self.rung.to_dict(), **self.failure.to_dict()}


@dataclass(frozen=True)
class Outcome:
    """The rung a pool got, after which failed attempts (none when it was found so)."""

    pool: str
    rung: Rung
    attempts: tuple[Attempt, ...] = field(default_factory=tuple)
    predicted: bool = False

    def report(self) -> str:
        """One line: ``l4: rung 2 of 3, spot (g2-standard-8 in us-central1-c) - Spot: nodes can be preempted ...``."""
        verb = "would get" if self.predicted else "got"
        line = f"{self.pool}: {verb} {self.rung.label}, {self.rung.describe()} - {AVAILABILITY[self.rung.kind]}"
        if self.attempts:
            tried = "; ".join(f"{a.rung.label} {a.rung.kind}: {a.failure.code}" for a in self.attempts)
            line += f" (after {tried})"
        return line

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.rung.to_dict(),
            "availability": AVAILABILITY[self.rung.kind],
            "attempts": [a.to_dict() for a in self.attempts],
            "predicted": self.predicted,
            "report": self.report(),
        }


def walk(
    pool: str,
    what: str,
    rungs: Sequence[Rung],
    attempt: Callable[[Rung], None],
    clear: Callable[[Rung], None],
) -> Outcome:
    """Attempt each rung in order until one succeeds (``attempt`` returns) and return it with the failed attempts.

    ``attempt`` raises :class:`CapacityError` for a capacity failure; anything else it raises propagates. After a
    stockout, ``clear`` removes what the failed attempt left (not after the last rung). A quota stops the walk
    (:class:`QuotaExceeded`, naming the quota); a ladder whose every rung stocked out raises :class:`LadderExhausted`
    (a one-rung ladder: the provider's own message). ``what`` names the pool in messages (``node pool l4``)."""
    if not rungs:
        raise GpufleetError(f"{what}: no rung to provision")
    attempts: list[Attempt] = []
    last: CapacityError | None = None
    for rung in rungs:
        try:
            attempt(rung)
        except CapacityError as exc:
            attempts.append(Attempt(rung, exc.failure))
            last = exc
            if exc.failure.kind == QUOTA:
                raise QuotaExceeded(quota_message(what, rung, exc.failure, attempts[:-1])) from None
            if rung.index + 1 < len(rungs):
                clear(rung)
            continue
        return Outcome(pool, rung, tuple(attempts))
    if len(rungs) == 1 and last is not None:
        raise LadderExhausted(str(last))
    raise LadderExhausted(exhausted_message(what, attempts))


def _tried(attempts: Sequence[Attempt]) -> str:
    return "; ".join(f"{a.rung.label} ({a.rung.describe()}): {a.failure.code}" for a in attempts)


def quota_message(what: str, rung: Rung, failure: Failure, before: Sequence[Attempt] = ()) -> str:
    text = (
        f"{what}: quota {failure.quota} exceeded at {rung.label} ({rung.describe()}): {failure.code}: "
        f"{failure.message}. A quota is the account's limit, not the provider's stock: the capacity ladder stops here "
        "rather than fall back past it; raise the quota (or free some of it) and run again"
    )
    if before:
        text += f" (before it: {_tried(before)})"
    return text


def exhausted_message(what: str, attempts: Sequence[Attempt]) -> str:
    return (
        f"{what}: no rung of its capacity ladder had capacity - {_tried(attempts)}. Add a rung (other zones, a "
        "machine type with the same GPUs, another kind of capacity) or retry later: the next run deletes the failed "
        f"pool and walks the ladder again. Last error: {attempts[-1].failure.message}"
    )


def implicit_kind(*, spot: bool = False, reservation: bool = False, flex_start: bool = False) -> str:
    """The rung kind of a pool without a ladder, from its class's capacity settings."""
    if reservation:
        return "reservation"
    if flex_start:
        return "flex-start"
    return "spot" if spot else "on-demand"


def pick_recorded(candidates: Sequence[tuple[int, bool, bool]]) -> int | None:
    """The rung a recorded pool is on. ``candidates``: ``(index, exact, same_kind)`` for each rung whose fields that
    cannot change in place match the recorded pool (``exact``: its zones too; ``same_kind``: the pool's recorded
    capacity-rung label names the rung's kind). The first exact match of the same kind, else the first of the same
    kind, else the first; ``None`` when no rung matches."""
    for want in ((True, True), (False, True), (False, False)):
        for index, exact, same_kind in candidates:
            if (exact or not want[0]) and (same_kind or not want[1]):
                return index
    return None
