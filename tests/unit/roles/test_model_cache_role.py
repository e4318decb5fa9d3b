"""Role model_cache: defaults, argument specs, the filter's options and the task files stay in sync."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import HydrationOptions

ROLE = Path(__file__).resolve().parents[3] / "roles" / "model_cache"
PREFIX = "model_cache_"


def load(rel: str) -> Any:
    return yaml.safe_load((ROLE / rel).read_text(encoding="utf-8"))


DEFAULTS: dict[str, Any] = load("defaults/main.yml")
SPEC: dict[str, Any] = load("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
VARS: dict[str, Any] = load("vars/main.yml")
TASK_TEXT = {p.name: p.read_text(encoding="utf-8") for p in sorted((ROLE / "tasks").glob("*.yml"))}


def test_every_default_is_in_the_argument_specs_and_back():
    assert set(DEFAULTS) == {name for name in SPEC if name.startswith(PREFIX)}
    assert all(name.startswith(PREFIX) for name in DEFAULTS)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_default_values_match_the_argument_specs(name):
    assert "default" in SPEC[name], f"{name}: argument_specs has no default"
    assert SPEC[name]["default"] == DEFAULTS[name]


def test_only_collection_wide_inputs_are_specified_without_a_role_default():
    extra = {name for name in SPEC if not name.startswith(PREFIX)}
    assert extra == {"gpufleet_mode", "gpufleet_render_dir", "gpufleet_gitops"}
    assert all("default" not in SPEC[name] for name in extra)


@pytest.mark.parametrize("name", sorted(SPEC))
def test_every_option_is_described_and_typed(name):
    option = SPEC[name]
    description = option.get("description")
    text = " ".join(description) if isinstance(description, list) else description
    assert isinstance(text, str) and len(text) > 20, name
    assert option.get("type") in {"str", "int", "bool", "list", "dict", "path", "raw"}, name
    if option["type"] == "list":
        assert "elements" in option, name


def test_every_default_has_its_own_comment():
    lines = (ROLE / "defaults" / "main.yml").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        match = re.match(rf"^({PREFIX}\w+):", line)
        if match:
            assert lines[i - 1].startswith("#"), f"{match.group(1)} has no comment line right above it"


def test_the_credentials_variable_is_no_log():
    assert SPEC["model_cache_secrets"].get("no_log") is True


def test_the_role_passes_every_hydration_option_to_the_filter():
    fields = set(HydrationOptions.model_fields)
    assert set(VARS["__model_cache_options"]) == fields


def test_tasks_use_only_declared_public_variables_and_prefixed_internal_ones():
    text = "\n".join([*TASK_TEXT.values(), (ROLE / "vars" / "main.yml").read_text(encoding="utf-8")])
    used = set(re.findall(rf"\b({PREFIX}\w+)", text))
    assert used <= set(DEFAULTS), sorted(used - set(DEFAULTS))
    registered = 0
    for name, body in TASK_TEXT.items():
        data = yaml.safe_load(body) or []
        for task in _walk(data):
            for key in (
                (task.get("ansible.builtin.set_fact") or {})
                if isinstance(task.get("ansible.builtin.set_fact"), dict)
                else {}
            ):
                assert key.startswith(f"__{PREFIX}"), f"{name}: set_fact {key}"
            if "register" in task:
                assert task["register"].startswith(f"__{PREFIX}"), f"{name}: register {task['register']}"
                registered += 1
            if "loop_control" in task and "loop_var" in task["loop_control"]:
                assert task["loop_control"]["loop_var"].startswith(f"__{PREFIX}"), name
    assert registered > 10


def test_every_task_touching_a_secret_is_no_log():
    seen = 0
    for name, body in TASK_TEXT.items():
        for task in _walk(yaml.safe_load(body) or []):
            module = task.get("kubernetes.core.k8s") or task.get("kubernetes.core.k8s_info")
            if not isinstance(module, dict):
                continue
            definition = module.get("definition")
            kind = definition.get("kind") if isinstance(definition, dict) else None
            if "Secret" in (module.get("kind"), kind):
                assert task.get("no_log") is True, f"{name}: {task['name']}"
                seen += 1
    assert seen == 3  # look up, create, delete


def test_every_kubernetes_task_is_pinned_to_the_cluster():
    """No task spells kubeconfig/context: the block that runs them all takes the pinned connection as
    module_defaults (roles/cluster_connection), and pins it first."""
    seen = 0
    for name, body in TASK_TEXT.items():
        for task in _walk(yaml.safe_load(body) or []):
            for module in ("kubernetes.core.k8s", "kubernetes.core.k8s_info", "kubernetes.core.k8s_log"):
                if module in task:
                    assert "kubeconfig" not in task[module] and "context" not in task[module], f"{name}: {task['name']}"
                    seen += 1
    assert seen >= 15
    (block,) = yaml.safe_load(TASK_TEXT["apply_cache.yml"])
    assert block["module_defaults"] == {"group/kubernetes.core.k8s": "{{ cluster_connection_k8s }}"}
    pin = [t for t in block["block"] if "ansible.builtin.include_role" in t]
    assert pin and pin[0]["ansible.builtin.include_role"]["name"] == "gpufleet.serving.cluster_connection"
    first_k8s = next(i for i, t in enumerate(block["block"]) if "include_tasks" in str(t))
    assert block["block"].index(pin[0]) < first_k8s


def test_render_mode_never_creates_a_secret():
    assert "kind: Secret" not in TASK_TEXT["render.yml"]
    assert "model_cache_secrets" not in TASK_TEXT["render.yml"] + TASK_TEXT["main.yml"]


def _walk(tasks: list[dict[str, Any]]):
    for task in tasks:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _walk(task.get(key) or [])
