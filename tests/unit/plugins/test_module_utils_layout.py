"""The shape of plugins/module_utils (issue 32): no file over 1,500 lines, and each façade over a stage package keeps
every public name of the package importable from where other code (and users' checks) import it.

``models.py`` is the façade of ``inventory/``, ``placement.py`` of ``scheduling/``, ``serving_stack.py`` of ``stack/``
and ``dra_cel.py`` of ``cel/`` (its public names are listed in its own ``__all__``; ``cel/test_cel_registry.py``).
The stage packages ``plan/``, ``render/`` (with ``render/backends/``) and ``fleet/`` have no façade: their modules are
imported where they live, and the flat modules they replaced are gone (``fleet.py`` is ``fleet/inventory.py``: a module
beside a package of its name would be shadowed, ``test_no_module_shares_its_name_with_a_package``).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
MU = REPO / "plugins" / "module_utils"
PREFIX = "ansible_collections.gpufleet.serving.plugins.module_utils"
MAX_LINES = 1500

#: façade module -> the package behind it.
FACADES = {"models": "inventory", "placement": "scheduling", "serving_stack": "stack"}
#: stage package -> modules it holds (issue 32 step 7).
STAGES = {
    "plan": {"document", "files", "records", "artifacts"},
    "render": {"serving", "gitops", "pd", "caches", "containers", "device_alternatives"},
    "render/backends": {"base", "registry", "deployment", "grove", "kserve", "leaderworkerset"},
    "fleet": {"inventory", "deploy", "reconcile", "state", "view", "html"},
}
#: the flat modules (and the package) the stage packages replaced: plan.py, plan_io.py, records.py, artifacts.py,
#: render.py, gitops.py, pd_render.py, cache_objects.py, containers.py, device_alternatives.py, backends/.
REPLACED = ("plan_io", "records", "artifacts", "gitops", "pd_render", "cache_objects", "containers")
REPLACED += ("device_alternatives", "backends")
#: ... and the fleet's: fleet.py (now fleet/inventory.py, checked by the package/module name test), fleet_deploy.py,
#: fleet_k8s.py, fleet_state.py, fleet_view.py, fleet_html.py.
REPLACED += ("fleet_deploy", "fleet_k8s", "fleet_state", "fleet_view", "fleet_html")
TESTS = REPO / "tests" / "unit" / "plugins" / "module_utils"


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_utils_file_is_over_1500_lines():
    sizes = {str(p.relative_to(MU)): _lines(p) for p in sorted(MU.rglob("*.py"))}
    assert len(sizes) > 50  # the walk found the tree, packages included
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def _public_names(path: Path) -> set[str]:
    """The public names a module defines at its top level (classes, functions, assignments)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("facade", sorted(FACADES))
def test_a_facade_re_exports_every_public_name_of_its_package(facade):
    package = FACADES[facade]
    front = importlib.import_module(f"{PREFIX}.{facade}")
    parts = sorted(p for p in (MU / package).glob("*.py") if p.name != "__init__.py")
    assert parts, f"{package}/ has no modules"
    missing = {}
    for part in parts:
        module = importlib.import_module(f"{PREFIX}.{package}.{part.stem}")
        for name in sorted(_public_names(part)):
            if getattr(front, name, None) is not getattr(module, name) or name not in front.__all__:
                missing.setdefault(part.name, []).append(name)
    assert missing == {}, f"{facade}.py does not re-export (in __all__): {missing}"


@pytest.mark.parametrize("facade", sorted(FACADES))
def test_a_package_does_not_import_its_facade(facade):
    """The parts stand under their façade: one that imported it back would close a cycle through it."""
    package = FACADES[facade]
    offenders = []
    for part in sorted((MU / package).glob("*.py")):
        for node in ast.walk(ast.parse(part.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in (f"{PREFIX}.{facade}",):
                offenders.append(part.name)
            if isinstance(node, ast.ImportFrom) and node.module == PREFIX:
                offenders += [part.name for alias in node.names if alias.name == facade]
    assert offenders == []


def test_the_facades_stay_small():
    """A façade holds its package's entry points, not the package: placement.py keeps plan() / place()."""
    sizes = {facade: _lines(MU / f"{facade}.py") for facade in FACADES}
    assert all(n < 500 for n in sizes.values()), sizes


def test_the_stage_packages_hold_their_modules_and_replace_the_flat_ones():
    for package, modules in STAGES.items():
        assert (MU / package / "__init__.py").is_file(), package
        assert modules <= {p.stem for p in (MU / package).glob("*.py")}, package
    assert [name for name in REPLACED if (MU / f"{name}.py").exists() or (MU / name).exists()] == []


def test_no_module_shares_its_name_with_a_package():
    """``plan.py`` beside ``plan/`` would be shadowed by the package: one of them is dead code."""
    packages = sorted(p.parent for p in MU.rglob("__init__.py"))
    assert len(packages) >= 10, packages
    assert [str(p.relative_to(MU)) for p in packages if p.with_suffix(".py").exists()] == []


def test_the_unit_tests_mirror_the_packages():
    """A folder of module_utils tests is named after a package (``render/backends/`` for ``render/backends/``)."""
    folders = sorted(p.relative_to(TESTS) for p in TESTS.rglob("*") if p.is_dir() and any(p.glob("test_*.py")))
    assert {"plan", "render", "render/backends", "fleet"} <= {str(f) for f in folders}
    assert [str(f) for f in folders if not (MU / f / "__init__.py").is_file()] == []
