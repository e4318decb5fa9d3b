# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The CEL type checker (cel-go ``checker``): cel-go's rules and messages over ``nodes.py``'s tree, the overloads
from the function registry (``library/registry.py``), what a Kubernetes version does not have yet refused with the
version it arrived in.
"""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import CheckError
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Overload
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.registry import DECLS, unavailable
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.nodes import (
    Bind,
    Call,
    Comp,
    Cond,
    Const,
    Ident,
    Index,
    ListLit,
    Logic,
    MapLit,
    Node,
    Select,
    StructLit,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.types import (
    BOOL,
    BYTES,
    DEVICE,
    DEVICE_FIELDS,
    DOUBLE,
    DYN,
    INT,
    NULL,
    PARAM_A,
    STRING,
    UINT,
    T,
    is_optional,
    optional_of,
)

TYPE_IDENTS = {
    "bool": BOOL,
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "string": STRING,
    "bytes": BYTES,
    "null_type": NULL,
    "list": T("list", (DYN,)),
    "map": T("map", (DYN, DYN)),
    "dyn": DYN,
}


def _resolve(t: T, subst: dict[str, T]) -> T:
    while t.kind == "param" and t.name in subst:
        t = subst[t.name]
    return t


def _assignable(expected: T, actual: T, subst: dict[str, T]) -> bool:
    expected = _resolve(expected, subst)
    actual = _resolve(actual, subst)
    if expected.kind == "param":
        subst[expected.name] = actual
        return True
    if actual.kind == "param":
        subst[actual.name] = expected
        return True
    if expected.kind == "dyn" or actual.kind == "dyn":
        return True
    if expected.kind != actual.kind or expected.name != actual.name:
        return False
    return all(_assignable(e, a, subst) for e, a in zip(expected.params, actual.params, strict=False))


def _substitute(t: T, subst: dict[str, T]) -> T:
    t = _resolve(t, subst)
    if t.kind == "param":
        return DYN
    if t.params:
        return T(t.kind, tuple(_substitute(p, subst) for p in t.params), t.name)
    return t


def _most_general(a: T, b: T) -> T:
    if a.kind == "dyn" or b.kind == "dyn":
        return DYN
    if a.params and a.kind == b.kind:
        return T(a.kind, tuple(_most_general(x, y) for x, y in zip(a.params, b.params, strict=False)), a.name)
    return a


class Checker:
    """Static type checking with cel-go's rules and messages.

    Records, per node, the checked type (``types``) and, per call, the overloads that matched (``overloads``):
    the cost estimator and the runtime cost model need both, as cel-go's need the checked AST.
    ``version`` is the cluster's Kubernetes (major, minor), or None for the engine's full environment.
    """

    def __init__(self, version: tuple[int, int] | None = None) -> None:
        self.scopes: list[dict[str, T]] = []
        self.version = version
        self.types: dict[int, T] = {}
        self.overloads: dict[int, list[Overload]] = {}

    def lookup_var(self, name: str) -> T | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name == "device":
            return DEVICE
        return None

    def check(self, n: Node) -> T:
        t = self._check(n)
        self.types[id(n)] = t
        return t

    def _check(self, n: Node) -> T:
        if isinstance(n, Const):
            return CONST_TYPES[n.kind]
        if isinstance(n, Ident):
            t = self.lookup_var(n.name)
            if t is not None:
                return t
            if n.name in TYPE_IDENTS:
                return T("type", (TYPE_IDENTS[n.name],))
            if n.name == "type":
                return T("type", (T("type"),))
            raise CheckError(f"undeclared reference to '{n.name}' (in container '')", n.pos)
        if isinstance(n, Select):
            qn = qualified(n)
            if qn is not None and self.lookup_var(qn.split(".", 1)[0]) is None:
                raise CheckError(f"undeclared reference to '{qn}' (in container '')", n.pos)
            ot = self.check(n.operand)
            ft = self._field_type(ot, n.field, n.pos)
            return BOOL if n.test_only else ft
        if isinstance(n, Index):
            return self._call_type("_[_]", False, [self.check(n.operand), self.check(n.index)], n.pos, n)
        if isinstance(n, Call):
            return self._check_call(n)
        if isinstance(n, Logic):
            lt, rt = self.check(n.left), self.check(n.right)
            fn = "_&&_" if n.op == "and" else "_||_"
            for t in (lt, rt):
                if t.kind not in ("bool", "dyn"):
                    raise CheckError(f"found no matching overload for '{fn}' applied to '({lt}, {rt})'", n.pos)
            return BOOL
        if isinstance(n, Cond):
            ct, tt, ft = self.check(n.cond), self.check(n.if_true), self.check(n.if_false)
            subst: dict[str, T] = {}
            if (
                ct.kind not in ("bool", "dyn")
                or not _assignable(PARAM_A, tt, subst)
                or not _assignable(PARAM_A, ft, subst)
            ):
                raise CheckError(f"found no matching overload for '_?_:_' applied to '({ct}, {tt}, {ft})'", n.pos)
            return _most_general(tt, ft) if tt != ft else tt
        if isinstance(n, ListLit):
            et: T | None = None
            for i, e in enumerate(n.elems):
                t = self.check(e)
                if i in n.optional:
                    t = self._unwrap_optional(t, e.pos)
                et = self._join(et, t, e.pos)
            return T("list", (et or DYN,))
        if isinstance(n, MapLit):
            kt: T | None = None
            vt: T | None = None
            for i, (k, v) in enumerate(n.entries):
                kt = self._join(kt, self.check(k), k.pos)
                t = self.check(v)
                if i in n.optional:
                    t = self._unwrap_optional(t, v.pos)
                vt = self._join(vt, t, v.pos)
            if kt is not None and kt.kind not in ("int", "uint", "string", "bool", "dyn"):
                raise CheckError(f"unsupported map key type: {kt}", n.pos)
            return T("map", (kt or DYN, vt or DYN))
        if isinstance(n, StructLit):
            raise CheckError(f"undeclared reference to '{n.type_name}' (in container '')", n.pos)
        if isinstance(n, Bind):
            it = self.check(n.init)
            self.scopes.append({n.var: it})
            try:
                return self.check(n.body)
            finally:
                self.scopes.pop()
        if isinstance(n, Comp):
            return self._check_comp(n)
        raise CheckError("unsupported expression", n.pos)  # pragma: no cover

    @staticmethod
    def _unwrap_optional(t: T, pos: int) -> T:
        """cel-go checkCreateList / checkCreateMap: an optional element or entry value must be optional(T) (or dyn)."""
        if is_optional(t):
            return t.params[0]
        if t.kind == "dyn":
            return t
        raise CheckError(f"expected type '{optional_of(t)}' but found '{t}'", pos)

    def _join(self, prev: T | None, cur: T, pos: int) -> T:
        if prev is None:
            return cur
        if _assignable(prev, cur, {}):
            return _most_general(prev, cur)
        raise CheckError(f"expected type '{prev}' but found '{cur}'", pos)

    def _field_type(self, ot: T, field: str, pos: int) -> T:
        if ot.kind == "dyn":
            return DYN
        if is_optional(ot):  # cel-go checkSelect: selection on optional(T) selects on T, the result is optional
            return optional_of(self._field_type(ot.params[0], field, pos))
        if ot.kind == "object":
            if field in DEVICE_FIELDS and not unavailable(field, self.version):
                return DEVICE_FIELDS[field]
            raise CheckError(f"undefined field '{field}'{unavailable(field, self.version)}", pos)
        if ot.kind == "map" and ot.params[0].kind in ("string", "dyn"):
            return ot.params[1]
        raise CheckError(f"type '{ot}' does not support field selection", pos)

    def _check_call(self, n: Call) -> T:
        fn = n.fn
        target = n.target
        if fn == "_?._":  # cel-go checkOptSelect: the field type (via an optional operand too), made optional
            ot = self.check(n.args[0])
            self.check(n.args[1])
            field = n.args[1]
            if not isinstance(field, Const):  # pragma: no cover - the parser always builds a string constant
                raise CheckError("unsupported expression", n.pos)
            ft = self._field_type(ot, field.value, field.pos)
            return ft if is_optional(ft) else optional_of(ft)
        if target is not None:
            qn = qualified(target)
            if qn is not None and f"{qn}.{fn}" in DECLS and self.lookup_var(qn.split(".", 1)[0]) is None:
                n.fn, n.target = f"{qn}.{fn}", None
                return self._check_call(n)
        arg_types = [self.check(a) for a in n.args]
        if target is not None:
            arg_types.insert(0, self.check(target))
        return self._call_type(fn, target is not None, arg_types, n.pos, n)

    def _call_type(self, fn: str, member: bool, arg_types: list[T], pos: int, node: Node | None = None) -> T:
        overloads = DECLS.get(fn)
        why_not = unavailable(fn, self.version)
        if overloads is None or why_not:
            if fn == "type" and not member and len(arg_types) == 1:
                return T("type", (arg_types[0],))
            raise CheckError(f"undeclared reference to '{fn}' (in container ''){why_not}", pos)
        results: list[T] = []
        matched: list[Overload] = []
        for ov in overloads:
            if ov.member != member or len(ov.args) != len(arg_types):
                continue
            subst: dict[str, T] = {}
            if all(_assignable(e, a, subst) for e, a in zip(ov.args, arg_types, strict=False)):
                results.append(_substitute(ov.result, subst))
                matched.append(ov)
        if node is not None:
            self.overloads[id(node)] = matched
        if not results:
            if member:
                sig = f"{arg_types[0]}.({', '.join(str(t) for t in arg_types[1:])})"
            else:
                sig = f"({', '.join(str(t) for t in arg_types)})"
            raise CheckError(f"found no matching overload for '{fn}' applied to '{sig}'", pos)
        first = results[0]
        return first if all(r == first for r in results) else DYN

    def _check_comp(self, n: Comp) -> T:
        rt = self.check(n.range)
        if rt.kind == "list":
            v1, v2 = (INT, rt.params[0]) if n.var2 else (rt.params[0], None)
        elif rt.kind == "map":
            v1, v2 = rt.params[0], (rt.params[1] if n.var2 else None)
        elif rt.kind == "dyn":
            v1, v2 = DYN, (DYN if n.var2 else None)
        else:
            raise CheckError(
                f"expression of type '{rt}' cannot be range of a comprehension (must be list, map, or dynamic)",
                n.range.pos,
            )
        scope = {n.var: v1}
        if n.var2:
            scope[n.var2] = v2 or DYN
        self.scopes.append(scope)
        try:
            if n.filter is not None:
                ft = self.check(n.filter)
                if ft.kind not in ("bool", "dyn"):
                    raise CheckError(f"found no matching overload for '_?_:_' applied to '({ft}, ...)'", n.filter.pos)
            st = self.check(n.step)
        finally:
            self.scopes.pop()
        if n.kind in ("all", "exists", "exists_one", "filter"):
            if st.kind not in ("bool", "dyn"):
                op = "_&&_" if n.kind == "all" else "_||_" if n.kind == "exists" else "_?_:_"
                raise CheckError(f"found no matching overload for '{op}' applied to '(bool, {st})'", n.step.pos)
            if n.kind == "filter":
                return T("list", (v1 if not n.var2 else v2 or DYN,))
            return BOOL
        if n.kind in ("map", "transformList"):
            return T("list", (st,))
        if n.kind == "transformMap":
            return T("map", (v1 if rt.kind == "map" else INT if rt.kind == "list" else DYN, st))
        raise CheckError(f"unsupported macro {n.kind}", n.pos)  # pragma: no cover


CONST_TYPES = {
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "string": STRING,
    "bytes": BYTES,
    "bool": BOOL,
    "null": NULL,
}


def qualified(n: Node) -> str | None:
    if isinstance(n, Ident):
        return n.name
    if isinstance(n, Select) and not n.test_only:
        base = qualified(n.operand)
        return None if base is None else f"{base}.{n.field}"
    return None
