"""fleet_apply's result over thousands of clusters stays under AWX's event limit (issue 26, "Scale"): each cluster's
lists are cut and counted, the clusters that failed or wait come first, the totals count every cluster."""

from __future__ import annotations

from action_case import run_action

from ansible_collections.gpufleet.serving.plugins.action.fleet_apply import (
    CLUSTER_ITEMS,
    CLUSTERS_LIMIT,
    bounded_clusters,
    bounded_rollout,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import ClusterOutcome
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.artifacts import size


def _outcome(i: int) -> ClusterOutcome:
    name = f"model-{i % 20:02d}-{i:04d}"
    applied = [f"{kind}/bench/{name}-main" for kind in ("Service", "Deployment", "ResourceClaimTemplate")]
    applied += [f"ConfigMap/bench/{name}-extra-{k}" for k in range(12)]  # more than CLUSTER_ITEMS
    return ClusterOutcome(applied=applied, unchanged=4, namespaces=["bench"], polls=2, requests=21)


def test_5000_clusters_give_a_bounded_result_with_the_failed_and_waiting_first():
    outcomes = {f"cluster-{i:04d}": _outcome(i) for i in range(5000)}
    outcomes["cluster-4999"] = ClusterOutcome(failed="apply Deployment/bench/x: 503: the server is shutting down")
    outcomes["cluster-4998"].pending = [{"kind": "Deployment", "namespace": "bench", "name": "x", "deployment": "m"}]
    unchanged = {f"cluster-{i:04d}": ClusterOutcome(unchanged=3, requests=6) for i in range(5000, 5100)}
    clusters, totals, truncated = bounded_clusters({**unchanged, **outcomes})
    assert size(clusters) <= CLUSTERS_LIMIT and truncated is True
    assert list(clusters) == sorted(clusters)  # shown in name order
    assert {"cluster-4999", "cluster-4998", "cluster-0000"} <= set(clusters)  # failed, waiting, then changed ones
    assert not set(unchanged) & set(clusters)  # nothing to say about the unchanged ones when space is short
    assert totals == {
        "clusters": 5100,
        "changed": 4999,
        "failed": 1,
        "applied": 4999 * 15,
        "deleted": 0,
        "namespaces": 4999,
        "pending": 1,
        "unchanged": 4999 * 4 + 300,
        "requests": 4999 * 21 + 600,
    }
    first = clusters["cluster-0000"]
    assert len(first["applied"]) == CLUSTER_ITEMS and first["applied_count"] == 15
    assert first["applied"] == _outcome(0).applied[:CLUSTER_ITEMS] and first["changed"] is True
    assert (
        clusters["cluster-4999"]["failed"].startswith("apply Deployment")
        and clusters["cluster-4998"]["pending_count"] == 1
    )


def test_a_few_clusters_are_listed_whole():
    outcomes = {"a": ClusterOutcome(applied=["Service/ml/chat"], namespaces=["ml"]), "b": ClusterOutcome(unchanged=2)}
    clusters, totals, truncated = bounded_clusters(outcomes)
    assert truncated is False and list(clusters) == ["a", "b"]
    assert clusters["a"] == {
        **outcomes["a"].to_dict(),
        "applied_count": 1,
        "namespaces_count": 1,
        "deleted_count": 0,
        "pending_count": 0,
    }
    assert totals["changed"] == 1 and totals["unchanged"] == 2


def test_rolling_updates_keep_their_line_and_count_their_waves():
    waves = [[f"cluster-{i:04d}/chat-{i:05d}"] for i in range(5000)]
    rollout = {
        "deployment": "chat",
        "max_unavailable": 1,
        "waves": waves,
        "updated": [w[0] for w in waves[:4000]],
        "pending": waves[4000:],
        "stopped": "replica chat-04000 on cluster-4000 did not become Ready",
        "line": "chat: rolling update stopped after 4000 of 5000 replica(s)",
    }
    small = {**rollout, "deployment": "tiny", "waves": [["c1/tiny-1"]], "updated": ["c1/tiny-1"], "pending": []}
    (big, few), truncated = bounded_rollout([rollout, small])
    assert truncated is True and size([big, few]) <= 160_000
    assert big["waves"] == waves[: len(big["waves"])] and big["waves_count"] == 5000
    assert big["updated_count"] == 4000 and big["pending_count"] == 1000 and 0 < len(big["pending"]) < 1000
    assert big["line"] == rollout["line"] and big["stopped"] == rollout["stopped"]
    assert few == {**small, "waves_count": 1, "updated_count": 1, "pending_count": 0}
    assert bounded_rollout([small])[1] is False


def test_manifest_dir_lists_of_a_large_fleet_directory_are_cut_and_counted(tmp_path):
    owner = {"app.kubernetes.io/managed-by": "gpufleet.serving", "gpufleet.io/component": "stack"}
    objects = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"gpufleet-stack-cluster-{i:04d}", "namespace": "flux-system", "labels": owner},
            "data": {"cluster": f"cluster-{i:04d}"},
        }
        for i in range(2000)
    ]
    args = {"path": str(tmp_path), "cluster": "_fleet", "objects": objects, "owner": owner}
    result = run_action("manifest_dir", args)
    assert not result.get("failed"), result.get("msg")
    on_disk = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "_fleet").rglob("*.yaml"))
    assert result["written_count"] == result["created_count"] == 2000 <= len(on_disk)
    assert size(result["written"]) <= 50_000 and set(result["written"]) < set(on_disk) and result["truncated"] is True
    assert result["files"]["_fleet"]["created"] == result["written_count"]
    again = run_action("manifest_dir", {**args, "objects": objects[:10]})
    assert again["removed_count"] == 1990 and len(again["removed"]) < 1990 and size(again["removed"]) <= 50_000
    assert again["written"] == [] and again["truncated"] is True


