# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What a ConfigMap or Secret may hold: refused before anything is written or applied (issue 26).

The API server refuses a ConfigMap whose ``data`` + ``binaryData`` values add up to more than 1 MiB, and a Secret
whose ``data`` does (Kubernetes ``pkg/apis/core/validation``: ``ValidateConfigMap`` / ``ValidateSecret``, limit
``MaxSecretSize``): the sum of the values' sizes in bytes, keys not counted. A ``binaryData`` / Secret ``data`` value is
base64 in a manifest and counted decoded; a Secret's ``stringData`` is merged into ``data`` (its keys win) before
validation, so it is counted as UTF-8 bytes in their place.

The render directory's writer (:func:`.manifest_dir.dump`, called while a transaction is planned, before its commit)
and the hub's apply (:func:`.routing_hub.sync_hub`, before the first object is applied) call :func:`check_data_size`:
an object over the limit is a clear error naming it, and nothing is written or applied. Pure: no third-party imports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

#: ``MaxSecretSize`` of the API server: the most a ConfigMap's or a Secret's data may hold, in bytes.
MAX_DATA_BYTES = 1024 * 1024
_KINDS = ("ConfigMap", "Secret")


def _text_bytes(value: Any) -> int:
    return len(value.encode("utf-8")) if isinstance(value, str) else len(str(value).encode("utf-8"))


def _base64_bytes(value: Any) -> int:
    """The decoded size of a base64 value (without decoding it; whitespace ignored, as a decoder does)."""
    text = "".join(str(value).split())
    return len(text) * 3 // 4 - (len(text) - len(text.rstrip("=")))


def _values(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    values = obj.get(key)
    return values if isinstance(values, Mapping) else {}


def data_bytes(obj: Any) -> int | None:
    """The size the API server checks of a core/v1 ConfigMap or Secret, in bytes; None for any other object."""
    if not isinstance(obj, Mapping) or obj.get("kind") not in _KINDS or obj.get("apiVersion") not in ("v1", None):
        return None
    if obj["kind"] == "ConfigMap":
        return sum(_text_bytes(v) for v in _values(obj, "data").values()) + sum(
            _base64_bytes(v) for v in _values(obj, "binaryData").values()
        )
    sizes = {str(k): _base64_bytes(v) for k, v in _values(obj, "data").items()}
    sizes.update({str(k): _text_bytes(v) for k, v in _values(obj, "stringData").items()})
    return sum(sizes.values())


def describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        meta = {}
    return f"{obj.get('kind')}/{meta.get('namespace') or ''}/{meta.get('name')}"


def check_data_size(objects: Iterable[Any], where: str) -> None:
    """Raise :class:`.errors.GpufleetError` naming every ConfigMap / Secret of ``objects`` whose data is over
    :data:`MAX_DATA_BYTES` (kind/namespace/name, its size, the limit). Values are never in the message, only their
    size."""
    over = []
    for obj in objects:
        size = data_bytes(obj)
        if size is not None and size > MAX_DATA_BYTES:
            over.append(f"{describe(obj)} holds {size:,} bytes of data")
    if over:
        raise GpufleetError(
            f"{where}: {'; '.join(over)}: over the {MAX_DATA_BYTES:,} bytes (1 MiB) of data + binaryData the "
            "Kubernetes API server accepts in a ConfigMap or Secret, so it would be refused (and a GitOps sync of it "
            "fail). Nothing was written or applied."
        )
