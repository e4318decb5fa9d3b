"""Render the Kubernetes objects that serve a deployment's replicas on one cluster (design.md §6).

``render_serving_manifests(replicas, deployment, cluster=..., caches=...)`` is the logic behind the
``gpufleet.serving.serving_manifests`` filter. It is a pure function: the same input gives the same objects, in the
same order, with the same content. Per replica placed on ``cluster`` (others are ignored), in this order:

1. per engine, per member that claims a DRA device: a ``resource.k8s.io/v1`` ResourceClaimTemplate with one request
   per device request (``exactly: {deviceClassName, allocationMode: ExactCount, count, selectors}``). Requests
   without a device class (``Synthetic`` devices, matched for placement only) are never claimed;
2. per engine, the workload: an ``apps/v1`` Deployment (Standalone), a ``leaderworkerset.x-k8s.io/v1``
   LeaderWorkerSet (Leader + Worker) or, for backend ``kserve``, a ``serving.kserve.io/v1alpha2``
   LLMInferenceService whose pod specs carry the claims;
3. a Service selecting the replica's serving pods (Standalone and Leader) on the engine port;
4. an HTTPRoute (``/<namespace>/<replica>/`` rewritten to ``/``, no request timeout) when a gateway is configured.

Every serving pod is pinned to its pool (``nodeSelector: {gpufleet.io/pool: <pool>}``), claims its devices through
``resourceClaims`` + the engine container's ``resources.claims`` (``nvidia.com/gpu`` limits and requests are removed),
tolerates ``nvidia.com/gpu:NoSchedule`` plus the deployment's tolerations, gets a memory-backed ``/dev/shm``, the
model cache read-only at ``/mnt/models`` (vLLM pointed at it) and a readiness probe. The engine container is a
template's first container.

Every object and pod template carries the managed labels (``MANAGED_LABEL_KEYS``); they cannot be overridden by a
user's template labels or the ``labels`` option (managed values silently win). Names are DNS-1035 labels, at most 63
characters (fewer where a controller derives longer names from them), truncated with a short hash when too long.

Errors are :class:`GpufleetError` (:class:`FleetValidationError` for malformed input), never anything else.
"""

from __future__ import annotations

import copy
import hashlib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet import deployment_reference_errors
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    Engine,
    GatewayRef,
    Member,
    ModelCache,
    ModelDeployment,
    parse,
    require_pydantic,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.module_utils.records import (
    EngineRecord,
    MemberRecord,
    ReplicaRecord,
    check_records,
)

# --------------------------------------------------------------------------------------------------------------------
# Names, labels and constants (the contract other parts of the collection read back)
# --------------------------------------------------------------------------------------------------------------------

MANAGED_BY = "gpufleet.serving"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_COMPONENT = "gpufleet.io/component"
COMPONENT = "serving"  # model_deployment prunes / reads back by managed-by + component
LABEL_DEPLOYMENT = "gpufleet.io/deployment"
LABEL_CLUSTER = "gpufleet.io/cluster"
LABEL_REPLICA = "gpufleet.io/replica"
LABEL_REPLICA_INDEX = "gpufleet.io/replica-index"
LABEL_ENGINE = "gpufleet.io/engine"
LABEL_POOL = "gpufleet.io/pool"
LABEL_ROLE = "gpufleet.io/role"
LABEL_ENDPOINT = "gpufleet.io/endpoint"
MANAGED_LABEL_KEYS = (
    LABEL_MANAGED_BY,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_CLUSTER,
    LABEL_REPLICA,
    LABEL_REPLICA_INDEX,
    LABEL_ENGINE,
    LABEL_POOL,
    LABEL_ROLE,
    LABEL_ENDPOINT,
)
ANNOTATION_PLACEMENT = "gpufleet.io/placement"
# The node label the pool's nodes carry (set by the cluster roles); pods select it.
NODE_POOL_LABEL = "gpufleet.io/pool"

GPU_RESOURCE = "nvidia.com/gpu"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
CLAIM_NAME = "gpufleet-devices"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"
CACHE_VOLUME = "gpufleet-model-cache"
CACHE_PATH = "/mnt/models"
PORT_NAME = "http"
RAY_PORT = 6379
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
ENV_LEADER_ADDRESS = "GPUFLEET_LEADER_ADDRESS"
ENV_RANK = "GPUFLEET_RANK"

# KServe v0.20 (pkg/controller/v1alpha2/llmisvc/config_merge.go): the controller itself applies
# kserve-config-llm-template to single-node services and kserve-config-llm-worker-{pipeline,data}-parallel to
# multi-node ones (chosen by spec.parallelism), then the explicit baseRefs on top; presets name the engine container
# "main" and serve the model KServe mounts at /mnt/models.
KSERVE_PRESET_SINGLE_NODE = "kserve-config-llm-template"
KSERVE_PRESET_PIPELINE_PARALLEL = "kserve-config-llm-worker-pipeline-parallel"
KSERVE_PRESET_DATA_PARALLEL = "kserve-config-llm-worker-data-parallel"
KSERVE_CONTAINER = "main"

