"""EKS provisioning decisions: nodegroup specs from pools and classes, in-place plans, capacity failures."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils import eks
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.provisioning import parse_cluster
from ansible_collections.gpufleet.serving.plugins.module_utils.suggest import index_path

GPU = {"name": "gpu", "driver": "gpu.nvidia.com", "device_class_name": "gpu.nvidia.com"}
CLASSES = {
    "a10g": {"provisioning": {"eks": {"instance_type": "g5.2xlarge", "disk_size_gb": 200}}, "devices": [GPU]},
    "block": {
        "provisioning": {
            "eks": {
                "instance_type": "p5.48xlarge",
                "capacity_type": "CAPACITY_BLOCK",
                "capacity_reservation_id": "cr-0123456789abcdef0",
            }
        },
        "devices": [GPU],
    },
    "noblock": {
        "provisioning": {"eks": {"instance_type": "p5.48xlarge", "capacity_type": "CAPACITY_BLOCK"}},
        "devices": [GPU],
    },
}
SUBNETS = {"us-east-1a": "subnet-a", "us-east-1b": "subnet-b"}


def cluster(pools, **eks_vars):
    hostvars = {
        "gpufleet_provider": "eks",
        "gpufleet_eks": {"region": "us-east-1", **eks_vars},
        "gpufleet_node_pools": pools,
    }
    return parse_cluster("c1", hostvars, CLASSES, provider="eks")


def specs(pools, subnets=None):
    c, classes = cluster(pools)
    return {s.name: s for s in eks.nodegroup_specs(c, classes, subnets or SUBNETS)}


def test_system_then_gpu_pools_from_the_classes():
    out = specs(
        [
            {
                "name": "a10g",
                "class": "a10g",
                "node_count": 3,
                "min_node_count": 1,
                "max_node_count": 6,
                "zones": ["us-east-1b"],
            }
        ]
    )
    assert list(out) == ["system", "a10g"]
    assert out["system"].taints == [] and out["system"].subnets == ["subnet-a", "subnet-b"]
    a10g = out["a10g"]
    assert (a10g.ami_type, a10g.instance_types, a10g.disk_size) == ("AL2023_x86_64_NVIDIA", ["g5.2xlarge"], 200)
    assert (a10g.min_size, a10g.max_size, a10g.desired_size) == (1, 6, 3)
    assert a10g.labels == {
        "gpufleet.io/pool": "a10g",
        "nvidia.com/gpu.present": "true",
        "gpufleet.io/capacity-rung": "on-demand",  # a pool without a ladder: its class's one rung
    }
    assert a10g.taints == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert a10g.subnets == ["subnet-b"]


def test_fixed_size_pool_and_default_bounds():
    a10g = specs([{"name": "a10g", "class": "a10g", "node_count": 2}])["a10g"]
    assert (a10g.min_size, a10g.max_size, a10g.desired_size) == (2, 2, 2)


@pytest.mark.parametrize(
    ("pool", "path", "reason"),
    [
        (
            {"name": "p5", "class": "noblock", "node_count": 1, "zones": ["us-east-1a"]},
            "gpufleet_inference_classes['noblock'].provisioning.eks.capacity_reservation_id",
            "required when capacity_type is CAPACITY_BLOCK",
        ),
        (
            {"name": "p5", "class": "block", "node_count": 1, "zones": ["us-east-1a", "us-east-1b"]},
            "hostvars['c1'].gpufleet_node_pools[0].zones",
            "one availability zone",
        ),
        (
            {"name": "a10g", "class": "a10g", "node_count": 1, "zones": ["us-east-1c"]},
            "hostvars['c1'].gpufleet_node_pools[0].zones[0]",
            "no subnet in zone 'us-east-1c'",
        ),
        (
            {"name": "system", "class": "a10g", "node_count": 1},
            "hostvars['c1'].gpufleet_node_pools[0].name",
            "system nodegroup",
        ),
        (
            {"name": "a10g", "class": "a10g", "node_count": 0, "max_node_count": 0},
            "hostvars['c1'].gpufleet_node_pools[0].max_node_count",
            "maxSize is at least 1",
        ),
    ],
)
def test_bad_pools_name_the_field(pool, path, reason):
    with pytest.raises(FleetValidationError) as err:
        specs([pool])
    assert any(index_path(p) == path and reason in r for p, r in err.value.errors), err.value.errors


def test_wrong_provider_and_invalid_reservation_id_are_named():
    with pytest.raises(GpufleetError, match=r"gpufleet_provider: is 'eks', but this is the gke role"):
        parse_cluster("c1", {"gpufleet_provider": "eks", "gpufleet_eks": {"region": "r"}}, CLASSES, provider="gke")
    bad = {"x": {"provisioning": {"eks": {"instance_type": "p5", "capacity_reservation_id": "nope"}}, "devices": [GPU]}}
    with pytest.raises(
        FleetValidationError, match=r"gpufleet_inference_classes\.x\.provisioning\.eks\.capacity_reservation_id"
    ):
        parse_cluster("c1", {"gpufleet_provider": "eks", "gpufleet_eks": {"region": "r"}}, bad)


def test_capacity_block_request_uses_a_launch_template_and_no_disk_size():
    p5 = specs([{"name": "p5", "class": "block", "node_count": 1, "zones": ["us-east-1a"]}])["p5"]
    req = eks.create_request("c1", p5, "arn:role", "1.36", {"t": "v"}, {"id": "lt-1"})
    assert req["launchTemplate"] == {"id": "lt-1"} and "diskSize" not in req
    assert req["capacityType"] == "CAPACITY_BLOCK" and req["subnets"] == ["subnet-a"]
    assert req["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    data = eks.launch_template_data(p5)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == (
        "cr-0123456789abcdef0"
    )


def recorded_from(spec, **over):
    rec = eks.create_request("c1", spec, "arn:role", "1.36", {})
    rec = {
        "instanceTypes": rec["instanceTypes"],
        "amiType": rec["amiType"],
        "capacityType": rec["capacityType"],
        "subnets": rec["subnets"],
        "diskSize": rec["diskSize"],
        "scalingConfig": rec["scalingConfig"],
        "labels": rec["labels"],
        "taints": rec["taints"],
        "version": "1.36",
        "status": "ACTIVE",
    }
    rec.update(over)
    return rec


A10G = [{"name": "a10g", "class": "a10g", "node_count": 3, "min_node_count": 1, "max_node_count": 6}]


def test_recorded_as_requested_needs_nothing():
    spec = specs(A10G)["a10g"]
    assert not eks.plan_update(spec, recorded_from(spec), "1.36").changed


def test_autoscaled_desired_size_is_left_alone_inside_the_bounds():
    spec = specs(A10G)["a10g"]
    rec = recorded_from(spec, scalingConfig={"minSize": 1, "maxSize": 6, "desiredSize": 5})
    assert not eks.plan_update(spec, rec, "1.36").changed


def test_new_bounds_clamp_the_desired_size():
    spec = specs(A10G)["a10g"]
    rec = recorded_from(spec, scalingConfig={"minSize": 1, "maxSize": 10, "desiredSize": 9})
    plan = eks.plan_update(spec, rec, "1.36")
    assert plan.config == {"scalingConfig": {"minSize": 1, "maxSize": 6, "desiredSize": 6}}


def test_labels_and_taints_are_reconciled_both_ways():
    spec = specs(A10G)["a10g"]
    rec = recorded_from(
        spec,
        labels={"gpufleet.io/pool": "old", "stale": "x"},
        taints=[{"key": "other", "value": "1", "effect": "NO_EXECUTE"}],
    )
    plan = eks.plan_update(spec, rec, "1.36")
    assert plan.config["labels"] == {
        "addOrUpdateLabels": {
            "gpufleet.io/pool": "a10g",
            "nvidia.com/gpu.present": "true",
            "gpufleet.io/capacity-rung": "on-demand",
        },
        "removeLabels": ["stale"],
    }
    assert plan.config["taints"] == {
        "addOrUpdateTaints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
        "removeTaints": [{"key": "other", "value": "1", "effect": "NO_EXECUTE"}],
    }


def test_immutable_fields_and_version_are_reported():
    spec = specs(A10G)["a10g"]
    rec = recorded_from(spec, instanceTypes=["g5.xlarge"], diskSize=100, version="1.35")
    plan = eks.plan_update(spec, rec, "1.36")
    assert [item[0] for item in plan.immutable] == ["instance_types", "disk_size"]
    assert plan.version == "1.36"
    # a patch release (1.36.2 recorded as eks.3) is not an upgrade
    assert eks.plan_update(spec, recorded_from(spec, version="1.36"), "1.36.2").version is None


def test_capacity_failure_names_zone_and_instance_type():
    rec = {
        "nodegroupName": "p5",
        "instanceTypes": ["p5.48xlarge"],
        "health": {
            "issues": [
                {
                    "code": "AsgInstanceLaunchFailures",
                    "message": "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not "
                    "have sufficient p5.48xlarge capacity in the Availability Zone you requested (us-east-1a).",
                }
            ]
        },
    }
    msg = eks.capacity_failure(rec)
    assert msg and "p5.48xlarge" in msg and "us-east-1a" in msg and "InsufficientInstanceCapacity" in msg
    limit = {
        "nodegroupName": "g",
        "instanceTypes": ["g5.2xlarge"],
        "subnets": ["subnet-b"],
        "health": {"issues": [{"code": "InstanceLimitExceeded", "message": "limit"}]},
    }
    assert "us-east-1b" in (eks.capacity_failure(limit, {"subnet-b": "us-east-1b"}) or "")
    other = {"health": {"issues": [{"code": "AsgInstanceLaunchFailures", "message": "InvalidParameter"}]}}
    assert eks.capacity_failure(other) is None


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def sleep(self, seconds):
        self.now += seconds

    def clock(self):
        return self.now


class Recorded:
    """An EKS client double that replays describe_nodegroup answers (the waiting logic only reads)."""

    def __init__(self, answers):
        self.answers = list(answers)

    def describe_nodegroup(self, clusterName, nodegroupName):
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return {"nodegroup": answer}


def test_wait_fails_fast_on_stockout_and_is_bounded():
    fc = FakeClock()
    waiter = eks.Waiter(timeout=60, interval=5, sleep=fc.sleep, clock=fc.clock)
    stockout = {
        "status": "CREATING",
        "nodegroupName": "p5",
        "instanceTypes": ["p5.48xlarge"],
        "health": {
            "issues": [{"code": "AsgInstanceLaunchFailures", "message": "InsufficientInstanceCapacity (us-east-1a)"}]
        },
    }
    with pytest.raises(GpufleetError, match=r"p5\.48xlarge in us-east-1a"):
        eks.wait_nodegroup(Recorded([{"status": "CREATING"}, stockout]), "c1", "p5", waiter)
    assert fc.now == 5
    with pytest.raises(GpufleetError, match=r"still CREATING after 60s"):
        eks.wait_nodegroup(Recorded([{"status": "CREATING"}]), "c1", "p5", waiter)
    assert eks.wait_nodegroup(Recorded([{"status": "CREATING"}, {"status": "ACTIVE"}]), "c1", "p5", waiter) == {
        "status": "ACTIVE"
    }


def test_subnet_plan_and_zones():
    assert eks.subnet_plan("10.42.0.0/16", ["a", "b"]) == [
        {"zone": "a", "cidr": "10.42.0.0/20"},
        {"zone": "b", "cidr": "10.42.16.0/20"},
    ]
    with pytest.raises(GpufleetError, match="fewer than 3"):
        eks.subnet_plan("10.0.0.0/23", ["a", "b", "c"], prefix=24)
    c = cluster([{"name": "a10g", "class": "a10g", "node_count": 1, "zones": ["us-east-1c"]}])[0]
    assert eks.default_zones(c) == ["us-east-1a", "us-east-1c"]
    c = cluster([], zones=["us-east-1d", "us-east-1f"])[0]
    assert eks.default_zones(c) == ["us-east-1d", "us-east-1f"]


def test_kubeconfig_uses_aws_eks_get_token():
    kc = eks.kubeconfig("c1", "https://x.eks.amazonaws.com", "Q0E=", "us-east-1", context="host")
    assert kc["current-context"] == "host"
    assert kc["users"][0]["user"]["exec"]["args"] == [
        "eks",
        "get-token",
        "--cluster-name",
        "c1",
        "--region",
        "us-east-1",
        "--output",
        "json",
    ]


def test_stale_nodegroups_are_ours_only_gpu_first_system_last():
    recorded = [
        {"nodegroupName": "system", "tags": {"gpufleet.io/cluster": "c1"}},
        {"nodegroupName": "old", "tags": {"gpufleet.io/cluster": "c1"}},
        {"nodegroupName": "a10g", "tags": {"gpufleet.io/cluster": "c1"}},
        {"nodegroupName": "theirs", "tags": {}},
        {"nodegroupName": "other-cluster", "tags": {"gpufleet.io/cluster": "c2"}},
    ]
    assert eks.stale_nodegroups(recorded, ["system", "a10g"], "c1") == ["old"]
    assert eks.stale_nodegroups(recorded, [], "c1") == ["a10g", "old", "system"]


# --------------------------------------------------------------------------------------------------------------------
# Capacity ladder
# --------------------------------------------------------------------------------------------------------------------

BLOCK_LADDER = {
    "name": "p5",
    "class": "block",
    "node_count": 1,
    "max_node_count": 2,
    "zones": ["us-east-1a"],
    "capacity_ladder": [
        {"kind": "reservation"},
        {"kind": "reservation", "capacity_block": False, "capacity_reservation_id": "cr-00000000000000001"},
        {"kind": "spot", "zones": ["us-east-1b"]},
        {"kind": "on-demand"},
    ],
}


def test_each_rung_is_a_nodegroup_spec_with_its_capacity_and_subnets():
    p5 = specs([BLOCK_LADDER])["p5"]
    block, odcr, spot, on_demand = p5.ladder
    assert p5 == eks.replace(block, ladder=p5.ladder)  # the spec is the first rung
    assert (block.capacity_type, block.capacity_reservation_id) == ("CAPACITY_BLOCK", "cr-0123456789abcdef0")
    assert (odcr.capacity_type, odcr.capacity_reservation_id) == ("ON_DEMAND", "cr-00000000000000001")
    assert (spot.capacity_type, spot.capacity_reservation_id, spot.subnets) == ("SPOT", None, ["subnet-b"])
    assert (on_demand.capacity_type, on_demand.subnets) == ("ON_DEMAND", ["subnet-a"])
    rungs = ["reservation", "reservation", "spot", "on-demand"]
    assert [r.labels["gpufleet.io/capacity-rung"] for r in p5.ladder] == rungs
    # Both reservations launch through the launch template; only the Capacity Block's is of that market.
    assert [eks.uses_launch_template(r) for r in p5.ladder] == [True, True, False, False]
    assert "InstanceMarketOptions" not in eks.launch_template_data(odcr)
    assert eks.launch_template_data(odcr)["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-00000000000000001"}
    }


def test_the_module_gets_the_ladder_back_from_the_filter_shape():
    p5 = specs([BLOCK_LADDER])["p5"]
    data = p5.to_dict()
    assert [r["capacity_rung"] for r in data["capacity_ladder"]] == ["reservation", "reservation", "spot", "on-demand"]
    scaling = data["scaling"]
    back = eks.spec_from_dict({**data, "scaling": scaling})
    assert back.rungs() == p5.rungs()
    # A ladder item's capacity is its own: a spot rung does not inherit the Capacity Block's reservation.
    only = eks.spec_from_dict({**data, "capacity_ladder": [{"capacity_rung": "spot", "capacity_type": "SPOT"}]})
    assert (only.capacity_type, only.capacity_reservation_id, only.subnets) == ("SPOT", None, ["subnet-a"])
    with pytest.raises(GpufleetError, match="not SPOT"):
        eks.spec_from_dict({**data, "capacity_type": "SPOT", "capacity_ladder": []})


def test_ladder_zones_get_subnets_and_a_zone_without_one_is_named():
    c = cluster(
        [{**BLOCK_LADDER, "capacity_ladder": [{"kind": "reservation"}, {"kind": "spot", "zones": ["us-east-1c"]}]}]
    )
    assert eks.default_zones(c[0]) == ["us-east-1a", "us-east-1c"]  # the VPC gets a subnet for the rung's zone
    with pytest.raises(FleetValidationError) as err:
        eks.nodegroup_specs(c[0], c[1], SUBNETS)
    assert ("hostvars['c1'].gpufleet_node_pools[0].capacity_ladder[1].zones[0]",
            "no subnet in zone 'us-east-1c' (subnets: us-east-1a, us-east-1b)") in [
        (index_path(p), r) for p, r in err.value.errors]  # fmt: skip


class FakeEks:
    """EKS as the executor calls it: nodegroups in memory; a create whose request ``fail`` accepts turns
    CREATE_FAILED with the health issue EKS reports."""

    def __init__(self, fail=None):
        self.groups = {}
        self.fail = fail or []
        self.calls = []

    def describe_nodegroup(self, clusterName, nodegroupName):
        if nodegroupName not in self.groups:
            exc = RuntimeError("not found")
            exc.response = {"Error": {"Code": "ResourceNotFoundException"}}
            raise exc
        return {"nodegroup": self.groups[nodegroupName]}

    def create_nodegroup(self, **req):
        self.calls.append(("create", req["capacityType"]))
        issue = next((i for accepts, i in self.fail if accepts(req)), None)
        self.groups[req["nodegroupName"]] = {
            "nodegroupName": req["nodegroupName"],
            "status": "CREATE_FAILED" if issue else "ACTIVE",
            "capacityType": req["capacityType"],
            "instanceTypes": req["instanceTypes"],
            "subnets": req["subnets"],
            "amiType": req["amiType"],
            "labels": req["labels"],
            "taints": req["taints"],
            "scalingConfig": req["scalingConfig"],
            "diskSize": req.get("diskSize"),
            "launchTemplate": req.get("launchTemplate"),
            "version": req.get("version"),
            "health": {"issues": [issue] if issue else []},
        }

    def delete_nodegroup(self, clusterName, nodegroupName):
        self.calls.append(("delete", nodegroupName))
        del self.groups[nodegroupName]


class FakeEc2:
    def __init__(self):
        self.templates = {}

    def describe_subnets(self, SubnetIds):
        return {"Subnets": [{"SubnetId": s, "AvailabilityZone": "us-east-1" + s[-1]} for s in SubnetIds]}

    def describe_launch_templates(self, LaunchTemplateNames):
        found = [
            {"LaunchTemplateId": "lt-1", "LaunchTemplateName": n} for n in LaunchTemplateNames if n in self.templates
        ]
        if not found:
            exc = RuntimeError("not found")
            exc.response = {"Error": {"Code": "InvalidLaunchTemplateName.NotFoundException"}}
            raise exc
        return {"LaunchTemplates": found}

    def describe_launch_template_versions(self, LaunchTemplateId, Versions):
        return {"LaunchTemplateVersions": [{"LaunchTemplateData": next(iter(self.templates.values()))}]}

    def create_launch_template(self, LaunchTemplateName, LaunchTemplateData, TagSpecifications):
        self.templates[LaunchTemplateName] = LaunchTemplateData
        return {"LaunchTemplate": {"LaunchTemplateId": "lt-1"}}

    def delete_launch_template(self, LaunchTemplateName):
        del self.templates[LaunchTemplateName]


def asg_issue(text):
    return {"code": "AsgInstanceLaunchFailures", "message": f"Could not launch Instances. {text}"}


def ensure_ng(eks_api, ec2, spec, check_mode=False):
    fc = FakeClock()
    return eks.ensure_nodegroup(eks_api, ec2, "c1", spec, state="present", node_role="arn:role", version="1.36",
                                tags={}, waiter=eks.Waiter(60, 1, fc.sleep, fc.clock),
                                check_mode=check_mode)  # fmt: skip


def test_executor_walks_past_a_stockout_and_removes_the_failed_rungs_template():
    p5 = specs([BLOCK_LADDER])["p5"]
    stockout = asg_issue("InsufficientInstanceCapacity - We currently do not have sufficient p5.48xlarge capacity in "
                         "the Availability Zone you requested (us-east-1a).")  # fmt: skip
    api = FakeEks(fail=[(lambda req: "launchTemplate" in req, stockout)])  # both reservations are full
    ec2 = FakeEc2()
    result = ensure_ng(api, ec2, p5)
    assert api.calls == [("create", "CAPACITY_BLOCK"), ("delete", "p5"), ("create", "ON_DEMAND"), ("delete", "p5"),
                         ("create", "SPOT")]  # fmt: skip
    assert api.groups["p5"]["labels"]["gpufleet.io/capacity-rung"] == "spot"
    assert ec2.templates == {}  # the reservation rungs' launch template went with them
    cap = result["capacity"]
    assert (cap["rung"], cap["of"], cap["kind"], cap["zones"]) == (3, 4, "spot", ["us-east-1b"])
    assert [a["code"] for a in cap["attempts"]] == ["InsufficientInstanceCapacity"] * 2
    # Recorded on its rung: nothing to do.
    api.calls.clear()
    again = ensure_ng(api, ec2, p5)
    assert not again["changed"] and api.calls == [] and again["capacity"]["rung"] == 3


def test_executor_stops_at_a_quota_naming_it():
    p5 = specs([{**BLOCK_LADDER, "capacity_ladder": [{"kind": "on-demand"}, {"kind": "spot"}]}])["p5"]
    quota = asg_issue("VcpuLimitExceeded - You have requested more vCPU capacity than your current vCPU limit of 0")
    api = FakeEks(fail=[(lambda req: req["capacityType"] == "ON_DEMAND", quota)])
    with pytest.raises(GpufleetError, match=r"quota Running On-Demand P instances exceeded at rung 1 of 2"):
        ensure_ng(api, FakeEc2(), p5)
    assert api.calls == [("create", "ON_DEMAND")]
    # The next run (the quota raised) deletes the failed nodegroup and walks again.
    api.fail.clear()
    planned = ensure_ng(api, FakeEc2(), p5, check_mode=True)
    assert planned["actions"] == ["delete the nodegroup left in CREATE_FAILED by VcpuLimitExceeded", "create"]
    result = ensure_ng(api, FakeEc2(), p5)
    assert api.calls[1:] == [("delete", "p5"), ("create", "ON_DEMAND")] and result["capacity"]["rung"] == 1
