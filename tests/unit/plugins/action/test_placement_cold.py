"""fleet_placement returns ``cold`` bounded, with ``cold_count`` (issue 30): on the example fleet every entry is
there and counted; the bound itself is tested in tests/unit/plugins/module_utils/plan/test_artifacts_cold.py."""

from __future__ import annotations

from action_case import run_action


def test_cold_is_returned_with_its_counts(example_task_vars):
    info = run_action("fleet_info", {}, example_task_vars)
    assert not info.get("failed"), info.get("msg")
    result = run_action("fleet_placement", {"fleet": info["fleet"]})
    assert not result.get("failed"), result.get("msg")
    cold = result["cold"]
    assert cold, "qwen-demo mounts a cache: its replicas are listed"
    count = result["cold_count"]
    assert count == {
        "cold": sum(1 for c in cold if c["cold"]),
        "warm": sum(1 for c in cold if not c["cold"]),
        "omitted": 0,
    }
    flags = [c["cold"] for c in cold]
    assert flags == sorted(flags, reverse=True)  # cold replicas first
    assert len(result["cold_lines"]) == count["cold"]
