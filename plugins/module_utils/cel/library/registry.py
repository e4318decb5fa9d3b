# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The function registry: every library's :class:`Function` records, and the tables the checker (``DECLS``,
:func:`unavailable`), the coster (``FUNCTIONS``' ``estimate``) and the interpreter (``RUNTIME``, ``RUNTIME_COSTS``,
``GROWTH``) read. A new function is one record in its library's file; nothing here changes.

Availability by Kubernetes version is what the API server of a cluster accepts in a *new* selector (its
NewExpressions environment; validation of ResourceClaim(Template)s and DeviceClasses uses it for expressions that
are not already stored). Sources:

* k8s.io/apiserver pkg/cel/environment/base.go (v0.36.3): every library has an IntroducedVersion; the
  NewExpressions environment holds it when the compatibility version >= IntroducedVersion, and
  DefaultCompatibilityVersion() is the binary's MinCompatibilityVersion = its version minus one minor
  (k8s.io/component-base compatibility/version.go). So a library "introduced in 1.34" is usable from 1.35.
* k8s.io/dynamic-resource-allocation cel/compile.go (v0.36.3): DRA additions gated by feature gates
  (VersionedOptions.FeatureEnabled takes priority over the version); gate defaults from
  k8s.io/kubernetes pkg/features/kube_features.go (v1.36.3). A version means a stock cluster (default gates).

Everything else the engine implements is in every supported version (>= 1.34, so compatibility >= 1.33):
ext.Strings v2 and ext.Sets (1.29), two-variable comprehensions (1.32), semver library v1 with the normalize
flag (1.33), quantity, regex and lists libraries, cel.bind. The oldest supported version is k8s/version.py's
MIN_DRA_KUBERNETES (DRA resource.k8s.io/v1 is GA from 1.34).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library import (
    core,
    dra,
    lists,
    optional,
    quantity,
    regex,
    semver,
    sets,
    strings,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Arrival, Function, Overload

#: Every function, by name (one record a name; the library modules list them).
FUNCTIONS: dict[str, Function] = {}
#: name -> overloads (the checker's declarations; functions the checker types specially have none: type, _?._)
DECLS: dict[str, list[Overload]] = {}
#: name -> implementation (the interpreter looks a call's function up here when it plans it)
RUNTIME: dict[str, Any] = {}
#: name -> runtime cost hook (calls of other functions cost 1)
RUNTIME_COSTS: dict[str, Any] = {}
#: calls whose result can be much larger than their inputs: a selector with one (or a comprehension, or ``+`` of
#: strings, bytes or lists) is evaluated with cost tracking; others are bounded by their size and the device's.
GROWTH: set[str] = set()


def register(record: Function) -> None:
    """Add one function to every table (the tables are read where they are, so they are filled in place)."""
    if record.name in FUNCTIONS:
        raise ValueError(f"CEL function {record.name!r} is declared twice")
    FUNCTIONS[record.name] = record
    if record.overloads:
        DECLS[record.name] = list(record.overloads)
    if record.runtime is not None:
        RUNTIME[record.name] = record.runtime
    if record.runtime_cost is not None:
        RUNTIME_COSTS[record.name] = record.runtime_cost
    if record.growth:
        GROWTH.add(record.name)


for _library in (core, strings, regex, lists, sets, quantity, semver, dra, optional):
    for _record in _library.FUNCTIONS:
        register(_record)

#: Fields of ``device`` that arrived later than the oldest supported version.
FIELD_ARRIVALS: dict[str, Arrival] = {
    "allowMultipleAllocations": Arrival(
        (1, 36),
        "DRA consumable capacity: the DRAConsumableCapacity feature gate is alpha (off by default) in 1.34 and 1.35, "
        "beta and on by default from 1.36",
        gate="DRAConsumableCapacity",
    ),
}

# cel-go ext.Lists(ListsVersion(3)) is in base.go with IntroducedVersion 1.34 (new selectors from Kubernetes 1.35);
# this engine does not implement it (a documented divergence), so these stay compile errors, with the reason.
EXT_LISTS = frozenset({"slice", "flatten", "distinct", "reverse", "sort", "sortBy", "lists.range"})


def _fmt_version(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def unavailable(name: str, version: tuple[int, int] | None) -> str:
    """'' when function or ``device`` field ``name`` is usable at ``version``; otherwise the reason, to append to
    the compile error."""
    if name in EXT_LISTS:
        if version is not None and version < (1, 35):
            return (
                f": '{name}' (cel-go ext.Lists) is not available in Kubernetes {_fmt_version(version)}; "
                "it arrived in Kubernetes 1.35"
            )
        return f": '{name}' (cel-go ext.Lists, Kubernetes >= 1.35) is not implemented by this engine"
    record = FUNCTIONS.get(name)
    arrival = record.arrival if record is not None else FIELD_ARRIVALS.get(name)
    if arrival is None or version is None:
        return ""
    if arrival.first is not None and version >= arrival.first:
        return ""
    since = f"; it arrived in Kubernetes {_fmt_version(arrival.first)}" if arrival.first is not None else ""
    return f": '{name}' is not available in Kubernetes {_fmt_version(version)}{since} ({arrival.why})"
