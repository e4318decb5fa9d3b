# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_info: validate the fleet on the controller (docs in plugins/modules)."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils import dra_cel, quantity, semver
from ansible_collections.gpufleet.serving.plugins.module_utils.connection import CONNECTION_VARS, kube_connections
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import ADOPT_UNLABELLED_VAR, FLEET_NAME_VAR
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import (
    CACHES_VAR,
    CLASSES_VAR,
    CLUSTER_VARS,
    DEPLOYMENTS_VAR,
    source_vars,
    validate_fleet,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import handoff
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import bounded_lines
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends import registry
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction, handoff_dir
from ansible_collections.gpufleet.serving.plugins.plugin_utils.contract import role_contract
from ansible_collections.gpufleet.serving.plugins.plugin_utils.inventory import (
    host_groups,
    pattern_resolver,
)

# What validation imports when it first needs it, imported here, in the ansible-playbook process, before the worker
# that validates is forked: Ansible's collection loader compiles collection source at every import (it keeps no
# bytecode), so a module first imported in a worker is compiled again there, and later again in the parent
# (dra_cel alone takes 60 ms to compile).
PRELOADED = (registry, dra_cel, quantity, semver)
#: ``summary``, in characters of JSON (a line per pool and deployment: more than this from about 1,000 clusters).
SUMMARY_LINES_LIMIT = 200_000


class ActionModule(GpufleetAction):
    MODULE = "fleet_info"
    FAILURE_HEADLINE = "the fleet is not valid; nothing was changed."

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        groups = to_plain(task_vars.get("groups", {}), "groups")
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

        def merged(option: str, var: str) -> dict[str, Any]:
            """``{variable: list}``: the option alone when given, else ``var`` and every ``<var>_*`` variable."""
            if args.get(option) is not None:
                return {var: to_plain(args[option], var)}
            return {name: arg_or_var(option, name) for name in source_vars(task_vars, var)}

        fleet = validate_fleet(
            classes=arg_or_var("inference_classes", CLASSES_VAR),
            hosts=hosts,
            deployment_sources=merged("model_deployments", DEPLOYMENTS_VAR),
            cache_sources=merged("model_caches", CACHES_VAR),
            resolve_pattern=pattern_resolver(self._loader, groups),
            host_groups=host_groups(groups),
            check_selectors=args["check_selectors"],
            # Fleet identity: required, so two inventories sharing a cluster never touch each other's objects.
            fleet_name=arg_or_var("fleet_name", FLEET_NAME_VAR),
            adopt_unlabelled=arg_or_var("adopt_unlabelled", ADOPT_UNLABELLED_VAR),
            require_name=True,
            partial=args["partial"],
        )
        data = fleet.to_dict()
        result = {
            "changed": False,
            # Issue 26: past handoff_over characters the fleet goes to the next tasks through a file (a handle here).
            "fleet": handoff(data, "fleet", handoff_dir(), args["handoff_over"]),
            "cluster_names": [str(c["name"]) for c in data.get("clusters") or []],
            "summary": bounded_lines(
                fleet.summary(),
                "lines",
                limit=SUMMARY_LINES_LIMIT,
                where="the report file and fleet.html show every cluster",
            ),
            "contract": role_contract(),
        }
        if args["pin_connections"] is not None:
            result["connections"] = kube_connections(args["pin_connections"], _ConnectionVars(hostvars))
        return result


class _ConnectionVars:
    """``hostvars`` as :func:`kube_connections` reads it: a host's two connection variables, as plain data."""

    def __init__(self, hostvars: Any) -> None:
        self._hostvars = hostvars

    def __getitem__(self, host: str) -> dict[str, Any]:
        if host not in self._hostvars:
            raise GpufleetError(f"pin_connections: {host!r} is not an inventory host")
        hv = self._hostvars[host]
        return {var: to_plain(hv.get(var), f"hostvars[{host!r}].{var}") for var in CONNECTION_VARS}
