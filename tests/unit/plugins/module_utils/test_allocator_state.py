"""The allocator against devices other claims hold (upstream's ``AllocatedState``; design.md §12, issue 24).

Upstream cases from kubernetes/kubernetes
``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go``
(k8s.io/dynamic-resource-allocation v0.36.3, the allocator of the local fleet's kube-scheduler 1.36.3) whose
``allocatedDevices`` are devices of other claims: every such case that our model expresses is here (the admin-access
ones are not: admin access is not modelled). Each test id is the upstream case name, lower-cased; upstream's
``allocatedDevices`` become ``taken`` (device indexes of the node), and where upstream names the allocated device, the
test names it too.

``test_ours_...`` compare the allocator, on random small claims over random taken devices, with our reading of
upstream's device-by-device search (:func:`upstream_picks`): the same verdict and the very same devices.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from test_allocator_upstream import (
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    INT_ATTR,
    MAX,
    all_req,
    check,
    claim,
    dev_a,
    dev_b,
    first_available,
    i,
    match,
    one,
    req,
    s,
)

from ansible_collections.gpufleet.serving.plugins.module_utils import models
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.allocator import (
    Allocation,
    allocate,
    lookup_attribute,
    node_devices,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.constraints import MatchAttribute


def run(devices: list[dict[str, Any]], node_selector: dict[str, Any], taken: set[int]) -> tuple[Allocation, list[str]]:
    cls = models.parse(models.InferenceClass, {"devices": devices}, "classes.upstream")
    ns = models.parse(models.NodeSelector, node_selector, "node_selector")
    devs = node_devices(cls)
    result = allocate(ns, devs, check, frozenset(taken))
    return result, [devs[k].name for k in result.devices]


# Devices are named <entry>-<i>: dev-a-0 is upstream's device1 of driverA's pool1, dev-a-1 its device2; dev-b-0 is
# driverB's device1.
UPSTREAM = [
    # upstream: "all-devices-some-allocated" -- an All request over two devices, one allocated: nothing.
    pytest.param([dev_a(count=2)], claim(all_req("req-0", CLASS_A)), {0}, None, id="all-devices-some-allocated"),
    # upstream: "all-devices-some-allocated-prioritized-list" -- the All alternative fails on the allocated device,
    # the second alternative (driverB's device) is allocated.
    pytest.param(
        [dev_a(count=2), dev_b()],
        claim(first_available("req-0", all_req("subreq-0", CLASS_A), req("subreq-1", CLASS_B, 1))),
        {0},
        [("req-0", "subreq-1", ["dev-b-0"])],
        id="all-devices-some-allocated-prioritized-list",
    ),
    # upstream: "already-allocated-devices" -- the one device of the class is allocated: nothing.
    pytest.param([dev_a()], claim(req("req-0", CLASS_A, 1)), {0}, None, id="already-allocated-devices"),
    # upstream: "prioritized-list-subrequests-with-allocation-mode-all" -- device1 allocated: the All alternative
    # fails, the second takes device2.
    pytest.param(
        [dev_a(count=2)],
        claim(first_available("req-0", all_req("subreq-0", CLASS_A), req("subreq-1", CLASS_A, 1))),
        {0},
        [("req-0", "subreq-1", ["dev-a-1"])],
        id="prioritized-list-subrequests-with-allocation-mode-all",
    ),
    # upstream: "prioritized-list-allocation-mode-all" -- device2 allocated: the second alternative takes device1.
    pytest.param(
        [dev_a(count=2)],
        claim(first_available("req-0", all_req("subreq-0", CLASS_A), req("subreq-1", CLASS_A, 1))),
        {1},
        [("req-0", "subreq-1", ["dev-a-0"])],
        id="prioritized-list-allocation-mode-all",
    ),
]


@pytest.mark.parametrize(("devices", "node_selector", "taken", "expected"), UPSTREAM)
def test_allocate_over_allocated_devices_as_upstream(
    devices: list[dict[str, Any]], node_selector: dict[str, Any], taken: set[int], expected: Any
) -> None:
    result, names = run(devices, node_selector, taken)
    if expected is None:
        assert not result.ok, f"allocated {names}, upstream allocates nothing"
        return
    assert result.ok, result.why
    assert [(c.request, c.sub) for c in result.chosen] == [(r, sub) for r, sub, _d in expected]
    assert names == [d for _r, _s, devs in expected for d in devs]


def test_ours_exact_count_skips_devices_in_use_before_their_selectors() -> None:
    # upstream allocateOne: "Checking for 'in use' is cheap and thus gets done first" -- a selector that would fail
    # with a CEL runtime error on the allocated device (it lacks numa) is never evaluated there.
    devices = [dev_a(one({}), one({"numa": i(0)}))]
    ns = claim(req("req-0", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].numa == 0'))
    result, names = run(devices, ns, {0})
    assert result.ok and names == ["dev-a-1"]
    # Free, the device without the attribute stops the claim (the search reaches it first); the result names it, as
    # the device other claims must hold for this claim to fit (placement's "fits only beside").
    result, _names = run(devices, ns, set())
    assert not result.ok and "CEL runtime error" in result.why
    assert result.stopped == {0}


def test_ours_all_request_evaluates_devices_in_use() -> None:
    # upstream validateDeviceRequest: an All request evaluates its selectors on every device of the node, in use or
    # not, before the search: a CEL runtime error there stops the claim.
    devices = [dev_a(one({}), one({"numa": i(0)}))]
    ns = claim(all_req("req-0", CLASS_A, f'device.attributes["{DRIVER_A}"].numa == 0'))
    result, _names = run(devices, ns, {0})
    assert not result.ok and "CEL runtime error" in result.why
    assert result.stopped == set()  # in use or not, the error stops it: nothing another claim holds would help


def test_ours_picks_follow_device_order_around_devices_in_use() -> None:
    # Eight identical GPUs, devices 0, 1 and 5 in use: a 3-device request takes 2, 3, 4 (the first free ones).
    result, names = run([dev_a(count=8)], claim(req("req-0", CLASS_A, 3)), {0, 1, 5})
    assert result.ok and names == ["dev-a-2", "dev-a-3", "dev-a-4"]
    result, names = run([dev_a(count=8)], claim(req("req-0", CLASS_A, 6)), {0, 1, 5})
    assert not result.ok


def test_ours_constraint_over_devices_in_use() -> None:
    # Two devices per numa node; numa 0's first device is in use: a pair on one numa node is numa 1's.
    devices = [dev_a(*[one({"numa": i(k // 2)}) for k in range(4)])]
    result, names = run(devices, claim(req("req-0", CLASS_A, 2), constraints=[match(INT_ATTR)]), {0})
    assert result.ok and names == ["dev-a-2", "dev-a-3"]


# --------------------------------------------------------------------------------------------------------------------
# Ours: the very devices upstream's device-by-device search picks, on random claims over random devices in use
# --------------------------------------------------------------------------------------------------------------------


class _Stop(Exception):
    """Upstream's allocation ended with an error."""


