# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_placement: place every deployment of the fleet in one task."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import pool_notes, queue_quotas, usable_nodes
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    CACHE_OWNER,
    LABEL_CLUSTER,
    SERVING_OWNER,
    describe_object,
    identity_of,
    object_labels,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import observe, place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.guard import (
    capacity_losses,
    dropped_replicas,
    parse_allow,
    parse_names,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import handoff
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import read_objects, recover, tree_token
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import (
    bounded_cold,
    bounded_lines,
    bounded_results,
    placement_summary,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.files import make_plan
from ansible_collections.gpufleet.serving.plugins.module_utils.warm_first import (
    HYDRATED,
    STAGED,
    cold_lines,
    warmth_from_volumes,
)
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction, handoff_dir


class ActionModule(GpufleetAction):
    MODULE = "fleet_placement"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        unreachable = set(args["unreachable"])
        fleet = args["fleet"]
        cluster_names = [c["name"] for c in fleet["clusters"]]
        # A typo in a drained/cordoned cluster or an allowed deployment would otherwise mean nothing, silently.
        drained = parse_names(args["drained"], cluster_names, "gpufleet_drained_clusters")
        cordoned = parse_names(args["cordoned"], cluster_names, "gpufleet_cordoned_clusters")
        allow = parse_allow(args["allow_capacity_loss"], [d["name"] for d in fleet["deployments"]])
        names = [d["name"] for d in fleet["deployments"]]
        explain = parse_names(args["explain"], names, "gpufleet_explain", "deployments")  # explained even when Ready
        # (cluster read from, object, file): each object's annotation is read on its own; one that cannot be read is
        # skipped, named by cluster, namespace and name, and holds its deployment's objects from pruning.
        objects: list[tuple[str, dict[str, Any], str | None]] = [
            (cluster, obj, None) for cluster, objs in args["observed_by_cluster"].items() for obj in objs
        ]
        objects += [
            (str(((o.get("metadata") or {}).get("labels") or {}).get(LABEL_CLUSTER) or "?"), o, None)
            for o in args["observed_objects"]
        ]
        # The caches' PVCs read with the Services (apply mode) say where each cache is hydrated (warm_first.py); they
        # are no replicas, and an unlabelled one only counts as cold (the cache role decides about adopting it).
        pvcs = [item for item in objects if item[1].get("kind") == "PersistentVolumeClaim"]
        objects = [item for item in objects if item[1].get("kind") != "PersistentVolumeClaim"]
        token = None
        if args["render_dir"]:
            # Fingerprint first: fleet_manifests refuses to write if another run changes the directory after this read.
            if not self._task.check_mode:
                recover(args["render_dir"])  # a run killed while switching files in: finish its switch first
            token = tree_token(args["render_dir"])
            # The per-replica Service carries the placement annotation: only Services are read.
            objects.extend(
                (cluster, obj, rel)
                for cluster, rel, obj in read_objects(args["render_dir"], selector=SERVING_OWNER, kinds=["Service"])
            )
        # Fleet identity: only this fleet's objects are its observed replicas; another fleet's on a shared cluster are
        # not (their devices count as held by another workload); an unlabelled one nobody decided about stops here.
        identity = identity_of(fleet)
        owned = identity.split(objects, lambda item: object_labels(item[1]))
        if owned.undecided:
            raise identity.unlabelled_error(
                item[2] if item[2] else describe_object(item[1], item[0]) for item in owned.undecided
            )
        seen = observe(owned.mine)
        # Warm-first placement (warm_first.py): where each cache is already hydrated (apply mode: the PVCs' record of
        # the source they were hydrated from) or staged (render mode: the cache PVC files already rendered).
        if args["render_dir"]:
            pvcs = [
                (c, obj, rel)
                for c, rel, obj in read_objects(
                    args["render_dir"], selector=CACHE_OWNER, kinds=["PersistentVolumeClaim"]
                )
            ]
        volumes = [(item[0], item[1]) for item in identity.split(pvcs, lambda i: object_labels(i[1])).mine]
        warmth = warmth_from_volumes(volumes, fleet.get("caches") or [], STAGED if args["render_dir"] else HYDRATED)
        # Apply mode: what an unreachable cluster runs is not known; it keeps what was recorded at the last successful
        # run (fallback_replicas). Render mode: the render directory is the record (observed capacity may still find
        # a cluster unreachable: it takes no new replicas and keeps its files' replicas).
        observed = [r for r in seen.replicas() if args["render_dir"] or r["cluster"] not in unreachable]
        # A cluster that could not be read keeps the replicas it had at the last successful run.
        observed += [r for r in args["fallback_replicas"] if r.get("cluster") in unreachable]
        # Observed capacity and drift, as fleet_read observed it on the reachable clusters.
        states = [s for s in args["cluster_capacity"] if s.get("cluster") not in unreachable]
        outcome = place_fleet(
            args["fleet"],
            observed,
            unreachable=unreachable,
            drained=drained,
            cordoned=cordoned,
            observed_nodes=usable_nodes(states) if args["capacity"] == "observed" else None,
            capacity_notes=pool_notes(states),
            force_drain=args["force_drain"],
            explain=explain,
            warmth=warmth,
            # Issue 33: each deployment's own Kueue queue bounds where it is placed (observed capacity only).
            queue_quota=queue_quotas(states) if args["capacity"] == "observed" else None,
        )
        shortfalls, degraded, status = outcome.shortfalls(), outcome.degraded(), outcome.statuses()
        results = bounded_results(outcome.results, status, explain=explain)  # issue 26: bounded at any fleet size
        cold, cold_count = bounded_cold(outcome.cold)
        # Guarded shrink: what this run removes, and whether a deployment would lose serving capacity.
        floors = {d["name"]: (d.get("disruption") or {}).get("min_available") for d in fleet["deployments"]}
        losses = capacity_losses(outcome.results, observed, allow=allow, min_available=floors)
        dropped = dropped_replicas(outcome.results, observed)
        result = {
            "changed": outcome.changed,
            # Issue 26: past handoff_over characters the records go to the next tasks through a file (a handle here).
            "replicas": handoff(outcome.replicas, "replicas", handoff_dir(), args["handoff_over"]),
            "results": results,
            "shortfalls": shortfalls,
            "degraded": degraded,
            "status": status,
            "dropped": dropped,
            "dropped_lines": [
                f"{d['deployment']}: replica ({d['cluster']}, {d['index']}) - {d['reason']}" for d in dropped
            ],
            "capacity_loss": [loss.to_dict() for loss in losses],
            "capacity_loss_lines": [loss.line() for loss in losses],
            "blocked": [loss.deployment for loss in losses if loss.blocking],
            "table": outcome.table(),
            "explain": outcome.explain(explain),
            "render_token": token,
            "drift": states,
            "drift_lines": [str(line) for s in states for line in s.get("drift") or []],
            "unreadable": [s.to_dict() for s in seen.skipped],
            "unreadable_lines": [s.line() for s in seen.skipped],
            "held": seen.held(),
            # Bounded like results at any fleet size (cold replicas first; the plan's placement.cold has every one).
            "cold": cold,
            "cold_count": cold_count,
            "cold_lines": bounded_lines(cold_lines(outcome.cold, fleet.get("caches") or []), "cold replicas"),
        }
        if args["grouped"]:
            over = args["handoff_over"]
            result["by_deployment"] = handoff(outcome.by_deployment(), "by-deployment", handoff_dir(), over)
            result["by_cluster"] = handoff(outcome.by_cluster(), "by-cluster", handoff_dir(), over)
        # The plan document (design §13): written only when nothing stops the run before writing (a deployment that
        # would lose serving replicas, or a shortfall with fail_on_unschedulable), so apply.yml never gets one.
        plan = None
        stopped = bool(result["blocked"]) or (args["fail_on_unschedulable"] and bool(shortfalls))
        if args["plan_file"] and not stopped:
            plan = make_plan(
                args["plan_file"],
                fleet=fleet,
                replicas=outcome.replicas,
                placement={
                    "status": status,
                    "shortfalls": shortfalls,
                    "degraded": degraded,
                    "dropped": dropped,
                    "capacity_loss": result["capacity_loss"],
                    "held": result["held"],
                    "unreadable": result["unreadable"],
                    "observed": [{k: r.get(k) for k in ("deployment", "cluster", "index")} for r in observed],
                    "table": result["table"],
                    "explain": result["explain"],
                    # Per replica of a deployment mounting a cache: cold or warm, a cold one's ETA (warm_first.py).
                    "cold": outcome.cold,
                    # Issue 33: the configured autoscaling bounds (fleet and per cluster) and each cluster's queue.
                    **{
                        key: {n: r[key] for n, r in outcome.results.items() if r.get(key)}
                        for key in ("autoscaling", "queues", "queue_quota")
                        if any(r.get(key) for r in outcome.results.values())
                    },
                },
                drained=drained,
                mode=args["mode"],
                capacity=args["capacity"],
                render_token=token,
                check_mode=bool(self._task.check_mode),
                render_dir=args["render_dir"],
            )
            result["plan"] = plan
        if args["publish_stats"]:
            # What set_stats returns (Ansible takes custom stats from any task's result): no task templating the
            # replicas again just to publish them.
            # A summary of at most 64 KB (no replica records: the plan file holds them).
            placement = placement_summary(
                outcome,
                explain=explain,
                capacity=args["capacity"],
                dropped=dropped,
                capacity_loss=result["capacity_loss"],
                blocked=result["blocked"],
                unreadable=result["unreadable"],
                held=result["held"],
            )
            data: dict[str, Any] = {"gpufleet_placement": placement, "gpufleet_drift": states}
            if plan is not None:
                data["gpufleet_plan"] = plan["artifact"]
            result["ansible_stats"] = {
                "data": data,
                "per_host": False,
                "aggregate": False,
            }
        return result
