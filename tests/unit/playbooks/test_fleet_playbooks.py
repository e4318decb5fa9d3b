"""playbooks/drain.yml end to end (render mode) on a copy of the example inventory: persisted drain, replicas move."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def playbook(inventory: Path, name: str, *extra: str) -> str:
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory / "hosts.yml"), str(REPO / "playbooks" / name), *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def clusters_of(render_dir: Path, deployment: str) -> set[str]:
    return {p.parts[-3] for p in render_dir.glob(f"*/*/service-{deployment}-*.yaml")}


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_drain_persists_moves_replicas_and_undrains(tmp_path):
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "inventories" / "example", inventory)
    render = tmp_path / "rendered"
    out = f"gpufleet_render_dir={render}"
    playbook(inventory, "deploy.yml", "-e", out)
    before = clusters_of(render, "qwen-demo")
    assert len(before) == 3
    drained = sorted(before)[0]

    playbook(inventory, "drain.yml", "-e", out, "-e", f"cluster={drained}")
    state = yaml.safe_load((inventory / "group_vars" / "all" / "gpufleet_drained.yml").read_text())
    assert state == {"gpufleet_drained_clusters": [drained]}
    after = clusters_of(render, "qwen-demo")
    assert drained not in after
    assert len(after) == 3
    assert not list((render / drained).glob("*/*qwen-demo-*.yaml"))

    # The drain is persisted: a plain deploy keeps the cluster drained and changes nothing.
    assert not re.search(r"changed=[1-9]", playbook(inventory, "deploy.yml", "-e", out))
    assert clusters_of(render, "qwen-demo") == after

    playbook(inventory, "drain.yml", "-e", out, "-e", f"cluster={drained}", "-e", "drain_state=absent")
    state = yaml.safe_load((inventory / "group_vars" / "all" / "gpufleet_drained.yml").read_text())
    assert state == {"gpufleet_drained_clusters": []}
    # Undraining does not move healthy replicas back (no rebalancing).
    assert clusters_of(render, "qwen-demo") == after


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_drain_requires_a_fleet_cluster(tmp_path):
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "inventories" / "example", inventory)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(inventory / "hosts.yml"),
            str(REPO / "playbooks" / "drain.yml"),
            "-e",
            "cluster=nope",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode != 0
    assert "Pass -e cluster=<one of" in proc.stdout
    assert not (inventory / "group_vars" / "all" / "gpufleet_drained.yml").exists()


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_status_reports_without_writing(tmp_path):
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "inventories" / "example", inventory)
    render = tmp_path / "rendered"
    out = f"gpufleet_render_dir={render}"
    playbook(inventory, "deploy.yml", "-e", out)
    before = {p: p.stat().st_mtime_ns for p in render.rglob("*.yaml")}

    assert "The fleet is placed as its deployments ask." in playbook(inventory, "status.yml", "-e", out)
    drained = sorted(clusters_of(render, "qwen-demo"))[0]
    report = playbook(inventory, "status.yml", "-e", out, "-e", f'{{"gpufleet_drained_clusters": ["{drained}"]}}')
    assert "A deploy would change the placement of: qwen-demo" in report
    assert {p: p.stat().st_mtime_ns for p in render.rglob("*.yaml")} == before
