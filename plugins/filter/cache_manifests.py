# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Model cache filters: gpufleet.serving.cache_manifests, cache_staged, cache_follow_removal, cache_job_status, cache_status_summary, and the
apply-time decisions cache_job_action, cache_jobs_to_delete and cache_adopted_volume.

Documentation is in the ``<filter>.yml`` sidecars beside this file; the logic is
``plugins/module_utils/render/caches.py`` and ``plugins/module_utils/cache_apply.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.plugin_utils.filter import filter_map, gpufleet_filter


def _plain(value: Any) -> Any:
    """Plain Python containers and scalars (Ansible may hand over tagged or lazy ones)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    for kind in (str, int, float):
        if isinstance(value, kind):
            return kind(value)
    return value


@gpufleet_filter
def cache_manifests(
    cache: Any,
    cluster: Any = None,
    hydrator: Any = None,
    storage_class: Any = None,
    options: Any = None,
    adopted_check: Any = False,
    fleet: Any = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """``cache | gpufleet.serving.cache_manifests(cluster, hydrator=..., fleet=gpufleet_fleet_name, image=...)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.adapters import annotate_adapter_objects
    from ansible_collections.gpufleet.serving.plugins.module_utils.cache_placement import ADAPTER_KEY
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import FleetIdentity
    from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import HydrationOptions, cache_objects

    if cluster is None:
        raise GpufleetError("cluster is required (a cluster name or a fleet_info cluster)")
    if fleet is None:
        raise GpufleetError(
            "fleet is required: the fleet's name (gpufleet_fleet_name), the gpufleet.io/fleet label of every object"
        )
    if not isinstance(hydrator, str) or not hydrator.strip():
        raise GpufleetError(
            "hydrator is required: the hydrator program's text, "
            "e.g. hydrator=lookup('ansible.builtin.file', 'hydrate.py', rstrip=false)"
        )
    if storage_class is not None and not isinstance(storage_class, str):
        raise GpufleetError(f"storage_class must be a string (got {type(storage_class).__name__})")
    if options is not None and not isinstance(options, Mapping):
        raise GpufleetError("options must be a mapping of option name to value")
    if not isinstance(adopted_check, bool):
        raise GpufleetError(f"adopted_check must be true or false (got {adopted_check!r})")
    name = FleetIdentity.parse(_plain(fleet), name_var="fleet").name
    opts = HydrationOptions.from_mapping({**_plain(options or {}), **_plain(kwargs)})
    plain = _plain(cache)
    objects = cache_objects(
        plain,
        _plain(cluster),
        str(hydrator),
        storage_class=None if storage_class is None else str(storage_class),
        options=opts,
        adopted_check=adopted_check,
        fleet=name,
    )
    adapter = plain.get(ADAPTER_KEY) if isinstance(plain, Mapping) else None
    if isinstance(adapter, Mapping):  # a deployment's LoRA adapter (cache_staged adds them): an adapter artifact
        objects = annotate_adapter_objects(objects, adapter.get("revision"))
    return objects


@gpufleet_filter
def cache_staged(caches: Any, deployments: Any = None, replicas: Any = None) -> list[dict[str, Any]]:
    """``fleet.caches | gpufleet.serving.cache_staged(fleet.deployments, plan.replicas)``: each cache's
    ``candidate_clusters`` narrowed to where it is staged (``follow`` caches: where their deployments are placed)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.adapters import staged_adapter_caches
    from ansible_collections.gpufleet.serving.plugins.module_utils.cache_placement import staged_clusters

    if isinstance(caches, (str, Mapping)) or not isinstance(caches, (list, tuple)):
        raise GpufleetError("the input must be the fleet's caches (fleet_info's fleet.caches)")
    if isinstance(deployments, (str, Mapping)) or not isinstance(deployments, (list, tuple)):
        raise GpufleetError("deployments must be the fleet's deployments (fleet_info's fleet.deployments)")
    if replicas is not None and (isinstance(replicas, (str, Mapping)) or not isinstance(replicas, (list, tuple))):
        raise GpufleetError("replicas must be the plan's replica records, or none when there is no plan")
    plan = None if replicas is None else _plain(list(replicas))
    # The fleet's caches, then each deployment's LoRA adapters as caches that follow the deployment (adapters.py).
    return staged_clusters(_plain(list(caches)), _plain(list(deployments)), plan) + staged_adapter_caches(
        _plain(list(deployments)), plan
    )


def _records(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, Mapping)) or not isinstance(value, (list, tuple)):
        raise GpufleetError(f"{what} must be a list (got {type(value).__name__})")
    return _plain(list(value))


@gpufleet_filter
def cache_follow_removal(
    cache: Any,
    cluster: Any = None,
    objects: Any = None,
    users: Any = None,
    deployments: Any = None,
    replicas: Any = None,
    fleet: Any = None,
    adopt_unlabelled: Any = None,
    outside_play: Any = None,
    allow_partial_play: Any = False,
) -> dict[str, Any]:
    """``cache | gpufleet.serving.cache_follow_removal(inventory_hostname, objects, users, ...)``: whether a follow
    cache's objects are deleted from a cluster the placement left."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.cache_placement import follow_removal
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import FleetIdentity, parse_adopt

    if not isinstance(cache, Mapping):
        raise GpufleetError("the input must be one cache as cache_staged returns it")
    if not isinstance(cluster, str) or not cluster:
        raise GpufleetError("cluster is required (the cluster's inventory name)")
    if not isinstance(allow_partial_play, bool):
        raise GpufleetError(f"allow_partial_play must be true or false (got {allow_partial_play!r})")
    try:
        adopt = parse_adopt(_plain(adopt_unlabelled))
    except ValueError as exc:
        raise GpufleetError(f"adopt_unlabelled {exc}") from exc
    name = FleetIdentity.parse(_plain(fleet), name_var="fleet").name
    return follow_removal(
        _plain(cache),
        cluster,
        _records(objects, "objects"),
        _records(users, "users"),
        deployments=_records(deployments, "deployments"),
        replicas=_records(replicas, "replicas"),
        fleet=name,
        adopt_unlabelled=adopt,
        outside_play=[str(c) for c in _records(outside_play, "outside_play")],
        allow_partial_play=allow_partial_play,
    )


