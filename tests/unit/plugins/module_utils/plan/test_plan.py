"""The plan document (design §13): digests, the checks an apply makes, stickiness, routing, partial applies."""

from __future__ import annotations

import copy
import json

import pytest
from example_fleet import example_fleet
from module_utils_tests import builders

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.document import (
    PLAN_VERSION,
    Plan,
    fleet_digests,
    plan_record_object,
    read_record,
    routing,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.files import (
    load_plan,
    make_plan,
    read_applied,
    write_applied,
)

fleet_dict = builders("fleet/test_fleet_deploy").fleet_dict


def make(fleet=None, created_at="2026-11-25T10:00:00.000000Z", previous=None, replicas=None) -> Plan:
    fleet = fleet or fleet_dict()
    if replicas is None:
        replicas = place_fleet(fleet, []).replicas
    return Plan.make(
        previous=previous,
        created_at=created_at,
        fleet_name=str(fleet.get("name") or "example"),
        fleet=fleet,
        replicas=replicas,
        placement={"status": {}, "observed": []},
    )


def test_a_plan_round_trips_through_its_json():
    plan = make()
    again = Plan.from_document(plan.to_json(), "plan.json")
    assert again.to_json() == plan.to_json()
    assert again.plan_id == plan.plan_id and again.version == PLAN_VERSION


def test_an_unknown_version_is_refused_naming_both():
    doc = json.loads(make().to_json())
    doc["version"] = 2
    with pytest.raises(GpufleetError, match="plan version 2 is not one this collection reads \\(it reads version 1\\)"):
        Plan.from_document(doc, "plan.json")


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (lambda d: d["replicas"].append(dict(d["replicas"][0], index=99)), "does not match its plan_id"),
        (lambda d: d["fleet"]["deployments"][0].update(replicas=9), "does not match its own fleet_digest"),
        (lambda d: d.update(fleet="x"), "fleet: missing or not a Mapping"),
    ],
)
def test_a_plan_edited_by_hand_is_refused(edit, error):
    doc = json.loads(make().to_json())
    edit(doc)
    with pytest.raises(GpufleetError, match=error):
        Plan.from_document(doc, "plan.json")


def test_an_unchanged_plan_keeps_its_time_and_a_changed_one_does_not():
    first = make(created_at="2026-11-25T10:00:00.000000Z")
    same = make(created_at="2026-11-25T11:00:00.000000Z", previous=first)
    assert same.created_at == first.created_at and same.to_json() == first.to_json()
    data = example_fleet()
    data["deployments"][0]["replicas"] = 2
    other = make(fleet_dict(data), created_at="2026-11-25T11:00:00.000000Z", previous=first)
    assert other.created_at == "2026-11-25T11:00:00.000000Z" and other.plan_id != first.plan_id


def test_the_inventory_check_names_the_section_and_the_cluster_that_differ():
    plan = make()
    plan.check_inventory(fleet_dict(), ["onprem-a", "eks-us-east-1"], "plan.json")  # the same inventory: fine
    data = example_fleet()
    data["deployments"][1]["replicas"] = 5
    data["hosts"]["onprem-a"]["gpufleet_node_pools"][0]["node_count"] += 1
    with pytest.raises(FleetValidationError) as err:
        plan.check_inventory(fleet_dict(data), ["onprem-a", "eks-us-east-1"], "plan.json")
    text = str(err.value)
    assert "plan.json.digests.deployments" in text and "model deployments (gpufleet_model_deployments)" in text
    assert "cluster onprem-a changed in the inventory since the plan was made" in text
    assert "eks-us-east-1" not in text  # unchanged
    assert "digests.classes" not in text
    # A cluster the plan does not know (it joined after the plan).
    with pytest.raises(FleetValidationError, match="cluster lf-new of this play is not in the plan"):
        plan.check_inventory(fleet_dict(), ["lf-new"], "plan.json")


def test_a_slice_inventory_validates_partially_and_matches_the_plan():
    """An AWX slice's inventory holds its own hosts only: a deployment's host pattern may match none of them."""
    data = example_fleet()
    hosts = {"onprem-a": data["hosts"]["onprem-a"]}
    with pytest.raises(FleetValidationError):
        validate_fleet(
            classes=data["classes"],
            hosts=hosts,
            deployments=data["deployments"],
            caches=data["caches"],
            resolve_pattern=lambda p: ["gke-us-central1"],
        )
    part = validate_fleet(
        classes=data["classes"],
        hosts=hosts,
        deployments=data["deployments"],
        caches=data["caches"],
        resolve_pattern=lambda p: ["gke-us-central1"],
        partial=True,
    ).to_dict()
    make().check_inventory(part, ["onprem-a"], "plan.json")
    assert fleet_digests(part)["clusters"] == {"onprem-a": fleet_digests(fleet_dict())["clusters"]["onprem-a"]}


