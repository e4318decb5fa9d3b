# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The CEL syntax tree (cel-go ``common/ast``): the parser builds it, the checker, coster and interpreter walk it."""

from __future__ import annotations

from typing import Any


class Node:
    __slots__ = ("pos",)
    pos: int


class Const(Node):
    __slots__ = ("kind", "value")

    def __init__(self, pos: int, kind: str, value: Any) -> None:
        self.pos, self.kind, self.value = pos, kind, value


class Ident(Node):
    __slots__ = ("name",)

    def __init__(self, pos: int, name: str) -> None:
        self.pos, self.name = pos, name


class Select(Node):
    __slots__ = ("field", "operand", "test_only")

    def __init__(self, pos: int, operand: Node, field: str, test_only: bool = False) -> None:
        self.pos, self.operand, self.field, self.test_only = pos, operand, field, test_only


class Index(Node):
    __slots__ = ("index", "operand")

    def __init__(self, pos: int, operand: Node, index: Node) -> None:
        self.pos, self.operand, self.index = pos, operand, index


class Call(Node):
    __slots__ = ("args", "fn", "target")

    def __init__(self, pos: int, fn: str, target: Node | None, args: list[Node]) -> None:
        self.pos, self.fn, self.target, self.args = pos, fn, target, args


class ListLit(Node):
    """``optional``: the indices of optional elements (``[?x]``)."""

    __slots__ = ("elems", "optional")

    def __init__(self, pos: int, elems: list[Node], optional: frozenset[int] = frozenset()) -> None:
        self.pos, self.elems, self.optional = pos, elems, optional


class MapLit(Node):
    """``optional``: the indices of optional entries (``{?k: v}``)."""

    __slots__ = ("entries", "optional")

    def __init__(self, pos: int, entries: list[tuple[Node, Node]], optional: frozenset[int] = frozenset()) -> None:
        self.pos, self.entries, self.optional = pos, entries, optional


class StructLit(Node):
    __slots__ = ("fields", "type_name")

    def __init__(self, pos: int, type_name: str, fields: list[tuple[str, Node]]) -> None:
        self.pos, self.type_name, self.fields = pos, type_name, fields


class Cond(Node):
    __slots__ = ("cond", "if_false", "if_true")

    def __init__(self, pos: int, cond: Node, if_true: Node, if_false: Node) -> None:
        self.pos, self.cond, self.if_true, self.if_false = pos, cond, if_true, if_false


class Logic(Node):
    """``&&`` (op 'and') or ``||`` (op 'or')."""

    __slots__ = ("left", "op", "right")

    def __init__(self, pos: int, op: str, left: Node, right: Node) -> None:
        self.pos, self.op, self.left, self.right = pos, op, left, right


class Comp(Node):
    """A macro comprehension.

    kind: all | exists | exists_one | map | filter | transformList | transformMap
    var2 is set for the two-variable forms; ``filter`` is the optional predicate of
    ``map``/``transformList``/``transformMap``; ``step`` is the predicate/transform.
    """

    __slots__ = ("filter", "kind", "range", "step", "var", "var2")

    def __init__(
        self, pos: int, kind: str, range_: Node, var: str, var2: str | None, step: Node, filter_: Node | None = None
    ) -> None:
        self.pos, self.kind, self.range, self.var, self.var2 = pos, kind, range_, var, var2
        self.step, self.filter = step, filter_


class Bind(Node):
    __slots__ = ("body", "init", "var")

    def __init__(self, pos: int, var: str, init: Node, body: Node) -> None:
        self.pos, self.var, self.init, self.body = pos, var, init, body


# --------------------------------------------------------------------------- walking


def contains_comprehension(n: Node) -> bool:
    if isinstance(n, Comp):
        return True
    return any(contains_comprehension(c) for c in children(n))


def children(n: Node) -> list[Node]:
    if isinstance(n, Select):
        return [n.operand]
    if isinstance(n, Index):
        return [n.operand, n.index]
    if isinstance(n, Call):
        return ([n.target] if n.target is not None else []) + list(n.args)
    if isinstance(n, ListLit):
        return list(n.elems)
    if isinstance(n, MapLit):
        return [x for kv in n.entries for x in kv]
    if isinstance(n, Cond):
        return [n.cond, n.if_true, n.if_false]
    if isinstance(n, Logic):
        return [n.left, n.right]
    if isinstance(n, Bind):
        return [n.init, n.body]
    if isinstance(n, Comp):
        return [n.range, n.step] + ([n.filter] if n.filter is not None else [])
    if isinstance(n, StructLit):
        return [v for _field, v in n.fields]
    return []


def depth(n: Node) -> int:
    best = 0
    stack = [(n, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in children(node))
    return best