# Longest names we emit, per kind. Deployment/Service/RCT/HTTPRoute: a DNS label. A LeaderWorkerSet's name becomes a
# StatefulSet name (<name>-<group>) whose pods carry controller-revision-hash=<statefulset>-<10 chars> (<= 63), so it
# stays <= 47 for up to 9999 copies. KServe derives <name>-kserve-mn (a LeaderWorkerSet) and other children from an
# LLMInferenceService's name, so that stays <= 37.
MAX_NAME = 63
MAX_LWS_NAME = 47
MAX_KSERVE_NAME = 37
HASH_DIGITS = 5

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_KEY_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})


def k8s_name(base: str, max_len: int = MAX_NAME) -> str:
    """A stable DNS-1035 label from ``base``: lower-cased, invalid characters -> ``-``, must start with a letter
    (``gf-`` is prefixed otherwise), and at most ``max_len`` characters: a longer name keeps its beginning and gets
    ``-<5 hex of sha256(base)>`` so different long names stay different and the same name maps to the same result."""
    name = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-") or "x"
    if not name[0].isalpha():
        name = f"gf-{name}"
    if len(name) > max_len:
        digest = hashlib.sha256(base.encode()).hexdigest()[:HASH_DIGITS]
        name = f"{name[: max_len - HASH_DIGITS - 1].rstrip('-')}-{digest}"
    return name


@dataclass
class _Context:
    dep: ModelDeployment
    cluster: str
    cache: ModelCache | None
    gateway: GatewayRef | None
    extra_labels: dict[str, str] = field(default_factory=dict)
    extra_annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RenderOptions:
    """What a render takes besides the deployment, its records, the cluster and the cache (all validated)."""

    gateway: GatewayRef | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


_Pod = tuple[dict[str, Any], dict[str, Any]]  # (pod metadata, pod spec)


def _label_map(value: Any, what: str, *, check_label_syntax: bool) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise GpufleetError(f"{what} must be a mapping of string to string (got {type(value).__name__})")
    for key, item in value.items():
        if not isinstance(item, str):
            raise GpufleetError(f"{what}[{key!r}] must be a string (got {type(item).__name__})")
        if check_label_syntax:
            prefix, _sep, name = key.rpartition("/")
            if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or len(name) > 63 or not _LABEL_KEY_NAME.match(name):
                raise GpufleetError(f"{what}: {key!r} is not a valid label key")
            if len(item) > 63 or not _LABEL_VALUE.match(item):
                raise GpufleetError(f"{what}[{key!r}]: {item!r} is not a valid label value")
    return dict(value)


# --------------------------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------------------------


def render_serving_manifests(
    replicas: Any,
    deployment: Any,
    *,
    cluster: Any,
    caches: Any = None,
    gateway: Any = None,
    labels: Any = None,
    annotations: Any = None,
) -> list[dict[str, Any]]:
    """The Kubernetes objects serving ``deployment``'s replicas placed on ``cluster`` (see the module docstring).

    ``replicas``: the placement's replicas (``replica_placement``'s ``replicas``); replicas on other clusters are
    validated and ignored. ``deployment``: one ``gpufleet_model_deployments`` entry. ``caches``: the
    ``gpufleet_model_caches`` list (needed when the deployment names a cache). ``gateway``: a default
    ``{name, namespace, section_name}`` for the HTTPRoute, used when the deployment sets no ``gateway``. ``labels`` /
    ``annotations``: extra metadata for every object (labels also on pod templates); managed labels win.
    """
    require_pydantic()
    replicas = to_plain(replicas, "replicas")
    deployment = to_plain(deployment, "deployment")
    caches = to_plain(caches, "caches")
    if not isinstance(cluster, str) or not cluster:
        raise GpufleetError(f"cluster must be the name of the cluster to render for (got {cluster!r})")
    cluster = str.__str__(cluster)
    if not isinstance(replicas, list):
        raise GpufleetError(f"replicas must be a list of replicas (got {type(replicas).__name__})")
    if not isinstance(deployment, dict):
        raise GpufleetError(f"deployment must be a mapping (got {type(deployment).__name__})")

    dep, cache = prepare_deployment(deployment, caches)
    options = RenderOptions(
        gateway=None if gateway is None else parse(GatewayRef, to_plain(gateway, "gateway"), "gateway"),
        labels=_label_map(to_plain(labels, "labels"), "labels", check_label_syntax=True),
        annotations=_label_map(to_plain(annotations, "annotations"), "annotations", check_label_syntax=False),
    )
    records = ReplicaRecord.parse_list(replicas, "replicas")
    return render_replicas(dep, records, cluster, cache, options)


