"""Prefill/decode instances (issue 28, design.md §14): one instance placed whole on one cluster (one pool with
``colocate: fabric``), rendered as a Grove PodCliqueSet or as per-role Deployments plus the llm-d router, every object
schema-valid for Kubernetes 1.34-1.37 and the pinned CRDs; and Grove for a Leader+Worker gang."""

from __future__ import annotations

import copy
import json
from typing import Any

import k8s_schemas
import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import place
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.grove import MAX_COMBINED_NAME
from ansible_collections.gpufleet.serving.plugins.module_utils.render.pd import (
    LLMD_ROLE_LABEL,
    NIXL_HOST_ENV,
    ROUTER_CONFIG_KEY,
    ROUTING_SIDECAR,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import render_serving_manifests

KV = '--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def gpus(count: int) -> dict[str, Any]:
    return {
        "devices": [
            {
                "name": "gpu",
                "driver": "gpu.nvidia.com",
                "device_class_name": "gpu.nvidia.com",
                "count": count,
                "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
            }
        ]
    }


CLASSES = {"h100x4": gpus(4), "h100x1": gpus(1)}
# a: 4 GPUs in all (the decode engine alone fits, the instance does not); b: two 4-GPU nodes (an instance fits, in one
# pool); c: 1-GPU nodes and a 4-GPU node in two pools (an instance fits the cluster, but no single pool).
CLUSTERS = [
    {"name": "a", "pools": [{"name": "big", "class": "h100x4", "nodes": 1}]},
    {"name": "b", "pools": [{"name": "big", "class": "h100x4", "nodes": 2}]},
    {
        "name": "c",
        "pools": [{"name": "small", "class": "h100x1", "nodes": 2}, {"name": "big", "class": "h100x4", "nodes": 1}],
    },
]


def role_engine(role: str, count: int) -> dict[str, Any]:
    return {
        "name": role,
        "role": role,
        "members": [
            {
                "role": "Standalone",
                "node_selector": {"devices": [{"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": count}]},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "engine",
                                "image": "vllm/vllm-openai:v0.11.0",
                                "args": ["--model=meta-llama/Llama-3.1-8B-Instruct", f"--tensor-parallel-size={count}"],
                            }
                        ]
                    }
                },
            }
        ],
    }


def pd(backend: str = "grove", replicas: int = 2, **extra: Any) -> dict[str, Any]:
    """Prefill 2 x 1 GPU, decode 1 x 4 GPUs, ratio 2:1."""
    return {
        "name": "llama-pd",
        "namespace": "ml",
        "replicas": replicas,
        "backend": backend,
        "ratio": {"prefill": 2, "decode": 1},
        "engines": [role_engine("prefill", 1), role_engine("decode", 4)],
        **extra,
    }


def clusters_of(replica: dict[str, Any]) -> set[str]:
    return {replica["cluster"]}


def test_an_instance_lands_whole_on_one_cluster():
    result = place(deployment=pd(), clusters=CLUSTERS, classes=CLASSES)
    assert result["scheduled"] == 2, result["unschedulable"]
    by_cluster = {r["cluster"]: r for r in result["replicas"]}
    assert sorted(by_cluster) == ["b", "c"]  # a has room for the decode engine only: it takes nothing
    for replica in result["replicas"]:
        engines = {e["name"]: e for e in replica["engines"]}
        assert (engines["prefill"]["copies"], engines["decode"]["copies"]) == (2, 1)
        assert [r["count"] for r in engines["prefill"]["members"][0]["device_requests"]] == [1]
        assert [r["count"] for r in engines["decode"]["members"][0]["device_requests"]] == [4]
    pools = {e["name"]: e["members"][0]["pool"] for e in by_cluster["c"]["engines"]}
    assert pools == {"prefill": "small", "decode": "big"}  # one cluster, two pools (colocate: cluster)
    assert "a" in result["unschedulable"]
    # The prefill pods fit beside each other on a's node; then the decode engine has no node: nothing is placed there.
    assert result["unschedulable"]["a"]["reason"] == (
        "insufficient capacity: no pool that matches engine decode has 1 free node(s)"
    )


