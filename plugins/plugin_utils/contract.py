# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The contract as the roles' YAML reads it: ``fleet_info``'s ``contract`` return value and the
``gpufleet.serving.contract`` lookup.

Controller side only. It joins the contract (``module_utils/contract.py``: labels, selectors, keys) with the backend
registry (``module_utils/render/backends/registry.py``: the kinds a render emits and the workload kinds awaited); the
contract itself stays at the bottom of ``module_utils`` and never imports the registry.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ANNOTATION_HYDRATED_BY,
    ANNOTATION_HYDRATED_SOURCE,
    ANNOTATION_HYDRATION_SECONDS,
    ANNOTATION_PLACEMENT,
    ANNOTATION_REVISION,
    ANNOTATION_SOURCE,
    CACHE_OWNER,
    COMPONENT_CACHE,
    LABEL_CACHE,
    LABEL_CLUSTER,
    LABEL_COMPONENT,
    LABEL_FLEET,
    MANAGED,
    NODE_POOL_LABEL,
    PLAN_RECORD_OWNER,
    SERVING_OWNER,
    STACK_OWNER,
    selector,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.registry import (
    serving_kinds,
    workload_kinds,
)


def role_contract() -> dict[str, Any]:
    """What the roles' YAML needs of the contract, returned by ``fleet_info`` as ``contract`` and by the
    ``gpufleet.serving.contract`` lookup: owner labels and selectors, label and annotation keys the roles read or
    write, the kinds a serving render emits (pruned in apply mode) and the workload kinds whose readiness is awaited."""
    return {
        "managed_selector": selector(MANAGED),
        "managed_labels": dict(MANAGED),
        "serving_owner_selector": selector(SERVING_OWNER),
        "serving_owner_labels": dict(SERVING_OWNER),
        "plan_record_selector": selector(PLAN_RECORD_OWNER),
        "cache_owner_selector": selector(CACHE_OWNER),
        "cache_owner_labels": dict(CACHE_OWNER),
        "label_component": LABEL_COMPONENT,
        "component_cache": COMPONENT_CACHE,
        "label_cache": LABEL_CACHE,
        "label_cluster": LABEL_CLUSTER,
        "label_fleet": LABEL_FLEET,
        "annotation_hydrated_by": ANNOTATION_HYDRATED_BY,
        "annotation_source": ANNOTATION_SOURCE,
        "annotation_revision": ANNOTATION_REVISION,
        "annotation_hydrated_source": ANNOTATION_HYDRATED_SOURCE,
        "annotation_hydration_seconds": ANNOTATION_HYDRATION_SECONDS,
        "stack_owner": dict(STACK_OWNER),
        "stack_owner_selector": selector(STACK_OWNER),
        "annotation_placement": ANNOTATION_PLACEMENT,
        "node_pool_label": NODE_POOL_LABEL,
        "serving_kinds": [k.to_dict() for k in serving_kinds()],
        "workload_kinds": [k.to_dict() for k in workload_kinds()],
    }
