"""Issue 33, item 3, on the local fleet with a real Kueue (sigs.k8s.io/kueue, built from its Go module by
``scripts/localfleet up --kueue``; its DynamicResourceAllocation gate on, the DeviceClass gpu.nvidia.com counted as a
quota resource of the same name, as plugins/module_utils/queues.py reads it).

Two clusters of four one-GPU L4 nodes. On each, the LocalQueue chat-team/serving submits to ClusterQueue ``gpus``:
quota for 2 GPUs on kq-a, 4 on kq-b. Kueue's Workload objects are the oracle:

1. the collection's rendered workloads for 3 replicas forced onto kq-a (render mode, ``clusters: kq-a``, applied as
   they are) carry the queue label, and Kueue admits 2 of them; the third stays pending for quota (its pod gated);
2. with ``gpufleet_capacity: observed`` placement reads the ClusterQueues and puts 2 replicas on kq-a and the third on
   kq-b, every one admitted, and explain names the queue; grown to 5, the spent quota keeps kq-a at 2 (spreading alone
   would put a third there) and Kueue admits all five.

The module brings up its own fleet (about 25 s once the binaries are cached; a cold Kueue build adds about 5 minutes).
Set GPUFLEET_E2E_KUEUE_STATE to the state directory of a fleet fresh from
``scripts/localfleet up tests/e2e/kueue_inventory STATE --kueue`` to reuse it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import LOCALFLEET, Fleet, wait_for
from k8s_schemas import load_documents, validate_objects

from ansible_collections.gpufleet.serving.plugins.module_utils.queues import KUEUE_QUEUE_LABEL, clusterqueue_free

INVENTORY = Path(__file__).resolve().parent / "kueue_inventory"
NAMESPACE = "chat-team"
GPU = "gpu.nvidia.com"  # the DeviceClass, and the quota resource localfleet maps it to
QUOTA = {"kq-a": 2, "kq-b": 4}


def kueue_objects(quota: int) -> list[dict[str, Any]]:
    """A ResourceFlavor, ClusterQueue ``gpus`` with quota for ``quota`` GPUs and LocalQueue chat-team/serving."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "gpus"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [{"name": "default-flavor", "resources": [{"name": GPU, "nominalQuota": quota}]}],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "serving", "namespace": NAMESPACE},
            "spec": {"clusterQueue": "gpus"},
        },
    ]


@pytest.fixture(scope="module")
def kfleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("kueue")
    inventory = work / "inventory"
    shutil.copytree(INVENTORY, inventory)
    reuse = os.environ.get("GPUFLEET_E2E_KUEUE_STATE")
    if reuse:
        state = Path(reuse).resolve()
        subprocess.run([sys.executable, str(LOCALFLEET), "status", str(state)], check=True)
    else:
        state = work / "fleet"
        subprocess.run([sys.executable, str(LOCALFLEET), "up", str(INVENTORY), str(state), "--kueue"], check=True)
    try:
        fleet = Fleet(state, inventory, work)
        for host, quota in QUOTA.items():
            objects = kueue_objects(quota)
            validate_objects(objects)  # the pinned Kueue CRD schemas (tests/lib/crd_fetch.py)
            path = work / f"kueue-{host}.yaml"
            path.write_text(yaml.safe_dump_all(objects))
            fleet.kubectl(host, "apply", "--server-side", "--field-manager=e2e-kueue", "-f", str(path))
        yield fleet
    finally:
        if not reuse:
            subprocess.run([sys.executable, str(LOCALFLEET), "down", str(state)], check=False)


# -- reading Kueue ----------------------------------------------------------------------------------------------------


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def workloads(fleet: Fleet, host: str) -> list[dict[str, Any]]:
    return [
        w for w in fleet.list(host, "kueue.x-k8s.io", "v1beta2", "workloads") if w["metadata"]["namespace"] == NAMESPACE
    ]


