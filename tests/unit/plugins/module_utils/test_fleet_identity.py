"""Fleet identity (issue 25): every owned object carries gpufleet.io/fleet; pruning, observed replicas, capacity and
apply select a fleet's own objects, so two inventories that share a cluster never touch each other's."""

from __future__ import annotations

import copy

import pytest
import yaml
from example_fleet import example_fleet

from ansible_collections.gpufleet.serving.plugins.module_utils.cache_apply import pvc_change_error
from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import (
    DeclaredPool,
    observe_cluster,
    owned_replicas,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ADOPT_UNLABELLED_VAR,
    CACHE_OWNER,
    FLEET_NAME_VAR,
    LABEL_FLEET,
    MANAGED_LABEL_KEYS,
    SERVING_OWNER,
    FleetIdentity,
    fleet_identity_errors,
    identity_of,
    parse_adopt,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import fleet_manifests, place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import ClusterError, fleet_objects
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction, object_relpath, sync
from ansible_collections.gpufleet.serving.plugins.module_utils.models import InferenceClass
from ansible_collections.gpufleet.serving.plugins.plugin_utils.contract import role_contract

MINE = FleetIdentity("blue")


def fleet_dict(name: str | None = "blue", adopt: bool | None = None) -> dict:
    data = example_fleet()
    return validate_fleet(
        classes=data["classes"],
        hosts=data["hosts"],
        deployments=data["deployments"],
        caches=data["caches"],
        fleet_name=name,
        adopt_unlabelled=adopt,
    ).to_dict()


def obj(kind: str, name: str, fleet: str | None = None, namespace: str = "ml", **labels: str) -> dict:
    lab = {**SERVING_OWNER, **labels}
    if fleet is not None:
        lab[LABEL_FLEET] = fleet
    api = {"Service": "v1", "Deployment": "apps/v1"}.get(kind, "v1")
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": namespace, "labels": lab}}


# --- the contract --------------------------------------------------------------------------------------------------


def test_the_fleet_label_is_managed_and_in_the_role_contract():
    assert LABEL_FLEET == "gpufleet.io/fleet"
    assert LABEL_FLEET in MANAGED_LABEL_KEYS  # a user's labels never set it
    assert role_contract()["label_fleet"] == LABEL_FLEET


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        (None, "is required: the name of this fleet"),
        ("", "is required"),
        (42, "must be a string (got int 42); quote it in YAML"),
        ("prod fleet", "must be a Kubernetes label value"),
        ("-prod", "must be a Kubernetes label value"),
        ("p" * 64, "at most 63 characters"),
    ],
)
def test_a_missing_or_invalid_fleet_name_is_a_field_error_saying_what_to_set(name, fragment):
    errors = fleet_identity_errors(name)
    assert [path for path, _reason in errors] == [FLEET_NAME_VAR]
    assert fragment in errors[0][1]
    if name is None:
        assert f"`{FLEET_NAME_VAR}: prod`" in errors[0][1] and ADOPT_UNLABELLED_VAR in errors[0][1]


@pytest.mark.parametrize("name", ["prod", "Team_A.gpu-fleet", "a", "x" * 63])
def test_label_values_are_fleet_names(name):
    assert fleet_identity_errors(name) == []
    assert FleetIdentity.parse(name).name == name


@pytest.mark.parametrize(
    ("value", "parsed"), [(None, None), (True, True), (False, False), ("true", True), ("No", False), (" ", None)]
)
def test_adopt_unlabelled_is_unset_or_a_boolean(value, parsed):
    assert parse_adopt(value) is parsed


def test_adopt_unlabelled_rejects_anything_else():
    ((path, reason),) = fleet_identity_errors("prod", "maybe")
    assert path == ADOPT_UNLABELLED_VAR and reason == "must be true or false, or unset (got 'maybe')"
    with pytest.raises(FleetValidationError, match="adopt_unlabelled: must be true or false"):
        FleetIdentity.parse("prod", [True], adopt_var="adopt_unlabelled")


def test_objects_are_mine_another_fleets_or_unlabelled():
    mine, theirs, legacy = {LABEL_FLEET: "blue"}, {LABEL_FLEET: "green"}, {}
    assert [MINE.classify(x) for x in (mine, theirs, legacy, None)] == ["mine", "foreign", "unlabelled", "unlabelled"]
    assert MINE.owns(mine) and not MINE.owns(theirs) and not MINE.owns(legacy)
    assert FleetIdentity("blue", adopt_unlabelled=True).owns(legacy)
    assert not FleetIdentity("blue", adopt_unlabelled=True).owns(theirs)  # adoption is of unlabelled ones only
    assert MINE.owner(SERVING_OWNER) == {**SERVING_OWNER, LABEL_FLEET: "blue"}


