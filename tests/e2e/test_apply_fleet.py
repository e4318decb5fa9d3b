"""Apply mode end to end on a local fleet of three real control planes (scripts/localfleet, tests/e2e/inventory).

The tests run in file order and build on each other, as a user's day does: deploy → re-run changes nothing → scale
3→5→2 with stickiness → drain a cluster (replacements Ready before the old replicas go) → an API server stopped
before and during a run → caches → status reads the placement back → teardown leaves nothing owned.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, Fleet, wait_for

sys.path.insert(0, str(REPO / ".venv" / "collections"))
from ansible_collections.gpufleet.serving.plugins.module_utils.dra_cel import compile_selector

OWNER = "app.kubernetes.io/managed-by=gpufleet.serving"
CHAT_ENGINE = "main"


def recap(stdout: str) -> dict[str, dict[str, int]]:
    out = {}
    for host, counts in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", stdout, re.M):
        out[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", counts)}
    return out


def replicas(fleet: Fleet, deployment: str, skip: str = "") -> dict[tuple[str, int], str]:
    """(cluster, index) -> replica name, read from the per-replica Services on every cluster (but ``skip``)."""
    out = {}
    for host in fleet.names:
        if host == skip:
            continue
        for svc in fleet.list(host, "", "v1", "services", f"{OWNER},gpufleet.io/deployment={deployment}"):
            labels = svc["metadata"]["labels"]
            assert labels["gpufleet.io/cluster"] == host
            out[(host, int(labels["gpufleet.io/replica-index"]))] = labels["gpufleet.io/replica"]
    return out


def workloads(fleet: Fleet, host: str) -> list[dict[str, Any]]:
    return fleet.list(host, "apps", "v1", "deployments", OWNER) + fleet.list(
        host, "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", OWNER
    )


def assert_all_ready(fleet: Fleet) -> None:
    for host in fleet.names:
        for w in workloads(fleet, host):
            want = w["spec"]["replicas"]
            status = w.get("status", {})
            assert status.get("readyReplicas") == want, f"{host} {w['kind']} {w['metadata']['name']}: {status}"


def slice_devices(fleet: Fleet, host: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(driver, pool, device) -> the device as CEL sees it."""
    out = {}
    for rs in fleet.list(host, "resource.k8s.io", "v1", "resourceslices"):
        spec = rs["spec"]
        for dev in spec["devices"]:
            out[(spec["driver"], spec["pool"]["name"], dev["name"])] = {
                "name": dev["name"],
                "driver": spec["driver"],
                "attributes": dev.get("attributes", {}),
                "capacity": dev.get("capacity", {}),
            }
    return out


# --- the fleet itself ---------------------------------------------------------------------------------------------


def test_localfleet_publishes_the_inventory_pools(fleet: Fleet) -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "localfleet"), "status", str(fleet.state)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    nodes = {h: fleet.list(h, "", "v1", "nodes") for h in fleet.names}
    pools = {h: sorted(n["metadata"]["labels"].get("gpufleet.io/pool", "-") for n in nodes[h]) for h in fleet.names}
    assert pools["lf-alpha"] == ["-", "-", "h100x8", "h100x8", "l4", "l4", "l4"]
    assert pools["lf-beta"] == ["-", "-", "l4", "l4"]
    devices = slice_devices(fleet, "lf-alpha")
    gpus = [k for k in devices if k[0] == "gpu.nvidia.com" and k[1] == "h100x8-0"]
    nics = [k for k in devices if k[0] == "rdma.example.com" and k[1] == "h100x8-0"]
    assert sorted(k[2] for k in gpus) == [f"gpu-{i}" for i in range(8)]
    assert len(nics) == 2
    assert devices[("gpu.nvidia.com", "l4-0", "gpu-0")]["capacity"] == {"memory": {"value": "23034Mi"}}
    classes = {d["metadata"]["name"] for d in fleet.list("lf-alpha", "resource.k8s.io", "v1", "deviceclasses")}
    assert classes == {"gpu.nvidia.com", "rdma.example.com"}
    for n in nodes["lf-alpha"]:
        if "gpufleet.io/pool" in n["metadata"]["labels"]:
            assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in n["spec"]["taints"]


