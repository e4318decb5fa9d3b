# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Plain data: strip Ansible's data tags and lazy containers before validating or returning values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError


def to_plain(value: Any, path: str = "value") -> Any:
    """Deep copy as plain JSON-like Python (dict, list, str, int, float, bool, None).

    Strips Ansible's data tags and lazy containers (str/dict/list subclasses): items are read through the public
    mapping/iteration protocol, so lazy values are resolved. Anything that is not JSON-like raises GpufleetError.
    """
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise GpufleetError(f"{path}: keys must be strings (got {key!r})")
            key = str.__str__(key)
            out[key] = to_plain(item, f"{path}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [to_plain(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise GpufleetError(f"{path}: {type(value).__name__} is not plain data (mapping, list, string, number, bool, null)")
