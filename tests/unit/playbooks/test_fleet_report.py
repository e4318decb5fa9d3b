"""The report of deploy.yml / status.yml, run for real on a copy of the example inventory (issue 31): printed as plain
lines by the gpufleet.serving.fleet callback (and as a block of lines by the default callback with YAML results), a
quiet mode that prints only the summary, the JSON report file and the fleet picture."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from example_fleet import copy_example_inventory

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
SENTINEL = "sentinel-revision-31c7"

pytestmark = pytest.mark.skipif(
    not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python"
)


def inventory(tmp_path: Path, llama_replicas: int = 6) -> Path:
    """The example inventory, llama-70b asking for more replicas than the fleet has 8-GPU H100 nodes (so the report
    explains a shortfall, with CEL selectors in it; deepseek-v3, placed after it, finds no node left), and a value in a
    pod template that must never reach the report."""
    inv = tmp_path / "inventory"
    copy_example_inventory(inv)
    path = inv / "group_vars" / "all" / "deployments.yml"
    data = yaml.safe_load(path.read_text())
    for dep in data["gpufleet_model_deployments"]:
        if dep["name"] == "llama-70b":
            dep["replicas"] = llama_replicas
        for engine in dep["engines"]:
            for member in engine["members"]:
                for container in member["template"]["spec"]["containers"]:
                    container.setdefault("env", []).append({"name": "MODEL_REVISION", "value": SENTINEL})
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
    return inv


def run(inv: Path, playbook: str, *extra: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    environ.pop("GPUFLEET_QUIET", None)
    environ.update(env)
    proc = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(inv / "hosts.yml"),
            str(REPO / "playbooks" / playbook),
            "-e",
            f"gpufleet_render_dir={inv.parent / 'rendered'}",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=environ,
        cwd=REPO,
        check=False,
    )
    if check:
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc


DEGRADED = "1 deployment(s) Ready; Degraded (see above): llama-70b, deepseek-v3."
HOPPER = 'selector `device.attributes["gpu.nvidia.com"].architecture == "Hopper"` is false for device gpu (NVIDIA L4)'


def test_the_fleet_callback_prints_the_report_as_lines(tmp_path):
    out = run(inventory(tmp_path), "deploy.yml", ANSIBLE_STDOUT_CALLBACK="gpufleet.serving.fleet").stdout
    lines = out.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("DEPLOYMENT ")))
    assert "Show the placement" in lines[start - 1]  # the task banner, then the report - no "ok: [host] =>"
    assert re.match(r"^llama-70b\s+6\s+5\s+Degraded\s+InsufficientCapacity\s", lines[start + 2]), lines[
        start : start + 4
    ]
    report = lines[start:]
    assert "Why replicas could not be placed or run:" in report
    # a CEL selector as written: its quotes are not escaped
    assert any(line.endswith(HOPPER) for line in report), report
    assert '\\"' not in out and '"msg"' not in out
    assert any(line.startswith(DEGRADED) for line in report)
    assert any(line.startswith("Written: report ") and "fleet.html" in line for line in report)


def test_the_default_callback_prints_the_report_as_a_block_of_lines_with_yaml_results(tmp_path):
    out = run(
        inventory(tmp_path),
        "status.yml",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
        ANSIBLE_CALLBACK_RESULT_FORMAT="yaml",
    ).stdout
    block = re.search(r"^    msg: \|-\n((?:        .*\n)+)", out, re.M)
    assert block, out[-3000:]
    lines = [line[8:] for line in block.group(1).splitlines()]
    assert lines[0].startswith("DEPLOYMENT ")
    assert re.match(r"^qwen-demo\s+3\s+3\s+Ready\s", lines[1])
    assert any(line.strip().endswith(HOPPER) for line in lines)


def test_quiet_mode_prints_only_the_summary(tmp_path):
    inv = inventory(tmp_path)
    out = run(inv, "deploy.yml", "-e", "gpufleet_report=summary", GPUFLEET_QUIET="1").stdout
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("DEPLOYMENT ")  # nothing before the report: no play or task banner
    assert re.match(r"^deepseek-v3\s+1\s+0\s+Degraded\s", lines[3])
    assert lines[4].startswith(DEGRADED)
    assert lines[5] == f"Written: report {inv}/.gpufleet/report.json; picture {inv}/.gpufleet/fleet.html"
    assert lines[6].startswith("PLAY RECAP") and len(lines) == 8
    for noise in ("TASK [", "PLAY [", "ok: [", "changed: [", "skipping: [", "included:", "Why replicas"):
        assert noise not in out, noise
    # the report file holds everything, the explanation included
    report = json.loads((inv / ".gpufleet" / "report.json").read_text())
    assert "Why replicas could not be placed or run:" in report["lines"]
    assert any(HOPPER in line for line in report["deployments"]["llama-70b"]["why"])


def test_deploy_writes_the_json_report_and_the_picture_beside_the_state_file(tmp_path):
    inv = inventory(tmp_path)
    out = run(inv, "deploy.yml", ANSIBLE_STDOUT_CALLBACK="gpufleet.serving.fleet").stdout
    state = inv / ".gpufleet"
    assert sorted(p.name for p in state.iterdir()) == ["fleet.html", "report.json"]  # atomic: no staged file left
    report = json.loads((state / "report.json").read_text())
    assert report["fleet"] == "example" and report["mode"] == "render" and report["source"] == "placement"
    assert report["summary"].startswith(DEGRADED)
    assert report["degraded"] == report["shortfalls"] == ["llama-70b", "deepseek-v3"]
    llama = report["deployments"]["llama-70b"]
    assert (llama["desired"], llama["scheduled"], llama["status"]) == (6, 5, "Degraded")
    assert {r["readiness"] for r in llama["replicas"]} == {"Rendered"}
    # what the text report printed, line for line (the picture's line aside)
    printed = out.splitlines()
    assert all(line in printed for line in report["lines"])
    # every replica is drawn on the devices it holds (report version 2: each node's holders with their devices)
    assert report["version"] == 2
    held = {
        (c["cluster"], h["replica"])
        for c in report["clusters"]
        for p in c["pools"]
        for n in p["nodes"]
        for h in n.get("holders") or []
        if h["devices"]
    }
    assert {r for _c, r in held} == {r["replica"] for dep in report["deployments"].values() for r in dep["replicas"]}
    page = (state / "fleet.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    # the pod template's values reach the rendered files, never the report or the picture
    assert any(SENTINEL in p.read_text() for p in (tmp_path / "rendered").rglob("*.yaml"))
    assert SENTINEL not in page and SENTINEL not in (state / "report.json").read_text()
    # a second run writes the same report (no timestamp) and changes nothing
    before = {p.name: p.read_bytes() for p in state.iterdir()}
    again = run(inv, "deploy.yml", ANSIBLE_STDOUT_CALLBACK="gpufleet.serving.fleet").stdout
    assert not re.search(r"changed=[1-9]", again)
    assert {p.name: p.read_bytes() for p in state.iterdir()} == before


def test_status_writes_the_report_where_asked_and_check_mode_writes_nothing(tmp_path):
    inv = inventory(tmp_path, llama_replicas=2)
    where = tmp_path / "out"
    extra = ("-e", f"gpufleet_report_file={where}/r.json", "-e", f"gpufleet_fleet_html={where}/f.html")
    run(inv, "status.yml", "--check", *extra)
    assert not where.exists() and not (tmp_path / "rendered").exists()
    run(inv, "status.yml", *extra)
    assert sorted(p.name for p in where.iterdir()) == ["f.html", "r.json"]
    assert not (tmp_path / "rendered").exists()  # status writes the report, never the render directory
    assert json.loads((where / "r.json").read_text())["summary"] == "3 deployment(s) Ready; none Degraded."
    # an empty path writes none
    shutil.rmtree(where)
    run(inv, "status.yml", "-e", "gpufleet_report_file=", "-e", "gpufleet_fleet_html=")
    assert not where.exists() and not (inv / ".gpufleet").exists()