def test_cluster_reads_discover_per_group_version_and_read_metadata_only(fleet: Fleet) -> None:
    """fleet_read / fleet_apply's client against a real API server: a kind is found (or known not served) from its
    group version's resource list, and a metadata-only list is the metadata of the full one and nothing else."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_k8s import ClusterAPI

    api = ClusterAPI("lf-alpha", {"kubeconfig": str(fleet.state / "kubeconfigs" / "lf-alpha")})
    assert api.resource("resource.k8s.io/v1", "ResourceSlice").namespaced is False
    assert api.resource("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet").namespaced is True
    assert api.resource("serving.kserve.io/v1alpha2", "LLMInferenceService") is None  # its CRD is not installed
    assert api.resource("v1", "NoSuchKind") is None
    full = api.list("v1", "Node", ["gpufleet.io/pool=l4"])
    meta = api.list("v1", "Node", ["gpufleet.io/pool=l4"], metadata_only=True)
    assert len(full) == 3 and all("spec" in n and "status" in n for n in full)
    assert all(set(n) == {"apiVersion", "kind", "metadata"} and n["kind"] == "Node" for n in meta)

    def ident(n: dict[str, Any]) -> tuple[str, str, dict[str, str]]:  # kwok heartbeats move resourceVersion
        return n["metadata"]["name"], n["metadata"]["uid"], n["metadata"]["labels"]

    assert sorted(map(ident, meta), key=str) == sorted(map(ident, full), key=str)


# --- deploy ---------------------------------------------------------------------------------------------------------


def test_deploy_runs_every_replica_on_its_pool_with_allocated_claims(fleet: Fleet) -> None:
    fleet.playbook("deploy.yml")
    assert_all_ready(fleet)
    placed = {d: replicas(fleet, d) for d in ("chat", "tp8", "gang")}
    assert sorted(c for c, _i in placed["chat"]) == ["lf-alpha", "lf-beta", "lf-gamma"]  # spread
    assert len(placed["tp8"]) == 1 and len(placed["gang"]) == 1
    checked_claims = 0
    for host in fleet.names:
        nodes = {n["metadata"]["name"]: n for n in fleet.list(host, "", "v1", "nodes")}
        devices = slice_devices(fleet, host)
        pods = fleet.list(host, "", "v1", "pods", OWNER)
        claims = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): c
            for c in fleet.list(host, "resource.k8s.io", "v1", "resourceclaims")
        }
        for pod in pods:
            name = f"{host}/{pod['metadata']['name']}"
            assert pod["status"]["phase"] == "Running", name
            assert any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"]), name
            pool = pod["metadata"]["labels"]["gpufleet.io/pool"]
            assert nodes[pod["spec"]["nodeName"]]["metadata"]["labels"]["gpufleet.io/pool"] == pool, name
            for status in pod["status"].get("resourceClaimStatuses", []):
                claim = claims[(pod["metadata"]["namespace"], status["resourceClaimName"])]
                results = claim["status"]["allocation"]["devices"]["results"]
                requests = {r["name"]: r["exactly"] for r in claim["spec"]["devices"]["requests"]}
                for request, spec in requests.items():
                    got = [r for r in results if r["request"] == request]
                    assert len(got) == spec.get("count", 1), f"{name} {request}: {got}"
                    for r in got:
                        assert r["pool"] == pod["spec"]["nodeName"], f"{name}: device from another node"
                        device = devices[(r["driver"], r["pool"], r["device"])]
                        for sel in spec.get("selectors", []):
                            assert compile_selector(sel["cel"]["expression"]).matches(device), (name, sel, device)
                checked_claims += 1
    assert checked_claims == 3 + 1 + 2  # chat x3, tp8, gang leader + worker
    for ns in ("chat-team", "big-models"):
        assert fleet.core(fleet.names[0]).read_namespace(ns).metadata.name == ns


def test_leaderworkerset_gang_lands_on_one_pool_with_leader_address(fleet: Fleet) -> None:
    gang = replicas(fleet, "gang")
    assert len(gang) == 1
    host = next(iter(gang))[0]
    pods = fleet.list(host, "", "v1", "pods", f"{OWNER},gpufleet.io/deployment=gang")
    assert len(pods) == 2
    assert {p["metadata"]["labels"]["gpufleet.io/pool"] for p in pods} == {"h100x8"}
    assert len({p["spec"]["nodeName"] for p in pods}) == 2
    for pod in pods:
        env = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
        # LWS's webhook puts LWS_LEADER_ADDRESS first, so $(LWS_LEADER_ADDRESS) in our variables is expanded.
        assert env.index("LWS_LEADER_ADDRESS") < env.index("GPUFLEET_LEADER_ADDRESS"), env
        leader = next(e for e in pod["spec"]["containers"][0]["env"] if e["name"] == "LWS_LEADER_ADDRESS")
        assert leader["value"].startswith("gang-"), leader


def owned_versions(fleet: Fleet) -> dict[str, dict[str, str]]:
    """Every owned serving object's resourceVersion (any write, even a no-op apply that LWS's webhook turns into a
    generation bump, changes it) and every owned pod's uid (nothing was recreated)."""
    kinds = (
        ("", "v1", "services"),
        ("apps", "v1", "deployments"),
        ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
        ("resource.k8s.io", "v1", "resourceclaimtemplates"),
    )
    return {
        h: {
            **{
                f"{plural}/{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
                for group, version, plural in kinds
                for o in fleet.list(h, group, version, plural, OWNER)
            },
            **{
                f"pod-uid/{p['metadata']['name']}": p["metadata"]["uid"] for p in fleet.list(h, "", "v1", "pods", OWNER)
            },
        }
        for h in fleet.names
    }


