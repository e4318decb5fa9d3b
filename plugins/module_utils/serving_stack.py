# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The serving stack of one cluster: which Helm releases (chart, repository, version, values) and which plain objects
make DRA GPU serving work there, what to do about what is already installed, and the post-install check.

Pure functions over typed models; the ``serving_stack`` role reads and writes Kubernetes with ``kubernetes.core`` and
asks these functions (through the ``gpufleet.serving.serving_stack_*`` filters) for every decision:

* :func:`plan_cluster` - the releases in install order and the plain objects (namespaces, the ResourceQuota GKE needs
  to admit the DRA driver's critical pods, the DeviceClasses the cluster's pools name and no chart ships, the
  LLMInferenceServiceConfig presets the KServe chart does not ship, the optional Gateway), from the version matrix
  (``serving_stack_versions``, one place, overridable per cluster) and the fleet's inference classes;
* :func:`release_action` - install/upgrade a release, or skip it because the component is already installed by
  something else (its marker CRD exists and no Helm release of ours is deployed);
* :func:`adoptions` - objects a chart ships that already exist without Helm ownership (adopted into the release so
  the install does not fail with an ownership conflict, or refused);
* :func:`objects_to_apply` - the plain objects to server-side apply; an object that exists and is not ours (another
  manager, or a Helm release) is kept as it is and reported;
* :func:`check_cluster` - the DeviceClasses exist and every GPU pool's nodes publish ResourceSlices for each DRA
  driver of their class (as many devices as the class declares).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Literal

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    GPU_TOLERATION,
    LABEL_MANAGED_BY,
    LABEL_STACK_PART,
    MANAGED,
    NODE_POOL_LABEL,
    STACK_OWNER,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    BaseModel,
    ConfigDict,
    Field,
    InferenceClass,
    StrictBool,
    StrictInt,
    _Strict,
    check_dns_label,
    check_dns_subdomain,
    field_validator,
    parse,
    require_pydantic,
)

#: The render-directory form of a Helm release (not a Kubernetes API kind: a spec to install with Helm).
RELEASE_API_VERSION = "serving.gpufleet.io/v1alpha1"
RELEASE_KIND = "HelmRelease"
#: Helm's ownership metadata (Helm adopts an existing object that carries these for its release).
HELM_RELEASE_NAME = "meta.helm.sh/release-name"
HELM_RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
HELM_MANAGED_BY = "Helm"

#: Install order. Gateway API CRDs (Envoy Gateway) come before KServe, KServe's CRDs before its controller.
COMPONENTS: tuple[str, ...] = (
    "node_feature_discovery",
    "dra_driver",
    "leaderworkerset",
    "envoy_gateway",
    "kserve_crd",
    "kserve",
)
COMPONENT_TITLES: dict[str, str] = {
    "node_feature_discovery": "Node Feature Discovery",
    "dra_driver": "NVIDIA DRA driver for GPUs",
    "leaderworkerset": "LeaderWorkerSet",
    "envoy_gateway": "Envoy Gateway (optional)",
    "kserve_crd": "KServe LLMInferenceService CRDs",
    "kserve": "KServe LLMInferenceService controller",
}
#: The DRA driver of NVIDIA's ComputeDomains (multi-node NVLink, IMEX): a pool whose class has a device of this
#: driver asks for ComputeDomains.
COMPUTE_DOMAIN_DRIVER = "compute-domain.nvidia.com"
#: Driver root per provider (where the host's NVIDIA driver lives); GKE installs it under /home/kubernetes/bin/nvidia.
DEFAULT_DRIVER_ROOTS: dict[str, str] = {"gke": "/home/kubernetes/bin/nvidia", "eks": "/", "existing": "/"}
#: The presets the LLMInferenceService renderer names (backends/kserve.py) and KServe v0.20's controller looks up.
PRESETS: tuple[str, ...] = (
    "kserve-config-llm-template",
    "kserve-config-llm-worker-pipeline-parallel",
    "kserve-config-llm-worker-data-parallel",
)
KSERVE_API_VERSION = "serving.kserve.io/v1alpha2"


