"""Fleet routing stays small at thousands of clusters (issue 26, "Scale"): the task result and the ``gpufleet_routing``
custom stat are a bounded summary pointing at ``_fleet/routing/``; the artifact and the hub's objects go to later
tasks through files (module_utils/handoff.py), and what reads them gets them byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from action_case import run_action
from ansible import constants as C
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.filter.handed_off import handed_off
from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import is_handle, load
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import size
from ansible_collections.gpufleet.serving.plugins.module_utils.routing import (
    ARTIFACT_KEY,
    SUMMARY_LIMIT,
    artifact_file,
    assemble_artifact,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.routing_hub import read_routing_artifact

AWX_EVENT_LIMIT = 700_000
FLEET = "bench"


def _fleet(clusters: int, deployments: int = 20, per: int | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``deployments`` models of ``per`` replicas (default clusters / deployments), one replica per cluster in turn;
    ``model-01`` has one replica fewer than it wants (short)."""
    names = [f"cluster-{i:04d}" for i in range(clusters)]
    per = per or max(1, clusters // deployments)
    deps = [
        {"name": f"model-{i:02d}", "namespace": "bench", "replicas": per + (1 if i == 1 else 0), "port": 8000}
        for i in range(deployments)
    ]
    replicas = [
        {"deployment": d["name"], "cluster": names[(i * per + k) % clusters]}
        for i, d in enumerate(deps)
        for k in range(per)
    ]
    return {"name": FLEET, "clusters": [{"name": n} for n in names], "deployments": deps}, replicas


def _hostvars(fleet: dict[str, Any]) -> dict[str, Any]:
    return {
        "hostvars": {
            c["name"]: {"gpufleet_routing_address": f"gw.{c['name']}.example.com", "gpufleet_routing_priority": i % 2}
            for i, c in enumerate(fleet["clusters"])
        }
    }


def _ok(result: dict[str, Any]) -> dict[str, Any]:
    assert not result.get("failed"), result.get("msg")
    return result


def test_routing_of_5000_clusters_is_a_bounded_summary_pointing_at_the_routing_file(tmp_path):
    fleet, replicas = _fleet(5000)
    render_dir = tmp_path / "rendered"
    args = {"fleet": fleet, "replicas": replicas, "render_dir": str(render_dir), "drained": ["cluster-0000"]}
    result = _ok(run_action("fleet_routing", args, _hostvars(fleet)))
    assert size(result) < AWX_EVENT_LIMIT
    summary = result["routing"]
    assert size(summary) <= SUMMARY_LIMIT
    assert result["ansible_stats"]["data"] == {"gpufleet_routing": summary}
    # The summary: per deployment a few counts, fleet totals, and where the whole artifact is.
    assert summary["models_count"] == 20 and set(summary["models"]) == {f"model-{i:02d}" for i in range(20)}
    chat = summary["models"]["model-00"]
    assert (chat["desired"], chat["ready"], chat["clusters"], chat["tiers"]) == (250, 249, 250, [0, 1])
    assert (chat["endpoints"], chat["weight"], chat["draining"], chat["short"], chat["over"]) == (
        249,
        249,
        1,
        True,
        False,
    )
    assert summary["models"]["model-01"]["short"] is True and summary["models"]["model-02"]["short"] is False
    assert summary["totals"]["models"] == 20 and summary["totals"]["clusters"] == 5000
    assert summary["totals"]["weight"] == summary["totals"]["ready"] == 4999  # the drained cluster's replica at 0
    assert summary["totals"]["short"] == ["model-00", "model-01"]
    pointer = summary["artifact"]
    assert pointer["file"] == artifact_file(FLEET, "gpufleet-routing") and pointer["render_dir"] == str(render_dir)
    assert pointer["configmap"] == {
        "namespace": "gpufleet-routing",
        "name": "gpufleet-routing-bench",
        "key": ARTIFACT_KEY,
    }
    # The whole artifact: the index the summary names and the ConfigMaps it names, which is what the handle hands to
    # later tasks.
    files = sorted(f"_fleet/routing/{p.name}" for p in (render_dir / "_fleet" / "routing").glob("*.yaml"))
    index = json.loads(yaml.safe_load((render_dir / pointer["file"]).read_text())["data"][ARTIFACT_KEY])
    assert [m["configmaps"] for m in index["models"]] == [[f"gpufleet-routing-bench.model-{i:02d}"] for i in range(20)]
    on_disk = assemble_artifact([yaml.safe_load((render_dir / f).read_text()) for f in files], FLEET)
    assert on_disk is not None and len(on_disk["models"]) == 20
    assert sum(len(m["clusters"]) for m in on_disk["models"]) == 5000
    assert is_handle(result["artifact"]) and load(result["artifact"], C.DEFAULT_LOCAL_TMP) == on_disk
    assert read_routing_artifact(render_dir, FLEET) == on_disk  # what the next render reads (routing_held)
    assert result["artifact"]["chars"] > AWX_EVENT_LIMIT  # what the result used to carry twice
    assert len(files) == 21 and pointer["file"] in files  # the index and a ConfigMap per model
    assert summary["files"] == files and summary["files_count"] == 21
    assert result["written"] == files and result["written_count"] == 21
    # One line per model; every cluster's weight is in it, and the lines stay bounded.
    assert len(result["lines"]) == 20 and size(result["lines"]) <= 100_000
    assert result["lines"][0].startswith("model-00: cluster-0000=0 (draining) cluster-0001=1 p1 ")


def test_a_large_renderer_output_is_counted_not_listed(tmp_path):
    fleet, replicas = _fleet(1000, deployments=10, per=100)
    render_dir = tmp_path / "rendered"
    args = {
        "fleet": fleet,
        "replicas": replicas,
        "render_dir": str(render_dir),
        "renderer": "httproute",
        "gateway": {"name": "hub", "namespace": "gateway-system"},
    }
    result = _ok(run_action("fleet_routing", args, _hostvars(fleet)))
    files = sorted(f"_fleet/routing/{p.name}" for p in (render_dir / "_fleet" / "routing").glob("*.yaml"))
    assert (
        len(files) == 1 + 10 + 10 + 1000 == result["objects_count"] == result["written_count"]
    )  # the artifact's index and a ConfigMap per model, routes, Services
    assert size(result["written"]) <= 50_000 and len(result["written"]) < len(files) and result["truncated"] is True
    assert set(result["written"]) <= set(files)
    summary = result["routing"]
    assert summary["files_count"] == len(files) and len(summary["files"]) == 50 and summary["truncated"] is True
    assert size(summary) < 16_000
    # The objects handed off are the files written, object for object.
    objects = load(result["objects"], C.DEFAULT_LOCAL_TMP)
    assert len(objects) == result["objects"]["items"] == len(files)
    route = next(o for o in objects if o["kind"] == "HTTPRoute" and o["metadata"]["name"] == "model-03")
    assert yaml.safe_load((render_dir / "_fleet/routing/bench.httproute-model-03.yaml").read_text()) == route
    # The next run changes nothing, and says so.
    again = _ok(run_action("fleet_routing", args, _hostvars(fleet)))
    assert again["changed"] is False and again["written"] == [] and again["written_count"] == 0
    assert again["artifact"] == result["artifact"]  # the same artifact, the same file


def test_a_small_fleet_has_a_small_result_and_the_same_files(tmp_path):
    fleet, replicas = _fleet(5, deployments=2, per=3)
    fleet["deployments"][1]["external_endpoints"] = [{"name": "openai", "url": "https://api.example.com/v1"}]
    render_dir = tmp_path / "rendered"
    args = {
        "fleet": fleet,
        "replicas": replicas,
        "render_dir": str(render_dir),
        "renderer": "aigateway",
        "gateway": {"name": "hub"},
    }
    result = _ok(run_action("fleet_routing", args, _hostvars(fleet)))
    assert size(result) < 8_000 and result["truncated"] is False
    summary = result["routing"]
    assert summary["models"]["model-01"]["spillover"] == ["openai"]  # one replica short: the spillover is active
    assert summary["models"]["model-00"] == {
        "namespace": "bench",
        "desired": 3,
        "ready": 3,
        "weight": 3,
        "endpoints": 3,
        "clusters": 3,
        "tiers": [0, 1],
        "draining": 0,
        "leaving": 0,
        "unroutable": 0,
        "spillover": [],
        "short": False,
        "over": False,
    }
    on_disk = sorted(f"_fleet/routing/{p.name}" for p in (render_dir / "_fleet" / "routing").glob("*.yaml"))
    assert summary["files"] == on_disk == sorted(result["written"]) and summary["files_count"] == len(on_disk)
    artifact = load(result["artifact"], C.DEFAULT_LOCAL_TMP)
    assert read_routing_artifact(render_dir, FLEET) == artifact
    assert summary["artifact"]["file"] in on_disk


def test_leaving_replicas_that_still_serve_are_over(tmp_path):
    fleet, replicas = _fleet(4, deployments=1, per=2)
    args = {"fleet": fleet, "replicas": replicas, "leaving": [{"deployment": "model-00", "cluster": "cluster-0003"}]}
    args.update(mode="apply", held=["model-00"])
    summary = _ok(run_action("fleet_routing", args, _hostvars(fleet)))["routing"]
    assert summary["models"]["model-00"]["over"] is True and summary["totals"]["over"] == ["model-00"]
    assert summary["models"]["model-00"]["leaving"] == 1 and "file" not in summary["artifact"]


def test_pending_as_a_handle_routes_as_the_list_does(tmp_path):
    from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import handoff

    fleet, replicas = _fleet(3, deployments=1, per=3)
    pending = [{"deployment": "model-00", "cluster": "cluster-0001", "kind": "Deployment", "name": "x"}]
    base = {"fleet": fleet, "replicas": replicas, "mode": "apply"}
    inline = _ok(run_action("fleet_routing", {**base, "pending": pending}, _hostvars(fleet)))
    handed = _ok(
        run_action(
            "fleet_routing", {**base, "pending": handoff(pending, "pending", C.DEFAULT_LOCAL_TMP, 0)}, _hostvars(fleet)
        )
    )
    assert inline["routing"] == handed["routing"] and inline["routing"]["models"]["model-00"]["ready"] == 2
    assert load(inline["artifact"], C.DEFAULT_LOCAL_TMP) == load(handed["artifact"], C.DEFAULT_LOCAL_TMP)


def test_handed_off_filter_reads_a_handle_and_refuses_a_changed_file(tmp_path):
    from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import handoff

    value = {"clusters": [{"name": f"c{i}"} for i in range(50)]}
    handle = handoff(value, "fleet", C.DEFAULT_LOCAL_TMP, 10)
    assert is_handle(handle) and handed_off(handle, "fleet") == value
    assert handed_off(value) is value and handed_off(None) is None
    path = Path(handle["path"])
    original = path.read_text()
    try:
        path.write_text(original.replace("c1", "cX", 1))
        with pytest.raises(AnsibleFilterError, match=r"handed_off: fleet: .* changed since it was handed off"):
            handed_off(handle, "fleet")
    finally:
        path.write_text(original)
    with pytest.raises(AnsibleFilterError, match="is not one"):
        handed_off({**handle, "path": str(tmp_path / path.name)}, "fleet")


class FakeHub:
    """What sync_hub calls of a ClusterAPI; records every object applied."""

    applied: list[dict[str, Any]] = []

    def __init__(self, name: str, connection: Any, timeout: float) -> None:
        FakeHub.applied = []

    def list(self, api_version: str, kind: str, selector: Any = (), managed_by: Any = None) -> list[dict[str, Any]]:
        return []

    def ensure_namespace(self, name: str, dry_run: bool = False) -> bool:
        return False

    def apply(self, obj: dict[str, Any], field_manager: str, dry_run: bool = False) -> dict[str, Any]:
        FakeHub.applied.append(obj)
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(len(FakeHub.applied))}}

    def delete(self, obj: dict[str, Any]) -> None:
        raise AssertionError("nothing to delete")


