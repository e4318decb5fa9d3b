"""Fleet routing (issue 27 item 2): the routing artifact from the whole placement, its three renderers (each schema-valid
against the pinned CRDs), the render directory's ``_fleet/routing/`` and the hub sync."""

from __future__ import annotations

import json
from typing import Any

import k8s_schemas
import pytest
import yaml
from render_case import deployment, replica

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.document import routing as plan_routing
from ansible_collections.gpufleet.serving.plugins.module_utils.routing import (
    ROUTING_DIR,
    ROUTING_OWNER,
    assemble_artifact,
    build_routing,
    cluster_settings,
    hub_objects,
    parse_renderer,
    pending_counts,
    placed_counts,
    routing_relpath,
    weight_lines,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.routing_hub import sync_hub

FLEET = "prod"
GATEWAY = {"name": "hub", "namespace": "gateway-system"}
ADDRESSES = {
    "c1": {"gpufleet_routing_address": "gw.c1.example.com"},
    "c2": {"gpufleet_routing_address": "10.0.2.1:8080", "gpufleet_routing_priority": 1},
    "c3": {"gpufleet_routing_address": "gw.c3.example.com"},
}


def fleet(**dep_kw: Any) -> dict[str, Any]:
    dep = deployment(replicas=6, **dep_kw)
    return {"name": FLEET, "deployments": [dep], "clusters": [{"name": c} for c in ADDRESSES]}


def six_replicas(dep: dict[str, Any]) -> list[dict[str, Any]]:
    """3 on c1, 2 on c2, 1 on c3."""
    return [replica(dep, c, i) for i, c in enumerate(["c1", "c1", "c1", "c2", "c2", "c3"])]


def model(artifact: dict[str, Any], name: str = "chat") -> dict[str, Any]:
    return next(m for m in artifact["models"] if m["deployment"] == name)


def weights(artifact: dict[str, Any], name: str = "chat") -> dict[str, int]:
    return {c["cluster"]: c["weight"] for c in model(artifact, name)["clusters"]}


def artifact_for(fl: dict[str, Any], drained: tuple[str, ...] = (), **kw: Any) -> dict[str, Any]:
    reps = six_replicas(fl["deployments"][0])
    return build_routing(fl, placed_counts(reps), drained=drained, clusters=cluster_settings(ADDRESSES), **kw)


# --------------------------------------------------------------------------------------------------------------------
# The artifact
# --------------------------------------------------------------------------------------------------------------------


def test_weights_follow_the_ready_replicas_3_2_1():
    art = artifact_for(fleet())
    assert weights(art) == {"c1": 3, "c2": 2, "c3": 1}
    m = model(art)
    assert (m["desired"], m["ready"], m["path"]) == (6, 6, "/ml/chat/")
    c2 = next(c for c in m["clusters"] if c["cluster"] == "c2")
    assert (c2["address"], c2["port"], c2["priority"], c2["service"]) == ("10.0.2.1", 8080, 1, "chat.ml.svc")
    assert weight_lines(art) == ["chat: c1=3 c2=2 p1 c3=1"]


def test_a_drained_cluster_gets_weight_0_while_the_model_is_ready_elsewhere():
    art = artifact_for(fleet(), drained=("c1",))
    assert weights(art) == {"c1": 0, "c2": 2, "c3": 1}
    c1 = model(art)["clusters"][0]
    assert c1["draining"] and c1["placed"] == 3
    # the plan's own routing agrees (one rule, two places)
    dep = fleet()["deployments"][0]
    assert {c: v["weight"] for c, v in plan_routing(six_replicas(dep), [dep], ["c1"])["chat"].items()} == weights(art)


def test_a_model_on_drained_clusters_only_keeps_serving_there():
    dep = deployment(replicas=2)
    reps = [replica(dep, "c1", 0), replica(dep, "c1", 1)]
    art = build_routing({"name": FLEET, "deployments": [dep]}, placed_counts(reps), drained=["c1"])
    assert weights(art) == {"c1": 2}


def test_apply_mode_counts_only_ready_replicas_and_a_cluster_with_none_ready_gets_0():
    pending = [{"cluster": "c3", "deployment": "chat", "replica": "chat-x"}, {"cluster": "c1", "deployment": "chat"}]
    art = artifact_for(fleet(), not_ready=pending_counts(pending), mode="apply")
    assert weights(art) == {"c1": 2, "c2": 2, "c3": 0}
    assert [(c["placed"], c["ready"]) for c in model(art)["clusters"]] == [(3, 2), (2, 2), (1, 0)]


EXTERNAL = [
    {"name": "openai", "url": "https://api.example.com/v1", "secret": {"name": "openai-key", "key": "token"},
     "priority": 2, "weight": None},
    {"name": "backup", "url": "http://backup.internal:9000/v1", "secret": {"name": "b", "key": "k"}, "priority": 1,
     "weight": 5},
]  # fmt: skip


def test_spillover_is_at_its_tier_and_active_only_while_ready_replicas_are_short():
    full = artifact_for(fleet(external_endpoints=EXTERNAL, adapters=[{"name": "sql-lora", "source": "x"}]))
    m = model(full)
    assert [(s["name"], s["priority"], s["weight"], s["active"]) for s in m["spillover"]] == [
        ("backup", 1, 5, False),
        ("openai", 2, 1, False),
    ]
    assert m["spillover"][1]["secret"] == {"name": "openai-key", "key": "token"}  # a reference, never a credential
    assert m["adapters"] == ["sql-lora"]
    short = artifact_for(fleet(external_endpoints=EXTERNAL), not_ready={"chat": {"c1": 3}}, mode="apply")
    assert [s["active"] for s in model(short)["spillover"]] == [True, True]


def test_cluster_settings_are_checked_naming_the_host_variable():
    assert cluster_settings({"a": {}})["a"] == {"priority": 0, "address": None, "port": 80}
    assert cluster_settings({"a": {"gpufleet_routing_priority": "3"}})["a"]["priority"] == 3  # a survey's text
    with pytest.raises(FleetValidationError) as err:
        cluster_settings({"a": {"gpufleet_routing_priority": -1, "gpufleet_routing_address": "http://x/"}})
    paths = [p for p, _r in err.value.errors]
    assert paths == ["hostvars['a'].gpufleet_routing_priority", "hostvars['a'].gpufleet_routing_address"]
    with pytest.raises(GpufleetError, match="must be one of none, httproute, aigateway, llmd"):
        parse_renderer("istio")


# --------------------------------------------------------------------------------------------------------------------
# Renderers: schema-valid against the pinned CRDs (Gateway API, Envoy AI Gateway, Envoy Gateway) and Kubernetes
# --------------------------------------------------------------------------------------------------------------------


def test_httproute_renderer_weighted_backend_refs_one_per_cluster():
    art = artifact_for(fleet(), drained=("c1",))
    objs, notes = hub_objects(art, "httproute", gateway=GATEWAY)
    assert notes == []
    route = next(o for o in objs if o["kind"] == "HTTPRoute")
    rule = route["spec"]["rules"][0]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/ml/chat/"}}]
    assert [(r["name"], r["weight"]) for r in rule["backendRefs"]] == [("chat-c1", 0), ("chat-c2", 2), ("chat-c3", 1)]
    svcs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    assert svcs["chat-c2"]["spec"] == {
        "type": "ExternalName",
        "externalName": "10.0.2.1",
        "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}],
    }
    assert all(o["metadata"]["labels"].items() >= ROUTING_OWNER.items() for o in objs)
    k8s_schemas.validate_objects(objs)


def test_httproute_renderer_adds_active_spillover_backends():
    art = artifact_for(fleet(external_endpoints=EXTERNAL), not_ready={"chat": {"c1": 3, "c2": 2}}, mode="apply")
    objs, _notes = hub_objects(art, "httproute", gateway=GATEWAY)
    route = next(o for o in objs if o["kind"] == "HTTPRoute")
    refs = [(r["name"], r["port"], r["weight"]) for r in route["spec"]["rules"][0]["backendRefs"]]
    assert refs == [("chat-c1", 80, 0), ("chat-c2", 8080, 0), ("chat-c3", 80, 1), ("chat-x-backup", 9000, 5),
                    ("chat-x-openai", 443, 1)]  # fmt: skip
    assert "openai-key" not in json.dumps([o for o in objs if o["kind"] != "ConfigMap"])
    k8s_schemas.validate_objects(objs)


def test_aigateway_renderer_weight_and_priority_and_adapters():
    art = artifact_for(
        fleet(external_endpoints=EXTERNAL, adapters=[{"name": "sql-lora"}]), not_ready={"chat": {"c3": 1}}
    )
    objs, _notes = hub_objects(art, "aigateway", gateway=GATEWAY)
    route = next(o for o in objs if o["kind"] == "AIGatewayRoute")
    assert route["apiVersion"] == "aigateway.envoyproxy.io/v1beta1"
    models = [r["matches"][0]["headers"][0]["value"] for r in route["spec"]["rules"]]
    assert models == ["chat", "sql-lora"]
    refs = [(r["name"], r["weight"], r["priority"]) for r in route["spec"]["rules"][0]["backendRefs"]]
    assert refs == [("chat-c1", 3, 0), ("chat-c2", 2, 1), ("chat-c3", 0, 0), ("chat-x-backup", 5, 1),
                    ("chat-x-openai", 1, 2)]  # fmt: skip
    backends = {o["metadata"]["name"]: o for o in objs if o["kind"] == "AIServiceBackend"}
    assert backends["chat-c1"]["spec"]["schema"] == {"name": "OpenAI", "prefix": "/ml/chat/v1"}
    eg = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "Backend"}
    assert eg["chat-c2"] == {"endpoints": [{"ip": {"address": "10.0.2.1", "port": 8080}}]}
    assert eg["chat-x-openai"]["tls"] == {"wellKnownCACertificates": "System"}
    k8s_schemas.validate_objects(objs)


