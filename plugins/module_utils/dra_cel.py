# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""DRA device-selector CEL engine (Kubernetes 1.34 semantics), pure Python: the façade of ``cel/``.

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

The engine lives in ``cel/``, split as cel-go is: ``lexer.py`` / ``parser.py`` (the tree in ``nodes.py``),
``checker.py``, ``cost.py`` (static estimate), ``interpreter.py`` (closures, runtime cost), ``device.py`` (the
``device`` variable), ``selector.py`` (compile), and ``library/``: one record a function (overloads, runtime,
static and runtime cost, growth, the Kubernetes version or feature gate it arrived in), read by the checker, coster and
interpreter through ``library/registry.py``. This module re-exports the names other code uses.

Parsing, checking and evaluation are implemented here (regexes aside) on the
standard library: cel-python (``celpy`` 0.5.0, cloud-custodian/cel-python) was measured and is
not used at run time: it has no cel-go type checker (so "does not compile in
Kubernetes" cannot be enforced) and no cost accounting (so the 1,000,000 limit cannot
be enforced), and its runners are 5-30x slower on these selectors; see the design
notes in ``docs/selectors.md``.
"""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.common import (
    COST_LIMIT,
    MAX_EXPRESSION_BYTES,
    SelectorCompileError,
    SelectorEvalError,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.cost import estimate_cost
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.costmodel import MAX_RESULT_SIZE, Est
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.device import device_to_cel
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.lexer import (
    MAX_RECURSION_DEPTH,
    RESERVED,
    CelSyntaxError,
    Token,
    tokenize,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.regex import (
    HAS_RE2,
    RE2_IMPORT_ERROR,
    _find,
    _find_all,
    _matches,
    require_re2,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.registry import RUNTIME as _RUNTIME
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
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.parser import Parser, line_col, parse
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.selector import (
    CompiledSelector,
    _compile,
    compile_selector,
    parse_kubernetes_version,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.types import (
    BOOL,
    BYTES,
    DEVICE,
    DOUBLE,
    DYN,
    INT,
    NULL,
    QUANTITY,
    SEMVER,
    STRING,
    UINT,
    T,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.values import (
    OPTIONAL_NONE,
    CelOptional,
    CelType,
    UInt,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

__all__ = [
    "COST_LIMIT",
    "MAX_EXPRESSION_BYTES",
    "CompiledSelector",
    "SelectorCompileError",
    "SelectorEvalError",
    "compile_selector",
    "device_to_cel",
]

# Names other code reaches through this module (the façade's contract; tests/unit/plugins/module_utils/test_dra_cel.py
# checks them): the syntax tree and parser (vocabulary.py walks selectors), the engine's types and values, the regex
# functions and the runtime table (tests), the error types.
_REEXPORTED = (
    BOOL, BYTES, Bind, COST_LIMIT, Call, CelOptional, CelSyntaxError, CelType, Comp, CompiledSelector, Cond, Const,
    DEVICE, DOUBLE, DYN, Est, GpufleetError, HAS_RE2, INT, Ident, Index, ListLit, Logic, MAX_EXPRESSION_BYTES,
    MAX_RECURSION_DEPTH, MAX_RESULT_SIZE, MapLit, NULL, Node, OPTIONAL_NONE, Parser, QUANTITY, RE2_IMPORT_ERROR,
    RESERVED, SEMVER, STRING, Select, SelectorCompileError, SelectorEvalError, StructLit, T, Token, UINT, UInt,
    compile_selector, device_to_cel, estimate_cost, line_col, parse, parse_kubernetes_version, require_re2, tokenize,
    _RUNTIME, _compile, _find, _find_all, _matches,
)  # fmt: skip
