"""GKE provisioning end to end through the official google-cloud-container client, pointed
(``client_options.api_endpoint``) at a local container API endpoint (tests/e2e/gke_api.py) that records every request.

Asserted on the request bodies as the client sent them (REST JSON; enums travel as integers): create, a second run
(no mutating request), check mode of a change (none either), the change (setAutoscaling, updateNodePool, the master
upgrade), a capacity ladder whose first rung stocks out (the pool gets its second rung), a Compute Engine stockout
(fails at once naming zone and machine type), a quota error (stops the ladder naming the quota) and teardown (GPU
pools, then the cluster). google.cloud's API enablement and the in-cluster StorageClass are off here (hard-coded Google URLs; no
Kubernetes API behind the endpoint).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gke_api import GkeApi, stockout_message

container_v1 = pytest.importorskip("google.cloud.container_v1")

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
INVENTORY = Path(__file__).resolve().parent / "provision" / "gke"
HOST = "gke-local"
BASE = "/v1/projects/gpufleet-test/locations/us-central1/clusters"
DISABLED = container_v1.GPUDriverInstallationConfig.GPUDriverVersion.INSTALLATION_DISABLED.value
BALANCED = container_v1.NodePoolAutoscaling.LocationPolicy.BALANCED.value
REGULAR = container_v1.ReleaseChannel.Channel.REGULAR.value
SPECIFIC = container_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION.value
RUNG = "gpufleet.io/capacity-rung"
DRA_LABELS = {"gke-no-default-nvidia-gpu-device-plugin": "true", "nvidia.com/gpu.present": "true"}


@pytest.fixture(scope="module")
def api() -> Iterator[GkeApi]:
    server = GkeApi()
    server.url = server.start()  # type: ignore[attr-defined]
    yield server
    server.stop()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("gke")
    shutil.copytree(INVENTORY, work / "inventory")
    return work


def run(api: GkeApi, work: Path, playbook: str, *extra: str, ok: bool = True) -> str:
    variables = {
        "gke_cluster_auth": {"auth_kind": "anonymous", "api_endpoint": api.url},  # type: ignore[attr-defined]
        "gke_cluster_enable_apis": False,
        "gke_cluster_storage_class": False,
        "gke_cluster_poll_interval": 0.1,
        "gke_cluster_wait_timeout": 30,
        "gke_cluster_kubeconfig_dir": str(work / "kubeconfigs"),
        "gpufleet_render_dir": str(work / "rendered"),
    }
    (work / "vars.json").write_text(json.dumps(variables))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    argv = [str(BIN / "ansible-playbook"), "-i", str(work / "inventory"), str(REPO / "playbooks" / playbook)]
    api.clear()
    proc = subprocess.run(
        [*argv, "-e", f"@{work / 'vars.json'}", *extra], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )
    assert (proc.returncode == 0) == ok, f"{playbook}:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout


def changed(output: str) -> int:
    match = re.search(rf"^{HOST}\s*:.*changed=(\d+)", output, re.M)
    assert match, output[-2000:]
    return int(match.group(1))


def edit_host(work: Path, **pools: dict[str, Any]) -> None:
    path = work / "inventory" / "host_vars" / f"{HOST}.yml"
    data = yaml.safe_load(path.read_text())
    for pool in data["gpufleet_node_pools"]:
        pool.update(pools.get(pool["name"], {}))
    if "_version" in pools:
        data["gpufleet_gke"]["kubernetes_version"] = pools["_version"]
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))


def test_create_sends_the_dra_ready_bodies(api, work):
    out = run(api, work, "provision.yml")
    assert changed(out) >= 4
    calls = [(r["method"], r["path"]) for r in api.mutations()]
    assert calls == [
        ("POST", BASE),
        ("POST", f"{BASE}/gke-local/nodePools"),
        ("POST", f"{BASE}/gke-local/nodePools"),
        ("POST", f"{BASE}/gke-local/nodePools"),
    ]
    cluster = api.mutations()[0]["body"]["cluster"]
    assert cluster["name"] == HOST and cluster["initialClusterVersion"] == "1.34"
    assert cluster["locations"] == ["us-central1-a", "us-central1-c"]
    assert cluster["releaseChannel"] == {"channel": REGULAR}
    assert cluster["network"] == "gpufleet-vpc"
    assert cluster["addonsConfig"] == {"gcpFilestoreCsiDriverConfig": {"enabled": True}}
    assert cluster["ipAllocationPolicy"] == {"useIpAliases": True}
    (system,) = cluster["nodePools"]
    assert system["name"] == "system" and system["config"]["machineType"] == "e2-standard-4"
    assert "accelerators" not in system["config"]
    assert system["autoscaling"] == {
        "enabled": True,
        "locationPolicy": BALANCED,
        "totalMinNodeCount": 1,
        "totalMaxNodeCount": 3,
    }

    pools = {r["body"]["nodePool"]["name"]: r["body"]["nodePool"] for r in api.mutations()[1:]}
    l4 = pools["l4"]
    assert l4["config"]["machineType"] == "g2-standard-8"
    assert l4["config"]["accelerators"] == [
        {
            "acceleratorType": "nvidia-l4",
            "acceleratorCount": "1",
            "gpuDriverInstallationConfig": {"gpuDriverVersion": DISABLED},
        }
    ]
    assert l4["config"]["labels"] == {"gpufleet.io/pool": "l4", **DRA_LABELS, RUNG: "on-demand"}
    assert l4["config"]["diskSizeGb"] == 200
    assert l4["locations"] == ["us-central1-a", "us-central1-c"]
    assert l4["initialNodeCount"] == 2  # 4 nodes over 2 zones: GKE counts per zone
    assert l4["autoscaling"] == {"enabled": True, "locationPolicy": BALANCED, "totalMaxNodeCount": 8}  # min 0 omitted
    h100 = pools["h100"]
    assert h100["config"]["spot"] is True and h100["locations"] == ["us-central1-c"]
    assert h100["config"]["labels"][RUNG] == "spot"
    assert h100["config"]["accelerators"][0]["acceleratorType"] == "nvidia-h100-80gb"
    reserved = pools["h100r"]
    assert reserved["config"]["reservationAffinity"] == {
        "consumeReservationType": SPECIFIC,
        "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/gpufleet-test/reservations/h100-block"],
    }
    assert reserved["config"]["accelerators"][0]["acceleratorCount"] == "8"
    assert reserved["config"]["labels"][RUNG] == "reservation"
    assert "spot" not in reserved["config"]

    kubeconfig = yaml.safe_load((work / "kubeconfigs" / HOST).read_text())
    assert kubeconfig["clusters"][0]["cluster"] == {
        "server": "https://203.0.113.10",
        "certificate-authority-data": "Q0EtREFUQQ==",
    }
    assert kubeconfig["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"


def test_second_run_sends_no_mutation(api, work):
    out = run(api, work, "provision.yml")
    assert changed(out) == 0
    assert api.mutations() == []
    assert {r["method"] for r in api.requests} == {"GET"}


def test_check_mode_predicts_and_sends_nothing(api, work):
    edit_host(work, l4={"max_node_count": 10}, _version="1.35")
    out = run(api, work, "provision.yml", "--check")
    assert changed(out) == 2  # the cluster's master upgrade and l4's autoscaling
    assert api.mutations() == []


def test_update_sends_set_autoscaling_and_master_upgrade(api, work):
    out = run(api, work, "provision.yml")
    assert changed(out) == 2
    assert api.mutations() == [
        {
            "method": "PUT",
            "path": f"{BASE}/gke-local",
            "body": {"update": {"desiredMasterVersion": "1.35"}},  # the name travels in the path
        },
        {
            "method": "POST",
            "path": f"{BASE}/gke-local/nodePools/l4:setAutoscaling",
            "body": {
                "autoscaling": {"enabled": True, "locationPolicy": BALANCED, "totalMaxNodeCount": 10},
            },
        },
    ]
    assert changed(run(api, work, "provision.yml")) == 0


def test_label_change_uses_update_node_pool_with_the_recorded_version(api, work):
    path = work / "inventory" / "group_vars" / "all" / "classes.yml"
    data = yaml.safe_load(path.read_text())
    data["gpufleet_inference_classes"]["l4-1x"]["labels"] = {"gpufleet.io/tier": "inference"}
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
    assert changed(run(api, work, "provision.yml")) == 1
    (call,) = api.mutations()
    assert (call["method"], call["path"]) == ("PUT", f"{BASE}/gke-local/nodePools/l4")
    assert call["body"]["labels"] == {
        "labels": {"gpufleet.io/tier": "inference", "gpufleet.io/pool": "l4", **DRA_LABELS, RUNG: "on-demand"}
    }
    assert call["body"]["nodeVersion"] == "1.34.5-gke.1000"  # the pool's own: a label change upgrades nothing
    assert call["body"]["imageType"] == "COS_CONTAINERD"


def test_an_immutable_change_fails_naming_the_field(api, work):
    path = work / "inventory" / "group_vars" / "all" / "classes.yml"
    data = yaml.safe_load(path.read_text())
    gke = data["gpufleet_inference_classes"]["l4-1x"]["provisioning"]["gke"]
    # Two L4s per node: g2-standard-24 (validation refuses a count its machine type does not come with).
    gke["machine_type"], gke["accelerator"]["count"] = "g2-standard-24", 2
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
    out = run(api, work, "provision.yml", ok=False)
    assert "node pool l4 of cluster gke-local cannot be changed in place (config.machineType" in out
    assert "config.accelerators: recorded [('nvidia-l4', '1'" in out
    assert api.mutations() == []
    gke["machine_type"], gke["accelerator"]["count"] = "g2-standard-8", 1
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))


def add_pool(work: Path, pool: dict[str, Any]) -> None:
    host = work / "inventory" / "host_vars" / f"{HOST}.yml"
    hv = yaml.safe_load(host.read_text())
    hv["gpufleet_node_pools"].append(pool)
    host.write_text("---\n" + yaml.safe_dump(hv, sort_keys=False))


def pool_calls(api: GkeApi, pool: str) -> list[tuple[str, dict[str, Any]]]:
    """The mutating requests about one pool: its creations (the name is in the body) and its deletions."""
    out = []
    for r in api.mutations():
        created = ((r["body"] or {}).get("nodePool") or {}).get("name")
        if created == pool or r["path"].endswith(f"/nodePools/{pool}"):
            out.append((r["method"], (r["body"] or {}).get("nodePool") or {}))
    return out


def test_a_stockout_of_the_first_rung_gives_the_pool_its_second(api, work):
    # The reserved H100 block is out in us-central1-a: the pool gets Spot VMs in us-central1-c, its second rung.
    api.fail_when.append(
        (
            lambda pool: pool["name"] == "h100l" and "reservationAffinity" in pool["config"],
            stockout_message("gpufleet-test", HOST, "h100l", "us-central1-a"),
        )
    )
    add_pool(
        work,
        {
            "name": "h100l",
            "class": "h100-8x-reserved",
            "node_count": 1,
            "max_node_count": 2,
            "zones": ["us-central1-a"],
            "capacity_ladder": [
                {"kind": "reservation"},
                {"kind": "spot", "zones": ["us-central1-c"]},
                {"kind": "on-demand", "machine_type": "a3-edgegpu-8g"},
            ],
        },
    )
    out = run(api, work, "provision.yml")
    calls = pool_calls(api, "h100l")
    assert [m for m, _b in calls] == ["POST", "DELETE", "POST"]
    first, second = calls[0][1], calls[2][1]
    assert first["config"]["reservationAffinity"]["values"] == ["projects/gpufleet-test/reservations/h100-block"]
    assert first["locations"] == ["us-central1-a"] and first["config"]["labels"][RUNG] == "reservation"
    assert second["config"]["spot"] is True and "reservationAffinity" not in second["config"]
    assert second["locations"] == ["us-central1-c"] and second["config"]["machineType"] == "a3-highgpu-8g"
    assert second["config"]["labels"][RUNG] == "spot"  # the rung the pool got, for placement to read
    recorded = api.pools[f"projects/gpufleet-test/locations/us-central1/clusters/{HOST}"]["h100l"]
    assert recorded["status"] == "RUNNING"
    # The report names the rung the pool got, what it costs and what failed before it.
    assert "h100l: got rung 2 of 3, spot, a3-highgpu-8g in us-central1-c - Spot: nodes can be preempted" in out
    assert "(after rung 1 of 3 reservation: ZONE_RESOURCE_POOL_EXHAUSTED)" in out
    # The pool stays on its rung: the next run changes nothing (and does not climb back to the reservation).
    out = run(api, work, "provision.yml")
    assert changed(out) == 0 and api.mutations() == []
    assert "h100l: got rung 2 of 3, spot" in out


def test_stockout_fails_fast_naming_zone_and_machine_type(api, work):
    api.stockout.add("a3-megagpu-8g")
    path = work / "inventory" / "group_vars" / "all" / "classes.yml"
    data = yaml.safe_load(path.read_text())
    data["gpufleet_inference_classes"]["h100-mega"] = {
        "provisioning": {
            "gke": {"machine_type": "a3-megagpu-8g", "accelerator": {"type": "nvidia-h100-mega-80gb", "count": 8}}
        },
        "devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "device_class_name": "gpu.nvidia.com", "count": 8}],
    }
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
    host = work / "inventory" / "host_vars" / f"{HOST}.yml"
    hv = yaml.safe_load(host.read_text())
    hv["gpufleet_node_pools"].append(
        {"name": "mega", "class": "h100-mega", "node_count": 1, "zones": ["us-central1-c"]}
    )
    host.write_text("---\n" + yaml.safe_dump(hv, sort_keys=False))
    out = run(api, work, "provision.yml", ok=False)
    assert re.search(
        r"node pool mega: Compute Engine capacity for a3-megagpu-8g in us-central1-c is not available", out
    )
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in out
    assert [r["method"] for r in api.mutations()] == ["POST"]  # one attempt, no retry loop


def test_a_quota_error_stops_the_ladder_naming_the_quota(api, work):
    quota = "Quota 'NVIDIA_L4_GPUS' exceeded. Limit: 0.0 in region us-central1."
    api.fail_when.append((lambda pool: pool["name"] == "l4q" and not pool["config"].get("spot"), quota))
    api.stockout.clear()  # the a3-megagpu-8g stockout of the test above is over
    add_pool(
        work,
        {
            "name": "l4q",
            "class": "l4-1x",
            "node_count": 2,
            "max_node_count": 2,
            "zones": ["us-central1-a"],
            "capacity_ladder": [{"kind": "on-demand"}, {"kind": "spot"}],
        },
    )
    out = run(api, work, "provision.yml", ok=False)
    assert (
        "node pool l4q: quota NVIDIA_L4_GPUS exceeded at rung 1 of 2 (on-demand, g2-standard-8 in us-central1-a)" in out
    )
    assert "the capacity ladder stops here" in out
    assert [m for m, _b in pool_calls(api, "l4q")] == ["POST"]  # the spot rung is never tried
    # The pool an earlier run left in ERROR by a stockout is deleted and created again now there is capacity.
    assert [m for m, _b in pool_calls(api, "mega")] == ["DELETE", "POST"]
    assert api.pools[f"projects/gpufleet-test/locations/us-central1/clusters/{HOST}"]["mega"]["status"] == "RUNNING"


def test_teardown_deletes_gpu_pools_then_the_cluster(api, work):
    run(api, work, "teardown.yml", "-e", "teardown_confirm=true", "-e", "teardown_clusters=true")
    calls = [(r["method"], r["path"].rsplit("/", 1)[-1]) for r in api.mutations()]
    assert calls == [
        ("DELETE", "l4"),
        ("DELETE", "h100"),
        ("DELETE", "h100r"),
        ("DELETE", "h100l"),
        ("DELETE", "mega"),
        ("DELETE", "l4q"),
        ("DELETE", "gke-local"),
    ]
    assert api.clusters == {}
    out = run(api, work, "teardown.yml", "-e", "teardown_confirm=true", "-e", "teardown_clusters=true")
    assert changed(out) == 0 and api.mutations() == []