def admitted(fleet: Fleet, host: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Kueue's verdict on ``host``: its Workloads admitted, and those pending (a QuotaReserved=False condition)."""
    wls = workloads(fleet, host)
    yes = [w for w in wls if condition(w, "Admitted").get("status") == "True"]
    pending = [w for w in wls if condition(w, "QuotaReserved").get("status") == "False"]
    return yes, pending


def cluster_queue(fleet: Fleet, host: str) -> dict[str, Any]:
    return fleet.custom(host).get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "gpus")


def free(fleet: Fleet, host: str) -> dict[str, int]:
    """What queues.py reads the real ClusterQueue to still admit."""
    return clusterqueue_free(cluster_queue(fleet, host), [GPU])


def set_chat(fleet: Fleet, **fields: Any) -> None:
    path = fleet.inventory / "group_vars" / "all" / "deployments.yml"
    data = yaml.safe_load(path.read_text())
    chat = next(d for d in data["gpufleet_model_deployments"] if d["name"] == "chat")
    for key, value in fields.items():
        if value is None:
            chat.pop(key, None)
        else:
            chat[key] = value
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))


def chat_deployments(fleet: Fleet, host: str) -> list[dict[str, Any]]:
    return [
        d.to_dict()
        for d in fleet.apps(host)
        .list_namespaced_deployment(NAMESPACE, label_selector="gpufleet.io/deployment=chat")
        .items
    ]


def placed(fleet: Fleet) -> tuple[dict[str, int], list[str]]:
    """The plan's replicas of chat per cluster and its explain lines."""
    plan = json.loads((fleet.work / "placement-state.plan.json").read_text())
    counts: dict[str, int] = {}
    for r in plan["replicas"]:
        if r["deployment"] == "chat":
            counts[r["cluster"]] = counts.get(r["cluster"], 0) + 1
    return counts, plan["placement"]["explain"]


# -- the tests --------------------------------------------------------------------------------------------------------


