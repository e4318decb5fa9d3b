"""The playbooks as AWX runs them (issue 26): survey answers arrive as text and are read as their types (or refused by
the variable's name); on AWX the paths that must outlive the job have no default; drains and cordons are kept in the
fleet state file, not in the inventory. Render mode on copies of the example inventory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from example_fleet import copy_example_inventory

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
pytestmark = pytest.mark.skipif(
    not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python"
)


def run(inventory: Path, name: str, extra: dict | None = None, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory / "hosts.yml"), str(REPO / "playbooks" / name), *args]
    if extra:
        cmd += ["-e", json.dumps(extra)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=False)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def inventory_without_render_dir(tmp_path: Path) -> Path:
    """The example inventory as a user's: no gpufleet_render_dir (the example sets one for `make demo`)."""
    inventory = copy_example_inventory(tmp_path / "inventory")
    mode = inventory / "group_vars" / "all" / "mode.yml"
    data = yaml.safe_load(mode.read_text())
    data.pop("gpufleet_render_dir")
    mode.write_text("---\n" + yaml.safe_dump(data))
    return inventory


def services(render: Path, deployment: str = "qwen-demo") -> set[str]:
    return {p.parts[-3] for p in render.glob(f"*/*/service-{deployment}-*.yaml")}


# Every gpufleet_* switch of deploy.yml as a survey sends it: text.
SURVEY_ANSWERS = {
    "gpufleet_mode": "render",
    "gpufleet_fail_on_unschedulable": "false",
    "gpufleet_force_drain": "False",
    "gpufleet_allow_capacity_loss": "false",
    "gpufleet_capacity": "declared",
    "gpufleet_report_drift": "true",
    "gpufleet_allow_partial_play": "no",
    "gpufleet_report": "summary",
    "gpufleet_explain": "qwen-demo",
    "gpufleet_drained_clusters": "",  # an optional text question left blank (min length 0): the empty list
    "model_deployment_wait_timeout": "900",
}


def test_survey_answers_as_text_are_read_as_their_types(tmp_path):
    inventory = copy_example_inventory(tmp_path / "inventory")
    render = tmp_path / "rendered"
    # Names separated by a comma and a new line, as a survey's text area sends them: both are cordoned.
    cordoned = ["gke-us-central1", "eks-us-east-1"]
    answers = {**SURVEY_ANSWERS, "gpufleet_render_dir": str(render), "gpufleet_cordoned_clusters": ",\n".join(cordoned)}
    out = ok(run(inventory, "deploy.yml", answers))
    assert "deployment(s) Ready" in out
    assert "Why replicas could not be placed" not in out  # gpufleet_report: summary
    placed = services(render)
    assert placed and not placed & set(cordoned)
    assert ok(run(inventory, "status.yml", answers)).count("The fleet is placed as its deployments ask.") == 1


@pytest.mark.parametrize(
    ("playbook", "variable", "answer", "reason"),
    [
        ("deploy.yml", "gpufleet_fail_on_unschedulable", "ture", "must be true or false"),
        ("deploy.yml", "gpufleet_mode", "aply", "must be one of render, apply (got 'aply')"),
        ("deploy.yml", "gpufleet_force_drain", "nah", "must be true or false"),
        ("deploy.yml", "gpufleet_drained_clusters", '["gke-us-central1", ', "is not a JSON list of names"),
        ("status.yml", "gpufleet_report_drift", "maybe", "must be true or false"),
        ("status.yml", "gpufleet_capacity", "observd", "must be one of declared, observed"),
        ("plan.yml", "gpufleet_report", "short", "must be one of full, summary"),
        ("caches.yml", "gpufleet_mode", "Apply!", "must be one of render, apply"),
        ("drain.yml", "drain_state", "gone", "must be one of drained, present, cordoned, absent"),
        ("drain.yml", "drain_persist", "ture", "must be true or false"),
        ("drain.yml", "drain_force", "yes please", "must be true or false"),
    ],
)
def test_a_wrong_answer_fails_naming_the_variable_before_anything_is_written(
    tmp_path, playbook, variable, answer, reason
):
    """Ansible's bool filter would read 'ture' as false: the run would go on doing what nobody asked."""
    inventory = copy_example_inventory(tmp_path / "inventory")
    render = tmp_path / "rendered"
    extra = {"gpufleet_render_dir": str(render), variable: answer}
    if playbook == "drain.yml":
        extra["cluster"] = "gke-us-central1"
    proc = run(inventory, playbook, extra)
    assert proc.returncode != 0
    assert f"{variable}: {reason}" in proc.stdout, proc.stdout[-3000:]
    assert not render.exists() or not [p for p in render.rglob("*") if p.is_file()]


