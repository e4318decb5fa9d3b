"""No task result over AWX's event limit at any fleet size (issue 26, "Scale"): the fleet and the replica records go
from task to task as handles to a file (module_utils/handoff.py), every list of paths is bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from action_case import run_action
from example_fleet import example_fleet

from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import HANDOFF_KEY, ROLE_OVER, is_handle
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import bounded_list, bounded_mapping, size

AWX_EVENT_LIMIT = 700_000
CLUSTERS = 1000
POOLS = [("l4", "l4-1x", 8), ("a10g", "a10g-1x", 8), ("h100", "h100-1x", 4), ("dgx", "h100-8x-ib", 2)]


def _deployment(name: str, replicas: int, gpus: int) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "bench",
        "replicas": replicas,
        "engines": [
            {
                "name": "main",
                "members": [
                    {
                        "role": "Standalone",
                        "node_selector": {"devices": [{"name": "gpu", "count": gpus}]},
                        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0"}]}},
                    }
                ],
            }
        ],
    }


@pytest.fixture(scope="module")
def large_fleet_vars() -> dict[str, Any]:
    """A fleet of CLUSTERS clusters (4 pools each) and 20 deployments of CLUSTERS/20 replicas: its normalised fleet
    is about 900,000 characters of JSON (as a registered result, over AWX's limit on its own)."""
    names = [f"cluster-{i:04d}" for i in range(CLUSTERS)]
    hosts = {
        n: {
            "gpufleet_provider": "existing",
            "gpufleet_node_pools": [{"name": p, "class": c, "node_count": k} for p, c, k in POOLS],
        }
        for n in names
    }
    deployments = [_deployment(f"model-{i:02d}", CLUSTERS // 20, 8 if i % 5 == 4 else 1) for i in range(20)]
    return {
        "groups": {"all": names, "gpufleet_clusters": names},
        "hostvars": hosts,
        "gpufleet_inference_classes": example_fleet()["classes"],
        "gpufleet_model_deployments": deployments,
        "gpufleet_model_caches": [],
        "gpufleet_fleet_name": "bench",
    }


def _ok(result: dict[str, Any]) -> dict[str, Any]:
    assert not result.get("failed"), result.get("msg")
    return result


def test_every_result_stays_under_the_awx_event_limit_on_a_large_fleet(large_fleet_vars, tmp_path):
    info = _ok(run_action("fleet_info", {"handoff_over": ROLE_OVER}, large_fleet_vars))
    assert size(info) < AWX_EVENT_LIMIT
    assert is_handle(info["fleet"]) and info["fleet"][HANDOFF_KEY] == "fleet"
    assert info["fleet"]["chars"] > ROLE_OVER  # what the result would have carried
    assert len(info["cluster_names"]) == CLUSTERS
    assert info["summary"][-1].startswith("... and ") and size(info["summary"]) <= 200_000

    render_dir = str(tmp_path / "rendered")
    placed = _ok(
        run_action(
            "fleet_placement",
            {"fleet": info["fleet"], "render_dir": render_dir, "handoff_over": ROLE_OVER, "publish_stats": True},
        )
    )
    assert size(placed) < AWX_EVENT_LIMIT
    assert is_handle(placed["replicas"]) and placed["replicas"]["items"] == CLUSTERS
    records = json.loads(Path(placed["replicas"]["path"]).read_text())
    assert len(records) == CLUSTERS and {r["deployment"] for r in records} == {f"model-{i:02d}" for i in range(20)}

    rendered = _ok(
        run_action(
            "fleet_manifests",
            {
                "fleet": info["fleet"],
                "replicas": placed["replicas"],
                "render_dir": render_dir,
                "render_token": placed["render_token"],
            },
        )
    )
    assert size(rendered) < AWX_EVENT_LIMIT
    on_disk = sorted(
        p.relative_to(render_dir).as_posix() for p in Path(render_dir).rglob("*.yaml") if not p.name.startswith(".")
    )
    assert rendered["written_count"] == len(on_disk) > len(rendered["written"]) > 0
    assert rendered["truncated"] is True
    assert set(rendered["written"]) <= set(on_disk)
    assert rendered["files_count"] == rendered["file_lines_count"] >= CLUSTERS  # a directory each, and _fleet
    assert len(rendered["files"]) < rendered["files_count"]
    assert size(rendered["file_lines"]) <= 50_000 and len(rendered["file_lines"]) <= rendered["file_lines_count"]

    # The next run finds every file current: nothing written, the counts still say so.
    again = _ok(
        run_action("fleet_placement", {"fleet": info["fleet"], "render_dir": render_dir, "handoff_over": ROLE_OVER})
    )
    same = _ok(
        run_action(
            "fleet_manifests",
            {
                "fleet": info["fleet"],
                "replicas": again["replicas"],
                "render_dir": render_dir,
                "render_token": again["render_token"],
            },
        )
    )
    assert same["changed"] is False and same["written_count"] == 0 and same["unchanged"] > 0
    assert again["replicas"]["sha256"] == placed["replicas"]["sha256"]  # sticky: the same records, the same file


def test_a_handle_renders_what_the_value_renders(example_task_vars, tmp_path):
    inline = _ok(run_action("fleet_info", {}, example_task_vars))
    handed = _ok(run_action("fleet_info", {"handoff_over": 0}, example_task_vars))
    assert not is_handle(inline["fleet"]) and is_handle(handed["fleet"])
    assert handed["cluster_names"] == [c["name"] for c in inline["fleet"]["clusters"]] == inline["cluster_names"]
    assert handed["summary"] == inline["summary"]
    a = _ok(run_action("fleet_placement", {"fleet": inline["fleet"]}))
    b = _ok(run_action("fleet_placement", {"fleet": handed["fleet"], "handoff_over": 0}))
    assert is_handle(b["replicas"]) and json.loads(Path(b["replicas"]["path"]).read_text()) == a["replicas"]
    one = _ok(
        run_action(
            "fleet_manifests", {"fleet": inline["fleet"], "replicas": a["replicas"], "render_dir": str(tmp_path)}
        )
    )
    other = _ok(
        run_action(
            "fleet_manifests", {"fleet": handed["fleet"], "replicas": b["replicas"], "render_dir": str(tmp_path / "b")}
        )
    )
    assert one["written_count"] == other["written_count"] == len(one["written"]) > 0
    assert one["truncated"] is False and one["file_lines"] == other["file_lines"]
    for rel in one["written"]:
        assert (tmp_path / rel).read_text() == (tmp_path / "b" / rel).read_text()


def test_a_changed_or_foreign_handle_is_refused(example_task_vars, tmp_path):
    handed = _ok(run_action("fleet_info", {"handoff_over": 0}, example_task_vars))
    handle = handed["fleet"]
    path = Path(handle["path"])
    original = path.read_text()
    try:
        path.write_text(original.replace('"name"', '"name" ', 1))
        changed = run_action("fleet_placement", {"fleet": handle})
        assert changed["failed"] is True
        assert "changed since it was handed off" in changed["msg"] and "fleet" in changed["msg"]
    finally:
        path.write_text(original)
    elsewhere = tmp_path / path.name
    elsewhere.write_text(original)
    foreign = run_action("fleet_placement", {"fleet": {**handle, "path": str(elsewhere)}})
    assert foreign["failed"] is True and "is not one" in foreign["msg"]
    assert _ok(run_action("fleet_placement", {"fleet": handle}))["replicas"]


def test_bounded_lists_keep_the_first_items_and_count_them_all():
    result: dict[str, Any] = {}
    paths = [f"cluster-{i:04d}/bench/deployment-model-{i % 20:02d}-main.yaml" for i in range(5000)]
    assert bounded_list(result, "written", paths, limit=10_000) is True
    assert result["written"] == paths[: len(result["written"])] and result["written_count"] == 5000
    assert size(result["written"]) <= 10_000
    assert bounded_list(result, "removed", ["a", "b"], limit=10_000) is False
    assert result["removed"] == ["a", "b"] and result["removed_count"] == 2
    assert bounded_list(result, "few", paths, first=3) is True and result["few"] == paths[:3]
    files = {f"cluster-{i:04d}": {"created": 3, "changed": 0, "removed": 0} for i in range(5000)}
    assert bounded_mapping(result, "files", files, limit=10_000) is True
    assert list(result["files"]) == list(files)[: len(result["files"])] and result["files_count"] == 5000
    assert size(result["files"]) <= 10_000
