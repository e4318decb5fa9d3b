"""Rolling updates across the fleet: the pure wave planning (apply and render mode), what counts as an update, and
the reconcile loop that applies waves and waits between them (on fake clusters)."""

from __future__ import annotations

import copy
import itertools
import time

import pytest
from module_utils_tests import builders

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.reconcile import (
    ReconcileOptions,
    change_of,
    reconcile_fleet,
    removals_first,
    stamped,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelDeployment, parse
from ansible_collections.gpufleet.serving.plugins.module_utils.readiness import pending_workloads, unreported
from ansible_collections.gpufleet.serving.plugins.module_utils.rollout import (
    Change,
    budgets,
    plan_render,
    plan_waves,
    report,
)

as_stored = builders("fleet/test_fleet_k8s").as_stored

DEP = ("apps/v1", "Deployment")
SVC = ("v1", "Service")


def change(cluster, name, deployment="chat", replica=None, update=True, kind=DEP):
    return Change(
        cluster=cluster,
        key=(kind[0], kind[1], "ml", name),
        deployment=deployment,
        replica=replica if replica is not None else name,
        update=update,
    )


def units(wave):
    return sorted({c.unit for c in wave if c.update})


# --- the model --------------------------------------------------------------------------------------------------


def model(**rollout):
    return {
        "name": "chat",
        "replicas": 4,
        "rollout": rollout,
        "engines": [
            {
                "name": "main",
                "members": [
                    {"role": "Standalone", "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
                ],
            }
        ],
    }


def test_rollout_defaults_and_validation_with_field_paths():
    assert parse(ModelDeployment, model(), "d").rollout.max_unavailable == 1
    assert parse(ModelDeployment, model(), "d").rollout.max_surge == 0
    assert parse(ModelDeployment, model(max_unavailable=3), "d").rollout.max_unavailable == 3
    for bad, path, words in [
        ({"max_unavailable": 0}, "d.rollout.max_unavailable", ">= 1"),
        ({"max_unavailable": True}, "d.rollout.max_unavailable", "integer"),
        ({"max_surge": 1}, "d.rollout.max_surge", "only 0 is supported"),
        ({"maxUnavailable": 1}, "d.rollout.maxUnavailable", "not a known field"),
    ]:
        with pytest.raises(FleetValidationError) as exc:
            parse(ModelDeployment, model(**bad), "d")
        assert path in str(exc.value) and words in str(exc.value), str(exc.value)


def test_budgets_come_from_the_normalised_deployments():
    deps = [{"name": "a", "rollout": {"max_unavailable": 2, "max_surge": 0}}, {"name": "b"}]
    assert budgets(deps) == {"a": 2, "b": 1}


# --- apply mode's waves -------------------------------------------------------------------------------------------


def test_an_image_bump_on_four_replicas_goes_one_replica_per_wave():
    updates = [change(c, f"chat-{i}") for i, c in enumerate(["a", "a", "b", "c"])]
    others = [change("a", "chat-0", update=False, kind=SVC), change("b", "chat-9", update=False)]  # a creation
    plan = plan_waves(others + updates, {"chat": 1})
    assert [units(w) for w in plan.waves] == [["a/chat-0"], ["a/chat-1"], ["b/chat-2"], ["c/chat-3"]]
    assert set(others) <= set(plan.waves[0])  # every non-update goes first
    assert plan.keys(1) == {"a": [(*DEP, "ml", "chat-1")]}
    assert plan.later(1) == {"b": {(*DEP, "ml", "chat-2")}, "c": {(*DEP, "ml", "chat-3")}}


def test_max_unavailable_bounds_each_wave_and_deployments_go_side_by_side():
    updates = [change(c, f"chat-{i}") for i, c in enumerate("abcde")]
    updates += [change("a", f"tp8-{i}", deployment="tp8") for i in range(2)]
    plan = plan_waves(updates, {"chat": 2})  # tp8: the default, 1
    assert [units(w) for w in plan.waves] == [
        ["a/chat-0", "a/tp8-0", "b/chat-1"],
        ["a/tp8-1", "c/chat-2", "d/chat-3"],
        ["e/chat-4"],
    ]
    assert plan.max_unavailable == {"chat": 2, "tp8": 1}


def test_a_replica_counts_once_however_many_of_its_workloads_change():
    two_engines = [change("a", "chat-0-prefill", replica="chat-0"), change("a", "chat-0-decode", replica="chat-0")]
    plan = plan_waves([*two_engines, change("b", "chat-1")], {"chat": 1})
    assert [units(w) for w in plan.waves] == [["a/chat-0"], ["b/chat-1"]]
    assert len(plan.waves[0]) == 2


def test_nothing_to_update_is_one_wave_and_updates_outside_deployments_go_first():
    plan = plan_waves([change("a", "x", update=False), change("a", "stray", deployment=None)], {})
    assert len(plan.waves) == 1 and len(plan.waves[0]) == 2
    assert plan_waves([], {}).waves == [[]]


def test_replicas_not_ready_go_first_and_use_up_the_first_waves_budget():
    updates = [change(c, f"chat-{i}") for i, c in enumerate("abcd")]
    # chat-2 is down already (say, the template being replaced never came up): updating it takes nothing more, and
    # while it is down no healthy replica may be taken too.
    plan = plan_waves(updates, {"chat": 1}, {"chat": {"c/chat-2"}})
    assert [units(w) for w in plan.waves] == [["c/chat-2"], ["a/chat-0"], ["b/chat-1"], ["d/chat-3"]]
    # a replica that is not Ready and needs no update (a node lost) uses up the budget: the first wave only waits
    plan = plan_waves(updates[:2], {"chat": 1}, {"chat": {"z/chat-9"}})
    assert [units(w) for w in plan.waves] == [[], ["a/chat-0"], ["b/chat-1"]]
    # with room for two, one is used by the replica that is down
    plan = plan_waves(updates, {"chat": 2}, {"chat": {"z/chat-9"}})
    assert [units(w) for w in plan.waves] == [["a/chat-0"], ["b/chat-1", "c/chat-2"], ["d/chat-3"]]


def test_the_report_says_what_was_updated_stopped_or_left_for_the_next_runs():
    plan = plan_waves([change(c, f"chat-{i}") for i, c in enumerate("abc")], {"chat": 1})
    (done,) = report(plan, 2)
    assert done.updated == ["a/chat-0", "b/chat-1", "c/chat-2"] and done.pending == []
    assert done.line() == (
        "chat: rolling update of 3 replica(s) in 3 wave(s) (max_unavailable 1): a/chat-0, b/chat-1, c/chat-2"
    )
    (stopped,) = report(plan, {"chat": 1}, {"chat": "replica chat-1 on b did not become Ready"})
    assert stopped.updated == ["a/chat-0", "b/chat-1"] and stopped.pending == [["c/chat-2"]]
    assert "stopped after 2 of 3" in stopped.line()
    assert "replica chat-1 on b did not become Ready" in stopped.line()
    assert "1 replica(s) keep the old template: c/chat-2; nothing of chat was pruned" in stopped.line()
    (later,) = report(plan, 0, deferred=True)
    assert later.to_dict()["pending"] == [["b/chat-1"], ["c/chat-2"]]
    assert "wave 1 of 3 written (a/chat-0" in later.line() and "wave 2: b/chat-1; wave 3: c/chat-2" in later.line()


# --- what is an update ----------------------------------------------------------------------------------------------


def workload(name="chat-0-main", image="vllm:1", labels=None):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"gpufleet.io/deployment": "chat", "gpufleet.io/replica": name[:6], **(labels or {})},
        },
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "engine", "image": image}]}}},
    }