def test_llmd_renderer_writes_the_multicluster_endpoints_file_of_each_model():
    art = artifact_for(fleet(), drained=("c3",))
    objs, _notes = hub_objects(art, "llmd", namespace="llm-d")
    (cm,) = [o for o in objs if o["metadata"]["name"].startswith("gpufleet-llmd-endpoints")]
    assert cm["metadata"]["name"] == "gpufleet-llmd-endpoints-prod.chat"  # chat's endpoint picker reads it
    doc = yaml.safe_load(cm["data"]["endpoints.yaml"])
    assert [(e["name"], e["address"], e["port"], e["labels"]["gpufleet.io/weight"]) for e in doc["endpoints"]] == [
        ("chat-c1", "gw.c1.example.com", "80", "3"),
        ("chat-c2", "10.0.2.1", "8080", "2"),
    ]  # c3 is draining: weight 0, left out (the EPP deletes an endpoint absent on reload)
    assert all(isinstance(e["port"], str) for e in doc["endpoints"])
    k8s_schemas.validate_objects(objs)


def test_renderers_name_clusters_the_hub_cannot_reach_and_need_a_gateway():
    dep = deployment(replicas=1)
    art = build_routing({"name": FLEET, "deployments": [dep]}, {"chat": {"c9": 1}}, clusters=cluster_settings({}))
    objs, notes = hub_objects(art, "httproute", gateway=GATEWAY)
    # only the artifact: chat's ConfigMap, then the index
    assert [o["metadata"]["name"] for o in objs] == ["gpufleet-routing-prod.chat", "gpufleet-routing-prod"]
    assert notes == ["chat: cluster c9 has no gpufleet_routing_address: the hub cannot route to it"]
    with pytest.raises(GpufleetError, match="gpufleet_routing_gateway"):
        hub_objects(art, "aigateway")
    (part, index), _n = hub_objects(art, "none")
    assert json.loads(part["data"]["routing.json"])["model"] == model(art)
    assert json.loads(index["data"]["routing.json"])["models"][0]["configmaps"] == ["gpufleet-routing-prod.chat"]
    assert assemble_artifact([part, index], FLEET) == art


