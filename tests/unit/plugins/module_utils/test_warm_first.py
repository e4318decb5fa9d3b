"""Warm-first placement and cold starts (issue 30, item 2): among equally loaded clusters a new replica goes where its
cache is hydrated; every replica of a deployment mounting a cache is reported cold or warm, a cold one with an ETA."""

from __future__ import annotations

import pytest
from example_fleet import example_fleet
from module_utils_tests import builders

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ANNOTATION_HYDRATED_SOURCE,
    ANNOTATION_HYDRATION_SECONDS,
    LABEL_CACHE,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import job_status
from ansible_collections.gpufleet.serving.plugins.module_utils.warm_first import (
    HYDRATED,
    STAGED,
    Warmth,
    cold_lines,
    cold_starts,
    source_key,
    warmth_from_volumes,
)

fleet_dict = builders("fleet/test_fleet_deploy").fleet_dict

CACHE = "qwen-2-5-0-5b"
PROD = ["eks-us-east-1", "gke-us-central1", "onprem-a"]


def prod_fleet(replicas: int = 1, throughput: dict | None = None) -> dict:
    data = example_fleet()
    del data["caches"][0]["clusters"]  # follow
    qwen = data["deployments"][0]
    qwen["clusters"] = "gpufleet_clusters:&prod"
    qwen["replicas"] = replicas
    for host, rate in (throughput or {}).items():
        data["hosts"][host]["gpufleet_hydration_throughput"] = rate
    return fleet_dict(data)


def pvc(cache: str, source: str | None, seconds: int | None = None, kind: str = "PersistentVolumeClaim") -> dict:
    ann = {}
    if source is not None:
        ann[ANNOTATION_HYDRATED_SOURCE] = source
    if seconds is not None:
        ann[ANNOTATION_HYDRATION_SECONDS] = str(seconds)
    return {
        "kind": kind,
        "metadata": {"name": f"gpufleet-cache-{cache}", "labels": {LABEL_CACHE: cache}, "annotations": ann},
    }


def qwen_clusters(outcome) -> list[str]:
    return sorted(r["cluster"] for r in outcome.replicas if r["deployment"] == "qwen-demo")


def test_the_source_key_is_uri_and_revision():
    fleet = prod_fleet()
    assert source_key(fleet["caches"][0]) == "hf://Qwen/Qwen2.5-0.5B-Instruct@main"


def test_a_volume_is_warm_only_when_it_holds_the_current_source():
    fleet = prod_fleet()
    key = source_key(fleet["caches"][0])
    warmth = warmth_from_volumes(
        [
            ("onprem-a", pvc(CACHE, key, seconds=120)),
            ("gke-us-central1", pvc(CACHE, key.replace("@main", "@v0"))),  # an older revision: cold
            ("eks-us-east-1", pvc(CACHE, None)),  # never hydrated: cold
            ("gke-europe-west4", pvc(CACHE, key, kind="ConfigMap")),  # not a volume
            ("gke-europe-west4", pvc("another-cache", key)),  # not a cache of the fleet
        ],
        fleet["caches"],
    )
    assert warmth.warm == {CACHE: {"onprem-a"}}
    assert warmth.seconds == {CACHE: {"onprem-a": 120}}
    staged = warmth_from_volumes([("eks-us-east-1", pvc(CACHE, None))], fleet["caches"], STAGED)
    assert staged.warm == {CACHE: {"eks-us-east-1"}} and staged.basis == STAGED
    with pytest.raises(GpufleetError, match="warmth basis must be hydrated or staged"):
        warmth_from_volumes([], fleet["caches"], "maybe")


def test_a_new_replica_goes_to_the_cluster_where_its_cache_is_hydrated():
    fleet = prod_fleet(replicas=1)
    assert qwen_clusters(place_fleet(fleet, [])) == ["eks-us-east-1"]  # by name, without warmth
    warmth = Warmth(warm={CACHE: {"onprem-a"}})
    outcome = place_fleet(fleet, [], warmth=warmth)
    assert qwen_clusters(outcome) == ["onprem-a"]
    assert [c for c in outcome.cold if c["deployment"] == "qwen-demo"] == [
        {
            "deployment": "qwen-demo",
            "cluster": "onprem-a",
            "index": 0,
            "cache": CACHE,
            "cold": False,
            "basis": HYDRATED,
            "eta_seconds": 0,
            "throughput": None,
            "throughput_source": None,
        }
    ]


