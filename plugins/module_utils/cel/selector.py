# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Compiling a DRA device selector: size and depth limits, parse, RE2 literal validation, type check against the
library of a Kubernetes version, the cost estimate and its limit, the plan; :class:`CompiledSelector` evaluates it.
``dra_cel.py`` re-exports what is public.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.checker import Checker
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import (
    COST_LIMIT,
    MAX_EXPRESSION_BYTES,
    CelError,
    CheckError,
    SelectorCompileError,
    SelectorEvalError,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.cost import estimate_cost
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import U64
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.device import device_to_cel
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.interpreter import (
    Activation,
    Planner,
    _needs_cost_tracking,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.lexer import MAX_RECURSION_DEPTH, CelSyntaxError
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.regex import (
    RE2,
    RE_CACHE,
    compile_re2,
    require_re2,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.nodes import Call, Const, Node, children, depth
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.parser import line_col, parse
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import type_name
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import MIN_DRA_KUBERNETES, KubernetesVersion
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import QuantityError
from ansible_collections.gpufleet.serving.plugins.module_utils.semver import SemverError

# pylint: disable=unidiomatic-typecheck


def _format_error(src: str, pos: int, message: str) -> str:
    line, col = line_col(src, pos)
    lines = src.splitlines() or [""]
    text = lines[line - 1] if line - 1 < len(lines) else ""
    return f"ERROR: <input>:{line}:{col}: {message}\n | {text}\n | {'.' * (col - 1)}^"


_REGEX_FUNCS = {"matches": 1, "find": 1, "findAll": 1}


def _regex_cached_for_literal(pattern: str) -> None:
    if pattern not in RE_CACHE:
        rx = RE2(compile_re2(pattern))
        if len(RE_CACHE) < 1024:
            RE_CACHE[pattern] = rx


def _validate_regex_literals(n: Node, src: str) -> None:
    """cel.ValidateRegexLiterals: constant patterns must compile."""
    stack = [n]
    while stack:
        node = stack.pop()
        stack.extend(children(node))
        if isinstance(node, Call) and node.fn in _REGEX_FUNCS:
            args = node.args if node.target is not None else node.args[1:]
            if args and isinstance(args[0], Const) and args[0].kind == "string":
                try:
                    _regex_cached_for_literal(args[0].value)
                except ValueError as e:
                    raise CheckError(f"invalid matches argument: {e}", args[0].pos) from None


class CompiledSelector:
    """A compiled DRA device selector; evaluate with :meth:`matches`."""

    __slots__ = ("_fn", "cost_tracked", "expression", "kubernetes_version", "max_cost", "output_type")

    def __init__(
        self,
        expression: str,
        fn: Any,
        output_type: str,
        cost_tracked: bool,
        max_cost: int = U64,
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
        return self._run(Activation({"device": device_to_cel(device or {})}))

    def evaluate_with_cost(self, device: Mapping[str, Any] | None = None) -> tuple[Any, int]:
        """The raw CEL value and the runtime cost of this evaluation (0 unless ``cost_tracked``)."""
        act = Activation({"device": device_to_cel(device or {})})
        return self._run(act), act.cost

    def _run(self, act: Activation) -> Any:
        """One evaluation; every failure of the selector is a :class:`SelectorEvalError` (Kubernetes: a CEL runtime
        error, so the device does not match and the claim's allocation fails with that error)."""
        try:
            return self._fn(act)
        except CelError as e:
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
            raise SelectorEvalError(f"CEL result of type {type_name(result)} could not be converted to bool")
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
        checker = Checker(version)
        try:
            ast = parse(expression)
            if depth(ast) > MAX_RECURSION_DEPTH:
                raise CelSyntaxError(
                    f"Syntax error: expression recursion limit exceeded: limit {MAX_RECURSION_DEPTH}", 0
                )
            _validate_regex_literals(ast, expression)
            out = checker.check(ast)
        except CelSyntaxError as e:
            raise SelectorCompileError("compilation failed: " + _format_error(expression, e.pos, e.message)) from None
        except CheckError as e:
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
        fn = Planner(tracked, checker).plan(ast)
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
