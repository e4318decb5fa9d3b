# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter gpufleet.serving.k8s_missing_from: the objects of one list that are not in another (for pruning)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError


def _key(obj: Any, where: str) -> tuple[str, str, str, str]:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("metadata"), Mapping):
        raise AnsibleFilterError(
            f"k8s_missing_from: every item of {where} must be a Kubernetes object (got {obj!r:.120})"
        )
    meta = obj["metadata"]
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name", "")),
    )


def k8s_missing_from(existing: Any, desired: Any) -> list[Any]:
    """Objects of ``existing`` whose (apiVersion, kind, namespace, name) is not among ``desired``."""
    if not isinstance(existing, list) or not isinstance(desired, list):
        raise AnsibleFilterError(
            "k8s_missing_from: both the input and the argument must be lists of Kubernetes objects"
        )
    wanted = {_key(obj, "the argument") for obj in desired}
    return [obj for obj in existing if _key(obj, "the input") not in wanted]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"k8s_missing_from": k8s_missing_from}