def stored(obj, generation=1, ready=True):
    """``obj`` as the API server returns it after our apply (managedFields of ours, status)."""
    live = as_stored(copy.deepcopy({**obj, "metadata": {**obj["metadata"], "annotations": {}}}))
    live["metadata"]["generation"] = generation
    live["status"] = (
        {"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1}
        | {"availableReplicas": 1}
        if ready
        else {"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1, "unavailableReplicas": 1}
    )
    return live


def test_an_update_is_a_spec_change_of_a_workload_that_exists():
    live = stored(workload())
    assert change_of("a", live, workload(image="vllm:2"), "gpufleet").update
    assert change_of("a", live, workload(image="vllm:2"), "gpufleet").unit == "a/chat-0"
    # its own labels only (a fleet label added, say): nothing restarts
    assert not change_of("a", live, workload(labels={"gpufleet.io/fleet": "prod"}), "gpufleet").update
    assert not change_of("a", None, workload(image="vllm:2"), "gpufleet").update  # a creation
    svc = {**workload(), "apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 8000}]}}
    assert not change_of("a", stored(workload()) | {"kind": "Service"}, svc, "gpufleet").update
    # an object whose fields are not ours (no managedFields entry of our manager) is an update when applied
    theirs = copy.deepcopy(live)
    theirs["metadata"]["managedFields"] = []
    assert change_of("a", theirs, workload(), "gpufleet").update


def lws(generation, rv, status=None):
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "gang-0-pp2", "namespace": "ml", "generation": generation, "resourceVersion": rv},
        "spec": {"replicas": 1},
        "status": status if status is not None else {"readyReplicas": 1, "updatedReplicas": 1},
    }


def test_a_leaderworkerset_status_from_before_the_change_is_not_taken_for_ready():
    before, after = lws(1, "10"), lws(2, "11")  # its template changed: generation 2, the old counts still say ready
    assert unreported(after, before)
    assert not unreported(lws(1, "11"), before)  # metadata only: the generation did not move
    assert not unreported(after, None)  # a creation: its counts start at 0 anyway
    desired = [{k: v for k, v in after.items() if k != "status"}]
    key = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "ml", "gang-0-pp2")
    (pending,) = pending_workloads([after], desired, {key: "11"})
    assert "has not reported on the applied change" in pending["message"]
    # once its controller wrote its status (0 updated, then 1 again), the counts are trusted
    assert pending_workloads([lws(2, "12", {"updatedReplicas": 0, "readyReplicas": 0})], desired, {key: "11"})
    assert pending_workloads([lws(2, "13")], desired, {key: "11"}) == []


