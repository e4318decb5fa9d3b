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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    Engine,
    Member,
    ModelCache,
    ModelDeployment,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.readiness import not_ready
from ansible_collections.gpufleet.serving.plugins.module_utils.records import EngineRecord

Pod = tuple[dict[str, Any], dict[str, Any]]  # (pod metadata, pod spec)


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


class Backend:
    """Base class of every backend; subclasses set the class attributes and override what they need."""

    name: ClassVar[str] = ""
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

    def workload(self, w: WorkloadInput) -> dict[str, Any]:
        raise NotImplementedError

    def service_selector(self, engine: Engine) -> dict[str, str]:
        """Extra selector labels for the replica's and the model's Services (serving pods only), when this backend
        serves ``engine``."""
        return {}

    def ready(self, obj: dict[str, Any]) -> bool:
        """Whether an observed object of one of :attr:`kinds` is ready (status read from the cluster): the kind's
        predicate in :mod:`readiness`, which apply mode's wait uses too."""
        return not_ready(obj) is None