def test_second_run_changes_nothing(fleet: Fleet) -> None:
    before = owned_versions(fleet)
    out = fleet.playbook("deploy.yml").stdout
    counts = recap(out)
    # Every task of the role runs once for the fleet (deploy.yml applies it with run_once), on the first cluster.
    assert set(counts) == {fleet.names[0]}, counts
    assert counts[fleet.names[0]]["changed"] == 0, counts
    assert owned_versions(fleet) == before  # not a single write to an owned object


def test_a_value_changed_by_hand_is_put_back(fleet: Fleet) -> None:
    host, name = next((h, r) for (h, _i), r in replicas(fleet, "chat").items())
    (dep,) = [d for d in fleet.list(host, "apps", "v1", "deployments", OWNER) if d["metadata"]["name"].startswith(name)]
    image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": dep["spec"]["template"]["spec"]["containers"][0]["name"],
                            "image": "example.invalid/hand-edited:1",
                        }
                    ]
                }
            }
        }
    }
    fleet.apps(host).patch_namespaced_deployment(dep["metadata"]["name"], dep["metadata"]["namespace"], patch)
    out = fleet.playbook("deploy.yml").stdout
    assert recap(out)[fleet.names[0]]["changed"] >= 1
    again = fleet.apps(host).read_namespaced_deployment(dep["metadata"]["name"], dep["metadata"]["namespace"])
    assert again.spec.template.spec.containers[0].image == image
    assert_all_ready(fleet)


# --- quantities, other field managers, unreadable placement records (issue 23) -------------------------------------

# A deployment whose pod template sets quantities as users write them (numbers, fractions, other units) and an env var
# of ours. The API server stores them normalised ("2", "500m", "1Gi"); a run must still find its objects current.
QUANT = {
    "name": "quant",
    "namespace": "chat-team",
    "replicas": 1,
    "clusters": "lf-beta",
    "engines": [
        {
            "name": "main",
            "members": [
                {
                    "role": "Standalone",
                    "node_selector": {
                        "devices": [
                            {
                                "name": "gpu",
                                "selectors": [
                                    {"cel": 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("16Gi")) >= 0'}
                                ],
                            }
                        ]
                    },
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "engine",
                                    "image": "busybox",
                                    "env": [{"name": "OURS", "value": "1"}],
                                    "resources": {
                                        "requests": {"cpu": "0.5", "memory": "1Gi"},
                                        "limits": {"cpu": 2, "memory": "1024Mi"},
                                    },
                                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                                }
                            ],
                            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1024Mi"}}],
                        }
                    },
                }
            ],
        }
    ],
}
QUANT_HOST = "lf-beta"


def quant_workload(fleet: Fleet) -> dict[str, Any]:
    (dep,) = fleet.list(QUANT_HOST, "apps", "v1", "deployments", f"{OWNER},gpufleet.io/deployment=quant")
    return dep


def env_of(workload: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in workload["spec"]["template"]["spec"]["containers"][0]["env"]}


def rolled_out(fleet: Fleet) -> bool:
    dep = quant_workload(fleet)
    want, status = dep["spec"]["replicas"], dep.get("status", {})
    return status.get("observedGeneration") == dep["metadata"]["generation"] and all(
        status.get(k) == want for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    )


def set_quant_env(fleet: Fleet, value: str) -> None:
    path = fleet.inventory / "group_vars" / "all" / "deployments.yml"
    data = yaml.safe_load(path.read_text())
    dep = next(d for d in data["gpufleet_model_deployments"] if d["name"] == "quant")
    dep["engines"][0]["members"][0]["template"]["spec"]["containers"][0]["env"] = [{"name": "OURS", "value": value}]
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))


