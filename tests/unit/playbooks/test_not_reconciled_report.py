"""deploy.yml in apply mode when no cluster can be reached (issue 23): the run fails naming each cluster, and each
cluster's reason is on a line of its own (`name: reason`)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from example_fleet import copy_example_inventory

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def closed_port() -> int:
    """A local TCP port nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_each_cluster_not_reconciled_is_named_with_its_reason_on_its_own_line(tmp_path):
    inventory = tmp_path / "inventory"
    copy_example_inventory(inventory)
    (inventory / "group_vars" / "all" / "mode.yml").write_text("---\ngpufleet_mode: apply\n")
    port = closed_port()
    clusters = sorted(p.stem for p in (inventory / "host_vars").glob("*.yml"))
    for name in clusters:
        kubeconfig = tmp_path / f"{name}.kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": name, "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                    "users": [{"name": name, "user": {"token": "t"}}],
                    "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
                    "current-context": name,
                }
            )
        )
        host_vars = inventory / "host_vars" / f"{name}.yml"
        data = yaml.safe_load(host_vars.read_text())
        data["gpufleet_kubeconfig"] = str(kubeconfig)
        data["gpufleet_context"] = name
        host_vars.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STDOUT_CALLBACK="default",
    )
    proc = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(inventory / "hosts.yml"),
            str(REPO / "playbooks" / "deploy.yml"),
            "-e",
            f"gpufleet_state_file={tmp_path / 'state.json'}",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    header = re.search(
        r"^.*Clusters not reconciled this run \(their replicas were kept where they are\): ([^.]*)\.$", out, re.M
    )
    assert header, out[-4000:]
    named = header.group(1).split(", ")
    assert sorted(named) == clusters
    # the lines right after the header: one per cluster, `name: reason`, in the order named
    following = out[header.end() :].lstrip("\n").splitlines()[: len(clusters)]
    assert [line.split(": ", 1)[0] for line in following] == named, out[header.start() : header.start() + 3000]
    for line in following:
        name, reason = line.split(": ", 1)
        assert "Connection refused" in reason, line  # what could not be done, not "key: value"
    assert "key: value" not in out
