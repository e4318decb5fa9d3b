"""serving_stack: the plan per provider, the apply-time decisions, the check, and the docs' version matrix."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import (
    adoptions,
    check_cluster,
    matrix_table,
    objects_to_apply,
    plan_cluster,
    release_action,
)

REPO = Path(__file__).resolve().parents[4]
DEFAULTS = yaml.safe_load((REPO / "roles/serving_stack/defaults/main.yml").read_text())
VERSIONS = DEFAULTS["serving_stack_versions"]
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

GPU = {"name": "gpu", "driver": "gpu.nvidia.com", "device_class_name": "gpu.nvidia.com", "count": 8}
NIC = {"name": "nic", "driver": "rdma.example.com", "device_class_name": "rdma.example.com", "count": 2}
COMPUTE_DOMAIN = {
    "name": "cd",
    "driver": "compute-domain.nvidia.com",
    "device_class_name": "compute-domain-default-channel.nvidia.com",
}
CLASSES = {
    "h100-8x": {"devices": [GPU, NIC]},
    "l4-1x": {"devices": [{**GPU, "count": 1}]},
    "gb200": {"devices": [{**GPU, "count": 4}, COMPUTE_DOMAIN]},
    "cpu": {"devices": [{"name": "ib", "claim": "Synthetic", "driver": "fabric.example.com"}]},
}  # fmt: skip


def cluster(provider: str = "existing", pools: list[dict] | None = None) -> dict:
    return {"name": "c1", "provider": provider, "pools": pools or [{"name": "l4", "class": "l4-1x", "nodes": 2}]}


def plan(provider: str = "existing", pools=None, options=None, overrides=None) -> dict:
    return plan_cluster(cluster(provider, pools), CLASSES, VERSIONS, options or {}, overrides)


def release(p: dict, component: str) -> dict:
    return next(r for r in p["releases"] if r["component"] == component)


def kinds(p: dict, kind: str) -> list[dict]:
    return [o for o in p["objects"] if o["kind"] == kind]


@pytest.mark.parametrize(
    ("provider", "root", "quota"),
    [("gke", "/home/kubernetes/bin/nvidia", True), ("eks", "/", False), ("existing", "/", False)],
)
def test_per_provider_driver_root_and_quota(provider, root, quota):
    p = plan(provider)
    dra = release(p, "dra_driver")
    assert dra["values"]["nvidiaDriverRoot"] == root
    assert dra["values"]["gpuResourcesEnabledOverride"] is True
    assert dra["values"]["resources"] == {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}}
    assert dra["values"]["kubeletPlugin"]["tolerations"] == [TOLERATION]
    quotas = kinds(p, "ResourceQuota")
    assert bool(quotas) is quota
    if quota:
        (q,) = quotas
        assert q["metadata"]["namespace"] == "nvidia-dra-driver-gpu"
        assert q["spec"]["scopeSelector"]["matchExpressions"][0]["values"] == [
            "system-node-critical",
            "system-cluster-critical",
        ]


def test_release_order_namespaces_and_nfd_tolerates_the_gpu_taint():
    p = plan()
    assert [r["component"] for r in p["releases"]] == [
        "node_feature_discovery",
        "dra_driver",
        "leaderworkerset",
        "kserve_crd",
        "kserve",
    ]
    assert release(p, "node_feature_discovery")["values"] == {"worker": {"tolerations": [TOLERATION]}}
    assert [o["metadata"]["name"] for o in kinds(p, "Namespace")] == [
        "node-feature-discovery",
        "nvidia-dra-driver-gpu",
        "lws-system",
        "kserve",
    ]
    assert release(p, "leaderworkerset")["chart_ref"] == "oci://registry.k8s.io/lws/charts/lws"
    nfd = release(p, "node_feature_discovery")
    assert nfd["chart_ref"] == "node-feature-discovery"
    assert nfd["chart_repo_url"] == "https://kubernetes-sigs.github.io/node-feature-discovery/charts"


@pytest.mark.parametrize(
    ("pools", "mode", "on"),
    [
        ([{"name": "l4", "class": "l4-1x", "nodes": 1}], "auto", False),
        ([{"name": "gb", "class": "gb200", "nodes": 2}], "auto", True),
        ([{"name": "gb", "class": "gb200", "nodes": 2}], "disabled", False),
        ([{"name": "l4", "class": "l4-1x", "nodes": 1}], "enabled", True),
    ],
)
def test_compute_domains_only_when_a_pool_asks(pools, mode, on):
    p = plan(pools=pools, options={"compute_domains": mode})
    assert release(p, "dra_driver")["values"]["resources"]["computeDomains"]["enabled"] is on
    assert p["compute_domains"] is on
    shipped = release(p, "dra_driver")["ships_device_classes"]
    assert ("compute-domain-default-channel.nvidia.com" in shipped) is on


def test_device_classes_created_only_when_no_chart_ships_them():
    p = plan(pools=[{"name": "x", "class": "h100-8x", "nodes": 1}, {"name": "c", "class": "cpu", "nodes": 1}])
    (dc,) = kinds(p, "DeviceClass")
    assert dc["metadata"]["name"] == "rdma.example.com"
    assert dc["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "rdma.example.com"'}}]
    assert p["device_classes"] == ["gpu.nvidia.com", "rdma.example.com"]
    assert any("gpu.nvidia.com: shipped by the nvidia-dra-driver-gpu chart" in n for n in p["notes"])
    # Without the DRA driver the role creates gpu.nvidia.com itself.
    p = plan(overrides={"dra_driver": {"enabled": False}})
    assert [o["metadata"]["name"] for o in kinds(p, "DeviceClass")] == ["gpu.nvidia.com"]
    assert kinds(p, "ResourceQuota") == []


def test_presets_only_where_the_chart_does_not_ship_them():
    assert [o["metadata"]["name"] for o in kinds(plan(), "LLMInferenceServiceConfig")] == [
        "kserve-config-llm-worker-pipeline-parallel"
    ]
    p = plan(overrides={"kserve": {"chart": "kserve", "ships_presets": []}})
    presets = kinds(p, "LLMInferenceServiceConfig")
    assert [o["metadata"]["name"] for o in presets] == [
        "kserve-config-llm-template",
        "kserve-config-llm-worker-pipeline-parallel",
        "kserve-config-llm-worker-data-parallel",
    ]
    assert {o["metadata"]["namespace"] for o in presets} == {"kserve"}
    assert all(o["spec"]["template"]["containers"][0]["name"] == "main" for o in presets)
    assert (
        kinds(
            plan(options={"kserve_presets": False}, overrides={"kserve": {"ships_presets": []}}),
            "LLMInferenceServiceConfig",
        )
        == []
    )
    assert kinds(plan(overrides={"kserve": {"enabled": False}}), "LLMInferenceServiceConfig") == []


def test_gateway_is_optional():
    assert "envoy_gateway" not in [r["component"] for r in plan()["releases"]]
    p = plan(options={"gateway": {"enabled": True}})
    assert [r["component"] for r in p["releases"]].index("envoy_gateway") == 3
    assert [o["kind"] for o in p["objects"] if o["kind"].startswith("Gateway")] == ["GatewayClass", "Gateway"]
    assert "gpufleet-gateway" in [o["metadata"]["name"] for o in kinds(p, "Namespace")]


def test_overrides_merge_values_and_render_releases():
    p = plan(overrides={"dra_driver": {"version": "25.8.0", "values": {"kubeletPlugin": {"priorityClassName": ""}}}})
    dra = release(p, "dra_driver")
    assert dra["version"] == "25.8.0"
    assert dra["values"]["kubeletPlugin"] == {"tolerations": [TOLERATION], "priorityClassName": ""}
    specs = [o for o in p["render_objects"] if o["kind"] == "HelmRelease"]
    assert len(specs) == len(p["releases"])
    spec = next(s for s in specs if s["metadata"]["name"] == "nvidia-dra-driver-gpu")
    assert spec["apiVersion"] == "helm.toolkit.fluxcd.io/v2"
    assert spec["spec"]["chart"]["spec"]["version"] == "25.8.0" and spec["spec"]["values"] == dra["values"]
    assert all(o["metadata"]["labels"]["gpufleet.io/component"] == "serving-stack" for o in p["render_objects"])
    assert VERSIONS["dra_driver"]["version"] == "25.8.1"  # the matrix itself is never changed


@pytest.mark.parametrize(
    ("overrides", "options", "message"),
    [
        ({"nfd": {}}, {}, "serving_stack_overrides.nfd: is not a component of the serving stack"),
        ({"dra_driver": {"repository": "ftp://x"}}, {}, "dra_driver.repository: 'ftp://x' must be a Helm repository"),
        ({"lws": 1}, {}, "serving_stack_overrides.lws"),
        ({"kserve": {"release": "Bad_Name"}}, {}, "kserve.release: 'Bad_Name' must be a DNS label"),
        ({"kserve": {"wait_timeout": "10"}}, {}, "kserve.wait_timeout: must be an integer"),
        (None, {"compute_domains": "yes"}, "serving_stack.compute_domains: must be one of auto, enabled, disabled"),
        (None, {"driver_root": "nvidia"}, "serving_stack.driver_root: 'nvidia' must be an absolute path"),
        (None, {"gateway": {"enabled": True, "namespace": "Gw"}}, "serving_stack.gateway.namespace"),
        # Issue 23: a GatewayClass the API server rejects (controllerName is a domain-prefixed path).
        (
            None,
            {"gateway": {"enabled": True, "controller_name": "envoy gateway"}},
            "serving_stack.gateway.controller_name: must be a Gateway API controller name: a domain, '/' and a path",
        ),
        (None, {"gateway": {"controller_name": "gateway.envoyproxy.io"}}, "serving_stack.gateway.controller_name"),
    ],
)
def test_bad_input_names_the_field(overrides, options, message):
    with pytest.raises(GpufleetError, match=None) as err:
        plan(options=options, overrides=overrides)
    assert message in str(err.value)


def test_bad_matrix_names_the_field():
    versions = copy.deepcopy(VERSIONS)
    del versions["kserve"]["chart"]
    with pytest.raises(GpufleetError, match=r"serving_stack_versions\.kserve\.chart: is required"):
        plan_cluster(cluster(), CLASSES, versions, {})


# -- apply-time decisions ---------------------------------------------------------------------------------------------

CRD = {"metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io", "labels": {}}}


def test_release_action():
    lws = release(plan(), "leaderworkerset")
    assert release_action(lws, {}, [])["action"] == "install"
    skip = release_action(lws, {}, [CRD])
    assert skip["action"] == "skip" and "already installed" in skip["reason"]
    assert "serving_stack_overrides.leaderworkerset.detect_crd" in skip["reason"]
    assert release_action(lws, {"status": "deployed", "chart": "lws-0.7.0"}, [CRD])["action"] == "install"
    kserve = release(plan(), "kserve")  # no marker CRD
    assert release_action(kserve, {}, [CRD])["action"] == "install"


def _dc(name: str, annotations=None, labels=None) -> dict:
    return {"kind": "DeviceClass", "metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}}}


def test_adoptions():
    dra = release(plan(), "dra_driver")
    mine = {
        "meta.helm.sh/release-name": "nvidia-dra-driver-gpu",
        "meta.helm.sh/release-namespace": "nvidia-dra-driver-gpu",
    }
    existing = [_dc("gpu.nvidia.com", labels={"app.kubernetes.io/managed-by": "gpufleet-localfleet"}),
                _dc("mig.nvidia.com", annotations=mine), _dc("other.example.com")]  # fmt: skip
    assert adoptions(dra, existing, True) == ["gpu.nvidia.com"]
    assert adoptions(dra, existing[1:], False) == []
    with pytest.raises(GpufleetError, match=r"DeviceClass gpu\.nvidia\.com \(managed by gpufleet-localfleet\) exists"):
        adoptions(dra, existing, False)


def test_objects_to_apply_keeps_what_is_not_ours():
    p = plan(pools=[{"name": "x", "class": "h100-8x", "nodes": 1}], overrides={"kserve": {"ships_presets": []}})
    objs = [o for o in p["objects"] if o["kind"] not in ("Namespace", "ResourceQuota")]
    live = [
        _dc("rdma.example.com", labels={"app.kubernetes.io/managed-by": "gpufleet-localfleet"}),
        {"kind": "LLMInferenceServiceConfig", "metadata": {"name": "kserve-config-llm-template", "namespace": "kserve",
         "annotations": {"meta.helm.sh/release-name": "kserve", "meta.helm.sh/release-namespace": "kserve"}}},
        {"kind": "LLMInferenceServiceConfig", "metadata": {"name": "kserve-config-llm-worker-data-parallel",
         "namespace": "kserve", "labels": {"app.kubernetes.io/managed-by": "gpufleet.serving"}}},
    ]  # fmt: skip
    split = objects_to_apply(objs, live)
    assert [o["metadata"]["name"] for o in split["apply"]] == [
        "kserve-config-llm-worker-pipeline-parallel",
        "kserve-config-llm-worker-data-parallel",
    ]
    assert [(k["name"], k["reason"].split(":")[0]) for k in split["kept"]] == [
        ("rdma.example.com", "exists, managed by gpufleet-localfleet"),
        ("kserve-config-llm-template", "owned by Helm release kserve in kserve"),
    ]


# -- the check ----------------------------------------------------------------------------------------------------------


def _node(name: str, pool: str) -> dict:
    return {"metadata": {"name": name, "labels": {"gpufleet.io/pool": pool}}}


def _slice(node: str, driver: str, devices: int) -> dict:
    return {"spec": {"nodeName": node, "driver": driver, "devices": [{"name": f"d{i}"} for i in range(devices)]}}


CHECK_PLAN = plan(pools=[{"name": "x", "class": "h100-8x", "nodes": 2}, {"name": "c", "class": "cpu", "nodes": 1},
                         {"name": "z", "class": "l4-1x", "nodes": 0}])  # fmt: skip
NODES = [_node("x-0", "x"), _node("x-1", "x"), _node("c-0", "c")]
CLASSES_LIVE = [_dc("gpu.nvidia.com"), _dc("rdma.example.com")]
SLICES = [_slice(n, d, c) for n in ("x-0", "x-1") for d, c in (("gpu.nvidia.com", 8), ("rdma.example.com", 2))]


def test_check_passes():
    result = check_cluster(CHECK_PLAN, CLASSES_LIVE, SLICES, NODES)
    assert result["ok"], result
    assert result["lines"][0] == "c1: OK"
    assert "pool c: no DRA devices (nothing to publish)" in result["lines"]
    assert "pool z: scaled to zero nodes (nothing to publish)" in result["lines"]


@pytest.mark.parametrize(
    ("classes", "slices", "nodes", "problem"),
    [
        (CLASSES_LIVE[:1], SLICES, NODES, "DeviceClass rdma.example.com does not exist"),
        (CLASSES_LIVE, SLICES[2:], NODES, "pool x: x-0 publishes no gpu.nvidia.com ResourceSlice; x-0 publishes no rdma"),
        (CLASSES_LIVE, [*SLICES[:3], _slice("x-1", "rdma.example.com", 1)], NODES,
         "pool x: x-1 publishes 1 of 2 rdma.example.com devices"),
        (CLASSES_LIVE, SLICES, NODES[2:], "pool x: no node labelled gpufleet.io/pool=x (2 declared)"),
    ],
)  # fmt: skip
def test_check_names_what_is_missing(classes, slices, nodes, problem):
    result = check_cluster(CHECK_PLAN, classes, slices, nodes)
    assert not result["ok"]
    assert any(problem in p for p in result["problems"]), result["problems"]


# -- docs ---------------------------------------------------------------------------------------------------------------


def test_the_docs_show_the_version_matrix():
    text = (REPO / "docs/serving-stack.md").read_text()
    start, end = "<!-- BEGIN version matrix -->\n", "\n<!-- END version matrix -->"
    shown = text[text.index(start) + len(start) : text.index(end)]
    assert shown.splitlines() == matrix_table(VERSIONS)


# -- issue 29: the NVIDIA driver on GKE, fabric components, warnings ---------------------------------------------------

L4_GKE = {"gke": {"machine_type": "g2-standard-8", "accelerator": {"type": "nvidia-l4", "count": 1}}}
GKE_CLASSES = {
    # GKE's driver installation off (the default, what provisioning sets for DRA): the stack installs the driver.
    "l4-cos": {"provisioning": L4_GKE, "devices": [{**GPU, "count": 1}]},
    "l4-ubuntu": {
        "provisioning": {"gke": {**L4_GKE["gke"], "image_type": "UBUNTU_CONTAINERD"}},
        "devices": [{**GPU, "count": 1}],
    },
    # GKE installs the driver itself: nothing to install.
    "l4-gke-driver": {
        "provisioning": {
            "gke": {**L4_GKE["gke"], "accelerator": {"type": "nvidia-l4", "count": 1, "gpu_driver_version": "LATEST"}}
        },
        "devices": [{**GPU, "count": 1}],
    },
    "l4-windows": {
        "provisioning": {"gke": {**L4_GKE["gke"], "image_type": "WINDOWS_LTSC_CONTAINERD"}},
        "devices": [{**GPU, "count": 1}],
    },
    "h100-dranet": {
        "devices": [GPU, {"name": "nic", "driver": "dra.net", "device_class_name": "rdma.dra.net", "count": 8}]
    },
    "p5-efa": {
        "devices": [GPU, {"name": "efa", "claim": "Synthetic", "driver": "vpc.amazonaws.com", "count": 32}]
    },
    **CLASSES,
}  # fmt: skip
INSTALLER_TERMS = "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def gke_plan(pools, version="1.36.2-gke.1100", provider="gke", overrides=None, versions=None):
    c = {"name": "g1", "provider": provider, "kubernetes_version": version, "pools": pools}
    return plan_cluster(c, GKE_CLASSES, versions or VERSIONS, {}, overrides)


def _get(obj, dotted):
    for key in dotted.split("."):
        obj = obj[key]
    return obj


def test_gke_pools_without_gke_driver_get_the_documented_installer_before_the_dra_driver():
    pools = [
        {"name": "l4", "class": "l4-cos", "nodes": 2},
        {"name": "l4b", "class": "l4-cos", "nodes": 1},
        {"name": "l4u", "class": "l4-ubuntu", "nodes": 1},
        {"name": "managed", "class": "l4-gke-driver", "nodes": 1},
    ]
    p = gke_plan(pools)
    cos, ubuntu = p["driver_objects"]
    assert [o["metadata"]["name"] for o in (cos, ubuntu)] == [
        "nvidia-driver-installer-cos",
        "nvidia-driver-installer-ubuntu",
    ]
    assert {o["metadata"]["namespace"] for o in (cos, ubuntu)} == {"kube-system"}
    assert all(o["metadata"]["labels"]["gpufleet.io/component"] == "serving-stack" for o in (cos, ubuntu))
    # The pools whose GKE driver installation is off, never a node where GKE installed one.
    (term,) = _get(cos, INSTALLER_TERMS)["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": "gpufleet.io/pool", "operator": "In", "values": ["l4", "l4b"]},
        {"key": "cloud.google.com/gke-gpu-driver-version", "operator": "DoesNotExist"},
    ]
    assert _get(ubuntu, INSTALLER_TERMS)["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["l4u"]
    # What GKE's manifests do: COS installs into /home/kubernetes/bin/nvidia (the DRA driver's root on GKE), with the
    # preloaded installer image and the driver pinned for this GKE minor; Ubuntu takes NVIDIA_DRIVER_VERSION.
    spec = cos["spec"]["template"]["spec"]
    installer = spec["initContainers"][0]
    assert installer["image"] == "cos-nvidia-installer:fixed" and installer["imagePullPolicy"] == "Never"
    assert "/cos-gpu-installer install --version=latest" in installer["command"][2]
    assert {"name": "NVIDIA_INSTALL_DIR_HOST", "value": "/home/kubernetes/bin/nvidia"} in installer["env"]
    assert {"name": "nvidia-install-dir-host", "hostPath": {"path": "/home/kubernetes/bin/nvidia"}} in spec["volumes"]
    assert spec["priorityClassName"] == "system-node-critical" and spec["tolerations"] == [{"operator": "Exists"}]
    assert release(p, "dra_driver")["values"]["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"
    u = ubuntu["spec"]["template"]["spec"]["initContainers"][0]
    assert u["env"] == [{"name": "NVIDIA_DRIVER_VERSION", "value": "570.124.06"}]
    # Applied before the releases (driver_objects), rendered with everything else, waited for by the check.
    assert not any(o["kind"] == "DaemonSet" for o in p["objects"])
    rendered = [o for o in p["render_objects"] if o["kind"] == "DaemonSet"]
    assert [{**o, "metadata": {k: v for k, v in o["metadata"].items() if k != "annotations"}} for o in rendered] == [
        cos,
        ubuntu,
    ]
    # Flux (the default) syncs them with the stack layer, before the releases that need the driver.
    assert {o["metadata"]["annotations"]["gpufleet.io/sync-layer"] for o in rendered} == {"stack"}
    assert [(i["name"], i["pools"], i["driver"]) for i in p["driver_installers"]] == [
        ("nvidia-driver-installer-cos", ["l4", "l4b"], "latest"),
        ("nvidia-driver-installer-ubuntu", ["l4u"], "570.124.06"),
    ]
    assert p["warnings"] == []


def test_driver_installers_are_schema_valid():
    from k8s_schemas import validate_objects

    p = gke_plan([{"name": "l4", "class": "l4-cos", "nodes": 2}, {"name": "u", "class": "l4-ubuntu", "nodes": 1}])
    validate_objects(p["driver_objects"])


@pytest.mark.parametrize("provider", ["eks", "existing"])
def test_only_gke_gets_a_driver_installer(provider):
    p = gke_plan([{"name": "l4", "class": "l4-cos", "nodes": 2}], provider=provider)
    assert p["driver_objects"] == [] and p["driver_installers"] == []


def test_the_driver_is_pinned_per_gke_version():
    pools = [{"name": "l4", "class": "l4-cos", "nodes": 2}]
    versions = copy.deepcopy(VERSIONS)
    versions["gke_gpu_driver"]["versions"]["1.35"] = {"cos": "580.95.05", "ubuntu": "580.95.05"}
    (cos,) = gke_plan(pools, version="1.35", versions=versions)["driver_objects"]
    assert (
        "/cos-gpu-installer install --version=580.95.05 "
        in cos["spec"]["template"]["spec"]["initContainers"][0]["command"][2]
    )
    versions["gke_gpu_driver"]["versions"]["1.35"]["cos"] = "default"
    (cos,) = gke_plan(pools, version="1.35", versions=versions)["driver_objects"]
    assert "/cos-gpu-installer install ||" in cos["spec"]["template"]["spec"]["initContainers"][0]["command"][2]
    with pytest.raises(GpufleetError, match=r"gke_gpu_driver.versions: has no entry for GKE 1.38 \(cluster g1"):
        gke_plan(pools, version="1.38")
    with pytest.raises(GpufleetError, match=r"gke_gpu_driver.versions\['1.36'\].cos: 'newest' must be default, latest"):
        gke_plan(pools, overrides={"gke_gpu_driver": {"versions": {"1.36": {"cos": "newest", "ubuntu": "1.2"}}}})


def test_a_gke_pool_left_without_a_driver_is_warned_about():
    pools = [{"name": "l4", "class": "l4-cos", "nodes": 2}]
    p = gke_plan(pools, overrides={"gke_gpu_driver": {"enabled": False}})
    assert p["driver_objects"] == []
    assert p["warnings"] == [
        "GKE GPU driver installer disabled (serving_stack_versions.gke_gpu_driver.enabled): pool(s) l4 have GKE's GPU "
        "driver installation off and nothing installs the NVIDIA driver there; the DRA driver finds no GPUs until you "
        "install it"
    ]
    versions = {k: v for k, v in VERSIONS.items() if k != "gke_gpu_driver"}
    assert "not in serving_stack_versions" in gke_plan(pools, versions=versions)["warnings"][0]
    p = gke_plan([{"name": "w", "class": "l4-windows", "nodes": 1}])
    assert p["driver_objects"] == [] and "run node image WINDOWS_LTSC_CONTAINERD" in p["warnings"][0]


def test_check_waits_for_the_driver_installers():
    p = gke_plan([{"name": "l4", "class": "l4-cos", "nodes": 2}])
    nodes = [
        {"metadata": {"name": f"l4-{i}", "labels": {"gpufleet.io/pool": "l4"}}} for i in range(2)
    ]  # fmt: skip
    slices = [{"spec": {"nodeName": f"l4-{i}", "driver": "gpu.nvidia.com", "devices": [{}]}} for i in range(2)]
    classes = [{"metadata": {"name": "gpu.nvidia.com"}}]

    def ds(desired, ready, updated=None, generation=1, observed=1):
        return {
            "metadata": {"name": "nvidia-driver-installer-cos", "namespace": "kube-system", "generation": generation},
            "status": {
                "desiredNumberScheduled": desired,
                "numberReady": ready,
                "updatedNumberScheduled": desired if updated is None else updated,
                "observedGeneration": observed,
            },
        }

    what = "GPU driver installer kube-system/nvidia-driver-installer-cos"
    for daemonsets, problem in (
        ([], f"{what} does not exist"),
        ([ds(2, 2, generation=2)], f"{what}: its current spec is not rolled out yet"),
        ([ds(1, 1)], f"{what} runs on 1 of the 2 node(s) of pool(s) l4"),
        ([ds(2, 1)], f"{what}: the NVIDIA driver is installed on 1 of 2 node(s) of pool(s) l4"),
        ([ds(2, 2, updated=1)], f"{what}: the NVIDIA driver is installed on 1 of 2 node(s)"),
    ):
        result = check_cluster(p, classes, slices, nodes, daemonsets)
        assert not result["ok"] and not result["driver_ok"]
        assert any(problem in x for x in result["problems"]), (problem, result["problems"])
    result = check_cluster(p, classes, slices, nodes, [ds(2, 2)])
    assert result["ok"] and result["driver_ok"], result
    assert f"{what}: NVIDIA driver latest installed on pool(s) l4" in result["lines"]
    # Without the DaemonSets (a caller that does not read them) the installers are not checked.
    assert check_cluster(p, classes, slices, nodes)["ok"]


def test_fabric_components_are_chosen_from_the_classes():
    p = gke_plan([{"name": "l4", "class": "l4-cos", "nodes": 1}])
    assert not {"dranet", "efa_device_plugin"} & {r["component"] for r in p["releases"]}
    p = gke_plan([{"name": "l4", "class": "l4-cos", "nodes": 1}, {"name": "x", "class": "h100-dranet", "nodes": 2}])
    dranet = release(p, "dranet")
    assert [r["component"] for r in p["releases"]][:3] == ["node_feature_discovery", "dra_driver", "dranet"]
    assert dranet["chart_ref"] == "oci://registry.k8s.io/networking/charts/dranet" and dranet["version"] == "1.4.0"
    (term,) = _get(dranet["values"]["affinity"], "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")[
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [{"key": "gpufleet.io/pool", "operator": "In", "values": ["x"]}]
    assert "dranet" in [o["metadata"]["name"] for o in kinds(p, "Namespace")]
    assert p["warnings"] == []
    # The EFA device plugin: EKS only, tolerating the GPU taint, on the pools with EFA devices.
    p = gke_plan([{"name": "p5", "class": "p5-efa", "nodes": 2}], provider="eks")
    efa = release(p, "efa_device_plugin")
    assert efa["chart_ref"] == "aws-efa-k8s-device-plugin"
    assert efa["chart_repo_url"] == "https://aws.github.io/eks-charts"
    assert efa["values"]["tolerations"] == [TOLERATION]
    assert efa["values"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpufleet.io/pool", "operator": "In", "values": ["p5"]}]}]
    }
    assert "efa_device_plugin" not in {r["component"] for r in gke_plan(
        [{"name": "p5", "class": "p5-efa", "nodes": 2}])["releases"]}  # fmt: skip
    # A cluster's override reaches the chart's values.
    p = gke_plan(
        [{"name": "p5", "class": "p5-efa", "nodes": 2}],
        provider="eks",
        overrides={"efa_device_plugin": {"values": {"nodeSelector": {"efa": "present"}}}},
    )
    assert release(p, "efa_device_plugin")["values"]["nodeSelector"] == {"efa": "present"}


def test_a_class_whose_dra_driver_nothing_installs_is_named_in_a_warning():
    pools = [{"name": "x", "class": "h100-8x", "nodes": 1}, {"name": "y", "class": "h100-8x", "nodes": 1}]
    for provider in ("gke", "eks"):
        (warning,) = gke_plan(pools, provider=provider)["warnings"]
        assert warning.startswith(
            "class h100-8x (pool x, y) has claim: DRA devices of driver rdma.example.com, but no component of the "
            f"serving stack installs it and a {provider} cluster has no preflight that checks it"
        )
    # An existing cluster's preflight checks its drivers: no warning; Synthetic devices are never claimed.
    assert gke_plan(pools, provider="existing")["warnings"] == []
    assert gke_plan([{"name": "c", "class": "cpu", "nodes": 1}], provider="eks")["warnings"] == []
    # A fabric component turned off: the warning says so.
    p = gke_plan([{"name": "x", "class": "h100-dranet", "nodes": 1}], overrides={"dranet": {"enabled": False}})
    assert "dranet" not in {r["component"] for r in p["releases"]}
    (warning,) = p["warnings"]
    assert "class h100-dranet (pool x) has claim: DRA devices of driver dra.net" in warning
    assert "its component dranet is disabled or not in serving_stack_versions" in warning
    # ComputeDomains are the DRA driver's own.
    assert gke_plan([{"name": "g", "class": "gb200", "nodes": 1}])["warnings"] == []


def test_the_docs_show_the_gke_driver_pins():
    from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import gke_driver_table

    text = (REPO / "docs/serving-stack.md").read_text()
    start, end = "<!-- BEGIN gke driver -->\n", "\n<!-- END gke driver -->"
    shown = text[text.index(start) + len(start) : text.index(end)]
    assert shown.splitlines() == gke_driver_table(VERSIONS)


@pytest.mark.parametrize(("objects", "existing", "name"), [("x", None, "objects"), ([], [1, 2], "existing")])
def test_objects_to_apply_refuses_what_is_not_a_list_of_objects(objects, existing, name):
    with pytest.raises(GpufleetError, match=f"^{name}: expected a list of Kubernetes objects"):
        objects_to_apply(objects, existing)
