# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fleet identity filters: gpufleet.serving.fleet_identity, fleet_owned and fleet_pods.

Documentation is in the ``<filter>.yml`` sidecars beside this file; the logic is ``contract.FleetIdentity`` in
``plugins/module_utils/contract.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ADOPT_UNLABELLED_VAR,
    FLEET_NAME_VAR,
    LABEL_REPLICA,
    FleetIdentity,
    describe_object,
    object_labels,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.plugin_utils.filter import filter_map, gpufleet_filter

#: The label Kubernetes puts on a Job's pods (batch/v1).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def _identity(fleet: Any) -> FleetIdentity:
    fleet = to_plain(fleet, "fleet")
    if not isinstance(fleet, Mapping):
        raise GpufleetError("fleet must be fleet_info's fleet or fleet_identity's result ({name, adopt_unlabelled})")
    return FleetIdentity.parse(
        fleet.get("name"), fleet.get("adopt_unlabelled"), name_var=FLEET_NAME_VAR, adopt_var=ADOPT_UNLABELLED_VAR
    )


def _objects(value: Any) -> list[dict[str, Any]]:
    value = to_plain(value, "objects")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(o, dict) for o in value):
        raise GpufleetError("the input must be a list of Kubernetes objects")
    return value


@gpufleet_filter
def fleet_identity(name: Any, adopt_unlabelled: Any = None) -> dict[str, Any]:
    """``gpufleet_fleet_name | default(none) | gpufleet.serving.fleet_identity(gpufleet_adopt_unlabelled | default(none))``."""
    return FleetIdentity.parse(
        to_plain(name, FLEET_NAME_VAR), to_plain(adopt_unlabelled, ADOPT_UNLABELLED_VAR)
    ).to_dict()


@gpufleet_filter
def fleet_owned(objects: Any, fleet: Any, cluster: Any = None) -> list[dict[str, Any]]:
    """``found | gpufleet.serving.fleet_owned(fleet)``: the objects of ``fleet``; an unlabelled one nobody decided about
    is an error."""
    identity = _identity(fleet)
    split = identity.split(_objects(objects), object_labels)
    if split.undecided:
        where = None if cluster is None else str(to_plain(cluster, "cluster"))
        raise identity.unlabelled_error(describe_object(o, where) for o in split.undecided)
    return split.mine


@gpufleet_filter
def fleet_pods(pods: Any, owned: Any) -> list[dict[str, Any]]:
    """``pods | gpufleet.serving.fleet_pods(owned)``: the pods of the objects ``owned`` (a fleet's): serving pods by
    the replica they serve (namespace, ``gpufleet.io/replica``), cache Job pods by their Job."""
    objects = _objects(owned)
    replicas = set()
    jobs = set()
    for obj in objects:
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        replica = object_labels(obj).get(LABEL_REPLICA)
        if replica:
            replicas.add((namespace, str(replica)))
        if obj.get("kind") == "Job" and meta.get("name"):
            jobs.add((namespace, str(meta["name"])))
    out = []
    for pod in _objects(pods):
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        labels = object_labels(pod)
        if (namespace, str(labels.get(LABEL_REPLICA))) in replicas or (
            namespace,
            str(labels.get(JOB_NAME_LABEL)),
        ) in jobs:
            out.append(pod)
    return out


class FilterModule:
    """gpufleet.serving fleet identity filters."""

    def filters(self) -> dict[str, Any]:
        return filter_map(fleet_identity, fleet_owned, fleet_pods)
