"""Fleet-wide deploy orchestration: shared capacity, stickiness from read-back, unreachable/drained clusters."""

from __future__ import annotations

import json

import pytest
from example_fleet import example_fleet

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import (
    PLACEMENT_ANNOTATION,
    explain_lines,
    fleet_manifests,
    observe,
    observed_replicas,
    place_fleet,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet

PATTERNS = {"gpufleet_clusters": None, "gpufleet_clusters:&prod": ["eks-us-east-1", "gke-us-central1", "onprem-a"]}


def fleet_dict(data=None) -> dict:
    data = data or example_fleet()

    def resolve(pattern: str) -> list[str]:
        if pattern == "gpufleet_clusters:&onprem":
            return ["onprem-a"]
        return PATTERNS.get(pattern) or sorted(data["hosts"])

    return validate_fleet(
        classes=data["classes"],
        hosts=data["hosts"],
        deployments=data["deployments"],
        caches=data["caches"],
        resolve_pattern=resolve,
    ).to_dict()


def services(objects_by_cluster: dict) -> list[dict]:
    return [o for objs in objects_by_cluster.values() for o in objs if o["kind"] == "Service"]


def test_example_fleet_is_fully_placed_and_spread():
    outcome = place_fleet(fleet_dict(), [])
    assert outcome.shortfalls() == []
    by_dep = outcome.by_deployment()
    assert len({r["cluster"] for r in by_dep["qwen-demo"]}) == 3
    assert [r["cluster"] for r in by_dep["deepseek-v3"]] == ["onprem-a"]
    assert outcome.changed
    assert outcome.table()[0].split()[:3] == ["DEPLOYMENT", "DESIRED", "SCHEDULED"]


def test_read_back_from_rendered_services_is_sticky_and_unchanged():
    fleet = fleet_dict()
    first = place_fleet(fleet, [])
    rendered = fleet_manifests(fleet, first.replicas)
    observed = observed_replicas(services(rendered))
    assert {(r["deployment"], r["cluster"], r["index"]) for r in observed} == {
        (r["deployment"], r["cluster"], r["index"]) for r in first.replicas
    }
    second = place_fleet(fleet, observed)
    assert not second.changed
    assert sorted(r["name"] for r in second.replicas) == sorted(r["name"] for r in first.replicas)


def test_deployments_share_capacity_in_list_order():
    data = example_fleet()
    # Two 8-GPU deployments competing for the on-prem DGX pool (4 nodes) only.
    big = data["deployments"][1]
    big["clusters"] = "gpufleet_clusters:&onprem"
    big["replicas"] = 3
    data["deployments"][2]["replicas"] = 2  # deepseek gang: 2 nodes per replica
    outcome = place_fleet(fleet_dict(data), [])
    assert outcome.results["llama-70b"]["scheduled"] == 3
    # 4 nodes - 3 used = 1 node left: not enough for a 2-node gang.
    assert outcome.results["deepseek-v3"]["scheduled"] == 0
    assert outcome.shortfalls() == ["deepseek-v3"]
    assert any("deepseek-v3" in line for line in outcome.explain())


def test_unreachable_cluster_keeps_its_replicas_and_takes_no_new_ones():
    fleet = fleet_dict()
    first = place_fleet(fleet, [])
    victim = next(r["cluster"] for r in first.by_deployment()["qwen-demo"])
    # The cluster cannot be read: its replicas come from the last run's record only.
    observed = [r for r in first.replicas if r["cluster"] != victim] + [
        r for r in first.replicas if r["cluster"] == victim
    ]
    second = place_fleet(fleet, observed, unreachable=[victim])
    assert not second.changed
    assert [r["name"] for r in second.by_cluster()[victim]] == [r["name"] for r in first.by_cluster()[victim]]
    # Scaling up never lands on the unreachable cluster.
    data = example_fleet()
    data["deployments"][0]["replicas"] = 6
    third = place_fleet(fleet_dict(data), first.replicas, unreachable=[victim])
    new = {r["name"] for r in third.replicas} - {r["name"] for r in first.replicas}
    assert new and all(r["cluster"] != victim for r in third.replicas if r["name"] in new)


def test_drained_cluster_loses_its_replicas():
    fleet = fleet_dict()
    first = place_fleet(fleet, [])
    drained = first.by_deployment()["qwen-demo"][0]["cluster"]
    second = place_fleet(fleet, first.replicas, drained=[drained])
    assert drained not in {r["cluster"] for r in second.by_deployment()["qwen-demo"]}
    assert second.results["qwen-demo"]["scheduled"] == 3


def test_cordoned_cluster_keeps_replicas_but_takes_no_new_ones():
    fleet = fleet_dict()
    first = place_fleet(fleet, [])
    cordoned = first.by_deployment()["qwen-demo"][0]["cluster"]
    second = place_fleet(fleet, first.replicas, cordoned=[cordoned])
    assert not second.changed
    data = example_fleet()
    data["deployments"][0]["replicas"] = 6
    third = place_fleet(fleet_dict(data), first.replicas, cordoned=[cordoned])
    on_cordoned = [r for r in third.by_deployment()["qwen-demo"] if r["cluster"] == cordoned]
    assert len(on_cordoned) == 1


def test_replicas_of_removed_deployments_are_dropped():
    fleet = fleet_dict()
    first = place_fleet(fleet, [])
    data = example_fleet()
    del data["deployments"][2]
    second = place_fleet(fleet_dict(data), first.replicas)
    assert "deepseek-v3" not in {r["deployment"] for r in second.replicas}


def test_fleet_manifests_has_every_cluster_and_only_placed_objects():
    fleet = fleet_dict()
    outcome = place_fleet(fleet, [])
    objects = fleet_manifests(fleet, outcome.replicas)
    assert sorted(objects) == ["eks-us-east-1", "gke-europe-west4", "gke-us-central1", "onprem-a"]
    for cluster, objs in objects.items():
        assert all(o["metadata"]["labels"]["gpufleet.io/cluster"] == cluster for o in objs)
    kinds = {o["kind"] for o in objects["onprem-a"]}
    assert "LeaderWorkerSet" in kinds


def test_unreadable_annotation_is_an_error_for_the_strict_reader():
    bad = {"metadata": {"name": "svc", "annotations": {PLACEMENT_ANNOTATION: "{not json"}}}
    with pytest.raises(GpufleetError, match="unreadable"):
        observed_replicas([bad])


def test_duplicates_are_read_once():
    engines = [{"name": "main", "copies": 1, "members": [{"role": "Standalone", "pool": "l4", "nodes": 1}]}]
    record = {"deployment": "d", "cluster": "c", "index": 0, "name": "d-1", "namespace": "ns", "engines": engines}
    svc = {"metadata": {"name": "a", "annotations": {PLACEMENT_ANNOTATION: json.dumps(record)}}}
    assert observed_replicas([svc, svc, {"metadata": {"name": "plain"}}]) == [record]


@pytest.mark.parametrize(
    ("annotation", "reason"),
    [
        ("{not json", "Expecting property name"),
        (json.dumps({"deployment": "d", "cluster": "c", "index": 0}), "record.engines: is required"),
        (
            json.dumps({"deployment": "d", "cluster": "c", "index": "0", "engines": []}),
            "record.index: must be an integer",
        ),
    ],
)
def test_an_unreadable_record_names_the_cluster_and_the_object(annotation, reason):
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "svc-a",
            "namespace": "chat-team",
            "labels": {"gpufleet.io/deployment": "chat"},
            "annotations": {PLACEMENT_ANNOTATION: annotation},
        },
    }
    seen = observe([("lf-beta", svc, None)])
    (skipped,) = seen.skipped
    assert skipped.reason.startswith("Service lf-beta/chat-team/svc-a carries an unreadable gpufleet.io/placement")
    assert reason in skipped.reason
    assert (skipped.cluster, skipped.namespace, skipped.name, skipped.deployment) == (
        "lf-beta",
        "chat-team",
        "svc-a",
        "chat",
    )
    with pytest.raises(GpufleetError, match=r"Service \?/chat-team/svc-a carries an unreadable"):
        observed_replicas([svc])