def test_kueue_admits_2_of_3_replicas_forced_onto_a_cluster_whose_queue_has_quota_for_2_gpus(kfleet: Fleet) -> None:
    fleet = kfleet
    assert free(fleet, "kq-a") == {GPU: 2}  # nothing admitted yet: queues.py reads Kueue's own status
    set_chat(fleet, clusters="kq-a")
    render = fleet.work / "forced"
    fleet.playbook(
        "deploy.yml",
        "-e",
        "gpufleet_mode=render",
        "-e",
        f"gpufleet_render_dir={render}",
        "-e",
        f"gpufleet_state_file={fleet.work / 'forced-state.json'}",
    )
    objects = load_documents(sorted((render / "kq-a").rglob("*.yaml")))
    validate_objects(objects)
    workloads_ = [o for o in objects if o["kind"] == "Deployment"]
    assert len(workloads_) == 3
    for dep in workloads_:
        assert dep["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "serving"
        assert dep["spec"]["template"]["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "serving"
    try:
        fleet.kubectl("kq-a", "apply", "--server-side", "--field-manager=e2e-forced", "-R", "-f", str(render / "kq-a"))

        def verdict() -> Any:
            yes, pending = admitted(fleet, "kq-a")
            return (yes, pending) if len(yes) == 2 and len(pending) == 1 else None

        yes, pending = wait_for("Kueue to admit 2 of the 3 workloads on kq-a", verdict, timeout=90)
        (waiting,) = pending
        reason = condition(waiting, "QuotaReserved")
        assert reason["reason"] == "Pending", reason
        assert f"insufficient unused quota for {GPU}" in reason["message"], reason
        for w in yes:  # each admitted for one GPU, counted from the rendered ResourceClaimTemplate
            assert w["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {GPU: "1"}, w["status"]
        # The ClusterQueue's usage (status.flavorsUsage) is written by Kueue's ClusterQueue controller after the
        # admissions, not with them.
        wait_for("kq-a's ClusterQueue to count both admissions", lambda: free(fleet, "kq-a") == {GPU: 0}, timeout=60)

        def pods() -> Any:
            items = fleet.core("kq-a").list_namespaced_pod(NAMESPACE, label_selector="gpufleet.io/deployment=chat")
            running = [p for p in items.items if p.status.phase == "Running"]
            gated = [p for p in items.items if p.spec.scheduling_gates]
            return (running, gated) if len(running) == 2 and len(gated) == 1 else None

        running, gated = wait_for("2 pods running and 1 gated by Kueue", pods, timeout=60)
        assert "kueue.x-k8s.io/admission" in [g.name for g in gated[0].spec.scheduling_gates]
        # Each Workload is its pod's (Kueue's pod integration): the admitted ones' pods run, the pending one's is gated.
        assert {w["metadata"]["ownerReferences"][0]["name"] for w in pending} == {gated[0].metadata.name}
        assert {w["metadata"]["ownerReferences"][0]["name"] for w in yes} == {p.metadata.name for p in running}
    finally:
        fleet.kubectl("kq-a", "delete", "--wait=true", "-R", "-f", str(render / "kq-a" / NAMESPACE))
        wait_for("the forced workloads to leave kq-a", lambda: not workloads(fleet, "kq-a"), timeout=90)
        wait_for("kq-a's quota to be free again", lambda: free(fleet, "kq-a") == {GPU: 2}, timeout=60)


def test_observed_capacity_places_the_third_replica_elsewhere_and_every_replica_is_admitted(kfleet: Fleet) -> None:
    fleet = kfleet
    set_chat(fleet, clusters=None, replicas=3)
    assert free(fleet, "kq-a") == {GPU: 2} and free(fleet, "kq-b") == {GPU: 4}
    observed = ("-e", "gpufleet_capacity=observed", "-e", "gpufleet_explain=chat")
    fleet.playbook("deploy.yml", *observed)
    counts, explain = placed(fleet)
    assert counts == {"kq-a": 2, "kq-b": 1}, explain
    assert (
        "  kq-a: admitted through Kueue LocalQueue chat-team/serving (ClusterQueue gpus: nominalQuota minus usage "
        f"leaves 2 {GPU}); placement put no replica beyond it"
    ) in explain, explain
    for host, n in counts.items():
        deps = chat_deployments(fleet, host)
        assert len(deps) == n and all(d["status"].get("available_replicas") == 1 for d in deps), deps
        yes, pending = admitted(fleet, host)
        assert (len(yes), pending) == (n, []), [w["status"] for w in workloads(fleet, host)]
    # Kueue writes the ClusterQueue's usage after the admissions (the next plan reads it).
    wait_for("kq-a's ClusterQueue to count its admissions", lambda: free(fleet, "kq-a") == {GPU: 0}, timeout=60)

    # Grown to 5: kq-a's quota is spent by its two (admitted, read back from the cluster): the new ones go to kq-b,
    # where spreading alone would have put a third on kq-a. Kueue admits all five.
    set_chat(fleet, replicas=5)
    fleet.playbook("deploy.yml", *observed)
    counts, explain = placed(fleet)
    assert counts == {"kq-a": 2, "kq-b": 3}, explain
    assert any(
        f"kq-a: admitted through Kueue LocalQueue chat-team/serving (ClusterQueue gpus: nominalQuota minus usage leaves 0 {GPU})"
        in line
        for line in explain
    ), explain
    for host, n in counts.items():
        deps = chat_deployments(fleet, host)
        assert len(deps) == n and all(d["status"].get("available_replicas") == 1 for d in deps), deps
        yes, pending = admitted(fleet, host)
        assert (len(yes), pending) == (n, []), [w["status"] for w in workloads(fleet, host)]
    wait_for("kq-b's ClusterQueue to count its admissions", lambda: free(fleet, "kq-b") == {GPU: 1}, timeout=60)
