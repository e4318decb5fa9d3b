# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Serving stack filters: gpufleet.serving.serving_stack_plan, serving_stack_release_action, serving_stack_adoptions,
serving_stack_objects and serving_stack_check.

Documentation is in the ``<filter>.yml`` sidecars beside this file; the logic is
``plugins/module_utils/serving_stack.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import (
    adoptions,
    check_cluster,
    objects_to_apply,
    plan_cluster,
    release_action,
)


def _wrap(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(
                *(to_plain(a, f"argument {i}") for i, a in enumerate(args)),
                **{k: to_plain(v, k) for k, v in kwargs.items()},
            )
        except GpufleetError as exc:
            raise AnsibleFilterError(f"{name}: {exc}") from exc

    run.__name__ = name
    run.__doc__ = func.__doc__
    return run


def serving_stack_plan(
    cluster: Any, classes: Any, versions: Any, options: Any = None, overrides: Any = None
) -> dict[str, Any]:
    """``cluster | gpufleet.serving.serving_stack_plan(classes, versions, options, overrides=...)``."""
    return plan_cluster(cluster, classes, versions, {} if options is None else options, overrides)


def serving_stack_release_action(release: Any, deployed: Any = None, crds: Any = None) -> dict[str, Any]:
    """``release | gpufleet.serving.serving_stack_release_action(helm_info_status, marker_crds)``."""
    return release_action(release, deployed, crds)


def serving_stack_adoptions(release: Any, existing: Any = None, adopt: Any = True) -> list[str]:
    """``release | gpufleet.serving.serving_stack_adoptions(device_classes, adopt=true)``."""
    if not isinstance(adopt, bool):
        raise GpufleetError(f"adopt must be true or false (got {adopt!r})")
    return adoptions(release, existing, adopt)


def serving_stack_objects(objects: Any, existing: Any = None) -> dict[str, Any]:
    """``plan.objects | gpufleet.serving.serving_stack_objects(existing)``."""
    return objects_to_apply(objects, existing)


def serving_stack_check(
    plan: Any, device_classes: Any = None, slices: Any = None, nodes: Any = None, daemonsets: Any = None
) -> dict[str, Any]:
    """``plan | gpufleet.serving.serving_stack_check(device_classes, resource_slices, nodes, daemonsets)``."""
    return check_cluster(plan, device_classes, slices, nodes, daemonsets)


class FilterModule:
    """gpufleet.serving serving stack filters."""

    def filters(self) -> dict[str, Any]:
        funcs: dict[str, Callable[..., Any]] = {
            "serving_stack_plan": serving_stack_plan,
            "serving_stack_release_action": serving_stack_release_action,
            "serving_stack_adoptions": serving_stack_adoptions,
            "serving_stack_objects": serving_stack_objects,
            "serving_stack_check": serving_stack_check,
        }
        return {name: _wrap(name, func) for name, func in funcs.items()}
