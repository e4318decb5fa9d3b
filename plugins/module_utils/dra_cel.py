# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""DRA device-selector CEL engine (Kubernetes 1.34 semantics), pure Python.

Public API (imported by other plugins and external checks)::

    compile_selector(expression: str, kubernetes_version: str | None = None) -> CompiledSelector
                                                             # raises SelectorCompileError
    CompiledSelector.matches(device: dict) -> bool           # raises SelectorEvalError
    CompiledSelector.expression                              # the source text

``device`` is a resource.k8s.io/v1 ResourceSlice device::

    {"name": ..., "driver": "gpu.nvidia.com",
     "attributes": {"productName": {"string": "H100"}, "cudaComputeCapability": {"version": "9.0.0"}},
     "capacity": {"memory": {"value": "80Gi"}}}

The engine reproduces the environment of
``k8s.io/dynamic-resource-allocation/cel`` (``compile.go``): the ``device``
variable (``driver``, ``attributes[domain]``, ``capacity[domain]``,
``allowMultipleAllocations``), the cel-go standard library with Kubernetes' base
options (homogeneous aggregate literals, cross-type numeric comparisons), the
Kubernetes quantity, semver, lists and regex libraries, cel-go's strings (v2),
sets, two-variable comprehensions and ``cel.bind``.  It type-checks like cel-go
(so what cel-go rejects at compile time is rejected here at compile time),
estimates the worst-case cost as cel-go's checker does with Kubernetes' DRA
bounds (rejecting what the API server rejects as too complex), counts evaluation
cost with cel-go's runtime model so that an expression exceeding Kubernetes'
limit of 1,000,000 fails instead of running away, and accepts per Kubernetes
version what that version's API server accepts in a new selector.  Regular
expressions use RE2 (google-re2).  See ``docs/selectors.md`` for the function
list, the cost model and the documented divergences.

Parsing, checking and evaluation are implemented here (regexes aside) on the
standard library: cel-python (``celpy`` 0.5.0, cloud-custodian/cel-python) was measured and is
not used at run time: it has no cel-go type checker (so "does not compile in
Kubernetes" cannot be enforced) and no cost accounting (so the 1,000,000 limit cannot
be enforced), and its runners are 5-30x slower on these selectors; see the design
notes in ``docs/selectors.md``.
"""

from __future__ import annotations

import decimal
import functools
import math
import re
import sys
import traceback
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import MIN_DRA_KUBERNETES, KubernetesVersion
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import (
    DECIMAL_EXPONENT,
    Quantity,
    QuantityError,
    is_quantity,
    parse_quantity,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.semver import (
    SemverError,
    Version,
    is_semver,
    parse_semver,
)

try:  # google-re2: RE2 semantics and linear-time matching, as cel-go's Go regexp (a requirement, see require_re2())
    import re2 as _re2

    HAS_RE2 = True
    RE2_IMPORT_ERROR = ""
except ImportError:  # pragma: no cover - exercised by ansible-test's import sanity test and a unit test
    _re2 = None
    HAS_RE2 = False
    RE2_IMPORT_ERROR = traceback.format_exc()

# Exact type checks (``type(v) is int``) are deliberate throughout: CEL's types are not Python's subclass tree
# (a bool is not an int, a UInt is not an int, a _DomainMap is not a plain map), so isinstance() would be wrong.
# pylint: disable=unidiomatic-typecheck

__all__ = [
    "COST_LIMIT",
    "MAX_EXPRESSION_BYTES",
    "CompiledSelector",
    "SelectorCompileError",
    "SelectorEvalError",
    "compile_selector",
    "device_to_cel",
]

# =========================================================================== parser

MAX_RECURSION_DEPTH = 250

RESERVED = frozenset(
    {
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    }
)

_INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1


class CelSyntaxError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


# --------------------------------------------------------------------------- AST


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


# --------------------------------------------------------------------------- lexer

_PUNCT3 = ()
_PUNCT2 = ("==", "!=", "<=", ">=", "&&", "||")
_PUNCT1 = set("+-*/%!<>?:.,()[]{}")
_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "`": "`",
    "?": "?",
}


class Token:
    __slots__ = ("kind", "pos", "text", "value")

    def __init__(self, kind: str, text: str, pos: int, value: Any = None) -> None:
        self.kind, self.text, self.pos, self.value = kind, text, pos, value

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Token({self.kind}, {self.text!r})"


def _is_ident_start(c: str) -> bool:
    return c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z")


def _is_ident_char(c: str) -> bool:
    return _is_ident_start(c) or ("0" <= c <= "9")


def _decode_string(body: str, raw: bool, is_bytes: bool, pos: int) -> str | bytes:
    if raw:
        return body.encode("utf-8") if is_bytes else body
    out: list[str] = []
    out_bytes = bytearray()
    i = 0
    n = len(body)

    def emit_char(s: str) -> None:
        if is_bytes:
            out_bytes.extend(s.encode("utf-8"))
        else:
            out.append(s)

    while i < n:
        c = body[i]
        if c != "\\":
            emit_char(c)
            i += 1
            continue
        i += 1
        if i >= n:
            raise CelSyntaxError("Syntax error: invalid escape sequence", pos)
        c = body[i]
        if c in _ESCAPES:
            emit_char(_ESCAPES[c])
            i += 1
        elif c in "xX":
            h = body[i + 1 : i + 3]
            if len(h) != 2 or any(ch not in "0123456789abcdefABCDEF" for ch in h):
                raise CelSyntaxError("Syntax error: invalid \\x escape", pos)
            v = int(h, 16)
            if is_bytes:
                out_bytes.append(v)
            else:
                out.append(chr(v))
            i += 3
        elif c in "uU":
            width = 4 if c == "u" else 8
            h = body[i + 1 : i + 1 + width]
            if len(h) != width or any(ch not in "0123456789abcdefABCDEF" for ch in h):
                raise CelSyntaxError(f"Syntax error: invalid \\{c} escape", pos)
            v = int(h, 16)
            if is_bytes or v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
                raise CelSyntaxError(f"Syntax error: invalid unicode code point in \\{c} escape", pos)
            out.append(chr(v))
            i += 1 + width
        elif c in "0123":
            o = body[i : i + 3]
            if len(o) != 3 or any(ch not in "01234567" for ch in o):
                raise CelSyntaxError("Syntax error: invalid octal escape", pos)
            v = int(o, 8)
            if is_bytes:
                out_bytes.append(v)
            else:
                out.append(chr(v))
            i += 3
        else:
            raise CelSyntaxError(f"Syntax error: invalid escape sequence '\\{c}'", pos)
    if is_bytes:
        return bytes(out_bytes)
    return "".join(out)


def tokenize(src: str) -> list[Token]:
    toks: list[Token] = []
    i = 0
    n = len(src)
    while i < n:
        c = src[i]
        if c in " \t\n\r\f":
            i += 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j == -1 else j + 1
            continue
        start = i
        # string / bytes literals with optional r/b prefixes
        prefix_end = i
        raw = is_bytes = False
        while prefix_end < n and src[prefix_end] in "rRbB" and prefix_end - i < 2:
            prefix_end += 1
        if prefix_end < n and src[prefix_end] in "\"'" and prefix_end > i:
            pfx = src[i:prefix_end].lower()
            if pfx in ("r", "b", "rb", "br"):
                raw = "r" in pfx
                is_bytes = "b" in pfx
                i = prefix_end
                c = src[i]
        if c in "\"'":
            quote = c
            triple = src.startswith(quote * 3, i)
            delim = quote * 3 if triple else quote
            j = i + len(delim)
            body_start = j
            while True:
                if j >= n:
                    raise CelSyntaxError("Syntax error: unterminated string literal", start)
                ch = src[j]
                if ch == "\\" and not raw:
                    j += 2
                    continue
                if not triple and ch in "\r\n":
                    raise CelSyntaxError("Syntax error: newline in string literal", start)
                if src.startswith(delim, j):
                    break
                j += 1
            body = src[body_start:j]
            j += len(delim)
            value = _decode_string(body, raw, is_bytes, start)
            toks.append(Token("bytes" if is_bytes else "string", src[start:j], start, value))
            i = j
            continue
        if _is_ident_start(c):
            j = i + 1
            while j < n and _is_ident_char(src[j]):
                j += 1
            word = src[i:j]
            if word in ("true", "false"):
                toks.append(Token("bool", word, i, word == "true"))
            elif word == "null":
                toks.append(Token("null", word, i, None))
            elif word == "in":
                toks.append(Token("op", "in", i))
            else:
                toks.append(Token("ident", word, i))
            i = j
            continue
        if c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            j = i
            if src.startswith(("0x", "0X"), i):
                j = i + 2
                while j < n and src[j] in "0123456789abcdefABCDEF":
                    j += 1
                if j == i + 2:
                    raise CelSyntaxError("Syntax error: invalid hex literal", i)
                text = src[i:j]
                v = int(text, 16)
                if j < n and src[j] in "uU":
                    j += 1
                    toks.append(Token("uint", src[i:j], i, v))
                else:
                    toks.append(Token("int", text, i, v))
                i = j
                continue
            while j < n and src[j].isdigit():
                j += 1
            is_float = False
            if j < n and src[j] == "." and j + 1 < n and src[j + 1].isdigit():
                is_float = True
                j += 1
                while j < n and src[j].isdigit():
                    j += 1
            if j < n and src[j] in "eE":
                k = j + 1
                if k < n and src[k] in "+-":
                    k += 1
                if k < n and src[k].isdigit():
                    is_float = True
                    j = k
                    while j < n and src[j].isdigit():
                        j += 1
            text = src[i:j]
            if is_float:
                toks.append(Token("double", text, i, float(text)))
            elif j < n and src[j] in "uU":
                toks.append(Token("uint", src[i : j + 1], i, int(text)))
                j += 1
            else:
                toks.append(Token("int", text, i, int(text)))
            i = j
            continue
        if c == "`":
            j = src.find("`", i + 1)
            if j == -1:
                raise CelSyntaxError("Syntax error: unterminated quoted identifier", i)
            toks.append(Token("qident", src[i : j + 1], i, src[i + 1 : j]))
            i = j + 1
            continue
        two = src[i : i + 2]
        if two in _PUNCT2:
            toks.append(Token("op", two, i))
            i += 2
            continue
        if c in _PUNCT1:
            toks.append(Token("op", c, i))
            i += 1
            continue
        raise CelSyntaxError(f"Syntax error: token recognition error at: '{c}'", i)
    toks.append(Token("eof", "<EOF>", n))
    return toks


# --------------------------------------------------------------------------- parser

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
                    if v < -_INT64_MAX - 1:
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
            if t.value > _INT64_MAX:
                raise CelSyntaxError(f"Syntax error: invalid int literal '{t.text}'", t.pos)
            return Const(t.pos, "int", t.value)
        if k == "uint":
            if t.value > _UINT64_MAX:
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


# --------------------------------------------------------------------------- errors


class SelectorCompileError(GpufleetError, ValueError):
    """A selector does not compile in the Kubernetes DRA CEL environment."""


class SelectorEvalError(GpufleetError, ValueError):
    """A selector failed while being evaluated against a device."""


class _CelError(Exception):
    """A CEL runtime error value (raised; absorbed by ``&&``/``||`` where CEL says so)."""


class _CheckError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


# --------------------------------------------------------------------------- limits

MAX_EXPRESSION_BYTES = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength
COST_LIMIT = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1
_INCLUDES_MAX_LIST = 48  # resourceapi.ResourceSliceMaxAttributeValuesPerDevice (k8s.io/api v0.36.3 resource/v1)


# --------------------------------------------------------------------------- types


class T:
    """A CEL type as the checker sees it."""

    __slots__ = ("kind", "name", "params")

    def __init__(self, kind: str, params: tuple[T, ...] = (), name: str = "") -> None:
        self.kind, self.params, self.name = kind, params, name

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, T) and self.kind == other.kind and self.name == other.name and self.params == other.params
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.name, self.params))

    def __str__(self) -> str:
        k = self.kind
        if k == "list":
            return f"list({self.params[0]})"
        if k == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        if k == "type":
            return f"type({self.params[0]})" if self.params else "type"
        if k == "opaque" and self.params:
            return f"{self.name}({', '.join(str(p) for p in self.params)})"
        if k in ("opaque", "param", "object"):
            return self.name
        if k == "null":
            return "null_type"
        return k

    __repr__ = __str__


BOOL, INT, UINT, DOUBLE, STRING, BYTES, NULL, DYN = (
    T(k) for k in ("bool", "int", "uint", "double", "string", "bytes", "null", "dyn")
)
QUANTITY = T("opaque", name="kubernetes.Quantity")
SEMVER = T("opaque", name="kubernetes.Semver")
_A, _B = T("param", name="A"), T("param", name="B")
DEVICE = T("object", name="kubernetes.DRADevice")
_DEVICE_FIELDS = {
    "driver": STRING,
    "allowMultipleAllocations": BOOL,
    "attributes": T("map", (STRING, T("map", (STRING, DYN)))),
    "capacity": T("map", (STRING, T("map", (STRING, QUANTITY)))),
}

_PRIM = {"bool": BOOL, "int": INT, "uint": UINT, "double": DOUBLE, "string": STRING, "bytes": BYTES, "dyn": DYN}
_PRIM.update({"null": NULL, "Q": QUANTITY, "S": SEMVER, "A": _A, "B": _B})


def _optional(t: T) -> T:
    """cel-go's optional_type(T) (types.NewOptionalType)."""
    return T("opaque", (t,), name="optional_type")


