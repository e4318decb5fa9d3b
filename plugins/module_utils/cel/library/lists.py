# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Kubernetes' lists library (``isSorted``, ``sum``, ``min``, ``max``; ``indexOf`` / ``lastIndexOf`` of a list share
their record with the string overloads, ``strings.py``) and its cost estimate (library/cost.go).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import CelError
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import (
    STR_TRAVERSAL,
    Est,
    e_add,
    e_factor,
    e_mul,
    traversal_cost,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Function, Overload
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import arith, cel_cmp, is_num, no_overload

# pylint: disable=unidiomatic-typecheck


def list_arg(fn: str, v: Any) -> list | tuple:
    if not isinstance(v, (list, tuple)):
        raise no_overload(fn, v)
    return v


def _is_sorted(v: Any) -> bool:
    lst = list_arg("isSorted", v)
    return all(cel_cmp("isSorted", lst[i], lst[i + 1]) <= 0 for i in range(len(lst) - 1))


def _sum(v: Any) -> Any:
    lst = list_arg("sum", v)
    if not lst:
        return 0
    acc = lst[0]
    for e in lst[1:]:
        acc = arith("_+_", acc, e)
    if not is_num(acc):
        raise no_overload("sum", v)
    return acc


def _min_max(fn: str, v: Any) -> Any:
    lst = list_arg(fn, v)
    if not lst:
        raise CelError(f"{fn} called on empty list")
    best = lst[0]
    for e in lst[1:]:
        c = cel_cmp(fn, e, best)
        if (fn == "min" and c < 0) or (fn == "max" and c > 0):
            best = e
    return best


def list_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """library/cost.go: a list is traversed element by element (strings and bytes by their size); a string target
    is one traversal."""
    target = n.target
    if target is None:
        return None
    tt = c.type_of(target)
    if tt.kind == "list":
        el: Est = (1, 1)
        if tt.params[0].kind in ("string", "bytes"):
            el = e_add(el, e_factor(c.items_size(target), STR_TRAVERSAL))
        return e_mul(c.size_or_unknown(target), el), None
    return e_factor(c.size_or_unknown(target), STR_TRAVERSAL), None


def list_traversal_cost(args: tuple) -> int:
    return traversal_cost(args[0])


_TYPES = ("int", "uint", "double", "bool", "string", "bytes")

FUNCTIONS = [
    Function(
        "isSorted",
        "kubernetes.lists",
        [(True, f"list({t})", "bool") for t in _TYPES],
        _is_sorted,
        estimate=list_estimate,
        runtime_cost=list_traversal_cost,
    ),
    Function(
        "min",
        "kubernetes.lists",
        [(True, f"list({t})", t) for t in _TYPES],
        lambda v: _min_max("min", v),
        estimate=list_estimate,
        runtime_cost=list_traversal_cost,
    ),
    Function(
        "max",
        "kubernetes.lists",
        [(True, f"list({t})", t) for t in _TYPES],
        lambda v: _min_max("max", v),
        estimate=list_estimate,
        runtime_cost=list_traversal_cost,
    ),
    Function(
        "sum",
        "kubernetes.lists",
        [(True, f"list({t})", t) for t in ("int", "uint", "double")],
        _sum,
        estimate=list_estimate,
        runtime_cost=list_traversal_cost,
    ),
]
