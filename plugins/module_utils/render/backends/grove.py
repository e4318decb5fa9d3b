# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Backend ``grove``: a whole replica as one Grove ``grove.io/v1alpha1`` PodCliqueSet (design.md §14).

Replica-level and ``claims: embedded``. Field names are Grove's (github.com/ai-dynamo/grove
``operator/api/core/v1alpha1/podcliqueset.go``; the pinned CRD is operator/api v0.1.0-alpha.8,
``tests/lib/crd_fetch.py``):

- ``spec.replicas: 1`` -- one PodCliqueSet per replica, so placement keeps deciding where each replica runs;
- ``spec.template.cliques[]``: one PodClique per member of each engine (``PodCliqueTemplateSpec``: ``name``,
  ``labels``, ``annotations``, ``resourceSharing``, ``spec: {roleName, replicas, podSpec}``). A Standalone member's
  clique is named after its engine; a gang's are ``<engine>-leader`` (1 pod) and ``<engine>-worker``
  (``worker.nodes`` pods);
- ``spec.template.podCliqueScalingGroups[]``: one PodCliqueScalingGroup per engine -- per role in a prefill/decode
  instance -- (``PodCliqueScalingGroupConfig``: ``name``, ``cliqueNames``, ``replicas`` = the engine's copies,
  ``minAvailable`` = the same, so the instance is gang-scheduled whole; a ratio band ``[min, max]`` renders
  ``replicas``/``minAvailable`` = min and ``scaleConfig: {minReplicas: min, maxReplicas: max}``; placement reserves
  the max);
- ``spec.template.resourceClaimTemplates[]`` (``ResourceClaimTemplateConfig``: ``name``, ``templateSpec``): the
  member's claim, referenced by its clique's ``resourceSharing: [{name, scope: PerReplica}]`` -- at PodClique level
  ``PerReplica`` is one ResourceClaim per pod index (``operator/internal/controller/podclique/components/
  resourceclaim``: ``ensurePerReplicaRCs``), which Grove injects into every container of the pod
  (``internal/resourceclaim/reconcile.go``: ``InjectResourceClaimRefs``); the pod specs carry no claim of their own;
- ``spec.template.headlessServiceConfig: {publishNotReadyAddresses: true}``: the per-replica headless Service that
  Grove's discovery env addresses pods by (``docs/user-guide/03_environment-variables-for-pod-discovery``).

