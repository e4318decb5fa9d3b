"""playbooks/plan.yml + playbooks/apply.yml (render mode) on copies of the example inventory: plan once, apply in
slices whose inventories hold only their own clusters (as AWX job slicing gives them), and the union equals deploy.yml.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from example_fleet import copy_example_inventory
from test_fleet_playbooks import ANSIBLE_PLAYBOOK, REPO, playbook, run_playbook

pytestmark = pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed")


def files(render: Path) -> dict[str, str]:
    """Every object file of a render directory (not the plan, its records or the lock)."""
    return {
        str(p.relative_to(render)): p.read_text()
        for p in sorted(render.rglob("*.yaml"))
        if p.relative_to(render).parts[0] not in ("_fleet", ".gpufleet")
    }


def _keep_hosts(node: dict, hosts: set[str]) -> dict:
    out = dict(node or {})
    if "hosts" in out:
        out["hosts"] = {h: v for h, v in (out["hosts"] or {}).items() if h in hosts}
    if "children" in out:
        out["children"] = {name: _keep_hosts(child, hosts) for name, child in (out["children"] or {}).items()}
    return out


def slice_inventory(source: Path, dest: Path, hosts: set[str]) -> Path:
    """An inventory with only ``hosts`` (and every group, as AWX builds a job slice's), its group_vars and host_vars."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".gpufleet", "hosts.yml"))
    inv = yaml.safe_load((source / "hosts.yml").read_text())
    (dest / "hosts.yml").write_text(yaml.safe_dump({"all": _keep_hosts(inv["all"], hosts)}))
    for hv in (dest / "host_vars").glob("*.yml"):
        if hv.stem not in hosts:
            hv.unlink()
    return dest


CLUSTERS = ["eks-us-east-1", "gke-europe-west4", "gke-us-central1", "onprem-a"]


def test_a_sliced_apply_of_one_plan_equals_the_unsliced_deploy(tmp_path):
    inventory = copy_example_inventory(tmp_path / "inventory")
    # The unsliced result.
    whole = tmp_path / "whole"
    playbook(inventory, "deploy.yml", "-e", f"gpufleet_render_dir={whole}")
    # Plan once, then three slices, each with an inventory of its own clusters only (the plan from its file).
    render = tmp_path / "rendered"
    out = playbook(inventory, "plan.yml", "-e", f"gpufleet_render_dir={render}")
    assert "written to" in out
    plan = json.loads((render / "_fleet" / "plan.json").read_text())
    assert plan["version"] == 1 and sorted(plan["digests"]["clusters"]) == CLUSTERS
    assert files(render) == {}, "plan.yml renders nothing"
    for i, hosts in enumerate([{"eks-us-east-1"}, {"gke-europe-west4", "gke-us-central1"}, {"onprem-a"}]):
        part = slice_inventory(inventory, tmp_path / f"slice{i}", hosts)
        playbook(
            part,
            "apply.yml",
            "-e",
            f"gpufleet_render_dir={render}",
            "-e",
            f"gpufleet_plan_file={render}/_fleet/plan.json",
        )
    assert files(render) == files(whole)
    assert sorted(p.stem for p in (render / "_fleet" / "applied" / "example").glob("*.json")) == CLUSTERS
    # Applying the same plan again changes nothing.
    part = slice_inventory(inventory, tmp_path / "again", {"onprem-a"})
    assert "changed=0" in playbook(part, "apply.yml", "-e", f"gpufleet_render_dir={render}")


def test_apply_refuses_a_plan_made_from_another_inventory(tmp_path):
    inventory = copy_example_inventory(tmp_path / "inventory")
    render = tmp_path / "rendered"
    playbook(inventory, "plan.yml", "-e", f"gpufleet_render_dir={render}")
    # The inventory changes after the plan: one deployment's replicas, one cluster's pools.
    deployments = inventory / "group_vars" / "all" / "deployments.yml"
    text = deployments.read_text()
    assert "replicas: 3" in text
    deployments.write_text(text.replace("replicas: 3", "replicas: 2", 1))
    proc = run_playbook(inventory, "apply.yml", "-e", f"gpufleet_render_dir={render}")
    assert proc.returncode != 0
    assert "model deployments (gpufleet_model_deployments)" in proc.stdout
    assert "make the plan again" in proc.stdout
    assert files(render) == {}, "nothing is written from a refused plan"


def test_apply_refuses_a_plan_older_than_the_one_a_cluster_took(tmp_path):
    inventory = copy_example_inventory(tmp_path / "inventory")
    render = tmp_path / "rendered"
    rd = f"gpufleet_render_dir={render}"
    playbook(inventory, "plan.yml", "-e", rd)
    old = tmp_path / "old-plan.json"
    shutil.copy(render / "_fleet" / "plan.json", old)
    # A newer plan (the fleet changed, then changed back: same inventory, a later plan with other replicas).
    deployments = inventory / "group_vars" / "all" / "deployments.yml"
    text = deployments.read_text()
    deployments.write_text(text.replace("replicas: 3", "replicas: 2", 1))
    playbook(inventory, "deploy.yml", "-e", rd)
    deployments.write_text(text)
    playbook(inventory, "plan.yml", "-e", rd, "-e", f"gpufleet_plan_file={tmp_path}/other.json")
    before = files(render)
    # The old plan was made before the plan the clusters now run: refused, naming the cluster and both plans.
    proc = run_playbook(inventory, "apply.yml", "-e", rd, "-e", f"gpufleet_plan_file={old}")
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "was last applied with a newer plan" in proc.stdout
    assert files(render) == before


def test_the_plan_travels_inline_as_an_awx_artifact(tmp_path):
    inventory = copy_example_inventory(tmp_path / "inventory")
    render = tmp_path / "rendered"
    playbook(inventory, "plan.yml", "-e", f"gpufleet_render_dir={render}")
    doc = (render / "_fleet" / "plan.json").read_text()
    (render / "_fleet" / "plan.json").unlink()  # an apply on another execution node: only the artifact
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"gpufleet_plan": {"path": "/nowhere/plan.json", "document": json.loads(doc)}}))
    playbook(inventory, "apply.yml", "-e", f"gpufleet_render_dir={render}", "-e", f"@{extra}")
    assert {Path(k).parts[0] for k in files(render)} == set(CLUSTERS)


