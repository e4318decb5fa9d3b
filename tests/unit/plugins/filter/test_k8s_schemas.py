"""tests/lib/k8s_schemas.py, the schema checker every rendering test relies on: it must reject what the API server
(or a CRD's strict schema) would reject, and say so clearly when it cannot check something."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import k8s_schemas
import pytest
import yaml

POD = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "ml", "labels": {"app": "x"}},
    "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": POD},
}
LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "gang", "namespace": "ml"},
    "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": POD}},
}
CLAIM_TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "gpus", "namespace": "ml"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
}


def with_(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node = out
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[keys[-1]] = value
    return out


def failures(obj: dict[str, Any], **kw: Any) -> str:
    with pytest.raises(k8s_schemas.SchemaValidationError) as err:
        k8s_schemas.validate_objects([obj], **kw)
    return str(err.value)


def test_valid_objects_pass():
    k8s_schemas.validate_objects([DEPLOYMENT, LWS, CLAIM_TEMPLATE])


def test_unknown_field_fails_in_every_version():
    message = failures(with_(DEPLOYMENT, "spec.template.spec.containers.0.gpus", 1))
    for version in k8s_schemas.DEFAULT_VERSIONS:
        assert (
            f"Deployment/ml/web [kubernetes {version}]: spec.template.spec.containers[0]: Additional properties"
            in message
        )


def test_resource_claim_templates_need_kubernetes_1_34():
    with pytest.raises(k8s_schemas.SchemaValidationError, match=r"no schema for apiVersion resource\.k8s\.io/v1"):
        k8s_schemas.validate_objects([CLAIM_TEMPLATE], versions=("1.33",))
    with pytest.raises(ValueError, match=r"no schemas for Kubernetes 1\.99"):
        k8s_schemas.validate_objects([CLAIM_TEMPLATE], versions=("1.99",))


def test_unknown_kind_is_a_failure_not_a_warning():
    message = failures({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert "Widget/w: no schema for apiVersion example.com/v1 kind Widget" in message
    assert "(unknown kind)" in message
    # A built-in kind under the wrong group is unknown too.
    assert "no schema" in failures({**DEPLOYMENT, "apiVersion": "extensions.example.com/v1"})


def test_object_meta_rules_the_schema_cannot_express():
    assert "invalid label value" in failures(with_(DEPLOYMENT, "metadata.labels", {"a": "x" * 64}))
    assert "invalid label key" in failures(with_(DEPLOYMENT, "metadata.labels", {"bad key": "x"}))
    pod_labels = with_(DEPLOYMENT, "spec.template.metadata.labels", {"app": "x", "v": "no spaces allowed"})
    assert "spec.template.metadata.labels['v']: invalid label value" in failures(pod_labels)
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1abc"}, "spec": {"ports": [{"port": 80}]}}
    assert "must be a DNS-1035 label" in failures(service)
    assert "must be a DNS-1123 subdomain" in failures(with_(DEPLOYMENT, "metadata.name", "Web"))
    assert "metadata.namespace" in failures(with_(DEPLOYMENT, "metadata.namespace", "ML"))
    assert "not JSON-serialisable" in failures(with_(DEPLOYMENT, "metadata.labels", {"a": {1, 2}}))


def test_crd_schemas_are_there():
    """No CRD schema directory is a failure, not a skip: `make unit` depends on `make crds`."""
    assert k8s_schemas.crd_schema_dir() is not None, k8s_schemas.missing_crd_schemas_message()
    loaded = set(k8s_schemas._crd_validators())
    assert loaded >= k8s_schemas.KNOWN_CRDS, sorted(k8s_schemas.KNOWN_CRDS - loaded)


def test_custom_resources_are_closed_and_their_pods_checked_against_kubernetes():
    message = failures(with_(LWS, "spec.leaderWorkerTemplate.sizee", 2))
    assert (
        "[CRD leaderworkerset.x-k8s.io/v1 LeaderWorkerSet]: spec.leaderWorkerTemplate: Additional properties" in message
    )
    message = failures(with_(LWS, "spec.leaderWorkerTemplate.workerTemplate.spec.containers.0.gpus", 1))
    assert "[kubernetes 1.34 PodTemplateSpec]: spec.leaderWorkerTemplate.workerTemplate.spec.containers[0]" in message
    # Metadata of embedded templates is not closed (the README's rule): extra keys there are not errors.
    k8s_schemas.validate_objects([with_(LWS, "spec.leaderWorkerTemplate.workerTemplate.metadata.generateName", "x-")])
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r"},
        "spec": {"rules": [{"timeouts": {"request": "forever"}}]},
    }
    assert "does not match" in failures(route)


def test_close_schema_follows_the_schemas_readme():
    schema = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": {
                "type": "object",
                "properties": {
                    "free": {"type": "object", "properties": {"a": {}}, "x-kubernetes-preserve-unknown-fields": True},
                    "map": {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}},
                    "items": {"type": "array", "items": {"type": "object", "properties": {"a": {}}}},
                },
            },
        },
    }
    closed = k8s_schemas.close_schema(schema)
    assert closed["additionalProperties"] is False
    assert "additionalProperties" not in closed["properties"]["metadata"]
    spec = closed["properties"]["spec"]
    assert spec["additionalProperties"] is False
    assert "additionalProperties" not in spec["properties"]["free"]
    assert spec["properties"]["map"]["additionalProperties"] == {"type": "string"}
    assert spec["properties"]["items"]["items"]["additionalProperties"] is False
    assert "additionalProperties" not in schema  # the input is not modified


def test_gateway_objects_are_checked():
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "gpufleet-gateway"},
        "spec": {"gatewayClassName": "gpufleet-envoy", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    }
    k8s_schemas.validate_objects([gateway])
    message = failures(with_(gateway, "spec.listeners.0.portt", 80))
    assert "[CRD gateway.networking.k8s.io/v1 Gateway]: spec.listeners[0]: Additional properties" in message


def test_missing_crd_schemas_fail_with_a_clear_message_after_checking_built_ins(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUFLEET_NO_SHARED_SCHEMAS", "1")
    monkeypatch.setenv("GPUFLEET_CRD_SCHEMAS_CACHE", str(tmp_path / "no-cache"))
    monkeypatch.delenv("GPUFLEET_CRD_SCHEMAS", raising=False)
    k8s_schemas._crd_validators.cache_clear()
    try:
        assert k8s_schemas.crd_schema_dir() is None
        message = failures(LWS)
        assert "CRD schemas not found (looked in " in message
        assert str(tmp_path / "no-cache") in message
        assert "run `make crds`" in message
        assert "LeaderWorkerSet/ml/gang (leaderworkerset.x-k8s.io/v1 LeaderWorkerSet)" in message
        # Built-in kinds are still checked first: their errors come first, alone.
        message = failures(with_(DEPLOYMENT, "spec.bogus", 1))
        assert "Additional properties" in message
        with pytest.raises(k8s_schemas.SchemaValidationError, match="Additional properties"):
            k8s_schemas.validate_objects([with_(DEPLOYMENT, "spec.bogus", 1), LWS])
        k8s_schemas.validate_objects([DEPLOYMENT])  # nothing custom: nothing missing
        # An explicit directory is the only one looked in.
        monkeypatch.setenv("GPUFLEET_CRD_SCHEMAS", str(tmp_path / "explicit"))
        assert f"looked in {tmp_path / 'explicit'}):" in failures(LWS)
    finally:
        k8s_schemas._crd_validators.cache_clear()


def test_crd_schema_dir_order(monkeypatch, tmp_path):
    shared, cache = tmp_path / "shared", tmp_path / "cache"
    shared.mkdir()
    monkeypatch.setattr(k8s_schemas, "SHARED_SCHEMAS", shared)
    monkeypatch.setenv("GPUFLEET_CRD_SCHEMAS_CACHE", str(cache))
    monkeypatch.delenv("GPUFLEET_NO_SHARED_SCHEMAS", raising=False)
    monkeypatch.delenv("GPUFLEET_CRD_SCHEMAS", raising=False)
    assert k8s_schemas.crd_schema_dir() == shared
    monkeypatch.setenv("GPUFLEET_NO_SHARED_SCHEMAS", "1")
    assert k8s_schemas.crd_schema_dir() is None  # the cache is not there
    fetched = cache / k8s_schemas.crd_fetch.cache_key()
    fetched.mkdir(parents=True)
    for name in k8s_schemas.crd_fetch.expected_files():
        (fetched / name).write_text("{}")
    assert k8s_schemas.crd_schema_dir() is None  # incomplete: no README.md yet
    (fetched / "README.md").write_text("")
    assert k8s_schemas.crd_schema_dir() == fetched
    monkeypatch.setenv("GPUFLEET_CRD_SCHEMAS", str(shared))
    assert k8s_schemas.crd_schema_dir() == shared


def test_files_and_directories(tmp_path: Path):
    (tmp_path / "c1" / "ml").mkdir(parents=True)
    (tmp_path / "c1" / "ml" / "deployment-web.yaml").write_text(
        "---\napiVersion: apps/v1\nkind: Deployment\n"
        + "metadata: {name: web}\n"
        + "spec: {selector: {}, template: {spec: {containers: [{name: c}]}}}\n"
    )
    (tmp_path / "c1" / "ml" / "claims.yml").write_text(
        "---\n" + "---\n".join(yaml.safe_dump(o) for o in [CLAIM_TEMPLATE, CLAIM_TEMPLATE])
    )
    assert k8s_schemas.validate_files([tmp_path]) == 3
    (tmp_path / "c1" / "ml" / "bad.yaml").write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {portz: []}\n"
    )
    with pytest.raises(k8s_schemas.SchemaValidationError, match="Service/s"):
        k8s_schemas.validate_files([tmp_path])


def test_schemas_are_loaded_once():
    objs = [DEPLOYMENT, LWS, CLAIM_TEMPLATE] * 10
    k8s_schemas.validate_objects(objs)  # warm
    loads = k8s_schemas.schema_load_seconds()
    k8s_schemas.validate_objects(objs)
    assert k8s_schemas.schema_load_seconds() == loads  # nothing was loaded again (a count, not a timing)
    assert set(loads) >= {f"k8s {v} definitions" for v in k8s_schemas.DEFAULT_VERSIONS}


def _write(path: Path, obj: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(obj))


def test_render_dir_applies_as_it_is_only_with_its_namespaces_and_layout(tmp_path: Path):
    """validate_render_dir: what ``kubectl apply -R -f <cluster>`` (or a GitOps tool) needs of a cluster directory."""
    _write(tmp_path / "c1/ml/deployment-web.yaml", DEPLOYMENT)
    _write(tmp_path / "c1/kube-system/configmap-x.yaml", {"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "x", "namespace": "kube-system"}})  # fmt: skip
    # The fleet directory's plan document and fleet state are not objects; its generator is.
    (tmp_path / "_fleet").mkdir()
    (tmp_path / "_fleet/plan.json").write_text("{}")
    (tmp_path / "_fleet/fleet-state.yml").write_text("drained: []\n")
    (tmp_path / ".gpufleet").mkdir()
    (tmp_path / ".gpufleet/commit.yaml").write_text("not: an object\n")
    with pytest.raises(k8s_schemas.SchemaValidationError) as err:
        k8s_schemas.validate_render_dir(tmp_path)
    assert "c1: namespace ml (used by c1/ml/deployment-web.yaml) has no Namespace in c1/_cluster/" in str(err.value)
    assert "kube-system" not in str(err.value)  # a namespace every cluster has

    _write(
        tmp_path / "c1/_cluster/namespace-ml.yaml",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
    )
    assert k8s_schemas.validate_render_dir(tmp_path) == {"c1": 3}

    _write(tmp_path / "c1/other/deployment-web.yaml", DEPLOYMENT)  # in the wrong namespace directory
    _write(tmp_path / "_fleet/flux-system/kustomization-c1.yaml", {"apiVersion": "v1", "kind": "Namespace",
                                                                   "metadata": {"name": "x"}})  # fmt: skip
    with pytest.raises(k8s_schemas.SchemaValidationError) as err:
        k8s_schemas.validate_render_dir(tmp_path)
    assert "c1/other/deployment-web.yaml: holds Deployment/ml/web, expected at c1/ml/deployment-web.yaml" in str(
        err.value
    )
    assert (
        "_fleet/flux-system/kustomization-c1.yaml: holds Namespace/x, expected at _fleet/_cluster/namespace-x.yaml"
        in str(err.value)
    )
