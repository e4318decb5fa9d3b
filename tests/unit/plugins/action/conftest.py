"""Fixtures of the action plugin tests (the runner itself is tests/lib/action_case.py)."""

from __future__ import annotations

from typing import Any

import pytest
from action_case import GROUPS
from example_fleet import example_fleet


@pytest.fixture
def example_task_vars() -> dict[str, Any]:
    data = example_fleet()
    return {
        "groups": GROUPS,
        "hostvars": data["hosts"],
        "gpufleet_inference_classes": data["classes"],
        "gpufleet_model_deployments": data["deployments"],
        "gpufleet_model_caches": data["caches"],
        "gpufleet_fleet_name": data["fleet_name"],
    }