@pytest.mark.parametrize(
    ("adopt", "mine", "other", "undecided"),
    [(None, ["a"], ["b"], ["c"]), (True, ["a", "c"], ["b"], []), (False, ["a"], ["b", "c"], [])],
)
def test_split_follows_adopt_unlabelled(adopt, mine, other, undecided):
    items = [("a", {LABEL_FLEET: "blue"}), ("b", {LABEL_FLEET: "green"}), ("c", {})]
    split = FleetIdentity("blue", adopt).split(items, lambda item: item[1])
    assert ([i[0] for i in split.mine], [i[0] for i in split.other], [i[0] for i in split.undecided]) == (
        mine,
        other,
        undecided,
    )


def test_the_unlabelled_error_names_the_objects_and_both_ways_forward():
    message = str(MINE.unlabelled_error([f"Service ml/s{i}" for i in range(12)] + ["Service ml/s0"]))
    assert message.startswith("12 object(s) carry gpufleet.serving's owner labels but no gpufleet.io/fleet label")
    assert "Service ml/s0, Service ml/s1" in message and "and 2 more" in message
    assert "Nothing was changed." in message
    assert "gpufleet_adopt_unlabelled: true if they are this fleet's (blue)" in message
    assert "gpufleet_adopt_unlabelled: false if they belong to another inventory" in message


def test_identity_of_needs_fleet_infos_name():
    assert identity_of({"name": "blue", "adopt_unlabelled": True}) == FleetIdentity("blue", True)
    with pytest.raises(GpufleetError, match="the fleet carries no name"):
        identity_of({"clusters": []})


# --- validation and rendering ----------------------------------------------------------------------------------


def test_validate_fleet_requires_the_name_when_asked_and_carries_it():
    data = example_fleet()
    kwargs = {"classes": data["classes"], "hosts": data["hosts"], "deployments": data["deployments"]}
    with pytest.raises(FleetValidationError) as err:
        validate_fleet(**kwargs, caches=data["caches"], require_name=True)
    assert [e[0] for e in err.value.errors] == [FLEET_NAME_VAR]
    with pytest.raises(FleetValidationError) as err:
        validate_fleet(**kwargs, caches=data["caches"], fleet_name="a b", adopt_unlabelled="perhaps")
    assert [e[0] for e in err.value.errors] == [FLEET_NAME_VAR, ADOPT_UNLABELLED_VAR]
    out = fleet_dict(adopt=True)
    assert (out["name"], out["adopt_unlabelled"]) == ("blue", True)
    assert "name" not in fleet_dict(name=None)  # part of a fleet (provisioning one cluster) has no identity


def test_every_rendered_object_carries_the_fleet_but_no_pod_template_or_claim_template_spec():
    fleet = fleet_dict()
    outcome = place_fleet(fleet, [])
    rendered = fleet_manifests(fleet, outcome.replicas)
    objects = [o for objs in rendered.values() for o in objs]
    assert objects
    for o in objects:
        assert o["metadata"]["labels"][LABEL_FLEET] == "blue", (o["kind"], o["metadata"]["name"])
    text = yaml.safe_dump(objects)
    # Only the objects' own metadata: a pod template or a claim template's spec would restart or be refused.
    assert text.count(f"{LABEL_FLEET}: blue") == len(objects)
    unnamed = fleet_manifests(fleet_dict(name=None), outcome.replicas)

    def strip(o: dict) -> dict:
        o = copy.deepcopy(o)
        del o["metadata"]["labels"][LABEL_FLEET]
        return o

    assert [strip(o) for objs in rendered.values() for o in objs] == [o for objs in unnamed.values() for o in objs]


def test_a_user_label_cannot_claim_another_fleet():
    data = example_fleet()
    dep = data["deployments"][0]
    dep["engines"][0]["members"][0]["template"].setdefault("metadata", {})["labels"] = {LABEL_FLEET: "green"}
    fleet = validate_fleet(
        classes=data["classes"], hosts=data["hosts"], deployments=[dep], caches=data["caches"], fleet_name="blue"
    ).to_dict()
    rendered = fleet_manifests(fleet, place_fleet(fleet, []).replicas)
    for o in (o for objs in rendered.values() for o in objs):
        assert o["metadata"]["labels"][LABEL_FLEET] == "blue"
        assert LABEL_FLEET not in yaml.safe_dump(o.get("spec", {}))