# --------------------------------------------------------------------------------------------------------------------
# Models: the version matrix and the role's options
# --------------------------------------------------------------------------------------------------------------------


class ChartPin(_Strict):
    """One component of the version matrix: a Helm chart pinned to a version, and how it is released."""

    chart: str = Field(min_length=1)
    repository: str = ""
    version: str = Field(min_length=1)
    app_version: str | None = None
    release: str
    namespace: str
    enabled: StrictBool = True
    wait_timeout: StrictInt = Field(default=600, ge=30, le=7200)
    values: dict[str, Any] = Field(default_factory=dict)
    #: A CRD this component installs: when it exists and no release of ours is deployed, the component is already
    #: installed by something else and is skipped.
    detect_crd: str | None = None
    #: DeviceClasses the chart creates (so the role never creates them itself).
    ships_device_classes: list[str] = Field(default_factory=list)
    #: LLMInferenceServiceConfig presets the chart creates (so the role never creates them itself).
    ships_presets: list[str] = Field(default_factory=list)

    _release = field_validator("release", "namespace")(classmethod(lambda cls, v: check_dns_label(v)))

    @field_validator("repository")
    @classmethod
    def _repository(cls, v: str) -> str:
        if v and not v.startswith(("https://", "http://", "oci://")):
            raise ValueError(
                f"{v!r} must be a Helm repository URL (https://...), an OCI registry (oci://...), or empty when "
                "chart is a local chart directory"
            )
        return v.rstrip("/")

    @field_validator("ships_device_classes")
    @classmethod
    def _classes(cls, v: list[str]) -> list[str]:
        return [check_dns_subdomain(name) for name in v]

    def chart_ref(self) -> dict[str, str]:
        """kubernetes.core.helm's ``chart_ref`` (and ``chart_repo_url`` for an HTTP repository)."""
        if self.repository.startswith("oci://"):
            return {"chart_ref": f"{self.repository}/{self.chart}"}
        if self.repository:
            return {"chart_ref": self.chart, "chart_repo_url": self.repository}
        return {"chart_ref": self.chart}


class VersionMatrix(_Strict):
    """``serving_stack_versions``: every component pinned in one place."""

    node_feature_discovery: ChartPin
    dra_driver: ChartPin
    leaderworkerset: ChartPin
    envoy_gateway: ChartPin
    kserve_crd: ChartPin
    kserve: ChartPin

    def pins(self) -> list[tuple[str, ChartPin]]:
        return [(name, getattr(self, name)) for name in COMPONENTS]


# Gateway API GatewayController (a GatewayClass's spec.controllerName): a domain-prefixed path, 1-253 characters.
GATEWAY_CONTROLLER_RE = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
)
GATEWAY_CONTROLLER_MAX = 253


class GatewayOptions(_Strict):
    """The optional Gateway per-replica HTTPRoutes attach to (Envoy Gateway)."""

    enabled: StrictBool = False
    name: str = "gpufleet"
    namespace: str = "gpufleet-gateway"
    class_name: str = "gpufleet-envoy"
    controller_name: str = "gateway.envoyproxy.io/gatewayclass-controller"
    port: StrictInt = Field(default=80, ge=1, le=65535)

    _names = field_validator("name", "namespace")(classmethod(lambda cls, v: check_dns_label(v)))
    _class = field_validator("class_name")(classmethod(lambda cls, v: check_dns_subdomain(v)))

    @field_validator("controller_name")
    @classmethod
    def _controller(cls, v: str) -> str:
        if len(v) > GATEWAY_CONTROLLER_MAX or not GATEWAY_CONTROLLER_RE.fullmatch(v):
            raise ValueError(
                "must be a Gateway API controller name: a domain, '/' and a path, at most "
                f"{GATEWAY_CONTROLLER_MAX} characters, such as gateway.envoyproxy.io/gatewayclass-controller (got {v!r})"
            )
        return v


Provider = Literal["gke", "eks", "existing"]


def _gke_only() -> list[Provider]:
    return ["gke"]


