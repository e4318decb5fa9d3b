"""Issue 33: a spillover endpoint's tier is above every tier of the fleet's own clusters (validate_fleet, the check
fleet_info runs): otherwise a router would send requests to the provider before the fleet's replicas."""

from __future__ import annotations

import pytest
from example_fleet import example_fleet
from module_utils_tests import builders

from ansible_collections.gpufleet.serving.plugins.module_utils import routing
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet import inventory as fleet_module

fleet_dict = builders("fleet/test_fleet_deploy").fleet_dict

PROD = ["eks-us-east-1", "gke-us-central1", "onprem-a"]


def with_spillover(priority: int, tiers: dict[str, object], clusters: str = "gpufleet_clusters:&prod") -> dict:
    data = example_fleet()
    qwen = next(d for d in data["deployments"] if d["name"] == "qwen-demo")
    qwen["clusters"] = clusters
    qwen["external_endpoints"] = [
        {"name": "provider", "url": "https://api.example.com/v1", "secret": {"name": "prov", "key": "api-key"},
         "priority": priority},
    ]  # fmt: skip
    for host, tier in tiers.items():
        data["hosts"][host]["gpufleet_routing_priority"] = tier
    return data


def test_the_variable_is_the_one_routing_reads():
    assert fleet_module.ROUTING_PRIORITY_VAR == routing.PRIORITY_VAR


def test_a_spillover_tier_not_above_a_clusters_tier_is_an_error_naming_the_field_and_the_values():
    with pytest.raises(FleetValidationError) as info:
        fleet_dict(with_spillover(2, {"onprem-a": 2, "gke-us-central1": "3", "eks-us-east-1": 1}))
    (error,) = info.value.errors
    path, reason = error
    assert path == "gpufleet_model_deployments[0] (qwen-demo).external_endpoints[0] (provider).priority"
    assert "spillover tier 2 of endpoint 'provider'" in reason
    assert "gke-us-central1=3, onprem-a=2" in reason  # the clusters at or above it, with their tiers (a survey's "3")
    assert "eks-us-east-1" not in reason  # tier 1 is below 2: fine
    assert "use priority 4 or more" in reason


def test_spillover_above_every_tier_the_deployment_may_use_is_accepted():
    fleet = fleet_dict(with_spillover(2, {"onprem-a": 1}))  # default tier 0 elsewhere
    qwen = next(d for d in fleet["deployments"] if d["name"] == "qwen-demo")
    assert qwen["external_endpoints"][0]["priority"] == 2
    # A cluster the deployment never uses (not prod) may sit at a higher tier.
    other = sorted(set(example_fleet()["hosts"]) - set(PROD))
    assert other, "the example fleet has a cluster outside prod"
    fleet_dict(with_spillover(2, {other[0]: 5}))
    # Default tiers (0 everywhere) and the lowest spillover tier.
    fleet_dict(with_spillover(1, {}))


def test_a_cluster_tier_at_the_highest_spillover_tier_says_to_lower_it():
    with pytest.raises(FleetValidationError, match=r"lower those clusters' tier below 100"):
        fleet_dict(with_spillover(100, {"onprem-a": 100}))
