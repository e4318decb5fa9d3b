# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Apply-time decisions of the model_cache role, as tested functions (the role's YAML only does Kubernetes I/O).

* :func:`job_decision` - the cache Job's state machine: given the Job's status as read (``job_status``), what to do:
  ``done`` (it succeeded, or the volume's ``gpufleet.io/hydrated-by`` names it and the finished Job was removed by
  its TTL), ``report`` (it failed and failed Jobs are not retried), ``wait`` (it runs already) or ``run`` (start it).
* :func:`jobs_to_delete` - before a Job starts: the cache's other Jobs (superseded by a changed source) and the
  failed attempt, so one Job at a time works on a volume.
* :func:`adopted_volume_decision` - a cache on a customer's PVC (``existing_pvc``): the PVC must exist; it is Ready
  when declared so, checked by a read-only Job when verification is on, else Pending; a non-RWX volume is noted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ADOPT_UNLABELLED_VAR,
    ANNOTATION_HYDRATED_BY,
    CACHE_OWNER,
    LABEL_FLEET,
    FleetIdentity,
    object_labels,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

ACTIONS = ("done", "report", "wait", "run")
ADOPTED_ACTIONS = ("ready", "check", "unknown")


def _status(before: Any) -> str:
    if not isinstance(before, Mapping) or not isinstance(before.get("status"), str):
        raise GpufleetError(
            f"the Job's status must be a cache_job_status result or {{status: Absent}} (got {before!r})"
        )
    return str(before["status"])


def job_decision(
    before: Mapping[str, Any], job_name: str, done_by: str = "", retry_failed: bool = False
) -> dict[str, Any]:
    """``{action, result}``: what to do with the cache Job ``job_name`` whose status is ``before``.

    ``result`` is the cache's outcome when ``action`` is ``done`` (else ``None``).
    """
    status = _status(before)
    if not isinstance(job_name, str) or not job_name:
        raise GpufleetError(f"job_name must be the Job's name (got {job_name!r})")
    if status == "Ready":
        return {"action": "done", "result": dict(before)}
    if status == "Absent" and done_by == job_name:
        return {
            "action": "done",
            "result": {
                "status": "Ready",
                "message": f"Job {job_name} hydrated this volume (its PVC annotation {ANNOTATION_HYDRATED_BY} says "
                "so; the finished Job was removed after its TTL)",
            },
        }
    if status == "Failed" and not retry_failed:
        return {"action": "report", "result": None}
    if status in ("Hydrating", "Pending"):
        return {"action": "wait", "result": None}
    return {"action": "run", "result": None}


def jobs_to_delete(others: Iterable[Mapping[str, Any]], job_name: str, before: Mapping[str, Any]) -> list[str]:
    """Names of the Jobs to delete before ``job_name`` starts: every other Job of the cache, and ``job_name`` itself
    when its last attempt failed (a Job's pod template is immutable: a retry is delete + create)."""
    names = []
    for obj in others:
        name = ((obj or {}).get("metadata") or {}).get("name") if isinstance(obj, Mapping) else None
        if not isinstance(name, str) or not name:
            raise GpufleetError(f"every Job must have metadata.name (got {obj!r:.120})")
        if name != job_name:
            names.append(name)
    if _status(before) == "Failed":
        names.append(job_name)
    return names


def adopted_volume_decision(
    pvcs: Sequence[Mapping[str, Any]],
    *,
    cache: str,
    claim: str,
    namespace: str,
    cluster: str,
    adopted_ready: Iterable[str] = (),
    verify: bool = False,
) -> dict[str, Any]:
    """``{action, result, note}`` for an adopted PVC as read (``k8s_info`` resources, zero or one).

    ``action``: ``ready`` (declared hydrated in ``adopted_ready``), ``check`` (run the read-only check Job),
    ``unknown`` (neither: Pending). Raises :class:`GpufleetError` when the PVC does not exist.
    """
    if not pvcs:
        raise GpufleetError(
            f"adopted PVC {namespace}/{claim} not found on cluster {cluster} (storage.backend existing_pvc adopts a "
            "PVC that must already exist)"
        )
    modes = ((pvcs[0].get("spec") or {}).get("accessModes")) or []
    note = "" if "ReadWriteMany" in modes else "; note: it is not ReadWriteMany, so only pods on one node can mount it"
    if cache in set(adopted_ready):
        message = f"adopted PVC {claim} declared hydrated (model_cache_adopted_ready){note}"
        return {"action": "ready", "result": {"status": "Ready", "message": message}, "note": note}
    if verify:
        return {"action": "check", "result": None, "note": note}
    message = (
        f"adopted PVC {claim}: readiness not verified; list the cache in model_cache_adopted_ready or set "
        f"model_cache_verify_adopted{note}"
    )
    return {"action": "unknown", "result": {"status": "Pending", "message": message}, "note": note}


