# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""CEL runtime values and the core operations on them (cel-go ``common/types``): uint, optional and type values,
equality, ordering, arithmetic with int64/uint64 overflow checks, indexing, selection, ``in``, ``size``.

Exact type checks (``type(v) is int``) are deliberate throughout: CEL's types are not Python's subclass tree
(a bool is not an int, a UInt is not an int, a DomainMap is not a plain map), so isinstance() would be wrong.
"""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import (
    INT64_MAX,
    INT64_MIN,
    UINT64_MAX,
    CelError,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.device import _EMPTY, DomainMap
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import Quantity
from ansible_collections.gpufleet.serving.plugins.module_utils.semver import Version

# pylint: disable=unidiomatic-typecheck


class UInt(int):
    """A CEL ``uint`` value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class CelOptional:
    """A CEL optional value (cel-go types.Optional): ``CelOptional(v)`` has a value, :data:`OPTIONAL_NONE` has none."""

    __slots__ = ("has", "value")

    def __init__(self, value: Any = None, has: bool = True) -> None:
        self.value, self.has = value, has

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.has else "optional.none()"


OPTIONAL_NONE = CelOptional(None, has=False)


class CelType:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return self.name


def type_name(v: Any) -> str:
    t = type(v)
    if t is bool:
        return "bool"
    if t is int:
        return "int"
    if t is UInt:
        return "uint"
    if t is float:
        return "double"
    if t is str:
        return "string"
    if t is bytes:
        return "bytes"
    if v is None:
        return "null_type"
    if isinstance(v, (list, tuple)):
        return "list"
    if isinstance(v, dict):
        return "map"
    if t is Quantity:
        return "kubernetes.Quantity"
    if t is Version:
        return "kubernetes.Semver"
    if t is CelType:
        return "type"
    if t is CelOptional:
        return "optional_type"
    return t.__name__  # pragma: no cover


GO_TYPE_NAMES = {
    "bool": "types.Bool",
    "int": "types.Int",
    "uint": "types.Uint",
    "double": "types.Double",
    "string": "types.String",
    "bytes": "types.Bytes",
    "null_type": "types.Null",
    "kubernetes.Quantity": "cel.Quantity",
    "kubernetes.Semver": "cel.Semver",
    "type": "*types.Type",
}


def no_overload(fn: str, *args: Any) -> CelError:
    return CelError(f"no such overload: {fn}({', '.join(type_name(a) for a in args)})")


def is_num(v: Any) -> bool:
    t = type(v)
    return t is int or t is float or t is UInt


