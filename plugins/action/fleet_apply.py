# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_apply: reconcile every cluster of the fleet in one task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    SERVING_OWNER,
    FleetIdentity,
    identity_of,
    selector,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import fleet_manifests
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import (
    ClusterOutcome,
    ReconcileOptions,
    connect,
    reconcile_fleet,
    recorded_placement,
    skipped_holds,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import handoff
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import write_atomic
from ansible_collections.gpufleet.serving.plugins.module_utils.object_size import check_data_size
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import bounded_mapping, size
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.document import plan_record_object
from ansible_collections.gpufleet.serving.plugins.module_utils.render import serving as render
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.registry import serving_kinds
from ansible_collections.gpufleet.serving.plugins.module_utils.rollout import DeploymentRollout, budgets
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction, handoff_dir

# Rendering imports it when first needed: imported here, in the ansible-playbook process, so the worker does not compile
# it again (see fleet_info's PRELOADED).
PRELOADED = (render,)

# Issue 26 ("Scale"): the result of one task over every cluster. AWX blanks a job event over 700,000 characters; at
# 5,000 clusters the per-cluster outcomes alone were about 2 MB. Lists that grow with the fleet or its objects are cut
# (counts kept); ``pending``, which later tasks need whole, goes through a file past ``handoff_over``.
#: Entries of each per-cluster list (``applied``, ``namespaces``, ``deleted``, ``pending``) kept in ``clusters``.
CLUSTER_ITEMS = 10
#: ``clusters``, in characters of JSON: the failed clusters, then those with pending workloads, then the changed ones.
CLUSTERS_LIMIT = 200_000
#: Characters of JSON ``failed_clusters`` keeps (issue 26: a task result over 700,000 is blanked by AWX).
FAILED_LIMIT = 100_000
#: ``rollout``, in characters of JSON: each deployment's ``waves``, ``updated`` and ``pending`` share it.
ROLLOUT_LIMIT = 150_000
_CLUSTER_LISTS = ("applied", "namespaces", "deleted", "pending")


def cluster_entry(outcome: ClusterOutcome) -> dict[str, Any]:
    """One cluster's outcome with each list cut to its first :data:`CLUSTER_ITEMS` entries (``<list>_count``: how
    many in all)."""
    entry = outcome.to_dict()
    for key in _CLUSTER_LISTS:
        items = list(entry.get(key) or [])
        entry[key] = items[:CLUSTER_ITEMS]
        entry[f"{key}_count"] = len(items)
    return entry


def bounded_clusters(outcomes: dict[str, ClusterOutcome]) -> tuple[dict[str, Any], dict[str, int], bool]:
    """``(clusters, totals, truncated)``: the per-cluster outcomes that fit in :data:`CLUSTERS_LIMIT` characters -
    failed clusters first, then those with workloads not ready, then the changed ones, then the others, shown in name
    order - and the totals over every cluster."""
    entries = {name: cluster_entry(outcomes[name]) for name in sorted(outcomes)}
    totals = {
        "clusters": len(entries),
        "changed": sum(1 for e in entries.values() if e["changed"]),
        "failed": sum(1 for e in entries.values() if e["failed"]),
        "applied": sum(e["applied_count"] for e in entries.values()),
        "deleted": sum(e["deleted_count"] for e in entries.values()),
        "namespaces": sum(e["namespaces_count"] for e in entries.values()),
        "pending": sum(e["pending_count"] for e in entries.values()),
        "unchanged": sum(int(e["unchanged"] or 0) for e in entries.values()),
        "requests": sum(int(e["requests"] or 0) for e in entries.values()),
    }
    ranked = sorted(
        entries, key=lambda n: (not entries[n]["failed"], not entries[n]["pending_count"], not entries[n]["changed"], n)
    )
    kept: set[str] = set()
    used = 2
    for name in ranked:
        cost = size(name) + size(entries[name]) + 4
        if used + cost > CLUSTERS_LIMIT:
            break
        kept.add(name)
        used += cost
    cut = len(kept) < len(entries) or any(
        e[f"{key}_count"] > len(e[key]) for e in entries.values() for key in _CLUSTER_LISTS
    )
    return {n: e for n, e in entries.items() if n in kept}, totals, cut


def _cut_names(items: list[Any], limit: int) -> tuple[list[Any], bool]:
    """The first ``items`` (strings, or lists of strings: waves) that fit in ``limit`` characters of JSON."""
    kept: list[Any] = []
    used = 2
    for item in items:
        cost = size(item) + 2
        if used + cost > limit:
            return kept, True
        kept.append(item)
        used += cost
    return kept, False


def bounded_rollout(rollouts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """Each deployment's rolling update with its ``waves``, ``updated`` and ``pending`` cut to a share of
    :data:`ROLLOUT_LIMIT` (``<list>_count``: how many in all); ``line`` and ``stopped`` whole."""
    share = max(1_000, ROLLOUT_LIMIT // max(1, 3 * len(rollouts)))
    out, truncated = [], False
    for r in rollouts:
        entry = dict(r)
        for key in ("waves", "updated", "pending"):
            items = list(entry.get(key) or [])
            entry[key], cut = _cut_names(items, share)
            entry[f"{key}_count"] = len(items)
            truncated |= cut
        out.append(entry)
    return out, truncated


class ActionModule(GpufleetAction):
    MODULE = "fleet_apply"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        if args["state_file"] and args["replicas"] is None:
            raise GpufleetError("replicas is required with state_file")
        if (args["objects_by_cluster"] is None) == (args["fleet"] is None):
            raise GpufleetError("exactly one of objects_by_cluster and fleet is required")
        # Fleet identity: only this fleet's objects are pruned or taken as current; another fleet's are never touched.
        if args["fleet"] is not None:
            identity = identity_of(args["fleet"])
        elif args["fleet_name"] is None:
            raise GpufleetError("fleet_name is required with objects_by_cluster (the fleet whose objects they are)")
        else:
            identity = FleetIdentity.parse(
                args["fleet_name"], args["adopt_unlabelled"], name_var="fleet_name", adopt_var="adopt_unlabelled"
            )
        if args["fleet"] is not None:
            if args["replicas"] is None:
                raise GpufleetError("replicas is required with fleet")
            rendered = fleet_manifests(args["fleet"], args["replicas"])
            desired = {c: rendered.get(c, []) for c in args["connections"]}
        else:
            desired = args["objects_by_cluster"]
        kinds = [(k.api_version, k.kind) for k in serving_kinds()]
        if args["plan_record"]:
            # Which plan each cluster was last applied with: a ConfigMap beside the serving objects (an apply of an
            # older plan is refused; gpufleet.serving.fleet_plan reads it back). Listed with them, so it is current.
            record = plan_record_object(args["plan_record"], identity.name)
            desired = {c: [*objs, record] for c, objs in desired.items()}
            kinds.append(("v1", "ConfigMap"))
        strays = sorted(set(desired) - set(args["connections"]))
        if strays and any(desired[c] for c in strays):
            raise GpufleetError(f"objects_by_cluster names clusters without a connection: {', '.join(strays)}")
        # A ConfigMap or Secret the API server would refuse (over 1 MiB of data) fails here, before any cluster is
        # touched: an apply that stops halfway through the fleet would leave it between two plans.
        check_data_size((o for objs in desired.values() for o in objs), "fleet_apply")
        apis, lost = connect(args["connections"], args["request_timeout"])
        hold, keep = skipped_holds(args["unreadable"])
        # A partial apply of a plan: deployments whose new replicas are outside the play (plan.held_outside).
        hold = sorted({*hold, *(str(d) for d in args["hold_deployments"])})
        opts = ReconcileOptions(
            kinds=kinds,
            owner_selector=selector(SERVING_OWNER),
            field_manager=args["field_manager"],
            wait=args["wait"],
            timeout=args["timeout"],
            poll_interval=args["poll_interval"],
            check_mode=bool(self._task.check_mode),
            hold=hold,
            keep=keep,
            prune=args["prune"],
            fleet=identity,
            # Rolling updates: each deployment's rollout.max_unavailable (a deployment not named gets the default).
            max_unavailable=(
                budgets(args["fleet"]["deployments"])
                if args["fleet"] is not None
                else {str(k): int(v) for k, v in (args["max_unavailable"] or {}).items()}
            ),
        )
        rollouts: list[DeploymentRollout] = []
        outcomes, held = reconcile_fleet(apis, desired, opts, lost=lost, report=rollouts)
        failed = {name: str(outcomes[name].failed) for name in sorted(outcomes) if outcomes[name].failed}
        clusters, totals, cut = bounded_clusters(outcomes)
        rollout, rollout_cut = bounded_rollout([r.to_dict() for r in rollouts])
        pending = [{"cluster": name, **p} for name in sorted(outcomes) for p in outcomes[name].pending]
        result: dict[str, Any] = {
            "changed": any(o.applied or o.namespaces or o.deleted for o in outcomes.values()),
            "clusters": clusters,
            "clusters_count": len(outcomes),
            "totals": totals,
            "held": held,
            # Whole (fleet_routing and fleet_report read every entry): through a file past handoff_over.
            "pending": handoff(pending, "pending", handoff_dir(), args["handoff_over"]),
            "pending_count": len(pending),
            "rollout": rollout,
            "rollout_stopped": [r.line() for r in rollouts if r.stopped],
            "truncated": cut or rollout_cut,
        }
        # Every cluster of a large fleet failing at once (the controller lost its network) would pass AWX's event
        # limit: the first reasons that fit, failed_clusters_count all of them (the state file keeps every cluster).
        result["truncated"] |= bounded_mapping(result, "failed_clusters", failed, limit=FAILED_LIMIT)
        if args["state_file"] and not self._task.check_mode:
            # Clusters not read this run (unreachable, or outside the play) keep their records as they were.
            kept = {**{name: "not read this run" for name in args["unread"]}, **failed}
            result["state_changed"] = self._record(Path(args["state_file"]), args["replicas"], kept)
        if failed and args["fail_on_cluster_error"]:
            result["failed"] = True
            shown = result["failed_clusters"]
            more = f"; and {len(failed) - len(shown)} more" if len(shown) < len(failed) else ""
            result["msg"] = (
                "fleet_apply: clusters not reconciled: " + "; ".join(f"{n}: {m}" for n, m in shown.items()) + more
            )
            result["errors"] = [{"path": n, "reason": m} for n, m in shown.items()]
        return result

    @staticmethod
    def _record(path: Path, replicas: list[dict[str, Any]], failed: dict[str, str]) -> bool:
        try:
            previous = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            previous = []
        except ValueError as exc:
            raise GpufleetError(f"state_file {path} is not JSON ({exc}): move it away to start afresh") from None
        if not isinstance(previous, list) or not all(isinstance(r, dict) for r in previous):
            raise GpufleetError(f"state_file {path} is not a list of replicas: move it away to start afresh")
        text = json.dumps(recorded_placement(replicas, previous, failed), indent=2, sort_keys=True) + "\n"
        if path.exists() and path.read_text(encoding="utf-8") == text:
            return False
        write_atomic(path, text)
        return True