@pytest.mark.parametrize(
    ("playbook", "job_var"),
    [
        ("deploy.yml", "tower_job_id"),  # Automation Controller sets both; either is enough
        ("status.yml", "awx_job_id"),
        ("plan.yml", "awx_job_id"),
        ("drain.yml", "awx_job_id"),
        ("caches.yml", "awx_job_id"),
        ("serving_stack.yml", "awx_job_id"),
    ],
)
def test_on_awx_the_render_directory_is_required(tmp_path, playbook, job_var):
    """AWX writes the inventory into the job's private directory and deletes it after the job: a render directory
    defaulting beside the inventory would be lost, with the placement it holds."""
    inventory = inventory_without_render_dir(tmp_path)
    proc = run(inventory, playbook, {job_var: 4711, "cluster": "gke-us-central1"})
    assert proc.returncode != 0
    assert (
        "gpufleet_render_dir: is required when the play runs on AWX / Automation Controller (job 4711)" in proc.stdout
    )
    assert not (inventory / "rendered").exists() and not (inventory / ".gpufleet").exists()


def test_on_awx_apply_mode_requires_the_state_file_before_reading_any_cluster(tmp_path):
    inventory = inventory_without_render_dir(tmp_path)
    proc = run(inventory, "deploy.yml", {"awx_job_id": 12, "gpufleet_mode": "apply"})
    assert proc.returncode != 0
    assert "gpufleet_state_file: is required when the play runs on AWX / Automation Controller (job 12)" in proc.stdout
    assert "gpufleet_render_dir" not in proc.stdout  # not needed in apply mode
    assert not (inventory / ".gpufleet").exists()


def test_on_awx_with_its_paths_set_nothing_lands_beside_the_inventory(tmp_path):
    inventory = inventory_without_render_dir(tmp_path)
    render = tmp_path / "kept" / "rendered"
    out = ok(run(inventory, "deploy.yml", {"awx_job_id": 5, "gpufleet_render_dir": str(render)}))
    assert services(render)
    # The report and the fleet picture go beside the fleet state, in the render directory: the job keeps them.
    assert (render / "_fleet" / "example" / "report.json").is_file() and (
        render / "_fleet" / "example" / "fleet.html"
    ).is_file()
    assert str(render / "_fleet" / "example" / "report.json") in out
    assert not (inventory / ".gpufleet").exists() and not (inventory / "rendered").exists()


def test_drains_and_cordons_are_kept_in_the_render_directory_on_awx(tmp_path):
    """The AWX inventory is gone after the job: the drain must still hold in the next job."""
    inventory = inventory_without_render_dir(tmp_path)
    render = tmp_path / "rendered"
    job = {"awx_job_id": 1, "gpufleet_render_dir": str(render)}
    ok(run(inventory, "deploy.yml", job))
    first = sorted(services(render))
    drained, cordoned = first[0], first[1]

    ok(run(inventory, "drain.yml", {**job, "cluster": drained, "drain_state": "drained"}))
    # A later job (nothing of the earlier one's directory left): the drain still holds.
    ok(run(inventory, "drain.yml", {**job, "awx_job_id": 2, "cluster": cordoned, "drain_state": "cordoned"}))
    state = yaml.safe_load((render / "_fleet" / "example" / "fleet-state.yml").read_text())
    assert state == {"gpufleet_drained_clusters": [drained], "gpufleet_cordoned_clusters": [cordoned]}
    assert drained not in services(render) and cordoned in services(render)  # a cordon keeps its replicas
    assert not list(inventory.rglob("gpufleet_drained.yml"))

    # A cluster the variables drain cannot be restored by drain.yml: it says where the drain comes from.
    proc = run(
        inventory,
        "drain.yml",
        {**job, "cluster": cordoned, "drain_state": "absent", "gpufleet_cordoned_clusters": cordoned},
    )
    assert proc.returncode != 0
    assert f"{cordoned} stays cordoned: gpufleet_cordoned_clusters names it" in proc.stdout
    assert yaml.safe_load((render / "_fleet" / "example" / "fleet-state.yml").read_text()) == state

    # drain_persist false: this run only.
    ok(run(inventory, "drain.yml", {**job, "cluster": cordoned, "drain_state": "absent", "drain_persist": "false"}))
    assert yaml.safe_load((render / "_fleet" / "example" / "fleet-state.yml").read_text()) == state