class CriticalPodsQuota(_Strict):
    """GKE admits pods of the system-node-critical / system-cluster-critical priority classes outside kube-system
    only in a namespace with a ResourceQuota scoped to those classes: the DRA driver's kubelet plugin is one."""

    pods: StrictInt = Field(default=100, ge=1)
    priority_classes: list[str] = Field(default_factory=lambda: ["system-node-critical", "system-cluster-critical"])
    providers: list[Provider] = Field(default_factory=_gke_only)


class StackOptions(_Strict):
    """The role's per-cluster choices (everything but the version matrix)."""

    provider: Literal["gke", "eks", "existing"]
    driver_roots: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_DRIVER_ROOTS))
    driver_root: str | None = None
    compute_domains: Literal["auto", "enabled", "disabled"] = "auto"
    device_classes: StrictBool = True
    kserve_presets: StrictBool = True
    preset_image: str = "docker.io/vllm/vllm-openai:v0.11.0"
    gateway: GatewayOptions = Field(default_factory=GatewayOptions)
    critical_pods_quota: CriticalPodsQuota = Field(default_factory=CriticalPodsQuota)

    @field_validator("driver_root")
    @classmethod
    def _root(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"{v!r} must be an absolute path on the node")
        return v

    def root(self) -> str:
        if self.driver_root:
            return self.driver_root
        root = self.driver_roots.get(self.provider)
        if not root or not root.startswith("/"):
            raise GpufleetError(
                f"serving_stack_driver_roots has no absolute driver root for provider {self.provider!r}"
            )
        return root


class ClusterPool(BaseModel):
    """A pool as fleet_info returns it (``clusters[].pools[]``): its name, class and node count."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str
    class_name: str = Field(alias="class")
    nodes: StrictInt = Field(ge=0)


class StackCluster(BaseModel):
    """A cluster as fleet_info returns it (``clusters[]``); other keys are ignored."""

    model_config = ConfigDict(extra="ignore")

    name: str
    provider: Literal["gke", "eks", "existing"]
    pools: list[ClusterPool] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------------


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` merged into ``base``: mappings recursively, anything else (lists included) replaced."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_versions(versions: Any, overrides: Any = None) -> VersionMatrix:
    """The version matrix with this cluster's overrides merged in (per component, values merged recursively)."""
    require_pydantic()
    if not isinstance(versions, Mapping):
        raise GpufleetError(f"serving_stack_versions: must be a mapping (got {type(versions).__name__})")
    if overrides is None:
        overrides = {}
    if not isinstance(overrides, Mapping):
        raise GpufleetError(f"serving_stack_overrides: must be a mapping (got {type(overrides).__name__})")
    unknown = sorted(set(overrides) - set(COMPONENTS))
    if unknown:
        raise GpufleetError(
            f"serving_stack_overrides.{unknown[0]}: is not a component of the serving stack "
            f"(one of {', '.join(COMPONENTS)})"
        )
    merged = deep_merge(versions, overrides)
    try:
        return parse(VersionMatrix, merged, "serving_stack_versions")
    except GpufleetError:
        if overrides:
            # Say which variable the bad value may come from.
            return parse(VersionMatrix, merged, "serving_stack_versions (with serving_stack_overrides)")
        raise


def _labels(part: str) -> dict[str, str]:
    return {**STACK_OWNER, LABEL_STACK_PART: part.replace("_", "-")}


def _meta(name: str, part: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = _labels(part)
    return meta


def _cel_driver(drivers: list[str]) -> str:
    return " || ".join(f'device.driver == "{d}"' for d in sorted(drivers))


# --------------------------------------------------------------------------------------------------------------------
# The plan of one cluster
# --------------------------------------------------------------------------------------------------------------------


def _component_values(name: str, pin: ChartPin, options: StackOptions, compute_domains: bool) -> dict[str, Any]:
    """The values the role sets for a component, with the pin's own ``values`` merged over them."""
    toleration = dict(GPU_TOLERATION)
    ours: dict[str, Any] = {}
    if name == "node_feature_discovery":
        # NFD's worker must run on the tainted GPU nodes, or they are never labelled (and the DRA kubelet plugin,
        # which selects NFD's labels, never schedules).
        ours = {"worker": {"tolerations": [toleration]}}
    elif name == "dra_driver":
        ours = {
            "nvidiaDriverRoot": options.root(),
            # GPU resources (and their DeviceClasses) are only deployed with this override in the 25.x charts.
            "gpuResourcesEnabledOverride": True,
            "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": compute_domains}},
            "kubeletPlugin": {"tolerations": [toleration]},
        }
    return deep_merge(ours, pin.values)


