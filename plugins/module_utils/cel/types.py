# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""CEL types as the checker sees them (cel-go ``common/types``), and the text form the function records declare
their overloads in."""

from __future__ import annotations


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
PARAM_A, PARAM_B = T("param", name="A"), T("param", name="B")
DEVICE = T("object", name="kubernetes.DRADevice")
DEVICE_FIELDS = {
    "driver": STRING,
    "allowMultipleAllocations": BOOL,
    "attributes": T("map", (STRING, T("map", (STRING, DYN)))),
    "capacity": T("map", (STRING, T("map", (STRING, QUANTITY)))),
}

_PRIM = {"bool": BOOL, "int": INT, "uint": UINT, "double": DOUBLE, "string": STRING, "bytes": BYTES, "dyn": DYN}
_PRIM.update({"null": NULL, "Q": QUANTITY, "S": SEMVER, "A": PARAM_A, "B": PARAM_B})


def optional_of(t: T) -> T:
    """cel-go's optional_type(T) (types.NewOptionalType)."""
    return T("opaque", (t,), name="optional_type")


def is_optional(t: T) -> bool:
    return t.kind == "opaque" and t.name == "optional_type"


def type_from_text(s: str) -> T:
    s = s.strip()
    if s.startswith("optional(") and s.endswith(")"):
        return optional_of(type_from_text(s[9:-1]))
    if s.startswith("list(") and s.endswith(")"):
        return T("list", (type_from_text(s[5:-1]),))
    if s.startswith("map(") and s.endswith(")"):
        inner = s[4:-1]
        depth = 0
        for i, c in enumerate(inner):
            depth += c == "("
            depth -= c == ")"
            if c == "," and depth == 0:
                return T("map", (type_from_text(inner[:i]), type_from_text(inner[i + 1 :])))
    if s.startswith("type(") and s.endswith(")"):
        return T("type", (type_from_text(s[5:-1]),))
    return _PRIM[s]


def split_types(s: str) -> tuple[T, ...]:
    out: list[T] = []
    depth = 0
    cur = ""
    for c in s:
        if c == "," and depth == 0:
            out.append(type_from_text(cur))
            cur = ""
            continue
        depth += c == "("
        depth -= c == ")"
        cur += c
    if cur.strip():
        out.append(type_from_text(cur))
    return tuple(out)


# (function, is_member, "arg types" (receiver first for members), "result")
