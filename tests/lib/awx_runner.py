"""Run a playbook the way AWX / Automation Controller runs a job: through ansible-runner, in a private data directory.

AWX lays out, per job, a private data directory and hands it to ansible-runner (``awx/main/tasks/jobs.py``):

- ``project/``: the project checkout (here awx/project/: the job templates' playbooks); the playbook runs from it;
- ``inventory/hosts``: an executable script printing the inventory as JSON - all groups (their variables, their hosts
  and children), ``_meta.hostvars`` with ``remote_tower_enabled`` / ``remote_tower_id`` - of only the job's slice of the
  hosts when the job template is sliced (``Inventory.get_script_data``: hosts sorted by name, slice ``n`` of ``k`` is
  ``hosts[n-1::k]``); ``inventory_dir`` is therefore ``<private data dir>/inventory``;
- ``env/extravars`` (the job template's extra variables, the survey answers, the artifacts of earlier workflow nodes,
  and ``awx_job_id`` / ``tower_job_id`` ...) and ``env/envvars``;
- ``artifacts/<job id>/``, where ansible-runner writes ``job_events/*.json`` (what AWX stores and shows); the custom
  stats (``set_stats``) are the ``artifact_data`` of the ``playbook_on_stats`` event, which AWX keeps as the job's
  artifacts and passes on to the next workflow nodes as extra variables.

AWX drops the ``res`` of an event larger than 700,000 characters (``MAX_EVENT_RES``; ansible-runner's callback does
the dropping): jobs here run with the limit lifted so that a test sees the real sizes and can hold them under it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
#: AWX's limit on an event's ``res`` (settings.MAX_EVENT_RES_DATA); ansible-runner's default MAX_EVENT_RES.
MAX_EVENT_RES = 700_000


def inventory_data(inventory: Path) -> dict[str, Any]:
    """The inventory as AWX imports it from a project source (``ansible-inventory --list --export``): groups with
    their variables, hosts with theirs."""
    proc = subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", str(inventory), "--list", "--export"],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections")),
    )
    return json.loads(proc.stdout)


def script_data(data: dict[str, Any], slice_number: int = 1, slice_count: int = 1) -> dict[str, Any]:
    """What AWX's inventory script prints for a job (slice ``slice_number`` of ``slice_count``)."""
    hostvars = data.get("_meta", {}).get("hostvars", {})
    hosts = sorted(hostvars)
    if slice_count > 1:
        hosts = hosts[slice_number - 1 :: slice_count]
    kept = set(hosts)
    out: dict[str, Any] = {"all": {}}
    all_vars = (data.get("all") or {}).get("vars")
    if all_vars:
        out["all"]["vars"] = all_vars
    groups = [g for g in data if g not in ("_meta", "all")]
    grouped: set[str] = set()
    for group in groups:
        info: dict[str, Any] = {}
        members = [h for h in data[group].get("hosts") or [] if h in kept]
        if members:
            info["hosts"] = members
            grouped.update(members)
        if data[group].get("children"):
            info["children"] = list(data[group]["children"])
        if data[group].get("vars"):
            info["vars"] = data[group]["vars"]
        if info:
            out[group] = info
    out["all"]["hosts"] = [h for h in hosts if h not in grouped]
    out["all"]["children"] = groups
    out["_meta"] = {
        "hostvars": {
            h: {**hostvars[h], "remote_tower_enabled": "true", "remote_tower_id": i + 1}
            for i, h in enumerate(sorted(hostvars))
            if h in kept
        }
    }
    return out


@dataclass
class Job:
    """A finished job: its status, return code, events and custom stats (the artifacts AWX passes on)."""

    ident: str
    private_data_dir: Path
    status: str
    rc: int
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stdout(self) -> str:
        return "\n".join(e.get("stdout", "") for e in self.events if e.get("stdout"))

    @property
    def artifacts(self) -> dict[str, Any]:
        """The custom stats: the ``artifact_data`` of the ``playbook_on_stats`` event."""
        stats = [e for e in self.events if e.get("event") == "playbook_on_stats"]
        return (stats[-1].get("event_data") or {}).get("artifact_data") or {} if stats else {}

    def largest_event(self) -> tuple[int, str]:
        """The size of the largest event's ``stdout`` or ``event_data`` (as AWX stores them: JSON) and what it is."""
        sizes = []
        for e in self.events:
            data = e.get("event_data") or {}
            sizes.append((len(e.get("stdout") or ""), f"stdout of {e.get('event')} {data.get('task', '')}"))
            sizes.append((len(json.dumps(data)), f"event_data of {e.get('event')} {data.get('task', '')}"))
            if "res" in data:
                sizes.append((len(str(data["res"])), f"res of {e.get('event')} {data.get('task', '')}"))
        return max(sizes) if sizes else (0, "")


def run_job(
    work: Path,
    ident: int,
    playbook: str,
    inventory: dict[str, Any],
    extravars: dict[str, Any],
    *,
    project: Path = REPO / "awx" / "project",
    envvars: dict[str, str] | None = None,
) -> Job:
    """Run ``playbook`` (relative to the project) as AWX job ``ident``; ``inventory`` is the script's data."""
    import ansible_runner

    pdd = work / f"job-{ident}"
    shutil.copytree(project, pdd / "project")
    (pdd / "inventory").mkdir(parents=True)
    script = pdd / "inventory" / "hosts"
    script.write_text(f"#! {sys.executable}\n# -*- coding: utf-8 -*-\nprint({json.dumps(json.dumps(inventory))})\n")
    script.chmod(0o700)
    (pdd / "env").mkdir()
    meta = {f"{p}_{k}": v for p in ("awx", "tower") for k, v in (("job_id", ident), ("job_launch_type", "manual"))}
    (pdd / "env" / "extravars").write_text(json.dumps({**meta, **extravars}))
    env = {
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".venv" / "collections"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "MAX_EVENT_RES": str(10**9),  # see the sizes as they are; the tests hold them under AWX's limit
        "JOB_ID": str(ident),
        **(envvars or {}),
    }
    (pdd / "env" / "envvars").write_text(json.dumps(env))
    result = ansible_runner.run(private_data_dir=str(pdd), playbook=playbook, ident=str(ident), quiet=True)
    events_dir = pdd / "artifacts" / str(ident) / "job_events"
    events = [json.loads(p.read_text()) for p in events_dir.glob("*.json")]
    events.sort(key=lambda e: e.get("counter", 0))
    return Job(str(ident), pdd, result.status, result.rc, events)
