# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The JSON Schema of the fleet's inventory variables, exported from the pydantic models (``models.py``).

One schema for any vars file of a fleet inventory (``group_vars/*``, ``host_vars/*``): the fleet-wide catalogs
(``gpufleet_inference_classes``, ``gpufleet_model_deployments``, ``gpufleet_model_caches``), a cluster's host
variables (``gpufleet_provider``, ``gpufleet_node_pools``, ...; the names of ``fleet.CLUSTER_VARS``) and the roles'
``gpufleet_*`` switches (``gpufleet_mode``, ``gpufleet_capacity``, ...; from their argument specs). Every variable is
optional (a file holds some of them) and other variables are allowed (an inventory holds more than this fleet).

``scripts/inventory-schema`` writes it to ``schemas/gpufleet_inventory.schema.json``; a unit test keeps the committed
file equal to what the models say. Editors use it through yaml-language-server (docs/fleet.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.models import require_pydantic

SCHEMA_ID = "https://gpufleet.io/schemas/gpufleet_inventory.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: A role option's type (meta/argument_specs.yml) as JSON Schema.
_TYPES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "path": {"type": "string"},
    "bool": {"type": "boolean"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "list": {"type": "array"},
    "dict": {"type": "object"},
    "raw": {},
}
_FROM_FLEET_VAR = re.compile(r"^\{\{\s*(gpufleet_[a-z0-9_]+)\s*\|\s*default\(")


def _description(option: Mapping[str, Any]) -> str:
    text = option.get("description") or ""
    text = " ".join(str(t) for t in text) if isinstance(text, list) else str(text)
    # Ansible's doc markup (C(x), V(x), O(x)) as plain text.
    return re.sub(r"\b[CVOIBMRP]\(([^)]*)\)", r"\1", text)


def _not_none(annotation: Any) -> Any:
    """``X | None`` -> ``X``: a variable that is set has a value (an unset one is simply absent), and an error then
    points into the value instead of at a failed ``anyOf``."""
    import types
    import typing

    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not types.NoneType]
        if len(args) == 1:
            return args[0]
    return annotation


def role_variables(argument_specs: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ``gpufleet_*`` variables the roles read, as schemas: every option of every role's ``main`` entry point whose
    default is ``{{ gpufleet_<name> | default(...) }}``. ``argument_specs`` maps a role to its parsed
    ``meta/argument_specs.yml``."""
    out: dict[str, dict[str, Any]] = {}
    readers: dict[str, list[str]] = {}
    for role in sorted(argument_specs):
        entry = ((argument_specs[role] or {}).get("argument_specs") or {}).get("main") or {}
        for option in (entry.get("options") or {}).values():
            match = _FROM_FLEET_VAR.match(str(option.get("default", "")))
            if not match:
                continue
            name = match.group(1)
            readers.setdefault(name, []).append(role)
            if name in out:
                continue
            schema = dict(_TYPES.get(str(option.get("type", "raw")), {}))
            if option.get("choices"):
                schema = {"enum": list(option["choices"])}
            schema["description"] = _description(option)
            out[name] = schema
    for name, schema in out.items():
        roles = readers[name]
        read_by = f"(role{'s' if len(roles) > 1 else ''} {', '.join(roles)})"
        schema["description"] = f"{schema['description']} {read_by}".strip()
    return out


def routing_host_variables() -> dict[str, dict[str, Any]]:
    """A cluster's fleet-routing host variables (docs/routing.md), read by ``routing.cluster_settings``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.routing import ADDRESS_VAR, PRIORITY_VAR

    return {
        PRIORITY_VAR: {
            "type": "integer",
            "minimum": 0,
            "maximum": 1000,
            "description": "A cluster's fleet-routing tier (default 0; lower is preferred, a higher tier takes "
            "traffic only when the lower ones have no Ready replica).",
        },
        ADDRESS_VAR: {
            "type": "string",
            "minLength": 1,
            "description": "The host, or host:port (default port 80), at which the routing hub reaches this "
            "cluster's gateway.",
        },
    }


def inventory_schema(argument_specs: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The schema, deterministic (sorted keys when dumped): the models' variables, then the roles' switches. Every
    variable is optional; pydantic writes the ``None`` default of each, which is not a value to set."""
    require_pydantic()
    from pydantic import ConfigDict, Field, create_model

    from ansible_collections.gpufleet.serving.plugins.module_utils import models as m
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import (
        CACHES_VAR,
        CLASSES_VAR,
        CLUSTER_VARS,
        DEPLOYMENTS_VAR,
    )

    cluster_fields = m.Cluster.model_fields
    fields: dict[str, Any] = {
        "gpufleet_fleet_name": (
            str,
            Field(
                default=None,
                description="The fleet's name, the gpufleet.io/fleet label of every object it owns (required once, "
                "in group_vars/all).",
            ),
        ),
        "gpufleet_adopt_unlabelled": (
            bool,
            Field(default=None, description="Owned objects without a fleet label: this fleet's (true) or not (false)."),
        ),
        CLASSES_VAR: (
            dict[str, m.InferenceClass],
            Field(default=None, description="Inference classes by name: a node's DRA devices and how to provision it."),
        ),
        DEPLOYMENTS_VAR: (
            list[m.ModelDeployment],
            Field(
                default=None,
                description="The model deployments, placed by priority (higher first), then in this order.",
            ),
        ),
        CACHES_VAR: (
            list[m.ModelCache],
            Field(default=None, description="Model caches: weights staged once per cluster."),
        ),
    }
    for name, var in CLUSTER_VARS.items():
        info = cluster_fields[name]
        fields[var] = (
            _not_none(info.annotation),
            Field(default=None, description=f"A cluster's (inventory host's) {name.replace('_', ' ')}."),
        )
    model = create_model(
        "GpufleetInventoryVars",
        __config__=ConfigDict(extra="allow"),
        **fields,
    )
    schema: dict[str, Any] = model.model_json_schema()
    schema["title"] = "gpufleet.serving inventory variables"
    schema["description"] = (
        "Variables of a gpufleet.serving fleet inventory (group_vars and host_vars files). Generated from the "
        "collection's models by scripts/inventory-schema; do not edit."
    )
    for name, extra in role_variables(argument_specs or {}).items():
        schema["properties"].setdefault(name, extra)
    for name, extra in routing_host_variables().items():
        schema["properties"].setdefault(name, extra)
    # Deployments and caches merged from several variables (fleet.source_vars): each team's file holds its own list.
    schema["patternProperties"] = {
        f"^{var}_.+$": {
            **schema["properties"][var],
            "description": f"More {var.removeprefix('gpufleet_model_')}, merged after {var} (by variable name).",
        }
        for var in (DEPLOYMENTS_VAR, CACHES_VAR)
    }
    return {"$schema": DIALECT, "$id": SCHEMA_ID, **schema}
