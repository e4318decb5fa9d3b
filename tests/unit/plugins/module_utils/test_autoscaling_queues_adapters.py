"""Issue 33: adapters, autoscaling (KEDA ScaledObjects), queues (Kueue / KAI) and spillover endpoints."""

from __future__ import annotations

import copy
from typing import Any

import k8s_schemas
import pytest
from render_case import container, deployment, replica, standalone
from test_placement import CLASSES, cluster, place
from test_placement import deployment as placement_deployment

from ansible_collections.gpufleet.serving.plugins.module_utils import autoscaling, queues
from ansible_collections.gpufleet.serving.plugins.module_utils.adapters import (
    ANNOTATION_ARTIFACT_KIND,
    adapter_cache_objects,
    lora_flags,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import fleet_manifests
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    Autoscaling,
    ModelDeployment,
    parse,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import validate_classes

PATH = "gpufleet_model_deployments[0]"
SCALING = {"min_replicas": 1, "max_replicas": 6, "metric": {"kind": "queue_depth", "target": 4}}
ADAPTERS = [
    {"name": "sql-lora", "source": {"hugging_face": {"repo": "org/qwen3-coder-sql-lora"}}, "revision": "abc123"},
    {"name": "docs-lora", "source": {"s3": {"uri": "s3://adapters/docs-lora"}}},
]


def errors_of(data: dict[str, Any]) -> str:
    with pytest.raises(FleetValidationError) as info:
        parse(ModelDeployment, data, PATH)
    return str(info.value)


def fleet(dep: dict[str, Any], clusters: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "prod", "clusters": clusters, "deployments": [dep], "caches": []}


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


# --------------------------------------------------------------------------------------------------------------------
# The deployment's new fields
# --------------------------------------------------------------------------------------------------------------------


def test_adapter_names_are_unique_model_names_and_not_the_deployment():
    dep = deployment()
    assert "adapters[1].name" not in errors_of({**dep, "adapters": [ADAPTERS[0], {**ADAPTERS[1], "name": "sql-lora"}]})
    assert "duplicate adapter name 'sql-lora'" in errors_of(
        {**dep, "adapters": [ADAPTERS[0], {**ADAPTERS[1], "name": "sql-lora"}]}
    )
    assert f"{PATH}.adapters[0].name: must be an adapter name" in errors_of(
        {**dep, "adapters": [{**ADAPTERS[0], "name": "sql lora=x"}]}
    )
    assert "the deployment's own model name" in errors_of({**dep, "adapters": [{**ADAPTERS[0], "name": "chat"}]})
    assert "differ; set one of them" in errors_of(
        {
            **dep,
            "adapters": [
                {"name": "a", "source": {"hugging_face": {"repo": "o/a", "revision": "v1"}}, "revision": "v2"}
            ],
        }
    )


def test_external_endpoint_takes_a_secret_reference_never_a_key():
    dep = deployment()
    good = {"name": "provider", "url": "https://api.example.com/v1", "secret": {"name": "provider-key", "key": "api-key"},
            "priority": 1, "weight": 3}  # fmt: skip
    parsed = parse(ModelDeployment, {**dep, "external_endpoints": [good]}, PATH)
    assert parsed.external_endpoints[0].secret.key == "api-key"
    literal = "sk-proj-0123456789abcdefABCDEF0123456789"
    for bad, where in (
        ({**good, "api_key": literal}, f"{PATH}.external_endpoints[0]: api_key must not be set"),
        ({**good, "secret": literal}, "not a string: a literal API key never goes into fleet data"),
        ({**good, "secret": {"name": "provider-key", "key": literal}}, "secret.key: looks like an API key"),
        ({**good, "url": f"https://api.example.com/v1?api_key={literal}"}, "external_endpoints[0].url: carries"),
    ):
        text = errors_of({**dep, "external_endpoints": [bad]})
        assert where in text
        assert literal not in text  # the key itself is never repeated
    assert "tier 0 is the fleet's own replicas" in errors_of({**dep, "external_endpoints": [{**good, "priority": 0}]})


def test_autoscaled_replicas_are_what_placement_places():
    dep = {k: v for k, v in deployment().items() if k != "replicas"}
    assert parse(ModelDeployment, {**dep, "autoscaling": SCALING}, PATH).replicas == 1
    assert parse(ModelDeployment, {**dep, "autoscaling": {**SCALING, "min_replicas": 0}}, PATH).replicas == 1
    assert parse(ModelDeployment, {**dep, "autoscaling": {**SCALING, "reserve": True}}, PATH).replicas == 6
    assert "replicas (2) and autoscaling disagree" in errors_of({**dep, "replicas": 2, "autoscaling": SCALING})
    assert "min_replicas (7) must not exceed max_replicas (6)" in errors_of(
        {**dep, "autoscaling": {**SCALING, "min_replicas": 7}}
    )
    assert "query is required for kind custom" in errors_of(
        {**dep, "autoscaling": {**SCALING, "metric": {"kind": "custom", "target": 1}}}
    )
    assert "between 0 and 1 for kind kv_cache" in errors_of(
        {**dep, "autoscaling": {**SCALING, "metric": {"kind": "kv_cache", "target": 80}}}
    )
    assert f"{PATH}.replicas: is required" in errors_of(dep)


# --------------------------------------------------------------------------------------------------------------------
# Autoscaling
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scaling", "placed", "want"),
    [
        # Without reserve: the minimum is placed, the headroom goes where the replicas are, in proportion.
        ({"min_replicas": 3, "max_replicas": 10}, {"a": 2, "b": 1}, {"a": (2, 7), "b": (1, 3)}),
        # Scale to zero: one replica's slot is placed; every minimum is 0.
        ({"min_replicas": 0, "max_replicas": 4}, {"a": 1}, {"a": (0, 4)}),
        # With reserve: max_replicas is placed; each cluster grows to what it holds.
        ({"min_replicas": 2, "max_replicas": 5, "reserve": True}, {"a": 3, "b": 2}, {"a": (1, 3), "b": (1, 2)}),
        ({"min_replicas": 5, "max_replicas": 5, "reserve": True}, {"a": 3, "b": 2}, {"a": (3, 3), "b": (2, 2)}),
    ],
)
def test_cluster_bounds_sum_to_the_fleets(scaling, placed, want):
    model = Autoscaling.model_validate({**scaling, "metric": {"kind": "rps", "target": 2}})
    got = autoscaling.cluster_bounds(model, placed)
    assert got == want
    assert sum(lo for lo, _hi in got.values()) == model.min_replicas
    assert sum(hi for _lo, hi in got.values()) == model.max_replicas


