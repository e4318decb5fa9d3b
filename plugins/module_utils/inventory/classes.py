# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Inference classes: the DRA devices a class publishes (attributes, capacity, taints, counters), a hardware catalog
entry or explicit devices, the class's provisioning hints, and Kubernetes taints / tolerations.

Part of the fleet model; ``models.py`` is the façade other code imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from ansible_collections.gpufleet.serving.plugins.module_utils import catalog as hardware_catalog
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.api import (
    COUNTER_CONSUMPTIONS_MAX,
    COUNTER_SETS_MAX,
    DEVICE_TAINTS_MAX,
    CapacityRequestPolicy,
    CounterSet,
    DeviceCounterConsumption,
    DeviceTaint,
    expand,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.common import (
    ATTRIBUTE_STRING_MAX,
    ATTRIBUTE_VERSION_MAX,
    INT64_MAX,
    INT64_MIN,
    QUALIFIED_DOMAIN_MAX,
    QUALIFIED_NAME_RE,
    SLICE_DEVICES_ADVANCED_MAX,
    SLICE_DEVICES_MAX,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationInfo,
    WithJsonSchema,
    _check_driver,
    _check_taint_key,
    _no_duplicates,
    _Strict,
    check_dns_label,
    check_dns_subdomain,
    check_label_key,
    check_label_value,
    check_quantity,
    field_validator,
    model_validator,
)

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


def _override_keys(model: type[Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON Schema object whose keys are ``model``'s (by alias), any value: a part of a class that overrides a catalog
    entry's (its values are checked when the class is validated; ``null`` removes the entry's value)."""
    names = [info.alias or field for field, info in model.model_fields.items()]
    out: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {n: {"type": "string"} if n in required else {} for n in names},
    }
    if required:
        out["required"] = list(required)
    return out


def _catalog_or_devices(schema: dict[str, Any]) -> None:
    """The JSON Schema of a class: ``devices`` is required unless ``catalog`` names an entry. With one, the class's
    ``provisioning`` and ``devices`` override the entry's: a provider block needs none of its fields, a device only its
    ``name`` (the entry's device of that name is merged with it, any other is added)."""
    required = schema.get("required")
    if isinstance(required, list) and "devices" in required:
        required.remove("devices")
        if not required:
            del schema["required"]
    properties = schema.get("properties") or {}
    devices, provisioning = properties.get("devices"), properties.get("provisioning")
    if not isinstance(devices, dict) or "items" not in devices or not isinstance(provisioning, dict):
        return
    properties["devices"] = {k: v for k, v in devices.items() if k not in ("items", "minItems")}
    properties["provisioning"] = {"type": "object"}
    providers = {"gke": GkeProvisioning, "eks": EksProvisioning}
    schema["if"] = {"required": ["catalog"]}
    schema["then"] = {
        "properties": {
            "devices": {"items": _override_keys(Device, required=("name",))},
            "provisioning": {
                "additionalProperties": False,
                "properties": {p: {"anyOf": [_override_keys(m), {"type": "null"}]} for p, m in providers.items()},
            },
        }
    }
    schema["else"] = {
        "required": ["devices"],
        "properties": {
            "devices": {"items": devices["items"], "minItems": devices.get("minItems", 1)},
            "provisioning": provisioning,
        },
    }


#: What an unknown ``catalog`` entry stands in for while its own error is reported (so no "devices: Field required"
#: is reported on top of it).
_UNRESOLVED_DEVICES = [{"name": "unresolved", "claim": "Synthetic", "driver": "catalog.gpufleet.io"}]


class InferenceClass(_Strict):
    #: The hardware catalog entry the class starts from (catalog.py, docs/catalog.md): the class's own fields extend or
    #: override it (``devices`` merged by device name). Not dumped: a dumped class is the expanded one, whole.
    catalog: (
        Annotated[
            str,
            WithJsonSchema(
                {
                    "type": "string",
                    "enum": list(hardware_catalog.ENTRIES),
                    "description": "A hardware catalog entry (docs/catalog.md) this class starts from; the class's "
                    "own fields extend or override it, devices merged by name.",
                }
            ),
        ]
        | None
    ) = Field(default=None, exclude=True)
    description: str | None = None
    provisioning: Provisioning = Field(default_factory=Provisioning)
    devices: list[Device] = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)
    # design.md §12: partitionable devices -- counter sets the devices consume (a GPU and its MIG profiles).
    shared_counters: list[CounterSet] = Field(default_factory=list)

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        json_schema_extra=_catalog_or_devices,
    )

    @model_validator(mode="before")
    @classmethod
    def _from_catalog(cls, data: Any) -> Any:
        """A class that names a catalog entry is the entry with the class's own fields merged over it."""
        if not isinstance(data, Mapping) or data.get("catalog") is None:
            return data
        name = data["catalog"]
        if not isinstance(name, str) or name not in hardware_catalog.ENTRIES:
            return {**data, "devices": _UNRESOLVED_DEVICES}  # the catalog field reports the name
        return {**hardware_catalog.expand(name, data), "catalog": name}

    @field_validator("catalog")
    @classmethod
    def _known_entry(cls, v: str | None) -> str | None:
        if v is not None and v not in hardware_catalog.ENTRIES:
            raise ValueError(hardware_catalog.unknown_entry(v))
        return v

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
