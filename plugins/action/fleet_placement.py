# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_placement: place every deployment of the fleet in one task."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import observe_fleet, observed_pools
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import SERVING_OWNER
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_deploy import observed_replicas, place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import read_objects, recover, tree_token
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import validate_classes
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
        # Observed capacity and drift: a pure function of what was read from the reachable clusters.
        states = observe_fleet(
            args["fleet"],
            validate_classes(args["fleet"]["classes"]),
            {c: objs for c, objs in args["cluster_objects"].items() if c not in unreachable},
        )
        outcome = place_fleet(
            args["fleet"],
            observed,
            unreachable=unreachable,
            drained=args["drained"],
            cordoned=args["cordoned"],
            observed_nodes=observed_pools(states) if args["capacity"] == "observed" else None,
            capacity_notes={s.name: {p.pool: notes for p in s.pools if (notes := p.notes())} for s in states},
        )
        return {
            "changed": outcome.changed,
            "replicas": outcome.replicas,
            "by_deployment": outcome.by_deployment(),
            "by_cluster": outcome.by_cluster(),
            "results": {
                name: {k: v for k, v in res.items() if k != "replicas"} for name, res in outcome.results.items()
            },
            "shortfalls": outcome.shortfalls(),
            "status": outcome.statuses(),
            "table": outcome.table(),
            "explain": outcome.explain(),
            "render_token": token,
            "drift": [s.to_dict() for s in states],
            "drift_lines": [line for s in states for line in s.drift()],
        }
