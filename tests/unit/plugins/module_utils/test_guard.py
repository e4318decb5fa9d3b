"""Guarded shrink (issue 25): what a run removes, and whether it leaves a deployment with less than is serving."""

from __future__ import annotations

import pytest
from example_fleet import example_fleet
from module_utils_tests import builders

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.guard import (
    capacity_losses,
    dropped_replicas,
    parse_allow,
    parse_names,
)

fleet_dict = builders("fleet/test_fleet_deploy").fleet_dict

# A selector change that still names real attributes but that no pool satisfies any more (a domain typo such as
# device.capacity["nvidia.com"] is caught earlier, by the fleet's vocabulary: test_vocabulary.py).
TYPO = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("16Ti")) >= 0'


def with_typo() -> dict:
    data = example_fleet()
    member = data["deployments"][0]["engines"][0]["members"][0]
    member["node_selector"]["devices"][0]["selectors"] = [{"cel": TYPO}]
    return data


def test_a_selector_typo_that_compiles_is_a_blocking_loss_naming_every_replica():
    first = place_fleet(fleet_dict(), [])
    second = place_fleet(fleet_dict(with_typo()), first.replicas)
    [loss] = capacity_losses(second.results, first.replicas)
    assert (loss.deployment, loss.serving, loss.placed, loss.desired) == ("qwen-demo", 3, 0, 3)
    assert loss.blocking
    assert sorted(d["cluster"] for d in loss.lost) == sorted(
        r["cluster"] for r in first.replicas if r["deployment"] == "qwen-demo"
    )
    assert all("no longer satisfies it" in d["reason"] for d in loss.lost)
    assert loss.line().startswith("qwen-demo: 3 serving now, this run would place 0 (replicas: 3)")
    assert loss.line().endswith("[blocked]")


def test_a_lower_replicas_is_not_a_loss_but_its_replicas_are_listed():
    first = place_fleet(fleet_dict(), [])
    data = example_fleet()
    data["deployments"][0]["replicas"] = 1
    second = place_fleet(fleet_dict(data), first.replicas)
    assert capacity_losses(second.results, first.replicas) == []
    dropped = dropped_replicas(second.results, first.replicas)
    assert [d["reason"] for d in dropped] == ["scaled down to 1 replica(s)"] * 2


def test_a_removed_deployment_is_listed_not_blocked():
    first = place_fleet(fleet_dict(), [])
    data = example_fleet()
    del data["deployments"][2]
    second = place_fleet(fleet_dict(data), first.replicas)
    assert capacity_losses(second.results, first.replicas) == []
    assert {(d["deployment"], d["reason"]) for d in dropped_replicas(second.results, first.replicas)} == {
        ("deepseek-v3", "the deployment is no longer in the fleet")
    }


def test_a_new_deployment_short_of_replicas_is_not_a_loss():
    """Nothing serves yet: a shortfall is Degraded, not a loss of serving capacity."""
    second = place_fleet(fleet_dict(with_typo()), [])
    assert capacity_losses(second.results, []) == []


@pytest.mark.parametrize(
    ("allow", "floor", "allowed_by"),
    [
        (True, None, "gpufleet_allow_capacity_loss"),
        ({"qwen-demo"}, None, "gpufleet_allow_capacity_loss"),
        ({"llama-70b"}, None, ""),
        (False, 0, "disruption.min_available (0 >= 0)"),
        (False, 1, ""),
    ],
)
def test_what_allows_a_loss(allow, floor, allowed_by):
    first = place_fleet(fleet_dict(), [])
    second = place_fleet(fleet_dict(with_typo()), first.replicas)
    [loss] = capacity_losses(second.results, first.replicas, allow=allow, min_available={"qwen-demo": floor})
    assert loss.allowed_by == allowed_by
    assert loss.blocking is (not allowed_by)