def test_a_plan_edited_by_hand_is_refused(tmp_path):
    inventory = copy_example_inventory(tmp_path / "inventory")
    render = tmp_path / "rendered"
    playbook(inventory, "plan.yml", "-e", f"gpufleet_render_dir={render}")
    path = render / "_fleet" / "plan.json"
    plan = json.loads(path.read_text())
    plan["replicas"] = plan["replicas"] * 2  # twice the replicas
    path.write_text(json.dumps(plan))
    proc = run_playbook(inventory, "apply.yml", "-e", f"gpufleet_render_dir={render}")
    assert proc.returncode != 0
    assert "does not match its plan_id" in proc.stdout
    assert files(render) == {}


def test_a_blocked_plan_is_not_written(tmp_path):
    inventory = copy_example_inventory(tmp_path / "inventory")
    render = tmp_path / "rendered"
    rd = f"gpufleet_render_dir={render}"
    playbook(inventory, "deploy.yml", "-e", rd)
    before = (render / "_fleet" / "plan.json").read_text()
    deployments = inventory / "group_vars" / "all" / "deployments.yml"
    text = deployments.read_text()
    typo = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("16Gi")) >= 0'
    assert typo in text
    # A selector no pool satisfies would leave qwen-demo with 0 of the 3 replicas serving: plan.yml stops, no plan.
    deployments.write_text(text.replace(typo, typo.replace('"16Gi"', '"16Ti"')))
    proc = run_playbook(inventory, "plan.yml", "-e", rd)
    assert proc.returncode != 0
    assert "would leave with fewer replicas than are serving now: qwen-demo" in proc.stdout
    assert (render / "_fleet" / "plan.json").read_text() == before


