# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Static cost estimation (cel-go ``checker/cost.go``) with the DRA size estimator of
``k8s.io/dynamic-resource-allocation`` ``cel/compile.go``: each call's own cost comes from its function record's
``estimate`` hook (``library/``); the coster walks the tree, sizes what it can and adds the arguments.
"""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.checker import Checker
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import (
    LIST_CREATE,
    MAP_CREATE,
    SCALAR_KINDS,
    U64,
    UNKNOWN,
    Est,
    e_add,
    e_mul,
    e_union,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Overload
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.registry import FUNCTIONS
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
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.types import DYN, T

# Per-device bounds the DRA size estimator declares (k8s.io/api resource/v1 types.go, v0.36.3):
_DRIVER_NAME_MAX = 63  # DriverNameMaxLength
_DOMAIN_MAX = 63  # DeviceMaxDomainLength
_ID_MAX = 32  # DeviceMaxIDLength
_ATTRS_PER_DEVICE = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
_ATTR_VALUE_MAX = 64  # DeviceAttributeMaxValueLength (max(64, ResourceSliceMaxAttributeValuesPerDevice=48) with
# list-type attributes: compile.go attributeTypeV136ListTypeAttributes)


class _Decl:
    """The slice of an apiserver DeclType the DRA size estimator walks (MaxElements, fields, key/element types)."""

    __slots__ = ("elem", "fields", "key", "max")

    def __init__(
        self, max_: int, fields: dict[str, _Decl] | None = None, key: _Decl | None = None, elem: _Decl | None = None
    ) -> None:
        self.max, self.fields, self.key, self.elem = max_, fields or {}, key, elem


_ATTR_DECL = _Decl(_ATTR_VALUE_MAX)
_DEVICE_DECL = _Decl(
    0,
    {
        "driver": _Decl(_DRIVER_NAME_MAX),
        "allowMultipleAllocations": _Decl(1),  # compile.go multiAllocType
        "attributes": _Decl(
            _ATTRS_PER_DEVICE,
            key=_Decl(_DOMAIN_MAX),
            elem=_Decl(_ATTRS_PER_DEVICE, key=_Decl(_ID_MAX), elem=_ATTR_DECL),
        ),
        "capacity": _Decl(
            _ATTRS_PER_DEVICE,
            key=_Decl(_DOMAIN_MAX),
            elem=_Decl(_ATTRS_PER_DEVICE, key=_Decl(_ID_MAX), elem=_Decl(0)),  # QuantityDeclType: MaxElements 0
        ),
    },
)


def dra_size(path: list[str] | None) -> Est | None:
    """compile.go sizeEstimator.EstimateSize: the maximum size of what a path through ``device`` reaches."""
    if not path or path[0] != "device":
        return None
    node = _DEVICE_DECL
    for name in path[1:]:
        if name in ("@items", "@values"):
            if node.elem is None:
                return None
            node = node.elem
        elif name == "@keys":
            if node.key is None:
                return None
            node = node.key
        else:
            f = node.fields.get(name)
            if f is None:
                if node.elem is _ATTR_DECL:  # any attribute of an attribute map has the attribute bound
                    node = _ATTR_DECL
                    continue
                return None
            node = f
    return (0, node.max)


class Entry:
    """cel-go entrySizeEstimate: sizes of a list's elements (key 1) or a map's keys and values."""

    __slots__ = ("key", "kind", "val")

    def __init__(self, kind: str, key: Est, val: Est) -> None:
        self.kind, self.key, self.val = kind, key, val

    def union(self, other: Entry | None) -> Entry | None:
        if other is None:
            return None
        return Entry(self.kind, e_union(self.key, other.key), e_union(self.val, other.val))


class _LocalVar:
    __slots__ = ("entry", "path", "size")

    def __init__(self, path: list[str] | None, size: Est | None, entry: Entry | None) -> None:
        self.path, self.size, self.entry = path, size, entry


def _index_class(ov: Overload | None) -> str:
    """Which of cel-go's indexing cases an overload of ``_[_]`` is (checker/cost.go: list or map element sizes)."""
    a0 = ov.args[0].kind if ov is not None and ov.args else ""
    return "index_list" if a0 == "list" else "index_map" if a0 == "map" else ""


