# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.manifest_dir: write a cluster's objects to the render directory on the controller."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import FleetIdentity
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import FLEET_DIR, Transaction
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import bounded_list
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction


class ActionModule(GpufleetAction):
    MODULE = "manifest_dir"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        fleet = None
        if args["fleet"] is not None:
            fleet = FleetIdentity.parse(
                args["fleet"], args["adopt_unlabelled"], name_var="fleet", adopt_var="adopt_unlabelled"
            )
        cluster, clusters = args["cluster"], args["clusters"]
        if cluster is None and clusters is None:
            raise GpufleetError("manifest_dir: give cluster (the directory to write), clusters (the fleet's), or both")
        owner = {str(k): str(v) for k, v in args["owner"].items()}
        txn = Transaction(
            args["path"], check_mode=bool(self._task.check_mode), gitops=args["gitops"], diff=bool(self._task.diff)
        )
        if cluster == FLEET_DIR:
            txn.plan_fleet(args["objects"], owner)
        elif cluster is not None:
            txn.plan(cluster, args["objects"], owner, prune=args["prune"], fleet=fleet)
        elif args["objects"]:
            raise GpufleetError("manifest_dir: objects need a cluster to be written to")
        if clusters is not None and args["prune"] and owner:
            txn.prune_other_clusters([str(c) for c in clusters], owner, fleet=fleet)
        outcome = txn.commit()
        result: dict[str, Any] = {
            "changed": outcome.changed,
            "unchanged": outcome.unchanged,
            "left": outcome.left,
            "files": outcome.files(),
            "lines": outcome.lines(),
        }
        # Issue 26: the fleet directory's generator writes files per cluster (2.5 MB of paths at 5,000 clusters, over
        # AWX's 700,000-character job event): each list holds what fits in 50,000 characters, <list>_count them all.
        truncated = False
        for key in ("written", "created", "removed", "removed_clusters"):
            truncated |= bounded_list(result, key, getattr(outcome, key))
        result["truncated"] = truncated
        if self._task.diff:
            result["diff"] = outcome.diff
        return result
