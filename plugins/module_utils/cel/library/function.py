# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""One CEL library function, one record (cel-go keeps a function's declaration, binding and both cost hooks together,
``ext/strings.go``): its overloads (what the checker reads), its runtime implementation (the interpreter), its static
cost estimate (the coster), its runtime cost (the interpreter's cost tracking), whether its result can outgrow its
inputs, and the Kubernetes version or feature gate it arrived in (what a cluster's API server accepts in a new
selector).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.types import T, split_types, type_from_text


class Overload:
    """One declared signature: a member (receiver first in ``args``) or a global function."""

    __slots__ = ("args", "member", "result")

    def __init__(self, member: bool, args: tuple[T, ...], result: T) -> None:
        self.member, self.args, self.result = member, args, result


class Arrival:
    """When a stock API server accepts a function in a new selector: ``first`` (major, minor), or None for no
    version so far (behind a feature gate that is off by default, or not in Kubernetes' library at all); ``gate`` the
    feature gate when one decides it; ``why`` the reason the compile error names."""

    __slots__ = ("first", "gate", "why")

    def __init__(self, first: tuple[int, int] | None, why: str, gate: str = "") -> None:
        self.first, self.why, self.gate = first, why, gate


#: A static cost hook: (coster, call node, the matched overload or None) -> (cost, result size or None), the cost
#: of the call itself (the coster adds its arguments'), or None for cel-go's default (1).
Estimator = Callable[[Any, Any, "Overload | None"], "tuple[tuple[int, int], tuple[int, int] | None] | None"]
#: A runtime cost hook: the evaluated arguments (receiver first) -> the cost of the call.
RuntimeCost = Callable[[tuple], int]


class Function:
    """A CEL function: every overload of one name, and what the checker, coster and interpreter need of it.

    ``overloads`` are ``(member, "arg types", "result type")`` rows (receiver first for members; type names as in
    :func:`~...cel.types.type_from_text`: ``A``/``B`` type parameters, ``Q`` quantity, ``S`` semver).
    ``estimate`` None and ``runtime_cost`` None are cel-go's defaults (1 per call); ``cost_member_only`` sizes only
    the member overload at run time (runtimecost.go's ``matches_string``); ``growth`` marks a call whose result can be
    much larger than its inputs (a selector with one is evaluated with cost tracking); ``arrival`` None means every
    supported Kubernetes version has it.
    """

    __slots__ = (
        "arrival",
        "cost_member_only",
        "estimate",
        "growth",
        "library",
        "name",
        "overloads",
        "runtime",
        "runtime_cost",
    )

    def __init__(
        self,
        name: str,
        library: str,
        overloads: Sequence[tuple[bool, str, str]],
        runtime: Callable[..., Any] | None,
        *,
        estimate: Estimator | None = None,
        runtime_cost: RuntimeCost | None = None,
        cost_member_only: bool = False,
        growth: bool = False,
        arrival: Arrival | None = None,
    ) -> None:
        self.name = name
        self.library = library
        self.overloads = tuple(
            Overload(member, split_types(args), type_from_text(res)) for member, args, res in overloads
        )
        self.runtime = runtime
        self.estimate = estimate
        self.runtime_cost = runtime_cost
        self.cost_member_only = cost_member_only
        self.growth = growth
        self.arrival = arrival

    def __repr__(self) -> str:
        return f"Function({self.name!r}, {self.library!r}, {len(self.overloads)} overloads)"
