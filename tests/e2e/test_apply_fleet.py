"""Apply mode end to end on a local fleet of three real control planes (scripts/localfleet, tests/e2e/inventory).

The tests run in file order and build on each other, as a user's day does: deploy → re-run changes nothing → a
rolling update one replica at a time (and one that stops at a replica that never becomes Ready) → scale 3→5→2 with
stickiness → drain a cluster (replacements Ready before the old replicas go) → an API server stopped
before and during a run → caches → status reads the placement back → teardown leaves nothing owned.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
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
#: The test inventory's gpufleet_fleet_name: its objects carry gpufleet.io/fleet=e2e (another fleet may share a cluster).
FLEET = "e2e"
MINE = f"{OWNER},gpufleet.io/fleet={FLEET}"
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
        for svc in fleet.list(host, "", "v1", "services", f"{MINE},gpufleet.io/deployment={deployment}"):
            labels = svc["metadata"]["labels"]
            if "gpufleet.io/replica" not in labels:
                continue  # the model's Service on this cluster (docs/routing.md), not a replica's
            assert labels["gpufleet.io/cluster"] == host
            out[(host, int(labels["gpufleet.io/replica-index"]))] = labels["gpufleet.io/replica"]
    return out


def workloads(fleet: Fleet, host: str) -> list[dict[str, Any]]:
    return fleet.list(host, "apps", "v1", "deployments", MINE) + fleet.list(
        host, "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", MINE
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
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import ClusterAPI

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


def assert_model_endpoints(fleet: Fleet, deployment: str) -> None:
    """Issue 27: on every cluster, the model's Service (named after the deployment) exists exactly where replicas of
    it are placed, and its endpoints are exactly the Ready serving pods of that cluster's replicas (the EndpointSlice
    controller's view, so waited for)."""
    placed = replicas(fleet, deployment)
    for host in fleet.names:
        services = [
            s
            for s in fleet.list(host, "", "v1", "services", f"{MINE},gpufleet.io/deployment={deployment}")
            if "gpufleet.io/replica" not in s["metadata"]["labels"]
        ]
        mine = {name for (h, _i), name in placed.items() if h == host}
        if not mine:
            assert services == [], f"{host}: a model Service of {deployment} where it has no replica"
            continue
        assert [s["metadata"]["name"] for s in services] == [deployment], host
        namespace = services[0]["metadata"]["namespace"]
        serving = [
            p
            for p in fleet.list(host, "", "v1", "pods", f"{OWNER},gpufleet.io/deployment={deployment}")
            if p["metadata"]["labels"].get("gpufleet.io/endpoint") == "true"
            and not p["metadata"].get("deletionTimestamp")
        ]
        assert {p["metadata"]["labels"]["gpufleet.io/replica"] for p in serving} == mine, host
        want = {
            p["status"]["podIP"]
            for p in serving
            if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        }
        assert want and all(p["status"].get("podIP") for p in serving), (host, serving)

        every = {p["status"]["podIP"] for p in serving}

        def endpoints(h: str = host, ns: str = namespace) -> tuple[set[str], set[str]]:
            """(Ready endpoint addresses, every endpoint address) of the model Service."""
            found = [
                ep
                for eps in fleet.list(
                    h, "discovery.k8s.io", "v1", "endpointslices", f"kubernetes.io/service-name={deployment}"
                )
                if eps["metadata"]["namespace"] == ns
                for ep in eps.get("endpoints") or []
            ]
            ready = {a for ep in found if (ep.get("conditions") or {}).get("ready") for a in ep["addresses"]}
            return ready, {a for ep in found for a in ep["addresses"]}

        wait_for(
            f"{host}: {deployment}'s endpoints == its Ready serving pods",
            lambda want=want, every=every: endpoints()[0] == want and endpoints()[1] <= every,
        )


def test_model_endpoint_selects_exactly_the_ready_pods_of_the_clusters_replicas(fleet: Fleet) -> None:
    """One Service per model and cluster (docs/routing.md): chat on every cluster (one replica each), tp8 and the gang
    (leader only: workers serve no HTTP) on the one cluster that holds them, none elsewhere."""
    for deployment in ("chat", "tp8", "gang"):
        assert_model_endpoints(fleet, deployment)


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


