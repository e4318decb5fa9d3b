# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The backend registry: every serving backend, by the name a deployment's ``backend:`` selects it with.

Adding a backend is one file in this package (a :class:`~.base.Backend` subclass and its ``BACKEND`` instance), one
line in :data:`REGISTRY`, the name in ``ModelDeployment.backend`` and golden files under
``tests/unit/plugins/filter/golden``. The role's kind lists (pruning, waiting) come from :func:`serving_kinds` and
:func:`workload_kinds` through ``fleet_info``'s ``contract`` return value (``plugins/plugin_utils/contract.py``).

The package's ``__init__.py`` stays empty (as kubernetes.core's and amazon.aws's do): importing one backend module, or
``base.py``, never loads the registry and every backend with it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Engine, ModelDeployment
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends import (
    deployment,
    grove,
    kserve,
    leaderworkerset,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.base import Backend, Kind, ReplicaInput

#: In the order their kinds are listed (and pruned).
REGISTRY: dict[str, Backend] = {
    b.name: b for b in (deployment.BACKEND, leaderworkerset.BACKEND, kserve.BACKEND, grove.BACKEND)
}
AUTO = "auto"

#: Kinds every render may emit besides the backends' workloads: the replica Service, claim templates, HTTPRoute, and
#: the llm-d router configuration of prefill/decode instances (a ConfigMap, ``pd_instances.router_config_map``).
SERVICE_KIND = Kind("v1", "Service")
SHARED_KINDS: tuple[Kind, ...] = (
    Kind("resource.k8s.io/v1", "ResourceClaimTemplate"),
    Kind("gateway.networking.k8s.io/v1", "HTTPRoute"),
    Kind("v1", "ConfigMap"),
    # routing.inference_pool (inference_pool.py): the pool and its endpoint picker's RBAC (the picker's Deployment and
    # Service are kinds listed already).
    Kind("inference.networking.k8s.io/v1", "InferencePool"),
    Kind("v1", "ServiceAccount"),
    Kind("rbac.authorization.k8s.io/v1", "Role"),
    Kind("rbac.authorization.k8s.io/v1", "RoleBinding"),
    # autoscaling (autoscaling.py): KEDA's ScaledObject per workload, pruned like the workload when a deployment loses
    # `autoscaling` or leaves; a cluster without KEDA serves no such kind and lists none.
    Kind("keda.sh/v1alpha1", "ScaledObject"),
    # autoscaling.kind: hpa (autoscaling.py): the HorizontalPodAutoscaler per workload, pruned the same way.
    Kind("autoscaling/v2", "HorizontalPodAutoscaler"),
)


def backend_for(dep: ModelDeployment, engine: Engine) -> Backend:
    """The backend serving ``engine`` of ``dep``: the one it names, or for ``auto`` the first that handles it."""
    if dep.backend != AUTO:
        try:
            return REGISTRY[dep.backend]
        except KeyError:
            raise GpufleetError(f"deployment {dep.name!r}: unknown backend {dep.backend!r}") from None
    for backend in REGISTRY.values():
        if backend.handles(engine):
            return backend
    raise GpufleetError(f"deployment {dep.name!r}: no backend serves engine {engine.name!r}")  # pragma: no cover


class PerEngine(Backend):
    """``backend: auto``: each engine rendered by the backend that handles it (:func:`backend_for`), as before
    replica-level backends (design.md §14): the objects of each engine in turn, byte for byte."""

    name: ClassVar[str] = AUTO

    def __init__(self, dep: ModelDeployment) -> None:
        self.dep = dep

    def check_roles(self, dep: ModelDeployment) -> None:
        for backend in backends_of(dep):
            backend.check_roles(dep)

    def objects(self, r: ReplicaInput) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for engine, placed in r.engines:
            out.extend(r.renderer.engine_objects(engine, placed, backend_for(self.dep, engine)))
        return out

    def routing(self, dep: ModelDeployment) -> dict[str, str]:
        out: dict[str, str] = {}
        for engine in dep.engines:
            out.update(backend_for(dep, engine).service_selector(engine))
        return out


def replica_backend(dep: ModelDeployment) -> Backend:
    """The backend that renders each replica of ``dep``: the one it names, or for ``auto`` a :class:`PerEngine`."""
    if dep.backend == AUTO:
        return PerEngine(dep)
    try:
        return REGISTRY[dep.backend]
    except KeyError:
        raise GpufleetError(f"deployment {dep.name!r}: unknown backend {dep.backend!r}") from None


def backends_of(dep: ModelDeployment) -> list[Backend]:
    """Every backend ``dep`` uses, once each, in engine order."""
    out: list[Backend] = []
    for engine in dep.engines:
        backend = backend_for(dep, engine)
        if backend not in out:
            out.append(backend)
    return out


def workload_kinds() -> list[Kind]:
    return [kind for backend in REGISTRY.values() for kind in backend.kinds]


def serving_kinds() -> list[Kind]:
    """Every kind a serving render emits, in prune order: the Service, the workloads, then the shared kinds."""
    return [SERVICE_KIND, *workload_kinds(), *SHARED_KINDS]


def backend_of_kind(kind: str) -> Backend | None:
    for backend in REGISTRY.values():
        if any(k.kind == kind for k in backend.kinds):
            return backend
    return None


def is_ready(obj: dict[str, Any]) -> bool:
    """Readiness of an observed workload object by its kind; objects of other kinds are ready once they exist."""
    backend = backend_of_kind(str(obj.get("kind", "")))
    return True if backend is None else backend.ready(obj)
