# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_manifests: render every cluster's serving objects in one task."""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    LABEL_CLUSTER,
    LABEL_DEPLOYMENT,
    SERVING_OWNER,
    identity_of,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import fleet_manifests
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import (
    LIST_LIMIT,
    bounded_list,
    bounded_mapping,
    size,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.files import write_applied
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.registry import (
    SERVICE_KIND,
    workload_kinds,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.rollout import budgets, object_key, plan_render
from ansible_collections.gpufleet.serving.plugins.module_utils.routing import still_routed
from ansible_collections.gpufleet.serving.plugins.module_utils.routing_hub import read_routing_artifact
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction

#: A ``file_lines`` line of a cluster whose files changed (created, changed, removed, or the cluster left).
CHANGED_LINE = re.compile(r"(?:: \+| ~| -)[1-9]|left the inventory")


class ActionModule(GpufleetAction):
    MODULE = "fleet_manifests"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        # Fleet identity: every object carries the fleet's label; only this fleet's files are pruned or overwritten.
        fleet = identity_of(args["fleet"])
        objects = fleet_manifests(args["fleet"], args["replicas"])
        result: dict[str, Any] = {
            "written": [],
            "removed": [],
            "unchanged": 0,
            "removed_clusters": [],
            "rollout": {"deployments": [], "moves_kept": {}, "moves_removed": {}},
            "rollout_lines": [],
        }
        kinds = [SERVICE_KIND.kind, *(k.kind for k in workload_kinds())]
        if args["render_dir"]:
            # Everything is rendered above, and every cluster planned below, before the first file is written; the
            # commit writes all clusters or none.
            # gitops: every file gets its GitOps sync wave; the namespaces the files use get Namespace files.
            txn = Transaction(
                args["render_dir"],
                check_mode=bool(self._task.check_mode),
                expect_token=args["render_token"],
                gitops=args["gitops"],
            )
            # Objects placement skipped (unreadable placement annotation): nothing of their deployments is pruned, and
            # an object that names no deployment is kept.
            held = {str(s["deployment"]) for s in args["unreadable"] if s.get("deployment")}
            # A partial apply of a plan: deployments whose new replicas are outside the play (plan.held_outside).
            held |= {str(d) for d in args["hold_deployments"]}
            kept = {str(s["path"]) for s in args["unreadable"] if s.get("path")}

            # Rolling updates (module_utils/rollout.py): the render directory is what GitOps serves, so of the
            # workloads whose spec changes only the first wave is written (the others keep their files), and replicas
            # moved away beyond the deployment's max_unavailable keep their files until the next run.
            rollout = plan_render(
                objects,
                {c: txn.current_objects(c, objs, SERVING_OWNER, kinds) for c, objs in objects.items()},
                budgets(args["fleet"]["deployments"]),
                fleet.name,
            )
            kept |= rollout.kept
            # Fleet routing (docs/routing.md): replicas the last routing file still sends traffic to keep their files
            # this run, while the routing file written after this task gives them weight 0; the next run removes them.
            routed = still_routed(read_routing_artifact(args["render_dir"], fleet.name), args["replicas"])
            routed_held: set[tuple[str, str]] = set()

            def keep_left(rel: str, obj: Any) -> bool:
                labels = ((obj.get("metadata") or {}).get("labels") or {}) if isinstance(obj, dict) else {}
                return rel in kept or str(labels.get(LABEL_DEPLOYMENT) or "") in held

            def keep(rel: str, obj: Any) -> bool:
                labels = ((obj.get("metadata") or {}).get("labels") or {}) if isinstance(obj, dict) else {}
                pair = (str(labels.get(LABEL_DEPLOYMENT) or ""), str(labels.get(LABEL_CLUSTER) or ""))
                if pair in routed:
                    routed_held.add(pair)
                    return True
                return keep_left(rel, obj)

            for cluster, objs in objects.items():
                later = rollout.held_back.get(cluster, set())
                now = [o for o in objs if object_key(o) not in later] if later else objs
                txn.plan(cluster, now, SERVING_OWNER, prune=args["prune"], keep=keep, fleet=fleet)
            if args["prune"] and args["prune_other_clusters"]:
                # A cluster that left the inventory is not held for routing: the inventory no longer routes to it.
                txn.prune_other_clusters(objects, SERVING_OWNER, keep_file=keep_left, fleet=fleet)
            outcome = txn.commit()
            if args["plan_record"] and not self._task.check_mode:
                # Which plan each cluster's files now come from (an older plan is refused by the next apply).
                write_applied(args["render_dir"], objects, args["plan_record"])
            result = {
                "unchanged": outcome.unchanged,
                "rollout": rollout.to_dict(),
                "rollout_lines": rollout.lines(),
                "routing_held": [{"deployment": d, "cluster": c} for d, c in sorted(routed_held)],
            }
            # Issue 26: every list of paths or lines is bounded (the first that fit, <key>_count, truncated); the render
            # directory holds every file. At 5,000 clusters the lists alone were 1.5 MB (AWX blanks an event over 700,000).
            lines = outcome.lines()
            if size(lines) > LIST_LIMIT:
                # The clusters whose files changed come first, so a cut list still names them.
                moved = [line for line in lines if CHANGED_LINE.search(line)]
                lines = moved + [line for line in lines if not CHANGED_LINE.search(line)]
            cut = [
                bounded_list(result, "written", outcome.written),
                bounded_list(result, "removed", outcome.removed),
                bounded_list(result, "removed_clusters", outcome.removed_clusters),
                bounded_mapping(result, "files", outcome.files()),
                bounded_list(result, "file_lines", lines),
            ]
            result["truncated"] = any(cut)
            changed = bool(outcome.written or outcome.removed)
        else:
            changed = False
        if args["render_dir"]:
            # The objects are in the render directory: returned too, they made the task's result larger than AWX
            # stores an event (700,000 characters; about 1 MB for 100 clusters and 200 replicas), so AWX dropped it.
            return {"changed": changed, **result}
        return {"changed": changed, "objects_by_cluster": objects, **result}
