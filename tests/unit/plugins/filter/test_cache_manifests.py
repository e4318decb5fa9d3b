"""Filters cache_manifests, cache_job_status, cache_status_summary: arguments, errors, docs in sync with the code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from example_fleet import example_fleet
from k8s_schemas import validate_objects

from ansible_collections.gpufleet.serving.plugins.filter.cache_manifests import (
    FilterModule,
    cache_adopted_volume,
    cache_follow_removal,
    cache_job_action,
    cache_job_status,
    cache_jobs_to_delete,
    cache_manifests,
    cache_pvc_change_error,
    cache_staged,
    cache_status_summary,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import HydrationOptions, cache_objects

REPO = Path(__file__).resolve().parents[4]
FILTER_DIR = REPO / "plugins" / "filter"
HYDRATOR = (REPO / "roles" / "model_cache" / "files" / "hydrate.py").read_text(encoding="utf-8")


def example_cache() -> dict[str, Any]:
    data = example_fleet()["caches"][0]
    data["candidate_clusters"] = ["gke-us-central1"]  # as fleet_info returns it
    return data


CLUSTER = {"name": "gke-us-central1", "cache_storage_class": "gpufleet-filestore-rwx", "provider": "gke"}
FLEET = "example"


def test_filters_are_registered():
    assert FilterModule().filters() == {
        "cache_manifests": cache_manifests,
        "cache_staged": cache_staged,
        "cache_follow_removal": cache_follow_removal,
        "cache_job_status": cache_job_status,
        "cache_status_summary": cache_status_summary,
        "cache_job_action": cache_job_action,
        "cache_jobs_to_delete": cache_jobs_to_delete,
        "cache_adopted_volume": cache_adopted_volume,
        "cache_pvc_change_error": cache_pvc_change_error,
    }


def test_fleet_info_shapes_go_straight_in():
    objs = cache_manifests(example_cache(), CLUSTER, hydrator=HYDRATOR, fleet=FLEET)
    assert [o["kind"] for o in objs] == ["PersistentVolumeClaim", "ConfigMap", "Job"]
    assert objs[0]["spec"]["storageClassName"] == "gpufleet-filestore-rwx"
    assert objs == cache_objects(example_cache(), CLUSTER, HYDRATOR, fleet=FLEET)
    json.dumps(objs)  # plain data
    validate_objects(objs)


def test_options_mapping_and_keywords_keyword_wins():
    objs = cache_manifests(
        example_cache(),
        "gke-us-central1",
        hydrator=HYDRATOR,
        storage_class="sc",
        options={"image": "a/b:1", "workers": 2, "ttl_seconds_after_finished": None},
        workers=4,
        fleet=FLEET,
    )
    job = objs[2]
    main = job["spec"]["template"]["spec"]["containers"][0]
    assert main["image"] == "a/b:1"
    assert main["args"][-2:] == ["--workers", "4"]
    assert "ttlSecondsAfterFinished" not in job["spec"]
    # A None option means the default.
    default = cache_manifests(
        example_cache(), "gke-us-central1", hydrator=HYDRATOR, storage_class="sc", image=None, fleet=FLEET
    )
    assert default[2]["spec"]["template"]["spec"]["containers"][0]["image"] == HydrationOptions().image


def test_adopted_cache_renders_nothing_unless_checked():
    data = example_cache()
    data["storage"] = {"backend": "existing_pvc", "claim_name": "customer-weights"}
    assert cache_manifests(data, CLUSTER, hydrator=HYDRATOR, fleet=FLEET) == []
    (check,) = cache_manifests(data, CLUSTER, hydrator=HYDRATOR, adopted_check=True, fleet=FLEET)
    assert check["kind"] == "Job" and check["metadata"]["name"].startswith("gpufleet-check-")
    assert check["metadata"]["labels"]["gpufleet.io/fleet"] == FLEET


def test_fleet_label_is_on_every_object_but_not_on_the_job_template():
    """Fleet identity: every object carries gpufleet.io/fleet; the Job's pod template (and so its name, which hashes
    it) does not, so a fleet that gets its name re-hydrates nothing."""
    objs = cache_manifests(example_cache(), CLUSTER, hydrator=HYDRATOR, fleet=FLEET)
    assert [o["metadata"]["labels"]["gpufleet.io/fleet"] for o in objs] == [FLEET] * 3
    job = objs[2]
    assert "gpufleet.io/fleet" not in job["spec"]["template"]["metadata"]["labels"]
    unnamed = cache_objects(example_cache(), CLUSTER, HYDRATOR)
    assert job["metadata"]["name"] == unnamed[2]["metadata"]["name"]
    assert job["spec"] == unnamed[2]["spec"]
    other = cache_manifests(example_cache(), CLUSTER, hydrator=HYDRATOR, fleet="other")
    assert other[2]["metadata"]["name"] == job["metadata"]["name"]


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        ((), {"hydrator": HYDRATOR, "fleet": FLEET}, "cluster is required"),
        ((CLUSTER,), {"fleet": FLEET}, "hydrator is required"),
        ((CLUSTER,), {"hydrator": "", "fleet": FLEET}, "hydrator is required"),
        ((CLUSTER,), {"hydrator": HYDRATOR, "fleet": FLEET, "storage_class": 5}, "storage_class must be a string"),
        ((CLUSTER,), {"hydrator": HYDRATOR, "fleet": FLEET, "options": ["image"]}, "options must be a mapping"),
        (
            (CLUSTER,),
            {"hydrator": HYDRATOR, "fleet": FLEET, "adopted_check": "yes"},
            "adopted_check must be true or false",
        ),
        ((CLUSTER,), {"hydrator": HYDRATOR, "fleet": FLEET, "workers": "many"}, "workers must be an integer"),
        ((CLUSTER,), {"hydrator": HYDRATOR, "fleet": FLEET, "colour": "blue"}, "unknown option(s) colour"),
        (("Bad_Name",), {"hydrator": HYDRATOR, "fleet": FLEET, "storage_class": "x"}, "must be a DNS label"),
        (
            ({"name": "bare-metal"},),
            {"hydrator": HYDRATOR, "fleet": FLEET},
            "cache 'qwen-2-5-0-5b' on cluster 'bare-metal'",
        ),
        ((CLUSTER,), {"hydrator": HYDRATOR}, "fleet is required: the fleet's name (gpufleet_fleet_name)"),
        ((CLUSTER,), {"hydrator": HYDRATOR, "fleet": "-bad-"}, "fleet: must be a Kubernetes label value"),
    ],
)
def test_errors_are_ansible_filter_errors_with_the_filter_name(args, kwargs, fragment):
    with pytest.raises(AnsibleFilterError) as err:
        cache_manifests(example_cache(), *args, **kwargs)
    assert str(err.value).startswith("cache_manifests: ")
    assert fragment in str(err.value)


def test_invalid_cache_names_the_field():
    data = example_cache()
    data["size"] = "twenty gigs"
    with pytest.raises(
        AnsibleFilterError, match=r"^cache_manifests: .*\.size: 'twenty gigs' is not a Kubernetes quantity"
    ):
        cache_manifests(data, CLUSTER, hydrator=HYDRATOR, fleet=FLEET)


def test_job_status_filter():
    job = {"metadata": {"name": "j"}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert cache_job_status(job)["status"] == "Ready"
    assert cache_job_status(None)["reason"] == "JobNotFound"
    assert cache_job_status(job, [])["finished"] is True
    with pytest.raises(AnsibleFilterError, match=r"^cache_job_status: the input must be a Job"):
        cache_job_status(["j"])
    with pytest.raises(AnsibleFilterError, match=r"^cache_job_status: pods must be a list"):
        cache_job_status(job, "pod-a")


def test_status_summary_filter():
    out = cache_status_summary(
        [{"cache": "q", "cluster": "a", "status": "Ready"}],
        caches=[{"name": "q", "candidate_clusters": ["a", "b"]}],
        hosts=("a", "b"),
    )
    assert out["summary"] == "1/2 ready (1 failed)"
    with pytest.raises(AnsibleFilterError, match=r"^cache_status_summary: "):
        cache_status_summary([{"cache": "q", "cluster": "a", "status": "Done"}])
    with pytest.raises(AnsibleFilterError, match=r"^cache_status_summary: "):
        cache_status_summary([], caches=[{"candidate_clusters": ["a"]}])


# --------------------------------------------------------------------------------------------------------------------
# Documentation sidecars
# --------------------------------------------------------------------------------------------------------------------


def doc(name: str) -> dict[str, Any]:
    return yaml.safe_load((FILTER_DIR / f"{name}.yml").read_text())


@pytest.mark.parametrize(
    "name",
    [
        "cache_manifests",
        "cache_job_status",
        "cache_status_summary",
        "cache_job_action",
        "cache_jobs_to_delete",
        "cache_adopted_volume",
    ],
)
def test_every_filter_has_a_doc_sidecar(name):
    data = doc(name)
    assert set(data) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    assert data["DOCUMENTATION"]["name"] == name
    assert f"gpufleet.serving.{name}" in data["EXAMPLES"]
    yaml.safe_load(data["EXAMPLES"])  # the examples are valid YAML


def test_cache_manifests_doc_lists_every_option_with_its_default():
    options = doc("cache_manifests")["DOCUMENTATION"]["options"]
    fields = set(HydrationOptions.model_fields)
    assert set(options) == {
        "_input",
        "cluster",
        "hydrator",
        "storage_class",
        "options",
        "adopted_check",
        "fleet",
        *fields,
    }
    defaults = HydrationOptions()
    for name in fields:
        value = getattr(defaults, name)
        value = list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, dict) else value
        assert options[name].get("default") == value, name


def test_cache_staged_narrows_a_follow_cache_to_the_placed_clusters_and_refuses_bad_input():
    data = example_fleet()
    data["caches"][0]["clusters"] = "follow"
    data["caches"][0]["candidate_clusters"] = ["a", "b", "c"]
    deployments = [{"name": "qwen-demo", "cache": data["caches"][0]["name"]}]
    staged = cache_staged(data["caches"], deployments, [{"deployment": "qwen-demo", "cluster": "b"}])
    assert staged[0]["candidate_clusters"] == ["b"] and staged[0]["may_stage_on"] == ["a", "b", "c"]
    with pytest.raises(AnsibleFilterError, match="cache_staged: replicas must be the plan's replica records"):
        cache_staged(data["caches"], deployments, {"deployment": "qwen-demo"})
    with pytest.raises(AnsibleFilterError, match="cache_staged: deployments must be the fleet's deployments"):
        cache_staged(data["caches"], "qwen-demo")
