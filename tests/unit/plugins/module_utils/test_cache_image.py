"""OCI model images as a cache source (issue 30, item 4): ``source.oci`` is mounted read-only as an image volume
(ImageVolume, GA in Kubernetes 1.36) where the cache's PVC would be, with no PVC, Job or wait; a cluster older than
1.36 (or of unknown version) the cache may be staged on is a validation error naming the field."""

from __future__ import annotations

import k8s_schemas
import pytest
from example_fleet import example_fleet
from module_utils_tests import builders
from render_case import container, deployment, engine_container, gang, pod_templates, render, standalone

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelCache, parse
from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import cache_objects
from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import CACHE_PATH, CACHE_WAIT_CONTAINER
from ansible_collections.gpufleet.serving.plugins.module_utils.warm_first import cold_starts

fleet_dict = builders("fleet/test_fleet_deploy").fleet_dict

REF = "oci://ghcr.io/acme/qwen2.5-0.5b-instruct:v1"


def oci_cache(**oci) -> dict:
    return {"name": "qwen", "namespace": "ml", "source": {"oci": {"reference": REF, **oci}}, "size": "2Gi"}


def test_a_cache_from_an_oci_image_is_an_image_volume_on_a_1_36_cluster_schema_valid_on_1_36_and_1_37():
    dep = deployment(cache="qwen", members=[standalone(container(args=[]))])
    objs = render(dep, caches=[oci_cache()])
    specs = [spec for _where, _meta, spec in (t for o in objs for t in pod_templates(o))]
    assert specs
    for spec in specs:
        volume = next(v for v in spec["volumes"] if v.get("image"))
        assert volume["image"] == {"reference": "ghcr.io/acme/qwen2.5-0.5b-instruct:v1", "pullPolicy": "IfNotPresent"}
        assert not any("persistentVolumeClaim" in v for v in spec["volumes"])  # no PVC
        assert CACHE_WAIT_CONTAINER not in [c["name"] for c in spec.get("initContainers") or []]  # nothing to wait for
        engine = engine_container(spec)
        mount = next(m for m in engine["volumeMounts"] if m["name"] == volume["name"])
        assert mount == {"name": volume["name"], "mountPath": CACHE_PATH, "readOnly": True}
        assert f"--model={CACHE_PATH}" in engine["args"]  # vLLM loads the mounted image
    k8s_schemas.validate_objects(objs, versions=("1.36", "1.37"))


def test_a_model_car_image_mounts_its_model_directory_and_a_gang_mounts_it_on_every_member():
    objs = render(
        deployment(cache="qwen", members=gang(1, leader=container(args=["-tp", "8"]))),
        caches=[oci_cache(path="models", pull_policy="Always")],
    )
    mounts = [
        m
        for o in objs
        for _where, _meta, spec in pod_templates(o)
        for c in spec["containers"]
        for m in c.get("volumeMounts") or []
        if m["mountPath"] == CACHE_PATH
    ]
    assert len(mounts) == 2 and all(m["subPath"] == "models" and m["readOnly"] for m in mounts)
    k8s_schemas.validate_objects(objs, versions=("1.36", "1.37"))


def test_nothing_is_staged_or_hydrated_for_an_oci_image():
    assert cache_objects(oci_cache(), "eks-us-east-1", "print('x')\n", storage_class="rwx", fleet="f") == []


@pytest.mark.parametrize(
    "reference",
    ["ghcr.io/acme/model:v1", "oci://ghcr.io/Acme/model:v1", "oci://ghcr.io", "oci://ghcr.io/acme/model:v1@sha256:12"],
)
def test_a_bad_reference_is_an_error_naming_the_field(reference):
    with pytest.raises(FleetValidationError) as exc:
        parse(ModelCache, {**oci_cache(), "source": {"oci": {"reference": reference}}}, "gpufleet_model_caches[0]")
    assert "gpufleet_model_caches[0].source.oci.reference: must be an OCI image reference" in str(exc.value)


def test_a_digest_reference_and_storage_settings():
    pinned = f"oci://ghcr.io/acme/model@sha256:{'a' * 64}"
    assert parse(ModelCache, {**oci_cache(), "source": {"oci": {"reference": pinned}}}, "c").source.oci.image == (
        f"ghcr.io/acme/model@sha256:{'a' * 64}"
    )
    with pytest.raises(FleetValidationError, match="remove storage from this cache"):
        parse(ModelCache, {**oci_cache(), "storage": {"storage_class": "rwx"}}, "c")
    with pytest.raises(FleetValidationError, match="layout hf needs a hugging_face source"):
        parse(ModelCache, {**oci_cache(), "layout": "hf"}, "c")


def oci_fleet(clusters: str) -> dict:
    data = example_fleet()
    data["caches"][0]["source"] = {"oci": {"reference": REF}}
    data["caches"][0]["clusters"] = clusters
    data["caches"][0].pop("storage", None)
    for dep in data["deployments"]:
        if dep.get("cache") == data["caches"][0]["name"]:
            dep["clusters"] = clusters
    return data


def test_a_cluster_older_than_1_36_or_of_unknown_version_is_a_validation_error_naming_the_field():
    data = oci_fleet("gpufleet_clusters")
    with pytest.raises(FleetValidationError) as exc:
        fleet_dict(data)
    text = str(exc.value)
    assert (
        "gpufleet_model_caches[0] (qwen-2-5-0-5b).source.oci: an OCI model image is mounted as an image volume" in text
    )
    assert "gke-us-central1 (1.34)" in text and "gke-europe-west4 (1.35)" in text
    assert "onprem-a" in text and "set gpufleet_kubernetes_version in their host_vars" in text
    assert "the hydrator cannot fetch OCI artifacts" in text


def test_a_cache_limited_to_1_36_clusters_is_valid_and_reports_no_cold_start():
    data = oci_fleet("eks-us-east-1")
    fleet = validate_fleet(
        classes=data["classes"],
        hosts=data["hosts"],
        deployments=data["deployments"],
        caches=data["caches"],
        resolve_pattern=lambda pattern: [pattern] if pattern in data["hosts"] else sorted(data["hosts"]),
    ).to_dict()
    assert fleet["caches"][0]["candidate_clusters"] == ["eks-us-east-1"]
    replicas = [{"deployment": "qwen-demo", "cluster": "eks-us-east-1", "index": 0}]
    assert cold_starts(fleet, replicas, None) == []  # an image is pulled with the pod, never hydrated


def test_kserve_refuses_an_oci_cache_naming_it():
    dep = deployment(cache="qwen", backend="kserve", members=[standalone(container(args=[]))])
    with pytest.raises(GpufleetError, match="is an OCI model image"):
        render(dep, caches=[oci_cache()])