def prepare_deployment(deployment: Any, caches: Any) -> tuple[ModelDeployment, ModelCache | None]:
    """Validate one ``gpufleet_model_deployments`` entry for rendering and find the cache it mounts (once per
    deployment, whatever the number of clusters it is rendered for)."""
    dep: ModelDeployment = parse(ModelDeployment, deployment, "deployment")
    errors = deployment_reference_errors(dep, "deployment", None, check_selectors=False)
    if errors:
        raise FleetValidationError(errors)
    return dep, _find_cache(dep, caches)


def render_replicas(
    dep: ModelDeployment,
    records: list[ReplicaRecord],
    cluster: str,
    cache: ModelCache | None,
    options: RenderOptions | None = None,
) -> list[dict[str, Any]]:
    """The objects serving ``dep``'s replicas placed on ``cluster``, over validated models (see the module docstring).

    ``records`` may hold replicas on other clusters: they are checked against the deployment and ignored.
    """
    options = options or RenderOptions()
    check_records(records, dep)
    _check_backend(dep)
    ctx = _Context(
        dep=dep,
        cluster=cluster,
        cache=cache,
        gateway=dep.gateway or options.gateway,
        extra_labels=dict(options.labels),
        extra_annotations=dict(options.annotations),
    )
    mine = sorted((r for r in records if r.cluster == cluster), key=lambda r: (r.index, r.name or ""))
    objects: list[dict[str, Any]] = []
    for replica in mine:
        objects.extend(_replica_objects(ctx, replica.ordered_like(dep)))
    return objects


def _find_cache(dep: ModelDeployment, caches: Any) -> ModelCache | None:
    if dep.cache is None:
        return None
    if caches is None:
        caches = []
    if not isinstance(caches, list):
        raise GpufleetError(f"caches must be a list of model caches (got {type(caches).__name__})")
    names = [c.get("name") for c in caches if isinstance(c, dict)]
    for i, item in enumerate(caches):
        if isinstance(item, dict) and item.get("name") == dep.cache:
            cache: ModelCache = parse(ModelCache, item, f"caches[{i}]")
            if cache.namespace != dep.namespace:
                raise FleetValidationError(
                    [
                        (
                            "deployment.cache",
                            f"cache {cache.name!r} lives in namespace {cache.namespace!r} but the deployment runs in "
                            f"{dep.namespace!r}; a pod can only mount a PVC of its own namespace",
                        )
                    ]
                )
            return cache
    known = ", ".join(str(n) for n in names) or "none given"
    raise FleetValidationError([("deployment.cache", f"unknown model cache {dep.cache!r} (known: {known})")])


def _check_backend(dep: ModelDeployment) -> None:
    if dep.backend != "kserve":
        return
    if dep.ray:
        raise GpufleetError(
            f"deployment {dep.name!r}: ray: true is not supported with backend kserve (KServe's multi-node presets "
            "run vLLM's own multi-node launcher); use backend leaderworkerset or auto for a Ray gang"
        )
    if len({e.is_gang for e in dep.engines}) > 1:
        raise GpufleetError(
            f"deployment {dep.name!r}: backend kserve cannot mix Standalone and Leader/Worker engines in one "
            "deployment (the replica's Service could not select both kinds of serving pods); split the deployment"
        )


# --------------------------------------------------------------------------------------------------------------------
# Per replica
# --------------------------------------------------------------------------------------------------------------------


def _managed(ctx: _Context, replica: ReplicaRecord, *, pool: str, engine: str | None = None) -> dict[str, str]:
    labels = {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_COMPONENT: COMPONENT,
        LABEL_DEPLOYMENT: ctx.dep.name,
        LABEL_CLUSTER: ctx.cluster,
        LABEL_REPLICA: _name(replica),
        LABEL_REPLICA_INDEX: str(replica.index),
    }
    if engine is not None:
        labels[LABEL_ENGINE] = engine
    labels[LABEL_POOL] = pool
    return labels


def _labels(ctx: _Context, managed: Mapping[str, str], user: Mapping[str, str] | None = None) -> dict[str, str]:
    """user < extra (option) < managed. Managed keys are reserved: a user value for any of them is dropped, also where
    this object does not set it (a worker pod must not claim ``gpufleet.io/endpoint`` and join the Service)."""
    out: dict[str, str] = {}
    for source in (user or {}, ctx.extra_labels):
        for key, value in source.items():
            if key not in managed and key not in MANAGED_LABEL_KEYS:
                out[key] = value
    out.update(managed)
    return out


def _metadata(
    ctx: _Context, name: str, labels: dict[str, str], annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ctx.dep.namespace, "labels": labels}
    merged = {**ctx.extra_annotations, **(annotations or {})}
    if merged:
        meta["annotations"] = merged
    return meta


def _backend(ctx: _Context, engine: Engine) -> str:
    if ctx.dep.backend == "kserve":
        return "kserve"
    return "leaderworkerset" if engine.is_gang else "deployment"


