"""Placement artifacts that stay small at thousands of clusters (issue 26, "Scale"): the gpufleet_placement summary,
fleet_placement's results and explain lines, and a render check that grows with clusters + records."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import (
    FleetPlacement,
    explain_lines,
    fleet_manifests,
    place_fleet,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.plan import records as records_module
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import (
    EXPLAIN_LIMIT,
    RESULTS_LIMIT,
    SUMMARY_LIMIT,
    bounded_results,
    clusters_of,
    group_unschedulable,
    placement_summary,
    size,
)

HOPPER = 'selector `device.attributes["gpu.nvidia.com"].architecture == "Hopper"` is false for device gpu (NVIDIA L4)'


def _no_hopper(pools: int = 4) -> dict:
    return {
        "code": "NoMatchingPool",
        "reason": "no pool can host engine main",
        "pools": {f"pool-{p}": f"engine main member Standalone request gpu: {HOPPER}" for p in range(pools)},
    }


def _full(free_of: int) -> dict:
    return {
        "code": "InsufficientCapacity",
        "reason": "insufficient capacity: no pool that matches engine main has 1 free node(s)",
        "pools": {"dgx": f"engine main needs 1 node(s), 0 of {free_of} free", "l4": f"engine main member: {HOPPER}"},
    }


def outcome_at(clusters: int, deployments: int = 20, *, distinct: bool = False) -> FleetPlacement:
    """A fleet.deploy outcome shaped like the 5,000-cluster benchmark's: ``clusters // 20`` replicas a deployment,
    one a cluster; every third cluster has no Hopper pool, so the Hopper deployments (every other one) are Ready with
    diagnostics for a third of the fleet; the last two deployments place nothing and are explained on every cluster.
    ``distinct``: every cluster's diagnosis differs (nothing groups), the worst case for the bounds."""
    names = [f"cluster-{i:04d}" for i in range(clusters)]
    replicas = clusters // 20
    outcome = FleetPlacement()
    for d in range(deployments):
        name = f"model-{d:02d}"
        short = d >= deployments - 2
        placed = [] if short else [names[(d * 7 + k * 20) % clusters] for k in range(replicas)]
        unschedulable: dict = {}
        for i, cluster in enumerate(names):
            if short:
                unschedulable[cluster] = _full(i if distinct else 2) if i % 3 else _no_hopper()
            elif d % 2 and i % 3 == 0:
                unschedulable[cluster] = _full(i) if distinct else _no_hopper()
        outcome.results[name] = {
            "replicas": [
                {"deployment": name, "cluster": c, "index": 0, "name": f"{name}-{k}", "engines": []}
                for k, c in enumerate(placed)
            ],
            "desired": replicas,
            "scheduled": len(placed),
            "condition": {
                "type": "ReplicasScheduled",
                "status": "False" if short else "True",
                "reason": "InsufficientCapacity" if short else "ReplicasCreated",
                "message": f"{len(placed)} of {replicas} replica(s) scheduled",
            },
            "unschedulable": unschedulable,
            "changed": True,
            "dropped": [],
            "overcommitted": [],
            "warnings": [],
        }
        outcome.replicas.extend(outcome.results[name]["replicas"])
    return outcome


# --------------------------------------------------------------------------------------------------------------------
# The gpufleet_placement summary
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("distinct", [False, True], ids=["realistic", "every-diagnosis-distinct"])
def test_the_summary_of_a_5000_cluster_fleet_stays_under_64_kb(distinct):
    outcome = outcome_at(5000, distinct=distinct)
    before = size({"results": {n: {k: v for k, v in r.items() if k != "replicas"} for n, r in outcome.results.items()}})
    assert before > 4_000_000  # what the custom stat carried before: the diagnostics alone
    summary = placement_summary(outcome, explain=["model-01"])
    assert size(summary) <= SUMMARY_LIMIT
    assert len(json.dumps(summary).encode()) <= SUMMARY_LIMIT  # bytes as AWX stores it, not only characters
    assert "replicas" not in summary
    results = summary["results"]
    assert set(results) == set(outcome.results)
    # Explain lines only for the deployments short of replicas and the one asked about.
    assert {n for n, r in results.items() if "explain" in r} == {"model-01", "model-18", "model-19"}
    assert summary["explained"] == ["model-01", "model-18", "model-19"]
    assert results["model-18"]["explain"][0].startswith("model-18: 0/250 scheduled")
    assert results["model-18"]["status"] == "Degraded" and results["model-18"]["condition"]["reason"] == (
        "InsufficientCapacity"
    )
    assert results["model-01"]["status"] == "Ready"
    # Placed/desired and the clusters with their counts (cut to fit: cluster_count is the whole).
    ready = results["model-00"]
    assert (ready["scheduled"], ready["desired"], ready["cluster_count"]) == (250, 250, 250)
    assert ready["clusters"] and all(n == 1 for n in ready["clusters"].values())
    assert summary["truncated"] is True
    assert summary["shortfalls"] == summary["degraded"] == ["model-18", "model-19"]


