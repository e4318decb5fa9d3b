"""Every role that talks to a cluster reaches it through roles/cluster_connection, never its own kubeconfig lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROLES_DIR = Path(__file__).resolve().parents[3] / "roles"
K8S_MODULES = (
    "kubernetes.core.k8s",
    "kubernetes.core.k8s_info",
    "kubernetes.core.k8s_log",
    "kubernetes.core.helm",
    "gpufleet.serving.fleet_read",
    "gpufleet.serving.fleet_apply",
)


def _walk(tasks: list[Any]):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _walk(task.get(key) or [])


def _task_files():
    for path in sorted(ROLES_DIR.glob("*/tasks/*.yml")):
        yield path, yaml.safe_load(path.read_text(encoding="utf-8")) or []


@pytest.mark.parametrize(
    ("path", "tasks"), list(_task_files()), ids=lambda v: str(v)[-40:] if isinstance(v, Path) else ""
)
def test_no_task_spells_its_own_connection(path, tasks):
    for task in _walk(tasks):
        for module in K8S_MODULES:
            if isinstance(task.get(module), dict):
                assert not {"kubeconfig", "context"} & set(task[module]), f"{path}: {task.get('name')}"


def test_model_deployment_pins_before_it_reads_or_applies():
    tasks = ROLES_DIR / "model_deployment/tasks"
    for entry in ("main.yml", "status.yml", "plan.yml", "apply_plan.yml"):
        main = yaml.safe_load((tasks / entry).read_text())
        names = [t["name"] for t in main]
        # fleet_info pins every play host's connection (failing on an unpinned one) before anything reads or applies.
        validate = next(i for i, t in enumerate(main) if "gpufleet.serving.fleet_info" in t)
        assert "ansible_play_hosts" in main[validate]["gpufleet.serving.fleet_info"]["pin_connections"]
        assert main[validate]["register"] == "__model_deployment_fleet"
        reads = [i for i, n in enumerate(names) if n.startswith("Read ")]
        assert reads and min(reads) > validate, names
    # Every read and apply reaches the clusters through the pinned connections, and only through them.
    connections = yaml.safe_load((ROLES_DIR / "model_deployment/vars/main.yml").read_text())
    assert connections["__model_deployment_connections"] == "{{ __model_deployment_fleet.connections }}"
    for name, module in (
        ("observe_apply.yml", "gpufleet.serving.fleet_read"),
        ("apply.yml", "gpufleet.serving.fleet_apply"),
        ("apply_plan.yml", "gpufleet.serving.fleet_read"),
        ("apply_plan.yml", "gpufleet.serving.fleet_apply"),
    ):
        found = [t for t in yaml.safe_load((tasks / name).read_text()) if module in t]
        assert found, f"{name}: no {module} task"
        for task in found:  # apply.yml: a first fleet_apply that deletes nothing, when routing goes through a hub
            assert "__model_deployment_connections" in task[module]["connections"]


def test_the_connection_role_uses_the_tested_filter():
    (task,) = yaml.safe_load((ROLES_DIR / "cluster_connection/tasks/main.yml").read_text())
    assert "gpufleet.serving.k8s_connection" in task["ansible.builtin.set_fact"]["cluster_connection_k8s"]


def test_no_role_spells_a_label_of_the_contract():
    """Labels, annotations and selectors come from plugins/module_utils/contract.py (fleet_info's `contract`, the
    gpufleet.serving.contract lookup), never from a role's YAML."""
    for path in sorted(ROLES_DIR.glob("*/tasks/*.yml")) + sorted(ROLES_DIR.glob("*/vars/*.yml")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            ours = ("gpufleet.io/", "managed-by: gpufleet", "managed-by=gpufleet")  # Helm's own labels are Helm's
            assert not any(key in code for key in ours), f"{path}:{number}: {line.strip()}"


def test_the_contract_lookup_returns_what_fleet_info_returns():
    from ansible_collections.gpufleet.serving.plugins.lookup.contract import LookupModule
    from ansible_collections.gpufleet.serving.plugins.plugin_utils.contract import role_contract

    (contract,) = LookupModule().run([])
    assert contract == role_contract()
    assert contract["cache_owner_labels"] == {
        "app.kubernetes.io/managed-by": "gpufleet.serving",
        "gpufleet.io/component": "model-cache",
    }
    with pytest.raises(Exception, match="takes no terms"):
        LookupModule().run(["x"])
