# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Serving stack filters: gpufleet.serving.serving_stack_plan, serving_stack_release_action, serving_stack_adoptions,
serving_stack_objects, serving_stack_check and serving_stack_generator.

Documentation is in the ``<filter>.yml`` sidecars beside this file; the logic is
``plugins/module_utils/serving_stack.py``.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.plugin_utils.filter import filter_map, gpufleet_filter

# Every filter here takes its arguments as plain data (plain=True).


@gpufleet_filter(plain=True)
def serving_stack_plan(
    cluster: Any, classes: Any, versions: Any, options: Any = None, overrides: Any = None
) -> dict[str, Any]:
    """``cluster | gpufleet.serving.serving_stack_plan(classes, versions, options, overrides=...)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import plan_cluster

    return plan_cluster(cluster, classes, versions, {} if options is None else options, overrides)


@gpufleet_filter(plain=True)
def serving_stack_release_action(release: Any, deployed: Any = None, crds: Any = None) -> dict[str, Any]:
    """``release | gpufleet.serving.serving_stack_release_action(helm_info_status, marker_crds)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import release_action

    return release_action(release, deployed, crds)


@gpufleet_filter(plain=True)
def serving_stack_adoptions(release: Any, existing: Any = None, adopt: Any = True) -> list[str]:
    """``release | gpufleet.serving.serving_stack_adoptions(device_classes, adopt=true)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import adoptions

    if not isinstance(adopt, bool):
        raise GpufleetError(f"adopt must be true or false (got {adopt!r})")
    return adoptions(release, existing, adopt)


@gpufleet_filter(plain=True)
def serving_stack_objects(objects: Any, existing: Any = None) -> dict[str, Any]:
    """``plan.objects | gpufleet.serving.serving_stack_objects(existing)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import objects_to_apply

    return objects_to_apply(objects, existing)


@gpufleet_filter(plain=True)
def serving_stack_check(
    plan: Any, device_classes: Any = None, slices: Any = None, nodes: Any = None, daemonsets: Any = None
) -> dict[str, Any]:
    """``plan | gpufleet.serving.serving_stack_check(device_classes, resource_slices, nodes, daemonsets)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import check_cluster

    return check_cluster(plan, device_classes, slices, nodes, daemonsets)


@gpufleet_filter(plain=True)
def serving_stack_generator(clusters: Any, gitops: Any = None, fleet: Any = None) -> list[dict[str, Any]]:
    """``cluster_names | gpufleet.serving.serving_stack_generator(gitops_options, fleet=fleet_name)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import fleet_generator

    return fleet_generator(clusters, gitops, fleet)


class FilterModule:
    """gpufleet.serving serving stack filters."""

    def filters(self) -> dict[str, Any]:
        return filter_map(
            serving_stack_plan,
            serving_stack_release_action,
            serving_stack_adoptions,
            serving_stack_objects,
            serving_stack_check,
            serving_stack_generator,
        )