def replica_service(record, cluster="c", name="svc", deployment="d", annotation=None):
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {"gpufleet.io/deployment": deployment, "gpufleet.io/cluster": cluster},
            "annotations": {PLACEMENT_ANNOTATION: annotation if annotation is not None else json.dumps(record)},
        },
    }


def test_an_unreadable_annotation_skips_only_that_object():
    engines = [{"name": "main", "copies": 1, "members": [{"role": "Standalone", "pool": "l4", "nodes": 1}]}]
    good = [
        {"deployment": d, "cluster": c, "index": 0, "name": f"{d}-{c}", "namespace": "ns", "engines": engines}
        for d, c in (("a", "x"), ("b", "y"))
    ]
    objects = [
        ("x", replica_service(good[0], "x", "a-x", "a"), None),
        ("y", replica_service(None, "y", "b-bad", "b", annotation="{not json"), "y/ns/service-b-bad.yaml"),
        ("y", replica_service(good[1], "y", "b-y", "b"), None),
        ("z", replica_service(None, "z", "stray", "", annotation="[]"), None),
    ]
    seen = observe(objects)
    assert seen.replicas() == good  # every readable record, in order
    assert [(s.cluster, s.name, s.deployment, s.path) for s in seen.skipped] == [
        ("y", "b-bad", "b", "y/ns/service-b-bad.yaml"),
        ("z", "stray", None, None),
    ]
    assert seen.held() == ["b"]  # nothing of b may be pruned; the stray names no deployment: it is kept itself
    lines = [s.line() for s in seen.skipped]
    assert lines[0].startswith("Service y/ns/b-bad carries an unreadable gpufleet.io/placement annotation: ")
    assert lines[0].endswith("(skipped; nothing of deployment b is pruned this run)")
    assert lines[1].endswith("(skipped; it names no deployment, so it is kept)")
    assert seen.skipped[0].to_dict() == {
        "cluster": "y",
        "kind": "Service",
        "api_version": "v1",
        "namespace": "ns",
        "name": "b-bad",
        "deployment": "b",
        "reason": seen.skipped[0].reason,
        "path": "y/ns/service-b-bad.yaml",
    }