def cel_eq(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a is b
    if (ta is int or ta is float or ta is UInt) and (tb is int or tb is float or tb is UInt):
        return a == b
    if ta is str or ta is bytes:
        return ta is tb and a == b
    if a is None or b is None:
        return a is b
    if isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            return False
        return all(cel_eq(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        for k, v in a.items():
            found, bv = map_find(b, k)
            if not found or not cel_eq(v, bv):
                return False
        return True
    if ta is Quantity:
        return tb is Quantity and a.cmp(b) == 0
    if ta is Version:
        return tb is Version and a.compare(b) == 0
    if ta is CelType:
        return a == b
    if ta is CelOptional:  # cel-go Optional.Equal: none equals none, values compare by CEL equality
        return tb is CelOptional and a.has == b.has and (not a.has or cel_eq(a.value, b.value))
    return False  # pragma: no cover


def map_find(m: dict, k: Any) -> tuple[bool, Any]:
    tk = type(k)
    if tk is bool:
        for mk, mv in m.items():
            if type(mk) is bool and mk is k:
                return True, mv
        return False, None
    if tk is float and k.is_integer():
        k = int(k)
    if dict.__contains__(m, k):
        return True, dict.__getitem__(m, k)
    return False, None


def cel_cmp(fn: str, a: Any, b: Any) -> int:
    ta, tb = type(a), type(b)
    if (ta is int or ta is float or ta is UInt) and (tb is int or tb is float or tb is UInt):
        if (ta is float and math.isnan(a)) or (tb is float and math.isnan(b)):
            raise CelError("NaN values cannot be ordered")
        return (a > b) - (a < b)
    if ta is tb and ta in (str, bytes, bool):
        return (a > b) - (a < b)
    raise no_overload(fn, a, b)


def check_int(v: int) -> int:
    if INT64_MIN <= v <= INT64_MAX:
        return v
    raise CelError("integer overflow")


def check_uint(v: int) -> UInt:
    if 0 <= v <= UINT64_MAX:
        return UInt(v)
    raise CelError("unsigned integer overflow")


def arith(fn: str, a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        if fn == "_+_":
            return check_int(a + b)
        if fn == "_-_":
            return check_int(a - b)
        if fn == "_*_":
            return check_int(a * b)
        if fn == "_/_":
            if b == 0:
                raise CelError("division by zero")
            q = abs(a) // abs(b)
            return check_int(q if (a < 0) == (b < 0) else -q)
        if fn == "_%_":
            if b == 0:
                raise CelError("modulus by zero")
            if b == -1 and a == INT64_MIN:  # cel-go moduloInt64Checked: MinInt64 % -1 overflows in Go
                raise CelError("integer overflow")
            r = abs(a) % abs(b)
            return r if a >= 0 else -r
    elif ta is UInt and tb is UInt:
        if fn == "_+_":
            return check_uint(a + b)
        if fn == "_-_":
            return check_uint(a - b)
        if fn == "_*_":
            return check_uint(a * b)
        if fn == "_/_":
            if b == 0:
                raise CelError("division by zero")
            return UInt(a // b)
        if fn == "_%_":
            if b == 0:
                raise CelError("modulus by zero")
            return UInt(a % b)
    elif ta is float and tb is float:
        if fn == "_+_":
            return a + b
        if fn == "_-_":
            return a - b
        if fn == "_*_":
            return a * b
        if fn == "_/_":
            if b == 0.0:
                if math.isnan(a) or a == 0.0:
                    return math.nan
                return math.copysign(math.inf, a) * math.copysign(1.0, b)
            return a / b
    elif fn == "_+_" and ta is tb and ta in (str, bytes):
        return a + b
    elif fn == "_+_" and isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return [*a, *b]
    raise no_overload(fn, a, b)


def _neg(v: Any) -> Any:
    t = type(v)
    if t is int:
        return check_int(-v)
    if t is float:
        return -v
    raise no_overload("-_", v)


def _not(v: Any) -> bool:
    if type(v) is bool:
        return not v
    raise no_overload("!_", v)


def _in(v: Any, container: Any) -> bool:
    if isinstance(container, (list, tuple)):
        return any(cel_eq(v, e) for e in container)
    if isinstance(container, dict):
        return map_find(container, v)[0]
    raise no_overload("@in", v, container)


def _index(container: Any, idx: Any) -> Any:
    if type(container) is CelOptional:  # o[k] on an optional: optional_list_index_int / optional_map_index_value
        return opt_find(container, idx, "_[_]")
    if isinstance(container, dict):
        found, v = map_find(container, idx)
        if found:
            return v
        if type(container) is DomainMap:
            return _EMPTY
        raise CelError(f"no such key: {fmt_key(idx)}")
    if isinstance(container, (list, tuple)):
        ti = type(idx)
        if ti is float:
            if not idx.is_integer():
                raise CelError(f"unsupported index value {idx} in list")
            idx = int(idx)
        elif ti is not int and ti is not UInt:
            raise no_overload("_[_]", container, idx)
        if idx < 0 or idx >= len(container):
            raise CelError(f"index out of bounds: {idx}")
        return container[idx]
    raise no_overload("_[_]", container, idx)


def fmt_key(k: Any) -> str:
    if type(k) is bool:
        return "true" if k else "false"
    return str(k)


def select_field(v: Any, field: str) -> Any:
    if type(v) is CelOptional:  # o.f on an optional selects like o.?f (cel-go's optional qualifiers)
        return opt_find(v, field, "_?._")
    if isinstance(v, dict):
        if field in v:
            return v[field]
        raise CelError(f"no such key: {field}")
    raise CelError(f"type '{type_name(v)}' does not support field selection")


def has_field(v: Any, field: str) -> bool:
    if type(v) is CelOptional:  # has(opt.f): false on none, else the presence test on the value
        return v.has and has_field(v.value, field)
    if isinstance(v, dict):
        return field in v
    raise CelError(f"invalid type for field selection: {type_name(v)}")


def opt_find(container: Any, key: Any, fn: str) -> CelOptional:
    """``c.?f`` / ``c[?k]``, and ``o.f`` / ``o[k]`` on an optional ``o`` (cel-go's optional qualifiers): the value
    if present, else optional.none(); an optional container is unwrapped first (none stays none)."""
    if type(container) is CelOptional:
        if not container.has:
            return OPTIONAL_NONE
        container = container.value
    if isinstance(container, dict):
        found, v = map_find(container, key)
        if found:
            return CelOptional(v)
        if type(container) is DomainMap:  # upstream's mapper.Find: an unknown domain is found, as an empty map
            return CelOptional(_EMPTY)
        return OPTIONAL_NONE
    if isinstance(container, (list, tuple)):
        tk = type(key)
        if tk is float and key.is_integer():
            key = int(key)
        elif tk is not int and tk is not UInt:
            raise no_overload(fn, container, key)
        return CelOptional(container[key]) if 0 <= key < len(container) else OPTIONAL_NONE
    if fn in ("_?._", "_[?_]"):  # cel-go refQualify on a value that is no container: missingKey
        raise CelError(f"no such key: {fmt_key(key)}")
    raise no_overload(fn, container, key)


def is_zero(v: Any) -> bool:
    """cel-go traits.Zeroer.IsZeroValue (values that do not implement it are never zero)."""
    t = type(v)
    if v is None or t is bool:
        return v is None or v is False
    if t is int or t is UInt or t is float:
        return v == 0
    if t is str or t is bytes or isinstance(v, (list, tuple, dict)):
        return len(v) == 0
    return False


def opt_of_non_zero(v: Any) -> CelOptional:
    return OPTIONAL_NONE if is_zero(v) else CelOptional(v)


def opt_arg(fn: str, v: Any) -> CelOptional:
    if type(v) is not CelOptional:
        raise no_overload(fn, v)
    return v


def opt_value(v: Any) -> Any:
    o = opt_arg("value", v)
    if not o.has:
        raise CelError("optional.none() dereference")  # cel-go types.Optional.GetValue
    return o.value


def _size(v: Any) -> int:
    if isinstance(v, (str, bytes, list, tuple, dict)):
        return len(v)
    raise no_overload("size", v)


def iterable(v: Any) -> Any:
    if isinstance(v, (list, tuple, dict)):
        return v
    raise CelError(f"got '{GO_TYPE_NAMES.get(type_name(v), type_name(v))}', expected iterable type")


def str_args(fn: str, *args: Any) -> None:
    for a in args:
        if type(a) is not str:
            raise no_overload(fn, *args)


def int_args(fn: str, *args: Any) -> None:
    for a in args:
        if type(a) is not int:
            raise no_overload(fn, *args)
