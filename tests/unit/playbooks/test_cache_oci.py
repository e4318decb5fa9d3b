"""OCI model images through the playbooks in render mode (issue 30, item 4), on a copy of the example inventory: a
cache with source.oci limited to the 1.36 cluster renders nothing of its own (no PVC, ConfigMap, Job) and says so,
and the serving Deployment mounts the image as an image volume; on the whole fleet (1.34 / 1.35 clusters too) the
run stops before writing anything, naming source.oci."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from example_fleet import copy_example_inventory

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
REF = "oci://ghcr.io/acme/qwen2.5-0.5b-instruct:v1"


def run(inventory: Path, playbook: str, render: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory / "hosts.yml"), str(REPO / "playbooks" / playbook), "-e",
         f"gpufleet_render_dir={render}"],
        capture_output=True, text=True, env=env, cwd=REPO, check=False,
    )  # fmt: skip


def oci_inventory(tmp_path: Path, clusters: str) -> Path:
    inventory = copy_example_inventory(tmp_path / "inventory")
    caches = inventory / "group_vars" / "all" / "caches.yml"
    data = yaml.safe_load(caches.read_text())
    cache = data["gpufleet_model_caches"][0]
    cache["source"] = {"oci": {"reference": REF, "path": "models"}}
    cache["clusters"] = clusters
    del cache["storage"]
    caches.write_text(yaml.safe_dump(data))
    deployments = inventory / "group_vars" / "all" / "deployments.yml"
    data = yaml.safe_load(deployments.read_text())
    qwen = next(d for d in data["gpufleet_model_deployments"] if d["name"] == "qwen-demo")
    qwen["clusters"] = clusters
    qwen["replicas"] = 1
    deployments.write_text(yaml.safe_dump(data))
    return inventory


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_an_oci_cache_renders_no_volume_of_its_own_and_the_deployment_mounts_the_image(tmp_path):
    inventory = oci_inventory(tmp_path, "eks-us-east-1")  # Kubernetes 1.36 (host_vars)
    render = tmp_path / "rendered"
    proc = run(inventory, "caches.yml", render)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert f"OCI model image {REF}: an image volume: nothing to render" in proc.stdout
    assert not list(render.glob("*/ml-team/persistentvolumeclaim-*.yaml"))
    assert not list(render.glob("*/ml-team/job-*.yaml"))

    proc = run(inventory, "deploy.yml", render)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    docs = [yaml.safe_load(p.read_text()) for p in (render / "eks-us-east-1" / "ml-team").glob("deployment-*.yaml")]
    qwen = [d for d in docs if d["metadata"]["labels"].get("gpufleet.io/deployment") == "qwen-demo"]
    assert len(qwen) == 1, [d["metadata"]["name"] for d in docs]
    spec = qwen[0]["spec"]["template"]["spec"]
    images = [v for v in spec["volumes"] if "image" in v]
    assert [v["image"] for v in images] == [
        {"reference": "ghcr.io/acme/qwen2.5-0.5b-instruct:v1", "pullPolicy": "IfNotPresent"}
    ]
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == images[0]["name"])
    assert mount == {"name": images[0]["name"], "mountPath": "/mnt/models", "readOnly": True, "subPath": "models"}
    assert not spec.get("initContainers")


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_an_oci_cache_on_clusters_older_than_1_36_stops_the_run_naming_the_field(tmp_path):
    inventory = oci_inventory(tmp_path, "gpufleet_clusters")
    render = tmp_path / "rendered"
    proc = run(inventory, "caches.yml", render)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "source.oci: an OCI model image is mounted as an image volume, GA from Kubernetes 1.36" in out, out[-4000:]
    assert not render.exists() or not list(render.rglob("*.yaml"))
