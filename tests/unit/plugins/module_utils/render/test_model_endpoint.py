"""The model endpoint per cluster (issue 27 item 1): one Service (+ HTTPRoute) per deployment on each cluster that holds
replicas of it, stable while replicas come and go, and removed (render directory and apply mode alike) from a cluster
that no longer holds any. The per-replica Service stays: placement reads the replicas back from it."""

from __future__ import annotations

from typing import Any

import k8s_schemas
from module_utils_tests import builders
from render_case import deployment, gang, kinds, pod_templates, render, replica

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import SERVING_OWNER, FleetIdentity
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import fleet_manifests, observe
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import ReconcileOptions, reconcile_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import read_objects, sync
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.registry import serving_kinds
from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import (
    model_endpoint_name,
    model_endpoint_path,
)

FakeCluster = builders("fleet/test_fleet_k8s").FakeCluster

FLEET = "prod"


def endpoints(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if "gpufleet.io/replica" not in o["metadata"]["labels"]]


def serving_pod_labels(objs: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [labels for o in objs for _where, labels, _spec in pod_templates(o) if labels.get("gpufleet.io/endpoint")]


def test_every_replica_on_the_cluster_is_behind_one_model_service_and_route():
    dep = deployment(gateway={"name": "gw", "namespace": "gateway-system"})
    reps = [replica(dep, "c1", 0), replica(dep, "c2", 1), replica(dep, "c1", 2), replica(dep, "c1", 3)]
    objs = render(dep, reps, cluster="c1", fleet=FLEET)
    service, route = endpoints(objs)
    assert (service["kind"], route["kind"]) == ("Service", "HTTPRoute")
    assert service["metadata"]["name"] == route["metadata"]["name"] == model_endpoint_name("chat") == "chat"
    serving = serving_pod_labels(objs)
    assert len(serving) == 3 and len({p["gpufleet.io/replica"] for p in serving}) == 3
    assert all(service["spec"]["selector"].items() <= p.items() for p in serving)
    assert route["spec"]["rules"][0]["matches"][0]["path"]["value"] == model_endpoint_path("ml", "chat") == "/ml/chat/"
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "chat", "port": 8000}]
    # The replicas keep their own Services, and only those carry the placement read back by later runs.
    assert kinds(objs).count("Service") == 4
    records = observe(("c1", o, None) for o in objs).records
    assert sorted(r.index for r in records) == [0, 2, 3]
    k8s_schemas.validate_objects(objs)


def test_the_model_endpoint_does_not_change_when_replicas_move_or_scale():
    dep = deployment(gateway={"name": "gw"})
    before = endpoints(render(dep, [replica(dep, "c1", 0)]))
    after = endpoints(render(dep, [replica(dep, "c1", 4), replica(dep, "c1", 7, pool="h100")]))
    assert before == after


def test_only_a_cluster_that_holds_replicas_gets_the_model_endpoint():
    dep = deployment()
    reps = [replica(dep, "c1", 0)]
    assert render(dep, reps, cluster="c2") == []
    assert [o["metadata"]["name"] for o in endpoints(render(dep, reps, cluster="c1"))] == ["chat"]


def test_a_gang_endpoint_selects_leaders_only_and_long_or_digit_names_stay_dns_labels():
    dep = deployment(members=gang(), name="7" + "b" * 62)
    (service,) = endpoints(render(dep, [replica(dep, name="7" + "b" * 56 + "-1a2b3")]))
    name = service["metadata"]["name"]
    assert len(name) <= 63 and name[0].isalpha() and name == model_endpoint_name(dep["name"])
    objs = render(dep, [replica(dep, name="7" + "b" * 56 + "-1a2b3")])
    lws = next(o for o in objs if o["kind"] == "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    assert service["spec"]["selector"].items() <= lws["leaderTemplate"]["metadata"]["labels"].items()
    assert not service["spec"]["selector"].items() <= lws["workerTemplate"]["metadata"]["labels"].items()


# --------------------------------------------------------------------------------------------------------------------
# Pruning: a cluster that no longer holds replicas of the deployment loses its model endpoint
# --------------------------------------------------------------------------------------------------------------------


def fleet(dep: dict[str, Any]) -> dict[str, Any]:
    clusters = [{"name": name, "pools": [], "taints": [], "ready": True} for name in ("c1", "c2")]
    return {"name": FLEET, "clusters": clusters, "deployments": [dep], "caches": []}


def two_cluster_renders() -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """What a fleet renders with replicas on c1 and c2, and after a scale-down that leaves c2 without one."""
    dep = deployment(gateway={"name": "gw"})
    reps = [replica(dep, "c1", 0), replica(dep, "c2", 1)]
    return fleet_manifests(fleet(dep), reps), fleet_manifests(fleet(dep), reps[:1])


def test_apply_prunes_the_model_endpoint_from_a_cluster_left_without_replicas():
    before, after = two_cluster_renders()
    assert [o["metadata"]["name"] for o in endpoints(before["c2"])] == ["chat", "chat"]
    assert after["c2"] == []
    apis = {name: FakeCluster(list(objs)) for name, objs in before.items()}
    opts = ReconcileOptions(
        kinds=[(k.api_version, k.kind) for k in serving_kinds()],
        owner_selector=[],
        wait=False,
        fleet=FleetIdentity(FLEET),
    )
    outcomes, held = reconcile_fleet(apis, after, opts)
    assert held == [] and all(o.failed is None for o in outcomes.values())
    assert "Service/ml/chat" in outcomes["c2"].deleted and "HTTPRoute/ml/chat" in outcomes["c2"].deleted
    assert sorted(apis["c2"].deleted) == sorted(o["metadata"]["name"] for o in before["c2"])
    assert apis["c1"].deleted == []  # c1 still holds a replica: its model endpoint stays


def test_the_render_directory_drops_the_model_endpoint_with_the_last_replica(tmp_path):
    before, after = two_cluster_renders()
    owner = {**SERVING_OWNER, "gpufleet.io/fleet": FLEET}
    for cluster, objs in before.items():
        sync(tmp_path, cluster, objs, owner, fleet=FleetIdentity(FLEET))
    assert (tmp_path / "c2" / "ml" / "service-chat.yaml").is_file()
    for cluster, objs in after.items():
        sync(tmp_path, cluster, objs, owner, fleet=FleetIdentity(FLEET))
    left = {(c, o["kind"], o["metadata"]["name"]) for c, _rel, o in read_objects(tmp_path, selector=owner)}
    assert ("c1", "Service", "chat") in left and ("c1", "HTTPRoute", "chat") in left
    assert not any(c == "c2" for c, _kind, _name in left)
