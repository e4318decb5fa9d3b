"""Validation messages name the list items on their paths and suggest the name a typo meant (issue 31)."""

from __future__ import annotations

from typing import Any

import pytest
from example_fleet import example_fleet

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.suggest import (
    did_you_mean,
    index_path,
    name_errors,
    named_path,
)

GROUPS = {
    "gke-us-central1": ["gpufleet_clusters", "gke", "prod", "us"],
    "gke-europe-west4": ["gpufleet_clusters", "gke", "staging", "eu"],
    "eks-us-east-1": ["gpufleet_clusters", "eks", "prod", "us"],
    "onprem-a": ["gpufleet_clusters", "onprem", "prod"],
}


def errors(data: dict[str, Any], **kwargs: Any) -> dict[str, str]:
    with pytest.raises(FleetValidationError) as info:
        validate_fleet(
            classes=data["classes"],
            hosts=data["hosts"],
            deployments=data["deployments"],
            caches=data["caches"],
            host_groups=GROUPS,
            **kwargs,
        )
    # the message is the errors, one "path: reason" line each
    assert str(info.value).splitlines()[0] == f"{info.value.errors[0][0]}: {info.value.errors[0][1]}"
    return dict(info.value.errors)


DATA = [
    {"name": "a"},
    {
        "name": "qwen2-5-7b",
        "engines": [
            {"name": "tp8", "members": [{"role": "Leader"}, {"role": "Boss", "template": {"c": [{"name": "vllm"}]}}]}
        ],
    },
]


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("d[1].engines[0].members[0].role", "d[1] (qwen2-5-7b).engines[0] (tp8).members[0].role"),
        (
            "d[1].engines[0].members[1].template.c[0].image",
            "d[1] (qwen2-5-7b).engines[0] (tp8).members[1] (Boss).template.c[0] (vllm).image",
        ),
        ("d[1].name", "d[1].name"),  # the name itself is what the message is about
        ("d[7].replicas", "d[7].replicas"),  # beyond the data: as it was
        ("d[1].engines[3]", "d[1] (qwen2-5-7b).engines[3]"),
        ("d", "d"),
        ("other[0].x", "other[0].x"),
    ],
)
def test_named_path(path, named):
    assert named_path(path, "d", DATA) == named
    assert index_path(named) == path


def test_names_are_shown_only_when_they_are_plain_names():
    data = [{"name": "a b"}, {"name": "<x>"}, {"name": 3}, {"key": "nvidia.com/gpu"}]
    assert [named_path(f"t[{i}].effect", "t", data) for i in range(4)] == [
        "t[0].effect",
        "t[1].effect",
        "t[2].effect",
        "t[3] (nvidia.com/gpu).effect",
    ]
    assert name_errors([("t[3].effect", "r"), ("u[0]", "r")], {"t": data}) == [
        ("t[3] (nvidia.com/gpu).effect", "r"),
        ("u[0]", "r"),
    ]


def test_did_you_mean():
    assert (
        did_you_mean("h100-8x", ["h100-1x", "h100-8x-ib"]) == " (did you mean 'h100-8x-ib'? known: h100-1x, h100-8x-ib)"
    )
    assert did_you_mean("l4-1", ["l4-1x", "a10g-1x"]) == " (did you mean 'l4-1x'? known: a10g-1x, l4-1x)"
    assert did_you_mean("leader", ["Leader", "Worker"]) == " (did you mean 'Leader'? known: Leader, Worker)"
    assert did_you_mean("zzz", ["a10g-1x"]) == " (known: a10g-1x)"
    assert did_you_mean("x", []) == " (known: none defined)"


def test_every_message_about_a_list_item_names_it():
    data = example_fleet()
    deepseek = data["deployments"][2]
    deepseek["engines"][0]["members"][1]["template"]["spec"]["containers"][0].pop("image")
    data["hosts"]["onprem-a"]["gpufleet_node_pools"][0]["node_count"] = -1
    assert set(errors(data)) == {
        "gpufleet_model_deployments[2] (deepseek-v3).engines[0] (pp2).members[1] (Worker).template.spec.containers[0] "
        "(engine)",
        "hostvars['onprem-a'].gpufleet_node_pools[0] (dgx).node_count",
    }
    data = example_fleet()
    data["deployments"][2]["engines"][0]["members"][0]["node_selector"]["devices"][0]["count"] = 0
    path = "gpufleet_model_deployments[2] (deepseek-v3).engines[0] (pp2).members[0] (Leader).node_selector.devices[0]"
    assert f"{path} (gpu).count" in errors(data)


def test_unknown_names_suggest_the_closest_known_one():
    data = example_fleet()
    data["hosts"]["gke-us-central1"]["gpufleet_node_pools"][0]["class"] = "l4-1"
    data["deployments"][0]["cache"] = "qwen-2-5-0-5"
    data["deployments"][1]["engines"][0]["members"][0]["role"] = "Standalon"
    found = errors(data)
    assert found["hostvars['gke-us-central1'].gpufleet_node_pools[0] (l4).class"].startswith(
        "unknown inference class 'l4-1' (did you mean 'l4-1x'? known: "
    )
    assert found["gpufleet_model_deployments[0] (qwen-demo).cache"].startswith(
        "unknown model cache 'qwen-2-5-0-5' (did you mean 'qwen-2-5-0-5b'? known: qwen-2-5-0-5b"
    )
    assert found["gpufleet_model_deployments[1] (llama-70b).engines[0] (tp8).members[0].role"] == (
        "must be one of Standalone, Leader, Worker (got 'Standalon'; did you mean 'Standalone'?)"
    )


def test_a_host_pattern_with_a_misspelt_group_suggests_the_group():
    data = example_fleet()
    data["deployments"][1]["clusters"] = "gpufleet_clusters:&prdo"
    found = errors(data, resolve_pattern=lambda p: [] if "prdo" in p else sorted(GROUPS))
    reason = found["gpufleet_model_deployments[1] (llama-70b).clusters"]
    assert reason.startswith("host pattern 'gpufleet_clusters:&prdo' matches no cluster of the fleet")
    assert "; 'prdo' is not a group or cluster of the fleet (did you mean 'prod'? known: " in reason


def test_a_class_device_is_named_under_its_class():
    data = example_fleet()
    data["classes"]["l4-1x"]["devices"][0]["count"] = 0
    assert any(p.startswith("gpufleet_inference_classes['l4-1x'].devices[0] (gpu).count") for p in errors(data))
