"""Kubernetes' own allocator test table, transcribed for the allocator (design.md §2a, §3a; issue 12).

Source: kubernetes/kubernetes,
``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go``
(``TestAllocator``'s ``testcases`` map, as of commit 008b3652959ca58af8be3fb5b6ecfe9ae7638282; about 213 cases).
Every case there was read: 46 are transcribed here. A case is transcribed when it is about
``matchAttribute`` constraints, ``firstAvailable`` (prioritized list), ``allocationMode: All``, the claim limit
(``AllocationResultsMaxSize`` = 32, "exceeds the claim limit") or several requests of one claim competing for devices,
*and* our model can express it: one claim (a member's) on one node's devices, one DeviceClass per driver
(``class(name, driver)`` selects ``device.driver == driver``: here each device entry carries that class and driver).

Each test id is the upstream case name (``ours-...`` marks our own cases). Upstream's names are kept, lower-cased where
they are not DNS labels (``subReq-0`` -> ``subreq-0``). Upstream devices become one class entry per driver (a node's
pools and slices are merged: our model has none); devices that differ are listed with ``instances``. Upstream's
expected outcome is asserted as it is: allocated or not, which ``firstAvailable`` alternative, how many devices per
request. Where upstream expects an *error*, the comment on the case says which of our equivalents applies: the claim
does not fit (``ok`` is False) or the member is invalid (``models.parse`` raises ``FleetValidationError``).
Where our allocator disagrees with upstream the case is ``xfail(strict=True)`` with the reason, never re-expected.

Our own cases (``ours-...``, ``test_ours_...``) check that the search is exact where a greedy choice fails, and compare
it on random small claims with our reading of upstream's device-by-device search (``upstream_dfs``).

Skipped upstream cases, by reason:

* not about these features (single plain ExactCount request, pools and slices, class lookup): empty, simple,
  other-node, devices-split-across-different-slices, obsolete-slice, duplicate-slice, no-slices, no-classes,
  unknown-class, empty-class, no-claims-to-allocate, unknown-selector, invalid-CEL-one-device,
  invalid-CEL-one-device-class, different-resourceslices-in-pool-can-target-different-nodes,
  invalid-pool-is-ok-if-devices-can-be-allocated-from-other, invalid-pool-is-error-if-no-other-device-can-be-allocated,
  no-allocation-from-incomplete-pools, check-combinations-within-single-request-single-pool-single-slice,
  check-combinations-within-single-request-single-pool-multiple-slices,
  check-combinations-within-single-request-multiple-pools-multiple-slices,
  check-combinations-within-single-request-many-pools;
* several claims (we allocate one claim; they do not reduce to one claim): small-and-large-backtrack-claims,
  not-enough-suitable-devices, several-different-drivers, all-devices-plus-another, all-devices-plus-another-reversed,
  all-devices-many-plus-another, all-devices-many-plus-another-reversed, all-devices-no-solution,
  all-devices-no-solution-reversed;
* devices already allocated to other claims (``allocatedDevices``): all-devices-some-allocated,
  all-devices-some-allocated-prioritized-list, already-allocated-devices,
  prioritized-list-subrequests-with-allocation-mode-all, prioritized-list-allocation-mode-all;
* resource pools being updated or spanning nodes by generation: all-devices-of-the-incomplete-pool,
  multi-host-resource-pool-with-stale-slice-for-current-node,
  multi-host-resource-pool-complete-update-from-node-1-to-node-2,
  multi-host-resource-pool-complete-update-from-node-2-to-node-1,
  multi-host-resource-pool-incomplete-update-from-node-1-to-node-2,
  multi-host-resource-pool-incomplete-update-from-node-2-to-node-1;
* network-attached devices / node selectors on slices: network-attached-device,
  unsuccessful-allocation-network-attached-device, many-network-attached-devices, local-and-network-attached-devices;
* admin access: all-devices-some-allocated-admin-access, all-devices-some-allocating-admin-access,
  count-devices-some-allocated-admin-access, separate-claims-share-device-admin-access,
  admin-access-claims-device-allocating-for-non-admin-access, admin-access-disabled, admin-access-enabled;
* device configuration with nothing else to check: with-class-device-config, claim-with-device-config;
* feature gate switched off: prioritized-list-disabled;
* a DeviceClass with a selector beyond its driver:
  prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset;
* partitionable devices (counters): every partitionable-devices-* case (single-device, prioritized-list,
  multiple-devices, multiple-capacity-pools, multiple-counters, multiple-pools, unused-counters-in-counter-set,
  no-capacity-available, overallocated-capacity-pool, disabled-device-consumes-counters,
  disabled-other-device-do-not-consume-counters, disabled-per-device-node-selection,
  per-device-node-selection-nodename, per-device-node-selection-node-selector,
  per-device-node-selection-node-selector-multiple-devices, with-attribute-selector, with-binding-conditions*,
  same-counter-set-name-in-different-resource-slices, device-counter-consumption-references-*,
  devices-on-different-nodes-consume-same-counter-set, validation-error-on-non-targeting-slice);
* device taints: every tainted-* case;
* binding conditions: device-binding-conditions, binding-conditions-multiple-devices,
  binding-conditions-with-and-without, binding-conditions-without-feature-gate, node-restriction,
  check-combinations-with-backtracking-across-slices-and-pools;
* consumable capacity / multiple allocations of one device: every consumable-capacity-* and
  allow-multiple-allocations-* case (consumable-capacity-with-multi-allocatable-device-backtrack also has two claims);
* distinctAttribute constraints: with-distinct-constraints, with-distinct-constraints-attribute-not-set,
  with-distinct-constraints-unknown-type-attribute, with-distinct-constraints-with-subrequests,
  distinct-constraint-one-multi-allocatable-device-with-distinct-constraint,
  distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint, every list-attributes-distinct-* case;
* list-typed attribute values: every list-attributes-match-* case except the scalar one (transcribed),
  list-attributes-disabled-match-constraint-with-lists.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils import models
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.allocator import (
    SEARCH_BUDGET,
    Allocation,
    allocate,
    lookup_attribute,
    node_devices,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.constraints import MatchAttribute
from ansible_collections.gpufleet.serving.plugins.module_utils.dra_cel import SelectorCompileError
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import SELECTORS

# --------------------------------------------------------------------------------------------------------------------
# Upstream's fixtures in our shapes
# --------------------------------------------------------------------------------------------------------------------

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A, CLASS_B = "class-a", "class-b"
MAX = models.CLAIM_DEVICES_MAX  # resourceapi.AllocationResultsMaxSize

# Upstream's attributes: unqualified on the device (the driver's domain), fully qualified in constraints.
INT_ATTR = f"{DRIVER_A}/numa"
VERSION_ATTR = f"{DRIVER_A}/driverVersion"
STRING_ATTR = f"{DRIVER_A}/stringAttribute"
BOOL_ATTR = f"{DRIVER_A}/boolAttribute"
NON_EXISTENT_ATTR = f"{DRIVER_A}/NonExistentAttribute"


def mem_at_least(quantity: str) -> str:
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{quantity}")) >= 0'


def attr_is(name: str, value: str) -> str:
    return f'device.attributes["{DRIVER_A}"].{name} == "{value}"'


def s(v: str) -> dict[str, Any]:
    return {"string": v}


def i(v: int) -> dict[str, Any]:
    return {"int": v}


def b(v: bool) -> dict[str, Any]:
    return {"bool": v}


def ver(v: str) -> dict[str, Any]:
    return {"version": v}


def one(attributes: dict[str, Any] | None = None, memory: str | None = None) -> dict[str, Any]:
    """One device of an entry (an ``instances`` item): its attributes and, as upstream's ``device(name, capacity,
    attributes)``, its ``memory`` capacity."""
    out: dict[str, Any] = {}
    if attributes:
        out["attributes"] = attributes
    if memory:
        out["capacity"] = {"memory": {"value": memory}}
    return out


def entry(driver: str, cls: str, count: int = 1, instances: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A class entry: ``count`` identical devices of ``driver`` in DeviceClass ``cls``, or one per ``instances``."""
    name = {DRIVER_A: "dev-a", DRIVER_B: "dev-b"}[driver]
    out: dict[str, Any] = {"name": name, "driver": driver, "device_class_name": cls}
    if instances is not None:
        out["count"] = len(instances)
        out["instances"] = instances
    else:
        out["count"] = count
    return out


