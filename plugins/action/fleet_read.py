# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_read: read objects from every cluster of the fleet in one task."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_k8s import Read, connect, read_fleet
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction


class ActionModule(GpufleetAction):
    MODULE = "fleet_read"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        apis, errors = connect(args["connections"], args["request_timeout"])
        reads = [Read(r["api_version"], r["kind"], tuple(r["label_selectors"])) for r in args["reads"]]
        objects, read_errors = read_fleet(apis, reads)
        errors.update(read_errors)
        return {
            "changed": False,
            "objects_by_cluster": objects,
            "objects": [obj for cluster in sorted(objects) for obj in objects[cluster]],
            "unreachable_clusters": sorted(errors),
            "errors": errors,
        }
