# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.manifest_dir: write a cluster's objects to the render directory on the controller."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import FleetIdentity
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import sync
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction


class ActionModule(GpufleetAction):
    MODULE = "manifest_dir"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        fleet = None
        if args["fleet"] is not None:
            fleet = FleetIdentity.parse(
                args["fleet"], args["adopt_unlabelled"], name_var="fleet", adopt_var="adopt_unlabelled"
            )
        outcome = sync(
            args["path"],
            args["cluster"],
            args["objects"],
            {str(k): str(v) for k, v in args["owner"].items()},
            prune=args["prune"],
            check_mode=bool(self._task.check_mode),
            fleet=fleet,
        )
        return {
            "changed": outcome.changed,
            "written": outcome.written,
            "removed": outcome.removed,
            "unchanged": outcome.unchanged,
        }
