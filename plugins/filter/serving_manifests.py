# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter gpufleet.serving.serving_manifests: the Kubernetes objects serving a deployment's replicas on one cluster.

Documentation is in ``serving_manifests.yml`` beside this file; the logic is ``plugins/module_utils/render/serving.py``.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.plugin_utils.filter import filter_map, gpufleet_filter


@gpufleet_filter
def serving_manifests(
    replicas: Any,
    deployment: Any,
    cluster: Any = None,
    caches: Any = None,
    gateway: Any = None,
    labels: Any = None,
    annotations: Any = None,
    fleet: Any = None,
) -> list[dict[str, Any]]:
    """``replicas | gpufleet.serving.serving_manifests(deployment, cluster=inventory_hostname, fleet=..., ...)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import render_serving_manifests

    if cluster is None:
        raise GpufleetError("cluster is required (the inventory host whose replicas to render)")
    if fleet is None:
        raise GpufleetError(
            "fleet is required: the fleet's name (gpufleet_fleet_name), the gpufleet.io/fleet label of every object"
        )
    return render_serving_manifests(
        replicas,
        deployment,
        cluster=cluster,
        caches=caches,
        gateway=gateway,
        labels=labels,
        annotations=annotations,
        fleet=fleet,
    )


class FilterModule:
    """gpufleet.serving rendering filters."""

    def filters(self) -> dict[str, Any]:
        return filter_map(serving_manifests)
