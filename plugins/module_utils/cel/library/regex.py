# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Regular expressions: the standard library's ``matches`` and Kubernetes' regex library (``find``, ``findAll``), on
RE2 (google-re2: Go regexp's syntax and linear-time matching). One :class:`Function` record a function.
"""

from __future__ import annotations

import math
import traceback
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import CelError
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import (
    REGEX_LENGTH,
    STR_TRAVERSAL,
    Est,
    e_add,
    e_factor,
    e_mul,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Function, Overload
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import int_args, str_args
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

try:  # google-re2: RE2 semantics and linear-time matching, as cel-go's Go regexp (a requirement, see require_re2())
    import re2 as _re2

    HAS_RE2 = True
    RE2_IMPORT_ERROR = ""
except ImportError:  # pragma: no cover - exercised by ansible-test's import sanity test and a unit test
    _re2 = None
    HAS_RE2 = False
    RE2_IMPORT_ERROR = traceback.format_exc()

# pylint: disable=unidiomatic-typecheck

RE_CACHE: dict[str, Any] = {}


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


def compile_re2(pattern: str) -> Any:
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


class RE2:
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


def regex(pattern: str) -> RE2:
    rx = RE_CACHE.get(pattern)
    if rx is None:
        try:
            rx = RE2(compile_re2(pattern))
        except ValueError as e:
            # cel-go: the error from regexp.Compile, e.g. "error parsing regexp: invalid escape sequence: `\\1`"
            raise CelError(f"error parsing regexp: {e}") from None
        if len(RE_CACHE) < 1024:
            RE_CACHE[pattern] = rx
    return rx


def _matches(s: Any, p: Any) -> bool:
    str_args("matches", s, p)
    return regex(p).span(s) is not None


def _find(s: Any, p: Any) -> str:
    str_args("find", s, p)
    span = regex(p).span(s)
    return "" if span is None else s[span[0] : span[1]]


def _find_all(s: Any, p: Any, *n: Any) -> list[str]:
    """Go's ``Regexp.FindAllString(s, n)``: an empty match right after the previous match is skipped."""
    str_args("findAll", s, p)
    int_args("findAll", *n)
    limit = n[0] if n else -1
    if limit == 0:
        return []
    rx = regex(p)
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


def _regex_cost(args: tuple) -> int:
    s, p = args
    str_cost = math.ceil((1.0 + (len(s) if type(s) is str else 1)) * STR_TRAVERSAL)
    return str_cost * math.ceil((len(p) if type(p) is str else 1) * REGEX_LENGTH)


def _regex_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """A traversal of the string times the pattern's length factor; ``find``/``findAll`` results are no longer."""
    if n.target is None or len(n.args) < 1:
        return None
    sz = c.size_or_unknown(n.target)
    str_cost = e_factor(e_add(sz, (1, 1)), STR_TRAVERSAL)
    return e_mul(str_cost, e_factor(c.size_or_unknown(n.args[0]), REGEX_LENGTH)), (0, sz[1])


def _matches_estimate(c: Any, n: Any, ov: Overload | None) -> tuple[Est, Est | None] | None:
    """Only the member overload is sized (checker/cost.go's ``matches_string``); the global one costs 1."""
    estimated = _regex_estimate(c, n, ov) if ov is not None and ov.member and len(n.args) == 1 else None
    return None if estimated is None else (estimated[0], None)


FUNCTIONS = [
    Function(
        "matches",
        "standard",
        [(True, "string,string", "bool"), (False, "string,string", "bool")],
        _matches,
        estimate=_matches_estimate,
        runtime_cost=_regex_cost,
        cost_member_only=True,
    ),
    Function(
        "find",
        "kubernetes.regex",
        [(True, "string,string", "string")],
        _find,
        estimate=_regex_estimate,
        runtime_cost=_regex_cost,
    ),
    Function(
        "findAll",
        "kubernetes.regex",
        [(True, "string,string", "list(string)"), (True, "string,string,int", "list(string)")],
        _find_all,
        estimate=_regex_estimate,
        runtime_cost=_regex_cost,
    ),
]
