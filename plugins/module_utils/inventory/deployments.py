# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Model deployments: DRA requests (sub-requests, alternatives, constraints, node selectors), engines and members,
rollout / disruption / health / routing options, prefill-decode, adapters, external endpoints, autoscaling and
``ModelDeployment``.

Part of the fleet model; ``models.py`` is the façade other code imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from ansible_collections.gpufleet.serving.plugins.module_utils.dra.api import (
    DEVICE_TOLERATIONS_MAX,
    CapacityRequirements,
    DeviceToleration,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.caches import (
    CacheSource,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.classes import (
    Toleration,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.clusters import (
    QueueRef,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.common import (
    CLAIM_DEVICES_MAX,
    DEVICE_CONSTRAINTS_MAX,
    DEVICE_REQUESTS_MAX,
    DEVICE_SELECTORS_MAX,
    FIRST_AVAILABLE_MAX,
    QUALIFIED_DOMAIN_MAX,
    QUALIFIED_NAME_RE,
    AfterValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    _check_source_url,
    _no_duplicates,
    _Strict,
    annotation_errors,
    check_dns_label,
    check_dns_subdomain,
    check_k8s_name,
    check_quantity,
    field_validator,
    model_validator,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.redact import (
    describe,
)

# --------------------------------------------------------------------------------------------------------------------
# Model deployments (design.md §3)
# --------------------------------------------------------------------------------------------------------------------


class Selector(_Strict):
    cel: str = Field(min_length=1)


class DeviceSubRequest(_Strict):
    """What a ResourceClaim ``exactly`` request (or one ``firstAvailable`` alternative) asks for (design.md §3a)."""

    name: str
    device_class_name: str | None = None
    allocation_mode: Literal["ExactCount", "All"] = "ExactCount"
    # Kubernetes only requires count > 0; a claim over its 32-device limit is NodeSelector's check, and an alternative
    # over it is skipped by the allocator, as upstream's.
    count: StrictInt | None = Field(default=None, ge=1)
    selectors: list[Selector] = Field(default_factory=list, max_length=DEVICE_SELECTORS_MAX)
    # design.md §12: the device taints this request tolerates (Kubernetes' DeviceToleration spelling).
    tolerations: list[DeviceToleration] = Field(default_factory=list, max_length=DEVICE_TOLERATIONS_MAX)
    # design.md §12: consumable capacity -- how much of each capacity of a device the request consumes.
    capacity: CapacityRequirements | None = None

    _name = field_validator("name")(classmethod(lambda cls, v: check_dns_label(v)))

    @field_validator("device_class_name")
    @classmethod
    def _dcn(cls, v: str | None) -> str | None:
        return None if v is None else check_dns_subdomain(v)

    @model_validator(mode="after")
    def _count_mode(self) -> DeviceSubRequest:
        if self.allocation_mode == "All" and self.count is not None:
            raise ValueError("count is not allowed with allocation_mode All (it takes every matching device)")
        return self

    @property
    def devices(self) -> int:
        """Devices an ExactCount request takes (1 when ``count`` is omitted); 0 for All (known only per node)."""
        if self.allocation_mode == "All":
            return 0
        return 1 if self.count is None else self.count


class AlternativeEnv(_Strict):
    """An environment variable an alternative gives the engine container (a plain Kubernetes ``EnvVar`` value)."""

    name: str = Field(min_length=1, max_length=256, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
    value: Annotated[str, Field(strict=True)] = ""


class DeviceAlternative(DeviceSubRequest):
    """One ``first_available`` alternative: a sub-request, and what the engine is told when it is the one chosen
    (``args`` appended to the engine container, replacing the same ``--flag``; ``env`` set, overriding the
    template's) -- e.g. ``--tensor-parallel-size=2`` on the 2 x A100 alternative (design.md §14)."""

    args: list[Annotated[str, Field(strict=True, min_length=1)]] = Field(default_factory=list, max_length=64)
    env: list[AlternativeEnv] = Field(default_factory=list, max_length=64)


class DeviceRequest(DeviceSubRequest):
    """One request of a member's claim: either ``exactly`` (the fields above) or ``first_available`` alternatives."""

    first_available: list[DeviceAlternative] | None = Field(default=None, min_length=1, max_length=FIRST_AVAILABLE_MAX)

    @model_validator(mode="after")
    def _alternatives(self) -> DeviceRequest:
        if self.first_available is None:
            return self
        # Defaults are allowed (a dumped and re-validated request carries them); values are not.
        own = [
            name
            for name, value in (
                ("device_class_name", self.device_class_name),
                ("allocation_mode", None if self.allocation_mode == "ExactCount" else self.allocation_mode),
                ("count", self.count),
                ("selectors", self.selectors or None),
                ("tolerations", self.tolerations or None),
                ("capacity", self.capacity),
            )
            if value is not None
        ]
        if own:
            raise ValueError(f"{', '.join(own)} cannot be set beside first_available: each alternative carries its own")
        _no_duplicates([a.name for a in self.first_available], "first_available alternative name")
        return self

    @property
    def alternatives(self) -> list[DeviceSubRequest]:
        """What the allocator tries, in order: the alternatives, or the request itself."""
        return list(self.first_available) if self.first_available is not None else [self]

    @property
    def min_devices(self) -> int:
        """The fewest devices the request can take: an All request takes at least one."""
        return min(max(a.devices, 1) for a in self.alternatives)

    @property
    def may_be_synthetic(self) -> bool:
        """Whether the request may resolve to ``Synthetic`` devices (matched for placement, never claimed): a plain
        ``ExactCount`` request that names no device class (the allocator also requires that no constraint names it)."""
        return self.first_available is None and self.allocation_mode == "ExactCount" and not self.device_class_name


class DeviceConstraint(_Strict):
    """``matchAttribute``: every device chosen for ``requests`` (default: all of the member's) has the same value;
    ``distinctAttribute`` (design.md §12): each has another value (two shares of one shared GPU never do)."""

    requests: list[str] = Field(default_factory=list, max_length=DEVICE_REQUESTS_MAX)
    match_attribute: str | None = None
    distinct_attribute: str | None = None

    @field_validator("match_attribute", "distinct_attribute")
    @classmethod
    def _qualified(cls, v: str | None) -> str | None:
        if v is None:
            return v
        match = QUALIFIED_NAME_RE.fullmatch(v)
        if not match or not match.group("domain") or len(match.group("domain")) > QUALIFIED_DOMAIN_MAX:
            raise ValueError(
                f"{v!r} must be a fully qualified attribute name, <domain>/<name> (resource.kubernetes.io/pcieRoot): "
                "Kubernetes requires the domain in a constraint"
            )
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> DeviceConstraint:
        if (self.match_attribute is None) == (self.distinct_attribute is None):
            raise ValueError("must set exactly one of match_attribute, distinct_attribute")
        return self

    @property
    def attribute(self) -> str:
        return self.match_attribute or self.distinct_attribute or ""


class NodeSelector(_Strict):
    devices: list[DeviceRequest] = Field(default_factory=list, max_length=DEVICE_REQUESTS_MAX)
    constraints: list[DeviceConstraint] = Field(default_factory=list, max_length=DEVICE_CONSTRAINTS_MAX)

    @field_validator("devices")
    @classmethod
    def _unique(cls, v: list[DeviceRequest]) -> list[DeviceRequest]:
        _no_duplicates([r.name for r in v], "device request name")
        return v

    @model_validator(mode="after")
    def _claim(self) -> NodeSelector:
        names = {r.name: r for r in self.devices}
        for ci, constraint in enumerate(self.constraints):
            _no_duplicates(constraint.requests, f"constraints[{ci}] request")
            for ri, ref in enumerate(constraint.requests):
                parent, _sep, sub = ref.partition("/")
                request = names.get(parent)
                if request is None:
                    raise ValueError(
                        f"constraints[{ci}].requests[{ri}]: {ref!r} names no device request of this member "
                        f"({', '.join(names) or 'none'})"
                    )
                if sub and (request.first_available is None or sub not in {a.name for a in request.first_available}):
                    raise ValueError(
                        f"constraints[{ci}].requests[{ri}]: {ref!r} names no first_available alternative of request "
                        f"{parent!r}"
                    )
        # Only devices the claim really holds count: a request that may resolve to synthetic devices (never claimed) is
        # checked per class by the allocator, which knows whether it does (a p5.48xlarge's 32 EFA devices beside 8 GPUs).
        constrained = {
            ref.partition("/")[0] for c in self.constraints for ref in (c.requests or [r.name for r in self.devices])
        }
        least = sum(r.min_devices for r in self.devices if not r.may_be_synthetic or r.name in constrained)
        if least > CLAIM_DEVICES_MAX:
            raise ValueError(
                f"the member's claim needs at least {least} devices whatever it chooses; Kubernetes allocates at most "
                f"{CLAIM_DEVICES_MAX} devices to one claim"
            )
        return self


class WorkerSpec(_Strict):
    nodes: StrictInt = Field(ge=1, le=256)


class Member(_Strict):
    role: Literal["Standalone", "Leader", "Worker"]
    node_selector: NodeSelector = Field(default_factory=NodeSelector)
    worker: WorkerSpec | None = None
    template: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _worker_block(self) -> Member:
        if self.role == "Worker" and self.worker is None:
            raise ValueError("worker: {nodes: N} is required for a Worker member")
        if self.role != "Worker" and self.worker is not None:
            raise ValueError(f"worker is only allowed on a Worker member (this one is {self.role})")
        return self

    @property
    def pods(self) -> int:
        return self.worker.nodes if self.worker is not None else 1


class Engine(_Strict):
    name: str
    copies: StrictInt = Field(default=1, ge=1, le=1024)
    members: list[Member] = Field(min_length=1)
    #: Its role in a prefill/decode instance (design.md §14); its copies per instance come from the deployment's
    #: ``ratio``.
    role: Literal["prefill", "decode"] | None = None

    _name = field_validator("name")(classmethod(lambda cls, v: check_dns_label(v)))

    @field_validator("members")
    @classmethod
    def _shape(cls, v: list[Member]) -> list[Member]:
        roles = sorted(m.role for m in v)
        if roles not in (["Standalone"], ["Leader", "Worker"]):
            raise ValueError(
                "an engine has exactly one Standalone member, or one Leader and one Worker member "
                f"(got {', '.join(m.role for m in v)})"
            )
        return v

    @property
    def is_gang(self) -> bool:
        return any(m.role == "Leader" for m in self.members)


class GatewayRef(_Strict):
    """The Gateway an HTTPRoute attaches to: its ``parentRefs`` entry (Gateway API ParentReference)."""

    name: str
    namespace: str | None = None
    section_name: str | None = None

    _name = field_validator("name")(classmethod(lambda cls, v: check_k8s_name(v, "a Gateway name", subdomain=True)))

    @field_validator("namespace", "section_name", mode="before")
    @classmethod
    def _empty_is_unset(cls, v: Any) -> Any:
        return None if v == "" else v  # rendered as unset: the route's namespace, every listener

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str | None) -> str | None:
        return None if v is None else check_k8s_name(v, "a namespace name")

    @field_validator("section_name")
    @classmethod
    def _section(cls, v: str | None) -> str | None:
        # Gateway API SectionName (a listener name): 1-253 characters, a DNS subdomain.
        return None if v is None else check_k8s_name(v, "a Gateway listener name (SectionName)", subdomain=True)


class ExtraMetadata(_Strict):
    """Extra metadata for every rendered object (``serving_manifests``' ``labels`` / ``annotations``)."""

    labels: dict[str, str] = Field(default_factory=dict, strict=True)
    annotations: dict[str, str] = Field(default_factory=dict, strict=True)

    @field_validator("labels")
    @classmethod
    def _label_syntax(cls, value: dict[str, str]) -> dict[str, str]:
        from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_label_key, is_label_value

        for key, item in value.items():
            if not is_label_key(key):
                raise ValueError(f"{key!r} is not a valid label key")
            if not is_label_value(item):
                raise ValueError(f"{key!r}: {item!r} is not a valid label value")
        return value

    @field_validator("annotations")
    @classmethod
    def _annotation_syntax(cls, value: dict[str, str]) -> dict[str, str]:
        errors = annotation_errors(value, "")  # each reason names the key (values are strings already)
        if errors:
            raise ValueError("; ".join(reason for _path, reason in errors))
        return value


def _check_config_name(value: str) -> str:
    return check_k8s_name(value, "the name of an LLMInferenceServiceConfig", subdomain=True)


class KServeOptions(_Strict):
    # Names of the LLMInferenceServiceConfig objects (presets) the LLMInferenceService's spec.baseRefs merge.
    base_refs: list[Annotated[str, Field(strict=True), AfterValidator(_check_config_name)]] = Field(
        default_factory=list
    )


class Disruption(_Strict):
    """How many replicas of a deployment must stay placed while a run removes others (guarded shrink)."""

    #: A run that would leave fewer placed replicas than are serving now proceeds only while at least this many stay.
    min_available: StrictInt | None = Field(default=None, ge=0, le=10000)


def _surge_zero(value: int) -> int:
    if value != 0:
        raise ValueError(
            f"only 0 is supported (got {value}): gpufleet.serving cannot place temporary extra replicas yet, so an "
            "update takes a replica out of service while it restarts; bound how many at once with max_unavailable"
        )
    return value


class Rollout(_Strict):
    """How a changed template reaches a deployment's replicas across the fleet (docs/deploy.md, "Rolling updates")."""

    #: At most this many of the deployment's replicas are taken out of service by an update at once, fleet-wide: apply
    #: mode updates them in waves of this size and waits until they are Ready before the next wave.
    max_unavailable: StrictInt = Field(default=1, ge=1, le=10000)
    #: Extra temporary replicas during an update: only 0 (not supported yet; a validation error says so).
    max_surge: Annotated[StrictInt, AfterValidator(_surge_zero)] = 0


class PlacementOptions(_Strict):
    """How a deployment's replicas take node capacity (design.md §12)."""

    #: Every pod that claims a device takes a whole node, as if it claimed every device there (engines that want the
    #: whole box); otherwise pods share nodes until their devices run out, as kube-scheduler packs them.
    exclusive_nodes: StrictBool = False


#: The ``/dev/shm`` size limit of every serving pod unless the deployment sets ``shm_size``.
DEFAULT_SHM_SIZE = "16Gi"
#: Below the container runtime's own default (64Mi) a limit is a unit mistake (``shm_size: 16`` is 16 bytes).
MIN_SHM_SIZE = "64Mi"


def check_shm_size(value: Any) -> str:
    text = check_quantity(value)
    from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

    if parse_quantity(text).cmp(parse_quantity(MIN_SHM_SIZE)) < 0:
        raise ValueError(f"must be at least {MIN_SHM_SIZE}, a quantity such as 16Gi (got {text!r})")
    return text


def _check_http_path(value: str | None) -> str | None:
    if value is not None and (not value.startswith("/") or any(ch.isspace() for ch in value)):
        raise ValueError(f"must be an HTTP path: starting with '/', no spaces (got {value!r})")
    return value


def _check_image(value: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(f"must be a container image reference such as docker.io/library/busybox:1.37 (got {value!r})")
    return value


_DURATION_RE = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration_seconds(value: Any) -> Any:
    """A duration as whole seconds: an integer (seconds) or a text such as ``1800``, ``90s``, ``30m``, ``1h30m``.
    Anything else is returned as it is, for the field's own type check to refuse."""
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        match = _DURATION_RE.fullmatch(text)
        if not text or not match:
            raise ValueError(f"must be a duration: seconds (1800) or a text such as 90s, 30m or 1h30m (got {value!r})")
        hours, minutes, seconds = (int(g or 0) for g in match.groups())
        return hours * 3600 + minutes * 60 + seconds
    return value


#: A duration field: whole seconds; the inventory may also write ``30m`` (the JSON Schema says so).
Duration = Annotated[
    StrictInt,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "pattern": r"^\s*(\d+|(\d+h)?(\d+m)?(\d+s)?)\s*$"},
            ],
            "description": "seconds, or a duration such as 90s, 30m, 1h30m",
        }
    ),
]

#: Bounds of the probe settings (``health``). Kubernetes only asks for >= 1; the upper bounds catch unit mistakes.
STARTUP_TIMEOUT_MAX = 24 * 3600
LIVENESS_TIMEOUT_MAX = 3600
PROBE_PERIOD_MAX = 300


class HealthOptions(_Strict):
    """How the engine container is probed (docs/routing.md, "Health"): a startupProbe that gives the model
    ``startup_timeout`` to load, then a livenessProbe that restarts an engine unresponsive for ``liveness_timeout``
    and a readinessProbe that takes a busy or loading engine out of its Services. A probe the template sets itself is
    left as it is."""

    #: The HTTP path every probe requests. Default: ``/health`` for vLLM and SGLang engines; other engines get a TCP
    #: check on the port unless a path is set.
    path: Annotated[str, AfterValidator(_check_http_path)] | None = Field(default=None, max_length=1024)
    #: How long a model may take to load before the container is restarted. Default: 30m (60m for a Leader/Worker gang,
    #: whose leader also waits for its workers).
    startup_timeout: Duration | None = Field(default=None, ge=1, le=STARTUP_TIMEOUT_MAX)
    #: How long a loaded engine may fail its health check before it is restarted.
    liveness_timeout: Duration = Field(default=60, ge=1, le=LIVENESS_TIMEOUT_MAX)
    #: Seconds between two checks, and how long one check may take.
    period_seconds: StrictInt = Field(default=10, ge=1, le=PROBE_PERIOD_MAX)
    timeout_seconds: StrictInt = Field(default=5, ge=1, le=PROBE_PERIOD_MAX)

    _durations = field_validator("startup_timeout", "liveness_timeout", mode="before")(
        classmethod(lambda cls, v: duration_seconds(v))
    )

    @model_validator(mode="after")
    def _liveness_covers_a_period(self) -> HealthOptions:
        if self.liveness_timeout < self.period_seconds:
            raise ValueError(
                f"liveness_timeout ({self.liveness_timeout}s) must be at least period_seconds ({self.period_seconds}s): "
                "an engine is restarted after failing checks for that long"
            )
        return self


class CacheWaitOptions(_Strict):
    """The init container that holds the serving pods of a deployment with a cache until the cache's hydration Job has
    written the completion manifest (docs/routing.md, "Waiting for the model cache")."""

    enabled: StrictBool = True
    #: Any image with ``/bin/sh``. Default: the hydration Job's (``model_cache_image``'s default).
    image: Annotated[str, AfterValidator(_check_image)] | None = Field(default=None, max_length=1024)


class RoutingOptions(_Strict):
    """How a deployment is routed on each cluster that holds replicas of it (docs/routing.md)."""

    #: An ``inference.networking.k8s.io/v1`` InferencePool over the model's serving pods with the llm-d router's
    #: endpoint picker (EPP), and the cluster's HTTPRoute pointing at the pool instead of the model Service. Default
    #: off: the serving stack does not install the Gateway API Inference Extension (its CRDs and a gateway that
    #: speaks ext-proc) yet.
    inference_pool: StrictBool = False
    #: The EPP image. Default: the serving stack's version matrix (``serving_stack.EPP_IMAGE``).
    epp_image: Annotated[str, AfterValidator(_check_image)] | None = Field(default=None, max_length=1024)


#: vLLM keeps every adapter loaded (``--max-loras`` is the adapter count): more than this is a mistake, not a plan.
ADAPTERS_MAX = 64
EXTERNAL_ENDPOINTS_MAX = 16


RatioTerm = Union[StrictInt, list[StrictInt]]  # noqa: UP007 (pylint rejects `|` on StrictInt's Annotated alias)

#: The llm-d P/D routing sidecar KServe v0.20.0's decode preset runs (config/llmisvcconfig/
#: config-llm-decode-template.yaml): decode pods of a prefill/decode instance rendered by this collection get it.
DEFAULT_ROUTING_SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"


class PDRatio(_Strict):
    """Engines of each role in one prefill/decode instance: ``N``, or a band ``[min, max]`` (design.md §14)."""

    prefill: RatioTerm
    decode: RatioTerm

    @field_validator("prefill", "decode")
    @classmethod
    def _term(cls, v: int | list[int]) -> int | list[int]:
        if isinstance(v, int):
            lo, hi = v, v
        else:
            lo, hi = (v[0], v[1]) if len(v) == 2 else (0, -1)
        if not 1 <= lo <= hi <= 1024:
            raise ValueError(f"must be a count 1..1024 or a band [min, max] with 1 <= min <= max <= 1024 (got {v!r})")
        return v

    def band(self, role: str) -> tuple[int, int]:
        term = self.prefill if role == "prefill" else self.decode
        return (term, term) if isinstance(term, int) else (term[0], term[1])


class PDOptions(_Strict):
    """How a prefill/decode instance is wired (design.md §14): the KV connector both roles' vLLM use, and for the
    llm-d rendering (backend deployment / leaderworkerset) the router's prefill decider and the routing sidecar."""

    kv_connector: Annotated[str, Field(strict=True, min_length=1, max_length=128)] = "NixlConnector"
    #: ``prefix``: prefill remotely only when the decode pod's uncached suffix is over ``non_cached_tokens``
    #: (llm-d's prefix-based-pd-decider); ``always``: every request (always-disagg-pd-decider).
    decider: Literal["prefix", "always"] = "prefix"
    non_cached_tokens: StrictInt = Field(default=16, ge=1, le=1_000_000)
    routing_sidecar_image: Annotated[str, AfterValidator(_check_image)] = DEFAULT_ROUTING_SIDECAR_IMAGE
    #: The port vLLM listens on in a decode pod, behind the routing sidecar (which takes the deployment's ``port``).
    engine_port: StrictInt = Field(default=8200, ge=1, le=65535)


class ModelDeployment(_Strict):
    name: str
    namespace: str = "default"
    replicas: StrictInt = Field(ge=0, le=10000)
    #: Placement order across the fleet: higher first (it takes capacity before the others); deployments of equal
    #: priority are placed in the order they are listed (``gpufleet_model_deployments``, then each
    #: ``gpufleet_model_deployments_*`` variable by name).
    priority: StrictInt = Field(
        default=0,
        ge=-1_000_000,
        le=1_000_000,
        description="Placement order: higher first; equal priorities keep list order.",
    )
    clusters: str = "gpufleet_clusters"
    cache: str | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    backend: Literal["auto", "deployment", "leaderworkerset", "kserve", "grove"] = "auto"
    engines: list[Engine] = Field(min_length=1)
    #: Prefill/decode instances (design.md §14): engines of each role per replica.
    ratio: PDRatio | None = None
    #: Where one instance (replica) lands: one cluster (always), or one pool / fabric domain too.
    colocate: Literal["cluster", "fabric"] = "cluster"
    pd: PDOptions = Field(default_factory=PDOptions)
    port: StrictInt = Field(default=8000, ge=1, le=65535)
    gateway: GatewayRef | None = None
    ray: StrictBool = False
    kserve: KServeOptions = Field(default_factory=KServeOptions)
    disruption: Disruption = Field(default_factory=Disruption)
    rollout: Rollout = Field(default_factory=Rollout)
    placement: PlacementOptions = Field(default_factory=PlacementOptions)
    health: HealthOptions = Field(default_factory=HealthOptions)
    #: The size limit of the serving pods' memory-backed ``/dev/shm`` (it counts against the pod's memory).
    shm_size: str = DEFAULT_SHM_SIZE
    cache_wait: CacheWaitOptions = Field(default_factory=CacheWaitOptions)
    routing: RoutingOptions = Field(default_factory=RoutingOptions)
    #: LoRA adapters served on this deployment's base model (docs/adapters.md).
    adapters: list[Adapter] = Field(default_factory=list, max_length=ADAPTERS_MAX)
    #: Spillover: OpenAI-compatible providers routed to when the fleet's Ready replicas are fewer than desired.
    external_endpoints: list[ExternalEndpoint] = Field(default_factory=list, max_length=EXTERNAL_ENDPOINTS_MAX)
    #: KEDA autoscaling between bounds (docs/autoscaling.md); ``replicas`` is then what placement places.
    autoscaling: Autoscaling | None = None
    #: The in-cluster queue (Kueue or KAI) the workloads are admitted through; default: the cluster's gpufleet_queue.
    queue: QueueRef | None = None
    # Filled in by fleet_info (the resolved ``clusters`` host pattern); accepted so its output can be fed back.
    candidate_clusters: list[str] = Field(default_factory=list, exclude=True)

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        json_schema_extra=lambda schema: _replicas_or_autoscaling(schema),  # pylint: disable=unnecessary-lambda
    )

    _name = field_validator("name", "namespace")(classmethod(lambda cls, v: check_dns_label(v)))
    _shm = field_validator("shm_size", mode="before")(classmethod(lambda cls, v: check_shm_size(v)))

    @model_validator(mode="before")
    @classmethod
    def _autoscaled_replicas(cls, data: Any) -> Any:
        """With ``autoscaling``, ``replicas`` is what placement places (autoscaling.placed); it may be omitted."""
        if not isinstance(data, Mapping) or not isinstance(data.get("autoscaling"), Mapping):
            return data
        scaling = data["autoscaling"]
        low, high, reserve = scaling.get("min_replicas"), scaling.get("max_replicas"), scaling.get("reserve", False)
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (low, high)) or not isinstance(reserve, bool):
            return data  # the field's own validation reports it
        placed = high if reserve else max(low, 1)
        given = data.get("replicas")
        if given is None:
            return {**data, "replicas": placed}
        if given != placed:
            raise ValueError(
                f"replicas ({describe(given)}) and autoscaling disagree: an autoscaled deployment places "
                f"{'max_replicas' if reserve else 'min_replicas (at least 1)'}, {placed}; leave replicas out"
            )
        return data

    @field_validator("adapters")
    @classmethod
    def _unique_adapters(cls, v: list[Adapter]) -> list[Adapter]:
        _no_duplicates([a.name for a in v], "adapter name")
        return v

    @field_validator("external_endpoints")
    @classmethod
    def _unique_endpoints(cls, v: list[ExternalEndpoint]) -> list[ExternalEndpoint]:
        _no_duplicates([e.name for e in v], "external endpoint name")
        return v

    @model_validator(mode="after")
    def _adapter_names(self) -> ModelDeployment:
        for i, adapter in enumerate(self.adapters):
            if adapter.name == self.name:
                raise ValueError(
                    f"adapters[{i}].name {adapter.name!r} is the deployment's own model name; an adapter needs a name "
                    "of its own (requests name it in model)"
                )
        return self

    @field_validator("engines")
    @classmethod
    def _unique_engines(cls, v: list[Engine]) -> list[Engine]:
        _no_duplicates([e.name for e in v], "engine name")
        return v

    @model_validator(mode="after")
    def _pd_instance(self) -> ModelDeployment:
        """A prefill/decode deployment: one engine per role, every engine has one, a ratio; each role's engine has
        the ratio's top as its copies (what placement reserves per instance)."""
        roles = [e.role for e in self.engines if e.role]
        if not roles and self.ratio is None:
            return self
        if sorted(roles) != ["decode", "prefill"] or len(roles) != len(self.engines):
            got = ", ".join(f"{e.name}: {e.role or 'no role'}" for e in self.engines)
            raise ValueError(
                "a prefill/decode deployment has exactly two engines, one with role prefill and one with role decode "
                f"(got {got})"
            )
        if self.ratio is None:
            raise ValueError("engines with roles prefill and decode need a ratio: {prefill: N, decode: M}")
        for engine in self.engines:
            top = self.ratio.band(engine.role or "")[1]
            if "copies" in engine.model_fields_set and engine.copies != top:
                raise ValueError(
                    f"engine {engine.name!r} ({engine.role}): copies {engine.copies} disagrees with ratio.{engine.role} "
                    f"(an instance runs up to {top}); leave copies out, the ratio sets it"
                )
            engine.copies = top
        return self

    @model_validator(mode="after")
    def _backend_fits(self) -> ModelDeployment:
        if self.backend == "deployment" and any(e.is_gang for e in self.engines):
            raise ValueError(
                "backend deployment cannot run a Leader/Worker engine; use leaderworkerset, kserve or auto"
            )
        if self.backend == "leaderworkerset" and not all(e.is_gang for e in self.engines):
            raise ValueError(
                "backend leaderworkerset needs Leader/Worker engines; use deployment or auto for Standalone"
            )
        return self

    def selector_paths(self) -> list[tuple[str, str]]:
        """``(field path, cel)`` for every selector, for reporting."""
        out = []
        for ei, engine in enumerate(self.engines):
            for mi, member in enumerate(engine.members):
                for ri, req in enumerate(member.node_selector.devices):
                    at = f"engines[{ei}].members[{mi}].node_selector.devices[{ri}]"
                    for si, sel in enumerate(req.selectors):
                        out.append((f"{at}.selectors[{si}].cel", sel.cel))
                    for ai, alt in enumerate(req.first_available or []):
                        for si, sel in enumerate(alt.selectors):
                            out.append((f"{at}.first_available[{ai}].selectors[{si}].cel", sel.cel))
        return out