# --- the reconcile loop on fake clusters ----------------------------------------------------------------------------


class RollingCluster:
    """A cluster whose Deployments roll as a controller would: an applied spec change makes the workload not ready;
    it is ready again after ``load`` lists (the model loading), unless its image is ``bad`` (never ready)."""

    def __init__(self, name, objects, log, load=2, bad="bad"):
        self.name, self.log, self.load, self.bad = name, log, load, bad
        self.objects = {(o["kind"], o["metadata"]["name"]): copy.deepcopy(o) for o in objects}
        self.loading = {}
        self.applied, self.deleted, self.requests = [], [], 0

    def list(self, api_version, kind, selector=(), metadata_only=False, managed_by=None):
        for name, left in list(self.loading.items()):
            if left > 1:
                self.loading[name] = left - 1
                continue
            obj = self.objects[("Deployment", name)]
            if obj["spec"]["template"]["spec"]["containers"][0]["image"] != self.bad:
                del self.loading[name]
                obj["status"] = {
                    "observedGeneration": obj["metadata"]["generation"],
                    "replicas": 1,
                    "updatedReplicas": 1,
                    "readyReplicas": 1,
                    "availableReplicas": 1,
                }
                self.log.append(("ready", f"{self.name}/{name}"))
        return [copy.deepcopy(o) for (k, _n), o in sorted(self.objects.items()) if k == kind]

    def ensure_namespace(self, name, dry_run=False):
        return False

    def apply(self, o, field_manager, dry_run=False):
        name = o["metadata"]["name"]
        self.applied.append(name)
        old = self.objects.get((o["kind"], name))
        new = copy.deepcopy(o)
        new["metadata"]["generation"] = (old or {}).get("metadata", {}).get("generation", 0) + 1
        if o["kind"] == "Deployment":
            self.log.append(("apply", f"{self.name}/{name}"))
            new["status"] = {"observedGeneration": new["metadata"]["generation"], "replicas": 1, "updatedReplicas": 1}
            self.loading[name] = self.load
        self.objects[(o["kind"], name)] = new
        return copy.deepcopy(new)

    def delete(self, o):
        self.deleted.append(o["metadata"]["name"])
        self.objects.pop((o["kind"], o["metadata"]["name"]), None)


