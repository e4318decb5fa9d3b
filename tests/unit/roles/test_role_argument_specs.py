"""Every role: meta/argument_specs.yml and defaults/main.yml describe the same variables with the same defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROLES_DIR = Path(__file__).resolve().parents[3] / "roles"
ROLES = sorted(p.name for p in ROLES_DIR.iterdir() if (p / "tasks").is_dir())


def load(role: str, rel: str) -> Any:
    path = ROLES_DIR / role / rel
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None


def test_the_roles_are_found():
    assert {"model_cache", "model_deployment"} <= set(ROLES)


@pytest.mark.parametrize("role", ROLES)
def test_every_public_role_has_specs_and_defaults(role):
    if role.startswith("_"):
        pytest.skip("internal role")  # internal roles (``_connection``) take only collection-wide variables
    assert load(role, "meta/argument_specs.yml"), f"{role}: no meta/argument_specs.yml"
    assert load(role, "defaults/main.yml") is not None, f"{role}: no defaults/main.yml"


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_argument_specs_do_not_drift(role):
    specs = (load(role, "meta/argument_specs.yml") or {}).get("argument_specs") or {}
    defaults = load(role, "defaults/main.yml") or {}
    prefix = f"{role.lstrip('_')}_"
    for entry, spec in specs.items():
        options = spec.get("options") or {}
        own = {name for name in options if name.startswith(prefix)}
        if entry == "main":
            assert set(defaults) == own, f"{role}: defaults vs argument_specs.{entry}"
        for name in own & set(defaults):
            assert "default" in options[name], f"{role}: {name} has no default in argument_specs.{entry}"
            assert options[name]["default"] == defaults[name], f"{role}: {name} default differs"
    assert all(name.startswith(prefix) for name in defaults), f"{role}: a default without the {prefix} prefix"


@pytest.mark.parametrize("role", ROLES)
def test_no_path_default_points_into_the_collection(role):
    defaults = load(role, "defaults/main.yml") or {}
    for name, value in defaults.items():
        assert "playbook_dir" not in str(value), f"{role}: {name} is anchored on playbook_dir"