def test_a_third_instance_has_no_cluster_and_nothing_is_placed_in_part():
    result = place(deployment=pd(replicas=3), clusters=CLUSTERS, classes=CLASSES)
    assert result["scheduled"] == 2
    assert sorted(r["cluster"] for r in result["replicas"]) == ["b", "c"]
    assert result["condition"]["reason"] == "InsufficientCapacity"


def test_colocate_fabric_keeps_an_instance_in_one_pool():
    result = place(deployment=pd(colocate="fabric"), clusters=CLUSTERS, classes=CLASSES)
    assert result["scheduled"] == 1
    (replica,) = result["replicas"]
    assert replica["cluster"] == "b"
    assert {e["members"][0]["pool"] for e in replica["engines"]} == {"big"}
    why = result["unschedulable"]["c"]
    assert "no single pool" in why["reason"] and "colocate: fabric" in why["reason"]
    assert set(why["pools"]) == {"small", "big"}


def test_explain_names_each_engine_by_its_role():
    from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelDeployment, parse
    from ansible_collections.gpufleet.serving.plugins.module_utils.placement import (
        _validated_clusters,
        plan,
        validate_classes,
    )

    dep = parse(ModelDeployment, pd(), "deployment")
    classes = validate_classes(CLASSES)
    result = plan(dep, classes, _validated_clusters(CLUSTERS, classes), [], explain_pools=True)
    text = json.dumps(result.candidates)
    assert "prefill engine prefill: " in text and "decode engine decode: " in text


# --------------------------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------------------------


def placed(dep: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    result = place(deployment=dep, clusters=CLUSTERS, classes=CLASSES)
    assert result["scheduled"] == dep["replicas"], result["unschedulable"]
    out = {}
    for cluster in sorted({r["cluster"] for r in result["replicas"]}):
        out[cluster] = render_serving_manifests(result["replicas"], dep, cluster=cluster)
    return out


def as_pod(spec: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels}, "spec": spec}


def validate(objects: list[dict[str, Any]]) -> None:
    """Every object against Kubernetes 1.34-1.37 and the pinned CRDs; a PodCliqueSet's pod specs as Pods too (its
    CRD schema leaves ``podSpec`` open)."""
    k8s_schemas.validate_objects(objects)
    pods = [
        as_pod(clique["spec"]["podSpec"], clique["labels"])
        for obj in objects
        if obj["kind"] == "PodCliqueSet"
        for clique in obj["spec"]["template"]["cliques"]
    ]
    k8s_schemas.validate_objects(pods)


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_grove_renders_one_podcliqueset_per_instance_with_embedded_claims():
    for cluster, objects in placed(pd()).items():
        validate(objects)
        kinds = [o["kind"] for o in objects]
        assert kinds == ["PodCliqueSet", "Service", "Service", "ConfigMap"], cluster
        pcs = objects[0]
        assert pcs["spec"]["replicas"] == 1
        template = pcs["spec"]["template"]
        groups = {g["name"]: g for g in template["podCliqueScalingGroups"]}
        assert groups["prefill"] == {"name": "prefill", "cliqueNames": ["prefill"], "replicas": 2, "minAvailable": 2}
        assert groups["decode"] == {"name": "decode", "cliqueNames": ["decode"], "replicas": 1, "minAvailable": 1}
        claims = {
            t["name"]: t["templateSpec"]["spec"]["devices"]["requests"] for t in template["resourceClaimTemplates"]
        }
        assert claims["prefill"][0]["exactly"]["count"] == 1
        assert claims["decode"][0]["exactly"]["count"] == 4
        cliques = {c["name"]: c for c in template["cliques"]}
        for role in ("prefill", "decode"):
            clique = cliques[role]
            assert clique["resourceSharing"] == [{"name": role, "scope": "PerReplica"}]
            spec = clique["spec"]["podSpec"]
            assert "resourceClaims" not in spec  # Grove injects the per-pod claim
            assert "claims" not in spec["containers"][0].get("resources", {})
            assert KV in spec["containers"][0]["args"]
            assert env(spec["containers"][0])[NIXL_HOST_ENV] == {"fieldRef": {"fieldPath": "status.podIP"}}
            assert clique["labels"][LLMD_ROLE_LABEL] == role
            assert spec["nodeSelector"]["gpufleet.io/pool"]
        # Only decode pods are endpoints; they run the routing sidecar on the port, vLLM behind it.
        assert cliques["decode"]["labels"]["gpufleet.io/endpoint"] == "true"
        assert "gpufleet.io/endpoint" not in cliques["prefill"]["labels"]
        decode = cliques["decode"]["spec"]["podSpec"]
        (sidecar,) = [c for c in decode["initContainers"] if c["name"] == ROUTING_SIDECAR]
        assert sidecar["restartPolicy"] == "Always"
        assert sidecar["args"][:3] == ["--port=8000", "--vllm-port=8200", "--kv-connector=nixlv2"]
        assert "--port=8200" in decode["containers"][0]["args"]
        assert decode["containers"][0]["readinessProbe"]["httpGet"]["port"] == 8200
        assert "initContainers" not in cliques["prefill"]["spec"]["podSpec"]
        name_budget = len(pcs["metadata"]["name"]) + max(
            len(g) + len(c) for g in groups for c in groups[g]["cliqueNames"]
        )
        assert name_budget <= MAX_COMBINED_NAME


