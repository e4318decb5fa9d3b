"""Action plugin for gpufleet.serving.fleet_placement: place every deployment of the fleet in one task."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import SERVING_OWNER
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_deploy import observed_replicas, place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import read_objects
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(
        ("fleet", "observed_objects", "render_dir", "fallback_replicas", "unreachable", "drained", "cordoned")
    )

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars or {})
        args = self.validate_argument_spec(
            argument_spec={
                "fleet": {"type": "dict", "required": True},
                "observed_objects": {"type": "list", "elements": "dict", "default": []},
                "render_dir": {"type": "path"},
                "fallback_replicas": {"type": "list", "elements": "dict", "default": []},
                "unreachable": {"type": "list", "elements": "str", "default": []},
                "drained": {"type": "list", "elements": "str", "default": []},
                "cordoned": {"type": "list", "elements": "str", "default": []},
            }
        )[1]
        try:
            fleet = to_plain(args["fleet"], "fleet")
            unreachable = set(to_plain(args["unreachable"], "unreachable"))
            objects = list(to_plain(args["observed_objects"], "observed_objects"))
            if args["render_dir"]:
                # The per-replica Service carries the placement annotation: only Services are read.
                objects.extend(
                    obj
                    for _cluster, _rel, obj in read_objects(
                        args["render_dir"], selector=SERVING_OWNER, kinds=["Service"]
                    )
                )
            observed = [r for r in observed_replicas(objects) if r["cluster"] not in unreachable]
            # A cluster that could not be read keeps the replicas it had at the last successful run.
            observed += [
                r for r in to_plain(args["fallback_replicas"], "fallback_replicas") if r.get("cluster") in unreachable
            ]
            outcome = place_fleet(
                fleet,
                observed,
                unreachable=unreachable,
                drained=to_plain(args["drained"], "drained"),
                cordoned=to_plain(args["cordoned"], "cordoned"),
            )
        except GpufleetError as exc:
            result.update(failed=True, msg=f"fleet_placement: {exc}")
            return result
        result.update(
            changed=outcome.changed,
            replicas=outcome.replicas,
            by_deployment=outcome.by_deployment(),
            by_cluster=outcome.by_cluster(),
            results={name: {k: v for k, v in res.items() if k != "replicas"} for name, res in outcome.results.items()},
            shortfalls=outcome.shortfalls(),
            table=outcome.table(),
            explain=outcome.explain(),
        )
        return result
