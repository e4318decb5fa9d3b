# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""cel-go's standard library as Kubernetes configures it: operators (homogeneous aggregate literals, cross-type
numeric comparisons), ``size``, the type conversions, ``dyn`` and ``type``. One :class:`Function` record a function.
"""

from __future__ import annotations

import decimal
import functools
import math
import re
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import (
    INT64_MAX,
    INT64_MIN,
    UINT64_MAX,
    CelError,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import (
    MAX_RESULT_SIZE,
    STR_TRAVERSAL,
    U64,
    Est,
    ceil_cost,
    e_add,
    e_factor,
    first_traversal,
    too_large,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Function, Overload
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.types import QUANTITY, SEMVER
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import (
    CelType,
    UInt,
    _in,
    _index,
    _neg,
    _not,
    _size,
    arith,
    cel_cmp,
    cel_eq,
    no_overload,
    type_name,
)

# pylint: disable=unidiomatic-typecheck

_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT_RE = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[Ii]nf(?:inity)?|NaN|nan)\Z")


def _to_int(v: Any) -> int:
    t = type(v)
    if t is int:
        return v
    if t is UInt:
        if v > INT64_MAX:
            raise CelError("integer overflow")  # cel-go uint64ToInt64Checked
        return int(v)
    if t is float:
        # cel-go doubleToInt64Checked: NaN, infinities and v <= MinInt64 or v >= MaxInt64 (as doubles) overflow
        if math.isnan(v) or v <= -9223372036854775808.0 or v >= 9223372036854775808.0:
            raise CelError("integer overflow")
        return int(v)
    if t is str:
        if not _INT_RE.match(v):
            raise CelError(f'strconv.ParseInt: parsing "{v}": invalid syntax')
        r = int(v)
        if not INT64_MIN <= r <= INT64_MAX:
            raise CelError(f'strconv.ParseInt: parsing "{v}": value out of range')
        return r
    raise no_overload("int", v)


def _to_uint(v: Any) -> UInt:
    t = type(v)
    if t is UInt:
        return v
    if t is int:
        if v < 0:
            raise CelError("unsigned integer overflow")  # cel-go int64ToUint64Checked
        return UInt(v)
    if t is float:
        if math.isnan(v) or not (0 <= v < 1.8446744073709552e19):  # cel-go doubleToUint64Checked
            raise CelError("unsigned integer overflow")
        return UInt(int(v))
    if t is str:
        if not re.fullmatch(r"\+?[0-9]+", v):
            raise CelError(f'strconv.ParseUint: parsing "{v}": invalid syntax')
        r = int(v)
        if r > UINT64_MAX:
            raise CelError(f'strconv.ParseUint: parsing "{v}": value out of range')
        return UInt(r)
    raise no_overload("uint", v)


def _to_double(v: Any) -> float:
    t = type(v)
    if t is float:
        return v
    if t is int or t is UInt:
        return float(v)
    if t is str:
        if not _FLOAT_RE.match(v):
            raise CelError(f'strconv.ParseFloat: parsing "{v}": invalid syntax')
        return float(v)
    raise no_overload("double", v)


def _go_format_double(f: float) -> str:
    """Go's strconv.FormatFloat(f, 'g', -1, 64), as cel-go's string(double)."""
    if math.isnan(f):
        return "NaN"
    if f == math.inf:
        return "+Inf"
    if f == -math.inf:
        return "-Inf"
    sign, digits, raw_exp = decimal.Decimal(repr(f)).as_tuple()
    if not isinstance(raw_exp, int):  # pragma: no cover - NaN and infinities are handled above
        raise CelError(f"cannot format {f!r}")
    exp = raw_exp
    neg = "-" if sign else ""
    ds = "".join(str(d) for d in digits).lstrip("0")
    if not ds:
        return neg + "0"
    stripped = ds.rstrip("0")
    exp += len(ds) - len(stripped)
    ds = stripped
    nd = len(ds)
    dp = nd + int(exp)
    x = dp - 1
    if x < -4 or x >= 6:
        mant = ds[0] + ("." + ds[1:] if nd > 1 else "")
        return f"{neg}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * (-dp)}{ds}"
    if dp >= nd:
        return f"{neg}{ds}{'0' * (dp - nd)}"
    return f"{neg}{ds[:dp]}.{ds[dp:]}"


def _to_string(v: Any) -> str:
    t = type(v)
    if t is str:
        return v
    if t is bool:
        return "true" if v else "false"
    if t is int or t is UInt:
        return str(int(v))
    if t is float:
        return _go_format_double(v)
    if t is bytes:
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            raise CelError("invalid UTF-8 in bytes, cannot convert to string") from None
    raise no_overload("string", v)


def _to_bytes(v: Any) -> bytes:
    if type(v) is bytes:
        return v
    if type(v) is str:
        return v.encode("utf-8")
    raise no_overload("bytes", v)


_BOOL_STRINGS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_BOOL_STRINGS.update({"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False})


def _to_bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    if type(v) is str:
        if v in _BOOL_STRINGS:
            return _BOOL_STRINGS[v]
        raise CelError(f"type conversion error from 'string' to 'bool': {v}")
    raise no_overload("bool", v)


def _type_of(v: Any) -> CelType:
    return CelType(type_name(v))


# --------------------------------------------------------------------------- cost hooks


def _add_cost(args: tuple) -> int:
    a, b = args
    ta, tb = type(a), type(b)
    if ta is tb and (ta is str or ta is bytes):
        if len(a) + len(b) > MAX_RESULT_SIZE:
            raise too_large("_+_", len(a) + len(b))
        return ceil_cost((len(a) + len(b)) * STR_TRAVERSAL)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) + len(b) > MAX_RESULT_SIZE:
        raise too_large("_+_", len(a) + len(b))
    return 1  # AddList and arithmetic: O(1) in cel-go


def _cmp_cost(args: tuple) -> int:
    a, b = args
    ta, tb = type(a), type(b)
    if ta is tb and (ta is str or ta is bytes):
        return ceil_cost(min(len(a), len(b)) * STR_TRAVERSAL)
    return 1


def _cmp_sized_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """checker/cost.go: comparing two strings or bytes traverses the smaller one."""
    if ov is None or len(n.args) != 2:
        return None
    smallest = min(c.size_or_unknown(n.args[0])[1], c.size_or_unknown(n.args[1])[1])
    return e_factor((1 if smallest > 0 else 0, smallest), STR_TRAVERSAL), None


def _ordering_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """``<`` ``<=`` ``>`` ``>=``: sized for string/string and bytes/bytes only."""
    a0 = ov.args[0].kind if ov is not None and ov.args else ""
    if a0 in ("string", "bytes") and ov is not None and ov.args[1].kind == a0:
        return _cmp_sized_estimate(c, n, ov)
    return None


def _equals_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """``==``: Kubernetes' quantity and semver equality cost 1 (library/cost.go); otherwise sized."""
    if len(n.args) == 2:
        lt, rt = c.type_of(n.args[0]), c.type_of(n.args[1])
        if lt == rt and lt in (QUANTITY, SEMVER):
            return (1, 1), None
    return _cmp_sized_estimate(c, n, ov)


