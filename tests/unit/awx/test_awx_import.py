"""awx/import.yml runs: against a stand-in awx.awx collection whose modules record their arguments (no AWX server
here), it creates every job template, the credential type and the workflow with the arguments AWX needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_awx_templates import JOB_TEMPLATE_ARGS, WORKFLOW_ARGS

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
CREDENTIAL_TYPE_ARGS = {"name", "new_name", "description", "kind", "inputs", "injectors", "state"}

# An action plugin standing in for an awx.awx module: it refuses an argument the real module does not take and
# appends the arguments it got to $AWX_CALLS (one JSON object a line).
STAND_IN = """
import json, os
from ansible.plugins.action import ActionBase
ALLOWED = set({allowed!r})
class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        args = dict(self._task.args)
        unknown = sorted(set(args) - ALLOWED)
        if unknown:
            return {{"failed": True, "msg": "unsupported parameters: " + ", ".join(unknown)}}
        with open(os.environ["AWX_CALLS"], "a") as out:
            out.write(json.dumps({{"module": {module!r}, "args": args}}) + "\\n")
        return {{"changed": True}}
"""


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_import_creates_the_templates_credential_type_and_workflow(tmp_path):
    stand_in = tmp_path / "collections" / "ansible_collections" / "awx" / "awx"
    (stand_in / "plugins" / "action").mkdir(parents=True)
    (stand_in / "galaxy.yml").write_text("namespace: awx\nname: awx\nversion: 99.0.0\n")
    for module, allowed in {
        "job_template": JOB_TEMPLATE_ARGS,
        "workflow_job_template": WORKFLOW_ARGS,
        "credential_type": CREDENTIAL_TYPE_ARGS,
    }.items():
        (stand_in / "plugins" / "action" / f"{module}.py").write_text(
            STAND_IN.format(allowed=sorted(allowed), module=module)
        )
    calls = tmp_path / "calls.jsonl"
    settings = {
        "gpufleet_awx_organization": "Fleet Org",
        "gpufleet_awx_credentials": ["fleet kubeconfig"],
        "gpufleet_awx_extra_vars": {"gpufleet_render_dir": "/mnt/gitops/fleet", "gpufleet_state_file": "/mnt/s/p.json"},
        "gpufleet_awx_apply_slices": 4,
    }
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=f"{tmp_path / 'collections'}{os.pathsep}{REPO / '.venv' / 'collections'}",
        AWX_CALLS=str(calls),
        ANSIBLE_NOCOLOR="1",
    )
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(REPO / "awx" / "import.yml"), "-e", json.dumps(settings)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    made = [json.loads(line) for line in calls.read_text().splitlines()]
    templates = {c["args"]["name"]: c["args"] for c in made if c["module"] == "job_template"}
    data = yaml.safe_load((REPO / "awx" / "job_templates.yml").read_text())["gpufleet_awx_job_templates"]
    assert set(templates) == {t["name"] for t in data}
    for name, args in templates.items():
        assert args["organization"] == "Fleet Org" and args["credentials"] == ["fleet kubeconfig"]
        assert args["extra_vars"] == settings["gpufleet_awx_extra_vars"], name
        assert int(args["job_slice_count"]) == (4 if name == "gpufleet - apply" else 1)
    assert templates["gpufleet - drain"]["survey_spec"]["spec"][0]["variable"] == "cluster"
    assert "survey_spec" not in templates["gpufleet - validate"]

    [credential_type] = [c["args"] for c in made if c["module"] == "credential_type"]
    # AWX's own templates reach AWX untouched (Ansible must not template them at import).
    assert credential_type["injectors"]["extra_vars"] == {"gpufleet_kubeconfig": "{{ tower.filename.kubeconfig }}"}

    [workflow] = [c["args"] for c in made if c["module"] == "workflow_job_template"]
    assert [n["identifier"] for n in workflow["schema"]] == ["plan", "apply", "apply-all", "status"]
    assert all(n["unified_job_template"]["organization"] == {"name": "Fleet Org"} for n in workflow["schema"])
    assert all(n["unified_job_template"]["name"] in templates for n in workflow["schema"])
