# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter gpufleet.serving.k8s_connection: a cluster's pinned kubernetes.core connection options.

Documentation is in ``k8s_connection.yml`` beside this file; the logic is ``plugins/module_utils/connection.py``.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.module_utils.connection import kube_connection
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain

FILTER = "k8s_connection"


def k8s_connection(cluster: Any, kubeconfig: Any = None, context: Any = None) -> dict[str, Any]:
    """``inventory_hostname | gpufleet.serving.k8s_connection(gpufleet_kubeconfig, gpufleet_context)``."""
    try:
        return kube_connection(
            to_plain(cluster, "cluster"), to_plain(kubeconfig, "kubeconfig"), to_plain(context, "context")
        )
    except GpufleetError as exc:
        raise AnsibleFilterError(f"{FILTER}: {exc}") from exc


class FilterModule:
    """gpufleet.serving cluster connection filter."""

    def filters(self) -> dict[str, Any]:
        return {FILTER: k8s_connection}
