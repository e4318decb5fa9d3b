# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
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
3. a Service selecting the replica's serving pods (Standalone and Leader) on the engine port; it carries the replica's
   placement (``gpufleet.io/placement``), which later runs read back.

Then, once per deployment on a cluster that holds replicas of it, the model endpoint: a Service named after the
deployment selecting the serving pods of every replica there, and an HTTPRoute to it (``/<namespace>/<deployment>/``
rewritten to ``/``, no request timeout) when a gateway is configured. Clients use these; they do not change when
replicas move.

Every serving pod is pinned to its pool (``nodeSelector: {gpufleet.io/pool: <pool>}``), claims its devices through
``resourceClaims`` + the engine container's ``resources.claims`` (``nvidia.com/gpu`` limits and requests are removed),
tolerates ``nvidia.com/gpu:NoSchedule`` plus the deployment's tolerations, gets a memory-backed ``/dev/shm`` (size
limit ``shm_size``), the model cache read-only at ``/mnt/models`` (vLLM pointed at it; an init container waits for the
cache's completion manifest) and startup, liveness and readiness probes (``health``). The engine container is a
template's first container.

Every object and pod template carries the managed labels (``MANAGED_LABEL_KEYS``); they cannot be overridden by a
user's template labels or the ``labels`` option (managed values silently win). The fleet label
(``gpufleet.io/fleet``, the ``fleet`` option) is on every object's own metadata only: never on a pod template or in a
ResourceClaimTemplate's ``spec`` (a fleet that gets its name would otherwise restart every replica, or be refused: a
claim template's spec is immutable). Names are DNS-1035 labels, at most 63
characters (fewer where a controller derives longer names from them), truncated with a short hash when too long.

Errors are :class:`GpufleetError` (:class:`FleetValidationError` for malformed input), never anything else.
"""

from __future__ import annotations

import copy
import math
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils import pd_instances
from ansible_collections.gpufleet.serving.plugins.module_utils.cache_image import image_sub_path, image_volume
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ANNOTATION_PLACEMENT,
    COMPONENT_SERVING,
    GPU_RESOURCE,
    GPU_TOLERATION,
    LABEL_CLUSTER,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_ENDPOINT,
    LABEL_ENGINE,
    LABEL_FLEET,
    LABEL_MANAGED_BY,
    LABEL_POOL,
    LABEL_REPLICA,
    LABEL_REPLICA_INDEX,
    LABEL_ROLE,
    MANAGED_BY,
    MANAGED_LABEL_KEYS,
    NODE_POOL_LABEL,
    FleetIdentity,
    k8s_name,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.dra import claims
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import deployment_reference_errors
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    Engine,
    ExtraMetadata,
    GatewayRef,
    Member,
    ModelCache,
    ModelDeployment,
    parse,
    require_pydantic,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import (
    EngineRecord,
    MemberRecord,
    ReplicaRecord,
    check_records,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render import caches as cache_objects
from ansible_collections.gpufleet.serving.plugins.module_utils.render import device_alternatives
from ansible_collections.gpufleet.serving.plugins.module_utils.render import pd as pd_render
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.base import (
    Backend,
    PodInput,
    ReplicaInput,
    WorkloadInput,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.leaderworkerset import (
    LWS_LEADER_ADDRESS_ENV,
    LWS_WORKER_INDEX_LABEL,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.registry import (
    backends_of,
    replica_backend,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.containers import (
    container_tokens,
    engine_container,
    flag_value,
    has_env,
    health_path,
    is_shell,
    is_vllm,
    model_arg,
    set_env,
)

# --------------------------------------------------------------------------------------------------------------------
# Constants of the pods every backend shares (labels, annotations and name rules live in contract.py)
# --------------------------------------------------------------------------------------------------------------------

CLAIM_NAME = "gpufleet-devices"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"
CACHE_VOLUME = "gpufleet-model-cache"
CACHE_PATH = "/mnt/models"
PORT_NAME = "http"
RAY_PORT = 6379
ENV_LEADER_ADDRESS = "GPUFLEET_LEADER_ADDRESS"
ENV_RANK = "GPUFLEET_RANK"
#: The init container that holds a serving pod until its model cache is hydrated (the completion manifest exists).
CACHE_WAIT_CONTAINER = "gpufleet-wait-for-cache"
#: The completion manifest as the serving pods see it: the hydration Job mounts the volume at its own MOUNT_PATH.
CACHE_MANIFEST = f"{CACHE_PATH}/{posixpath.relpath(cache_objects.MANIFEST_PATH, cache_objects.MOUNT_PATH)}"
CACHE_WAIT_INTERVAL = 10
CACHE_WAIT_SCRIPT = (
    'until [ -f "$1" ]; do echo "gpufleet: waiting for model cache $0: $1 is written when its hydration Job '
    f'completes"; sleep {CACHE_WAIT_INTERVAL}; done; echo "gpufleet: model cache $0 is hydrated"'
)
CACHE_WAIT_RESOURCES: dict[str, Any] = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}
#: How long a model may load (startupProbe) unless ``health.startup_timeout`` says otherwise: a gang's leader also
#: waits for its workers (and Ray) before it loads its share.
DEFAULT_STARTUP_SECONDS = 1800
GANG_STARTUP_SECONDS = 3600
#: Consecutive failed readiness checks that take a pod out of its Services.
READINESS_FAILURES = 3


@dataclass
class _Context:
    dep: ModelDeployment
    cluster: str
    cache: ModelCache | None
    gateway: GatewayRef | None
    extra_labels: dict[str, str] = field(default_factory=dict)
    extra_annotations: dict[str, str] = field(default_factory=dict)
    #: The fleet's name (``gpufleet.io/fleet`` on every object's metadata), or None.
    fleet: str | None = None


@dataclass(frozen=True)
class RenderOptions:
    """What a render takes besides the deployment, its records, the cluster and the cache (all validated)."""

    gateway: GatewayRef | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    #: ``gpufleet_fleet_name``: the ``gpufleet.io/fleet`` label of every object (not of pod templates).
    fleet: str | None = None


_Pod = tuple[dict[str, Any], dict[str, Any]]  # (pod metadata, pod spec)


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
    fleet: Any = None,
) -> list[dict[str, Any]]:
    """The Kubernetes objects serving ``deployment``'s replicas placed on ``cluster`` (see the module docstring).

    ``replicas``: the placement's replicas (``replica_placement``'s ``replicas``); replicas on other clusters are
    validated and ignored. ``deployment``: one ``gpufleet_model_deployments`` entry. ``caches``: the
    ``gpufleet_model_caches`` list (needed when the deployment names a cache). ``gateway``: a default
    ``{name, namespace, section_name}`` for the HTTPRoute, used when the deployment sets no ``gateway``. ``labels`` /
    ``annotations``: extra metadata for every object (labels also on pod templates); managed labels win. ``fleet``:
    the fleet's name (``gpufleet_fleet_name``), the ``gpufleet.io/fleet`` label of every object.
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
    extra: ExtraMetadata = parse(
        ExtraMetadata,
        {"labels": to_plain(labels, "labels") or {}, "annotations": to_plain(annotations, "annotations") or {}},
        "",
    )
    if fleet is not None:
        fleet = FleetIdentity.parse(to_plain(fleet, "fleet"), name_var="fleet").name
    options = RenderOptions(
        gateway=None if gateway is None else parse(GatewayRef, to_plain(gateway, "gateway"), "gateway"),
        labels=extra.labels,
        annotations=extra.annotations,
        fleet=fleet,
    )
    records = ReplicaRecord.parse_list(replicas, "replicas")
    from ansible_collections.gpufleet.serving.plugins.module_utils.serving_extensions import extend_objects

    return extend_objects(dep, records, cluster, render_replicas(dep, records, cluster, cache, options))


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
    check_render(dep, records)
    return render_checked(dep, [r for r in records if r.cluster == cluster], cluster, cache, options)


