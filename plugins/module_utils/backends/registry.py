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

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.backends import deployment, kserve, leaderworkerset
from ansible_collections.gpufleet.serving.plugins.module_utils.backends.base import Backend, Kind
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Engine, ModelDeployment

#: In the order their kinds are listed (and pruned).
REGISTRY: dict[str, Backend] = {b.name: b for b in (deployment.BACKEND, leaderworkerset.BACKEND, kserve.BACKEND)}
AUTO = "auto"

#: Kinds every render may emit besides the backends' workloads: the replica Service, claim templates, HTTPRoute.
SERVICE_KIND = Kind("v1", "Service")
SHARED_KINDS: tuple[Kind, ...] = (
    Kind("resource.k8s.io/v1", "ResourceClaimTemplate"),
    Kind("gateway.networking.k8s.io/v1", "HTTPRoute"),
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
