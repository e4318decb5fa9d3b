"""gpufleet.serving.replica_placement: the module wrapper (options, results, failures, check mode, documentation)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from ansible.module_utils import _internal as module_utils_internal
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.serving.plugins.modules import replica_placement

MEM_16 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("16Gi")) >= 0'

CLASSES = {
    "l4-1x": {
        "devices": [
            {
                "name": "gpu",
                "driver": "gpu.nvidia.com",
                "device_class_name": "gpu.nvidia.com",
                "attributes": {"productName": {"string": "NVIDIA L4"}},
                "capacity": {"memory": {"value": "23034Mi"}},
            }
        ]
    }
}


def deployment(replicas: int = 2, selector: str = MEM_16, role: str = "Standalone") -> dict[str, Any]:
    return {
        "name": "qwen-demo",
        "namespace": "ml-team",
        "replicas": replicas,
        "engines": [
            {
                "name": "main",
                "members": [
                    {
                        "role": role,
                        "node_selector": {"devices": [{"name": "gpu", "selectors": [{"cel": selector}]}]},
                        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0"}]}},
                    }
                ],
            }
        ],
    }


CLUSTERS = [
    {"name": "gke-a", "pools": [{"name": "l4", "class": "l4-1x", "nodes": 1}], "provider": "gke"},
    {"name": "gke-b", "pools": [{"name": "l4", "class": "l4-1x", "nodes": 1}], "taints": [], "ready": True},
]


def run_module(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        replica_placement.main()
    return json.loads(capsys.readouterr().out)


def test_places_and_reports(capsys):
    out = run_module({"deployment": deployment(), "clusters": CLUSTERS, "classes": CLASSES}, capsys)
    assert out["changed"] is True
    assert "failed" not in out
    assert [(r["cluster"], r["index"]) for r in out["replicas"]] == [("gke-a", 0), ("gke-b", 0)]
    assert out["desired"] == out["scheduled"] == 2
    assert out["condition"]["reason"] == "ReplicasCreated"
    assert out["unschedulable"] == {
        "gke-a": {
            "code": "InsufficientCapacity",
            "reason": "insufficient capacity: no pool that matches engine main has 1 free node(s)",
            "pools": {"l4": "engine main needs 1 node(s), 0 of 1 free"},
        },
        "gke-b": {
            "code": "InsufficientCapacity",
            "reason": "insufficient capacity: no pool that matches engine main has 1 free node(s)",
            "pools": {"l4": "engine main needs 1 node(s), 0 of 1 free"},
        },
    }
    assert "warnings" not in out


def test_check_mode_returns_the_same_prediction(capsys):
    args = {"deployment": deployment(), "clusters": CLUSTERS, "classes": CLASSES}
    real = run_module(args, capsys)
    checked = run_module({**args, "_ansible_check_mode": True}, capsys)
    for key in ("replicas", "desired", "scheduled", "condition", "unschedulable", "changed", "dropped"):
        assert checked[key] == real[key]


def test_feeding_the_result_back_is_not_a_change(capsys):
    args = {"deployment": deployment(), "clusters": CLUSTERS, "classes": CLASSES}
    first = run_module(args, capsys)
    second = run_module({**args, "replicas": first["replicas"]}, capsys)
    assert second["changed"] is False
    assert second["replicas"] == first["replicas"]


def test_shortfall_is_not_a_failure(capsys):
    out = run_module({"deployment": deployment(replicas=3), "clusters": CLUSTERS, "classes": CLASSES}, capsys)
    assert "failed" not in out
    assert out["scheduled"] == 2
    assert out["condition"]["status"] == "False"
    assert out["condition"]["reason"] == "InsufficientCapacity"


def test_invalid_cel_is_a_condition_not_a_failure(capsys):
    out = run_module({"deployment": deployment(selector="device.("), "clusters": CLUSTERS, "classes": CLASSES}, capsys)
    assert "failed" not in out
    assert out["changed"] is False
    assert out["replicas"] == []
    assert out["condition"]["reason"] == "InvalidNodeSelector"
    assert "`device.(` does not compile" in out["condition"]["message"]


def test_no_clusters_condition(capsys):
    out = run_module({"deployment": deployment(), "clusters": [], "classes": CLASSES}, capsys)
    assert out["condition"]["reason"] == "NoClusters"
    assert out["condition"]["status"] == "False"


def test_malformed_deployment_fails_with_the_field_path(capsys):
    out = run_module({"deployment": deployment(role="Boss"), "clusters": CLUSTERS, "classes": CLASSES}, capsys)
    assert out["failed"] is True
    assert out["msg"].startswith("deployment.engines[0].members[0].role: must be one of Standalone, Leader, Worker")
    assert out["errors"][0]["path"] == "deployment.engines[0].members[0].role"


def test_unknown_pool_class_fails(capsys):
    clusters = [{"name": "x", "pools": [{"name": "p", "class": "nope", "nodes": 1}]}]
    out = run_module({"deployment": deployment(), "clusters": clusters, "classes": CLASSES}, capsys)
    assert out["failed"] is True
    assert out["msg"] == "clusters[0].pools[0].class: unknown inference class 'nope' (known: l4-1x)"


def test_required_options(capsys):
    out = run_module({"deployment": deployment()}, capsys)
    assert out["failed"] is True
    assert "missing required arguments: classes, clusters" in out["msg"]


def test_overcommit_is_warned(capsys, monkeypatch):
    # Other suites in the same process may import controller code, which makes warn() print instead of return.
    monkeypatch.setattr(module_utils_internal, "is_controller", False)
    first = run_module({"deployment": deployment(), "clusters": CLUSTERS, "classes": CLASSES}, capsys)
    shrunk = [{"name": "gke-a", "pools": [{"name": "l4", "class": "l4-1x", "nodes": 1}]}, CLUSTERS[1]]
    other = [dict(r, deployment="other") for r in first["replicas"] if r["cluster"] == "gke-a"]
    out = run_module(
        {"deployment": deployment(), "clusters": shrunk, "classes": CLASSES, "replicas": first["replicas"] + other},
        capsys,
    )
    assert out["overcommitted"] == [{"cluster": "gke-a", "pool": "l4", "nodes": 1, "used": 2}]
    assert "pool l4 of cluster gke-a is overcommitted: 2 node(s) in use of 1" in json.dumps(out["warnings"])


def test_missing_pydantic_is_reported(capsys, monkeypatch):
    monkeypatch.setattr(replica_placement, "HAS_PYDANTIC", False)
    out = run_module({"deployment": deployment(), "clusters": CLUSTERS, "classes": CLASSES}, capsys)
    assert out["failed"] is True
    assert "Failed to import the required Python library (pydantic)" in out["msg"]


def test_documentation_matches_the_argument_spec_and_every_return_has_a_sample():
    doc = yaml.safe_load(replica_placement.DOCUMENTATION)
    assert doc["module"] == "replica_placement"
    options = doc["options"]
    assert set(options) == set(replica_placement.ARGUMENT_SPEC)
    for name, spec in replica_placement.ARGUMENT_SPEC.items():
        assert options[name]["type"] == spec["type"]
        assert options[name].get("required", False) == spec.get("required", False)
        assert options[name].get("elements") == spec.get("elements")
        assert options[name].get("default") == spec.get("default")
    assert doc["attributes"]["check_mode"]["support"] == "full"
    assert doc["attributes"]["diff_mode"]["support"] == "none"
    returns = yaml.safe_load(replica_placement.RETURN)
    assert {"replicas", "desired", "scheduled", "condition", "unschedulable", "changed"} <= set(returns)

    def walk(entries: dict[str, Any], path: str) -> None:
        for key, entry in entries.items():
            assert "sample" in entry or "contains" in entry, f"{path}{key} has no sample"
            assert entry.get("description"), f"{path}{key} has no description"
            if "contains" in entry:
                walk(entry["contains"], f"{path}{key}.")
                if key != "condition":
                    assert "sample" in entry

    walk(returns, "")
    assert yaml.safe_load(replica_placement.EXAMPLES)
