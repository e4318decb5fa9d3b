"""End-to-end fixtures: a local fleet of real control planes (scripts/localfleet) and playbook runs against it.

Set GPUFLEET_E2E_STATE to the state directory of a fleet already brought up from tests/e2e/inventory to reuse it
(fast iteration); otherwise the session brings one up in a temporary directory and tears it down at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LOCALFLEET = REPO / "scripts" / "localfleet"
BIN = Path(sys.executable).parent
INVENTORY = Path(__file__).resolve().parent / "inventory"


def _client(kubeconfig: Path) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(kubeconfig))


class Fleet:
    """A running local fleet plus a private, editable copy of the test inventory."""

    def __init__(self, state: Path, inventory: Path, work: Path) -> None:
        self.state = state
        self.inventory = inventory
        self.work = work
        self.hosts = sorted(json.loads((state / "fleet.json").read_text())["clusters"], key=lambda c: c["name"])
        self.names = [c["name"] for c in self.hosts]
        self._clients: dict[str, Any] = {}

    # -- Kubernetes ---------------------------------------------------------------------------------------------
    def api(self, host: str) -> Any:
        if host not in self._clients:
            self._clients[host] = _client(self.state / "kubeconfigs" / host)
        return self._clients[host]

    def core(self, host: str) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api(host))

    def apps(self, host: str) -> Any:
        from kubernetes import client

        return client.AppsV1Api(self.api(host))

    def custom(self, host: str) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api(host))

    def list(self, host: str, group: str, version: str, plural: str, selector: str = "") -> list[dict[str, Any]]:
        """Cluster-wide list of any kind as plain dicts."""
        if group:
            return self.custom(host).list_cluster_custom_object(group, version, plural, label_selector=selector)[
                "items"
            ]
        path = f"/api/{version}/{plural}"
        data = self.api(host).call_api(
            path,
            "GET",
            query_params=[("labelSelector", selector)] if selector else [],
            response_types_map={200: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
        return data["items"]

    # -- playbooks ------------------------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        return dict(
            os.environ,
            ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_FORCE_COLOR="0",
            ANSIBLE_STDOUT_CALLBACK="default",
        )

    def argv(self, playbook: str, *extra: str) -> list[str]:
        return [
            str(BIN / "ansible-playbook"),
            "-i",
            str(self.inventory),
            "-i",
            str(self.state / "inventory"),
            str(REPO / "playbooks" / playbook),
            "-e",
            f"gpufleet_state_file={self.work / 'placement-state.json'}",
            "-e",
            f"gpufleet_render_dir={self.work / 'rendered'}",
            "-e",
            "model_deployment_wait_timeout=120",
            "-e",
            "model_deployment_poll_interval=1",
            "-e",
            "model_cache_poll_interval=1",
            *extra,
        ]

    def playbook(self, playbook: str, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            self.argv(playbook, *extra), capture_output=True, text=True, env=self.env(), cwd=REPO, check=False
        )
        (self.work / "last-run.log").write_text(proc.stdout + proc.stderr)
        if check:
            assert proc.returncode == 0, f"{playbook} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
        return proc

    def set_deployment(self, name: str, **fields: Any) -> None:
        path = self.inventory / "group_vars" / "all" / "deployments.yml"
        data = yaml.safe_load(path.read_text())
        dep = next(d for d in data["gpufleet_model_deployments"] if d["name"] == name)
        dep.update(fields)
        path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))

    def kubectl(self, host: str, *args: str) -> str:
        """Run the local fleet's kubectl against ``host`` (as another field manager would); its output."""
        kubectl = Path(json.loads((self.state / "fleet.json").read_text())["bin"]) / "kubectl"
        proc = subprocess.run(
            [str(kubectl), "--kubeconfig", str(self.state / "kubeconfigs" / host), *args],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stdout}{proc.stderr}"
        return proc.stdout

    def localfleet(self, *args: str) -> None:
        subprocess.run([sys.executable, str(LOCALFLEET), args[0], str(self.state), *args[1:]], check=True)


def wait_for(what: str, check: Any, timeout: float = 60, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("e2e")
    inventory = work / "inventory"
    shutil.copytree(INVENTORY, inventory)
    reuse = os.environ.get("GPUFLEET_E2E_STATE")
    if reuse:
        state = Path(reuse).resolve()
        subprocess.run([sys.executable, str(LOCALFLEET), "status", str(state)], check=True)
        yield Fleet(state, inventory, work)
        return
    state = work / "fleet"
    subprocess.run([sys.executable, str(LOCALFLEET), "up", str(INVENTORY), str(state)], check=True)
    try:
        yield Fleet(state, inventory, work)
    finally:
        subprocess.run([sys.executable, str(LOCALFLEET), "down", str(state)], check=False)
