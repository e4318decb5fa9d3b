"""Every action plugin of the collection: arguments from its docs, the one failure shape, its work end to end."""

from __future__ import annotations

import json
import pkgutil

import pytest
import yaml
from action_case import run_action

from ansible_collections.gpufleet.serving.plugins import action as action_pkg
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction

ACTIONS = sorted(m.name for m in pkgutil.iter_modules(action_pkg.__path__))


def test_every_action_plugin_uses_the_base():
    import importlib

    assert ACTIONS == [
        "fleet_apply",
        "fleet_info",
        "fleet_manifests",
        "fleet_placement",
        "fleet_plan",
        "fleet_read",
        "fleet_report",
        "fleet_routing",
        "fleet_state",
        "manifest_dir",
    ]
    for name in ACTIONS:
        cls = importlib.import_module(f"ansible_collections.gpufleet.serving.plugins.action.{name}").ActionModule
        assert issubclass(cls, GpufleetAction) and name == cls.MODULE


@pytest.mark.parametrize("name", ACTIONS)
def test_an_unknown_option_fails_with_the_one_shape(name):
    result = run_action(name, {"no_such_option": 1})
    assert result["failed"] is True
    assert result["msg"].startswith(f"{name}: ")
    assert "no_such_option" in result["msg"]
    assert result["errors"] and set(result["errors"][0]) == {"path", "reason"}


@pytest.mark.parametrize(
    "name", ["fleet_apply", "fleet_manifests", "fleet_placement", "fleet_read", "fleet_report", "manifest_dir"]
)
def test_a_missing_required_option_fails_with_the_one_shape(name):
    result = run_action(name, {})
    assert result["failed"] is True and result["msg"].startswith(f"{name}: ")
    assert "missing required arguments" in result["msg"]


def _fleet(task_vars):
    result = run_action("fleet_info", {}, task_vars)
    assert not result.get("failed"), result.get("msg")
    return result


def test_fleet_info_validates_and_returns_the_contract(example_task_vars):
    result = _fleet(example_task_vars)
    assert result["changed"] is False
    assert sorted(c["name"] for c in result["fleet"]["clusters"]) == sorted(example_task_vars["hostvars"])
    assert result["contract"]["serving_owner_selector"][1] == "gpufleet.io/component=serving"
    assert any(line.startswith("CLUSTER") for line in result["summary"])


def test_fleet_info_reports_every_problem_with_its_path(example_task_vars):
    example_task_vars["gpufleet_model_deployments"][0]["replicas"] = -1
    example_task_vars["gpufleet_model_deployments"][0]["engines"][0]["members"][0]["role"] = "Boss"
    result = run_action("fleet_info", {}, example_task_vars)
    assert result["failed"] is True
    assert result["msg"].startswith("fleet_info: the fleet is not valid; nothing was changed.\n")
    paths = {e["path"] for e in result["errors"]}
    assert "gpufleet_model_deployments[0] (qwen-demo).replicas" in paths
    assert "gpufleet_model_deployments[0] (qwen-demo).engines[0] (main).members[0].role" in paths


def test_fleet_info_argument_types_follow_its_documentation(example_task_vars):
    result = run_action("fleet_info", {"inference_classes": ["not", "a", "dict"]}, example_task_vars)
    assert result["failed"] is True and "inference_classes" in result["msg"]


def test_fleet_info_pins_the_connections_of_the_hosts_it_is_given(example_task_vars):
    hosts = sorted(example_task_vars["hostvars"])
    for i, host in enumerate(hosts):
        example_task_vars["hostvars"][host]["gpufleet_kubeconfig"] = f"/kube/{host}" if i else None
        example_task_vars["hostvars"][host]["gpufleet_context"] = None if i else f"{host}-ctx"
    pinned = run_action("fleet_info", {"pin_connections": hosts}, example_task_vars)
    assert not pinned.get("failed"), pinned.get("msg")
    assert pinned["connections"] == {
        h: ({"kubeconfig": f"/kube/{h}"} if i else {"context": f"{h}-ctx"}) for i, h in enumerate(hosts)
    }
    assert "connections" not in run_action("fleet_info", {}, example_task_vars)  # render mode pins nothing

    example_task_vars["hostvars"][hosts[1]]["gpufleet_kubeconfig"] = ""
    unpinned = run_action("fleet_info", {"pin_connections": hosts}, example_task_vars)
    assert unpinned["failed"] is True and f"cluster(s) {hosts[1]} have neither" in unpinned["msg"]
    assert "nothing was changed" in unpinned["msg"] and unpinned["errors"][0]["reason"].startswith("cluster(s)")
    stranger = run_action("fleet_info", {"pin_connections": ["nope"]}, example_task_vars)
    assert "'nope' is not an inventory host" in stranger["msg"]


