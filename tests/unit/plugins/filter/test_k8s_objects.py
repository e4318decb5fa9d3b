"""Filters over Kubernetes objects: pruning with held deployments, namespaces, deployment names, pending workloads."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.filter.k8s_objects import (
    k8s_deployment_names,
    k8s_missing_from,
    k8s_namespaces,
    workloads_pending,
)


def obj(kind, name, namespace="ml", deployment=None):
    meta = {"name": name, "namespace": namespace}
    if deployment:
        meta["labels"] = {"gpufleet.io/deployment": deployment}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta}


def test_missing_from_holds_back_named_deployments():
    existing = [obj("Service", "a-1", deployment="a"), obj("Service", "b-1", deployment="b"), obj("Service", "c")]
    assert k8s_missing_from(existing, []) == existing
    assert k8s_missing_from(existing, [], hold=["a"]) == existing[1:]
    assert k8s_missing_from(existing, [existing[1]], hold=["a"]) == [existing[2]]


def test_missing_from_rejects_a_bad_hold():
    with pytest.raises(AnsibleFilterError, match="hold must be a list of deployment names"):
        k8s_missing_from([], [], hold="a")


def test_namespaces_are_distinct_sorted_and_skip_cluster_scoped():
    objects = [
        obj("Service", "x", "zeta"),
        obj("Service", "y", "alpha"),
        obj("Service", "z", "zeta"),
        obj("DeviceClass", "gpu", None),
    ]
    assert k8s_namespaces(objects) == [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "alpha"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "zeta"}},
    ]
    with pytest.raises(AnsibleFilterError, match="k8s_namespaces: every item of the input"):
        k8s_namespaces(["not an object"])


def test_deployment_names_from_objects_and_pending_entries():
    objects = [obj("Service", "a", deployment="b"), obj("Service", "c"), {"deployment": "a", "message": "x"}]
    assert k8s_deployment_names(objects) == ["a", "b"]


def test_workloads_pending_checks_its_arguments():
    with pytest.raises(AnsibleFilterError, match="workloads_pending: both"):
        workloads_pending({}, [])
    with pytest.raises(AnsibleFilterError, match="workloads_pending: every item of the argument"):
        workloads_pending([], [42])
    desired = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ml"},
        "spec": {"replicas": 1},
    }
    assert workloads_pending([], [desired])[0]["message"] == "Deployment ml/d: not found"
