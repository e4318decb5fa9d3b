# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""cel-go's ``ext.Sets``: ``sets.contains``, ``sets.equivalent``, ``sets.intersects`` and their cost trackers
(ext/sets.go). One :class:`Function` record a function.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import Est, e_add, e_factor, e_mul, rt_size
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Function, Overload
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.lists import list_arg
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import cel_eq


def _sets_contains(lst: Any, sublist: Any) -> bool:
    list_arg("sets.contains", lst)
    list_arg("sets.contains", sublist)
    return all(any(cel_eq(x, y) for y in lst) for x in sublist)


def _sets_equivalent(a: Any, b: Any) -> bool:
    return _sets_contains(a, b) and _sets_contains(b, a)


def _sets_intersects(a: Any, b: Any) -> bool:
    list_arg("sets.intersects", a)
    list_arg("sets.intersects", b)
    return any(cel_eq(x, y) for x in a for y in b)


def _sets_cost(factor: float) -> Any:
    return lambda args: 1 + int(rt_size(args[0]) * rt_size(args[1]) * factor)  # ext/sets.go trackSetsCost


def _sets_estimate(factor: float) -> Any:
    """ext/sets.go estimateSetsCost: the product of the two lists' sizes."""

    def estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
        if len(n.args) != 2:
            return None
        size = c.size_or_unknown
        return e_add(e_factor(e_mul(size(n.args[0]), size(n.args[1])), factor), (1, 1)), None

    return estimate


def _sets(name: str, runtime: Any, factor: float) -> Function:
    return Function(
        name,
        "ext.Sets",
        [(False, "list(A),list(A)", "bool")],
        runtime,
        estimate=_sets_estimate(factor),
        runtime_cost=_sets_cost(factor),
    )


FUNCTIONS = [
    _sets("sets.contains", _sets_contains, 1.0),
    _sets("sets.equivalent", _sets_equivalent, 2.0),
    _sets("sets.intersects", _sets_intersects, 1.0),
]