def upstream_picks(ns: models.NodeSelector, devs: list[Any], taken: frozenset[int]) -> list[int] | None:
    """Our reading of upstream's ``allocateOne`` over ``AllocatedState``: requests in order, a request's alternatives in
    order, devices in slice order skipping those in use (ExactCount), ``All`` taking every matching device and failing
    on one in use, device sets in index order. The devices of the first allocation found, or None."""
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
    used: set[int] = set(taken)

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

    def dfs(ri: int, claimed: int, values: list[Any]) -> list[int] | None:
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
                    raise _Stop
                if after is None:
                    continue
                used.update(combo)
                rest = dfs(ri + 1, claimed + len(combo), after)
                used.difference_update(combo)
                if rest is not None:
                    return [*combo, *rest]
        return None

    try:
        return dfs(0, 0, [None] * len(constraints))
    except _Stop:
        return None


def random_case(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], set[int]]:
    def device() -> dict[str, Any]:
        return one({"type": s(rng.choice("XYZ")), "numa": i(rng.randint(0, 1))})

    devices = [dev_a(*[device() for _n in range(rng.randint(1, 7))])]
    if rng.random() < 0.3:
        devices.append(dev_b(*[device() for _n in range(rng.randint(1, 3))]))
    total = sum(d["count"] for d in devices)

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
        return all_req(name, cls, *cels) if rng.random() < 0.15 else req(name, cls, rng.randint(1, 3), *cels)

    requests = [
        first_available(f"req-{k}", alternative("subreq-0"), alternative("subreq-1"))
        if rng.random() < 0.3
        else alternative(f"req-{k}")
        for k in range(rng.randint(1, 3))
    ]
    constraints = []
    if rng.random() < 0.4:
        constraints.append(match(INT_ATTR, *[r["name"] for r in requests if rng.random() < 0.6]))
    taken = {k for k in range(total) if rng.random() < 0.35}
    return devices, claim(*requests, constraints=constraints), taken


def test_ours_picks_are_upstreams_over_devices_in_use() -> None:
    # ours: the group search over a node with devices in use fits exactly when upstream's search finds an allocation,
    # and picks the very devices upstream picks (what the ledger records, and what a later claim finds in use).
    rng = random.Random(20261125)
    for _n in range(800):
        devices, node_selector, taken = random_case(rng)
        cls = models.parse(models.InferenceClass, {"devices": devices}, "classes.random")
        ns = models.parse(models.NodeSelector, node_selector, "node_selector")
        devs = node_devices(cls)
        ours = allocate(ns, devs, check, frozenset(taken))
        reference = upstream_picks(ns, devs, frozenset(taken))
        assert ours.ok == (reference is not None), (devices, node_selector, taken, ours.why, reference)
        if reference is not None:
            assert list(ours.devices) == reference, (devices, node_selector, taken)
            assert not set(ours.devices) & taken
