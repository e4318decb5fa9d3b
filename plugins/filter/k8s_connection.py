# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter gpufleet.serving.k8s_connection: a cluster's pinned kubernetes.core connection options.

Documentation is in ``k8s_connection.yml`` beside this file; the logic is ``plugins/module_utils/connection.py``.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.connection import kube_connection
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.plugin_utils.filter import filter_map, gpufleet_filter


@gpufleet_filter
def k8s_connection(cluster: Any, kubeconfig: Any = None, context: Any = None) -> dict[str, Any]:
    """``inventory_hostname | gpufleet.serving.k8s_connection(gpufleet_kubeconfig, gpufleet_context)``."""
    return kube_connection(
        to_plain(cluster, "cluster"), to_plain(kubeconfig, "kubeconfig"), to_plain(context, "context")
    )


class FilterModule:
    """gpufleet.serving cluster connection filter."""

    def filters(self) -> dict[str, Any]:
        return filter_map(k8s_connection)