@pytest.fixture(scope="class")
def quant(fleet: Fleet) -> Any:
    """The fleet with QUANT deployed on lf-beta; afterwards QUANT leaves the inventory and is pruned."""
    path = fleet.inventory / "group_vars" / "all" / "deployments.yml"
    original = path.read_text()
    data = yaml.safe_load(original)
    data["gpufleet_model_deployments"].append(QUANT)
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
    try:
        fleet.playbook("deploy.yml")
        wait_for("quant to roll out", lambda: rolled_out(fleet))
        yield quant_workload(fleet)
    finally:
        path.write_text(original)
        fleet.playbook("deploy.yml")
        wait_for(
            "quant's pods to go",
            lambda: not fleet.list(QUANT_HOST, "", "v1", "pods", f"{OWNER},gpufleet.io/deployment=quant"),
            timeout=90,
        )


@pytest.mark.usefixtures("quant")
class TestIdempotenceOnRealClusters:
    def test_quantities_as_users_write_them_change_nothing_on_the_second_run(self, fleet: Fleet) -> None:
        dep = quant_workload(fleet)
        resources = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
        # what the API server made of cpu "0.5" / 2 and memory "1024Mi" (so the rendered values differ from these)
        assert resources["requests"] == {"cpu": "500m", "memory": "1Gi"}, resources
        assert resources["limits"] == {"cpu": "2", "memory": "1Gi"}, resources
        volume = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "scratch")
        assert volume["emptyDir"]["sizeLimit"] == "1Gi"
        before = owned_versions(fleet)
        out = fleet.playbook("deploy.yml").stdout
        assert recap(out)[fleet.names[0]]["changed"] == 0, recap(out)
        assert owned_versions(fleet) == before  # not a single write to an owned object

    def test_an_env_var_added_by_another_manager_is_left_alone(self, fleet: Fleet) -> None:
        name, namespace = quant_workload(fleet)["metadata"]["name"], quant_workload(fleet)["metadata"]["namespace"]
        fleet.kubectl(QUANT_HOST, "-n", namespace, "set", "env", f"deployment/{name}", "EXTRA=1")
        wait_for("kubectl's rollout", lambda: rolled_out(fleet))
        before = owned_versions(fleet)
        out = fleet.playbook("deploy.yml").stdout
        assert recap(out)[fleet.names[0]]["changed"] == 0, recap(out)
        assert owned_versions(fleet) == before  # the run wrote nothing
        assert env_of(quant_workload(fleet)) == {"OURS": "1", "EXTRA": "1"}

    def test_our_env_value_changed_by_another_manager_is_applied_again(self, fleet: Fleet) -> None:
        name, namespace = quant_workload(fleet)["metadata"]["name"], quant_workload(fleet)["metadata"]["namespace"]
        fleet.kubectl(QUANT_HOST, "-n", namespace, "set", "env", f"deployment/{name}", "OURS=2")
        wait_for("kubectl's rollout", lambda: rolled_out(fleet))
        out = fleet.playbook("deploy.yml", "-v").stdout
        assert recap(out)[fleet.names[0]]["changed"] >= 1, recap(out)
        assert f"Deployment/{namespace}/{name}" in out  # applied again (fleet_apply's result names it)
        assert env_of(quant_workload(fleet))["OURS"] == "1"  # ours again; EXTRA (kubectl's) is untouched
        assert env_of(quant_workload(fleet)).get("EXTRA") == "1"
        wait_for("the rollout", lambda: rolled_out(fleet))
        again = fleet.playbook("deploy.yml").stdout
        assert recap(again)[fleet.names[0]]["changed"] == 0, recap(again)

    def test_an_unreadable_placement_record_skips_that_object_only(self, fleet: Fleet) -> None:
        kinds = (
            ("", "v1", "services"),
            ("apps", "v1", "deployments"),
            ("resource.k8s.io", "v1", "resourceclaimtemplates"),
        )

        def chat_objects() -> dict[str, str]:
            return {
                f"{h}/{plural}/{o['metadata']['name']}": o["metadata"]["uid"]
                for h in fleet.names
                for group, version, plural in kinds
                for o in fleet.list(h, group, version, plural, f"{OWNER},gpufleet.io/deployment=chat")
            }

        before = chat_objects()
        host = sorted({c for c, _i in replicas(fleet, "chat")})[-1]
        (svc, *_) = fleet.list(host, "", "v1", "services", f"{OWNER},gpufleet.io/deployment=chat")
        name, namespace = svc["metadata"]["name"], svc["metadata"]["namespace"]
        original = svc["metadata"]["annotations"]["gpufleet.io/placement"]
        fleet.kubectl(
            host, "-n", namespace, "annotate", "--overwrite", f"service/{name}", "gpufleet.io/placement={oops"
        )
        set_quant_env(fleet, "3")  # another deployment changes in the same run
        try:
            proc = fleet.playbook("deploy.yml", check=False)
            assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
            line = next(
                (
                    ln
                    for ln in proc.stdout.splitlines()
                    if f"Service {host}/{namespace}/{name} carries an unreadable" in ln
                ),
                None,
            )
            assert line is not None, proc.stdout[-4000:]
            assert "gpufleet.io/placement annotation: Expecting property name" in line
            assert "nothing of deployment chat is pruned this run" in line
            # the other deployments went on: quant's new value was applied
            wait_for("quant's new env", lambda: env_of(quant_workload(fleet))["OURS"] == "3")
            after = chat_objects()
            assert set(before) <= set(after), sorted(set(before) - set(after))  # nothing of chat was deleted
            assert all(after[k] == uid for k, uid in before.items())  # nor recreated
        finally:
            current = fleet.core(host).read_namespaced_service(name, namespace).metadata.annotations
            if current.get("gpufleet.io/placement") == "{oops":
                fleet.kubectl(
                    host,
                    "-n",
                    namespace,
                    "annotate",
                    "--overwrite",
                    f"service/{name}",
                    f"gpufleet.io/placement={original}",
                )
        wait_for("quant to roll out", lambda: rolled_out(fleet))
        fleet.playbook("deploy.yml")  # converges (the placement record is readable again)
        assert len(replicas(fleet, "chat")) == 3
        assert_all_ready(fleet)