def dev_a(*instances: dict[str, Any], count: int = 1) -> dict[str, Any]:
    return entry(DRIVER_A, CLASS_A, count, list(instances) if instances else None)


def dev_b(*instances: dict[str, Any], count: int = 1) -> dict[str, Any]:
    return entry(DRIVER_B, CLASS_B, count, list(instances) if instances else None)


def req(name: str, cls: str, count: int | None = 1, *cels: str, mode: str | None = None) -> dict[str, Any]:
    """upstream ``request(name, class, count, selectors...)`` (and ``allocationMode: All`` with ``mode``)."""
    out: dict[str, Any] = {"name": name, "device_class_name": cls}
    if mode == "All":
        out["allocation_mode"] = "All"
    elif count is not None:
        out["count"] = count
    if cels:
        out["selectors"] = [{"cel": c} for c in cels]
    return out


def all_req(name: str, cls: str, *cels: str) -> dict[str, Any]:
    return req(name, cls, None, *cels, mode="All")


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    """upstream ``requestWithPrioritizedList(name, subRequest(...)...)``."""
    return {"name": name, "first_available": list(subs)}


def claim(*requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"devices": list(requests)}
    if constraints:
        out["constraints"] = constraints
    return out


def match(attribute: str, *requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"match_attribute": attribute}
    if requests:
        out["requests"] = list(requests)
    return out


def got(*chosen: tuple[str, str | None, str, int]) -> list[tuple[str, str | None, str, int]]:
    """Upstream's allocation result as (request, first_available alternative or None, device class, devices)."""
    return list(chosen)


NOT_ALLOCATED = None  # upstream: ``expectResults: nil`` (no allocation, no error)


def check(expr: str, dev: Any) -> tuple[bool, str | None]:
    return SELECTORS.check(expr, dev.shape, dev.slice)


def run(devices: list[dict[str, Any]], node_selector: dict[str, Any]) -> Allocation:
    cls = models.parse(models.InferenceClass, {"devices": devices}, "classes.upstream")
    ns = models.parse(models.NodeSelector, node_selector, "node_selector")
    return allocate(ns, node_devices(cls), check)


def xfail(reason: str) -> Any:
    return pytest.mark.xfail(strict=True, reason=reason)


# --------------------------------------------------------------------------------------------------------------------
# Cases that allocate, or do not, on one node
# --------------------------------------------------------------------------------------------------------------------

