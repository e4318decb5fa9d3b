"""Caches that follow placement (issue 30, item 1): which clusters a cache may be and is staged on."""

from __future__ import annotations

import pytest
from example_fleet import example_fleet
from module_utils_tests import builders

from ansible_collections.gpufleet.serving.plugins.module_utils.cache_placement import (
    BY_PATTERN,
    BY_PLACEMENT,
    NO_PLAN,
    staged_clusters,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import as_cache

fleet_dict = builders("fleet/test_fleet_deploy").fleet_dict

PROD = ["eks-us-east-1", "gke-us-central1", "onprem-a"]


def follow_fleet(replicas: int = 1) -> dict:
    data = example_fleet()
    del data["caches"][0]["clusters"]  # unset: follow, since qwen-demo mounts it
    qwen = data["deployments"][0]
    qwen["clusters"] = "gpufleet_clusters:&prod"
    qwen["replicas"] = replicas
    return fleet_dict(data)


def test_an_unset_clusters_follows_when_a_deployment_mounts_the_cache():
    fleet = follow_fleet()
    cache = fleet["caches"][0]
    assert cache["clusters"] == "follow"
    # It may be staged wherever its deployment may go: no cluster of the deployment is excluded for want of it.
    assert cache["candidate_clusters"] == PROD
    assert "cache_exclusions" not in fleet
    assert next(d for d in fleet["deployments"] if d["name"] == "qwen-demo")["candidate_clusters"] == PROD


def test_an_unset_clusters_pre_warms_every_cluster_when_no_deployment_mounts_the_cache():
    data = example_fleet()
    del data["caches"][0]["clusters"]
    for dep in data["deployments"]:
        dep.pop("cache", None)
    fleet = fleet_dict(data)
    assert fleet["caches"][0]["clusters"] == "gpufleet_clusters"
    assert fleet["caches"][0]["candidate_clusters"] == sorted(data["hosts"])


def test_an_explicit_follow_that_no_deployment_mounts_is_an_error_naming_the_field():
    data = example_fleet()
    data["caches"][0]["clusters"] = "follow"
    for dep in data["deployments"]:
        dep.pop("cache", None)
    with pytest.raises(FleetValidationError) as exc:
        validate_fleet(
            classes=data["classes"],
            hosts=data["hosts"],
            deployments=data["deployments"],
            caches=data["caches"],
            resolve_pattern=lambda p: sorted(data["hosts"]),
        )
    assert (
        "gpufleet_model_caches[0] (qwen-2-5-0-5b).clusters: 'follow' stages the cache where the deployments that "
        "mount it are placed, but no deployment mounts cache 'qwen-2-5-0-5b'"
    ) in str(exc.value)


def test_two_deployments_mounting_one_follow_cache_may_stage_it_on_the_union_of_their_clusters():
    data = example_fleet()
    del data["caches"][0]["clusters"]
    first = data["deployments"][0]
    first["clusters"] = "only-a"
    second = {**first, "name": "qwen-second", "clusters": "only-b"}
    data["deployments"].append(second)
    patterns = {"only-a": ["onprem-a"], "only-b": ["gke-us-central1"]}
    fleet = validate_fleet(
        classes=data["classes"],
        hosts=data["hosts"],
        deployments=data["deployments"],
        caches=data["caches"],
        resolve_pattern=lambda p: patterns.get(p) or sorted(data["hosts"]),
    ).to_dict()
    assert fleet["caches"][0]["candidate_clusters"] == ["gke-us-central1", "onprem-a"]


def test_a_follow_cache_is_staged_only_on_the_cluster_its_model_is_placed_on():
    fleet = follow_fleet(replicas=1)
    replicas = place_fleet(fleet, []).replicas
    qwen = {r["cluster"] for r in replicas if r["deployment"] == "qwen-demo"}
    assert len(qwen) == 1 and qwen <= set(PROD)  # one of three matching clusters
    staged = staged_clusters(fleet["caches"], fleet["deployments"], replicas)
    assert staged[0]["candidate_clusters"] == sorted(qwen)
    assert staged[0]["may_stage_on"] == PROD
    assert staged[0]["staged_by"] == BY_PLACEMENT
    assert staged[0]["staged_note"] == f"cache qwen-2-5-0-5b follows placement: staged on {next(iter(qwen))}"
    # What cache_manifests takes back: the staging keys are not the cache's fields.
    assert as_cache(staged[0]).name == "qwen-2-5-0-5b"


def test_without_a_plan_a_follow_cache_is_pre_warmed_where_its_deployments_may_go_and_says_so():
    fleet = follow_fleet()
    staged = staged_clusters(fleet["caches"], fleet["deployments"], None)
    assert staged[0]["candidate_clusters"] == PROD
    assert staged[0]["staged_by"] == NO_PLAN
    assert "no plan to follow (run playbooks/plan.yml first)" in staged[0]["staged_note"]


def test_a_host_pattern_pre_warms_every_matching_cluster_whatever_the_placement():
    data = example_fleet()  # clusters: gpufleet_clusters (explicit)
    data["deployments"][0]["replicas"] = 1
    fleet = fleet_dict(data)
    replicas = place_fleet(fleet, []).replicas
    staged = staged_clusters(fleet["caches"], fleet["deployments"], replicas)
    assert staged[0]["staged_by"] == BY_PATTERN
    assert staged[0]["candidate_clusters"] == sorted(data["hosts"])
    assert staged[0]["staged_note"] == ""


def test_a_follow_cache_is_never_staged_outside_where_its_deployments_may_go():
    fleet = follow_fleet()
    foreign = [{"deployment": "qwen-demo", "cluster": "gke-europe-west4"}]  # not a prod cluster
    assert staged_clusters(fleet["caches"], fleet["deployments"], foreign)[0]["candidate_clusters"] == []


def test_a_replica_without_a_cluster_is_an_error():
    fleet = follow_fleet()
    with pytest.raises(GpufleetError, match=r"replicas\[0\] must be a replica record"):
        staged_clusters(fleet["caches"], fleet["deployments"], [{"deployment": "qwen-demo"}])
