"""Issue 33: the plan document and fleet_placement's results show an autoscaled deployment's configured bounds (not
only its replicas) and each cluster's queue; fleet_info reads gpufleet_queue / gpufleet_prometheus_url."""

from __future__ import annotations

import json

from action_case import run_action


def test_the_plan_shows_configured_bounds_and_queues(example_task_vars, tmp_path):
    dep = next(d for d in example_task_vars["gpufleet_model_deployments"] if d["name"] == "qwen-demo")
    dep.pop("replicas")
    dep["autoscaling"] = {"min_replicas": 1, "max_replicas": 5, "metric": {"kind": "kv_cache", "target": 0.75}}
    host = "gke-us-central1"
    for hostvars in example_task_vars["hostvars"].values():
        hostvars["gpufleet_queue"] = {"kind": "kueue", "name": "serving"}
    example_task_vars["hostvars"][host]["gpufleet_prometheus_url"] = "http://prometheus.monitoring:9090"
    info = run_action("fleet_info", {}, example_task_vars)
    assert not info.get("failed"), info.get("msg")
    cluster = next(c for c in info["fleet"]["clusters"] if c["name"] == host)
    assert cluster["queue"] == {"kind": "kueue", "name": "serving"}
    assert cluster["prometheus_url"] == "http://prometheus.monitoring:9090"

    plan_file = tmp_path / "plan.json"
    result = run_action("fleet_placement", {"fleet": info["fleet"], "plan_file": str(plan_file)})
    assert not result.get("failed"), result.get("msg")
    bounds = result["results"]["qwen-demo"]["autoscaling"]
    assert (bounds["min_replicas"], bounds["max_replicas"], bounds["placed"]) == (1, 5, 1)
    assert sum(c["max"] for c in bounds["clusters"].values()) == 5
    plan = json.loads(plan_file.read_text())
    assert plan["placement"]["autoscaling"]["qwen-demo"] == bounds
    (placed_on,) = bounds["clusters"]  # one replica placed (min_replicas), on one cluster
    assert plan["placement"]["queues"]["qwen-demo"] == {placed_on: "kueue/serving"}


def test_a_bad_queue_host_variable_names_the_host(example_task_vars):
    example_task_vars["hostvars"]["onprem-a"]["gpufleet_queue"] = {"kind": "kueue", "name": "Not A Name"}
    info = run_action("fleet_info", {}, example_task_vars)
    assert info.get("failed")
    assert any("gpufleet_queue.name" in e["path"] and "onprem-a" in e["path"] for e in info["errors"]), info["errors"]