def check_render(dep: ModelDeployment, records: list[ReplicaRecord]) -> None:
    """What a render checks before it writes anything: every record fits ``dep``, names and identities are unique
    (``check_records``), and the deployment suits its backends."""
    check_records(records, dep)
    replica_backend(dep).check_roles(dep)
    for backend in backends_of(dep):
        backend.validate(dep)


def render_checked(
    dep: ModelDeployment,
    records: list[ReplicaRecord],
    cluster: str,
    cache: ModelCache | None,
    options: RenderOptions | None = None,
) -> list[dict[str, Any]]:
    """:func:`render_replicas` over records :func:`check_render` already checked (every record of the deployment at
    once): a fleet renders each cluster's records without checking the deployment's every record again for each
    cluster (``fleet.deploy.render_deployment``)."""
    options = options or RenderOptions()
    ctx = _Context(
        dep=dep,
        cluster=cluster,
        cache=cache,
        gateway=dep.gateway or options.gateway,
        extra_labels=dict(options.labels),
        extra_annotations=dict(options.annotations),
        fleet=options.fleet,
    )
    mine = sorted((r for r in records if r.cluster == cluster), key=lambda r: (r.index, r.name or ""))
    objects: list[dict[str, Any]] = []
    for replica in mine:
        objects.extend(_replica_objects(ctx, replica.ordered_like(dep)))
    if mine:
        objects.extend(_model_endpoint(ctx))
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