# --- observed capacity and drift (design.md §11) -------------------------------------------------------------------

PROBE = {
    "name": "probe",
    "namespace": "chat-team",
    "replicas": 30,  # more than the fleet has: the number scheduled is the number of nodes placement counts free
    "engines": [
        {
            "name": "main",
            "members": [
                {
                    "role": "Standalone",
                    "node_selector": {
                        "devices": [
                            {
                                "name": "gpu",
                                "selectors": [
                                    {"cel": 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("1Gi")) >= 0'}
                                ],
                            }
                        ]
                    },
                    "template": {"spec": {"containers": [{"name": "engine", "image": "busybox"}]}},
                }
            ],
        }
    ],
}


def probe_status(fleet: Fleet, capacity: str) -> tuple[int, list[str], str]:
    """status.yml (reads and places, applies nothing) with the probe deployment: (probe replicas scheduled, drift
    lines, output)."""
    out = fleet.playbook("status.yml", "-e", f"gpufleet_capacity={capacity}").stdout
    row = re.search(r'"probe\s+30\s+(\d+)\s', out)
    assert row, out[-4000:]
    # The report's drift section: its header, the lines, then the summary line that ends the report.
    block = re.search(r"Show the placement\].*?\n(ok: .*?)\n\n", out, re.S)
    assert block, out[-4000:]
    lines = re.findall(r'^\s+"(.*)",?$', block.group(1), re.M)
    header = "Drift between the declared fleet and what the clusters have:"
    drift = lines[lines.index(header) + 1 : -1] if header in lines else []
    return int(row.group(1)), drift, out


def free_gpu_nodes(fleet: Fleet, host: str) -> list[str]:
    """GPU nodes of ``host`` that run none of our pods, sorted."""
    busy = {p["spec"].get("nodeName") for p in fleet.list(host, "", "v1", "pods", OWNER)}
    return sorted(
        n["metadata"]["name"]
        for n in fleet.list(host, "", "v1", "nodes")
        if "gpufleet.io/pool" in n["metadata"]["labels"] and n["metadata"]["name"] not in busy
    )


