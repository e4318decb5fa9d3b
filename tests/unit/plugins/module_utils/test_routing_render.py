"""Render mode, fleet routing (issue 27 "Done when"): 6 replicas of one model over 3 clusters give one model Service +
HTTPRoute per cluster and a routing file with weights 3:2:1; a drain writes weight 0 in the run that keeps the drained
replicas' files, and the next run removes them."""

from __future__ import annotations

from typing import Any

import k8s_schemas
import yaml
from render_case import deployment, replica

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import SERVING_OWNER, FleetIdentity
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import fleet_manifests
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction, read_objects
from ansible_collections.gpufleet.serving.plugins.module_utils.routing import (
    ROUTING_DIR,
    ROUTING_OWNER,
    build_routing,
    cluster_settings,
    hub_objects,
    placed_counts,
    routing_relpath,
    still_routed,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.routing_hub import read_routing_artifact

FLEET = "prod"
CLUSTERS = ("c1", "c2", "c3", "c4")
SETTINGS = {c: {"gpufleet_routing_address": f"gw.{c}.example.com"} for c in CLUSTERS}


def fleet(dep: dict[str, Any]) -> dict[str, Any]:
    clusters = [{"name": name, "pools": [], "taints": [], "ready": True} for name in CLUSTERS]
    return {"name": FLEET, "clusters": clusters, "deployments": [dep], "caches": []}


def run(root: Any, fl: dict[str, Any], reps: list[dict[str, Any]], drained: tuple[str, ...] = ()) -> dict[str, Any]:
    """One render-mode run as the role does it: fleet_manifests (keeping what the last routing file still routes to),
    then fleet_routing (writing _fleet/routing/). Returns the artifact."""
    objects = fleet_manifests(fl, reps)
    routed = still_routed(read_routing_artifact(root, FLEET), reps)
    held: set[tuple[str, str]] = set()

    def keep(rel: str, obj: Any) -> bool:
        labels = obj["metadata"]["labels"]
        pair = (labels.get("gpufleet.io/deployment"), labels.get("gpufleet.io/cluster"))
        if pair in routed:
            held.add(pair)
            return True
        return False

    identity = FleetIdentity(FLEET)
    txn = Transaction(root)
    for cluster in CLUSTERS:
        txn.plan(cluster, objects.get(cluster, []), SERVING_OWNER, keep=keep, fleet=identity)
    txn.commit()
    leaving = [{"deployment": d, "cluster": c} for d, c in sorted(held)]
    art = build_routing(
        fl, placed_counts(reps), drained=drained, clusters=cluster_settings(SETTINGS), leaving=placed_counts(leaving)
    )
    hub, _notes = hub_objects(art, "httproute", gateway={"name": "hub"})
    txn = Transaction(root)
    txn.plan_fleet_files(ROUTING_DIR, {routing_relpath(o).rsplit("/", 1)[1]: o for o in hub}, ROUTING_OWNER, FLEET)
    txn.commit()
    return art


def on_disk(root: Any) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for cluster, _rel, obj in read_objects(root, selector=SERVING_OWNER):
        out.setdefault(cluster, []).append((obj["kind"], obj["metadata"]["name"]))
    return out


def route_weights(root: Any) -> dict[str, int]:
    route = yaml.safe_load((root / "_fleet" / "routing" / "ml.httproute-chat.yaml").read_text())
    return {r["name"]: r["weight"] for r in route["spec"]["rules"][0]["backendRefs"]}


def test_six_replicas_over_three_clusters_one_endpoint_each_and_weights_3_2_1(tmp_path):
    dep = deployment(replicas=6, gateway={"name": "gw", "namespace": "gateway-system"})
    reps = [replica(dep, c, i) for i, c in enumerate(["c1", "c1", "c1", "c2", "c2", "c3"])]
    objects = fleet_manifests(fleet(dep), reps)
    for cluster in ("c1", "c2", "c3"):
        endpoint = [o for o in objects[cluster] if "gpufleet.io/replica" not in o["metadata"]["labels"]]
        assert sorted((o["kind"], o["metadata"]["name"]) for o in endpoint) == [
            ("HTTPRoute", "chat"),
            ("Service", "chat"),
        ]
    assert not objects.get("c4")
    k8s_schemas.validate_objects([o for objs in objects.values() for o in objs])
    art = run(tmp_path, fleet(dep), reps)
    assert {c["cluster"]: c["weight"] for c in art["models"][0]["clusters"]} == {"c1": 3, "c2": 2, "c3": 1}
    assert route_weights(tmp_path) == {"chat-c1": 3, "chat-c2": 2, "chat-c3": 1}
    k8s_schemas.validate_files(sorted((tmp_path / "_fleet" / "routing").glob("*.yaml")))


def test_a_drain_writes_weight_0_while_the_files_stay_and_the_next_run_removes_them(tmp_path):
    dep = deployment(replicas=6, gateway={"name": "gw"})
    before = [replica(dep, c, i) for i, c in enumerate(["c1", "c1", "c1", "c2", "c2", "c3"])]
    run(tmp_path, fleet(dep), before)
    # c1 drained: its three replicas move to c4 (new indexes), placement no longer holds any on c1
    after = [r for r in before if r["cluster"] != "c1"] + [replica(dep, "c4", i) for i in (6, 7, 8)]
    art = run(tmp_path, fleet(dep), after, drained=("c1",))
    c1 = next(c for c in art["models"][0]["clusters"] if c["cluster"] == "c1")
    assert (c1["weight"], c1["placed"], c1["leaving"], c1["draining"]) == (0, 0, 1, True)
    assert route_weights(tmp_path) == {"chat-c1": 0, "chat-c2": 2, "chat-c3": 1, "chat-c4": 3}
    assert ("Service", "chat") in on_disk(tmp_path)["c1"] and len(on_disk(tmp_path)["c1"]) > 3  # files kept
    # the next run: the routing file it reads says weight 0 for c1, so c1's files go, and c1 leaves the route
    run(tmp_path, fleet(dep), after, drained=("c1",))
    assert "c1" not in on_disk(tmp_path)
    assert route_weights(tmp_path) == {"chat-c2": 2, "chat-c3": 1, "chat-c4": 3}
    assert not (tmp_path / "_fleet" / "routing" / "ml.service-chat-c1.yaml").exists()


def test_a_scale_down_keeps_the_removed_replica_for_one_run(tmp_path):
    dep = deployment(replicas=3)
    reps = [replica(dep, "c1", 0), replica(dep, "c1", 1), replica(dep, "c2", 2)]
    run(tmp_path, fleet(dep), reps)
    smaller = deployment(replicas=2)
    art = run(tmp_path, fleet(smaller), reps[1:])
    assert {c["cluster"]: c["weight"] for c in art["models"][0]["clusters"]} == {"c1": 1, "c2": 1}
    assert sum(1 for kind, _n in on_disk(tmp_path)["c1"] if kind == "Deployment") == 2  # kept this run
    run(tmp_path, fleet(smaller), reps[1:])
    assert sum(1 for kind, _n in on_disk(tmp_path)["c1"] if kind == "Deployment") == 1


def test_without_a_previous_routing_file_nothing_is_held_and_a_planted_one_is_ignored(tmp_path):
    dep = deployment(replicas=1)
    assert still_routed(None, [replica(dep, "c1", 0)]) == set()
    (tmp_path / "_fleet" / "routing").mkdir(parents=True)
    (tmp_path / "_fleet" / "routing" / "x.yaml").write_text("kind: ConfigMap\ndata: {routing.json: '{bad'}\n")
    (tmp_path / "_fleet" / "routing" / "y.yaml").write_text(": not yaml : [")
    assert read_routing_artifact(tmp_path, FLEET) is None


def test_inference_pool_per_cluster_with_its_endpoint_picker_and_the_route_pointing_at_it():
    dep = deployment(replicas=6, gateway={"name": "gw"}, routing={"inference_pool": True})
    reps = [replica(dep, c, i) for i, c in enumerate(["c1", "c1", "c1", "c2", "c2", "c3"])]
    objects = fleet_manifests(fleet(dep), reps)
    for cluster in ("c1", "c2", "c3"):
        endpoint = [o for o in objects[cluster] if "gpufleet.io/replica" not in o["metadata"]["labels"]]
        by = {(o["kind"], o["metadata"]["name"]): o for o in endpoint}
        assert sorted(by) == [
            ("ConfigMap", "chat-epp"),
            ("Deployment", "chat-epp"),
            ("HTTPRoute", "chat"),
            ("InferencePool", "chat"),
            ("Role", "chat-epp"),
            ("RoleBinding", "chat-epp"),
            ("Service", "chat"),
            ("Service", "chat-epp"),
            ("ServiceAccount", "chat-epp"),
        ]
        pool = by[("InferencePool", "chat")]["spec"]
        assert pool["selector"]["matchLabels"] == by[("Service", "chat")]["spec"]["selector"]
        assert pool["targetPorts"] == [{"number": 8000}]
        assert pool["endpointPickerRef"]["name"] == "chat-epp"
        assert by[("HTTPRoute", "chat")]["spec"]["rules"][0]["backendRefs"] == [
            {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "chat"}
        ]
        epp = by[("Deployment", "chat-epp")]["spec"]["template"]["spec"]["containers"][0]
        assert epp["image"] == "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0"
        assert epp["args"][:4] == ["--pool-name", "chat", "--pool-namespace", "ml"]
        # the picker's pods are not serving pods: the model Service and the pool never select them
        epp_labels = by[("Deployment", "chat-epp")]["spec"]["template"]["metadata"]["labels"]
        assert not pool["selector"]["matchLabels"].items() <= epp_labels.items()
    k8s_schemas.validate_objects([o for objs in objects.values() for o in objs])


def test_without_inference_pool_the_route_points_at_the_model_service():
    dep = deployment(replicas=1, gateway={"name": "gw"})
    objs = fleet_manifests(fleet(dep), [replica(dep, "c1", 0)])["c1"]
    route = next(o for o in objs if o["kind"] == "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "chat", "port": 8000}]
    assert not any(o["kind"] == "InferencePool" for o in objs)
