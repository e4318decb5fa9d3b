"""Filters fleet_identity, fleet_owned and fleet_pods (teardown.yml and the model_cache role select a fleet's
objects with them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.filter.fleet_identity import (
    FilterModule,
    fleet_identity,
    fleet_owned,
    fleet_pods,
)

FILTER_DIR = Path(__file__).resolve().parents[4] / "plugins" / "filter"
OWNER = {"app.kubernetes.io/managed-by": "gpufleet.serving"}


def obj(kind, name, fleet=None, namespace="ml", **labels):
    lab = {**OWNER, **labels}
    if fleet:
        lab["gpufleet.io/fleet"] = fleet
    return {"kind": kind, "metadata": {"name": name, "namespace": namespace, "labels": lab}}


def test_filters_are_registered_and_documented():
    filters = FilterModule().filters()
    assert filters == {"fleet_identity": fleet_identity, "fleet_owned": fleet_owned, "fleet_pods": fleet_pods}
    for name in filters:
        doc = yaml.safe_load((FILTER_DIR / f"{name}.yml").read_text())
        assert doc["DOCUMENTATION"]["name"] == name


def test_fleet_identity_validates_name_and_adoption():
    assert fleet_identity("prod") == {"name": "prod", "adopt_unlabelled": None}
    assert fleet_identity("prod", "yes") == {"name": "prod", "adopt_unlabelled": True}
    with pytest.raises(AnsibleFilterError, match=r"^fleet_identity: gpufleet_fleet_name: is required"):
        fleet_identity(None)
    with pytest.raises(AnsibleFilterError, match=r"gpufleet_adopt_unlabelled: must be true or false"):
        fleet_identity("prod", "later")


def test_fleet_owned_keeps_this_fleets_objects():
    objects = [obj("Service", "a", "blue"), obj("Service", "b", "green"), obj("Job", "c", "blue")]
    assert fleet_owned(objects, {"name": "blue"}) == [objects[0], objects[2]]
    assert fleet_owned([], {"name": "blue", "adopt_unlabelled": None}) == []
    assert fleet_owned(None, {"name": "blue"}) == []


def test_fleet_owned_needs_a_decision_about_unlabelled_objects():
    objects = [obj("Service", "legacy"), obj("Service", "a", "blue")]
    with pytest.raises(AnsibleFilterError) as err:
        fleet_owned(objects, {"name": "blue"}, "lf-alpha")
    assert str(err.value).startswith("fleet_owned: 1 object(s) carry")
    assert "lf-alpha Service ml/legacy" in str(err.value)
    assert fleet_owned(objects, {"name": "blue", "adopt_unlabelled": True}) == objects
    assert fleet_owned(objects, {"name": "blue", "adopt_unlabelled": False}) == [objects[1]]
    with pytest.raises(AnsibleFilterError, match=r"^fleet_owned: fleet must be"):
        fleet_owned(objects, "blue")
    with pytest.raises(AnsibleFilterError, match=r"^fleet_owned: the input must be a list"):
        fleet_owned({"kind": "Service"}, {"name": "blue"})


def test_fleet_pods_are_found_through_the_fleets_replicas_and_jobs():
    owned = [
        obj("Deployment", "chat-0a1b2-main", "blue", **{"gpufleet.io/replica": "chat-0a1b2"}),
        {"kind": "Job", "metadata": {"name": "gpufleet-hydrate-q-1", "namespace": "ml", "labels": OWNER}},
    ]
    pods = [
        obj("Pod", "p1", **{"gpufleet.io/replica": "chat-0a1b2"}),
        obj("Pod", "p2", **{"gpufleet.io/replica": "chat-9f9f9"}),  # another fleet's replica
        obj("Pod", "p3", namespace="other", **{"gpufleet.io/replica": "chat-0a1b2"}),  # same name, other namespace
        obj("Pod", "p4", **{"batch.kubernetes.io/job-name": "gpufleet-hydrate-q-1"}),
        obj("Pod", "p5", **{"batch.kubernetes.io/job-name": "gpufleet-hydrate-q-2"}),
    ]
    assert [p["metadata"]["name"] for p in fleet_pods(pods, owned)] == ["p1", "p4"]
    assert fleet_pods([], owned) == [] and fleet_pods(pods, []) == []