def test_a_selector_typo_on_a_running_deployment_changes_nothing(fleet: Fleet) -> None:
    """Issue 25: a selector typo that still compiles dropped every replica of a running model (rc 0). Now a domain
    typo is a validation error and a selector no pool satisfies is a blocked capacity loss: either way nothing is
    applied or pruned."""
    import yaml

    path = fleet.inventory / "group_vars" / "all" / "deployments.yml"
    original = path.read_text()
    before = owned_versions(fleet)
    chat = replicas(fleet, "chat")
    data = yaml.safe_load(original)
    (dep,) = [d for d in data["gpufleet_model_deployments"] if d["name"] == "chat"]
    request = dep["engines"][0]["members"][0]["node_selector"]["devices"][0]
    try:
        for cel, says in (
            (
                'device.capacity["nvidia.com"].memory.compareTo(quantity("1Gi")) >= 0',
                "capacity domain 'nvidia.com' is published by no inference class of the fleet",
            ),
            (
                'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("1Ei")) >= 0',
                "would leave with fewer replicas than are serving now: chat",
            ),
        ):
            request["selectors"] = [{"cel": cel}]
            path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
            proc = fleet.playbook("deploy.yml", check=False)
            assert proc.returncode != 0, proc.stdout[-3000:]
            assert says in proc.stdout, proc.stdout[-3000:]
            assert owned_versions(fleet) == before  # not a single write or delete
            assert replicas(fleet, "chat") == chat
    finally:
        path.write_text(original)


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
        svc = next(  # a replica's Service: the one that carries its placement (not the model's Service)
            s
            for s in fleet.list(host, "", "v1", "services", f"{OWNER},gpufleet.io/deployment=chat")
            if "gpufleet.io/replica" in s["metadata"]["labels"]
        )
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


# --- rolling updates across the fleet (issue 25) -------------------------------------------------------------------

# Four replicas of one model over the three clusters, updated one replica at a time (rollout.max_unavailable: 1).
ROLL_IMAGE = "vllm/vllm-openai:v0.11.0"
ROLL = {
    "name": "roll",
    "namespace": "chat-team",
    "replicas": 4,
    "rollout": {"max_unavailable": 1},
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
                    "template": {"spec": {"containers": [{"name": "engine", "image": ROLL_IMAGE}]}},
                }
            ],
        }
    ],
}
ROLL_SELECTOR = f"{OWNER},gpufleet.io/deployment=roll"
# More CPU than any node has: a template whose pod the scheduler can never place (the local fleet's kwok makes every
# scheduled pod Ready, so an unschedulable pod is how a replica that never becomes Ready looks here).
UNSCHEDULABLE = {"requests": {"cpu": "1000"}}


def set_roll_container(fleet: Fleet, **fields: Any) -> None:
    path = fleet.inventory / "group_vars" / "all" / "deployments.yml"
    data = yaml.safe_load(path.read_text())
    dep = next(d for d in data["gpufleet_model_deployments"] if d["name"] == "roll")
    container = dep["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
    for key, value in fields.items():
        if value is None:
            container.pop(key, None)
        else:
            container[key] = value
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))


def roll_workloads(fleet: Fleet) -> dict[str, dict[str, Any]]:
    """``<cluster>/<name>`` -> roll's Deployment there."""
    return {
        f"{h}/{d['metadata']['name']}": d
        for h in fleet.names
        for d in fleet.list(h, "apps", "v1", "deployments", ROLL_SELECTOR)
    }


def roll_ready(fleet: Fleet) -> bool:
    found = roll_workloads(fleet)
    return len(found) == 4 and all(
        d.get("status", {}).get("observedGeneration") == d["metadata"]["generation"]
        and all(d.get("status", {}).get(k) == 1 for k in ("updatedReplicas", "readyReplicas", "availableReplicas"))
        for d in found.values()
    )