# --------------------------------------------------------------------------------------------------------------------
# The render directory's _fleet/routing/ and the hub
# --------------------------------------------------------------------------------------------------------------------


def write(root: Any, objs: list[dict[str, Any]], fleet_name: str = FLEET) -> Any:
    txn = Transaction(root)
    txn.plan_fleet_files(
        ROUTING_DIR, {routing_relpath(o).rsplit("/", 1)[1]: o for o in objs}, ROUTING_OWNER, fleet_name
    )
    return txn.commit()


def test_render_dir_routing_files_are_written_updated_and_pruned_per_fleet(tmp_path):
    objs, _n = hub_objects(artifact_for(fleet()), "httproute", gateway=GATEWAY)
    first = write(tmp_path, objs)
    names = sorted(p.name for p in (tmp_path / "_fleet" / "routing").iterdir())
    assert names == sorted(routing_relpath(o).rsplit("/", 1)[1] for o in objs)
    assert len(first.written) == len(objs) and write(tmp_path, objs).written == []  # idempotent
    route = yaml.safe_load((tmp_path / "_fleet/routing/ml.httproute-chat.yaml").read_text())
    assert [r["weight"] for r in route["spec"]["rules"][0]["backendRefs"]] == [3, 2, 1]
    # another fleet's file in the same directory is never pruned
    other = dict(
        objs[0],
        metadata={**objs[0]["metadata"], "name": "theirs", "labels": {**ROUTING_OWNER, "gpufleet.io/fleet": "b"}},
    )
    write(tmp_path, [other], fleet_name="b")
    drained, _n = hub_objects(artifact_for(fleet(), drained=("c1", "c2", "c3")), "none")
    assert [o["kind"] for o in objs[:2]] == ["ConfigMap", "ConfigMap"] and len(drained) == 2  # the artifact
    out = write(tmp_path, drained)
    assert sorted(p.rsplit("/", 1)[1] for p in out.removed) == sorted(
        routing_relpath(o).rsplit("/", 1)[1] for o in objs[2:]
    )
    assert (tmp_path / "_fleet/routing" / routing_relpath(other).rsplit("/", 1)[1]).exists()


