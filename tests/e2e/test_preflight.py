"""The existing-cluster preflight (roles/existing_cluster via playbooks/provision.yml) against a local fleet of two
real control planes: it passes on a correct fleet, and names the cluster, pool and device of each injected fault."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import LOCALFLEET, Fleet

HERE = Path(__file__).resolve().parent
INVENTORY = HERE / "preflight" / "inventory"


@pytest.fixture(scope="module")
def pf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("preflight")
    inventory = work / "inventory"
    shutil.copytree(INVENTORY, inventory)
    state = work / "fleet"
    subprocess.run([sys.executable, str(LOCALFLEET), "up", str(INVENTORY), str(state)], check=True)
    try:
        yield Fleet(state, inventory, work)
    finally:
        subprocess.run([sys.executable, str(LOCALFLEET), "down", str(state)], check=False)


def preflight(pf: Fleet, ok: bool) -> str:
    proc = pf.playbook("provision.yml", check=False)
    out = proc.stdout + proc.stderr
    assert (proc.returncode == 0) == ok, out[-6000:]
    return out


def errors(out: str) -> list[str]:
    """The preflight's error lines (printed by the report and again by the failure), once each, in order."""
    return list(dict.fromkeys(re.findall(r'ERROR\s+(.+?)"', out)))


def resource(pf: Fleet, host: str, plural: str) -> list[dict[str, Any]]:
    return pf.list(host, "resource.k8s.io", "v1", plural)


def test_a_correct_fleet_passes_and_is_reported_per_pool(pf):
    out = preflight(pf, ok=True)
    for line in (
        "OK      pf-a: API server v1.36",
        "OK      pf-a: resource.k8s.io/v1 served",
        "OK      pf-a/l4: 2 Node(s)",
        "OK      pf-a/h100x8/gpu: 1 node(s) x 8 gpu as the class says",
        "OK      pf-a/h100x8/nic: 1 node(s) x 2 nic as the class says",
        "OK      pf-b/a10g/gpu: 2 node(s) x 1 gpu as the class says",
    ):
        assert line in out, out[-4000:]
    assert "ERROR" not in out


def test_unlabelled_nodes_are_named(pf):
    core = pf.core("pf-a")
    core.patch_node("l4-1", {"metadata": {"labels": {"gpufleet.io/pool": None}}})
    try:
        out = preflight(pf, ok=False)
        assert any(
            e.startswith("pf-a/l4: 1 Node(s) labelled gpufleet.io/pool=l4, the inventory declares 2")
            for e in errors(out)
        ), errors(out)
        assert not any(e.startswith("pf-b") for e in errors(out))
        core.patch_node("l4-0", {"metadata": {"labels": {"gpufleet.io/pool": None}}})
        out = preflight(pf, ok=False)
        assert any(e.startswith("pf-a/l4: no Node is labelled gpufleet.io/pool=l4") for e in errors(out)), errors(out)
    finally:
        for node in ("l4-0", "l4-1"):
            core.patch_node(node, {"metadata": {"labels": {"gpufleet.io/pool": "l4"}}})


def test_a_missing_device_class_is_named(pf):
    custom = pf.custom("pf-a")
    saved = custom.get_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", "rdma.example.com")
    custom.delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", "rdma.example.com")
    try:
        out = preflight(pf, ok=False)
        assert any(e.startswith("pf-a/h100x8/nic: DeviceClass rdma.example.com does not exist") for e in errors(out)), (
            errors(out)
        )
        assert len(errors(out)) == 1, errors(out)
    finally:
        body = {k: saved[k] for k in ("apiVersion", "kind", "spec")}
        body["metadata"] = {"name": "rdma.example.com", "labels": saved["metadata"].get("labels") or {}}
        custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", body)


def test_slices_whose_memory_differs_from_the_class_are_named(pf):
    custom = pf.custom("pf-b")
    (rs,) = [s for s in resource(pf, "pf-b", "resourceslices") if s["spec"]["nodeName"] == "a10g-1"]
    original = copy.deepcopy(rs["spec"]["devices"])
    devices = copy.deepcopy(original)
    devices[0]["capacity"]["memory"]["value"] = "20000Mi"
    name = rs["metadata"]["name"]
    custom.patch_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", name, {"spec": {"devices": devices}})
    try:
        out = preflight(pf, ok=False)
        (error,) = errors(out)
        assert error.startswith("pf-b/a10g/gpu node=a10g-1: node a10g-1 publishes 0 gpu.nvidia.com device(s) matching")
        assert "gpu-0: capacity gpu.nvidia.com/memory is 20000Mi, the class says 23028Mi" in error
    finally:
        custom.patch_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", name, {"spec": {"devices": original}}
        )


def test_a_server_older_than_declared_is_named(pf):
    path = pf.inventory / "host_vars" / "pf-b.yml"
    before = path.read_text()
    data = yaml.safe_load(before)
    data["gpufleet_kubernetes_version"] = "1.37"
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
    try:
        out = preflight(pf, ok=False)
        (error,) = errors(out)
        assert re.match(r"pf-b: the API server runs v1\.36\.\d+ but the inventory declares 1\.37", error), error
    finally:
        path.write_text(before)
    # and the fleet is correct again after every fault was undone
    preflight(pf, ok=True)


def test_an_unreachable_api_is_named(pf):
    pf.localfleet("stop", "pf-b")
    try:
        out = preflight(pf, ok=False)
        assert "cluster pf-b: the Kubernetes API could not be read" in out, out[-3000:]
        assert re.search(r"^pf-a\s*:.*failed=0", out, re.M), out[-2000:]  # the other cluster is still checked
    finally:
        pf.localfleet("start", "pf-b")
