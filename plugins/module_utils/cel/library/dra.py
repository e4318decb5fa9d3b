# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""DRA's own functions (k8s.io/dynamic-resource-allocation ``cel/compile.go``): ``includes`` of list-type attributes."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import CelError
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import Est
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Arrival, Function, Overload
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import cel_eq

INCLUDES_MAX_LIST = 48  # resourceapi.ResourceSliceMaxAttributeValuesPerDevice (k8s.io/api v0.36.3 resource/v1)


def _includes(target: Any, v: Any) -> bool:
    if isinstance(target, (list, tuple)):
        if len(target) > INCLUDES_MAX_LIST:
            raise CelError(f"'includes' function cannot be applied to lists longer than {INCLUDES_MAX_LIST} values")
        return any(cel_eq(e, v) for e in target)
    return cel_eq(target, v)


def _includes_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """compile.go draCostEstimator: includes costs ResourceSliceMaxAttributeValuesPerDevice."""
    if n.target is None:
        return None
    return (INCLUDES_MAX_LIST, INCLUDES_MAX_LIST), None


FUNCTIONS = [
    # scalar == value, list contains value
    Function(
        "includes",
        "dra",
        [(True, "dyn,dyn", "bool")],
        _includes,
        estimate=_includes_estimate,
        arrival=Arrival(
            None,
            "DRA list-type attributes: only with the DRAListTypeAttributes feature gate, alpha and off by default "
            "since Kubernetes 1.36",
            gate="DRAListTypeAttributes",
        ),
    ),
]
