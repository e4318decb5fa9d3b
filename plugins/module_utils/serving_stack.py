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
  driver of their class (as many devices as the class declares);
* render mode (``gpufleet_gitops``, module_utils/gitops.py): :func:`render_objects` - the plan as real Kubernetes
  objects for the GitOps tool (each release a Flux ``HelmRelease`` with its ``HelmRepository`` / ``OCIRepository``,
  or an Argo CD ``Application``; every object with its sync wave), and :func:`fleet_generator` - the fleet's
  generator under ``<render_dir>/_fleet/`` (a Flux Kustomization per cluster and sync layer, or an Argo CD
  ApplicationSet over the cluster directories).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Literal

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    GPU_TOLERATION,
    LABEL_CLUSTER,
    LABEL_MANAGED_BY,
    LABEL_STACK_PART,
    MANAGED,
    NODE_POOL_LABEL,
    STACK_OWNER,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.gitops import (
    ANNOTATION_SYNC_LAYER,
    ARGOCD,
    FLUX,
    LAYERS,
    NONE,
    WAVE_DRIVER,
    WAVE_NAMESPACES,
    WAVE_RELEASES,
    WAVE_STACK_CONFIG,
    decorate,
)
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
from ansible_collections.gpufleet.serving.plugins.module_utils.provider_rules import GKE_DRIVER_OFF

#: Render mode: a Helm release as Flux renders it (gpufleet_gitops flux) ...
FLUX_HELMRELEASE = "helm.toolkit.fluxcd.io/v2"
FLUX_SOURCE = "source.toolkit.fluxcd.io/v1"
FLUX_KUSTOMIZATION = "kustomize.toolkit.fluxcd.io/v1"
#: ... or as Argo CD does (gpufleet_gitops argocd).
ARGOCD_API = "argoproj.io/v1alpha1"
#: The cluster an in-cluster Argo CD Application deploys to.
ARGOCD_IN_CLUSTER = "https://kubernetes.default.svc"
#: Helm's OCI chart layer (what Flux's OCIRepository selects).
HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
#: How often Flux reconciles a rendered release / re-reads a chart source / re-applies a cluster directory.
FLUX_RELEASE_INTERVAL = "10m"
FLUX_SOURCE_INTERVAL = "1h"
FLUX_SYNC_INTERVAL = "10m"
#: Releases that need the CRDs of other releases installed first (Flux dependsOn; Argo CD orders them by sync wave):
#: KServe's LLMInferenceService controller serves the CRDs of kserve_crd and watches LeaderWorkerSets and Gateway API
#: routes.
CRD_DEPENDENCIES: dict[str, tuple[str, ...]] = {"kserve": ("kserve_crd", "leaderworkerset", "envoy_gateway")}
#: The stack label value of the fleet generator's objects (under <render_dir>/_fleet/).
GENERATOR_PART = "gitops"
#: Helm's ownership metadata (Helm adopts an existing object that carries these for its release).
HELM_RELEASE_NAME = "meta.helm.sh/release-name"
HELM_RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
HELM_MANAGED_BY = "Helm"

#: Install order. Gateway API CRDs (Envoy Gateway) come before KServe, KServe's CRDs before its controller.
COMPONENTS: tuple[str, ...] = (
    "node_feature_discovery",
    "dra_driver",
    "dranet",
    "efa_device_plugin",
    "leaderworkerset",
    "envoy_gateway",
    "kserve_crd",
    "kserve",
)
COMPONENT_TITLES: dict[str, str] = {
    "node_feature_discovery": "Node Feature Discovery",
    "dra_driver": "NVIDIA DRA driver for GPUs",
    "dranet": "DraNet, DRA driver for NICs (optional, for dra.net devices)",
    "efa_device_plugin": "AWS EFA device plugin (optional, EKS, for EFA devices)",
    "leaderworkerset": "LeaderWorkerSet",
    "envoy_gateway": "Envoy Gateway (optional)",
    "kserve_crd": "KServe LLMInferenceService CRDs",
    "kserve": "KServe LLMInferenceService controller",
}
#: The DRA driver of NVIDIA's ComputeDomains (multi-node NVLink, IMEX): a pool whose class has a device of this
#: driver asks for ComputeDomains.
COMPUTE_DOMAIN_DRIVER = "compute-domain.nvidia.com"
#: The DRA driver of the GPUs (the dra_driver component installs it).
GPU_DRIVER = "gpu.nvidia.com"
#: Fabric components, chosen from the classes: a pool whose class has a device of the driver gets the component (the
#: EFA device plugin on EKS only). DraNet publishes NICs (RDMA, InfiniBand, EFA) as DRA devices of driver ``dra.net``;
#: the EFA device plugin advertises the extended resource ``vpc.amazonaws.com/efa``, so a class declares its EFA
#: adapters as ``claim: Synthetic`` devices of driver ``vpc.amazonaws.com`` (matched for placement; pods request
#: ``vpc.amazonaws.com/efa`` in their template).
DRANET_DRIVER = "dra.net"
EFA_DRIVER = "vpc.amazonaws.com"
FABRIC_COMPONENTS: dict[str, str] = {DRANET_DRIVER: "dranet", EFA_DRIVER: "efa_device_plugin"}
#: Components a cluster gets only when its classes ask for them.
OPTIONAL_COMPONENTS: frozenset[str] = frozenset(FABRIC_COMPONENTS.values())
#: The matrix entry of the GKE GPU driver installer (not a Helm chart: plain DaemonSets, see GkeDriverPin).
GKE_DRIVER = "gke_gpu_driver"
#: GKE node labels: the accelerator of a GPU node; the GPU driver version GKE installed (absent when its driver
#: installation is off, which is when the installer runs).
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GKE_DRIVER_VERSION_LABEL = "cloud.google.com/gke-gpu-driver-version"
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