def test_the_summary_of_a_small_fleet_is_whole():
    outcome = outcome_at(100)
    summary = placement_summary(outcome)
    assert summary["truncated"] is False
    for name, res in outcome.results.items():
        counts: dict[str, int] = {}
        for r in res["replicas"]:
            counts[r["cluster"]] = counts.get(r["cluster"], 0) + 1
        assert summary["results"][name]["clusters"] == counts
        assert summary["results"][name]["cluster_count"] == len(counts)
    # Explained on 100 clusters: grouped by diagnosis, the short deployments' explanations are whole.
    assert all(not line.startswith("...") for line in summary["results"]["model-19"]["explain"])
    assert "explain" not in summary["results"]["model-01"]  # Ready and not asked about


def test_the_summary_cuts_fleet_wide_lists_and_counts_them():
    outcome = outcome_at(5000)
    dropped = [
        {"deployment": "model-00", "cluster": f"cluster-{i:04d}", "index": 0, "name": f"x-{i}", "reason": "drained"}
        for i in range(3000)
    ]
    loss = [{"deployment": "model-00", "lost": [f"x-{i}" for i in range(3000)], "why": "drained", "blocking": True}]
    summary = placement_summary(outcome, dropped=dropped, capacity_loss=loss, blocked=["model-00"])
    assert size(summary) <= SUMMARY_LIMIT
    assert summary["dropped_count"] == 3000 and 0 < len(summary["dropped"]) < 3000
    assert summary["capacity_loss"][0]["lost_count"] == 3000
    assert summary["blocked"] == ["model-00"]


# --------------------------------------------------------------------------------------------------------------------
# fleet_placement's results and explain lines
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("distinct", [False, True], ids=["realistic", "every-diagnosis-distinct"])
def test_results_trim_ready_deployments_and_stay_bounded(distinct):
    outcome = outcome_at(5000, distinct=distinct)
    results = bounded_results(outcome.results, outcome.statuses(), explain=["model-01"])
    assert size(results) <= RESULTS_LIMIT
    assert all("replicas" not in r for r in results.values())
    # A Ready deployment not asked about: no diagnostics, their count kept.
    assert results["model-03"]["unschedulable"] == {}
    assert results["model-03"]["unschedulable_omitted"] == len(outcome.results["model-03"]["unschedulable"])
    assert results["model-00"]["unschedulable"] == {} and "unschedulable_omitted" not in results["model-00"]
    # Short and asked-about deployments keep theirs, grouped: every cluster is accounted for.
    for name in ("model-01", "model-18", "model-19"):
        table = results[name]["unschedulable"]
        assert table
        total = sum(clusters_of(e) for e in table.values()) + results[name].get("unschedulable_omitted", 0)
        assert total == len(outcome.results[name]["unschedulable"])
    assert size(outcome.explain(["model-01"])) <= EXPLAIN_LIMIT


def test_results_of_a_small_fleet_keep_every_diagnosis_of_what_is_short():
    outcome = outcome_at(40)
    results = bounded_results(outcome.results, outcome.statuses())
    assert results["model-19"]["unschedulable"] == outcome.results["model-19"]["unschedulable"]
    assert results["model-01"]["unschedulable"] == {}  # Ready