def _dra_ships(values: Mapping[str, Any], device_class: str) -> bool:
    """Whether the DRA driver chart, with these values, creates ``device_class``: the compute-domain classes only
    with ComputeDomains on, the others only with GPU resources on."""
    resources = values.get("resources") or {}
    part = "computeDomains" if device_class.startswith("compute-domain") else "gpus"
    return bool((resources.get(part) or {}).get("enabled", False))


def _device_class_drivers(cluster: StackCluster, classes: Mapping[str, InferenceClass]) -> dict[str, list[str]]:
    """DeviceClass name -> the DRA drivers of the devices naming it, over this cluster's pools."""
    out: dict[str, set[str]] = {}
    for pool in cluster.pools:
        klass = classes.get(pool.class_name)
        if klass is None:
            raise GpufleetError(f"cluster {cluster.name}: pool {pool.name!r} has unknown class {pool.class_name!r}")
        for device in klass.devices:
            if device.claim == "DRA" and device.device_class_name:
                out.setdefault(device.device_class_name, set()).add(device.driver)
    return {name: sorted(drivers) for name, drivers in sorted(out.items())}


def _wants_compute_domains(cluster: StackCluster, classes: Mapping[str, InferenceClass]) -> bool:
    return any(
        d.driver == COMPUTE_DOMAIN_DRIVER
        for pool in cluster.pools
        if pool.class_name in classes
        for d in classes[pool.class_name].devices
    )


def _pool_expectations(cluster: StackCluster, classes: Mapping[str, InferenceClass]) -> list[dict[str, Any]]:
    """Per pool: its node count and, per DRA driver of its class, the devices a node must publish."""
    pools = []
    for pool in cluster.pools:
        drivers: dict[str, int] = {}
        for d in classes[pool.class_name].devices:
            if d.claim == "DRA":
                drivers[d.driver] = drivers.get(d.driver, 0) + d.count
        pools.append({"name": pool.name, "class": pool.class_name, "nodes": pool.nodes, "drivers": drivers})
    return pools