# --------------------------------------------------------------------------------------------------------------------
# Per replica
# --------------------------------------------------------------------------------------------------------------------


def _managed(ctx: _Context, replica: ReplicaRecord, *, pool: str, engine: str | None = None) -> dict[str, str]:
    labels = {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_COMPONENT: COMPONENT_SERVING,
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
    if ctx.fleet is not None:
        # The object's own labels only: the caller's dict is also a pod template's or a claim template's spec labels.
        labels = {**labels, LABEL_FLEET: ctx.fleet}
    meta: dict[str, Any] = {"name": name, "namespace": ctx.dep.namespace, "labels": labels}
    merged = {**ctx.extra_annotations, **(annotations or {})}
    if merged:
        meta["annotations"] = merged
    return meta


class _ReplicaRender:
    """The renderer's side of a replica-level backend (``backends.base.ReplicaRenderer``) for one replica."""

    def __init__(self, ctx: _Context, replica: ReplicaRecord) -> None:
        self.ctx = ctx
        self.replica = replica

    def engine_objects(self, engine: Engine, placed: EngineRecord, backend: Backend) -> list[dict[str, Any]]:
        return _engine_objects(self.ctx, self.replica, engine, placed, backend)

    def pods(self, engine: Engine, placed: EngineRecord, backend: Backend, *, claim_refs: bool) -> dict[str, _Pod]:
        pods: dict[str, _Pod] = {}
        for member, mp in zip(engine.members, placed.members, strict=True):
            rct = _claim_template_name(self.replica, engine, member) if claim_refs and mp.claimed_requests else None
            pods[member.role] = _pod(self.ctx, self.replica, engine, member, mp, rct, backend)
        return pods

    def claim_templates(self, engine: Engine, placed: EngineRecord) -> list[dict[str, Any]]:
        return [
            _claim_template(self.ctx, self.replica, engine, mp, _claim_template_name(self.replica, engine, member))
            for member, mp in zip(engine.members, placed.members, strict=True)
            if mp.claimed_requests
        ]

    def claim_spec(self, engine: Engine, placed: EngineRecord, role: str) -> dict[str, Any] | None:
        mp = placed.member(role)
        if not mp.claimed_requests:
            return None
        spec: dict[str, Any] = _claim_template(self.ctx, self.replica, engine, mp, "")["spec"]
        return spec

    def metadata(self, name: str, *, engine: str | None = None, pool: str) -> dict[str, Any]:
        return _metadata(self.ctx, name, _labels(self.ctx, _managed(self.ctx, self.replica, pool=pool, engine=engine)))

    def object_name(self, suffix: str, max_len: int = 63) -> str:
        return k8s_name(f"{_name(self.replica)}-{suffix}", max_len)


def _claim_template_name(replica: ReplicaRecord, engine: Engine, member: Member) -> str:
    return k8s_name(f"{_name(replica)}-{engine.name}-{member.role.lower()}")


def _replica_objects(ctx: _Context, replica: ReplicaRecord) -> list[dict[str, Any]]:
    """``replica`` is ordered like the deployment: its engines and members zip with the deployment's. Its backend
    renders every engine at once (design.md §14); then the replica's Service."""
    objects = replica_backend(ctx.dep).objects(
        ReplicaInput(
            dep=ctx.dep,
            cache=ctx.cache,
            replica=_name(replica),
            engines=list(zip(ctx.dep.engines, replica.engines, strict=True)),
            renderer=_ReplicaRender(ctx, replica),
        )
    )
    first_pool = replica.engines[0].members[0].pool
    labels = _labels(ctx, _managed(ctx, replica, pool=first_pool))
    objects.append(_service(ctx, replica, labels))
    return objects


def _backend_selector(dep: ModelDeployment) -> dict[str, str]:
    """What the backends add to a Service's selector so it selects their serving pods only (KServe gang leaders)."""
    return replica_backend(dep).routing(dep)


def _name(replica: ReplicaRecord) -> str:
    """A rendered record has a name (``check_against`` requires it)."""
    return replica.name or ""


def _record_for(ctx: _Context, replica: ReplicaRecord) -> ReplicaRecord:
    """The record as this render persists it: the deployment's namespace and the cluster rendered for."""
    return replica.model_copy(update={"cluster": ctx.cluster, "namespace": ctx.dep.namespace})


def _service(ctx: _Context, replica: ReplicaRecord, labels: dict[str, str]) -> dict[str, Any]:
    """The replica's own Service: its serving pods, and the replica's placement (``gpufleet.io/placement``) that later
    runs read back. Clients use the model endpoint (:func:`_model_endpoint`)."""
    selector = {LABEL_DEPLOYMENT: ctx.dep.name, LABEL_REPLICA: _name(replica), LABEL_ENDPOINT: "true"}
    selector.update(_backend_selector(ctx.dep))
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


# --------------------------------------------------------------------------------------------------------------------
# The model endpoint: per deployment, per cluster that holds replicas of it
# --------------------------------------------------------------------------------------------------------------------


def model_endpoint_name(deployment: str) -> str:
    """The name of a deployment's model Service and HTTPRoute on every cluster that holds replicas of it: the
    deployment's own name (a DNS label already), so clients address ``<deployment>.<namespace>.svc`` whichever replicas
    serve. Replica objects are ``<deployment>-<5 hex>[-...]``: never this name."""
    return k8s_name(deployment)


def model_endpoint_path(namespace: str, deployment: str) -> str:
    """The path prefix of a deployment's HTTPRoute on a cluster's gateway (rewritten to ``/`` for the engine)."""
    return f"/{namespace}/{deployment}/"


def _model_endpoint(ctx: _Context) -> list[dict[str, Any]]:
    """The model's endpoint on this cluster: one Service selecting the serving pods of every replica of the deployment
    here (whatever replicas come and go), and an HTTPRoute to it when a gateway is configured. Owned and labelled like
    every serving object (no replica labels: it outlives each replica), so pruning removes it from a cluster that no
    longer holds replicas of the deployment."""
    dep = ctx.dep
    labels = _labels(
        ctx,
        {
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_COMPONENT: COMPONENT_SERVING,
            LABEL_DEPLOYMENT: dep.name,
            LABEL_CLUSTER: ctx.cluster,
        },
    )
    name = model_endpoint_name(dep.name)
    selector = {LABEL_DEPLOYMENT: dep.name, LABEL_ENDPOINT: "true", **_backend_selector(dep)}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(ctx, name, labels),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": PORT_NAME, "port": dep.port, "targetPort": dep.port, "protocol": "TCP"}],
        },
    }
    out = [service]
    if dep.ratio is not None and replica_backend(dep).pd_sidecar:  # P/D instances: the llm-d router's config (§14)
        out.append(pd_render.router_config_map(dep, {LABEL_DEPLOYMENT: dep.name}, lambda n: _metadata(ctx, n, labels)))
    if dep.routing.inference_pool:  # an InferencePool over the same pods, with its endpoint picker (docs/routing.md)
        from ansible_collections.gpufleet.serving.plugins.module_utils import inference_pool
        from ansible_collections.gpufleet.serving.plugins.module_utils.serving_stack import EPP_IMAGE

        out.extend(
            inference_pool.pool_objects(
                dep.name,
                dep.namespace,
                dep.port,
                selector,
                lambda n: _metadata(ctx, n, labels),
                image=dep.routing.epp_image or EPP_IMAGE,
                config_map=pd_instances.router_config_name(dep.name) if dep.ratio is not None else None,
            )
        )
    if ctx.gateway is None:
        return out
    route = _http_route(ctx, name, labels)
    if dep.routing.inference_pool:
        from ansible_collections.gpufleet.serving.plugins.module_utils.inference_pool import backend_ref

        route["spec"]["rules"][0]["backendRefs"] = [backend_ref(dep.name)]
    return [*out, route]