def test_the_deployment_rendering_is_two_workloads_and_the_llm_d_router():
    for cluster, objects in placed(pd(backend="auto")).items():
        validate(objects)
        workloads = {o["metadata"]["labels"]["gpufleet.io/engine"]: o for o in objects if o["kind"] == "Deployment"}
        assert {k: w["spec"]["replicas"] for k, w in workloads.items()} == {"prefill": 2, "decode": 1}, cluster
        for role, workload in workloads.items():
            container = workload["spec"]["template"]["spec"]["containers"][0]
            assert KV in container["args"]
            assert workload["spec"]["template"]["metadata"]["labels"][LLMD_ROLE_LABEL] == role
        (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
        config = json.loads(config_map["data"][ROUTER_CONFIG_KEY])
        assert config["kind"] == "EndpointPickerConfig"
        plugins = {p.get("name", p["type"]): p for p in config["plugins"]}
        assert plugins["disagg-profile-handler"]["parameters"] == {"deciders": {"prefill": "prefix-based-pd-decider"}}
        assert plugins["prefix-based-pd-decider"]["parameters"] == {"nonCachedTokens": 16}
        assert plugins["prefill-filter"]["parameters"]["matchLabels"] == {
            "gpufleet.io/deployment": "llama-pd",
            LLMD_ROLE_LABEL: "prefill",
        }
        assert [p["name"] for p in config["schedulingProfiles"]] == ["prefill", "decode"]
        services = [o for o in objects if o["kind"] == "Service"]
        assert all(s["spec"]["selector"]["gpufleet.io/endpoint"] == "true" for s in services)


def test_a_ratio_band_scales_in_grove_and_placement_reserves_its_top():
    dep = pd(replicas=1)
    dep["ratio"] = {"prefill": [1, 2], "decode": 1}
    objects = placed(dep)["b"]
    validate(objects)
    groups = {g["name"]: g for g in objects[0]["spec"]["template"]["podCliqueScalingGroups"]}
    assert groups["prefill"] == {
        "name": "prefill",
        "cliqueNames": ["prefill"],
        "replicas": 1,
        "minAvailable": 1,
        "scaleConfig": {"minReplicas": 1, "maxReplicas": 2},
    }


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("ratio"), "need a ratio"),
        (lambda d: d["engines"][0].pop("role"), "exactly two engines, one with role prefill"),
        (lambda d: d["engines"][0].update(copies=3), "copies 3 disagrees with ratio.prefill"),
        (lambda d: d["engines"][1].update(role="prefill"), "(got prefill: prefill, decode: prefill)"),
        (lambda d: d.update(ratio={"prefill": [3, 2], "decode": 1}), "band [min, max]"),
    ],
)
def test_pd_validation_names_the_problem(mutate, message):
    dep = pd()
    mutate(dep)
    with pytest.raises(FleetValidationError) as info:
        place(deployment=dep, clusters=CLUSTERS, classes=CLASSES)
    assert any(message in reason for _path, reason in info.value.errors), info.value.errors


