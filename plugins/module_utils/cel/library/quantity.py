# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Kubernetes' quantity library (k8s.io/apiserver ``library/quantity.go``; the arithmetic in ``quantity.py``).
``isGreaterThan`` / ``isLessThan`` / ``compareTo`` also carry the semver library's overloads (one runtime orders
both). One :class:`Function` record a function.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import CelError
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import (
    STR_TRAVERSAL,
    Est,
    e_factor,
    first_traversal,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Arrival, Function, Overload
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import int_args, no_overload, str_args
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import (
    DECIMAL_EXPONENT,
    Quantity,
    QuantityError,
    is_quantity,
    parse_quantity,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.semver import Version

# pylint: disable=unidiomatic-typecheck


def _quantity(s: Any) -> Quantity:
    str_args("quantity", s)
    try:
        return parse_quantity(s)
    except QuantityError as e:
        raise CelError(str(e)) from None


def _is_quantity(s: Any) -> bool:
    str_args("isQuantity", s)
    return is_quantity(s)


def _ordered_pair(fn: str, a: Any, b: Any) -> int:
    ta, tb = type(a), type(b)
    if ta is Quantity and tb is Quantity:
        return a.cmp(b)
    if ta is Version and tb is Version:
        return a.compare(b)
    raise no_overload(fn, a, b)


def _q(fn: str, v: Any) -> Quantity:
    if type(v) is not Quantity:
        raise no_overload(fn, v)
    return v


def _q_add(fn: str, a: Any, b: Any) -> Quantity:
    q = _q(fn, a)
    if type(b) is Quantity:
        bq = b
    elif type(b) is int:
        bq = Quantity.from_int(b, DECIMAL_EXPONENT)
    else:
        raise no_overload(fn, a, b)
    try:
        return q.add(bq) if fn == "add" else q.sub(bq)
    except QuantityError as e:  # operands too far apart in scale (quantity.py refuses to materialise them)
        raise CelError(str(e)) from None


def _q_mul(a: Any, b: Any) -> Quantity:
    q = _q("mul", a)
    int_args("mul", b)
    return q.mul(b)


def _q_div(a: Any, b: Any, *r: Any) -> Quantity:
    q = _q("div", a)
    int_args("div", b, *r)
    if b == 0:
        raise CelError("division by zero error")
    places = r[0] if r else 4
    if not 0 <= places <= 10:
        raise CelError(f"the valid range for roundVal is 0 to 10 but {places} was passed")
    try:
        return q.div(b, places)
    except QuantityError as e:
        raise CelError(str(e)) from None


def _q_div_int(a: Any, b: Any) -> Quantity:
    q = _q("divInt", a)
    int_args("divInt", b)
    if b == 0:
        raise CelError("division by zero error")
    try:
        return q.div_int(b)
    except QuantityError as e:
        raise CelError(str(e)) from None


def _as_integer(v: Any) -> int:
    i, ok = _q("asInteger", v).as_int64()
    if not ok:
        raise CelError("cannot convert value to integer")
    return i


def _parse_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """``quantity()`` / ``isQuantity()`` (and semver's): a traversal of the string argument."""
    if not n.args:
        return None
    return e_factor(c.size_or_unknown(n.args[0]), STR_TRAVERSAL), None


_NOT_UP_TO_136 = "not in Kubernetes' quantity library up to 1.36 (k8s.io/apiserver v0.36.3 library/quantity.go)"

# Functions without a hook cost 1 (library/cost.go: a nominal cost of 1), statically and at run time.
FUNCTIONS = [
    Function(
        "quantity",
        "kubernetes.quantity",
        [(False, "string", "Q")],
        _quantity,
        estimate=_parse_estimate,
        runtime_cost=first_traversal,
    ),
    Function(
        "isQuantity",
        "kubernetes.quantity",
        [(False, "string", "bool")],
        _is_quantity,
        estimate=_parse_estimate,
        runtime_cost=first_traversal,
    ),
    Function("sign", "kubernetes.quantity", [(False, "Q", "int")], lambda v: _q("sign", v).sign()),
    Function(
        "isGreaterThan",
        "kubernetes.quantity",
        [(True, "Q,Q", "bool"), (True, "S,S", "bool")],
        lambda a, b: _ordered_pair("isGreaterThan", a, b) == 1,
    ),
    Function(
        "isLessThan",
        "kubernetes.quantity",
        [(True, "Q,Q", "bool"), (True, "S,S", "bool")],
        lambda a, b: _ordered_pair("isLessThan", a, b) == -1,
    ),
    Function(
        "compareTo",
        "kubernetes.quantity",
        [(True, "Q,Q", "int"), (True, "S,S", "int")],
        lambda a, b: _ordered_pair("compareTo", a, b),
    ),
    Function(
        "asApproximateFloat",
        "kubernetes.quantity",
        [(True, "Q", "double")],
        lambda v: _q("asApproximateFloat", v).as_approximate_float(),
    ),
    Function("asInteger", "kubernetes.quantity", [(True, "Q", "int")], _as_integer),
    Function("isInteger", "kubernetes.quantity", [(True, "Q", "bool")], lambda v: _q("isInteger", v).is_integer()),
    Function(
        "add", "kubernetes.quantity", [(True, "Q,Q", "Q"), (True, "Q,int", "Q")], lambda a, b: _q_add("add", a, b)
    ),
    Function(
        "sub", "kubernetes.quantity", [(True, "Q,Q", "Q"), (True, "Q,int", "Q")], lambda a, b: _q_add("sub", a, b)
    ),
    Function("mul", "kubernetes.quantity", [(True, "Q,int", "Q")], _q_mul, arrival=Arrival(None, _NOT_UP_TO_136)),
    Function(
        "div",
        "kubernetes.quantity",
        [(True, "Q,int", "Q"), (True, "Q,int,int", "Q")],
        _q_div,
        arrival=Arrival(None, _NOT_UP_TO_136),
    ),
    Function(
        "divInt", "kubernetes.quantity", [(True, "Q,int", "Q")], _q_div_int, arrival=Arrival(None, _NOT_UP_TO_136)
    ),
]
