"""Device taints and tolerations in the allocator (KEP-5055; design.md §12, issue 24 item 2).

Upstream cases from kubernetes/kubernetes
``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go``
(k8s.io/dynamic-resource-allocation v0.36.3): every ``tainted-*`` case except the two about admin access (not
modelled). Each test id is the upstream case name; upstream's ``Features{DeviceTaints: false}`` is a cluster whose
Kubernetes has the feature off (:func:`features.for_version` of 1.35). Upstream's fixtures: ``taintNoSchedule`` is
``taint-key=taint-value:NoSchedule``, ``taintNoExecute`` ``taint-key=taint-value-2:NoExecute``, ``taintNone``
``taint-key=taint-value:None``; ``tolerationNoSchedule`` tolerates ``taint-key`` (Exists) for NoSchedule,
``tolerationNoExecute`` ``taint-key=taint-value-2`` (Equal) for NoExecute.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_allocator_upstream import CLASS_A, CLASS_B, all_req, check, claim, dev_a, dev_b, first_available, req

from ansible_collections.gpufleet.serving.plugins.module_utils import models
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.allocator import allocate, node_devices
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.features import ALL, for_version
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError

NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
NONE = {"key": "taint-key", "value": "taint-value", "effect": "None"}
TOL_NO_SCHEDULE = {"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"}
TOL_NO_EXECUTE = {"operator": "Equal", "key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
OFF = for_version("1.35")


def tainted(*per_device: list[dict[str, Any]]) -> dict[str, Any]:
    """driverA's devices, device ``i`` with the taints ``per_device[i]``."""
    return dev_a(*[{"taints": t} for t in per_device])


def tolerating(request: dict[str, Any], *tolerations: dict[str, Any]) -> dict[str, Any]:
    return {**request, "tolerations": list(tolerations)}


def run(devices: list[dict[str, Any]], node_selector: dict[str, Any], features: Any = ALL) -> tuple[Any, list[str]]:
    cls = models.parse(models.InferenceClass, {"devices": devices}, "classes.upstream")
    ns = models.parse(models.NodeSelector, node_selector, "node_selector")
    devs = node_devices(cls)
    result = allocate(ns, devs, check, features=features)
    return result, [devs[k].name for k in result.devices]


CASES = [
    # upstream: "tainted-two-devices" -- both devices tainted, nothing tolerated: nothing.
    pytest.param(
        [tainted([NO_SCHEDULE], [NO_EXECUTE])], claim(req("req-0", CLASS_A, 1)), ALL, None, id="tainted-two-devices"
    ),
    # upstream: "tainted-one-device-two-taints"
    pytest.param(
        [tainted([NO_SCHEDULE, NO_EXECUTE])],
        claim(req("req-0", CLASS_A, 1)),
        ALL,
        None,
        id="tainted-one-device-two-taints",
    ),
    # upstream: "tainted-two-devices-tolerated" -- only device2's taint is tolerated: device2.
    pytest.param(
        [tainted([NO_SCHEDULE], [NO_EXECUTE])],
        claim(tolerating(req("req-0", CLASS_A, 1), TOL_NO_EXECUTE)),
        ALL,
        [("req-0", None, ["dev-a-1"])],
        id="tainted-two-devices-tolerated",
    ),
    # upstream: "tainted-two-devices-prioritized-list-tolerated" -- the second alternative tolerates device2.
    pytest.param(
        [tainted([NO_SCHEDULE], [NO_EXECUTE])],
        claim(
            first_available(
                "req-0", req("subreq-0", CLASS_A, 1), tolerating(req("subreq-1", CLASS_A, 1), TOL_NO_EXECUTE)
            )
        ),
        ALL,
        [("req-0", "subreq-1", ["dev-a-1"])],
        id="tainted-two-devices-prioritized-list-tolerated",
    ),
    # upstream: "tainted-no-effect" -- effect None does not keep the device from a claim.
    pytest.param(
        [tainted([NONE])], claim(req("req-0", CLASS_A, 1)), ALL, [("req-0", None, ["dev-a-0"])], id="tainted-no-effect"
    ),
    # upstream: "tainted-one-device-two-taints-both-tolerated"
    pytest.param(
        [tainted([NO_SCHEDULE, NO_EXECUTE])],
        claim(tolerating(req("req-0", CLASS_A, 1), TOL_NO_SCHEDULE, TOL_NO_EXECUTE)),
        ALL,
        [("req-0", None, ["dev-a-0"])],
        id="tainted-one-device-two-taints-both-tolerated",
    ),
    # upstream: "tainted-disabled" -- the feature off: taints are ignored.
    pytest.param(
        [tainted([NO_SCHEDULE, NO_EXECUTE])],
        claim(req("req-0", CLASS_A, 1)),
        OFF,
        [("req-0", None, ["dev-a-0"])],
        id="tainted-disabled",
    ),
    # upstream: "tainted-prioritized-list" -- classB has no device, classA's is tainted: nothing.
    pytest.param(
        [tainted([NO_SCHEDULE])],
        claim(first_available("req-0", req("subreq-0", CLASS_B, 1), req("subreq-1", CLASS_A, 1))),
        ALL,
        None,
        id="tainted-prioritized-list",
    ),
    # upstream: "tainted-prioritized-list-disabled"
    pytest.param(
        [tainted([NO_SCHEDULE])],
        claim(first_available("req-0", req("subreq-0", CLASS_B, 1), req("subreq-1", CLASS_A, 1))),
        OFF,
        [("req-0", "subreq-1", ["dev-a-0"])],
        id="tainted-prioritized-list-disabled",
    ),
    # upstream: "tainted-all-devices-single" -- All over one tainted device: nothing.
    pytest.param(
        [tainted([NO_SCHEDULE])], claim(all_req("req-0", CLASS_A)), ALL, None, id="tainted-all-devices-single"
    ),
    # upstream: "tainted-all-devices-single-disabled"
    pytest.param(
        [tainted([NO_SCHEDULE])],
        claim(all_req("req-0", CLASS_A)),
        OFF,
        [("req-0", None, ["dev-a-0"])],
        id="tainted-all-devices-single-disabled",
    ),
]


