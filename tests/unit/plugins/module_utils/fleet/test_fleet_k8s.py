"""fleet.reconcile's decisions: what is current (no write), what is held, what is pruned, what is recorded."""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import ANNOTATION_APPLIED_DIGEST
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import (
    ReconcileOptions,
    applied_digest,
    applied_fields,
    contains,
    held_deployments,
    is_current,
    prune_candidates,
    reconcile_fleet,
    recorded_placement,
    same_value,
    skipped_holds,
    stamped,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import _reason as fleet_k8s_reason

MANAGER = "gpufleet"
# The lists Kubernetes merges by key (x-kubernetes-list-map-keys / patchMergeKey) among those a pod template uses, as
# server-side apply names their items in a manager's field set (k:{...}); every other list is atomic.
LIST_KEYS = {
    "containers": ("name",),
    "initContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "ports": ("containerPort", "protocol"),
    "resourceClaims": ("name",),
    "claims": ("name",),
    "imagePullSecrets": ("name",),
}

KEY_DEFAULTS = {"protocol": "TCP"}  # a key field the API server defaults before it records the key
# Maps and structs server-side apply owns as a whole (structType/mapType=atomic): one leaf in the field set.
ATOMIC = {"selector", "nodeSelector", "fieldRef", "secretKeyRef", "configMapKeyRef"}


def fields_v1(value, key=None, list_keys=None):
    """The field set server-side apply records for an applied object (structured-merge-diff's ToFieldSet, as
    managedFields' fieldsV1 serialises it) - identity fields left out, as the API server does."""
    list_keys = LIST_KEYS if list_keys is None else list_keys
    if isinstance(value, dict) and key in ATOMIC:
        return {}
    if isinstance(value, dict):
        return {
            f"f:{k}": fields_v1(v, k, list_keys)
            for k, v in value.items()
            if not (key is None and k in ("apiVersion", "kind"))
            and not (key == "metadata" and k in ("name", "namespace"))
        }
    if isinstance(value, list) and key in list_keys:
        return {
            "k:" + json.dumps({f: item.get(f, KEY_DEFAULTS.get(f)) for f in list_keys[key]}, separators=(",", ":")): {
                ".": {},
                **fields_v1(item, None, list_keys),
            }
            for item in value
        }
    return {}


def obj(kind="Deployment", name="chat-1", deployment="chat", **spec):
    return {
        "apiVersion": "apps/v1" if kind == "Deployment" else "v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "ml", "labels": {"gpufleet.io/deployment": deployment}},
        "spec": spec or {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i:1"}]}}},
    }


def as_stored(desired, manager=MANAGER):
    """What the API server returns: the applied object plus defaults, status and server-set metadata, and the field
    set ``manager`` owns (managedFields)."""
    live = copy.deepcopy(desired)
    fields = fields_v1(desired)
    fields["f:metadata"] = {k: v for k, v in fields["f:metadata"].items() if k not in ("f:name", "f:namespace")}
    live["metadata"].update(
        uid="u-1",
        resourceVersion="7",
        generation=1,
        managedFields=[
            {
                "manager": manager,
                "operation": "Apply",
                "apiVersion": desired["apiVersion"],
                "fieldsType": "FieldsV1",
                "fieldsV1": fields,
            },
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": desired["apiVersion"],
                "subresource": "status",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:readyReplicas": {}}},
            },
        ],
    )
    live["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "1"
    live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    live["spec"]["strategy"] = {"type": "RollingUpdate"}
    live["status"] = {"readyReplicas": 1}
    return live


def test_an_unchanged_object_is_current_despite_defaults_and_status():
    want = stamped(obj())
    assert is_current(as_stored(want), want, MANAGER)


def test_a_value_changed_by_hand_is_not_current():
    want = stamped(obj())
    live = as_stored(want)
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "i:hand-edited"
    assert not is_current(live, want, MANAGER)


def test_a_field_the_rendering_dropped_is_not_current():
    # the live object still holds every value the new rendering sets, but it was applied from another rendering
    # (which set a field the new one drops): only a new apply removes that field
    old = obj(replicas=1, paused=True)
    new = stamped(obj(replicas=1))
    live = {**stamped(old), "status": {}}
    assert contains(live["spec"], new["spec"])
    assert not is_current(live, new, MANAGER)


def test_missing_or_unstamped_objects_are_not_current():
    want = stamped(obj())
    assert not is_current(None, want, MANAGER)
    unstamped = as_stored(want)
    del unstamped["metadata"]["annotations"][ANNOTATION_APPLIED_DIGEST]
    assert not is_current(unstamped, want, MANAGER)


def test_contains_compares_types_and_list_lengths():
    assert contains({"a": 1, "b": 2}, {"a": 1})
    assert not contains({"a": True}, {"a": 1})  # a bool is not the int 1
    assert not contains({"a": "x1"}, {"a": 1})
    assert not contains({"a": "1"}, {"a": True})
    assert not contains({"a": [1, 2]}, {"a": [1]})  # an atomic list: an item added by someone else is a change
    assert contains({"a": [{"x": 1, "y": 2}]}, {"a": [{"x": 1}]})
    assert not contains({}, {"a": None})


# --- quantities (issue 23) -----------------------------------------------------------------------------------------


def pod_template_object(resources, size_limit="1Gi"):
    """A Deployment whose pod template sets ``resources`` and an emptyDir ``sizeLimit`` as a user writes them."""
    container = {
        "name": "engine",
        "image": "vllm:1",
        "args": ["--model=m"],
        "env": [
            {"name": "OURS", "value": "1"},
            {"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['rank']"}}},
        ],
        "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
        "resources": resources,
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    return obj(
        replicas=1,
        selector={"matchLabels": {"gpufleet.io/replica": "chat-1"}},  # atomic: owned as a whole
        template={
            "metadata": {"labels": {"gpufleet.io/replica": "chat-1"}},
            "spec": {
                "containers": [container],
                "nodeSelector": {"gpufleet.io/pool": "l4"},  # atomic too
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": size_limit}}],
            },
        },
    )


def normalised(live, path, value):
    """Set what the API server stores at ``path`` (a tuple of keys and indexes)."""
    *parents, last = path
    node = live
    for p in parents:
        node = node[p]
    node[last] = value
    return live


CONTAINER = ("spec", "template", "spec", "containers", 0)


@pytest.mark.parametrize(
    ("resources", "stored"),
    [
        ({"requests": {"cpu": 2}}, {"requests": {"cpu": "2"}}),
        ({"requests": {"cpu": "0.5"}}, {"requests": {"cpu": "500m"}}),
        ({"requests": {"cpu": 0.5, "memory": "1024Mi"}}, {"requests": {"cpu": "500m", "memory": "1Gi"}}),
        ({"limits": {"cpu": "2000m", "memory": "1e9"}}, {"limits": {"cpu": "2", "memory": "1G"}}),
        (
            {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}},
            {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
        ),
    ],
)
def test_a_quantity_the_api_server_normalised_is_current(resources, stored):
    want = stamped(pod_template_object(resources, size_limit="1024Mi"))
    live = normalised(as_stored(want), (*CONTAINER, "resources"), stored)
    normalised(live, ("spec", "template", "spec", "volumes", 0, "emptyDir", "sizeLimit"), "1Gi")
    assert is_current(live, want, MANAGER)


def test_a_quantity_changed_to_another_value_is_not_current():
    want = stamped(pod_template_object({"requests": {"cpu": "0.5"}}))
    live = normalised(as_stored(want), (*CONTAINER, "resources"), {"requests": {"cpu": "501m"}})
    assert not is_current(live, want, MANAGER)


def test_quantities_compare_as_quantities_only_where_they_are_quantities():
    assert same_value("500m", "0.5", quantity=True)
    assert same_value("2", 2)  # a number the API server stored as a string
    assert same_value("1Gi", "1024Mi", quantity=True)
    assert not same_value("1Gi", "1G", quantity=True)
    assert not same_value("500m", "0.5")  # two strings elsewhere (an env value) are just strings
    assert not same_value("abc", 2)
    assert not same_value("1", True)
    assert not same_value(2, "2")  # the API server never turns a string into a number
    # only a resources map's values, not every "requests" field, are quantities: a DRA claim's requests is a list
    assert contains({"requests": {"cpu": "500m"}}, {"requests": {"cpu": "0.5"}})
    assert not contains({"env": {"cpu": "500m"}}, {"env": {"cpu": "0.5"}})
    assert contains({"emptyDir": {"sizeLimit": "1Gi"}}, {"emptyDir": {"sizeLimit": "1024Mi"}})


# --- fields of other managers (issue 23) ---------------------------------------------------------------------------


def test_an_env_var_another_manager_added_is_not_ours_to_judge():
    # kubectl set env EXTRA=1: an Update by another manager adds an item to a list merged by name; our field set is
    # unchanged (the added fields are the other manager's)
    want = stamped(pod_template_object({"requests": {"cpu": 2}}))
    live = as_stored(want)
    env = live["spec"]["template"]["spec"]["containers"][0]["env"]
    env.insert(0, {"name": "EXTRA", "value": "1"})
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    assert is_current(live, want, MANAGER)
    # and so are a container, a port, a volume and a volumeMount a mutating webhook adds
    pod = live["spec"]["template"]["spec"]
    pod["containers"].append({"name": "sidecar", "image": "proxy:1"})
    pod["containers"][0]["ports"].append({"containerPort": 9090, "protocol": "TCP"})
    pod["containers"][0]["volumeMounts"].append({"name": "token", "mountPath": "/var/run/token"})
    pod["volumes"].append({"name": "token", "projected": {"sources": []}})
    assert is_current(live, want, MANAGER)


def test_our_value_another_manager_changed_is_not_current():
    # kubectl set env OURS=2 takes the field from us (an update that changes a field takes it from its appliers)
    want = stamped(pod_template_object({"requests": {"cpu": 2}}))
    live = as_stored(want)
    live["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "2"
    entry = live["metadata"]["managedFields"][0]["fieldsV1"]
    item = entry["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"engine"}']["f:env"]['k:{"name":"OURS"}']
    del item["f:value"]
    assert not is_current(live, want, MANAGER)
    # even where the value reads the same again (it was changed and changed back: the field is not ours any more)
    live["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "1"
    assert not is_current(live, want, MANAGER)


def test_an_item_of_ours_another_manager_removed_is_not_current():
    want = stamped(pod_template_object({"requests": {"cpu": 2}}))
    live = as_stored(want)
    live["spec"]["template"]["spec"]["containers"][0]["env"] = []
    assert not is_current(live, want, MANAGER)


def test_atomic_lists_stay_exact():
    want = stamped(pod_template_object({"requests": {"cpu": 2}}))
    live = as_stored(want)
    live["spec"]["template"]["spec"]["containers"][0]["args"].append("--extra")
    assert not is_current(live, want, MANAGER)
    live = as_stored(want)
    live["spec"]["template"]["spec"]["tolerations"].append({"key": "x", "operator": "Exists"})
    assert not is_current(live, want, MANAGER)


def test_an_object_another_manager_owns_is_not_current():
    want = stamped(pod_template_object({"requests": {"cpu": 2}}))
    assert not is_current(as_stored(want, manager="kubectl"), want, MANAGER)
    live = as_stored(want)
    del live["metadata"]["managedFields"]
    assert not is_current(live, want, MANAGER)
    assert applied_fields(as_stored(want), "gpufleet")["f:spec"]["f:replicas"] == {}
    assert applied_fields(as_stored(want), "other") is None


def test_service_ports_are_found_by_port_and_protocol():
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "chat-1", "namespace": "ml", "labels": {"gpufleet.io/deployment": "chat"}},
        "spec": {"selector": {"a": "b"}, "ports": [{"name": "http", "port": 8000, "targetPort": 8000}]},
    }
    want = stamped(svc)
    live = copy.deepcopy(want)
    # the key names protocol, defaulted by the API server: our item (which leaves it out) is still found
    fields = fields_v1(want, list_keys={"ports": ("port", "protocol")})
    assert 'k:{"port":8000,"protocol":"TCP"}' in fields["f:spec"]["f:ports"]
    live["metadata"]["managedFields"] = [{"manager": MANAGER, "operation": "Apply", "fieldsV1": fields}]
    live["spec"]["ports"] = [
        {"name": "metrics", "port": 9090, "protocol": "TCP", "targetPort": 9090},  # another manager's
        {"name": "http", "port": 8000, "protocol": "TCP", "targetPort": 8000},
    ]
    assert is_current(live, want, MANAGER)
    live["spec"]["ports"][1]["targetPort"] = 8001
    assert not is_current(live, want, MANAGER)


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
    kept = [("v1", "Service", "ml", "svc")]
    assert [o["metadata"]["name"] for o in prune_candidates(existing, desired, ["tp8"], kept)] == ["old-chat"]


SKIPPED = [
    {
        "cluster": "a",
        "kind": "Service",
        "api_version": "v1",
        "namespace": "ml",
        "name": "chat-1",
        "deployment": "chat",
        "reason": "Service a/ml/chat-1 carries an unreadable gpufleet.io/placement annotation: ...",
    },
    {
        "cluster": "b",
        "kind": "Service",
        "api_version": "v1",
        "namespace": "ml",
        "name": "stray",
        "deployment": None,
        "reason": "Service b/ml/stray carries an unreadable gpufleet.io/placement annotation: ...",
    },
]


def test_skipped_objects_hold_their_deployments_or_themselves():
    assert skipped_holds(SKIPPED) == (["chat"], {"b": [("v1", "Service", "ml", "stray")]})
    assert skipped_holds([]) == ([], {})


class FakeCluster:
    """A cluster's API as reconcile_fleet uses it: what it lists, and what was applied and deleted."""

    def __init__(self, objects):
        self.objects = objects
        self.applied, self.deleted, self.requests = [], [], 0

    def list(self, api_version, kind, selector=(), metadata_only=False, managed_by=None):
        return [o for o in self.objects if (o["apiVersion"], o["kind"]) == (api_version, kind)]

    def ensure_namespace(self, name, dry_run=False):
        return False

    def apply(self, o, field_manager, dry_run=False):
        self.applied.append(o["metadata"]["name"])
        return o

    def delete(self, o):
        self.deleted.append(o["metadata"]["name"])


def test_reconcile_prunes_nothing_of_a_skipped_objects_deployment():
    # placement skipped chat's Service on cluster a (unreadable annotation), so chat-1 is not rendered any more: its
    # objects must stay; tp8's dropped replica is pruned as usual; the stray Service naming no deployment stays
    svc = dict(obj("Service", "chat-1"), apiVersion="v1")
    stray = {**obj("Service", "stray"), "apiVersion": "v1"}
    stray["metadata"] = {"name": "stray", "namespace": "ml", "labels": {}}
    a = FakeCluster([obj(name="chat-1"), svc, obj(name="tp8-old", deployment="tp8")])
    b = FakeCluster([stray])
    opts = ReconcileOptions(kinds=[("v1", "Service"), ("apps/v1", "Deployment")], owner_selector=[], wait=False)
    opts.hold, opts.keep = skipped_holds(SKIPPED)
    outcomes, held = reconcile_fleet({"a": a, "b": b}, {"a": [], "b": []}, opts)
    assert a.deleted == ["tp8-old"] and b.deleted == []
    assert held == ["chat"]
    assert outcomes["a"].failed is None


def test_recorded_placement_keeps_the_last_record_of_a_failed_cluster():
    previous = [{"cluster": "x", "replica": "old-x"}, {"cluster": "y", "replica": "old-y"}]
    replicas = [{"cluster": "x", "replica": "new-x"}, {"cluster": "y", "replica": "new-y"}]
    assert recorded_placement(replicas, previous, ["x"]) == [
        {"cluster": "y", "replica": "new-y"},
        {"cluster": "x", "replica": "old-x"},
    ]
    assert recorded_placement(replicas, previous, []) == replicas


def test_an_api_error_never_shows_credentials_it_echoes():
    class ApiError(Exception):
        status = 403
        body = json.dumps({"message": "forbidden: https://admin:hunter2@api.example.com/apis?token=abc123"})

    reason = fleet_k8s_reason(ApiError())
    assert reason.startswith("403: forbidden: ")
    assert "hunter2" not in reason and "abc123" not in reason
    assert "hunter2" not in fleet_k8s_reason(RuntimeError("dial https://u:hunter2@h.example.com/ failed"))