def test_fleet_info_unknown_group(example_task_vars):
    result = run_action("fleet_info", {"group": "nope"}, example_task_vars)
    assert result["errors"] == [
        {"path": "", "reason": "inventory group 'nope' does not exist: put every fleet cluster in it"}
    ]


def test_place_render_write_and_read_back(example_task_vars, tmp_path):
    fleet = _fleet(example_task_vars)["fleet"]
    placed = run_action("fleet_placement", {"fleet": fleet, "render_dir": str(tmp_path)})
    assert not placed.get("failed"), placed.get("msg")
    assert placed["shortfalls"] == [] and placed["changed"] is True
    assert all("replicas" not in res for res in placed["results"].values())
    # the grouped views hold the replica records (AWX workflows and the molecule verify read them)
    names = sorted(r["name"] for r in placed["replicas"])
    assert sorted(r["name"] for rs in placed["by_deployment"].values() for r in rs) == names
    assert all(r["cluster"] == c for c, rs in placed["by_cluster"].items() for r in rs)
    ungrouped = run_action("fleet_placement", {"fleet": fleet, "grouped": False})
    assert "by_deployment" not in ungrouped and "by_cluster" not in ungrouped
    assert ungrouped["replicas"] == placed["replicas"] and ungrouped["status"] == placed["status"]

    check = run_action(
        "fleet_manifests",
        {"fleet": fleet, "replicas": placed["replicas"], "render_dir": str(tmp_path)},
        check_mode=True,
    )
    assert check["written"] and not list(tmp_path.rglob("*.yaml"))  # check mode writes nothing

    rendered = run_action(
        "fleet_manifests", {"fleet": fleet, "replicas": placed["replicas"], "render_dir": str(tmp_path)}
    )
    assert rendered["changed"] is True and rendered["written"] == check["written"]
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.yaml"))
    assert files == sorted(rendered["written"])

    # Stickiness through the render directory: the same placement, nothing to write.
    again = run_action("fleet_placement", {"fleet": fleet, "render_dir": str(tmp_path)})
    assert again["changed"] is False and again["replicas"] == placed["replicas"]
    same = run_action("fleet_manifests", {"fleet": fleet, "replicas": again["replicas"], "render_dir": str(tmp_path)})
    assert same["changed"] is False and same["unchanged"] == len(files)


def test_fleet_placement_fails_with_the_one_shape_on_a_bad_fallback(example_task_vars):
    fleet = _fleet(example_task_vars)["fleet"]
    bad = {"cluster": "onprem-a", "deployment": fleet["deployments"][0]["name"], "index": "x"}
    result = run_action("fleet_placement", {"fleet": fleet, "unreachable": ["onprem-a"], "fallback_replicas": [bad]})
    assert result["failed"] is True and result["msg"].startswith("fleet_placement: ")
    assert any(e["path"].startswith("observed[0]") for e in result["errors"])


def _no_usable_nodes(fleet, cluster):
    """An observation of ``cluster`` (fleet_read's capacity shape) in which every node of every pool is cordoned."""
    pools = next(c["pools"] for c in fleet["clusters"] if c["name"] == cluster)
    return {
        "cluster": cluster,
        "pools": [
            {
                "pool": p["name"],
                "class": p["class"],
                "declared_nodes": p["nodes"],
                "labelled_nodes": p["nodes"],
                "usable_nodes": 0,
                "notes": [f"{p['nodes']} of {p['nodes']} nodes cordoned"],
                "nodes": {},
            }
            for p in pools
        ],
        "unlabelled_nodes": [],
        "unknown_pools": [],
        "foreign_claims": [],
        "drift": [f"{cluster}/{p['name']}: {p['nodes']} of {p['nodes']} nodes cordoned" for p in pools],
    }


def test_fleet_placement_places_against_the_observed_capacity(example_task_vars):
    fleet = _fleet(example_task_vars)["fleet"]
    declared = run_action("fleet_placement", {"fleet": fleet})
    busy = declared["replicas"][0]["cluster"]
    capacity = [_no_usable_nodes(fleet, busy)]
    same = run_action("fleet_placement", {"fleet": fleet, "cluster_capacity": capacity})
    assert not same.get("failed"), same.get("msg")
    assert same["replicas"] == declared["replicas"]  # declared capacity: drift is reported, placement unchanged
    assert same["drift"] == capacity and same["drift_lines"] == capacity[0]["drift"]
    observed = run_action("fleet_placement", {"fleet": fleet, "cluster_capacity": capacity, "capacity": "observed"})
    assert not observed.get("failed"), observed.get("msg")
    assert busy not in {r["cluster"] for r in observed["replicas"]}
    # an unreachable cluster's observation (there is none in practice) is left out
    gone = run_action(
        "fleet_placement", {"fleet": fleet, "cluster_capacity": capacity, "capacity": "observed", "unreachable": [busy]}
    )
    assert gone["drift"] == [] and gone["drift_lines"] == []