def fleet_of(images, log, extra=()):
    """Clusters a, b, c with chat's four replicas (a: 0 and 1, b: 2, c: 3), Ready on image ``v1``; ``images``: the
    image each replica should run now."""
    where = {0: "a", 1: "a", 2: "b", 3: "c"}
    live = {n: [] for n in "abc"}
    desired = {n: [] for n in "abc"}
    for i, cluster in where.items():
        old = workload(f"chat-{i}-main")
        old["metadata"]["generation"] = 1
        old["status"] = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1}
        old["status"]["availableReplicas"] = 1
        live[cluster].append(old)
        desired[cluster].append(workload(f"chat-{i}-main", image=images[i]))
    for cluster, obj in extra:
        live[cluster].append(obj)
    return {n: RollingCluster(n, objs, log) for n, objs in live.items()}, desired


def unavailable_at_most(log, limit):
    """Replay the log: never more than ``limit`` replicas applied and not Ready again."""
    down: set[str] = set()
    worst = 0
    for event, name in log:
        (down.add if event == "apply" else down.discard)(name)
        worst = max(worst, len(down))
    return worst <= limit, worst


def opts(**kw):
    return ReconcileOptions(
        kinds=[("v1", "Service"), ("apps/v1", "Deployment")],
        owner_selector=[],
        timeout=kw.pop("timeout", 5),
        poll_interval=0.001,
        **kw,
    )


def test_reconcile_updates_one_replica_at_a_time_and_waits_for_ready_in_between():
    log: list[tuple[str, str]] = []
    apis, desired = fleet_of(["v2"] * 4, log)
    rollouts = []
    outcomes, held = reconcile_fleet(apis, desired, opts(max_unavailable={"chat": 1}), report=rollouts)
    applies = [name for event, name in log if event == "apply"]
    assert applies == ["a/chat-0-main", "a/chat-1-main", "b/chat-2-main", "c/chat-3-main"]
    # each replica's update starts only after the previous one is Ready again
    for before, after in itertools.pairwise(applies):
        assert log.index(("ready", before)) < log.index(("apply", after)), log
    assert unavailable_at_most(log, 1) == (True, 1)
    assert held == [] and all(o.failed is None for o in outcomes.values())
    (r,) = rollouts
    assert r.waves == [["a/chat-0"], ["a/chat-1"], ["b/chat-2"], ["c/chat-3"]] and not r.pending


def test_reconcile_with_two_at_a_time():
    log: list[tuple[str, str]] = []
    apis, desired = fleet_of(["v2"] * 4, log)
    reconcile_fleet(apis, desired, opts(max_unavailable={"chat": 2}))
    assert unavailable_at_most(log, 2) == (True, 2)


def test_a_replica_that_never_becomes_ready_stops_the_rollout_and_holds_the_deployment():
    log: list[tuple[str, str]] = []
    stale_svc = {**workload("chat-9-main"), "apiVersion": "v1", "kind": "Service", "spec": {}}  # a dropped replica's
    apis, desired = fleet_of(["bad"] * 4, log, extra=[("c", stale_svc)])
    rollouts = []
    started = time.monotonic()
    outcomes, held = reconcile_fleet(apis, desired, opts(timeout=0.3, max_unavailable={"chat": 1}), report=rollouts)
    assert time.monotonic() - started < 3  # one wave's timeout, not one per replica
    assert [name for event, name in log if event == "apply"] == ["a/chat-0-main"]  # the rest never applied
    for cluster, replica in (("a", "chat-1-main"), ("b", "chat-2-main"), ("c", "chat-3-main")):
        assert apis[cluster].objects[("Deployment", replica)]["spec"]["template"]["spec"]["containers"][0]["image"] == (
            "vllm:1"
        )
    assert held == ["chat"] and apis["c"].deleted == []  # nothing of chat pruned
    assert outcomes["a"].failed and "chat-0-main" in outcomes["a"].failed
    (r,) = rollouts
    assert r.updated == ["a/chat-0"] and r.pending == [["a/chat-1"], ["b/chat-2"], ["c/chat-3"]]
    assert r.stopped.startswith("replica chat-0 on a did not become Ready within 0.3s")
    assert "3 replica(s) keep the old template: a/chat-1, b/chat-2, c/chat-3" in r.line()


