"""playbooks/drain.yml end to end (render mode) on a copy of the example inventory: persisted drain, replicas move."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from example_fleet import copy_example_inventory

from ansible_collections.gpufleet.serving.plugins.module_utils.routing_hub import read_routing_artifact

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def run_playbook(inventory: Path, name: str, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory / "hosts.yml"), str(REPO / "playbooks" / name), *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )


def playbook(inventory: Path, name: str, *extra: str) -> str:
    proc = run_playbook(inventory, name, *extra)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def deployed_example(tmp_path: Path) -> tuple[Path, Path, str]:
    """A copy of the example inventory, deployed once in render mode: (inventory, render dir, its ``-e`` value)."""
    inventory = tmp_path / "inventory"
    copy_example_inventory(inventory)
    render = tmp_path / "rendered"
    out = f"gpufleet_render_dir={render}"
    playbook(inventory, "deploy.yml", "-e", out)
    return inventory, render, out


def clusters_of(render_dir: Path, deployment: str) -> set[str]:
    return {p.parts[-3] for p in render_dir.glob(f"*/*/service-{deployment}-*.yaml")}


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_drain_persists_moves_replicas_and_undrains(tmp_path):
    inventory, render, out = deployed_example(tmp_path)
    before = clusters_of(render, "qwen-demo")
    assert len(before) == 3
    drained = sorted(before)[0]

    playbook(inventory, "drain.yml", "-e", out, "-e", f"cluster={drained}")
    # Recorded in the render directory (issue 26: where an AWX job keeps it), not in the inventory.
    state = yaml.safe_load((render / "_fleet" / "example" / "fleet-state.yml").read_text())
    assert state == {"gpufleet_drained_clusters": [drained], "gpufleet_cordoned_clusters": []}
    assert not (inventory / "group_vars" / "all" / "gpufleet_drained.yml").exists()
    # Fleet routing (docs/routing.md): the drained cluster's replica keeps its files for this run while the routing
    # file written in the same run gives the cluster weight 0; the next run removes them.
    artifact = read_routing_artifact(render, "example")  # the index and a ConfigMap per model (docs/routing.md)
    assert artifact is not None
    (qwen,) = [m for m in artifact["models"] if m["deployment"] == "qwen-demo"]
    assert {c["cluster"]: c["weight"] for c in qwen["clusters"]}[drained] == 0
    assert list((render / drained).glob("*/*qwen-demo-*.yaml"))
    playbook(inventory, "deploy.yml", "-e", out)
    after = clusters_of(render, "qwen-demo")
    assert drained not in after
    assert len(after) == 3
    assert not list((render / drained).glob("*/*qwen-demo-*.yaml"))

    # The drain is persisted: a plain deploy keeps the cluster drained and changes nothing.
    assert not re.search(r"changed=[1-9]", playbook(inventory, "deploy.yml", "-e", out))
    assert clusters_of(render, "qwen-demo") == after

    playbook(inventory, "drain.yml", "-e", out, "-e", f"cluster={drained}", "-e", "drain_state=absent")
    state = yaml.safe_load((render / "_fleet" / "example" / "fleet-state.yml").read_text())
    assert state == {"gpufleet_drained_clusters": [], "gpufleet_cordoned_clusters": []}
    # Undraining does not move healthy replicas back (no rebalancing).
    assert clusters_of(render, "qwen-demo") == after


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_drain_requires_a_fleet_cluster(tmp_path):
    inventory = tmp_path / "inventory"
    copy_example_inventory(inventory)
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
    assert not list(tmp_path.rglob("fleet-state.yml"))


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_status_reports_without_writing(tmp_path):
    inventory, render, out = deployed_example(tmp_path)
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
    inventory, render, out = deployed_example(tmp_path)
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
    for name in ("status.yml", "deploy.yml"):
        proc = run_playbook(inventory, name, "-e", out)
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
    copy_example_inventory(inventory)
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
    # A summary (issue 26): the clusters of each deployment with their replica counts, no replica records.
    assert "replicas" not in placement and placement["truncated"] is False
    assert {n: sum(r["clusters"].values()) for n, r in placement["results"].items()} == desired
    assert {c for r in placement["results"].values() for c in r["clusters"]} <= clusters
    assert stats["gpufleet_drift"] == []  # render mode reads no cluster
    # The routing artifact is a summary too (issue 26, docs/routing.md), pointing at the whole artifact's file.
    routing = stats["gpufleet_routing"]
    assert {n: m["ready"] for n, m in routing["models"].items()} == desired and routing["totals"]["short"] == []
    assert routing["artifact"]["file"] in routing["files"] and routing["truncated"] is False
    index = yaml.safe_load((tmp_path / "rendered" / routing["artifact"]["file"]).read_text())
    assert json.loads(index["data"]["routing.json"])["layout"] == "index"
    models = read_routing_artifact(tmp_path / "rendered", "example")["models"]
    assert {m["deployment"]: sum(c["weight"] for c in m["clusters"]) for m in models} == desired

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


def snapshot(render: Path) -> dict:
    return {p: p.read_text() for p in render.rglob("*.yaml")}


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_a_selector_typo_on_a_running_deployment_fails_before_anything_is_written(tmp_path):
    """Issue 25: a selector typo that still compiles dropped every replica of a running model, rc 0."""
    inventory, render, out = deployed_example(tmp_path)
    before = snapshot(render)
    deployments = inventory / "group_vars" / "all" / "deployments.yml"
    text = deployments.read_text()
    typo = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("16Gi")) >= 0'
    assert typo in text
    # A domain typo is a validation error naming the field, before anything is read or written.
    deployments.write_text(text.replace(typo, 'device.capacity["nvidia.com"].memory.compareTo(quantity("16Gi")) >= 0'))
    proc = run_playbook(inventory, "deploy.yml", "-e", out)
    assert proc.returncode != 0
    assert "capacity domain 'nvidia.com' is published by no inference class of the fleet" in proc.stdout
    assert snapshot(render) == before
    # A selector that names real attributes but that no pool satisfies: the guarded shrink stops the run.
    deployments.write_text(text.replace(typo, typo.replace('"16Gi"', '"16Ti"')))

    proc = run_playbook(inventory, "deploy.yml", "-e", out)
    assert proc.returncode != 0
    assert "would leave with fewer replicas than are serving now: qwen-demo" in proc.stdout
    assert "qwen-demo: 3 serving now, this run would place 0" in proc.stdout
    assert snapshot(render) == before  # nothing written or pruned

    # Allowed by name, the run goes through and lists every replica it removed.
    allowed = run_playbook(inventory, "deploy.yml", "-e", out, "-e", '{"gpufleet_allow_capacity_loss": ["qwen-demo"]}')
    assert allowed.returncode == 0, allowed.stdout[-3000:]
    assert "Replicas removed by this placement:" in allowed.stdout
    assert allowed.stdout.count("qwen-demo: replica (") == 3
    # Fleet routing (docs/routing.md): the replicas leave the routing file (weight 0) in this run, their files go in
    # the next one.
    assert "qwen-demo: eks-us-east-1=0" in allowed.stdout
    again = run_playbook(inventory, "deploy.yml", "-e", out, "-e", '{"gpufleet_allow_capacity_loss": ["qwen-demo"]}')
    assert again.returncode == 0, again.stdout[-3000:]
    assert not list(render.glob("*/*/service-qwen-demo-*.yaml"))


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_min_available_allows_a_loss_that_keeps_enough_replicas(tmp_path):
    inventory, render, out = deployed_example(tmp_path)
    cluster = sorted(clusters_of(render, "qwen-demo"))[0]
    # The cluster leaves qwen-demo's candidates: 3 serving, 2 other clusters with room for 1 more each? No: the
    # example has one GPU pool per cluster, so the replica cannot move - a loss of one.
    deployments = inventory / "group_vars" / "all" / "deployments.yml"
    text = deployments.read_text()
    pattern = f"gpufleet_clusters:!{cluster}"
    deployments.write_text(text.replace("    clusters: gpufleet_clusters\n", f'    clusters: "{pattern}"\n', 1))
    proc = run_playbook(inventory, "deploy.yml", "-e", out)
    if proc.returncode == 0:  # the replica found room elsewhere: no loss to guard
        assert "Serving capacity lost" not in proc.stdout
        return
    assert "qwen-demo" in proc.stdout
    deployments.write_text(
        deployments.read_text().replace("    replicas: 3\n", "    replicas: 3\n    disruption: {min_available: 2}\n", 1)
    )
    allowed = run_playbook(inventory, "deploy.yml", "-e", out)
    assert allowed.returncode == 0, allowed.stdout[-3000:]
    assert "allowed by disruption.min_available (2 >= 2)" in allowed.stdout


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
@pytest.mark.parametrize(
    ("value", "error"),
    [
        (
            '["gke-us-centrl1"]',
            "gpufleet_drained_clusters: unknown cluster name 'gke-us-centrl1' (did you mean 'gke-us-central1'?",
        ),
        ("nope", "gpufleet_drained_clusters: unknown cluster name 'nope'"),
    ],
)
def test_a_typo_in_the_drained_clusters_is_an_error(tmp_path, value, error):
    inventory = tmp_path / "inventory"
    copy_example_inventory(inventory)
    render = tmp_path / "rendered"
    proc = run_playbook(
        inventory, "deploy.yml", "-e", f"gpufleet_render_dir={render}", "-e", f"gpufleet_drained_clusters={value}"
    )
    assert proc.returncode != 0
    assert error in proc.stdout, proc.stdout[-3000:]
    assert not render.exists() or not list(render.rglob("*.yaml"))


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_survey_forms_of_the_drained_clusters_drain_every_named_cluster(tmp_path):
    """A survey sends text: a JSON list, or names separated by ', ' (whose space once dropped the second name)."""
    inventory, render, out = deployed_example(tmp_path)
    two = sorted(clusters_of(render, "qwen-demo"))[:2]
    for form in (json.dumps(two), ", ".join(two)):
        proc = run_playbook(inventory, "status.yml", "-e", out, "-e", json.dumps({"gpufleet_drained_clusters": form}))
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert "A deploy would change the placement of: qwen-demo" in proc.stdout, form


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_teardown_with_a_mistyped_mode_fails(tmp_path):
    inventory = tmp_path / "inventory"
    copy_example_inventory(inventory)
    proc = run_playbook(inventory, "teardown.yml", "-e", "teardown_confirm=true", "-e", "gpufleet_mode=aply")
    assert proc.returncode != 0
    assert "gpufleet_mode: must be one of render, apply (got aply)" in proc.stdout