def _replicas_or_autoscaling(schema: dict[str, Any]) -> None:
    """The JSON Schema of a deployment: ``replicas`` is required unless ``autoscaling`` is set."""
    required = schema.get("required")
    if isinstance(required, list) and "replicas" in required:
        required.remove("replicas")
        schema["anyOf"] = [{"required": ["replicas"]}, {"required": ["autoscaling"]}]


# --------------------------------------------------------------------------------------------------------------------
# Adapters, spillover, autoscaling and queues (issue 33; docs/adapters.md, docs/autoscaling.md)
# --------------------------------------------------------------------------------------------------------------------

#: A name a client puts in an OpenAI request's ``model`` (and vLLM's ``--lora-modules name=path``): letters, digits,
#: ``.``, ``_`` and ``-``, starting and ending alphanumeric.
MODEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
#: A Secret's data key (k8s.io/apimachinery IsConfigMapKey).
SECRET_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
# What a provider API key looks like: a well-known prefix, or a long run of mixed letters and digits.
_API_KEY_PREFIX_RE = re.compile(
    r"^(sk-|sk_|rk_|pk_|xai-|gsk_|hf_|ghp_|gho_|github_pat_|glpat-|AKIA|ASIA|AIza|Bearer\s|eyJ)", re.IGNORECASE
)
#: The routing tier of the fleet's own replicas; spillover endpoints take tiers 1 and up (a lower tier is preferred,
#: as Envoy's priority levels are).
FLEET_TIER = 0
SPILLOVER_TIER_MAX = 100


