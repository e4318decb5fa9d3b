# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The cost model's arithmetic and constants, shared by the static coster (``cost.py``), the interpreter's cost
tracking (``interpreter.py``) and the function records' cost hooks (``library/``).

Static estimates are cel-go ``checker.CostEstimate`` (min, max) pairs, saturating at MaxUint64; runtime costs are
cel-go ``interpreter/runtimecost.go`` with Kubernetes' ``library/cost.go``.
"""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import CelError

# pylint: disable=unidiomatic-typecheck

#
# A port of cel-go's checker/cost.go (v0.26.0, the version Kubernetes 1.36 uses) over this engine's AST, with
# Kubernetes' estimators: k8s.io/apiserver pkg/cel/library/cost.go (CostEstimator.EstimateCallCost), the DRA
# wrapper and size estimator of k8s.io/dynamic-resource-allocation cel/compile.go (draCostEstimator, sizeEstimator)
# and cel-go ext/sets.go's overload estimators. The API server rejects a selector whose worst-case estimate exceeds
# resourceapi.CELSelectorExpressionMaxCost ("too complex, exceeds cost limit", k8s.io/kubernetes
# pkg/apis/resource/validation/validation.go validateCELSelector); so does compile_selector().
# Checked against every expectCost of k8s.io/dynamic-resource-allocation cel/compile_test.go (v0.36.3).

U64 = (1 << 64) - 1
_U64_F = float(U64)  # Go: float64(math.MaxUint64)
#: kinds whose values have size 1
SCALAR_KINDS = frozenset({"bool", "int", "uint", "double"})
#: the conversion functions (cel-go folds a conversion of a constant into a constant: no runtime cost)
CONVERSIONS = frozenset({"int", "uint", "double", "string", "bytes", "bool", "dyn", "type"})
STR_TRAVERSAL = 0.1  # common.StringTraversalCostFactor
REGEX_LENGTH = 0.25  # common.RegexStringLengthCostFactor
LIST_CREATE = 10  # common.ListCreateBaseCost
MAP_CREATE = 30  # common.MapCreateBaseCost


Est = tuple[int, int]  # (min, max), as checker.CostEstimate / checker.SizeEstimate
UNKNOWN: Est = (0, U64)


def e_add(a: Est, b: Est) -> Est:
    return (min(a[0] + b[0], U64), min(a[1] + b[1], U64))


def e_mul(a: Est, b: Est) -> Est:
    return (min(a[0] * b[0], U64), min(a[1] * b[1], U64))


def _factor1(x: int, f: float) -> int:
    """cel-go multiplyByCostFactor: ceil(x * f), saturating at MaxUint64."""
    xf = float(x)
    if xf > 0 and f > 0 and xf > _U64_F / f:
        return U64
    c = math.ceil(xf * f)
    return U64 if c >= 1 << 64 else c


def e_factor(a: Est, f: float) -> Est:
    return (_factor1(a[0], f), _factor1(a[1], f))


def e_union(a: Est, b: Est) -> Est:
    return (min(a[0], b[0]), max(a[1], b[1]))


# --------------------------------------------------------------------------- runtime cost
# ---- runtime cost (cel-go interpreter/runtimecost.go costCall, v0.26.0, with Kubernetes'
# k8s.io/apiserver pkg/cel/library/cost.go CostEstimator.CallCost and ext/sets.go's trackers)

# The largest string or list a call may build: one traversal of it costs the whole budget
# (COST_LIMIT / StringTraversalCostFactor). cel-go would build it and fail on the next traversal (or exhaust memory
# first); refusing to build it keeps a chain of replace() calls from allocating gigabytes.
MAX_RESULT_SIZE = 10_000_000


def rt_size(v: Any) -> int:
    """cel-go actualSize: the size of strings, bytes, lists and maps; 1 for anything else."""
    if isinstance(v, (str, bytes, list, tuple, dict)):
        return len(v)
    return 1


def traversal_cost(v: Any) -> int:
    """library/cost.go traversalCost (note: truncates, where the other formulas round up)."""
    if type(v) is str or type(v) is bytes:
        return int(len(v) * STR_TRAVERSAL)
    if isinstance(v, (list, tuple)):
        return sum(traversal_cost(e) for e in v)
    if isinstance(v, dict):
        return sum(traversal_cost(k) + traversal_cost(x) for k, x in v.items())
    return 1


def ceil_cost(x: float) -> int:
    return math.ceil(x)


def too_large(fn: str, size: int) -> CelError:
    return CelError(
        f"{COST_EXCEEDED} ({fn} would build a value of {size} elements, more than one traversal of the cost limit "
        f"allows: {MAX_RESULT_SIZE})"
    )


def cost_one(args: tuple) -> int:
    return 1


def cost_zero(args: tuple) -> int:
    return 0


def first_traversal(args: tuple) -> int:
    return ceil_cost(rt_size(args[0]) * STR_TRAVERSAL)


COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"