# --------------------------------------------------------------------------------------------------------------------
# Grove for a Leader + Worker gang (issue 28 item 3)
# --------------------------------------------------------------------------------------------------------------------


def gang(backend: str) -> dict[str, Any]:
    member = copy.deepcopy(role_engine("decode", 4)["members"][0])
    leader = {**member, "role": "Leader"}
    worker = {**copy.deepcopy(member), "role": "Worker", "worker": {"nodes": 1}}
    return {
        "name": "big",
        "namespace": "ml",
        "replicas": 1,
        "backend": backend,
        "ray": True,
        "engines": [{"name": "main", "members": [leader, worker]}],
    }


def test_grove_renders_a_gang_as_one_podcliqueset_with_grove_discovery():
    objects = placed(gang("grove"))["b"]
    validate(objects)
    (pcs,) = [o for o in objects if o["kind"] == "PodCliqueSet"]
    template = pcs["spec"]["template"]
    assert template["podCliqueScalingGroups"] == [
        {"name": "main", "cliqueNames": ["main-leader", "main-worker"], "replicas": 1, "minAvailable": 1}
    ]
    cliques = {c["name"]: c for c in template["cliques"]}
    assert cliques["main-worker"]["spec"]["replicas"] == 1
    leader = cliques["main-leader"]["spec"]["podSpec"]["containers"][0]
    worker = cliques["main-worker"]["spec"]["podSpec"]["containers"][0]
    address = "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-main-leader-0.$(GROVE_HEADLESS_SERVICE)"
    assert env(leader)["GPUFLEET_LEADER_ADDRESS"] == address
    assert env(leader)["GPUFLEET_RANK"] == "0"
    assert env(worker)["GPUFLEET_WORKER_INDEX"] == "$(GROVE_PCLQ_POD_INDEX)"
    text = json.dumps([leader, worker])
    assert "LWS_" not in text  # nothing of LeaderWorkerSet's discovery is left
    assert "ray start --address=$(GPUFLEET_LEADER_ADDRESS):6379" in worker["command"][2]
    assert "GROVE_PCSG_TEMPLATE_NUM_PODS" in leader["command"][2]
    # The same deployment with backend leaderworkerset is untouched by Grove.
    lws = placed(gang("leaderworkerset"))["b"]
    assert [o["kind"] for o in lws if o["kind"] in ("LeaderWorkerSet", "PodCliqueSet")] == ["LeaderWorkerSet"]


def test_grove_refuses_an_engine_name_that_leaves_no_room_for_the_podcliqueset():
    dep = gang("grove")
    dep["engines"][0]["name"] = "an-engine-with-a-long-name"
    result = place(deployment=dep, clusters=CLUSTERS, classes=CLASSES)
    with pytest.raises(GpufleetError, match="too long -- Grove allows 45 characters"):
        render_serving_manifests(result["replicas"], dep, cluster=result["replicas"][0]["cluster"])


# --------------------------------------------------------------------------------------------------------------------
# The Grove operator in the serving stack's version matrix
# --------------------------------------------------------------------------------------------------------------------


def test_the_grove_operator_is_pinned_off_by_default_and_installed_when_a_cluster_turns_it_on():
    from pathlib import Path

    import yaml

    from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import plan_cluster

    defaults = Path(__file__).resolve().parents[4] / "roles/serving_stack/defaults/main.yml"
    versions = yaml.safe_load(defaults.read_text())["serving_stack_versions"]
    classes = {"h100x4": gpus(4)}
    cluster = {"name": "c1", "provider": "existing", "pools": [{"name": "big", "class": "h100x4", "nodes": 1}]}
    off = plan_cluster(cluster, classes, versions, {}, None)
    assert "grove" not in [r["component"] for r in off["releases"]]
    assert any(n.startswith("Grove operator") and n.endswith("disabled") for n in off["notes"])
    on = plan_cluster(cluster, classes, versions, {}, {"grove": {"enabled": True}})
    components = [r["component"] for r in on["releases"]]
    assert components.index("leaderworkerset") < components.index("grove") < components.index("kserve")
    grove = next(r for r in on["releases"] if r["component"] == "grove")
    assert grove["chart_ref"] == "oci://ghcr.io/ai-dynamo/grove/grove-charts"
    assert (grove["version"], grove["namespace"], grove["detect_crd"]) == (
        "v0.1.0-alpha.8",
        "grove-system",
        "podcliquesets.grove.io",
    )