def test_observed_capacity_places_around_faults_and_reports_drift(fleet: Fleet) -> None:
    import yaml

    path = fleet.inventory / "group_vars" / "all" / "deployments.yml"
    original = path.read_text()
    data = yaml.safe_load(original)
    data["gpufleet_model_deployments"].append(PROBE)
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
    alpha, beta, gamma = fleet.names
    custom = {h: fleet.custom(h) for h in fleet.names}
    try:
        declared, drift, _out = probe_status(fleet, "declared")
        observed, _drift, _out = probe_status(fleet, "observed")
        assert drift == [] and observed == declared, drift

        # 1. cordon a free node of lf-beta
        cordoned = free_gpu_nodes(fleet, beta)[0]
        fleet.core(beta).patch_node(cordoned, {"spec": {"unschedulable": True}})
        # 2. delete the ResourceSlice of a free node of lf-alpha
        sliced = next(n for n in free_gpu_nodes(fleet, alpha) if n.startswith("l4"))
        (gone,) = [
            rs
            for rs in fleet.list(alpha, "resource.k8s.io", "v1", "resourceslices")
            if rs["spec"]["nodeName"] == sliced
        ]
        custom[alpha].delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", gone["metadata"]["name"])
        # 3. taint one device of a free node of lf-gamma, as a driver does for an unhealthy GPU
        tainted = next(n for n in free_gpu_nodes(fleet, gamma) if n.startswith("a10g"))
        (rs,) = [
            r for r in fleet.list(gamma, "resource.k8s.io", "v1", "resourceslices") if r["spec"]["nodeName"] == tainted
        ]
        devices = rs["spec"]["devices"]
        devices[0]["taints"] = [{"key": "gpu.nvidia.com/unhealthy", "value": "xid-79", "effect": "NoSchedule"}]
        custom[gamma].patch_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", rs["metadata"]["name"], {"spec": {"devices": devices}}
        )
        # 4. another team's pod whose claim the real scheduler allocates 5 GPUs of a free H100 node
        host, held = next((h, n) for h in (alpha, gamma) for n in free_gpu_nodes(fleet, h) if n.startswith("h100"))
        core = fleet.core(host)
        core.create_namespace({"metadata": {"name": "other-team"}})
        custom[host].create_namespaced_custom_object(
            "resource.k8s.io",
            "v1",
            "other-team",
            "resourceclaims",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "batch-gpus"},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 5}}]
                    }
                },
            },
        )
        core.create_namespaced_pod(
            "other-team",
            {
                "metadata": {"name": "batch"},
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [held]}]}
                                ]
                            }
                        }
                    },
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "resourceClaims": [{"name": "gpus", "resourceClaimName": "batch-gpus"}],
                    "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpus"}]}}],
                },
            },
        )
        wait_for(
            "the other team's claim is allocated",
            lambda: (
                custom[host]
                .get_namespaced_custom_object("resource.k8s.io", "v1", "other-team", "resourceclaims", "batch-gpus")
                .get("status", {})
                .get("allocation")
            ),
        )

        still, _drift, _out = probe_status(fleet, "declared")
        assert still == declared  # declared capacity counts every faulty node as free
        observed, drift, out = probe_status(fleet, "observed")
        assert observed == declared - 4, out[-5000:]  # one node lost to each fault
        for needle in (
            f"{beta}/l4: 1 of 2 nodes cordoned",
            f"{alpha}/l4: node {sliced}: 0 of 1 gpu devices (gpu.nvidia.com) published",
            f"{gamma}/a10g: node {tainted}: device gpu-0 tainted gpu.nvidia.com/unhealthy=xid-79:NoSchedule",
            f"node {held}: 5 device(s)",
            "held by claim other-team/batch-gpus of another workload",
        ):
            assert any(needle in line for line in drift), (needle, drift)
        # the explain lines name the observed cause next to the pool that lacks capacity
        assert "observed: 1 of 2 nodes cordoned" in out

        # remove every fault: the drift report is empty again and observed capacity equals declared
        fleet.core(beta).patch_node(cordoned, {"spec": {"unschedulable": False}})
        gone["metadata"] = {"name": gone["metadata"]["name"], "labels": gone["metadata"].get("labels", {})}
        custom[alpha].create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", gone)
        del devices[0]["taints"]
        custom[gamma].patch_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", rs["metadata"]["name"], {"spec": {"devices": devices}}
        )
        core.delete_namespace("other-team")
        wait_for(
            "the other team's claim is gone",
            lambda: (
                not [
                    c
                    for c in fleet.list(host, "resource.k8s.io", "v1", "resourceclaims", "")
                    if c["metadata"]["namespace"] == "other-team"
                ]
            ),
            timeout=90,
        )
        observed, drift, out = probe_status(fleet, "observed")
        assert drift == [] and observed == declared, (drift, out[-3000:])
    finally:
        path.write_text(original)


def test_scale_up_then_down_is_sticky(fleet: Fleet) -> None:
    first = replicas(fleet, "chat")
    fleet.set_deployment("chat", replicas=5)
    fleet.playbook("deploy.yml")
    up = replicas(fleet, "chat")
    assert len(up) == 5
    assert {k: up[k] for k in first} == first  # nobody moved or was renamed
    assert_all_ready(fleet)
    fleet.set_deployment("chat", replicas=2)
    fleet.playbook("deploy.yml")
    down = replicas(fleet, "chat")
    assert len(down) == 2
    assert {k: up[k] for k in down} == down  # survivors keep their identity
    # scale down drops from the most-loaded clusters first, highest index first
    assert max(key[1] for key in down) < max(key[1] for key in up)
    for host in fleet.names:
        names = {w["metadata"]["name"] for w in workloads(fleet, host)}
        for key, replica in up.items():
            if key not in down and key[0] == host:
                assert not any(n.startswith(replica) for n in names), f"{replica} still on {key[0]}"
    assert_all_ready(fleet)


