"""The serving_manifests filter plugin: argument errors, Ansible's error type, and use from a real playbook (Jinja,
data-tagged variables from vars files and templated values)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import k8s_schemas
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from serving_cases import build, example_caches, example_deployment, replica

from ansible_collections.gpufleet.serving.plugins.filter.serving_manifests import FilterModule, serving_manifests

REPO = Path(__file__).resolve().parents[4]
COLLECTIONS = REPO / ".venv" / "collections"


def test_filter_is_registered():
    assert FilterModule().filters() == {"serving_manifests": serving_manifests}


def _case() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    dep = example_deployment("deepseek-v3")
    return [replica(dep, "onprem-a", 0, "dgx")], dep


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        ((None,), {"cluster": "onprem-a", "fleet": "f"}, "replicas must be a list of replicas (got NoneType)"),
        (("replicas",), {"cluster": "onprem-a", "fleet": "f"}, "replicas must be a list of replicas (got str)"),
        ((), {"fleet": "f"}, "cluster is required"),
        ((), {"cluster": 3, "fleet": "f"}, "cluster must be the name of the cluster"),
        ((), {"cluster": "onprem-a", "fleet": "f", "gateway": {"nam": "gw"}}, "gateway.name: is required"),
        ((), {"cluster": "onprem-a", "fleet": "f", "labels": ["x"]}, "labels: must be a mapping (got list)"),
        # Fleet identity: required, and a Kubernetes label value.
        ((), {"cluster": "onprem-a"}, "fleet is required: the fleet's name (gpufleet_fleet_name)"),
        ((), {"cluster": "onprem-a", "fleet": "prod fleet"}, "fleet: must be a Kubernetes label value"),
        ((), {"cluster": "onprem-a", "fleet": "x" * 64}, "at most 63 characters"),
    ],
)
def test_argument_errors_are_ansible_filter_errors(args, kwargs, fragment):
    replicas, dep = _case()
    call_args = (*args, dep) if args else (replicas, dep)
    with pytest.raises(AnsibleFilterError) as err:
        serving_manifests(*call_args, **kwargs)
    assert str(err.value).startswith("serving_manifests: ")
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda r, d, c: r[0].update(deployment="qwen-demo"), "replicas[0].deployment: 'qwen-demo' does not match"),
        (lambda r, d, c: r[0]["engines"][0].update(name="pp4"), "replicas[0].engines[0].name: 'pp4' is not an engine"),
        (
            lambda r, d, c: r[0]["engines"][0]["members"][1].update(role="Standalone"),
            "replicas[0].engines[0].members[1].role: 'Standalone' does not match engine 'pp2'",
        ),
        (lambda r, d, c: d.update(cache="missing"), "deployment.cache: unknown model cache 'missing'"),
        (
            lambda r, d, c: d["engines"][0]["members"][1].pop("template"),
            "deployment.engines[0].members[1].template: is required",
        ),
        (lambda r, d, c: d["engines"][0]["members"][0].update(role="Boss"), "deployment.engines[0].members[0].role"),
        (lambda r, d, c: c.append({"name": "x"}) or d.update(cache="x"), "caches[1].source: is required"),
    ],
)
def test_bad_input_names_what_is_wrong(mutate, fragment):
    replicas, dep = _case()
    caches = example_caches()
    mutate(replicas, dep, caches)
    with pytest.raises(AnsibleFilterError) as err:
        serving_manifests(replicas, dep, cluster="onprem-a", caches=caches, fleet="f")
    message = str(err.value)
    assert message.startswith("serving_manifests: "), message
    assert fragment in message, message
    assert err.value.__cause__ is not None  # raised from the GpufleetError, traceback kept


def test_result_is_plain_data():
    replicas, dep, kwargs = build("kserve")
    objs = serving_manifests(replicas, dep, **kwargs)

    def check(value: Any) -> None:
        assert type(value) in (dict, list, str, int, bool), type(value)
        if isinstance(value, dict):
            for k, v in value.items():
                # Exact type on purpose, like the check above: plain data, no str subclass (e.g. a tagged string).
                assert type(k) is str  # pylint: disable=unidiomatic-typecheck
                check(v)
        elif isinstance(value, list):
            for v in value:
                check(v)

    assert isinstance(objs, list) and objs
    check(objs)


PLAYBOOK = """\
---
- name: Render serving manifests through Jinja
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - vars.yml
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
    target: "{{ 'gke-' ~ 'europe-west4' }}"
  tasks:
    - name: Render the cluster's objects
      ansible.builtin.set_fact:
        objs: "{{ replicas | gpufleet.serving.serving_manifests(deployment, cluster=target, caches=caches,
                  gateway={'name': gateway_name}, labels={'team': team}, fleet=fleet_name) }}"

    - name: Use the result in Jinja like any list of objects
      ansible.builtin.assert:
        that:
          - objs | map(attribute='kind') | list == ['ResourceClaimTemplate', 'Deployment', 'Service', 'Service', 'HTTPRoute']
          - objs[1].spec.template.metadata.labels['gpufleet.io/cluster'] == 'gke-europe-west4'
          - objs[1].metadata.labels.team == 'ml'
          - objs[1].metadata.labels['gpufleet.io/fleet'] == 'ml-prod'
          - "'gpufleet.io/fleet' not in objs[1].spec.template.metadata.labels"

    - name: Save the result
      ansible.builtin.copy:
        content: "{{ objs | to_json }}"
        dest: "{{ out_dir }}/objs.json"
        mode: "0644"

    - name: Bad input fails the task with a named error
      block:
        - name: Render with a deployment the replicas do not belong to
          ansible.builtin.set_fact:
            bad: "{{ replicas | gpufleet.serving.serving_manifests(deployment | combine({'name': 'other'}),
                     cluster=target, caches=caches, fleet=fleet_name) }}"
      rescue:
        - name: Save the error
          ansible.builtin.copy:
            content: "{{ ansible_failed_result.msg }}"
            dest: "{{ out_dir }}/error.txt"
            mode: "0644"
"""


@pytest.mark.skipif(
    shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) is None, reason="no ansible-playbook"
)
def test_filter_in_a_playbook_with_tagged_variables(tmp_path):
    """Variables from a vars file reach the filter as ansible-core's tagged/lazy values; templated ones too."""
    if not (COLLECTIONS / "ansible_collections" / "gpufleet" / "serving").exists():
        pytest.skip(f"collection not linked under {COLLECTIONS} (run `make setup`)")
    dep = example_deployment("qwen-demo")
    replicas = [replica(dep, "gke-europe-west4", 0, "l4"), replica(dep, "gke-us-central1", 1, "l4")]
    data = {
        "replicas": replicas,
        "deployment": dep,
        "caches": example_caches(),
        "gateway_name": "fleet-gateway",
        "team": "ml",
        "fleet_name": "ml-prod",
        "out_dir": str(tmp_path),
    }
    (tmp_path / "vars.yml").write_text(yaml.safe_dump(data, sort_keys=False))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
    }
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "play.yml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,  # asserted below, with the playbook's output in the message
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    objs = json.loads((tmp_path / "objs.json").read_text())
    expected = serving_manifests(
        copy.deepcopy(replicas),
        copy.deepcopy(dep),
        cluster="gke-europe-west4",
        caches=example_caches(),
        gateway={"name": "fleet-gateway"},
        labels={"team": "ml"},
        fleet="ml-prod",
    )
    assert objs == expected
    k8s_schemas.validate_objects(objs)
    error = (tmp_path / "error.txt").read_text()
    assert "serving_manifests: " in error
    assert "replicas[0].deployment: 'qwen-demo' does not match the deployment 'other'" in error