def test_a_fleet_the_controller_cannot_reach_at_all_gives_bounded_reasons_and_counts_every_cluster(tmp_path):
    """5,000 clusters whose kubeconfigs cannot be loaded: fleet_read and fleet_apply name the first reasons that fit
    and count them all; fleet_read's unreachable_clusters stays whole (the next tasks leave each one out)."""
    connections = {
        f"cluster-{i:04d}": {"kubeconfig": str(tmp_path / "gone" / f"kubeconfig-{i:04d}")} for i in range(5000)
    }
    read = run_action("fleet_read", {"connections": connections, "reads": []})
    assert len(read["unreachable_clusters"]) == 5000 and read["errors_count"] == 5000 and read["truncated"] is True
    assert 0 < len(read["errors"]) < 5000 and size(read["errors"]) <= 100_000
    assert list(read["errors"]) == sorted(connections)[: len(read["errors"])]  # the first in name order
    assert size(read) < 700_000

    applied = run_action(
        "fleet_apply",
        {"connections": connections, "objects_by_cluster": {}, "fleet_name": "bench", "fail_on_cluster_error": True},
    )
    assert applied["failed"] is True and applied["failed_clusters_count"] == 5000 and applied["truncated"] is True
    shown = applied["failed_clusters"]
    assert 0 < len(shown) < 5000 and size(shown) <= 100_000
    assert all("cannot build a client" in reason for reason in shown.values())
    assert applied["msg"].endswith(f"; and {5000 - len(shown)} more") and len(applied["errors"]) == len(shown)
    assert size(applied) < 700_000


def test_a_few_unreachable_clusters_are_listed_whole(tmp_path):
    connections = {name: {"kubeconfig": str(tmp_path / name)} for name in ("b", "a")}
    read = run_action("fleet_read", {"connections": connections, "reads": []})
    assert list(read["errors"]) == ["a", "b"] and read["errors_count"] == 2 and read["truncated"] is False
    applied = run_action("fleet_apply", {"connections": connections, "objects_by_cluster": {}, "fleet_name": "f"})
    assert set(applied["failed_clusters"]) == {"a", "b"} and applied["failed_clusters_count"] == 2
    assert "more" not in applied["msg"]


def test_a_configmap_the_api_server_would_refuse_fails_the_apply_before_any_cluster_is_touched(tmp_path):
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "weights", "namespace": "ml"}}
    big["data"] = {"blob": "x" * (1024 * 1024 + 1)}
    connections = {"a": {"kubeconfig": str(tmp_path / "never-read")}}
    result = run_action(
        "fleet_apply", {"connections": connections, "objects_by_cluster": {"a": [big]}, "fleet_name": "f"}
    )
    assert result["failed"] is True
    assert "ConfigMap/ml/weights holds 1,048,577 bytes of data" in result["msg"], result["msg"]
    assert "cannot build a client" not in result["msg"] and "x" * 100 not in result["msg"]