def test_drain_makes_replacements_ready_before_deleting(fleet: Fleet) -> None:
    placed = replicas(fleet, "chat")
    drained = sorted(c for c, _i in placed)[0]
    events: list[tuple[float, str, str, str, int, int]] = []
    stop = threading.Event()

    def watch(host: str) -> None:
        from kubernetes import client, watch

        api = client.AppsV1Api(fleet.api(host))
        w = watch.Watch()
        with contextlib.suppress(Exception):  # the watch ends with the test (or when a later test stops a server)
            for ev in w.stream(api.list_deployment_for_all_namespaces, label_selector=OWNER, timeout_seconds=90):
                d = ev["object"]
                events.append(
                    (
                        time.monotonic(),
                        host,
                        ev["type"],
                        d.metadata.name,
                        d.spec.replicas or 0,
                        d.status.ready_replicas or 0,
                    )
                )
                if stop.is_set():
                    w.stop()

    threads = [threading.Thread(target=watch, args=(h,), daemon=True) for h in fleet.names]
    for t in threads:
        t.start()
    time.sleep(1)
    fleet.playbook("drain.yml", "-e", f"cluster={drained}")
    stop.set()

    after = replicas(fleet, "chat")
    assert len(after) == 2 and drained not in {c for c, _i in after}
    old = {name for key, name in placed.items() if key[0] == drained}
    new = {name for key, name in after.items() if key not in placed}
    assert old and new
    deleted_at = [ev[0] for ev in events if ev[2] == "DELETED" and any(ev[3].startswith(o) for o in old)]
    ready_at = [ev[0] for ev in events if any(ev[3].startswith(n) for n in new) and ev[4] and ev[5] == ev[4]]
    assert deleted_at, events
    assert ready_at, events
    assert min(ready_at) < min(deleted_at), "an old replica was deleted before its replacement was Ready"
    # undrain: placement stays where it is (healthy replicas are never moved back)
    fleet.playbook("drain.yml", "-e", f"cluster={drained}", "-e", "drain_state=absent")
    assert replicas(fleet, "chat") == after


def test_drain_with_limit_loses_no_replica_anywhere(fleet: Fleet) -> None:
    """Issue 25: `drain.yml -e cluster=X --limit X` read only X, treated every other cluster as empty, moved X's
    replicas "to" clusters outside the play and deleted them from X: 0 replicas anywhere, rc 0."""
    names = ("chat", "tp8", "gang")
    before = {d: replicas(fleet, d) for d in names}
    target = sorted(c for c, _i in before["chat"])[0]
    state = fleet.work / "placement-state.json"
    recorded = json.loads(state.read_text())
    proc = fleet.playbook("drain.yml", "-e", f"cluster={target}", "-e", "drain_persist=false", "--limit", target)
    assert f"This play covers 1 of {len(fleet.names)} clusters" in proc.stdout
    assert "nothing was deleted on any cluster" in proc.stdout
    assert f"stays on drained cluster {target}" in proc.stdout  # nowhere inside the play to move it
    assert {d: replicas(fleet, d) for d in names} == before
    assert_all_ready(fleet)
    # The clusters outside the play keep exactly what was recorded for them.
    outside = [r for r in json.loads(state.read_text()) if r["cluster"] != target]
    assert sorted(outside, key=json.dumps) == sorted([r for r in recorded if r["cluster"] != target], key=json.dumps)


def test_unreachable_cluster_keeps_its_replicas_and_fails_the_run(fleet: Fleet) -> None:
    placed = {d: replicas(fleet, d) for d in ("chat", "tp8", "gang")}
    victim = next(c for c, _i in placed["gang"])
    fleet.localfleet("stop", victim)
    try:
        fleet.set_deployment("chat", replicas=3)
        proc = fleet.playbook("deploy.yml", check=False)
        assert proc.returncode != 0
        assert re.search(rf"Clusters not reconciled this run.*{victim}", proc.stdout), proc.stdout[-3000:]
        # the failure names each cluster on a line of its own with its reason (not "key: value")
        assert re.search(rf"^{victim}: \S", proc.stderr + proc.stdout, re.M), (proc.stderr + proc.stdout)[-3000:]
        assert "key: value" not in proc.stderr + proc.stdout
        # the others finished: chat reached 3 replicas without the victim taking a new one
        chat = replicas(fleet, "chat", skip=victim)
        kept = {k: v for k, v in placed["chat"].items() if k[0] == victim}
        assert len(chat) + len(kept) == 3, (chat, kept)  # the others took the new replica; the victim's were kept
        state = (fleet.work / "placement-state.json").read_text()
        for name in placed["gang"].values():
            assert name in state  # retained, not re-placed elsewhere
    finally:
        fleet.localfleet("start", victim)
    fleet.playbook("deploy.yml")
    assert replicas(fleet, "gang") == placed["gang"]
    assert len(replicas(fleet, "chat")) == 3
    assert_all_ready(fleet)