def test_manifest_dir_writes_prunes_and_reports(tmp_path):
    owner = {"app.kubernetes.io/managed-by": "tests"}
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "ns", "labels": dict(owner)},
        "data": {"k": "v"},
    }
    first = run_action("manifest_dir", {"path": str(tmp_path), "cluster": "c1", "objects": [obj], "owner": owner})
    assert first["changed"] is True and first["written"] == ["c1/ns/configmap-a.yaml"]
    assert yaml.safe_load((tmp_path / "c1/ns/configmap-a.yaml").read_text())["data"] == {"k": "v"}
    second = run_action("manifest_dir", {"path": str(tmp_path), "cluster": "c1", "objects": [obj], "owner": owner})
    assert second["changed"] is False and second["unchanged"] == 1
    pruned = run_action("manifest_dir", {"path": str(tmp_path), "cluster": "c1", "objects": [], "owner": owner})
    assert pruned["removed"] == ["c1/ns/configmap-a.yaml"] and not (tmp_path / "c1/ns/configmap-a.yaml").exists()


def test_manifest_dir_turns_bad_objects_into_the_one_shape(tmp_path):
    result = run_action("manifest_dir", {"path": str(tmp_path), "cluster": "c1", "objects": [{"kind": "ConfigMap"}]})
    assert result["failed"] is True and result["msg"].startswith("manifest_dir: ")
    assert result["errors"][0]["path"] == ""


def _closed_port_kubeconfig(tmp_path) -> str:
    """A kubeconfig for an API server that is not there (nothing listens on port 1): a cluster that cannot be reached."""
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "gone", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "secret-token-never-printed"}}],
                "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}],
                "current-context": "gone",
            }
        )
    )
    return str(path)


def test_fleet_read_names_a_cluster_it_cannot_read(tmp_path):
    result = run_action(
        "fleet_read",
        {
            "connections": {"gone": {"kubeconfig": _closed_port_kubeconfig(tmp_path)}},
            "reads": [{"api_version": "v1", "kind": "Service"}],
            "request_timeout": 5,
        },
    )
    assert not result.get("failed"), result
    assert result["unreachable_clusters"] == ["gone"] and result["objects_by_cluster"] == {}
    assert "secret-token-never-printed" not in str(result)


def test_fleet_read_observes_no_capacity_of_a_cluster_it_cannot_read(tmp_path, example_task_vars):
    fleet = _fleet(example_task_vars)["fleet"]
    args = {
        "connections": {"gone": {"kubeconfig": _closed_port_kubeconfig(tmp_path)}},
        "reads": [{"api_version": "v1", "kind": "Service"}],
        "request_timeout": 5,
    }
    assert "capacity" not in run_action("fleet_read", args)
    result = run_action("fleet_read", {**args, "fleet": fleet})
    assert not result.get("failed"), result
    assert result["unreachable_clusters"] == ["gone"] and result["capacity"] == []
    bad = run_action("fleet_read", {**args, "fleet": {**fleet, "classes": ["not", "a", "mapping"]}})
    assert bad["failed"] is True and bad["msg"].startswith("fleet_read: ")


def test_fleet_apply_records_state_but_keeps_a_failed_cluster_as_it_was(tmp_path):
    state = tmp_path / "state.json"
    previous = [{"deployment": "chat", "cluster": "gone", "index": 0, "replica": "chat-old"}]
    state.write_text(json.dumps(previous))
    replicas = [
        {"deployment": "chat", "cluster": "gone", "index": 0, "replica": "chat-new"},
        {"deployment": "chat", "cluster": "idle", "index": 1, "replica": "chat-idle"},
    ]
    result = run_action(
        "fleet_apply",
        {
            "connections": {"gone": {"kubeconfig": _closed_port_kubeconfig(tmp_path)}},
            "objects_by_cluster": {"gone": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}}]},
            "fleet_name": "example",
            "state_file": str(state),
            "replicas": replicas,
            "request_timeout": 5,
        },
    )
    assert result["failed"] is True and result["msg"].startswith("fleet_apply: clusters not reconciled: gone: ")
    assert set(result["failed_clusters"]) == {"gone"}
    assert "secret-token-never-printed" not in str(result)
    # the failed cluster keeps what was recorded for it; the others get this run's placement
    assert sorted(r["replica"] for r in json.loads(state.read_text())) == ["chat-idle", "chat-old"]


