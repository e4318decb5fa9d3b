# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_placement: place every deployment of the fleet in one task."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import pool_notes, usable_nodes
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import SERVING_OWNER
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_deploy import observed_replicas, place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import read_objects, recover, tree_token
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction


class ActionModule(GpufleetAction):
    MODULE = "fleet_placement"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        unreachable = set(args["unreachable"])
        objects = list(args["observed_objects"])
        token = None
        if args["render_dir"]:
            # Fingerprint first: fleet_manifests refuses to write if another run changes the directory after this read.
            if not self._task.check_mode:
                recover(args["render_dir"])  # a run killed while switching files in: finish its switch first
            token = tree_token(args["render_dir"])
            # The per-replica Service carries the placement annotation: only Services are read.
            objects.extend(
                obj
                for _cluster, _rel, obj in read_objects(args["render_dir"], selector=SERVING_OWNER, kinds=["Service"])
            )
        observed = [r for r in observed_replicas(objects) if r["cluster"] not in unreachable]
        # A cluster that could not be read keeps the replicas it had at the last successful run.
        observed += [r for r in args["fallback_replicas"] if r.get("cluster") in unreachable]
        # Observed capacity and drift, as fleet_read observed it on the reachable clusters.
        states = [s for s in args["cluster_capacity"] if s.get("cluster") not in unreachable]
        outcome = place_fleet(
            args["fleet"],
            observed,
            unreachable=unreachable,
            drained=args["drained"],
            cordoned=args["cordoned"],
            observed_nodes=usable_nodes(states) if args["capacity"] == "observed" else None,
            capacity_notes=pool_notes(states),
        )
        results = {name: {k: v for k, v in res.items() if k != "replicas"} for name, res in outcome.results.items()}
        shortfalls, status = outcome.shortfalls(), outcome.statuses()
        result = {
            "changed": outcome.changed,
            "replicas": outcome.replicas,
            "results": results,
            "shortfalls": shortfalls,
            "status": status,
            "table": outcome.table(),
            "explain": outcome.explain(),
            "render_token": token,
            "drift": states,
            "drift_lines": [str(line) for s in states for line in s.get("drift") or []],
        }
        if args["grouped"]:
            result["by_deployment"] = outcome.by_deployment()
            result["by_cluster"] = outcome.by_cluster()
        if args["publish_stats"]:
            # What set_stats returns (Ansible takes custom stats from any task's result): no task templating the
            # replicas again just to publish them.
            placement = {
                "results": results,
                "replicas": outcome.replicas,
                "shortfalls": shortfalls,
                "status": status,
                "degraded": shortfalls,
                "capacity": args["capacity"],
            }
            result["ansible_stats"] = {
                "data": {"gpufleet_placement": placement, "gpufleet_drift": states},
                "per_host": False,
                "aggregate": False,
            }
        return result
