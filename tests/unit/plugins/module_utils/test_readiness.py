"""Readiness of serving workloads from their own replica counts, never from a bare condition."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.readiness import pending_workloads, wait_ready


def deployment(spec_replicas=1, generation=1, **status):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "qwen-1-main",
            "namespace": "ml",
            "generation": generation,
            "labels": {"gpufleet.io/deployment": "qwen"},
        },
        "spec": {"replicas": spec_replicas},
        "status": status,
    }


def lws(replicas=1, **status):
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "gang-1-pp2", "namespace": "ml", "labels": {"gpufleet.io/deployment": "gang"}},
        "spec": {"replicas": replicas},
        "status": status,
    }


READY = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}
AVAILABLE_BUT_NOT_READY = {  # what a 1-replica Deployment with maxUnavailable=1 reports while its pod is Pending
    "observedGeneration": 1,
    "replicas": 1,
    "updatedReplicas": 1,
    "unavailableReplicas": 1,
    "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}],
}


@pytest.mark.parametrize(
    ("observed", "why"),
    [
        (deployment(**READY), None),
        (deployment(**AVAILABLE_BUT_NOT_READY), "0/1 ready, 0/1 available"),
        (deployment(generation=2, **READY), "has not seen generation 2"),
        (deployment(spec_replicas=2, **READY), "1/2 updated, 1/2 ready, 1/2 available"),
        (deployment(spec_replicas=0, observedGeneration=1), None),
        (deployment(**{**READY, "unavailableReplicas": 1}), "1 unavailable"),
        (lws(readyReplicas=1, updatedReplicas=1), None),
        (lws(readyReplicas=0, updatedReplicas=1), "0/1 ready"),
        (lws(), "0/1 updated, 0/1 ready"),
    ],
)
def test_pending_by_replica_counts(observed, why):
    desired = {k: v for k, v in observed.items() if k != "status"}
    got = pending_workloads([observed], [desired])
    if why is None:
        assert got == []
    else:
        assert len(got) == 1 and why in got[0]["message"], got
        assert got[0]["deployment"] == desired["metadata"]["labels"]["gpufleet.io/deployment"]


def test_missing_workload_is_pending_and_other_kinds_are_ignored():
    desired = [deployment(), {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ml"}}]
    assert [p["message"] for p in pending_workloads([], desired)] == ["Deployment ml/qwen-1-main: not found"]


def test_llminferenceservice_uses_its_ready_condition():
    isvc = {
        "apiVersion": "serving.kserve.io/v1alpha2",
        "kind": "LLMInferenceService",
        "metadata": {"name": "m", "namespace": "ml", "generation": 1},
    }
    not_ready = {**isvc, "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Deploying"}]}}
    ready = {**isvc, "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]}}
    assert "Ready=False: Deploying" in pending_workloads([not_ready], [isvc])[0]["message"]
    assert pending_workloads([ready], [isvc]) == []


def test_wait_ready_polls_until_ready_with_one_list_per_kind():
    calls = []
    states = iter([deployment(**AVAILABLE_BUT_NOT_READY), deployment(**READY)])
    now = [0.0]

    def list_kind(api_version, kind):
        calls.append((api_version, kind))
        return [next(states)]

    pending, polls = wait_ready(
        list_kind,
        [deployment()],
        timeout=30,
        interval=2,
        sleep=lambda s: now.__setitem__(0, now[0] + s),
        clock=lambda: now[0],
    )
    assert pending == [] and polls == 2
    assert calls == [("apps/v1", "Deployment")] * 2
    assert now[0] == 2


def test_wait_ready_returns_pending_at_the_timeout():
    now = [0.0]
    pending, polls = wait_ready(
        lambda a, k: [deployment(**AVAILABLE_BUT_NOT_READY)],
        [deployment()],
        timeout=5,
        interval=2,
        sleep=lambda s: now.__setitem__(0, now[0] + s),
        clock=lambda: now[0],
    )
    assert polls == 4 and len(pending) == 1  # t = 0, 2, 4, 5


def test_wait_ready_lets_api_errors_through():
    def broken(api_version, kind):
        raise ConnectionRefusedError("connection refused")

    with pytest.raises(ConnectionRefusedError):
        wait_ready(broken, [deployment()], timeout=5, interval=1, sleep=lambda s: None, clock=lambda: 0.0)