def test_bounds_always_sum_to_the_fleets_over_clusters_and_workloads():
    import random

    rng = random.Random(33)
    for _round in range(1500):
        placed = {f"c{i}": rng.randint(1, 5) for i in range(rng.randint(1, 6))}
        total = sum(placed.values())
        low = rng.randint(0, 15)
        high = rng.randint(max(low, total, 1), 40)
        reserve = rng.random() < 0.5
        model = Autoscaling.model_validate(
            {"min_replicas": low, "max_replicas": high, "reserve": reserve, "metric": {"kind": "rps", "target": 1}}
        )
        got = autoscaling.cluster_bounds(model, placed)
        assert sum(lo for lo, _hi in got.values()) == min(low, total)
        assert sum(hi for _lo, hi in got.values()) == (total if reserve else high)
        for name, (lo, hi) in got.items():
            assert 0 <= lo <= placed[name] <= hi
            per = autoscaling.workload_bounds(lo, hi, list(range(placed[name])))
            assert sum(a for a, _b in per.values()) == lo and sum(b for _a, b in per.values()) == hi
            assert all(0 <= a <= 1 <= b for a, b in per.values())


def test_autoscaled_deployment_renders_schema_valid_scaled_objects_whose_bounds_sum_to_the_fleets():
    dep = {k: v for k, v in deployment().items() if k != "replicas"}
    dep["autoscaling"] = {"min_replicas": 3, "max_replicas": 10, "metric": {"kind": "queue_depth", "target": 4}}
    dep["replicas"] = 3
    records = [replica(dep, "c1", 0), replica(dep, "c1", 1), replica(dep, "c2", 0)]
    clusters = [{"name": "c1", "prometheus_url": "http://prom.c1:9090"}, {"name": "c2"}]
    out = fleet_manifests(fleet(dep, clusters), records)
    scaled = of_kind(out["c1"], "ScaledObject") + of_kind(out["c2"], "ScaledObject")
    assert len(scaled) == 3
    assert sum(s["spec"]["minReplicaCount"] for s in scaled) == 3
    assert sum(s["spec"]["maxReplicaCount"] for s in scaled) == 10
    workloads = {w["metadata"]["name"]: w for c in ("c1", "c2") for w in of_kind(out[c], "Deployment")}
    for s in scaled:
        target = s["spec"]["scaleTargetRef"]
        assert (target["apiVersion"], target["kind"]) == ("apps/v1", "Deployment")
        assert "replicas" not in workloads[target["name"]]["spec"]  # KEDA owns it
        trigger = s["spec"]["triggers"][0]
        assert trigger["type"] == "prometheus" and trigger["metadata"]["threshold"] == "4"
        assert "vllm:num_requests_waiting" in trigger["metadata"]["query"]
        assert f'pod=~"{target["name"]}-' in trigger["metadata"]["query"]
    assert {s["spec"]["triggers"][0]["metadata"]["serverAddress"] for s in of_kind(out["c1"], "ScaledObject")} == {
        "http://prom.c1:9090"
    }
    assert of_kind(out["c2"], "ScaledObject")[0]["spec"]["triggers"][0]["metadata"]["serverAddress"] == (
        autoscaling.DEFAULT_PROMETHEUS_URL
    )
    k8s_schemas.validate_objects(out["c1"] + out["c2"])


