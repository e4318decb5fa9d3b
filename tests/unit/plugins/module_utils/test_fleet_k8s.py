"""fleet_k8s's decisions: what is current (no write), what is held, what is pruned, what is recorded."""

from __future__ import annotations

import copy

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import ANNOTATION_APPLIED_DIGEST
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet_k8s import (
    applied_digest,
    contains,
    held_deployments,
    is_current,
    prune_candidates,
    recorded_placement,
    stamped,
)


def obj(kind="Deployment", name="chat-1", deployment="chat", **spec):
    return {
        "apiVersion": "apps/v1" if kind == "Deployment" else "v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "ml", "labels": {"gpufleet.io/deployment": deployment}},
        "spec": spec or {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i:1"}]}}},
    }


def as_stored(desired):
    """What the API server returns: the applied object plus defaults, status and server-set metadata."""
    live = copy.deepcopy(desired)
    live["metadata"].update(uid="u-1", resourceVersion="7", generation=1)
    live["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "1"
    live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    live["spec"]["strategy"] = {"type": "RollingUpdate"}
    live["status"] = {"readyReplicas": 1}
    return live


def test_an_unchanged_object_is_current_despite_defaults_and_status():
    want = stamped(obj())
    assert is_current(as_stored(want), want)


def test_a_value_changed_by_hand_is_not_current():
    want = stamped(obj())
    live = as_stored(want)
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "i:hand-edited"
    assert not is_current(live, want)


def test_a_field_the_rendering_dropped_is_not_current():
    # the live object still holds every value the new rendering sets, but it was applied from another rendering
    # (which set a field the new one drops): only a new apply removes that field
    old = obj(replicas=1, paused=True)
    new = stamped(obj(replicas=1))
    live = {**stamped(old), "status": {}}
    assert contains(live["spec"], new["spec"])
    assert not is_current(live, new)


def test_missing_or_unstamped_objects_are_not_current():
    want = stamped(obj())
    assert not is_current(None, want)
    unstamped = as_stored(want)
    del unstamped["metadata"]["annotations"][ANNOTATION_APPLIED_DIGEST]
    assert not is_current(unstamped, want)


def test_contains_compares_types_and_list_lengths():
    assert contains({"a": 1, "b": 2}, {"a": 1})
    assert not contains({"a": True}, {"a": 1})  # a bool is not the int 1
    assert not contains({"a": "1"}, {"a": 1})
    assert not contains({"a": [1, 2]}, {"a": [1]})  # an item added by someone else is a change
    assert contains({"a": [{"x": 1, "y": 2}]}, {"a": [{"x": 1}]})
    assert not contains({}, {"a": None})


def test_the_digest_ignores_key_order_and_its_own_annotation():
    a = obj()
    b = {"spec": a["spec"], "metadata": a["metadata"], "kind": a["kind"], "apiVersion": a["apiVersion"]}
    assert applied_digest(a) == applied_digest(b) == applied_digest(stamped(a))
    assert applied_digest(a) != applied_digest(obj(replicas=2))


def test_stamping_does_not_change_the_rendered_object():
    a = obj()
    before = copy.deepcopy(a)
    stamped(a)
    assert a == before


def test_held_deployments_come_from_failed_clusters_and_pending_workloads():
    desired = {"a": [obj(deployment="chat")], "b": [obj(deployment="tp8")], "c": [obj(deployment="gang")]}
    pending = [{"deployment": "gang", "message": "…"}]
    assert held_deployments(desired, ["a"], pending) == ["chat", "gang"]
    assert held_deployments(desired, [], []) == []


def test_prune_keeps_desired_and_held_objects_in_listed_order():
    existing = [obj(name="keep"), obj(name="old-chat"), obj(name="old-tp8", deployment="tp8"), obj("Service", "svc")]
    desired = [obj(name="keep")]
    assert [o["metadata"]["name"] for o in prune_candidates(existing, desired, ["tp8"])] == ["old-chat", "svc"]


def test_recorded_placement_keeps_the_last_record_of_a_failed_cluster():
    previous = [{"cluster": "x", "replica": "old-x"}, {"cluster": "y", "replica": "old-y"}]
    replicas = [{"cluster": "x", "replica": "new-x"}, {"cluster": "y", "replica": "new-y"}]
    assert recorded_placement(replicas, previous, ["x"]) == [
        {"cluster": "y", "replica": "new-y"},
        {"cluster": "x", "replica": "old-x"},
    ]
    assert recorded_placement(replicas, previous, []) == replicas
