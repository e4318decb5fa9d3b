# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The ``device`` variable: a resource.k8s.io/v1 ResourceSlice device as CEL sees it (upstream ``DeviceMatches``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import SelectorEvalError
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import QuantityError, parse_quantity
from ansible_collections.gpufleet.serving.plugins.module_utils.semver import SemverError, parse_semver

# pylint: disable=unidiomatic-typecheck


class DomainMap(dict):
    """``device.attributes`` / ``device.capacity``: an unknown domain reads as an empty map.

    Mirrors upstream's ``newStringInterfaceMapWithDefault``; ``in`` and iteration
    only see the domains that exist.
    """

    __slots__ = ()

    def __missing__(self, key: Any) -> dict:
        return _EMPTY


_EMPTY: dict = {}

_ATTR_SCALARS = (("int", int), ("bool", bool), ("string", str), ("version", str))
_ATTR_LISTS = (("ints", int), ("bools", bool), ("strings", str), ("versions", str))


def _attr_value(name: str, attr: Any) -> Any:
    if not isinstance(attr, dict):
        raise SelectorEvalError(f"attribute {name}: unsupported attribute value")
    for key, typ in _ATTR_SCALARS:
        v = attr.get(key)
        if v is None:
            continue
        if type(v) is not typ:
            raise SelectorEvalError(f"attribute {name}: {key} value must be a {typ.__name__}")
        if key == "version":
            try:
                return parse_semver(v)
            except SemverError as e:
                raise SelectorEvalError(f"attribute {name}: parse semantic version: {e}") from None
        return v
    for key, typ in _ATTR_LISTS:
        vs = attr.get(key)
        if vs is None:
            continue
        if not isinstance(vs, (list, tuple)) or any(type(v) is not typ for v in vs):
            raise SelectorEvalError(f"attribute {name}: {key} must be a list of {typ.__name__}")
        if key == "versions":
            try:
                return [parse_semver(v) for v in vs]
            except SemverError as e:
                raise SelectorEvalError(f"attribute {name}: parse semantic version: {e}") from None
        return list(vs)
    raise SelectorEvalError(f"attribute {name}: unsupported attribute value")


def _split_qualified(name: str, default_domain: str) -> tuple[str, str]:
    sep = name.find("/")
    if sep == -1:
        return default_domain, name
    return name[:sep], name[sep + 1 :]


def device_to_cel(device: Mapping[str, Any]) -> dict[str, Any]:
    """The ``device`` variable for a resource.k8s.io/v1 ResourceSlice device (upstream DeviceMatches)."""
    if not isinstance(device, Mapping):
        raise SelectorEvalError(f"device must be a mapping, not {type(device).__name__}")
    driver = device.get("driver") or ""
    if not isinstance(driver, str):
        raise SelectorEvalError("device driver must be a string")
    attributes: DomainMap = DomainMap()
    for name, attr in (device.get("attributes") or {}).items():
        value = _attr_value(name, attr)
        domain, ident = _split_qualified(name, driver)
        dict.setdefault(attributes, domain, {})[ident] = value
    capacity: DomainMap = DomainMap()
    for name, cap in (device.get("capacity") or {}).items():
        raw = cap.get("value") if isinstance(cap, Mapping) else cap
        if isinstance(raw, int) and not isinstance(raw, bool):
            raw = str(raw)
        if not isinstance(raw, str):
            raise SelectorEvalError(f"capacity {name}: value must be a quantity string")
        try:
            q = parse_quantity(raw.strip())
        except QuantityError as e:
            raise SelectorEvalError(f"capacity {name}: {e}") from None
        domain, ident = _split_qualified(name, driver)
        dict.setdefault(capacity, domain, {})[ident] = q
    multi = device.get("allowMultipleAllocations")
    return {
        "driver": driver,
        "allowMultipleAllocations": bool(multi) if multi is not None else False,
        "attributes": attributes,
        "capacity": capacity,
    }
