"""Issue 33: a deployment's LoRA adapters are staged where the deployment is placed (as ``clusters: follow`` caches
are), their objects are adapter artifacts, and a changed adapter list changes the pod template, so the rollout
budget of rollout.py applies to it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from render_case import deployment, replica

from ansible_collections.gpufleet.serving.plugins.filter.cache_manifests import cache_manifests, cache_staged
from ansible_collections.gpufleet.serving.plugins.module_utils.adapters import (
    ANNOTATION_ARTIFACT_KIND,
    staged_adapter_caches,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cache_placement import BY_PLACEMENT, NO_PLAN
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import fleet_manifests
from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelDeployment, parse
from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import as_cache
from ansible_collections.gpufleet.serving.plugins.module_utils.rollout import plan_render

ADAPTERS = [
    {"name": "sql-lora", "source": {"hugging_face": {"repo": "org/qwen3-coder-sql-lora"}}, "revision": "abc123"},
    {"name": "docs-lora", "source": {"s3": {"uri": "s3://adapters/docs-lora"}}},
]
CLUSTERS = ["c1", "c2", "c3"]


def fleet_deployment(**kw: Any) -> dict[str, Any]:
    """A deployment as fleet_info returns it: normalised (defaults spelled out), with its candidate clusters."""
    dep = parse(ModelDeployment, {**deployment(), "adapters": ADAPTERS, **kw}, "gpufleet_model_deployments[0]")
    return {**dep.model_dump(by_alias=True, exclude_none=True), "candidate_clusters": CLUSTERS}


def test_each_adapter_is_staged_exactly_where_its_deployment_is_placed():
    chat = fleet_deployment()
    other = {**fleet_deployment(name="other"), "adapters": []}
    plan = [{"deployment": "chat", "cluster": "c2"}, {"deployment": "chat", "cluster": "c2"},
            {"deployment": "other", "cluster": "c1"}, {"deployment": "chat", "cluster": "elsewhere"}]  # fmt: skip
    staged = staged_adapter_caches([chat, other], plan)
    assert [c["name"] for c in staged] == ["chat-lora-sql-lora", "chat-lora-docs-lora"]
    for cache in staged:
        assert cache["candidate_clusters"] == ["c2"]  # never c1 (another deployment's), never outside its candidates
        assert cache["may_stage_on"] == CLUSTERS
        assert cache["staged_by"] == BY_PLACEMENT and cache["clusters"] == "follow"
        assert as_cache(cache).namespace == "ml"  # a valid cache once the staging keys are dropped
    assert staged[0]["adapter"] == {"deployment": "chat", "name": "sql-lora", "revision": "abc123"}
    assert staged[0]["source"]["hugging_face"]["revision"] == "abc123"  # pinned at the adapter's revision
    assert (
        staged[0]["staged_note"]
        == "adapter sql-lora of chat (cache chat-lora-sql-lora) follows placement: staged on c2"
    )
    # No replica placed: staged nowhere (the plan decided); no plan at all: every cluster it may use, said so.
    assert {tuple(c["candidate_clusters"]) for c in staged_adapter_caches([chat], [])} == {()}
    pre = staged_adapter_caches([chat], None)
    assert {(tuple(c["candidate_clusters"]), c["staged_by"]) for c in pre} == {(tuple(CLUSTERS), NO_PLAN)}
    assert "there is no plan to follow" in pre[0]["staged_note"]


def test_the_cache_staged_filter_appends_adapters_and_cache_manifests_marks_them_as_adapter_artifacts():
    chat = fleet_deployment()
    staged = cache_staged([], [chat], [{"deployment": "chat", "cluster": "c3"}])
    assert [(c["name"], c["candidate_clusters"]) for c in staged] == [
        ("chat-lora-sql-lora", ["c3"]), ("chat-lora-docs-lora", ["c3"]),
    ]  # fmt: skip
    objects = cache_manifests(staged[0], {"name": "c3", "cache_storage_class": "rwx"}, "print(1)", fleet="prod")
    assert sorted(o["kind"] for o in objects) == ["ConfigMap", "Job", "PersistentVolumeClaim"]
    for obj in objects:
        assert obj["metadata"]["annotations"][ANNOTATION_ARTIFACT_KIND] == "adapter"
        assert obj["metadata"]["annotations"]["gpufleet.io/adapter-revision"] == "abc123"
    pvc = next(o for o in objects if o["kind"] == "PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == "gpufleet-cache-chat-lora-sql-lora"  # the claim the engine mounts
    assert not any(ANNOTATION_ARTIFACT_KIND in (o["metadata"].get("annotations") or {}) for o in cache_manifests(
        {k: v for k, v in staged[0].items() if k != "adapter"}, "c3", "print(1)", fleet="prod", storage_class="rwx"
    ))  # fmt: skip


def test_bad_adapters_in_the_fleet_data_are_refused_naming_the_deployment():
    chat = fleet_deployment()
    chat["adapters"] = [{"name": "x", "source": {"s3": {"uri": "s3://a/b"}}, "revison": "1"}]
    with pytest.raises(FleetValidationError, match=r"deployment chat\.adapters\[0\]\.revison"):
        staged_adapter_caches([chat], None)


def render(dep: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    fleet = {"name": "prod", "clusters": [{"name": c} for c in CLUSTERS], "deployments": [dep], "caches": []}
    return fleet_manifests(fleet, [replica(dep, "c1", 0), replica(dep, "c2", 1), replica(dep, "c3", 2)])


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(ADAPTERS[:1], id="removed"),
        pytest.param([*ADAPTERS, {"name": "ops-lora", "source": {"s3": {"uri": "s3://adapters/ops"}}}], id="added"),
        pytest.param([{**ADAPTERS[0], "revision": "def456"}, ADAPTERS[1]], id="new-revision"),
    ],
)
def test_a_changed_adapter_list_rolls_the_replicas_under_the_rollout_budget(change):
    """Adding, removing or re-pinning an adapter changes every replica's pod template (flags, volumes, or the
    adapter's PVC), so the render-mode rollout updates them max_unavailable at a time."""
    before = deployment(replicas=3, adapters=ADAPTERS, rollout={"max_unavailable": 1})
    after = {**copy.deepcopy(before), "adapters": change}
    old, new = render(before), render(after)
    files = {c: [(f"{c}/{i}.yaml", o) for i, o in enumerate(objs)] for c, objs in old.items()}
    rollout = plan_render(new, files, {"chat": 1}, fleet="prod")
    updates = rollout.plan.updates()["chat"]
    assert [units for _wave, units in updates] == [["c1/chat-c1-0"], ["c2/chat-c2-1"], ["c3/chat-c3-2"]]
    assert rollout.held_back.keys() == {"c2", "c3"}  # their old templates stay until the next runs
    # The same list again changes nothing.
    same = plan_render(render(copy.deepcopy(before)), files, {"chat": 1}, fleet="prod")
    assert same.plan.updates() == {}