def _replica_objects(ctx: _Context, replica: ReplicaRecord) -> list[dict[str, Any]]:
    """``replica`` is ordered like the deployment: its engines and members zip with the deployment's."""
    objects: list[dict[str, Any]] = []
    gang_kserve = False
    for engine, placed in zip(ctx.dep.engines, replica.engines, strict=True):
        backend = _backend(ctx, engine)
        gang_kserve = gang_kserve or (backend == "kserve" and engine.is_gang)
        objects.extend(_engine_objects(ctx, replica, engine, placed, backend))
    first_pool = replica.engines[0].members[0].pool
    labels = _labels(ctx, _managed(ctx, replica, pool=first_pool))
    objects.append(_service(ctx, replica, labels, gang_kserve))
    if ctx.gateway is not None:
        objects.append(_http_route(ctx, replica, labels))
    return objects


def _name(replica: ReplicaRecord) -> str:
    """A rendered record has a name (``check_against`` requires it)."""
    return replica.name or ""


def _record_for(ctx: _Context, replica: ReplicaRecord) -> ReplicaRecord:
    """The record as this render persists it: the deployment's namespace and the cluster rendered for."""
    return replica.model_copy(update={"cluster": ctx.cluster, "namespace": ctx.dep.namespace})


def _service(ctx: _Context, replica: ReplicaRecord, labels: dict[str, str], gang_kserve: bool) -> dict[str, Any]:
    selector = {LABEL_DEPLOYMENT: ctx.dep.name, LABEL_REPLICA: _name(replica), LABEL_ENDPOINT: "true"}
    if gang_kserve:
        # KServe gives leader and worker pods the same labels; LWS marks the leader with worker-index 0.
        selector[LWS_WORKER_INDEX_LABEL] = "0"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(
            ctx, k8s_name(_name(replica)), labels, {ANNOTATION_PLACEMENT: _record_for(ctx, replica).to_annotation()}
        ),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": PORT_NAME, "port": ctx.dep.port, "targetPort": ctx.dep.port, "protocol": "TCP"}],
        },
    }


def _http_route(ctx: _Context, replica: ReplicaRecord, labels: dict[str, str]) -> dict[str, Any]:
    gw = ctx.gateway
    if gw is None:
        raise AssertionError("HTTPRoute rendered without a gateway")  # pragma: no cover
    parent: dict[str, Any] = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gw.name}
    if gw.namespace:
        parent["namespace"] = gw.namespace
    if gw.section_name:
        parent["sectionName"] = gw.section_name
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": _metadata(ctx, k8s_name(_name(replica)), labels),
        "spec": {
            "parentRefs": [parent],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": f"/{ctx.dep.namespace}/{_name(replica)}/"}}],
                    "filters": [
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
                        }
                    ],
                    "backendRefs": [{"name": k8s_name(_name(replica)), "port": ctx.dep.port}],
                    "timeouts": {"request": "0s"},
                }
            ],
        },
    }


# --------------------------------------------------------------------------------------------------------------------
# Per engine
# --------------------------------------------------------------------------------------------------------------------


def _engine_objects(
    ctx: _Context, replica: ReplicaRecord, engine: Engine, placed: EngineRecord, backend: str
) -> list[dict[str, Any]]:
    max_len = {"deployment": MAX_NAME, "leaderworkerset": MAX_LWS_NAME, "kserve": MAX_KSERVE_NAME}[backend]
    workload = k8s_name(f"{_name(replica)}-{engine.name}", max_len)
    objects: list[dict[str, Any]] = []
    pods: dict[str, _Pod] = {}
    pool = placed.members[0].pool
    for member, mp in zip(engine.members, placed.members, strict=True):
        rct = None
        if mp.claimed_requests:
            rct = k8s_name(f"{_name(replica)}-{engine.name}-{member.role.lower()}")
            objects.append(_claim_template(ctx, replica, engine, mp, rct))
        pods[member.role] = _pod(ctx, replica, engine, member, mp, rct, backend)
    labels = _labels(ctx, _managed(ctx, replica, pool=pool, engine=engine.name))
    if backend == "deployment":
        objects.append(_deployment(ctx, replica, engine, placed, workload, labels, pods["Standalone"]))
    elif backend == "leaderworkerset":
        objects.append(_leader_worker_set(ctx, engine, placed, workload, labels, pods))
    else:
        objects.append(_llm_inference_service(ctx, engine, placed, workload, labels, pods))
    return objects


def _claim_template(
    ctx: _Context, replica: ReplicaRecord, engine: Engine, mp: MemberRecord, name: str
) -> dict[str, Any]:
    requests = []
    for req in mp.claimed_requests:
        exactly: dict[str, Any] = {
            "deviceClassName": req.device_class_name,
            "allocationMode": "ExactCount",
            "count": req.count,
        }
        if req.selectors:
            exactly["selectors"] = [{"cel": {"expression": cel}} for cel in req.selectors]
        requests.append({"name": req.name, "exactly": exactly})
    managed = _managed(ctx, replica, pool=mp.pool, engine=engine.name)
    managed[LABEL_ROLE] = mp.role.lower()
    labels = _labels(ctx, managed)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": _metadata(ctx, name, labels),
        "spec": {"metadata": {"labels": dict(labels)}, "spec": {"devices": {"requests": requests}}},
    }