def test_explain_lines_flatten_clusters_and_pools():
    lines = explain_lines(
        {"b": {"code": "NotReady", "reason": "cluster is not ready"}, "a": {"reason": "no pool", "pools": {"l4": "x"}}}
    )
    assert lines == ["a: no pool", "  a/l4: x", "b: cluster is not ready"]


def test_a_short_deployment_is_degraded_in_the_status_and_the_table():
    data = example_fleet()
    data["deployments"][0]["replicas"] = 500
    fleet = validate_fleet(
        classes=data["classes"], hosts=data["hosts"], deployments=data["deployments"], caches=data["caches"]
    ).to_dict()
    outcome = place_fleet(fleet, [])
    name = data["deployments"][0]["name"]
    assert outcome.statuses()[name] == "Degraded"
    assert [k for k, v in outcome.statuses().items() if v == "Degraded"] == outcome.shortfalls()
    assert place_fleet(
        validate_fleet(
            classes=data["classes"],
            hosts=data["hosts"],
            deployments=example_fleet()["deployments"],
            caches=data["caches"],
        ).to_dict(),
        [],
    ).statuses() == {d["name"]: "Ready" for d in example_fleet()["deployments"]}
    assert outcome.table()[0].split()[:5] == ["DEPLOYMENT", "DESIRED", "SCHEDULED", "STATUS", "CONDITION"]
    assert next(line for line in outcome.table() if line.startswith(name)).split()[3] == "Degraded"


def test_fail_on_unschedulable_stops_the_role_before_anything_is_written_or_applied():
    from pathlib import Path

    import yaml

    role = Path(__file__).resolve().parents[5] / "roles/model_deployment/tasks"
    guards = yaml.safe_load((role / "guards.yml").read_text())
    (stop,) = [t for t in guards if "short of replicas" in t["name"]]
    assert "model_deployment_fail_on_unschedulable | bool" in stop["when"]
    # deploy (main.yml) and plan.yml run the guards after placing, before anything is written, applied or planned.
    for entry, first_write in (
        ("main.yml", "Render every cluster's serving workloads"),
        ("plan.yml", "Report the placement"),
    ):
        tasks = yaml.safe_load((role / entry).read_text())
        names = [t["name"] for t in tasks]
        guard = next(i for i, t in enumerate(tasks) if t.get("ansible.builtin.import_tasks") == "guards.yml")
        place = next(i for i, t in enumerate(tasks) if t.get("ansible.builtin.import_tasks") == "place.yml")
        assert place < guard < names.index(first_write)
        if entry == "main.yml":
            assert guard < names.index("Apply every cluster's serving workloads")