class Watch:
    """Every event of roll's Deployments and pods on every cluster, with the time it was received."""

    def __init__(self, fleet: Fleet) -> None:
        self.events: list[tuple[float, str, str, str, dict[str, Any]]] = []  # (t, host, kind, type, object)
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._watch, args=(fleet, h, kind), daemon=True)
            for h in fleet.names
            for kind in ("Deployment", "Pod")
        ]

    def _watch(self, fleet: Fleet, host: str, kind: str) -> None:
        from kubernetes import client, watch

        api = fleet.api(host)
        if kind == "Deployment":
            lister = client.AppsV1Api(api).list_deployment_for_all_namespaces
        else:
            lister = client.CoreV1Api(api).list_pod_for_all_namespaces
        w = watch.Watch()
        with contextlib.suppress(Exception):  # the watch ends with the test (or a later test's stopped server)
            for ev in w.stream(lister, label_selector=ROLL_SELECTOR, timeout_seconds=300):
                obj = api.sanitize_for_serialization(ev["object"])
                self.events.append((time.monotonic(), host, kind, ev["type"], obj))
                if self.stop.is_set():
                    w.stop()

    def __enter__(self) -> Watch:
        for t in self.threads:
            t.start()
        time.sleep(2)  # every watch has listed what exists (its ADDED events) before the run starts
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(1)
        self.stop.set()

    def update_windows(self, changed: Any) -> list[tuple[float, float, str]]:
        """Per Deployment whose template ``changed(template)`` says was updated during the run: (when the update
        was applied, when the Deployment was Ready again on it, ``<cluster>/<name>``), by the time it was applied;
        Ready again is +inf when it never was."""
        out = []
        per: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        for t, host, kind, _type, obj in self.events:
            if kind == "Deployment" and t >= self.start:
                per.setdefault(f"{host}/{obj['metadata']['name']}", []).append((t, obj))
        for name, seen in per.items():
            applied = next((t for t, d in seen if changed(d["spec"]["template"])), None)
            if applied is None:
                continue
            ready = next(
                (
                    t
                    for t, d in seen
                    if t >= applied
                    and changed(d["spec"]["template"])
                    and d.get("status", {}).get("observedGeneration") == d["metadata"]["generation"]
                    and all(
                        d.get("status", {}).get(k) == 1
                        for k in ("updatedReplicas", "readyReplicas", "availableReplicas")
                    )
                ),
                float("inf"),
            )
            out.append((applied, ready, name))
        return sorted(out)

    def most_replicas_not_ready(self, replicas: set[str]) -> int:
        """The most of ``replicas`` (their gpufleet.io/replica) that had no Ready pod at once during the run, replayed
        from the pod events (a pod being deleted does not count as Ready)."""
        pods: dict[tuple[str, str], tuple[str, bool]] = {}
        worst = 0
        for t, host, kind, type_, obj in self.events:
            if kind != "Pod":
                continue
            key = (host, obj["metadata"]["name"])
            if type_ == "DELETED":
                pods.pop(key, None)
            else:
                ready = not obj["metadata"].get("deletionTimestamp") and any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in obj.get("status", {}).get("conditions") or []
                )
                pods[key] = (obj["metadata"]["labels"]["gpufleet.io/replica"], ready)
            if t >= self.start:
                serving = {replica for replica, ok in pods.values() if ok}
                worst = max(worst, len(replicas - serving))
        return worst


def uids(fleet: Fleet) -> dict[str, str]:
    return {
        f"{h}/{plural}/{o['metadata']['name']}": o["metadata"]["uid"]
        for h in fleet.names
        for group, version, plural in (("", "v1", "services"), ("apps", "v1", "deployments"))
        for o in fleet.list(h, group, version, plural, ROLL_SELECTOR)
    }


@pytest.fixture(scope="class")
def roll(fleet: Fleet) -> Any:
    """The fleet with ROLL deployed (4 replicas, Ready); afterwards ROLL leaves the inventory and is pruned."""
    path = fleet.inventory / "group_vars" / "all" / "deployments.yml"
    original = path.read_text()
    data = yaml.safe_load(original)
    data["gpufleet_model_deployments"].append(ROLL)
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
    try:
        fleet.playbook("deploy.yml")
        wait_for("roll to be Ready", lambda: roll_ready(fleet))
        yield replicas(fleet, "roll")
    finally:
        path.write_text(original)
        fleet.playbook("deploy.yml")
        wait_for(
            "roll's pods to go", lambda: not any(fleet.list(h, "", "v1", "pods", ROLL_SELECTOR) for h in fleet.names)
        )