def _deployment(
    ctx: _Context,
    replica: ReplicaRecord,
    engine: Engine,
    placed: EngineRecord,
    name: str,
    labels: dict[str, str],
    pod: _Pod,
) -> dict[str, Any]:
    pod_meta, pod_spec = pod
    selector = {LABEL_DEPLOYMENT: ctx.dep.name, LABEL_REPLICA: _name(replica), LABEL_ENGINE: engine.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(ctx, name, labels),
        "spec": {
            "replicas": placed.copies,
            "selector": {"matchLabels": selector},
            # Capacity is planned exactly (pods x copies): never surge above it, replace one copy at a time.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {"metadata": pod_meta, "spec": pod_spec},
        },
    }


def _leader_worker_set(
    ctx: _Context, engine: Engine, placed: EngineRecord, name: str, labels: dict[str, str], pods: dict[str, _Pod]
) -> dict[str, Any]:
    worker = next(m for m in engine.members if m.role == "Worker")
    if worker.worker is None:
        raise AssertionError("gang Worker member has no worker block")  # pragma: no cover
    leader_meta, leader_spec = pods["Leader"]
    worker_meta, worker_spec = pods["Worker"]
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _metadata(ctx, name, labels),
        "spec": {
            "replicas": placed.copies,
            # Workers start with the leader (not after it is Ready: the leader only gets Ready once its workers joined).
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": 1 + worker.worker.nodes,
                # A gang is all-or-nothing: a restarted pod recreates its whole group.
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": leader_meta, "spec": leader_spec},
                "workerTemplate": {"metadata": worker_meta, "spec": worker_spec},
            },
        },
    }


# --------------------------------------------------------------------------------------------------------------------
# KServe
# --------------------------------------------------------------------------------------------------------------------


def _llm_inference_service(
    ctx: _Context, engine: Engine, placed: EngineRecord, name: str, labels: dict[str, str], pods: dict[str, _Pod]
) -> dict[str, Any]:
    dep = ctx.dep
    serving_role = "Leader" if engine.is_gang else "Standalone"
    serving_spec = pods[serving_role][1]
    model = _kserve_model(ctx, engine)
    pod_labels: dict[str, str] = {}
    pod_annotations: dict[str, str] = {}
    for role in ("Worker", serving_role):  # the serving pod's metadata wins
        if role in pods:
            meta = pods[role][0]
            pod_labels.update(meta.get("labels", {}))
            pod_annotations.update(meta.get("annotations", {}))
    pod_labels.pop(LABEL_ROLE, None)  # leader and worker share spec.labels: no per-role label
    pod_labels[LABEL_ENDPOINT] = "true"
    spec: dict[str, Any] = {}
    if dep.kserve.base_refs:
        refs = list(dep.kserve.base_refs)
    else:
        refs = [KSERVE_PRESET_PIPELINE_PARALLEL if engine.is_gang else KSERVE_PRESET_SINGLE_NODE]
    spec["baseRefs"] = [{"name": ref} for ref in refs]
    spec["model"] = model
    spec["replicas"] = placed.copies
    spec["labels"] = pod_labels
    if pod_annotations:
        spec["annotations"] = pod_annotations
    spec["template"] = serving_spec
    if engine.is_gang:
        worker = next(m for m in engine.members if m.role == "Worker")
        if worker.worker is None:
            raise AssertionError("gang Worker member has no worker block")  # pragma: no cover
        size = 1 + worker.worker.nodes
        spec["worker"] = pods["Worker"][1]
        if any(ref.endswith("worker-data-parallel") for ref in refs):
            parallelism: dict[str, Any] = {"data": size, "dataLocal": 1}
        else:
            parallelism = {"pipeline": size}
        tensor = _flag_value(_tokens(_engine_container(serving_spec)), "--tensor-parallel-size", "-tp")
        if tensor is not None and tensor.isdigit() and int(tensor) >= 1:
            parallelism["tensor"] = int(tensor)
        spec["parallelism"] = parallelism
    return {
        "apiVersion": "serving.kserve.io/v1alpha2",
        "kind": "LLMInferenceService",
        "metadata": _metadata(ctx, name, labels),
        "spec": spec,
    }


def _kserve_model(ctx: _Context, engine: Engine) -> dict[str, Any]:
    """``spec.model``: the cache PVC when there is one, else the hub model the engine names."""
    serving = next(m for m in engine.members if m.role in ("Standalone", "Leader"))
    container = (serving.template or {})["spec"]["containers"][0]
    tokens = _tokens(container)
    named = _model_arg(container, tokens)
    served = _flag_value(tokens, "--served-model-name")
    if ctx.cache is not None:
        uri = f"pvc://{ctx.cache.claim_name}"
        model_id = ctx.cache.source.hugging_face.repo if ctx.cache.source.hugging_face else None
    elif named is not None:
        if named.startswith("/"):
            raise GpufleetError(
                f"deployment {ctx.dep.name!r}: backend kserve cannot serve the local path {named!r}: set a cache "
                "(KServe mounts it at /mnt/models) or name a hub model (--model=<org>/<repo>)"
            )
        uri = named if "://" in named else f"hf://{named}"
        model_id = named
    else:
        raise GpufleetError(
            f"deployment {ctx.dep.name!r}: backend kserve needs to know where the model is: set the deployment's "
            "cache, or pass --model=<org>/<repo> to the engine container"
        )
    return {"uri": uri, "name": served or model_id or ctx.dep.name}


