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
#: The fleet models and what they stand on (models.py validates a cluster's pools, classes and versions).
MODELS = INITS | {
    f"{MU}/{name}"
    for name in (
        "contract.py",
        "dra/__init__.py",
        "dra/api.py",
        "errors.py",
        "k8s/__init__.py",
        "k8s/version.py",
        "models.py",
        "quantity.py",
        "redact.py",
        "semver.py",
    )
}
#: The provisioning modules walk a pool's capacity ladder (capacity_ladder.py: error classes, the walk).
EKS = MODELS | {f"{MU}/eks.py", f"{MU}/provider_rules.py", f"{MU}/capacity_ladder.py"}
GKE = MODELS | {f"{MU}/gke.py", f"{MU}/gke_client.py", f"{MU}/provider_rules.py", f"{MU}/capacity_ladder.py"}
PLACEMENT = MODELS | {
    f"{MU}/{name}"
    for name in (
        "dra/allocator.py",
        "dra/constraints.py",
        "dra/features.py",
        "dra/state.py",
        "dra_cel.py",
        "placement.py",
        "records.py",
    )
}

#: Modules that run on the target, and the collection files their payload holds.
EXPECTED: dict[str, set[str]] = {
    "eks_addon": EKS,
    "eks_nodegroup": EKS,
    "eks_nodegroup_info": EKS,
    "gke_cluster": GKE,
    "gke_node_pool": GKE,
    "replica_placement": PLACEMENT,
}

#: What none of them uses: rendering, the backends, container helpers, readiness and the fleet orchestration.
NOT_SHIPPED = (
    f"{MU}/backends/",
    f"{MU}/render.py",
    f"{MU}/containers.py",
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
