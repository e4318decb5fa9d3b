"""Run the collection's action plugins in-process, the way the task executor does, without a play (a module of
tests/lib, not a conftest: test folders each have a conftest.py, and ``from conftest import`` finds whichever was
imported first)."""

from __future__ import annotations

import importlib
from typing import Any
from unittest.mock import MagicMock

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

GROUPS = {
    "all": ["gke-us-central1", "gke-europe-west4", "eks-us-east-1", "onprem-a"],
    "gpufleet_clusters": ["gke-us-central1", "gke-europe-west4", "eks-us-east-1", "onprem-a"],
    "gke": ["gke-us-central1", "gke-europe-west4"],
    "eks": ["eks-us-east-1"],
    "onprem": ["onprem-a"],
    "prod": ["gke-us-central1", "eks-us-east-1", "onprem-a"],
    "staging": ["gke-europe-west4"],
}


def run_action(
    name: str,
    args: dict[str, Any],
    task_vars: dict[str, Any] | None = None,
    check_mode: bool = False,
    diff: bool = False,
):
    module = importlib.import_module(f"ansible_collections.gpufleet.serving.plugins.action.{name}")
    task = MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.diff = diff
    task.async_val = 0
    task.action = f"gpufleet.serving.{name}"
    loader = DataLoader()
    action = module.ActionModule(
        task=task,
        connection=MagicMock(),
        play_context=MagicMock(check_mode=check_mode),
        loader=loader,
        templar=Templar(loader=loader),
        shared_loader_obj=None,
    )
    return action.run(task_vars=task_vars or {})
