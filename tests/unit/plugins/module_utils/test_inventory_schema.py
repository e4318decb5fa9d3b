"""schemas/gpufleet_inventory.schema.json: exported from the models, committed, and what editors check fleet files
with (issue 31)."""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[4]
SCHEMA = REPO / "schemas" / "gpufleet_inventory.schema.json"
EXAMPLE = REPO / "inventories" / "example"


def _script():
    loader = importlib.machinery.SourceFileLoader("inventory_schema_script", str(REPO / "scripts" / "inventory-schema"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_committed_schema_is_what_the_models_say():
    assert SCHEMA.read_text(encoding="utf-8") == _script().generate(), (
        "schemas/gpufleet_inventory.schema.json is out of date with plugins/module_utils/models.py or a role's "
        "gpufleet_* variables: run scripts/inventory-schema (make schema)"
    )


def vars_files() -> list[Path]:
    return sorted([*(EXAMPLE / "group_vars").rglob("*.yml"), *(EXAMPLE / "host_vars").glob("*.yml")])


@pytest.mark.parametrize("path", vars_files(), ids=lambda p: str(p.relative_to(EXAMPLE)))
def test_every_vars_file_of_the_example_inventory_is_valid(validator, path):
    errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(yaml.safe_load(path.read_text()) or {})]
    assert errors == []


def deployments() -> dict:
    return yaml.safe_load((EXAMPLE / "group_vars" / "all" / "deployments.yml").read_text())


def errors_of(validator, data) -> list[tuple[list, str]]:
    return sorted((list(e.absolute_path), e.message) for e in validator.iter_errors(data))


def test_typos_and_wrong_types_are_caught_where_they_are(validator):
    data = deployments()
    bad = copy.deepcopy(data)
    bad["gpufleet_model_deployments"][1]["replica"] = 3  # unknown field (a typo of replicas)
    bad["gpufleet_model_deployments"][0]["engines"][0]["members"][0]["role"] = "Boss"
    assert [path for path, _m in errors_of(validator, bad)] == [
        ["gpufleet_model_deployments", 0, "engines", 0, "members", 0, "role"],
        ["gpufleet_model_deployments", 1],
    ]
    host = yaml.safe_load((EXAMPLE / "host_vars" / "onprem-a.yml").read_text())
    host["gpufleet_node_pools"][0]["node_count"] = "four"
    host["gpufleet_provider"] = "azure"
    assert {tuple(path) for path, _m in errors_of(validator, host)} == {
        ("gpufleet_node_pools", 0, "node_count"),
        ("gpufleet_provider",),
    }
    # the roles' switches are there too, with their choices
    assert errors_of(validator, {"gpufleet_report": "terse"})[0][0] == ["gpufleet_report"]
    assert errors_of(validator, {"gpufleet_report": "summary", "some_other_var": {"any": "thing"}}) == []


def test_role_switches_carry_their_documentation():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    mode = schema["properties"]["gpufleet_mode"]
    assert mode["enum"] == ["render", "apply"] and "model_deployment" in mode["description"]
    assert schema["properties"]["gpufleet_report"]["description"].endswith("(role model_deployment)")
    assert "C(" not in json.dumps(schema)  # Ansible doc markup is turned into text


def test_a_clusters_routing_tier_and_address_are_checked_in_its_host_vars(validator):
    good = {"gpufleet_routing_priority": 2, "gpufleet_routing_address": "gw.c1.example.com:8080"}
    assert errors_of(validator, good) == []
    bad = {"gpufleet_routing_priority": 1001, "gpufleet_routing_address": ""}
    assert [path for path, _m in errors_of(validator, bad)] == [
        ["gpufleet_routing_address"],
        ["gpufleet_routing_priority"],
    ]
