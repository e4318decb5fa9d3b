# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The DRA API shapes the fleet model uses beyond design.md §2-§3a: ``resource.k8s.io/v1`` in our snake_case
(design.md §12), validated as the API server validates them, with Kubernetes' limits as constants.

* device taints (``DeviceTaint``) and request tolerations (``DeviceToleration``; KEP-5055);
* consumable capacity: a device's ``allow_multiple_allocations``, a capacity's ``request_policy`` and a request's
  ``capacity.requests`` (KEP-5075);
* partitionable devices: a class's ``shared_counters`` and a device's ``consumes_counters`` (KEP-4815).

At the bottom of module_utils: it imports nothing of the fleet model (``models.py`` re-exports what the inventory
uses). Keys that are Kubernetes' own (a toleration's ``tolerationSeconds``) keep Kubernetes' spelling.
"""

from __future__ import annotations

from typing import Any, Literal

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_label_key, is_label_value

try:
    from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
except ImportError:  # pragma: no cover - exercised by ansible-test's import sanity test

    class BaseModel:  # type: ignore[no-redef]
        """Stand-in so this file imports without pydantic (models.require_pydantic() guards every entry point)."""

    def ConfigDict(**kwargs: Any) -> dict[str, Any]:  # type: ignore[no-redef]
        return kwargs

    def Field(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        return None

    def field_validator(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        return lambda f: f

    def model_validator(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        return lambda f: f


# Kubernetes' limits (k8s.io/api/resource/v1 types.go).
DEVICE_TAINTS_MAX = 16  # DeviceTaintsMaxLength
DEVICE_TOLERATIONS_MAX = 16  # DeviceTolerationsMaxLength
COUNTER_SETS_MAX = 8  # ResourceSliceMaxCounterSets
COUNTERS_PER_SET_MAX = 32  # ResourceSliceMaxCountersPerCounterSet
COUNTER_CONSUMPTIONS_MAX = 2  # ResourceSliceMaxDeviceCounterConsumptionsPerDevice
COUNTERS_PER_CONSUMPTION_MAX = 32  # ResourceSliceMaxCountersPerDeviceCounterConsumption
VALID_VALUES_MAX = 10  # CapacityRequestPolicyDiscreteMaxOptions

_QUALIFIED_RULE = (
    "an optional DNS subdomain prefix of at most 253 characters and '/', then a name of at most 63 letters, digits, "
    "'-', '_' and '.', starting and ending alphanumeric"
)
_VALUE_RULE = "empty, or at most 63 letters, digits, '-', '_' and '.', starting and ending alphanumeric"

TaintEffect = Literal["NoSchedule", "NoExecute", "None"]
#: Effects that keep an untolerated device from being allocated (upstream ``taintPreventsAllocation``).
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


def _taint_key(value: Any) -> Any:
    if not isinstance(value, str) or not is_label_key(value):
        raise ValueError(f"must be a taint key, {_QUALIFIED_RULE} (got {value!r})")
    return value


def _taint_value(value: Any) -> Any:
    if value is not None and (not isinstance(value, str) or not is_label_value(value)):
        raise ValueError(f"must be a taint value: a string, {_VALUE_RULE} (got {value!r})")
    return value


# --------------------------------------------------------------------------------------------------------------------
# Device taints and tolerations (KEP-5055)
# --------------------------------------------------------------------------------------------------------------------


class DeviceTaint(_Strict):
    """A taint on a device (``resource.k8s.io/v1`` DeviceTaint): ``NoSchedule`` keeps claims that do not tolerate it
    from being allocated the device, ``NoExecute`` also evicts pods using it, ``None`` has no effect on scheduling."""

    key: str
    value: str | None = None
    effect: TaintEffect

    _key = field_validator("key")(classmethod(lambda cls, v: _taint_key(v)))
    _value = field_validator("value")(classmethod(lambda cls, v: _taint_value(v or None)))

    @property
    def blocks(self) -> bool:
        return self.effect in BLOCKING_EFFECTS

    def text(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key}
        if self.value:
            out["value"] = self.value
        out["effect"] = self.effect
        return out


class DeviceToleration(_Strict):
    """A request's toleration of device taints (``resource.k8s.io/v1`` DeviceToleration), Kubernetes' spelling:
    ``Exists`` matches any value (an empty key with ``Exists``: every taint), ``Equal`` (the default) the same value;
    an empty effect tolerates every effect; ``tolerationSeconds`` bounds how long a ``NoExecute`` taint is tolerated."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: TaintEffect | None = None
    tolerationSeconds: int | None = Field(default=None, strict=True)

    @field_validator("key")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        return _taint_key(v) if v else None

    @field_validator("effect", mode="before")
    @classmethod
    def _every_effect(cls, v: Any) -> Any:
        return None if v == "" else v

    @model_validator(mode="after")
    def _k8s_rules(self) -> DeviceToleration:
        if self.operator == "Exists" and self.value:
            raise ValueError(f"value must be empty when operator is Exists (got {self.value!r})")
        if self.operator == "Equal":
            _taint_value(self.value or None)
        return self

    def tolerates(self, taint: DeviceTaint) -> bool:
        """Upstream ``resourceclaim.ToleratesTaint``."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return (self.value or "") == (taint.value or "")

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.key:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value:
            out["value"] = self.value
        if self.effect is not None:
            out["effect"] = self.effect
        if self.tolerationSeconds is not None:
            out["tolerationSeconds"] = self.tolerationSeconds
        return out


def untolerated(taints: tuple[DeviceTaint, ...], tolerations: tuple[DeviceToleration, ...]) -> DeviceTaint | None:
    """The first taint that keeps a request with ``tolerations`` off the device, or None.

    The allocator (upstream ``taintPreventsAllocation``) skips a device whose ``NoSchedule`` or ``NoExecute`` taint no
    toleration tolerates. A pod allocated a device with a ``NoExecute`` taint is then evicted by kube-controller-manager's
    device taint eviction controller unless a toleration *with effect* ``NoExecute`` tolerates it, for ever (no
    ``tolerationSeconds``; ``pkg/controller/devicetainteviction``): an effect-less toleration lets the claim be
    allocated, and its pod deleted moments later. Placement only counts what stays, so for a ``NoExecute`` taint it
    asks for such a toleration."""
    for taint in taints:
        if not taint.blocks:
            continue
        if taint.effect == "NoExecute":
            if not any(
                t.effect == "NoExecute" and t.tolerationSeconds is None and t.tolerates(taint) for t in tolerations
            ):
                return taint
        elif not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


# --------------------------------------------------------------------------------------------------------------------
# Quantities
# --------------------------------------------------------------------------------------------------------------------


def quantity(value: Any) -> Any:
    """A Kubernetes quantity (``80Gi``); ints are accepted and normalised to str."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"must be a Kubernetes quantity such as 80Gi (got {value!r})")
    text = str(value)
    try:
        parse_quantity(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a Kubernetes quantity ({exc})") from None
    return text


def q(text: str) -> Any:
    """The parsed quantity (``quantity.Quantity``) of a validated string."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

    return parse_quantity(text)


# --------------------------------------------------------------------------------------------------------------------
# Consumable capacity (KEP-5075)
# --------------------------------------------------------------------------------------------------------------------


class CapacityRequestPolicyRange(_Strict):
    """``validRange``: requests round up to ``min + k * step`` (at least ``min``), and may not exceed ``max``."""

    min: str
    max: str | None = None
    step: str | None = None

    _q = field_validator("min", "max", "step", mode="before")(
        classmethod(lambda cls, v: v if v is None else quantity(v))
    )

    def to_k8s(self) -> dict[str, Any]:
        return {k: v for k, v in (("min", self.min), ("max", self.max), ("step", self.step)) if v is not None}


class CapacityRequestPolicy(_Strict):
    """How requests consume a shared device's capacity (``requestPolicy``): ``default`` when a request names none;
    ``valid_values`` (at most 10, ascending) or ``valid_range``, to which requests round up."""

    default: str | None = None
    valid_values: list[str] = Field(default_factory=list, max_length=VALID_VALUES_MAX)
    valid_range: CapacityRequestPolicyRange | None = None

    _q = field_validator("default", mode="before")(classmethod(lambda cls, v: v if v is None else quantity(v)))

    @field_validator("valid_values", mode="before")
    @classmethod
    def _values(cls, v: Any) -> Any:
        return [quantity(x) for x in v] if isinstance(v, list) else v

    def check(self, capacity: str) -> None:
        """Upstream ``validateRequestPolicy`` against the capacity's ``value`` (raises ``ValueError``)."""
        cap = q(capacity)
        if self.valid_values and self.valid_range is not None:
            raise ValueError("set valid_values or valid_range, not both")
        values = [q(v) for v in self.valid_values]
        for k in range(1, len(values)):
            if values[k - 1].cmp(values[k]) > 0:
                raise ValueError(
                    f"valid_values must be sorted in ascending order ({self.valid_values[k]} after "
                    f"{self.valid_values[k - 1]})"
                )
        if len({str(v) for v in values}) != len(values):
            raise ValueError("valid_values must not repeat a value")
        for text, value in zip(self.valid_values, values, strict=True):
            if value.cmp(cap) > 0:
                raise ValueError(f"valid value {text} is larger than the capacity's value {capacity}")
        if (self.valid_values or self.valid_range is not None) and self.default is None:
            raise ValueError("default is required with valid_values or valid_range")
        if self.default is None:
            return
        default = q(self.default)
        if self.valid_values and not any(default.cmp(v) == 0 for v in values):
            raise ValueError(f"default {self.default} is not one of valid_values")
        r = self.valid_range
        if r is None:
            return
        lo = q(r.min)
        if lo.cmp(cap) > 0:
            raise ValueError(f"valid_range.min {r.min} is larger than the capacity's value {capacity}")
        if default.cmp(lo) < 0:
            raise ValueError(f"default {self.default} is less than valid_range.min {r.min}")
        if r.max is not None:
            hi = q(r.max)
            if lo.cmp(hi) > 0:
                raise ValueError(f"valid_range.min {r.min} is larger than valid_range.max {r.max}")
            if hi.cmp(cap) > 0:
                raise ValueError(f"valid_range.max {r.max} is larger than the capacity's value {capacity}")
            if default.cmp(hi) > 0:
                raise ValueError(f"default {self.default} is more than valid_range.max {r.max}")
        if r.step is not None:
            step = q(r.step).value_ceil()
            if step <= 0:
                raise ValueError(f"valid_range.step must be greater than zero (got {r.step})")
            if lo.add(q(r.step)).cmp(cap) > 0:
                raise ValueError(f"one valid_range.step from min is larger than the capacity's value {capacity}")
            for name, bound in (("default", self.default), ("valid_range.max", r.max)):
                if bound is not None and (q(bound).value_ceil() - lo.value_ceil()) % step:
                    raise ValueError(f"{name} {bound} is not min {r.min} plus a multiple of step {r.step}")

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.default is not None:
            out["default"] = self.default
        if self.valid_values:
            out["validValues"] = list(self.valid_values)
        if self.valid_range is not None:
            out["validRange"] = self.valid_range.to_k8s()
        return out

    # -- upstream's consumable_capacity.go -------------------------------------------------------------------------

    def consumed(self, requested: Any | None, capacity: Any) -> Any:
        """``calculateConsumedCapacity``: what a request of ``requested`` (None: it names none) consumes."""
        if requested is None:
            return q(self.default) if self.default is not None else capacity
        r = self.valid_range
        if r is not None:
            lo = q(r.min)
            if requested.cmp(lo) < 0:
                return lo
            if r.step is None:
                return requested
            step, base = q(r.step).value_ceil(), lo.value_ceil()
            n, mod = divmod(requested.value_ceil() - base, step)
            from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import Quantity

            return Quantity.from_int(base + step * (n + (1 if mod else 0)), "BinarySI")
        if self.valid_values:
            for v in (q(x) for x in self.valid_values):
                if requested.cmp(v) <= 0:
                    return v
        return requested

    def violated(self, consumed: Any) -> bool:
        """``violatesPolicy``: the consumed amount is not one the policy allows."""
        if self.default is not None and consumed.cmp(q(self.default)) == 0:
            return False
        r = self.valid_range
        if r is not None:
            if r.max is not None and consumed.cmp(q(r.max)) > 0:
                return True
            if r.step is not None:
                return bool((consumed.value_ceil() - q(r.min).value_ceil()) % q(r.step).value_ceil())
            return False
        if self.valid_values:
            return not any(consumed.cmp(q(v)) == 0 for v in self.valid_values)
        return False


class CapacityRequirements(_Strict):
    """A request's ``capacity``: how much of each capacity of a device it consumes (``requests``)."""

    requests: dict[str, str] = Field(default_factory=dict)

    @field_validator("requests", mode="before")
    @classmethod
    def _quantities(cls, v: Any) -> Any:
        return {k: quantity(x) for k, x in v.items()} if isinstance(v, dict) else v

    def to_k8s(self) -> dict[str, Any]:
        return {"requests": dict(self.requests)}


# --------------------------------------------------------------------------------------------------------------------
# Partitionable devices (KEP-4815): counter sets a node's devices consume
# --------------------------------------------------------------------------------------------------------------------


class Counter(_Strict):
    value: str

    _q = field_validator("value", mode="before")(classmethod(lambda cls, v: quantity(v)))


def _counter_names(v: Any) -> Any:
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_dns_label

    if isinstance(v, dict):
        for key in v:
            if not isinstance(key, str) or not is_dns_label(key):
                raise ValueError(f"counter name {key!r} must be a DNS label")
        if len(v) > COUNTERS_PER_SET_MAX:
            raise ValueError(f"{len(v)} counters; Kubernetes allows at most {COUNTERS_PER_SET_MAX}")
        if not v:
            raise ValueError("must name at least one counter")
    return v


def expand(template: str, i: int) -> str:
    """``gpu-{i}-counters`` / ``gpu-{i//2}-counters`` for device (or counter set) ``i`` of an entry."""
    import re

    def sub(m: Any) -> str:
        div = m.group(1)
        return str(i // int(div) if div else i)

    return re.sub(r"\{i(?://(\d+))?\}", sub, template)


def check_template(value: str, what: str) -> str:
    import re

    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_dns_label

    for div in re.findall(r"\{i//(\d+)\}", value):
        if int(div) < 1:
            raise ValueError(f"{what} {value!r}: {{i//N}} needs N >= 1")
    if not is_dns_label(expand(value, 0)):
        raise ValueError(f"{what} {value!r} must be a DNS label once {{i}} / {{i//N}} are expanded")
    return value


class CounterSet(_Strict):
    """``sharedCounters``: a set of counters devices consume (one per GPU, as the NVIDIA driver publishes MIG).
    ``count`` sets named by ``name`` with ``{i}`` (``gpu-{i}-counters``) expanded for ``i`` in ``0..count-1``."""

    name: str
    count: int = Field(default=1, ge=1, le=COUNTER_SETS_MAX, strict=True)
    counters: dict[str, Counter]

    _name = field_validator("name")(classmethod(lambda cls, v: check_template(v, "counter set name")))
    _counters = field_validator("counters", mode="before")(classmethod(lambda cls, v: _counter_names(v)))

    def names(self) -> list[str]:
        return [expand(self.name, i) for i in range(self.count)]


class DeviceCounterConsumption(_Strict):
    """``consumesCounters``: what a device takes from a counter set while allocated; ``counter_set`` may use ``{i}`` /
    ``{i//N}`` (the device's index in its entry)."""

    counter_set: str
    counters: dict[str, Counter]

    _set = field_validator("counter_set")(classmethod(lambda cls, v: check_template(v, "counter_set")))
    _counters = field_validator("counters", mode="before")(classmethod(lambda cls, v: _counter_names(v)))
