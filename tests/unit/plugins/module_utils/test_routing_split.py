"""The routing artifact split into ConfigMaps the API server accepts (issue 26, docs/routing.md): an index and a
ConfigMap per model, a model over many clusters cut into numbered parts; read back as the same artifact, pruned when
it shrinks, the single ConfigMap of earlier versions still read; and the 1 MiB guard on what is written or applied."""

from __future__ import annotations

import base64
import json
from typing import Any

import k8s_schemas
import pytest
import yaml
from action_case import run_action

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction, dump
from ansible_collections.gpufleet.serving.plugins.module_utils.object_size import MAX_DATA_BYTES, data_bytes
from ansible_collections.gpufleet.serving.plugins.module_utils.routing import (
    ARTIFACT_KEY,
    PART_BYTES,
    ROUTING_DIR,
    ROUTING_OWNER,
    assemble_artifact,
    build_routing,
    cluster_settings,
    hub_objects,
    read_artifact,
    routing_relpath,
    still_routed,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.routing_hub import read_routing_artifact, sync_hub

FLEET = "big"
NS = "gpufleet-routing"


def clusters(n: int) -> list[str]:
    return [f"cluster-{i:04d}" for i in range(n)]


def big_artifact(n: int = 6000, wide: int = 6000) -> dict[str, Any]:
    """``n`` clusters with gateway addresses; 20 models of ``n // 20`` replicas (one per cluster in turn, as
    benchmarks/scale.py places its fleet) and ``wide``, a model with a replica on each of the first ``wide``
    clusters. At 6,000 the old single ConfigMap holds about 2 MB and ``wide`` alone about 1.2 MB."""
    names = clusters(n)
    per = n // 20
    deps = [{"name": f"model-{i:02d}", "namespace": "bench", "replicas": per, "port": 8000} for i in range(20)]
    deps.append({"name": "wide", "namespace": "bench", "replicas": wide, "port": 8000})
    placed = {d["name"]: {names[(i * per + k) % n]: 1 for k in range(per)} for i, d in enumerate(deps[:20])}
    placed["wide"] = dict.fromkeys(names[:wide], 1)
    hostvars = {
        c: {"gpufleet_routing_address": f"gw.{c}.example.com", "gpufleet_routing_priority": i % 2}
        for i, c in enumerate(names)
    }
    return build_routing(
        {"name": FLEET, "deployments": deps}, placed, clusters=cluster_settings(hostvars), drained=[names[0]]
    )


def old_single_configmap(artifact: dict[str, Any]) -> dict[str, Any]:
    """The one ConfigMap earlier versions wrote (and applied to the hub) for the whole artifact."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"gpufleet-routing-{FLEET}",
            "namespace": NS,
            "labels": {**ROUTING_OWNER, "gpufleet.io/fleet": FLEET},
        },
        "data": {ARTIFACT_KEY: json.dumps(artifact, indent=1, sort_keys=True) + "\n"},
    }


def write(root: Any, objs: list[dict[str, Any]], fleet_name: str = FLEET) -> Any:
    """What fleet_routing does with the render directory."""
    txn = Transaction(root)
    txn.plan_fleet_files(
        ROUTING_DIR, {routing_relpath(o).rsplit("/", 1)[1]: o for o in objs}, ROUTING_OWNER, fleet_name
    )
    return txn.commit()


def routing_files(root: Any) -> list[str]:
    return sorted(p.name for p in (root / "_fleet" / "routing").glob("*.yaml"))


@pytest.fixture(scope="module")
def big() -> dict[str, Any]:
    return big_artifact()


def test_a_fleet_whose_single_routing_configmap_would_pass_1_mib_is_split_under_the_limit(big, tmp_path):
    assert data_bytes(old_single_configmap(big)) > 1.5 * MAX_DATA_BYTES  # what was refused before
    objs, _notes = hub_objects(big, "none", namespace=NS)
    sizes = {o["metadata"]["name"]: data_bytes(o) for o in objs}
    assert all(o["kind"] == "ConfigMap" for o in objs) and len(objs) == len(sizes)
    assert max(sizes.values()) < PART_BYTES < MAX_DATA_BYTES  # well under 1 MiB, and a client-side apply's 256 KiB
    # 20 models in one ConfigMap each; "wide" (6,000 clusters, about 1.2 MB) in numbered parts; the index last
    wide = [n for n in sizes if n.startswith("gpufleet-routing-big.wide")]
    assert wide[:2] == ["gpufleet-routing-big.wide", "gpufleet-routing-big.wide.2"] and len(wide) >= 9
    assert len(objs) == 20 + len(wide) + 1 and objs[-1]["metadata"]["name"] == "gpufleet-routing-big"
    index = json.loads(objs[-1]["data"][ARTIFACT_KEY])
    assert index["layout"] == "index" and {k: index[k] for k in ("version", "fleet", "mode", "renderer")} == {
        "version": 1,
        "fleet": FLEET,
        "mode": "render",
        "renderer": "none",
    }
    assert next(m for m in index["models"] if m["deployment"] == "wide")["configmaps"] == wide
    # Compact JSON in the parts: one line each.
    assert all(o["data"][ARTIFACT_KEY].count("\n") == 1 for o in objs[:-1])
    # Read back, the routing is exactly the artifact: from the objects (the hub), and from the render directory.
    assert assemble_artifact(objs, FLEET) == big
    write(tmp_path, objs)
    assert len(routing_files(tmp_path)) == len(objs)
    assert read_routing_artifact(tmp_path, FLEET) == big
    k8s_schemas.validate_objects(objs[-3:])  # ConfigMaps whose names are DNS subdomains (dots)


def test_a_shrink_removes_the_parts_no_longer_needed_in_the_render_dir_and_on_the_hub(big, tmp_path):
    objs, _notes = hub_objects(big, "none", namespace=NS)
    write(tmp_path, objs)
    theirs = dict(objs[0], metadata={**objs[0]["metadata"], "labels": {**ROUTING_OWNER, "gpufleet.io/fleet": "other"}})
    theirs["metadata"]["name"] = "gpufleet-routing-other.model-00"
    write(tmp_path, [theirs], fleet_name="other")
    # wide shrinks to 100 clusters (one ConfigMap), model-19 goes
    smaller = big_artifact(wide=100)
    smaller["models"] = [m for m in smaller["models"] if m["deployment"] != "model-19"]
    after, _notes = hub_objects(smaller, "none", namespace=NS)
    out = write(tmp_path, after)
    gone = sorted({routing_relpath(o) for o in objs} - {routing_relpath(o) for o in after})
    assert sorted(out.removed) == gone
    assert "_fleet/routing/gpufleet-routing.configmap-gpufleet-routing-big.model-19.yaml" in gone
    assert "_fleet/routing/gpufleet-routing.configmap-gpufleet-routing-big.wide.2.yaml" in gone
    assert "_fleet/routing/gpufleet-routing.configmap-gpufleet-routing-big.wide.yaml" not in gone
    assert read_routing_artifact(tmp_path, FLEET) == smaller
    assert "gpufleet-routing.configmap-gpufleet-routing-other.model-00.yaml" in routing_files(tmp_path)  # kept

    # On the hub: every part and then the index is applied before anything is deleted; the parts no longer
    # rendered are deleted.
    hub = Hub([{**o, "metadata": {**o["metadata"], "resourceVersion": "1"}} for o in objs])
    outcome = sync_hub(hub, after, FLEET)
    deleted = sorted(
        o["metadata"]["name"] for o in objs if o["metadata"]["name"] not in {a["metadata"]["name"] for a in after}
    )
    assert sorted(k.rsplit("/", 1)[1] for k in outcome.deleted) == deleted
    assert [what for what, _n in hub.calls] == ["apply"] * len(outcome.applied) + ["delete"] * len(deleted)
    applied = [name for what, name in hub.calls if what == "apply"]
    assert applied[-1] == "gpufleet-routing-big"  # the index last: a reader never finds a part it names missing
    assert assemble_artifact(after, FLEET) == smaller


class Hub:
    """What sync_hub calls of a ClusterAPI."""

    name = "hub"

    def __init__(self, live: list[dict[str, Any]]) -> None:
        self.live = live
        self.calls: list[tuple[str, str]] = []

    def ensure_namespace(self, name: str, dry_run: bool = False) -> bool:
        return False

    def list(self, api_version: str, kind: str, selector: Any = (), managed_by: Any = None) -> list[dict[str, Any]]:
        return [o for o in self.live if (o["apiVersion"], o["kind"]) == (api_version, kind)]

    def apply(self, obj: dict[str, Any], field_manager: str, dry_run: bool = False) -> dict[str, Any]:
        self.calls.append(("apply", obj["metadata"]["name"]))
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}

    def delete(self, obj: dict[str, Any]) -> None:
        self.calls.append(("delete", obj["metadata"]["name"]))


def test_the_single_configmap_of_an_earlier_version_is_still_read_and_replaced(tmp_path):
    small = big_artifact(n=40, wide=3)
    old = old_single_configmap(small)
    (tmp_path / "_fleet" / "routing").mkdir(parents=True)
    path = tmp_path / "_fleet" / "routing" / f"{NS}.configmap-gpufleet-routing-{FLEET}.yaml"
    path.write_text(dump(old))
    assert read_artifact(old) == small
    assert read_routing_artifact(tmp_path, FLEET) == small
    # an upgraded render still holds what the last routing file sends traffic to: wide lost its replica on cluster-0002
    replicas = [{"deployment": "wide", "cluster": c} for c in ("cluster-0001",)]
    replicas += [
        {"deployment": m["deployment"], "cluster": c["cluster"]}
        for m in small["models"]
        if m["deployment"] != "wide"
        for c in m["clusters"]
    ]
    assert still_routed(read_routing_artifact(tmp_path, FLEET), replicas) == {("wide", "cluster-0002")}
    # the new run writes the split form: the index takes the old file's name, a ConfigMap per model beside it
    objs, _notes = hub_objects(small, "none", namespace=NS)
    out = write(tmp_path, objs)
    assert out.removed == [] and path.name in routing_files(tmp_path) and len(routing_files(tmp_path)) == 22
    assert read_artifact(yaml.safe_load(path.read_text())) is None  # an index, not the whole artifact
    assert read_routing_artifact(tmp_path, FLEET) == small


def test_a_part_missing_or_of_another_run_leaves_only_its_model_out(big, tmp_path):
    objs, _notes = hub_objects(big, "none", namespace=NS)
    write(tmp_path, objs)
    routing = tmp_path / "_fleet" / "routing"
    (routing / f"{NS}.configmap-gpufleet-routing-big.wide.3.yaml").unlink()
    # model-05's ConfigMap from another run: a weight changed
    path = routing / f"{NS}.configmap-gpufleet-routing-big.model-05.yaml"
    obj = yaml.safe_load(path.read_text())
    doc = json.loads(obj["data"][ARTIFACT_KEY])
    doc["model"]["clusters"][0]["weight"] += 1
    obj["data"][ARTIFACT_KEY] = json.dumps(doc)
    path.write_text(dump(obj))
    read = read_routing_artifact(tmp_path, FLEET)
    assert read is not None
    assert [m["deployment"] for m in read["models"]] == [
        m["deployment"] for m in big["models"] if m["deployment"] not in ("model-05", "wide")
    ]
    assert read["models"] == [m for m in big["models"] if m["deployment"] not in ("model-05", "wide")]


# --------------------------------------------------------------------------------------------------------------------
# The 1 MiB guard
# --------------------------------------------------------------------------------------------------------------------


def configmap(name: str, **data: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ml"}, **data}


def test_data_is_measured_as_the_api_server_does():
    assert data_bytes(configmap("x", data={"a": "x" * MAX_DATA_BYTES})) == MAX_DATA_BYTES
    assert data_bytes(configmap("x", data={"a": "é" * 10, "b": "12"})) == 22  # UTF-8 bytes, keys not counted
    raw = bytes(range(256)) * 1000
    assert data_bytes(configmap("x", binaryData={"b": base64.b64encode(raw).decode()}, data={"a": "1"})) == 256_001
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"k": base64.b64encode(b"abcd").decode(), "j": "YQ=="},
    }
    assert data_bytes(secret) == 5
    assert data_bytes({**secret, "stringData": {"k": "xy", "new": "é"}}) == 1 + 2 + 2  # stringData wins over data
    assert data_bytes({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}) is None


def test_an_object_over_1_mib_is_refused_naming_it_and_nothing_is_written(tmp_path):
    over = configmap("huge", data={"a": "x" * MAX_DATA_BYTES, "b": "y"})
    fine = configmap("fine", data={"a": "x" * MAX_DATA_BYTES})
    # the serving render's path (a cluster directory)
    txn = Transaction(tmp_path)
    txn.plan("c1", [fine])
    with pytest.raises(
        GpufleetError, match=r"manifest_dir: ConfigMap/ml/huge holds 1,048,577 bytes of data: over the 1,048,576 bytes"
    ):
        txn.plan("c1", [over])
    assert not (tmp_path / "c1").exists()
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "key", "namespace": "ml"},
        "stringData": {"k": "é" * 600_000},
    }
    with pytest.raises(GpufleetError) as info:
        Transaction(tmp_path).plan("c1", [secret])
    assert "Secret/ml/key holds 1,200,000 bytes" in str(info.value) and "é" not in str(info.value)  # never a value
    # the routing files' path
    labels = {**ROUTING_OWNER, "gpufleet.io/fleet": FLEET}
    routed = {**over, "metadata": {**over["metadata"], "labels": labels}}
    with pytest.raises(GpufleetError, match="ConfigMap/ml/huge holds 1,048,577 bytes"):
        write(tmp_path, [routed])
    assert not (tmp_path / "_fleet").exists()
    # the hub: nothing applied
    hub = Hub([])
    with pytest.raises(GpufleetError, match="gpufleet_routing_hub hub: ConfigMap/ml/huge holds 1,048,577 bytes"):
        sync_hub(hub, [fine, routed], FLEET)
    assert hub.calls == []


def test_llmd_endpoints_files_are_one_per_model_and_one_over_1_mib_is_refused_before_writing(tmp_path):
    """The llm-d endpoints files are one per model (each model's endpoint picker reads its own): 20 models on 6,000
    clusters each fit (one file for the fleet was over 1 MiB there); one model on 6,000 clusters does not, and the
    run fails naming its file instead of writing a file the hub would refuse."""
    names = clusters(6000)
    deps = [{"name": f"model-{i:02d}", "namespace": "bench", "replicas": 300, "port": 8000} for i in range(20)]
    replicas = [
        {"deployment": d["name"], "cluster": names[i * 300 + k]} for i, d in enumerate(deps) for k in range(300)
    ]
    hostvars = {c: {"gpufleet_routing_address": f"gw.{c}.example.com"} for c in names}
    fleet = {"name": FLEET, "clusters": [{"name": c} for c in names], "deployments": deps}
    render_dir = tmp_path / "rendered"
    args = {"fleet": fleet, "replicas": replicas, "render_dir": str(render_dir), "renderer": "llmd"}
    result = run_action("fleet_routing", args, {"hostvars": hostvars})
    assert not result.get("failed"), result.get("msg")
    endpoints = list((render_dir / "_fleet" / "routing").glob("*gpufleet-llmd-endpoints-*.yaml"))
    assert len(endpoints) == 20 and all(f.stat().st_size < 1_048_576 for f in endpoints)
    assert len(routing_files(render_dir)) == 21 + 20
    one = {**fleet, "deployments": [{**deps[0], "replicas": 6000}]}
    args = {**args, "fleet": one, "replicas": [{"deployment": "model-00", "cluster": c} for c in names]}
    args["render_dir"] = str(tmp_path / "one")
    result = run_action("fleet_routing", args, {"hostvars": hostvars})
    assert result.get("failed") and "gpufleet-llmd-endpoints-big.model-00 holds" in result["msg"], result.get("msg")
    assert "1,048,576 bytes" in result["msg"]
    assert not (tmp_path / "one" / "_fleet").exists()