def test_observed_capacity_in_render_mode_needs_the_clusters_and_never_falls_back_to_declared(tmp_path):
    """Render mode with gpufleet_capacity=observed reads the clusters (tests/e2e: the local fleet); without a way to
    reach them it is an error naming each cluster, before anything is written, not a silent declared placement."""
    inventory = copy_example_inventory(tmp_path / "inventory")
    render = tmp_path / "rendered"
    proc = run_playbook(
        inventory, "deploy.yml", "-e", f"gpufleet_render_dir={render}", "-e", "gpufleet_capacity=observed"
    )
    assert proc.returncode != 0
    assert "gpufleet_kubeconfig" in proc.stdout and "eks-us-east-1" in proc.stdout
    assert not render.exists() or files(render) == {}


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
@pytest.mark.parametrize("hub", [None, "no-such-cluster"])
def test_fleet_routing_without_a_hub_fails_before_anything_is_applied(tmp_path, hub):
    inventory = tmp_path / "inventory"
    copy_example_inventory(inventory)
    # Every cluster reachable on paper only (nothing listens): apply mode reads them, finds none, and must stop at the
    # guard, before the workloads would be applied, not after (the routing task runs last).
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "x", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
                "current-context": "x",
            }
        )
    )
    extra = {"gpufleet_mode": "apply", "gpufleet_kubeconfig": str(kubeconfig), "gpufleet_fleet_routing": "llmd"}
    if hub:
        extra["gpufleet_routing_hub"] = hub
    proc = run_playbook(
        inventory, "deploy.yml", "-e", json.dumps(extra), "-e", f"gpufleet_state_file={tmp_path / 'state.json'}"
    )
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "needs gpufleet_routing_hub" in out, out[-3000:]
    assert ("no-such-cluster is not an inventory host" if hub else "(not set)") in out
    assert "Apply every cluster's serving workloads" not in out


def _verbose(inventory: Path, name: str, *extra: str) -> str:
    """Run a playbook with the default callback at -v (every task's result printed as JSON)."""
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STDOUT_CALLBACK="default",
    )
    argv = [str(ANSIBLE_PLAYBOOK), "-v", "-i", str(inventory / "hosts.yml"), str(REPO / "playbooks" / name), *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_values_handed_off_through_files_render_what_registered_values_render(tmp_path):
    """Issue 26: the role hands fleet_info's fleet and fleet_placement's / fleet_plan's replicas to the next tasks
    through a file (a handle in the registered result) past __model_deployment_handoff_over characters; forced for
    every value (0), deploy.yml and plan.yml + apply.yml render the same files, and the results carry handles."""
    inventory = copy_example_inventory(tmp_path / "inventory")
    inline = tmp_path / "inline"
    playbook(inventory, "deploy.yml", "-e", f"gpufleet_render_dir={inline}")
    handed = tmp_path / "handed"
    force = "__model_deployment_handoff_over=0"
    out = _verbose(inventory, "deploy.yml", "-e", f"gpufleet_render_dir={handed}", "-e", force)
    assert '"gpufleet_handoff": "fleet"' in out and '"gpufleet_handoff": "replicas"' in out
    # What the render changed, per cluster (selected from fleet_manifests' bounded file_lines).
    assert '"onprem-a: +' in out.split("Say what the render changed per cluster", 1)[1].split("TASK [", 1)[0]
    assert files(handed) == files(inline) != {}
    planned = tmp_path / "planned"
    playbook(inventory, "plan.yml", "-e", f"gpufleet_render_dir={planned}", "-e", force)
    out = _verbose(inventory, "apply.yml", "-e", f"gpufleet_render_dir={planned}", "-e", force)
    assert '"gpufleet_handoff": "replicas"' in out
    assert files(planned) == files(inline)
