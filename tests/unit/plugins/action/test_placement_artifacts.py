"""fleet_placement's results and custom stats stay small (issue 26): a Ready deployment's diagnostics only when asked
about (gpufleet_explain), the gpufleet_placement artifact a summary without replica records."""

from __future__ import annotations

from action_case import run_action


def fleet_of(task_vars):
    result = run_action("fleet_info", {}, task_vars)
    assert not result.get("failed"), result.get("msg")
    return result["fleet"]


def test_a_ready_deployment_is_explained_only_when_asked(example_task_vars):
    fleet = fleet_of(example_task_vars)
    plain = run_action("fleet_placement", {"fleet": fleet, "publish_stats": True})
    assert not plain.get("failed"), plain.get("msg")
    trimmed = [n for n, r in plain["results"].items() if r.get("unschedulable_omitted")]
    assert trimmed, "the example fleet has a Ready deployment some clusters cannot take"
    name = trimmed[0]
    assert plain["status"][name] == "Ready" and plain["results"][name]["unschedulable"] == {}
    assert not any(line.startswith(f"{name}:") for line in plain["explain"])
    stats = plain["ansible_stats"]["data"]["gpufleet_placement"]
    assert "replicas" not in stats and "explain" not in stats["results"][name]
    assert sum(stats["results"][name]["clusters"].values()) == plain["results"][name]["scheduled"]

    asked = run_action("fleet_placement", {"fleet": fleet, "publish_stats": True, "explain": name})  # a survey string
    assert len(asked["results"][name]["unschedulable"]) == plain["results"][name]["unschedulable_omitted"]
    assert "unschedulable_omitted" not in asked["results"][name]
    assert asked["explain"][0].startswith(f"{name}: ")
    summary = asked["ansible_stats"]["data"]["gpufleet_placement"]
    assert summary["results"][name]["explain"] == asked["explain"]
    assert summary["explained"] == [name]


def test_an_unknown_deployment_to_explain_is_an_error(example_task_vars):
    fleet = fleet_of(example_task_vars)
    name = fleet["deployments"][0]["name"]
    result = run_action("fleet_placement", {"fleet": fleet, "explain": [name + "x"]})
    assert result["failed"] is True
    (error,) = result["errors"]
    assert error["path"] == "gpufleet_explain"
    assert f"unknown deployment {name + 'x'!r}" in error["reason"] and name in error["reason"]