@pytest.mark.usefixtures("roll")
class TestRollingUpdate:
    def test_an_image_bump_updates_one_replica_at_a_time(self, fleet: Fleet, roll: dict[tuple[str, int], str]) -> None:
        assert len(roll) == 4 and len({c for c, _i in roll}) == 3  # spread over every cluster
        new_image = "vllm/vllm-openai:v0.11.1"
        set_roll_container(fleet, image=new_image)
        with Watch(fleet) as watch:
            proc = fleet.playbook("deploy.yml")
        windows = watch.update_windows(lambda tpl: tpl["spec"]["containers"][0]["image"] == new_image)
        assert len(windows) == 4, (windows, proc.stdout[-3000:])
        # Each replica's update starts only after the previous replica is Ready again on the new image.
        for (_a1, ready1, name1), (applied2, _r2, name2) in itertools.pairwise(windows):
            assert ready1 < applied2, f"{name2} was updated before {name1} was Ready again: {windows}"
        # Replayed from the pods: never more than one of the four replicas without a Ready pod.
        assert watch.most_replicas_not_ready(set(roll.values())) == 1
        assert roll_ready(fleet)
        assert replicas(fleet, "roll") == roll  # nobody moved
        assert "roll: rolling update of 4 replica(s) in 4 wave(s) (max_unavailable 1)" in proc.stdout

    def test_a_replica_that_never_becomes_ready_stops_the_rollout(
        self, fleet: Fleet, roll: dict[tuple[str, int], str]
    ) -> None:
        before = roll_workloads(fleet)
        images = {n: d["spec"]["template"]["spec"]["containers"][0]["image"] for n, d in before.items()}
        objects = uids(fleet)
        set_roll_container(fleet, resources=UNSCHEDULABLE)
        with Watch(fleet) as watch:
            proc = fleet.playbook("deploy.yml", "-e", "model_deployment_wait_timeout=20", check=False)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, out[-4000:]
        stopped = re.search(
            r"roll: rolling update stopped after 1 of 4 replica\(s\) \(max_unavailable 1\): replica (\S+) on (\S+) did not become Ready within 20s",
            out,
        )
        assert stopped, out[-4000:]
        assert "3 replica(s) keep the old template" in out and "nothing of roll was pruned" in out
        after = roll_workloads(fleet)

        def cpu(d: dict[str, Any]) -> Any:
            return d["spec"]["template"]["spec"]["containers"][0].get("resources", {}).get("requests", {}).get("cpu")

        bad = sorted(n for n, d in after.items() if cpu(d) in ("1000", "1k"))  # stored as 1k
        assert len(bad) == 1 and bad[0].split("/")[0] == stopped.group(2), (bad, stopped.group(0))
        assert bad[0].split("/")[1].startswith(stopped.group(1))
        for name, d in after.items():
            if name not in bad:  # never applied: the old template, the same generation
                assert d["metadata"]["generation"] == before[name]["metadata"]["generation"], name
                assert d["spec"]["template"]["spec"]["containers"][0]["image"] == images[name]
        assert uids(fleet) == objects  # nothing of roll was pruned or recreated
        assert watch.most_replicas_not_ready(set(roll.values())) == 1
        # Fixing the template rolls the stuck replica back first (it is not serving: no budget needed); the rest is
        # current again.
        set_roll_container(fleet, resources=None)
        fleet.playbook("deploy.yml")
        wait_for("roll to be Ready", lambda: roll_ready(fleet))
        assert replicas(fleet, "roll") == roll


# --- observed capacity and drift (design.md §11) -------------------------------------------------------------------

