# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""String functions: the standard library's ``contains`` / ``startsWith`` / ``endsWith`` and cel-go's ``ext.Strings``
(version 2: ``charAt`` ... ``format``, ``strings.quote``), with Kubernetes' cost estimates (library/cost.go).
One :class:`Function` record a function; ``indexOf`` / ``lastIndexOf`` also take the lists library's list overloads
(one runtime serves both; the cost is the lists library's, ``lists.py``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import CelError
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import (
    MAX_RESULT_SIZE,
    STR_TRAVERSAL,
    U64,
    Est,
    ceil_cost,
    e_add,
    e_factor,
    e_mul,
    first_traversal,
    rt_size,
    too_large,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.core import _to_string
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Function, Overload
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.lists import (
    list_estimate,
    list_traversal_cost,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.nodes import Const
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import (
    CelType,
    UInt,
    cel_eq,
    int_args,
    no_overload,
    str_args,
    type_name,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import Quantity
from ansible_collections.gpufleet.serving.plugins.module_utils.semver import Version


# pylint: disable=unidiomatic-typecheck
def _contains(s: Any, sub: Any) -> bool:
    str_args("contains", s, sub)
    return sub in s


def _starts_with(s: Any, p: Any) -> bool:
    str_args("startsWith", s, p)
    return s.startswith(p)


def _ends_with(s: Any, p: Any) -> bool:
    str_args("endsWith", s, p)
    return s.endswith(p)


def _char_at(s: Any, i: Any) -> str:
    str_args("charAt", s)
    int_args("charAt", i)
    if i < 0 or i > len(s):
        raise CelError(f"index out of range: {i}")
    return s[i : i + 1]


def _index_of(s: Any, sub: Any, *start: Any) -> int:
    if isinstance(s, (list, tuple)) and not start:
        for i, e in enumerate(s):
            if cel_eq(e, sub):
                return i
        return -1
    str_args("indexOf", s, sub)
    int_args("indexOf", *start)
    off = start[0] if start else 0
    if off < 0 or off > len(s):
        raise CelError(f"index out of range: {off}")
    return s.find(sub, off)


def _last_index_of(s: Any, sub: Any, *end: Any) -> int:
    if isinstance(s, (list, tuple)) and not end:
        for i in range(len(s) - 1, -1, -1):
            if cel_eq(s[i], sub):
                return i
        return -1
    str_args("lastIndexOf", s, sub)
    int_args("lastIndexOf", *end)
    if not end:
        return s.rfind(sub)
    off = end[0]
    if off < 0 or off >= len(s):
        raise CelError(f"index out of range: {off}")
    return s.rfind(sub, 0, off + len(sub))


def _lower_ascii(s: Any) -> str:
    str_args("lowerAscii", s)
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in s)


def _upper_ascii(s: Any) -> str:
    str_args("upperAscii", s)
    return "".join(c.upper() if "a" <= c <= "z" else c for c in s)


def _replace(s: Any, old: Any, new: Any, *n: Any) -> str:
    str_args("replace", s, old, new)
    int_args("replace", *n)
    count = n[0] if n else -1
    if count == 0:
        return s
    if old == "":
        # Go: inserts new before every code point (and at the end), up to count times
        pieces = [new]
        done = 1
        for c in s:
            pieces.append(c)
            if count < 0 or done < count:
                pieces.append(new)
                done += 1
        return "".join(pieces)
    return s.replace(old, new, count if count > 0 else -1)


def _split(s: Any, sep: Any, *n: Any) -> list[str]:
    str_args("split", s, sep)
    int_args("split", *n)
    limit = n[0] if n else -1
    if limit == 0:
        return []
    if sep == "":
        chars = list(s)
        if 0 < limit < len(chars):
            return [*chars[: limit - 1], "".join(chars[limit - 1 :])]
        return chars
    if limit < 0:
        return s.split(sep)
    return s.split(sep, limit - 1)


def _substring(s: Any, start: Any, *end: Any) -> str:
    str_args("substring", s)
    int_args("substring", start, *end)
    stop = end[0] if end else len(s)
    if start < 0 or start > len(s):
        raise CelError(f"index out of range: {start}")
    if stop < 0 or stop > len(s):
        raise CelError(f"index out of range: {stop}")
    if start > stop:
        raise CelError(f"invalid substring range. start: {start}, end: {stop}")
    return s[start:stop]


_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _trim(s: Any) -> str:
    str_args("trim", s)
    return s.strip(_GO_SPACE)


def _join(lst: Any, *sep: Any) -> str:
    if not isinstance(lst, (list, tuple)):
        raise no_overload("join", lst, *sep)
    str_args("join", *lst, *sep)
    return (sep[0] if sep else "").join(lst)


def _quote(s: Any) -> str:
    str_args("strings.quote", s)
    out = ['"']
    for c in s:
        o = ord(c)
        if c in ('"', "\\"):
            out.append("\\" + c)
        elif c in "\a\b\f\n\r\t\v":
            out.append("\\" + "abfnrtv"["\a\b\f\n\r\t\v".index(c)])
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _format(fmt: Any, args: Any) -> str:
    str_args("format", fmt)
    if not isinstance(args, (list, tuple)):
        raise no_overload("format", fmt, args)
    out: list[str] = []
    i = 0
    argi = 0
    n = len(fmt)
    while i < n:
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        i += 1
        if i < n and fmt[i] == "%":
            out.append("%")
            i += 1
            continue
        prec = None
        if i < n and fmt[i] == ".":
            j = i + 1
            while j < n and fmt[j].isdigit():
                j += 1
            prec = int(fmt[i + 1 : j] or "0")
            i = j
        if i >= n:
            raise CelError("unexpected end of format string")
        verb = fmt[i]
        i += 1
        if argi >= len(args):
            raise CelError(f"index {argi} out of range")
        a = args[argi]
        argi += 1
        ta = type(a)
        if verb == "s":
            out.append(_format_s(a))
        elif verb == "d":
            if ta not in (int, UInt):
                raise CelError(
                    f"error during formatting: decimal clause can only be used on integers, was given {type_name(a)}"
                )
            out.append(str(int(a)))
        elif verb in "fe":
            if ta not in (int, UInt, float):
                raise CelError(
                    f"error during formatting: fixed-point clause can only be used on doubles, was given {type_name(a)}"
                )
            p = 6 if prec is None else prec
            out.append(f"{float(a):.{p}{verb}}")
        elif verb in "xXob":
            if ta in (int, UInt):
                base = {"x": "x", "X": "X", "o": "o", "b": "b"}[verb]
                out.append(("-" if a < 0 else "") + format(abs(int(a)), base))
            elif ta in (str, bytes) and verb in "xX":
                raw = a.encode("utf-8") if ta is str else a
                h = raw.hex()
                out.append(h.upper() if verb == "X" else h)
            else:
                raise CelError(f"error during formatting: only integers and strings can be formatted with {verb}")
        else:
            raise CelError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')
    return "".join(out)


def _format_s(a: Any) -> str:
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(_format_s(e) for e in a) + "]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{_format_s(k)}: {_format_s(v)}" for k, v in a.items()) + "}"
    if a is None:
        return "null"
    if type(a) is CelType:
        return a.name
    if type(a) in (Quantity, Version):
        return str(a)
    return _to_string(a)


# --------------------------------------------------------------------------- cost hooks


def _replace_cost(args: tuple) -> int:
    s = args[0]
    if len(args) >= 3 and type(s) is str and type(args[1]) is str and type(args[2]) is str:
        old, new = args[1], args[2]
        limit = args[3] if len(args) > 3 and type(args[3]) is int else -1
        count = (len(s) + 1) if old == "" else s.count(old)
        if limit >= 0:
            count = min(count, limit)
        result = len(s) + count * (len(new) - len(old))
        if result > MAX_RESULT_SIZE:
            raise too_large("replace", result)
    return ceil_cost(rt_size(s) * 2 * STR_TRAVERSAL)


def _join_cost(args: tuple) -> int:
    lst = args[0]
    sep = args[1] if len(args) > 1 else ""
    if isinstance(lst, (list, tuple)) and all(type(e) is str for e in lst) and type(sep) is str:
        result = sum(len(e) for e in lst) + len(sep) * max(len(lst) - 1, 0)
        if result > MAX_RESULT_SIZE:
            raise too_large("join", result)
        return ceil_cost(result * 2 * STR_TRAVERSAL)  # CallCost: the size of the result
    return 1


_FORMAT_PRECISION_RE = re.compile(r"%\.(\d+)")


def _format_cost(args: tuple) -> int:
    if type(args[0]) is str:
        for m in _FORMAT_PRECISION_RE.finditer(args[0]):
            if int(m.group(1)) > MAX_RESULT_SIZE:
                raise too_large("format", int(m.group(1)))
    return ceil_cost(rt_size(args[0]) * STR_TRAVERSAL)


def _contains_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    if n.target is None or len(n.args) != 1:
        return None
    size = c.size_or_unknown
    return e_mul(e_factor(size(n.target), STR_TRAVERSAL), e_factor(size(n.args[0]), STR_TRAVERSAL)), None


def _prefix_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """``startsWith`` / ``endsWith``: cel-go sizes the argument, not the target."""
    if len(n.args) != 1:
        return None
    return e_factor(c.size_or_unknown(n.args[0]), STR_TRAVERSAL), None


def _traversal_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """``lowerAscii`` / ``upperAscii`` / ``substring`` / ``trim``: one traversal; the result no larger."""
    if n.target is None:
        return None
    sz = c.size_or_unknown(n.target)
    return e_factor(sz, STR_TRAVERSAL), sz


def _replace_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """library/cost.go: two traversals, and the worst-case result size of replace()."""
    target, args = n.target, n.args
    if target is None or len(args) < 2:
        return None
    sz = c.size_or_unknown(target)
    old = c.size_or_unknown(args[0])
    new = c.size_or_unknown(args[1])
    if old[0] == 0:
        count_max, retained_max = (sz[1] + 1 if sz[1] < U64 else sz[1]), sz[1]
    elif new[1] <= old[0]:
        count_max, retained_max = 0, sz[1]
    else:
        count_max, retained_max = math.ceil(sz[1] / old[0]), 0
    if old[1] == 0:
        count_min, retained_min = (sz[0] + 1 if sz[0] < U64 else sz[0]), sz[0]
    elif old[1] <= new[0]:
        count_min, retained_min = 0, sz[0]
    else:
        count_min, retained_min = math.ceil(sz[0] / old[1]), 0
    result = e_add(e_mul((count_min, count_max), new), (retained_min, retained_max))
    return e_factor(sz, 2 * STR_TRAVERSAL), result


def _split_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    if n.target is None:
        return None
    sz = c.size_or_unknown(n.target)
    mx = sz[1]
    if len(n.args) > 1 and isinstance(n.args[1], Const) and n.args[1].kind == "int":
        mx = n.args[1].value % (1 << 64)  # Go: uint64(int64)
    return e_factor(sz, 2 * STR_TRAVERSAL), (0, mx)


def _join_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    target = n.target
    if target is None:
        return None
    list_size = c.size_or_unknown(target)
    jsz: Est = e_mul(list_size, c.items_size(target)) if c.type_of(target).kind == "list" else (0, 0)
    if n.args:
        seps = (max(list_size[0] - 1, 0), max(list_size[1] - 1, 0))
        jsz = e_add(jsz, e_mul(c.size_or_unknown(n.args[0]), seps))
    return e_factor(jsz, STR_TRAVERSAL), jsz


def _format_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    if n.target is None:
        return None
    return e_factor(c.size_or_unknown(n.target), STR_TRAVERSAL), None


def _quote_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    if len(n.args) != 1:
        return None
    sz = c.size_or_unknown(n.args[0])
    return e_factor(sz, STR_TRAVERSAL), (sz[0] + 2, min(sz[1] * 2 + 2, U64))


# --------------------------------------------------------------------------- the functions


FUNCTIONS = [
    Function(
        "contains",
        "standard",
        [(True, "string,string", "bool")],
        _contains,
        estimate=_contains_estimate,
        runtime_cost=lambda args: (
            ceil_cost(rt_size(args[0]) * STR_TRAVERSAL) * ceil_cost(rt_size(args[1]) * STR_TRAVERSAL)
        ),
    ),
    Function(
        "startsWith",
        "standard",
        [(True, "string,string", "bool")],
        _starts_with,
        estimate=_prefix_estimate,
        runtime_cost=first_traversal,
    ),
    Function(
        "endsWith",
        "standard",
        [(True, "string,string", "bool")],
        _ends_with,
        estimate=_prefix_estimate,
        runtime_cost=first_traversal,
    ),
    Function("charAt", "ext.Strings", [(True, "string,int", "string")], _char_at),
    Function(
        "indexOf",
        "ext.Strings",
        [(True, "string,string", "int"), (True, "string,string,int", "int"), (True, "list(A),A", "int")],
        _index_of,
        estimate=list_estimate,
        runtime_cost=list_traversal_cost,
    ),
    Function(
        "lastIndexOf",
        "ext.Strings",
        [(True, "string,string", "int"), (True, "string,string,int", "int"), (True, "list(A),A", "int")],
        _last_index_of,
        estimate=list_estimate,
        runtime_cost=list_traversal_cost,
    ),
    Function(
        "lowerAscii",
        "ext.Strings",
        [(True, "string", "string")],
        _lower_ascii,
        estimate=_traversal_estimate,
        runtime_cost=first_traversal,
    ),
    Function(
        "upperAscii",
        "ext.Strings",
        [(True, "string", "string")],
        _upper_ascii,
        estimate=_traversal_estimate,
        runtime_cost=first_traversal,
    ),
    Function(
        "replace",
        "ext.Strings",
        [(True, "string,string,string", "string"), (True, "string,string,string,int", "string")],
        _replace,
        estimate=_replace_estimate,
        runtime_cost=_replace_cost,
        growth=True,
    ),
    Function(
        "split",
        "ext.Strings",
        [(True, "string,string", "list(string)"), (True, "string,string,int", "list(string)")],
        _split,
        estimate=_split_estimate,
        runtime_cost=lambda args: ceil_cost(rt_size(args[0]) * 2 * STR_TRAVERSAL),
    ),
    Function(
        "substring",
        "ext.Strings",
        [(True, "string,int", "string"), (True, "string,int,int", "string")],
        _substring,
        estimate=_traversal_estimate,
        runtime_cost=first_traversal,
    ),
    Function(
        "trim",
        "ext.Strings",
        [(True, "string", "string")],
        _trim,
        estimate=_traversal_estimate,
        runtime_cost=first_traversal,
    ),
    Function(
        "join",
        "ext.Strings",
        [(True, "list(string)", "string"), (True, "list(string),string", "string")],
        _join,
        estimate=_join_estimate,
        runtime_cost=_join_cost,
        growth=True,
    ),
    Function(
        "format",
        "ext.Strings",
        [(True, "string,list(dyn)", "string")],
        _format,
        estimate=_format_estimate,
        runtime_cost=_format_cost,
        growth=True,
    ),
    Function(
        "strings.quote",
        "ext.Strings",
        [(False, "string", "string")],
        _quote,
        estimate=_quote_estimate,
        runtime_cost=first_traversal,
        growth=True,
    ),
]