def test_fleet_apply_renders_the_fleet_itself_for_the_clusters_it_reaches(example_task_vars, tmp_path):
    fleet = _fleet(example_task_vars)["fleet"]
    placed = run_action("fleet_placement", {"fleet": fleet})
    reached = placed["replicas"][0]["cluster"]
    args = {"connections": {reached: {"kubeconfig": _closed_port_kubeconfig(tmp_path)}}, "request_timeout": 5}
    # Replicas on clusters without a connection are not an error here (the role leaves unreachable clusters out);
    # the one cluster given is reconciled with its own rendered objects, and fails (nothing listens).
    result = run_action("fleet_apply", {**args, "fleet": fleet, "replicas": placed["replicas"]})
    assert result["failed"] is True and set(result["failed_clusters"]) == {reached}
    both = run_action("fleet_apply", {**args, "fleet": fleet, "replicas": [], "objects_by_cluster": {}})
    assert both["msg"] == "fleet_apply: exactly one of objects_by_cluster and fleet is required"
    assert "exactly one of" in run_action("fleet_apply", args)["msg"]
    no_replicas = run_action("fleet_apply", {**args, "fleet": fleet})
    assert no_replicas["msg"] == "fleet_apply: replicas is required with fleet"


def test_fleet_apply_refuses_objects_for_a_cluster_it_cannot_reach():
    result = run_action(
        "fleet_apply", {"connections": {}, "objects_by_cluster": {"x": [{"kind": "Service"}]}, "fleet_name": "f"}
    )
    assert result["failed"] is True and "without a connection: x" in result["msg"]


def test_fleet_apply_needs_the_fleet_it_reconciles():
    """Fleet identity: objects_by_cluster alone does not say whose objects may be pruned."""
    args = {"connections": {}, "objects_by_cluster": {}}
    assert run_action("fleet_apply", args)["msg"] == (
        "fleet_apply: fleet_name is required with objects_by_cluster (the fleet whose objects they are)"
    )
    bad = run_action("fleet_apply", {**args, "fleet_name": "no spaces allowed"})
    assert bad["failed"] is True and "fleet_name: must be a Kubernetes label value" in bad["msg"]
    unnamed = run_action("fleet_apply", {"connections": {}, "fleet": {"clusters": []}, "replicas": []})
    assert "the fleet carries no name" in unnamed["msg"]


def test_fleet_info_never_prints_an_inline_kubeconfig_or_an_s3_secret(example_task_vars):
    token, secret = "sentinel-bearer-token-value", "sentinel/aws/secret+key"
    example_task_vars["hostvars"]["onprem-a"]["gpufleet_kubeconfig"] = {
        "apiVersion": "v1",
        "kind": "Config",
        "users": [{"name": "admin", "user": {"token": token}}],
    }
    example_task_vars["gpufleet_model_caches"][0]["source"] = {"s3": {"uri": f"s3://AKIASENTINEL:{secret}@models/q"}}
    result = run_action("fleet_info", {"pin_connections": ["onprem-a"]}, example_task_vars)
    assert result["failed"] is True
    paths = {e["path"] for e in result["errors"]}
    assert {
        "hostvars['onprem-a'].gpufleet_kubeconfig",
        "gpufleet_model_caches[0] (qwen-2-5-0-5b).source.s3.uri",
    } <= paths
    shown = json.dumps(result)
    for value in (token, secret, "AKIASENTINEL", "aws/secret"):
        assert value not in shown


def test_fleet_info_merges_every_gpufleet_model_deployments_variable(example_task_vars):
    """Issue 31: ``gpufleet_model_deployments`` then every ``gpufleet_model_deployments_*`` variable, by name."""
    qwen, llama, deepseek = example_task_vars["gpufleet_model_deployments"]
    example_task_vars["gpufleet_model_deployments"] = [qwen]
    example_task_vars["gpufleet_model_deployments_zeta"] = [deepseek]
    example_task_vars["gpufleet_model_deployments_alpha"] = [llama]
    result = _fleet(example_task_vars)
    assert [d["name"] for d in result["fleet"]["deployments"]] == ["qwen-demo", "llama-70b", "deepseek-v3"]

    example_task_vars["gpufleet_model_deployments_alpha"] = [{**llama, "replicas": "many"}, qwen]
    result = run_action("fleet_info", {}, example_task_vars)
    assert result["failed"] is True
    paths = {e["path"]: e["reason"] for e in result["errors"]}
    assert "gpufleet_model_deployments_alpha[0] (llama-70b).replicas" in paths
    assert "gpufleet_model_deployments[0] defines it too" in paths["gpufleet_model_deployments_alpha[1].name"]

    # The option, when given, is the whole list.
    result = run_action("fleet_info", {"model_deployments": [qwen]}, example_task_vars)
    assert [d["name"] for d in result["fleet"]["deployments"]] == ["qwen-demo"]
