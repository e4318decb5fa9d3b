"""The fleet's durable state (issue 26): drained and cordoned clusters in a file every run reads, where an AWX job keeps
it - read, changed and written safely, the variables' own clusters applying too."""

from __future__ import annotations

import importlib
import os
from typing import Any

import action_case
import pytest
import yaml
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.state import (
    FleetState,
    change,
    read,
    render_dir_file,
    write,
)

CLUSTERS = ["a", "b", "c"]
RENDER_DIR_FILE = render_dir_file("example")


def state_file(render_dir) -> str:
    return str(render_dir / RENDER_DIR_FILE)


def test_a_missing_file_is_the_empty_state(tmp_path):
    assert read(state_file(tmp_path), str(tmp_path)) == FleetState()
    assert read(str(tmp_path / "nowhere" / "fleet-state.yml")) == FleetState()


def test_a_cluster_has_one_state_and_drained_wins():
    state = FleetState.of(["b", "a"], ["a", "c"])
    assert state.to_dict() == {"drained": ["a", "b"], "cordoned": ["c"]}
    assert state.with_state("a", "cordoned").to_dict() == {"drained": ["b"], "cordoned": ["a", "c"]}
    assert state.with_state("c", "absent").to_dict() == {"drained": ["a", "b"], "cordoned": []}
    assert state.state_of("a") == "drained" and state.state_of("c") == "cordoned" and state.state_of("x") == "absent"
    with pytest.raises(GpufleetError, match="state must be one of drained, cordoned, absent"):
        state.with_state("a", "present")


def test_the_file_is_yaml_of_the_two_variables_and_reads_back(tmp_path):
    state = FleetState.of(["b"], ["a"])
    assert write(state_file(tmp_path), state, str(tmp_path))
    text = (tmp_path / RENDER_DIR_FILE).read_text()
    # It also reads as a vars file (-e @fleet-state.yml): the variables it adds to.
    assert yaml.safe_load(text) == {"gpufleet_drained_clusters": ["b"], "gpufleet_cordoned_clusters": ["a"]}
    assert read(state_file(tmp_path), str(tmp_path)) == state
    assert not write(state_file(tmp_path), state, str(tmp_path))  # unchanged: not written again


def test_a_name_cannot_change_the_files_structure(tmp_path):
    odd = 'x"\n- y: {z: 1}'
    write(state_file(tmp_path), FleetState.of([odd]), str(tmp_path))
    assert read(state_file(tmp_path), str(tmp_path)).drained == (odd,)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("- a\n", "not a fleet state (a list, not a mapping)"),
        ("gpufleet_drained_clusters: [a]\nextra: 1\n", "unknown key(s) extra"),
        ("gpufleet_drained_clusters: a\n", "gpufleet_drained_clusters must be a list of cluster names"),
        ("gpufleet_cordoned_clusters: [1]\n", "gpufleet_cordoned_clusters must be a list of cluster names"),
        ("gpufleet_drained_clusters: [a\n", "not a fleet state (not YAML"),
    ],
)
def test_a_file_that_is_not_a_fleet_state_is_an_error_naming_it(tmp_path, text, error):
    path = tmp_path / RENDER_DIR_FILE
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(GpufleetError) as err:
        read(str(path), str(tmp_path))
    assert str(err.value).startswith(str(path)) and error in str(err.value)


def test_never_through_a_symlink_below_the_render_directory(tmp_path):
    """A render directory is a Git working tree: a committed _fleet symlink must not make a drain write elsewhere."""
    outside = tmp_path / "outside"
    outside.mkdir()
    render = tmp_path / "render"
    render.mkdir()
    (render / "_fleet").symlink_to(outside)
    with pytest.raises(GpufleetError, match="is a symlink"):
        change(state_file(render), "a", "drained", CLUSTERS, FleetState(), render_dir=str(render))
    assert not list(outside.iterdir())
    (render / "_fleet").unlink()
    (render / "_fleet" / "example").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_text("gpufleet_drained_clusters: [a]\n")
    (render / RENDER_DIR_FILE).symlink_to(secret)
    with pytest.raises(GpufleetError, match="is a symlink"):
        read(state_file(render), str(render))
    with pytest.raises(GpufleetError, match="is a symlink"):
        read(state_file(render))  # the file itself, wherever it is


def test_a_drain_is_recorded_and_the_variables_apply_too(tmp_path):
    path = state_file(tmp_path)
    out = change(path, "a", "drained", CLUSTERS, FleetState.of(cordoned=["c"]), render_dir=str(tmp_path))
    assert out["changed"] and out["recorded"] == {"drained": ["a"], "cordoned": []}
    assert out["effective"] == {"drained": ["a"], "cordoned": ["c"]}
    assert out["before"] == "" and 'gpufleet_drained_clusters:\n  - "a"' in out["after"]
    again = change(path, "a", "drained", CLUSTERS, FleetState(), render_dir=str(tmp_path))
    assert not again["changed"]
    cordon = change(path, "b", "cordoned", CLUSTERS, FleetState(), render_dir=str(tmp_path))
    assert read(path, str(tmp_path)).to_dict() == cordon["recorded"] == {"drained": ["a"], "cordoned": ["b"]}
    restore = change(path, "a", "absent", CLUSTERS, FleetState(), render_dir=str(tmp_path))
    assert read(path, str(tmp_path)).to_dict() == restore["recorded"] == {"drained": [], "cordoned": ["b"]}