def test_render_dir_refuses_a_symlinked_routing_directory(tmp_path):
    (tmp_path / "_fleet").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "_fleet" / "routing").symlink_to(tmp_path / "elsewhere")
    objs, _n = hub_objects(artifact_for(fleet()), "none")
    with pytest.raises(GpufleetError, match="symlink"):
        write(tmp_path, objs)
    assert list((tmp_path / "elsewhere").iterdir()) == []


class Hub:
    def __init__(self, live: list[dict[str, Any]] | None = None) -> None:
        self.live = live or []
        self.calls: list[tuple[str, str]] = []

    def ensure_namespace(self, name: str, dry_run: bool = False) -> bool:
        return False

    def apply(self, obj: dict[str, Any], field_manager: str, dry_run: bool = False) -> dict[str, Any]:
        self.calls.append(("apply", f"{obj['kind']}/{obj['metadata']['name']}"))
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(len(self.calls))}}

    def list(self, api_version: str, kind: str, selector: Any = (), managed_by: Any = None) -> list[dict[str, Any]]:
        return [o for o in self.live if (o["apiVersion"], o["kind"]) == (api_version, kind)]

    def delete(self, obj: dict[str, Any]) -> None:
        self.calls.append(("delete", f"{obj['kind']}/{obj['metadata']['name']}"))


def test_hub_sync_applies_every_object_before_deleting_what_left():
    before, _n = hub_objects(artifact_for(fleet()), "httproute", gateway=GATEWAY)
    # c3 no longer holds replicas: its ExternalName Service goes, after the route without it is stored
    dep = fleet()["deployments"][0]
    reps = [r for r in six_replicas(dep) if r["cluster"] != "c3"]
    art = build_routing(fleet(), placed_counts(reps), clusters=cluster_settings(ADDRESSES))
    after, _n = hub_objects(art, "httproute", gateway=GATEWAY)
    hub = Hub(before)
    out = sync_hub(hub, after, FLEET)
    assert out.deleted == ["Service/ml/chat-c3"]
    assert hub.calls[-1] == ("delete", "Service/chat-c3")
    assert all(kind == "apply" for kind, _o in hub.calls[:-1]) and out.stored["HTTPRoute/ml/chat"]
    foreign = {
        **before[1],
        "metadata": {**before[1]["metadata"], "labels": {**ROUTING_OWNER, "gpufleet.io/fleet": "b"}},
    }
    assert sync_hub(Hub([foreign]), after, FLEET).deleted == []


def test_hub_sync_applies_nothing_the_hub_already_holds():
    objs, _n = hub_objects(artifact_for(fleet()), "llmd", namespace="llm-d")

    class Stored(Hub):
        def apply(self, obj: dict[str, Any], field_manager: str, dry_run: bool = False) -> dict[str, Any]:
            stored = super().apply(obj, field_manager, dry_run)
            stored["metadata"]["managedFields"] = [
                {"manager": field_manager, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields(obj)}
            ]
            self.live = [
                o for o in self.live if o["metadata"]["name"] != obj["metadata"]["name"] or o["kind"] != obj["kind"]
            ]
            self.live.append(stored)
            return stored

    hub = Stored()
    first = sync_hub(hub, objs, FLEET)
    assert len(first.applied) == len(objs)
    again = sync_hub(hub, objs, FLEET)
    assert again.applied == [] and again.deleted == [] and set(again.stored) == set(first.stored)
    changed, _n = hub_objects(artifact_for(fleet(), drained=("c1",)), "llmd", namespace="llm-d")
    third = sync_hub(hub, changed, FLEET)
    assert sorted(third.applied) == [
        "ConfigMap/llm-d/gpufleet-llmd-endpoints-prod.chat",
        "ConfigMap/llm-d/gpufleet-routing-prod",
        "ConfigMap/llm-d/gpufleet-routing-prod.chat",
    ]


def fields(obj: Any) -> Any:
    """The managedFields FieldsV1 of ``obj`` (what a server-side apply of it owns), lists keyed by name."""
    if isinstance(obj, dict):
        return {f"f:{k}": fields(v) for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if isinstance(obj, list):
        out = {}
        for item in obj:
            named = isinstance(item, dict) and "name" in item
            key = f"k:{json.dumps({'name': item['name']})}" if named else f"v:{json.dumps(item)}"
            out[key] = fields(item) if isinstance(item, dict) else {}
        return out
    return {}
