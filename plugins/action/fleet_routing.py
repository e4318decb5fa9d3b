# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_routing: the fleet routing artifact, written, applied to the hub and
published.

Issue 26 ("Scale"): the artifact grows with the clusters (about 1 MB at 5,000) and the hub's objects more (about 4
MB with a renderer), so neither is in the task result nor in the custom stat: both carry a bounded summary
(:func:`.routing.routing_summary`) pointing at the artifact's index ConfigMap under ``_fleet/routing/`` (render mode)
or on the hub (the artifact itself is split into ConfigMaps the API server accepts: :func:`.routing.artifact_objects`);
the artifact and the objects themselves are handed to later tasks through files (:mod:`.handoff`). The renderers
and the hub sync take them here, in-process."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.connection import CONNECTION_VARS, kube_connections
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import handoff
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import bounded_list, bounded_mapping
from ansible_collections.gpufleet.serving.plugins.module_utils.routing import (
    ADDRESS_VAR,
    NONE,
    PRIORITY_VAR,
    ROUTING_DIR,
    ROUTING_OWNER,
    bounded_lines,
    build_routing,
    cluster_settings,
    hub_objects,
    parse_renderer,
    pending_counts,
    placed_counts,
    routing_relpath,
    routing_summary,
    weight_lines,
)
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction, handoff_dir

#: ``lines`` (a line per model, a weight per cluster) and ``notes``, in characters of JSON each.
LINES_LIMIT = 100_000
#: Each list of paths or object keys (``written``, ``removed``, ``hub.applied``...), in characters of JSON.
LIST_LIMIT = 50_000


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
        files = {routing_relpath(o): o for o in objects}
        result: dict[str, Any] = {"changed": False, "hub": None}
        truncated = False
        if args["render_dir"]:
            from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction

            txn = Transaction(args["render_dir"], check_mode=bool(self._task.check_mode))
            txn.plan_fleet_files(
                ROUTING_DIR, {rel.rsplit("/", 1)[1]: o for rel, o in files.items()}, ROUTING_OWNER, fleet_name
            )
            outcome = txn.commit()
            result["changed"] = outcome.changed
            truncated |= bounded_list(result, "written", outcome.written, limit=LIST_LIMIT)
            truncated |= bounded_list(result, "removed", outcome.removed, limit=LIST_LIMIT)
        else:
            truncated |= bounded_list(result, "written", [], limit=LIST_LIMIT)
            truncated |= bounded_list(result, "removed", [], limit=LIST_LIMIT)
        hub_name = None
        if args["hub"] and args["mode"] == "apply":
            hub_name = str(args["hub"])
            if hub_name not in hostvars:
                raise GpufleetError(f"gpufleet_routing_hub: {hub_name!r} is not an inventory host")
            connection = kube_connections(
                [hub_name], {hub_name: {v: to_plain(hostvars[hub_name].get(v), v) for v in CONNECTION_VARS}}
            )[hub_name]
            from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import ClusterAPI
            from ansible_collections.gpufleet.serving.plugins.module_utils.routing_hub import sync_hub

            api = ClusterAPI(hub_name, connection, args["request_timeout"])
            hub_out = sync_hub(
                api,
                objects,
                fleet_name,
                field_manager=args["field_manager"],
                check_mode=bool(self._task.check_mode),
            )
            hub: dict[str, Any] = {"cluster": hub_name}
            truncated |= bounded_list(hub, "applied", hub_out.applied, limit=LIST_LIMIT)
            truncated |= bounded_list(hub, "deleted", hub_out.deleted, limit=LIST_LIMIT)
            truncated |= bounded_mapping(hub, "stored", hub_out.stored, limit=LIST_LIMIT)
            result["hub"] = hub
            result["changed"] = result["changed"] or bool(hub_out.applied or hub_out.deleted)
        elif args["mode"] == "apply" and renderer != NONE and not args["hub"]:
            raise GpufleetError(f"gpufleet_routing_hub: gpufleet_fleet_routing={renderer} in apply mode needs a hub")
        # Issue 26: a bounded summary pointing at the whole artifact (the ConfigMap file under _fleet/routing/, the
        # hub's ConfigMap); the artifact and the objects go to later tasks through files, never in the result.
        summary = routing_summary(
            artifact,
            namespace=args["namespace"],
            files=files if args["render_dir"] else (),
            render_dir=args["render_dir"],
            hub=hub_name,
        )
        lines = weight_lines(artifact)
        shown_lines = bounded_lines(lines, "model line(s)", LINES_LIMIT)
        shown_notes = bounded_lines(notes, "note(s)", LINES_LIMIT // 2)
        truncated |= len(shown_lines) != len(lines) or len(shown_notes) != len(notes)
        result.update(
            routing=summary,
            artifact=handoff(artifact, "routing", handoff_dir(), 0),
            objects=handoff(objects, "routing-objects", handoff_dir(), 0),
            objects_count=len(objects),
            lines=shown_lines,
            notes=shown_notes,
            notes_count=len(notes),
            truncated=truncated or summary["truncated"],
        )
        if args["publish_stats"]:
            result["ansible_stats"] = {"data": {"gpufleet_routing": summary}, "per_host": False, "aggregate": False}
        return result
