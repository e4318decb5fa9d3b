"""Render mode's rolling updates through the fleet_manifests action: the render directory is what GitOps serves, so a
run writes the first wave of an image bump and keeps the old files of the rest; each run advances one wave."""

from __future__ import annotations

import copy

import yaml
from action_case import run_action


def _fleet(task_vars):
    result = run_action("fleet_info", {}, task_vars)
    assert not result.get("failed"), result.get("msg")
    return result["fleet"]


def _images(root, deployment):
    """``<cluster>/<file>`` -> image of every workload file of ``deployment``."""
    out = {}
    for path in sorted(root.rglob("deployment-*.yaml")):
        obj = yaml.safe_load(path.read_text())
        if obj["metadata"]["labels"]["gpufleet.io/deployment"] == deployment:
            out[str(path.relative_to(root))] = obj["spec"]["template"]["spec"]["containers"][0]["image"]
    return out


def _bump(task_vars, image, **rollout):
    bumped = copy.deepcopy(task_vars)
    dep = next(d for d in bumped["gpufleet_model_deployments"] if d["name"] == "qwen-demo")
    dep["engines"][0]["members"][0]["template"]["spec"]["containers"][0]["image"] = image
    if rollout:
        dep["rollout"] = rollout
    return bumped


def _run(task_vars, root):
    fleet = _fleet(task_vars)
    placed = run_action("fleet_placement", {"fleet": fleet, "render_dir": str(root)})
    assert not placed.get("failed"), placed.get("msg")
    out = run_action(
        "fleet_manifests",
        {
            "fleet": fleet,
            "replicas": placed["replicas"],
            "render_dir": str(root),
            "render_token": placed["render_token"],
        },
    )
    assert not out.get("failed"), out.get("msg")
    return out


def test_each_run_writes_one_wave_of_an_image_bump(example_task_vars, tmp_path):
    first = _run(example_task_vars, tmp_path)
    assert first["rollout"]["deployments"] == [] and first["rollout_lines"] == []
    old = _images(tmp_path, "qwen-demo")
    assert len(old) == 3 and set(old.values()) == {"vllm/vllm-openai:v0.11.0"}

    bumped = _bump(example_task_vars, "vllm/vllm-openai:v0.11.1")
    seen = []
    for wave in range(1, 4):
        out = _run(bumped, tmp_path)
        (roll,) = out["rollout"]["deployments"]
        assert roll["deployment"] == "qwen-demo" and len(roll["updated"]) == 1
        assert len(roll["pending"]) == 3 - wave
        images = _images(tmp_path, "qwen-demo")
        new = sorted(f for f, image in images.items() if image.endswith("v0.11.1"))
        assert len(new) == wave, images  # one more replica on the new image each run
        seen.append(new)
        assert [w for w in out["written"] if "deployment-qwen-demo" in w] == sorted(
            set(new) - set(seen[-2] if wave > 1 else [])
        )
        if wave < 3:
            assert "keep the old template until the next runs" in out["rollout_lines"][0]
    assert _run(bumped, tmp_path)["changed"] is False  # done: nothing left to write


def test_max_unavailable_writes_more_replicas_a_run(example_task_vars, tmp_path):
    _run(example_task_vars, tmp_path)
    out = _run(_bump(example_task_vars, "vllm/vllm-openai:v0.11.1", max_unavailable=2), tmp_path)
    (roll,) = out["rollout"]["deployments"]
    assert roll["max_unavailable"] == 2 and len(roll["updated"]) == 2 and len(roll["pending"]) == 1
    assert sorted(_images(tmp_path, "qwen-demo").values()).count("vllm/vllm-openai:v0.11.1") == 2


def _services(root, deployment):
    """cluster -> number of ``deployment``'s replica Services in the render directory."""
    out: dict[str, int] = {}
    for path in root.rglob(f"service-{deployment}-*.yaml"):
        cluster = path.relative_to(root).parts[0]
        out[cluster] = out.get(cluster, 0) + 1
    return out


def test_a_drain_removes_moved_replicas_max_unavailable_at_a_time(example_task_vars, tmp_path):
    task_vars = copy.deepcopy(example_task_vars)
    next(d for d in task_vars["gpufleet_model_deployments"] if d["name"] == "qwen-demo")["replicas"] = 6
    _run(task_vars, tmp_path)
    before = _services(tmp_path, "qwen-demo")
    target = max(before, key=before.get)
    assert before[target] == 2, before

    def drain():
        fleet = _fleet(task_vars)
        placed = run_action("fleet_placement", {"fleet": fleet, "render_dir": str(tmp_path), "drained": [target]})
        assert not placed.get("failed"), placed.get("msg")
        args = {"fleet": fleet, "replicas": placed["replicas"], "render_dir": str(tmp_path)}
        return run_action("fleet_manifests", {**args, "render_token": placed["render_token"]})

    # The first run writes both replacements and removes one drained replica (max_unavailable 1); the other serves on
    # until the next run, which removes it: its replacement exists by then.
    first = drain()
    assert sum(_services(tmp_path, "qwen-demo").values()) == 7 and _services(tmp_path, "qwen-demo")[target] == 1
    (kept,) = first["rollout"]["moves_kept"]["qwen-demo"]
    assert kept.startswith(f"{target}/qwen-demo-")
    assert any("1 replica(s) moved away keep their files until the next run" in ln for ln in first["rollout_lines"])
    second = drain()
    assert target not in _services(tmp_path, "qwen-demo") and sum(_services(tmp_path, "qwen-demo").values()) == 6
    assert second["rollout"]["moves_kept"] == {}
    assert drain()["changed"] is False
