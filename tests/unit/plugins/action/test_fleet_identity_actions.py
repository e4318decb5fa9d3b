"""Fleet identity through the action plugins (issue 25): fleet_info requires the name, placement observes only this
fleet's replicas, and a render directory shared by two fleets keeps each fleet's files."""

from __future__ import annotations

import copy
import re

import yaml
from action_case import run_action

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import LABEL_FLEET


def _fleet(task_vars, **overrides):
    result = run_action("fleet_info", {}, {**task_vars, **overrides})
    assert not result.get("failed"), result.get("msg")
    return result["fleet"]


def test_fleet_info_requires_the_fleet_name_and_says_what_to_set(example_task_vars):
    del example_task_vars["gpufleet_fleet_name"]
    result = run_action("fleet_info", {}, example_task_vars)
    assert result["failed"] is True
    (error,) = result["errors"]
    assert error["path"] == "gpufleet_fleet_name"
    assert error["reason"].startswith("is required: the name of this fleet, put on every object")
    assert "`gpufleet_fleet_name: prod`" in error["reason"]


def test_fleet_info_validates_the_name_as_a_label_value(example_task_vars):
    result = run_action("fleet_info", {}, {**example_task_vars, "gpufleet_fleet_name": "prod/eu"})
    assert result["failed"] is True
    assert result["errors"][0]["path"] == "gpufleet_fleet_name"
    assert "must be a Kubernetes label value" in result["errors"][0]["reason"]
    bad = run_action("fleet_info", {}, {**example_task_vars, "gpufleet_adopt_unlabelled": "sometimes"})
    assert [e["path"] for e in bad["errors"]] == ["gpufleet_adopt_unlabelled"]


def test_fleet_info_returns_the_identity(example_task_vars):
    fleet = _fleet(example_task_vars, gpufleet_adopt_unlabelled="true")
    assert (fleet["name"], fleet["adopt_unlabelled"]) == ("example", True)
    assert run_action("fleet_info", {"fleet_name": "other"}, example_task_vars)["fleet"]["name"] == "other"


def _services(fleet, replicas, name):
    """The Services placement reads back, rendered for fleet ``name``."""
    out = run_action("fleet_manifests", {"fleet": {**fleet, "name": name}, "replicas": replicas})
    assert not out.get("failed"), out.get("msg")
    return {c: [o for o in objs if o["kind"] == "Service"] for c, objs in out["objects_by_cluster"].items()}


def test_placement_observes_only_this_fleets_replicas(example_task_vars):
    fleet = _fleet(example_task_vars)
    first = run_action("fleet_placement", {"fleet": fleet})
    assert not first.get("failed"), first.get("msg")
    ours = _services(fleet, first["replicas"], "example")
    theirs = _services(fleet, first["replicas"], "other")  # another inventory, same names, same clusters
    both = {c: ours[c] + theirs[c] for c in ours}
    again = run_action("fleet_placement", {"fleet": fleet, "observed_by_cluster": both})
    assert again["replicas"] == first["replicas"] and again["changed"] is False
    # The other fleet's replicas alone are not ours: placement starts from nothing (and would place afresh).
    alone = run_action("fleet_placement", {"fleet": fleet, "observed_by_cluster": theirs})
    assert alone["changed"] is True


def test_placement_stops_on_unlabelled_replicas_until_told(example_task_vars):
    fleet = _fleet(example_task_vars)
    first = run_action("fleet_placement", {"fleet": fleet})
    legacy = copy.deepcopy(_services(fleet, first["replicas"], "example"))
    for objs in legacy.values():
        for o in objs:
            del o["metadata"]["labels"][LABEL_FLEET]
    stopped = run_action("fleet_placement", {"fleet": fleet, "observed_by_cluster": legacy})
    assert stopped["failed"] is True
    assert "carry gpufleet.serving's owner labels but no gpufleet.io/fleet label" in stopped["msg"]
    assert "gpufleet_adopt_unlabelled: true if they are this fleet's (example)" in stopped["msg"]
    adopted = run_action(
        "fleet_placement", {"fleet": {**fleet, "adopt_unlabelled": True}, "observed_by_cluster": legacy}
    )
    assert adopted["replicas"] == first["replicas"] and adopted["changed"] is False
    left = run_action("fleet_placement", {"fleet": {**fleet, "adopt_unlabelled": False}, "observed_by_cluster": legacy})
    assert left["changed"] is True  # another inventory's: not counted as this fleet's replicas


def test_two_fleets_share_a_render_directory(example_task_vars, tmp_path):
    """Each fleet prunes its own files: dropping a deployment from one leaves the other's files as they are."""
    blue, green = (
        _fleet(example_task_vars, gpufleet_fleet_name="blue"),
        _fleet(example_task_vars, gpufleet_fleet_name="green"),
    )
    # Distinct deployment names per fleet (same names on the same cluster and namespace would be one object).
    for dep in green["deployments"]:
        dep["name"] = f"g-{dep['name']}"[:40]
    placed = {}
    for fleet in (blue, green):
        placement = run_action("fleet_placement", {"fleet": fleet, "render_dir": str(tmp_path)})
        assert not placement.get("failed"), placement.get("msg")
        written = run_action(
            "fleet_manifests",
            {"fleet": fleet, "replicas": placement["replicas"], "render_dir": str(tmp_path)},
        )
        assert not written.get("failed"), written.get("msg")
        placed[fleet["name"]] = placement["replicas"]

    def files(name):
        out = {}
        for path in tmp_path.glob("*/*/*.yaml"):
            labels = yaml.safe_load(path.read_text())["metadata"]["labels"]
            if labels.get(LABEL_FLEET) == name:
                out[str(path.relative_to(tmp_path))] = path.read_text()
        return out

    green_before = files("green")
    assert green_before and files("blue")
    # Blue drops a deployment: only blue's files of it go.
    dropped = blue["deployments"][0]["name"]
    smaller = {**blue, "deployments": blue["deployments"][1:]}
    kept = [r for r in placed["blue"] if r["deployment"] != dropped]
    pruned = run_action("fleet_manifests", {"fleet": smaller, "replicas": kept, "render_dir": str(tmp_path)})
    # The replicas' files (<kind>-<replica>[-...].yaml) and the model endpoint's (<kind>-<deployment>.yaml).
    assert pruned["removed"] and all(re.search(rf"-{dropped}(-|\.yaml$)", r) for r in pruned["removed"])
    assert files("green") == green_before
    assert not [p for p in files("blue") if dropped in p]
    # Blue tears down (manifest_dir with no objects, as teardown.yml does in render mode): green's files stay.
    for cluster in {r["cluster"] for r in placed["blue"]}:
        gone = run_action(
            "manifest_dir",
            {
                "path": str(tmp_path),
                "cluster": cluster,
                "objects": [],
                "owner": {"app.kubernetes.io/managed-by": "gpufleet.serving"},
                "fleet": "blue",
            },
        )
        assert not gone.get("failed"), gone.get("msg")
    assert files("blue") == {} and files("green") == green_before