def test_apply_mode_applies_every_object_to_the_hub_and_returns_counts(monkeypatch):
    from ansible_collections.gpufleet.serving.plugins.action import fleet_routing as action
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet import reconcile as fleet_k8s

    monkeypatch.setattr(fleet_k8s, "ClusterAPI", FakeHub)
    monkeypatch.setattr(action, "kube_connections", lambda hosts, hostvars: {h: {"kubeconfig": "x"} for h in hosts})
    fleet, replicas = _fleet(1000, deployments=10, per=100)
    task_vars = _hostvars(fleet)
    task_vars["hostvars"]["hub"] = {}
    args = {"fleet": fleet, "replicas": replicas, "mode": "apply", "hub": "hub", "renderer": "llmd"}
    args["publish_stats"] = False
    result = _ok(run_action("fleet_routing", args, task_vars))
    objects = load(result["objects"], C.DEFAULT_LOCAL_TMP)
    assert [o["metadata"]["name"] for o in FakeHub.applied] == [o["metadata"]["name"] for o in objects]
    hub = result["hub"]
    # the artifact (a ConfigMap per model, then the index) and each model's llm-d endpoints file
    assert hub["cluster"] == "hub" and hub["applied_count"] == hub["stored_count"] == len(objects) == 10 + 1 + 10
    assert FakeHub.applied[10]["metadata"]["name"] == "gpufleet-routing-bench"
    assert result["routing"]["artifact"]["hub"] == "hub" and "file" not in result["routing"]["artifact"]
    assert "ansible_stats" not in result and result["written"] == [] and result["changed"] is True
    # The hub's artifact ConfigMaps are the artifact handed off, whole.
    assert assemble_artifact(FakeHub.applied, FLEET) == load(result["artifact"], C.DEFAULT_LOCAL_TMP)
    assert size(result) < 60_000
