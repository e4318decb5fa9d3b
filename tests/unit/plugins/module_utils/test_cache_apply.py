"""cache_apply.py: the model_cache role's apply-time decisions (Job state machine, deletions, adopted volumes)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.filter.cache_manifests import (
    FilterModule,
    cache_adopted_volume,
    cache_job_action,
    cache_jobs_to_delete,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cache_apply import (
    adopted_volume_decision,
    job_decision,
    jobs_to_delete,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

JOB = "gpufleet-hydrate-q-0123456789"


@pytest.mark.parametrize(
    ("status", "done_by", "retry", "action"),
    [
        ("Ready", "", False, "done"),
        ("Ready", "other", True, "done"),
        ("Absent", JOB, False, "done"),  # finished and removed by its TTL; the volume says this Job hydrated it
        ("Absent", "gpufleet-hydrate-q-old", False, "run"),  # the volume was hydrated by another (older) Job
        ("Absent", "", False, "run"),
        ("Failed", "", False, "report"),
        ("Failed", "", True, "run"),
        ("Failed", JOB, False, "report"),
        ("Hydrating", "", False, "wait"),
        ("Pending", "", True, "wait"),
    ],
)
def test_job_state_machine(status, done_by, retry, action):
    decision = job_decision({"status": status, "message": "m"}, JOB, done_by, retry)
    assert decision["action"] == action
    if action != "done":
        assert decision["result"] is None


def test_done_results():
    before = {"status": "Ready", "message": "hydrated 3 files"}
    assert job_decision(before, JOB)["result"] == before
    ttl = job_decision({"status": "Absent"}, JOB, JOB)["result"]
    assert ttl["status"] == "Ready" and f"Job {JOB} hydrated this volume" in ttl["message"]
    assert "gpufleet.io/hydrated-by" in ttl["message"]


def test_bad_inputs():
    with pytest.raises(GpufleetError, match="cache_job_status result"):
        job_decision({}, JOB)
    with pytest.raises(GpufleetError, match=r"job_name must be"):
        job_decision({"status": "Ready"}, "")
    with pytest.raises(AnsibleFilterError, match=r"^cache_job_action: retry_failed must be true or false"):
        cache_job_action({"status": "Ready"}, JOB, retry_failed="yes")


def test_jobs_to_delete():
    others = [{"metadata": {"name": JOB}}, {"metadata": {"name": "gpufleet-hydrate-q-old"}}]
    assert jobs_to_delete(others, JOB, {"status": "Absent"}) == ["gpufleet-hydrate-q-old"]
    assert jobs_to_delete(others, JOB, {"status": "Failed"}) == ["gpufleet-hydrate-q-old", JOB]
    assert jobs_to_delete([], JOB, {"status": "Failed"}) == [JOB]
    with pytest.raises(GpufleetError, match=r"metadata\.name"):
        jobs_to_delete([{"metadata": {}}], JOB, {"status": "Absent"})
    assert cache_jobs_to_delete(others, JOB, {"status": "Absent"}) == ["gpufleet-hydrate-q-old"]
    with pytest.raises(AnsibleFilterError, match=r"^cache_jobs_to_delete: "):
        cache_jobs_to_delete("x", JOB, {"status": "Absent"})


PVC_RWX = {"spec": {"accessModes": ["ReadWriteMany"]}}
PVC_RWO = {"spec": {"accessModes": ["ReadWriteOnce"]}}
ADOPTED = {"name": "q", "namespace": "ml", "storage": {"backend": "existing_pvc", "claim_name": "models"}}


def _decide(pvcs, **kw):
    return adopted_volume_decision(pvcs, cache="q", claim="models", namespace="ml", cluster="c1", **kw)


def test_adopted_volume_must_exist():
    with pytest.raises(GpufleetError, match="adopted PVC ml/models not found on cluster c1"):
        _decide([])


@pytest.mark.parametrize(
    ("pvc", "kw", "action", "status", "noted"),
    [
        (PVC_RWX, {"adopted_ready": ["q"]}, "ready", "Ready", False),
        (PVC_RWO, {"adopted_ready": ["q"], "verify": True}, "ready", "Ready", True),
        (PVC_RWX, {"verify": True}, "check", None, False),
        (PVC_RWX, {}, "unknown", "Pending", False),
        (PVC_RWO, {"adopted_ready": ["other"]}, "unknown", "Pending", True),
    ],
)
def test_adopted_volume_decisions(pvc, kw, action, status, noted):
    decision = _decide([pvc], **kw)
    assert decision["action"] == action
    assert (decision["result"] or {}).get("status") == status
    assert ("not ReadWriteMany" in decision["note"]) is noted
    if decision["result"] is not None:
        assert decision["result"]["message"].endswith(decision["note"])


def test_adopted_volume_filter():
    out = cache_adopted_volume([PVC_RWX], ADOPTED, "c1", adopted_ready=["q"], verify=False)
    assert out["action"] == "ready"
    with pytest.raises(AnsibleFilterError, match=r"^cache_adopted_volume: adopted PVC ml/models not found"):
        cache_adopted_volume([], ADOPTED, "c1")
    with pytest.raises(AnsibleFilterError, match=r"^cache_adopted_volume: cache must be"):
        cache_adopted_volume([PVC_RWX], {"name": "q"}, "c1")


def test_the_filters_are_registered():
    names = set(FilterModule().filters())
    assert {"cache_job_action", "cache_jobs_to_delete", "cache_adopted_volume"} <= names


# --------------------------------------------------------------------------------------------------------------------
# Immutable PVC fields (issue 16): a clear message naming the object and the way forward, before anything is applied
# --------------------------------------------------------------------------------------------------------------------


def _pvc(storage_class: str = "filestore-rwx", size: str = "20Gi", modes: tuple[str, ...] = ("ReadWriteMany",)):
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "gpufleet-cache-qwen", "namespace": "ml-team"},
        "spec": {
            "accessModes": list(modes),
            "volumeMode": "Filesystem",
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": size}},
        },
    }


def test_a_changed_storage_class_names_the_pvc_and_the_way_forward():
    from ansible_collections.gpufleet.serving.plugins.filter.cache_manifests import cache_pvc_change_error

    message = cache_pvc_change_error([_pvc("filestore-rwx")], _pvc("premium-rwx"), "gke-a")
    assert "PersistentVolumeClaim ml-team/gpufleet-cache-qwen on cluster gke-a" in message
    assert "storage class is 'filestore-rwx', the cache now asks for 'premium-rwx'" in message
    assert "delete pvc gpufleet-cache-qwen" in message and "Nothing was changed" in message


@pytest.mark.parametrize(
    ("existing", "desired", "problem"),
    [
        ([], _pvc("other"), ""),  # a new volume
        ([_pvc()], _pvc(), ""),
        ([_pvc(size="20Gi")], _pvc(size="40Gi"), ""),  # growing is a mutable change (volume expansion)
        ([_pvc(size="20Gi")], _pvc(size="10Gi"), "size would shrink from 20Gi to 10Gi"),
        ([_pvc(modes=("ReadWriteOnce",))], _pvc(), "access modes"),
    ],
)
def test_pvc_change_error(existing, desired, problem):
    from ansible_collections.gpufleet.serving.plugins.module_utils.cache_apply import pvc_change_error

    message = pvc_change_error(existing, desired, "gke-a")
    assert (problem in message) if problem else message == ""


def test_the_apply_tasks_check_the_pvc_before_applying_it():
    from pathlib import Path

    import yaml

    tasks = yaml.safe_load(
        (Path(__file__).resolve().parents[4] / "roles/model_cache/tasks/apply_hydrate.yml").read_text()
    )
    names = [t["name"] for t in tasks]
    check = names.index("Refuse a change the cache volume cannot take")
    assert check < names.index("Apply the cache volume and the hydrator ConfigMap")
    assert "cache_pvc_change_error" in tasks[check]["vars"]["__model_cache_pvc_problem"]