A gang's pods find their leader through Grove's discovery env instead of LeaderWorkerSet's:
``GPUFLEET_LEADER_ADDRESS`` is ``$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-<engine>-leader-0.$(GROVE_HEADLESS_SERVICE)``;
``GPUFLEET_RANK`` is ``0`` on the leader, and workers get ``GPUFLEET_WORKER_INDEX`` = ``$(GROVE_PCLQ_POD_INDEX)``
(their rank is that + 1: an env value cannot add); Ray's join and wait read the same variables
(``GROVE_PCSG_TEMPLATE_NUM_PODS``: the gang's size).

Grove's admission webhook refuses a PodCliqueSet whose name, scaling group and clique names together exceed 45
characters (``maxCombinedResourceNameLength``, webhook ``pcs/validation/podcliqueset.go``): the PodCliqueSet's name
is the replica's, shortened with a hash to fit, and an engine name that leaves no room is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ansible_collections.gpufleet.serving.plugins.module_utils import readiness
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import k8s_name
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Engine, Member, ModelDeployment
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.base import (
    MEMBER_ROLES,
    PD_ROLES,
    Backend,
    Claims,
    Kind,
    ReplicaInput,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.leaderworkerset import (
    LWS_LEADER_ADDRESS_ENV,
)

GROVE_API_VERSION = "grove.io/v1alpha1"
#: Grove's limit on len(PodCliqueSet) + len(PodCliqueScalingGroup) + len(PodClique) names.
MAX_COMBINED_NAME = 45
#: The shortest PodCliqueSet name kept: a replica name's first characters and a 5-hex hash.
MIN_PCS_NAME = 11
ENV_LEADER_ADDRESS = "GPUFLEET_LEADER_ADDRESS"
ENV_RANK = "GPUFLEET_RANK"
ENV_WORKER_INDEX = "GPUFLEET_WORKER_INDEX"


def clique_name(engine: Engine, member: Member) -> str:
    return engine.name if member.role == "Standalone" else f"{engine.name}-{member.role.lower()}"


def leader_address(engine: Engine) -> str:
    leader = f"{engine.name}-leader"
    return f"$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-{leader}-0.$(GROVE_HEADLESS_SERVICE)"


def podcliqueset_pending(obj: Mapping[str, Any]) -> str | None:
    """A PodCliqueSet is ready when Grove has seen its generation and every replica is updated and available
    (``status.updatedReplicas`` / ``availableReplicas``: a replica is available when each of its cliques and scaling
    groups has its ``minAvailable``)."""
    return readiness._generation_seen(obj) or readiness._counts(obj, ("updatedReplicas", "availableReplicas"))


# Readiness is looked up by kind (readiness.not_ready, which apply's wait uses too).
readiness.PREDICATES.setdefault("PodCliqueSet", podcliqueset_pending)


def _env_index(container: dict[str, Any], name: str) -> int | None:
    for i, entry in enumerate(container.get("env") or []):
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return i
    return None


def _grove_gang(engine: Engine, member: Member, spec: dict[str, Any]) -> None:
    """Point a gang pod's leader address, rank and Ray commands at Grove's discovery env (not LeaderWorkerSet's)."""
    container = spec["containers"][0]
    env = container.get("env") or []
    i = _env_index(container, ENV_LEADER_ADDRESS)
    if i is not None:
        env[i] = {"name": ENV_LEADER_ADDRESS, "value": leader_address(engine)}
    i = _env_index(container, ENV_RANK)
    if i is not None:
        if member.role == "Leader":
            env[i] = {"name": ENV_RANK, "value": "0"}
        else:
            env[i] = {"name": ENV_WORKER_INDEX, "value": "$(GROVE_PCLQ_POD_INDEX)"}
    for key in ("command", "args"):
        if container.get(key):
            container[key] = [
                str(part)
                .replace(f"$({LWS_LEADER_ADDRESS_ENV})", f"$({ENV_LEADER_ADDRESS})")
                .replace('"LWS_GROUP_SIZE"', '"GROVE_PCSG_TEMPLATE_NUM_PODS"')
                for part in container[key]
            ]


class GroveBackend(Backend):
    name: ClassVar[str] = "grove"
    kinds: ClassVar[tuple[Kind, ...]] = (Kind(GROVE_API_VERSION, "PodCliqueSet"),)
    max_name: ClassVar[int] = MAX_COMBINED_NAME
    roles: ClassVar[frozenset[str]] = MEMBER_ROLES | PD_ROLES
    claims: ClassVar[Claims] = "embedded"

    def validate(self, dep: ModelDeployment) -> None:
        for engine in dep.engines:
            for member in engine.members:
                used = len(engine.name) + len(clique_name(engine, member))
                if MAX_COMBINED_NAME - used < MIN_PCS_NAME:
                    raise GpufleetError(
                        f"deployment {dep.name!r}: backend grove: engine name {engine.name!r} is too long -- Grove "
                        f"allows {MAX_COMBINED_NAME} characters for PodCliqueSet + scaling group + clique names "
                        f"(here {used} + at least {MIN_PCS_NAME}); shorten the engine's name"
                    )

    def band(self, dep: ModelDeployment, engine: Engine) -> tuple[int, int]:
        if dep.ratio is not None and engine.role is not None:
            return dep.ratio.band(engine.role)
        return engine.copies, engine.copies

    def objects(self, r: ReplicaInput) -> list[dict[str, Any]]:
        templates: list[dict[str, Any]] = []
        cliques: list[dict[str, Any]] = []
        groups: list[dict[str, Any]] = []
        longest = 0
        for engine, placed in r.engines:
            pods = r.renderer.pods(engine, placed, self, claim_refs=False)
            names = []
            for member in engine.members:
                meta, spec = pods[member.role]
                clique = clique_name(engine, member)
                longest = max(longest, len(engine.name) + len(clique))
                names.append(clique)
                if engine.is_gang:
                    _grove_gang(engine, member, spec)
                entry: dict[str, Any] = {"name": clique, "labels": meta["labels"]}
                if meta.get("annotations"):
                    entry["annotations"] = meta["annotations"]
                claim = r.renderer.claim_spec(engine, placed, member.role)
                if claim is not None:
                    templates.append({"name": clique, "templateSpec": claim})
                    entry["resourceSharing"] = [{"name": clique, "scope": "PerReplica"}]
                entry["spec"] = {"roleName": clique, "replicas": member.pods, "podSpec": spec}
                cliques.append(entry)
            low, high = self.band(r.dep, engine)
            group: dict[str, Any] = {"name": engine.name, "cliqueNames": names, "replicas": low, "minAvailable": low}
            if high > low:
                group["scaleConfig"] = {"minReplicas": low, "maxReplicas": high}
            groups.append(group)
        template: dict[str, Any] = {
            "cliques": cliques,
            "podCliqueScalingGroups": groups,
            "headlessServiceConfig": {"publishNotReadyAddresses": True},
        }
        if templates:
            template["resourceClaimTemplates"] = templates
        pool = r.engines[0][1].members[0].pool
        return [
            {
                "apiVersion": GROVE_API_VERSION,
                "kind": "PodCliqueSet",
                "metadata": r.renderer.metadata(k8s_name(r.replica, MAX_COMBINED_NAME - longest), pool=pool),
                "spec": {"replicas": 1, "template": template},
            }
        ]


BACKEND = GroveBackend()