def looks_like_api_key(value: str) -> bool:
    """Whether ``value`` looks like a literal credential rather than a name (``sk-...``, ``hf_...``, a JWT, or 32+
    characters that mix letters and digits with few separators)."""
    if _API_KEY_PREFIX_RE.match(value):
        return True
    body = re.sub(r"[-_.]", "", value)
    return (
        len(value) >= 32
        and any(c.isdigit() for c in body)
        and any(c.isalpha() for c in body)
        and len(value) - len(body) <= len(value) // 16
    )


def check_model_name(value: str, what: str = "a model name") -> str:
    if not isinstance(value, str) or not MODEL_NAME_RE.fullmatch(value):
        raise ValueError(
            f"must be {what}: at most 63 letters, digits, '.', '_' and '-', starting and ending alphanumeric "
            f"(got {describe(value)})"
        )
    return value


class Adapter(_Strict):
    """A LoRA adapter served on the deployment's base model (docs/adapters.md): staged as a cache artifact of kind
    ``adapter`` on the clusters the deployment is placed on, loaded by vLLM with ``--lora-modules name=path``."""

    #: The model name requests use to reach this adapter (unique within the deployment, not the deployment's name).
    name: str
    #: Where the adapter's files come from: the same shape as a model cache's ``source`` (hugging_face, s3 or http).
    source: CacheSource
    #: Pins the adapter's version. For hugging_face it is the revision fetched (``source.hugging_face.revision`` must
    #: then be unset or equal); for s3 and http it names the version and restages the adapter when it changes.
    revision: str | None = Field(default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")

    _name = field_validator("name", mode="before")(
        classmethod(lambda cls, v: check_model_name(v, "an adapter name (the model name requests use)"))
    )

    @model_validator(mode="after")
    def _one_revision(self) -> Adapter:
        hf = self.source.hugging_face
        if self.revision and hf is not None and "revision" in hf.model_fields_set and hf.revision != self.revision:
            raise ValueError(
                f"revision {self.revision!r} and source.hugging_face.revision {hf.revision!r} differ; set one of them"
            )
        if self.revision and hf is not None:
            # One revision, in both places: fleet_info's dump (which spells the source's default "main") parses again.
            hf.revision = self.revision
        return self

    @property
    def pinned_revision(self) -> str | None:
        """The version the adapter is staged at: ``revision``, else the Hugging Face source's revision."""
        if self.revision:
            return self.revision
        return self.source.hugging_face.revision if self.source.hugging_face else None


def _check_secret_key(value: Any) -> Any:
    if isinstance(value, str) and looks_like_api_key(value):
        raise ValueError(
            "looks like an API key, not the name of a key in a Secret: a literal key never goes into fleet data "
            "(it would be copied into the routing artifact, every cluster's objects and logs); store it in a Secret "
            "and write that Secret's data key here (such as api-key)"
        )
    if not isinstance(value, str) or not SECRET_KEY_RE.fullmatch(value):
        raise ValueError("must be a Secret data key: 1-253 letters, digits, '-', '_' and '.'")
    return value


def _check_secret_name(value: Any) -> Any:
    if isinstance(value, str) and looks_like_api_key(value):
        raise ValueError(
            "looks like an API key, not a Secret's name: a literal key never goes into fleet data; store it in a "
            "Secret and write the Secret's name here"
        )
    if not isinstance(value, str):
        raise ValueError("must be a Secret's name (a string)")
    return check_k8s_name(value, "a Secret's name", subdomain=True)


class SecretKeyRef(_Strict):
    """A key of a Kubernetes Secret in the deployment's namespace (on every cluster that routes to the endpoint)."""

    name: str
    key: str

    _name = field_validator("name", mode="before")(classmethod(lambda cls, v: _check_secret_name(v)))
    _key = field_validator("key", mode="before")(classmethod(lambda cls, v: _check_secret_key(v)))


# Keys that would hold a literal credential on an external endpoint: refused with a pointer to ``secret``.
_LITERAL_KEY_FIELDS = (
    "api_key",
    "apikey",
    "key",
    "token",
    "api_token",
    "bearer",
    "authorization",
    "password",
    "headers",
)


def _check_tier(value: int) -> int:
    if value <= FLEET_TIER:
        raise ValueError(
            f"must be {FLEET_TIER + 1} or more (got {value}): tier {FLEET_TIER} is the fleet's own replicas, and a "
            "spillover endpoint is always less preferred (a lower tier is tried first)"
        )
    return value


class ExternalEndpoint(_Strict):
    """An OpenAI-compatible inference provider that takes the deployment's requests when the fleet's Ready replicas are
    fewer than desired (spillover, docs/routing.md). ``priority`` is a routing tier: the fleet's own replicas are tier
    0, spillover tiers are 1 and up, and a lower tier is tried first; ``weight`` splits requests between endpoints of
    one tier."""

    name: str
    #: The provider's OpenAI-compatible base URL (http or https, such as https://api.example.com/v1); no credentials.
    url: str = Field(max_length=2048)
    #: The Secret key that holds the provider's API key (sent as ``Authorization: Bearer``); never the key itself.
    secret: SecretKeyRef
    priority: Annotated[StrictInt, AfterValidator(_check_tier)] = Field(le=SPILLOVER_TIER_MAX)
    weight: StrictInt | None = Field(default=None, ge=1, le=1_000_000)

    _name = field_validator("name")(classmethod(lambda cls, v: check_dns_label(v)))

    @model_validator(mode="before")
    @classmethod
    def _no_literal_key(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            found = sorted(k for k in data if isinstance(k, str) and k.lower() in _LITERAL_KEY_FIELDS)
            if found:
                raise ValueError(
                    f"{', '.join(found)} must not be set: a literal API key never goes into fleet data (it would be "
                    "copied into the routing artifact, every cluster's objects and logs); store it in a Secret and "
                    "reference it as secret: {name: <secret>, key: <data key>}"
                )
            if isinstance(data.get("secret"), str):
                raise ValueError(
                    "secret must be a Secret reference {name: <secret>, key: <data key>}, not a string: a literal API "
                    "key never goes into fleet data"
                )
        return data

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return _check_source_url(v, "put the API key in a Secret and reference it in secret: {name, key}")


class AutoscalingMetric(_Strict):
    """What the autoscaler scales on, per replica (docs/autoscaling.md): ``queue_depth`` requests waiting
    (``vllm:num_requests_waiting``), ``kv_cache`` the KV-cache usage as a fraction 0-1 (``vllm:kv_cache_usage_perc``),
    ``rps`` requests per second, or ``custom`` a PromQL ``query`` of your own."""

    kind: Literal["queue_depth", "kv_cache", "rps", "custom"]
    target: Annotated[float, Field(strict=False, gt=0, le=1_000_000)]
    #: A PromQL query whose value is compared with ``target`` (required for ``custom``; replaces the built-in query
    #: of the other kinds).
    query: str | None = Field(default=None, min_length=1, max_length=4096)

    @field_validator("target", mode="before")
    @classmethod
    def _number(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"must be a number greater than 0 (got {describe(v)})")
        return v

    @model_validator(mode="after")
    def _kind(self) -> AutoscalingMetric:
        if self.kind == "custom" and not self.query:
            raise ValueError("query is required for kind custom (a PromQL query compared with target)")
        if self.kind == "kv_cache" and self.target > 1:
            raise ValueError(
                f"target must be a fraction of the KV cache between 0 and 1 for kind kv_cache (got {self.target:g}; "
                "vllm:kv_cache_usage_perc is 1 at full)"
            )
        return self


class Autoscaling(_Strict):
    """KEDA scales the deployment between ``min_replicas`` and ``max_replicas`` (docs/autoscaling.md). Placement
    places ``max_replicas`` only with ``reserve: true``, otherwise ``min_replicas`` (at least one: a deployment that
    scales to zero keeps the slot its first replica comes back to, so its endpoint stays routable)."""

    min_replicas: StrictInt = Field(ge=0, le=10000)
    max_replicas: StrictInt = Field(ge=1, le=10000)
    metric: AutoscalingMetric
    reserve: StrictBool = False
    #: Who scales: ``keda`` (a KEDA ScaledObject with a Prometheus trigger) or ``hpa`` (a Kubernetes autoscaling/v2
    #: HorizontalPodAutoscaler on a Pods metric the Prometheus adapter serves; no scale to zero, no custom query).
    kind: Literal["keda", "hpa"] = "keda"

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) must not exceed max_replicas ({self.max_replicas})")
        if self.kind == "hpa" and self.min_replicas == 0:
            raise ValueError(
                "min_replicas 0 (scale to zero) needs kind keda: a HorizontalPodAutoscaler keeps at least one pod "
                "(Kubernetes' HPAScaleToZero gate is alpha)"
            )
        if self.kind == "hpa" and (self.metric.kind == "custom" or self.metric.query):
            raise ValueError(
                "a PromQL query (metric kind custom, or metric.query) needs kind keda: a HorizontalPodAutoscaler reads "
                "a metric by name from the Prometheus adapter (use queue_depth, kv_cache or rps without query)"
            )
        return self

    @property
    def placed(self) -> int:
        """The replicas placement places (and so reserves capacity for)."""
        return self.max_replicas if self.reserve else max(self.min_replicas, 1)