DRIVER_VERSION_RE = re.compile(r"\d{3}\.\d{1,3}(\.\d{1,3})?")


class GkeDriverVersion(_Strict):
    """The NVIDIA driver the installer puts on the nodes of one GKE minor version, per node image."""

    #: The COS installer's ``--version``: ``default`` or ``latest`` (the default / newest driver COS publishes for
    #: the node image this GKE version runs), or an exact driver version that COS publishes for that image.
    cos: str
    #: The Ubuntu installer's ``NVIDIA_DRIVER_VERSION`` (an exact driver version).
    ubuntu: str

    @field_validator("cos")
    @classmethod
    def _cos(cls, v: str) -> str:
        if v not in ("default", "latest") and not DRIVER_VERSION_RE.fullmatch(v):
            raise ValueError(f"{v!r} must be default, latest or an NVIDIA driver version such as 580.95.05")
        return v

    @field_validator("ubuntu")
    @classmethod
    def _ubuntu(cls, v: str) -> str:
        if not DRIVER_VERSION_RE.fullmatch(v):
            raise ValueError(f"{v!r} must be an NVIDIA driver version such as 570.124.06")
        return v


class GkeDriverPin(_Strict):
    """The NVIDIA driver installer GKE documents for node pools whose GPU driver installation is off (what DRA needs):
    the ``nvidia-driver-installer`` DaemonSets of GoogleCloudPlatform/container-engine-accelerators
    (``nvidia-driver-installer/cos/daemonset-preloaded*.yaml``, ``ubuntu/daemonset-preloaded-R*.yaml``), whose
    installer images GKE preloads on its nodes; one per node image, selecting the pools that need it. The driver is
    pinned per GKE minor version (``versions``)."""

    enabled: StrictBool = True
    namespace: str = "kube-system"
    #: The upstream manifests these DaemonSets follow (a commit of container-engine-accelerators).
    source: str = Field(min_length=1)
    cos_image: str = "cos-nvidia-installer:fixed"
    ubuntu_image: str = "gke-nvidia-installer:fixed"
    partition_image: str = Field(min_length=1)
    pause_image: str = Field(min_length=1)
    versions: dict[str, GkeDriverVersion] = Field(min_length=1)

    _ns = field_validator("namespace")(classmethod(lambda cls, v: check_dns_label(v)))

    @field_validator("versions")
    @classmethod
    def _minors(cls, v: dict[str, GkeDriverVersion]) -> dict[str, GkeDriverVersion]:
        for key in v:
            if not re.fullmatch(r"1\.\d+", str(key)):
                raise ValueError(f"{key!r} must be a GKE minor version such as 1.34")
        return v


class VersionMatrix(_Strict):
    """``serving_stack_versions``: every component pinned in one place (the fabric components and the GKE driver
    installer may be left out: a cluster that needs one is then warned)."""

    node_feature_discovery: ChartPin
    dra_driver: ChartPin
    dranet: ChartPin | None = None
    efa_device_plugin: ChartPin | None = None
    leaderworkerset: ChartPin
    envoy_gateway: ChartPin
    kserve_crd: ChartPin
    kserve: ChartPin
    gke_gpu_driver: GkeDriverPin | None = None

    def pins(self) -> list[tuple[str, ChartPin]]:
        return [(name, pin) for name in COMPONENTS if (pin := getattr(self, name)) is not None]


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


GITOPS_PATH_RE = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