def _is_optional(t: T) -> bool:
    return t.kind == "opaque" and t.name == "optional_type"


def _ty(s: str) -> T:
    s = s.strip()
    if s.startswith("optional(") and s.endswith(")"):
        return _optional(_ty(s[9:-1]))
    if s.startswith("list(") and s.endswith(")"):
        return T("list", (_ty(s[5:-1]),))
    if s.startswith("map(") and s.endswith(")"):
        inner = s[4:-1]
        depth = 0
        for i, c in enumerate(inner):
            depth += c == "("
            depth -= c == ")"
            if c == "," and depth == 0:
                return T("map", (_ty(inner[:i]), _ty(inner[i + 1 :])))
    if s.startswith("type(") and s.endswith(")"):
        return T("type", (_ty(s[5:-1]),))
    return _PRIM[s]


def _split_types(s: str) -> tuple[T, ...]:
    out: list[T] = []
    depth = 0
    cur = ""
    for c in s:
        if c == "," and depth == 0:
            out.append(_ty(cur))
            cur = ""
            continue
        depth += c == "("
        depth -= c == ")"
        cur += c
    if cur.strip():
        out.append(_ty(cur))
    return tuple(out)


# (function, is_member, "arg types" (receiver first for members), "result")
_DECLS_SRC: list[tuple[str, bool, str, str]] = [
    ("!_", False, "bool", "bool"),
    ("-_", False, "int", "int"),
    ("-_", False, "double", "double"),
    ("_==_", False, "A,A", "bool"),
    ("_!=_", False, "A,A", "bool"),
    ("@in", False, "A,list(A)", "bool"),
    ("@in", False, "A,map(A,B)", "bool"),
    ("_[_]", False, "list(A),int", "A"),
    ("_[_]", False, "map(A,B),A", "B"),
    ("_+_", False, "list(A),list(A)", "list(A)"),
    ("size", False, "string", "int"),
    ("size", False, "bytes", "int"),
    ("size", False, "list(A)", "int"),
    ("size", False, "map(A,B)", "int"),
    ("size", True, "string", "int"),
    ("size", True, "bytes", "int"),
    ("size", True, "list(A)", "int"),
    ("size", True, "map(A,B)", "int"),
    ("int", False, "int", "int"),
    ("int", False, "uint", "int"),
    ("int", False, "double", "int"),
    ("int", False, "string", "int"),
    ("uint", False, "uint", "uint"),
    ("uint", False, "int", "uint"),
    ("uint", False, "double", "uint"),
    ("uint", False, "string", "uint"),
    ("double", False, "double", "double"),
    ("double", False, "int", "double"),
    ("double", False, "uint", "double"),
    ("double", False, "string", "double"),
    ("string", False, "string", "string"),
    ("string", False, "int", "string"),
    ("string", False, "uint", "string"),
    ("string", False, "double", "string"),
    ("string", False, "bool", "string"),
    ("string", False, "bytes", "string"),
    ("bytes", False, "bytes", "bytes"),
    ("bytes", False, "string", "bytes"),
    ("bool", False, "bool", "bool"),
    ("bool", False, "string", "bool"),
    ("dyn", False, "A", "dyn"),
    ("contains", True, "string,string", "bool"),
    ("startsWith", True, "string,string", "bool"),
    ("endsWith", True, "string,string", "bool"),
    ("matches", True, "string,string", "bool"),
    ("matches", False, "string,string", "bool"),
    # ext.Strings (version 2)
    ("charAt", True, "string,int", "string"),
    ("indexOf", True, "string,string", "int"),
    ("indexOf", True, "string,string,int", "int"),
    ("lastIndexOf", True, "string,string", "int"),
    ("lastIndexOf", True, "string,string,int", "int"),
    ("lowerAscii", True, "string", "string"),
    ("upperAscii", True, "string", "string"),
    ("replace", True, "string,string,string", "string"),
    ("replace", True, "string,string,string,int", "string"),
    ("split", True, "string,string", "list(string)"),
    ("split", True, "string,string,int", "list(string)"),
    ("substring", True, "string,int", "string"),
    ("substring", True, "string,int,int", "string"),
    ("trim", True, "string", "string"),
    ("join", True, "list(string)", "string"),
    ("join", True, "list(string),string", "string"),
    ("format", True, "string,list(dyn)", "string"),
    ("strings.quote", False, "string", "string"),
    # Kubernetes regex library
    ("find", True, "string,string", "string"),
    ("findAll", True, "string,string", "list(string)"),
    ("findAll", True, "string,string,int", "list(string)"),
    # Kubernetes lists library
    ("indexOf", True, "list(A),A", "int"),
    ("lastIndexOf", True, "list(A),A", "int"),
    # ext.Sets
    ("sets.contains", False, "list(A),list(A)", "bool"),
    ("sets.equivalent", False, "list(A),list(A)", "bool"),
    ("sets.intersects", False, "list(A),list(A)", "bool"),
    # Kubernetes quantity library
    ("quantity", False, "string", "Q"),
    ("isQuantity", False, "string", "bool"),
    ("sign", False, "Q", "int"),
    ("isGreaterThan", True, "Q,Q", "bool"),
    ("isLessThan", True, "Q,Q", "bool"),
    ("compareTo", True, "Q,Q", "int"),
    ("asApproximateFloat", True, "Q", "double"),
    ("asInteger", True, "Q", "int"),
    ("isInteger", True, "Q", "bool"),
    ("add", True, "Q,Q", "Q"),
    ("add", True, "Q,int", "Q"),
    ("sub", True, "Q,Q", "Q"),
    ("sub", True, "Q,int", "Q"),
    ("mul", True, "Q,int", "Q"),
    ("div", True, "Q,int", "Q"),
    ("div", True, "Q,int,int", "Q"),
    ("divInt", True, "Q,int", "Q"),
    # Kubernetes semver library (version 1: optional normalize flag)
    ("semver", False, "string", "S"),
    ("semver", False, "string,bool", "S"),
    ("isSemver", False, "string", "bool"),
    ("isSemver", False, "string,bool", "bool"),
    ("isGreaterThan", True, "S,S", "bool"),
    ("isLessThan", True, "S,S", "bool"),
    ("compareTo", True, "S,S", "int"),
    ("major", True, "S", "int"),
    ("minor", True, "S", "int"),
    ("patch", True, "S", "int"),
    # DRA list-type attributes (newer upstream): scalar == value, list contains value
    ("includes", True, "dyn,dyn", "bool"),
    # cel-go optional types (cel.OptionalTypes(), Kubernetes base environment since 1.28; cel/library.go
    # optionalLib): `x.?f` (_?._) is checked specially (_Checker._opt_select), `x[?i]` is _[?_]
    ("optional.of", False, "A", "optional(A)"),
    ("optional.ofNonZeroValue", False, "A", "optional(A)"),
    ("optional.none", False, "", "optional(A)"),
    ("value", True, "optional(A)", "A"),
    ("hasValue", True, "optional(A)", "bool"),
    ("or", True, "optional(A),optional(A)", "optional(A)"),
    ("orValue", True, "optional(A),A", "A"),
    ("_[?_]", False, "list(A),int", "optional(A)"),
    ("_[?_]", False, "optional(list(A)),int", "optional(A)"),
    ("_[?_]", False, "map(A,B),A", "optional(B)"),
    ("_[?_]", False, "optional(map(A,B)),A", "optional(B)"),
    ("_[_]", False, "optional(list(A)),int", "optional(A)"),
    ("_[_]", False, "optional(map(A,B)),A", "optional(B)"),
]
for _t in ("int", "uint", "double"):
    _DECLS_SRC += [(op, False, f"{_t},{_t}", _t) for op in ("_+_", "_-_", "_*_", "_/_")]
for _t in ("int", "uint"):
    _DECLS_SRC.append(("_%_", False, f"{_t},{_t}", _t))
for _t in ("string", "bytes"):
    _DECLS_SRC.append(("_+_", False, f"{_t},{_t}", _t))
_ORDERED = ("bool", "int", "uint", "double", "string", "bytes")
_CROSS = (
    ("int", "uint"),
    ("int", "double"),
    ("uint", "int"),
    ("uint", "double"),
    ("double", "int"),
    ("double", "uint"),
)
for _op in ("_<_", "_<=_", "_>_", "_>=_"):
    _DECLS_SRC += [(_op, False, f"{_t},{_t}", "bool") for _t in _ORDERED]
    _DECLS_SRC += [(_op, False, f"{a},{b}", "bool") for a, b in _CROSS]
for _t in ("int", "uint", "double", "bool", "string", "bytes"):
    _DECLS_SRC.append(("isSorted", True, f"list({_t})", "bool"))
    _DECLS_SRC.append(("min", True, f"list({_t})", _t))
    _DECLS_SRC.append(("max", True, f"list({_t})", _t))
for _t in ("int", "uint", "double"):
    _DECLS_SRC.append(("sum", True, f"list({_t})", _t))


class _Overload:
    __slots__ = ("args", "member", "result")

    def __init__(self, member: bool, args: tuple[T, ...], result: T) -> None:
        self.member, self.args, self.result = member, args, result


_DECLS: dict[str, list[_Overload]] = {}
for _fn, _member, _args, _res in _DECLS_SRC:
    _DECLS.setdefault(_fn, []).append(_Overload(_member, _split_types(_args), _ty(_res)))

# Library availability by Kubernetes version: what the API server of a cluster accepts in a *new* selector (its
# NewExpressions environment; validation of ResourceClaim(Template)s and DeviceClasses uses it for expressions that
# are not already stored). Sources:
#  * k8s.io/apiserver pkg/cel/environment/base.go (v0.36.3): every library has an IntroducedVersion; the
#    NewExpressions environment holds it when the compatibility version >= IntroducedVersion, and
#    DefaultCompatibilityVersion() is the binary's MinCompatibilityVersion = its version minus one minor
#    (k8s.io/component-base compatibility/version.go). So a library "introduced in 1.34" is usable from 1.35.
#  * k8s.io/dynamic-resource-allocation cel/compile.go (v0.36.3): DRA additions gated by feature gates
#    (VersionedOptions.FeatureEnabled takes priority over the version); gate defaults from
#    k8s.io/kubernetes pkg/features/kube_features.go (v1.36.3). A version means a stock cluster (default gates).
# Everything else the engine implements is in every supported version (>= 1.34, so compatibility >= 1.33):
# ext.Strings v2 and ext.Sets (1.29), two-variable comprehensions (1.32), semver library v1 with the normalize
# flag (1.33), quantity, regex and lists libraries, cel.bind.
# The oldest supported version is k8s/version.py's MIN_DRA_KUBERNETES (DRA resource.k8s.io/v1 is GA from 1.34).
_AVAILABILITY: dict[str, tuple[tuple[int, int] | None, str]] = {
    # name -> (first Kubernetes version whose stock API server accepts it, or None for none so far; why)
    "includes": (
        None,
        "DRA list-type attributes: only with the DRAListTypeAttributes feature gate, alpha and off by default "
        "since Kubernetes 1.36",
    ),
    "allowMultipleAllocations": (
        (1, 36),
        "DRA consumable capacity: the DRAConsumableCapacity feature gate is alpha (off by default) in 1.34 and 1.35, "
        "beta and on by default from 1.36",
    ),
    "mul": (None, "not in Kubernetes' quantity library up to 1.36 (k8s.io/apiserver v0.36.3 library/quantity.go)"),
    "div": (None, "not in Kubernetes' quantity library up to 1.36 (k8s.io/apiserver v0.36.3 library/quantity.go)"),
    "divInt": (None, "not in Kubernetes' quantity library up to 1.36 (k8s.io/apiserver v0.36.3 library/quantity.go)"),
}
# cel-go ext.Lists(ListsVersion(3)) is in base.go with IntroducedVersion 1.34 (new selectors from Kubernetes 1.35);
# this engine does not implement it (a documented divergence), so these stay compile errors, with the reason.
_EXT_LISTS = frozenset({"slice", "flatten", "distinct", "reverse", "sort", "sortBy", "lists.range"})