def test_without_waiting_only_the_first_wave_is_applied():
    log: list[tuple[str, str]] = []
    apis, desired = fleet_of(["v2"] * 4, log)
    rollouts = []
    _outcomes, held = reconcile_fleet(apis, desired, opts(wait=False), report=rollouts)
    assert [name for event, name in log if event == "apply"] == ["a/chat-0-main"]
    assert held == [] and rollouts[0].pending == [["a/chat-1"], ["b/chat-2"], ["c/chat-3"]]
    assert "Run again once the written replicas are Ready" in rollouts[0].line()


def test_check_mode_applies_every_wave_as_a_dry_run():
    log: list[tuple[str, str]] = []
    apis, desired = fleet_of(["v2"] * 4, log)
    reconcile_fleet(apis, desired, opts(check_mode=True))
    assert len([e for e in log if e[0] == "apply"]) == 4


# --- render mode ------------------------------------------------------------------------------------------------------


def svc(name):
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"gpufleet.io/deployment": "chat", "gpufleet.io/replica": name},
        },
        "spec": {"ports": [{"port": 8000}]},
    }


def files_of(objects):
    return {
        c: [(f"{c}/ml/{o['kind'].lower()}-{o['metadata']['name']}.yaml", o) for o in objs]
        for c, objs in objects.items()
    }


def replica_objects(i, image="vllm:1"):
    return [svc(f"chat-{i}"), workload(f"chat-{i}-main", image=image)]