def test_scale_to_zero_adds_the_gateway_activation_trigger_and_stays_routable():
    dep = {k: v for k, v in deployment().items() if k != "replicas"}
    dep["autoscaling"] = {"min_replicas": 0, "max_replicas": 2, "metric": {"kind": "kv_cache", "target": 0.8}}
    out = fleet_manifests(fleet(dep, [{"name": "c1"}]), [replica(dep, "c1", 0)])["c1"]
    (scaled,) = of_kind(out, "ScaledObject")
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (0, 2)
    assert [t.get("name") for t in scaled["spec"]["triggers"]] == [None, "activation"]
    assert any(o["kind"] == "Service" and o["metadata"]["name"] == "chat" for o in out)  # the model endpoint stays
    k8s_schemas.validate_objects(out)


def test_autoscaling_a_kserve_deployment_is_refused_with_the_field():
    dep = {k: v for k, v in deployment(backend="kserve").items() if k != "replicas"}
    dep["autoscaling"] = SCALING
    with pytest.raises(FleetValidationError, match=r"deployment\.autoscaling: backend kserve cannot be autoscaled"):
        fleet_manifests(fleet(dep, [{"name": "c1"}]), [replica(dep, "c1", 0)])


def test_a_deployment_without_the_new_fields_renders_as_before():
    dep = deployment()
    records = [replica(dep, "c1", 0)]
    before = fleet_manifests(fleet(dep, [{"name": "c1"}]), copy.deepcopy(records))
    assert not of_kind(before["c1"], "ScaledObject")
    assert of_kind(before["c1"], "Deployment")[0]["spec"]["replicas"] == 1


# --------------------------------------------------------------------------------------------------------------------
# Queues
# --------------------------------------------------------------------------------------------------------------------


def test_queued_deployment_workloads_and_pods_carry_the_kueue_label():
    dep = {**deployment(), "queue": {"kind": "kueue", "name": "team-a"}}
    out = fleet_manifests(fleet(dep, [{"name": "c1"}]), [replica(dep, "c1", 0), replica(dep, "c1", 1)])["c1"]
    workloads = of_kind(out, "Deployment")
    assert len(workloads) == 2
    for w in workloads:
        assert w["metadata"]["labels"][queues.KUEUE_QUEUE_LABEL] == "team-a"
        assert w["spec"]["template"]["metadata"]["labels"][queues.KUEUE_QUEUE_LABEL] == "team-a"
        assert "schedulerName" not in w["spec"]["template"]["spec"]
    k8s_schemas.validate_objects(out)
    # Queued and autoscaled: the queue's label is on the workloads, not on their ScaledObjects.
    scaled = {k: v for k, v in dep.items() if k != "replicas"}
    scaled["autoscaling"] = SCALING
    out = fleet_manifests(fleet(scaled, [{"name": "c1"}]), [replica(scaled, "c1", 0)])["c1"]
    assert of_kind(out, "Deployment")[0]["metadata"]["labels"][queues.KUEUE_QUEUE_LABEL] == "team-a"
    assert queues.KUEUE_QUEUE_LABEL not in of_kind(out, "ScaledObject")[0]["metadata"]["labels"]


