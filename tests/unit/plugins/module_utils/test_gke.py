"""GKE provisioning decisions: node pool specs and bodies, update plans, stockouts."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils import gke
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.provisioning import parse_cluster
from ansible_collections.gpufleet.serving.plugins.module_utils.suggest import index_path

GPU = {"name": "gpu", "driver": "gpu.nvidia.com", "device_class_name": "gpu.nvidia.com"}
CLASSES = {
    "l4": {
        "provisioning": {"gke": {"machine_type": "g2-standard-8", "accelerator": {"type": "nvidia-l4", "count": 1}}},
        "devices": [GPU],
    },
    "l4-driver": {
        "provisioning": {
            "gke": {
                "machine_type": "g2-standard-8",
                "accelerator": {"type": "nvidia-l4", "count": 1, "gpu_driver_version": "LATEST"},
            }
        },
        "devices": [GPU],
    },
}


def pools(node_pools, zones=("us-central1-a", "us-central1-c")):
    hv = {
        "gpufleet_provider": "gke",
        "gpufleet_gke": {"project": "p", "region": "us-central1", "zones": list(zones)},
        "gpufleet_node_pools": node_pools,
    }
    cluster, classes = parse_cluster("c1", hv, CLASSES, provider="gke")
    return {p["name"]: p for p in gke.node_pool_specs(cluster, classes)}


def test_gpu_pool_turns_off_gke_driver_and_labels_for_dra():
    l4 = pools([{"name": "l4", "class": "l4", "node_count": 4, "max_node_count": 8}])["l4"]
    assert l4["accelerator"] == {"type": "nvidia-l4", "count": 1, "gpu_driver_version": "INSTALLATION_DISABLED"}
    assert l4["labels"] == {"gpufleet.io/pool": "l4", **gke.DRA_LABELS}
    assert l4["initial_node_count"] == 2 and l4["autoscaling"] == {"min_node_count": 4, "max_node_count": 8}
    body = gke.node_pool_body(l4)
    assert body["config"]["accelerators"][0]["gpuDriverInstallationConfig"] == {
        "gpuDriverVersion": "INSTALLATION_DISABLED"
    }
    assert body["autoscaling"]["totalMaxNodeCount"] == 8


def test_a_gke_managed_driver_gets_no_dra_labels():
    pool = pools([{"name": "l4", "class": "l4-driver", "node_count": 2}])["l4"]
    assert pool["labels"] == {"gpufleet.io/pool": "l4"}


@pytest.mark.parametrize(
    ("pool", "path", "reason"),
    [
        (
            {"name": "l4", "class": "l4", "node_count": 3},
            "hostvars['c1'].gpufleet_node_pools[0].node_count",
            "not a multiple of 2",
        ),
        (
            {"name": "l4", "class": "l4", "node_count": 1, "zones": ["europe-west4-a"]},
            "hostvars['c1'].gpufleet_node_pools[0].zones[0]",
            "not a zone of region",
        ),
        (
            {"name": "system", "class": "l4", "node_count": 2},
            "hostvars['c1'].gpufleet_node_pools[0].name",
            "system pool",
        ),
    ],
)
def test_bad_pools_name_the_field(pool, path, reason):
    with pytest.raises(FleetValidationError) as err:
        pools([pool])
    assert any(index_path(p) == path and reason in r for p, r in err.value.errors), err.value.errors


def test_spot_and_reservation_exclude_each_other():
    bad = {"x": {"provisioning": {"gke": {"machine_type": "a3", "spot": True, "reservation": "r"}}, "devices": [GPU]}}
    with pytest.raises(
        FleetValidationError, match=r"gpufleet_inference_classes\.x\.provisioning\.gke: spot and reservation"
    ):
        parse_cluster("c1", {"gpufleet_provider": "gke", "gpufleet_gke": {"project": "p", "region": "r"}}, bad)


def test_recorded_pool_as_requested_needs_nothing_and_autoscaled_size_is_ignored():
    body = gke.node_pool_body(pools([{"name": "l4", "class": "l4", "node_count": 2, "max_node_count": 4}])["l4"])
    recorded = {**body, "initialNodeCount": 7, "status": "RUNNING", "version": "1.34.5-gke.1"}
    assert not gke.plan_node_pool(body, recorded).changed


def test_cluster_plan_upgrades_and_refuses_downgrade():
    desired = {"name": "c1", "initialClusterVersion": "1.35", "releaseChannel": {"channel": "REGULAR"}}
    recorded = {
        "currentMasterVersion": "1.34.5-gke.1",
        "releaseChannel": {"channel": "REGULAR"},
        "addonsConfig": {"gcpFilestoreCsiDriverConfig": {"enabled": True}},
    }
    assert gke.plan_cluster(desired, recorded) == [{"desiredMasterVersion": "1.35"}]
    assert gke.plan_cluster({**desired, "initialClusterVersion": "1.34"}, recorded) == []
    with pytest.raises(GpufleetError, match="cannot downgrade"):
        gke.plan_cluster({**desired, "initialClusterVersion": "1.33"}, recorded)


def test_stockout_names_zone_and_machine_type():
    msg = (
        "The zone 'projects/p/zones/us-central1-b' does not have enough resources available to fulfill the request. "
        "'(resource type:compute)'."
    )
    out = gke.capacity_failure(msg, "h100", "a3-highgpu-8g", ["us-central1-a"])
    assert out and "a3-highgpu-8g in us-central1-b" in out
    assert gke.capacity_failure("GCE_STOCKOUT", "h100", "a3", ["us-central1-a"]).count("us-central1-a") == 1
    assert gke.capacity_failure("permission denied", "h100", "a3", []) is None


def test_operation_wait_is_bounded():
    now = [0.0]
    waiter = gke.Waiter(10, 2, lambda s: now.__setitem__(0, now[0] + s), lambda: now[0])

    class Api:
        def get_operation(self, name):
            return {"name": name, "status": "RUNNING"}

    with pytest.raises(GpufleetError, match="still RUNNING after 10s"):
        gke.wait_operation(Api(), "projects/p/locations/l", {"name": "op-1", "status": "RUNNING"}, waiter, "creating x")