def test_kserve_renders_an_instance_as_one_llminferenceservice_with_spec_prefill():
    for cluster, objects in placed(pd(backend="kserve")).items():
        validate(objects)
        assert [o["kind"] for o in objects] == [
            "ResourceClaimTemplate",
            "ResourceClaimTemplate",
            "LLMInferenceService",
            "Service",
            "Service",
        ], cluster
        (svc,) = [o for o in objects if o["kind"] == "LLMInferenceService"]
        spec = svc["spec"]
        assert "baseRefs" not in spec  # KServe applies its decode and prefill presets itself
        assert (spec["replicas"], spec["prefill"]["replicas"]) == (1, 2)
        assert spec["labels"]["gpufleet.io/endpoint"] == "true"
        assert "gpufleet.io/endpoint" not in spec["prefill"]["labels"]
        assert (spec["labels"][LLMD_ROLE_LABEL], spec["prefill"]["labels"][LLMD_ROLE_LABEL]) == ("decode", "prefill")
        for template in (spec["template"], spec["prefill"]["template"]):
            main = template["containers"][0]
            assert main["name"] == "main" and KV in main["args"]
            assert not any(a.startswith("--port") for a in main["args"])  # KServe's preset puts vLLM behind its sidecar
            assert "initContainers" not in template
        claims = {t["metadata"]["name"]: t for t in objects if t["kind"] == "ResourceClaimTemplate"}
        refs = [spec["template"]["resourceClaims"][0], spec["prefill"]["template"]["resourceClaims"][0]]
        assert {ref["resourceClaimTemplateName"] for ref in refs} == set(claims)
        config = spec["router"]["scheduler"]["config"]["inline"]
        assert config["kind"] == "EndpointPickerConfig"
        assert [p["name"] for p in config["schedulingProfiles"]] == ["prefill", "decode"]


# --------------------------------------------------------------------------------------------------------------------
# The llm-d router configuration against the EndpointPickerConfig API
# --------------------------------------------------------------------------------------------------------------------

# Transcribed from the EndpointPickerConfig Go type (gateway-api-inference-extension apix/config/v1alpha1
# endpointpickerconfig_types.go, now llm-d-router apix/config/v1alpha1): TypeMeta, featureGates, plugins
# ({name, type (required), parameters}), schedulingProfiles ({name, plugins: [{pluginRef (required), weight}]}),
# saturationDetector, data. It is a config file, not a CRD: no upstream JSON schema exists to fetch.
EPP_CONFIG_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "plugins", "schedulingProfiles"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "inference.networking.x-k8s.io/v1alpha1"},
        "kind": {"const": "EndpointPickerConfig"},
        "featureGates": {"type": "array", "items": {"type": "string"}},
        "plugins": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["type"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "type": {"type": "string", "minLength": 1},
                    "parameters": {"type": "object"},
                },
            },
        },
        "schedulingProfiles": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "plugins"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "plugins": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["pluginRef"],
                            "additionalProperties": False,
                            "properties": {"pluginRef": {"type": "string"}, "weight": {"type": "integer"}},
                        },
                    },
                },
            },
        },
        "saturationDetector": {"type": "object"},
        "data": {"type": "object"},
    },
}