def _preset(name: str, image: str) -> dict[str, Any]:
    """A KServe LLMInferenceServiceConfig preset: vLLM serving the model KServe mounts at /mnt/models."""
    probe = {"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 5}
    security = {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    volumes = [
        {"name": "home", "emptyDir": {}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
    ]
    mounts = [{"name": "home", "mountPath": "/home"}, {"name": "dshm", "mountPath": "/dev/shm"}]
    env = [{"name": "HOME", "value": "/home"}, {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"}]
    serve = ["vllm", "serve", "/mnt/models"]
    common = ["--served-model-name", "{{ .Spec.Model.Name }}", "--port", "8000"]

    def container(args: list[str], *, probes: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": "main",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": serve,
            "args": args,
            "env": env,
            "ports": [{"containerPort": 8000, "protocol": "TCP"}],
            "securityContext": security,
            "volumeMounts": mounts,
        }
        if probes:
            out["readinessProbe"] = {**probe, "initialDelaySeconds": 10, "failureThreshold": 60}
            out["livenessProbe"] = {**probe, "initialDelaySeconds": 120, "failureThreshold": 3}
        return out

    spec: dict[str, Any]
    if name == "kserve-config-llm-template":
        spec = {"template": {"containers": [container(common)], "volumes": volumes}}
    elif name == "kserve-config-llm-worker-pipeline-parallel":
        leader = [*common, "--pipeline-parallel-size", "{{ .Spec.Parallelism.Pipeline }}",
                  "--distributed-executor-backend", "mp"]  # fmt: skip
        worker = ["--headless", "--pipeline-parallel-size", "{{ .Spec.Parallelism.Pipeline }}",
                  "--distributed-executor-backend", "mp"]  # fmt: skip
        spec = {
            "template": {"containers": [container(leader)], "volumes": volumes},
            "worker": {"containers": [container(worker, probes=False)], "volumes": volumes},
        }
    elif name == "kserve-config-llm-worker-data-parallel":
        leader = [*common, "--data-parallel-size", "{{ .Spec.Parallelism.Data }}",
                  "--data-parallel-size-local", "{{ .Spec.Parallelism.DataLocal }}"]  # fmt: skip
        worker = ["--headless", "--data-parallel-size", "{{ .Spec.Parallelism.Data }}",
                  "--data-parallel-size-local", "{{ .Spec.Parallelism.DataLocal }}"]  # fmt: skip
        spec = {
            "template": {"containers": [container(leader)], "volumes": volumes},
            "worker": {"containers": [container(worker, probes=False)], "volumes": volumes},
        }
    else:  # pragma: no cover - PRESETS is closed
        raise GpufleetError(f"unknown preset {name!r}")
    return {"apiVersion": KSERVE_API_VERSION, "kind": "LLMInferenceServiceConfig", "spec": spec}


def plan_cluster(
    cluster: Any,
    classes: Any,
    versions: Any,
    options: Any,
    overrides: Any = None,
) -> dict[str, Any]:
    """The serving stack of one cluster (a dict boundary: ``cluster`` is one of fleet_info's ``clusters``, ``classes``
    its ``classes``). Returns ``{cluster, provider, compute_domains, releases, objects, device_classes, pools,
    notes}``; ``releases`` and ``objects`` are in install order."""
    require_pydantic()
    c: StackCluster = parse(StackCluster, cluster, "cluster")
    if not isinstance(classes, Mapping):
        raise GpufleetError(f"classes: must be a mapping of inference classes (got {type(classes).__name__})")
    klasses: dict[str, InferenceClass] = {
        name: parse(InferenceClass, data, f"gpufleet_inference_classes[{name!r}]") for name, data in classes.items()
    }
    if not isinstance(options, Mapping):
        raise GpufleetError(f"options: must be a mapping (got {type(options).__name__})")
    opts: StackOptions = parse(StackOptions, {**options, "provider": c.provider}, "serving_stack")
    matrix = parse_versions(versions, overrides)

    wanted_cd = _wants_compute_domains(c, klasses)
    compute_domains = {"auto": wanted_cd, "enabled": True, "disabled": False}[opts.compute_domains]
    notes: list[str] = []
    if opts.compute_domains == "auto":
        notes.append(
            f"ComputeDomains {'on' if compute_domains else 'off'}: "
            + (
                f"a pool's class has a {COMPUTE_DOMAIN_DRIVER} device (multi-node NVLink)"
                if compute_domains
                else "no pool asks for multi-node NVLink"
            )
        )

    releases: list[dict[str, Any]] = []
    namespaces: list[str] = []
    shipped_classes: dict[str, str] = {}
    shipped_presets: dict[str, str] = {}
    for name, pin in matrix.pins():
        enabled = pin.enabled if name != "envoy_gateway" else (pin.enabled and opts.gateway.enabled)
        if not enabled:
            notes.append(f"{COMPONENT_TITLES[name]}: disabled")
            continue
        values = _component_values(name, pin, opts, compute_domains)
        releases.append(
            {
                "component": name,
                "title": COMPONENT_TITLES[name],
                "release": pin.release,
                "namespace": pin.namespace,
                "chart": pin.chart,
                "repository": pin.repository,
                "version": pin.version,
                "values": values,
                "wait_timeout": pin.wait_timeout,
                "detect_crd": pin.detect_crd,
                "ships_device_classes": [],
                **pin.chart_ref(),
            }
        )
        if pin.namespace not in namespaces:
            namespaces.append(pin.namespace)
        for dc in pin.ships_device_classes:
            if name == "dra_driver" and not _dra_ships(values, dc):
                continue
            shipped_classes[dc] = pin.release
            releases[-1]["ships_device_classes"].append(dc)
        for preset in pin.ships_presets:
            shipped_presets[preset] = pin.release

    objects: list[dict[str, Any]] = []
    if opts.gateway.enabled and opts.gateway.namespace not in namespaces:
        namespaces.append(opts.gateway.namespace)
    for ns in namespaces:
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns, "namespace")})

    dra = matrix.dra_driver
    if dra.enabled and c.provider in opts.critical_pods_quota.providers:
        quota = opts.critical_pods_quota
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": _meta(f"{dra.release}-critical-pods", "dra_driver", dra.namespace),
                "spec": {
                    "hard": {"pods": str(quota.pods)},
                    "scopeSelector": {
                        "matchExpressions": [
                            {"scopeName": "PriorityClass", "operator": "In", "values": list(quota.priority_classes)}
                        ]
                    },
                },
            }
        )

    device_classes = _device_class_drivers(c, klasses)
    for dc, drivers in device_classes.items():
        if dc in shipped_classes:
            notes.append(f"DeviceClass {dc}: shipped by the {shipped_classes[dc]} chart")
        elif not opts.device_classes:
            notes.append(f"DeviceClass {dc}: not created (serving_stack_device_classes is false)")
        else:
            objects.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": _meta(dc, "device_classes"),
                    "spec": {"selectors": [{"cel": {"expression": _cel_driver(drivers)}}]},
                }
            )

    kserve = matrix.kserve
    if kserve.enabled and matrix.kserve_crd.enabled:
        for preset in PRESETS:
            if preset in shipped_presets:
                notes.append(f"LLMInferenceServiceConfig {preset}: shipped by the {shipped_presets[preset]} chart")
            elif not opts.kserve_presets:
                notes.append(f"LLMInferenceServiceConfig {preset}: not created (serving_stack_kserve_presets is false)")
            else:
                obj = _preset(preset, opts.preset_image)
                obj["metadata"] = _meta(preset, "kserve", kserve.namespace)
                objects.append({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": obj["metadata"],
                                "spec": obj["spec"]})  # fmt: skip

    gw = opts.gateway
    if gw.enabled:
        objects.append(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass",
                "metadata": _meta(gw.class_name, "gateway"),
                "spec": {"controllerName": gw.controller_name},
            }
        )
        objects.append(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": _meta(gw.name, "gateway", gw.namespace),
                "spec": {
                    "gatewayClassName": gw.class_name,
                    "listeners": [
                        {
                            "name": "http",
                            "protocol": "HTTP",
                            "port": gw.port,
                            "allowedRoutes": {"namespaces": {"from": "All"}},
                        }
                    ],
                },
            }
        )

    plan = {
        "cluster": c.name,
        "provider": c.provider,
        "compute_domains": compute_domains,
        "driver_root": opts.root() if dra.enabled else None,
        "releases": releases,
        "objects": objects,
        "device_classes": sorted(device_classes),
        "pools": _pool_expectations(c, klasses),
        "notes": notes,
        "order": list(COMPONENTS),
    }
    plan["render_objects"] = objects + release_specs(plan)
    return plan


