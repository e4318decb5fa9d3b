"""GitOps-native render (issue 26): sync waves, workload Namespace files, the fleet directory, clusters that left the
inventory, per-cluster file counts and diffs (manifest_dir), and the serving stack's releases and fleet generator for
Flux and Argo CD (serving_stack)."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    CACHE_OWNER,
    SERVING_OWNER,
    STACK_OWNER,
    FleetIdentity,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import (
    Transaction,
    cluster_dirs,
    read_objects,
    sync,
    tree_token,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.gitops import decorate, layer_of
from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import (
    COMPONENTS,
    fleet_generator,
    plan_cluster,
)

REPO = Path(__file__).resolve().parents[5]
VERSIONS = yaml.safe_load((REPO / "roles/serving_stack/defaults/main.yml").read_text())["serving_stack_versions"]
GPU = {"name": "gpu", "driver": "gpu.nvidia.com", "device_class_name": "gpu.nvidia.com", "count": 8}
CLASSES = {"l4-1x": {"devices": [{**GPU, "count": 1}]}}
FLEET = FleetIdentity("prod")
WAVE = "argocd.argoproj.io/sync-wave"
LAYER = "gpufleet.io/sync-layer"


def serving(name: str, namespace: str = "ml-team", kind: str = "Service", fleet: str = "prod") -> dict:
    labels = {**SERVING_OWNER, "gpufleet.io/fleet": fleet, "gpufleet.io/deployment": "qwen"}
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": namespace, "labels": labels}}


def cache(name: str, namespace: str = "ml-team") -> dict:
    labels = {**CACHE_OWNER, "gpufleet.io/fleet": "prod"}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    }


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def annotations(path: Path) -> dict:
    return load(path)["metadata"].get("annotations") or {}


def write(root: Path, cluster: str, objects: list[dict], owner: dict, **kw) -> Transaction:
    txn = Transaction(root, gitops=kw.pop("gitops", None), diff=kw.pop("diff", False))
    txn.plan(cluster, objects, owner, fleet=kw.pop("fleet", FLEET), **kw)
    txn.commit()
    return txn


# --------------------------------------------------------------------------------------------------------------------
# Sync waves
# --------------------------------------------------------------------------------------------------------------------


def test_argocd_waves_order_stack_before_caches_before_serving(tmp_path):
    write(tmp_path, "c1", [cache("hydrator")], CACHE_OWNER, gitops="argocd")
    write(tmp_path, "c1", [serving("qwen-1")], SERVING_OWNER, gitops="argocd")
    waves = {rel: int(obj["metadata"]["annotations"][WAVE]) for _c, rel, obj in read_objects(tmp_path, ["c1"], None)}
    assert waves == {
        "c1/_cluster/namespace-ml-team.yaml": -30,
        "c1/ml-team/configmap-hydrator.yaml": 0,
        "c1/ml-team/service-qwen-1.yaml": 10,
    }
    plan = plan_cluster(
        {"name": "c1", "provider": "existing", "pools": [{"name": "l4", "class": "l4-1x", "nodes": 1}]},
        CLASSES,
        VERSIONS,
        {"gitops": {"tool": "argocd"}},
    )
    stack = [int(o["metadata"]["annotations"][WAVE]) for o in plan["render_objects"]]
    assert max(stack) < 0 < waves["c1/ml-team/service-qwen-1.yaml"]
    # The stack's releases are applied in install order, after its namespaces, before the presets they serve.
    apps = [o for o in plan["render_objects"] if o["kind"] == "Application"]
    release_waves = [int(a["metadata"]["annotations"][WAVE]) for a in apps]
    assert release_waves == sorted(release_waves) and len(set(release_waves)) == len(apps)
    ns_wave = {int(o["metadata"]["annotations"][WAVE]) for o in plan["render_objects"] if o["kind"] == "Namespace"}
    presets = [o for o in plan["render_objects"] if o["kind"] == "LLMInferenceServiceConfig"]
    assert presets and ns_wave == {-30} and max(release_waves) < int(presets[0]["metadata"]["annotations"][WAVE])


def test_flux_layers_and_namespaces_are_never_pruned_by_the_tool(tmp_path):
    write(tmp_path, "c1", [cache("hydrator")], CACHE_OWNER, gitops="flux")
    write(tmp_path, "c1", [serving("qwen-1")], SERVING_OWNER, gitops="flux")
    assert annotations(tmp_path / "c1/ml-team/configmap-hydrator.yaml") == {LAYER: "caches"}
    assert annotations(tmp_path / "c1/ml-team/service-qwen-1.yaml") == {LAYER: "serving"}
    assert annotations(tmp_path / "c1/_cluster/namespace-ml-team.yaml") == {
        LAYER: "stack",
        "kustomize.toolkit.fluxcd.io/prune": "disabled",
    }
    argocd = decorate({"kind": "Namespace", "metadata": {"name": "x"}}, "argocd")
    assert argocd["metadata"]["annotations"]["argocd.argoproj.io/sync-options"] == "Prune=false,Delete=false"
    assert [layer_of(w) for w in (-30, -13, -5, 0, 10)] == ["stack", "stack", "stack-config", "caches", "serving"]


def test_an_annotation_already_set_is_kept_and_none_adds_nothing(tmp_path):
    mine = serving("qwen-1")
    mine["metadata"]["annotations"] = {WAVE: "3", "gpufleet.io/placement": "{}"}
    write(tmp_path, "c1", [mine], SERVING_OWNER, gitops="argocd")
    assert annotations(tmp_path / "c1/ml-team/service-qwen-1.yaml") == {WAVE: "3", "gpufleet.io/placement": "{}"}
    plain = serving("qwen-2")
    write(tmp_path, "c1", [mine, plain], SERVING_OWNER, gitops="argocd")
    assert "annotations" not in plain["metadata"]  # the caller's object is not changed
    write(tmp_path, "c2", [serving("qwen-1")], SERVING_OWNER, gitops="none")
    assert "annotations" not in load(tmp_path / "c2/ml-team/service-qwen-1.yaml")["metadata"]


def test_changing_the_tool_rewrites_the_files_once(tmp_path):
    write(tmp_path, "c1", [serving("qwen-1")], SERVING_OWNER, gitops="flux")
    txn = write(tmp_path, "c1", [serving("qwen-1")], SERVING_OWNER, gitops="argocd")
    assert sorted(txn.result.written) == ["c1/_cluster/namespace-ml-team.yaml", "c1/ml-team/service-qwen-1.yaml"]
    again = write(tmp_path, "c1", [serving("qwen-1")], SERVING_OWNER, gitops="argocd")
    assert not again.result.changed


def test_unknown_tool_is_refused():
    with pytest.raises(GpufleetError, match="gitops: must be one of flux, argocd, none"):
        Transaction("/nonexistent", check_mode=True, gitops="helm")


# --------------------------------------------------------------------------------------------------------------------
# Workload namespaces
# --------------------------------------------------------------------------------------------------------------------


def test_every_namespace_the_workloads_use_gets_one_namespace_file(tmp_path):
    write(tmp_path, "c1", [serving("qwen-1"), serving("llama-1", namespace="research")], SERVING_OWNER)
    write(tmp_path, "c1", [cache("hydrator")], CACHE_OWNER)
    ns = load(tmp_path / "c1/_cluster/namespace-ml-team.yaml")
    assert ns == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "ml-team",
            "labels": {
                "app.kubernetes.io/managed-by": "gpufleet.serving",
                "gpufleet.io/component": "namespace",
                "gpufleet.io/fleet": "prod",
            },
        },
    }
    assert (tmp_path / "c1/_cluster/namespace-research.yaml").is_file()
    # The cache writer found the namespace file the serving writer wrote: nothing changed.
    assert sorted(p.name for p in (tmp_path / "c1/_cluster").iterdir()) == [
        "namespace-ml-team.yaml",
        "namespace-research.yaml",
    ]


def test_a_namespace_file_goes_only_when_no_serving_or_cache_file_uses_it(tmp_path):
    write(tmp_path, "c1", [serving("qwen-1")], SERVING_OWNER)
    write(tmp_path, "c1", [cache("hydrator")], CACHE_OWNER)
    # The serving objects leave ml-team: the cache still uses it.
    txn = write(tmp_path, "c1", [], SERVING_OWNER)
    assert txn.result.removed == ["c1/ml-team/service-qwen-1.yaml"]
    assert (tmp_path / "c1/_cluster/namespace-ml-team.yaml").is_file()
    # Then the cache leaves too: the namespace file goes with it.
    txn = write(tmp_path, "c1", [], CACHE_OWNER)
    assert sorted(txn.result.removed) == ["c1/_cluster/namespace-ml-team.yaml", "c1/ml-team/configmap-hydrator.yaml"]
    assert not (tmp_path / "c1").exists()


def test_namespace_files_of_the_stack_and_of_another_fleet_are_left_alone(tmp_path):
    stack_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kserve", "labels": dict(STACK_OWNER)}}
    sync(tmp_path, "c1", [stack_ns], STACK_OWNER)
    before = (tmp_path / "c1/_cluster/namespace-kserve.yaml").read_text()
    write(tmp_path, "c1", [serving("qwen-1", namespace="kserve")], SERVING_OWNER)
    assert (tmp_path / "c1/_cluster/namespace-kserve.yaml").read_text() == before
    write(tmp_path, "c1", [], SERVING_OWNER)
    assert (tmp_path / "c1/_cluster/namespace-kserve.yaml").read_text() == before

    # Another fleet's serving objects and namespace file in a shared namespace: ours go, its file and namespace stay.
    other = FleetIdentity("staging")
    write(tmp_path, "c2", [serving("other-1", fleet="staging")], SERVING_OWNER, fleet=other)
    write(tmp_path, "c2", [serving("qwen-1")], SERVING_OWNER)
    assert load(tmp_path / "c2/_cluster/namespace-ml-team.yaml")["metadata"]["labels"]["gpufleet.io/fleet"] == "staging"
    write(tmp_path, "c2", [], SERVING_OWNER)
    assert (tmp_path / "c2/_cluster/namespace-ml-team.yaml").is_file()
    assert (tmp_path / "c2/ml-team/service-other-1.yaml").is_file()
    # The other fleet leaves while ours is back: ours takes the namespace file over, and it goes when ours goes.
    write(tmp_path, "c2", [], SERVING_OWNER, fleet=other)
    write(tmp_path, "c2", [serving("qwen-1")], SERVING_OWNER)
    assert load(tmp_path / "c2/_cluster/namespace-ml-team.yaml")["metadata"]["labels"]["gpufleet.io/fleet"] == "prod"
    write(tmp_path, "c2", [], SERVING_OWNER)
    assert not (tmp_path / "c2").exists()


def test_a_stack_only_writer_renders_no_workload_namespace(tmp_path):
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "kserve", "labels": STACK_OWNER},
    }
    sync(tmp_path, "c1", [obj], STACK_OWNER)
    assert not (tmp_path / "c1/_cluster").exists()


# --------------------------------------------------------------------------------------------------------------------
# The fleet directory
# --------------------------------------------------------------------------------------------------------------------


def generator_objects(tool: str = "flux", clusters: tuple[str, ...] = ("c1",)) -> list[dict]:
    return fleet_generator(list(clusters), {"tool": tool, "repo_url": "https://git.example.com/fleet.git"}, "prod")


def test_fleet_dir_is_never_a_cluster_and_its_plan_document_is_never_pruned(tmp_path):
    sync(tmp_path, "c1", [serving("qwen-1")], SERVING_OWNER, fleet=FLEET)
    (tmp_path / "_fleet").mkdir()
    (tmp_path / "_fleet/plan.json").write_text('{"version": 1}')
    txn = Transaction(tmp_path)
    txn.plan_fleet(generator_objects("flux"), STACK_OWNER)
    txn.commit()
    assert sorted(p.name for p in (tmp_path / "_fleet/flux-system").iterdir()) == [
        "kustomization-c1-caches.yaml",
        "kustomization-c1-serving.yaml",
        "kustomization-c1-stack-config.yaml",
        "kustomization-c1-stack.yaml",
    ]
    assert cluster_dirs(tmp_path) == ["c1"]
    assert {c for c, _r, _o in read_objects(tmp_path)} == {"c1"}
    token = tree_token(tmp_path)

    # Switching to Argo CD replaces the generator; the plan document and the cluster token are untouched.
    txn = Transaction(tmp_path)
    txn.plan_fleet(generator_objects("argocd"), STACK_OWNER)
    txn.commit()
    assert sorted(txn.result.removed)[0] == "_fleet/flux-system/kustomization-c1-caches.yaml"
    assert txn.result.written == ["_fleet/argocd/applicationset-prod.yaml"]
    assert not (tmp_path / "_fleet/flux-system").exists()
    assert (tmp_path / "_fleet/plan.json").read_text() == '{"version": 1}'
    assert tree_token(tmp_path) == token

    # A cluster that left the inventory: its directory is pruned, never _fleet.
    txn = Transaction(tmp_path)
    txn.prune_other_clusters([], SERVING_OWNER, fleet=FLEET)
    txn.commit()
    assert txn.result.removed_clusters == ["c1"] and (tmp_path / "_fleet/plan.json").is_file()
    assert (tmp_path / "_fleet/argocd/applicationset-prod.yaml").is_file()

    with pytest.raises(GpufleetError, match="_fleet is the fleet directory"):
        Transaction(tmp_path, check_mode=True).plan("_fleet", [serving("x")], SERVING_OWNER)


# --------------------------------------------------------------------------------------------------------------------
# Clusters that left the inventory, counts, diff
# --------------------------------------------------------------------------------------------------------------------


def test_a_removed_clusters_owned_files_are_pruned_and_the_rest_reported(tmp_path):
    write(tmp_path, "gone", [serving("qwen-1")], SERVING_OWNER)
    write(tmp_path, "gone", [cache("hydrator")], CACHE_OWNER)
    stack = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lws-system", "labels": dict(STACK_OWNER)}}
    sync(tmp_path, "gone", [stack], STACK_OWNER)
    (tmp_path / "gone/ml-team/secret-hf-token.yaml").write_text(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: hf-token, namespace: ml-team}\n"
    )
    write(tmp_path, "kept", [serving("qwen-2")], SERVING_OWNER)

    for owner in (SERVING_OWNER, CACHE_OWNER, STACK_OWNER):  # what deploy, caches and the stack each prune
        txn = Transaction(tmp_path)
        txn.prune_other_clusters(["kept"], owner, fleet=FLEET if owner != STACK_OWNER else None)
        txn.commit()
        assert txn.result.removed_clusters == ["gone"]
        assert txn.result.left == {"gone": ["gone/ml-team/secret-hf-token.yaml"]}
        assert txn.result.lines()[-1].startswith("gone: left the inventory; 1 file(s) kept")
    remaining = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "gone").rglob("*") if p.is_file())
    assert remaining == ["gone/ml-team/secret-hf-token.yaml"]
    assert (tmp_path / "kept/ml-team/service-qwen-2.yaml").is_file()


def test_counts_per_cluster_and_diff(tmp_path):
    write(tmp_path, "c1", [serving("qwen-1"), serving("qwen-2")], SERVING_OWNER)
    changed = serving("qwen-1")
    changed["metadata"]["labels"]["gpufleet.io/deployment"] = "qwen-b"
    txn = Transaction(tmp_path, diff=True)
    txn.plan("c1", [changed, serving("qwen-3")], SERVING_OWNER, fleet=FLEET)
    txn.plan("c2", [], SERVING_OWNER, fleet=FLEET)
    txn.commit()
    assert txn.result.files() == {
        "c1": {"created": 1, "changed": 1, "removed": 1},
        "c2": {"created": 0, "changed": 0, "removed": 0},
    }
    assert txn.result.lines() == ["c1: +1 ~1 -1 files", "c2: +0 ~0 -0 files"]
    diffs = {d["before_header"]: d for d in txn.result.diff}
    assert "gpufleet.io/deployment: qwen\n" in diffs["c1/ml-team/service-qwen-1.yaml"]["before"]
    assert "gpufleet.io/deployment: qwen-b\n" in diffs["c1/ml-team/service-qwen-1.yaml"]["after"]
    assert diffs["c1/ml-team/service-qwen-3.yaml"]["before"] == ""
    assert diffs["c1/ml-team/service-qwen-2.yaml"]["after"] == ""
    assert "name: qwen-2" in diffs["c1/ml-team/service-qwen-2.yaml"]["before"]


# --------------------------------------------------------------------------------------------------------------------
# The serving stack's releases
# --------------------------------------------------------------------------------------------------------------------


def stack_plan(tool: str, overrides: dict | None = None, gateway: bool = False) -> dict:
    return plan_cluster(
        {"name": "c1", "provider": "existing", "pools": [{"name": "l4", "class": "l4-1x", "nodes": 1}]},
        CLASSES,
        VERSIONS,
        {"gitops": {"tool": tool}, "gateway": {"enabled": gateway}},
        overrides,
    )


def by_kind(plan: dict, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in plan["render_objects"] if o["kind"] == kind}


def test_flux_renders_each_release_with_its_source_pinned_and_values_exact():
    overrides = {"dra_driver": {"values": {"kubeletPlugin": {"priorityClassName": ""}, "list": [1, {"a": None}]}}}
    plan = stack_plan("flux", overrides, gateway=True)
    releases = by_kind(plan, "HelmRelease")
    assert sorted(releases) == sorted(r["release"] for r in plan["releases"])
    for rel in plan["releases"]:
        hr = releases[rel["release"]]
        assert hr["apiVersion"] == "helm.toolkit.fluxcd.io/v2"
        assert hr["metadata"]["namespace"] == rel["namespace"] and hr["spec"]["releaseName"] == rel["release"]
        assert hr["spec"]["values"] == rel["values"]
        assert hr["spec"]["timeout"] == f"{rel['wait_timeout']}s"
        if rel["repository"].startswith("oci://"):
            source = by_kind(plan, "OCIRepository")[rel["release"]]
            assert hr["spec"]["chartRef"] == {"kind": "OCIRepository", "name": rel["release"]}
            assert source["spec"]["url"] == f"{rel['repository']}/{rel['chart']}"
            assert source["spec"]["ref"] == {"tag": VERSIONS[rel["component"]]["version"]}
        else:
            source = by_kind(plan, "HelmRepository")[rel["release"]]
            assert source["spec"]["url"] == rel["repository"]
            assert hr["spec"]["chart"]["spec"]["version"] == VERSIONS[rel["component"]]["version"]
            assert hr["spec"]["chart"]["spec"]["sourceRef"] == {"kind": "HelmRepository", "name": rel["release"]}
        assert source["metadata"]["namespace"] == rel["namespace"]
    assert releases["nvidia-dra-driver-gpu"]["spec"]["values"]["list"] == [1, {"a": None}]
    # KServe's controller waits for its CRD chart and for the releases whose CRDs it watches.
    assert releases["kserve-llmisvc"]["spec"]["dependsOn"] == [
        {"name": "kserve-llmisvc-crd", "namespace": "kserve"},
        {"name": "lws", "namespace": "lws-system"},
        {"name": "eg", "namespace": "envoy-gateway-system"},
    ]
    assert "dependsOn" not in releases["kserve-llmisvc-crd"]["spec"]
    assert not any(o["apiVersion"].startswith("serving.gpufleet.io") for o in plan["render_objects"])
    # The stack's objects and releases sync in the first layer, the objects whose kinds a release installs after it.
    layers = {(o["kind"], o["metadata"]["annotations"][LAYER]) for o in plan["render_objects"]}
    assert ("HelmRelease", "stack") in layers and ("Namespace", "stack") in layers
    assert ("LLMInferenceServiceConfig", "stack-config") in layers and ("Gateway", "stack-config") in layers


def test_argocd_renders_each_release_as_an_in_cluster_application():
    plan = stack_plan("argocd")
    apps = by_kind(plan, "Application")
    assert sorted(apps) == sorted(r["release"] for r in plan["releases"])
    for rel in plan["releases"]:
        app = apps[rel["release"]]
        assert app["metadata"]["namespace"] == "argocd"
        assert app["spec"]["destination"] == {"server": "https://kubernetes.default.svc", "namespace": rel["namespace"]}
        source = app["spec"]["source"]
        assert source["helm"] == {"releaseName": rel["release"], "valuesObject": rel["values"]}
        assert source["targetRevision"] == VERSIONS[rel["component"]]["version"]
        if rel["repository"].startswith("oci://"):
            assert source["repoURL"] == f"{rel['repository']}/{rel['chart']}" and source["path"] == "."
        else:
            assert (source["repoURL"], source["chart"]) == (rel["repository"], rel["chart"])
    waves = [int(apps[r["release"]]["metadata"]["annotations"][WAVE]) for r in plan["releases"]]
    assert waves == [-20 + COMPONENTS.index(r["component"]) for r in plan["releases"]]


def test_none_renders_no_release_and_reports_them():
    plan = stack_plan("none")
    kinds = {o["kind"] for o in plan["render_objects"]}
    assert kinds.isdisjoint({"HelmRelease", "HelmRepository", "OCIRepository", "Application"})
    assert plan["release_lines"] == [f"{r['release']}: not rendered: gpufleet_gitops none" for r in plan["releases"]]
    assert all("annotations" not in o["metadata"] for o in plan["render_objects"])


def test_a_local_chart_cannot_be_rendered_for_a_gitops_tool_and_is_warned_about():
    plan = stack_plan("flux", {"leaderworkerset": {"repository": "", "chart": "./charts/lws"}})
    assert "lws" not in by_kind(plan, "HelmRelease")
    assert "lws: not rendered: its chart ./charts/lws is a local path" in plan["release_lines"]
    assert any("release lws: its chart './charts/lws' is a local path" in w for w in plan["warnings"])
    # KServe no longer waits for a release that is not rendered.
    assert {d["name"] for d in by_kind(plan, "HelmRelease")["kserve-llmisvc"]["spec"]["dependsOn"]} == {
        "kserve-llmisvc-crd"
    }


# --------------------------------------------------------------------------------------------------------------------
# The fleet generator
# --------------------------------------------------------------------------------------------------------------------


def test_argocd_generator_lists_the_cluster_directories_and_deploys_each_to_its_cluster():
    (appset,) = fleet_generator(
        ["onprem-a", "gke-x"],
        {"tool": "argocd", "repo_url": "https://git.example.com/fleet.git", "revision": "main", "path": "./rendered/"},
        "prod",
    )
    assert (appset["kind"], appset["metadata"]["namespace"], appset["metadata"]["name"]) == (
        "ApplicationSet",
        "argocd",
        "prod",
    )
    (git,) = [g["git"] for g in appset["spec"]["generators"]]
    assert git["repoURL"] == "https://git.example.com/fleet.git" and git["revision"] == "main"
    assert git["directories"] == [{"path": "rendered/*"}, {"path": "rendered/_fleet", "exclude": True}]
    spec = appset["spec"]["template"]["spec"]
    assert spec["destination"] == {"name": "{{.path.basename}}"}
    assert spec["source"]["path"] == "{{.path.path}}" and spec["source"]["directory"] == {"recurse": True}
    assert "SkipDryRunOnMissingResource=true" in spec["syncPolicy"]["syncOptions"]
    with pytest.raises(GpufleetError, match="gpufleet_gitops_repo_url: is required with gpufleet_gitops argocd"):
        fleet_generator(["c1"], {"tool": "argocd"}, "prod")
    with pytest.raises(GpufleetError, match=r"gitops\.path: '\.\./x' must be a relative path"):
        fleet_generator(["c1"], {"tool": "flux", "path": "../x"}, "prod")
    assert fleet_generator(["c1"], {"tool": "none"}, "prod") == []


def test_flux_generator_chains_one_kustomization_per_cluster_and_layer():
    objs = fleet_generator(["c1"], {"tool": "flux", "path": "rendered", "source": "fleet-repo"}, "prod")
    assert [o["metadata"]["name"] for o in objs] == ["c1-stack", "c1-stack-config", "c1-caches", "c1-serving"]
    for previous, obj in zip([None, *objs], objs, strict=False):
        spec = obj["spec"]
        assert obj["metadata"]["namespace"] == "flux-system"
        assert spec["path"] == "./rendered/c1" and spec["sourceRef"] == {"kind": "GitRepository", "name": "fleet-repo"}
        assert spec["kubeConfig"] == {"secretRef": {"name": "c1-kubeconfig"}} and spec["wait"] is True
        assert spec.get("dependsOn") == ([{"name": previous["metadata"]["name"]}] if previous else None)


KUSTOMIZE = shutil.which("kubectl")


@pytest.mark.skipif(KUSTOMIZE is None, reason="kubectl (its built-in kustomize) is not installed")
def test_flux_layers_partition_a_cluster_directory_as_kustomize_builds_them(tmp_path):
    """Each layer's Kustomization, built as kustomize-controller builds it (every YAML file of the path as a
    resource, the spec's patches), keeps exactly its layer's objects; the last one also the files without a layer."""
    root = tmp_path / "rendered"
    plan = stack_plan("flux", gateway=True)
    sync(root, "c1", plan["render_objects"], STACK_OWNER, gitops="flux")
    write(root, "c1", [cache("hydrator")], CACHE_OWNER, gitops="flux")
    write(root, "c1", [serving("qwen-1")], SERVING_OWNER, gitops="flux")
    (root / "c1/ml-team/configmap-by-hand.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: by-hand, namespace: ml-team}\n"
    )
    every = {(o["kind"], o["metadata"]["name"]) for _c, _r, o in read_objects(root, ["c1"])}
    seen: dict[str, set] = {}
    for ks in fleet_generator(["c1"], {"tool": "flux"}, "prod"):
        build = tmp_path / ks["metadata"]["name"]
        shutil.copytree(root / "c1", build)
        files = sorted(str(p.relative_to(build)) for p in build.rglob("*.yaml"))
        (build / "kustomization.yaml").write_text(
            yaml.safe_dump({"resources": files, "patches": copy.deepcopy(ks["spec"]["patches"])})
        )
        out = subprocess.run([KUSTOMIZE, "kustomize", str(build)], capture_output=True, text=True, check=True)
        seen[ks["metadata"]["name"].removeprefix("c1-")] = {
            (d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(out.stdout) if d
        }
    assert set().union(*seen.values()) == every
    assert sum(len(s) for s in seen.values()) == len(every)  # each object in exactly one layer
    assert ("HelmRelease", "lws") in seen["stack"] and ("Namespace", "ml-team") in seen["stack"]
    assert ("Gateway", "gpufleet") in seen["stack-config"]
    assert seen["caches"] == {("ConfigMap", "hydrator")}
    assert seen["serving"] == {("Service", "qwen-1"), ("ConfigMap", "by-hand")}
