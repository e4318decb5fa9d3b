"""The job templates of awx/ run as AWX runs them: ansible-runner (AWX's engine) in a private data directory laid out
as AWX lays it out (tests/lib/awx_runner.py), on the example inventory in render mode (issue 26).

What a user relies on: the survey answers (text) are taken; the artifacts a workflow passes on (``gpufleet_placement``,
``gpufleet_plan``) are in the job's custom stats; no job event is larger than AWX stores (700,000 characters); and a
workflow's plan applied in parallel slices - each job holding a third of the clusters in its inventory, as AWX's job
slicing gives it - renders exactly what one unsliced deploy renders. Needs no cluster (render mode); ansible-runner
from requirements-dev.txt.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from awx_runner import MAX_EVENT_RES, REPO, Job, inventory_data, run_job, script_data
from example_fleet import copy_example_inventory

pytest.importorskip("ansible_runner")

TEMPLATES = {
    jt["name"]: jt
    for jt in yaml.safe_load((REPO / "awx" / "job_templates.yml").read_text())["gpufleet_awx_job_templates"]
}


def survey_answers(template: str, **text: str) -> dict[str, Any]:
    """What the job template's survey sends when an operator picks the first choice of every multiple choice question
    and types ``text`` into text questions (the others left blank send nothing): text, as AWX sends it."""
    answers: dict[str, Any] = {}
    for question in TEMPLATES[template].get("survey_spec", {}).get("spec", []):
        if question["type"] == "multiplechoice":
            answers[question["variable"]] = question["choices"][0]
        elif question["variable"] in text:
            answers[question["variable"]] = text[question["variable"]]
    return answers


def user_inventory(tmp_path: Path) -> dict[str, Any]:
    """The example inventory as AWX imports it from a project, without the render directory the example sets for
    `make demo` (on AWX it comes from the job template's extra variables)."""
    inventory = copy_example_inventory(tmp_path / "inventory")
    mode = inventory / "group_vars" / "all" / "mode.yml"
    data = yaml.safe_load(mode.read_text())
    data.pop("gpufleet_render_dir")
    mode.write_text("---\n" + yaml.safe_dump(data))
    return inventory_data(inventory / "hosts.yml")


def check_job(job: Job) -> None:
    assert job.status == "successful" and job.rc == 0, job.stdout[-4000:]
    size, what = job.largest_event()
    assert size < MAX_EVENT_RES, f"job {job.ident}: {what} is {size} characters; AWX drops more than {MAX_EVENT_RES}"


def rendered(render: Path) -> dict[str, str]:
    """The serving files of a render directory (the clusters' directories; not _fleet/ nor the lock's .gpufleet/)."""
    return {
        p.relative_to(render).as_posix(): p.read_text()
        for p in render.rglob("*.yaml")
        if p.relative_to(render).parts[0] not in ("_fleet", ".gpufleet")
    }


def test_validate_and_deploy_as_awx_jobs_with_survey_answers(tmp_path):
    inventory = user_inventory(tmp_path)
    render = tmp_path / "kept" / "rendered"
    extra = {"gpufleet_render_dir": str(render)}  # the job template's extra variables (awx/import.yml)

    validate = run_job(tmp_path, 101, TEMPLATES["gpufleet - validate"]["playbook"], script_data(inventory), extra)
    check_job(validate)
    assert "qwen-demo" in validate.stdout

    answers = survey_answers("gpufleet - deploy", gpufleet_allow_capacity_loss="false", gpufleet_explain="qwen-demo")
    assert answers["gpufleet_fail_on_unschedulable"] == "false" and answers["gpufleet_mode"] == "render"
    deploy = run_job(
        tmp_path, 102, TEMPLATES["gpufleet - deploy"]["playbook"], script_data(inventory), {**extra, **answers}
    )
    check_job(deploy)
    placement = deploy.artifacts["gpufleet_placement"]
    assert placement["status"] == {"qwen-demo": "Ready", "llama-70b": "Ready", "deepseek-v3": "Ready"}
    assert placement["degraded"] == []
    assert deploy.artifacts["gpufleet_plan"]["path"] == str(render / "_fleet" / "plan.json")
    assert rendered(render)
    # Nothing the next job needs was left in this job's private directory (deleted by AWX after the job).
    assert not (deploy.private_data_dir / "inventory" / "rendered").exists()
    assert not (deploy.private_data_dir / "inventory" / ".gpufleet").exists()
    assert (render / "_fleet" / "example" / "report.json").is_file()

    # A second job finds what the first one left: nothing to change.
    again = run_job(
        tmp_path, 103, TEMPLATES["gpufleet - deploy"]["playbook"], script_data(inventory), {**extra, **answers}
    )
    check_job(again)
    assert "changed=0" in again.stdout


def test_the_workflow_plan_applied_in_slices_renders_what_one_deploy_renders(tmp_path):
    """plan -> apply sliced in 3 (job_slice_count) -> apply all: the union of the slices' files equals an unsliced
    deploy's, and the final apply of every cluster finds nothing left to do."""
    inventory = user_inventory(tmp_path)
    hosts = sorted(inventory["_meta"]["hostvars"])
    sliced, whole = tmp_path / "sliced" / "rendered", tmp_path / "whole" / "rendered"
    answers = survey_answers("gpufleet - plan")

    plan = run_job(
        tmp_path,
        201,
        TEMPLATES["gpufleet - plan"]["playbook"],
        script_data(inventory),
        {"gpufleet_render_dir": str(sliced), **answers},
    )
    check_job(plan)
    artifact = plan.artifacts["gpufleet_plan"]
    # The plan's identity, where it is, and - the example being small - the document itself (AWX copies artifacts
    # into every later node's extra variables, so a slice needs no shared file to read the plan).
    assert {"path", "version", "fleet_digest", "plan_id", "created_at", "document"} <= set(artifact)
    assert artifact["path"] == str(sliced / "_fleet" / "plan.json")
    assert not rendered(sliced)  # a plan renders nothing

    slices = TEMPLATES["gpufleet - apply"]["job_slice_count"]
    assert slices == 3
    seen: set[str] = set()
    for n in range(1, slices + 1):
        part = script_data(inventory, n, slices)
        mine = set(part["_meta"]["hostvars"])
        assert mine == set(hosts[n - 1 :: slices])
        before = rendered(sliced)
        # AWX passes the plan node's artifacts to the apply node as extra variables.
        job = run_job(
            tmp_path,
            210 + n,
            TEMPLATES["gpufleet - apply"]["playbook"],
            part,
            {"gpufleet_render_dir": str(sliced), **plan.artifacts},
            envvars={"AWX_JOB_SLICE": f"{n}/{slices}"},
        )
        check_job(job)
        after = rendered(sliced)
        changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
        assert {p.split("/")[0] for p in changed} <= mine, f"slice {n} wrote outside its clusters"
        seen |= {p.split("/")[0] for p in after}

    union = rendered(sliced)
    # The workflow's last apply: the same plan over every cluster in one job; here nothing was left to it.
    finish = run_job(
        tmp_path,
        220,
        TEMPLATES["gpufleet - apply all"]["playbook"],
        script_data(inventory),
        {"gpufleet_render_dir": str(sliced), **plan.artifacts},
    )
    check_job(finish)
    assert rendered(sliced) == union

    deploy = run_job(
        tmp_path,
        230,
        TEMPLATES["gpufleet - deploy"]["playbook"],
        script_data(inventory),
        {"gpufleet_render_dir": str(whole)},
    )
    check_job(deploy)
    assert rendered(sliced) == rendered(whole)
    assert seen == {p.split("/")[0] for p in rendered(whole)}


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("deploy_render", REPO / "benchmarks" / "deploy_render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate


def test_no_job_event_of_a_large_fleet_is_larger_than_awx_stores(tmp_path):
    """100 clusters, 10 deployments, 200 replicas: every event AWX stores stays under its 700,000-character limit
    (beyond it AWX drops the task's result: the operator would see nothing of the placement)."""
    root = tmp_path / "fleet"
    _generator()(root, 100, 10)
    fleet = root / "group_vars" / "all" / "fleet.yml"
    data = yaml.safe_load(fleet.read_text())
    data.pop("gpufleet_render_dir")
    fleet.write_text(yaml.safe_dump(data))
    inventory = inventory_data(root / "hosts.yml")
    job = run_job(
        tmp_path, 301, "gpufleet/deploy.yml", script_data(inventory), {"gpufleet_render_dir": str(tmp_path / "r")}
    )
    check_job(job)
    placement = job.artifacts["gpufleet_placement"]
    assert len(placement["status"]) == 10
    assert json.dumps(job.artifacts).__len__() < MAX_EVENT_RES