def release_specs(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The plan's Helm releases as render-directory objects (``serving.gpufleet.io/v1alpha1`` HelmRelease): what to
    install with Helm, one file each, never applied to a cluster as they are."""
    out = []
    for rel in plan.get("releases") or []:
        out.append(
            {
                "apiVersion": RELEASE_API_VERSION,
                "kind": RELEASE_KIND,
                "metadata": _meta(rel["release"], rel["component"], rel["namespace"]),
                "spec": {
                    "component": rel["component"],
                    "chart": rel["chart"],
                    "repository": rel["repository"],
                    "version": rel["version"],
                    "releaseName": rel["release"],
                    "namespace": rel["namespace"],
                    "atomic": True,
                    "wait": True,
                    "timeoutSeconds": rel["wait_timeout"],
                    "values": rel["values"],
                },
            }
        )
    return out


# --------------------------------------------------------------------------------------------------------------------
# Apply-time decisions
# --------------------------------------------------------------------------------------------------------------------


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _obj_labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def helm_owner(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(release, namespace)`` of the Helm release that owns ``obj``, or None."""
    ann = _annotations(obj)
    if ann.get(HELM_RELEASE_NAME):
        return str(ann[HELM_RELEASE_NAME]), str(ann.get(HELM_RELEASE_NAMESPACE, ""))
    return None


def release_action(release: Any, deployed: Any, crds: Any) -> dict[str, Any]:
    """``{action: install|skip, reason}`` for one planned release. ``deployed``: kubernetes.core.helm_info's ``status``
    for it (empty when there is no release); ``crds``: the component's marker CRD as k8s_info returns it (a list)."""
    if not isinstance(release, Mapping):
        raise GpufleetError("release: must be one of the plan's releases")
    name = release.get("release")
    status = deployed if isinstance(deployed, Mapping) else {}
    if status:
        state = str(status.get("status", "")).lower()
        return {
            "action": "install",
            "reason": f"release {name} is {state or 'present'} (chart {status.get('chart', '?')}): upgraded to "
            f"{release.get('chart')} {release.get('version')} when it differs",
        }
    found = [c for c in (crds or []) if isinstance(c, Mapping)]
    if release.get("detect_crd") and found:
        owner = helm_owner(found[0])
        who = f"Helm release {owner[0]} in {owner[1]}" if owner else (
            f"{_obj_labels(found[0]).get(LABEL_MANAGED_BY) or 'something other than Helm'}"
        )  # fmt: skip
        return {
            "action": "skip",
            "reason": f"{release.get('title', name)} is already installed (CRD {release['detect_crd']} exists, "
            f"managed by {who}; no release {name} in {release.get('namespace')}): kept as it is, not installed again "
            f"(if a failed install of ours left it behind - Helm never deletes a chart's crds/ - delete it or set "
            f"serving_stack_overrides.{release.get('component')}.detect_crd to null)",
        }
    return {"action": "install", "reason": f"not installed: installing {release.get('chart')} {release.get('version')}"}


def adoptions(release: Any, existing: Any, adopt: bool) -> list[str]:
    """The DeviceClasses a release's chart ships that already exist without belonging to that release (the local
    fleet's, or ones a person created): Helm would fail the install with an ownership conflict. With ``adopt`` the
    role hands them over first (Helm's ``meta.helm.sh/release-*`` annotations and ``managed-by: Helm`` label, which
    Helm 3 and 4 both adopt); without it this raises, naming them. Returns their names (empty: nothing to adopt)."""
    if not isinstance(release, Mapping):
        raise GpufleetError("release: must be one of the plan's releases")
    ships = set(release.get("ships_device_classes") or [])
    names = []
    for obj in existing or []:
        if not isinstance(obj, Mapping):
            continue
        name = (obj.get("metadata") or {}).get("name")
        if name in ships and helm_owner(obj) != (release["release"], release["namespace"]):
            names.append((str(name), _obj_labels(obj).get(LABEL_MANAGED_BY) or "unknown"))
    if names and not adopt:
        listed = ", ".join(f"{n} (managed by {m})" for n, m in sorted(names))
        raise GpufleetError(
            f"DeviceClass {listed} exists and is not part of Helm release {release['release']}; the "
            f"{release['chart']} chart ships it, so installing would fail with an ownership conflict. Delete it, or "
            "set serving_stack_adopt_existing to true to let the release take it over."
        )
    return sorted(n for n, _m in names)


def objects_to_apply(objects: Any, existing: Any) -> dict[str, Any]:
    """Split planned objects into those to server-side apply and those to keep: an existing object that is not ours
    (owned by a Helm release, or labelled as managed by something else) is never applied over.
    ``existing``: the objects read from the cluster (any kinds). Returns ``{apply: [...], kept: [{kind, name,
    reason}]}``."""
    found: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for obj in existing or []:
        if isinstance(obj, Mapping):
            meta = obj.get("metadata") or {}
            found[(str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))] = obj
    apply, kept = [], []
    for obj in objects or []:
        meta = obj.get("metadata") or {}
        key = (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))
        live = found.get(key)
        if live is None or obj.get("kind") == "Namespace":
            apply.append(obj)
            continue
        owner = helm_owner(live)
        manager = _obj_labels(live).get(LABEL_MANAGED_BY)
        if owner is not None:
            reason = f"owned by Helm release {owner[0]} in {owner[1]}"
        elif manager != MANAGED[LABEL_MANAGED_BY]:
            reason = f"exists, managed by {manager or 'something else (no managed-by label)'}"
        else:
            apply.append(obj)
            continue
        kept.append({"kind": key[0], "namespace": key[1], "name": key[2], "reason": f"{reason}: kept as it is"})
    return {"apply": apply, "kept": kept}


