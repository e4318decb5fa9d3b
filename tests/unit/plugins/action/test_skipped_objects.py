"""An unreadable gpufleet.io/placement annotation (issue 23): the object is skipped and named, every other deployment
is placed and written, and nothing of the skipped object's deployment is pruned."""

from __future__ import annotations

import copy

import yaml
from action_case import run_action

PLACEMENT = "gpufleet.io/placement"


def fleet_of(task_vars):
    result = run_action("fleet_info", {}, task_vars)
    assert not result.get("failed"), result.get("msg")
    return result["fleet"]


def corrupt(path, text="{not json"):
    obj = yaml.safe_load(path.read_text())
    obj["metadata"]["annotations"][PLACEMENT] = text
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return obj


def files_of(root, deployment):
    return sorted(str(p.relative_to(root)) for p in root.rglob(f"*/*/*-{deployment}-*.yaml"))


def test_a_corrupt_file_skips_only_that_object_and_holds_its_deployment(example_task_vars, tmp_path):
    fleet = fleet_of(example_task_vars)
    placed = run_action("fleet_placement", {"fleet": fleet, "render_dir": str(tmp_path)})
    run_action("fleet_manifests", {"fleet": fleet, "replicas": placed["replicas"], "render_dir": str(tmp_path)})
    names = [d["name"] for d in fleet["deployments"]]
    qwen, other = names[0], names[1]
    qwen_files = files_of(tmp_path, qwen)
    service = sorted(tmp_path.glob(f"*/*/service-{qwen}-*.yaml"))[0]
    cluster, namespace = service.parts[-3], service.parts[-2]
    bad = corrupt(service)

    # The next run scales qwen down to one replica (so two of its replicas would be pruned) and the other deployment
    # down too: the other deployment proceeds, nothing of qwen is removed.
    smaller = copy.deepcopy(fleet)
    smaller["deployments"][0]["replicas"] = 1
    smaller["deployments"][1]["replicas"] = 1
    again = run_action("fleet_placement", {"fleet": smaller, "render_dir": str(tmp_path), "publish_stats": True})
    assert not again.get("failed"), again.get("msg")
    (skipped,) = again["unreadable"]
    assert skipped["cluster"] == cluster and skipped["namespace"] == namespace
    assert skipped["name"] == bad["metadata"]["name"] and skipped["deployment"] == qwen
    assert skipped["path"] == str(service.relative_to(tmp_path))
    assert skipped["reason"].startswith(
        f"Service {cluster}/{namespace}/{bad['metadata']['name']} carries an unreadable {PLACEMENT} annotation: "
    )
    assert again["held"] == [qwen]
    assert again["unreadable_lines"] == [
        f"{skipped['reason']} (skipped; nothing of deployment {qwen} is pruned this run)"
    ]
    stats = again["ansible_stats"]["data"]["gpufleet_placement"]
    assert stats["unreadable"] == again["unreadable"] and stats["held"] == [qwen]
    # every other replica was read: the other deployments keep their placement
    assert {r["deployment"] for r in again["replicas"]} == set(names)

    written = run_action(
        "fleet_manifests",
        {
            "fleet": smaller,
            "replicas": again["replicas"],
            "render_dir": str(tmp_path),
            "unreadable": again["unreadable"],
        },
    )
    assert not written.get("failed"), written.get("msg")
    assert not [f for f in written["removed"] if f"-{qwen}-" in f], written["removed"]
    assert set(qwen_files) <= set(files_of(tmp_path, qwen))  # nothing of the held deployment was deleted
    assert [f for f in written["removed"] if f"-{other}-" in f]  # the other deployment was scaled down

    # Without the hold (what happened before: the run failed instead), qwen's dropped replicas would be pruned.
    unheld = run_action(
        "fleet_manifests",
        {"fleet": smaller, "replicas": again["replicas"], "render_dir": str(tmp_path)},
        check_mode=True,
    )
    assert [f for f in unheld["removed"] if f"-{qwen}-" in f]


def test_a_corrupt_service_read_from_a_cluster_is_named_with_that_cluster(example_task_vars):
    fleet = fleet_of(example_task_vars)
    placed = run_action("fleet_placement", {"fleet": fleet})
    rendered = run_action("fleet_manifests", {"fleet": fleet, "replicas": placed["replicas"]})
    by_cluster = {
        c: [o for o in objs if o["kind"] == "Service" and PLACEMENT in o["metadata"].get("annotations", {})]
        for c, objs in rendered["objects_by_cluster"].items()
    }
    victim_cluster = next(c for c, objs in sorted(by_cluster.items()) if objs)
    victim = copy.deepcopy(by_cluster[victim_cluster][0])
    victim["metadata"]["annotations"][PLACEMENT] = '{"deployment": 1}'
    by_cluster[victim_cluster][0] = victim
    result = run_action("fleet_placement", {"fleet": fleet, "observed_by_cluster": by_cluster})
    assert not result.get("failed"), result.get("msg")
    (skipped,) = result["unreadable"]
    meta = victim["metadata"]
    assert (skipped["cluster"], skipped["namespace"], skipped["name"]) == (
        victim_cluster,
        meta["namespace"],
        meta["name"],
    )
    assert "record.deployment" in skipped["reason"]
    assert result["held"] == [meta["labels"]["gpufleet.io/deployment"]]
    # every readable replica is still observed: the other deployments stay where they are
    others = [r for r in placed["replicas"] if r["deployment"] != skipped["deployment"]]
    assert [r for r in result["replicas"] if r["deployment"] != skipped["deployment"]] == others
