"""Load the example inventory's fleet data (group_vars/all + host_vars) as plain Python, for tests and benchmarks."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventories" / "example"


@functools.cache
def _load() -> dict[str, Any]:
    all_vars: dict[str, Any] = {}
    for path in sorted((EXAMPLE / "group_vars" / "all").glob("*.yml")):
        all_vars.update(yaml.safe_load(path.read_text()) or {})
    hosts = {
        path.stem: yaml.safe_load(path.read_text()) or {} for path in sorted((EXAMPLE / "host_vars").glob("*.yml"))
    }
    return {
        "classes": all_vars["gpufleet_inference_classes"],
        "deployments": all_vars["gpufleet_model_deployments"],
        "caches": all_vars["gpufleet_model_caches"],
        "hosts": hosts,
        "fleet_name": all_vars["gpufleet_fleet_name"],
    }


def example_fleet() -> dict[str, Any]:
    """A fresh deep copy each call: ``{classes, deployments, caches, hosts, fleet_name}``; tests may mutate it."""
    return copy.deepcopy(_load())


def copy_example_inventory(dest: Path) -> Path:
    """A copy of the example inventory at ``dest``, without the run state a ``make demo`` leaves beside it
    (``.gpufleet/``: placement state, report, fleet picture): a test starts from the inventory alone."""
    import shutil

    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".gpufleet"))
    return dest
