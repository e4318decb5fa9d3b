# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Kubernetes' semver library, version 1 (the optional normalize flag; the parser in ``semver.py``). Ordering
(``isGreaterThan`` / ``isLessThan`` / ``compareTo``) shares the quantity library's records. One :class:`Function`
record a function.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import INT64_MAX, CelError
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import first_traversal
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Function
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.quantity import _parse_estimate
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import no_overload, str_args
from ansible_collections.gpufleet.serving.plugins.module_utils.semver import (
    SemverError,
    Version,
    is_semver,
    parse_semver,
)


# pylint: disable=unidiomatic-typecheck
def _semver(s: Any, *normalize: Any) -> Version:
    str_args("semver", s)
    if normalize and type(normalize[0]) is not bool:
        raise no_overload("semver", s, *normalize)
    try:
        return parse_semver(s, bool(normalize and normalize[0]))
    except SemverError as e:
        raise CelError(str(e)) from None


def _is_semver(s: Any, *normalize: Any) -> bool:
    str_args("isSemver", s)
    if normalize and type(normalize[0]) is not bool:
        raise no_overload("isSemver", s, *normalize)
    return is_semver(s, bool(normalize and normalize[0]))


def _semver_part(fn: str, v: Any) -> int:
    if type(v) is not Version:
        raise no_overload(fn, v)
    x = getattr(v, fn)
    return x - (1 << 64) if x > INT64_MAX else x  # Go's int64(uint64) conversion


# major / minor / patch cost 1 (library/cost.go: a nominal cost of 1).
FUNCTIONS = [
    Function(
        "semver",
        "kubernetes.semver",
        [(False, "string", "S"), (False, "string,bool", "S")],
        _semver,
        estimate=_parse_estimate,
        runtime_cost=first_traversal,
    ),
    Function(
        "isSemver",
        "kubernetes.semver",
        [(False, "string", "bool"), (False, "string,bool", "bool")],
        _is_semver,
        estimate=_parse_estimate,
        runtime_cost=first_traversal,
    ),
    Function("major", "kubernetes.semver", [(True, "S", "int")], lambda v: _semver_part("major", v)),
    Function("minor", "kubernetes.semver", [(True, "S", "int")], lambda v: _semver_part("minor", v)),
    Function("patch", "kubernetes.semver", [(True, "S", "int")], lambda v: _semver_part("patch", v)),
]
