"""The backend registry: selection, kinds the role reads, name limits, readiness predicates."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelDeployment
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends import registry
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.base import Backend
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.registry import (
    REGISTRY,
    backend_for,
    is_ready,
    serving_kinds,
    workload_kinds,
)
from ansible_collections.gpufleet.serving.plugins.plugin_utils.contract import role_contract

TEMPLATE = {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0"}]}}
STANDALONE = {"name": "solo", "members": [{"role": "Standalone", "template": TEMPLATE}]}
GANG = {
    "name": "gang",
    "members": [
        {"role": "Leader", "template": TEMPLATE},
        {"role": "Worker", "worker": {"nodes": 2}, "template": TEMPLATE},
    ],
}


def dep(backend: str = "auto", engines: list | None = None, **kw) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {"name": "d", "replicas": 1, "backend": backend, "engines": engines or [STANDALONE], **kw}
    )


def test_the_registry_knows_every_backend_a_deployment_can_name():
    names = set(ModelDeployment.model_fields["backend"].annotation.__args__)
    assert names == {"auto", *REGISTRY}


@pytest.mark.parametrize(
    ("backend", "engines", "expected"),
    [
        ("auto", [STANDALONE], ["deployment"]),
        ("auto", [GANG], ["leaderworkerset"]),
        ("auto", [STANDALONE, GANG], ["deployment", "leaderworkerset"]),
        ("deployment", [STANDALONE], ["deployment"]),
        ("leaderworkerset", [GANG], ["leaderworkerset"]),
        ("kserve", [STANDALONE], ["kserve"]),
        ("kserve", [GANG], ["kserve"]),
    ],
)
def test_backend_selection(backend, engines, expected):
    d = dep(backend, engines)
    assert [backend_for(d, e).name for e in d.engines] == expected


def test_kserve_validation_is_the_backends_own():
    with pytest.raises(GpufleetError, match="ray: true is not supported with backend kserve"):
        REGISTRY["kserve"].validate(dep("kserve", [GANG], ray=True))
    with pytest.raises(GpufleetError, match="cannot mix Standalone and Leader/Worker"):
        REGISTRY["kserve"].validate(dep("kserve", [STANDALONE, GANG]))
    REGISTRY["deployment"].validate(dep("auto", [STANDALONE], ray=True))  # no rule of its own


def test_kinds_come_from_the_registry_in_prune_order():
    assert [k.kind for k in serving_kinds()] == [
        "Service",
        "Deployment",
        "LeaderWorkerSet",
        "LLMInferenceService",
        "PodCliqueSet",
        "ResourceClaimTemplate",
        "HTTPRoute",
        "ConfigMap",
        "InferencePool",  # routing.inference_pool (inference_pool.py)
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ScaledObject",  # autoscaling (autoscaling.py): pruned when a deployment loses `autoscaling`
        "HorizontalPodAutoscaler",  # autoscaling.kind: hpa
    ]
    assert {k.kind: k.ready_condition for k in workload_kinds()} == {
        "Deployment": "Available",
        "LeaderWorkerSet": "Available",
        "LLMInferenceService": "Ready",
        "PodCliqueSet": None,  # readiness from replica counts (readiness.PREDICATES), no condition
    }
    contract = role_contract()
    assert contract["serving_owner_selector"] == [
        "app.kubernetes.io/managed-by=gpufleet.serving",
        "gpufleet.io/component=serving",
    ]
    assert contract["serving_kinds"][0] == {"api_version": "v1", "kind": "Service"}
    assert {"api_version": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService", "ready_condition": "Ready"} in (
        contract["workload_kinds"]
    )


def test_name_limits():
    assert {name: b.max_name for name, b in REGISTRY.items()} == {
        "deployment": 63,
        "leaderworkerset": 47,
        "kserve": 37,
        "grove": 45,  # Grove: PodCliqueSet + scaling group + clique names together
    }


def _pcs(**status):
    return {"kind": "PodCliqueSet", "metadata": {"generation": 3}, "spec": {"replicas": 1}, "status": status}


def _deployment(replicas=2, **status):
    return {"kind": "Deployment", "metadata": {"generation": 3}, "spec": {"replicas": replicas}, "status": status}


@pytest.mark.parametrize(
    ("obj", "ready"),
    [
        (_deployment(observedGeneration=3, updatedReplicas=2, readyReplicas=2, availableReplicas=2), True),
        (_deployment(observedGeneration=2, updatedReplicas=2, readyReplicas=2, availableReplicas=2), False),
        (_deployment(observedGeneration=3, updatedReplicas=2, readyReplicas=1, availableReplicas=1), False),
        (_deployment(observedGeneration=3, updatedReplicas=1, readyReplicas=2, availableReplicas=2), False),
        (_deployment(replicas=0, observedGeneration=3), True),
        ({"kind": "Deployment", "metadata": {}, "spec": {"replicas": 1}}, False),
        (
            {"kind": "LeaderWorkerSet", "spec": {"replicas": 2}, "status": {"readyReplicas": 2, "updatedReplicas": 2}},
            True,
        ),
        (
            {"kind": "LeaderWorkerSet", "spec": {"replicas": 2}, "status": {"readyReplicas": 2, "updatedReplicas": 1}},
            False,
        ),
        ({"kind": "LLMInferenceService", "status": {"conditions": [{"type": "Ready", "status": "True"}]}}, True),
        ({"kind": "LLMInferenceService", "status": {"conditions": [{"type": "Ready", "status": "False"}]}}, False),
        ({"kind": "LLMInferenceService", "status": {}}, False),
        (_pcs(observedGeneration=3, updatedReplicas=1, availableReplicas=1), True),
        (_pcs(observedGeneration=3, updatedReplicas=1, availableReplicas=0), False),
        (_pcs(observedGeneration=2, updatedReplicas=1, availableReplicas=1), False),
        ({"kind": "Service"}, True),  # config-like objects are ready once they exist
    ],
)
def test_readiness_predicates(obj, ready):
    assert is_ready(obj) is ready


def test_unknown_backend_is_an_error_not_a_keyerror():
    d = dep().model_copy(update={"backend": "llm-d"})
    with pytest.raises(GpufleetError, match="unknown backend 'llm-d'"):
        registry.backend_for(d, d.engines[0])


def test_every_backend_declares_roles_and_claims():
    assert {name: (sorted(b.roles), b.claims) for name, b in REGISTRY.items()} == {
        "deployment": (["Leader", "Standalone", "Worker", "decode", "prefill"], "templates"),
        "leaderworkerset": (["Leader", "Standalone", "Worker", "decode", "prefill"], "templates"),
        "kserve": (["Leader", "Standalone", "Worker", "decode", "prefill"], "templates"),
        "grove": (["Leader", "Standalone", "Worker", "decode", "prefill"], "embedded"),
    }


def test_a_backend_refuses_a_role_it_does_not_render():
    class MembersOnly(Backend):
        name = "members-only"  # the base class's roles: Standalone, Leader, Worker

    d = dep("deployment", [STANDALONE])
    d.engines[0].role = "prefill"  # as a P/D deployment would give it
    with pytest.raises(GpufleetError, match=r"backend members-only cannot render role\(s\) prefill of engine 'solo'"):
        MembersOnly().check_roles(d)
    for backend in REGISTRY.values():
        backend.check_roles(d)


def test_auto_renders_per_engine_and_a_named_backend_renders_the_replica():
    assert isinstance(registry.replica_backend(dep("auto", [STANDALONE, GANG])), registry.PerEngine)
    assert registry.replica_backend(dep("grove", [STANDALONE, GANG])) is REGISTRY["grove"]
    assert registry.replica_backend(dep("leaderworkerset", [GANG])) is REGISTRY["leaderworkerset"]