def test_cluster_default_kai_queue_labels_gangs_and_sets_the_scheduler():
    from render_case import gang

    dep = deployment(members=gang(nodes=1))
    out = fleet_manifests(
        fleet(dep, [{"name": "c1", "queue": {"kind": "kai", "name": "inference"}}]), [replica(dep, "c1", 0)]
    )["c1"]
    (lws,) = of_kind(out, "LeaderWorkerSet")
    assert lws["metadata"]["labels"][queues.KAI_QUEUE_LABEL] == "inference"
    for role in ("leaderTemplate", "workerTemplate"):
        template = lws["spec"]["leaderWorkerTemplate"][role]
        assert template["metadata"]["labels"][queues.KAI_QUEUE_LABEL] == "inference"
        assert template["spec"]["schedulerName"] == queues.KAI_SCHEDULER_NAME
    # The deployment's own queue wins over the cluster's default.
    own = {**dep, "queue": {"kind": "kueue", "name": "team-b"}}
    out = fleet_manifests(fleet(own, [{"name": "c1", "queue": {"kind": "kai", "name": "x"}}]), [replica(own, "c1", 0)])
    (lws,) = of_kind(out["c1"], "LeaderWorkerSet")
    assert lws["metadata"]["labels"][queues.KUEUE_QUEUE_LABEL] == "team-b"
    assert queues.KAI_QUEUE_LABEL not in lws["metadata"]["labels"]
    k8s_schemas.validate_objects(out["c1"])


CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "gpus"},
    "spec": {
        "resourceGroups": [
            {
                "coveredResources": ["gpu.nvidia.com"],
                "flavors": [{"name": "l4", "resources": [{"name": "gpu.nvidia.com", "nominalQuota": 3}]}],
            }
        ]
    },
    "status": {"flavorsUsage": [{"name": "l4", "resources": [{"name": "gpu.nvidia.com", "total": "1"}]}]},
}


def test_clusterqueue_free_is_nominal_quota_minus_usage():
    assert queues.clusterqueue_free(CLUSTER_QUEUE, ["gpu.nvidia.com", "cpu"]) == {"gpu.nvidia.com": 2}
    k8s_schemas.validate_objects([{**CLUSTER_QUEUE, "status": {}}])
    assert (
        queues.local_queue_target(
            [{"metadata": {"name": "team-a", "namespace": "ml"}, "spec": {"clusterQueue": "gpus"}}], "ml", "team-a"
        )
        == "gpus"
    )


def test_quota_aware_placement_admits_two_of_three_and_places_the_third_elsewhere():
    """A ClusterQueue with quota for 2 more GPUs on cluster a (4 free L4 nodes there): on a alone 2 of 3 replicas are
    placed (a alone, without the queue, takes all three); with cluster b the third goes to b."""
    classes = validate_classes(CLASSES)
    free = queues.clusterqueue_free(CLUSTER_QUEUE, ["gpu.nvidia.com"])
    assert free == {"gpu.nvidia.com": 2}
    held = queues.hold_beyond_quota({"default": "l4"}, {"default": 4}, classes, free)
    assert held == {"default": {"nodes": 4, "held": [[], [], ["gpu-0"], ["gpu-0"]]}}

    def queued_a() -> dict[str, Any]:
        a = cluster("a", [("default", "l4", 4)])
        a["pools"][0]["held"] = held["default"]["held"]
        return a

    alone = place(deployment=placement_deployment(replicas=3), clusters=[cluster("a", [("default", "l4", 4)])],
                  classes=CLASSES)  # fmt: skip
    assert [r["cluster"] for r in alone["replicas"]] == ["a", "a", "a"]
    admitted = place(deployment=placement_deployment(replicas=3), clusters=[queued_a()], classes=CLASSES)
    assert [r["cluster"] for r in admitted["replicas"]] == ["a", "a"]
    assert admitted["condition"]["reason"] == "InsufficientCapacity"
    both = place(deployment=placement_deployment(replicas=3), clusters=[queued_a(), cluster("b")], classes=CLASSES)
    assert sorted(r["cluster"] for r in both["replicas"]) == ["a", "a", "b"]
    # An observed node other claims hold in part keeps its holds; the quota counts only the free devices.
    partly = queues.hold_beyond_quota({"default": "l4"}, {"default": {"nodes": 3, "held": [["gpu-0"]]}}, classes, free)
    assert partly == {"default": {"nodes": 3, "held": [["gpu-0"], [], []]}}
    assert queues.hold_beyond_quota({"default": "l4"}, {"default": 2}, classes, {"gpu.nvidia.com": 5}) == {"default": 2}