def test_an_overcommitted_pool_is_degraded_with_a_reason():
    """Issue 25: a pool shrunk below its retained replicas reported 'Ready; none Degraded'."""
    fleet = fleet_dict()
    first = place_fleet(fleet, [])
    data = example_fleet()
    data["hosts"]["onprem-a"]["gpufleet_node_pools"][0]["node_count"] = 1  # the DGX pool holds llama + deepseek
    second = place_fleet(fleet_dict(data), first.replicas)
    degraded = second.degraded()
    assert degraded and not set(degraded) <= set(second.shortfalls())
    name = next(n for n in degraded if n not in second.shortfalls())
    assert second.statuses()[name] == "Degraded"
    assert second.results[name]["condition"]["reason"] == "PoolOvercommitted"
    assert "onprem-a" in second.results[name]["condition"]["message"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["a", "b"], ["a", "b"]),
        ('["b", "a"]', ["a", "b"]),
        ("a, b", ["a", "b"]),
        ("a,b,", ["a", "b"]),
        ("", []),
        ([], []),
    ],
)
def test_name_lists_in_their_survey_forms(value, expected):
    assert parse_names(value, ["a", "b", "c"], "gpufleet_drained_clusters") == expected


def test_an_unknown_name_is_an_error_with_a_suggestion():
    with pytest.raises(FleetValidationError) as exc:
        parse_names(["gke-us-centrl1"], ["gke-us-central1", "onprem-a"], "gpufleet_drained_clusters")
    assert str(exc.value).startswith(
        "gpufleet_drained_clusters: unknown cluster name 'gke-us-centrl1' (did you mean 'gke-us-central1'?"
    )


@pytest.mark.parametrize(("value", "expected"), [(True, True), ("true", True), ("no", False), ("a, b", {"a", "b"})])
def test_allow_forms(value, expected):
    assert parse_allow(value, ["a", "b"]) == expected


def test_allow_with_an_unknown_deployment_is_an_error():
    with pytest.raises(FleetValidationError, match="unknown deployment name 'qwen'"):
        parse_allow(["qwen"], ["qwen-demo"])


def test_a_deployment_is_placed_only_where_its_cache_is_staged_and_explain_says_why():
    """Issue 25: a deployment mounting a cache was placed on clusters without it (pods Pending forever, 'Ready')."""
    data = example_fleet()
    data["caches"][0]["clusters"] = "gpufleet_clusters:&prod"  # eks-us-east-1, gke-us-central1, onprem-a
    data["deployments"][0]["replicas"] = (
        400  # more than fits (1-GPU replicas pack 8 to an H100 node): explain lists every cluster
    )
    fleet = fleet_dict(data)
    assert fleet["cache_exclusions"] == {
        "qwen-demo": {"gke-europe-west4": "does not host cache qwen-2-5-0-5b, which the deployment mounts"}
    }
    outcome = place_fleet(fleet, [])
    assert "gke-europe-west4" not in {r["cluster"] for r in outcome.by_deployment()["qwen-demo"]}
    assert any(
        "gke-europe-west4: does not host cache qwen-2-5-0-5b, which the deployment mounts" in line
        for line in outcome.explain()
    )


def test_a_deployment_whose_cache_is_staged_on_none_of_its_clusters_is_an_error():
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet

    data = example_fleet()
    data["caches"][0]["clusters"] = "cache-hosts"
    data["deployments"][0]["clusters"] = "model-hosts"
    patterns = {"cache-hosts": ["onprem-a"], "model-hosts": ["gke-us-central1", "gke-europe-west4"]}
    with pytest.raises(FleetValidationError) as exc:
        validate_fleet(
            classes=data["classes"],
            hosts=data["hosts"],
            deployments=data["deployments"],
            caches=data["caches"],
            resolve_pattern=lambda p: patterns.get(p) or sorted(data["hosts"]),
        )
    assert (
        "gpufleet_model_deployments[0] (qwen-demo).cache: mounts cache 'qwen-2-5-0-5b', which none of its clusters "
        "(gke-europe-west4, gke-us-central1) hosts (the cache's clusters: onprem-a)"
    ) in str(exc.value)
