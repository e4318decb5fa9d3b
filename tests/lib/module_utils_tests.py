"""The builders of a test in ``tests/unit/plugins/module_utils`` for a test in a package folder below it.

The unit tests mirror the packages (``plan/``, ``render/``, ``render/backends/``, ``cel/``, ``cloud/``); pytest puts
only a test's own folder on ``sys.path`` ("prepend" import mode), so a test there reaches a builder of a test one
folder up through :func:`builders`: ``plan/test_plan.py`` takes ``test_fleet_deploy``'s ``fleet_dict``,
``render/test_model_endpoint.py`` ``test_fleet_k8s``'s ``FakeCluster``. The module is imported under its own name, as
pytest imports it when it collects it, so it is imported once. Builders shared more widely live here in ``tests/lib``
(``render_case.py``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

MODULE_UTILS_TESTS = Path(__file__).resolve().parents[1] / "unit" / "plugins" / "module_utils"


def builders(name: str) -> ModuleType:
    """The test module ``name`` (``"test_fleet_deploy"``) of ``tests/unit/plugins/module_utils``."""
    if not (MODULE_UTILS_TESTS / f"{name}.py").is_file():
        raise ModuleNotFoundError(f"no {name}.py in {MODULE_UTILS_TESTS}")
    if str(MODULE_UTILS_TESTS) not in sys.path:
        sys.path.append(str(MODULE_UTILS_TESTS))
    return importlib.import_module(name)
