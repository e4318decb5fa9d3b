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
    # The capacity it runs on is a node label too (a pool without a ladder: its class's one rung).
    assert l4["labels"] == {"gpufleet.io/pool": "l4", **gke.DRA_LABELS, "gpufleet.io/capacity-rung": "on-demand"}
    assert l4["capacity_rung"] == "on-demand" and l4["capacity_ladder"] == []
    assert l4["initial_node_count"] == 2 and l4["autoscaling"] == {"min_node_count": 4, "max_node_count": 8}
    body = gke.node_pool_body(l4)
    assert body["config"]["accelerators"][0]["gpuDriverInstallationConfig"] == {
        "gpuDriverVersion": "INSTALLATION_DISABLED"
    }
    assert body["autoscaling"]["totalMaxNodeCount"] == 8


def test_a_gke_managed_driver_gets_no_dra_labels():
    pool = pools([{"name": "l4", "class": "l4-driver", "node_count": 2}])["l4"]
    assert pool["labels"] == {"gpufleet.io/pool": "l4", "gpufleet.io/capacity-rung": "on-demand"}


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


# --------------------------------------------------------------------------------------------------------------------
# Capacity ladder
# --------------------------------------------------------------------------------------------------------------------

LADDER_CLASSES = {
    **CLASSES,
    "h100": {
        "provisioning": {
            "gke": {
                "machine_type": "a3-highgpu-8g",
                "accelerator": {"type": "nvidia-h100-80gb", "count": 8},
                "reservation": "h100-block",
            }
        },
        "devices": [{**GPU, "count": 8}],
    },
}


def ladder_pool(ladder, classes=None, **pool):
    classes = LADDER_CLASSES if classes is None else classes
    hv = {
        "gpufleet_provider": "gke",
        "gpufleet_gke": {"project": "p", "region": "us-central1", "zones": ["us-central1-a", "us-central1-c"]},
        "gpufleet_node_pools": [
            {"name": "h100", "class": "h100", "node_count": 2, "max_node_count": 4, "capacity_ladder": ladder, **pool}
        ],
    }
    cluster, parsed = parse_cluster("c1", hv, classes, provider="gke")
    return gke.node_pool_specs(cluster, parsed)[1]


