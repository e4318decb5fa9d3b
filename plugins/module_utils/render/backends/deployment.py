# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Backend ``deployment``: a Standalone engine as an ``apps/v1`` Deployment of ``copies`` pods."""

from __future__ import annotations

from typing import Any, ClassVar

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    LABEL_DEPLOYMENT,
    LABEL_ENGINE,
    LABEL_REPLICA,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Engine
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.base import (
    MEMBER_ROLES,
    PD_ROLES,
    Backend,
    Kind,
    WorkloadInput,
)


class DeploymentBackend(Backend):
    name: ClassVar[str] = "deployment"
    kinds: ClassVar[tuple[Kind, ...]] = (Kind("apps/v1", "Deployment", "Available"),)
    max_name: ClassVar[int] = 63
    #: A prefill/decode instance renders as one workload per role plus the llm-d router (design.md §14).
    roles: ClassVar[frozenset[str]] = MEMBER_ROLES | PD_ROLES

    def handles(self, engine: Engine) -> bool:
        return not engine.is_gang

    def workload(self, w: WorkloadInput) -> dict[str, Any]:
        pod_meta, pod_spec = w.pods["Standalone"]
        selector = {LABEL_DEPLOYMENT: w.dep.name, LABEL_REPLICA: w.replica, LABEL_ENGINE: w.engine.name}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": w.metadata,
            "spec": {
                "replicas": w.placed.copies,
                "selector": {"matchLabels": selector},
                # Capacity is planned exactly (pods x copies): never surge above it, replace one copy at a time.
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                "template": {"metadata": pod_meta, "spec": pod_spec},
            },
        }


BACKEND = DeploymentBackend()
