# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The CEL interpreter: a checked tree planned into closures (cel-go ``interpreter``), with cel-go's runtime cost
accounting when a selector needs it (comprehensions, calls whose result can outgrow their inputs). Each call runs its
function record's ``runtime`` and is charged its ``runtime_cost`` (``library/registry.py``'s tables).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.checker import TYPE_IDENTS, Checker
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import COST_LIMIT, CelError
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import (
    CONVERSIONS,
    COST_EXCEEDED,
    LIST_CREATE,
    MAP_CREATE,
    SCALAR_KINDS,
    cost_one,
    cost_zero,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.device import DomainMap
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.registry import FUNCTIONS, GROWTH, RUNTIME
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
    children,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.types import DYN
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import (
    CelOptional,
    CelType,
    UInt,
    _index,
    cel_eq,
    fmt_key,
    has_field,
    iterable,
    map_find,
    no_overload,
    select_field,
    type_name,
)

# pylint: disable=unidiomatic-typecheck


class Activation:
    """One evaluation: variable bindings and the running cost."""

    __slots__ = ("cost", "v")

    def __init__(self, variables: dict[str, Any]) -> None:
        self.v = variables
        self.cost = 0


def _charge(a: Activation, n: int) -> None:
    a.cost += n
    if a.cost > COST_LIMIT:
        raise CelError(COST_EXCEEDED)


_MISSING = object()


def _eq_const(other: Any, cv: Any, ctype: type, negate: bool) -> Any:
    """``x == <string/int literal>`` without the generic equality dispatch."""
    if negate:

        def ne_const(a: Activation) -> bool:
            v = other(a)
            if type(v) is ctype:
                return v != cv
            return not cel_eq(v, cv)

        return ne_const

    def eq_const(a: Activation) -> bool:
        v = other(a)
        if type(v) is ctype:
            return v == cv
        return cel_eq(v, cv)

    return eq_const


class Planner:
    def __init__(self, tracked: bool, checker: Checker | None = None) -> None:
        self.tracked = tracked
        self.locals: list[str] = []
        self.overloads = checker.overloads if checker is not None else {}

    def plan(self, n: Node) -> Any:
        if isinstance(n, Const):
            v = UInt(n.value) if n.kind == "uint" else n.value
            return lambda a: v
        if isinstance(n, Ident):
            return self._ident(n)
        if isinstance(n, Select):
            return self._select(n)
        if isinstance(n, Index):
            return self._index(n)
        if isinstance(n, Call):
            return self._call(n)
        if isinstance(n, Logic):
            return self._logic(n)
        if isinstance(n, Cond):
            return self._cond(n)
        if isinstance(n, ListLit) and n.optional:
            return self._opt_list(n)
        if isinstance(n, ListLit):
            fs = [self.plan(e) for e in n.elems]
            # cel-go's OptOptimize folds a list of constants into a constant (no creation cost at run time)
            if self.tracked and not all(isinstance(e, Const) for e in n.elems):

                def make_list_t(a: Activation) -> list:
                    _charge(a, LIST_CREATE)
                    return [f(a) for f in fs]

                return make_list_t
            return lambda a: [f(a) for f in fs]
        if isinstance(n, MapLit):
            kvs = [(self.plan(k), self.plan(v)) for k, v in n.entries]
            optional = n.optional
            tracked = self.tracked and not all(isinstance(x, Const) for kv in n.entries for x in kv)

            def make_map(a: Activation) -> dict:
                if tracked:
                    _charge(a, MAP_CREATE)
                out: dict = {}
                for i, (kf, vf) in enumerate(kvs):
                    k = kf(a)
                    if type(k) not in (str, int, UInt, bool):
                        raise CelError(f"unsupported key type: {type_name(k)}")
                    if map_find(out, k)[0]:
                        raise CelError(f"Failed with repeated key: {fmt_key(k)}")
                    v = vf(a)
                    if i in optional:  # {?k: v}: the entry only when v has a value (cel-go evalMap)
                        if type(v) is not CelOptional:
                            raise CelError(f"cannot initialize optional entry '{fmt_key(k)}' from non-optional value")
                        if not v.has:
                            continue
                        v = v.value
                    out[k] = v
                return out

            return make_map
        if isinstance(n, Bind):
            return self._bind(n)
        if isinstance(n, Comp):
            return self._comp(n)
        raise CelError("unsupported expression")  # pragma: no cover

    def _opt_list(self, n: ListLit) -> Any:
        """``[?x, y]``: an optional element is kept only when it has a value (cel-go evalList)."""
        fs = [(self.plan(e), i in n.optional) for i, e in enumerate(n.elems)]
        tracked = self.tracked

        def make_opt_list(a: Activation) -> list:
            if tracked:
                _charge(a, LIST_CREATE)
            out = []
            for f, opt in fs:
                v = f(a)
                if opt:
                    if type(v) is not CelOptional:
                        raise CelError("cannot initialize optional list element from non-optional value")
                    if not v.has:
                        continue
                    v = v.value
                out.append(v)
            return out

        return make_opt_list

    # -- leaves
    def _ident(self, n: Ident) -> Any:
        name = n.name
        if name not in self.locals and name != "device":
            tname = "type" if name == "type" else str(TYPE_IDENTS[name]) if name in TYPE_IDENTS else name
            if name in ("list", "map"):
                tname = name
            tv = CelType(tname)
            return lambda a: tv
        if self.tracked:

            def ident_t(a: Activation) -> Any:
                _charge(a, 1)
                return a.v[name]

            return ident_t
        return lambda a: a.v[name]

    def _select(self, n: Select) -> Any:
        of = self.plan(n.operand)
        field = n.field
        tracked = self.tracked
        if n.test_only:  # a presence test costs 0 in Kubernetes (PresenceTestHasCost(false)); its operand counts

            def has(a: Activation) -> bool:
                return has_field(of(a), field)

            return has

        def select(a: Activation) -> Any:
            v = of(a)
            if tracked:
                _charge(a, 1)
            if type(v) is dict or type(v) is DomainMap:
                try:
                    return v[field]
                except KeyError:
                    raise CelError(f"no such key: {field}") from None
            return select_field(v, field)

        return select

    def _index(self, n: Index) -> Any:
        of = self.plan(n.operand)
        tracked = self.tracked
        if isinstance(n.index, Const) and n.index.kind == "string":
            key = n.index.value

            def index_str(a: Activation) -> Any:
                c = of(a)
                if tracked:
                    _charge(a, 1)
                if type(c) is dict or type(c) is DomainMap:
                    try:
                        return c[key]
                    except KeyError:
                        raise CelError(f"no such key: {key}") from None
                return _index(c, key)

            return index_str
        xf = self.plan(n.index)

        def index(a: Activation) -> Any:
            c = of(a)
            i = xf(a)
            if tracked:
                _charge(a, 1)
            return _index(c, i)

        return index

    # -- calls
    def _call(self, n: Call) -> Any:
        fn = n.fn
        impl = RUNTIME[fn]
        nodes = ([n.target] if n.target is not None else []) + list(n.args)
        fs = [self.plan(x) for x in nodes]
        if fn in ("or", "orValue") and n.target is not None and len(fs) == 2:
            return self._opt_or(fn == "orValue", fs[0], fs[1])
        if self.tracked:
            return self._tracked_call(impl, fs, _runtime_cost_fn(fn, n.target is not None, nodes))
        if fn in ("_==_", "_!=_") and len(nodes) == 2:
            return self._equality(fn, nodes, fs)
        if len(fs) == 1:
            f0 = fs[0]
            return lambda a: impl(f0(a))
        if len(fs) == 2:
            f0, f1 = fs
            return lambda a: impl(f0(a), f1(a))
        if len(fs) == 3:
            f0, f1, f2 = fs
            return lambda a: impl(f0(a), f1(a), f2(a))
        return lambda a: impl(*[f(a) for f in fs])

    def _opt_or(self, or_value: bool, lf: Any, rf: Any) -> Any:
        """cel-go evalOptionalOr / evalOptionalOrValue: the alternative is evaluated only when the optional is none;
        a non-optional receiver (through dyn) is returned as is."""
        tracked = self.tracked

        def opt_or(a: Activation) -> Any:
            o = lf(a)
            if tracked:  # charged like a call (1); see Coster for the estimate
                _charge(a, 1)
            if type(o) is not CelOptional:
                return o
            if o.has:
                return o.value if or_value else o
            return rf(a)

        return opt_or

    @staticmethod
    def _tracked_call(impl: Any, fs: list[Any], cost: Any) -> Any:
        """A call with its cost charged *before* it runs (cel-go charges after it; the total and the verdict are
        the same), so a call over the limit never runs, and results too large to traverse are refused."""
        if cost is cost_one and len(fs) == 1:
            f0 = fs[0]

            def call_t1(a: Activation) -> Any:
                x = f0(a)
                a.cost += 1
                if a.cost > COST_LIMIT:
                    raise CelError(COST_EXCEEDED)
                return impl(x)

            return call_t1
        if len(fs) == 2:
            g0, g1 = fs

            def call_t2(a: Activation) -> Any:
                args = (g0(a), g1(a))
                a.cost += cost(args)
                if a.cost > COST_LIMIT:
                    raise CelError(COST_EXCEEDED)
                return impl(*args)

            return call_t2

        def call_t(a: Activation) -> Any:
            args = tuple([f(a) for f in fs])
            a.cost += cost(args)
            if a.cost > COST_LIMIT:
                raise CelError(COST_EXCEEDED)
            return impl(*args)

        return call_t

    @staticmethod
    def _equality(fn: str, nodes: list[Node], fs: list[Any]) -> Any:
        negate = fn == "_!=_"
        for const_i in (1, 0):
            c = nodes[const_i]
            if isinstance(c, Const) and c.kind in ("string", "int"):
                return _eq_const(fs[1 - const_i], c.value, str if c.kind == "string" else int, negate)
        f0, f1 = fs
        if negate:
            return lambda a: not cel_eq(f0(a), f1(a))
        return lambda a: cel_eq(f0(a), f1(a))

    # -- control flow
    def _logic(self, n: Logic) -> Any:
        lf, rf = self.plan(n.left), self.plan(n.right)
        short = n.op == "or"  # value that short-circuits
        name = "_||_" if short else "_&&_"

        def logic(a: Activation) -> Any:
            # cel-go evalAnd/evalOr: either side may decide; otherwise prefer the left error.
            lerr = rerr = None
            try:
                lv = lf(a)
            except CelError as e:
                lv, lerr = None, e
            if lv is short:
                return short
            try:
                rv = rf(a)
            except CelError as e:
                rv, rerr = None, e
            if rv is short:
                return short
            if lerr is None and rerr is None and type(lv) is bool and type(rv) is bool:
                return not short
            if lerr is not None:
                raise lerr
            if rerr is not None:
                raise rerr
            raise no_overload(name, lv, rv)

        return logic

    def _cond(self, n: Cond) -> Any:
        cf, tf, ff = self.plan(n.cond), self.plan(n.if_true), self.plan(n.if_false)

        def cond(a: Activation) -> Any:
            c = cf(a)
            if c is True:
                return tf(a)
            if c is False:
                return ff(a)
            raise no_overload("_?_:_", c)

        return cond

    def _bind(self, n: Bind) -> Any:
        init = self.plan(n.init)
        self.locals.append(n.var)
        body = self.plan(n.body)
        self.locals.pop()
        var = n.var

        def bind(a: Activation) -> Any:
            v = a.v
            old = v.get(var, _MISSING)
            v[var] = init(a)
            try:
                return body(a)
            finally:
                if old is _MISSING:
                    del v[var]
                else:
                    v[var] = old

        return bind

    def _comp(self, n: Comp) -> Any:
        rf = self.plan(n.range)
        self.locals.append(n.var)
        if n.var2:
            self.locals.append(n.var2)
        step = self.plan(n.step)
        filt = self.plan(n.filter) if n.filter is not None else None
        if n.var2:
            self.locals.pop()
        self.locals.pop()
        kind, var, var2 = n.kind, n.var, n.var2
        tracked = self.tracked

        def pairs(rng: Any) -> Any:
            rng = iterable(rng)
            if var2 is None:
                return ((x, None) for x in (list(rng) if isinstance(rng, dict) else rng))
            if isinstance(rng, dict):
                return list(rng.items())
            return list(enumerate(rng))

        # cel-go's per-iteration costs of the expanded macros (parser/macro.go, ext/comprehensions.go): the loop
        # condition (all: @not_strictly_false(acc) = 2, exists: ...(!acc) = 3, others: the literal true = 0), the
        # accumulator read in the step (1), the step's own calls and list creations, and the result (acc: 1,
        # exists_one's acc == 1: 2). See Coster._comp for the same figures in the estimate.
        cond_cost = 2 if kind == "all" else 3 if kind == "exists" else 0
        result_cost = 2 if kind == "exists_one" else 1
        # charged when an element is kept: acc + 1 (2), acc + [x] (13), acc + [f] (12), @mapInsert(acc, k, f) (3);
        # when it is not, only the accumulator read (1)
        kept_cost = {"exists_one": 2, "filter": 13, "transformMap": 3}.get(kind, 12)

        def comp(a: Activation) -> Any:
            v = a.v
            saved = (v.get(var, _MISSING), v.get(var2, _MISSING) if var2 else _MISSING)
            err: CelError | None = None
            try:
                rng = rf(a)
                if tracked:
                    _charge(a, result_cost)
                if kind == "all" or kind == "exists":
                    stop = kind == "exists"  # exists stops on true, all on false
                    decided = False
                    for x, y in pairs(rng):
                        if tracked:
                            _charge(a, cond_cost)  # the loop condition runs before every element
                            if decided:
                                break
                            _charge(a, 1)
                        elif decided:
                            break
                        v[var] = x
                        if var2:
                            v[var2] = y
                        try:
                            r = step(a)
                        except CelError as e:
                            err = err or e
                            continue
                        if r is stop:
                            decided = True
                            continue
                        if type(r) is not bool:
                            err = err or no_overload("_&&_" if not stop else "_||_", r)
                    if decided:
                        return stop
                    if err is not None:
                        raise err
                    return not stop
                if kind == "exists_one":
                    count = 0
                    for x, y in pairs(rng):
                        v[var] = x
                        if var2:
                            v[var2] = y
                        r = step(a)
                        if r is True:
                            count += 1
                        elif r is not False:
                            raise no_overload("_?_:_", r)
                        if tracked:
                            _charge(a, kept_cost if r is True else 1)
                    return count == 1
                if kind == "filter":
                    out = []
                    for x, y in pairs(rng):
                        v[var] = x
                        if var2:
                            v[var2] = y
                        r = step(a)
                        if r is True:
                            out.append(y if var2 else x)
                        elif r is not False:
                            raise no_overload("_?_:_", r)
                        if tracked:
                            _charge(a, kept_cost if r is True else 1)
                    return out
                # map / transformList / transformMap
                is_map = kind == "transformMap"
                out_map: dict = {}
                out_list: list = []
                for x, y in pairs(rng):
                    v[var] = x
                    if var2:
                        v[var2] = y
                    if filt is not None:
                        keep = filt(a)
                        if keep is False:
                            if tracked:
                                _charge(a, 1)
                            continue
                        if keep is not True:
                            raise no_overload("_?_:_", keep)
                    r = step(a)
                    if tracked:
                        _charge(a, kept_cost)
                    if is_map:
                        out_map[x] = r
                    else:
                        out_list.append(r)
                return out_map if is_map else out_list
            finally:
                for name, old in ((var, saved[0]), (var2, saved[1])):
                    if not name:
                        continue
                    if old is _MISSING:
                        v.pop(name, None)
                    else:
                        v[name] = old

        return comp


def _runtime_cost_fn(fn: str, member: bool, nodes: list[Node]) -> Any:
    """The cost function of one call, from its evaluated arguments (receiver first)."""
    if fn in CONVERSIONS and len(nodes) == 1 and isinstance(nodes[0], Const):
        return cost_zero  # OptOptimize: a conversion of a constant is folded into a constant
    if (
        fn == "@in"
        and isinstance(nodes[1], ListLit)
        and all(isinstance(e, Const) and e.kind in ("int", "uint", "double", "string", "bool") for e in nodes[1].elems)
    ):
        return cost_zero  # OptOptimize: membership in a constant list is a set lookup, not a call
    record = FUNCTIONS.get(fn)
    if record is None or record.runtime_cost is None:
        return cost_one
    if record.cost_member_only and not member:
        return cost_one  # runtimecost.go only sizes the member overload (matches_string)
    return record.runtime_cost


def _needs_cost_tracking(ast: Node, checker: Checker) -> bool:
    stack = [ast]
    while stack:
        n = stack.pop()
        if isinstance(n, Comp):
            return True
        if isinstance(n, Call):
            if n.fn in GROWTH:
                return True
            if n.fn == "_+_" and checker.types.get(id(n), DYN).kind not in SCALAR_KINDS:
                return True
        stack.extend(children(n))
    return False
