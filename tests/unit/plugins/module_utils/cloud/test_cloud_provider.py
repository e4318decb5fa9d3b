"""The cloud/ seam: GKE and EKS behind one Provider protocol, one bounded waiter, one capacity message."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils import eks, gke, gke_client
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud import eks as cloud_eks
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud import gke as cloud_gke
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud import gke_client as cloud_gke_client
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.provider import (
    Provider,
    Waiter,
    capacity_message,
    minor_version,
    module_waiter,
    poll,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import KubernetesVersion


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def providers() -> list[Provider]:
    return [cloud_gke.PROVIDER, cloud_eks.PROVIDER]


@pytest.mark.parametrize("provider", providers(), ids=lambda p: p.name)
def test_each_provider_gives_what_the_protocol_names(provider):
    for attribute in ("name", "pool_noun", "compute", "capacity_advice"):
        assert isinstance(getattr(provider, attribute), str) and getattr(provider, attribute)
    config = provider.kubeconfig("ctx", "https://1.2.3.4", "Q0E=", cluster="c1", location="us-east-1")
    assert config["current-context"] == "ctx"
    assert config["clusters"] == [
        {"name": "ctx", "cluster": {"server": "https://1.2.3.4", "certificate-authority-data": "Q0E="}}
    ]
    assert config["users"][0]["user"]["exec"]["apiVersion"] == "client.authentication.k8s.io/v1beta1"


def test_providers_classify_and_find_zones_in_their_own_errors():
    gke_stockout = "ZONE_RESOURCE_POOL_EXHAUSTED: zones/us-central1-a does not have enough resources"
    assert cloud_gke.PROVIDER.classify("", gke_stockout) is not None
    assert cloud_gke.PROVIDER.zones_in(gke_stockout) == ["us-central1-a"]
    assert cloud_eks.PROVIDER.classify("InsufficientInstanceCapacity", "no p5 in us-east-1a", "p5.48xlarge") is not None
    assert cloud_eks.PROVIDER.zones_in("no capacity in us-east-1b or us-east-1a") == ["us-east-1a", "us-east-1b"]
    assert cloud_gke.PROVIDER.classify("", "PERMISSION_DENIED") is None
    assert cloud_eks.PROVIDER.classify("AccessDenied", "not allowed") is None


def test_one_capacity_message_for_both_providers():
    assert capacity_message(cloud_gke.PROVIDER, "h100", "a3-highgpu-8g", [], "stockout") == (
        "node pool h100: Compute Engine capacity for a3-highgpu-8g in unknown zone is not available (stockout); "
        "choose other zones or another machine type, use a reservation, or retry later"
    )
    assert capacity_message(cloud_eks.PROVIDER, "p5", "p5.48xlarge", ["us-east-1a", "us-east-1b"], "X: y") == (
        "nodegroup p5: EC2 capacity for p5.48xlarge in us-east-1a, us-east-1b is not available (X: y); "
        "choose another zone or instance type, a Capacity Block, or retry later"
    )


def test_poll_returns_the_checked_value_and_is_bounded():
    fc = FakeClock()
    waiter = Waiter(timeout=10, interval=4, sleep=fc.sleep, clock=fc.clock)
    answers = iter([(False, None), (False, None), (True, {"status": "ACTIVE"})])
    assert poll(waiter, lambda: next(answers), lambda: "never") == {"status": "ACTIVE"}
    assert fc.sleeps == [4, 4]
    fc = FakeClock()
    waiter = Waiter(timeout=10, interval=4, sleep=fc.sleep, clock=fc.clock)
    with pytest.raises(GpufleetError, match="still CREATING after 10s"):
        poll(waiter, lambda: (False, None), lambda: "still CREATING after 10s")
    assert fc.sleeps == [4, 4, 4]  # checked at 0, 4, 8 and 12: past the deadline at 12
    assert poll(waiter, lambda: (True, None), lambda: "never") is None  # done with no value (a deleted object)


def test_a_check_that_fails_stops_the_poll_at_once():
    fc = FakeClock()
    waiter = Waiter(timeout=60, interval=5, sleep=fc.sleep, clock=fc.clock)

    def failing() -> tuple[bool, None]:
        raise GpufleetError("CREATE_FAILED")

    with pytest.raises(GpufleetError, match="CREATE_FAILED"):
        poll(waiter, failing, lambda: "never")
    assert fc.sleeps == []


def test_the_minor_release_of_a_reported_version():
    assert minor_version("1.34.1-gke.1431000") == KubernetesVersion(1, 34)
    assert minor_version("1.35") == KubernetesVersion(1, 35)
    with pytest.raises(GpufleetError, match="not a Kubernetes version: 'latest'"):
        minor_version("latest")


def test_the_facades_are_the_cloud_modules():
    """One waiter type for both providers; the old import paths give the same objects."""
    assert gke.Waiter is eks.Waiter is Waiter
    assert gke.ensure_node_pool is cloud_gke.ensure_node_pool and gke.PROVIDER is cloud_gke.PROVIDER
    assert eks.ensure_nodegroup is cloud_eks.ensure_nodegroup and eks.PROVIDER is cloud_eks.PROVIDER
    assert gke_client.ClientApi is cloud_gke_client.ClientApi and gke_client.make_client is cloud_gke_client.make_client
    assert set(gke.__all__) <= set(dir(cloud_gke)) and set(eks.__all__) <= set(dir(cloud_eks))


def test_a_modules_wait_options_make_its_waiter():
    waiter = module_waiter({"wait_timeout": 900, "poll_interval": 15})  # GKE's modules: no wait option, always wait
    assert waiter is not None and (waiter.timeout, waiter.interval) == (900, 15)
    assert module_waiter({"wait": True, "wait_timeout": 60, "poll_interval": 5}) is not None
    assert module_waiter({"wait": False, "wait_timeout": 60, "poll_interval": 5}) is None