PROBE = {
    "name": "probe",
    "namespace": "chat-team",
    "replicas": 30,  # more than the fleet has: the number scheduled is the number of nodes placement counts free
    # Whole nodes (the device-level ledger would pack 1-GPU probes by device): one node lost per fault below.
    "placement": {"exclusive_nodes": True},
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


def probe_status(fleet: Fleet, capacity: str, *extra: str, tag: str = "") -> tuple[int, list[str], str]:
    """status.yml (reads and places, applies nothing) with the probe deployment: (probe replicas scheduled, drift
    lines, output)."""
    report = fleet.work / f"report-{capacity}{tag}.json"
    out = fleet.playbook(
        "status.yml",
        *extra,
        "-e",
        f"gpufleet_capacity={capacity}",
        "-e",
        f"gpufleet_report_file={report}",
        "-e",
        f"gpufleet_fleet_html={fleet.work / f'fleet-{capacity}{tag}.html'}",
    ).stdout
    # The machine-readable report (gpufleet_report_file): the probe's replicas and the drift lines.
    data = json.loads(report.read_text())
    assert data["deployments"]["probe"]["desired"] == 30, out[-4000:]
    header = "Drift between the declared fleet and what the clusters have:"
    assert (header in data["lines"]) == bool(data["drift"]), data["lines"]
    return int(data["deployments"]["probe"]["scheduled"]), list(data["drift"]), out


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
        # Render mode reads the same capacity when the clusters are readable (never silently declared capacity).
        render = ("-e", "gpufleet_mode=render", "-e", f"gpufleet_render_dir={fleet.work / 'render-observed'}")
        render_declared, _drift, _out = probe_status(fleet, "declared", *render, tag="-render")
        render_observed, render_drift, out = probe_status(fleet, "observed", *render, tag="-render")
        assert render_observed == render_declared - 4, out[-5000:]
        assert render_drift == drift
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
        # the report (and the fleet picture) draw each fault on its node: what observed capacity read
        report = json.loads((fleet.work / "report-observed.json").read_text())
        assert report["source"] == "clusters" and report["capacity"] == "observed"
        nodes = {(c["cluster"], n["node"]): n for c in report["clusters"] for p in c["pools"] for n in p["nodes"]}
        assert nodes[(beta, cordoned)]["state"] == "unavailable" and "cordoned" in nodes[(beta, cordoned)]["causes"]
        assert nodes[(alpha, sliced)]["state"] == "drifted"
        assert nodes[(gamma, tainted)]["state"] == "tainted"
        # report.json version 2: a node names the devices other workloads' claims hold under `foreign`
        foreign = [d for (cluster, _node), n in nodes.items() if cluster == host for d in n.get("foreign") or []]
        assert len(foreign) == 5, foreign
        page = (fleet.work / "fleet-observed.html").read_text()
        for state in ("unavailable", "drifted", "tainted", "foreign"):
            assert f'data-state="{state}"' in page, state

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
    assert_model_endpoints(fleet, "chat")  # two replicas on one cluster: one Service selects both
    fleet.set_deployment("chat", replicas=2)
    fleet.playbook("deploy.yml")
    down = replicas(fleet, "chat")
    assert len(down) == 2
    assert {k: up[k] for k in down} == down  # survivors keep their identity
    # scale down drops from the most-loaded clusters first, highest index first
    assert max(key[1] for key in down) < max(key[1] for key in up)
    assert_model_endpoints(fleet, "chat")  # a cluster left without chat replicas lost its model Service
    for host in fleet.names:
        names = {w["metadata"]["name"] for w in workloads(fleet, host)}
        for key, replica in up.items():
            if key not in down and key[0] == host:
                assert not any(n.startswith(replica) for n in names), f"{replica} still on {key[0]}"
    assert_all_ready(fleet)


def a10g_nodes(fleet: Fleet, host: str) -> list[str]:
    """Free nodes of ``host``'s A10G pool (localfleet names a pool's nodes ``<pool>-<i>``)."""
    return [n for n in free_gpu_nodes(fleet, host) if n.startswith("a10g-")]


@pytest.mark.parametrize("routed", [False, True], ids=["no-hub", "routing-hub"])
def test_a_scale_down_frees_the_nodes_another_deployments_new_replica_needs_in_the_same_run(
    fleet: Fleet, routed: bool
) -> None:
    """One run scales swap-x down on lf-gamma and adds swap-y on the A10G node that frees: the run removes swap-x's
    dropped replica before it waits for swap-y (fleet.reconcile.removals_first), so swap-y becomes Ready in that run
    (before, the run awaited swap-y first and timed out with "not reconciled").

    With a routing hub the first stage deletes nothing (the hub stops routing to swap-x's replica first): it no
    longer awaits swap-y there (it waited out the whole timeout before the hub routed and the second stage freed the
    node); the run takes less than one timeout."""
    hub = [
        f"gpufleet_routing_hub={fleet.names[0]}",
        "gpufleet_fleet_routing=llmd",
        "gpufleet_routing_address=gw.local.test",
    ]
    routing = [arg for var in hub for arg in ("-e", var)] if routed else []
    timeout = 120
    free = a10g_nodes(fleet, "lf-gamma")
    assert free, [n["metadata"]["name"] for n in fleet.list("lf-gamma", "", "v1", "nodes")]
    path = fleet.inventory / "group_vars" / "all" / "deployments.yml"
    original = path.read_text()
    data = yaml.safe_load(original)
    chat = next(d for d in data["gpufleet_model_deployments"] if d["name"] == "chat")

    def pinned(name: str, count: int) -> dict[str, Any]:
        dep = copy.deepcopy(chat)
        dep.update(name=name, replicas=count, clusters="lf-gamma")
        member = dep["engines"][0]["members"][0]
        member["node_selector"]["devices"][0]["selectors"] = [
            {"cel": 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A10G"'}
        ]
        return dep

    try:
        data["gpufleet_model_deployments"].append(pinned("swap-x", len(free)))
        path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
        fleet.playbook("deploy.yml", *routing)
        assert a10g_nodes(fleet, "lf-gamma") == []  # swap-x holds every free A10G node
        x = replicas(fleet, "swap-x")
        assert len(x) == len(free)
        data["gpufleet_model_deployments"][-1]["replicas"] = len(free) - 1
        data["gpufleet_model_deployments"].append(pinned("swap-y", 1))
        path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
        started = time.monotonic()
        proc = fleet.playbook("deploy.yml", "-e", f"model_deployment_wait_timeout={timeout}", *routing, check=False)
        took = time.monotonic() - started
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert len(replicas(fleet, "swap-y")) == 1 and len(replicas(fleet, "swap-x")) == len(free) - 1
        assert_all_ready(fleet)
        assert took < timeout, f"the run took {took:.0f}s: something waited out the {timeout}s timeout"
    finally:
        path.write_text(original)
        fleet.playbook("deploy.yml", *routing)
    assert replicas(fleet, "swap-x") == {} and replicas(fleet, "swap-y") == {}


def test_plan_then_apply_cluster_by_cluster_and_refuse_an_older_plan(fleet: Fleet) -> None:
    """Issue 26: plan once (plan.yml), apply cluster by cluster (apply.yml --limit, as AWX job slices do), and an
    apply of a plan older than the one the clusters took is refused."""
    before = owned_versions(fleet)
    fleet.playbook("plan.yml")
    plan_file = fleet.work / "placement-state.plan.json"  # apply mode: beside the state file, named after it
    first = json.loads(plan_file.read_text())
    saved = fleet.work / "plan-first.json"
    saved.write_text(plan_file.read_text())
    for host in fleet.names:
        out = fleet.playbook("apply.yml", "--limit", host).stdout
        assert f"for 1 of {len(fleet.names)} clusters" in out, out[-3000:]
    assert owned_versions(fleet) == before  # the plan is what runs: not one write to a serving object
    for host in fleet.names:
        cm = fleet.core(host).read_namespaced_config_map(f"gpufleet-plan-{first['fleet_name']}", "kube-system")
        assert json.loads(cm.data["plan.json"])["plan_id"] == first["plan_id"]
    chat = replicas(fleet, "chat")
    fleet.set_deployment("chat", replicas=len(chat) + 1)
    try:
        fleet.playbook("plan.yml")
        fleet.playbook("apply.yml")
        assert len(replicas(fleet, "chat")) == len(chat) + 1
        assert_all_ready(fleet)
    finally:
        fleet.set_deployment("chat", replicas=len(chat))
    # The first plan matches the inventory again, but every cluster took a newer plan since: refused, nothing done.
    proc = fleet.playbook("apply.yml", "-e", f"gpufleet_plan_file={saved}", check=False)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "was last applied with a newer plan" in proc.stdout
    assert len(replicas(fleet, "chat")) == len(chat) + 1
    fleet.playbook("deploy.yml")  # back to the inventory's replicas
    assert len(replicas(fleet, "chat")) == len(chat)
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


# --- two fleets on one cluster (issue 25: fleet identity) ------------------------------------------------------------

OTHER = "e2e-other"
SERVING_KINDS = (
    ("", "v1", "services"),
    ("apps", "v1", "deployments"),
    ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
    ("resource.k8s.io", "v1", "resourceclaimtemplates"),
)


def fleet_objects(fleet: Fleet, name: str) -> dict[tuple[str, str, str, str], tuple[Any, ...]]:
    """Every serving object of fleet ``name`` on every cluster: identity -> what a write or a recreate changes."""
    out = {}
    for host in fleet.names:
        for group, version, plural in SERVING_KINDS:
            for o in fleet.list(host, group, version, plural, f"{OWNER},gpufleet.io/fleet={name}"):
                meta = o["metadata"]
                out[(host, plural, meta["namespace"], meta["name"])] = (
                    meta["uid"],
                    meta.get("generation"),
                    json.dumps(meta.get("labels"), sort_keys=True),
                    json.dumps(meta.get("annotations"), sort_keys=True),
                )
    return out


def other_inventory(fleet: Fleet, host: str, deployments: list[dict[str, Any]]) -> Path:
    """A second inventory (fleet OTHER) whose one cluster is ``host``, under another inventory name."""
    inv = fleet.work / "other-inventory"
    (inv / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    (inv / "host_vars").mkdir(exist_ok=True)
    alias = f"shared-{host}"
    (inv / "hosts.yml").write_text(
        yaml.safe_dump({"all": {"children": {"gpufleet_clusters": {"hosts": {alias: None}}}}})
    )
    ours = fleet.inventory
    host_vars = yaml.safe_load((ours / "host_vars" / f"{host}.yml").read_text())
    host_vars.update(gpufleet_kubeconfig=str(fleet.state / "kubeconfigs" / host), gpufleet_context=host)
    (inv / "host_vars" / f"{alias}.yml").write_text(yaml.safe_dump(host_vars))
    for name in ("inference_classes.yml",):
        (inv / "group_vars" / "all" / name).write_text((ours / "group_vars" / "all" / name).read_text())
    (inv / "group_vars" / "gpufleet_clusters").mkdir(exist_ok=True)
    for path in (ours / "group_vars" / "gpufleet_clusters").glob("*.yml"):
        (inv / "group_vars" / "gpufleet_clusters" / path.name).write_text(path.read_text())
    fleet_vars = {
        "gpufleet_fleet_name": OTHER,
        "gpufleet_mode": "apply",
        "gpufleet_capacity": "observed",  # the other fleet's GPUs in use are read from the cluster
        "gpufleet_model_deployments": deployments,
        "gpufleet_model_caches": [],
    }
    (inv / "group_vars" / "all" / "fleet.yml").write_text("---\n" + yaml.safe_dump(fleet_vars, sort_keys=False))
    return inv


def other_playbook(fleet: Fleet, inv: Path, playbook: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        str(inv),
        str(REPO / "playbooks" / playbook),
        "-e",
        f"gpufleet_state_file={fleet.work / 'other-state.json'}",
        "-e",
        f"gpufleet_render_dir={fleet.work / 'other-rendered'}",
        "-e",
        "model_deployment_wait_timeout=120",
        "-e",
        "model_deployment_poll_interval=1",
        *extra,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, env=fleet.env(), cwd=REPO, check=False)
    (fleet.work / "last-run.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"{playbook} ({OTHER}) failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_two_fleets_share_a_cluster_and_never_touch_each_other(fleet: Fleet) -> None:
    """Issue 25: two inventories that share a cluster deleted each other's workloads (the owner selector carried no
    fleet). The other fleet deploys a deployment of the same name (in another namespace: a deployment's model Service
    is one per namespace and cluster, docs/routing.md) on one of our clusters, then drops one and tears down: our
    objects are never re-applied, recreated or deleted, and ours never touch theirs."""
    chat_replicas = len(replicas(fleet, "chat"))
    fleet.set_deployment("chat", replicas=3)
    fleet.playbook("deploy.yml")
    single = ("l4", "a10g")  # one GPU per node: free nodes there are what the other fleet's replicas need
    free = {h: [n for n in free_gpu_nodes(fleet, h) if n.startswith(single)] for h in fleet.names}
    host = max(fleet.names, key=lambda h: len(free[h]))
    assert len(free[host]) >= 2, free
    deployments = yaml.safe_load((fleet.inventory / "group_vars" / "all" / "deployments.yml").read_text())
    chat = next(d for d in deployments["gpufleet_model_deployments"] if d["name"] == "chat")
    theirs = [
        # Same name (gpufleet.io/deployment=chat, as ours), its own namespace; and another name in our namespace.
        {**copy.deepcopy(chat), "namespace": "chat-team-b", "replicas": 1, "clusters": "gpufleet_clusters"},
        {**copy.deepcopy(chat), "name": "side", "replicas": 1, "clusters": "gpufleet_clusters"},
    ]
    inv = other_inventory(fleet, host, theirs)
    ours = fleet_objects(fleet, FLEET)
    assert ours
    # Our replicas' claims on the shared cluster: the other fleet must count their devices as another workload's.
    our_replicas = {
        s["metadata"]["labels"]["gpufleet.io/replica"]
        for s in fleet.list(host, "", "v1", "services", MINE)
        if "gpufleet.io/replica" in s["metadata"]["labels"]  # not the models' Services
    }
    our_claims = [
        f"{c['metadata']['namespace']}/{c['metadata']['name']}"
        for c in fleet.list(host, "resource.k8s.io", "v1", "resourceclaims")
        if (c["metadata"].get("labels") or {}).get("gpufleet.io/replica") in our_replicas
    ]
    assert our_claims, our_replicas  # chat's 3 replicas spread over the 3 clusters
    their_replicas: set[str] = set()
    try:
        # 1. The other fleet deploys on the shared cluster; its observed capacity counts our claims as another
        #    workload's, so its replicas land on free nodes and become Ready.
        out = other_playbook(fleet, inv, "deploy.yml").stdout
        for name in our_claims:
            assert f"held by claim {name} of another workload" in out, (name, out[-4000:])
        other = fleet_objects(fleet, OTHER)
        assert {(k[0], k[1]) for k in other} == {
            (host, "services"),
            (host, "deployments"),
            (host, "resourceclaimtemplates"),
        }, other
        assert len([k for k in other if k[1] == "deployments"]) == 2
        their_replicas = {
            s["metadata"]["labels"]["gpufleet.io/replica"]
            for s in fleet.list(host, "", "v1", "services", f"{OWNER},gpufleet.io/fleet={OTHER}")
            if "gpufleet.io/replica" in s["metadata"]["labels"]
        }
        assert len(their_replicas) == 2 and not their_replicas & set(replicas(fleet, "chat").values())
        for w in fleet.list(host, "apps", "v1", "deployments", f"{OWNER},gpufleet.io/fleet={OTHER}"):
            wait_for(
                f"{OTHER}'s {w['metadata']['name']} to be ready",
                lambda w=w: (
                    fleet.apps(host)
                    .read_namespaced_deployment(w["metadata"]["name"], w["metadata"]["namespace"])
                    .status.ready_replicas
                    == 1
                ),
                timeout=120,
            )
        assert fleet_objects(fleet, FLEET) == ours  # nothing of ours was applied, recreated or deleted

        # 2. Our deploy and status see only our replicas; their objects are left as they are.
        counts = recap(fleet.playbook("deploy.yml").stdout)
        assert counts[fleet.names[0]]["changed"] == 0, counts
        assert fleet_objects(fleet, OTHER) == other
        assert fleet_objects(fleet, FLEET) == ours
        assert "The fleet is placed as its deployments ask." in fleet.playbook("status.yml").stdout

        # 3. The other fleet drops a deployment: its prune removes only that deployment's objects.
        inv = other_inventory(fleet, host, theirs[:1])
        other_playbook(fleet, inv, "deploy.yml")
        left = fleet_objects(fleet, OTHER)
        assert left and {k for k in other if k[3] != "side" and not k[3].startswith("side-")} == set(left), (
            sorted(other),
            left,
        )
        assert fleet_objects(fleet, FLEET) == ours

        # 4. The other fleet tears down: all of its objects go, none of ours.
        other_playbook(fleet, inv, "teardown.yml", "-e", "teardown_confirm=true")
        assert fleet_objects(fleet, OTHER) == {}
        assert fleet_objects(fleet, FLEET) == ours
        assert_all_ready(fleet)
    finally:
        if fleet_objects(fleet, OTHER):
            subprocess.run(
                [
                    str(Path(sys.executable).parent / "ansible-playbook"),
                    "-i",
                    str(inv),
                    str(REPO / "playbooks" / "teardown.yml"),
                    "-e",
                    "teardown_confirm=true",
                ],
                env=fleet.env(),
                cwd=REPO,
                check=False,
                capture_output=True,
            )
    # Their claims are released before the next tests count capacity.
    wait_for(
        f"{OTHER}'s claims to be gone",
        lambda: (
            not [
                c
                for c in fleet.list(host, "resource.k8s.io", "v1", "resourceclaims")
                if (c["metadata"].get("labels") or {}).get("gpufleet.io/replica") in their_replicas
            ]
        ),
        timeout=90,
    )
    fleet.set_deployment("chat", replicas=chat_replicas)
    fleet.playbook("deploy.yml")
    assert len(replicas(fleet, "chat")) == chat_replicas
    assert_all_ready(fleet)


def test_objects_without_a_fleet_label_are_adopted_only_when_told(fleet: Fleet) -> None:
    """Objects applied before fleet identity have no gpufleet.io/fleet label: a run stops before changing anything
    until gpufleet_adopt_unlabelled says whose they are; adopting them labels their metadata only, so no pod restarts."""
    fleet.playbook("deploy.yml")
    kinds = "services,deployments.apps,leaderworkersets.leaderworkerset.x-k8s.io,resourceclaimtemplates.resource.k8s.io"
    pods = {h: {p["metadata"]["uid"] for p in fleet.list(h, "", "v1", "pods", OWNER)} for h in fleet.names}

    def specs() -> dict[tuple[str, str], tuple[str, str]]:
        # A custom resource's generation also moves with its labels: the spec itself is what must not change.
        return {
            (h, w["metadata"]["name"]): (w["metadata"]["uid"], json.dumps(w["spec"], sort_keys=True))
            for h in fleet.names
            for w in fleet.list(h, "apps", "v1", "deployments", OWNER)
            + fleet.list(h, "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", OWNER)
        }

    before = specs()
    labelled = fleet_objects(fleet, FLEET)
    assert labelled and before
    for host in fleet.names:  # as a release before fleet identity left them
        fleet.kubectl(host, "label", kinds, "-A", "-l", MINE, "gpufleet.io/fleet-")
    assert fleet_objects(fleet, FLEET) == {}

    proc = fleet.playbook("deploy.yml", check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "carry gpufleet.serving's owner labels but no gpufleet.io/fleet label" in out, out[-4000:]
    assert f"gpufleet_adopt_unlabelled: true if they are this fleet's ({FLEET})" in out, out[-4000:]
    assert fleet_objects(fleet, FLEET) == {}  # nothing was applied or pruned

    fleet.playbook("deploy.yml", "-e", "gpufleet_adopt_unlabelled=true")
    assert set(fleet_objects(fleet, FLEET)) == set(labelled)  # the same objects, labelled again
    assert {k: v[0] for k, v in fleet_objects(fleet, FLEET).items()} == {k: v[0] for k, v in labelled.items()}
    assert specs() == before  # metadata only: no workload's spec changed
    assert {h: {p["metadata"]["uid"] for p in fleet.list(h, "", "v1", "pods", OWNER)} for h in fleet.names} == pods
    counts = recap(fleet.playbook("deploy.yml").stdout)  # adopted: the setting is no longer needed
    assert counts[fleet.names[0]]["changed"] == 0, counts
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
    report = fleet.work / "report-status.json"
    out = fleet.playbook("status.yml", "-e", f"gpufleet_report_file={report}").stdout
    assert "The fleet is placed as its deployments ask." in out, out[-3000:]
    chat = json.loads(report.read_text())["deployments"]["chat"]
    assert chat["scheduled"] == chat["desired"] == len(replicas(fleet, "chat")), chat


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
