# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The backend protocol: what a serving backend contributes to a render.

A backend turns one engine of one replica into the workload object that runs its pods. The renderer does everything
that is the same for every backend (claim templates, the pods' pool pinning, claims, tolerations, ``/dev/shm``, the
cache mount and the wait for it, probes, labels, the replica's Service, the model's Service and HTTPRoute per
cluster); a backend says:

- ``name``: the deployment's ``backend:`` value that selects it (``auto`` picks by :meth:`Backend.handles`);
- ``kinds``: the workload kinds it emits (``api_version``, ``kind``) - the role prunes and waits on these;
- ``max_name``: the longest workload name its controller tolerates (controllers derive longer names from it);
- ``validate``: deployment-level rules of the backend (raises :class:`GpufleetError`);
- pod adaptation: ``mounts_cache`` / ``runs_ray`` / ``exposes_port`` switch the renderer's shared steps (the engine
  port and readiness probe come with ``exposes_port``), ``health_path`` is the engine's health endpoint when the
  container does not tell (a preset's engine), and :meth:`Backend.adapt_pod` edits the engine container after them;
- ``workload``: the object itself, from the pods the renderer built;
- routing: :meth:`Backend.service_selector` adds labels to the selector of the replica's and the model's Services;
- readiness: :meth:`Backend.ready` says whether an observed object of one of its kinds is ready.

Replica-level (design.md §14): :meth:`Backend.objects` renders every engine of one replica at once. A backend declares
the ``roles`` it accepts (``Standalone``, ``Leader``/``Worker``, ``prefill``/``decode``) and ``claims``: ``templates``
(the renderer writes one ResourceClaimTemplate object per claiming member and the pods reference it) or ``embedded``
(the workload carries the claim specs itself, as Grove's PodCliqueSet ``resourceClaimTemplates`` do). The default
:meth:`Backend.objects` is *per engine*: the claim templates and :meth:`Backend.workload` of each engine in turn,
which is today's output byte for byte; ``backend: auto`` mixes per-engine backends (``registry.PerEngine``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    Engine,
    Member,
    ModelCache,
    ModelDeployment,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import EngineRecord
from ansible_collections.gpufleet.serving.plugins.module_utils.readiness import not_ready

Pod = tuple[dict[str, Any], dict[str, Any]]  # (pod metadata, pod spec)

#: Roles a member has (an engine's shape) and roles an engine has in a prefill/decode instance.
MEMBER_ROLES = frozenset({"Standalone", "Leader", "Worker"})
PD_ROLES = frozenset({"prefill", "decode"})
Claims = Literal["templates", "embedded"]


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    #: The status condition a workload of this kind reports once it is ready (what an apply waits for).
    ready_condition: str | None = None

    def to_dict(self) -> dict[str, str]:
        out = {"api_version": self.api_version, "kind": self.kind}
        if self.ready_condition:
            out["ready_condition"] = self.ready_condition
        return out


@dataclass
class WorkloadInput:
    """What the renderer hands a backend for one engine of one replica."""

    dep: ModelDeployment
    cache: ModelCache | None
    replica: str  # the replica's name
    engine: Engine
    placed: EngineRecord
    metadata: dict[str, Any]  # the workload object's metadata (name, namespace, labels, annotations)
    pods: dict[str, Pod]  # by member role


@dataclass
class PodInput:
    """What a backend may read while adapting one member's pod."""

    dep: ModelDeployment
    cache: ModelCache | None
    engine: Engine
    member: Member
    where: str  # how errors name the template


class ReplicaRenderer(Protocol):
    """What the renderer offers a backend while it renders one replica (``render/serving.py`` implements it)."""

    def engine_objects(self, engine: Engine, placed: EngineRecord, backend: Backend) -> list[dict[str, Any]]:
        """One engine as every per-engine backend renders it: its ResourceClaimTemplates, then its workload."""

    def pods(self, engine: Engine, placed: EngineRecord, backend: Backend, *, claim_refs: bool) -> dict[str, Pod]:
        """The engine's pods by member role, built by the shared steps and ``backend``'s adaptation. ``claim_refs``:
        the pods reference the member's ResourceClaimTemplate object (``claims: templates``); False: they carry no
        claim (the workload's controller injects it, ``claims: embedded``)."""

    def claim_templates(self, engine: Engine, placed: EngineRecord) -> list[dict[str, Any]]:
        """The engine's ResourceClaimTemplate objects (one per claiming member), as per-engine rendering emits them."""

    def claim_spec(self, engine: Engine, placed: EngineRecord, role: str) -> dict[str, Any] | None:
        """The ``ResourceClaimTemplateSpec`` (``{metadata: {labels}, spec: {devices}}``) of one member, or None when
        it claims nothing."""

    def metadata(self, name: str, *, engine: str | None = None, pool: str) -> dict[str, Any]:
        """An object's metadata with the replica's managed labels (and ``engine``'s), the fleet label, annotations."""

    def object_name(self, suffix: str, max_len: int = 63) -> str:
        """``<replica>-<suffix>`` as a DNS label of at most ``max_len`` characters."""


@dataclass
class ReplicaInput:
    """What the renderer hands a backend for one replica: every engine with its placement, deployment order."""

    dep: ModelDeployment
    cache: ModelCache | None
    replica: str  # the replica's name
    engines: list[tuple[Engine, EngineRecord]]
    renderer: ReplicaRenderer


def engine_roles(engine: Engine) -> set[str]:
    """The roles an engine brings: its members' and, in a prefill/decode instance, its own."""
    roles: set[str] = {m.role for m in engine.members}
    role = engine.role
    if role:
        roles.add(role)
    return roles


class Backend:
    """Base class of every backend; subclasses set the class attributes and override what they need."""

    name: ClassVar[str] = ""
    #: The roles it renders (design.md §14); a deployment with another role is refused by :meth:`check_roles`.
    roles: ClassVar[frozenset[str]] = MEMBER_ROLES
    #: ``templates``: ResourceClaimTemplate objects beside the workload; ``embedded``: inside the workload.
    claims: ClassVar[Claims] = "templates"
    #: Prefill/decode instances: the renderer gives decode pods llm-d's routing sidecar (vLLM behind it) and each
    #: cluster the router's configuration (``pd_instances``); False where the controller brings its own (KServe).
    pd_sidecar: ClassVar[bool] = True
    kinds: ClassVar[tuple[Kind, ...]] = ()
    max_name: ClassVar[int] = 63
    mounts_cache: ClassVar[bool] = True
    runs_ray: ClassVar[bool] = True
    exposes_port: ClassVar[bool] = True
    #: The HTTP health endpoint of the engine the backend's controller runs, when the container itself does not say
    #: (containers.health_path): the startup and liveness probes request it. None: a TCP check.
    health_path: ClassVar[str | None] = None

    def handles(self, engine: Engine) -> bool:
        """Whether ``backend: auto`` picks this backend for ``engine``."""
        return False

    def validate(self, dep: ModelDeployment) -> None:
        """Deployment-level rules of the backend; raise GpufleetError with the deployment's name."""

    def adapt_pod(self, pod: PodInput, container: dict[str, Any], spec: dict[str, Any]) -> None:
        """Edit the engine container / pod spec after the renderer's shared steps (before gang env and Ray)."""

    def check_roles(self, dep: ModelDeployment) -> None:
        """Refuse a deployment with a role this backend does not render (naming the roles it does)."""
        for engine in dep.engines:
            extra = sorted(engine_roles(engine) - self.roles)
            if extra:
                raise GpufleetError(
                    f"deployment {dep.name!r}: backend {self.name} cannot render role(s) {', '.join(extra)} of engine "
                    f"{engine.name!r} (it renders {', '.join(sorted(self.roles))})"
                )

    def objects(self, r: ReplicaInput) -> list[dict[str, Any]]:
        """Every object of one replica but its Service: per engine, its claim templates then its workload."""
        out: list[dict[str, Any]] = []
        for engine, placed in r.engines:
            out.extend(r.renderer.engine_objects(engine, placed, self))
        return out

    def workload(self, w: WorkloadInput) -> dict[str, Any]:
        raise NotImplementedError

    def routing(self, dep: ModelDeployment) -> dict[str, str]:
        """What it adds to the selector of the replica's and the model's Services (its serving pods only)."""
        out: dict[str, str] = {}
        for engine in dep.engines:
            out.update(self.service_selector(engine))
        return out

    def service_selector(self, engine: Engine) -> dict[str, str]:
        """Extra selector labels for the replica's and the model's Services (serving pods only), when this backend
        serves ``engine``."""
        return {}

    def ready(self, obj: dict[str, Any]) -> bool:
        """Whether an observed object of one of :attr:`kinds` is ready (status read from the cluster): the kind's
        predicate in :mod:`readiness`, which apply mode's wait uses too."""
        return not_ready(obj) is None