def test_the_table_names_the_first_available_alternative_each_pool_chose():
    gpu = {"driver": "gpu.nvidia.com", "device_class_name": "gpu.nvidia.com"}
    classes = {
        "h100": {"devices": [{"name": "gpu", **gpu, "attributes": {"productName": {"string": "NVIDIA H100"}}}]},
        "a100x2": {"devices": [{"name": "gpu", **gpu, "count": 2, "attributes": {"productName": {"string": "A100"}}}]},
    }
    product = 'device.attributes["gpu.nvidia.com"].productName == "{}"'
    hosts = {
        name: {"gpufleet_provider": "existing", "gpufleet_node_pools": [{"name": name, "class": name, "node_count": 1}]}
        for name in ("h100", "a100x2")
    }
    deployment = {
        "name": "llm",
        "replicas": 2,
        "engines": [
            {
                "name": "main",
                "members": [
                    {
                        "role": "Standalone",
                        "node_selector": {
                            "devices": [
                                {
                                    "name": "accel",
                                    "first_available": [
                                        {"name": "h100", "selectors": [{"cel": product.format("NVIDIA H100")}]},
                                        {"name": "a100", "count": 2, "selectors": [{"cel": product.format("A100")}]},
                                    ],
                                }
                            ]
                        },
                        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm"}]}},
                    }
                ],
            }
        ],
    }
    fleet = validate_fleet(classes=classes, hosts=hosts, deployments=[deployment], caches=[]).to_dict()
    outcome = place_fleet(fleet, [])
    row = next(line for line in outcome.table() if line.startswith("llm"))
    assert row.endswith("a100x2: 1x a100x2 [accel=a100]; h100: 1x h100 [accel=h100]")
    # The rendered claim carries both alternatives, each with the device class resolved on its pool.
    claims = [
        o
        for objs in fleet_manifests(fleet, outcome.replicas).values()
        for o in objs
        if o["kind"] == "ResourceClaimTemplate"
    ]
    assert len(claims) == 2
    for claim in claims:
        (request,) = claim["spec"]["spec"]["devices"]["requests"]
        assert [(a["name"], a["deviceClassName"], a["count"]) for a in request["firstAvailable"]] == [
            ("h100", "gpu.nvidia.com", 1),
            ("a100", "gpu.nvidia.com", 2),
        ]


def test_a_higher_priority_deployment_takes_contended_capacity_first():
    """Issue 31: ``priority`` decides who gets a contended pool; list order only breaks ties."""
    data = example_fleet()
    big = data["deployments"][1]
    big["clusters"] = "gpufleet_clusters:&onprem"
    big["replicas"] = 3
    data["deployments"][2]["replicas"] = 2  # deepseek gang: 2 nodes per replica, listed after llama
    # Same priority: list order, as before (llama takes 3 of the 4 DGX nodes, deepseek none).
    assert place_fleet(fleet_dict(data), []).results["deepseek-v3"]["scheduled"] == 0
    data["deployments"][2]["priority"] = 10
    outcome = place_fleet(fleet_dict(data), [])
    # deepseek is placed first: both its gangs (4 nodes), llama is left with nothing on the DGX pool.
    assert outcome.results["deepseek-v3"]["scheduled"] == 2
    assert outcome.results["llama-70b"]["scheduled"] == 0
    assert outcome.shortfalls() == ["llama-70b"]
    assert list(outcome.results)[:2] == ["deepseek-v3", "qwen-demo"]  # the order they were placed in
    # A negative priority goes after the default 0.
    data["deployments"][2]["priority"] = 0
    data["deployments"][1]["priority"] = -1
    outcome = place_fleet(fleet_dict(data), [])
    assert (outcome.results["deepseek-v3"]["scheduled"], outcome.results["llama-70b"]["scheduled"]) == (2, 0)
