"""The builders of a test in ``tests/unit/plugins/module_utils`` for a test in another folder of it.

The unit tests mirror the packages (``plan/``, ``render/``, ``render/backends/``, ``cel/``, ``cloud/``, ``fleet/``);
pytest puts only a test's own folder on ``sys.path`` ("prepend" import mode), so a test reaches a builder of a test in
another folder through :func:`builders`: ``plan/test_plan.py`` and the flat tests take ``fleet/test_fleet_deploy``'s
``fleet_dict``, ``render/test_model_endpoint.py`` ``fleet/test_fleet_k8s``'s ``FakeCluster``. The module is imported
under its own name, as pytest imports it when it collects it, so it is imported once. Builders shared more widely live
here in ``tests/lib`` (``render_case.py``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

MODULE_UTILS_TESTS = Path(__file__).resolve().parents[1] / "unit" / "plugins" / "module_utils"


def builders(name: str) -> ModuleType:
    """The test module ``name`` of ``tests/unit/plugins/module_utils``, or of a package folder below it
    (``"fleet/test_fleet_deploy"``)."""
    path = MODULE_UTILS_TESTS / f"{name}.py"
    if not path.is_file():
        raise ModuleNotFoundError(f"no {name}.py in {MODULE_UTILS_TESTS}")
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    return importlib.import_module(path.stem)