# --- the render directory ------------------------------------------------------------------------------------


def write(root, cluster: str, o: dict) -> str:
    rel = object_relpath(cluster, o)
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(o))
    return rel


def test_render_dir_prunes_only_this_fleets_files(tmp_path):
    mine = write(tmp_path, "c1", obj("Service", "old-blue", "blue"))
    theirs = write(tmp_path, "c1", obj("Service", "old-green", "green"))
    result = sync(tmp_path, "c1", [obj("Service", "new-blue", "blue")], SERVING_OWNER, fleet=MINE)
    assert result.removed == [mine]
    assert (tmp_path / theirs).exists() and not (tmp_path / mine).exists()
    # Without fleet identity (as before) both would go: that is the bug this guards against.
    write(tmp_path, "c2", obj("Service", "old-green", "green"))
    assert sync(tmp_path, "c2", [], SERVING_OWNER, check_mode=True).removed == ["c2/ml/service-old-green.yaml"]


def test_render_dir_never_overwrites_another_fleets_file(tmp_path):
    rel = write(tmp_path, "c1", obj("Service", "chat-0a1b2", "green"))
    before = (tmp_path / rel).read_text()
    with pytest.raises(GpufleetError, match=r"holds an object of fleet green, not of fleet blue.*Nothing was written"):
        sync(tmp_path, "c1", [obj("Service", "chat-0a1b2", "blue")], SERVING_OWNER, fleet=MINE)
    assert (tmp_path / rel).read_text() == before


def test_render_dir_clusters_of_another_fleet_are_not_clusters_that_left(tmp_path):
    write(tmp_path, "green-only", obj("Service", "s", "green"))
    gone = write(tmp_path, "blue-gone", obj("Service", "s", "blue"))
    txn = Transaction(tmp_path)
    assert txn.prune_other_clusters(["c1"], SERVING_OWNER, fleet=MINE) == ["blue-gone"]
    txn.commit()
    assert not (tmp_path / gone).exists() and (tmp_path / "green-only/ml/service-s.yaml").exists()


def test_render_dir_unlabelled_files_follow_adopt_unlabelled(tmp_path):
    legacy = write(tmp_path, "c1", obj("Service", "legacy"))
    stays = write(tmp_path, "c1", obj("Service", "rewritten"))
    with pytest.raises(
        GpufleetError, match=r"2 object\(s\) carry .*c1/ml/service-legacy.yaml, c1/ml/service-rewritten.yaml"
    ):
        sync(tmp_path, "c1", [obj("Service", "rewritten", "blue")], SERVING_OWNER, fleet=MINE)
    assert (tmp_path / legacy).exists() and "gpufleet.io/fleet" not in (tmp_path / stays).read_text()
    # false: another inventory's; neither pruned nor overwritten
    with pytest.raises(GpufleetError, match="another inventory"):
        sync(tmp_path, "c1", [obj("Service", "rewritten", "blue")], SERVING_OWNER, fleet=FleetIdentity("blue", False))
    kept = sync(tmp_path, "c1", [], SERVING_OWNER, fleet=FleetIdentity("blue", False))
    assert kept.removed == [] and (tmp_path / legacy).exists()
    # true: this fleet's; re-rendered with the label, and pruned when no longer rendered
    adopted = sync(
        tmp_path, "c1", [obj("Service", "rewritten", "blue")], SERVING_OWNER, fleet=FleetIdentity("blue", True)
    )
    assert adopted.written == [stays] and adopted.removed == [legacy]
    assert "gpufleet.io/fleet: blue" in (tmp_path / stays).read_text()


# --- apply mode ----------------------------------------------------------------------------------------------------


def test_apply_prunes_and_judges_only_this_fleets_objects():
    listed = [obj("Service", "a", "blue"), obj("Service", "b", "green"), obj("Deployment", "c", "blue")]
    assert fleet_objects(listed, [obj("Service", "a", "blue")], MINE) == [listed[0], listed[2]]
    assert fleet_objects(listed, [], None) == listed  # no identity: as before


