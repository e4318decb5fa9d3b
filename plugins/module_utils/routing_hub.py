# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Apply mode: make the hub cluster (``gpufleet_routing_hub``) hold the fleet routing objects (:mod:`.routing`).

Thin I/O over a :class:`.fleet.reconcile.ClusterAPI` (or anything with its ``list``/``apply``/``delete``/``ensure_namespace``):
every object is server-side applied and the API server's answer awaited (the stored object, whose weights are then
what the hub's gateway controller reads) before the call returns; routing objects of this fleet that are no longer
rendered are deleted afterwards. The caller orders this before the deletion of any replica whose weight went to 0.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import LABEL_FLEET
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.object_size import check_data_size
from ansible_collections.gpufleet.serving.plugins.module_utils.routing import (
    ROUTING_DIR,
    ROUTING_OWNER,
    assemble_artifact,
)

#: A routing artifact file larger than this is not read (a planted file must not exhaust memory).
ARTIFACT_BYTES = 16 * 1024 * 1024

#: Every kind a routing renderer may put on the hub (listed for pruning; a kind the hub does not serve has none).
HUB_KINDS: tuple[tuple[str, str], ...] = (
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("aigateway.envoyproxy.io/v1beta1", "AIGatewayRoute"),
    ("aigateway.envoyproxy.io/v1beta1", "AIServiceBackend"),
    ("gateway.envoyproxy.io/v1alpha1", "Backend"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
)


@dataclass
class HubOutcome:
    applied: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    #: ``resourceVersion`` the API server stored for each applied object (the await's evidence).
    stored: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"applied": self.applied, "deleted": self.deleted, "stored": self.stored}


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind')}/{meta.get('namespace') or ''}/{meta.get('name')}"


def sync_hub(
    api: Any,
    objects: Iterable[Mapping[str, Any]],
    fleet_name: str,
    *,
    field_manager: str = "gpufleet",
    check_mode: bool = False,
    prune: bool = True,
) -> HubOutcome:
    """Apply ``objects`` to the hub (namespaces created when missing; an object the hub already holds as rendered is
    not applied again: :func:`.fleet.reconcile.is_current`), then delete this fleet's routing objects that are not among
    them. Raises the client's ``ClusterError`` (a :class:`.errors.GpufleetError`) on any API failure: nothing after it
    is done, so no replica is deleted on the strength of a weight the hub never stored. A ConfigMap or Secret over
    the 1 MiB the API server accepts is refused before anything is applied (:func:`.object_size.check_data_size`)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import is_current, stamped

    objs = [stamped(o) for o in objects]
    check_data_size(objs, f"gpufleet_routing_hub {getattr(api, 'name', '')}".rstrip())
    out = HubOutcome()
    selector = [f"{k}={v}" for k, v in ROUTING_OWNER.items()] + ([f"{LABEL_FLEET}={fleet_name}"] if fleet_name else [])
    live: dict[str, dict[str, Any]] = {}
    for api_version, kind in HUB_KINDS:
        for item in api.list(api_version, kind, selector, managed_by=field_manager):
            labels = (item.get("metadata") or {}).get("labels") or {}
            if any(str(labels.get(k)) != v for k, v in ROUTING_OWNER.items()):
                continue
            if fleet_name and labels.get(LABEL_FLEET) != fleet_name:
                continue
            live[_key({**item, "kind": kind})] = {**item, "apiVersion": api_version, "kind": kind}
    for ns in sorted({str((o.get("metadata") or {}).get("namespace")) for o in objs if o["metadata"].get("namespace")}):
        api.ensure_namespace(ns, dry_run=check_mode)
    for obj in objs:
        key = _key(obj)
        current = live.get(key)
        if current is not None and is_current(current, obj, field_manager):
            out.stored[key] = str((current.get("metadata") or {}).get("resourceVersion") or "")
            continue
        stored = api.apply(obj, field_manager, dry_run=check_mode)
        out.applied.append(key)
        out.stored[key] = str(((stored or {}).get("metadata") or {}).get("resourceVersion") or "")
    if not prune:
        return out
    want = {_key(o) for o in objs}
    for key, item in sorted(live.items()):
        if key in want:
            continue
        if not check_mode:
            api.delete(item)
        out.deleted.append(key)
    return out


def read_routing_artifact(render_dir: str | Path, fleet_name: str) -> dict[str, Any] | None:
    """The routing artifact the last run wrote to ``<render_dir>/_fleet/routing/`` for ``fleet_name``, or None: its
    index ConfigMap and the parts it names (:func:`.routing.assemble_artifact`), or the single ConfigMap an earlier
    version wrote. Only ConfigMap files (``<namespace>.configmap-<name>.yaml``) labelled as this fleet's routing are
    read (a renderer's thousands of Services are not parsed). The render directory is untrusted: files are read
    without following symlinks, a symlinked directory is refused (:func:`.manifest_dir.check_path`), a file larger
    than :data:`ARTIFACT_BYTES` or unreadable is ignored."""
    import yaml  # the render directory needs PyYAML (manifest_dir); imported where it is read

    from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import (
        FLEET_DIR,
        _entries,
        _read_text,
        check_path,
        matches,
    )

    root = Path(os.path.abspath(render_dir))
    rel_dir = f"{FLEET_DIR}/{ROUTING_DIR}"
    check_path(root, f"{rel_dir}/_")
    found: list[Any] = []
    for entry in _entries(root, root / rel_dir):
        if not entry.name.endswith(".yaml") or ".configmap-" not in entry.name:
            continue
        if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_size > ARTIFACT_BYTES:
            continue
        try:
            obj = yaml.safe_load(_read_text(root / rel_dir / entry.name) or "")
        except (yaml.YAMLError, GpufleetError):
            continue
        if (
            not matches(obj, ROUTING_OWNER)
            or (obj.get("metadata") or {}).get("labels", {}).get(LABEL_FLEET) != fleet_name
        ):
            continue
        found.append(obj)
    return assemble_artifact(found, fleet_name)
