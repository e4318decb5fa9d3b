"""The model_cache and serving_stack roles with the fleet (and model_cache's plan) handed off through files (issue 26,
"Scale"): their fleet_info (and model_cache's fleet_plan) result carries a handle, not the fleet, and they render
exactly what they render with every value inline (the per-cluster tasks read the fleet back with handed_off)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from playbook_run import run_playbook
from test_cache_follow import cache_clusters, follow_inventory

ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
HANDED_OFF = ("-e", "__model_cache_handoff_over=0", "-e", "__serving_stack_handoff_over=0")


def run_json(inventory: Path, playbook: str, render: Path, *extra: str) -> dict:
    return json.loads(run_playbook(inventory, playbook, render, *extra, callback="json"))


def task_results(doc: dict, name: str) -> list[dict]:
    return [
        result
        for play in doc["plays"]
        for task in play["tasks"]
        if task["task"]["name"].rsplit(" : ", 1)[-1] == name
        for result in task["hosts"].values()
    ]


def files(render: Path) -> dict[str, str]:
    return {p.relative_to(render).as_posix(): p.read_text() for p in sorted(render.rglob("*.yaml"))}


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_roles_render_the_same_with_the_fleet_handed_off(tmp_path):
    inventory = follow_inventory(tmp_path, replicas=1)  # a cache that follows placement: model_cache takes the plan
    out: dict[str, dict[str, str]] = {}
    for label, extra in (("inline", ()), ("handed", HANDED_OFF)):
        render = tmp_path / label
        run_json(inventory, "plan.yml", render)
        caches = run_json(inventory, "caches.yml", render, *extra)
        stack = run_json(inventory, "serving_stack.yml", render, *extra)
        for doc in (caches, stack):
            (validated,) = [r for r in task_results(doc, "Validate the fleet") if not r.get("skipped")]
            assert ("gpufleet_handoff" in validated["fleet"]) is (label == "handed")
            if label == "handed":  # the handle is all the result carries of the fleet
                assert validated["fleet"]["chars"] > len(json.dumps(validated)) - len(json.dumps(validated["fleet"]))
        (planned,) = list(task_results(caches, "Take the plan that the caches following placement follow"))
        assert ("gpufleet_handoff" in json.dumps(planned["replicas"])) is (label == "handed")
        assert len(cache_clusters(render)) == 1  # staged where the plan placed the model, handle or not
        out[label] = files(render)
    inline, handed = out["inline"], out["handed"]
    assert len(inline) > 20
    assert {k: v for k, v in handed.items() if not k.startswith("_fleet/plan")} == {
        k: v for k, v in inline.items() if not k.startswith("_fleet/plan")
    }