# --------------------------------------------------------------------------------------------------------------------
# The post-install check
# --------------------------------------------------------------------------------------------------------------------


def check_cluster(plan: Any, device_classes: Any, slices: Any, nodes: Any) -> dict[str, Any]:
    """The serving stack works on this cluster when every DeviceClass its pools name exists and every node of every
    GPU pool publishes, per DRA driver of the pool's class, ResourceSlices with at least the devices the class
    declares. Returns ``{cluster, ok, problems: [...], lines: [...]}``; each problem names what is missing."""
    if not isinstance(plan, Mapping):
        raise GpufleetError("plan: must be a serving_stack_plan result")
    cluster = plan.get("cluster", "?")
    have_classes = {(o.get("metadata") or {}).get("name") for o in device_classes or [] if isinstance(o, Mapping)}
    problems: list[str] = []
    lines: list[str] = []
    for dc in plan.get("device_classes") or []:
        if dc not in have_classes:
            problems.append(f"DeviceClass {dc} does not exist")
    published: dict[tuple[str, str], int] = {}
    for s in slices or []:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if node:
            key = (str(node), str(spec.get("driver")))
            published[key] = published.get(key, 0) + len(spec.get("devices") or [])
    pool_nodes: dict[str, list[str]] = {}
    for n in nodes or []:
        meta = n.get("metadata") or {}
        pool = (meta.get("labels") or {}).get(NODE_POOL_LABEL)
        if pool:
            pool_nodes.setdefault(str(pool), []).append(str(meta.get("name")))
    for pool in plan.get("pools") or []:
        drivers: dict[str, int] = pool.get("drivers") or {}
        if not drivers:
            lines.append(f"pool {pool['name']}: no DRA devices (nothing to publish)")
            continue
        members = sorted(pool_nodes.get(pool["name"], []))
        if not members:
            if pool.get("nodes", 0):
                problems.append(
                    f"pool {pool['name']}: no node labelled {NODE_POOL_LABEL}={pool['name']} ({pool['nodes']} declared)"
                )
            else:
                lines.append(f"pool {pool['name']}: scaled to zero nodes (nothing to publish)")
            continue
        missing = []
        for node in members:
            for driver, want in sorted(drivers.items()):
                got = published.get((node, driver), 0)
                if got == 0:
                    missing.append(f"{node} publishes no {driver} ResourceSlice")
                elif got < want:
                    missing.append(f"{node} publishes {got} of {want} {driver} devices")
        if missing:
            problems.append(f"pool {pool['name']}: " + "; ".join(missing))
        else:
            lines.append(
                f"pool {pool['name']}: {len(members)} node(s) publish "
                + ", ".join(f"{n} {d} device(s)" for d, n in sorted(drivers.items()))
            )
    ok = not problems
    head = f"{cluster}: {'OK' if ok else 'FAILED'}"
    return {"cluster": cluster, "ok": ok, "problems": problems, "lines": [head, *lines, *problems]}


# --------------------------------------------------------------------------------------------------------------------
# The compatibility matrix the docs show
# --------------------------------------------------------------------------------------------------------------------


def matrix_table(versions: Any) -> list[str]:
    """The version matrix as Markdown table lines (docs/serving-stack.md embeds exactly these)."""
    matrix = parse_versions(versions)
    rows = ["| Component | Chart | Repository | Chart version | App version | Release / namespace |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for name, pin in matrix.pins():
        rows.append(
            f"| {COMPONENT_TITLES[name]} (`{name}`) | `{pin.chart}` | `{pin.repository or '(local path)'}` "
            f"| {pin.version} | {pin.app_version or pin.version} | `{pin.release}` / `{pin.namespace}` |"
        )
    return rows


__all__ = [
    "COMPONENTS",
    "STACK_OWNER",
    "adoptions",
    "check_cluster",
    "matrix_table",
    "objects_to_apply",
    "plan_cluster",
    "release_action",
    "release_specs",
]