CASES = [
    # ---- several requests competing for devices --------------------------------------------------------------------
    # upstream: "small-and-large"
    pytest.param(
        [dev_a(one(memory="1Gi"), one(memory="2Gi"))],
        claim(req("req-0", CLASS_A, 1, mem_at_least("1Gi")), req("req-1", CLASS_A, 1, mem_at_least("2Gi"))),
        got(("req-0", None, CLASS_A, 1), ("req-1", None, CLASS_A, 1)),
        id="small-and-large",
    ),
    # upstream: "small-and-large-backtrack-requests" (the large device first: the small request must not keep it)
    pytest.param(
        [dev_a(one(memory="2Gi"), one(memory="1Gi"))],
        claim(req("req-0", CLASS_A, 1, mem_at_least("1Gi")), req("req-1", CLASS_A, 1, mem_at_least("2Gi"))),
        got(("req-0", None, CLASS_A, 1), ("req-1", None, CLASS_A, 1)),
        id="small-and-large-backtrack-requests",
    ),
    # upstream: "with-class-device-config-with-multiple-request-and-configs" (class configs are not modelled; they do
    # not change which devices are allocated)
    pytest.param(
        [dev_a(count=2), dev_b()],
        claim(req("req-0", CLASS_A, 1), req("req-1", CLASS_A, 1), req("req-2", CLASS_B, 1)),
        got(("req-0", None, CLASS_A, 1), ("req-1", None, CLASS_A, 1), ("req-2", None, CLASS_B, 1)),
        id="with-class-device-config-with-multiple-request-and-configs",
    ),
    # upstream: "check-combinations-with-backtracking" (req-1 first takes device X, which req-2 needs)
    pytest.param(
        [dev_a(one({"type": s("X")}), one({"type": s("Y")}), one({"type": s("Y")}))],
        claim(req("req-1", CLASS_A, 2), req("req-2", CLASS_A, 1, attr_is("type", "X"))),
        got(("req-1", None, CLASS_A, 2), ("req-2", None, CLASS_A, 1)),
        id="check-combinations-with-backtracking",
    ),
    # ---- allocationMode: All ---------------------------------------------------------------------------------------
    # upstream: "all-devices-single"
    pytest.param(
        [dev_a()], claim(all_req("req-0", CLASS_A)), got(("req-0", None, CLASS_A, 1)), id="all-devices-single"
    ),
    # upstream: "all-devices-many" (one device in each of two pools of the node)
    pytest.param(
        [dev_a(count=2)], claim(all_req("req-0", CLASS_A)), got(("req-0", None, CLASS_A, 2)), id="all-devices-many"
    ),
    # upstream: "all-devices-slice-without-devices" (no class-a device on the node; a node of ours has at least one
    # device, so it has an unrelated class-b one)
    pytest.param([dev_b()], claim(all_req("req-0", CLASS_A)), NOT_ALLOCATED, id="all-devices-slice-without-devices"),
    # upstream: "all-devices-no-slices" (as above: no class-a device)
    pytest.param([dev_b()], claim(all_req("req-0", CLASS_A)), NOT_ALLOCATED, id="all-devices-no-slices"),
    # upstream: "allocation-mode-all-with-multi-host-resource-pool" (the pool also has a device on node-2: not ours)
    pytest.param(
        [dev_a()],
        claim(all_req("req-0", CLASS_A)),
        got(("req-0", None, CLASS_A, 1)),
        id="allocation-mode-all-with-multi-host-resource-pool",
    ),
    # ---- matchAttribute ---------------------------------------------------------------------------------------------
    # upstream: "with-constraint"
    pytest.param(
        [
            dev_a(
                *[
                    one(
                        {
                            "driverVersion": ver("1.0.0"),
                            "numa": i(1),
                            "stringAttribute": s("stringAttributeValue"),
                            "boolAttribute": b(True),
                        }
                    )
                ]
                * 2
            )
        ],
        claim(
            req("req-0", CLASS_A, 1),
            req("req-1", CLASS_A, 1),
            constraints=[match(INT_ATTR), match(VERSION_ATTR), match(STRING_ATTR), match(BOOL_ATTR)],
        ),
        got(("req-0", None, CLASS_A, 1), ("req-1", None, CLASS_A, 1)),
        id="with-constraint",
    ),
    # upstream: "with-constraint-non-existent-attribute"
    pytest.param(
        [dev_a()],
        claim(req("req-0", CLASS_A, 1), constraints=[match(NON_EXISTENT_ATTR)]),
        NOT_ALLOCATED,
        id="with-constraint-non-existent-attribute",
    ),
    # upstream: "with-constraint-not-matching-int-attribute"
    pytest.param(
        [dev_a(one({"numa": i(1)}), one({"numa": i(2)})), dev_b()],
        claim(req("req-0", CLASS_A, 2), constraints=[match(INT_ATTR)]),
        NOT_ALLOCATED,
        id="with-constraint-not-matching-int-attribute",
    ),
    # upstream: "with-constraint-not-matching-int-attribute-all-devices" -- upstream expects an error ("cannot add
    # device driver-a/pool-1/device-2 because a claim constraint would not be satisfied"); ours: the claim does not fit
    pytest.param(
        [dev_a(one({"numa": i(1)}), one({"numa": i(2)})), dev_b()],
        claim(all_req("req-0", CLASS_A), constraints=[match(INT_ATTR)]),
        NOT_ALLOCATED,
        id="with-constraint-not-matching-int-attribute-all-devices",
    ),
    # upstream: "with-constraint-not-matching-string-attribute"
    pytest.param(
        [
            dev_a(
                one({"stringAttribute": s("stringAttributeValue")}),
                one({"stringAttribute": s("stringAttributeValue2")}),
            )
        ],
        claim(req("req-0", CLASS_A, 2), constraints=[match(STRING_ATTR)]),
        NOT_ALLOCATED,
        id="with-constraint-not-matching-string-attribute",
    ),
    # upstream: "with-constraint-not-matching-bool-attribute"
    pytest.param(
        [dev_a(one({"boolAttribute": b(True)}), one({"boolAttribute": b(False)}))],
        claim(req("req-0", CLASS_A, 2), constraints=[match(BOOL_ATTR)]),
        NOT_ALLOCATED,
        id="with-constraint-not-matching-bool-attribute",
    ),
    # upstream: "with-constraint-not-matching-version-attribute"
    pytest.param(
        [dev_a(one({"driverVersion": ver("1.0.0")}), one({"driverVersion": ver("2.0.0")}))],
        claim(req("req-0", CLASS_A, 2), constraints=[match(VERSION_ATTR)]),
        NOT_ALLOCATED,
        id="with-constraint-not-matching-version-attribute",
    ),
    # upstream: "with-constraint-for-request" (the constraint names req-0 only)
    pytest.param(
        [dev_a(one({"driverVersion": ver("1.0.0")}), one({"driverVersion": ver("2.0.0")}))],
        claim(req("req-0", CLASS_A, 1), req("req-1", CLASS_A, 1), constraints=[match(VERSION_ATTR, "req-0")]),
        got(("req-0", None, CLASS_A, 1), ("req-1", None, CLASS_A, 1)),
        id="with-constraint-for-request",
    ),
    # upstream: "with-constraint-for-request-retry" (device-1 breaks the second constraint: backtrack)
    pytest.param(
        [
            dev_a(
                one({"driverVersion": ver("1.0.0"), "stringAttribute": s("a")}),
                one({"driverVersion": ver("2.0.0"), "stringAttribute": s("b")}),
                one({"driverVersion": ver("3.0.0"), "stringAttribute": s("b")}),
            )
        ],
        claim(
            req("req-0", CLASS_A, 1),
            req("req-1", CLASS_A, 1),
            constraints=[match(VERSION_ATTR, "req-0"), match(STRING_ATTR)],
        ),
        got(("req-0", None, CLASS_A, 1), ("req-1", None, CLASS_A, 1)),
        id="with-constraint-for-request-retry",
    ),
    # upstream: "list-attributes-match-constaint-scalar-string-values" (scalar values only)
    pytest.param(
        [dev_a(one({"stringAttribute": s("value1")}), one({"stringAttribute": s("value1")}))],
        claim(req("req-0", CLASS_A, 2), constraints=[match(STRING_ATTR)]),
        got(("req-0", None, CLASS_A, 2)),
        id="list-attributes-match-constaint-scalar-string-values",
    ),
    # ---- firstAvailable ---------------------------------------------------------------------------------------------
    # upstream: "all-devices-slice-without-devices-prioritized-list"
    pytest.param(
        [dev_b()],
        claim(first_available("req-0", all_req("subreq-0", CLASS_A), req("subreq-1", CLASS_B, 1))),
        got(("req-0", "subreq-1", CLASS_B, 1)),
        id="all-devices-slice-without-devices-prioritized-list",
    ),
    # upstream: "all-devices-no-slices-prioritized-list"
    pytest.param(
        [dev_b()],
        claim(first_available("req-0", all_req("subreq-0", CLASS_A), req("subreq-1", CLASS_B, 1))),
        got(("req-0", "subreq-1", CLASS_B, 1)),
        id="all-devices-no-slices-prioritized-list",
    ),
    # upstream: "prioritized-list-first-unavailable"
    pytest.param(
        [dev_a()],
        claim(first_available("req-0", req("subreq-0", CLASS_B, 1), req("subreq-1", CLASS_A, 1))),
        got(("req-0", "subreq-1", CLASS_A, 1)),
        id="prioritized-list-first-unavailable",
    ),
    # upstream: "prioritized-list-non-available"
    pytest.param(
        [dev_a(), dev_b()],
        claim(first_available("req-0", req("subreq-0", CLASS_B, 2), req("subreq-1", CLASS_A, 2))),
        NOT_ALLOCATED,
        id="prioritized-list-non-available",
    ),
    # upstream: "prioritized-list-device-config" (claim configs are not modelled)
    pytest.param(
        [dev_b(count=2)],
        claim(first_available("req-0", req("subreq-0", CLASS_A, 1), req("subreq-1", CLASS_B, 2))),
        got(("req-0", "subreq-1", CLASS_B, 2)),
        id="prioritized-list-device-config",
    ),
    # upstream: "prioritized-list-class-config" (class configs are not modelled)
    pytest.param(
        [dev_b(count=2), dev_a()],
        claim(first_available("req-0", req("subreq-0", CLASS_A, 2), req("subreq-1", CLASS_B, 2))),
        got(("req-0", "subreq-1", CLASS_B, 2)),
        id="prioritized-list-class-config",
    ),
    # upstream: "prioritized-list-subrequests-with-expressions"
    pytest.param(
        [dev_a(one(memory="2Gi"), one(memory="2Gi"), one(memory="1Gi"))],
        claim(
            req("req-0", CLASS_A, 1, mem_at_least("1Gi")),
            first_available(
                "req-1",
                req("subreq-0", CLASS_A, 1, mem_at_least("4Gi")),
                req("subreq-1", CLASS_A, 2, mem_at_least("2Gi")),
            ),
        ),
        got(("req-0", None, CLASS_A, 1), ("req-1", "subreq-1", CLASS_A, 2)),
        id="prioritized-list-subrequests-with-expressions",
    ),
    # upstream: "prioritized-list-subrequests-with-constraints-ref-parent-request"
    pytest.param(
        [
            dev_a(
                one({"driverVersion": ver("1.0.0")}, "8Gi"),
                one({"driverVersion": ver("2.0.0")}, "2Gi"),
                one({"driverVersion": ver("1.0.0")}, "1Gi"),
            )
        ],
        claim(
            req("req-0", CLASS_A, 1, mem_at_least("8Gi")),
            first_available(
                "req-1",
                req("subreq-0", CLASS_A, 1, mem_at_least("2Gi")),
                req("subreq-1", CLASS_A, 1, mem_at_least("1Gi")),
            ),
            constraints=[match(VERSION_ATTR, "req-0", "req-1")],
        ),
        got(("req-0", None, CLASS_A, 1), ("req-1", "subreq-1", CLASS_A, 1)),
        id="prioritized-list-subrequests-with-constraints-ref-parent-request",
    ),
    # upstream: "prioritized-list-subrequests-with-constraints-ref-sub-request"
    pytest.param(
        [dev_a(one({"driverVersion": ver("1.0.0")}, "8Gi"), one({"driverVersion": ver("2.0.0")}, "2Gi"))],
        claim(
            req("req-0", CLASS_A, 1, mem_at_least("8Gi")),
            first_available(
                "req-1",
                req("subreq-0", CLASS_A, 1, mem_at_least("2Gi")),
                req("subreq-1", CLASS_A, 1, mem_at_least("1Gi")),
            ),
            constraints=[match(VERSION_ATTR, "req-0", "req-1/subreq-0")],
        ),
        got(("req-0", None, CLASS_A, 1), ("req-1", "subreq-1", CLASS_A, 1)),
        id="prioritized-list-subrequests-with-constraints-ref-sub-request",
    ),
    # upstream: "prioritized-list-allocation-mode-all-multiple-requests"
    pytest.param(
        [dev_a(count=2)],
        claim(
            req("req-0", CLASS_A, 1),
            first_available("req-1", all_req("subreq-0", CLASS_A), req("subreq-1", CLASS_A, 1)),
        ),
        got(("req-0", None, CLASS_A, 1), ("req-1", "subreq-1", CLASS_A, 1)),
        id="prioritized-list-allocation-mode-all-multiple-requests",
    ),
    # upstream: "prioritized-list-multi-request"
    pytest.param(
        [dev_a(one(memory="8Gi"), one(memory="4Gi"))],
        claim(
            req("req-1", CLASS_A, 1, mem_at_least("8Gi")),
            first_available(
                "req-0",
                req("subreq-0", CLASS_A, 1, mem_at_least("8Gi")),
                req("subreq-1", CLASS_A, 1, mem_at_least("4Gi")),
            ),
        ),
        got(("req-1", None, CLASS_A, 1), ("req-0", "subreq-1", CLASS_A, 1)),
        id="prioritized-list-multi-request",
    ),
    # upstream: "prioritized-list-with-backtracking"
    pytest.param(
        [dev_a(one(memory="8Gi"), one(memory="4Gi"))],
        claim(
            first_available(
                "req-0",
                req("subreq-0", CLASS_A, 1, mem_at_least("8Gi")),
                req("subreq-1", CLASS_A, 1, mem_at_least("4Gi")),
            ),
            req("req-1", CLASS_A, 1, mem_at_least("8Gi")),
        ),
        got(("req-0", "subreq-1", CLASS_A, 1), ("req-1", None, CLASS_A, 1)),
        id="prioritized-list-with-backtracking",
    ),
    # upstream: "prioritized-list-too-many-in-first-subrequest" -- the first alternative asks for 500 devices (over
    # the claim limit: skipped), the second is allocated. The API server accepts any count > 0.
    pytest.param(
        [dev_a()],
        claim(first_available("req-0", req("subreq-0", CLASS_B, 500), req("subreq-1", CLASS_A, 1))),
        got(("req-0", "subreq-1", CLASS_A, 1)),
        id="prioritized-list-too-many-in-first-subrequest",
    ),
    # upstream: "prioritized-list-allocation-mode-all-with-selectors" (All must find at least one device, else the next
    # alternative)
    pytest.param(
        [dev_a(one({"generation": s("v5")}))],
        claim(
            first_available(
                "req-0",
                all_req("subreq-0", CLASS_A, attr_is("generation", "v6")),
                all_req("subreq-1", CLASS_A, attr_is("generation", "v5")),
            )
        ),
        got(("req-0", "subreq-1", CLASS_A, 1)),
        id="prioritized-list-allocation-mode-all-with-selectors",
    ),
    # upstream: "prioritized-list-allocation-mode-all-with-selectors-multiple-pools"
    pytest.param(
        [dev_a(one({"generation": s("v5")}), one({"generation": s("v5")}))],
        claim(
            first_available(
                "req-0",
                all_req("subreq-0", CLASS_A, attr_is("generation", "v6")),
                all_req("subreq-1", CLASS_A, attr_is("generation", "v5")),
            )
        ),
        got(("req-0", "subreq-1", CLASS_A, 2)),
        id="prioritized-list-allocation-mode-all-with-selectors-multiple-pools",
    ),
    # upstream: "prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes" (node-2's v5 and v6
    # devices are not on our node)
    pytest.param(
        [dev_a(one({"generation": s("v5")}))],
        claim(
            first_available(
                "req-0",
                all_req("subreq-0", CLASS_A, attr_is("generation", "v6")),
                all_req("subreq-1", CLASS_A, attr_is("generation", "v5")),
            )
        ),
        got(("req-0", "subreq-1", CLASS_A, 1)),
        id="prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",
    ),
    # upstream: "check-combinations-with-prioritized-list"
    pytest.param(
        [dev_a(one({"type": s("X")}), one({"type": s("Y")}), one({"type": s("Y")}))],
        claim(
            first_available("req-1", req("subreq-0", CLASS_A, 3, attr_is("type", "Y")), req("subreq-1", CLASS_A, 2)),
            first_available("req-2", req("subreq-0", CLASS_A, 2), req("subreq-1", CLASS_A, 1, attr_is("type", "X"))),
        ),
        got(("req-1", "subreq-1", CLASS_A, 2), ("req-2", "subreq-1", CLASS_A, 1)),
        id="check-combinations-with-prioritized-list",
    ),
    # ---- the claim limit (AllocationResultsMaxSize) -----------------------------------------------------------------
    # upstream: "many-devices-okay" (32 devices is allowed; no slices, so nothing is allocated and there is no error)
    pytest.param([dev_b()], claim(req("req-0", CLASS_A, MAX)), NOT_ALLOCATED, id="many-devices-okay"),
    # upstream: "max-number-devices"
    pytest.param(
        [dev_a(count=MAX)],
        claim(req("req-0", CLASS_A, MAX)),
        got(("req-0", None, CLASS_A, MAX)),
        id="max-number-devices",
    ),
    # upstream: "prioritized-list-max-allocation-limit-request" (32 + 16 or 32 + 32 exceed the limit: 16 + 16)
    pytest.param(
        [dev_a(count=2 * MAX)],
        claim(
            first_available("req-0", req("subreq-0", CLASS_A, MAX), req("subreq-1", CLASS_A, MAX // 2)),
            first_available("req-1", req("subreq-0", CLASS_A, MAX), req("subreq-1", CLASS_A, MAX // 2)),
        ),
        got(("req-0", "subreq-1", CLASS_A, MAX // 2), ("req-1", "subreq-1", CLASS_A, MAX // 2)),
        id="prioritized-list-max-allocation-limit-request",
    ),
    # upstream: "prioritized-list-max-allocation-allocation-mode-all" (All finds 31, plus req-1's 2 is 33)
    pytest.param(
        [dev_a(count=MAX - 1), dev_b(count=2)],
        claim(
            first_available("req-0", all_req("subreq-0", CLASS_A), req("subreq-1", CLASS_A, 2)),
            req("req-1", CLASS_B, 2),
        ),
        got(("req-0", "subreq-1", CLASS_A, 2), ("req-1", None, CLASS_B, 2)),
        id="prioritized-list-max-allocation-allocation-mode-all",
    ),
]

# --------------------------------------------------------------------------------------------------------------------
# Our own cases: the search is exact where a greedy choice would fail (not upstream's)
# --------------------------------------------------------------------------------------------------------------------

GPU, NIC = "gpu.example.com", "nic.example.com"
PCIE = f"{GPU}/pcieRoot"


def gpu(root: str, product: str = "H100") -> dict[str, Any]:
    return {"attributes": {"pcieRoot": s(root), "product": s(product)}}


OURS = [
    # ours: the first GPUs (root A) satisfy the gpu request alone, but the only NIC is on root B.
    pytest.param(
        [
            {
                "name": "gpu",
                "driver": GPU,
                "device_class_name": GPU,
                "count": 4,
                "instances": [gpu("a"), gpu("a"), gpu("b"), gpu("b")],
            },
            {
                "name": "nic",
                "driver": NIC,
                "device_class_name": NIC,
                "count": 1,
                "attributes": {f"{GPU}/pcieRoot": s("b")},
            },
        ],
        claim(req("gpu", GPU, 2), req("nic", NIC, 1), constraints=[match(PCIE, "gpu", "nic")]),
        got(("gpu", None, GPU, 2), ("nic", None, NIC, 1)),
        id="ours-constraint-needs-backtracking-over-groups",
    ),
    # ours: "H100 else 2xA100" with a NIC on the same PCIe root: the H100 fits alone, but not with the NIC.
    pytest.param(
        [
            {
                "name": "gpu",
                "driver": GPU,
                "device_class_name": GPU,
                "count": 3,
                "instances": [gpu("a", "H100"), gpu("b", "A100"), gpu("b", "A100")],
            },
            {
                "name": "nic",
                "driver": NIC,
                "device_class_name": NIC,
                "count": 1,
                "attributes": {f"{GPU}/pcieRoot": s("b")},
            },
        ],
        claim(
            first_available(
                "accel",
                req("h100", GPU, 1, f'device.attributes["{GPU}"].product == "H100"'),
                req("a100", GPU, 2, f'device.attributes["{GPU}"].product == "A100"'),
            ),
            req("nic", NIC, 1),
            constraints=[match(PCIE, "accel", "nic")],
        ),
        got(("accel", "a100", GPU, 2), ("nic", None, NIC, 1)),
        id="ours-first-available-backtracks-for-a-later-constraint",
    ),
    # ours: the first request may take any device; greedily it takes X, which the All request then finds taken.
    pytest.param(
        [dev_a(one({"type": s("X")}), one({"type": s("Y")}))],
        claim(req("req-0", CLASS_A, 1), all_req("req-1", CLASS_A, attr_is("type", "X"))),
        got(("req-0", None, CLASS_A, 1), ("req-1", None, CLASS_A, 1)),
        id="ours-all-request-after-a-greedy-choice",
    ),
    # ours: three single-device requests with overlapping selectors (a perfect matching exists, greedy misses it).
    pytest.param(
        [dev_a(one({"type": s("X")}), one({"type": s("Y")}), one({"type": s("Z")}))],
        claim(
            req("req-0", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].type in ["X", "Y"]'),
            req("req-1", CLASS_A, 1, attr_is("type", "X")),
            req("req-2", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].type in ["Y", "Z"]'),
        ),
        got(("req-0", None, CLASS_A, 1), ("req-1", None, CLASS_A, 1), ("req-2", None, CLASS_A, 1)),
        id="ours-matching-needs-backtracking",
    ),
    # ours: an alternative over the claim limit (33 of 40 matching devices) is skipped, the next one is allocated.
    pytest.param(
        [dev_a(), dev_b(count=40)],
        claim(first_available("req-0", req("subreq-0", CLASS_B, MAX + 1), req("subreq-1", CLASS_A, 1))),
        got(("req-0", "subreq-1", CLASS_A, 1)),
        id="ours-alternative-over-the-claim-limit-is-skipped",
    ),
    # ours: no assignment exists (every pair of devices disagrees on numa): the search says so, without giving up.
    pytest.param(
        [dev_a(*[one({"numa": i(n)}) for n in range(8)])],
        claim(req("req-0", CLASS_A, 1), req("req-1", CLASS_A, 1), constraints=[match(INT_ATTR)]),
        NOT_ALLOCATED,
        id="ours-exhaustive-no",
    ),
]


@pytest.mark.parametrize(("devices", "node_selector", "expected"), CASES + OURS)
def test_allocate_as_upstream(devices: list[dict[str, Any]], node_selector: dict[str, Any], expected: Any) -> None:
    result = run(devices, node_selector)
    if expected is NOT_ALLOCATED:
        assert not result.ok, f"allocated {result.chosen}, upstream allocates nothing"
        assert result.why, "a claim that does not fit says why"
        assert f"gave up after {SEARCH_BUDGET}" not in result.why
    else:
        assert result.ok, result.why
        assert [(c.request, c.sub, c.device_class_name, c.devices) for c in result.chosen] == expected


# --------------------------------------------------------------------------------------------------------------------
# Cases where upstream's allocator returns an error that our models reject up front
# --------------------------------------------------------------------------------------------------------------------

INVALID = [
    # upstream: "too-many-devices-single-request" -- error "exceeds the claim limit"; ours: a validation error (the
    # member can never fit: design.md §3a)
    pytest.param(claim(req("req-0", CLASS_A, 500)), id="too-many-devices-single-request"),
    # upstream: "all-devices-invalid-CEL" (despite its name, a request of 500 devices) -- error "exceeds the claim
    # limit"; ours: a validation error
    pytest.param(claim(req("req-0", CLASS_A, 500)), id="all-devices-invalid-CEL"),
    # upstream: "too-many-devices-total" (32 + 1 devices, 33 on the node) -- error "exceeds the claim limit"; ours: a
    # validation error
    pytest.param(claim(req("req-0", CLASS_A, MAX), req("req-1", CLASS_A, 1)), id="too-many-devices-total"),
    # upstream: "unknown-allocation-mode" -- error "unsupported count mode future-mode"; ours: a validation error
    pytest.param(
        claim({"name": "req-0", "device_class_name": CLASS_A, "allocation_mode": "future-mode"}),
        id="unknown-allocation-mode",
    ),
    # upstream: "unknown-constraint" (a constraint without matchAttribute) -- error "empty constraint (unsupported
    # constraint type?)"; ours: a validation error
    pytest.param({"devices": [req("req-0", CLASS_A, 1)], "constraints": [{}]}, id="unknown-constraint"),
]


@pytest.mark.parametrize("node_selector", INVALID)
def test_invalid_as_upstream(node_selector: dict[str, Any]) -> None:
    with pytest.raises(FleetValidationError):
        models.parse(models.NodeSelector, node_selector, "node_selector")


def test_too_many_devices_total_message() -> None:
    # upstream: "too-many-devices-total" -- the error names the claim limit.
    with pytest.raises(FleetValidationError, match="at most 32 devices to one claim"):
        models.parse(models.NodeSelector, claim(req("req-0", CLASS_A, MAX), req("req-1", CLASS_A, 1)), "ns")


def test_invalid_cel_all_devices() -> None:
    # upstream: "invalid-CEL-all-devices" -- an All request whose selector does not compile ("noSuchVar") is an error
    # ("undeclared reference"), not "no device matches"; ours: the selector engine raises SelectorCompileError.
    with pytest.raises(SelectorCompileError, match="undeclared reference to 'noSuchVar'"):
        run([dev_a()], claim(all_req("req-0", CLASS_A, "noSuchVar")))


# --------------------------------------------------------------------------------------------------------------------
# Ours: upstream's search device by device, against the group search on random small claims
# --------------------------------------------------------------------------------------------------------------------


def upstream_dfs(ns: models.NodeSelector, devs: list[Any]) -> list[tuple[str, str | None, int]] | None:
    """Our reading of upstream's ``allocateOne`` for one claim on one node: requests in order, a request's alternatives
    in order, devices in slice order, device sets in index order (no permutations), ``All`` takes every matching device
    and needs one, a constraint checks each added device against the value of those already in the claim. The first
    allocation found, as (request, alternative, devices), or None."""
    constraints = [MatchAttribute(c.requests, c.match_attribute) for c in ns.constraints]
    alternatives = []
    for r in ns.devices:
        alts = []
        for alt in r.alternatives:
            idx = [
                k
                for k, d in enumerate(devs)
                if d.device_class_name == alt.device_class_name and all(check(x.cel, d)[0] for x in alt.selectors)
            ]
            alts.append((alt.name if r.first_available is not None else None, alt, idx))
        alternatives.append(alts)
    used: set[int] = set()

    def extend(request: str, sub: str | None, combo: tuple[int, ...], values: list[Any]) -> list[Any] | None:
        values = list(values)
        for ci, c in enumerate(constraints):
            if not c.applies(request, sub):
                continue
            for k in combo:
                v = lookup_attribute(devs[k], c.attribute)
                if v is None or (values[ci] is not None and values[ci] != v):
                    return None
                values[ci] = v
        return values

    def dfs(ri: int, claimed: int, values: list[Any]) -> list[tuple[str, str | None, int]] | None:
        if ri == len(ns.devices):
            return []
        request = ns.devices[ri].name
        for sub, alt, idx in alternatives[ri]:
            if alt.allocation_mode == "All":
                combos: Any = [tuple(idx)] if idx and not used.intersection(idx) else []
            else:
                combos = itertools.combinations([k for k in idx if k not in used], alt.devices)
            for combo in combos:
                if claimed + len(combo) > MAX:
                    break
                after = extend(request, sub, combo, values)
                if after is None and alt.allocation_mode == "All":
                    # allocateDevice(..., must=true): a constraint that rejects an All device is an error that ends
                    # the allocation, not a reason to try the next alternative.
                    raise _Stop
                if after is None:
                    continue
                used.update(combo)
                rest = dfs(ri + 1, claimed + len(combo), after)
                used.difference_update(combo)
                if rest is not None:
                    return [(request, sub, len(combo)), *rest]
        return None

    try:
        return dfs(0, 0, [None] * len(constraints))
    except _Stop:
        return None


class _Stop(Exception):
    """Upstream's allocation ended with an error."""


def random_case(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    def device() -> dict[str, Any]:
        return one({"type": s(rng.choice("XYZ")), "numa": i(rng.randint(0, 1))})

    devices = [dev_a(*[device() for _n in range(rng.randint(1, 6))])]
    if rng.random() < 0.3:
        devices.append(dev_b(*[device() for _n in range(rng.randint(1, 3))]))

    def alternative(name: str) -> dict[str, Any]:
        cls, driver = (CLASS_A, DRIVER_A) if rng.random() < 0.8 else (CLASS_B, DRIVER_B)
        cels = rng.choice(
            [
                (),
                (f'device.attributes["{driver}"].type == "X"',),
                (f'device.attributes["{driver}"].type in ["X", "Y"]',),
                (f'device.attributes["{driver}"].numa == 0',),
            ]
        )
        return all_req(name, cls, *cels) if rng.random() < 0.2 else req(name, cls, rng.randint(1, 3), *cels)

    requests = [
        first_available(f"req-{k}", alternative("subreq-0"), alternative("subreq-1"))
        if rng.random() < 0.4
        else alternative(f"req-{k}")
        for k in range(rng.randint(1, 3))
    ]
    constraints = []
    if rng.random() < 0.4:
        constraints.append(match(INT_ATTR, *[r["name"] for r in requests if rng.random() < 0.6]))
    return devices, claim(*requests, constraints=constraints)


def test_ours_group_search_agrees_with_device_by_device_search() -> None:
    # ours: on random small claims (All, first_available, a numa constraint, two classes), the allocator fits exactly
    # when upstream's device-by-device search finds an allocation, and chooses the same alternatives.
    rng = random.Random(20261112)
    for _n in range(600):
        devices, node_selector = random_case(rng)
        cls = models.parse(models.InferenceClass, {"devices": devices}, "classes.random")
        ns = models.parse(models.NodeSelector, node_selector, "node_selector")
        devs = node_devices(cls)
        ours = allocate(ns, devs, check)
        reference = upstream_dfs(ns, devs)
        assert ours.ok == (reference is not None), (devices, node_selector, ours.why, reference)
        if reference is not None:
            assert [(c.request, c.sub, c.devices) for c in ours.chosen] == reference, (devices, node_selector)


def test_ours_alternative_follows_upstream_device_order() -> None:
    # ours (derived from upstream's allocateOne, not a case of its table): req-0 takes the first two devices in slice
    # order (X, Y), so req-1's first alternative (a Y device) cannot be met and upstream chooses subreq-1 (the last X).
    devices = [dev_a(one({"type": s("X")}), one({"type": s("Y")}), one({"type": s("X")}))]
    node_selector = claim(
        req("req-0", CLASS_A, 2),
        first_available("req-1", req("subreq-0", CLASS_A, 1, attr_is("type", "Y")), req("subreq-1", CLASS_A, 1)),
    )
    cls = models.parse(models.InferenceClass, {"devices": devices}, "classes.order")
    ns = models.parse(models.NodeSelector, node_selector, "node_selector")
    assert upstream_dfs(ns, node_devices(cls)) == [("req-0", None, 2), ("req-1", "subreq-1", 1)]
    result = run(devices, node_selector)
    assert [(c.request, c.sub, c.devices) for c in result.chosen] == [("req-0", None, 2), ("req-1", "subreq-1", 1)]
