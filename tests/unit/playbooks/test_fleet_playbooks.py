"""playbooks/drain.yml end to end (render mode) on a copy of the example inventory: persisted drain, replicas move."""

from __future__ import annotations

import json
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


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_a_planted_journal_never_reaches_outside_the_render_dir(tmp_path):
    """The render directory is a Git working tree: a committed ``.gpufleet/commit.json`` naming files outside it must
    not make deploy.yml delete one and move another (a kubeconfig) in, nor make the read-only status.yml write."""
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "inventories" / "example", inventory)
    render = tmp_path / "rendered"
    out = f"gpufleet_render_dir={render}"
    playbook(inventory, "deploy.yml", "-e", out)
    victim, kubeconfig = tmp_path / "victim.txt", tmp_path / "kubeconfig"
    victim.write_text("keep me")
    kubeconfig.write_text("users: [{user: {token: s3cr3t}}]")
    cluster = sorted(clusters_of(render, "qwen-demo"))[0]
    stolen = f"{cluster}/ml-team/service-stolen.yaml"
    (render / ".gpufleet").mkdir(exist_ok=True)
    (render / ".gpufleet/commit.json").write_text(
        json.dumps({"replace": [["../kubeconfig", stolen]], "remove": ["../victim.txt"]})
    )
    before = {p: p.read_text() for p in render.rglob("*.yaml")}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    for name in ("status.yml", "deploy.yml"):
        proc = subprocess.run(
            [str(ANSIBLE_PLAYBOOK), "-i", str(inventory / "hosts.yml"), str(REPO / "playbooks" / name), "-e", out],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            check=False,
        )
        assert proc.returncode != 0, name
        assert "refusing the commit journal" in proc.stdout, proc.stdout[-3000:]
        assert "s3cr3t" not in proc.stdout + proc.stderr
        assert victim.read_text() == "keep me"
        assert kubeconfig.read_text() == "users: [{user: {token: s3cr3t}}]"
        assert {p: p.read_text() for p in render.rglob("*.yaml")} == before


def published_stats(inventory: Path, *extra: str) -> tuple[int, dict]:
    """deploy.yml with the json callback: (exit status, the custom stats AWX would pass on as artifacts)."""
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"),
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_SHOW_CUSTOM_STATS="true",
    )
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory / "hosts.yml"), str(REPO / "playbooks" / "deploy.yml"), *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    return proc.returncode, json.loads(proc.stdout)["global_custom_stats"]


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_deploy_publishes_the_placement_for_awx_workflows(tmp_path):
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "inventories" / "example", inventory)
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    clusters = {h for group in hosts["all"]["children"].values() for h in _hosts(group)}
    desired = {
        d["name"]: d["replicas"]
        for d in yaml.safe_load((inventory / "group_vars" / "all" / "deployments.yml").read_text())[
            "gpufleet_model_deployments"
        ]
    }
    rc, stats = published_stats(inventory, "-e", f"gpufleet_render_dir={tmp_path / 'rendered'}")
    assert rc == 0
    placement = stats["gpufleet_placement"]
    assert placement["status"] == dict.fromkeys(desired, "Ready")
    assert placement["shortfalls"] == placement["degraded"] == []
    assert placement["capacity"] == "declared"
    assert {n: r["scheduled"] for n, r in placement["results"].items()} == desired
    assert sorted(r["deployment"] for r in placement["replicas"]) == sorted(
        n for n, c in desired.items() for _i in range(c)
    )
    assert {r["cluster"] for r in placement["replicas"]} <= clusters
    assert stats["gpufleet_drift"] == []  # render mode reads no cluster

    # Every cluster drained and shortfalls fatal: the run fails before writing, and still says what was short.
    drained = json.dumps({"gpufleet_drained_clusters": sorted(clusters), "gpufleet_fail_on_unschedulable": True})
    rc, stats = published_stats(inventory, "-e", f"gpufleet_render_dir={tmp_path / 'other'}", "-e", drained)
    assert rc != 0
    assert not (tmp_path / "other").exists()
    assert sorted(stats["gpufleet_placement"]["degraded"]) == sorted(desired)
    assert stats["gpufleet_placement"]["status"] == dict.fromkeys(desired, "Degraded")


def _hosts(group: dict) -> set[str]:
    found = set((group or {}).get("hosts") or {})
    for child in ((group or {}).get("children") or {}).values():
        found |= _hosts(child)
    return found