def test_api_server_lost_mid_run_is_reported(fleet: Fleet) -> None:
    placed = replicas(fleet, "chat")
    victim = sorted({c for c, _i in placed})[-1]
    fleet.set_deployment("chat", replicas=4)
    proc = subprocess.Popen(
        fleet.argv("deploy.yml"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**fleet.env(), "PYTHONUNBUFFERED": "1"},  # lines as they happen, so the server stops mid-run
        cwd=REPO,
    )
    lines = []
    stopped = False
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if not stopped and "Render every cluster's serving workloads" in line:
            fleet.localfleet("stop", victim)
            stopped = True
    proc.wait()
    out = "".join(lines)
    (fleet.work / "last-run.log").write_text(out)
    try:
        assert stopped, out[-3000:]
        assert proc.returncode != 0, out[-3000:]
        assert re.search(rf"Clusters not reconciled this run.*{victim}", out), out[-3000:]
        # the victim's reconcile failed; the others finished
        named = re.search(
            r"Clusters not reconciled this run \(their replicas were kept where they are\): ([^.]*)\.", out
        )
        assert named and named.group(1).split(", ") == [victim], (victim, out[-4000:])
        reason = re.search(rf"^{victim}: (.+)$", out, re.M)  # its reason on the next line, readable
        assert reason and "key: value" not in out, out[-4000:]
    finally:
        fleet.localfleet("start", victim)
    fleet.playbook("deploy.yml")
    assert len(replicas(fleet, "chat")) == 4
    assert_all_ready(fleet)


# --- caches, status, teardown ---------------------------------------------------------------------------------------


def test_caches_apply_and_hydration_job_completes(fleet: Fleet) -> None:
    proc = fleet.playbook("caches.yml")
    assert re.search(r"tiny-weights.*lf-alpha.*Ready", proc.stdout), proc.stdout[-3000:]
    pvcs = fleet.list("lf-alpha", "", "v1", "persistentvolumeclaims")
    assert [p["status"]["phase"] for p in pvcs if p["metadata"]["namespace"] == "chat-team"] == ["Bound"]
    jobs = fleet.list("lf-alpha", "batch", "v1", "jobs")
    assert any(
        c["type"] == "Complete" and c["status"] == "True" for j in jobs for c in j["status"].get("conditions", [])
    )
    again = fleet.playbook("caches.yml")
    assert all(c["changed"] == 0 for c in recap(again.stdout).values()), recap(again.stdout)


def test_status_reads_the_placement_back_from_the_clusters(fleet: Fleet) -> None:
    (fleet.work / "placement-state.json").unlink()  # status must not need it
    out = fleet.playbook("status.yml").stdout
    assert "The fleet is placed as its deployments ask." in out, out[-3000:]
    line = next(ln for ln in out.splitlines() if re.match(r'\s*"chat\s', ln))
    assert "4" in line


def test_teardown_leaves_no_owned_object(fleet: Fleet) -> None:
    fleet.playbook("teardown.yml", "-e", "teardown_confirm=true")
    left: dict[str, list[str]] = {}
    for host in fleet.names:

        def clean(h: str = host) -> bool:
            owned = []
            for group, version, plural in (
                ("", "v1", "services"),
                ("", "v1", "pods"),
                ("", "v1", "persistentvolumeclaims"),
                ("", "v1", "configmaps"),
                ("apps", "v1", "deployments"),
                ("batch", "v1", "jobs"),
                ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
                ("resource.k8s.io", "v1", "resourceclaimtemplates"),
            ):
                owned += fleet.list(h, group, version, plural, OWNER)
            claims = [
                c
                for c in fleet.list(h, "resource.k8s.io", "v1", "resourceclaims")
                if c["metadata"]["namespace"] in ("chat-team", "big-models")
            ]
            left[h] = [f"{o.get('kind', 'ResourceClaim')}/{o['metadata']['name']}" for o in owned + claims]
            return not owned and not claims

        try:
            wait_for(f"{host} to hold no owned object", clean, timeout=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; still there: {left.get(host)}") from None


@pytest.fixture(autouse=True)
def _log_on_failure(request: pytest.FixtureRequest, fleet: Fleet) -> Any:
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        log = Path(fleet.work / "last-run.log")
        if log.exists():
            print(log.read_text()[-8000:])