def test_an_older_plan_than_a_cluster_took_is_refused():
    old = make(created_at="2026-11-25T10:00:00.000000Z")
    data = example_fleet()
    data["deployments"][0]["replicas"] = 2
    new = make(fleet_dict(data), created_at="2026-11-25T11:00:00.000000Z")
    old.check_recorded({"onprem-a": old.record()}, "plan.json")  # the same plan again
    new.check_recorded({"onprem-a": old.record()}, "plan.json")  # newer than what the cluster took
    with pytest.raises(FleetValidationError, match="cluster onprem-a was last applied with a newer plan"):
        old.check_recorded({"onprem-a": new.record(), "eks-us-east-1": old.record()}, "plan.json")


def test_routing_weights_follow_the_placement_and_a_drain_goes_to_zero():
    reps = [{"deployment": "m", "cluster": c, "index": i} for i, c in enumerate(["a", "a", "a", "b", "b", "c"])]
    deployments = [{"name": "m", "namespace": "ml"}]
    weights = {c: r["weight"] for c, r in routing(reps, deployments)["m"].items()}
    assert weights == {"a": 3, "b": 2, "c": 1}
    drained = routing(reps, deployments, drained=["c"])["m"]
    assert drained["c"]["weight"] == 0 and drained["c"]["draining"] and drained["a"]["weight"] == 3
    # A drained cluster that holds every replica keeps serving rather than drop the model's traffic.
    alone = routing(reps[:3], deployments, drained=["a"])["m"]["a"]
    assert alone["weight"] == 3 and alone["draining"]


def test_a_partial_apply_holds_a_deployment_whose_replacement_is_outside_the_play():
    observed = [{"deployment": "m", "cluster": "a", "index": 0}, {"deployment": "m", "cluster": "b", "index": 1}]
    plan = make(replicas=[])
    # The plan moves replica 0 from a to c (a drain of a); replica 1 stays on b.
    plan.replicas = [{"deployment": "m", "cluster": "c", "index": 0}, {"deployment": "m", "cluster": "b", "index": 1}]
    assert plan.held_outside(["a"], observed) == {"m": ["c"]}
    assert plan.held_outside(["a", "c"], observed) == {}  # the play awaits the replacement itself
    assert plan.held_outside(["b"], observed) == {}  # nothing of m is removed on b


def test_the_plan_file_is_written_once_and_loaded_back(tmp_path):
    fleet = fleet_dict()
    replicas = place_fleet(fleet, []).replicas
    path = str(tmp_path / "r" / "_fleet" / "plan.json")
    args = dict(
        fleet=fleet,
        replicas=replicas,
        placement={"status": {"qwen-demo": "Ready"}, "observed": []},
        drained=[],
        mode="render",
        capacity="declared",
        render_token=None,
        render_dir=str(tmp_path / "r"),
    )
    first = make_plan(path, check_mode=False, **args)
    assert first["written"] and "document" in first["artifact"]
    again = make_plan(path, check_mode=False, **args)
    assert not again["written"] and again["record"] == first["record"]
    plan, source = load_plan({"path": path}, None)
    assert plan.plan_id == first["record"]["plan_id"] and source == path
    inline, _source = load_plan(first["artifact"], None)
    assert inline.plan_id == plan.plan_id
    with pytest.raises(GpufleetError, match="no plan to apply"):
        load_plan(None, None)


def test_a_symlinked_fleet_directory_is_never_written_through(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    render = tmp_path / "r"
    render.mkdir()
    (render / "_fleet").symlink_to(outside)
    fleet = fleet_dict()
    with pytest.raises(GpufleetError, match="symlink"):
        make_plan(
            str(render / "_fleet" / "plan.json"),
            fleet=fleet,
            replicas=[],
            placement={},
            drained=[],
            mode="render",
            capacity="declared",
            render_token=None,
            check_mode=False,
            render_dir=str(render),
        )
    with pytest.raises(GpufleetError, match="symlink"):
        write_applied(str(render), ["onprem-a"], make().record())
    assert list(outside.iterdir()) == []


def test_applied_records_are_read_back_and_junk_is_ignored(tmp_path):
    record = make().record()
    write_applied(str(tmp_path), ["onprem-a", "eks-us-east-1"], record)
    (tmp_path / "_fleet" / "applied" / record["fleet_name"] / "gke-us-central1.json").write_text("not json")
    got = read_applied(str(tmp_path), record["fleet_name"], ["onprem-a", "eks-us-east-1", "gke-us-central1", "x"])
    assert got == {"onprem-a": record, "eks-us-east-1": record}
    assert read_applied(str(tmp_path), "another-fleet", ["onprem-a"]) == {}  # each fleet its own records


def test_the_record_configmap_is_owned_and_read_back():
    plan = make()
    obj = plan_record_object(plan.record(), "prod")
    assert obj["kind"] == "ConfigMap" and obj["metadata"]["labels"]["gpufleet.io/fleet"] == "prod"
    assert obj["metadata"]["labels"]["gpufleet.io/plan-record"] == "true"
    assert read_record(obj) == plan.record()
    assert read_record({"data": {"plan.json": "[1]"}}) is None
    assert read_record(copy.deepcopy(obj) | {"data": None}) is None