def _fmt_version(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def _unavailable(name: str, version: tuple[int, int] | None) -> str:
    """'' when ``name`` is usable at ``version``; otherwise the reason, to append to the compile error."""
    if name in _EXT_LISTS:
        if version is not None and version < (1, 35):
            return (
                f": '{name}' (cel-go ext.Lists) is not available in Kubernetes {_fmt_version(version)}; "
                "it arrived in Kubernetes 1.35"
            )
        return f": '{name}' (cel-go ext.Lists, Kubernetes >= 1.35) is not implemented by this engine"
    entry = _AVAILABILITY.get(name)
    if entry is None or version is None:
        return ""
    first, why = entry
    if first is not None and version >= first:
        return ""
    since = f"; it arrived in Kubernetes {_fmt_version(first)}" if first is not None else ""
    return f": '{name}' is not available in Kubernetes {_fmt_version(version)}{since} ({why})"


_TYPE_IDENTS = {
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


class _Checker:
    """Static type checking with cel-go's rules and messages.

    Records, per node, the checked type (``types``) and, per call, the overloads that matched (``overloads``):
    the cost estimator and the runtime cost model need both, as cel-go's need the checked AST.
    ``version`` is the cluster's Kubernetes (major, minor), or None for the engine's full environment.
    """

    def __init__(self, version: tuple[int, int] | None = None) -> None:
        self.scopes: list[dict[str, T]] = []
        self.version = version
        self.types: dict[int, T] = {}
        self.overloads: dict[int, list[_Overload]] = {}

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
            return _CONST_TYPES[n.kind]
        if isinstance(n, Ident):
            t = self.lookup_var(n.name)
            if t is not None:
                return t
            if n.name in _TYPE_IDENTS:
                return T("type", (_TYPE_IDENTS[n.name],))
            if n.name == "type":
                return T("type", (T("type"),))
            raise _CheckError(f"undeclared reference to '{n.name}' (in container '')", n.pos)
        if isinstance(n, Select):
            qn = _qualified(n)
            if qn is not None and self.lookup_var(qn.split(".", 1)[0]) is None:
                raise _CheckError(f"undeclared reference to '{qn}' (in container '')", n.pos)
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
                    raise _CheckError(f"found no matching overload for '{fn}' applied to '({lt}, {rt})'", n.pos)
            return BOOL
        if isinstance(n, Cond):
            ct, tt, ft = self.check(n.cond), self.check(n.if_true), self.check(n.if_false)
            subst: dict[str, T] = {}
            if ct.kind not in ("bool", "dyn") or not _assignable(_A, tt, subst) or not _assignable(_A, ft, subst):
                raise _CheckError(f"found no matching overload for '_?_:_' applied to '({ct}, {tt}, {ft})'", n.pos)
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
                raise _CheckError(f"unsupported map key type: {kt}", n.pos)
            return T("map", (kt or DYN, vt or DYN))
        if isinstance(n, StructLit):
            raise _CheckError(f"undeclared reference to '{n.type_name}' (in container '')", n.pos)
        if isinstance(n, Bind):
            it = self.check(n.init)
            self.scopes.append({n.var: it})
            try:
                return self.check(n.body)
            finally:
                self.scopes.pop()
        if isinstance(n, Comp):
            return self._check_comp(n)
        raise _CheckError("unsupported expression", n.pos)  # pragma: no cover

    @staticmethod
    def _unwrap_optional(t: T, pos: int) -> T:
        """cel-go checkCreateList / checkCreateMap: an optional element or entry value must be optional(T) (or dyn)."""
        if _is_optional(t):
            return t.params[0]
        if t.kind == "dyn":
            return t
        raise _CheckError(f"expected type '{_optional(t)}' but found '{t}'", pos)

    def _join(self, prev: T | None, cur: T, pos: int) -> T:
        if prev is None:
            return cur
        if _assignable(prev, cur, {}):
            return _most_general(prev, cur)
        raise _CheckError(f"expected type '{prev}' but found '{cur}'", pos)

    def _field_type(self, ot: T, field: str, pos: int) -> T:
        if ot.kind == "dyn":
            return DYN
        if _is_optional(ot):  # cel-go checkSelect: selection on optional(T) selects on T, the result is optional
            return _optional(self._field_type(ot.params[0], field, pos))
        if ot.kind == "object":
            if field in _DEVICE_FIELDS and not _unavailable(field, self.version):
                return _DEVICE_FIELDS[field]
            raise _CheckError(f"undefined field '{field}'{_unavailable(field, self.version)}", pos)
        if ot.kind == "map" and ot.params[0].kind in ("string", "dyn"):
            return ot.params[1]
        raise _CheckError(f"type '{ot}' does not support field selection", pos)

    def _check_call(self, n: Call) -> T:
        fn = n.fn
        target = n.target
        if fn == "_?._":  # cel-go checkOptSelect: the field type (via an optional operand too), made optional
            ot = self.check(n.args[0])
            self.check(n.args[1])
            field = n.args[1]
            if not isinstance(field, Const):  # pragma: no cover - the parser always builds a string constant
                raise _CheckError("unsupported expression", n.pos)
            ft = self._field_type(ot, field.value, field.pos)
            return ft if _is_optional(ft) else _optional(ft)
        if target is not None:
            qn = _qualified(target)
            if qn is not None and f"{qn}.{fn}" in _DECLS and self.lookup_var(qn.split(".", 1)[0]) is None:
                n.fn, n.target = f"{qn}.{fn}", None
                return self._check_call(n)
        arg_types = [self.check(a) for a in n.args]
        if target is not None:
            arg_types.insert(0, self.check(target))
        return self._call_type(fn, target is not None, arg_types, n.pos, n)

    def _call_type(self, fn: str, member: bool, arg_types: list[T], pos: int, node: Node | None = None) -> T:
        overloads = _DECLS.get(fn)
        unavailable = _unavailable(fn, self.version)
        if overloads is None or unavailable:
            if fn == "type" and not member and len(arg_types) == 1:
                return T("type", (arg_types[0],))
            raise _CheckError(f"undeclared reference to '{fn}' (in container ''){unavailable}", pos)
        results: list[T] = []
        matched: list[_Overload] = []
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
            raise _CheckError(f"found no matching overload for '{fn}' applied to '{sig}'", pos)
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
            raise _CheckError(
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
                    raise _CheckError(f"found no matching overload for '_?_:_' applied to '({ft}, ...)'", n.filter.pos)
            st = self.check(n.step)
        finally:
            self.scopes.pop()
        if n.kind in ("all", "exists", "exists_one", "filter"):
            if st.kind not in ("bool", "dyn"):
                op = "_&&_" if n.kind == "all" else "_||_" if n.kind == "exists" else "_?_:_"
                raise _CheckError(f"found no matching overload for '{op}' applied to '(bool, {st})'", n.step.pos)
            if n.kind == "filter":
                return T("list", (v1 if not n.var2 else v2 or DYN,))
            return BOOL
        if n.kind in ("map", "transformList"):
            return T("list", (st,))
        if n.kind == "transformMap":
            return T("map", (v1 if rt.kind == "map" else INT if rt.kind == "list" else DYN, st))
        raise _CheckError(f"unsupported macro {n.kind}", n.pos)  # pragma: no cover


_CONST_TYPES = {
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "string": STRING,
    "bytes": BYTES,
    "bool": BOOL,
    "null": NULL,
}


def _qualified(n: Node) -> str | None:
    if isinstance(n, Ident):
        return n.name
    if isinstance(n, Select) and not n.test_only:
        base = _qualified(n.operand)
        return None if base is None else f"{base}.{n.field}"
    return None


# --------------------------------------------------------------------------- runtime values


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


def _type_name(v: Any) -> str:
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


_GO_TYPE_NAMES = {
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


def _no_overload(fn: str, *args: Any) -> _CelError:
    return _CelError(f"no such overload: {fn}({', '.join(_type_name(a) for a in args)})")


def _is_num(v: Any) -> bool:
    t = type(v)
    return t is int or t is float or t is UInt


def _cel_eq(a: Any, b: Any) -> bool:
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
        return all(_cel_eq(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        for k, v in a.items():
            found, bv = _map_find(b, k)
            if not found or not _cel_eq(v, bv):
                return False
        return True
    if ta is Quantity:
        return tb is Quantity and a.cmp(b) == 0
    if ta is Version:
        return tb is Version and a.compare(b) == 0
    if ta is CelType:
        return a == b
    if ta is CelOptional:  # cel-go Optional.Equal: none equals none, values compare by CEL equality
        return tb is CelOptional and a.has == b.has and (not a.has or _cel_eq(a.value, b.value))
    return False  # pragma: no cover


def _map_find(m: dict, k: Any) -> tuple[bool, Any]:
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


def _cel_cmp(fn: str, a: Any, b: Any) -> int:
    ta, tb = type(a), type(b)
    if (ta is int or ta is float or ta is UInt) and (tb is int or tb is float or tb is UInt):
        if (ta is float and math.isnan(a)) or (tb is float and math.isnan(b)):
            raise _CelError("NaN values cannot be ordered")
        return (a > b) - (a < b)
    if ta is tb and ta in (str, bytes, bool):
        return (a > b) - (a < b)
    raise _no_overload(fn, a, b)


def _check_int(v: int) -> int:
    if _INT64_MIN <= v <= _INT64_MAX:
        return v
    raise _CelError("integer overflow")


def _check_uint(v: int) -> UInt:
    if 0 <= v <= _UINT64_MAX:
        return UInt(v)
    raise _CelError("unsigned integer overflow")


def _arith(fn: str, a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        if fn == "_+_":
            return _check_int(a + b)
        if fn == "_-_":
            return _check_int(a - b)
        if fn == "_*_":
            return _check_int(a * b)
        if fn == "_/_":
            if b == 0:
                raise _CelError("division by zero")
            q = abs(a) // abs(b)
            return _check_int(q if (a < 0) == (b < 0) else -q)
        if fn == "_%_":
            if b == 0:
                raise _CelError("modulus by zero")
            if b == -1 and a == _INT64_MIN:  # cel-go moduloInt64Checked: MinInt64 % -1 overflows in Go
                raise _CelError("integer overflow")
            r = abs(a) % abs(b)
            return r if a >= 0 else -r
    elif ta is UInt and tb is UInt:
        if fn == "_+_":
            return _check_uint(a + b)
        if fn == "_-_":
            return _check_uint(a - b)
        if fn == "_*_":
            return _check_uint(a * b)
        if fn == "_/_":
            if b == 0:
                raise _CelError("division by zero")
            return UInt(a // b)
        if fn == "_%_":
            if b == 0:
                raise _CelError("modulus by zero")
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
    raise _no_overload(fn, a, b)


def _neg(v: Any) -> Any:
    t = type(v)
    if t is int:
        return _check_int(-v)
    if t is float:
        return -v
    raise _no_overload("-_", v)


def _not(v: Any) -> bool:
    if type(v) is bool:
        return not v
    raise _no_overload("!_", v)


def _in(v: Any, container: Any) -> bool:
    if isinstance(container, (list, tuple)):
        return any(_cel_eq(v, e) for e in container)
    if isinstance(container, dict):
        return _map_find(container, v)[0]
    raise _no_overload("@in", v, container)


def _index(container: Any, idx: Any) -> Any:
    if type(container) is CelOptional:  # o[k] on an optional: optional_list_index_int / optional_map_index_value
        return _opt_find(container, idx, "_[_]")
    if isinstance(container, dict):
        found, v = _map_find(container, idx)
        if found:
            return v
        if type(container) is _DomainMap:
            return _EMPTY
        raise _CelError(f"no such key: {_fmt_key(idx)}")
    if isinstance(container, (list, tuple)):
        ti = type(idx)
        if ti is float:
            if not idx.is_integer():
                raise _CelError(f"unsupported index value {idx} in list")
            idx = int(idx)
        elif ti is not int and ti is not UInt:
            raise _no_overload("_[_]", container, idx)
        if idx < 0 or idx >= len(container):
            raise _CelError(f"index out of bounds: {idx}")
        return container[idx]
    raise _no_overload("_[_]", container, idx)


def _fmt_key(k: Any) -> str:
    if type(k) is bool:
        return "true" if k else "false"
    return str(k)


def _select(v: Any, field: str) -> Any:
    if type(v) is CelOptional:  # o.f on an optional selects like o.?f (cel-go's optional qualifiers)
        return _opt_find(v, field, "_?._")
    if isinstance(v, dict):
        if field in v:
            return v[field]
        raise _CelError(f"no such key: {field}")
    raise _CelError(f"type '{_type_name(v)}' does not support field selection")


def _has(v: Any, field: str) -> bool:
    if type(v) is CelOptional:  # has(opt.f): false on none, else the presence test on the value
        return v.has and _has(v.value, field)
    if isinstance(v, dict):
        return field in v
    raise _CelError(f"invalid type for field selection: {_type_name(v)}")


def _opt_find(container: Any, key: Any, fn: str) -> CelOptional:
    """``c.?f`` / ``c[?k]``, and ``o.f`` / ``o[k]`` on an optional ``o`` (cel-go's optional qualifiers): the value
    if present, else optional.none(); an optional container is unwrapped first (none stays none)."""
    if type(container) is CelOptional:
        if not container.has:
            return OPTIONAL_NONE
        container = container.value
    if isinstance(container, dict):
        found, v = _map_find(container, key)
        if found:
            return CelOptional(v)
        if type(container) is _DomainMap:  # upstream's mapper.Find: an unknown domain is found, as an empty map
            return CelOptional(_EMPTY)
        return OPTIONAL_NONE
    if isinstance(container, (list, tuple)):
        tk = type(key)
        if tk is float and key.is_integer():
            key = int(key)
        elif tk is not int and tk is not UInt:
            raise _no_overload(fn, container, key)
        return CelOptional(container[key]) if 0 <= key < len(container) else OPTIONAL_NONE
    if fn in ("_?._", "_[?_]"):  # cel-go refQualify on a value that is no container: missingKey
        raise _CelError(f"no such key: {_fmt_key(key)}")
    raise _no_overload(fn, container, key)


def _is_zero(v: Any) -> bool:
    """cel-go traits.Zeroer.IsZeroValue (values that do not implement it are never zero)."""
    t = type(v)
    if v is None or t is bool:
        return v is None or v is False
    if t is int or t is UInt or t is float:
        return v == 0
    if t is str or t is bytes or isinstance(v, (list, tuple, dict)):
        return len(v) == 0
    return False


def _opt_of_non_zero(v: Any) -> CelOptional:
    return OPTIONAL_NONE if _is_zero(v) else CelOptional(v)


def _opt_arg(fn: str, v: Any) -> CelOptional:
    if type(v) is not CelOptional:
        raise _no_overload(fn, v)
    return v


def _opt_value(v: Any) -> Any:
    o = _opt_arg("value", v)
    if not o.has:
        raise _CelError("optional.none() dereference")  # cel-go types.Optional.GetValue
    return o.value


def _size(v: Any) -> int:
    if isinstance(v, (str, bytes, list, tuple, dict)):
        return len(v)
    raise _no_overload("size", v)


def _iterable(v: Any) -> Any:
    if isinstance(v, (list, tuple, dict)):
        return v
    raise _CelError(f"got '{_GO_TYPE_NAMES.get(_type_name(v), _type_name(v))}', expected iterable type")


# ---- conversions

_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT_RE = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[Ii]nf(?:inity)?|NaN|nan)\Z")


def _to_int(v: Any) -> int:
    t = type(v)
    if t is int:
        return v
    if t is UInt:
        if v > _INT64_MAX:
            raise _CelError("integer overflow")  # cel-go uint64ToInt64Checked
        return int(v)
    if t is float:
        # cel-go doubleToInt64Checked: NaN, infinities and v <= MinInt64 or v >= MaxInt64 (as doubles) overflow
        if math.isnan(v) or v <= -9223372036854775808.0 or v >= 9223372036854775808.0:
            raise _CelError("integer overflow")
        return int(v)
    if t is str:
        if not _INT_RE.match(v):
            raise _CelError(f'strconv.ParseInt: parsing "{v}": invalid syntax')
        r = int(v)
        if not _INT64_MIN <= r <= _INT64_MAX:
            raise _CelError(f'strconv.ParseInt: parsing "{v}": value out of range')
        return r
    raise _no_overload("int", v)


def _to_uint(v: Any) -> UInt:
    t = type(v)
    if t is UInt:
        return v
    if t is int:
        if v < 0:
            raise _CelError("unsigned integer overflow")  # cel-go int64ToUint64Checked
        return UInt(v)
    if t is float:
        if math.isnan(v) or not (0 <= v < 1.8446744073709552e19):  # cel-go doubleToUint64Checked
            raise _CelError("unsigned integer overflow")
        return UInt(int(v))
    if t is str:
        if not re.fullmatch(r"\+?[0-9]+", v):
            raise _CelError(f'strconv.ParseUint: parsing "{v}": invalid syntax')
        r = int(v)
        if r > _UINT64_MAX:
            raise _CelError(f'strconv.ParseUint: parsing "{v}": value out of range')
        return UInt(r)
    raise _no_overload("uint", v)


def _to_double(v: Any) -> float:
    t = type(v)
    if t is float:
        return v
    if t is int or t is UInt:
        return float(v)
    if t is str:
        if not _FLOAT_RE.match(v):
            raise _CelError(f'strconv.ParseFloat: parsing "{v}": invalid syntax')
        return float(v)
    raise _no_overload("double", v)


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
        raise _CelError(f"cannot format {f!r}")
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
            raise _CelError("invalid UTF-8 in bytes, cannot convert to string") from None
    raise _no_overload("string", v)


def _to_bytes(v: Any) -> bytes:
    if type(v) is bytes:
        return v
    if type(v) is str:
        return v.encode("utf-8")
    raise _no_overload("bytes", v)


_BOOL_STRINGS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_BOOL_STRINGS.update({"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False})


def _to_bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    if type(v) is str:
        if v in _BOOL_STRINGS:
            return _BOOL_STRINGS[v]
        raise _CelError(f"type conversion error from 'string' to 'bool': {v}")
    raise _no_overload("bool", v)


def _type_of(v: Any) -> CelType:
    return CelType(_type_name(v))


# ---- strings

_RE_CACHE: dict[str, Any] = {}


def require_re2() -> None:
    """google-re2 is a requirement: without it regular expressions would lose RE2 syntax and linear time."""
    if not HAS_RE2:
        raise GpufleetError(
            "gpufleet.serving's CEL selector engine needs the Python library google-re2 (import re2) on the "
            f"controller / execution environment (see requirements.txt): {RE2_IMPORT_ERROR.strip().splitlines()[-1]}"
        )


def _re2_error_text(e: Exception) -> str:
    detail = e.args[0] if e.args else e
    return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)


def _compile_re2(pattern: str) -> Any:
    """Compile with RE2 (Go regexp's syntax and semantics: Perl classes, no look-around or back-references,
    ``^``/``$`` at text boundaries unless ``(?m)``, repetition counts up to 1000); linear-time matching.

    Raises ``ValueError`` with RE2's reason for a pattern RE2 rejects.
    """
    require_re2()
    options = _re2.Options()
    options.log_errors = False  # RE2 logs every rejected pattern to stderr otherwise
    try:
        return _re2.compile(pattern, options)
    except _re2.error as e:
        raise ValueError(_re2_error_text(e)) from None


class _RE2:
    """A compiled RE2 pattern with the one operation the CEL functions need: the span of the leftmost match.

    google-re2's ``search()`` wraps every call in generator and offset-mapping machinery (~9 us); for ASCII text
    (byte offsets are character offsets) the binding's own RE2 object is called directly (~1 us).
    """

    __slots__ = ("_low", "_rx")

    def __init__(self, rx: Any) -> None:
        self._rx = rx
        low = getattr(rx, "_regexp", None)
        self._low = low if low is not None and hasattr(low, "Match") and _RE2_UNANCHORED is not None else None

    def span(self, s: str, pos: int = 0) -> tuple[int, int] | None:
        if self._low is not None:
            raw = s.encode("utf-8", "surrogatepass")
            if len(raw) == len(s):  # ASCII: byte offsets are character offsets
                start, end = self._low.Match(_RE2_UNANCHORED, raw, pos, len(raw))[0]
                return None if start < 0 else (start, end)
        m = self._rx.search(s, pos)
        return None if m is None else m.span()


_RE2_UNANCHORED = getattr(getattr(getattr(_re2, "_re2", None), "RE2", None), "Anchor", None)
_RE2_UNANCHORED = getattr(_RE2_UNANCHORED, "UNANCHORED", None)


def _regex(pattern: str) -> _RE2:
    rx = _RE_CACHE.get(pattern)
    if rx is None:
        try:
            rx = _RE2(_compile_re2(pattern))
        except ValueError as e:
            # cel-go: the error from regexp.Compile, e.g. "error parsing regexp: invalid escape sequence: `\\1`"
            raise _CelError(f"error parsing regexp: {e}") from None
        if len(_RE_CACHE) < 1024:
            _RE_CACHE[pattern] = rx
    return rx


def _str_args(fn: str, *args: Any) -> None:
    for a in args:
        if type(a) is not str:
            raise _no_overload(fn, *args)


def _int_args(fn: str, *args: Any) -> None:
    for a in args:
        if type(a) is not int:
            raise _no_overload(fn, *args)


def _contains(s: Any, sub: Any) -> bool:
    _str_args("contains", s, sub)
    return sub in s


def _starts_with(s: Any, p: Any) -> bool:
    _str_args("startsWith", s, p)
    return s.startswith(p)


def _ends_with(s: Any, p: Any) -> bool:
    _str_args("endsWith", s, p)
    return s.endswith(p)


def _matches(s: Any, p: Any) -> bool:
    _str_args("matches", s, p)
    return _regex(p).span(s) is not None


def _char_at(s: Any, i: Any) -> str:
    _str_args("charAt", s)
    _int_args("charAt", i)
    if i < 0 or i > len(s):
        raise _CelError(f"index out of range: {i}")
    return s[i : i + 1]


def _index_of(s: Any, sub: Any, *start: Any) -> int:
    if isinstance(s, (list, tuple)) and not start:
        for i, e in enumerate(s):
            if _cel_eq(e, sub):
                return i
        return -1
    _str_args("indexOf", s, sub)
    _int_args("indexOf", *start)
    off = start[0] if start else 0
    if off < 0 or off > len(s):
        raise _CelError(f"index out of range: {off}")
    return s.find(sub, off)


def _last_index_of(s: Any, sub: Any, *end: Any) -> int:
    if isinstance(s, (list, tuple)) and not end:
        for i in range(len(s) - 1, -1, -1):
            if _cel_eq(s[i], sub):
                return i
        return -1
    _str_args("lastIndexOf", s, sub)
    _int_args("lastIndexOf", *end)
    if not end:
        return s.rfind(sub)
    off = end[0]
    if off < 0 or off >= len(s):
        raise _CelError(f"index out of range: {off}")
    return s.rfind(sub, 0, off + len(sub))


def _lower_ascii(s: Any) -> str:
    _str_args("lowerAscii", s)
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in s)


def _upper_ascii(s: Any) -> str:
    _str_args("upperAscii", s)
    return "".join(c.upper() if "a" <= c <= "z" else c for c in s)


def _replace(s: Any, old: Any, new: Any, *n: Any) -> str:
    _str_args("replace", s, old, new)
    _int_args("replace", *n)
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
    _str_args("split", s, sep)
    _int_args("split", *n)
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
    _str_args("substring", s)
    _int_args("substring", start, *end)
    stop = end[0] if end else len(s)
    if start < 0 or start > len(s):
        raise _CelError(f"index out of range: {start}")
    if stop < 0 or stop > len(s):
        raise _CelError(f"index out of range: {stop}")
    if start > stop:
        raise _CelError(f"invalid substring range. start: {start}, end: {stop}")
    return s[start:stop]


_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _trim(s: Any) -> str:
    _str_args("trim", s)
    return s.strip(_GO_SPACE)


def _join(lst: Any, *sep: Any) -> str:
    if not isinstance(lst, (list, tuple)):
        raise _no_overload("join", lst, *sep)
    _str_args("join", *lst, *sep)
    return (sep[0] if sep else "").join(lst)


def _quote(s: Any) -> str:
    _str_args("strings.quote", s)
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
    _str_args("format", fmt)
    if not isinstance(args, (list, tuple)):
        raise _no_overload("format", fmt, args)
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
            raise _CelError("unexpected end of format string")
        verb = fmt[i]
        i += 1
        if argi >= len(args):
            raise _CelError(f"index {argi} out of range")
        a = args[argi]
        argi += 1
        ta = type(a)
        if verb == "s":
            out.append(_format_s(a))
        elif verb == "d":
            if ta not in (int, UInt):
                raise _CelError(
                    f"error during formatting: decimal clause can only be used on integers, was given {_type_name(a)}"
                )
            out.append(str(int(a)))
        elif verb in "fe":
            if ta not in (int, UInt, float):
                raise _CelError(
                    f"error during formatting: fixed-point clause can only be used on doubles, was given {_type_name(a)}"
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
                raise _CelError(f"error during formatting: only integers and strings can be formatted with {verb}")
        else:
            raise _CelError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')
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


def _find(s: Any, p: Any) -> str:
    _str_args("find", s, p)
    span = _regex(p).span(s)
    return "" if span is None else s[span[0] : span[1]]


def _find_all(s: Any, p: Any, *n: Any) -> list[str]:
    """Go's ``Regexp.FindAllString(s, n)``: an empty match right after the previous match is skipped."""
    _str_args("findAll", s, p)
    _int_args("findAll", *n)
    limit = n[0] if n else -1
    if limit == 0:
        return []
    rx = _regex(p)
    out: list[str] = []
    pos = 0
    prev_end = -1
    size = len(s)
    while pos <= size and (limit < 0 or len(out) < limit):
        span = rx.span(s, pos)
        if span is None:
            break
        start, end = span
        if end == start == prev_end:
            pos = start + 1  # Go: an empty match abutting the preceding match is ignored
            continue
        out.append(s[start:end])
        prev_end = end
        pos = end if end > start else end + 1
    return out


# ---- lists / sets


def _list_arg(fn: str, v: Any) -> list | tuple:
    if not isinstance(v, (list, tuple)):
        raise _no_overload(fn, v)
    return v


def _is_sorted(v: Any) -> bool:
    lst = _list_arg("isSorted", v)
    return all(_cel_cmp("isSorted", lst[i], lst[i + 1]) <= 0 for i in range(len(lst) - 1))


def _sum(v: Any) -> Any:
    lst = _list_arg("sum", v)
    if not lst:
        return 0
    acc = lst[0]
    for e in lst[1:]:
        acc = _arith("_+_", acc, e)
    if not _is_num(acc):
        raise _no_overload("sum", v)
    return acc


def _min_max(fn: str, v: Any) -> Any:
    lst = _list_arg(fn, v)
    if not lst:
        raise _CelError(f"{fn} called on empty list")
    best = lst[0]
    for e in lst[1:]:
        c = _cel_cmp(fn, e, best)
        if (fn == "min" and c < 0) or (fn == "max" and c > 0):
            best = e
    return best


def _sets_contains(lst: Any, sublist: Any) -> bool:
    _list_arg("sets.contains", lst)
    _list_arg("sets.contains", sublist)
    return all(any(_cel_eq(x, y) for y in lst) for x in sublist)


def _sets_equivalent(a: Any, b: Any) -> bool:
    return _sets_contains(a, b) and _sets_contains(b, a)


def _sets_intersects(a: Any, b: Any) -> bool:
    _list_arg("sets.intersects", a)
    _list_arg("sets.intersects", b)
    return any(_cel_eq(x, y) for x in a for y in b)


def _includes(target: Any, v: Any) -> bool:
    if isinstance(target, (list, tuple)):
        if len(target) > _INCLUDES_MAX_LIST:
            raise _CelError(f"'includes' function cannot be applied to lists longer than {_INCLUDES_MAX_LIST} values")
        return any(_cel_eq(e, v) for e in target)
    return _cel_eq(target, v)


# ---- quantity / semver


def _quantity(s: Any) -> Quantity:
    _str_args("quantity", s)
    try:
        return parse_quantity(s)
    except QuantityError as e:
        raise _CelError(str(e)) from None


def _is_quantity(s: Any) -> bool:
    _str_args("isQuantity", s)
    return is_quantity(s)


def _semver(s: Any, *normalize: Any) -> Version:
    _str_args("semver", s)
    if normalize and type(normalize[0]) is not bool:
        raise _no_overload("semver", s, *normalize)
    try:
        return parse_semver(s, bool(normalize and normalize[0]))
    except SemverError as e:
        raise _CelError(str(e)) from None


def _is_semver(s: Any, *normalize: Any) -> bool:
    _str_args("isSemver", s)
    if normalize and type(normalize[0]) is not bool:
        raise _no_overload("isSemver", s, *normalize)
    return is_semver(s, bool(normalize and normalize[0]))


def _ordered_pair(fn: str, a: Any, b: Any) -> int:
    ta, tb = type(a), type(b)
    if ta is Quantity and tb is Quantity:
        return a.cmp(b)
    if ta is Version and tb is Version:
        return a.compare(b)
    raise _no_overload(fn, a, b)


def _q(fn: str, v: Any) -> Quantity:
    if type(v) is not Quantity:
        raise _no_overload(fn, v)
    return v


def _q_add(fn: str, a: Any, b: Any) -> Quantity:
    q = _q(fn, a)
    if type(b) is Quantity:
        bq = b
    elif type(b) is int:
        bq = Quantity.from_int(b, DECIMAL_EXPONENT)
    else:
        raise _no_overload(fn, a, b)
    try:
        return q.add(bq) if fn == "add" else q.sub(bq)
    except QuantityError as e:  # operands too far apart in scale (quantity.py refuses to materialise them)
        raise _CelError(str(e)) from None


def _q_mul(a: Any, b: Any) -> Quantity:
    q = _q("mul", a)
    _int_args("mul", b)
    return q.mul(b)


def _q_div(a: Any, b: Any, *r: Any) -> Quantity:
    q = _q("div", a)
    _int_args("div", b, *r)
    if b == 0:
        raise _CelError("division by zero error")
    places = r[0] if r else 4
    if not 0 <= places <= 10:
        raise _CelError(f"the valid range for roundVal is 0 to 10 but {places} was passed")
    try:
        return q.div(b, places)
    except QuantityError as e:
        raise _CelError(str(e)) from None


def _q_div_int(a: Any, b: Any) -> Quantity:
    q = _q("divInt", a)
    _int_args("divInt", b)
    if b == 0:
        raise _CelError("division by zero error")
    try:
        return q.div_int(b)
    except QuantityError as e:
        raise _CelError(str(e)) from None


def _as_integer(v: Any) -> int:
    i, ok = _q("asInteger", v).as_int64()
    if not ok:
        raise _CelError("cannot convert value to integer")
    return i


def _semver_part(fn: str, v: Any) -> int:
    if type(v) is not Version:
        raise _no_overload(fn, v)
    x = getattr(v, fn)
    return x - (1 << 64) if x > _INT64_MAX else x  # Go's int64(uint64) conversion


_RUNTIME: dict[str, Any] = {
    "!_": _not,
    "-_": _neg,
    "@in": _in,
    "_[_]": _index,
    "size": _size,
    "int": _to_int,
    "uint": _to_uint,
    "double": _to_double,
    "string": _to_string,
    "bytes": _to_bytes,
    "bool": _to_bool,
    "dyn": lambda v: v,
    "type": _type_of,
    "contains": _contains,
    "startsWith": _starts_with,
    "endsWith": _ends_with,
    "matches": _matches,
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": _trim,
    "join": _join,
    "format": _format,
    "strings.quote": _quote,
    "find": _find,
    "findAll": _find_all,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": lambda v: _min_max("min", v),
    "max": lambda v: _min_max("max", v),
    "sets.contains": _sets_contains,
    "sets.equivalent": _sets_equivalent,
    "sets.intersects": _sets_intersects,
    "includes": _includes,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": lambda v: _q("sign", v).sign(),
    "isGreaterThan": lambda a, b: _ordered_pair("isGreaterThan", a, b) == 1,
    "isLessThan": lambda a, b: _ordered_pair("isLessThan", a, b) == -1,
    "compareTo": lambda a, b: _ordered_pair("compareTo", a, b),
    "asApproximateFloat": lambda v: _q("asApproximateFloat", v).as_approximate_float(),
    "asInteger": _as_integer,
    "isInteger": lambda v: _q("isInteger", v).is_integer(),
    "add": lambda a, b: _q_add("add", a, b),
    "sub": lambda a, b: _q_add("sub", a, b),
    "mul": _q_mul,
    "div": _q_div,
    "divInt": _q_div_int,
    "semver": _semver,
    "isSemver": _is_semver,
    "major": lambda v: _semver_part("major", v),
    "minor": lambda v: _semver_part("minor", v),
    "patch": lambda v: _semver_part("patch", v),
    "_?._": lambda c, f: _opt_find(c, f, "_?._"),
    "_[?_]": lambda c, k: _opt_find(c, k, "_[?_]"),
    "optional.of": CelOptional,
    "optional.ofNonZeroValue": _opt_of_non_zero,
    "optional.none": lambda: OPTIONAL_NONE,
    "value": _opt_value,
    "hasValue": lambda v: _opt_arg("hasValue", v).has,
    # or / orValue short-circuit (cel-go evalOptionalOr / evalOptionalOrValue): planned by _Planner._opt_or;
    # these are their eager forms, for completeness
    "or": lambda o, alt: o if type(o) is not CelOptional or o.has else alt,
    "orValue": lambda o, alt: o if type(o) is not CelOptional else o.value if o.has else alt,
}
for _op in ("_+_", "_-_", "_*_", "_/_", "_%_"):
    _RUNTIME[_op] = functools.partial(_arith, _op)
_RUNTIME["_==_"] = _cel_eq
_RUNTIME["_!=_"] = lambda a, b: not _cel_eq(a, b)
_RUNTIME["_<_"] = lambda a, b: _cel_cmp("_<_", a, b) < 0
_RUNTIME["_<=_"] = lambda a, b: _cel_cmp("_<=_", a, b) <= 0
_RUNTIME["_>_"] = lambda a, b: _cel_cmp("_>_", a, b) > 0
_RUNTIME["_>=_"] = lambda a, b: _cel_cmp("_>=_", a, b) >= 0

# ---- runtime cost (cel-go interpreter/runtimecost.go costCall, v0.26.0, with Kubernetes'
# k8s.io/apiserver pkg/cel/library/cost.go CostEstimator.CallCost and ext/sets.go's trackers)

# The largest string or list a call may build: one traversal of it costs the whole budget
# (COST_LIMIT / StringTraversalCostFactor). cel-go would build it and fail on the next traversal (or exhaust memory
# first); refusing to build it keeps a chain of replace() calls from allocating gigabytes.
MAX_RESULT_SIZE = 10_000_000


def _rt_size(v: Any) -> int:
    """cel-go actualSize: the size of strings, bytes, lists and maps; 1 for anything else."""
    if isinstance(v, (str, bytes, list, tuple, dict)):
        return len(v)
    return 1


def _traversal_cost(v: Any) -> int:
    """library/cost.go traversalCost (note: truncates, where the other formulas round up)."""
    if type(v) is str or type(v) is bytes:
        return int(len(v) * _STR_TRAVERSAL)
    if isinstance(v, (list, tuple)):
        return sum(_traversal_cost(e) for e in v)
    if isinstance(v, dict):
        return sum(_traversal_cost(k) + _traversal_cost(x) for k, x in v.items())
    return 1


def _ceil_cost(x: float) -> int:
    return math.ceil(x)


def _too_large(fn: str, size: int) -> _CelError:
    return _CelError(
        f"{_COST_EXCEEDED} ({fn} would build a value of {size} elements, more than one traversal of the cost limit "
        f"allows: {MAX_RESULT_SIZE})"
    )


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
            raise _too_large("replace", result)
    return _ceil_cost(_rt_size(s) * 2 * _STR_TRAVERSAL)


def _join_cost(args: tuple) -> int:
    lst = args[0]
    sep = args[1] if len(args) > 1 else ""
    if isinstance(lst, (list, tuple)) and all(type(e) is str for e in lst) and type(sep) is str:
        result = sum(len(e) for e in lst) + len(sep) * max(len(lst) - 1, 0)
        if result > MAX_RESULT_SIZE:
            raise _too_large("join", result)
        return _ceil_cost(result * 2 * _STR_TRAVERSAL)  # CallCost: the size of the result
    return 1


def _add_cost(args: tuple) -> int:
    a, b = args
    ta, tb = type(a), type(b)
    if ta is tb and (ta is str or ta is bytes):
        if len(a) + len(b) > MAX_RESULT_SIZE:
            raise _too_large("_+_", len(a) + len(b))
        return _ceil_cost((len(a) + len(b)) * _STR_TRAVERSAL)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) + len(b) > MAX_RESULT_SIZE:
        raise _too_large("_+_", len(a) + len(b))
    return 1  # AddList and arithmetic: O(1) in cel-go


def _cmp_cost(args: tuple) -> int:
    a, b = args
    ta, tb = type(a), type(b)
    if ta is tb and (ta is str or ta is bytes):
        return _ceil_cost(min(len(a), len(b)) * _STR_TRAVERSAL)
    return 1


_FORMAT_PRECISION_RE = re.compile(r"%\.(\d+)")


def _format_cost(args: tuple) -> int:
    if type(args[0]) is str:
        for m in _FORMAT_PRECISION_RE.finditer(args[0]):
            if int(m.group(1)) > MAX_RESULT_SIZE:
                raise _too_large("format", int(m.group(1)))
    return _ceil_cost(_rt_size(args[0]) * _STR_TRAVERSAL)


def _regex_cost(args: tuple) -> int:
    s, p = args
    str_cost = math.ceil((1.0 + (len(s) if type(s) is str else 1)) * _STR_TRAVERSAL)
    return str_cost * math.ceil((len(p) if type(p) is str else 1) * _REGEX_LENGTH)


def _one(args: tuple) -> int:
    return 1


def _zero(args: tuple) -> int:
    return 0


def _first_traversal(args: tuple) -> int:
    return _ceil_cost(_rt_size(args[0]) * _STR_TRAVERSAL)


def _sets_cost(factor: float) -> Any:
    return lambda args: 1 + int(_rt_size(args[0]) * _rt_size(args[1]) * factor)  # ext/sets.go trackSetsCost


_RUNTIME_COSTS: dict[str, Any] = {
    "_==_": _cmp_cost,
    "_!=_": _cmp_cost,
    "_<_": _cmp_cost,
    "_<=_": _cmp_cost,
    "_>_": _cmp_cost,
    "_>=_": _cmp_cost,
    "_+_": _add_cost,
    "@in": lambda args: len(args[1]) if isinstance(args[1], (list, tuple)) else 1,
    "contains": lambda args: (
        _ceil_cost(_rt_size(args[0]) * _STR_TRAVERSAL) * _ceil_cost(_rt_size(args[1]) * _STR_TRAVERSAL)
    ),
    "startsWith": _first_traversal,
    "endsWith": _first_traversal,
    "strings.quote": _first_traversal,
    "format": _format_cost,
    "string": lambda args: _first_traversal(args) if type(args[0]) is bytes else 1,
    "bytes": lambda args: _first_traversal(args) if type(args[0]) is str else 1,
    "find": _regex_cost,
    "findAll": _regex_cost,
    "lowerAscii": _first_traversal,
    "upperAscii": _first_traversal,
    "substring": _first_traversal,
    "trim": _first_traversal,
    "replace": _replace_cost,
    "split": lambda args: _ceil_cost(_rt_size(args[0]) * 2 * _STR_TRAVERSAL),
    "join": _join_cost,
    "quantity": _first_traversal,
    "isQuantity": _first_traversal,
    "semver": _first_traversal,
    "isSemver": _first_traversal,
    "sets.contains": _sets_cost(1.0),
    "sets.intersects": _sets_cost(1.0),
    "sets.equivalent": _sets_cost(2.0),
}
for _fn in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"):
    _RUNTIME_COSTS[_fn] = lambda args: _traversal_cost(args[0])

# Calls whose result can be much larger than their inputs: selectors with one of these (or a comprehension) are
# evaluated with cost tracking; others are bounded by their size and the device's.
_GROWTH_FUNCTIONS = frozenset({"replace", "join", "format", "strings.quote"})


def _runtime_cost_fn(fn: str, member: bool, nodes: list[Node]) -> Any:
    """The cost function of one call, from its evaluated arguments (receiver first)."""
    if fn in _CONVERSIONS and len(nodes) == 1 and isinstance(nodes[0], Const):
        return _zero  # OptOptimize: a conversion of a constant is folded into a constant
    if (
        fn == "@in"
        and isinstance(nodes[1], ListLit)
        and all(isinstance(e, Const) and e.kind in ("int", "uint", "double", "string", "bool") for e in nodes[1].elems)
    ):
        return _zero  # OptOptimize: membership in a constant list is a set lookup, not a call
    if fn == "matches":
        return _regex_cost if member else _one  # runtimecost.go only sizes the member overload (matches_string)
    return _RUNTIME_COSTS.get(fn, _one)


def _needs_cost_tracking(ast: Node, checker: _Checker) -> bool:
    stack = [ast]
    while stack:
        n = stack.pop()
        if isinstance(n, Comp):
            return True
        if isinstance(n, Call):
            if n.fn in _GROWTH_FUNCTIONS:
                return True
            if n.fn == "_+_" and checker.types.get(id(n), DYN).kind not in _SCALAR_KINDS:
                return True
        stack.extend(_children(n))
    return False


# --------------------------------------------------------------------------- DRA device data


class _DomainMap(dict):
    """``device.attributes`` / ``device.capacity``: an unknown domain reads as an empty map.

    Mirrors upstream's ``newStringInterfaceMapWithDefault``; ``in`` and iteration
    only see the domains that exist.
    """

    __slots__ = ()

    def __missing__(self, key: Any) -> dict:
        return _EMPTY


_EMPTY: dict = {}

_ATTR_SCALARS = (("int", int), ("bool", bool), ("string", str), ("version", str))
_ATTR_LISTS = (("ints", int), ("bools", bool), ("strings", str), ("versions", str))


def _attr_value(name: str, attr: Any) -> Any:
    if not isinstance(attr, dict):
        raise SelectorEvalError(f"attribute {name}: unsupported attribute value")
    for key, typ in _ATTR_SCALARS:
        v = attr.get(key)
        if v is None:
            continue
        if type(v) is not typ:
            raise SelectorEvalError(f"attribute {name}: {key} value must be a {typ.__name__}")
        if key == "version":
            try:
                return parse_semver(v)
            except SemverError as e:
                raise SelectorEvalError(f"attribute {name}: parse semantic version: {e}") from None
        return v
    for key, typ in _ATTR_LISTS:
        vs = attr.get(key)
        if vs is None:
            continue
        if not isinstance(vs, (list, tuple)) or any(type(v) is not typ for v in vs):
            raise SelectorEvalError(f"attribute {name}: {key} must be a list of {typ.__name__}")
        if key == "versions":
            try:
                return [parse_semver(v) for v in vs]
            except SemverError as e:
                raise SelectorEvalError(f"attribute {name}: parse semantic version: {e}") from None
        return list(vs)
    raise SelectorEvalError(f"attribute {name}: unsupported attribute value")


def _split_qualified(name: str, default_domain: str) -> tuple[str, str]:
    sep = name.find("/")
    if sep == -1:
        return default_domain, name
    return name[:sep], name[sep + 1 :]


def device_to_cel(device: Mapping[str, Any]) -> dict[str, Any]:
    """The ``device`` variable for a resource.k8s.io/v1 ResourceSlice device (upstream DeviceMatches)."""
    if not isinstance(device, Mapping):
        raise SelectorEvalError(f"device must be a mapping, not {type(device).__name__}")
    driver = device.get("driver") or ""
    if not isinstance(driver, str):
        raise SelectorEvalError("device driver must be a string")
    attributes: _DomainMap = _DomainMap()
    for name, attr in (device.get("attributes") or {}).items():
        value = _attr_value(name, attr)
        domain, ident = _split_qualified(name, driver)
        dict.setdefault(attributes, domain, {})[ident] = value
    capacity: _DomainMap = _DomainMap()
    for name, cap in (device.get("capacity") or {}).items():
        raw = cap.get("value") if isinstance(cap, Mapping) else cap
        if isinstance(raw, int) and not isinstance(raw, bool):
            raw = str(raw)
        if not isinstance(raw, str):
            raise SelectorEvalError(f"capacity {name}: value must be a quantity string")
        try:
            q = parse_quantity(raw.strip())
        except QuantityError as e:
            raise SelectorEvalError(f"capacity {name}: {e}") from None
        domain, ident = _split_qualified(name, driver)
        dict.setdefault(capacity, domain, {})[ident] = q
    multi = device.get("allowMultipleAllocations")
    return {
        "driver": driver,
        "allowMultipleAllocations": bool(multi) if multi is not None else False,
        "attributes": attributes,
        "capacity": capacity,
    }


# --------------------------------------------------------------------------- planning (AST -> closures)


class _Act:
    """One evaluation: variable bindings and the running cost."""

    __slots__ = ("cost", "v")

    def __init__(self, variables: dict[str, Any]) -> None:
        self.v = variables
        self.cost = 0


_COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"


def _charge(a: _Act, n: int) -> None:
    a.cost += n
    if a.cost > COST_LIMIT:
        raise _CelError(_COST_EXCEEDED)


_MISSING = object()


def _contains_comprehension(n: Node) -> bool:
    if isinstance(n, Comp):
        return True
    return any(_contains_comprehension(c) for c in _children(n))


def _children(n: Node) -> list[Node]:
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


def _depth(n: Node) -> int:
    best = 0
    stack = [(n, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in _children(node))
    return best


def _eq_const(other: Any, cv: Any, ctype: type, negate: bool) -> Any:
    """``x == <string/int literal>`` without the generic equality dispatch."""
    if negate:

        def ne_const(a: _Act) -> bool:
            v = other(a)
            if type(v) is ctype:
                return v != cv
            return not _cel_eq(v, cv)

        return ne_const

    def eq_const(a: _Act) -> bool:
        v = other(a)
        if type(v) is ctype:
            return v == cv
        return _cel_eq(v, cv)

    return eq_const


class _Planner:
    def __init__(self, tracked: bool, checker: _Checker | None = None) -> None:
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

                def make_list_t(a: _Act) -> list:
                    _charge(a, _LIST_CREATE)
                    return [f(a) for f in fs]

                return make_list_t
            return lambda a: [f(a) for f in fs]
        if isinstance(n, MapLit):
            kvs = [(self.plan(k), self.plan(v)) for k, v in n.entries]
            optional = n.optional
            tracked = self.tracked and not all(isinstance(x, Const) for kv in n.entries for x in kv)

            def make_map(a: _Act) -> dict:
                if tracked:
                    _charge(a, _MAP_CREATE)
                out: dict = {}
                for i, (kf, vf) in enumerate(kvs):
                    k = kf(a)
                    if type(k) not in (str, int, UInt, bool):
                        raise _CelError(f"unsupported key type: {_type_name(k)}")
                    if _map_find(out, k)[0]:
                        raise _CelError(f"Failed with repeated key: {_fmt_key(k)}")
                    v = vf(a)
                    if i in optional:  # {?k: v}: the entry only when v has a value (cel-go evalMap)
                        if type(v) is not CelOptional:
                            raise _CelError(f"cannot initialize optional entry '{_fmt_key(k)}' from non-optional value")
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
        raise _CelError("unsupported expression")  # pragma: no cover

    def _opt_list(self, n: ListLit) -> Any:
        """``[?x, y]``: an optional element is kept only when it has a value (cel-go evalList)."""
        fs = [(self.plan(e), i in n.optional) for i, e in enumerate(n.elems)]
        tracked = self.tracked

        def make_opt_list(a: _Act) -> list:
            if tracked:
                _charge(a, _LIST_CREATE)
            out = []
            for f, opt in fs:
                v = f(a)
                if opt:
                    if type(v) is not CelOptional:
                        raise _CelError("cannot initialize optional list element from non-optional value")
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
            tname = "type" if name == "type" else str(_TYPE_IDENTS[name]) if name in _TYPE_IDENTS else name
            if name in ("list", "map"):
                tname = name
            tv = CelType(tname)
            return lambda a: tv
        if self.tracked:

            def ident_t(a: _Act) -> Any:
                _charge(a, 1)
                return a.v[name]

            return ident_t
        return lambda a: a.v[name]

    def _select(self, n: Select) -> Any:
        of = self.plan(n.operand)
        field = n.field
        tracked = self.tracked
        if n.test_only:  # a presence test costs 0 in Kubernetes (PresenceTestHasCost(false)); its operand counts

            def has(a: _Act) -> bool:
                return _has(of(a), field)

            return has

        def select(a: _Act) -> Any:
            v = of(a)
            if tracked:
                _charge(a, 1)
            if type(v) is dict or type(v) is _DomainMap:
                try:
                    return v[field]
                except KeyError:
                    raise _CelError(f"no such key: {field}") from None
            return _select(v, field)

        return select

    def _index(self, n: Index) -> Any:
        of = self.plan(n.operand)
        tracked = self.tracked
        if isinstance(n.index, Const) and n.index.kind == "string":
            key = n.index.value

            def index_str(a: _Act) -> Any:
                c = of(a)
                if tracked:
                    _charge(a, 1)
                if type(c) is dict or type(c) is _DomainMap:
                    try:
                        return c[key]
                    except KeyError:
                        raise _CelError(f"no such key: {key}") from None
                return _index(c, key)

            return index_str
        xf = self.plan(n.index)

        def index(a: _Act) -> Any:
            c = of(a)
            i = xf(a)
            if tracked:
                _charge(a, 1)
            return _index(c, i)

        return index

    # -- calls
    def _call(self, n: Call) -> Any:
        fn = n.fn
        impl = _RUNTIME[fn]
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

        def opt_or(a: _Act) -> Any:
            o = lf(a)
            if tracked:  # charged like a call (1); see _Coster for the estimate
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
        if cost is _one and len(fs) == 1:
            f0 = fs[0]

            def call_t1(a: _Act) -> Any:
                x = f0(a)
                a.cost += 1
                if a.cost > COST_LIMIT:
                    raise _CelError(_COST_EXCEEDED)
                return impl(x)

            return call_t1
        if len(fs) == 2:
            g0, g1 = fs

            def call_t2(a: _Act) -> Any:
                args = (g0(a), g1(a))
                a.cost += cost(args)
                if a.cost > COST_LIMIT:
                    raise _CelError(_COST_EXCEEDED)
                return impl(*args)

            return call_t2

        def call_t(a: _Act) -> Any:
            args = tuple([f(a) for f in fs])
            a.cost += cost(args)
            if a.cost > COST_LIMIT:
                raise _CelError(_COST_EXCEEDED)
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
            return lambda a: not _cel_eq(f0(a), f1(a))
        return lambda a: _cel_eq(f0(a), f1(a))

    # -- control flow
    def _logic(self, n: Logic) -> Any:
        lf, rf = self.plan(n.left), self.plan(n.right)
        short = n.op == "or"  # value that short-circuits
        name = "_||_" if short else "_&&_"

        def logic(a: _Act) -> Any:
            # cel-go evalAnd/evalOr: either side may decide; otherwise prefer the left error.
            lerr = rerr = None
            try:
                lv = lf(a)
            except _CelError as e:
                lv, lerr = None, e
            if lv is short:
                return short
            try:
                rv = rf(a)
            except _CelError as e:
                rv, rerr = None, e
            if rv is short:
                return short
            if lerr is None and rerr is None and type(lv) is bool and type(rv) is bool:
                return not short
            if lerr is not None:
                raise lerr
            if rerr is not None:
                raise rerr
            raise _no_overload(name, lv, rv)

        return logic

    def _cond(self, n: Cond) -> Any:
        cf, tf, ff = self.plan(n.cond), self.plan(n.if_true), self.plan(n.if_false)

        def cond(a: _Act) -> Any:
            c = cf(a)
            if c is True:
                return tf(a)
            if c is False:
                return ff(a)
            raise _no_overload("_?_:_", c)

        return cond

    def _bind(self, n: Bind) -> Any:
        init = self.plan(n.init)
        self.locals.append(n.var)
        body = self.plan(n.body)
        self.locals.pop()
        var = n.var

        def bind(a: _Act) -> Any:
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
            rng = _iterable(rng)
            if var2 is None:
                return ((x, None) for x in (list(rng) if isinstance(rng, dict) else rng))
            if isinstance(rng, dict):
                return list(rng.items())
            return list(enumerate(rng))

        # cel-go's per-iteration costs of the expanded macros (parser/macro.go, ext/comprehensions.go): the loop
        # condition (all: @not_strictly_false(acc) = 2, exists: ...(!acc) = 3, others: the literal true = 0), the
        # accumulator read in the step (1), the step's own calls and list creations, and the result (acc: 1,
        # exists_one's acc == 1: 2). See _Coster._comp for the same figures in the estimate.
        cond_cost = 2 if kind == "all" else 3 if kind == "exists" else 0
        result_cost = 2 if kind == "exists_one" else 1
        # charged when an element is kept: acc + 1 (2), acc + [x] (13), acc + [f] (12), @mapInsert(acc, k, f) (3);
        # when it is not, only the accumulator read (1)
        kept_cost = {"exists_one": 2, "filter": 13, "transformMap": 3}.get(kind, 12)

        def comp(a: _Act) -> Any:
            v = a.v
            saved = (v.get(var, _MISSING), v.get(var2, _MISSING) if var2 else _MISSING)
            err: _CelError | None = None
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
                        except _CelError as e:
                            err = err or e
                            continue
                        if r is stop:
                            decided = True
                            continue
                        if type(r) is not bool:
                            err = err or _no_overload("_&&_" if not stop else "_||_", r)
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
                            raise _no_overload("_?_:_", r)
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
                            raise _no_overload("_?_:_", r)
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
                            raise _no_overload("_?_:_", keep)
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


# --------------------------------------------------------------------------- static cost estimation
#
# A port of cel-go's checker/cost.go (v0.26.0, the version Kubernetes 1.36 uses) over this engine's AST, with
# Kubernetes' estimators: k8s.io/apiserver pkg/cel/library/cost.go (CostEstimator.EstimateCallCost), the DRA
# wrapper and size estimator of k8s.io/dynamic-resource-allocation cel/compile.go (draCostEstimator, sizeEstimator)
# and cel-go ext/sets.go's overload estimators. The API server rejects a selector whose worst-case estimate exceeds
# resourceapi.CELSelectorExpressionMaxCost ("too complex, exceeds cost limit", k8s.io/kubernetes
# pkg/apis/resource/validation/validation.go validateCELSelector); so does compile_selector().
# Checked against every expectCost of k8s.io/dynamic-resource-allocation cel/compile_test.go (v0.36.3).

_U64 = (1 << 64) - 1
_U64_F = float(_U64)  # Go: float64(math.MaxUint64)
_STR_TRAVERSAL = 0.1  # common.StringTraversalCostFactor
_REGEX_LENGTH = 0.25  # common.RegexStringLengthCostFactor
_LIST_CREATE = 10  # common.ListCreateBaseCost
_MAP_CREATE = 30  # common.MapCreateBaseCost

# Per-device bounds the DRA size estimator declares (k8s.io/api resource/v1 types.go, v0.36.3):
_DRIVER_NAME_MAX = 63  # DriverNameMaxLength
_DOMAIN_MAX = 63  # DeviceMaxDomainLength
_ID_MAX = 32  # DeviceMaxIDLength
_ATTRS_PER_DEVICE = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
_ATTR_VALUE_MAX = 64  # DeviceAttributeMaxValueLength (max(64, ResourceSliceMaxAttributeValuesPerDevice=48) with
# list-type attributes: compile.go attributeTypeV136ListTypeAttributes)

Est = tuple[int, int]  # (min, max), as checker.CostEstimate / checker.SizeEstimate
_UNKNOWN: Est = (0, _U64)


def _e_add(a: Est, b: Est) -> Est:
    return (min(a[0] + b[0], _U64), min(a[1] + b[1], _U64))


def _e_mul(a: Est, b: Est) -> Est:
    return (min(a[0] * b[0], _U64), min(a[1] * b[1], _U64))


def _factor1(x: int, f: float) -> int:
    """cel-go multiplyByCostFactor: ceil(x * f), saturating at MaxUint64."""
    xf = float(x)
    if xf > 0 and f > 0 and xf > _U64_F / f:
        return _U64
    c = math.ceil(xf * f)
    return _U64 if c >= 1 << 64 else c


def _e_factor(a: Est, f: float) -> Est:
    return (_factor1(a[0], f), _factor1(a[1], f))


def _e_union(a: Est, b: Est) -> Est:
    return (min(a[0], b[0]), max(a[1], b[1]))


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


def _dra_size(path: list[str] | None) -> Est | None:
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


class _Entry:
    """cel-go entrySizeEstimate: sizes of a list's elements (key 1) or a map's keys and values."""

    __slots__ = ("key", "kind", "val")

    def __init__(self, kind: str, key: Est, val: Est) -> None:
        self.kind, self.key, self.val = kind, key, val

    def union(self, other: _Entry | None) -> _Entry | None:
        if other is None:
            return None
        return _Entry(self.kind, _e_union(self.key, other.key), _e_union(self.val, other.val))


class _LocalVar:
    __slots__ = ("entry", "path", "size")

    def __init__(self, path: list[str] | None, size: Est | None, entry: _Entry | None) -> None:
        self.path, self.size, self.entry = path, size, entry


_SCALAR_KINDS = frozenset({"bool", "int", "uint", "double"})
_CONVERSIONS = frozenset({"int", "uint", "double", "string", "bytes", "bool", "dyn", "type"})


def _overload_class(fn: str, ov: _Overload | None) -> str:
    """Which of cel-go's cost cases an overload falls in (checker/cost.go functionCost, runtimecost.go costCall)."""
    if ov is None:
        return ""
    a0 = ov.args[0].kind if ov.args else ""
    if fn == "_+_":
        return {"string": "add_sized", "bytes": "add_sized", "list": "add_list"}.get(a0, "")
    if fn in ("_<_", "_<=_", "_>_", "_>=_"):
        return "cmp_sized" if a0 in ("string", "bytes") and ov.args[1].kind == a0 else ""
    if fn in ("_==_", "_!=_"):
        return "cmp_sized"
    if fn == "@in":
        return "in_list" if ov.args[1].kind == "list" else ""
    if fn == "matches":
        return "matches" if ov.member else ""
    if fn == "_[_]":
        return "index_list" if a0 == "list" else "index_map" if a0 == "map" else ""
    if fn == "string" and a0 == "bytes":
        return "bytes_to_string"
    if fn == "bytes" and a0 == "string":
        return "string_to_bytes"
    return ""


class _Coster:
    """checker/cost.go ``coster`` over this engine's AST (macros are Comp/Bind nodes, expanded here as cel-go
    expands them: all/exists/exists_one/map/filter and the two-variable forms)."""

    def __init__(self, checker: _Checker) -> None:
        self.types = checker.types
        self.overloads = checker.overloads
        self.paths: dict[int, list[str] | None] = {}
        self.sizes: dict[int, Est] = {}
        self.entries: dict[int, _Entry] = {}
        self.local: dict[str, list[_LocalVar]] = {}

    # -- bookkeeping
    def _type(self, n: Node) -> T:
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
        dra = _dra_size(self._path(n))
        if dra is not None:
            self.sizes[id(n)] = dra
            return dra
        if self._type(n).kind in _SCALAR_KINDS:
            return (1, 1)
        if isinstance(n, Ident):
            v = self._peek(n.name)
            if v is not None and v.size is not None:
                return v.size
        return None

    def size_or_unknown(self, n: Node) -> Est:
        return self.size(n) or _UNKNOWN

    def entry(self, n: Node) -> _Entry | None:
        e = self.entries.get(id(n))
        if e is not None:
            return e
        if isinstance(n, Ident):
            v = self._peek(n.name)
            if v is not None:
                return v.entry
        return None

    def _items_size(self, target: Node) -> Est:
        """library/cost.go listElementNode + sizeEstimate: the size of a list's elements, or unknown."""
        path = self._path(target)
        return (_dra_size([*path, "@items"]) if path else None) or _UNKNOWN

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
            if self._type(n.operand).kind in ("map", "object", "param"):
                c = _e_add(c, (1, 1))
            path = self._path(n.operand)
            self.paths[id(n)] = [*path, n.field] if path else [n.field]
            return c
        if isinstance(n, Index):
            return self._index(n)
        if isinstance(n, Call):
            return self._call(n)
        if isinstance(n, ListLit):
            total: Est = (0, 0)
            item: Est = (_U64, 0) if n.elems else (0, 0)
            for e in n.elems:
                total = _e_add(total, self.cost(e))
                item = _e_union(item, self.size_or_unknown(e))
            self.entries[id(n)] = _Entry("list", (1, 1), item)
            return _e_add(total, (_LIST_CREATE, _LIST_CREATE))
        if isinstance(n, MapLit):
            total = (0, 0)
            ks: Est = (_U64, 0) if n.entries else (0, 0)
            vs: Est = (_U64, 0) if n.entries else (0, 0)
            for k, v in n.entries:
                total = _e_add(_e_add(total, self.cost(k)), self.cost(v))
                ks = _e_union(ks, self.size_or_unknown(k))
                vs = _e_union(vs, self.size_or_unknown(v))
            self.entries[id(n)] = _Entry("map", ks, vs)
            return _e_add(total, (_MAP_CREATE, _MAP_CREATE))
        if isinstance(n, Logic):  # overloads.LogicalAnd / LogicalOr
            lc, rc = self.cost(n.left), self.cost(n.right)
            return (lc[0], _e_add(lc, rc)[1])
        if isinstance(n, Cond):  # overloads.Conditional
            cc, tc, fc = self.cost(n.cond), self.cost(n.if_true), self.cost(n.if_false)
            self.sizes[id(n)] = _e_union(self.size_or_unknown(n.if_true), self.size_or_unknown(n.if_false))
            te = self.entry(n.if_true)
            ent = te.union(self.entry(n.if_false)) if te is not None else None
            if ent is not None:
                self.entries[id(n)] = ent
            return _e_add(cc, _e_union(tc, fc))
        if isinstance(n, Bind):  # costBind: the empty iteration range is a list creation (10)
            c = _e_add((_LIST_CREATE, _LIST_CREATE), self.cost(n.init))
            self._push(n.var, _LocalVar(self._path(n.init), self.size(n.init), self.entry(n.init)))
            c = _e_add(c, self.cost(n.body))
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
        c = _e_add(_e_add((1, 1), self.cost(n.operand)), self.cost(n.index))
        result: Est | None = None
        for ov in self.overloads.get(id(n), []):
            cls = _overload_class("_[_]", ov)
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
            c = _e_add(_e_add((1, 1), self.cost(n.args[0])), self.cost(n.args[1]))
            path = self._path(n.args[0])
            key = n.args[1]
            sub = key.value if fn == "_?._" and isinstance(key, Const) else "@values"
            if fn == "_[?_]" and self._type(n.args[0]).kind == "list":
                sub = "@items"
            self.paths[id(n)] = [*path, sub] if path else [sub]
            return c
        if fn == "dyn" and n.target is None and len(n.args) == 1:  # maybeUnwrapDynCall
            c = self.cost(n.args[0])
            self._copy_sizes(n, n.args[0])
            return _e_add((1, 1), c)
        arg_costs = [self.cost(a) for a in n.args]
        total: Est = (0, 0)
        if n.target is not None:
            total = self.cost(n.target)
        ovs: list[_Overload | None] = list(self.overloads.get(id(n), [])) or [None]
        fn_cost: Est = (_U64, 0)
        result: Est | None = None
        for ov in ovs:
            c, rs = self._function_cost(n, fn, ov, arg_costs)
            fn_cost = _e_union(fn_cost, c)
            if rs is not None:
                result = rs if result is None else _e_union(result, rs)
        if result is not None:
            self.sizes[id(n)] = result
        return _e_add(total, fn_cost)

    def _function_cost(self, n: Call, fn: str, ov: _Overload | None, arg_costs: list[Est]) -> tuple[Est, Est | None]:
        argsum: Est = (0, 0)
        for a in arg_costs:
            argsum = _e_add(argsum, a)
        target, args = n.target, n.args
        size = self.size_or_unknown

        def done(c: Est, rs: Est | None = None) -> tuple[Est, Est | None]:
            return _e_add(c, argsum), rs

        # ext/sets.go estimateSetsCost
        if fn in ("sets.contains", "sets.intersects", "sets.equivalent") and len(args) == 2:
            f = 2.0 if fn == "sets.equivalent" else 1.0
            return done(_e_add(_e_factor(_e_mul(size(args[0]), size(args[1])), f), (1, 1)))
        # compile.go draCostEstimator: includes costs ResourceSliceMaxAttributeValuesPerDevice
        if fn == "includes" and target is not None:
            return done((_INCLUDES_MAX_LIST, _INCLUDES_MAX_LIST))
        # library/cost.go CostEstimator.EstimateCallCost
        if fn in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") and target is not None:
            tt = self._type(target)
            if tt.kind == "list":
                el: Est = (1, 1)
                if tt.params[0].kind in ("string", "bytes"):
                    el = _e_add(el, _e_factor(self._items_size(target), _STR_TRAVERSAL))
                return done(_e_mul(size(target), el))
            return done(_e_factor(size(target), _STR_TRAVERSAL))
        if fn in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            sz = size(target)
            return done(_e_factor(sz, _STR_TRAVERSAL), sz)
        if fn == "replace" and target is not None and len(args) >= 2:
            return done(*self._replace(target, args))
        if fn == "split" and target is not None:
            sz = size(target)
            mx = sz[1]
            if len(args) > 1 and isinstance(args[1], Const) and args[1].kind == "int":
                mx = args[1].value % (1 << 64)  # Go: uint64(int64)
            return done(_e_factor(sz, 2 * _STR_TRAVERSAL), (0, mx))
        if fn == "join" and target is not None:
            tt = self._type(target)
            list_size = size(target)
            jsz: Est = _e_mul(list_size, self._items_size(target)) if tt.kind == "list" else (0, 0)
            if args:
                seps = (max(list_size[0] - 1, 0), max(list_size[1] - 1, 0))
                jsz = _e_add(jsz, _e_mul(size(args[0]), seps))
            return done(_e_factor(jsz, _STR_TRAVERSAL), jsz)
        if fn in ("find", "findAll") and target is not None and args:
            sz = size(target)
            str_cost = _e_factor(_e_add(sz, (1, 1)), _STR_TRAVERSAL)
            return done(_e_mul(str_cost, _e_factor(size(args[0]), _REGEX_LENGTH)), (0, sz[1]))
        if fn in ("quantity", "isQuantity", "semver", "isSemver") and args:
            return done(_e_factor(size(args[0]), _STR_TRAVERSAL))
        if fn in _UNIT_COST_FUNCTIONS:
            return done((1, 1))
        if fn == "_==_" and len(args) == 2:
            lt, rt = self._type(args[0]), self._type(args[1])
            if lt == rt and lt in (QUANTITY, SEMVER):
                return done((1, 1))
        # checker/cost.go functionCost
        cls = _overload_class(fn, ov)
        if fn == "format" and target is not None:
            return done(_e_factor(size(target), _STR_TRAVERSAL))
        if cls in ("string_to_bytes", "bytes_to_string") and len(args) == 1:
            sz = size(args[0])
            rs = (sz[0], min(sz[1] * 4, _U64)) if cls == "string_to_bytes" else (sz[0] // 4, sz[1])
            return done(_e_factor(sz, _STR_TRAVERSAL), rs)
        if fn == "strings.quote" and len(args) == 1:
            sz = size(args[0])
            return done(_e_factor(sz, _STR_TRAVERSAL), (sz[0] + 2, min(sz[1] * 2 + 2, _U64)))
        if fn in ("startsWith", "endsWith") and len(args) == 1:  # cel-go sizes the argument, not the target
            return done(_e_factor(size(args[0]), _STR_TRAVERSAL))
        if cls == "in_list" and len(args) == 2:
            return done(_e_factor(size(args[1]), 1))
        if cls == "matches" and target is not None and len(args) == 1:
            str_cost = _e_factor(_e_add(size(target), (1, 1)), _STR_TRAVERSAL)
            return done(_e_mul(str_cost, _e_factor(size(args[0]), _REGEX_LENGTH)))
        if fn == "contains" and target is not None and len(args) == 1:
            return done(_e_mul(_e_factor(size(target), _STR_TRAVERSAL), _e_factor(size(args[0]), _STR_TRAVERSAL)))
        if cls in ("add_sized", "add_list") and len(args) == 2:
            rs = _e_add(size(args[0]), size(args[1]))
            e0, e1 = self.entry(args[0]), self.entry(args[1])
            ent = e0.union(e1) if e0 is not None else None
            if ent is not None:
                self.entries[id(n)] = ent
            if cls == "add_list":
                return done((1, 1), rs)
            return done(_e_factor(rs, _STR_TRAVERSAL), rs)
        if cls == "cmp_sized" and len(args) == 2:
            smallest = min(size(args[0])[1], size(args[1])[1])
            return done(_e_factor((1 if smallest > 0 else 0, smallest), _STR_TRAVERSAL))
        return done((1, 1))

    def _replace(self, target: Node, args: list[Node]) -> tuple[Est, Est]:
        """library/cost.go: the worst-case result size of replace()."""
        sz = self.size_or_unknown(target)
        old = self.size_or_unknown(args[0])
        new = self.size_or_unknown(args[1])
        if old[0] == 0:
            count_max, retained_max = (sz[1] + 1 if sz[1] < _U64 else sz[1]), sz[1]
        elif new[1] <= old[0]:
            count_max, retained_max = 0, sz[1]
        else:
            count_max, retained_max = math.ceil(sz[1] / old[0]), 0
        if old[1] == 0:
            count_min, retained_min = (sz[0] + 1 if sz[0] < _U64 else sz[0]), sz[0]
        elif old[1] <= new[0]:
            count_min, retained_min = 0, sz[0]
        else:
            count_min, retained_min = math.ceil(sz[0] / old[1]), 0
        result = _e_add(_e_mul((count_min, count_max), new), (retained_min, retained_max))
        return _e_factor(sz, 2 * _STR_TRAVERSAL), result

    def _comp(self, n: Comp) -> Est:
        kind = n.kind
        total = self.cost(n.range)
        # accuInit: a literal (all, exists: bool; exists_one: int) costs 0; map/filter/transformList start from an
        # empty list literal (10) and transformMap from an empty map literal (30).
        if kind == "transformMap":
            total = _e_add(total, (_MAP_CREATE, _MAP_CREATE))
        elif kind not in ("all", "exists", "exists_one"):
            total = _e_add(total, (_LIST_CREATE, _LIST_CREATE))
        ent = self.entry(n.range)
        container = ent.kind if ent is not None else self._type(n.range).kind
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
            body: Est = (1, _e_add((1, 1), step)[1])
        elif kind == "exists":  # @not_strictly_false(!acc) ; acc || p
            loop, body = (3, 3), (1, _e_add((1, 1), step)[1])
        elif kind == "exists_one":  # true ; p ? acc + 1 : acc
            loop, body = (0, 0), _e_add(step, _e_union((2, 2), (1, 1)))
        elif kind == "filter":  # true ; p ? acc + [x] : acc
            loop, body = (0, 0), _e_add(step, _e_union((13, 13), (1, 1)))
        else:
            # map / transformList: acc + [f] ; transformMap: cel.@mapInsert(acc, k, f)
            add = (3, 3) if kind == "transformMap" else (12, 12)
            body = _e_add(step, add)
            if filt is not None:  # filter ? <step> : acc
                body = _e_add(filt, _e_union(body, (1, 1)))
            loop = (0, 0)
        result: Est = (2, 2) if kind == "exists_one" else (1, 1)  # acc == 1 | acc
        total = _e_add(total, result)
        count = self.size_or_unknown(n.range)
        total = _e_add(total, _e_mul(count, _e_add(body, loop)))
        if kind in ("all", "exists", "exists_one"):
            self.sizes[id(n)] = (1, 1)
        else:
            self.sizes[id(n)] = count
            if kind != "transformMap":
                item = _e_union((0, 0), elem_size or _UNKNOWN)
                self.entries[id(n)] = _Entry("list", (1, 1), item)
        return total


# library/cost.go: Kubernetes library functions with a nominal cost of 1. The optional library's functions
# (optional.of, optional.ofNonZeroValue, optional.none, value, hasValue, or, orValue) have no estimator in cel-go
# or Kubernetes either and fall to checker/cost.go's default: 1 plus their arguments (at run time: 1 each too,
# runtimecost.go's default; or / orValue short-circuit, the skipped alternative costs nothing).
_UNIT_COST_FUNCTIONS = frozenset(
    {"sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan", "compareTo", "add", "sub"}
    | {"major", "minor", "patch"}
)


def estimate_cost(ast: Node, checker: _Checker) -> Est:
    """The worst-case (min, max) cost of a type-checked expression, as cel.Env.EstimateCost with DRA's estimator."""
    return _Coster(checker).cost(ast)


# --------------------------------------------------------------------------- public API


def _format_error(src: str, pos: int, message: str) -> str:
    line, col = line_col(src, pos)
    lines = src.splitlines() or [""]
    text = lines[line - 1] if line - 1 < len(lines) else ""
    return f"ERROR: <input>:{line}:{col}: {message}\n | {text}\n | {'.' * (col - 1)}^"


_REGEX_FUNCS = {"matches": 1, "find": 1, "findAll": 1}


def _regex_cached_for_literal(pattern: str) -> None:
    if pattern not in _RE_CACHE:
        rx = _RE2(_compile_re2(pattern))
        if len(_RE_CACHE) < 1024:
            _RE_CACHE[pattern] = rx


def _validate_regex_literals(n: Node, src: str) -> None:
    """cel.ValidateRegexLiterals: constant patterns must compile."""
    stack = [n]
    while stack:
        node = stack.pop()
        stack.extend(_children(node))
        if isinstance(node, Call) and node.fn in _REGEX_FUNCS:
            args = node.args if node.target is not None else node.args[1:]
            if args and isinstance(args[0], Const) and args[0].kind == "string":
                try:
                    _regex_cached_for_literal(args[0].value)
                except ValueError as e:
                    raise _CheckError(f"invalid matches argument: {e}", args[0].pos) from None


class CompiledSelector:
    """A compiled DRA device selector; evaluate with :meth:`matches`."""

    __slots__ = ("_fn", "cost_tracked", "expression", "kubernetes_version", "max_cost", "output_type")

    def __init__(
        self,
        expression: str,
        fn: Any,
        output_type: str,
        cost_tracked: bool,
        max_cost: int = _U64,
        kubernetes_version: tuple[int, int] | None = None,
    ) -> None:
        self.expression = expression
        self._fn = fn
        self.output_type = output_type
        self.cost_tracked = cost_tracked
        #: the worst-case cost cel-go's estimator gives (CompilationResult.MaxCost); at most COST_LIMIT
        #: for what compile_selector() returns
        self.max_cost = max_cost
        #: the Kubernetes (major, minor) whose library the selector was checked against; None = every feature
        self.kubernetes_version = kubernetes_version

    def __repr__(self) -> str:
        return f"CompiledSelector({self.expression!r})"

    def evaluate(self, device: Mapping[str, Any] | None = None) -> Any:
        """Evaluate and return the raw CEL value (``bool``, ``int``, :class:`Quantity`, ...)."""
        return self._run(_Act({"device": device_to_cel(device or {})}))

    def evaluate_with_cost(self, device: Mapping[str, Any] | None = None) -> tuple[Any, int]:
        """The raw CEL value and the runtime cost of this evaluation (0 unless ``cost_tracked``)."""
        act = _Act({"device": device_to_cel(device or {})})
        return self._run(act), act.cost

    def _run(self, act: _Act) -> Any:
        """One evaluation; every failure of the selector is a :class:`SelectorEvalError` (Kubernetes: a CEL runtime
        error, so the device does not match and the claim's allocation fails with that error)."""
        try:
            return self._fn(act)
        except _CelError as e:
            raise SelectorEvalError(str(e)) from None
        except (QuantityError, SemverError) as e:  # a value error of the quantity/semver library: a runtime error
            raise SelectorEvalError(str(e)) from None
        except GpufleetError:  # the environment (google-re2 missing), not the selector
            raise
        except RecursionError:
            raise SelectorEvalError("evaluation recursion limit exceeded") from None
        except MemoryError:
            raise SelectorEvalError("evaluation failed: out of memory") from None
        except Exception as e:  # the contract: every evaluation failure is a SelectorEvalError
            raise SelectorEvalError(f"evaluation failed: {type(e).__name__}: {e}") from None

    def matches(self, device: Mapping[str, Any]) -> bool:
        """True if ``device`` is selected; raises :class:`SelectorEvalError` on any CEL error.

        A non-bool result is an error (as in Kubernetes), never a silent ``False``.
        """
        result = self.evaluate(device)
        if type(result) is not bool:
            raise SelectorEvalError(f"CEL result of type {_type_name(result)} could not be converted to bool")
        return result


def parse_kubernetes_version(version: str | KubernetesVersion | None) -> tuple[int, int] | None:
    """``"1.34"``, ``"v1.35.2"`` -> (1, 34) / (1, 35): the minor release whose library applies (parsed by
    :class:`KubernetesVersion`); None stays None. Raises SelectorCompileError."""
    if version is None:
        return None
    parsed = version if isinstance(version, KubernetesVersion) else KubernetesVersion.parse_reported(str(version))
    if parsed is None:
        raise SelectorCompileError(
            f"invalid Kubernetes version {version!r}: expected MAJOR.MINOR, e.g. {MIN_DRA_KUBERNETES}"
        )
    if parsed < MIN_DRA_KUBERNETES:
        raise SelectorCompileError(
            f"Kubernetes {parsed.minor_version} is not supported: DRA device selectors (resource.k8s.io/v1) need "
            f"Kubernetes >= {MIN_DRA_KUBERNETES}"
        )
    return parsed.release


def _compile(
    expression: str,
    require_bool: bool = True,
    version: tuple[int, int] | None = None,
    enforce_cost_limit: bool = False,
    track_cost: bool | None = None,
) -> CompiledSelector:
    """Compile against the library of Kubernetes ``version`` (None: every feature the engine has).

    ``enforce_cost_limit`` rejects a worst-case estimate above COST_LIMIT, as the API server does for new
    selectors; without it (tests of the runtime cost limit, like upstream's compile_test.go) only the runtime
    limit applies. ``require_bool=False`` keeps non-bool results (tests of the function libraries).
    """
    require_re2()
    size = len(expression.encode("utf-8"))
    if size > MAX_EXPRESSION_BYTES:
        raise SelectorCompileError(
            f"expression too long: {size} bytes, may not be more than {MAX_EXPRESSION_BYTES} bytes"
        )
    old_limit = sys.getrecursionlimit()
    if old_limit < 8000:
        sys.setrecursionlimit(8000)
    try:
        checker = _Checker(version)
        try:
            ast = parse(expression)
            if _depth(ast) > MAX_RECURSION_DEPTH:
                raise CelSyntaxError(
                    f"Syntax error: expression recursion limit exceeded: limit {MAX_RECURSION_DEPTH}", 0
                )
            _validate_regex_literals(ast, expression)
            out = checker.check(ast)
        except CelSyntaxError as e:
            raise SelectorCompileError("compilation failed: " + _format_error(expression, e.pos, e.message)) from None
        except _CheckError as e:
            raise SelectorCompileError("compilation failed: " + _format_error(expression, e.pos, e.message)) from None
        except RecursionError:
            raise SelectorCompileError(
                f"compilation failed: expression recursion limit exceeded: limit {MAX_RECURSION_DEPTH}"
            ) from None
        if require_bool and out.kind not in ("bool", "dyn"):
            raise SelectorCompileError(f"must evaluate to bool or the unknown type, not {out}")
        max_cost = estimate_cost(ast, checker)[1]
        if enforce_cost_limit and max_cost > COST_LIMIT:
            # k8s.io/kubernetes pkg/apis/resource/validation/validation.go validateCELSelector
            raise SelectorCompileError(
                f"too complex, exceeds cost limit: the estimated worst-case cost {max_cost} is over "
                f"{COST_LIMIT} (resourceapi.CELSelectorExpressionMaxCost)"
            )
        tracked = _needs_cost_tracking(ast, checker) if track_cost is None else track_cost
        fn = _Planner(tracked, checker).plan(ast)
    finally:
        if old_limit < 8000:
            sys.setrecursionlimit(old_limit)
    return CompiledSelector(expression, fn, str(out), tracked, max_cost, version)


@functools.lru_cache(maxsize=4096)
def _compile_cached(expression: str, version: tuple[int, int] | None) -> CompiledSelector:
    return _compile(expression, version=version, enforce_cost_limit=True)


def compile_selector(expression: str, kubernetes_version: str | KubernetesVersion | None = None) -> CompiledSelector:
    """Compile a DRA device selector as the API server of Kubernetes ``kubernetes_version`` does for a new
    selector (``"1.34"``; None: the newest environment, every feature this engine implements), cached by
    (expression, version).

    Raises :class:`SelectorCompileError` for syntax errors, unknown functions or variables (including library
    functions that are newer than ``kubernetes_version``: the message names the function and the version it
    arrived in), type errors, a result type that is not bool/dyn, RE2-invalid literal patterns, expressions
    longer than 10 KiB, and expressions whose worst-case cost estimate exceeds the limit of 1,000,000
    ("too complex, exceeds cost limit").
    """
    if not isinstance(expression, str):
        raise SelectorCompileError(f"selector expression must be a string, not {type(expression).__name__}")
    return _compile_cached(expression, parse_kubernetes_version(kubernetes_version))