class Coster:
    """checker/cost.go ``coster`` over this engine's AST (macros are Comp/Bind nodes, expanded here as cel-go
    expands them: all/exists/exists_one/map/filter and the two-variable forms)."""

    def __init__(self, checker: Checker) -> None:
        self.types = checker.types
        self.overloads = checker.overloads
        self.paths: dict[int, list[str] | None] = {}
        self.sizes: dict[int, Est] = {}
        self.entries: dict[int, Entry] = {}
        self.local: dict[str, list[_LocalVar]] = {}

    # -- bookkeeping
    def type_of(self, n: Node) -> T:
        return self.types.get(id(n), DYN)

    def _peek(self, name: str) -> _LocalVar | None:
        stack = self.local.get(name)
        return stack[-1] if stack else None

    def _push(self, name: str, var: _LocalVar) -> None:
        self.local.setdefault(name, []).append(var)

    def _pop(self, name: str) -> None:
        self.local[name].pop()

    def _path(self, n: Node) -> list[str] | None:
        if isinstance(n, Ident):
            v = self._peek(n.name)
            if v is not None:
                return v.path
        return self.paths.get(id(n))

    def size(self, n: Node) -> Est | None:
        """cel-go computeSize."""
        sz = self.sizes.get(id(n))
        if sz is not None:
            return sz
        if isinstance(n, Const):
            if n.kind in ("string", "bytes"):
                return (len(n.value), len(n.value))
            return (1, 1)
        if isinstance(n, ListLit):
            return (len(n.elems), len(n.elems))
        if isinstance(n, MapLit):
            return (len(n.entries), len(n.entries))
        dra = dra_size(self._path(n))
        if dra is not None:
            self.sizes[id(n)] = dra
            return dra
        if self.type_of(n).kind in SCALAR_KINDS:
            return (1, 1)
        if isinstance(n, Ident):
            v = self._peek(n.name)
            if v is not None and v.size is not None:
                return v.size
        return None

    def size_or_unknown(self, n: Node) -> Est:
        return self.size(n) or UNKNOWN

    def entry(self, n: Node) -> Entry | None:
        e = self.entries.get(id(n))
        if e is not None:
            return e
        if isinstance(n, Ident):
            v = self._peek(n.name)
            if v is not None:
                return v.entry
        return None

    def items_size(self, target: Node) -> Est:
        """library/cost.go listElementNode + sizeEstimate: the size of a list's elements, or unknown."""
        path = self._path(target)
        return (dra_size([*path, "@items"]) if path else None) or UNKNOWN

    # -- expressions
    def cost(self, n: Node) -> Est:
        if isinstance(n, Const):
            return (0, 0)
        if isinstance(n, Ident):
            if self._peek(n.name) is None:
                self.paths[id(n)] = [n.name]
            return (1, 1)
        if isinstance(n, Select):
            if n.test_only:
                return self.cost(n.operand)  # presence tests cost 0 in Kubernetes (PresenceTestHasCost(false))
            c = self.cost(n.operand)
            if self.type_of(n.operand).kind in ("map", "object", "param"):
                c = e_add(c, (1, 1))
            path = self._path(n.operand)
            self.paths[id(n)] = [*path, n.field] if path else [n.field]
            return c
        if isinstance(n, Index):
            return self._index(n)
        if isinstance(n, Call):
            return self._call(n)
        if isinstance(n, ListLit):
            total: Est = (0, 0)
            item: Est = (U64, 0) if n.elems else (0, 0)
            for e in n.elems:
                total = e_add(total, self.cost(e))
                item = e_union(item, self.size_or_unknown(e))
            self.entries[id(n)] = Entry("list", (1, 1), item)
            return e_add(total, (LIST_CREATE, LIST_CREATE))
        if isinstance(n, MapLit):
            total = (0, 0)
            ks: Est = (U64, 0) if n.entries else (0, 0)
            vs: Est = (U64, 0) if n.entries else (0, 0)
            for k, v in n.entries:
                total = e_add(e_add(total, self.cost(k)), self.cost(v))
                ks = e_union(ks, self.size_or_unknown(k))
                vs = e_union(vs, self.size_or_unknown(v))
            self.entries[id(n)] = Entry("map", ks, vs)
            return e_add(total, (MAP_CREATE, MAP_CREATE))
        if isinstance(n, Logic):  # overloads.LogicalAnd / LogicalOr
            lc, rc = self.cost(n.left), self.cost(n.right)
            return (lc[0], e_add(lc, rc)[1])
        if isinstance(n, Cond):  # overloads.Conditional
            cc, tc, fc = self.cost(n.cond), self.cost(n.if_true), self.cost(n.if_false)
            self.sizes[id(n)] = e_union(self.size_or_unknown(n.if_true), self.size_or_unknown(n.if_false))
            te = self.entry(n.if_true)
            ent = te.union(self.entry(n.if_false)) if te is not None else None
            if ent is not None:
                self.entries[id(n)] = ent
            return e_add(cc, e_union(tc, fc))
        if isinstance(n, Bind):  # costBind: the empty iteration range is a list creation (10)
            c = e_add((LIST_CREATE, LIST_CREATE), self.cost(n.init))
            self._push(n.var, _LocalVar(self._path(n.init), self.size(n.init), self.entry(n.init)))
            c = e_add(c, self.cost(n.body))
            self._pop(n.var)
            self._copy_sizes(n, n.body)
            return c
        if isinstance(n, Comp):
            return self._comp(n)
        return (0, 0)  # pragma: no cover - StructLit never type-checks

    def _copy_sizes(self, dst: Node, src: Node) -> None:
        sz = self.size(src)
        if sz is not None:
            self.sizes[id(dst)] = sz
        ent = self.entry(src)
        if ent is not None:
            self.entries[id(dst)] = ent

    def _index(self, n: Index) -> Est:
        c = e_add(e_add((1, 1), self.cost(n.operand)), self.cost(n.index))
        result: Est | None = None
        for ov in self.overloads.get(id(n), []):
            cls = _index_class(ov)
            if cls in ("index_list", "index_map"):
                ent = self.entry(n.operand)
                result = ent.val if ent is not None else None
                path = self._path(n.operand)
                sub = "@items" if cls == "index_list" else "@values"
                self.paths[id(n)] = [*path, sub] if path else [sub]
            if result is None:
                result = self.size(n)
        if result is not None:
            self.sizes[id(n)] = result
        return c

    def _call(self, n: Call) -> Est:
        fn = n.fn
        if fn in ("_?._", "_[?_]") and len(n.args) == 2:
            # Optional selection and indexing: estimated as the select / index they qualify like (1 + the operand,
            # + the index), the path continued so DRA's size estimator bounds what they reach. cel-go prices them as
            # calls of nominal cost 1 (checker/cost.go functionCost default); the result is the same.
            c = e_add(e_add((1, 1), self.cost(n.args[0])), self.cost(n.args[1]))
            path = self._path(n.args[0])
            key = n.args[1]
            sub = key.value if fn == "_?._" and isinstance(key, Const) else "@values"
            if fn == "_[?_]" and self.type_of(n.args[0]).kind == "list":
                sub = "@items"
            self.paths[id(n)] = [*path, sub] if path else [sub]
            return c
        if fn == "dyn" and n.target is None and len(n.args) == 1:  # maybeUnwrapDynCall
            c = self.cost(n.args[0])
            self._copy_sizes(n, n.args[0])
            return e_add((1, 1), c)
        arg_costs = [self.cost(a) for a in n.args]
        total: Est = (0, 0)
        if n.target is not None:
            total = self.cost(n.target)
        ovs: list[Overload | None] = list(self.overloads.get(id(n), [])) or [None]
        fn_cost: Est = (U64, 0)
        result: Est | None = None
        for ov in ovs:
            c, rs = self._function_cost(n, fn, ov, arg_costs)
            fn_cost = e_union(fn_cost, c)
            if rs is not None:
                result = rs if result is None else e_union(result, rs)
        if result is not None:
            self.sizes[id(n)] = result
        return e_add(total, fn_cost)

    def _function_cost(self, n: Call, fn: str, ov: Overload | None, arg_costs: list[Est]) -> tuple[Est, Est | None]:
        """The call's own cost (its function record's ``estimate`` hook; cel-go's default is 1) plus its arguments'."""
        argsum: Est = (0, 0)
        for a in arg_costs:
            argsum = e_add(argsum, a)
        record = FUNCTIONS.get(fn)
        estimated = record.estimate(self, n, ov) if record is not None and record.estimate is not None else None
        cost, result = estimated if estimated is not None else ((1, 1), None)
        return e_add(cost, argsum), result

    def _comp(self, n: Comp) -> Est:
        kind = n.kind
        total = self.cost(n.range)
        # accuInit: a literal (all, exists: bool; exists_one: int) costs 0; map/filter/transformList start from an
        # empty list literal (10) and transformMap from an empty map literal (30).
        if kind == "transformMap":
            total = e_add(total, (MAP_CREATE, MAP_CREATE))
        elif kind not in ("all", "exists", "exists_one"):
            total = e_add(total, (LIST_CREATE, LIST_CREATE))
        ent = self.entry(n.range)
        container = ent.kind if ent is not None else self.type_of(n.range).kind
        path = self._path(n.range)
        base = path or []
        if n.var2 is None:  # pushIterSingle
            if container == "list":
                self._push(n.var, _LocalVar([*base, "@items"], ent.val if ent else None, None))
            else:
                self._push(n.var, _LocalVar([*base, "@keys"], ent.key if ent else None, None))
        else:  # pushIterKey / pushIterValue
            key_sub, val_sub = ("@indices", "@items") if container == "list" else ("@keys", "@values")
            self._push(n.var, _LocalVar([*base, key_sub], ent.key if ent else None, None))
            self._push(n.var2, _LocalVar([*base, val_sub], ent.val if ent else None, None))
        step = self.cost(n.step)
        filt = self.cost(n.filter) if n.filter is not None else None
        elem_size = self.size_or_unknown(n.step) if kind in ("map", "transformList") else None
        if kind == "filter":
            elem_size = self.size_or_unknown(Ident(n.pos, n.var2 or n.var))
        if n.var2 is not None:
            self._pop(n.var2)
        self._pop(n.var)
        # loopCondition + loopStep, as the macros expand (parser/macro.go, ext/comprehensions.go)
        if kind == "all":  # @not_strictly_false(acc) ; acc && p
            loop: Est = (2, 2)
            body: Est = (1, e_add((1, 1), step)[1])
        elif kind == "exists":  # @not_strictly_false(!acc) ; acc || p
            loop, body = (3, 3), (1, e_add((1, 1), step)[1])
        elif kind == "exists_one":  # true ; p ? acc + 1 : acc
            loop, body = (0, 0), e_add(step, e_union((2, 2), (1, 1)))
        elif kind == "filter":  # true ; p ? acc + [x] : acc
            loop, body = (0, 0), e_add(step, e_union((13, 13), (1, 1)))
        else:
            # map / transformList: acc + [f] ; transformMap: cel.@mapInsert(acc, k, f)
            add = (3, 3) if kind == "transformMap" else (12, 12)
            body = e_add(step, add)
            if filt is not None:  # filter ? <step> : acc
                body = e_add(filt, e_union(body, (1, 1)))
            loop = (0, 0)
        result: Est = (2, 2) if kind == "exists_one" else (1, 1)  # acc == 1 | acc
        total = e_add(total, result)
        count = self.size_or_unknown(n.range)
        total = e_add(total, e_mul(count, e_add(body, loop)))
        if kind in ("all", "exists", "exists_one"):
            self.sizes[id(n)] = (1, 1)
        else:
            self.sizes[id(n)] = count
            if kind != "transformMap":
                item = e_union((0, 0), elem_size or UNKNOWN)
                self.entries[id(n)] = Entry("list", (1, 1), item)
        return total


def estimate_cost(ast: Node, checker: Checker) -> Est:
    """The worst-case (min, max) cost of a type-checked expression, as cel.Env.EstimateCost with DRA's estimator."""
    return Coster(checker).cost(ast)