def test_render_writes_the_first_wave_and_keeps_the_old_files_of_the_rest():
    old = {"a": replica_objects(0) + replica_objects(1), "b": replica_objects(2), "c": replica_objects(3)}
    new = {c: [copy.deepcopy(o) for o in objs] for c, objs in old.items()}
    for objs in new.values():
        for o in objs:
            if o["kind"] == "Deployment":
                o["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm:2"
            o["metadata"]["labels"]["gpufleet.io/fleet"] = "prod"  # a metadata change everywhere: written at once
    r = plan_render(new, files_of(old), {"chat": 1}, fleet="prod")
    assert r.held_back == {
        "a": {(*DEP, "ml", "chat-1-main")},
        "b": {(*DEP, "ml", "chat-2-main")},
        "c": {(*DEP, "ml", "chat-3-main")},
    }
    assert r.kept == {
        "a/ml/deployment-chat-1-main.yaml",
        "b/ml/deployment-chat-2-main.yaml",
        "c/ml/deployment-chat-3-main.yaml",
    }
    (dep,) = r.to_dict()["deployments"]
    assert dep["updated"] == ["a/chat-0"] and dep["pending"] == [["a/chat-1"], ["b/chat-2"], ["c/chat-3"]]
    assert "Run again once the written replicas are Ready" in r.lines()[0]
    # the next run, after the sync: chat-0's file holds the new template, the next wave goes
    synced = copy.deepcopy(old)
    synced["a"][1] = new["a"][1]
    r = plan_render(new, files_of(synced), {"chat": 1}, fleet="prod")
    assert r.to_dict()["deployments"][0]["updated"] == ["a/chat-1"]
    # with nothing to update, nothing is held
    assert plan_render(new, files_of(new), {"chat": 1}).kept == set()


def test_render_a_drain_removes_moved_replicas_within_the_budget_shared_with_updates():
    old = {"a": replica_objects(0) + replica_objects(1) + replica_objects(2), "b": replica_objects(3), "c": []}
    # drain a: its three replicas move to c (new names), chat-3 on b gets a new image
    new = {
        "a": [],
        "b": replica_objects(3, image="vllm:2"),
        "c": replica_objects(4) + replica_objects(5) + replica_objects(6),
    }
    r = plan_render(new, files_of(old), {"chat": 1})
    assert r.moves_removed == {"chat": ["a/chat-0"]} and r.moves_kept == {"chat": ["a/chat-1", "a/chat-2"]}
    assert "a/ml/service-chat-1.yaml" in r.kept and "a/ml/deployment-chat-2-main.yaml" in r.kept
    assert "a/ml/service-chat-0.yaml" not in r.kept
    # the removed moved replica used up the budget: chat-3's update waits for the next wave
    assert r.held_back == {"b": {(*DEP, "ml", "chat-3-main")}}
    assert any(
        "2 replica(s) moved away keep their files until the next run: a/chat-1, a/chat-2" in ln for ln in r.lines()
    )
    # with max_unavailable 3 the drain completes at once; the update still waits (the budget is used)
    r = plan_render(new, files_of(old), {"chat": 3})
    assert r.moves_kept == {} and r.held_back == {"b": {(*DEP, "ml", "chat-3-main")}}
    # the next run: the replacements exist, so what is left on a is no longer a move and goes
    after = {"a": replica_objects(1) + replica_objects(2), "b": replica_objects(3), "c": new["c"]}
    r = plan_render(new, files_of(after), {"chat": 1})
    assert r.moves_kept == {} and r.kept == set() and r.held_back == {}


def test_render_a_scale_down_is_not_held_and_other_fleets_files_are_not_considered():
    old = {"a": replica_objects(0) + replica_objects(1) + replica_objects(2), "b": []}
    assert plan_render({"a": replica_objects(0), "b": []}, files_of(old), {"chat": 1}).kept == set()
    # scale 3 -> 2 while one replica moves: one removal is the scale-down, the other the move (within the budget)
    r = plan_render({"a": replica_objects(0), "b": replica_objects(7)}, files_of(old), {"chat": 1})
    assert r.moves_kept == {} and r.moves_removed == {"chat": ["a/chat-1", "a/chat-2"]}
    theirs = workload("chat-0-main", labels={"gpufleet.io/fleet": "other"})
    r = plan_render({"a": [workload("chat-0-main", image="vllm:2")]}, files_of({"a": [theirs]}), {}, fleet="prod")
    assert r.held_back == {} and r.plan.updates() == {}


# --- removals before the wait ---------------------------------------------------------------------------------------


class FullCluster(RollingCluster):
    """A cluster with room for ``slots`` Deployments: a new one becomes Ready only while no more than ``slots`` exist
    (its pod waits for the devices of another)."""

    def __init__(self, name, objects, log, slots):
        super().__init__(name, objects, log, load=1)
        self.slots = slots

    def list(self, api_version, kind, selector=(), metadata_only=False, managed_by=None):
        deployments = [k for k in self.objects if k[0] == "Deployment"]
        if len(deployments) > self.slots:
            for name in self.loading:
                self.loading[name] = 2  # unschedulable: the devices it needs are still held
        return super().list(api_version, kind, selector, metadata_only, managed_by)


def ready(desired):
    """``desired`` as it is live, applied by us before, current and Ready."""
    live = as_stored(copy.deepcopy(stamped(desired)))
    live["metadata"]["generation"] = 1
    live["status"] = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1}
    live["status"]["availableReplicas"] = 1
    return live


def test_a_scale_down_frees_its_devices_before_the_new_replica_it_makes_room_for_is_awaited():
    # a: two slots, both held by chat (replicas 0, 1); chat scales down to one replica and code's new replica is
    # placed in the freed slot, in one run. Pruning only after the wait would time out with code pending.
    log: list[tuple[str, str]] = []
    chat0, chat1 = workload("chat-0-main"), workload("chat-1-main")
    code0 = workload("code-0-main", labels={"gpufleet.io/deployment": "code"})
    apis = {"a": FullCluster("a", [ready(chat0), ready(chat1)], log, slots=2)}
    outcomes, held = reconcile_fleet(apis, {"a": [chat0, code0]}, opts(timeout=2))
    assert outcomes["a"].failed is None and held == []
    assert apis["a"].deleted == ["chat-1-main"] and apis["a"].applied == ["code-0-main"]
    assert ("ready", "a/code-0-main") in log
    assert outcomes["a"].deleted == ["Deployment/ml/chat-1-main"]


