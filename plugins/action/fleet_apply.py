# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_apply: reconcile every cluster of the fleet in one task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils import render
from ansible_collections.gpufleet.serving.plugins.module_utils.backends.registry import serving_kinds
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    SERVING_OWNER,
    FleetIdentity,
    identity_of,
    selector,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_deploy import fleet_manifests
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_k8s import (
    ReconcileOptions,
    connect,
    reconcile_fleet,
    recorded_placement,
    skipped_holds,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import write_atomic
from ansible_collections.gpufleet.serving.plugins.module_utils.plan import plan_record_object
from ansible_collections.gpufleet.serving.plugins.module_utils.rollout import DeploymentRollout, budgets
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction

# Rendering imports it when first needed: imported here, in the ansible-playbook process, so the worker does not compile
# it again (see fleet_info's PRELOADED).
PRELOADED = (render,)


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
        clusters = {name: outcomes[name].to_dict() for name in sorted(outcomes)}
        failed = {name: c["failed"] for name, c in clusters.items() if c["failed"]}
        result: dict[str, Any] = {
            "changed": any(c["changed"] for c in clusters.values()),
            "clusters": clusters,
            "failed_clusters": failed,
            "held": held,
            "pending": [{"cluster": name, **p} for name, c in clusters.items() for p in c["pending"]],
            "rollout": [r.to_dict() for r in rollouts],
            "rollout_stopped": [r.line() for r in rollouts if r.stopped],
        }
        if args["state_file"] and not self._task.check_mode:
            # Clusters not read this run (unreachable, or outside the play) keep their records as they were.
            kept = {**{name: "not read this run" for name in args["unread"]}, **failed}
            result["state_changed"] = self._record(Path(args["state_file"]), args["replicas"], kept)
        if failed and args["fail_on_cluster_error"]:
            result["failed"] = True
            result["msg"] = "fleet_apply: clusters not reconciled: " + "; ".join(f"{n}: {m}" for n, m in failed.items())
            result["errors"] = [{"path": n, "reason": m} for n, m in failed.items()]
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