def _add_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """``+`` of strings, bytes (a traversal of the result) and lists (1); the result's size is the sum."""
    a0 = ov.args[0].kind if ov is not None and ov.args else ""
    if a0 not in ("string", "bytes", "list") or len(n.args) != 2:
        return None
    rs = e_add(c.size_or_unknown(n.args[0]), c.size_or_unknown(n.args[1]))
    e0, e1 = c.entry(n.args[0]), c.entry(n.args[1])
    ent = e0.union(e1) if e0 is not None else None
    if ent is not None:
        c.entries[id(n)] = ent
    if a0 == "list":
        return (1, 1), rs
    return e_factor(rs, STR_TRAVERSAL), rs


def _in_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """``in`` a list: one comparison an element."""
    if ov is None or ov.args[1].kind != "list" or len(n.args) != 2:
        return None
    return e_factor(c.size_or_unknown(n.args[1]), 1), None


def _conversion_estimate(to: str) -> Any:
    """``string(bytes)`` / ``bytes(string)``: a traversal; the result's size in the other unit."""

    def estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
        a0 = ov.args[0].kind if ov is not None and ov.args else ""
        if a0 != ("bytes" if to == "string" else "string") or len(n.args) != 1:
            return None
        sz = c.size_or_unknown(n.args[0])
        rs = (sz[0], min(sz[1] * 4, U64)) if to == "bytes" else (sz[0] // 4, sz[1])
        return e_factor(sz, STR_TRAVERSAL), rs

    return estimate


# --------------------------------------------------------------------------- the functions

_NUMERIC = ("int", "uint", "double")
_ORDERED = ("bool", "int", "uint", "double", "string", "bytes")
_CROSS = (
    ("int", "uint"),
    ("int", "double"),
    ("uint", "int"),
    ("uint", "double"),
    ("double", "int"),
    ("double", "uint"),
)
_ORDERING = [(False, f"{t},{t}", "bool") for t in _ORDERED] + [(False, f"{a},{b}", "bool") for a, b in _CROSS]


def _arith_fn(op: str, types: tuple[str, ...], **hooks: Any) -> Function:
    return Function(op, "standard", [(False, f"{t},{t}", t) for t in types], functools.partial(arith, op), **hooks)


FUNCTIONS = [
    Function("!_", "standard", [(False, "bool", "bool")], _not),
    Function("-_", "standard", [(False, "int", "int"), (False, "double", "double")], _neg),
    Function("_==_", "standard", [(False, "A,A", "bool")], cel_eq, estimate=_equals_estimate, runtime_cost=_cmp_cost),
    Function(
        "_!=_",
        "standard",
        [(False, "A,A", "bool")],
        lambda a, b: not cel_eq(a, b),
        estimate=_cmp_sized_estimate,
        runtime_cost=_cmp_cost,
    ),
    Function(
        "@in",
        "standard",
        [(False, "A,list(A)", "bool"), (False, "A,map(A,B)", "bool")],
        _in,
        estimate=_in_estimate,
        runtime_cost=lambda args: len(args[1]) if isinstance(args[1], (list, tuple)) else 1,
    ),
    # the optional overloads are cel-go's optional library's (optional.py)
    Function(
        "_[_]",
        "standard",
        [
            (False, "list(A),int", "A"),
            (False, "map(A,B),A", "B"),
            (False, "optional(list(A)),int", "optional(A)"),
            (False, "optional(map(A,B)),A", "optional(B)"),
        ],
        _index,
    ),
    Function(
        "_+_",
        "standard",
        [(False, "list(A),list(A)", "list(A)")] + [(False, f"{t},{t}", t) for t in (*_NUMERIC, "string", "bytes")],
        functools.partial(arith, "_+_"),
        estimate=_add_estimate,
        runtime_cost=_add_cost,
    ),
    _arith_fn("_-_", _NUMERIC),
    _arith_fn("_*_", _NUMERIC),
    _arith_fn("_/_", _NUMERIC),
    _arith_fn("_%_", ("int", "uint")),
    Function(
        "_<_",
        "standard",
        _ORDERING,
        lambda a, b: cel_cmp("_<_", a, b) < 0,
        estimate=_ordering_estimate,
        runtime_cost=_cmp_cost,
    ),
    Function(
        "_<=_",
        "standard",
        _ORDERING,
        lambda a, b: cel_cmp("_<=_", a, b) <= 0,
        estimate=_ordering_estimate,
        runtime_cost=_cmp_cost,
    ),
    Function(
        "_>_",
        "standard",
        _ORDERING,
        lambda a, b: cel_cmp("_>_", a, b) > 0,
        estimate=_ordering_estimate,
        runtime_cost=_cmp_cost,
    ),
    Function(
        "_>=_",
        "standard",
        _ORDERING,
        lambda a, b: cel_cmp("_>=_", a, b) >= 0,
        estimate=_ordering_estimate,
        runtime_cost=_cmp_cost,
    ),
    Function(
        "size",
        "standard",
        [(member, t, "int") for member in (False, True) for t in ("string", "bytes", "list(A)", "map(A,B)")],
        _size,
    ),
    Function("int", "standard", [(False, t, "int") for t in ("int", "uint", "double", "string")], _to_int),
    Function("uint", "standard", [(False, t, "uint") for t in ("uint", "int", "double", "string")], _to_uint),
    Function("double", "standard", [(False, t, "double") for t in ("double", "int", "uint", "string")], _to_double),
    Function(
        "string",
        "standard",
        [(False, t, "string") for t in ("string", "int", "uint", "double", "bool", "bytes")],
        _to_string,
        estimate=_conversion_estimate("string"),
        runtime_cost=lambda args: first_traversal(args) if type(args[0]) is bytes else 1,
    ),
    Function(
        "bytes",
        "standard",
        [(False, "bytes", "bytes"), (False, "string", "bytes")],
        _to_bytes,
        estimate=_conversion_estimate("bytes"),
        runtime_cost=lambda args: first_traversal(args) if type(args[0]) is str else 1,
    ),
    Function("bool", "standard", [(False, "bool", "bool"), (False, "string", "bool")], _to_bool),
    Function("dyn", "standard", [(False, "A", "dyn")], lambda v: v),
    # type(x) has no declared overload: the checker types it as type(<x's type>)
    Function("type", "standard", [], _type_of),
]