def test_apply_refuses_to_take_over_another_fleets_object():
    listed = [obj("Service", "chat-0a1b2", "green")]
    with pytest.raises(ClusterError, match=r"Service/ml/chat-0a1b2 \(fleet green\).*Nothing was applied"):
        fleet_objects(listed, [obj("Service", "chat-0a1b2", "blue")], MINE)
    with pytest.raises(ClusterError, match=r"Service/ml/legacy \(no fleet\)"):
        fleet_objects([obj("Service", "legacy")], [obj("Service", "legacy", "blue")], FleetIdentity("blue", False))


def test_apply_stops_a_cluster_with_unlabelled_objects_until_told():
    listed = [obj("Service", "legacy"), obj("Service", "a", "blue")]
    with pytest.raises(ClusterError, match=r"1 object\(s\) carry .*Service/ml/legacy"):
        fleet_objects(listed, [], MINE)
    assert fleet_objects(listed, [], FleetIdentity("blue", True)) == listed
    assert fleet_objects(listed, [], FleetIdentity("blue", False)) == [listed[1]]


# --- observed capacity ------------------------------------------------------------------------------------------

CLASSES = {
    "l4-1x": InferenceClass.model_validate(
        {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "device_class_name": "gpu.nvidia.com", "count": 1}]}
    )
}


def test_another_fleets_claims_hold_their_devices():
    nodes = [
        {
            "kind": "Node",
            "metadata": {"name": f"n{i}", "labels": {"gpufleet.io/pool": "l4"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        for i in range(2)
    ]
    slices = [
        {
            "kind": "ResourceSlice",
            "metadata": {"name": f"n{i}"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": f"n{i}",
                "pool": {"name": f"n{i}"},
                "devices": [{"name": "gpu-0"}],
            },
        }
        for i in range(2)
    ]

    def claim(i: int, replica: str) -> dict:
        labels = {**SERVING_OWNER, "gpufleet.io/replica": replica}  # claims carry no fleet label
        result = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": f"n{i}", "device": "gpu-0"}
        return {
            "kind": "ResourceClaim",
            "metadata": {"name": f"{replica}-claim", "namespace": "ml", "labels": labels},
            "status": {"allocation": {"devices": {"results": [result]}}},
        }

    services = [obj("Service", "blue-1", "blue", **{"gpufleet.io/replica": "chat-blue"})]
    services.append(obj("Service", "green-1", "green", **{"gpufleet.io/replica": "chat-green"}))
    owned = owned_replicas(services, MINE)
    assert owned == {("ml", "chat-blue")}
    claims = [claim(0, "chat-blue"), claim(1, "chat-green")]
    state = observe_cluster("c1", [DeclaredPool("l4", "l4-1x", 2)], CLASSES, nodes, slices, claims, owned)
    assert state.foreign_claims == ["ml/chat-green-claim"]
    assert any("held by claim ml/chat-green-claim of another workload" in line for line in state.drift())
    # Without fleet identity every claim of the collection is ours (as before).
    assert observe_cluster("c1", [DeclaredPool("l4", "l4-1x", 2)], CLASSES, nodes, slices, claims).foreign_claims == []


# --- model caches --------------------------------------------------------------------------------------------------


def test_another_fleets_cache_volume_is_never_taken():
    want = {"metadata": {"name": "gpufleet-cache-q", "namespace": "ml", "labels": {LABEL_FLEET: "blue"}}, "spec": {}}
    have = copy.deepcopy(want)
    have["metadata"]["labels"][LABEL_FLEET] = "green"
    message = pvc_change_error([have], want, "c1")
    assert "belongs to fleet green, not to fleet blue" in message and "Nothing was changed" in message
    assert pvc_change_error([want], want, "c1") == ""
    # A cache volume of the collection's without a fleet label (applied before fleet identity) is taken only when
    # the fleet adopts it; a PVC the collection never labelled (the user's own) is applied over as before.
    legacy = copy.deepcopy(want)
    legacy["metadata"]["labels"] = dict(CACHE_OWNER)
    assert "no gpufleet.io/fleet label" in pvc_change_error([legacy], want, "c1")
    assert "gpufleet_adopt_unlabelled is false" in pvc_change_error([legacy], want, "c1", False)
    assert pvc_change_error([legacy], want, "c1", True) == ""
    users = copy.deepcopy(want)
    users["metadata"]["labels"] = {}
    assert pvc_change_error([users], want, "c1") == ""