class GitopsOptions(_Strict):
    """Render mode: the GitOps tool the render directory is for (``gpufleet_gitops``) and where it finds it."""

    tool: Literal["flux", "argocd", "none"] = "flux"
    #: The Git repository holding the render directory (the Argo CD ApplicationSet reads it; required for argocd).
    repo_url: str = ""
    #: The branch, tag or commit to sync.
    revision: str = Field(default="HEAD", min_length=1)
    #: The render directory's path inside the repository ("" = its root).
    path: str = ""
    #: Where the generator and (argocd) the release Applications live ("" = argocd / flux-system).
    namespace: str = ""
    #: Flux: the GitRepository (in ``namespace``) holding the render directory.
    source: str = "flux-system"
    #: Argo CD: the AppProject of every Application.
    project: str = "default"

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        v = v.strip()
        while v.startswith("./"):
            v = v[2:]
        v = v.strip("/")
        if v and (not GITOPS_PATH_RE.fullmatch(v) or any(part in (".", "..") for part in v.split("/"))):
            raise ValueError(f"{v!r} must be a relative path inside the repository, such as rendered or fleet/prod")
        return v

    @field_validator("repo_url")
    @classmethod
    def _repo(cls, v: str) -> str:
        if v and (any(c.isspace() for c in v) or ("://" not in v and not v.startswith("git@"))):
            raise ValueError(f"{v!r} must be a Git repository URL (https://..., ssh://... or git@host:path)")
        return v

    _names = field_validator("source", "project")(classmethod(lambda cls, v: check_dns_subdomain(v)))

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        return check_dns_label(v) if v else v

    def home(self) -> str:
        """The namespace of the generator and of the release Applications."""
        return self.namespace or ("argocd" if self.tool == ARGOCD else "flux-system")

    def cluster_path(self, cluster: str) -> str:
        return f"./{self.path}/{cluster}" if self.path else f"./{cluster}"


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
    gitops: GitopsOptions = Field(default_factory=GitopsOptions)

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
    kubernetes_version: str | None = None


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
    unknown = sorted(set(overrides) - {*COMPONENTS, GKE_DRIVER})
    if unknown:
        raise GpufleetError(
            f"serving_stack_overrides.{unknown[0]}: is not a component of the serving stack "
            f"(one of {', '.join((*COMPONENTS, GKE_DRIVER))})"
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


def _pool_affinity(pools: list[str]) -> dict[str, Any]:
    """A node affinity to the nodes of these fleet pools."""
    term = {"matchExpressions": [{"key": NODE_POOL_LABEL, "operator": "In", "values": sorted(pools)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _component_values(
    name: str,
    pin: ChartPin,
    options: StackOptions,
    compute_domains: bool,
    pools: list[str] | None = None,
) -> dict[str, Any]:
    """The values the role sets for a component, with the pin's own ``values`` merged over them. ``pools``: the
    pools a fabric component serves (its DaemonSet runs on their nodes only)."""
    toleration = dict(GPU_TOLERATION)
    ours: dict[str, Any] = {}
    if name == "dranet":
        # DraNet's chart tolerates every NoSchedule taint (the GPU taint included); it runs on the pools whose class
        # has dra.net devices only.
        ours = {"affinity": _pool_affinity(pools or [])}
    elif name == "efa_device_plugin":
        # The chart tolerates nothing by default: the GPU pools' nvidia.com/gpu taint would keep it off their nodes.
        ours = {"tolerations": [toleration], "affinity": _pool_affinity(pools or [])}
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


def _fabric_pools(cluster: StackCluster, classes: Mapping[str, InferenceClass]) -> dict[str, list[str]]:
    """Fabric component -> the pools whose class has a device of its driver (DraNet: a ``claim: DRA`` device; the
    EFA device plugin: any device, on EKS only)."""
    out: dict[str, list[str]] = {}
    for pool in cluster.pools:
        for device in classes[pool.class_name].devices:
            component = FABRIC_COMPONENTS.get(device.driver)
            if component == "dranet" and device.claim != "DRA":
                continue
            if component == "efa_device_plugin" and cluster.provider != "eks":
                continue
            if component and pool.name not in out.setdefault(component, []):
                out[component].append(pool.name)
    return out


def _uninstalled_driver_warnings(
    cluster: StackCluster, classes: Mapping[str, InferenceClass], installs: Mapping[str, str]
) -> list[str]:
    """A ``claim: DRA`` device whose driver nothing installs on a GKE or EKS cluster (an existing cluster's preflight
    checks its drivers' ResourceSlices instead): its claims would never be allocated. One warning per class and
    driver, naming the class. ``installs``: driver -> the component of this plan that installs it."""
    if cluster.provider == "existing":
        return []
    found: dict[tuple[str, str], list[str]] = {}
    for pool in cluster.pools:
        for device in classes[pool.class_name].devices:
            if device.claim == "DRA" and device.driver not in installs:
                found.setdefault((pool.class_name, device.driver), []).append(pool.name)
    out = []
    for (klass, driver), pools in sorted(found.items()):
        component = FABRIC_COMPONENTS.get(driver)
        why = (
            f"its component {component} is disabled or not in serving_stack_versions"
            if component
            else "no component of the serving stack installs it"
        )
        out.append(
            f"class {klass} (pool {', '.join(sorted(set(pools)))}) has claim: DRA devices of driver {driver}, but "
            f"{why} and a {cluster.provider} cluster has no preflight that checks it: its ResourceSlices will not "
            "appear until you install the driver"
        )
    return out


def _gke_driver_pools(cluster: StackCluster, classes: Mapping[str, InferenceClass]) -> dict[str, list[str]]:
    """On GKE: node image (``cos`` / ``ubuntu`` / the image type) -> the GPU pools whose GPU driver installation is
    off (gpu_driver_version DISABLED, what provisioning sets for DRA), which need the driver installer."""
    out: dict[str, list[str]] = {}
    if cluster.provider != "gke":
        return out
    for pool in cluster.pools:
        prov = classes[pool.class_name].provisioning.gke
        if prov is None or prov.accelerator is None or prov.accelerator.gpu_driver_version not in GKE_DRIVER_OFF:
            continue
        image = prov.image_type.upper()
        family = "cos" if image.startswith("COS") else "ubuntu" if image.startswith("UBUNTU") else prov.image_type
        out.setdefault(family, []).append(pool.name)
    return out


def _gke_minor(version: str | None) -> str | None:
    match = re.match(r"^v?(\d+)\.(\d+)", version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _driver_installer(family: str, pin: GkeDriverPin, driver: GkeDriverVersion, pools: list[str]) -> dict[str, Any]:
    """The ``nvidia-driver-installer`` DaemonSet GKE documents for a node image (container-engine-accelerators'
    ``cos/daemonset-preloaded-latest.yaml`` / ``ubuntu/daemonset-preloaded-R*.yaml``, at ``pin.source``), with the
    driver version pinned and the nodes chosen by fleet pool instead of by ``cloud.google.com/gke-accelerator``: it
    installs the driver under /home/kubernetes/bin/nvidia, where the DRA driver's ``nvidiaDriverRoot`` points."""
    name = f"nvidia-driver-installer-{family}"
    selector = {"k8s-app": name}
    affinity = _pool_affinity(pools)
    # Never where GKE installed a driver itself (it labels those nodes with the version it installed).
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms[0]["matchExpressions"].append({"key": GKE_DRIVER_VERSION_LABEL, "operator": "DoesNotExist"})
    resources = {"requests": {"cpu": "150m"}}
    privileged = {"privileged": True}
    pause = {"image": pin.pause_image, "name": "pause"}
    spec: dict[str, Any]
    if family == "cos":
        flag = "" if driver.cos == "default" else f" --version={driver.cos}"
        install = (
            'if lsmod | grep -q nvidia; then echo "GPU driver already loaded: not installing"; exit 0; fi\n'
            f"/cos-gpu-installer install{flag} || exit 1\n"
            "chmod 755 /root/home/kubernetes/bin/nvidia\n"
        )
        host = [
            ("dev", "/dev"),
            ("vulkan-icd-mount", "/home/kubernetes/bin/nvidia/vulkan/icd.d"),
            ("nvidia-install-dir-host", "/home/kubernetes/bin/nvidia"),
            ("root-mount", "/"),
            ("cos-tools", "/var/lib/cos-tools"),
            ("nvidia-config", "/etc/nvidia"),
        ]
        env = {
            "NVIDIA_INSTALL_DIR_HOST": "/home/kubernetes/bin/nvidia",
            "NVIDIA_INSTALL_DIR_CONTAINER": "/usr/local/nvidia",
            "VULKAN_ICD_DIR_HOST": "/home/kubernetes/bin/nvidia/vulkan/icd.d",
            "VULKAN_ICD_DIR_CONTAINER": "/etc/vulkan/icd.d",
            "ROOT_MOUNT_DIR": "/root",
            "COS_TOOLS_DIR_HOST": "/var/lib/cos-tools",
            "COS_TOOLS_DIR_CONTAINER": "/build/cos-tools",
        }
        mounts = [
            ("nvidia-install-dir-host", "/usr/local/nvidia"),
            ("vulkan-icd-mount", "/etc/vulkan/icd.d"),
            ("dev", "/dev"),
            ("root-mount", "/root"),
            ("cos-tools", "/build/cos-tools"),
        ]
        init = [
            {
                "name": "nvidia-driver-installer",
                "image": pin.cos_image,
                "imagePullPolicy": "Never",  # preloaded on GKE's COS GPU nodes
                "command": ["bash", "-c", install],
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "resources": resources,
                "securityContext": privileged,
                "volumeMounts": [{"name": n, "mountPath": m} for n, m in mounts],
            },
            {
                # Applies the MIG partitioning GKE's gpu-partition-size asks for (nothing without it).
                "name": "partition-gpus",
                "image": pin.partition_image,
                "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
                "resources": resources,
                "securityContext": privileged,
                "volumeMounts": [
                    {"name": "nvidia-install-dir-host", "mountPath": "/usr/local/nvidia"},
                    {"name": "dev", "mountPath": "/dev"},
                    {"name": "nvidia-config", "mountPath": "/etc/nvidia"},
                ],
            },
        ]
        spec = {"hostNetwork": True, "hostPID": True}
    else:
        host = [("dev", "/dev"), ("boot", "/boot"), ("root-mount", "/")]
        init = [
            {
                "name": "nvidia-driver-installer",
                "image": pin.ubuntu_image,
                "env": [{"name": "NVIDIA_DRIVER_VERSION", "value": driver.ubuntu}],
                "resources": resources,
                "securityContext": privileged,
                "volumeMounts": [
                    {"name": "boot", "mountPath": "/boot"},
                    {"name": "dev", "mountPath": "/dev"},
                    {"name": "root-mount", "mountPath": "/root"},
                ],
            }
        ]
        spec = {}
    spec.update(
        {
            "priorityClassName": "system-node-critical",
            "affinity": affinity,
            "tolerations": [{"operator": "Exists"}],
            "volumes": [{"name": n, "hostPath": {"path": path}} for n, path in host],
            "initContainers": init,
            "containers": [pause],
        }
    )
    meta = _meta(name, GKE_DRIVER, pin.namespace)
    meta["labels"].update(selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": {"name": name, **selector}}, "spec": spec},
        },
    }


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

    device_classes = _device_class_drivers(c, klasses)  # also: every pool's class is known
    wanted_cd = _wants_compute_domains(c, klasses)
    compute_domains = {"auto": wanted_cd, "enabled": True, "disabled": False}[opts.compute_domains]
    fabric = _fabric_pools(c, klasses)
    notes: list[str] = []
    warnings: list[str] = []
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
        if name in OPTIONAL_COMPONENTS and name not in fabric:
            continue  # chosen from the classes: no pool of this cluster asks for it
        enabled = pin.enabled if name != "envoy_gateway" else (pin.enabled and opts.gateway.enabled)
        if not enabled:
            notes.append(f"{COMPONENT_TITLES[name]}: disabled")
            continue
        values = _component_values(name, pin, opts, compute_domains, fabric.get(name))
        if name in fabric:
            notes.append(f"{COMPONENT_TITLES[name]}: for pool(s) {', '.join(fabric[name])}")
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

    # DRA drivers this plan installs; a claim: DRA device of another driver is warned about (on GKE / EKS).
    planned = {r["component"] for r in releases}
    installs = {d: "dra_driver" for d in (GPU_DRIVER, COMPUTE_DOMAIN_DRIVER) if "dra_driver" in planned}
    installs.update({d: comp for d, comp in FABRIC_COMPONENTS.items() if comp in planned})
    warnings.extend(_uninstalled_driver_warnings(c, klasses, installs))

    driver_objects, installers = _plan_gke_driver(c, klasses, matrix.gke_gpu_driver, notes, warnings)
    if driver_objects and driver_objects[0]["metadata"]["namespace"] not in (*namespaces, "kube-system"):
        ns = driver_objects[0]["metadata"]["namespace"]
        objects.insert(0, {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns, "namespace")})

    plan = {
        "cluster": c.name,
        "provider": c.provider,
        "compute_domains": compute_domains,
        "driver_root": opts.root() if dra.enabled else None,
        "releases": releases,
        "objects": objects,
        # Applied before the releases: the DRA driver's kubelet plugin needs the NVIDIA driver on the node.
        "driver_objects": driver_objects,
        "driver_installers": installers,
        "device_classes": sorted(device_classes),
        "pools": _pool_expectations(c, klasses),
        "notes": notes,
        "warnings": warnings,
        "order": list(COMPONENTS),
        "gitops": opts.gitops.tool,
    }
    plan["render_objects"], plan["release_lines"] = render_objects(plan, opts.gitops, warnings)
    return plan


def _plan_gke_driver(
    cluster: StackCluster,
    classes: Mapping[str, InferenceClass],
    pin: GkeDriverPin | None,
    notes: list[str],
    warnings: list[str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The NVIDIA driver installer DaemonSets of a GKE cluster whose GPU pools have GKE's driver installation off:
    ``(objects, installers)``; ``installers`` (name, namespace, image, pools, driver) is what the check waits for."""
    wanted = _gke_driver_pools(cluster, classes)
    if not wanted:
        return [], []
    every = ", ".join(p for pools in wanted.values() for p in pools)
    if pin is None or not pin.enabled:
        why = "disabled (serving_stack_versions.gke_gpu_driver.enabled)" if pin else "not in serving_stack_versions"
        warnings.append(
            f"GKE GPU driver installer {why}: pool(s) {every} have GKE's GPU driver installation off and nothing "
            "installs the NVIDIA driver there; the DRA driver finds no GPUs until you install it"
        )
        return [], []
    minor = _gke_minor(cluster.kubernetes_version)
    if minor is None:
        raise GpufleetError(
            f"cluster {cluster.name}: its GKE kubernetes_version is not known, so the NVIDIA driver pinned for it "
            "cannot be chosen (fleet_info's clusters carry it)"
        )
    driver = pin.versions.get(minor)
    if driver is None:
        raise GpufleetError(
            f"serving_stack_versions.gke_gpu_driver.versions: has no entry for GKE {minor} (cluster {cluster.name}; "
            f"pinned: {', '.join(sorted(pin.versions))}): pin the NVIDIA driver of that GKE version"
        )
    objects, installers = [], []
    for family, pools in sorted(wanted.items()):
        if family not in ("cos", "ubuntu"):
            warnings.append(
                f"pool(s) {', '.join(pools)} run node image {family}: GKE documents an NVIDIA driver installer for COS "
                "and Ubuntu only; install the driver there yourself"
            )
            continue
        obj = _driver_installer(family, pin, driver, pools)
        objects.append(obj)
        version = driver.cos if family == "cos" else driver.ubuntu
        installers.append(
            {
                "name": obj["metadata"]["name"],
                "namespace": pin.namespace,
                "image": family,
                "pools": list(pools),
                "driver": version,
            }
        )
        notes.append(
            f"GKE GPU driver: {pin.namespace}/{obj['metadata']['name']} installs NVIDIA driver {version} "
            f"(GKE {minor}, {family.upper() if family == 'cos' else 'Ubuntu'}) on pool(s) {', '.join(pools)}"
        )
    return objects, installers


def _stack_wave(obj: Mapping[str, Any]) -> int:
    """The sync wave of one of the plan's plain objects (module_utils/gitops.py has the table)."""
    if obj.get("kind") in ("Namespace", "ResourceQuota"):
        return WAVE_NAMESPACES
    if _obj_labels(obj).get(LABEL_STACK_PART) == GKE_DRIVER.replace("_", "-"):
        return WAVE_DRIVER
    return WAVE_STACK_CONFIG  # DeviceClasses, presets, GatewayClass, Gateway: kinds a release may install


def _flux_release(rel: Mapping[str, Any], depends: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A release as Flux installs it: its chart source (HelmRepository, or OCIRepository for an OCI chart) and the
    HelmRelease, the chart version pinned, the values carried over as they are."""
    name, namespace, component = rel["release"], rel["namespace"], rel["component"]
    spec: dict[str, Any] = {"releaseName": name, "interval": FLUX_RELEASE_INTERVAL}
    if rel["repository"].startswith("oci://"):
        source = {
            "apiVersion": FLUX_SOURCE,
            "kind": "OCIRepository",
            "metadata": _meta(name, component, namespace),
            "spec": {
                "url": f"{rel['repository']}/{rel['chart']}",
                "ref": {"tag": rel["version"]},
                "layerSelector": {"mediaType": HELM_CHART_LAYER, "operation": "copy"},
                "interval": FLUX_SOURCE_INTERVAL,
            },
        }
        spec["chartRef"] = {"kind": "OCIRepository", "name": name}
    else:
        source = {
            "apiVersion": FLUX_SOURCE,
            "kind": "HelmRepository",
            "metadata": _meta(name, component, namespace),
            "spec": {"url": rel["repository"], "interval": FLUX_SOURCE_INTERVAL},
        }
        spec["chart"] = {
            "spec": {
                "chart": rel["chart"],
                "version": rel["version"],
                "sourceRef": {"kind": "HelmRepository", "name": name},
                "interval": FLUX_SOURCE_INTERVAL,
            }
        }
    spec["timeout"] = f"{rel['wait_timeout']}s"
    if depends:
        spec["dependsOn"] = [{"name": d["release"], "namespace": d["namespace"]} for d in depends]
    # Atomic, as in apply mode: a failed install is uninstalled and retried, a failed upgrade rolled back. The chart's
    # CRDs are created and kept up to date with it.
    spec["install"] = {"crds": "CreateReplace", "remediation": {"retries": 3}}
    spec["upgrade"] = {"crds": "CreateReplace", "remediation": {"retries": 3, "remediateLastFailure": True}}
    spec["values"] = rel["values"]
    release = {
        "apiVersion": FLUX_HELMRELEASE,
        "kind": "HelmRelease",
        "metadata": _meta(name, component, namespace),
        "spec": spec,
    }
    return [source, release]


def _argocd_release(rel: Mapping[str, Any], gitops: GitopsOptions) -> dict[str, Any]:
    """A release as Argo CD installs it: an Application in Argo CD's namespace of the cluster, a Helm source (the
    chart version pinned, the values carried over as they are), deploying to the release namespace of that cluster."""
    helm = {"releaseName": rel["release"], "valuesObject": rel["values"]}
    source: dict[str, Any]
    if rel["repository"].startswith("oci://"):
        # Argo CD >= 3.1 reads OCI artifacts natively: the chart's repository, the version as the tag, path ".".
        source = {"repoURL": f"{rel['repository']}/{rel['chart']}", "targetRevision": rel["version"], "path": "."}
    else:
        source = {"repoURL": rel["repository"], "chart": rel["chart"], "targetRevision": rel["version"]}
    source["helm"] = helm
    return {
        "apiVersion": ARGOCD_API,
        "kind": "Application",
        "metadata": _meta(rel["release"], rel["component"], gitops.home()),
        "spec": {
            "project": gitops.project,
            "source": source,
            "destination": {"server": ARGOCD_IN_CLUSTER, "namespace": rel["namespace"]},
            "syncPolicy": {
                "automated": {"prune": True, "selfHeal": True},
                # Server-side apply: a chart's CRDs (KServe's) exceed client-side apply's annotation limit.
                "syncOptions": ["ServerSideApply=true"],
                "retry": {"limit": 5, "backoff": {"duration": "30s", "factor": 2, "maxDuration": "10m"}},
            },
        },
    }


def render_objects(
    plan: Mapping[str, Any], gitops: GitopsOptions, warnings: list[str] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The plan as the render directory holds it for ``gitops.tool``: the plain objects and GKE's driver installers,
    then each release as Flux (a ``HelmRelease`` and its ``HelmRepository`` or ``OCIRepository``, ``dependsOn`` the
    releases whose CRDs it needs) or Argo CD (an ``Application``) renders it, or not at all (``none``); every object
    with its sync wave (module_utils/gitops.py). Returns ``(objects, lines)``: one line per release saying how it was
    rendered. A release whose chart is a local path (no repository) cannot be rendered for a GitOps tool: it is left
    out and warned about."""
    tool = gitops.tool
    objects = [
        decorate(obj, tool, _stack_wave(obj))
        for obj in [*(plan.get("objects") or []), *(plan.get("driver_objects") or [])]
    ]
    lines: list[str] = []
    releases = list(plan.get("releases") or [])
    rendered = {r["component"]: r for r in releases if r["repository"]}
    for rel in releases:
        name = rel["release"]
        if tool == NONE:
            lines.append(f"{name}: not rendered: gpufleet_gitops none")
            continue
        if not rel["repository"]:
            lines.append(f"{name}: not rendered: its chart {rel['chart']} is a local path")
            if warnings is not None:
                warnings.append(
                    f"release {name}: its chart {rel['chart']!r} is a local path (no repository), which "
                    f"{'Flux' if tool == FLUX else 'Argo CD'} cannot install from: not rendered; set "
                    f"serving_stack_overrides.{rel['component']}.repository to a Helm or OCI repository"
                )
            continue
        wave = WAVE_RELEASES + COMPONENTS.index(rel["component"])
        if tool == FLUX:
            depends = [rendered[c] for c in CRD_DEPENDENCIES.get(rel["component"], ()) if c in rendered]
            objs = _flux_release(rel, depends)
            after = f", after {', '.join(d['release'] for d in depends)}" if depends else ""
            lines.append(
                f"{name}: rendered as Flux HelmRelease {rel['namespace']}/{name} ({objs[0]['kind']} "
                f"{rel['repository']}, chart {rel['chart']} {rel['version']}{after})"
            )
        else:
            objs = [_argocd_release(rel, gitops)]
            lines.append(
                f"{name}: rendered as Argo CD Application {gitops.home()}/{name} (sync wave {wave}, chart "
                f"{rel['chart']} {rel['version']} into {rel['namespace']})"
            )
        objects.extend(decorate(o, tool, wave) for o in objs)
    return objects, lines


def fleet_generator(clusters: Any, gitops: Any, fleet: Any = None) -> list[dict[str, Any]]:
    """The fleet's GitOps generator, written under ``<render_dir>/_fleet/<namespace>/`` (a dict boundary: ``clusters``
    the fleet's cluster names, ``gitops`` the :class:`GitopsOptions`, ``fleet`` its name):

    * ``argocd``: an ``ApplicationSet`` whose git directory generator lists the cluster directories
      (``<path>/*``, ``_fleet`` excluded) at ``repo_url``/``revision``, and whose template is one Application per
      cluster directory, deploying it to the Argo CD cluster named like the inventory host (its cluster secret's
      ``name``), in sync-wave order, never deleting Namespaces;
    * ``flux``: per cluster, one ``Kustomization`` per sync layer (stack, stack-config, caches, serving) of the
      cluster directory (``./<path>/<cluster>``), from the GitRepository ``source``, applied to the cluster through the
      kubeconfig in the Secret ``<cluster>-kubeconfig`` (``kubeConfig.secretRef``), each keeping only its layer's
      objects and depending on the previous layer (``wait: true``);
    * ``none``: nothing.
    """
    require_pydantic()
    opts: GitopsOptions = parse(GitopsOptions, gitops if gitops is not None else {}, "gitops")
    if not isinstance(clusters, list) or not all(isinstance(c, str) and c for c in clusters):
        raise GpufleetError("clusters: must be a list of the fleet's cluster names")
    names = sorted(set(clusters))
    fleet_name = str(fleet) if fleet else "gpufleet"
    if opts.tool == NONE:
        return []
    if opts.tool == ARGOCD:
        if not opts.repo_url:
            raise GpufleetError(
                "gpufleet_gitops_repo_url: is required with gpufleet_gitops argocd: the ApplicationSet's git "
                "directory generator reads the cluster directories from that repository"
            )
        return [_argocd_application_set(opts, fleet_name)]
    out = []
    for cluster in names:
        previous = None
        for layer, _low in LAYERS:
            out.append(_flux_kustomization(opts, cluster, layer, previous))
            previous = f"{cluster}-{layer}"
    return out


def _generator_meta(name: str, namespace: str) -> dict[str, Any]:
    return _meta(name, GENERATOR_PART, namespace)


def _argocd_application_set(opts: GitopsOptions, fleet: str) -> dict[str, Any]:
    prefix = f"{opts.path}/" if opts.path else ""
    return {
        "apiVersion": ARGOCD_API,
        "kind": "ApplicationSet",
        "metadata": _generator_meta(fleet, opts.home()),
        "spec": {
            "goTemplate": True,
            "goTemplateOptions": ["missingkey=error"],
            "generators": [
                {
                    "git": {
                        "repoURL": opts.repo_url,
                        "revision": opts.revision,
                        "directories": [{"path": f"{prefix}*"}, {"path": f"{prefix}_fleet", "exclude": True}],
                    }
                }
            ],
            "template": {
                "metadata": {
                    "name": f"{fleet}-{{{{.path.basename}}}}",
                    "labels": {**STACK_OWNER, LABEL_STACK_PART: GENERATOR_PART},
                },
                "spec": {
                    "project": opts.project,
                    "source": {
                        "repoURL": opts.repo_url,
                        "targetRevision": opts.revision,
                        "path": "{{.path.path}}",
                        "directory": {"recurse": True},
                    },
                    # The cluster secret of each cluster is named like its inventory host.
                    "destination": {"name": "{{.path.basename}}"},
                    "syncPolicy": {
                        "automated": {"prune": True, "selfHeal": True},
                        # Custom resources whose CRD a release of an earlier sync wave installs are not dry-run
                        # before it exists; server-side apply (large objects, shared fields).
                        "syncOptions": ["ServerSideApply=true", "SkipDryRunOnMissingResource=true"],
                        "retry": {"limit": 10, "backoff": {"duration": "30s", "factor": 2, "maxDuration": "10m"}},
                    },
                },
            },
        },
    }


def _flux_kustomization(opts: GitopsOptions, cluster: str, layer: str, previous: str | None) -> dict[str, Any]:
    names = [name for name, _low in LAYERS]
    if layer == names[-1]:
        # The last layer also takes every file without a layer (added to the directory by hand).
        target = {"annotationSelector": f"{ANNOTATION_SYNC_LAYER} in ({','.join(names[:-1])})"}
    else:
        target = {"annotationSelector": f"{ANNOTATION_SYNC_LAYER} notin ({layer})"}
    spec: dict[str, Any] = {
        "interval": FLUX_SYNC_INTERVAL,
        "retryInterval": "1m",
        "timeout": "30m",
        "path": opts.cluster_path(cluster),
        "prune": True,
        # Ready only once what it applied is ready (HelmReleases installed, hydration Jobs complete): the next layer
        # waits for it.
        "wait": True,
        "sourceRef": {"kind": "GitRepository", "name": opts.source},
        "kubeConfig": {"secretRef": {"name": f"{cluster}-kubeconfig"}},
        # Every layer reads the whole cluster directory and keeps only its own objects.
        "patches": [
            {
                "target": target,
                "patch": "$patch: delete\napiVersion: v1\nkind: Object\nmetadata:\n  name: other-layer\n",
            }
        ],
    }
    if previous:
        spec["dependsOn"] = [{"name": previous}]
    meta = _generator_meta(f"{cluster}-{layer}", opts.home())
    meta["labels"][LABEL_CLUSTER] = cluster
    return {"apiVersion": FLUX_KUSTOMIZATION, "kind": "Kustomization", "metadata": meta, "spec": spec}


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
    for name, value in (("objects", objects), ("existing", existing)):
        if value is not None and (
            not isinstance(value, (list, tuple)) or not all(isinstance(o, Mapping) for o in value)
        ):
            raise GpufleetError(f"{name}: expected a list of Kubernetes objects (mappings), got {type(value).__name__}")
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


def driver_problems(plan: Mapping[str, Any], daemonsets: Any, pool_nodes: Mapping[str, list[str]]) -> list[str]:
    """The GKE GPU driver installers of the plan that have not installed the driver yet: each must exist, have
    rolled out its current spec, run on every node of its pools and be ready there (its init container, the
    installer, succeeded)."""
    found = {}
    for ds in daemonsets or []:
        if isinstance(ds, Mapping):
            meta = ds.get("metadata") or {}
            found[(str(meta.get("namespace")), str(meta.get("name")))] = ds
    problems = []
    for inst in plan.get("driver_installers") or []:
        what = f"GPU driver installer {inst['namespace']}/{inst['name']}"
        ds = found.get((inst["namespace"], inst["name"]))
        if ds is None:
            problems.append(f"{what} does not exist")
            continue
        status = ds.get("status") or {}
        generation = (ds.get("metadata") or {}).get("generation") or 0
        nodes = sum(len(pool_nodes.get(p, [])) for p in inst.get("pools") or [])
        desired = int(status.get("desiredNumberScheduled") or 0)
        ready = int(status.get("numberReady") or 0)
        updated = int(status.get("updatedNumberScheduled") or 0)
        pools = ", ".join(inst.get("pools") or [])
        if int(status.get("observedGeneration") or 0) < int(generation):
            problems.append(f"{what}: its current spec is not rolled out yet")
        elif desired < nodes:
            problems.append(f"{what} runs on {desired} of the {nodes} node(s) of pool(s) {pools}")
        elif ready < desired or updated < desired:
            problems.append(
                f"{what}: the NVIDIA driver is installed on {min(ready, updated)} of {desired} node(s) of pool(s) "
                f"{pools}"
            )
    return problems


def check_cluster(plan: Any, device_classes: Any, slices: Any, nodes: Any, daemonsets: Any = None) -> dict[str, Any]:
    """The serving stack works on this cluster when the GKE GPU driver installers it planned have installed the
    driver on every node of their pools (``daemonsets``: the DaemonSets read from the cluster; ``None`` skips this),
    every DeviceClass its pools name exists and every node of every GPU pool publishes, per DRA driver of the pool's
    class, ResourceSlices with at least the devices the class declares. Returns ``{cluster, ok, driver_ok,
    problems: [...], lines: [...]}``; each problem names what is missing."""
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
    driver_issues = [] if daemonsets is None else driver_problems(plan, daemonsets, pool_nodes)
    problems.extend(driver_issues)
    if daemonsets is not None:
        for inst in plan.get("driver_installers") or []:
            what = f"GPU driver installer {inst['namespace']}/{inst['name']}"
            if not any(p.startswith(what) for p in driver_issues):
                lines.append(
                    f"GPU driver installer {inst['namespace']}/{inst['name']}: NVIDIA driver {inst['driver']} "
                    f"installed on pool(s) {', '.join(inst['pools'])}"
                )
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
    return {
        "cluster": cluster,
        "ok": ok,
        "driver_ok": not driver_issues,
        "problems": problems,
        "lines": [head, *lines, *problems],
    }


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


def gke_driver_table(versions: Any) -> list[str]:
    """The GKE GPU driver pins as Markdown table lines (docs/serving-stack.md embeds exactly these)."""
    pin = parse_versions(versions).gke_gpu_driver
    if pin is None:
        return []
    rows = ["| GKE version | COS: installer `--version` | Ubuntu: `NVIDIA_DRIVER_VERSION` |", "|---|---|---|"]
    for minor in sorted(pin.versions, key=lambda v: tuple(int(x) for x in v.split("."))):
        rows.append(f"| {minor} | `{pin.versions[minor].cos}` | `{pin.versions[minor].ubuntu}` |")
    return rows


__all__ = [
    "COMPONENTS",
    "STACK_OWNER",
    "adoptions",
    "check_cluster",
    "driver_problems",
    "fleet_generator",
    "gke_driver_table",
    "matrix_table",
    "objects_to_apply",
    "plan_cluster",
    "release_action",
    "render_objects",
]
