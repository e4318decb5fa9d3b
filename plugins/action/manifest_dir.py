"""Action plugin for gpufleet.serving.manifest_dir: write a cluster's objects to the render directory on the controller."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import sync
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("path", "cluster", "objects", "owner", "prune"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars or {})
        args = self.validate_argument_spec(
            argument_spec={
                "path": {"type": "path", "required": True},
                "cluster": {"type": "str", "required": True},
                "objects": {"type": "list", "elements": "dict", "default": []},
                "owner": {"type": "dict", "default": {}},
                "prune": {"type": "bool", "default": True},
            }
        )[1]
        try:
            outcome = sync(
                args["path"],
                args["cluster"],
                to_plain(args["objects"]),
                {str(k): str(v) for k, v in to_plain(args["owner"]).items()},
                prune=args["prune"],
                check_mode=bool(self._task.check_mode),
            )
        except (GpufleetError, OSError) as exc:
            result.update(failed=True, msg=str(exc))
            return result
        result.update(
            changed=outcome.changed, written=outcome.written, removed=outcome.removed, unchanged=outcome.unchanged
        )
        return result