@pytest.mark.parametrize(("devices", "node_selector", "features", "expected"), CASES)
def test_tainted_as_upstream(devices: Any, node_selector: Any, features: Any, expected: Any) -> None:
    result, names = run(devices, node_selector, features)
    if expected is None:
        assert not result.ok, f"allocated {names}, upstream allocates nothing"
        assert "taint" in result.why or "no alternative fits" in result.why, result.why
        return
    assert result.ok, result.why
    assert [(c.request, c.sub) for c in result.chosen] == [(r, s) for r, s, _d in expected]
    assert names == [d for _r, _s, devs in expected for d in devs]


@pytest.mark.parametrize(("devices", "node_selector", "features", "expected"), CASES)
def test_observed_taints_act_as_declared_ones(devices: Any, node_selector: Any, features: Any, expected: Any) -> None:
    # Observed capacity (design.md §11): the taints a node's ResourceSlice publishes beyond the class's reach the
    # allocator per device (``taints``), and decide every upstream case as the same taints declared by the class do.
    from ansible_collections.gpufleet.serving.plugins.module_utils.dra.api import DeviceTaint

    bare = [
        {**d, "instances": [{k: v for k, v in i.items() if k != "taints"} for i in d["instances"]]}
        if d.get("instances")
        else {k: v for k, v in d.items() if k != "taints"}
        for d in devices
    ]
    cls = models.parse(models.InferenceClass, {"devices": bare}, "classes.upstream")
    ns = models.parse(models.NodeSelector, node_selector, "node_selector")
    declared = node_devices(models.parse(models.InferenceClass, {"devices": devices}, "classes.upstream"))
    observed = {i: tuple(DeviceTaint.model_validate(t.model_dump()) for t in d.taints) for i, d in enumerate(declared)}
    devs = node_devices(cls)
    assert not any(d.taints for d in devs)
    result = allocate(ns, devs, check, features=features, taints={i: t for i, t in observed.items() if t})
    names = [devs[k].name for k in result.devices]
    if expected is None:
        assert not result.ok, f"allocated {names}, upstream allocates nothing"
        return
    assert result.ok, result.why
    assert [(c.request, c.sub) for c in result.chosen] == [(r, s) for r, s, _d in expected]
    assert names == [d for _r, _s, devs in expected for d in devs]


def test_ours_a_tainted_device_is_named():
    result, _names = run([tainted([NO_SCHEDULE]), dev_b()], claim(req("req-0", CLASS_A, 1)))
    assert result.why.startswith(
        "request req-0: device dev-a-0 is tainted taint-key=taint-value:NoSchedule, which req-0 does not tolerate"
    )
    result, _names = run([tainted([NO_SCHEDULE])], claim(all_req("req-0", CLASS_A)))
    assert result.why == "request req-0: All matches tainted device(s) dev-a-0, not tolerated"


