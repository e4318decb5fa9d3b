# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Claim constraints with upstream's ``constraint`` interface (``internal/incubating/constraint.go``): ``add`` a device
of a request (or reject it), ``remove`` it when the search backtracks.

A constraint receives the device as the values of its attributes (``value``: the ``(type, value)`` of the constrained
attribute, as :func:`allocator.lookup_attribute` gives it, None when the device lacks it) and ``n``, how many
identical devices are added at once (the allocator's group search; 1 in its device-by-device search).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

Value = "tuple[str, Any] | None"


class Constraint(Protocol):
    attribute: str
    requests: frozenset[str]

    def applies(self, request: str, sub: str | None) -> bool: ...

    def add(self, request: str, sub: str | None, value: tuple[str, Any] | None, n: int) -> bool: ...

    def remove(self, request: str, sub: str | None, n: int) -> None: ...

    def describe(self) -> str: ...

    def fresh(self) -> Constraint: ...


class _Scoped:
    """Which requests a constraint covers: the named ones (all when none is named); a request named ``parent`` covers
    whichever alternative is chosen, ``parent/sub`` only that one."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute

    def applies(self, request: str, sub: str | None) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (sub is not None and f"{request}/{sub}" in self.requests)

    def _over(self) -> str:
        return ", ".join(sorted(self.requests)) if self.requests else "every request"


class MatchAttribute(_Scoped):
    """``matchAttribute`` (``matchAttributeConstraint``): every device has the attribute, all with one value (the first
    device fixes it)."""

    exact = True  # "n identical devices at once" is the same as one by one

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: tuple[str, Any] | None = None
        self.devices = 0

    def add(self, request: str, sub: str | None, value: tuple[str, Any] | None, n: int) -> bool:
        if not self.applies(request, sub):
            return True
        if value is None:
            return False
        if self.devices == 0:
            self.value = value
        elif value != self.value:
            return False
        self.devices += n
        return True

    def remove(self, request: str, sub: str | None, n: int) -> None:
        if not self.applies(request, sub):
            return
        self.devices -= n
        if self.devices == 0:
            self.value = None

    def describe(self) -> str:
        return f"constraint match_attribute {self.attribute} over {self._over()}"

    def fresh(self) -> MatchAttribute:
        return MatchAttribute(sorted(self.requests), self.attribute)


class DistinctAttribute(_Scoped):
    """``distinctAttribute`` (``distinctAttributeConstraint``): every device has the attribute, each a value the others
    do not have. As upstream, the values it compares with are kept per request: a request's latest device stands for
    it, and removing a device forgets its request's value."""

    exact = False  # upstream's bookkeeping is per device: the allocator searches device by device

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.values: dict[str, tuple[str, Any]] = {}
        self.devices = 0

    def add(self, request: str, sub: str | None, value: tuple[str, Any] | None, n: int) -> bool:
        if self.requests and not self.applies(request, sub):
            return True
        if value is None:
            return False
        if self.devices and any(v == value for v in self.values.values()):
            return False
        self.values[request] = value
        self.devices += n
        return True

    def remove(self, request: str, sub: str | None, n: int) -> None:
        if self.requests and not self.applies(request, sub):
            return
        self.values.pop(request, None)
        self.devices -= n

    def describe(self) -> str:
        return f"constraint distinct_attribute {self.attribute} over {self._over()}"

    def fresh(self) -> DistinctAttribute:
        return DistinctAttribute(sorted(self.requests), self.attribute)


def make(requests: Sequence[str], match_attribute: str | None, distinct_attribute: str | None) -> Constraint:
    """The constraint a ``DeviceConstraint`` (its fields) declares."""
    if distinct_attribute is not None:
        return DistinctAttribute(requests, distinct_attribute)
    return MatchAttribute(requests, match_attribute or "")