# --------------------------------------------------------------------------------------------------------------------
# Pods
# --------------------------------------------------------------------------------------------------------------------


def _engine_container(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["containers"][0]


def _tokens(container: Mapping[str, Any]) -> list[str]:
    """Command + args as shell-like tokens (a ``sh -c`` script is split into its words)."""
    out: list[str] = []
    for item in [*(container.get("command") or []), *(container.get("args") or [])]:
        text = str(item)
        if any(ch.isspace() for ch in text):
            try:
                out.extend(shlex.split(text))
            except ValueError:
                out.extend(text.split())
        else:
            out.append(text)
    return out


def _flag_value(tokens: list[str], *flags: str) -> str | None:
    for i, token in enumerate(tokens):
        for flag in flags:
            if token.startswith(f"{flag}="):
                return token.split("=", 1)[1]
            if token == flag and i + 1 < len(tokens):
                return tokens[i + 1]
    return None


def _is_vllm(container: Mapping[str, Any]) -> bool:
    return "vllm" in str(container.get("image", "")).lower() or any(
        "vllm" in str(part).lower() for part in container.get("command") or []
    )


def _is_shell(container: Mapping[str, Any]) -> bool:
    command = [str(c) for c in container.get("command") or []]
    return (
        bool(command)
        and command[0].rsplit("/", 1)[-1] in _SHELLS
        and "-c" in [*command, *(container.get("args") or [])]
    )


def _model_arg(container: Mapping[str, Any], tokens: list[str]) -> str | None:
    """The model a vLLM container names: ``--model[=]X``, ``vllm serve X`` or (image entrypoint) a first arg ``X``."""
    value = _flag_value(tokens, "--model")
    if value is not None:
        return value
    for i in range(len(tokens) - 2):
        if tokens[i].rsplit("/", 1)[-1] == "vllm" and tokens[i + 1] == "serve" and not tokens[i + 2].startswith("-"):
            return tokens[i + 2]
    args = container.get("args") or []
    if not container.get("command") and args and not str(args[0]).startswith("-"):
        return str(args[0])  # vllm/vllm-openai's entrypoint is `vllm serve`: a first positional arg is the model
    return None


def _drop_model_args(container: dict[str, Any]) -> None:
    """Remove ``--model[=]X`` and a leading positional model from ``args`` (KServe's presets serve /mnt/models)."""
    args = [str(a) for a in container.get("args") or []]
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg.startswith("--model="):
            continue
        if arg == "--model":
            skip = True
            continue
        if i == 0 and not arg.startswith("-"):
            continue
        out.append(arg)
    if out:
        container["args"] = out
    else:
        container.pop("args", None)


def _set_env(container: dict[str, Any], entry: dict[str, Any], *, override: bool) -> None:
    env = container.setdefault("env", [])
    for i, existing in enumerate(env):
        if isinstance(existing, Mapping) and existing.get("name") == entry["name"]:
            if override:
                env[i] = entry
            return
    env.append(entry)


def _has_env(container: Mapping[str, Any], name: str) -> bool:
    return any(isinstance(e, Mapping) and e.get("name") == name for e in container.get("env") or [])


def _strip_gpu_resources(spec: dict[str, Any]) -> None:
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            resources = container.get("resources")
            if not isinstance(resources, dict):
                continue
            for section in ("limits", "requests"):
                values = resources.get(section)
                if isinstance(values, dict):
                    values.pop(GPU_RESOURCE, None)
                    if not values:
                        resources.pop(section)
            if not resources:
                container.pop("resources")


def _add_volume(spec: dict[str, Any], volume: dict[str, Any]) -> None:
    volumes = spec.setdefault("volumes", [])
    if not any(v.get("name") == volume["name"] for v in volumes):
        volumes.append(volume)


def _pod(
    ctx: _Context,
    replica: ReplicaRecord,
    engine: Engine,
    member: Member,
    mp: MemberRecord,
    rct: str | None,
    backend: str,
) -> _Pod:
    """``(pod metadata, pod spec)`` for one member, from a deep copy of its template."""
    dep = ctx.dep
    where = f"deployment {dep.name!r} engine {engine.name!r} {member.role} template"
    template = copy.deepcopy(member.template or {})
    unknown = sorted(set(template) - {"metadata", "spec"})
    if unknown:
        raise GpufleetError(f"{where}: a pod template has only metadata and spec (got {', '.join(unknown)})")
    user_meta = template.get("metadata") or {}
    if not isinstance(user_meta, dict):
        raise GpufleetError(f"{where}: metadata must be a mapping")
    spec: dict[str, Any] = template["spec"]
    kserve = backend == "kserve"
    serving = member.role in ("Standalone", "Leader")
    gang = engine.is_gang
    ray = dep.ray and gang and not kserve

    _strip_gpu_resources(spec)
    container = _engine_container(spec)
    if kserve and container.get("name") != KSERVE_CONTAINER:
        if any(c.get("name") == KSERVE_CONTAINER for c in spec["containers"][1:]):
            raise GpufleetError(f"{where}: the engine (first) container must be the one named {KSERVE_CONTAINER!r}")
        container["name"] = KSERVE_CONTAINER  # KServe's presets and model mount address the container "main"

    # Pinned to the pool the placement chose; the GPU taint tolerated (DRA pods request no nvidia.com/gpu).
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), NODE_POOL_LABEL: mp.pool}
    tolerations: list[Any] = []
    for tol in [
        *(spec.get("tolerations") or []),
        GPU_TOLERATION,
        *(t.model_dump(exclude_none=True) for t in dep.tolerations),
    ]:
        if tol not in tolerations:
            tolerations.append(dict(tol))
    spec["tolerations"] = tolerations

    if rct is not None:
        claims = [c for c in spec.get("resourceClaims") or [] if c.get("name") != CLAIM_NAME]
        claims.append({"name": CLAIM_NAME, "resourceClaimTemplateName": rct})
        spec["resourceClaims"] = claims
        resources = container.setdefault("resources", {})
        container_claims = resources.setdefault("claims", [])
        if not any(c.get("name") == CLAIM_NAME for c in container_claims):
            container_claims.append({"name": CLAIM_NAME})

    mounts = container.setdefault("volumeMounts", [])
    if not any(m.get("mountPath") == SHM_PATH for m in mounts):
        _add_volume(spec, {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}})
        mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})

    vllm = _is_vllm(container)
    if ctx.cache is not None:
        if not kserve:  # KServe mounts the PVC itself from spec.model.uri (pvc://<claim>) at /mnt/models
            if any(m.get("mountPath") == CACHE_PATH for m in mounts):
                raise GpufleetError(f"{where}: mounts {CACHE_PATH} itself, where the model cache is mounted")
            _add_volume(
                spec,
                {"name": CACHE_VOLUME, "persistentVolumeClaim": {"claimName": ctx.cache.claim_name, "readOnly": True}},
            )
            mounts.append({"name": CACHE_VOLUME, "mountPath": CACHE_PATH, "readOnly": True})
        user_offline = _has_env(container, "HF_HUB_OFFLINE")
        _set_env(container, {"name": "HF_HUB_OFFLINE", "value": "1"}, override=False)
        if vllm and not kserve and (serving or not ray):
            _point_vllm_at_cache(ctx, container, where, check_hub_model=not user_offline)
    if kserve and not container.get("command"):
        _drop_model_args(container)
        if serving and container.get("args") and _flag_value(_tokens(container), "--served-model-name") is None:
            model_name = _kserve_model(ctx, engine)["name"]
            container["args"] = [f"--served-model-name={model_name}", *container["args"]]
    if not mounts:
        container.pop("volumeMounts")

    if gang:
        _set_env(container, {"name": ENV_LEADER_ADDRESS, "value": f"$({LWS_LEADER_ADDRESS_ENV})"}, override=True)
        _set_env(
            container,
            {
                "name": ENV_RANK,
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{LWS_WORKER_INDEX_LABEL}']"}},
            },
            override=True,
        )
    if ray:
        _wrap_ray(container, leader=member.role == "Leader", vllm=vllm, where=where)

    if serving and not kserve:
        ports = container.setdefault("ports", [])
        if not any(p.get("containerPort") == dep.port for p in ports):
            port: dict[str, Any] = {"containerPort": dep.port, "protocol": "TCP"}
            if not any(p.get("name") == PORT_NAME for p in ports):
                port = {"name": PORT_NAME, **port}
            ports.append(port)
        if "readinessProbe" not in container:
            handler = {"httpGet": {"path": "/health", "port": dep.port}} if vllm else {"tcpSocket": {"port": dep.port}}
            container["readinessProbe"] = {**handler, "periodSeconds": 10, "failureThreshold": 3}

    spec["containers"] = [_tidy_container(c) for c in spec["containers"]]
    managed = _managed(ctx, replica, pool=mp.pool, engine=engine.name)
    managed[LABEL_ROLE] = member.role.lower()
    if serving:
        managed[LABEL_ENDPOINT] = "true"
    user_labels = _label_map(user_meta.get("labels"), f"{where} metadata.labels", check_label_syntax=True)
    meta: dict[str, Any] = {k: v for k, v in user_meta.items() if k not in ("labels", "name", "namespace")}
    meta["labels"] = _labels(ctx, managed, user_labels)
    return meta, spec


