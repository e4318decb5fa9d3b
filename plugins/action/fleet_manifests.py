# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_manifests: render every cluster's serving objects in one task."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import SERVING_OWNER
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_deploy import fleet_manifests
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import sync
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction


class ActionModule(GpufleetAction):
    MODULE = "fleet_manifests"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        objects = fleet_manifests(args["fleet"], args["replicas"])
        written: list[str] = []
        removed: list[str] = []
        unchanged = 0
        if args["render_dir"]:
            # Everything is rendered above before the first file is written.
            for cluster, objs in objects.items():
                outcome = sync(
                    args["render_dir"],
                    cluster,
                    objs,
                    SERVING_OWNER,
                    prune=args["prune"],
                    check_mode=bool(self._task.check_mode),
                )
                written += outcome.written
                removed += outcome.removed
                unchanged += outcome.unchanged
        return {
            "changed": bool(written or removed),
            "objects_by_cluster": objects,
            "written": written,
            "removed": removed,
            "unchanged": unchanged,
        }
