"""What each module ships to the target: its AnsiballZ payload, built the way ansible-core builds it.

``tests/lib/ansiballz_payload.py`` runs ansible-core's own ``module_common.recursive_finder`` (what
``_find_module_utils`` calls) for every module under plugins/modules, in a process of its own, and lists the
collection's files in each payload. Each module's list is compared with the files it uses: a module_utils import added
anywhere on a module's import path -- inside a function too, AnsiballZ follows those -- shows up here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HELPER = REPO / "tests" / "lib" / "ansiballz_payload.py"
MU = "plugins/module_utils"

#: The package inits on the way to module_utils (ansible-core synthesises the ones above it).
INITS = {"__init__.py", "plugins/__init__.py", f"{MU}/__init__.py"}
#: The fleet models a provider needs and what they stand on: inventory/clusters.py validates a cluster's pools and
#: versions, inventory/classes.py its classes (a class may name a hardware catalog entry, catalog.py, whose unknown
#: names get suggest.py's "did you mean"); inventory/common.py is what both share. The providers import these parts
#: directly: neither the models.py façade nor the deployments and caches ship with them.
MODELS = INITS | {
    f"{MU}/{name}"
    for name in (
        "catalog.py",
        "contract.py",
        "dra/__init__.py",
        "dra/api.py",
        "errors.py",
        "inventory/__init__.py",
        "inventory/classes.py",
        "inventory/clusters.py",
        "inventory/common.py",
        "k8s/__init__.py",
        "k8s/version.py",
        "quantity.py",
        "redact.py",
        "semver.py",
        "suggest.py",
    )
}
#: The whole fleet model behind its façade: a deployment (inventory/deployments.py) names its caches' sources
#: (inventory/caches.py).
ALL_MODELS = MODELS | {f"{MU}/{name}" for name in ("inventory/caches.py", "inventory/deployments.py", "models.py")}
#: The provisioning modules walk a pool's capacity ladder (capacity_ladder.py: error classes, the walk).
#: The providers live behind cloud/provider.py (the waiter, the Provider protocol); the modules import cloud/ directly,
#: never the eks.py / gke.py / gke_client.py façades, and one provider's module ships nothing of the other.
CLOUD = {f"{MU}/cloud/__init__.py", f"{MU}/cloud/provider.py", f"{MU}/provider_rules.py", f"{MU}/capacity_ladder.py"}
EKS = MODELS | CLOUD | {f"{MU}/cloud/eks.py"}
GKE = MODELS | CLOUD | {f"{MU}/cloud/gke.py", f"{MU}/cloud/gke_client.py"}
#: The CEL engine behind the dra_cel.py façade: all of it (the function registry imports every library).
CEL = {
    f"{MU}/dra_cel.py",
    *(
        f"{MU}/cel/{name}"
        for name in (
            "__init__.py",
            "checker.py",
            "common.py",
            "cost.py",
            "costmodel.py",
            "device.py",
            "interpreter.py",
            "lexer.py",
            "nodes.py",
            "parser.py",
            "selector.py",
            "types.py",
            "values.py",
        )
    ),
    *(
        f"{MU}/cel/library/{name}.py"
        for name in (
            "__init__",
            "core",
            "dra",
            "function",
            "lists",
            "optional",
            "quantity",
            "regex",
            "registry",
            "semver",
            "sets",
            "strings",
        )
    ),
}
PLACEMENT = (
    ALL_MODELS
    | CEL
    | {
        f"{MU}/{name}"
        for name in (
            "dra/allocator.py",
            "dra/constraints.py",
            "dra/features.py",
            "dra/state.py",
            "pd_instances.py",  # prefill/decode instances: colocate fabric, explain by role (no rendering)
            "placement.py",  # the façade of scheduling/: plan(), place()
            "plan/__init__.py",
            "plan/records.py",  # the replica records placement writes (nothing else of plan/)
            "scheduling/__init__.py",
            "scheduling/common.py",
            "scheduling/explain.py",
            "scheduling/matching.py",
            "scheduling/planner.py",
        )
    }
)

#: Modules that run on the target, and the collection files their payload holds.
EXPECTED: dict[str, set[str]] = {
    "eks_addon": EKS,
    "eks_nodegroup": EKS,
    "eks_nodegroup_info": EKS,
    "gke_cluster": GKE,
    "gke_node_pool": GKE,
    "replica_placement": PLACEMENT,
}

#: What none of them uses: rendering (render/: the serving render, the backends, container helpers, caches, GitOps),
#: the plan document and its files, readiness and the fleet orchestration.
NOT_SHIPPED = (
    f"{MU}/render/",
    f"{MU}/plan/document.py",
    f"{MU}/plan/files.py",
    f"{MU}/plan/artifacts.py",
    f"{MU}/readiness.py",
    f"{MU}/fleet",
    f"{MU}/serving_stack.py",
    f"{MU}/cache_",
)

MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py"))
#: Modules that are the documentation of an action plugin of the same name: the action runs on the controller, and the
#: module file imports nothing of the collection.
ACTION_BACKED = sorted(m for m in MODULES if (REPO / "plugins" / "action" / f"{m}.py").exists())


@pytest.fixture(scope="module")
def payloads() -> dict[str, dict[str, int]]:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".venv" / "collections")}
    out = subprocess.run(
        [sys.executable, str(HELPER), *MODULES], capture_output=True, text=True, check=False, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_every_module_has_an_expected_payload():
    unlisted = sorted(set(MODULES) - set(EXPECTED) - set(ACTION_BACKED))
    assert unlisted == [], f"modules without an expected payload here: {unlisted}"
    assert {"fleet_info", "fleet_placement", "fleet_apply", "manifest_dir"} <= set(ACTION_BACKED)


@pytest.mark.parametrize("module", sorted(EXPECTED))
def test_a_module_ships_what_it_uses(payloads, module):
    shipped = set(payloads[module])
    assert shipped == EXPECTED[module], (
        f"{module}: ships also {sorted(shipped - EXPECTED[module])}, no longer {sorted(EXPECTED[module] - shipped)}"
    )


@pytest.mark.parametrize("module", sorted(EXPECTED))
def test_provider_and_placement_modules_ship_no_rendering_or_backends(payloads, module):
    assert [path for path in payloads[module] if path.startswith(NOT_SHIPPED)] == []


@pytest.mark.parametrize("module", ACTION_BACKED)
def test_an_action_backed_module_ships_nothing_of_the_collection(payloads, module):
    assert payloads[module] == {}


def test_package_inits_ship_empty(payloads):
    inits = {path: size for files in payloads.values() for path, size in files.items() if path.endswith("__init__.py")}
    assert inits and set(inits.values()) == {0}


def test_the_helper_lists_what_a_module_imports(payloads):
    """The finder follows imports transitively: replica_placement imports placement, placement imports dra_cel."""
    source = (REPO / "plugins" / "modules" / "replica_placement.py").read_text()
    assert "module_utils.placement import" in source and "dra_cel" not in source
    assert f"{MU}/dra_cel.py" in payloads["replica_placement"]
    assert payloads["replica_placement"][f"{MU}/placement.py"] == (REPO / MU / "placement.py").stat().st_size
