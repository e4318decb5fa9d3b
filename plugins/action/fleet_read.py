# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_read: read objects from every cluster of the fleet in one task."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import (
    CAPACITY_KINDS,
    observe_fleet,
    owned_replicas,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import identity_of
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import Read, connect, read_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import validate_classes
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import bounded_mapping
from ansible_collections.gpufleet.serving.plugins.module_utils.queues import KUEUE_KINDS, uses_kueue
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction

#: Characters of JSON ``errors`` keeps.
ERRORS_LIMIT = 100_000


class ActionModule(GpufleetAction):
    MODULE = "fleet_read"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        fleet = args["fleet"]
        classes = validate_classes(fleet["classes"]) if fleet else {}
        apis, errors = connect(args["connections"], args["request_timeout"])
        reads = [
            Read(r["api_version"], r["kind"], tuple(r["label_selectors"]), r["metadata_only"]) for r in args["reads"]
        ]
        # The capacity kinds are read after the asked ones and observed here: only the observation is returned.
        capacity_reads = [Read(api_version, kind) for api_version, kind in CAPACITY_KINDS] if fleet else []
        if fleet and uses_kueue(fleet):
            # Issue 33: a cluster's Kueue queue bounds its observed capacity (queues.apply_queue_quota), a deployment's
            # own Kueue queue that deployment's placement (queues.deployment_queue_quotas).
            capacity_reads += [Read(api_version, kind) for api_version, kind in KUEUE_KINDS]
        lists, read_errors = read_fleet(apis, reads + capacity_reads)
        errors.update(read_errors)
        n = len(reads)
        result = {
            "changed": False,
            "objects_by_cluster": {c: [o for objs in lists[c][:n] for o in objs] for c in sorted(lists)},
            "unreachable_clusters": sorted(errors),  # whole: the next tasks leave every one of them out
        }
        # The reasons: the first that fit (issue 26: a fleet the controller cannot reach at all would pass AWX's
        # event limit), errors_count all of them.
        result["truncated"] = bounded_mapping(result, "errors", dict(sorted(errors.items())), limit=ERRORS_LIMIT)
        if fleet:
            # A claim is this fleet's when the replica it serves is: one whose objects (among those read) the fleet
            # owns. Another fleet's claims on a shared cluster hold their devices like any other workload's.
            owned = None
            if fleet.get("name"):
                identity = identity_of(fleet)
                owned = {c: owned_replicas((o for objs in lists[c][:n] for o in objs), identity) for c in lists}
            states = observe_fleet(
                fleet, classes, {c: [o for objs in lists[c][n:] for o in objs] for c in lists}, owned=owned
            )
            result["capacity"] = [s.to_dict() for s in states]
        return result
