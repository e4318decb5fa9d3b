# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Typed fleet data model (pydantic v2): inference classes, clusters, model deployments, model caches.

Shapes and names follow ``docs/fleet.md`` (design.md §1-3, §5). Our own keys are snake_case; anything that is a
Kubernetes object or a piece of one (pod ``template``, ``tolerations``, DRA attribute names) passes through with
Kubernetes' own spelling.

Every public entry point turns pydantic's errors into :class:`FleetValidationError` whose lines read
``<variable>[i].field.path: reason`` so a user can find the bad value in their inventory.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Annotated, Any, Literal

from ansible_collections.gpufleet.serving.plugins.module_utils.dra.api import (
    COUNTER_CONSUMPTIONS_MAX,
    COUNTER_SETS_MAX,
    DEVICE_TAINTS_MAX,
    DEVICE_TOLERATIONS_MAX,
    CapacityRequestPolicy,
    CapacityRequirements,
    CounterSet,
    DeviceCounterConsumption,
    DeviceTaint,
    DeviceToleration,
    expand,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import supported as supported_kubernetes
from ansible_collections.gpufleet.serving.plugins.module_utils.redact import (
    describe,
    has_userinfo,
    redact_text,
    redact_url,
    url_credentials,
)

try:
    from pydantic import (
        AfterValidator,
        BaseModel,
        ConfigDict,
        Field,
        ValidationError,
        ValidationInfo,
        WithJsonSchema,
        field_validator,
        model_validator,
    )

    HAS_PYDANTIC = True
    PYDANTIC_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - exercised by ansible-test's import sanity test
    HAS_PYDANTIC = False
    PYDANTIC_IMPORT_ERROR = traceback.format_exc()

    class BaseModel:  # type: ignore[no-redef]
        """Stand-in so this file imports without pydantic; every entry point calls require_pydantic()."""

    class ValidationError(Exception):  # type: ignore[no-redef]
        pass

    class ValidationInfo:  # type: ignore[no-redef]
        data: dict[str, Any]

    def ConfigDict(**kwargs: Any) -> dict[str, Any]:  # type: ignore[no-redef]
        return kwargs

    def AfterValidator(func: Any) -> Any:  # type: ignore[no-redef]
        return None

    def WithJsonSchema(schema: Any) -> Any:  # type: ignore[no-redef]
        return None

    def Field(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        return None

    def field_validator(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        return lambda f: f

    def model_validator(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        return lambda f: f


def require_pydantic() -> None:
    if not HAS_PYDANTIC:
        raise GpufleetError(
            f"gpufleet.serving needs the Python library pydantic>=2 on the controller: {PYDANTIC_IMPORT_ERROR}"
        )


# --------------------------------------------------------------------------------------------------------------------
# Scalar checks
# --------------------------------------------------------------------------------------------------------------------

DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A DRA attribute / capacity name: optional "<dns subdomain>/" domain, then a C identifier of at most 32 characters.
QUALIFIED_NAME_RE = re.compile(
    r"^(?:(?P<domain>[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?(?P<id>[A-Za-z_][A-Za-z0-9_]{0,31})$"
)
TAINT_KEY_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def check_dns_label(value: str) -> str:
    if len(value) > 63 or not DNS_LABEL_RE.fullmatch(value):  # fullmatch: "$" would let "name\n" through
        raise ValueError(
            f"{value!r} must be a DNS label: at most 63 lowercase letters, digits and '-', starting and ending alphanumeric"
        )
    return value


def check_dns_subdomain(value: str) -> str:
    if len(value) > 253 or not DNS_SUBDOMAIN_RE.fullmatch(value):
        raise ValueError(f"{value!r} must be a DNS subdomain (lowercase, e.g. gpu.nvidia.com)")
    return value


# Names and keys the API server validates in what we render (k8s.io/apimachinery/pkg/util/validation; the name rules
# themselves are contract.py's). Messages read "must be ... (got 'x')".
ANNOTATIONS_SIZE_MAX = 256 * 1024  # TotalAnnotationSizeLimitB: one object's annotation keys and values together
_DNS_LABEL_RULE = "a DNS label: at most 63 lowercase letters, digits and '-', starting and ending alphanumeric"
_DNS_SUBDOMAIN_RULE = "a DNS subdomain: at most 253 characters, DNS labels joined by '.'"
_QUALIFIED_NAME_RULE = (
    "an optional DNS subdomain prefix of at most 253 characters and '/', then a name of at most 63 letters, digits, "
    "'-', '_' and '.', starting and ending alphanumeric"
)
_LABEL_VALUE_RULE = "empty, or at most 63 letters, digits, '-', '_' and '.', starting and ending alphanumeric"


def check_k8s_name(value: str, what: str, *, subdomain: bool = False) -> str:
    """``value`` names a Kubernetes object: a DNS label (namespaces, ...) or a DNS subdomain (most other objects)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_dns_label, is_dns_subdomain

    if not (is_dns_subdomain(value) if subdomain else is_dns_label(value)):
        raise ValueError(f"must be {what}, {_DNS_SUBDOMAIN_RULE if subdomain else _DNS_LABEL_RULE} (got {value!r})")
    return value


def check_label_key(value: Any, what: str = "a label key") -> str:
    """A label key, node-selector key or toleration key: Kubernetes' qualified name (IsQualifiedName)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_label_key

    if not isinstance(value, str) or not is_label_key(value):
        raise ValueError(f"must be {what}, {_QUALIFIED_NAME_RULE} (got {value!r})")
    return value


def check_label_value(value: Any, what: str = "a label value") -> str:
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_label_value

    if not is_label_value(value):
        raise ValueError(f"must be {what}: a string, {_LABEL_VALUE_RULE} (got {value!r})")
    return value


def check_annotation_key(value: Any) -> str:
    """An annotation key: a qualified name once lower-cased (ValidateAnnotations lower-cases the key first)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_label_key

    if not isinstance(value, str) or not is_label_key(value.lower()):
        raise ValueError(f"must be an annotation key, {_QUALIFIED_NAME_RULE} (got {value!r})")
    return value


def label_errors(labels: Any, path: str, what: str = "label") -> list[tuple[str, str]]:
    """``(path, reason)`` for a ``{key: value}`` map of labels or node-selector terms at ``path``."""
    if not isinstance(labels, Mapping):
        return [(path, f"must be a mapping of {what} keys to values (got {type(labels).__name__})")]
    out: list[tuple[str, str]] = []
    for key, value in labels.items():
        try:
            check_label_key(key, f"a {what} key")
            check_label_value(value, f"a {what} value")
        except ValueError as exc:
            out.append((format_loc(path, (key,)), str(exc)))
    return out


def annotation_errors(annotations: Any, path: str) -> list[tuple[str, str]]:
    """``(path, reason)`` for an object's annotations at ``path``: qualified-name keys, string values, 256 KiB in all."""
    if not isinstance(annotations, Mapping):
        return [(path, f"must be a mapping of annotation keys to values (got {type(annotations).__name__})")]
    out: list[tuple[str, str]] = []
    size = 0
    for key, value in annotations.items():
        try:
            check_annotation_key(key)
        except ValueError as exc:
            out.append((format_loc(path, (key,)), str(exc)))
            continue
        if not isinstance(value, str):
            out.append((format_loc(path, (key,)), f"must be a string (got {type(value).__name__}): quote it"))
            continue
        size += len(key.encode()) + len(value.encode())
    if size > ANNOTATIONS_SIZE_MAX:
        out.append((path, f"total {size} bytes of keys and values; Kubernetes allows at most {ANNOTATIONS_SIZE_MAX}"))
    return out


# Strict scalars: YAML 1.1 turns ``yes``/``on``/``true`` into booleans, and a boolean is an int subclass in Python, so a
# lax int field would read ``replicas: yes`` as 1. Fleet data takes real integers and real booleans only.
StrictInt = Annotated[int, Field(strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]

# Kubernetes' limits on DRA attribute values (resource.k8s.io/v1 DeviceAttribute) and names.
ATTRIBUTE_STRING_MAX = 64
ATTRIBUTE_VERSION_MAX = 64
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
QUALIFIED_DOMAIN_MAX = 63
DRIVER_NAME_MAX = 63

# Kubernetes' limits on ResourceClaims and ResourceSlices (k8s.io/api/resource/v1 types.go).
CLAIM_DEVICES_MAX = 32  # AllocationResultsMaxSize: devices one claim can be allocated
DEVICE_REQUESTS_MAX = 32  # DeviceRequestsMaxSize
DEVICE_CONSTRAINTS_MAX = 32  # DeviceConstraintsMaxSize
DEVICE_SELECTORS_MAX = 32  # DeviceSelectorsMaxSize
FIRST_AVAILABLE_MAX = 8  # FirstAvailableDeviceRequestMaxSize
SLICE_DEVICES_MAX = 128  # ResourceSliceMaxDevices: devices one driver publishes for a node in one slice
SLICE_DEVICES_ADVANCED_MAX = 64  # ResourceSliceMaxDevicesWithAdvancedFeatures: when a device has taints or counters


def check_quantity(value: Any) -> str:
    """Accept a Kubernetes quantity (``23034Mi``, ``80Gi``, ``1.5``); ints are accepted and normalised to str."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{describe(value)} must be a Kubernetes quantity such as 80Gi")
    text = str(value)
    from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

    try:
        parse_quantity(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a Kubernetes quantity ({exc})") from None
    return text


def check_positive_quantity(value: Any) -> str:
    """:func:`check_quantity`, greater than zero (a volume size: ``0`` or ``-5Gi`` is no size)."""
    text = check_quantity(value)
    from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

    if parse_quantity(text).sign() <= 0:
        raise ValueError(f"must be greater than zero, such as 20Gi (got {text!r})")
    return text


class _Strict(BaseModel):
    """Our own snake_case objects: unknown keys are errors (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --------------------------------------------------------------------------------------------------------------------
# Inference classes (design.md §2)
# --------------------------------------------------------------------------------------------------------------------


class AttributeValue(_Strict):
    """A DRA device attribute: exactly one of string, version, bool, int (resource.k8s.io/v1 DeviceAttribute)."""

    string: Annotated[str, Field(strict=True)] | None = None
    version: Annotated[str, Field(strict=True)] | None = None
    bool_: StrictBool | None = Field(default=None, alias="bool")
    int_: StrictInt | None = Field(default=None, alias="int")

    @model_validator(mode="before")
    @classmethod
    def _exactly_one(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"must be a mapping with exactly one of string, version, bool, int (got {data!r})")
        keys = [k for k in ("string", "version", "bool", "int") if data.get(k) is not None]
        if len(keys) != 1:
            raise ValueError(f"must set exactly one of string, version, bool, int (got {', '.join(keys) or 'none'})")
        if "bool" in keys and not isinstance(data["bool"], bool):
            raise ValueError(f"bool must be true or false (got {data['bool']!r})")
        if "int" in keys and (isinstance(data["int"], bool) or not isinstance(data["int"], int)):
            raise ValueError(f"int must be an integer (got {data['int']!r})")
        if "int" in keys and not INT64_MIN <= data["int"] <= INT64_MAX:
            raise ValueError(f"int {data['int']} is outside the int64 range Kubernetes accepts")
        if "string" in keys and isinstance(data["string"], str) and len(data["string"]) > ATTRIBUTE_STRING_MAX:
            raise ValueError(
                f"string is {len(data['string'])} characters; Kubernetes allows at most {ATTRIBUTE_STRING_MAX}"
            )
        if "version" in keys and isinstance(data["version"], str) and len(data["version"]) > ATTRIBUTE_VERSION_MAX:
            raise ValueError(
                f"version is {len(data['version'])} characters; Kubernetes allows at most {ATTRIBUTE_VERSION_MAX}"
            )
        if "version" in keys:
            from ansible_collections.gpufleet.serving.plugins.module_utils.semver import parse_semver

            try:
                parse_semver(str(data["version"]))
            except ValueError:
                raise ValueError(f"version {data['version']!r} must be a semantic version such as 8.9.0") from None
        return data

    def as_k8s(self) -> dict[str, Any]:
        for key, value in (
            ("string", self.string),
            ("version", self.version),
            ("bool", self.bool_),
            ("int", self.int_),
        ):
            if value is not None:
                return {key: value}
        raise AssertionError("validated AttributeValue has no value")  # pragma: no cover


class CapacityValue(_Strict):
    value: str
    # design.md §12: how requests consume the capacity of a device with ``allow_multiple_allocations``.
    request_policy: CapacityRequestPolicy | None = None

    _check = field_validator("value", mode="before")(classmethod(lambda cls, v: check_quantity(v)))

    @model_validator(mode="after")
    def _policy(self) -> CapacityValue:
        if self.request_policy is not None:
            self.request_policy.check(self.value)
        return self

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value}
        if self.request_policy is not None:
            out["requestPolicy"] = self.request_policy.to_k8s()
        return out


def _check_qualified_names(v: dict[str, Any]) -> dict[str, Any]:
    for key in v:
        match = QUALIFIED_NAME_RE.fullmatch(key)
        if not match or len(match.group("domain") or "") > QUALIFIED_DOMAIN_MAX:
            raise ValueError(
                f"{key!r} is not a DRA attribute/capacity name: a C identifier of at most 32 characters, "
                f"optionally prefixed by a domain of at most {QUALIFIED_DOMAIN_MAX} characters (example.com/name)"
            )
    return v


class DeviceInstance(_Strict):
    """One device of a class entry whose devices differ (design.md §2a): values overlaid on the shared ones; its
    ``taints`` are added to the entry's (design.md §12)."""

    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    capacity: dict[str, CapacityValue] = Field(default_factory=dict)
    taints: list[DeviceTaint] = Field(default_factory=list, max_length=DEVICE_TAINTS_MAX)

    _qualified = field_validator("attributes", "capacity")(classmethod(lambda cls, v: _check_qualified_names(v)))


class Device(_Strict):
    """One kind of device on a node of the class, as a ResourceSlice would publish it."""

    name: str
    claim: Literal["DRA", "Synthetic"] = "DRA"
    driver: str
    device_class_name: str | None = None
    count: StrictInt = Field(default=1, ge=1, le=128)
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    capacity: dict[str, CapacityValue] = Field(default_factory=dict)
    # design.md §2a: the ``count`` devices one by one, each overlaid over the shared attributes and capacity.
    instances: list[DeviceInstance] | None = None
    # design.md §12: taints on every device of the entry (an instance adds its own); usually observed, not declared.
    taints: list[DeviceTaint] = Field(default_factory=list, max_length=DEVICE_TAINTS_MAX)
    # design.md §12: consumable capacity -- several claims may be allocated the device, each consuming capacity.
    allow_multiple_allocations: StrictBool = False
    # design.md §12: partitionable devices -- counters of the class's shared_counters the device takes while allocated.
    consumes_counters: list[DeviceCounterConsumption] = Field(default_factory=list, max_length=COUNTER_CONSUMPTIONS_MAX)

    _name = field_validator("name")(classmethod(lambda cls, v: check_dns_label(v)))
    _driver = field_validator("driver")(classmethod(lambda cls, v: _check_driver(v)))

    @field_validator("device_class_name")
    @classmethod
    def _dcn(cls, v: str | None) -> str | None:
        return None if v is None else check_dns_subdomain(v)

    @field_validator("attributes", "capacity")
    @classmethod
    def _qualified(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_qualified_names(v)

    @model_validator(mode="after")
    def _instances_count(self) -> Device:
        if self.instances is not None and len(self.instances) != self.count:
            raise ValueError(
                f"instances lists {len(self.instances)} device(s) but count is {self.count}: list every device "
                "once, in order (device i is named <name>-<i>)"
            )
        return self

    @model_validator(mode="after")
    def _taints_per_device(self) -> Device:
        for i, inst in enumerate(self.instances or []):
            total = len(self.taints) + len(inst.taints)
            if total > DEVICE_TAINTS_MAX:
                raise ValueError(
                    f"device {self.name}-{i} has {total} taints (the entry's and instances[{i}]'s); Kubernetes allows "
                    f"at most {DEVICE_TAINTS_MAX} per device"
                )
        return self

    @model_validator(mode="after")
    def _consumable(self) -> Device:
        if not self.allow_multiple_allocations:
            tables = [("capacity", self.capacity)] + [
                (f"instances[{i}].capacity", inst.capacity) for i, inst in enumerate(self.instances or [])
            ]
            for where, table in tables:
                for name, cap in table.items():
                    if cap.request_policy is not None:
                        raise ValueError(
                            f"{where}[{name!r}].request_policy needs allow_multiple_allocations: true (a device "
                            "allocated to one claim at a time has no capacity to share)"
                        )
        sets = [c.counter_set for c in self.consumes_counters]
        if len(set(sets)) != len(sets):
            raise ValueError(f"consumes_counters names a counter set twice ({', '.join(sets)})")
        return self

    def counter_consumption(self, i: int) -> list[tuple[str, dict[str, str]]]:
        """``(counter set, {counter: quantity})`` device ``i`` of the entry consumes (``{i}`` expanded)."""
        return [(expand(c.counter_set, i), {k: v.value for k, v in c.counters.items()}) for c in self.consumes_counters]

    def device_taints(self, i: int) -> tuple[DeviceTaint, ...]:
        """The taints of device ``i`` of the entry: the entry's, then its instance's."""
        own = self.instances[i].taints if self.instances is not None else []
        return (*self.taints, *own)

    def published_devices(self) -> list[dict[str, Any]]:
        """:meth:`slice_devices` as a ResourceSlice publishes them, with what CEL does not see: taints, capacity request
        policies, ``allowMultipleAllocations``, ``consumesCounters``."""
        out = []
        for i, dev in enumerate(self.slice_devices()):
            dev = dict(dev)
            policies = {
                **{k: v for k, v in self.capacity.items() if v.request_policy is not None},
                **(dict(self.instances[i].capacity) if self.instances is not None else {}),
            }
            for name, cap in policies.items():
                if cap.request_policy is not None:
                    dev["capacity"] = {**dev["capacity"], name: cap.to_k8s()}
            taints = self.device_taints(i)
            if taints:
                dev["taints"] = [t.to_k8s() for t in taints]
            if self.allow_multiple_allocations:
                dev["allowMultipleAllocations"] = True
            if self.consumes_counters:
                dev["consumesCounters"] = [
                    {"counterSet": name, "counters": {k: {"value": v} for k, v in counters.items()}}
                    for name, counters in self.counter_consumption(i)
                ]
            out.append(dev)
        return out

    @model_validator(mode="after")
    def _claim_needs_class(self) -> Device:
        if self.claim == "DRA" and not self.device_class_name:
            raise ValueError("device_class_name is required when claim is DRA (the DeviceClass its claims request)")
        return self

    def qualified(self, table: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Group ``attributes``/``capacity`` by domain; unqualified names belong to the driver's domain."""
        out: dict[str, dict[str, Any]] = {}
        for key, value in table.items():
            domain, ident = key.rsplit("/", 1) if "/" in key else (self.driver, key)
            out.setdefault(domain, {})[ident] = value
        return out

    def as_resource_slice_device(self) -> dict[str, Any]:
        """The device as a resource.k8s.io/v1 ResourceSlice device (what CEL selectors see)."""
        return {
            "name": self.name,
            "driver": self.driver,
            "attributes": {k: v.as_k8s() for k, v in self.attributes.items()},
            "capacity": {k: {"value": v.value} for k, v in self.capacity.items()},
        }

    def slice_devices(self) -> list[dict[str, Any]]:
        """The entry's ``count`` devices as a ResourceSlice publishes them (design.md §2a): device ``i`` is named
        ``<name>-<i>`` and has the shared attributes and capacity overlaid with ``instances[i]``."""
        base = self.as_resource_slice_device()
        out = []
        for i in range(self.count):
            attributes = dict(base["attributes"])
            capacity = dict(base["capacity"])
            if self.instances is not None:
                inst = self.instances[i]
                attributes.update({k: v.as_k8s() for k, v in inst.attributes.items()})
                capacity.update({k: {"value": v.value} for k, v in inst.capacity.items()})
            dev: dict[str, Any] = {
                "name": f"{self.name}-{i}",
                "driver": self.driver,
                "attributes": attributes,
                "capacity": capacity,
            }
            if self.allow_multiple_allocations:  # what CEL's device.allowMultipleAllocations reads
                dev["allowMultipleAllocations"] = True
            out.append(dev)
        return out


class GkeAccelerator(_Strict):
    type: str
    count: StrictInt = Field(ge=1, le=16)
    gpu_driver_version: Literal["DISABLED", "DEFAULT", "LATEST", "INSTALLATION_DISABLED"] = "DISABLED"


class GkeProvisioning(_Strict):
    machine_type: str
    accelerator: GkeAccelerator | None = None
    disk_size_gb: StrictInt = Field(default=100, ge=10)
    disk_type: str = "pd-balanced"
    spot: StrictBool = False
    image_type: str = "COS_CONTAINERD"
    # A specific Compute Engine reservation to consume (``name`` or ``projects/P/reservations/NAME``); none: any.
    reservation: str | None = None

    @model_validator(mode="after")
    def _spot_or_reservation(self) -> GkeProvisioning:
        if self.spot and self.reservation:
            raise ValueError("spot and reservation exclude each other: Spot VMs cannot consume a reservation")
        return self


class EksProvisioning(_Strict):
    instance_type: str
    ami_type: str = "AL2023_x86_64_NVIDIA"
    disk_size_gb: StrictInt = Field(default=200, ge=10)
    capacity_type: Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"] = "ON_DEMAND"
    # The EC2 Capacity Block (a capacity reservation, ``cr-...``) a CAPACITY_BLOCK nodegroup launches into.
    capacity_reservation_id: str | None = Field(default=None, pattern=r"^cr-[0-9a-f]{8,17}$")

    @model_validator(mode="after")
    def _reservation_for_blocks(self) -> EksProvisioning:
        if self.capacity_reservation_id and self.capacity_type != "CAPACITY_BLOCK":
            raise ValueError("capacity_reservation_id is only used when capacity_type is CAPACITY_BLOCK")
        return self


class Provisioning(_Strict):
    gke: GkeProvisioning | None = None
    eks: EksProvisioning | None = None


class InferenceClass(_Strict):
    description: str | None = None
    provisioning: Provisioning = Field(default_factory=Provisioning)
    devices: list[Device] = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)
    # design.md §12: partitionable devices -- counter sets the devices consume (a GPU and its MIG profiles).
    shared_counters: list[CounterSet] = Field(default_factory=list)

    @model_validator(mode="after")
    def _counters(self) -> InferenceClass:
        sets: dict[str, dict[str, Any]] = {}
        for cs in self.shared_counters:
            for name in cs.names():
                if name in sets:
                    raise ValueError(f"shared_counters names counter set {name!r} twice")
                sets[name] = cs.counters
        drivers: dict[str, str] = {}
        for d in self.devices:
            for i in range(d.count):
                for name, counters in d.counter_consumption(i):
                    have = sets.get(name)
                    if have is None:
                        known = ", ".join(sets) or "none"
                        raise ValueError(
                            f"device {d.name}-{i} consumes counter set {name!r}, which shared_counters does not define "
                            f"(defined: {known})"
                        )
                    missing = sorted(set(counters) - set(have))
                    if missing:
                        raise ValueError(
                            f"device {d.name}-{i} consumes counter(s) {', '.join(missing)} that counter "
                            f"set {name!r} does not have"
                        )
                    if drivers.setdefault(name, d.driver) != d.driver:
                        raise ValueError(
                            f"counter set {name!r} is consumed by devices of {drivers[name]} and {d.driver}: a counter "
                            "set belongs to one driver's ResourceSlices"
                        )
        per_driver: dict[str, int] = {}
        for name in sets:
            driver = drivers.get(name, "")
            per_driver[driver] = per_driver.get(driver, 0) + 1
        for driver, n in sorted(per_driver.items()):
            if n > COUNTER_SETS_MAX:
                raise ValueError(
                    f"{n} counter sets for driver {driver or '(unused)'}; a ResourceSlice holds at most "
                    f"{COUNTER_SETS_MAX}"
                )
        return self

    def counter_sets(self) -> dict[str, dict[str, dict[str, str]]]:
        """``{driver: {counter set: {counter: quantity}}}``: what each driver's slices publish as sharedCounters."""
        owner: dict[str, str] = {}
        for d in self.devices:
            for i in range(d.count):
                for name, _counters in d.counter_consumption(i):
                    owner.setdefault(name, d.driver)
        out: dict[str, dict[str, dict[str, str]]] = {}
        for cs in self.shared_counters:
            for name in cs.names():
                if name in owner:
                    out.setdefault(owner[name], {})[name] = {k: v.value for k, v in cs.counters.items()}
        return out

    @field_validator("devices")
    @classmethod
    def _unique_devices(cls, v: list[Device]) -> list[Device]:
        _no_duplicates([d.name for d in v], "device name")
        published = {f"{d.name}-{i}": d.name for d in v for i in range(d.count)}
        for d in v:
            if d.name in published and published[d.name] != d.name:
                raise ValueError(
                    f"device name {d.name!r} is also the name of device {d.name!r} of entry {published[d.name]!r} "
                    "(an entry's devices are named <name>-<i>)"
                )
        per_driver: dict[str, int] = {}
        for d in v:
            if d.claim == "DRA":
                per_driver[d.driver] = per_driver.get(d.driver, 0) + d.count
        advanced = {
            d.driver
            for d in v
            if d.claim == "DRA" and (d.taints or d.consumes_counters or any(i.taints for i in d.instances or []))
        }
        for driver, n in sorted(per_driver.items()):
            if n > SLICE_DEVICES_MAX:
                raise ValueError(
                    f"a node publishes {n} {driver} devices; a ResourceSlice holds at most {SLICE_DEVICES_MAX}"
                )
            if driver in advanced and n > SLICE_DEVICES_ADVANCED_MAX:
                raise ValueError(
                    f"a node publishes {n} {driver} devices, some with taints or counters; a ResourceSlice holds at "
                    f"most {SLICE_DEVICES_ADVANCED_MAX} such devices"
                )
        return v


# --------------------------------------------------------------------------------------------------------------------
# Clusters (design.md §1): one inventory host each
# --------------------------------------------------------------------------------------------------------------------


class Taint(_Strict):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "NoExecute"]

    _key = field_validator("key")(classmethod(lambda cls, v: _check_taint_key(v)))


class Toleration(BaseModel):
    """A Kubernetes toleration, verbatim Kubernetes spelling, validated as the API server does (ValidateTolerations):
    a qualified-name key, a label value with Equal, no value with Exists, tolerationSeconds only with NoExecute."""

    model_config = ConfigDict(extra="forbid")

    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    tolerationSeconds: StrictInt | None = None

    @field_validator("key")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        return check_label_key(v, "a taint key (a label key)") if v else v

    @field_validator("value")
    @classmethod
    def _value(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v and info.data.get("operator") == "Equal":
            check_label_value(v, "a taint value (a label value)")
        return v

    @field_validator("effect", mode="before")
    @classmethod
    def _every_effect(cls, v: Any) -> Any:
        return None if v == "" else v  # Kubernetes: an empty effect tolerates every effect, as an omitted one

    @field_validator("tolerationSeconds")
    @classmethod
    def _seconds(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is not None and "effect" in info.data and info.data["effect"] != "NoExecute":  # absent: effect invalid
            raise ValueError(
                f"is only allowed with effect NoExecute (got effect {info.data.get('effect') or 'empty'}): it bounds "
                "how long a pod stays on a node after a NoExecute taint appears"
            )
        return v

    @model_validator(mode="after")
    def _k8s_rules(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError(f"value must be empty when operator is Exists (got {self.value!r})")
        if not self.key and self.operator != "Exists":
            raise ValueError("an empty key requires operator Exists (tolerates every taint)")
        return self

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint: effect (empty = all), key (empty + Exists = all), operator/value."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return (self.value or "") == (taint.value or "")


#: At most this many rungs in a pool's capacity ladder (each is a create attempt of up to the wait timeout).
CAPACITY_LADDER_MAX = 8
_RUNG_RESERVATION_FIELDS = ("reservation", "capacity_reservation_id", "capacity_block")


class CapacityRung(_Strict):
    """One rung of a pool's capacity ladder (docs/provisioning.md, "Capacity ladder"): the kind of capacity, and
    optionally other zones or another machine type with the same GPUs as the pool's class. Which fields a provider
    takes (``machine_type`` and ``reservation`` on GKE; ``instance_type``, ``capacity_reservation_id`` and
    ``capacity_block`` on EKS), which zones and machine types are valid, is ``provider_rules.ladder_errors``'."""

    #: The kind of capacity (contract.CAPACITY_RUNGS): ``reservation`` (a GKE reservation, an EC2 On-Demand Capacity
    #: Reservation or Capacity Block), ``flex-start`` (GKE's Dynamic Workload Scheduler), ``spot``, ``on-demand``.
    kind: Literal["reservation", "flex-start", "spot", "on-demand"]
    #: The rung's zones instead of the pool's (default: the pool's).
    zones: list[str] = Field(default_factory=list)
    #: GKE: another machine type with the class's GPUs (same accelerator type and count).
    machine_type: str | None = Field(default=None, min_length=1, max_length=63)
    #: EKS: another instance type with the class's GPUs (same family, GPU model and count).
    instance_type: str | None = Field(default=None, min_length=1, max_length=63)
    #: GKE reservation rung: the specific reservation (``name`` or ``projects/P/reservations/NAME``); default the
    #: class's ``reservation``, else any matching reservation of the project.
    reservation: str | None = Field(default=None, pattern=r"^\S+$", max_length=256)
    #: EKS reservation rung: the On-Demand Capacity Reservation or Capacity Block (``cr-...``); default the class's.
    capacity_reservation_id: str | None = Field(default=None, pattern=r"^cr-[0-9a-f]{8,17}$")
    #: EKS reservation rung: ``capacity_reservation_id`` is a Capacity Block (default: the class's capacity_type is
    #: CAPACITY_BLOCK), else an On-Demand Capacity Reservation.
    capacity_block: StrictBool | None = None

    @model_validator(mode="after")
    def _reservation_fields(self) -> CapacityRung:
        if self.kind != "reservation":
            given = [f for f in _RUNG_RESERVATION_FIELDS if getattr(self, f) is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: only for kind reservation (this rung is {self.kind})")
        return self

    def key(self) -> tuple[Any, ...]:
        """What makes two rungs the same attempt."""
        return (self.kind, tuple(self.zones), self.machine_type, self.instance_type, self.reservation,
                self.capacity_reservation_id, self.capacity_block)  # fmt: skip


class NodePool(_Strict):
    name: str
    class_: str = Field(alias="class")
    node_count: StrictInt = Field(ge=0)
    min_node_count: StrictInt | None = Field(default=None, ge=0)
    max_node_count: StrictInt | None = Field(default=None, ge=0)
    zones: list[str] = Field(default_factory=list)
    #: GKE / EKS: the capacity to try, in order, when the pool is created (docs/provisioning.md, "Capacity ladder");
    #: empty: the one rung the class describes.
    capacity_ladder: list[CapacityRung] = Field(default_factory=list, max_length=CAPACITY_LADDER_MAX)

    _name = field_validator("name")(classmethod(lambda cls, v: check_dns_label(v)))

    @field_validator("capacity_ladder")
    @classmethod
    def _distinct_rungs(cls, v: list[CapacityRung]) -> list[CapacityRung]:
        seen: dict[tuple[Any, ...], int] = {}
        for i, rung in enumerate(v):
            if rung.key() in seen:
                raise ValueError(f"rung {i} repeats rung {seen[rung.key()]}: a second attempt at the same capacity")
            seen[rung.key()] = i
        return v

    @model_validator(mode="after")
    def _bounds(self) -> NodePool:
        lo = self.min_node_count if self.min_node_count is not None else 0
        hi = self.max_node_count if self.max_node_count is not None else None
        if hi is not None and lo > hi:
            raise ValueError(f"min_node_count ({lo}) is greater than max_node_count ({hi})")
        if self.node_count < lo or (hi is not None and self.node_count > hi):
            raise ValueError(f"node_count {self.node_count} is outside [min_node_count, max_node_count] = [{lo}, {hi}]")
        return self


def _check_k8s_version(value: str) -> str:
    """A declared ``kubernetes_version``, kept as written (k8s/version.py: the grammar and the 1.34 minimum)."""
    supported_kubernetes(value)
    return value


class GkeCluster(_Strict):
    project: str
    region: str
    zones: list[str] = Field(default_factory=list)
    kubernetes_version: str = "1.34"
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED", "UNSPECIFIED"] = "REGULAR"
    network: str | None = None
    subnetwork: str | None = None

    _version = field_validator("kubernetes_version")(classmethod(lambda cls, v: _check_k8s_version(v)))


class EksCluster(_Strict):
    region: str
    kubernetes_version: str = "1.36"
    role_arn: str | None = None
    node_role_arn: str | None = None
    subnets: list[str] = Field(default_factory=list)
    security_groups: list[str] = Field(default_factory=list)
    # Availability zones of the VPC the role creates when ``subnets`` is empty (default: the pools' zones, else the
    # region's ``a`` and ``b`` zones; EKS needs two).
    zones: list[str] = Field(default_factory=list)

    _version = field_validator("kubernetes_version")(classmethod(lambda cls, v: _check_k8s_version(v)))


class Cluster(_Strict):
    """A fleet cluster, built from an inventory host's ``gpufleet_*`` variables."""

    name: str
    provider: Literal["gke", "eks", "existing"]
    gke: GkeCluster | None = None
    eks: EksCluster | None = None
    kubeconfig: str | None = None
    context: str | None = None
    node_pools: list[NodePool] = Field(default_factory=list)
    taints: list[Taint] = Field(default_factory=list)
    cache_storage_class: str | None = None
    ready: StrictBool = True
    groups: list[str] = Field(default_factory=list)
    # The Kubernetes version an existing cluster is declared to run (gpufleet_kubernetes_version); GKE and EKS
    # clusters declare theirs in gpufleet_gke / gpufleet_eks.
    kubernetes_version: str | None = None

    _name = field_validator("name")(classmethod(lambda cls, v: check_dns_label(v)))

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        return None if v is None else _check_k8s_version(v)

    @property
    def declared_version(self) -> str | None:
        if self.gke is not None:
            return self.gke.kubernetes_version
        if self.eks is not None:
            return self.eks.kubernetes_version
        return self.kubernetes_version

    @field_validator("node_pools")
    @classmethod
    def _unique_pools(cls, v: list[NodePool]) -> list[NodePool]:
        _no_duplicates([p.name for p in v], "node pool name")
        return v

    @model_validator(mode="after")
    def _provider_block(self) -> Cluster:
        if self.provider == "gke" and self.gke is None:
            raise ValueError("gpufleet_gke is required when gpufleet_provider is gke")
        if self.provider == "eks" and self.eks is None:
            raise ValueError("gpufleet_eks is required when gpufleet_provider is eks")
        return self


# --------------------------------------------------------------------------------------------------------------------
# Clusters as placement sees them: ``fleet_info``'s ``clusters`` (design.md §4 ``clusters``); other keys are ignored
# --------------------------------------------------------------------------------------------------------------------


class ObservedNode(_Strict):
    """One observed node of a pool (design.md §11, §12): the devices other workloads' claims hold there (names, as the
    class names them) and the taints its ResourceSlices publish on devices beyond the class's (device name ->
    taints). Placement allocates around both, device by device."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    devices: list[str] = Field(default_factory=list)
    taints: dict[str, list[DeviceTaint]] = Field(default_factory=dict)


class PlacementPool(BaseModel):
    """A pool as placement counts it: the class of its nodes and how many there are."""

    # Read-back shapes (``zones``, ``min_node_count``...) are accepted and ignored.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    name: str = Field(min_length=1)
    class_name: str = Field(alias="class", min_length=1)
    nodes: int = Field(ge=0, strict=True)
    #: Observed capacity (design.md §11, §12): per node of ``nodes`` that other workloads' claims hold devices of, the
    #: names of those devices (``gpu-3``), or an :class:`ObservedNode` (held devices and observed device taints);
    #: placement allocates around them.
    held: list[list[str] | ObservedNode] = Field(default_factory=list)


class PlacementCluster(BaseModel):
    """A candidate cluster: its pools in order, its fleet-level taints and whether it takes new replicas.

    Only native constraints here (clusters are validated in bulk on every placement); ``placement.validate_clusters``
    checks pool names are unique and their classes known."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1)
    pools: list[PlacementPool] = Field(default_factory=list)
    taints: list[Taint] = Field(default_factory=list)
    ready: StrictBool = True
    # The Kubernetes version the cluster runs (declared); None: the newest this collection knows. Decides which CEL
    # library functions its selectors may use.
    kubernetes_version: str | None = None

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        return None if v is None else _check_k8s_version(v)

    @cached_property
    def classes(self) -> tuple[str, ...]:
        """The pools' classes, in pool order (the key placement memoises a cluster's options by)."""
        return tuple(p.class_name for p in self.pools)


# --------------------------------------------------------------------------------------------------------------------
# Model deployments (design.md §3)
# --------------------------------------------------------------------------------------------------------------------


class Selector(_Strict):
    cel: str = Field(min_length=1)


class DeviceSubRequest(_Strict):
    """What a ResourceClaim ``exactly`` request (or one ``firstAvailable`` alternative) asks for (design.md §3a)."""

    name: str
    device_class_name: str | None = None
    allocation_mode: Literal["ExactCount", "All"] = "ExactCount"
    # Kubernetes only requires count > 0; a claim over its 32-device limit is NodeSelector's check, and an alternative
    # over it is skipped by the allocator, as upstream's.
    count: StrictInt | None = Field(default=None, ge=1)
    selectors: list[Selector] = Field(default_factory=list, max_length=DEVICE_SELECTORS_MAX)
    # design.md §12: the device taints this request tolerates (Kubernetes' DeviceToleration spelling).
    tolerations: list[DeviceToleration] = Field(default_factory=list, max_length=DEVICE_TOLERATIONS_MAX)
    # design.md §12: consumable capacity -- how much of each capacity of a device the request consumes.
    capacity: CapacityRequirements | None = None

    _name = field_validator("name")(classmethod(lambda cls, v: check_dns_label(v)))

    @field_validator("device_class_name")
    @classmethod
    def _dcn(cls, v: str | None) -> str | None:
        return None if v is None else check_dns_subdomain(v)

    @model_validator(mode="after")
    def _count_mode(self) -> DeviceSubRequest:
        if self.allocation_mode == "All" and self.count is not None:
            raise ValueError("count is not allowed with allocation_mode All (it takes every matching device)")
        return self

    @property
    def devices(self) -> int:
        """Devices an ExactCount request takes (1 when ``count`` is omitted); 0 for All (known only per node)."""
        if self.allocation_mode == "All":
            return 0
        return 1 if self.count is None else self.count


class DeviceRequest(DeviceSubRequest):
    """One request of a member's claim: either ``exactly`` (the fields above) or ``first_available`` alternatives."""

    first_available: list[DeviceSubRequest] | None = Field(default=None, min_length=1, max_length=FIRST_AVAILABLE_MAX)

    @model_validator(mode="after")
    def _alternatives(self) -> DeviceRequest:
        if self.first_available is None:
            return self
        # Defaults are allowed (a dumped and re-validated request carries them); values are not.
        own = [
            name
            for name, value in (
                ("device_class_name", self.device_class_name),
                ("allocation_mode", None if self.allocation_mode == "ExactCount" else self.allocation_mode),
                ("count", self.count),
                ("selectors", self.selectors or None),
                ("tolerations", self.tolerations or None),
                ("capacity", self.capacity),
            )
            if value is not None
        ]
        if own:
            raise ValueError(f"{', '.join(own)} cannot be set beside first_available: each alternative carries its own")
        _no_duplicates([a.name for a in self.first_available], "first_available alternative name")
        return self

    @property
    def alternatives(self) -> list[DeviceSubRequest]:
        """What the allocator tries, in order: the alternatives, or the request itself."""
        return list(self.first_available) if self.first_available is not None else [self]

    @property
    def min_devices(self) -> int:
        """The fewest devices the request can take: an All request takes at least one."""
        return min(max(a.devices, 1) for a in self.alternatives)

    @property
    def may_be_synthetic(self) -> bool:
        """Whether the request may resolve to ``Synthetic`` devices (matched for placement, never claimed): a plain
        ``ExactCount`` request that names no device class (the allocator also requires that no constraint names it)."""
        return self.first_available is None and self.allocation_mode == "ExactCount" and not self.device_class_name


class DeviceConstraint(_Strict):
    """``matchAttribute``: every device chosen for ``requests`` (default: all of the member's) has the same value;
    ``distinctAttribute`` (design.md §12): each has another value (two shares of one shared GPU never do)."""

    requests: list[str] = Field(default_factory=list, max_length=DEVICE_REQUESTS_MAX)
    match_attribute: str | None = None
    distinct_attribute: str | None = None

    @field_validator("match_attribute", "distinct_attribute")
    @classmethod
    def _qualified(cls, v: str | None) -> str | None:
        if v is None:
            return v
        match = QUALIFIED_NAME_RE.fullmatch(v)
        if not match or not match.group("domain") or len(match.group("domain")) > QUALIFIED_DOMAIN_MAX:
            raise ValueError(
                f"{v!r} must be a fully qualified attribute name, <domain>/<name> (gpu.nvidia.com/pcieRoot): "
                "Kubernetes requires the domain in a constraint"
            )
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> DeviceConstraint:
        if (self.match_attribute is None) == (self.distinct_attribute is None):
            raise ValueError("must set exactly one of match_attribute, distinct_attribute")
        return self

    @property
    def attribute(self) -> str:
        return self.match_attribute or self.distinct_attribute or ""


class NodeSelector(_Strict):
    devices: list[DeviceRequest] = Field(default_factory=list, max_length=DEVICE_REQUESTS_MAX)
    constraints: list[DeviceConstraint] = Field(default_factory=list, max_length=DEVICE_CONSTRAINTS_MAX)

    @field_validator("devices")
    @classmethod
    def _unique(cls, v: list[DeviceRequest]) -> list[DeviceRequest]:
        _no_duplicates([r.name for r in v], "device request name")
        return v

    @model_validator(mode="after")
    def _claim(self) -> NodeSelector:
        names = {r.name: r for r in self.devices}
        for ci, constraint in enumerate(self.constraints):
            _no_duplicates(constraint.requests, f"constraints[{ci}] request")
            for ri, ref in enumerate(constraint.requests):
                parent, _sep, sub = ref.partition("/")
                request = names.get(parent)
                if request is None:
                    raise ValueError(
                        f"constraints[{ci}].requests[{ri}]: {ref!r} names no device request of this member "
                        f"({', '.join(names) or 'none'})"
                    )
                if sub and (request.first_available is None or sub not in {a.name for a in request.first_available}):
                    raise ValueError(
                        f"constraints[{ci}].requests[{ri}]: {ref!r} names no first_available alternative of request "
                        f"{parent!r}"
                    )
        # Only devices the claim really holds count: a request that may resolve to synthetic devices (never claimed) is
        # checked per class by the allocator, which knows whether it does (a p5.48xlarge's 32 EFA devices beside 8 GPUs).
        constrained = {
            ref.partition("/")[0] for c in self.constraints for ref in (c.requests or [r.name for r in self.devices])
        }
        least = sum(r.min_devices for r in self.devices if not r.may_be_synthetic or r.name in constrained)
        if least > CLAIM_DEVICES_MAX:
            raise ValueError(
                f"the member's claim needs at least {least} devices whatever it chooses; Kubernetes allocates at most "
                f"{CLAIM_DEVICES_MAX} devices to one claim"
            )
        return self


class WorkerSpec(_Strict):
    nodes: StrictInt = Field(ge=1, le=256)


class Member(_Strict):
    role: Literal["Standalone", "Leader", "Worker"]
    node_selector: NodeSelector = Field(default_factory=NodeSelector)
    worker: WorkerSpec | None = None
    template: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _worker_block(self) -> Member:
        if self.role == "Worker" and self.worker is None:
            raise ValueError("worker: {nodes: N} is required for a Worker member")
        if self.role != "Worker" and self.worker is not None:
            raise ValueError(f"worker is only allowed on a Worker member (this one is {self.role})")
        return self

    @property
    def pods(self) -> int:
        return self.worker.nodes if self.worker is not None else 1


class Engine(_Strict):
    name: str
    copies: StrictInt = Field(default=1, ge=1, le=1024)
    members: list[Member] = Field(min_length=1)

    _name = field_validator("name")(classmethod(lambda cls, v: check_dns_label(v)))

    @field_validator("members")
    @classmethod
    def _shape(cls, v: list[Member]) -> list[Member]:
        roles = sorted(m.role for m in v)
        if roles not in (["Standalone"], ["Leader", "Worker"]):
            raise ValueError(
                "an engine has exactly one Standalone member, or one Leader and one Worker member "
                f"(got {', '.join(m.role for m in v)})"
            )
        return v

    @property
    def is_gang(self) -> bool:
        return any(m.role == "Leader" for m in self.members)


class GatewayRef(_Strict):
    """The Gateway an HTTPRoute attaches to: its ``parentRefs`` entry (Gateway API ParentReference)."""

    name: str
    namespace: str | None = None
    section_name: str | None = None

    _name = field_validator("name")(classmethod(lambda cls, v: check_k8s_name(v, "a Gateway name", subdomain=True)))

    @field_validator("namespace", "section_name", mode="before")
    @classmethod
    def _empty_is_unset(cls, v: Any) -> Any:
        return None if v == "" else v  # rendered as unset: the route's namespace, every listener

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str | None) -> str | None:
        return None if v is None else check_k8s_name(v, "a namespace name")

    @field_validator("section_name")
    @classmethod
    def _section(cls, v: str | None) -> str | None:
        # Gateway API SectionName (a listener name): 1-253 characters, a DNS subdomain.
        return None if v is None else check_k8s_name(v, "a Gateway listener name (SectionName)", subdomain=True)


class ExtraMetadata(_Strict):
    """Extra metadata for every rendered object (``serving_manifests``' ``labels`` / ``annotations``)."""

    labels: dict[str, str] = Field(default_factory=dict, strict=True)
    annotations: dict[str, str] = Field(default_factory=dict, strict=True)

    @field_validator("labels")
    @classmethod
    def _label_syntax(cls, value: dict[str, str]) -> dict[str, str]:
        from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_label_key, is_label_value

        for key, item in value.items():
            if not is_label_key(key):
                raise ValueError(f"{key!r} is not a valid label key")
            if not is_label_value(item):
                raise ValueError(f"{key!r}: {item!r} is not a valid label value")
        return value

    @field_validator("annotations")
    @classmethod
    def _annotation_syntax(cls, value: dict[str, str]) -> dict[str, str]:
        errors = annotation_errors(value, "")  # each reason names the key (values are strings already)
        if errors:
            raise ValueError("; ".join(reason for _path, reason in errors))
        return value


def _check_config_name(value: str) -> str:
    return check_k8s_name(value, "the name of an LLMInferenceServiceConfig", subdomain=True)


class KServeOptions(_Strict):
    # Names of the LLMInferenceServiceConfig objects (presets) the LLMInferenceService's spec.baseRefs merge.
    base_refs: list[Annotated[str, Field(strict=True), AfterValidator(_check_config_name)]] = Field(
        default_factory=list
    )


class Disruption(_Strict):
    """How many replicas of a deployment must stay placed while a run removes others (guarded shrink)."""

    #: A run that would leave fewer placed replicas than are serving now proceeds only while at least this many stay.
    min_available: StrictInt | None = Field(default=None, ge=0, le=10000)


def _surge_zero(value: int) -> int:
    if value != 0:
        raise ValueError(
            f"only 0 is supported (got {value}): gpufleet.serving cannot place temporary extra replicas yet, so an "
            "update takes a replica out of service while it restarts; bound how many at once with max_unavailable"
        )
    return value


class Rollout(_Strict):
    """How a changed template reaches a deployment's replicas across the fleet (docs/deploy.md, "Rolling updates")."""

    #: At most this many of the deployment's replicas are taken out of service by an update at once, fleet-wide: apply
    #: mode updates them in waves of this size and waits until they are Ready before the next wave.
    max_unavailable: StrictInt = Field(default=1, ge=1, le=10000)
    #: Extra temporary replicas during an update: only 0 (not supported yet; a validation error says so).
    max_surge: Annotated[StrictInt, AfterValidator(_surge_zero)] = 0


class PlacementOptions(_Strict):
    """How a deployment's replicas take node capacity (design.md §12)."""

    #: Every pod that claims a device takes a whole node, as if it claimed every device there (engines that want the
    #: whole box); otherwise pods share nodes until their devices run out, as kube-scheduler packs them.
    exclusive_nodes: StrictBool = False


#: The ``/dev/shm`` size limit of every serving pod unless the deployment sets ``shm_size``.
DEFAULT_SHM_SIZE = "16Gi"
#: Below the container runtime's own default (64Mi) a limit is a unit mistake (``shm_size: 16`` is 16 bytes).
MIN_SHM_SIZE = "64Mi"


def check_shm_size(value: Any) -> str:
    text = check_quantity(value)
    from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

    if parse_quantity(text).cmp(parse_quantity(MIN_SHM_SIZE)) < 0:
        raise ValueError(f"must be at least {MIN_SHM_SIZE}, a quantity such as 16Gi (got {text!r})")
    return text


def _check_http_path(value: str | None) -> str | None:
    if value is not None and (not value.startswith("/") or any(ch.isspace() for ch in value)):
        raise ValueError(f"must be an HTTP path: starting with '/', no spaces (got {value!r})")
    return value


def _check_image(value: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(f"must be a container image reference such as docker.io/library/busybox:1.37 (got {value!r})")
    return value


_DURATION_RE = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration_seconds(value: Any) -> Any:
    """A duration as whole seconds: an integer (seconds) or a text such as ``1800``, ``90s``, ``30m``, ``1h30m``.
    Anything else is returned as it is, for the field's own type check to refuse."""
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        match = _DURATION_RE.fullmatch(text)
        if not text or not match:
            raise ValueError(f"must be a duration: seconds (1800) or a text such as 90s, 30m or 1h30m (got {value!r})")
        hours, minutes, seconds = (int(g or 0) for g in match.groups())
        return hours * 3600 + minutes * 60 + seconds
    return value


#: A duration field: whole seconds; the inventory may also write ``30m`` (the JSON Schema says so).
Duration = Annotated[
    StrictInt,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "pattern": r"^\s*(\d+|(\d+h)?(\d+m)?(\d+s)?)\s*$"},
            ],
            "description": "seconds, or a duration such as 90s, 30m, 1h30m",
        }
    ),
]

#: Bounds of the probe settings (``health``). Kubernetes only asks for >= 1; the upper bounds catch unit mistakes.
STARTUP_TIMEOUT_MAX = 24 * 3600
LIVENESS_TIMEOUT_MAX = 3600
PROBE_PERIOD_MAX = 300


class HealthOptions(_Strict):
    """How the engine container is probed (docs/routing.md, "Health"): a startupProbe that gives the model
    ``startup_timeout`` to load, then a livenessProbe that restarts an engine unresponsive for ``liveness_timeout``
    and a readinessProbe that takes a busy or loading engine out of its Services. A probe the template sets itself is
    left as it is."""

    #: The HTTP path every probe requests. Default: ``/health`` for vLLM and SGLang engines; other engines get a TCP
    #: check on the port unless a path is set.
    path: Annotated[str, AfterValidator(_check_http_path)] | None = Field(default=None, max_length=1024)
    #: How long a model may take to load before the container is restarted. Default: 30m (60m for a Leader/Worker gang,
    #: whose leader also waits for its workers).
    startup_timeout: Duration | None = Field(default=None, ge=1, le=STARTUP_TIMEOUT_MAX)
    #: How long a loaded engine may fail its health check before it is restarted.
    liveness_timeout: Duration = Field(default=60, ge=1, le=LIVENESS_TIMEOUT_MAX)
    #: Seconds between two checks, and how long one check may take.
    period_seconds: StrictInt = Field(default=10, ge=1, le=PROBE_PERIOD_MAX)
    timeout_seconds: StrictInt = Field(default=5, ge=1, le=PROBE_PERIOD_MAX)

    _durations = field_validator("startup_timeout", "liveness_timeout", mode="before")(
        classmethod(lambda cls, v: duration_seconds(v))
    )

    @model_validator(mode="after")
    def _liveness_covers_a_period(self) -> HealthOptions:
        if self.liveness_timeout < self.period_seconds:
            raise ValueError(
                f"liveness_timeout ({self.liveness_timeout}s) must be at least period_seconds ({self.period_seconds}s): "
                "an engine is restarted after failing checks for that long"
            )
        return self


class CacheWaitOptions(_Strict):
    """The init container that holds the serving pods of a deployment with a cache until the cache's hydration Job has
    written the completion manifest (docs/routing.md, "Waiting for the model cache")."""

    enabled: StrictBool = True
    #: Any image with ``/bin/sh``. Default: the hydration Job's (``model_cache_image``'s default).
    image: Annotated[str, AfterValidator(_check_image)] | None = Field(default=None, max_length=1024)


class ModelDeployment(_Strict):
    name: str
    namespace: str = "default"
    replicas: StrictInt = Field(ge=0, le=10000)
    #: Placement order across the fleet: higher first (it takes capacity before the others); deployments of equal
    #: priority are placed in the order they are listed (``gpufleet_model_deployments``, then each
    #: ``gpufleet_model_deployments_*`` variable by name).
    priority: StrictInt = Field(
        default=0,
        ge=-1_000_000,
        le=1_000_000,
        description="Placement order: higher first; equal priorities keep list order.",
    )
    clusters: str = "gpufleet_clusters"
    cache: str | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    backend: Literal["auto", "deployment", "leaderworkerset", "kserve"] = "auto"
    engines: list[Engine] = Field(min_length=1)
    port: StrictInt = Field(default=8000, ge=1, le=65535)
    gateway: GatewayRef | None = None
    ray: StrictBool = False
    kserve: KServeOptions = Field(default_factory=KServeOptions)
    disruption: Disruption = Field(default_factory=Disruption)
    rollout: Rollout = Field(default_factory=Rollout)
    placement: PlacementOptions = Field(default_factory=PlacementOptions)
    health: HealthOptions = Field(default_factory=HealthOptions)
    #: The size limit of the serving pods' memory-backed ``/dev/shm`` (it counts against the pod's memory).
    shm_size: str = DEFAULT_SHM_SIZE
    cache_wait: CacheWaitOptions = Field(default_factory=CacheWaitOptions)
    # Filled in by fleet_info (the resolved ``clusters`` host pattern); accepted so its output can be fed back.
    candidate_clusters: list[str] = Field(default_factory=list, exclude=True)

    _name = field_validator("name", "namespace")(classmethod(lambda cls, v: check_dns_label(v)))
    _shm = field_validator("shm_size", mode="before")(classmethod(lambda cls, v: check_shm_size(v)))

    @field_validator("engines")
    @classmethod
    def _unique_engines(cls, v: list[Engine]) -> list[Engine]:
        _no_duplicates([e.name for e in v], "engine name")
        return v

    @model_validator(mode="after")
    def _backend_fits(self) -> ModelDeployment:
        if self.backend == "deployment" and any(e.is_gang for e in self.engines):
            raise ValueError(
                "backend deployment cannot run a Leader/Worker engine; use leaderworkerset, kserve or auto"
            )
        if self.backend == "leaderworkerset" and not all(e.is_gang for e in self.engines):
            raise ValueError(
                "backend leaderworkerset needs Leader/Worker engines; use deployment or auto for Standalone"
            )
        return self

    def selector_paths(self) -> list[tuple[str, str]]:
        """``(field path, cel)`` for every selector, for reporting."""
        out = []
        for ei, engine in enumerate(self.engines):
            for mi, member in enumerate(engine.members):
                for ri, req in enumerate(member.node_selector.devices):
                    at = f"engines[{ei}].members[{mi}].node_selector.devices[{ri}]"
                    for si, sel in enumerate(req.selectors):
                        out.append((f"{at}.selectors[{si}].cel", sel.cel))
                    for ai, alt in enumerate(req.first_available or []):
                        for si, sel in enumerate(alt.selectors):
                            out.append((f"{at}.first_available[{ai}].selectors[{si}].cel", sel.cel))
        return out


# --------------------------------------------------------------------------------------------------------------------
# Model caches (design.md §5)
# --------------------------------------------------------------------------------------------------------------------


class HuggingFaceSource(_Strict):
    repo: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
    revision: str = "main"
    token_secret: str | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


def _check_source_url(value: str, secret_hint: str) -> str:
    """An http(s) URL without credentials. Error messages never repeat the URL (it may hold a secret)."""
    if not re.match(r"^https?://[^\s/@?#]+", value) or re.search(r"\s", value):
        raise ValueError(f"must be an http(s) URL without whitespace (got {redact_url(value)!r})")
    found = url_credentials(value)
    if found:
        raise ValueError(
            f"carries {found}: credentials never go into fleet data (they would be copied into every cluster's Job, "
            f"annotations and logs); {secret_hint}"
        )
    return value


class S3Source(_Strict):
    uri: str = Field(pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^?#\s]*)?$")
    endpoint: str | None = None
    region: str | None = None
    credentials_secret: str | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)

    @field_validator("uri", mode="before")
    @classmethod
    def _uri_credentials(cls, v: Any) -> Any:
        # Before the pattern check, whose generic message would show the URI (redacted, but not saying why).
        if isinstance(v, str) and (has_userinfo(v) or url_credentials(v)):
            raise ValueError(
                "carries credentials (KEY:SECRET@ or a token): credentials never go into fleet data (they would be "
                "copied into every cluster's Job, annotations and logs); put the access keys in a Secret and name it "
                "in source.s3.credentials_secret"
            )
        return v

    _endpoint = field_validator("endpoint")(
        classmethod(
            lambda cls, v: (
                v
                if v is None
                else _check_source_url(v, "put the access keys in a Secret and name it in source.s3.credentials_secret")
            )
        )
    )


HTTP_URL_SECRET_KEY = "url"
HTTP_USERNAME_KEY = "username"
HTTP_PASSWORD_KEY = "password"


class HttpSource(_Strict):
    """One file over http(s). Credentials live in Secrets: ``credentials_secret`` (keys ``username``/``password``, HTTP
    basic auth) or ``url_secret`` (key ``url``: the full URL, e.g. a presigned one; ``url`` is then its credential-free
    form — scheme, host and path — used for display, annotations and identity)."""

    url: str
    credentials_secret: str | None = None
    url_secret: str | None = None

    _url = field_validator("url")(
        classmethod(
            lambda cls, v: _check_source_url(
                v,
                "put user and password in a Secret named by source.http.credentials_secret (keys username, password), "
                "or the whole URL (presigned) in a Secret named by source.http.url_secret (key url) and keep only "
                "scheme, host and path in source.http.url",
            )
        )
    )
    _secrets = field_validator("credentials_secret", "url_secret")(
        classmethod(lambda cls, v: v if v is None else check_dns_subdomain(v))
    )

    @model_validator(mode="after")
    def _one_secret(self) -> HttpSource:
        if self.credentials_secret and self.url_secret:
            raise ValueError("set credentials_secret (basic auth) or url_secret (a presigned URL), not both")
        return self


class CacheSource(_Strict):
    hugging_face: HuggingFaceSource | None = None
    s3: S3Source | None = None
    http: HttpSource | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> CacheSource:
        set_ = [k for k in ("hugging_face", "s3", "http") if getattr(self, k) is not None]
        if len(set_) != 1:
            raise ValueError(f"must set exactly one of hugging_face, s3, http (got {', '.join(set_) or 'none'})")
        return self

    @property
    def uri(self) -> str:
        if self.hugging_face:
            return f"hf://{self.hugging_face.repo}"
        if self.s3:
            return self.s3.uri
        return self.http.url if self.http else ""

    @property
    def revision(self) -> str | None:
        return self.hugging_face.revision if self.hugging_face else None


class CacheStorage(_Strict):
    backend: Literal["pvc", "existing_pvc"] = "pvc"
    claim_name: str | None = None
    storage_class: str | None = None

    @model_validator(mode="after")
    def _claim(self) -> CacheStorage:
        if self.backend == "existing_pvc" and not self.claim_name:
            raise ValueError("claim_name is required when backend is existing_pvc (the PVC to adopt)")
        if self.claim_name:
            check_dns_subdomain(self.claim_name)
        return self


class ModelCache(_Strict):
    name: str
    namespace: str = "default"
    clusters: str = "gpufleet_clusters"
    source: CacheSource
    size: str
    storage: CacheStorage = Field(default_factory=CacheStorage)
    # Filled in by fleet_info (the resolved ``clusters`` host pattern); accepted so its output can be fed back.
    candidate_clusters: list[str] = Field(default_factory=list, exclude=True)

    _name = field_validator("name", "namespace")(classmethod(lambda cls, v: check_dns_label(v)))
    _size = field_validator("size", mode="before")(classmethod(lambda cls, v: check_positive_quantity(v)))

    @property
    def claim_name(self) -> str:
        return self.storage.claim_name or f"gpufleet-cache-{self.name}"


# --------------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------------


def _no_duplicates(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"duplicate {what} {name!r}")
        seen.add(name)


def _check_driver(value: str) -> str:
    if len(value) > DRIVER_NAME_MAX:
        raise ValueError(f"{value!r} is {len(value)} characters; a DRA driver name has at most {DRIVER_NAME_MAX}")
    return check_dns_subdomain(value)


def _check_taint_key(value: str) -> str:
    if len(value) > 253 or not TAINT_KEY_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a valid taint key (a label key such as gpufleet.io/maintenance)")
    return value


def format_loc(prefix: str, loc: tuple[Any, ...]) -> str:
    """``('engines', 0, 'members', 1, 'role')`` -> ``prefix.engines[0].members[1].role``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", part):
            out += f".{part}" if out else part
        else:
            out += f"[{str(part)!r}]"
    return out


_ALIASES = {"class_": "class", "bool_": "bool", "int_": "int"}


# Fields whose values are credentials or hold them (an inline kubeconfig carries a bearer token or a client key): an
# error shows what kind of value was given, never the value (redact.describe with secret=True).
SECRET_FIELDS = frozenset({"kubeconfig", "gpufleet_kubeconfig"})


def _is_secret(err: Mapping[str, Any]) -> bool:
    return any(isinstance(part, str) and part in SECRET_FIELDS for part in err.get("loc", ()))


def shown_input(err: Mapping[str, Any]) -> str:
    """What an error may show of a pydantic error's input (redact.describe: a mapping by its keys, URLs redacted,
    nothing of a credential field's value)."""
    return describe(err.get("input"), secret=_is_secret(err))


def _reason(err: Mapping[str, Any]) -> str:
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    got = shown_input(err)
    if kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        choices = re.findall(r"'([^']*)'", expected) or [expected]
        value = err.get("input")
        close = _closest(value, choices) if isinstance(value, str) and not _is_secret(err) else None
        hint = f"; did you mean {close!r}?" if close else ""
        return f"must be one of {', '.join(choices)} (got {got}{hint})"
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field (check the spelling)"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sym = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "?")
        return f"must be {sym} {bound} (got {got})"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer (got {got})"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false (got {got})"
    if kind == "string_type":
        return f"must be a string (got {got})"
    if kind in ("list_type",):
        return f"must be a list (got {type(err.get('input')).__name__})"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping (got {type(err.get('input')).__name__})"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    if kind == "string_pattern_mismatch":
        return f"{got} does not match the expected form {ctx.get('pattern')}"
    if kind == "string_too_short":
        return "must not be empty"
    msg = str(err.get("msg", "is invalid"))
    return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def _closest(value: str, choices: list[str]) -> str | None:
    """The choice ``value`` is most likely a typo of (difflib; a difference of case counts as one)."""
    import difflib

    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    return close[0] if close else next((c for c in choices if c.lower() == value.lower()), None)


def _scrub(text: str, err: Mapping[str, Any]) -> str:
    """A reason as shown: every URL redacted, and a credential field's value (which a validator's own message may
    quote) replaced."""
    value = err.get("input")
    if _is_secret(err) and isinstance(value, str) and value:
        text = text.replace(repr(value), "<hidden>")
        if len(value) >= 4:
            text = text.replace(value, "<hidden>")
    return redact_text(text)


def translate_errors(
    prefix: str,
    exc: ValidationError,
    rename_first: dict[str, str] | None = None,
    reason: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> list[tuple[str, str]]:
    """pydantic errors -> ``(path, reason)``; ``rename_first`` maps a top-level field to the variable the user wrote;
    ``reason`` may word an error itself (``None``: the generic wording). No reason shows a credential: inputs are
    shown through :func:`shown_input` (redact.describe) and every reason is scrubbed of URL credentials."""
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(_ALIASES.get(p, p) if isinstance(p, str) else p for p in err.get("loc", ()))
        if rename_first and loc and isinstance(loc[0], str):
            loc = (rename_first.get(loc[0], loc[0]), *loc[1:])
        text = reason(err) if reason is not None else None
        out.append((format_loc(prefix, loc), _scrub(text if text is not None else _reason(err), err)))
    return out


_ADAPTERS: dict[Any, Any] = {}


def list_adapter(model: Any) -> Any:
    """A cached pydantic TypeAdapter for ``list[model]``: one (native) validation call for a whole list."""
    adapter = _ADAPTERS.get(model)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[model] = TypeAdapter(list[model])
    return adapter


def parse(model: type[Any], data: Any, prefix: str) -> Any:
    """Validate ``data`` as ``model``; raise FleetValidationError naming ``prefix`` and the field path."""
    require_pydantic()
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise FleetValidationError(translate_errors(prefix, exc)) from None