def test_ours_tolerations_need_the_feature():
    # A cluster whose Kubernetes has device taints off would drop the tolerations: the member does not match there.
    result, _names = run([dev_a()], claim(tolerating(req("req-0", CLASS_A, 1), TOL_NO_SCHEDULE)), OFF)
    assert not result.ok
    assert result.why == (
        "request req-0: tolerations needs the DRADeviceTaints feature, on by default from Kubernetes 1.36"
    )


def test_ours_a_selector_error_on_a_tainted_device_still_stops_the_claim():
    # upstream allocateOne evaluates selectors (isSelectable) before allocateDevice checks taints: a CEL runtime error
    # on a tainted device stops the claim, as on any other device the search reaches.
    devices = [dev_a({"taints": [NO_SCHEDULE]}, {"attributes": {"numa": {"int": 0}}})]
    result, _names = run(devices, claim(req("req-0", CLASS_A, 1, 'device.attributes["driver-a"].numa == 0')))
    assert not result.ok and "CEL runtime error" in result.why


@pytest.mark.parametrize(
    ("toleration", "reason"),
    [
        ({"operator": "Exists", "value": "x"}, "value must be empty when operator is Exists"),
        ({"key": "Not A Key"}, "must be a taint key"),
        ({"key": "k", "effect": "PreferNoSchedule"}, "must be one of NoSchedule, NoExecute, None"),
        ({"key": "k", "operator": "In"}, "must be one of Exists, Equal"),
        ({"key": "k", "value": "-x-"}, "must be a taint value"),
        ({"key": "k", "tolerationSeconds": "60"}, "must be an integer"),
    ],
)
def test_tolerations_are_validated_with_their_path(toleration: dict[str, Any], reason: str) -> None:
    with pytest.raises(FleetValidationError) as err:
        models.parse(models.NodeSelector, claim(tolerating(req("gpu", CLASS_A, 1), toleration)), "node_selector")
    assert any(
        path.startswith("node_selector.devices[0].tolerations[0]") and reason in why for path, why in err.value.errors
    ), err.value.errors


def test_taints_are_validated_and_limited():
    with pytest.raises(FleetValidationError) as err:
        models.parse(
            models.InferenceClass, {"devices": [{**dev_a(), "taints": [{"key": "k", "effect": "Later"}]}]}, "c"
        )
    assert err.value.errors[0][0] == "c.devices[0].taints[0].effect"
    many = [{"key": f"k{n}", "effect": "NoSchedule"} for n in range(17)]
    with pytest.raises(FleetValidationError, match="at most 16"):
        models.parse(models.InferenceClass, {"devices": [{**dev_a(), "taints": many}]}, "c")
    split = {**dev_a({"taints": many[:8]}), "taints": many[8:]}
    with pytest.raises(FleetValidationError, match="device dev-a-0 has 17 taints"):
        models.parse(models.InferenceClass, {"devices": [split]}, "c")
    with pytest.raises(FleetValidationError, match="tolerations cannot be set beside first_available"):
        bad = {**first_available("req-0", req("a", CLASS_A, 1)), "tolerations": [TOL_NO_SCHEDULE]}
        models.parse(models.NodeSelector, claim(bad), "ns")


def test_ours_a_noexecute_taint_needs_a_noexecute_toleration_to_stay():
    # kube-controller-manager's device taint eviction controller (pkg/controller/devicetainteviction) evicts a pod whose
    # claim holds a device with a NoExecute taint unless a toleration *with effect NoExecute* tolerates it, for ever.
    # An effect-less toleration lets the allocator take the device, and the pod is deleted moments later (observed on
    # the local fleet's 1.36.3): placement does not count such a claim.
    every = {"operator": "Exists"}
    result, _names = run([tainted([NO_EXECUTE])], claim(tolerating(req("req-0", CLASS_A, 1), every)))
    assert not result.ok and "taint-key=taint-value-2:NoExecute" in result.why
    bounded = {**TOL_NO_EXECUTE, "tolerationSeconds": 60}
    result, _names = run([tainted([NO_EXECUTE])], claim(tolerating(req("req-0", CLASS_A, 1), bounded)))
    assert not result.ok  # evicted after a minute: not a placement
    result, names = run([tainted([NO_EXECUTE])], claim(tolerating(req("req-0", CLASS_A, 1), TOL_NO_EXECUTE)))
    assert result.ok and names == ["dev-a-0"]
    # An effect-less toleration still covers NoSchedule.
    result, names = run([tainted([NO_SCHEDULE])], claim(tolerating(req("req-0", CLASS_A, 1), every)))
    assert result.ok and names == ["dev-a-0"]