def test_spreading_still_comes_first_and_an_existing_replica_never_moves_for_a_warm_cache():
    fleet = prod_fleet(replicas=3)
    warmth = Warmth(warm={CACHE: {"onprem-a"}})
    outcome = place_fleet(fleet, [], warmth=warmth)
    assert qwen_clusters(outcome) == PROD  # one each: the warm cluster takes no second replica first
    # An existing replica on a cold cluster stays where it is.
    one = prod_fleet(replicas=1)
    first = place_fleet(one, [])
    again = place_fleet(one, first.replicas, warmth=warmth)
    assert qwen_clusters(again) == ["eks-us-east-1"]
    assert next(c for c in again.cold if c["deployment"] == "qwen-demo")["cold"] is True


def test_a_cold_replica_gets_an_eta_from_the_declared_then_the_measured_throughput():
    fleet = prod_fleet(replicas=1, throughput={"eks-us-east-1": "100Mi"})
    outcome = place_fleet(fleet, [], warmth=Warmth())
    start = next(c for c in outcome.cold if c["deployment"] == "qwen-demo")
    assert start["cluster"] == "eks-us-east-1" and start["cold"] is True
    assert start["eta_seconds"] == round(20 * 1024 / 100)  # 20Gi / 100Mi/s = 205 s
    assert start["throughput_source"] == "declared"
    # A hydration measured there (another cache's volume would count the same) wins over the declaration: 20Gi in 50 s.
    measured = Warmth(seconds={CACHE: {"eks-us-east-1": 50}})
    start = next(c for c in cold_starts(fleet, outcome.replicas, measured) if c["deployment"] == "qwen-demo")
    assert (start["eta_seconds"], start["throughput_source"]) == (50, "measured")
    # Neither: the ETA is unknown, and the line says what to set.
    bare = prod_fleet(replicas=1)
    unknown = place_fleet(bare, [], warmth=Warmth())
    lines = cold_lines(unknown.cold, bare["caches"])
    assert lines == [
        "qwen-demo replica (eks-us-east-1, 0): cold start, cache qwen-2-5-0-5b (20Gi) not hydrated; "
        "ETA unknown (no measured hydration there; set gpufleet_hydration_throughput)"
    ]


def test_explain_shows_the_cold_replicas_of_an_explained_deployment():
    fleet = prod_fleet(replicas=1, throughput={"eks-us-east-1": "100Mi"})
    outcome = place_fleet(fleet, [], warmth=Warmth(), explain=["qwen-demo"])
    assert (
        "  qwen-demo replica (eks-us-east-1, 0): cold start, cache qwen-2-5-0-5b (20Gi) not hydrated; "
        "ETA ~3 min at 100 MiB/s (declared)"
    ) in outcome.explain(["qwen-demo"])


def test_a_bad_declared_throughput_is_an_error_naming_the_host_variable():
    data = example_fleet()
    data["hosts"]["onprem-a"]["gpufleet_hydration_throughput"] = "fast"
    with pytest.raises(GpufleetError, match="gpufleet_hydration_throughput"):
        fleet_dict(data)


def test_a_succeeded_job_reports_how_long_it_took():
    job = {
        "metadata": {"name": "gpufleet-hydrate-x"},
        "status": {
            "conditions": [{"type": "Complete", "status": "True"}],
            "startTime": "2026-11-26T01:00:00Z",
            "completionTime": "2026-11-26T01:07:30Z",
        },
    }
    assert job_status(job, [])["seconds"] == 450
    job["status"]["completionTime"] = "not a time"
    assert "seconds" not in job_status(job, [])


def test_the_report_document_lists_the_cold_replicas():
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet import view as fleet_view

    fleet = prod_fleet(replicas=1, throughput={"eks-us-east-1": "100Mi"})
    outcome = place_fleet(fleet, [], warmth=Warmth())
    view = fleet_view.build_view(fleet, {"replicas": outcome.replicas, "cold": outcome.cold})
    doc = fleet_view.report_document(view, {"cold": outcome.cold}, [])
    assert [(c["deployment"], c["cluster"], c["cold"], c["eta_seconds"]) for c in doc["cold"]] == [
        ("qwen-demo", "eks-us-east-1", True, 205)
    ]
