# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_plan: take a plan document for an apply of the play's clusters."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import handoff
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.document import read_record
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.files import load_plan, read_applied
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction, handoff_dir


class ActionModule(GpufleetAction):
    MODULE = "fleet_plan"
    FAILURE_HEADLINE = "the plan cannot be applied with this inventory; nothing was changed."

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        plan, source = load_plan(args["plan"], args["plan_file"])
        if args["mode"] and plan.mode != args["mode"]:
            # A render-mode plan was placed over the render directory, an apply-mode plan over the clusters.
            raise GpufleetError(
                f"{source}: the plan was made for gpufleet_mode={plan.mode}, this apply runs with "
                f"gpufleet_mode={args['mode']}; make the plan with the mode you apply it with"
            )
        play = sorted(set(args["play"]))
        # The inventory this apply runs with must be the one the plan was made from (its sections, and each cluster
        # of the play): a plan never lands on clusters it did not decide for.
        plan.check_inventory(args["fleet"], play, source)
        # Never roll a cluster back to an older plan than the one it last took.
        recorded: dict[str, Any] = {}
        if args["render_dir"]:
            recorded.update(read_applied(args["render_dir"], plan.fleet_name, play))
        for cluster, objs in (args["recorded_by_cluster"] or {}).items():
            for obj in objs:
                rec = read_record(obj)
                if rec is not None and rec.get("fleet_name") == plan.fleet_name and cluster in play:
                    recorded[cluster] = rec
        plan.check_recorded(recorded, source)

        outside = [c for c in plan.clusters() if c not in set(play)]
        mine = set(play)
        fleet = dict(plan.fleet)
        fleet["clusters"] = [c for c in plan.fleet.get("clusters") or [] if c.get("name") in mine]
        replicas = [r for r in plan.replicas if r.get("cluster") in mine]
        # A partial apply cannot await replicas placed outside its play: nothing of their deployments is removed.
        held = plan.held_outside(play, plan.placement.get("observed") or []) if outside else {}
        placement = plan.placement
        return {
            "changed": False,
            "source": source,
            "summary": plan.summary(source),
            "record": plan.record(),
            # Issue 26: past handoff_over characters these go to the next tasks through a file (a handle each).
            "fleet": handoff(fleet, "fleet", handoff_dir(), args["handoff_over"]),
            "replicas": handoff(replicas, "replicas", handoff_dir(), args["handoff_over"]),
            "outside": outside,
            "full": not outside,
            "held_outside": held,
            "held_lines": [
                f"{dep}: nothing removed on this play's clusters; its new replicas on {', '.join(clusters)} are outside "
                "the play, so this run cannot wait for them to be Ready (apply them, then apply again)"
                for dep, clusters in held.items()
            ],
            "table": list(placement.get("table") or []),
            "status": dict(placement.get("status") or {}),
            "degraded": list(placement.get("degraded") or []),
            "routing": {dep: {c: w for c, w in per.items() if c in mine} for dep, per in plan.routing.items()},
            # Fleet routing is the whole plan's (gpufleet.serving.fleet_routing), whichever clusters this play has.
            "fleet_routing": plan.routing,
            "dropped": list(placement.get("dropped") or []),
        }