def _http_route(ctx: _Context, service: str, labels: dict[str, str]) -> dict[str, Any]:
    gw = ctx.gateway
    if gw is None:
        raise AssertionError("HTTPRoute rendered without a gateway")  # pragma: no cover
    parent: dict[str, Any] = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gw.name}
    if gw.namespace:
        parent["namespace"] = gw.namespace
    if gw.section_name:
        parent["sectionName"] = gw.section_name
    path = model_endpoint_path(ctx.dep.namespace, ctx.dep.name)
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": _metadata(ctx, service, labels),
        "spec": {
            "parentRefs": [parent],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                    "filters": [
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
                        }
                    ],
                    "backendRefs": [{"name": service, "port": ctx.dep.port}],
                    "timeouts": {"request": "0s"},
                }
            ],
        },
    }


# --------------------------------------------------------------------------------------------------------------------
# Per engine
# --------------------------------------------------------------------------------------------------------------------


def _engine_objects(
    ctx: _Context, replica: ReplicaRecord, engine: Engine, placed: EngineRecord, backend: Backend
) -> list[dict[str, Any]]:
    workload = k8s_name(f"{_name(replica)}-{engine.name}", backend.max_name)
    objects: list[dict[str, Any]] = []
    pods: dict[str, _Pod] = {}
    pool = placed.members[0].pool
    for member, mp in zip(engine.members, placed.members, strict=True):
        rct = None
        if mp.claimed_requests:
            rct = _claim_template_name(replica, engine, member)
            objects.append(_claim_template(ctx, replica, engine, mp, rct))
        pods[member.role] = _pod(ctx, replica, engine, member, mp, rct, backend)
    labels = _labels(ctx, _managed(ctx, replica, pool=pool, engine=engine.name))
    objects.append(
        backend.workload(
            WorkloadInput(
                dep=ctx.dep,
                cache=ctx.cache,
                replica=_name(replica),
                engine=engine,
                placed=placed,
                metadata=_metadata(ctx, workload, labels),
                pods=pods,
            )
        )
    )
    return objects


