"""The DRA differential test's inputs (tests/lib/dra_pairs.py), checked offline: deterministic, covering every
feature, valid for the collection's models, and rendering ResourceClaims the Kubernetes 1.36 schema accepts.

The differential itself (placement vs the real kube-scheduler) is tests/e2e/test_dra_differential.py.
"""

from __future__ import annotations

import json

import dra_pairs
import k8s_schemas
import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.models import CLAIM_DEVICES_MAX
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import validate_classes
from ansible_collections.gpufleet.serving.plugins.module_utils.render import serving as render

FEATURES = {
    "exact": 50,
    "limit": 10,
    "two-drivers": 20,
    "selectors": 50,
    "cel-library": 10,
    "cel-error": 10,
    "all": 40,
    "all-none": 10,
    "all-overlap": 10,
    "all-constraint": 4,
    "first-available": 40,
    "first-too-big": 10,
    "constraints": 60,
    "match-one": 20,
    "match-several": 4,
    "match-all-requests": 4,
    "match-parent": 10,
    "match-subrequest": 10,
    "match-missing-attr": 10,
}


@pytest.fixture(scope="module")
def generated() -> tuple[dict, list[dra_pairs.Pair]]:
    return dra_pairs.generate(12)


def test_generation_is_deterministic(generated: tuple[dict, list[dra_pairs.Pair]]) -> None:
    classes, pairs = dra_pairs.generate(12)
    assert json.dumps(classes, sort_keys=True) == json.dumps(generated[0], sort_keys=True)
    assert [(p.id, p.class_name, p.node_selector) for p in pairs] == [
        (p.id, p.class_name, p.node_selector) for p in generated[1]
    ]
    other = dra_pairs.generate(13)[1]
    assert [p.node_selector for p in other] != [p.node_selector for p in pairs]


def test_pairs_cover_every_feature(generated: tuple[dict, list[dra_pairs.Pair]]) -> None:
    _classes, pairs = generated
    assert 150 <= len(pairs) <= 400
    seen = dra_pairs.summary(pairs)
    short = {f: (seen.get(f, 0), n) for f, n in FEATURES.items() if seen.get(f, 0) < n}
    assert not short, f"features with too few pairs (have, want): {short}"
    devices = [r for p in pairs for r in p.node_selector["devices"]]
    assert all(a.get("device_class_name") for r in devices for a in r.get("first_available", [r])), (
        "every request names its DeviceClass"
    )


def test_classes_are_valid_and_publishable(generated: tuple[dict, list[dra_pairs.Pair]]) -> None:
    classes, _pairs = generated
    parsed = validate_classes(classes)
    for name, cls in parsed.items():
        per_driver: dict[str, int] = {}
        for d in cls.devices:
            per_driver[d.driver] = per_driver.get(d.driver, 0) + len(d.slice_devices())
        assert max(per_driver.values()) <= 128, f"{name}: more devices than one ResourceSlice may publish"
    # Per-device instances reach the slice devices (what scripts/localfleet publishes).
    hgx = {d["name"]: d for d in parsed["hgx-h100"].devices[0].slice_devices()}
    assert hgx["gpu-3"]["attributes"]["pcieRoot"] == {"string": "pci0001:00"}
    assert hgx["gpu-3"]["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}


def test_rendered_claims_are_valid_resource_claims(generated: tuple[dict, list[dra_pairs.Pair]]) -> None:
    _classes, pairs = generated
    errors = []
    for p in pairs:
        requests, constraints = dra_pairs.record_requests(p.node_selector)
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": p.id, "namespace": "dra-diff"},
            "spec": {"devices": render.claim_devices(requests, constraints)},
        }
        found, _unchecked = k8s_schemas.check_object(claim, versions=("1.36",))
        errors.extend(found)
        counts = [r.get("count") or 0 for r in requests if "first_available" not in r]
        assert all(c <= 2 * CLAIM_DEVICES_MAX for c in counts)
    assert not errors, "\n".join(errors[:10])


def test_packing_scenarios_are_deterministic_valid_and_pack(generated: tuple[dict, list[dra_pairs.Pair]]) -> None:
    # Several pods per node (issue 24): the scenarios render valid claims, and placement packs several pods on a node.
    from ansible_collections.gpufleet.serving.plugins.module_utils.placement import place

    classes, pairs = generated
    classes = {**classes, **dra_pairs.packing_classes()}
    packs = dra_pairs.packings(classes, 12)
    assert {"taints", "consumable-capacity", "distinct", "counters"} <= {f for p in packs for f in p.features}
    assert [(p.id, p.steps) for p in packs] == [(p.id, p.steps) for p in dra_pairs.packings(classes, 12)]
    assert len(packs) >= 15 and {p.pool for p in packs}.isdisjoint({p.pool for p in pairs})
    errors: list[str] = []
    placed = []
    for pack in packs:
        answers = dra_pairs.packing_placement(pack, classes, place)
        placed.append([n for n, _m, _w in answers])
        for (node_selector, attempts), (n, member, _why) in zip(pack.steps, answers, strict=True):
            assert 0 <= n <= attempts
            requests, constraints = dra_pairs.record_requests(node_selector)
            if member is not None:
                requests, constraints = member["device_requests"], member.get("constraints", constraints)
            claim = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": pack.id, "namespace": "dra-pack"},
                "spec": {"devices": render.claim_devices(requests, constraints)},
            }
            errors.extend(k8s_schemas.check_object(claim, versions=("1.36",))[0])
    assert not errors, "\n".join(errors[:10])
    assert sum(1 for counts in placed if sum(counts) > 1) >= len(packs) // 2
    assert placed[0] == [8], "eight 1-GPU pods on one 8-GPU node"
