"""Action plugin for gpufleet.serving.fleet_manifests: render every cluster's serving objects in one task."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import SERVING_OWNER
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_deploy import fleet_manifests
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import sync
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("fleet", "replicas", "render_dir", "prune"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars or {})
        args = self.validate_argument_spec(
            argument_spec={
                "fleet": {"type": "dict", "required": True},
                "replicas": {"type": "list", "elements": "dict", "required": True},
                "render_dir": {"type": "path"},
                "prune": {"type": "bool", "default": True},
            }
        )[1]
        try:
            objects = fleet_manifests(to_plain(args["fleet"]), to_plain(args["replicas"]))
            written: list[str] = []
            removed: list[str] = []
            unchanged = 0
            if args["render_dir"]:
                # Everything is rendered above before the first file is written.
                for cluster, objs in objects.items():
                    outcome = sync(
                        args["render_dir"],
                        cluster,
                        objs,
                        SERVING_OWNER,
                        prune=args["prune"],
                        check_mode=bool(self._task.check_mode),
                    )
                    written += outcome.written
                    removed += outcome.removed
                    unchanged += outcome.unchanged
        except (GpufleetError, OSError) as exc:
            result.update(failed=True, msg=f"fleet_manifests: {exc}")
            return result
        result.update(
            changed=bool(written or removed),
            objects_by_cluster=objects,
            written=written,
            removed=removed,
            unchanged=unchanged,
        )
        return result