def _claim_template(
    ctx: _Context, replica: ReplicaRecord, engine: Engine, mp: MemberRecord, name: str
) -> dict[str, Any]:
    devices = claim_devices([r.to_dict() for r in mp.claimed_requests], [c.to_dict() for c in mp.constraints])
    managed = _managed(ctx, replica, pool=mp.pool, engine=engine.name)
    managed[LABEL_ROLE] = mp.role.lower()
    labels = _labels(ctx, managed)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": _metadata(ctx, name, labels),
        "spec": {"metadata": {"labels": dict(labels)}, "spec": {"devices": devices}},
    }


def claim_devices(device_requests: list[Mapping[str, Any]], constraints: list[Mapping[str, Any]]) -> dict[str, Any]:
    """A ResourceClaim's ``spec.devices`` from a member record's claimed ``device_requests`` and ``constraints``
    (design.md §3a, §12): :func:`dra.claims.to_k8s`, the one spelling of a resolved request."""
    return claims.to_k8s(device_requests, constraints)


# --------------------------------------------------------------------------------------------------------------------
# Pods
# --------------------------------------------------------------------------------------------------------------------


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
    backend: Backend,
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
    serving = member.role in ("Standalone", "Leader")
    gang = engine.is_gang
    ray = dep.ray and gang and backend.runs_ray

    _strip_gpu_resources(spec)
    container = engine_container(spec)
    # The first_available alternative placement chose for this replica reaches the engine (args, env, TP; §14).
    chosen_labels = device_alternatives.apply(container, member, mp, where)
    # A prefill/decode role's engine: the KV connector, NIXL's address, the llm-d role label (§14).
    chosen_labels.update(pd_render.adapt_pod(dep, engine, member, container, spec, where, sidecar=backend.pd_sidecar))

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
        _add_volume(spec, {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": dep.shm_size}})
        mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})

    vllm = is_vllm(container)
    if ctx.cache is not None:
        if backend.mounts_cache:  # e.g. KServe mounts the PVC itself from spec.model.uri (pvc://<claim>)
            if any(m.get("mountPath") == CACHE_PATH for m in mounts):
                raise GpufleetError(f"{where}: mounts {CACHE_PATH} itself, where the model cache is mounted")
            if ctx.cache.image_volume:  # source.oci: the model image itself, pulled by the kubelet (cache_image.py)
                _add_volume(spec, image_volume(CACHE_VOLUME, ctx.cache))
            else:
                _add_volume(
                    spec,
                    {
                        "name": CACHE_VOLUME,
                        "persistentVolumeClaim": {"claimName": ctx.cache.claim_name, "readOnly": True},
                    },
                )
            mount = {"name": CACHE_VOLUME, "mountPath": CACHE_PATH, "readOnly": True}
            mounts.append({**mount, **image_sub_path(ctx.cache)})
            # An image volume is complete when the pod starts: there is no hydration to wait for.
            if ctx.cache.storage.backend == "pvc" and not ctx.cache.image_volume and dep.cache_wait.enabled:
                _wait_for_cache(ctx, spec)
        user_offline = has_env(container, "HF_HUB_OFFLINE")
        set_env(container, {"name": "HF_HUB_OFFLINE", "value": "1"}, override=False)
        if vllm and backend.mounts_cache and (serving or not ray):
            _point_vllm_at_cache(ctx, container, where, check_hub_model=not user_offline)
    backend.adapt_pod(PodInput(dep=dep, cache=ctx.cache, engine=engine, member=member, where=where), container, spec)
    if not mounts:
        container.pop("volumeMounts")

    if gang:
        set_env(container, {"name": ENV_LEADER_ADDRESS, "value": f"$({LWS_LEADER_ADDRESS_ENV})"}, override=True)
        set_env(
            container,
            {
                "name": ENV_RANK,
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{LWS_WORKER_INDEX_LABEL}']"}},
            },
            override=True,
        )
    if ray:
        _wrap_ray(container, leader=member.role == "Leader", vllm=vllm, where=where)

    if serving and backend.exposes_port:
        ports = container.setdefault("ports", [])
        if not any(p.get("containerPort") == dep.port for p in ports):
            port: dict[str, Any] = {"containerPort": dep.port, "protocol": "TCP"}
            if not any(p.get("name") == PORT_NAME for p in ports):
                port = {"name": PORT_NAME, **port}
            ports.append(port)
    if serving:
        for key, probe in _probes(dep, engine, container, backend).items():
            container.setdefault(key, probe)  # a probe the template sets itself wins

    if backend.pd_sidecar:  # decode pods of a P/D instance only
        pd_render.add_routing_sidecar(dep, engine, member, spec)
    spec["containers"] = [_tidy_container(c) for c in spec["containers"]]
    managed = _managed(ctx, replica, pool=mp.pool, engine=engine.name)
    managed[LABEL_ROLE] = member.role.lower()
    if serving and pd_render.serves_clients(engine, member):
        managed[LABEL_ENDPOINT] = "true"
    managed.update(chosen_labels)
    user_labels = parse(ExtraMetadata, {"labels": user_meta.get("labels") or {}}, f"{where} metadata").labels
    meta: dict[str, Any] = {k: v for k, v in user_meta.items() if k not in ("labels", "name", "namespace")}
    meta["labels"] = _labels(ctx, managed, user_labels)
    return meta, spec