def test_check_mode_and_reading_write_nothing(tmp_path):
    path = state_file(tmp_path)
    out = change(path, "a", "drained", CLUSTERS, FleetState(), render_dir=str(tmp_path), check_mode=True)
    assert out["changed"] and out["effective"]["drained"] == ["a"]
    assert not os.path.exists(path)
    assert not change(path, None, "drained", CLUSTERS, FleetState.of(["b"]))["changed"]
    assert not os.path.exists(path)


def test_an_unknown_cluster_is_an_error_with_the_closest_name(tmp_path):
    with pytest.raises(GpufleetError, match=r"unknown cluster 'gke-us-centrl1' \(did you mean 'gke-us-central1'\?"):
        change(state_file(tmp_path), "gke-us-centrl1", "drained", ["gke-us-central1", "eks"], FleetState())
    assert not (tmp_path / RENDER_DIR_FILE).exists()


def test_a_cluster_the_variables_drain_cannot_be_restored_here(tmp_path):
    """Undraining a cluster that gpufleet_drained_clusters still names would change nothing, silently: an error."""
    path = state_file(tmp_path)
    with pytest.raises(GpufleetError) as err:
        change(path, "a", "absent", CLUSTERS, FleetState.of(["a"]), render_dir=str(tmp_path))
    assert str(err.value).startswith("a stays drained: gpufleet_drained_clusters names it")
    assert "group_vars/all/gpufleet_drained.yml" in str(err.value)
    with pytest.raises(GpufleetError, match=r"^b stays cordoned: gpufleet_cordoned_clusters names it"):
        change(path, "b", "absent", CLUSTERS, FleetState.of(cordoned=["b"]), render_dir=str(tmp_path))
    assert not os.path.exists(path)
    # Draining a cluster the variables cordon is fine: drained wins.
    assert change(path, "b", "drained", CLUSTERS, FleetState.of(cordoned=["b"]))["effective"]["drained"] == ["b"]


def test_clusters_that_left_the_inventory_are_dropped(tmp_path):
    path = state_file(tmp_path)
    write(path, FleetState.of(["gone", "a"]), str(tmp_path))
    assert read(path).known(CLUSTERS).drained == ("a",)
    out = change(path, "b", "cordoned", CLUSTERS, FleetState(), render_dir=str(tmp_path))
    assert read(path).to_dict() == out["recorded"] == {"drained": ["a"], "cordoned": ["b"]}


# --- the plugins ---------------------------------------------------------------------------------------------------


def run_lookup(path: str, variables: dict[str, Any], **kwargs: Any) -> Any:
    module = importlib.import_module("ansible_collections.gpufleet.serving.plugins.lookup.fleet_state")
    lookup = module.LookupModule(loader=DataLoader(), templar=Templar(loader=DataLoader()))
    return lookup.run([path], variables, **kwargs)


def test_the_lookup_reads_the_state_of_the_inventorys_clusters(tmp_path):
    write(state_file(tmp_path), FleetState.of(["a", "gone"], ["b"]), str(tmp_path))
    [state] = run_lookup(state_file(tmp_path), {"groups": {"gpufleet_clusters": CLUSTERS}}, render_dir=str(tmp_path))
    assert state == {"drained": ["a"], "cordoned": ["b"], "path": state_file(tmp_path)}
    [empty] = run_lookup(str(tmp_path / "none.yml"), {})
    assert empty["drained"] == empty["cordoned"] == []
    (tmp_path / RENDER_DIR_FILE).write_text("- not a state\n")
    with pytest.raises(AnsibleLookupError, match=r"^gpufleet.serving.fleet_state: .* not a fleet state"):
        run_lookup(state_file(tmp_path), {})


def run_action(args: dict[str, Any], check_mode: bool = False, diff: bool = False) -> dict[str, Any]:
    return action_case.run_action("fleet_state", args, check_mode=check_mode, diff=diff)


def test_the_module_records_a_drain_with_the_variables_in_their_survey_forms(tmp_path):
    args = {"path": state_file(tmp_path), "render_dir": str(tmp_path), "cluster": "a", "clusters": CLUSTERS}
    out = run_action({**args, "cordoned": "b, c"}, diff=True)
    assert not out.get("failed"), out
    assert out["changed"] and out["drained"] == ["a"] and out["cordoned"] == ["b", "c"]
    assert out["recorded"] == {"drained": ["a"], "cordoned": []}
    assert out["diff"]["before"] == "" and out["diff"]["after"] == (tmp_path / RENDER_DIR_FILE).read_text()


def test_the_module_fails_with_the_one_shape(tmp_path):
    args = {"path": state_file(tmp_path), "cluster": "a", "clusters": CLUSTERS}
    out = run_action({**args, "state": "absent", "drained": '["a"]'})
    assert out["failed"] and out["msg"].startswith("fleet_state: a stays drained: gpufleet_drained_clusters")
    out = run_action({**args, "drained": '["a", '})
    assert out["failed"] and "gpufleet_drained_clusters: is not a JSON list" in out["msg"]
    out = run_action({**args, "state": "present"})
    assert out["failed"] and "state" in out["msg"]
    assert not (tmp_path / RENDER_DIR_FILE).exists()