def epp_config_problems(config: dict[str, Any]) -> list[str]:
    """Schema errors, and what the EPP's loader refuses: a plugin name used twice, a pluginRef that names no plugin
    (a plugin's name is its ``name``, else its ``type``), a decider the profile handler names that is not a plugin."""
    import jsonschema

    problems = [e.message for e in jsonschema.Draft202012Validator(EPP_CONFIG_SCHEMA).iter_errors(config)]
    names = [p.get("name") or p["type"] for p in config.get("plugins", [])]
    problems += [f"plugin {n} declared twice" for n in sorted({n for n in names if names.count(n) > 1})]
    for profile in config.get("schedulingProfiles", []):
        problems += [
            f"profile {profile['name']}: {ref['pluginRef']} is no plugin"
            for ref in profile["plugins"]
            if ref["pluginRef"] not in names
        ]
    for plugin in config.get("plugins", []):
        for decider in ((plugin.get("parameters") or {}).get("deciders") or {}).values():
            if decider not in names:
                problems.append(f"decider {decider} is no plugin")
    return problems


@pytest.mark.parametrize("decider", ["prefix", "always"])
def test_every_router_configuration_is_a_valid_endpoint_picker_config(decider):
    for backend in ("auto", "grove", "kserve"):
        dep = pd(backend=backend, replicas=1, pd={"decider": decider})
        (objects,) = list(placed(dep).values())
        configs = [json.loads(o["data"][ROUTER_CONFIG_KEY]) for o in objects if o["kind"] == "ConfigMap"]
        configs += [
            o["spec"]["router"]["scheduler"]["config"]["inline"] for o in objects if o["kind"] == "LLMInferenceService"
        ]
        assert len(configs) == 1, backend
        assert epp_config_problems(configs[0]) == [], backend
        types = [p["type"] for p in configs[0]["plugins"]]
        assert ("prefix-based-pd-decider" in types) == (decider == "prefix")
        assert ("always-disagg-pd-decider" in types) == (decider == "always")


def test_the_epp_checks_catch_a_broken_configuration():
    config = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [{"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "nope"}}}],
        "schedulingProfiles": [{"name": "decode", "plugins": [{"pluginRef": "decode-filter"}]}],
    }
    assert epp_config_problems(config) == ["profile decode: decode-filter is no plugin", "decider nope is no plugin"]


@pytest.mark.parametrize("backend", ["auto", "grove"])
def test_a_gang_decode_role_renders_as_a_leaderworkerset_or_grove_cliques(backend):
    dep = pd(backend=backend, replicas=1)
    member = dep["engines"][1]["members"][0]
    dep["engines"][1]["members"] = [
        {**copy.deepcopy(member), "role": "Leader"},
        {**copy.deepcopy(member), "role": "Worker", "worker": {"nodes": 1}},
    ]
    # Three 4-GPU nodes: the gang takes two, the prefill pods share the third.
    fleet = [{"name": "d", "pools": [{"name": "big", "class": "h100x4", "nodes": 3}]}]
    result = place(deployment=dep, clusters=fleet, classes=CLASSES)
    assert result["scheduled"] == 1, result["unschedulable"]
    objects = render_serving_manifests(result["replicas"], dep, cluster="d")
    validate(objects)
    if backend == "auto":
        kinds = sorted(o["kind"] for o in objects)
        assert kinds.count("Deployment") == 1 and kinds.count("LeaderWorkerSet") == 1 and "ConfigMap" in kinds
        (lws,) = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
        leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
        worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    else:
        (pcs,) = [o for o in objects if o["kind"] == "PodCliqueSet"]
        cliques = {c["name"]: c for c in pcs["spec"]["template"]["cliques"]}
        assert sorted(cliques) == ["decode-leader", "decode-worker", "prefill"]
        leader = {
            "metadata": {"labels": cliques["decode-leader"]["labels"]},
            "spec": cliques["decode-leader"]["spec"]["podSpec"],
        }
        worker = {
            "metadata": {"labels": cliques["decode-worker"]["labels"]},
            "spec": cliques["decode-worker"]["spec"]["podSpec"],
        }
    assert [c["name"] for c in leader["spec"]["initContainers"]] == [ROUTING_SIDECAR]
    assert "initContainers" not in worker["spec"]
    assert leader["metadata"]["labels"]["gpufleet.io/endpoint"] == "true"
    assert "gpufleet.io/endpoint" not in worker["metadata"]["labels"]
    for pod in (leader, worker):
        assert KV in pod["spec"]["containers"][0]["args"]
