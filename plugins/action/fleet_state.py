# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_state: record a cluster drained, cordoned or neither in the fleet state."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.state import (
    CORDONED_VAR,
    DRAINED_VAR,
    FleetState,
    change,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.survey import parse_list
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction


class ActionModule(GpufleetAction):
    MODULE = "fleet_state"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        variables = FleetState.of(
            parse_list(args["drained"], DRAINED_VAR, "cluster names"),
            parse_list(args["cordoned"], CORDONED_VAR, "cluster names"),
        )
        outcome = change(
            args["path"],
            args["cluster"],
            args["state"],
            args["clusters"],
            variables,
            render_dir=args["render_dir"],
            check_mode=bool(self._task.check_mode),
        )
        result: dict[str, Any] = {
            "changed": outcome["changed"],
            "path": outcome["path"],
            "drained": outcome["effective"]["drained"],
            "cordoned": outcome["effective"]["cordoned"],
            "recorded": outcome["recorded"],
        }
        if self._task.diff:
            result["diff"] = {
                "before": outcome["before"],
                "after": outcome["after"],
                "before_header": outcome["path"],
                "after_header": outcome["path"],
            }
        return result