_CONTAINER_KEY_ORDER = ("name", "image", "command", "args")


def _tidy_container(container: dict[str, Any]) -> dict[str, Any]:
    """Same content, readable order: name, image, command, args first (render output is read by people too)."""
    head = {k: container[k] for k in _CONTAINER_KEY_ORDER if k in container}
    return {**head, **{k: v for k, v in container.items() if k not in head}}


def _point_vllm_at_cache(ctx: _Context, container: dict[str, Any], where: str, *, check_hub_model: bool) -> None:
    """Make vLLM load the mounted cache: ``--model=/mnt/models`` unless the container names a model itself."""
    if ctx.cache is None:
        raise AssertionError("vLLM pointed at a cache that is not mounted")  # pragma: no cover
    tokens = _tokens(container)
    named = _model_arg(container, tokens)
    repo = ctx.cache.source.hugging_face.repo if ctx.cache.source.hugging_face else None
    if named is not None:
        if named.startswith("/"):
            return  # a local path (the cache or a directory in it)
        if named == repo:
            if not _replace_model(container, repo):
                raise GpufleetError(
                    f"{where}: names the cached model {repo!r} in a form that cannot be rewritten; "
                    f"use --model={CACHE_PATH} (the cache is mounted there)"
                )
            if _flag_value(tokens, "--served-model-name") is None:
                container["args"] = [*(container.get("args") or []), f"--served-model-name={repo}"]
            return
        if check_hub_model:
            raise GpufleetError(
                f"{where}: loads model {named!r} from the hub, but cache {ctx.cache.name!r} is mounted at {CACHE_PATH} "
                f"with HF_HUB_OFFLINE=1; drop the model argument (the cache is used), or set HF_HUB_OFFLINE yourself"
            )
        return
    if _is_shell(container):
        raise GpufleetError(
            f"{where}: runs a shell script, so --model={CACHE_PATH} cannot be added for the mounted cache "
            f"{ctx.cache.name!r}; pass it to vllm in the script"
        )
    args = [*(container.get("args") or []), f"--model={CACHE_PATH}"]
    if _flag_value(tokens, "--served-model-name") is None:
        args.append(f"--served-model-name={repo or ctx.cache.name}")
    container["args"] = args