def test_explain_groups_the_same_diagnosis_of_many_clusters():
    outcome = outcome_at(5000)
    lines = outcome.explain()
    assert lines[0].startswith("model-18: 0/250 scheduled")
    assert any(
        line.startswith("  cluster-0000 (and 1666 more: cluster-0003, cluster-0006, cluster-0009, cluster-0012,")
        for line in lines
    )
    assert any(line.startswith("  cluster-0001 (and 3332 more: cluster-0002, cluster-0004,") for line in lines)
    assert not any(line.startswith("model-01:") for line in lines)  # Ready, not asked about
    assert outcome.explain(["model-01"])[0].startswith("model-01: 250/250 scheduled")


def test_explain_lines_of_a_small_table_are_as_before():
    table = {"b": _full(2), "a": _no_hopper(1)}
    assert group_unschedulable(table) == (table, 0)
    assert explain_lines(table) == [
        "a: no pool can host engine main",
        f"  a/pool-0: engine main member Standalone request gpu: {HOPPER}",
        "b: insufficient capacity: no pool that matches engine main has 1 free node(s)",
        "  b/dgx: engine main needs 1 node(s), 0 of 2 free",
        f"  b/l4: engine main member: {HOPPER}",
    ]


def test_group_unschedulable_keeps_the_largest_groups_and_counts_the_rest():
    table = {f"c{i:03d}": _full(i % 3) for i in range(90)}  # three diagnoses, 30 clusters each
    table["c999"] = _no_hopper()
    grouped, omitted = group_unschedulable(table)
    assert list(grouped) == ["c000", "c001", "c002", "c999"] and omitted == 0
    assert grouped["c000"]["same_count"] == 29 and grouped["c000"]["same"][:2] == ["c003", "c006"]
    assert "same" not in grouped["c999"]
    grouped, omitted = group_unschedulable(table, max_groups=2, max_names=3)
    assert list(grouped) == ["c000", "c001"] and omitted == 31
    assert grouped["c000"]["same"] == ["c003", "c006", "c009"] and grouped["c000"]["same_count"] == 29


# --------------------------------------------------------------------------------------------------------------------
# The render check is linear in clusters
# --------------------------------------------------------------------------------------------------------------------

GPU = {
    "name": "gpu",
    "claim": "DRA",
    "driver": "gpu.nvidia.com",
    "device_class_name": "gpu.nvidia.com",
    "count": 1,
    "attributes": {"productName": {"string": "NVIDIA L4"}},
    "capacity": {"memory": {"value": "23034Mi"}},
}


def _fleet(clusters: int, replicas: int) -> dict:
    hosts = {
        f"c-{i:03d}": {
            "gpufleet_provider": "existing",
            "gpufleet_node_pools": [{"name": "l4", "class": "l4-1x", "node_count": 4}],
        }
        for i in range(clusters)
    }
    deployment = {
        "name": "chat",
        "namespace": "ml",
        "replicas": replicas,
        "engines": [
            {
                "name": "main",
                "members": [
                    {
                        "role": "Standalone",
                        "node_selector": {"devices": [{"name": "gpu", "count": 1}]},
                        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0"}]}},
                    }
                ],
            }
        ],
    }
    return validate_fleet(
        classes={"l4-1x": {"devices": [GPU]}},
        hosts=hosts,
        deployments=[deployment],
        caches=[],
        resolve_pattern=lambda _pattern: sorted(hosts),
    ).to_dict()


def test_the_render_checks_each_record_once_whatever_the_number_of_clusters(monkeypatch):
    calls = {"n": 0}
    original = records_module.ReplicaRecord.check_against

    def counting(self, dep, at):
        calls["n"] += 1
        return original(self, dep, at)

    monkeypatch.setattr(records_module.ReplicaRecord, "check_against", counting)
    seen = {}
    for clusters in (10, 40):
        fleet = _fleet(clusters, 2 * clusters)  # two replicas a cluster
        placed = place_fleet(fleet, []).replicas
        assert len({r["cluster"] for r in placed}) == clusters
        calls["n"] = 0
        objects = fleet_manifests(fleet, placed)
        assert all(objects[c] for c in objects)
        seen[clusters] = calls["n"]
    # Once per record: 20 and 80 (it was records x clusters holding them: 200 and 3,200).
    assert seen == {10: 20, 40: 80}