def _quantity(value: Any) -> Any:
    from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

    try:
        return parse_quantity(str(value)) if value is not None else None
    except ValueError:
        return None


def pvc_change_error(
    existing: Sequence[Mapping[str, Any]],
    desired: Mapping[str, Any],
    cluster: str,
    adopt_unlabelled: bool | None = None,
) -> str:
    """Why ``desired`` (the cache PVC to apply) cannot be applied over the PVC as read (``k8s_info`` resources, zero
    or one), naming the object and the way forward; ``""`` when it can (absent, or only mutable fields change).

    Fleet identity: a PVC of another fleet is never taken; a PVC of the collection's without a fleet label (applied
    before fleet identity) is taken only when ``adopt_unlabelled`` (``gpufleet_adopt_unlabelled``) is true.

    A bound PVC's storage class, access modes and volume mode are immutable, and it cannot shrink; the API server
    would only answer ``field is immutable``.
    """
    if not existing:
        return ""
    if not isinstance(desired, Mapping) or not isinstance(desired.get("metadata"), Mapping):
        raise GpufleetError(f"desired must be the cache's PersistentVolumeClaim (got {desired!r:.120})")
    meta = desired["metadata"]
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    # Fleet identity: another fleet's cache volume (same claim name and namespace on a shared cluster) is never taken.
    live_labels = object_labels(existing[0])
    theirs = live_labels.get(LABEL_FLEET)
    ours = object_labels(desired).get(LABEL_FLEET)
    if theirs and ours and theirs != ours:
        return (
            f"PersistentVolumeClaim {name} on cluster {cluster} belongs to fleet {theirs}, not to fleet {ours}: two "
            "fleets sharing the cluster would use one cache volume. Give this fleet's cache another storage.claim_name "
            "or namespace. Nothing was changed on this cluster."
        )
    owned = all(live_labels.get(k) == v for k, v in CACHE_OWNER.items())
    if ours and not theirs and owned and adopt_unlabelled is not True:
        if adopt_unlabelled is None:
            return str(FleetIdentity(str(ours)).unlabelled_error([f"{cluster} PersistentVolumeClaim {name}"]))
        return (
            f"PersistentVolumeClaim {name} on cluster {cluster} has no fleet label and {ADOPT_UNLABELLED_VAR} is "
            f"false (it belongs to another inventory): fleet {ours} would take its cache volume. Give this fleet's "
            "cache another storage.claim_name or namespace. Nothing was changed on this cluster."
        )
    have = existing[0].get("spec") or {}
    want = desired.get("spec") or {}
    problems = []
    for fld, what in (
        ("storageClassName", "storage class"),
        ("accessModes", "access modes"),
        ("volumeMode", "volume mode"),
    ):
        if fld in want and fld in have and have[fld] != want[fld]:
            problems.append(f"{what} is {have[fld]!r}, the cache now asks for {want[fld]!r}")
    old = _quantity(((have.get("resources") or {}).get("requests") or {}).get("storage"))
    new = _quantity(((want.get("resources") or {}).get("requests") or {}).get("storage"))
    if old is not None and new is not None and new.cmp(old) < 0:
        problems.append(
            f"size would shrink from {have['resources']['requests']['storage']} to "
            f"{want['resources']['requests']['storage']}"
        )
    if not problems:
        return ""
    return (
        f"PersistentVolumeClaim {name} on cluster {cluster}: {'; '.join(problems)}, and Kubernetes cannot change that "
        f"on an existing volume. Either keep the old value in the cache (storage.storage_class / "
        f"gpufleet_cache_storage_class, size), or delete the PVC (kubectl --context <{cluster}> -n "
        f"{meta.get('namespace')} delete pvc {meta.get('name')}) once no pod uses it and re-run: a new volume is "
        "created and hydrated again. Nothing was changed on this cluster."
    )
