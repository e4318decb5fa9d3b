# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The CEL parser (cel-go ``parser``): tokens to the syntax tree of ``nodes.py``, macros expanded."""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import INT64_MAX, UINT64_MAX
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.lexer import (
    MAX_RECURSION_DEPTH,
    RESERVED,
    CelSyntaxError,
    Token,
    tokenize,
)
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

_BINARY_PREC = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 3,
    "<=": 3,
    ">": 3,
    ">=": 3,
    "in": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
}
_BINARY_FN = {
    "==": "_==_",
    "!=": "_!=_",
    "<": "_<_",
    "<=": "_<=_",
    ">": "_>_",
    ">=": "_>=_",
    "in": "@in",
    "+": "_+_",
    "-": "_-_",
    "*": "_*_",
    "/": "_/_",
    "%": "_%_",
}


class Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.toks = tokenize(src)
        self.i = 0
        self.depth = 0

    # -- token helpers
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def next(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, text: str) -> bool:
        t = self.tok
        if t.kind == "op" and t.text == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> Token:
        t = self.tok
        if t.kind == "op" and t.text == text:
            self.i += 1
            return t
        raise CelSyntaxError(f"Syntax error: mismatched input '{t.text}' expecting '{text}'", t.pos)

    def _enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_RECURSION_DEPTH:
            raise CelSyntaxError(f"Syntax error: expression recursion limit exceeded: limit {MAX_RECURSION_DEPTH}", pos)

    # -- grammar
    def parse(self) -> Node:
        if self.tok.kind == "eof":
            raise CelSyntaxError("Syntax error: mismatched input '<EOF>' expecting expression", self.tok.pos)
        e = self.expr()
        if self.tok.kind != "eof":
            raise CelSyntaxError(f"Syntax error: extraneous input '{self.tok.text}' expecting <EOF>", self.tok.pos)
        return e

    def expr(self) -> Node:
        self._enter(self.tok.pos)
        cond = self.binary(1)
        t = self.tok
        if t.kind == "op" and t.text == "?":
            self.i += 1
            if_true = self.binary(1)
            self.expect(":")
            if_false = self.expr()
            cond = Cond(t.pos, cond, if_true, if_false)
        self.depth -= 1
        return cond

    def binary(self, min_prec: int) -> Node:
        left = self.unary()
        while True:
            t = self.tok
            if t.kind != "op":
                break
            prec = _BINARY_PREC.get(t.text)
            if prec is None or prec < min_prec:
                break
            self.i += 1
            right = self.binary(prec + 1)
            if t.text == "&&":
                left = Logic(t.pos, "and", left, right)
            elif t.text == "||":
                left = Logic(t.pos, "or", left, right)
            else:
                left = Call(t.pos, _BINARY_FN[t.text], None, [left, right])
        return left

    def unary(self) -> Node:
        t = self.tok
        if t.kind == "op" and t.text == "!":
            count = 0
            while self.accept("!"):
                count += 1
            self._enter(t.pos)
            operand = self.member()
            self.depth -= 1
            for _repeat in range(count):
                operand = Call(t.pos, "!_", None, [operand])
            return operand
        if t.kind == "op" and t.text == "-":
            count = 0
            while self.tok.kind == "op" and self.tok.text == "-":
                self.i += 1
                count += 1
            self._enter(t.pos)
            nt = self.tok
            # A negative numeric literal: fold the last '-' into it (allows MinInt64).
            if nt.kind in ("int", "double") and self._literal_is_whole_member():
                lit = self.next()
                count -= 1
                if lit.kind == "int":
                    v = -lit.value
                    if v < -INT64_MAX - 1:
                        raise CelSyntaxError(f"Syntax error: invalid int literal '-{lit.text}'", lit.pos)
                    operand = Const(t.pos, "int", v)
                else:
                    operand = Const(t.pos, "double", -lit.value)
                operand = self.member_suffix(operand)
            else:
                operand = self.member()
            self.depth -= 1
            for _repeat in range(count):
                operand = Call(t.pos, "-_", None, [operand])
            return operand
        return self.member()

    def _literal_is_whole_member(self) -> bool:
        nxt = self.toks[self.i + 1]
        return not (nxt.kind == "op" and nxt.text in (".", "[", "("))

    def member(self) -> Node:
        return self.member_suffix(self.primary())

    def member_suffix(self, e: Node) -> Node:
        while True:
            t = self.tok
            if t.kind != "op":
                return e
            if t.text == ".":
                self.i += 1
                nt = self.next()
                if nt.kind == "ident":
                    name = nt.text
                    if name in RESERVED:
                        raise CelSyntaxError(f"Syntax error: reserved identifier: {name}", nt.pos)
                elif nt.kind == "qident":
                    name = nt.value
                elif nt.kind == "op" and nt.text == "?":
                    # cel-go: `x.?f` is the call _?._(x, "f") (operators.OptSelect)
                    ft = self.next()
                    if ft.kind == "ident":
                        if ft.text in RESERVED:
                            raise CelSyntaxError(f"Syntax error: reserved identifier: {ft.text}", ft.pos)
                        fname = ft.text
                    elif ft.kind == "qident":
                        fname = ft.value
                    else:
                        raise CelSyntaxError(f"Syntax error: mismatched input '{ft.text}' expecting IDENTIFIER", ft.pos)
                    e = Call(nt.pos, "_?._", None, [e, Const(ft.pos, "string", fname)])
                    continue
                else:
                    raise CelSyntaxError(f"Syntax error: mismatched input '{nt.text}' expecting IDENTIFIER", nt.pos)
                if nt.kind == "ident" and self.accept("("):
                    args = self.args(")")
                    e = self.make_call(nt.pos, name, e, args)
                else:
                    e = Select(nt.pos, e, name)
            elif t.text == "[":
                self.i += 1
                optional = self.accept("?")  # cel-go: `x[?i]` is the call _[?_](x, i) (operators.OptIndex)
                idx = self.expr()
                self.expect("]")
                e = Call(t.pos, "_[?_]", None, [e, idx]) if optional else Index(t.pos, e, idx)
            elif t.text == "{" and self._qualified_name(e) is not None:
                self.i += 1
                fields: list[tuple[str, Node]] = []
                while not self.accept("}"):
                    ft = self.next()
                    if ft.kind != "ident":
                        raise CelSyntaxError(f"Syntax error: mismatched input '{ft.text}' expecting IDENTIFIER", ft.pos)
                    self.expect(":")
                    fields.append((ft.text, self.expr()))
                    if not self.accept(","):
                        self.expect("}")
                        break
                e = StructLit(t.pos, self._qualified_name(e) or "", fields)
            else:
                return e

    def _qualified_name(self, e: Node) -> str | None:
        if isinstance(e, Ident):
            return e.name
        if isinstance(e, Select) and not e.test_only:
            base = self._qualified_name(e.operand)
            return None if base is None else f"{base}.{e.field}"
        return None

    def args(self, close: str) -> list[Node]:
        out: list[Node] = []
        if self.accept(close):
            return out
        while True:
            out.append(self.expr())
            if self.accept(close):
                return out
            self.expect(",")

    def primary(self) -> Node:
        t = self.next()
        k = t.kind
        if k == "int":
            if t.value > INT64_MAX:
                raise CelSyntaxError(f"Syntax error: invalid int literal '{t.text}'", t.pos)
            return Const(t.pos, "int", t.value)
        if k == "uint":
            if t.value > UINT64_MAX:
                raise CelSyntaxError(f"Syntax error: invalid uint literal '{t.text}'", t.pos)
            return Const(t.pos, "uint", t.value)
        if k in ("double", "string", "bytes", "bool", "null"):
            return Const(t.pos, k, t.value)
        if k == "ident":
            if t.text in RESERVED:
                raise CelSyntaxError(f"Syntax error: reserved identifier: {t.text}", t.pos)
            if self.accept("("):
                return self.make_call(t.pos, t.text, None, self.args(")"))
            return Ident(t.pos, t.text)
        if k == "op":
            if t.text == ".":
                nt = self.next()
                if nt.kind != "ident":
                    raise CelSyntaxError(f"Syntax error: mismatched input '{nt.text}' expecting IDENTIFIER", nt.pos)
                if self.accept("("):
                    return self.make_call(nt.pos, nt.text, None, self.args(")"))
                return Ident(nt.pos, nt.text)
            if t.text == "(":
                self._enter(t.pos)
                e = self.expr()
                self.depth -= 1
                self.expect(")")
                return e
            if t.text == "[":
                self._enter(t.pos)
                elems: list[Node] = []
                opt_elems: set[int] = set()
                while not self.accept("]"):
                    if self.accept("?"):
                        opt_elems.add(len(elems))
                    elems.append(self.expr())
                    if not self.accept(","):
                        self.expect("]")
                        break
                self.depth -= 1
                return ListLit(t.pos, elems, frozenset(opt_elems))
            if t.text == "{":
                self._enter(t.pos)
                entries: list[tuple[Node, Node]] = []
                opt_entries: set[int] = set()
                while not self.accept("}"):
                    if self.accept("?"):
                        opt_entries.add(len(entries))
                    key = self.expr()
                    self.expect(":")
                    entries.append((key, self.expr()))
                    if not self.accept(","):
                        self.expect("}")
                        break
                self.depth -= 1
                return MapLit(t.pos, entries, frozenset(opt_entries))
        if k == "eof":
            raise CelSyntaxError("Syntax error: mismatched input '<EOF>' expecting expression", t.pos)
        raise CelSyntaxError(f"Syntax error: mismatched input '{t.text}' expecting expression", t.pos)

    # -- macros
    def make_call(self, pos: int, fn: str, target: Node | None, args: list[Node]) -> Node:
        if target is None:
            if fn == "has" and len(args) == 1:
                a = args[0]
                if not isinstance(a, Select) or a.test_only:
                    raise CelSyntaxError("invalid argument to has() macro", pos)
                return Select(a.pos, a.operand, a.field, test_only=True)
            return Call(pos, fn, None, args)
        if fn == "bind" and isinstance(target, Ident) and target.name == "cel" and len(args) == 3:
            if not isinstance(args[0], Ident):
                raise CelSyntaxError("cel.bind() variable names must be simple identifiers", args[0].pos)
            return Bind(pos, args[0].name, args[1], args[2])
        n = len(args)
        if (fn in ("all", "exists", "exists_one", "filter") and n == 2) or (fn == "map" and n in (2, 3)):
            var = self._simple_name(args[0])
            if fn == "map":
                if n == 2:
                    return Comp(pos, "map", target, var, None, args[1])
                return Comp(pos, "map", target, var, None, args[2], args[1])
            return Comp(pos, fn, target, var, None, args[1])
        if (fn in ("all", "exists", "existsOne", "exists_one") and n == 3) or (
            fn in ("transformList", "transformMap") and n in (3, 4)
        ):
            var = self._simple_name(args[0])
            var2 = self._simple_name(args[1])
            if var == var2:
                raise CelSyntaxError(f"duplicate variable name: {var}", args[1].pos)
            kind = "exists_one" if fn in ("existsOne", "exists_one") else fn
            if n == 4:
                return Comp(pos, kind, target, var, var2, args[3], args[2])
            return Comp(pos, kind, target, var, var2, args[2])
        return Call(pos, fn, target, args)

    @staticmethod
    def _simple_name(e: Node) -> str:
        if not isinstance(e, Ident):
            raise CelSyntaxError("argument must be a simple name", e.pos)
        return e.name


def parse(src: str) -> Node:
    return Parser(src).parse()


def line_col(src: str, pos: int) -> tuple[int, int]:
    """1-based line, 1-based column (cel-go prints columns 1-based in ERROR: <input>:L:C)."""
    line = src.count("\n", 0, pos) + 1
    col = pos - (src.rfind("\n", 0, pos) + 1) + 1
    return line, col
