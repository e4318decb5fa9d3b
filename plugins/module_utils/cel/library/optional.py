# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""cel-go's optional types (``cel.OptionalTypes()``, in Kubernetes' base environment since 1.28; cel/library.go
optionalLib). ``x.?f`` (``_?._``) is checked specially (``Checker._check_call``); ``x[?i]`` is ``_[?_]``; the optional
overloads of ``_[_]`` are in its record (``core.py``). None of these has a cost estimator in cel-go or Kubernetes:
checker/cost.go's default, 1 plus the arguments (at run time 1 each too; ``or`` / ``orValue`` short-circuit, planned by
the interpreter, and the skipped alternative costs nothing).
"""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Function
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import (
    OPTIONAL_NONE,
    CelOptional,
    opt_arg,
    opt_find,
    opt_of_non_zero,
    opt_value,
)

# pylint: disable=unidiomatic-typecheck

FUNCTIONS = [
    Function("_?._", "optional", [], lambda c, f: opt_find(c, f, "_?._")),
    Function(
        "_[?_]",
        "optional",
        [
            (False, "list(A),int", "optional(A)"),
            (False, "optional(list(A)),int", "optional(A)"),
            (False, "map(A,B),A", "optional(B)"),
            (False, "optional(map(A,B)),A", "optional(B)"),
        ],
        lambda c, k: opt_find(c, k, "_[?_]"),
    ),
    Function("optional.of", "optional", [(False, "A", "optional(A)")], CelOptional),
    Function("optional.ofNonZeroValue", "optional", [(False, "A", "optional(A)")], opt_of_non_zero),
    Function("optional.none", "optional", [(False, "", "optional(A)")], lambda: OPTIONAL_NONE),
    Function("value", "optional", [(True, "optional(A)", "A")], opt_value),
    Function("hasValue", "optional", [(True, "optional(A)", "bool")], lambda v: opt_arg("hasValue", v).has),
    # the eager forms; the interpreter plans or / orValue to short-circuit (cel-go evalOptionalOr / evalOptionalOrValue)
    Function(
        "or",
        "optional",
        [(True, "optional(A),optional(A)", "optional(A)")],
        lambda o, alt: o if type(o) is not CelOptional or o.has else alt,
    ),
    Function(
        "orValue",
        "optional",
        [(True, "optional(A),A", "A")],
        lambda o, alt: o if type(o) is not CelOptional else o.value if o.has else alt,
    ),
]