def _probes(dep: ModelDeployment, engine: Engine, container: dict[str, Any], backend: Backend) -> dict[str, Any]:
    """The engine container's probes (``health``): a startupProbe that gives the model ``startup_timeout`` to load
    (liveness and readiness checks only start once it succeeded), a livenessProbe that restarts an engine failing for
    ``liveness_timeout``, and a readinessProbe (backends whose controller brings none) that takes the pod out of its
    Services while it fails. HTTP ``GET <path>`` where the engine has a health endpoint, else a TCP check."""
    health = dep.health
    path = health.path or health_path(container) or backend.health_path
    startup = health.startup_timeout or (GANG_STARTUP_SECONDS if engine.is_gang else DEFAULT_STARTUP_SECONDS)
    failures = {
        "startupProbe": math.ceil(startup / health.period_seconds),
        "livenessProbe": math.ceil(health.liveness_timeout / health.period_seconds),
    }
    if backend.exposes_port:  # KServe's presets bring their own readiness probe (and port)
        failures["readinessProbe"] = READINESS_FAILURES
    return {
        key: {
            **({"httpGet": {"path": path, "port": dep.port}} if path else {"tcpSocket": {"port": dep.port}}),
            "periodSeconds": health.period_seconds,
            "timeoutSeconds": health.timeout_seconds,
            "failureThreshold": threshold,
        }
        for key, threshold in failures.items()
    }


