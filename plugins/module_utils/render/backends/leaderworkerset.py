# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Backend ``leaderworkerset``: a Leader + Worker gang as a ``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet."""

from __future__ import annotations

from typing import Any, ClassVar

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Engine
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.base import (
    MEMBER_ROLES,
    PD_ROLES,
    Backend,
    Kind,
    WorkloadInput,
)

#: The label LWS puts on every pod of a group: 0 on the leader.
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
#: The variable LWS gives every pod of a group: the leader's address.
LWS_LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
# A LeaderWorkerSet's name becomes a StatefulSet name (<name>-<group>) whose pods carry
# controller-revision-hash=<statefulset>-<10 chars> (<= 63), so it stays <= 47 for up to 9999 copies.
MAX_LWS_NAME = 47


def worker_nodes(engine: Engine) -> int:
    worker = next(m for m in engine.members if m.role == "Worker")
    if worker.worker is None:
        raise GpufleetError(f"engine {engine.name!r}: the Worker member has no worker block")  # pragma: no cover
    return worker.worker.nodes


class LeaderWorkerSetBackend(Backend):
    name: ClassVar[str] = "leaderworkerset"
    kinds: ClassVar[tuple[Kind, ...]] = (Kind("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "Available"),)
    max_name: ClassVar[int] = MAX_LWS_NAME
    #: A prefill/decode instance renders as one workload per role plus the llm-d router (design.md §14).
    roles: ClassVar[frozenset[str]] = MEMBER_ROLES | PD_ROLES

    def handles(self, engine: Engine) -> bool:
        return engine.is_gang

    def workload(self, w: WorkloadInput) -> dict[str, Any]:
        leader_meta, leader_spec = w.pods["Leader"]
        worker_meta, worker_spec = w.pods["Worker"]
        return {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": w.metadata,
            "spec": {
                "replicas": w.placed.copies,
                # Workers start with the leader (not after it is Ready: the leader only gets Ready once its workers
                # joined).
                "startupPolicy": "LeaderCreated",
                "leaderWorkerTemplate": {
                    "size": 1 + worker_nodes(w.engine),
                    # A gang is all-or-nothing: a restarted pod recreates its whole group.
                    "restartPolicy": "RecreateGroupOnPodRestart",
                    "leaderTemplate": {"metadata": leader_meta, "spec": leader_spec},
                    "workerTemplate": {"metadata": worker_meta, "spec": worker_spec},
                },
            },
        }


BACKEND = LeaderWorkerSetBackend()
