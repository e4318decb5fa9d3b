"""Action plugin for gpufleet.serving.fleet_info: validate the fleet on the controller (docs in plugins/modules)."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import role_contract
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet import (
    CACHES_VAR,
    CLASSES_VAR,
    CLUSTER_VARS,
    DEPLOYMENTS_VAR,
    validate_fleet,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.plugin_utils.inventory import (
    FLEET_GROUP,
    host_groups,
    pattern_resolver,
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("group", "inference_classes", "model_deployments", "model_caches", "check_selectors"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(
            argument_spec={
                "group": {"type": "str", "default": FLEET_GROUP},
                "inference_classes": {"type": "raw"},
                "model_deployments": {"type": "raw"},
                "model_caches": {"type": "raw"},
                "check_selectors": {"type": "bool", "default": True},
            }
        )[1]
        try:
            groups = to_plain(task_vars.get("groups", {}))
            group = args["group"]
            if group not in groups:
                raise GpufleetError(f"inventory group {group!r} does not exist: put every fleet cluster in it")
            hostvars = task_vars.get("hostvars", {})
            wanted = set(CLUSTER_VARS.values())
            hosts = {}
            for name in groups[group]:
                hv = hostvars[name]
                hosts[name] = {var: to_plain(hv[var], f"hostvars[{name!r}].{var}") for var in wanted if var in hv}

            def arg_or_var(option: str, var: str) -> Any:
                value = args.get(option)
                if value is None:
                    # task_vars hold variables as written: template them (a var may be "{{ other_var }}").
                    value = self._templar.template(task_vars.get(var))
                return to_plain(value, var)

            fleet = validate_fleet(
                classes=arg_or_var("inference_classes", CLASSES_VAR),
                hosts=hosts,
                deployments=arg_or_var("model_deployments", DEPLOYMENTS_VAR),
                caches=arg_or_var("model_caches", CACHES_VAR),
                resolve_pattern=pattern_resolver(self._loader, groups),
                host_groups=host_groups(groups),
                check_selectors=args["check_selectors"],
            )
        except GpufleetError as exc:
            result.update(
                failed=True, msg=f"The fleet is not valid; nothing was changed.\n{exc}", errors=_error_list(exc)
            )
            return result
        result.update(changed=False, fleet=fleet.to_dict(), summary=fleet.summary(), contract=role_contract())
        return result


def _error_list(exc: GpufleetError) -> list[dict[str, str]]:
    return [{"path": p, "reason": r} for p, r in getattr(exc, "errors", [("", str(exc))])]
