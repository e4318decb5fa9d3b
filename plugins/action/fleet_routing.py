# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_routing: the fleet routing artifact, written, applied to the hub and
published."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.connection import CONNECTION_VARS, kube_connections
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.module_utils.routing import (
    ADDRESS_VAR,
    NONE,
    PRIORITY_VAR,
    ROUTING_DIR,
    ROUTING_OWNER,
    build_routing,
    cluster_settings,
    hub_objects,
    parse_renderer,
    pending_counts,
    placed_counts,
    routing_relpath,
    weight_lines,
)
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction


class ActionModule(GpufleetAction):
    MODULE = "fleet_routing"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        renderer = parse_renderer(args["renderer"])
        fleet = args["fleet"]
        fleet_name = str(fleet.get("name") or "")
        hostvars = task_vars.get("hostvars") or {}
        if args["plan_routing"] is not None:
            # The plan's decision (plan.routing): placed replicas per deployment and cluster, and the drained clusters.
            plan_routing: Mapping[str, Any] = args["plan_routing"]
            placed = {d: {c: int(v.get("placed") or 0) for c, v in per.items()} for d, per in plan_routing.items()}
            drained = sorted({c for per in plan_routing.values() for c, v in per.items() if v.get("draining")})
        elif args["replicas"] is not None:
            placed = placed_counts(args["replicas"])
            drained = sorted(args["drained"])
        else:
            raise GpufleetError("one of plan_routing and replicas is required")
        names = sorted(
            {str(c.get("name")) for c in fleet.get("clusters") or []} | {c for p in placed.values() for c in p}
        )
        settings = cluster_settings(
            {
                n: {v: to_plain(hostvars[n].get(v), v) for v in (PRIORITY_VAR, ADDRESS_VAR)} if n in hostvars else {}
                for n in names
            }
        )
        artifact = build_routing(
            fleet,
            placed,
            drained=drained,
            clusters=settings,
            not_ready=pending_counts(args["pending"]),
            leaving=placed_counts(args["leaving"]),
            held=args["held"],
            mode=args["mode"],
            renderer=renderer,
        )
        objects, notes = hub_objects(artifact, renderer, gateway=args["gateway"], namespace=args["namespace"])
        result: dict[str, Any] = {
            "changed": False,
            "routing": artifact,
            "lines": weight_lines(artifact),
            "notes": notes,
            "objects": objects,
            "written": [],
            "removed": [],
            "hub": None,
        }
        if args["render_dir"]:
            from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction

            txn = Transaction(args["render_dir"], check_mode=bool(self._task.check_mode))
            files = {routing_relpath(o).rsplit("/", 1)[1]: o for o in objects}
            txn.plan_fleet_files(ROUTING_DIR, files, ROUTING_OWNER, fleet_name)
            outcome = txn.commit()
            result.update(written=outcome.written, removed=outcome.removed, changed=outcome.changed)
        if args["hub"] and args["mode"] == "apply":
            hub = str(args["hub"])
            if hub not in hostvars:
                raise GpufleetError(f"gpufleet_routing_hub: {hub!r} is not an inventory host")
            connection = kube_connections(
                [hub], {hub: {v: to_plain(hostvars[hub].get(v), v) for v in CONNECTION_VARS}}
            )[hub]
            from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_k8s import ClusterAPI
            from ansible_collections.gpufleet.serving.plugins.module_utils.routing_hub import sync_hub

            api = ClusterAPI(hub, connection, args["request_timeout"])
            hub_out = sync_hub(
                api,
                objects,
                fleet_name,
                field_manager=args["field_manager"],
                check_mode=bool(self._task.check_mode),
            )
            result["hub"] = {"cluster": hub, **hub_out.to_dict()}
            result["changed"] = result["changed"] or bool(hub_out.applied or hub_out.deleted)
        elif args["mode"] == "apply" and renderer != NONE and not args["hub"]:
            raise GpufleetError(f"gpufleet_routing_hub: gpufleet_fleet_routing={renderer} in apply mode needs a hub")
        if args["publish_stats"]:
            result["ansible_stats"] = {"data": {"gpufleet_routing": artifact}, "per_host": False, "aggregate": False}
        return result
