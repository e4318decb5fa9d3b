# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters over Kubernetes objects: k8s_missing_from (pruning) and workloads_pending (apply-mode readiness)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import LABEL_DEPLOYMENT
from ansible_collections.gpufleet.serving.plugins.module_utils.readiness import pending_workloads


def _key(obj: Any, where: str, name: str = "k8s_missing_from") -> tuple[str, str, str, str]:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("metadata"), Mapping):
        raise AnsibleFilterError(f"{name}: every item of {where} must be a Kubernetes object (got {obj!r:.120})")
    meta = obj["metadata"]
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name", "")),
    )


def _deployment(obj: Mapping[str, Any]) -> str | None:
    if isinstance(obj.get("metadata"), Mapping):
        labels = obj["metadata"].get("labels")
        if isinstance(labels, Mapping) and labels.get(LABEL_DEPLOYMENT):
            return str(labels[LABEL_DEPLOYMENT])
    value = obj.get("deployment")  # a workloads_pending entry
    return str(value) if value else None


def k8s_missing_from(existing: Any, desired: Any, hold: Any = None) -> list[Any]:
    """Objects of ``existing`` whose (apiVersion, kind, namespace, name) is not among ``desired``, except those of
    the deployments named in ``hold`` (their ``gpufleet.io/deployment`` label)."""
    if not isinstance(existing, list) or not isinstance(desired, list):
        raise AnsibleFilterError(
            "k8s_missing_from: both the input and the argument must be lists of Kubernetes objects"
        )
    if hold is not None and (not isinstance(hold, list) or not all(isinstance(h, str) for h in hold)):
        raise AnsibleFilterError("k8s_missing_from: hold must be a list of deployment names")
    held = set(hold or ())
    wanted = {_key(obj, "the argument") for obj in desired}
    return [obj for obj in existing if _key(obj, "the input") not in wanted and _deployment(obj) not in held]


def k8s_deployment_names(objects: Any) -> list[str]:
    """The sorted, distinct ``gpufleet.io/deployment`` labels of Kubernetes objects (or workloads_pending entries)."""
    if not isinstance(objects, list) or not all(isinstance(o, Mapping) for o in objects):
        raise AnsibleFilterError("k8s_deployment_names: the input must be a list of Kubernetes objects")
    return sorted({name for obj in objects if (name := _deployment(obj))})


def workloads_pending(observed: Any, desired: Any) -> list[dict[str, str]]:
    """An entry per workload of ``desired`` that ``observed`` does not show ready (by its own replica counts)."""
    if not isinstance(observed, list) or not isinstance(desired, list):
        raise AnsibleFilterError(
            "workloads_pending: both the input and the argument must be lists of Kubernetes objects"
        )
    for where, objs in (("the input", observed), ("the argument", desired)):
        for obj in objs:
            _key(obj, where, "workloads_pending")
    return pending_workloads(observed, desired)


def k8s_namespaces(objects: Any) -> list[dict[str, Any]]:
    """A Namespace object for every distinct ``metadata.namespace`` of the input, sorted by name."""
    if not isinstance(objects, list):
        raise AnsibleFilterError("k8s_namespaces: the input must be a list of Kubernetes objects")
    names = {_key(obj, "the input", "k8s_namespaces")[2] for obj in objects}
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in sorted(names) if n]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "k8s_missing_from": k8s_missing_from,
            "k8s_deployment_names": k8s_deployment_names,
            "k8s_namespaces": k8s_namespaces,
            "workloads_pending": workloads_pending,
        }