def _wait_for_cache(ctx: _Context, spec: dict[str, Any]) -> None:
    """Hold the pod in an init container until the cache's completion manifest is on the volume: an unordered sync
    (GitOps) may start serving pods before the hydration Job finished, and an engine started on a half-written cache
    would crash-loop. The wait has no deadline: the pod stays ``Init:0/1`` (and keeps its devices) until the Job
    completes; its log says what it waits for."""
    if ctx.cache is None:
        raise AssertionError("waiting for a cache that is not mounted")  # pragma: no cover
    inits = spec.setdefault("initContainers", [])
    if any(c.get("name") == CACHE_WAIT_CONTAINER for c in inits):
        return  # the template brings its own
    inits.insert(
        0,
        {
            "name": CACHE_WAIT_CONTAINER,
            "image": ctx.dep.cache_wait.image or cache_objects.DEFAULT_IMAGE,
            "command": ["/bin/sh", "-c", CACHE_WAIT_SCRIPT, ctx.cache.name, CACHE_MANIFEST],
            "resources": copy.deepcopy(CACHE_WAIT_RESOURCES),
            "securityContext": copy.deepcopy(cache_objects.DEFAULT_SECURITY_CONTEXT),
            "volumeMounts": [{"name": CACHE_VOLUME, "mountPath": CACHE_PATH, "readOnly": True}],
        },
    )


