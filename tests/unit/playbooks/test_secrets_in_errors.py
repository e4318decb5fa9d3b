"""The playbooks on a copy of the example inventory: a credential in the inventory is refused, and no output of the
run (at default verbosity) repeats it (issue 23)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from example_fleet import copy_example_inventory

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
TOKEN = "sentinel-bearer-token-9f2c"
AWS_SECRET = "sentinel/aws+secret/9f2c"
PASSWORD = "sentinel-proxy-pw-9f2c"

pytestmark = pytest.mark.skipif(
    not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python"
)


def inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "inventory"
    copy_example_inventory(inv)
    return inv


def set_vars(path: Path, **values: object) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    data.update(values)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")


def failed_run(inv: Path, playbook: str | Path, *extra: str) -> str:
    """Run a playbook that must fail; return everything it printed."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(inv / "hosts.yml"),
            str(playbook),
            "-e",
            f"gpufleet_render_dir={inv}/r",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode != 0, proc.stdout[-3000:]
    return proc.stdout + proc.stderr


def test_an_inline_kubeconfig_is_refused_without_printing_it(tmp_path):
    inv = inventory(tmp_path)
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "users": [{"name": "admin", "user": {"token": TOKEN}}]}
    set_vars(inv / "host_vars" / "onprem-a.yml", gpufleet_kubeconfig=kubeconfig)
    out = failed_run(inv, REPO / "playbooks" / "deploy.yml")
    assert "hostvars['onprem-a'].gpufleet_kubeconfig: must be the path of a kubeconfig file" in out
    assert TOKEN not in out


def test_an_s3_uri_with_keys_is_refused_without_printing_them(tmp_path):
    inv = inventory(tmp_path)
    caches = inv / "group_vars" / "all" / "caches.yml"
    data = yaml.safe_load(caches.read_text(encoding="utf-8"))
    data["gpufleet_model_caches"][0]["source"] = {"s3": {"uri": f"s3://AKIASENTINEL9F2C:{AWS_SECRET}@models/qwen"}}
    caches.write_text(yaml.safe_dump(data), encoding="utf-8")
    out = failed_run(inv, REPO / "playbooks" / "caches.yml")
    assert "gpufleet_model_caches[0] (qwen-2-5-0-5b).source.s3.uri: carries credentials" in out
    for value in (AWS_SECRET, "AKIASENTINEL9F2C", "aws+secret"):
        assert value not in out


@pytest.mark.parametrize(
    ("env", "shown"),
    [
        ([{"name": "HF_TOKEN", "value": TOKEN}], "env[0].value: HF_TOKEN looks like a credential"),
        (
            [{"name": "HTTPS_PROXY", "value": f"http://user:{PASSWORD}@proxy:3128"}],
            "env[0].value: the value of HTTPS_PROXY carries a user name or password",
        ),
    ],
)
def test_a_credential_in_model_cache_env_is_refused_without_printing_it(tmp_path, env, shown):
    inv = inventory(tmp_path)
    out = failed_run(inv, REPO / "playbooks" / "caches.yml", "-e", json.dumps({"model_cache_env": env}))
    assert shown in out and "model_cache_secrets" in out
    assert TOKEN not in out and PASSWORD not in out
    assert not (inv / "r").exists()  # nothing rendered


def test_an_abbreviated_reserved_hydrator_option_is_refused(tmp_path):
    inv = inventory(tmp_path)
    out = failed_run(inv, REPO / "playbooks" / "caches.yml", "-e", '{"model_cache_extra_args": ["--des", "/tmp/x"]}')
    assert "extra_args must not set --des (abbreviates --dest)" in out
    assert not (inv / "r").exists()


def test_the_connection_role_never_prints_a_bad_kubeconfig(tmp_path):
    inv = inventory(tmp_path)
    set_vars(inv / "host_vars" / "onprem-a.yml", gpufleet_kubeconfig=[{"users": [{"user": {"token": TOKEN}}]}])
    play = tmp_path / "pin.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Pin the connection",
                    "hosts": "onprem-a",
                    "gather_facts": False,
                    "roles": [{"role": "gpufleet.serving.cluster_connection"}],
                }
            ]
        ),
        encoding="utf-8",
    )
    out = failed_run(inv, play)
    assert "gpufleet_kubeconfig must be a path or a kubeconfig mapping (got a list of 1 item)" in out
    assert TOKEN not in out
