# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The CEL lexer (cel-go ``parser/gen``'s token rules): reserved words, literals with their escapes, tokens."""

from __future__ import annotations

from typing import Any

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


class CelSyntaxError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


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
