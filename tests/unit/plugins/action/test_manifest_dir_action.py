"""gpufleet.serving.manifest_dir as a task runs it: --diff, per-cluster counts, the fleet directory and the clusters
that left the inventory."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.gpufleet.serving.plugins.action.manifest_dir import ActionModule

SERVING = {"app.kubernetes.io/managed-by": "gpufleet.serving", "gpufleet.io/component": "serving"}
STACK = {"app.kubernetes.io/managed-by": "gpufleet.serving", "gpufleet.io/component": "serving-stack"}


def run(args: dict[str, Any], *, diff: bool = False, check_mode: bool = False) -> dict[str, Any]:
    task = MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.diff = diff
    task.async_val = 0
    task.action = "gpufleet.serving.manifest_dir"
    loader = DataLoader()
    action = ActionModule(
        task=task,
        connection=MagicMock(),
        play_context=MagicMock(check_mode=check_mode, diff=diff),
        loader=loader,
        templar=Templar(loader=loader),
        shared_loader_obj=None,
    )
    return action.run(task_vars={})


def service(name: str, port: int = 8000) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "ml-team", "labels": {**SERVING, "gpufleet.io/fleet": "prod"}},
        "spec": {"ports": [{"port": port}]},
    }


def write(root: Path, cluster: str, objects: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    args = {"path": str(root), "cluster": cluster, "objects": objects, "owner": SERVING, "fleet": "prod", **kw}
    result = run(args)
    assert not result.get("failed"), result.get("msg")
    return result


def test_diff_mode_returns_each_file_before_and_after(tmp_path):
    write(tmp_path, "c1", [service("a"), service("b")], gitops="argocd")
    args = {
        "path": str(tmp_path),
        "cluster": "c1",
        "objects": [service("a", 9000)],
        "owner": SERVING,
        "fleet": "prod",
        "gitops": "argocd",
    }
    result = run(args, diff=True)
    assert result["lines"] == ["c1: +0 ~1 -1 files"]
    assert result["files"] == {"c1": {"created": 0, "changed": 1, "removed": 1}}
    diff = {d["before_header"]: d for d in result["diff"]}
    assert "port: 8000" in diff["c1/ml-team/service-a.yaml"]["before"]
    assert "port: 9000" in diff["c1/ml-team/service-a.yaml"]["after"]
    assert diff["c1/ml-team/service-b.yaml"]["after"] == ""
    quiet = run(args, diff=False)
    assert "diff" not in quiet and quiet["changed"] is False


def test_check_mode_with_diff_changes_nothing(tmp_path):
    args = {"path": str(tmp_path), "cluster": "c1", "objects": [service("a")], "owner": SERVING, "fleet": "prod"}
    result = run(args, diff=True, check_mode=True)
    assert result["changed"] is True
    assert sorted(result["created"]) == ["c1/_cluster/namespace-ml-team.yaml", "c1/ml-team/service-a.yaml"]
    assert {d["before_header"] for d in result["diff"]} == set(result["created"])
    assert not (tmp_path / "c1").exists()


def test_fleet_directory_and_clusters_that_left(tmp_path):
    write(tmp_path, "gone", [service("a")])
    write(tmp_path, "kept", [service("a")])
    generator = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "kept-stack", "namespace": "flux-system", "labels": dict(STACK)},
        "spec": {
            "interval": "10m",
            "path": "./kept",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "x"},
        },
    }
    args = {
        "path": str(tmp_path),
        "cluster": "_fleet",
        "objects": [generator],
        "owner": SERVING,
        "clusters": ["kept"],
        "fleet": "prod",
    }
    result = run(args)
    assert not result.get("failed"), result.get("msg")
    assert result["removed_clusters"] == ["gone"]
    assert sorted(result["removed"]) == ["gone/_cluster/namespace-ml-team.yaml", "gone/ml-team/service-a.yaml"]
    assert result["written"] == ["_fleet/flux-system/kustomization-kept-stack.yaml"]
    assert yaml.safe_load((tmp_path / "_fleet/flux-system/kustomization-kept-stack.yaml").read_text()) == generator
    assert not (tmp_path / "gone").exists() and (tmp_path / "kept/ml-team/service-a.yaml").is_file()

    only_prune = run({"path": str(tmp_path), "clusters": ["kept"], "owner": SERVING, "fleet": "prod"})
    assert only_prune["changed"] is False
    neither = run({"path": str(tmp_path), "owner": SERVING})
    assert neither["failed"] is True and "give cluster" in neither["msg"]