@gpufleet_filter
def cache_job_status(job: Any, pods: Any = None) -> dict[str, Any]:
    """``job_info.resources | first | default(none) | gpufleet.serving.cache_job_status(pods_info.resources)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import job_status

    if job is not None and not isinstance(job, Mapping):
        raise GpufleetError(f"the input must be a Job object or none (got {type(job).__name__})")
    if pods is not None and (isinstance(pods, (str, Mapping)) or not isinstance(pods, (list, tuple))):
        raise GpufleetError(f"pods must be a list of Pod objects (got {type(pods).__name__})")
    return job_status(None if job is None else _plain(job), _plain(pods or []))


@gpufleet_filter
def cache_status_summary(statuses: Any, caches: Any = None, hosts: Any = None) -> dict[str, Any]:
    """``statuses | gpufleet.serving.cache_status_summary(caches=fleet.caches, hosts=ansible_play_hosts_all)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import summarize_status

    return summarize_status(
        _plain(statuses), None if caches is None else _plain(caches), None if hosts is None else _plain(hosts)
    )


@gpufleet_filter
def cache_job_action(before: Any, job_name: Any = None, done_by: Any = "", retry_failed: Any = False) -> dict[str, Any]:
    """``before | gpufleet.serving.cache_job_action(job.metadata.name, done_by=..., retry_failed=...)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.cache_apply import job_decision

    if not isinstance(retry_failed, bool):
        raise GpufleetError(f"retry_failed must be true or false (got {retry_failed!r})")
    return job_decision(_plain(before), _plain(job_name), str(done_by or ""), retry_failed)


@gpufleet_filter
def cache_jobs_to_delete(others: Any, job_name: Any = None, before: Any = None) -> list[str]:
    """``other_jobs.resources | gpufleet.serving.cache_jobs_to_delete(job.metadata.name, before)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.cache_apply import jobs_to_delete

    if isinstance(others, (str, Mapping)) or not isinstance(others, (list, tuple)):
        raise GpufleetError("the input must be a list of Job objects")
    return jobs_to_delete(_plain(list(others)), _plain(job_name), _plain(before))


@gpufleet_filter
def cache_pvc_change_error(existing: Any, desired: Any = None, cluster: Any = "", adopt_unlabelled: Any = None) -> str:
    """``pvc_info.resources | gpufleet.serving.cache_pvc_change_error(pvc, inventory_hostname, adopt_unlabelled=...)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.cache_apply import pvc_change_error
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import parse_adopt

    if isinstance(existing, (str, Mapping)) or not isinstance(existing, (list, tuple)):
        raise GpufleetError("the input must be a list of PersistentVolumeClaim objects")
    try:
        adopt = parse_adopt(_plain(adopt_unlabelled))
    except ValueError as exc:
        raise GpufleetError(f"adopt_unlabelled {exc}") from exc
    return pvc_change_error(_plain(list(existing)), _plain(desired), str(cluster), adopt)


@gpufleet_filter
def cache_adopted_volume(
    pvcs: Any, cache: Any = None, cluster: Any = None, adopted_ready: Any = (), verify: Any = False
) -> dict[str, Any]:
    """``pvc_info.resources | gpufleet.serving.cache_adopted_volume(cache, cluster, adopted_ready=..., verify=...)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.cache_apply import adopted_volume_decision

    if isinstance(pvcs, (str, Mapping)) or not isinstance(pvcs, (list, tuple)):
        raise GpufleetError("the input must be a list of PVC objects")
    if not isinstance(cache, Mapping) or not isinstance((cache.get("storage") or {}).get("claim_name"), str):
        raise GpufleetError("cache must be a cache with storage.claim_name (existing_pvc)")
    if not isinstance(verify, bool):
        raise GpufleetError(f"verify must be true or false (got {verify!r})")
    return adopted_volume_decision(
        _plain(list(pvcs)),
        cache=str(cache.get("name")),
        claim=str(cache["storage"]["claim_name"]),
        namespace=str(cache.get("namespace", "default")),
        cluster=str(cluster),
        adopted_ready=[str(name) for name in _plain(list(adopted_ready or []))],
        verify=verify,
    )


class FilterModule:
    """gpufleet.serving model cache filters."""

    def filters(self) -> dict[str, Any]:
        return filter_map(
            cache_manifests,
            cache_staged,
            cache_follow_removal,
            cache_job_status,
            cache_status_summary,
            cache_job_action,
            cache_jobs_to_delete,
            cache_adopted_volume,
            cache_pvc_change_error,
        )