_CONTAINER_KEY_ORDER = ("name", "image", "command", "args")


def _tidy_container(container: dict[str, Any]) -> dict[str, Any]:
    """Same content, readable order: name, image, command, args first (render output is read by people too)."""
    head = {k: container[k] for k in _CONTAINER_KEY_ORDER if k in container}
    return {**head, **{k: v for k, v in container.items() if k not in head}}


def _point_vllm_at_cache(ctx: _Context, container: dict[str, Any], where: str, *, check_hub_model: bool) -> None:
    """Make vLLM load the mounted cache: ``--model=/mnt/models`` unless the container names a model itself."""
    if ctx.cache is None:
        raise AssertionError("vLLM pointed at a cache that is not mounted")  # pragma: no cover
    if ctx.cache.layout == "hf":
        _point_vllm_at_hf_cache(ctx.cache, container, where, check_hub_model=check_hub_model)
        return
    tokens = container_tokens(container)
    named = model_arg(container, tokens)
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
            if flag_value(tokens, "--served-model-name") is None:
                container["args"] = [*(container.get("args") or []), f"--served-model-name={repo}"]
            return
        if check_hub_model:
            raise GpufleetError(
                f"{where}: loads model {named!r} from the hub, but cache {ctx.cache.name!r} is mounted at {CACHE_PATH} "
                f"with HF_HUB_OFFLINE=1; drop the model argument (the cache is used), or set HF_HUB_OFFLINE yourself"
            )
        return
    if is_shell(container):
        raise GpufleetError(
            f"{where}: runs a shell script, so --model={CACHE_PATH} cannot be added for the mounted cache "
            f"{ctx.cache.name!r}; pass it to vllm in the script"
        )
    args = [*(container.get("args") or []), f"--model={CACHE_PATH}"]
    if flag_value(tokens, "--served-model-name") is None:
        args.append(f"--served-model-name={repo or ctx.cache.name}")
    container["args"] = args


def _point_vllm_at_hf_cache(cache: ModelCache, container: dict[str, Any], where: str, *, check_hub_model: bool) -> None:
    """A cache in the Hugging Face layout (``layout: hf``): the engine loads ``--model ORG/NAME --revision REV`` from
    ``HF_HUB_CACHE`` (the mount), offline (HF_HUB_OFFLINE=1 is set: the hydrator wrote the snapshot's manifest only
    once every blob was verified) - one engine command that works cached and uncached."""
    hub = cache.source.hugging_face
    if hub is None:
        raise AssertionError("layout hf without a hugging_face source")  # pragma: no cover - the model refuses it
    set_env(container, {"name": "HF_HUB_CACHE", "value": CACHE_PATH}, override=False)
    tokens = container_tokens(container)
    named = model_arg(container, tokens)
    if named is not None and named != hub.repo:
        if named.startswith("/") or not check_hub_model:
            return  # a local path, or HF_HUB_OFFLINE set by the template itself
        raise GpufleetError(
            f"{where}: loads model {named!r}, but cache {cache.name!r} holds {hub.repo!r} (Hugging Face layout, "
            f"HF_HUB_OFFLINE=1); drop the model argument (the cache is used), or set HF_HUB_OFFLINE yourself"
        )
    if named is None and is_shell(container):
        raise GpufleetError(
            f"{where}: runs a shell script, so --model={hub.repo} cannot be added for the mounted cache "
            f"{cache.name!r}; pass it (and --revision={hub.revision}) to vllm in the script"
        )
    args = list(container.get("args") or [])
    if named is None:
        args.append(f"--model={hub.repo}")
    if flag_value(tokens, "--revision") is None:
        args.append(f"--revision={hub.revision}")
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
        if vllm and flag_value(container_tokens(container), "--distributed-executor-backend") is None:
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
