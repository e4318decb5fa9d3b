# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The serving stack's version matrix and options: the components in install order, each component's chart pin
(``ChartPin``), GKE's NVIDIA driver pins, ``VersionMatrix`` (``parse_versions()``: the defaults with a cluster's
overrides deep-merged), the stack / gateway / GitOps options, the cluster as the stack sees it, and the Markdown
tables the docs embed (``matrix_table()``, ``gke_driver_table()``).

Part of the serving stack; ``serving_stack.py`` is the façade other code imports.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Literal

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    _Strict,
    check_dns_label,
    check_dns_subdomain,
    field_validator,
    parse,
    require_pydantic,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.gitops import (
    ARGOCD,
)

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
    "grove",
    "envoy_gateway",
    "kserve_crd",
    "kserve",
)
#: The Grove operator (backend ``grove``: PodCliqueSets, design.md §14), pinned to the API the renderer's output is
#: validated against (github.com/ai-dynamo/grove operator/api v0.1.0-alpha.8, tests/lib/crd_fetch.py). Grove publishes
#: its chart as ``oci://ghcr.io/ai-dynamo/grove/grove-charts`` at each release tag (docs/installation.md). Off unless a
#: cluster turns it on (``serving_stack_overrides: {grove: {enabled: true}}``, or the matrix's own ``grove`` entry).
DEFAULT_GROVE_PIN: dict[str, Any] = {
    "chart": "grove-charts",
    "repository": "oci://ghcr.io/ai-dynamo/grove",
    "version": "v0.1.0-alpha.8",
    "app_version": "v0.1.0-alpha.8",
    "release": "grove",
    "namespace": "grove-system",
    "enabled": False,
    "detect_crd": "podcliquesets.grove.io",
}
COMPONENT_TITLES: dict[str, str] = {
    "node_feature_discovery": "Node Feature Discovery",
    "dra_driver": "NVIDIA DRA driver for GPUs",
    "dranet": "DraNet, DRA driver for NICs (optional, for dra.net devices)",
    "efa_device_plugin": "AWS EFA device plugin (optional, EKS, for EFA devices)",
    "leaderworkerset": "LeaderWorkerSet",
    "grove": "Grove operator (optional, for backend grove)",
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
#: The presets the LLMInferenceService renderer names (render/backends/kserve.py) and KServe v0.20's
#: controller looks up.
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
    grove: ChartPin | None = None
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


#: The endpoint picker (EPP) of a deployment's InferencePool (``routing.inference_pool``): the llm-d router's released
#: image (llm-d/llm-d-router, chart llm-d-router-standalone v0.9.0: ``ghcr.io/llm-d/llm-d-router-endpoint-picker``);
#: its InferencePool is ``inference.networking.k8s.io/v1`` (the Gateway API Inference Extension v1.6.0 CRDs the tests
#: validate against). A deployment's ``routing.epp_image`` overrides it.
EPP_IMAGE = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0"


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
    if "grove" not in versions:  # a matrix from before Grove: its pin, off unless overridden
        versions = {**versions, "grove": DEFAULT_GROVE_PIN}
    merged = deep_merge(versions, overrides)
    try:
        return parse(VersionMatrix, merged, "serving_stack_versions")
    except GpufleetError:
        if overrides:
            # Say which variable the bad value may come from.
            return parse(VersionMatrix, merged, "serving_stack_versions (with serving_stack_overrides)")
        raise


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
