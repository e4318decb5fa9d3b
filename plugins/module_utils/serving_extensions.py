# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The render's last step for a deployment on one cluster: adapters (adapters.py), queues (queues.py) and
autoscaling (autoscaling.py) applied to the objects the renderer and backends built. One entry point, so the
renderer and the fleet render call one function; a deployment without adapters, queue or autoscaling is unchanged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelDeployment, QueueRef
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import ReplicaRecord


def extend_objects(
    dep: ModelDeployment,
    records: Sequence[ReplicaRecord],
    cluster: str,
    objects: list[dict[str, Any]],
    cluster_data: Mapping[str, Any] | None = None,
    prefix: str = "deployment",
) -> list[dict[str, Any]]:
    """``objects`` (``dep`` rendered on ``cluster``) with its adapters, queue labels and ScaledObjects. ``records``:
    every replica of ``dep`` fleet-wide; ``cluster_data``: the fleet cluster (``queue``, ``prometheus_url``)."""
    if not (dep.adapters or dep.autoscaling or dep.queue or (cluster_data or {}).get("queue")):
        return objects
    from ansible_collections.gpufleet.serving.plugins.module_utils.adapters import adapter_objects
    from ansible_collections.gpufleet.serving.plugins.module_utils.autoscaling import (
        autoscale_objects,
        check_autoscaling,
    )
    from ansible_collections.gpufleet.serving.plugins.module_utils.queues import queue_for, queue_objects
    from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.registry import backends_of

    data = cluster_data or {}
    default = QueueRef.model_validate(data["queue"]) if data.get("queue") else None
    check_autoscaling(dep, [b.name for b in backends_of(dep)], prefix)
    objects = adapter_objects(dep, objects, prefix)
    # ScaledObjects first: they copy their workload's labels, and a queue's labels belong on workloads only.
    objects = autoscale_objects(dep, records, cluster, objects, data.get("prometheus_url"))
    return queue_objects(objects, queue_for(dep, default))
