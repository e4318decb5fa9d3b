"""Fleet data model: the example fleet validates; malformed fleets fail with the exact field path and reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from example_fleet import example_fleet

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.suggest import index_path


def run(data: dict[str, Any], **kwargs: Any):
    return validate_fleet(
        classes=data["classes"], hosts=data["hosts"], deployments=data["deployments"], caches=data["caches"], **kwargs
    )


def test_example_fleet_is_valid_and_normalised():
    fleet = run(example_fleet())
    assert sorted(fleet.clusters) == ["eks-us-east-1", "gke-europe-west4", "gke-us-central1", "onprem-a"]
    assert [d.name for d in fleet.deployments] == ["qwen-demo", "llama-70b", "deepseek-v3"]
    out = fleet.to_dict()
    onprem = next(c for c in out["clusters"] if c["name"] == "onprem-a")
    dgx = onprem["pools"][0]
    assert dgx == {"name": dgx["name"], "class": dgx["class"], "nodes": 4}  # the class's devices are in classes, once
    devices = out["classes"][dgx["class"]]["devices"]
    assert {d["name"]: (d["claim"], d["count"]) for d in devices} == {"gpu": ("DRA", 8), "ib": ("Synthetic", 8)}
    # Defaults are filled in.
    assert out["deployments"][0]["backend"] == "auto"
    assert out["deployments"][0]["engines"][0]["copies"] == 1
    assert out["clusters"][0]["ready"] is True
    # Each cluster once, in the shape placement reads (design.md §4); no second copy of the pools.
    eks = out["clusters"][0]
    assert "node_pools" not in eks and "placement_clusters" not in out
    assert eks["pools"] == [
        {"name": "a10g", "class": "a10g-1x", "nodes": 3},
        {"name": "p5", "class": "h100-8x-ib", "nodes": 1},
    ]
    assert (eks["name"], eks["taints"], eks["ready"]) == ("eks-us-east-1", [], True)


def test_summary_table_lists_clusters_pools_and_deployments():
    lines = run(example_fleet()).summary()
    assert lines[0].split() == ["CLUSTER", "PROVIDER", "POOL", "CLASS", "NODES", "DEVICES/NODE"]
    assert any(line.split()[:5] == ["onprem-a", "existing", "dgx", "h100-8x-ib", "4"] for line in lines)
    assert any("8x gpu, 8x ib (synthetic)" in line for line in lines)
    assert any(line.startswith("deepseek-v3") and "gang of 2 pods" in line for line in lines)


def test_patterns_are_resolved_and_restricted_to_the_fleet():
    fleet = run(
        example_fleet(),
        resolve_pattern=lambda p: ["onprem-a", "not-a-cluster"] if "onprem" in p else ["gke-us-central1", "x"],
    )
    assert fleet.targets["deepseek-v3"] == ["onprem-a"]
    assert fleet.targets["qwen-demo"] == ["gke-us-central1"]


def test_a_host_pattern_matching_no_cluster_is_an_error_naming_the_field():
    """``clusters: gpufleet_cluster`` (one letter short) used to validate with no candidates and prune everything."""
    data = example_fleet()
    data["deployments"][0]["clusters"] = "gpufleet_cluster"
    resolver = {"gpufleet_cluster": [], "gpufleet_clusters:&prod": ["gke-us-central1"]}
    with pytest.raises(FleetValidationError) as err:
        run(data, resolve_pattern=lambda p: resolver.get(p, ["gke-us-central1", "onprem-a"]))
    assert err.value.errors[0][0] == "gpufleet_model_deployments[0] (qwen-demo).clusters"
    assert "'gpufleet_cluster' matches no cluster" in err.value.errors[0][1]
    assert len(err.value.errors) == 1


Mutator = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutator:
    """Mutator setting ``data[path]`` where path is like ``deployments.0.engines.0.name``."""

    def apply(data: dict[str, Any]) -> None:
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        target = data
        for k in keys[:-1]:
            target = target[k]
        if value is _DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value

    return apply


_DELETE = object()
STANDALONE = "deployments.0.engines.0.members.0"
GANG = "deployments.2.engines.0.members"
L4 = "classes.l4-1x"
GKE = "hosts.gke-us-central1"


def _both(*mutators: Mutator) -> Mutator:
    def apply(data: dict[str, Any]) -> None:
        for m in mutators:
            m(data)

    return apply


def _dup_deployment(data: dict[str, Any]) -> None:
    data["deployments"].append(dict(data["deployments"][0]))


def _two_standalones(data: dict[str, Any]) -> None:
    members = data["deployments"][0]["engines"][0]["members"]
    members.append(dict(members[0]))


# (id, mutation, exact path, substring of the reason)
MALFORMED: list[tuple[str, Mutator, str, str]] = [
    (
        "bad-role",
        _set(f"{STANDALONE}.role", "Boss"),
        "gpufleet_model_deployments[0].engines[0].members[0].role",
        "must be one of Standalone, Leader, Worker",
    ),
    ("negative-replicas", _set("deployments.0.replicas", -1), "gpufleet_model_deployments[0].replicas", "must be >= 0"),
    (
        "replicas-not-int",
        _set("deployments.0.replicas", "three"),
        "gpufleet_model_deployments[0].replicas",
        "must be an integer",
    ),
    (
        "missing-replicas",
        _set("deployments.1.replicas", _DELETE),
        "gpufleet_model_deployments[1].replicas",
        "is required",
    ),
    ("name-not-dns", _set("deployments.0.name", "Qwen_Demo"), "gpufleet_model_deployments[0].name", "DNS label"),
    ("unknown-field", _set("deployments.0.replica", 3), "gpufleet_model_deployments[0].replica", "not a known field"),
    (
        "bad-backend",
        _set("deployments.0.backend", "ray"),
        "gpufleet_model_deployments[0].backend",
        "must be one of auto, deployment, leaderworkerset, kserve",
    ),
    (
        "unknown-cache",
        _set("deployments.0.cache", "nope"),
        "gpufleet_model_deployments[0].cache",
        "unknown model cache 'nope'",
    ),
    (
        "cache-other-namespace",
        _set("deployments.0.namespace", "other"),
        "gpufleet_model_deployments[0].cache",
        "a pod can only mount a PVC of its own namespace",
    ),
    (
        "two-standalones",
        _two_standalones,
        "gpufleet_model_deployments[0].engines[0].members",
        "exactly one Standalone member, or one Leader and one Worker",
    ),
    (
        "leader-without-worker",
        _set(GANG, [{"role": "Leader", "template": {"spec": {"containers": [{"name": "a", "image": "b"}]}}}]),
        "gpufleet_model_deployments[2].engines[0].members",
        "exactly one Standalone member",
    ),
    (
        "worker-without-nodes",
        _set(f"{GANG}.1.worker", _DELETE),
        "gpufleet_model_deployments[2].engines[0].members[1]",
        "worker: {nodes: N} is required",
    ),
    (
        "worker-nodes-zero",
        _set(f"{GANG}.1.worker", {"nodes": 0}),
        "gpufleet_model_deployments[2].engines[0].members[1].worker.nodes",
        "must be >= 1",
    ),
    (
        "worker-block-on-standalone",
        _set(f"{STANDALONE}.worker", {"nodes": 2}),
        "gpufleet_model_deployments[0].engines[0].members[0]",
        "worker is only allowed on a Worker member",
    ),
    (
        "missing-template",
        _set(f"{STANDALONE}.template", _DELETE),
        "gpufleet_model_deployments[0].engines[0].members[0].template",
        "is required",
    ),
    (
        "template-without-containers",
        _set(f"{STANDALONE}.template", {"spec": {}}),
        "gpufleet_model_deployments[0].engines[0].members[0].template.spec.containers",
        "at least one container",
    ),
    (
        "container-without-image",
        _set(f"{STANDALONE}.template.spec.containers.0.image", _DELETE),
        "gpufleet_model_deployments[0].engines[0].members[0].template.spec.containers[0]",
        "needs a name and an image",
    ),
    (
        "request-count-zero",
        _set(f"{STANDALONE}.node_selector.devices.0.count", 0),
        "gpufleet_model_deployments[0].engines[0].members[0].node_selector.devices[0].count",
        "must be >= 1",
    ),
    (
        "duplicate-request",
        _set(f"{STANDALONE}.node_selector.devices", [{"name": "gpu"}, {"name": "gpu"}]),
        "gpufleet_model_deployments[0].engines[0].members[0].node_selector.devices",
        "duplicate device request name 'gpu'",
    ),
    (
        "bad-cel",
        _set(f"{STANDALONE}.node_selector.devices.0.selectors.0.cel", "device.driver =="),
        "gpufleet_model_deployments[0].engines[0].members[0].node_selector.devices[0].selectors[0].cel",
        "invalid CEL selector",
    ),
    (
        "bad-toleration-operator",
        _set("deployments.0.tolerations", [{"key": "a", "operator": "In"}]),
        "gpufleet_model_deployments[0].tolerations[0].operator",
        "must be one of Exists, Equal",
    ),
    (
        "duplicate-deployment",
        _dup_deployment,
        "gpufleet_model_deployments[3].name",
        "duplicate deployment name 'qwen-demo'",
    ),
    (
        "copies-zero",
        _set("deployments.0.engines.0.copies", 0),
        "gpufleet_model_deployments[0].engines[0].copies",
        "must be >= 1",
    ),
    (
        "deployment-backend-gang",
        _set("deployments.2.backend", "deployment"),
        "gpufleet_model_deployments[2]",
        "backend deployment cannot run a Leader/Worker engine",
    ),
    # Inference classes
    (
        "attribute-two-types",
        _set(f"{L4}.devices.0.attributes.productName", {"string": "L4", "int": 4}),
        "gpufleet_inference_classes['l4-1x'].devices[0].attributes.productName",
        "exactly one of string, version, bool, int",
    ),
    (
        "attribute-bad-version",
        _set(f"{L4}.devices.0.attributes.cudaComputeCapability", {"version": "8.9"}),
        "gpufleet_inference_classes['l4-1x'].devices[0].attributes.cudaComputeCapability",
        "semantic version",
    ),
    (
        "attribute-bad-name",
        _set(f"{L4}.devices.0.attributes", {"product name": {"string": "x"}}),
        "gpufleet_inference_classes['l4-1x'].devices[0].attributes",
        "not a DRA attribute/capacity name",
    ),
    (
        "capacity-not-quantity",
        _set(f"{L4}.devices.0.capacity.memory", {"value": "24 GB"}),
        "gpufleet_inference_classes['l4-1x'].devices[0].capacity.memory.value",
        "not a Kubernetes quantity",
    ),
    (
        "dra-without-device-class",
        _set(f"{L4}.devices.0.device_class_name", _DELETE),
        "gpufleet_inference_classes['l4-1x'].devices[0]",
        "device_class_name is required when claim is DRA",
    ),
    (
        "bad-claim",
        _set(f"{L4}.devices.0.claim", "Maybe"),
        "gpufleet_inference_classes['l4-1x'].devices[0].claim",
        "must be one of DRA, Synthetic",
    ),
    ("no-devices", _set(f"{L4}.devices", []), "gpufleet_inference_classes['l4-1x'].devices", "at least 1 item"),
    (
        "driver-not-dns",
        _set(f"{L4}.devices.0.driver", "GPU_NVIDIA"),
        "gpufleet_inference_classes['l4-1x'].devices[0].driver",
        "DNS subdomain",
    ),
    (
        "device-count-zero",
        _set(f"{L4}.devices.0.count", 0),
        "gpufleet_inference_classes['l4-1x'].devices[0].count",
        "must be >= 1",
    ),
    # Clusters
    (
        "unknown-pool-class",
        _set(f"{GKE}.gpufleet_node_pools.0.class", "l4-2x"),
        "hostvars['gke-us-central1'].gpufleet_node_pools[0].class",
        "unknown inference class 'l4-2x'",
    ),
    (
        "bad-provider",
        _set(f"{GKE}.gpufleet_provider", "aks"),
        "hostvars['gke-us-central1'].gpufleet_provider",
        "must be one of gke, eks, existing",
    ),
    (
        "missing-provider-block",
        _set(f"{GKE}.gpufleet_gke", _DELETE),
        "hostvars['gke-us-central1']",
        "gpufleet_gke is required when gpufleet_provider is gke",
    ),
    (
        "old-eks-version",
        _set("hosts.eks-us-east-1.gpufleet_eks.kubernetes_version", "1.31"),
        "hostvars['eks-us-east-1'].gpufleet_eks.kubernetes_version",
        "DRA (resource.k8s.io/v1) is GA from Kubernetes 1.34",
    ),
    (
        "pool-count-above-max",
        _set(f"{GKE}.gpufleet_node_pools.0.node_count", 9),
        "hostvars['gke-us-central1'].gpufleet_node_pools[0]",
        "outside [min_node_count, max_node_count]",
    ),
    (
        "duplicate-pool",
        _set(f"{GKE}.gpufleet_node_pools.1.name", "l4"),
        "hostvars['gke-us-central1'].gpufleet_node_pools",
        "duplicate node pool name 'l4'",
    ),
    (
        "bad-taint-effect",
        _set(f"{GKE}.gpufleet_taints", [{"key": "gpufleet.io/drain", "effect": "PreferNoSchedule"}]),
        "hostvars['gke-us-central1'].gpufleet_taints[0].effect",
        "must be one of NoSchedule, NoExecute",
    ),
    (
        "class-cannot-provision",
        _set(f"{GKE}.gpufleet_node_pools.0.class", "a10g-1x"),
        "hostvars['gke-us-central1'].gpufleet_node_pools[0].class",
        "has no provisioning.gke",
    ),
    # Caches
    (
        "cache-two-sources",
        _set("caches.0.source.s3", {"uri": "s3://models/qwen"}),
        "gpufleet_model_caches[0].source",
        "exactly one of hugging_face, s3, http",
    ),
    ("cache-bad-size", _set("caches.0.size", "lots"), "gpufleet_model_caches[0].size", "not a Kubernetes quantity"),
    (
        "cache-existing-pvc-no-claim",
        _set("caches.0.storage", {"backend": "existing_pvc"}),
        "gpufleet_model_caches[0].storage",
        "claim_name is required when backend is existing_pvc",
    ),
    (
        "cache-bad-s3-uri",
        _set("caches.0.source", {"s3": {"uri": "https://bucket/x"}}),
        "gpufleet_model_caches[0].source.s3.uri",
        "does not match the expected form",
    ),
    # Issue 16: YAML 1.1 booleans are not numbers, booleans are real booleans.
    ("replicas-yes", _set("deployments.0.replicas", True), "gpufleet_model_deployments[0].replicas", "integer"),
    (
        "copies-on",
        _set("deployments.0.engines.0.copies", True),
        "gpufleet_model_deployments[0].engines[0].copies",
        "integer",
    ),
    (
        "count-true",
        _set(f"{STANDALONE}.node_selector.devices.0.count", True),
        "gpufleet_model_deployments[0].engines[0].members[0].node_selector.devices[0].count",
        "must be an integer (got True)",
    ),
    ("replicas-string", _set("deployments.0.replicas", "3"), "gpufleet_model_deployments[0].replicas", "integer"),
    ("ray-string", _set("deployments.0.ray", "yes"), "gpufleet_model_deployments[0].ray", "must be true or false"),
    (
        "ready-string",
        _set(f"{GKE}.gpufleet_ready", "no"),
        "hostvars['gke-us-central1'].gpufleet_ready",
        "true or false",
    ),
    (
        "node-count-float",
        _set(f"{GKE}.gpufleet_node_pools.0.node_count", 2.0),
        "hostvars['gke-us-central1'].gpufleet_node_pools[0].node_count",
        "must be an integer",
    ),
    (
        "class-device-count-bool",
        _set(f"{L4}.devices.0.count", True),
        "gpufleet_inference_classes['l4-1x'].devices[0].count",
        "must be an integer",
    ),
    # Kubernetes' ResourceSlice limits on attribute values and names.
    (
        "attribute-int-over-int64",
        _set(f"{L4}.devices.0.attributes.numaNode", {"int": 2**70}),
        "gpufleet_inference_classes['l4-1x'].devices[0].attributes.numaNode",
        "outside the int64 range",
    ),
    (
        "attribute-string-over-64",
        _set(f"{L4}.devices.0.attributes.productName", {"string": "x" * 65}),
        "gpufleet_inference_classes['l4-1x'].devices[0].attributes.productName",
        "at most 64",
    ),
    (
        "attribute-domain-over-63",
        _set(f"{L4}.devices.0.attributes", {("a" * 60) + ".example.com/x": {"string": "x"}}),
        "gpufleet_inference_classes['l4-1x'].devices[0].attributes",
        "at most 63 characters",
    ),
    (
        "driver-over-63",
        _set(f"{L4}.devices.0.driver", ("a" * 60) + ".example.com"),
        "gpufleet_inference_classes['l4-1x'].devices[0].driver",
        "at most 63",
    ),
    (
        "kubernetes-version-garbage",
        _set(f"{GKE}.gpufleet_gke.kubernetes_version", "1.34.0-garbage;rm -rf"),
        "hostvars['gke-us-central1'].gpufleet_gke.kubernetes_version",
        "must be a Kubernetes version",
    ),
    (
        "kubernetes-version-trailing",
        _set("hosts.eks-us-east-1.gpufleet_eks.kubernetes_version", "1.36 "),
        "hostvars['eks-us-east-1'].gpufleet_eks.kubernetes_version",
        "must be a Kubernetes version",
    ),
    # Issue 23: values the API server rejects in what we render are validation errors with the field path.
    (
        "toleration-key-not-qualified",
        _set("deployments.0.tolerations", [{"key": "bad key!", "operator": "Exists"}]),
        "gpufleet_model_deployments[0].tolerations[0].key",
        "must be a taint key (a label key), an optional DNS subdomain prefix",
    ),
    (
        "toleration-key-name-over-63",
        _set("deployments.0.tolerations", [{"key": "example.com/" + "a" * 64, "operator": "Exists"}]),
        "gpufleet_model_deployments[0].tolerations[0].key",
        "must be a taint key",
    ),
    (
        "toleration-key-prefix-over-253",
        _set("deployments.0.tolerations", [{"key": ("a" * 60 + ".") * 5 + "io/x", "operator": "Exists"}]),
        "gpufleet_model_deployments[0].tolerations[0].key",
        "must be a taint key",
    ),
    (
        "toleration-key-trailing-newline",
        _set("deployments.0.tolerations", [{"key": "gpufleet.io/drain\n", "operator": "Exists"}]),
        "gpufleet_model_deployments[0].tolerations[0].key",
        "(got 'gpufleet.io/drain\\n')",
    ),
    (
        "toleration-value-not-a-label-value",
        _set("deployments.0.tolerations", [{"key": "dedicated", "value": "ml team", "effect": "NoSchedule"}]),
        "gpufleet_model_deployments[0].tolerations[0].value",
        "must be a taint value (a label value)",
    ),
    (
        "toleration-seconds-without-noexecute",
        _set(
            "deployments.0.tolerations",
            [{"key": "gpufleet.io/drain", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}],
        ),
        "gpufleet_model_deployments[0].tolerations[0].tolerationSeconds",
        "is only allowed with effect NoExecute (got effect NoSchedule)",
    ),
    (
        "toleration-seconds-without-effect",
        _set(
            "deployments.0.tolerations", [{"key": "gpufleet.io/drain", "operator": "Exists", "tolerationSeconds": 30}]
        ),
        "gpufleet_model_deployments[0].tolerations[0].tolerationSeconds",
        "is only allowed with effect NoExecute (got effect empty)",
    ),
    (
        "template-toleration-key",
        _set(
            f"{STANDALONE}.template.spec.tolerations",
            [{"key": "dedicated", "operator": "Exists"}, {"key": "-dedicated", "operator": "Exists"}],
        ),
        "gpufleet_model_deployments[0].engines[0].members[0].template.spec.tolerations[1].key",
        "must be a taint key",
    ),
    (
        "template-toleration-operator",
        _set(f"{STANDALONE}.template.spec.tolerations", [{"key": "dedicated", "operator": "In"}]),
        "gpufleet_model_deployments[0].engines[0].members[0].template.spec.tolerations[0].operator",
        "must be one of Exists, Equal",
    ),
    (
        "template-toleration-exists-with-value",
        _set(f"{STANDALONE}.template.spec.tolerations", [{"key": "dedicated", "operator": "Exists", "value": "ml"}]),
        "gpufleet_model_deployments[0].engines[0].members[0].template.spec.tolerations[0]",
        "value must be empty when operator is Exists (got 'ml')",
    ),
    (
        "template-toleration-seconds",
        _set(
            f"{STANDALONE}.template.spec.tolerations",
            [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}],
        ),
        "gpufleet_model_deployments[0].engines[0].members[0].template.spec.tolerations[0].tolerationSeconds",
        "only allowed with effect NoExecute",
    ),
    (
        "template-tolerations-not-a-list",
        _set(f"{STANDALONE}.template.spec.tolerations", {"key": "dedicated"}),
        "gpufleet_model_deployments[0].engines[0].members[0].template.spec.tolerations",
        "must be a list (got dict)",
    ),
    (
        "template-node-selector-key",
        _set(f"{STANDALONE}.template.spec.nodeSelector", {"cloud.google.com/gke nodepool": "a"}),
        "gpufleet_model_deployments[0].engines[0].members[0].template.spec.nodeSelector['cloud.google.com/gke nodepool']",
        "must be a node label key",
    ),
    (
        "template-node-selector-value",
        _set(f"{STANDALONE}.template.spec.nodeSelector", {"zone": "us central1"}),
        "gpufleet_model_deployments[0].engines[0].members[0].template.spec.nodeSelector.zone",
        "must be a node label value: a string",
    ),
    (
        "template-label-key",
        _set(f"{STANDALONE}.template.metadata", {"labels": {"-team": "a"}}),
        "gpufleet_model_deployments[0].engines[0].members[0].template.metadata.labels['-team']",
        "must be a label key",
    ),
    (
        "template-annotation-key",
        _set(f"{STANDALONE}.template.metadata", {"annotations": {"example.com/a/b": "x"}}),
        "gpufleet_model_deployments[0].engines[0].members[0].template.metadata.annotations['example.com/a/b']",
        "must be an annotation key",
    ),
    (
        "template-annotation-not-a-string",
        _set(f"{STANDALONE}.template.metadata", {"annotations": {"prometheus.io/port": 8000}}),
        "gpufleet_model_deployments[0].engines[0].members[0].template.metadata.annotations['prometheus.io/port']",
        "must be a string (got int)",
    ),
    (
        "template-annotations-over-256k",
        _set(f"{STANDALONE}.template.metadata", {"annotations": {"a": "x" * 200_000, "b": "y" * 70_000}}),
        "gpufleet_model_deployments[0].engines[0].members[0].template.metadata.annotations",
        "Kubernetes allows at most 262144",
    ),
    (
        "template-metadata-not-a-mapping",
        _set(f"{STANDALONE}.template.metadata", ["labels"]),
        "gpufleet_model_deployments[0].engines[0].members[0].template.metadata",
        "must be a mapping (got list)",
    ),
    (
        "gateway-namespace",
        _set("deployments.0.gateway", {"name": "gw", "namespace": "Gateway_NS"}),
        "gpufleet_model_deployments[0].gateway.namespace",
        "must be a namespace name, a DNS label: at most 63 lowercase letters, digits and '-', starting and ending "
        "alphanumeric (got 'Gateway_NS')",
    ),
    (
        "gateway-section-name",
        _set("deployments.0.gateway", {"name": "gw", "section_name": "HTTPS"}),
        "gpufleet_model_deployments[0].gateway.section_name",
        "must be a Gateway listener name (SectionName), a DNS subdomain",
    ),
    (
        "gateway-section-name-over-253",
        _set("deployments.0.gateway", {"name": "gw", "section_name": "a" * 254}),
        "gpufleet_model_deployments[0].gateway.section_name",
        "must be a Gateway listener name (SectionName)",
    ),
    (
        "gateway-name-empty",
        _set("deployments.0.gateway", {"name": ""}),
        "gpufleet_model_deployments[0].gateway.name",
        "must be a Gateway name, a DNS subdomain",
    ),
    (
        "kserve-base-ref",
        _set("deployments.0.kserve", {"base_refs": ["kserve-config-llm-template", "Team Extras"]}),
        "gpufleet_model_deployments[0].kserve.base_refs[1]",
        "must be the name of an LLMInferenceServiceConfig, a DNS subdomain: at most 253 characters, DNS labels joined "
        "by '.' (got 'Team Extras')",
    ),
    (
        "kserve-base-ref-not-a-string",
        _set("deployments.0.kserve", {"base_refs": [7]}),
        "gpufleet_model_deployments[0].kserve.base_refs[0]",
        "must be a string",
    ),
    # ``name: |`` (a YAML block scalar) ends in a newline: "$" in a Python pattern used to let it through.
    ("name-trailing-newline", _set("deployments.0.name", "qwen-demo\n"), "gpufleet_model_deployments[0].name", "DNS"),
    (
        "kubernetes-version-trailing-newline",
        _set("hosts.eks-us-east-1.gpufleet_eks.kubernetes_version", "1.36\n"),
        "hostvars['eks-us-east-1'].gpufleet_eks.kubernetes_version",
        "must be a Kubernetes version",
    ),
    # Two caches on one PVC.
    (
        "cache-duplicate-claim-name",
        lambda d: d["caches"].append(
            {**d["caches"][0], "name": "other", "storage": {"claim_name": f"gpufleet-cache-{d['caches'][0]['name']}"}}
        ),
        "gpufleet_model_caches[1].storage.claim_name",
        "uses too on",
    ),
]


@pytest.mark.parametrize(("mutate", "path", "reason"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_fleet_names_the_field(mutate: Mutator, path: str, reason: str):
    data = example_fleet()
    mutate(data)
    with pytest.raises(FleetValidationError) as info:
        run(data)
    errors = info.value.errors
    # Paths name the list items on them (gpufleet_model_deployments[0] (qwen-demo)...): compared without the names.
    assert any(index_path(p) == path and reason in r for p, r in errors), (
        f"expected {path}: ...{reason}...; got {errors}"
    )
    # The message is one "path: reason" line per error.
    assert f"{path}: " in index_path(str(info.value))


def test_every_error_is_reported_not_only_the_first():
    data = example_fleet()
    _set(f"{STANDALONE}.role", "Boss")(data)
    _set("deployments.1.replicas", -1)(data)
    _set(f"{GKE}.gpufleet_provider", "aks")(data)
    with pytest.raises(FleetValidationError) as info:
        run(data)
    paths = {error[0] for error in info.value.errors}
    assert {
        "gpufleet_model_deployments[0] (qwen-demo).engines[0] (main).members[0].role",
        "gpufleet_model_deployments[1] (llama-70b).replicas",
        "hostvars['gke-us-central1'].gpufleet_provider",
    } <= paths


def test_catalogs_of_the_wrong_type_are_reported():
    data = example_fleet()
    with pytest.raises(FleetValidationError) as info:
        validate_fleet(classes=[], hosts=data["hosts"], deployments={"a": 1}, caches=None)
    paths = {error[0] for error in info.value.errors}
    assert "gpufleet_inference_classes" in paths
    assert "gpufleet_model_deployments" in paths


def test_selector_check_can_be_skipped():
    data = example_fleet()
    _set(f"{STANDALONE}.node_selector.devices.0.selectors.0.cel", "device.driver ==")(data)
    run(data, check_selectors=False)


def test_what_kubernetes_accepts_still_validates():
    """The issue 23 checks reject only what the API server rejects."""
    data = example_fleet()
    dep = data["deployments"][0]
    dep["tolerations"] = [
        {"operator": "Exists"},  # every taint
        {"key": "example.com/GPU_Type.v2", "operator": "Equal", "value": "", "effect": ""},  # "": every effect
        {"key": "gpufleet.io/drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -1},
        {"key": "dedicated", "value": "ml.team_a-1"},
    ]
    dep["gateway"] = {"name": "gw.example", "namespace": "", "section_name": "https.example.com"}
    dep["kserve"] = {"base_refs": ["kserve-config-llm-template", "team.extras"]}
    template = dep["engines"][0]["members"][0]["template"]
    template["metadata"] = {
        "labels": {"example.com/team": "", "Team": "A_b.c"},
        "annotations": {"Example.com/Owner": "x" * 1000, "note": ""},  # annotation keys are lower-cased first
    }
    template["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "us-central1-a"}
    template["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    parsed = run(data).deployments[0]
    assert parsed.tolerations[1].effect is None  # tolerates every effect, rendered without one
    assert parsed.gateway is not None and parsed.gateway.namespace is None
    assert parsed.gateway.section_name == "https.example.com"
    assert parsed.kserve.base_refs == ["kserve-config-llm-template", "team.extras"]


def test_label_and_annotation_keys_follow_kubernetes():
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_label_key, is_label_value
    from ansible_collections.gpufleet.serving.plugins.module_utils.models import check_annotation_key

    assert is_label_key("a" * 63) and is_label_key("example.com/" + "a" * 63)
    assert not is_label_key("a" * 64)
    assert is_label_key("a" * 253 + "/x") and not is_label_key("a." * 126 + "ab/x")  # 254-character prefix
    for bad in ("", "/x", "example.com/", "a/b/c", "Example.com/x", "x\n", "example.com\n/x", "-x", 3):
        assert not is_label_key(bad), bad
    assert is_label_value("") and not is_label_value("x\n") and not is_label_value(3)
    assert check_annotation_key("Example.com/Owner") == "Example.com/Owner"
    with pytest.raises(ValueError, match="must be an annotation key"):
        check_annotation_key("example.com/a b")


def test_toleration_semantics_follow_kubernetes():
    from ansible_collections.gpufleet.serving.plugins.module_utils.models import Taint, Toleration

    drain = Taint(key="gpufleet.io/drain", value="true", effect="NoExecute")
    assert Toleration(key="gpufleet.io/drain", operator="Exists").tolerates(drain)
    assert Toleration(key="gpufleet.io/drain", value="true", effect="NoExecute").tolerates(drain)
    assert not Toleration(key="gpufleet.io/drain", value="false").tolerates(drain)
    assert not Toleration(key="gpufleet.io/drain", operator="Exists", effect="NoSchedule").tolerates(drain)
    assert Toleration(operator="Exists").tolerates(drain)
    assert not Toleration(key="other", operator="Exists").tolerates(drain)


@pytest.mark.parametrize("version", ["1.34", "1.34.1", "1.34.1-gke.1431000", "1.35.0-eks-1-35-20251120", "1.36"])
def test_provider_patch_versions_stay_valid(version: str):
    data = example_fleet()
    data["hosts"]["gke-us-central1"]["gpufleet_gke"]["kubernetes_version"] = version
    assert run(data).clusters["gke-us-central1"].gke.kubernetes_version == version


def test_same_claim_name_on_disjoint_clusters_is_allowed():
    data = example_fleet()
    first = data["caches"][0]
    data["caches"].append({**first, "name": "other", "storage": {"claim_name": f"gpufleet-cache-{first['name']}"}})
    data["caches"][0]["clusters"] = "a"
    data["caches"][1]["clusters"] = "b"
    fleet = run(data, resolve_pattern=lambda p: {"a": ["onprem-a"], "b": ["gke-us-central1"]}.get(p, ["onprem-a"]))
    assert fleet.cache_targets == {first["name"]: ["onprem-a"], "other": ["gke-us-central1"]}


SECRET = "s3cr3t-value"


@pytest.mark.parametrize(
    ("source", "path"),
    [
        ({"http": {"url": f"https://user:{SECRET}@models.example.com/m.safetensors"}}, "source.http.url"),
        (
            {"http": {"url": f"https://b.s3.amazonaws.com/m.bin?X-Amz-Credential=AK&X-Amz-Signature={SECRET}"}},
            "source.http.url",
        ),
        ({"http": {"url": f"https://h.example.com/m.bin?token={SECRET}"}}, "source.http.url"),
        (
            {"s3": {"uri": "s3://models/qwen", "endpoint": f"https://ak:{SECRET}@minio.example.com"}},
            "source.s3.endpoint",
        ),
    ],
)
def test_credentials_in_source_urls_are_rejected_without_echoing_them(source: dict[str, Any], path: str):
    data = example_fleet()
    data["caches"][0]["source"] = source
    with pytest.raises(FleetValidationError) as info:
        run(data)
    # The cache is invalid, so the deployment that uses it names an unknown cache too; nothing else is reported.
    assert [p for p, _r in info.value.errors if "caches" in p] == [f"gpufleet_model_caches[0] (qwen-2-5-0-5b).{path}"]
    assert "Secret" in str(info.value)
    assert SECRET not in str(info.value)


def test_plain_and_secret_backed_http_sources_are_valid():
    data = example_fleet()
    data["caches"][0]["source"] = {"http": {"url": "https://h.example.com/m.bin?download=1", "url_secret": "presigned"}}
    assert run(data).caches[0].source.http.url_secret == "presigned"
    data["caches"][0]["source"] = {"http": {"url": "https://h.example.com/m.bin", "credentials_secret": "basic"}}
    assert run(data).caches[0].source.http.credentials_secret == "basic"


def _sourced(data: dict[str, Any], **sources: Any):
    return validate_fleet(
        classes=data["classes"],
        hosts=data["hosts"],
        deployment_sources=sources.get("deployments", {"gpufleet_model_deployments": data["deployments"]}),
        cache_sources=sources.get("caches", {"gpufleet_model_caches": data["caches"]}),
    )


def test_deployments_merged_from_several_variables_name_their_variable():
    """Issue 31: teams own ``gpufleet_model_deployments_<team>`` files; every error names the variable."""
    data = example_fleet()
    qwen, llama, deepseek = data["deployments"]
    fleet = _sourced(
        data,
        deployments={
            "gpufleet_model_deployments": [qwen],
            "gpufleet_model_deployments_team_a": [llama],
            "gpufleet_model_deployments_team_b": [deepseek],
        },
    )
    assert [d.name for d in fleet.deployments] == ["qwen-demo", "llama-70b", "deepseek-v3"]

    bad = {**llama, "replicas": -1}
    with pytest.raises(FleetValidationError) as err:
        _sourced(data, deployments={"gpufleet_model_deployments": [qwen], "gpufleet_model_deployments_team_a": [bad]})
    assert err.value.errors == [("gpufleet_model_deployments_team_a[0] (llama-70b).replicas", err.value.errors[0][1])]
    assert "must be >= 0" in err.value.errors[0][1]

    with pytest.raises(FleetValidationError) as err:
        _sourced(
            data,
            deployments={"gpufleet_model_deployments_team_a": [qwen], "gpufleet_model_deployments_team_b": [qwen]},
        )
    assert err.value.errors == [
        (
            "gpufleet_model_deployments_team_b[0].name",
            "duplicate deployment name 'qwen-demo': gpufleet_model_deployments_team_a[0] defines it too (each name "
            "once across the merged variables)",
        )
    ]

    with pytest.raises(FleetValidationError) as err:
        _sourced(data, deployments={"gpufleet_model_deployments_team_a": {"name": "x"}})
    assert err.value.errors == [("gpufleet_model_deployments_team_a", "must be a list (got dict)")]


def test_caches_merged_from_several_variables_name_their_variable():
    data = example_fleet()
    cache = data["caches"][0]
    with pytest.raises(FleetValidationError) as err:
        _sourced(data, caches={"gpufleet_model_caches": [cache], "gpufleet_model_caches_team_a": [cache]})
    assert err.value.errors[0][0] == "gpufleet_model_caches_team_a[0].name"
    assert "gpufleet_model_caches[0] defines it too" in err.value.errors[0][1]
    fleet = _sourced(data, caches={"gpufleet_model_caches_team_a": [cache]})
    assert [c.name for c in fleet.caches] == [cache["name"]]


def test_priority_is_an_integer():
    data = example_fleet()
    data["deployments"][0]["priority"] = "high"
    with pytest.raises(FleetValidationError) as err:
        run(data)
    assert [e[0] for e in err.value.errors] == ["gpufleet_model_deployments[0] (qwen-demo).priority"]
    data["deployments"][0]["priority"] = 5
    assert run(data).to_dict()["deployments"][0]["priority"] == 5
