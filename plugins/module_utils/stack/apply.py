# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Who owns the stack's objects and the apply-time decisions: the labels of every object the stack plans (``_meta()``),
Helm's ownership (``helm_owner()``), install or skip a release (``release_action()``), objects a chart ships that
already exist without Helm ownership (``adoptions()``), and which plain objects to server-side apply
(``objects_to_apply()``).

Part of the serving stack; ``serving_stack.py`` is the façade other code imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    LABEL_MANAGED_BY,
    LABEL_STACK_PART,
    MANAGED,
    STACK_OWNER,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.versions import (
    HELM_RELEASE_NAME,
    HELM_RELEASE_NAMESPACE,
)


def _labels(part: str) -> dict[str, str]:
    return {**STACK_OWNER, LABEL_STACK_PART: part.replace("_", "-")}


def _meta(name: str, part: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = _labels(part)
    return meta


# --------------------------------------------------------------------------------------------------------------------
# Apply-time decisions
# --------------------------------------------------------------------------------------------------------------------


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _obj_labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def helm_owner(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(release, namespace)`` of the Helm release that owns ``obj``, or None."""
    ann = _annotations(obj)
    if ann.get(HELM_RELEASE_NAME):
        return str(ann[HELM_RELEASE_NAME]), str(ann.get(HELM_RELEASE_NAMESPACE, ""))
    return None


def release_action(release: Any, deployed: Any, crds: Any) -> dict[str, Any]:
    """``{action: install|skip, reason}`` for one planned release. ``deployed``: kubernetes.core.helm_info's ``status``
    for it (empty when there is no release); ``crds``: the component's marker CRD as k8s_info returns it (a list)."""
    if not isinstance(release, Mapping):
        raise GpufleetError("release: must be one of the plan's releases")
    name = release.get("release")
    status = deployed if isinstance(deployed, Mapping) else {}
    if status:
        state = str(status.get("status", "")).lower()
        return {
            "action": "install",
            "reason": f"release {name} is {state or 'present'} (chart {status.get('chart', '?')}): upgraded to "
            f"{release.get('chart')} {release.get('version')} when it differs",
        }
    found = [c for c in (crds or []) if isinstance(c, Mapping)]
    if release.get("detect_crd") and found:
        owner = helm_owner(found[0])
        who = f"Helm release {owner[0]} in {owner[1]}" if owner else (
            f"{_obj_labels(found[0]).get(LABEL_MANAGED_BY) or 'something other than Helm'}"
        )  # fmt: skip
        return {
            "action": "skip",
            "reason": f"{release.get('title', name)} is already installed (CRD {release['detect_crd']} exists, "
            f"managed by {who}; no release {name} in {release.get('namespace')}): kept as it is, not installed again "
            f"(if a failed install of ours left it behind - Helm never deletes a chart's crds/ - delete it or set "
            f"serving_stack_overrides.{release.get('component')}.detect_crd to null)",
        }
    return {"action": "install", "reason": f"not installed: installing {release.get('chart')} {release.get('version')}"}


def adoptions(release: Any, existing: Any, adopt: bool) -> list[str]:
    """The DeviceClasses a release's chart ships that already exist without belonging to that release (the local
    fleet's, or ones a person created): Helm would fail the install with an ownership conflict. With ``adopt`` the
    role hands them over first (Helm's ``meta.helm.sh/release-*`` annotations and ``managed-by: Helm`` label, which
    Helm 3 and 4 both adopt); without it this raises, naming them. Returns their names (empty: nothing to adopt)."""
    if not isinstance(release, Mapping):
        raise GpufleetError("release: must be one of the plan's releases")
    ships = set(release.get("ships_device_classes") or [])
    names = []
    for obj in existing or []:
        if not isinstance(obj, Mapping):
            continue
        name = (obj.get("metadata") or {}).get("name")
        if name in ships and helm_owner(obj) != (release["release"], release["namespace"]):
            names.append((str(name), _obj_labels(obj).get(LABEL_MANAGED_BY) or "unknown"))
    if names and not adopt:
        listed = ", ".join(f"{n} (managed by {m})" for n, m in sorted(names))
        raise GpufleetError(
            f"DeviceClass {listed} exists and is not part of Helm release {release['release']}; the "
            f"{release['chart']} chart ships it, so installing would fail with an ownership conflict. Delete it, or "
            "set serving_stack_adopt_existing to true to let the release take it over."
        )
    return sorted(n for n, _m in names)


def objects_to_apply(objects: Any, existing: Any) -> dict[str, Any]:
    """Split planned objects into those to server-side apply and those to keep: an existing object that is not ours
    (owned by a Helm release, or labelled as managed by something else) is never applied over.
    ``existing``: the objects read from the cluster (any kinds). Returns ``{apply: [...], kept: [{kind, name,
    reason}]}``."""
    for name, value in (("objects", objects), ("existing", existing)):
        if value is not None and (
            not isinstance(value, (list, tuple)) or not all(isinstance(o, Mapping) for o in value)
        ):
            raise GpufleetError(f"{name}: expected a list of Kubernetes objects (mappings), got {type(value).__name__}")
    found: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for obj in existing or []:
        if isinstance(obj, Mapping):
            meta = obj.get("metadata") or {}
            found[(str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))] = obj
    apply, kept = [], []
    for obj in objects or []:
        meta = obj.get("metadata") or {}
        key = (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))
        live = found.get(key)
        if live is None or obj.get("kind") == "Namespace":
            apply.append(obj)
            continue
        owner = helm_owner(live)
        manager = _obj_labels(live).get(LABEL_MANAGED_BY)
        if owner is not None:
            reason = f"owned by Helm release {owner[0]} in {owner[1]}"
        elif manager != MANAGED[LABEL_MANAGED_BY]:
            reason = f"exists, managed by {manager or 'something else (no managed-by label)'}"
        else:
            apply.append(obj)
            continue
        kept.append({"kind": key[0], "namespace": key[1], "name": key[2], "reason": f"{reason}: kept as it is"})
    return {"apply": apply, "kept": kept}
