"""The capacity ladder's pure decisions: which provider errors are stockouts (next rung) and which are quotas (stop,
naming the quota), the walk over the rungs, the report line and which rung a recorded pool is on."""

from __future__ import annotations

from typing import get_args

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils import capacity_ladder as cl
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import CAPACITY_RUNGS
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import CapacityRung

GKE_STOCKOUT = (
    "Instance 'gke-c-h100-0' creation failed: The zone 'projects/p/zones/us-central1-a' does not have enough "
    "resources available to fulfill the request. '(resource type:compute)'. ZONE_RESOURCE_POOL_EXHAUSTED"
)


def test_one_list_of_rung_kinds():
    assert get_args(CapacityRung.model_fields["kind"].annotation) == CAPACITY_RUNGS
    assert tuple(cl.AVAILABILITY) == CAPACITY_RUNGS


@pytest.mark.parametrize(
    ("message", "kind", "code", "quota"),
    [
        (GKE_STOCKOUT, cl.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED", None),
        ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: a3-highgpu-8g", cl.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", None),
        ("GCE_STOCKOUT: no capacity", cl.STOCKOUT, "GCE_STOCKOUT", None),
        ("The zone 'projects/p/zones/x' does not have enough resources available", cl.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED", None),
        ("Specific reservation 'h100-block' does not have enough available capacity", cl.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED", None),
        ("Quota 'NVIDIA_L4_GPUS' exceeded. Limit: 0.0 in region us-central1.", cl.QUOTA, "QUOTA_EXCEEDED", "NVIDIA_L4_GPUS"),
        ("QUOTA_EXCEEDED: Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 8.0 globally.", cl.QUOTA, "QUOTA_EXCEEDED", "GPUS_ALL_REGIONS"),
        ('GCE_QUOTA_EXCEEDED: Insufficient regional quota to satisfy request: resource "CPUS"', cl.QUOTA, "GCE_QUOTA_EXCEEDED", "CPUS"),
    ],
)  # fmt: skip
def test_gke_errors_are_classified(message, kind, code, quota):
    failure = cl.classify_gke(message)
    assert failure is not None
    assert (failure.kind, failure.code, failure.quota) == (kind, code, quota)
    assert failure.message == message


@pytest.mark.parametrize(
    "message", ["", "PERMISSION_DENIED: container.nodePools.create", "Invalid value for field 'machineType'"]
)
def test_other_gke_errors_are_not_capacity(message):
    assert cl.classify_gke(message) is None


@pytest.mark.parametrize(
    ("code", "message", "instance", "capacity_type", "kind", "found", "quota"),
    [
        ("AsgInstanceLaunchFailures", "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We "
         "currently do not have sufficient p5.48xlarge capacity (us-east-1a).", "p5.48xlarge", "ON_DEMAND",
         cl.STOCKOUT, "InsufficientInstanceCapacity", None),
        ("AsgInstanceLaunchFailures", "InsufficientCapacity - There is not enough capacity", "p5.48xlarge",
         "CAPACITY_BLOCK", cl.STOCKOUT, "InsufficientCapacity", None),
        ("AsgInstanceLaunchFailures", "ReservationCapacityExceeded - The targeted Capacity Reservation does not have "
         "enough available capacity", "p5.48xlarge", "ON_DEMAND", cl.STOCKOUT, "ReservationCapacityExceeded", None),
        ("AsgInstanceLaunchFailures", "The Capacity Block cr-0123456789abcdef0 is not active yet.", "p5.48xlarge",
         "CAPACITY_BLOCK", cl.STOCKOUT, cl.CAPACITY_BLOCK_UNAVAILABLE, None),
        ("AsgInstanceLaunchFailures", "UnfulfillableCapacity - not enough spare capacity", "g6.2xlarge", "SPOT",
         cl.STOCKOUT, "UnfulfillableCapacity", None),
        ("AsgInstanceLaunchFailures", "VcpuLimitExceeded - You have requested more vCPU capacity than your current "
         "vCPU limit of 0 allows", "p5.48xlarge", "ON_DEMAND", cl.QUOTA, "VcpuLimitExceeded",
         "Running On-Demand P instances"),
        ("AsgInstanceLaunchFailures", "MaxSpotInstanceCountExceeded - Max spot instance count exceeded",
         "g6.2xlarge", "SPOT", cl.QUOTA, "MaxSpotInstanceCountExceeded", "All G and VT Spot Instance Requests"),
        ("InstanceLimitExceeded", "limit", "g5.2xlarge", "ON_DEMAND", cl.QUOTA, "InstanceLimitExceeded",
         "Running On-Demand G and VT instances"),
        ("AsgInstanceLaunchFailures", "VcpuLimitExceeded", "m6i.large", "ON_DEMAND", cl.QUOTA, "VcpuLimitExceeded",
         "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    ],
)  # fmt: skip
def test_ec2_errors_are_classified(code, message, instance, capacity_type, kind, found, quota):
    failure = cl.classify_ec2(code, message, instance, capacity_type)
    assert failure is not None
    assert (failure.kind, failure.code, failure.quota) == (kind, found, quota)


def test_a_code_is_matched_as_a_word_not_inside_another():
    # InsufficientCapacityOnHost is its own code, not InsufficientCapacity; nothing here is about capacity.
    assert cl.classify_ec2("AsgInstanceLaunchFailures", "InsufficientCapacityOnHost - x").code == (
        "InsufficientCapacityOnHost"
    )
    assert cl.classify_ec2("AsgInstanceLaunchFailures", "InvalidParameterValue - bad AMI") is None
    assert cl.classify_ec2("Ec2SubnetInvalidConfiguration", "no public IP") is None


def rungs(*kinds: str) -> list[cl.Rung]:
    return [cl.Rung(i, len(kinds), kind, "a3-highgpu-8g", (f"us-central1-{'abc'[i]}",)) for i, kind in enumerate(kinds)]


class Provider:
    """Fails the attempts named in ``failures`` (rung index -> Failure) and records every call."""

    def __init__(self, failures: dict[int, cl.Failure]) -> None:
        self.failures = failures
        self.calls: list[tuple[str, int]] = []

    def attempt(self, rung: cl.Rung) -> None:
        self.calls.append(("attempt", rung.index))
        failure = self.failures.get(rung.index)
        if failure is not None:
            raise cl.CapacityError(failure, f"provider says: {failure.message}")

    def clear(self, rung: cl.Rung) -> None:
        self.calls.append(("clear", rung.index))


STOCKOUT = cl.Failure(cl.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED", GKE_STOCKOUT)
QUOTA = cl.Failure(cl.QUOTA, "QUOTA_EXCEEDED", "Quota 'NVIDIA_H100_GPUS' exceeded.", "NVIDIA_H100_GPUS")


def test_a_stockout_moves_to_the_next_rung_after_clearing_the_failed_one():
    provider = Provider({0: STOCKOUT})
    outcome = cl.walk(
        "h100", "node pool h100", rungs("reservation", "spot", "on-demand"), provider.attempt, provider.clear
    )
    assert provider.calls == [("attempt", 0), ("clear", 0), ("attempt", 1)]
    assert outcome.rung.index == 1 and outcome.rung.kind == "spot"
    assert [a.failure.code for a in outcome.attempts] == ["ZONE_RESOURCE_POOL_EXHAUSTED"]
    data = outcome.to_dict()
    assert (data["rung"], data["of"], data["kind"], data["zones"]) == (2, 3, "spot", ["us-central1-b"])
    assert data["attempts"][0]["class"] == "stockout" and data["attempts"][0]["rung"] == 1
    assert data["report"] == (
        "h100: got rung 2 of 3, spot, a3-highgpu-8g in us-central1-b - " + cl.AVAILABILITY["spot"]
        + " (after rung 1 of 3 reservation: ZONE_RESOURCE_POOL_EXHAUSTED)"
    )  # fmt: skip


def test_a_quota_stops_the_walk_naming_the_quota():
    provider = Provider({0: STOCKOUT, 1: QUOTA})
    with pytest.raises(cl.QuotaExceeded) as err:
        cl.walk("h100", "node pool h100", rungs("reservation", "spot", "on-demand"), provider.attempt, provider.clear)
    assert provider.calls == [("attempt", 0), ("clear", 0), ("attempt", 1)]  # on-demand never tried, nothing cleared
    text = str(err.value)
    assert text.startswith("node pool h100: quota NVIDIA_H100_GPUS exceeded at rung 2 of 3 (spot, a3-highgpu-8g in ")
    assert "the capacity ladder stops here" in text
    assert "before it: rung 1 of 3 (reservation, a3-highgpu-8g in us-central1-a): ZONE_RESOURCE_POOL_EXHAUSTED" in text


def test_every_rung_stocked_out_lists_them_and_leaves_the_last_failure():
    provider = Provider({0: STOCKOUT, 1: STOCKOUT})
    with pytest.raises(cl.LadderExhausted) as err:
        cl.walk("h100", "node pool h100", rungs("spot", "on-demand"), provider.attempt, provider.clear)
    assert provider.calls == [("attempt", 0), ("clear", 0), ("attempt", 1)]  # the last failure stays for the user
    assert "no rung of its capacity ladder had capacity - rung 1 of 2 (spot" in str(err.value)
    assert "rung 2 of 2 (on-demand, a3-highgpu-8g in us-central1-b): ZONE_RESOURCE_POOL_EXHAUSTED" in str(err.value)


def test_a_single_rung_fails_with_the_providers_own_message():
    provider = Provider({0: STOCKOUT})
    with pytest.raises(cl.LadderExhausted, match=r"^provider says: Instance 'gke-c-h100-0'"):
        cl.walk("h100", "node pool h100", rungs("on-demand"), provider.attempt, provider.clear)
    assert provider.calls == [("attempt", 0)]


def test_an_error_that_is_not_about_capacity_propagates_at_once():
    def attempt(rung: cl.Rung) -> None:
        raise GpufleetError("PERMISSION_DENIED")

    with pytest.raises(GpufleetError, match="PERMISSION_DENIED"):
        cl.walk("h100", "node pool h100", rungs("spot", "on-demand"), attempt, lambda r: None)


def test_the_first_rung_that_succeeds_wins_without_clearing():
    provider = Provider({})
    outcome = cl.walk("h100", "node pool h100", rungs("reservation", "spot"), provider.attempt, provider.clear)
    assert provider.calls == [("attempt", 0)] and outcome.attempts == ()
    assert "(after" not in outcome.report()


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        ([], None),
        ([(0, False, False), (2, True, True)], 2),  # the exact match of the recorded kind
        ([(0, False, False), (1, False, True)], 1),  # else the recorded kind
        ([(1, False, False), (2, True, False)], 1),  # else the first that matches at all
    ],
)
def test_the_rung_of_a_recorded_pool(candidates, expected):
    assert cl.pick_recorded(candidates) == expected


def test_implicit_kind_of_a_pool_without_ladder():
    assert cl.implicit_kind() == "on-demand"
    assert cl.implicit_kind(spot=True) == "spot"
    assert cl.implicit_kind(reservation=True) == "reservation"
    assert cl.implicit_kind(flex_start=True) == "flex-start"