def test_each_rung_is_a_pool_spec_with_its_capacity_zones_machine_and_label():
    spec = ladder_pool(
        [
            {"kind": "reservation"},
            {"kind": "spot", "zones": ["us-central1-c"]},
            {"kind": "on-demand", "machine_type": "a3-edgegpu-8g"},
            {"kind": "flex-start"},
        ]
    )
    reservation, spot, on_demand, flex = spec["capacity_ladder"]
    assert {k: spec[k] for k in gke.LADDER_KEYS} == reservation  # the options are the first rung
    assert (reservation["reservation"], reservation["spot"], reservation["any_reservation"]) == (
        "h100-block",
        False,
        False,
    )
    assert (spot["spot"], spot["reservation"], spot["locations"], spot["initial_node_count"]) == (
        True, None, ["us-central1-c"], 2,
    )  # fmt: skip
    assert (on_demand["machine_type"], on_demand["spot"], on_demand["reservation"]) == ("a3-edgegpu-8g", False, None)
    assert [r["labels"]["gpufleet.io/capacity-rung"] for r in spec["capacity_ladder"]] == [
        "reservation", "spot", "on-demand", "flex-start",
    ]  # fmt: skip
    assert spot["labels"]["gpufleet.io/pool"] == "h100" and "nvidia.com/gpu.present" in spot["labels"]
    # The bodies GKE receives.
    body = gke.node_pool_body({**spec, **reservation})
    assert body["config"]["reservationAffinity"]["consumeReservationType"] == "SPECIFIC_RESERVATION"
    body = gke.node_pool_body({**spec, **spot})
    assert body["config"]["spot"] is True and "reservationAffinity" not in body["config"]
    body = gke.node_pool_body({**spec, **flex})
    assert body["config"]["flexStart"] is True
    assert body["config"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert body["initialNodeCount"] == 0 and body["management"]["autoRepair"] is False
    assert (body["autoscaling"]["totalMinNodeCount"], body["autoscaling"]["locationPolicy"]) == (0, "ANY")


def test_a_reservation_rung_without_a_name_consumes_any_reservation():
    classes = {**LADDER_CLASSES, "h100": {**LADDER_CLASSES["h100"], "provisioning": {"gke": {
        "machine_type": "a3-highgpu-8g", "accelerator": {"type": "nvidia-h100-80gb", "count": 8}}}}}  # fmt: skip
    spec = ladder_pool([{"kind": "reservation"}, {"kind": "on-demand"}], classes)
    assert spec["any_reservation"] is True and spec["reservation"] is None
    assert gke.node_pool_body(spec)["config"]["reservationAffinity"] == {"consumeReservationType": "ANY_RESERVATION"}
    assert spec["capacity_ladder"][1]["any_reservation"] is False


def test_module_ladder_items_own_their_capacity_and_inherit_the_rest():
    base = pools([{"name": "l4", "class": "l4", "node_count": 2}])["l4"]
    base = {**base, "reservation": "r1"}
    rungs = gke.ladder_specs(base, [{"capacity_rung": "spot", "spot": True, "machine_type": None, "labels": None}])
    assert rungs[0]["spot"] is True and rungs[0]["reservation"] is None  # not the options' reservation
    assert rungs[0]["machine_type"] == "g2-standard-8" and rungs[0]["labels"] == base["labels"]
    assert gke.ladder_specs(base, []) == [base]
    with pytest.raises(GpufleetError, match="spot and flex_start exclude each other"):
        gke.node_count_check({**base, "reservation": None, "spot": True, "flex_start": True})


class FakeContainer:
    """The container API as the executor calls it: pools in memory; ``fail`` maps a predicate on a create body to
    the error its operation reports (``raise_on_create``: the API call itself fails)."""

    def __init__(self, fail=None, raise_on_create=None):
        self.pools = {}
        self.fail = fail or []
        self.raise_on_create = raise_on_create
        self.calls = []

    def get_node_pool(self, name):
        return self.pools.get(name.rsplit("/", 1)[-1])

    def create_node_pool(self, parent, node_pool):
        self.calls.append(("create", node_pool))
        if self.raise_on_create:
            raise RuntimeError(self.raise_on_create)
        error = next((msg for accepts, msg in self.fail if accepts(node_pool)), None)
        self.pools[node_pool["name"]] = {
            **node_pool,
            "status": "ERROR" if error else "RUNNING",
            "statusMessage": error or "",
        }
        return {"name": "operation-1", "status": "DONE", **({"error": {"message": error}} if error else {})}

    def delete_node_pool(self, name):
        self.calls.append(("delete", name.rsplit("/", 1)[-1]))
        self.pools.pop(name.rsplit("/", 1)[-1], None)
        return {"name": "operation-2", "status": "DONE"}


STOCKOUT_MSG = (
    "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request. "
    "ZONE_RESOURCE_POOL_EXHAUSTED"
)


def walk_spec():
    spec = ladder_pool(
        [{"kind": "reservation", "zones": ["us-central1-a"]}, {"kind": "spot", "zones": ["us-central1-c"]}]
    )
    return spec, spec["capacity_ladder"]


def ensure(api, spec, ladder, check_mode=False):
    rungs = gke.ladder_specs(spec, ladder)
    return gke.ensure_node_pool(api, "p", "us-central1", "c1", spec, state="present", waiter=None,
                                check_mode=check_mode, ladder=rungs)  # fmt: skip


def test_executor_walks_to_the_next_rung_on_a_stockout_and_stays_there():
    spec, ladder = walk_spec()
    api = FakeContainer(fail=[(lambda body: "reservationAffinity" in body["config"], STOCKOUT_MSG)])
    result = ensure(api, spec, ladder)
    assert [c[0] for c in api.calls] == ["create", "delete", "create"]
    assert api.pools["h100"]["config"]["spot"] is True and api.pools["h100"]["locations"] == ["us-central1-c"]
    assert result["capacity"]["rung"] == 2 and result["capacity"]["kind"] == "spot"
    assert result["capacity"]["attempts"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert result["actions"] == ["rung 1 of 2 (reservation) had no capacity: deleted the failed pool",
                                 "create (rung 2 of 2: spot)"]  # fmt: skip
    # Recorded on rung 2: nothing to do, and the report says so.
    api.calls.clear()
    again = ensure(api, spec, ladder)
    assert not again["changed"] and api.calls == [] and again["capacity"]["rung"] == 2


def test_executor_stops_at_a_quota_the_api_refuses_at_once():
    spec, ladder = walk_spec()
    api = FakeContainer(raise_on_create="403 Quota 'NVIDIA_H100_GPUS' exceeded. Limit: 0.0 in region us-central1.")
    with pytest.raises(GpufleetError, match="quota NVIDIA_H100_GPUS exceeded at rung 1 of 2"):
        ensure(api, spec, ladder)
    assert [c[0] for c in api.calls] == ["create"]


def test_executor_lets_an_error_that_is_not_capacity_through():
    spec, ladder = walk_spec()
    api = FakeContainer(raise_on_create="403 PERMISSION_DENIED")
    with pytest.raises(RuntimeError, match="PERMISSION_DENIED"):
        ensure(api, spec, ladder)


def test_a_pool_left_in_error_by_a_stockout_is_deleted_and_the_ladder_walked_again():
    spec, ladder = walk_spec()
    api = FakeContainer()
    api.pools["h100"] = {**gke.node_pool_body(spec), "status": "ERROR", "statusMessage": STOCKOUT_MSG}
    planned = ensure(api, spec, ladder, check_mode=True)
    assert planned["actions"] == ["delete the pool left in ERROR by ZONE_RESOURCE_POOL_EXHAUSTED", "create"]
    assert api.calls == [] and planned["capacity"]["predicted"] is True
    result = ensure(api, spec, ladder)
    assert [c[0] for c in api.calls] == ["delete", "create"] and result["capacity"]["rung"] == 1
    assert api.pools["h100"]["status"] == "RUNNING"


def test_a_recorded_pool_that_matches_no_rung_is_an_immutable_change():
    spec, ladder = walk_spec()
    api = FakeContainer()
    api.pools["h100"] = {**gke.node_pool_body({**spec, "machine_type": "a3-megagpu-8g"}), "status": "RUNNING"}
    with pytest.raises(GpufleetError, match=r"config\.machineType.*matches none of the 2 rungs of its capacity ladder"):
        ensure(api, spec, ladder)
