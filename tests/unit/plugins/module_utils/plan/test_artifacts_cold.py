"""fleet_placement's ``cold`` and ``cold_lines`` stay bounded at any fleet size (issue 30): the cold replicas first,
counted, and the plan keeps every entry."""

from __future__ import annotations

import json

from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import (
    COLD_LIMIT,
    bounded_cold,
    bounded_lines,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.warm_first import cold_lines


def start(i: int, cold: bool) -> dict:
    return {
        "deployment": f"model-{i % 7}",
        "cluster": f"cluster-{i:05d}",
        "index": i % 3,
        "cache": "qwen",
        "cold": cold,
        "basis": "hydrated",
        "eta_seconds": 410 if cold else 0,
        "throughput": 52428800 if cold else None,
        "throughput_source": "declared" if cold else None,
    }


def test_a_small_placement_is_returned_whole_with_its_counts():
    starts = [start(0, False), start(1, True), start(2, False)]
    kept, count = bounded_cold(starts)
    assert kept == [starts[1], starts[0], starts[2]]  # cold first, then warm, each in placement order
    assert count == {"cold": 1, "warm": 2, "omitted": 0}


def test_ten_thousand_replicas_stay_under_the_limit_cold_ones_first_and_the_rest_counted():
    starts = [start(i, i % 4 == 0) for i in range(10_000)]
    assert len(json.dumps(starts)) > 10 * COLD_LIMIT
    kept, count = bounded_cold(starts)
    assert len(json.dumps(kept)) <= COLD_LIMIT
    assert kept and all(s["cold"] for s in kept)  # the warm ones went first
    assert kept == [s for s in starts if s["cold"]][: len(kept)]
    assert count == {"cold": 2500, "warm": 7500, "omitted": 10_000 - len(kept)}


def test_cold_lines_are_bounded_and_the_last_line_counts_the_others():
    starts = [start(i, True) for i in range(10_000)]
    lines = cold_lines(starts, [{"name": "qwen", "size": "20Gi"}])
    out = bounded_lines(lines, "cold replicas")
    assert len(json.dumps(out)) <= COLD_LIMIT
    assert out[:-1] == lines[: len(out) - 1]
    assert out[-1] == f"... and {10_000 - (len(out) - 1)} more cold replicas (the plan file lists every one)"
    assert bounded_lines(lines[:3], "cold replicas") == lines[:3]
