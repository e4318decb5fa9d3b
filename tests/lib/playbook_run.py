"""Run one of the collection's playbooks over a test inventory with a render directory, the way a user does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def run_playbook(inventory: Path, playbook: str, render: Path, *extra: str, callback: str | None = None) -> str:
    """``playbooks/<playbook>`` over ``inventory/hosts.yml`` rendering into ``render``; its stdout (it must pass).
    ``callback``: the stdout callback (``json`` for a document of every task result)."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    if callback:
        env["ANSIBLE_STDOUT_CALLBACK"] = callback
    proc = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(inventory / "hosts.yml"),
            str(REPO / "playbooks" / playbook),
            "-e",
            f"gpufleet_render_dir={render}",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    return proc.stdout