def test_a_move_or_an_update_keeps_the_old_replica_until_the_new_one_is_ready():
    live = {"a": [ready(workload("chat-0-main")), ready(workload("chat-1-main"))]}
    existing = live
    # chat's replica 1 moves to b (a creation there): nothing of chat goes first
    desired = {"a": [live["a"][0]], "b": [workload("chat-2-main")]}
    change = Change(
        cluster="b", key=("apps/v1", "Deployment", "ml", "chat-2-main"), deployment="chat", replica="chat-2"
    )
    assert removals_first(existing, desired, [change], [], []) == {}
    # an update of the replica it keeps: the same
    update = Change(cluster="a", key=("apps/v1", "Deployment", "ml", "chat-0-main"), deployment="chat", update=True)
    assert removals_first(existing, {"a": [live["a"][0]]}, [update], [], []) == {}
    # a pure scale-down goes first, unless a replica it keeps is not Ready, or something holds the deployment
    (first,) = removals_first(existing, {"a": [live["a"][0]]}, [], [], [])["a"]
    assert first["metadata"]["name"] == "chat-1-main"
    assert removals_first(existing, {"a": [live["a"][0]]}, [], ["chat"], []) == {}
    assert removals_first(existing, {"a": [live["a"][0]]}, [], [], ["chat"]) == {}
    # an object that names no deployment waits for the final prune
    other = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x", "namespace": "ml"}}
    assert removals_first({"a": [other]}, {"a": []}, [], [], []) == {}


def test_a_stage_that_deletes_nothing_does_not_await_what_a_scale_down_makes_room_for():
    # The first stage of an apply routed by a hub (prune false: the hub must stop routing to chat-1 before it goes):
    # code's new replica needs chat-1's devices, which only the next stage's prune frees. It is looked at once and
    # reported pending (code held, so its old replicas would keep serving), not awaited for the whole timeout.
    log: list[tuple[str, str]] = []
    chat0, chat1 = workload("chat-0-main"), workload("chat-1-main")
    code0 = workload("code-0-main", labels={"gpufleet.io/deployment": "code"})
    apis = {"a": FullCluster("a", [ready(chat0), ready(chat1)], log, slots=2)}
    clock = iter(range(0, 10_000, 1)).__next__  # a second per reading: a wait would take `timeout` readings
    outcomes, held = reconcile_fleet(apis, {"a": [chat0, code0]}, opts(timeout=600, prune=False), clock=clock)
    assert apis["a"].deleted == [] and apis["a"].applied == ["code-0-main"]
    assert outcomes["a"].polls == 1 and held == ["code"]
    (pending,) = outcomes["a"].pending
    assert pending["name"] == "code-0-main"
    assert outcomes["a"].failed.startswith("not awaited before this run's removals on it are deleted")
    # The next stage (prune) deletes chat-1 first and awaits code-0, which becomes Ready.
    outcomes, held = reconcile_fleet(apis, {"a": [chat0, code0]}, opts(timeout=2))
    assert outcomes["a"].failed is None and held == []
    assert apis["a"].deleted == ["chat-1-main"] and ("ready", "a/code-0-main") in log


def test_a_stage_that_deletes_nothing_still_awaits_clusters_without_waiting_removals():
    log: list[tuple[str, str]] = []
    code0 = workload("code-0-main", labels={"gpufleet.io/deployment": "code"})
    apis = {"a": FullCluster("a", [], log, slots=2)}
    outcomes, held = reconcile_fleet(apis, {"a": [code0]}, opts(timeout=5, prune=False))
    assert outcomes["a"].failed is None and held == [] and ("ready", "a/code-0-main") in log
