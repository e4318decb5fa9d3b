# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""How the collection reaches a cluster: the kubernetes.core connection options of one inventory host.

Every role that talks to a cluster gets its connection from the internal ``cluster_connection`` role, which calls
:func:`kube_connection` (through the ``gpufleet.serving.k8s_connection`` filter) and sets the result as
``module_defaults`` for the ``group/kubernetes.core.k8s`` action group. A cluster must be pinned: with neither a
kubeconfig nor a context, kubernetes.core would use the current kube context, which may point at another cluster
of the fleet (lessons.md: a long demo loses its context when another shell switches it).
"""

from __future__ import annotations

import os
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.redact import describe


class UnpinnedClusterError(GpufleetError):
    """A cluster has neither ``gpufleet_kubeconfig`` nor ``gpufleet_context``."""


def _set(value: Any) -> bool:
    return value is not None and value != ""


def kube_connection(cluster: str, kubeconfig: Any = None, context: Any = None) -> dict[str, Any]:
    """``{kubeconfig?, context?}`` for kubernetes.core modules; a string kubeconfig path is ``~``-expanded and a
    mapping (an inline kubeconfig) passes through. Raises :class:`UnpinnedClusterError` when neither is set. Errors
    show what kind of value was given (redact.describe), never a kubeconfig's content."""
    if not isinstance(cluster, str) or not cluster:
        raise GpufleetError(f"cluster must be the inventory host name (got {describe(cluster)})")
    out: dict[str, Any] = {}
    if _set(kubeconfig):
        if isinstance(kubeconfig, str):
            out["kubeconfig"] = os.path.expanduser(kubeconfig)
        elif isinstance(kubeconfig, dict):
            out["kubeconfig"] = kubeconfig
        else:
            raise GpufleetError(
                f"cluster {cluster}: gpufleet_kubeconfig must be a path or a kubeconfig mapping "
                f"(got {describe(kubeconfig, secret=True)})"
            )
    if _set(context):
        if not isinstance(context, str):
            raise GpufleetError(f"cluster {cluster}: gpufleet_context must be a string (got {describe(context)})")
        out["context"] = context
    if not out:
        raise UnpinnedClusterError(
            f"cluster {cluster} has neither gpufleet_kubeconfig nor gpufleet_context: set one in its host_vars so "
            "nothing is applied to whatever cluster the current kube context points at"
        )
    return out


#: The inventory variables of a cluster's connection (kubeconfig, context).
CONNECTION_VARS = ("gpufleet_kubeconfig", "gpufleet_context")


def kube_connections(clusters: list[str], hostvars: Any) -> dict[str, dict[str, Any]]:
    """Every cluster's :func:`kube_connection`, by name, from each host's ``gpufleet_kubeconfig`` / ``gpufleet_context``
    in ``hostvars`` (a mapping of host name to its variables). Raises one :class:`UnpinnedClusterError` naming every
    cluster that is not pinned, so a fleet run pins all clusters or none."""
    out: dict[str, dict[str, Any]] = {}
    unpinned: list[str] = []
    for cluster in clusters:
        hv = hostvars[cluster]
        try:
            out[cluster] = kube_connection(cluster, *(hv.get(var) for var in CONNECTION_VARS))
        except UnpinnedClusterError:
            unpinned.append(cluster)
    if unpinned:
        raise UnpinnedClusterError(
            f"cluster(s) {', '.join(unpinned)} have neither gpufleet_kubeconfig nor gpufleet_context: set one in "
            "their host_vars so nothing is applied to whatever cluster the current kube context points at"
        )
    return out
