"""The replica record: one validation, one annotation form, checks against the deployment."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelDeployment
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import ReplicaRecord, check_records

TEMPLATE = {"spec": {"containers": [{"name": "engine", "image": "x"}]}}
DEP = ModelDeployment.model_validate(
    {
        "name": "chat",
        "namespace": "ml",
        "replicas": 1,
        "engines": [
            {
                "name": "main",
                "members": [
                    {"role": "Leader", "node_selector": {"devices": [{"name": "gpu"}]}, "template": TEMPLATE},
                    {"role": "Worker", "worker": {"nodes": 1}, "template": TEMPLATE},
                ],
            }
        ],
    }
)


def record(**kw):
    members = [
        {
            "role": "Worker",
            "pool": "l4",
            "nodes": 1,
            "device_requests": [],
        },
        {
            "role": "Leader",
            "pool": "l4",
            "nodes": 1,
            "device_requests": [
                {"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 1, "selectors": [{"cel": "true"}]}
            ],
        },
    ]
    data = {
        "name": "chat-abcde",
        "deployment": "chat",
        "namespace": "ml",
        "cluster": "c1",
        "index": 0,
        "engines": [{"name": "main", "copies": 1, "members": members}],
    }
    data.update(kw)
    return data


def test_annotation_round_trip_drops_device_requests_and_sorts_keys():
    rec = ReplicaRecord.parse(record(), "r")
    text = rec.to_annotation()
    assert text == json.dumps(json.loads(text), sort_keys=True)
    back = ReplicaRecord.from_annotation(text)
    assert back.engines[0].members[0].device_requests is None
    assert back.to_compact() == rec.to_compact()
    assert back.to_dict(like=rec) == rec.to_dict()  # unknown requests are taken from the replica as placed now
    assert back.to_dict()["engines"][0]["members"][1]["device_requests"] == []


def test_selectors_are_read_in_both_spellings():
    rec = ReplicaRecord.parse(record(), "r")
    assert rec.engines[0].members[1].device_requests[0].selectors == ["true"]


@pytest.mark.parametrize(
    ("change", "path", "reason"),
    [
        ({"index": "0"}, "r.index", "must be an integer >= 0 (got '0')"),
        ({"index": True}, "r.index", "must be an integer >= 0"),
        ({"index": -1}, "r.index", "must be an integer >= 0"),
        ({"cluster": ""}, "r.cluster", ""),
        ({"engines": "x"}, "r.engines", "must be a list"),
        ({"engines": [{"name": "main", "copies": 0, "members": []}]}, "r.engines[0].copies", "must be an integer >= 1"),
        ({"engines": [{"name": "main", "members": [{"role": "Leader", "pool": None, "nodes": 0}]}]},
         "r.engines[0].members[0].pool", "must be the node pool's name"),
    ],
)  # fmt: skip
def test_one_validation_for_every_reader(change, path, reason):
    with pytest.raises(FleetValidationError) as info:
        ReplicaRecord.parse(record(**change), "r")
    assert any(p == path and reason in r for p, r in info.value.errors), info.value.errors


def test_a_record_that_is_not_a_mapping():
    with pytest.raises(FleetValidationError, match=r"^r: must be a replica mapping \(got str\)"):
        ReplicaRecord.parse("x", "r")


def test_ordered_like_the_deployment():
    rec = ReplicaRecord.parse(record(), "r")
    assert check_records([rec], DEP) is None
    assert [m.role for m in rec.ordered_like(DEP).engines[0].members] == ["Leader", "Worker"]


def test_checks_against_the_deployment():
    rec = ReplicaRecord.parse(record(deployment="other", name="Bad_Name"), "r")
    errors = dict(rec.check_against(DEP, "replicas[0]"))
    assert "replicas[0].deployment" in errors and "replicas[0].name" in errors


def test_an_unreadable_annotation_is_a_gpufleet_error():
    with pytest.raises(GpufleetError, match=r"svc carries an unreadable gpufleet\.io/placement annotation"):
        ReplicaRecord.from_annotation("[]", "svc")