def _replace_model(container: dict[str, Any], repo: str) -> bool:
    """Point a container that names the cached hub model at the mount instead; False when it cannot be done."""
    command = [str(c) for c in container.get("command") or []]
    seq = [*command, *(str(a) for a in container.get("args") or [])]
    done = False
    for i, item in enumerate(seq):
        after_flag = i > 0 and seq[i - 1] in ("--model", "serve")
        entrypoint_positional = not command and i == 0  # the vllm image's entrypoint is `vllm serve`
        if item == f"--model={repo}":
            seq[i] = f"--model={CACHE_PATH}"
            done = True
        elif item == repo and (after_flag or entrypoint_positional):
            seq[i] = CACHE_PATH
            done = True
    if done:
        if command:
            container["command"] = seq[: len(command)]
        if len(seq) > len(command):
            container["args"] = seq[len(command) :]
    return done


_RAY_WAIT = (
    'until python3 -c \'import os, ray; ray.init(address="auto", logging_level="ERROR"); '
    'raise SystemExit(sum(1 for n in ray.nodes() if n["Alive"]) < int(os.environ.get("LWS_GROUP_SIZE", "1")))\' '
    '>/dev/null 2>&1; do echo "gpufleet: waiting for the Ray workers to join"; sleep 5; done'
)


def _wrap_ray(container: dict[str, Any], *, leader: bool, vllm: bool, where: str) -> None:
    """Start Ray under the container's own command (which keeps running as the container's main process)."""
    command = [str(c) for c in container.get("command") or []]
    args = [str(a) for a in container.get("args") or []]
    if leader:
        if vllm and _flag_value(_tokens(container), "--distributed-executor-backend") is None:
            args.append("--distributed-executor-backend=ray")
        if not command:
            if not vllm:
                raise GpufleetError(
                    f"{where}: ray: true needs an explicit command on the engine container (the image's entrypoint "
                    "is unknown, so it cannot be started after Ray)"
                )
            command = ["vllm", "serve"]  # the vllm/vllm-openai image's entrypoint
        script = f'ray start --head --port={RAY_PORT} --disable-usage-stats && {_RAY_WAIT} && exec "$0" "$@"'
        container["command"] = ["/bin/sh", "-c", script]
        container["args"] = [*command, *args]
        return
    join = f"ray start --address=$({LWS_LEADER_ADDRESS_ENV}):{RAY_PORT}"
    if command:
        script = f'until {join}; do sleep 5; done && exec "$0" "$@"'
        container["command"] = ["/bin/sh", "-c", script]
        container["args"] = [*command, *args]
    else:
        container["command"] = ["/bin/sh", "-c", f"until {join} --block; do sleep 5; done"]
        container.pop("args", None)