# --------------------------------------------------------------------------------------------------------------------
# Adapters
# --------------------------------------------------------------------------------------------------------------------


def test_two_adapters_render_the_vllm_flags_and_mounts():
    dep = {**deployment(), "adapters": ADAPTERS}
    out = fleet_manifests(fleet(dep, [{"name": "c1"}, {"name": "c2"}]), [replica(dep, "c1", 0)])
    assert out["c2"] == []
    (workload,) = of_kind(out["c1"], "Deployment")
    spec = workload["spec"]["template"]["spec"]
    engine = spec["containers"][0]
    assert engine["args"][-6:] == [
        "--enable-lora", "--max-loras", "2", "--lora-modules",
        "sql-lora=/mnt/adapters/sql-lora", "docs-lora=/mnt/adapters/docs-lora",
    ]  # fmt: skip
    mounts = {m["mountPath"]: m for m in engine["volumeMounts"]}
    assert {"/mnt/adapters/sql-lora", "/mnt/adapters/docs-lora"} <= set(mounts)
    claims = {v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
    assert claims >= {"gpufleet-cache-chat-lora-sql-lora", "gpufleet-cache-chat-lora-docs-lora"}
    k8s_schemas.validate_objects(out["c1"])


def test_two_adapters_are_staged_on_the_deployments_clusters_only():
    dep = parse(ModelDeployment, {**deployment(), "adapters": ADAPTERS}, PATH)
    with pytest.raises(GpufleetError, match="no storage class"):
        adapter_cache_objects(dep, ["c2"], "print('hydrate')")  # c2 has no gpufleet_cache_storage_class
    staged = adapter_cache_objects(
        dep, ["c2", "c1", "c1"], "print('hydrate')", storage_classes={"c1": "rwx", "c2": "nfs"}
    )
    assert sorted(staged) == ["c1", "c2"]
    for objects in staged.values():
        pvcs = of_kind(objects, "PersistentVolumeClaim")
        assert sorted(p["metadata"]["name"] for p in pvcs) == [
            "gpufleet-cache-chat-lora-docs-lora", "gpufleet-cache-chat-lora-sql-lora",
        ]  # fmt: skip
        assert len(of_kind(objects, "Job")) == 2
        assert all(o["metadata"]["annotations"][ANNOTATION_ARTIFACT_KIND] == "adapter" for o in objects)
        k8s_schemas.validate_objects(objects)
    assert lora_flags(dep)[:3] == ["--enable-lora", "--max-loras", "2"]


def test_adapters_on_a_non_vllm_engine_are_refused_with_the_field():
    sglang = standalone(container(image="lmsysorg/sglang:v0.5", args=["--model-path", "org/small"]))
    dep = {**deployment(members=[sglang]), "adapters": ADAPTERS}
    with pytest.raises(FleetValidationError, match=r"deployment\.adapters: LoRA adapters need a vLLM engine"):
        fleet_manifests(fleet(dep, [{"name": "c1"}]), [replica(dep, "c1", 0)])


# --------------------------------------------------------------------------------------------------------------------
# The fleet: validation from the inventory, what placement reports
# --------------------------------------------------------------------------------------------------------------------


def test_placement_reports_the_configured_bounds_and_each_clusters_queue():
    from example_fleet import example_fleet
    from module_utils_tests import builders

    fleet_dict = builders("fleet/test_fleet_deploy").fleet_dict

    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet

    data = example_fleet()
    dep = next(d for d in data["deployments"] if d["name"] == "qwen-demo")
    dep.pop("replicas")
    dep["autoscaling"] = {"min_replicas": 2, "max_replicas": 9, "metric": {"kind": "queue_depth", "target": 8}}
    dep["queue"] = {"kind": "kueue", "name": "serving"}
    host = sorted(data["hosts"])[0]
    data["hosts"][host]["gpufleet_queue"] = {"kind": "kai", "name": "inference"}
    fleet = fleet_dict(data)
    assert next(c for c in fleet["clusters"] if c["name"] == host)["queue"] == {"kind": "kai", "name": "inference"}
    result = place_fleet(fleet, []).results["qwen-demo"]
    summary = result["autoscaling"]
    assert (summary["min_replicas"], summary["max_replicas"], summary["placed"]) == (2, 9, 2)
    assert sum(c["min"] for c in summary["clusters"].values()) == 2
    assert sum(c["max"] for c in summary["clusters"].values()) == 9
    assert result["queues"] and set(result["queues"].values()) == {"kueue/serving"}  # its own queue wins
    data["hosts"][host]["gpufleet_queue"] = {"kind": "kueuee", "name": "x"}
    with pytest.raises(FleetValidationError, match=r"gpufleet_queue\.kind: must be one of kueue, kai"):
        fleet_dict(data)


def test_observed_capacity_reads_the_kueue_quota_and_placement_puts_the_third_replica_elsewhere():
    """The read path: Nodes, ResourceSlices and the cluster's Kueue LocalQueue / ClusterQueue (quota for 2 GPUs, none
    used) as fleet_read lists them -> observe_fleet -> usable_nodes -> place_fleet: 2 of 3 one-GPU replicas on c1
    (which has 6 free GPUs), the third on c2; explain's notes name the queue."""
    from test_capacity import CLASSES as CAP_CLASSES
    from test_capacity import healthy

    from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import (
        observe_fleet,
        pool_notes,
        usable_nodes,
    )
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet

    quota = copy.deepcopy(CLUSTER_QUEUE)
    quota["status"] = {}  # nothing admitted yet
    quota["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "2"
    local = {"kind": "LocalQueue", "metadata": {"name": "serving", "namespace": "ml"}, "spec": {"clusterQueue": "gpus"}}
    pools = [{"name": "l4", "class": "l4-2x", "nodes": 3}]
    fleet = {
        "classes": {"l4-2x": CAP_CLASSES["l4-2x"].model_dump(by_alias=True, exclude_none=True)},
        "clusters": [
            {"name": "c1", "pools": pools, "queue": {"kind": "kueue", "name": "serving"}},
            {"name": "c2", "pools": pools},
        ],
    }
    nodes, slices, _claims = healthy()
    states = observe_fleet(fleet, CAP_CLASSES, {"c1": [*nodes, *slices, quota, local], "c2": [*nodes, *slices]})
    dicts = [s.to_dict() for s in states]
    capacity = usable_nodes(dicts)
    assert capacity["c2"] == {"l4": 3}
    assert capacity["c1"] == {"l4": 1}  # 2 GPUs admitted: l4-0's two; l4-1 and l4-2 are held whole by the quota
    assert any("beyond the quota of Kueue queue serving" in n for n in pool_notes(dicts)["c1"]["l4"])
    request = {"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 1}
    fleet["deployments"] = [
        {"name": "chat", "replicas": 3, "candidate_clusters": ["c1", "c2"],
         "engines": [{"name": "main", "members": [{"role": "Standalone", "node_selector": {"devices": [request]}}]}]}
    ]  # fmt: skip
    outcome = place_fleet(fleet, [], observed_nodes=capacity)
    assert sorted(r["cluster"] for r in outcome.by_deployment()["chat"]) == ["c1", "c1", "c2"]
    # Without the queue, c1 has room for all three.
    fleet["clusters"][0].pop("queue")
    free = usable_nodes(
        [s.to_dict() for s in observe_fleet(fleet, CAP_CLASSES, {"c1": [*nodes, *slices, quota, local]})]
    )
    assert free["c1"] == {"l4": 3}


def test_adapters_with_ray_are_refused_with_the_field():
    dep = {**deployment(), "adapters": ADAPTERS, "ray": True}
    with pytest.raises(FleetValidationError, match=r"deployment\.adapters: LoRA adapters are not supported with ray"):
        fleet_manifests(fleet(dep, [{"name": "c1"}]), [replica(dep, "c1", 0)])
