"""awx/: the job templates, workflow and surveys a user imports into AWX (issue 26). Every survey question sets a real
public variable of the collection with a type its answer converts to, every job template's playbook exists in the
project skeleton and runs a playbook of the collection, and the data takes only the awx.awx modules' arguments."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.survey import parse

REPO = Path(__file__).resolve().parents[3]
AWX = REPO / "awx"

# The arguments of awx.awx.job_template and awx.awx.workflow_job_template (ansible/awx, awx_collection/plugins/modules,
# their argument_spec; aliases included) and of a workflow node of the latter's `schema`.
JOB_TEMPLATE_ARGS = {
    "name", "new_name", "copy_from", "description", "organization", "job_type", "inventory", "project", "playbook",
    "credential", "vault_credential", "credentials", "execution_environment", "custom_virtualenv", "instance_groups",
    "forks", "limit", "verbosity", "extra_vars", "job_tags", "force_handlers", "force_handlers_enabled", "skip_tags",
    "start_at_task", "timeout", "use_fact_cache", "fact_caching_enabled", "host_config_key", "ask_diff_mode_on_launch",
    "ask_variables_on_launch", "ask_limit_on_launch", "ask_tags_on_launch", "ask_skip_tags_on_launch",
    "ask_job_type_on_launch", "ask_verbosity_on_launch", "ask_inventory_on_launch", "ask_credential_on_launch",
    "ask_execution_environment_on_launch", "ask_forks_on_launch", "ask_instance_groups_on_launch",
    "ask_job_slice_count_on_launch", "ask_labels_on_launch", "ask_timeout_on_launch", "survey_enabled", "survey_spec",
    "become_enabled", "diff_mode", "diff_mode_enabled", "allow_simultaneous", "concurrent_jobs_enabled", "scm_branch",
    "ask_scm_branch_on_launch", "job_slice_count", "webhook_service", "webhook_credential", "labels",
    "notification_templates_started", "notification_templates_success", "notification_templates_error",
    "prevent_instance_group_fallback", "state",
}  # fmt: skip
WORKFLOW_ARGS = {
    "name", "new_name", "copy_from", "description", "extra_vars", "organization", "allow_simultaneous",
    "ask_variables_on_launch", "inventory", "limit", "scm_branch", "ask_inventory_on_launch", "ask_scm_branch_on_launch",
    "ask_limit_on_launch", "webhook_service", "webhook_credential", "survey_enabled", "survey_spec", "survey", "labels",
    "state", "notification_templates_started", "notification_templates_success", "notification_templates_error",
    "notification_templates_approvals", "schema", "destroy_current_schema",
}  # fmt: skip
NODE_ARGS = {
    "extra_data", "inventory", "scm_branch", "job_type", "job_tags", "skip_tags", "limit", "diff_mode", "verbosity",
    "all_parents_must_converge", "identifier", "state", "unified_job_template", "related",
}  # fmt: skip
# AWX's survey question types (awx/api/templates/api/job_template_survey_spec.md) and what each sends the playbook:
# text (also a choice) as a string, integer / float as numbers, multiselect as a list of strings.
QUESTION_TYPES = {"text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect"}
QUESTION_KEYS = {
    "question_name",
    "question_description",
    "variable",
    "type",
    "required",
    "default",
    "choices",
    "min",
    "max",
}

_SURVEY_CALL = re.compile(
    r"gpufleet\.serving\.survey\(\s*'(?P<name>[a-z_0-9]+)'\s*,\s*'(?P<kind>[a-z_]+)'\s*(?:,\s*(?P<choices>\[[^\]]*\]))?\s*\)"
)
_PATH_CALL = re.compile(r"gpufleet\.serving\.durable_path\(\s*'(?P<name>[a-z_0-9]+)'")
_FROM_FLEET_VAR = re.compile(r"^\{\{\s*(gpufleet_[a-z0-9_]+)\s*\|\s*default\(")
# How AWX decides a project file is a playbook it lists for job templates (awx/main/utils/ansible.py,
# valid_playbook_re): some line starts a play or imports one.
AWX_PLAYBOOK_LINE = re.compile(
    r"^\s*?-?\s*?(?:hosts|(ansible\.builtin\.)?include|(ansible\.builtin\.)?import_playbook):\s*?.*?$"
)


def public_variables() -> dict[str, dict[str, Any]]:
    """Every public variable the playbooks and roles read, with how it is read: ``kind`` (+ ``choices``) of the
    ``gpufleet.serving.survey`` filter that reads it, ``path`` for ``durable_path``, else the role argument spec's
    ``type``/``choices`` (a role's own option, or the ``gpufleet_*`` variable its default reads)."""
    found: dict[str, dict[str, Any]] = {}
    sources = [
        *REPO.glob("roles/*/defaults/main.yml"),
        *REPO.glob("roles/*/tasks/*.yml"),
        *REPO.glob("playbooks/*.yml"),
    ]
    for path in sources:
        text = path.read_text()
        for m in _SURVEY_CALL.finditer(text):
            choices = yaml.safe_load(m["choices"]) if m["choices"] else None
            found.setdefault(m["name"], {"kind": m["kind"], "choices": choices})
        for m in _PATH_CALL.finditer(text):
            found.setdefault(m["name"], {"kind": "path", "choices": None})
    for spec_file in REPO.glob("roles/*/meta/argument_specs.yml"):
        entry = (yaml.safe_load(spec_file.read_text())["argument_specs"].get("main") or {}).get("options") or {}
        for name, option in entry.items():
            spec = {"kind": option.get("type", "raw"), "choices": option.get("choices")}
            found.setdefault(name, spec)
            m = _FROM_FLEET_VAR.match(str(option.get("default", "")))
            if m:
                found.setdefault(m.group(1), spec)
    return found


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((AWX / name).read_text())


JOB_TEMPLATES = load("job_templates.yml")["gpufleet_awx_job_templates"]
WORKFLOW = load("workflow.yml")["gpufleet_awx_workflow"]
SURVEYS = [(jt["name"], jt["survey_spec"]) for jt in JOB_TEMPLATES if jt.get("survey_spec")] + [
    (WORKFLOW["name"], WORKFLOW["survey_spec"])
]
QUESTIONS = [(owner, q) for owner, spec in SURVEYS for q in spec["spec"]]


def test_the_registry_sees_the_variables_it_should():
    variables = public_variables()
    assert variables["gpufleet_mode"] == {"kind": "choice", "choices": ["render", "apply"]}
    assert variables["gpufleet_force_drain"]["kind"] == "bool"
    assert variables["gpufleet_render_dir"]["kind"] == "path"
    assert variables["model_deployment_wait_timeout"]["kind"] == "int"
    assert variables["drain_state"]["kind"] == "choice"


def _answers(question: dict[str, Any]) -> list[Any]:
    """The values AWX may send for ``question``: every choice (multiple choice), a list of choices (multiselect),
    text, or a number at the bounds."""
    kind = question["type"]
    if kind == "multiplechoice":
        return list(question["choices"])
    if kind == "multiselect":
        return [list(question["choices"])]
    if kind == "integer":
        return [int(question.get("min", 1)), int(question.get("max", 1))]
    if kind == "float":
        return [float(question.get("min", 1))]
    return ["a, b"] if question["variable"].endswith(("_clusters", "_explain", "_capacity_loss")) else ["/srv/x"]


@pytest.mark.parametrize(("owner", "question"), QUESTIONS, ids=[f"{o}:{q['variable']}" for o, q in QUESTIONS])
def test_every_question_sets_a_public_variable_its_answers_convert_to(owner, question):
    variables = public_variables()
    name = question["variable"]
    assert name in variables, f"{owner}: survey variable {name} is no public variable of the collection"
    assert set(question) <= QUESTION_KEYS, f"{owner}: {name}: unknown keys {set(question) - QUESTION_KEYS}"
    assert question["type"] in QUESTION_TYPES
    assert isinstance(question["required"], bool) and question["question_name"]
    spec = variables[name]
    kind, choices = spec["kind"], spec["choices"]
    answers = _answers(question)
    if "default" in question:
        answers.append(question["default"])
        if question["type"] == "multiplechoice":
            assert question["default"] in question["choices"]
    if question["type"] in ("multiplechoice", "multiselect"):
        assert isinstance(question["choices"], list) and question["choices"]
    if kind == "path":
        # A path whose blank answer would send "" (and so beat the inventory's value): text, min 1.
        assert question["type"] == "text" and question.get("min", 0) >= 1, f"{owner}: {name}"
        return
    if kind in ("int", "float"):  # a role option of that argument spec type: Ansible converts the answer
        assert question["type"] in (("integer",) if kind == "int" else ("integer", "float")), f"{owner}: {name}"
        return
    if kind in ("str", "raw"):  # read as given: text
        assert question["type"] in ("text", "textarea", "password", "multiplechoice"), f"{owner}: {name}"
        assert not choices or set(question.get("choices") or []) <= set(choices), f"{owner}: {name}"
        return
    for answer in answers:  # read through the gpufleet.serving.survey filter: every answer converts
        parse(answer, name, kind, choices)


def test_the_role_options_of_surveys_are_typed_as_their_answers():
    variables = public_variables()
    for owner, question in QUESTIONS:
        spec = variables[question["variable"]]
        if question["type"] == "integer":
            assert spec["kind"] == "int", f"{owner}: {question['variable']}"
        if spec["kind"] == "int":
            assert question["type"] == "integer", f"{owner}: {question['variable']}"


@pytest.mark.parametrize("answer", ["ture", "maybe", ""])
def test_a_wrong_answer_to_a_true_false_question_is_refused_by_name(answer):
    with pytest.raises(FleetValidationError, match=r"^gpufleet_fail_on_unschedulable: must be true or false"):
        parse(answer, "gpufleet_fail_on_unschedulable", "bool")


def test_unanswered_questions_keep_the_inventorys_values():
    """A survey answer is an extra variable and beats the inventory: only the drain's own questions have defaults, and
    a text question's blank answer sends nothing (min: 1) rather than an empty string."""
    for owner, question in QUESTIONS:
        if question["variable"] in ("cluster", "drain_state"):
            continue
        assert "default" not in question and question["required"] is False, f"{owner}: {question['variable']}"
        if question["type"] in ("text", "textarea"):
            assert question.get("min", 0) >= 1, f"{owner}: {question['variable']}"


def test_surveys_have_the_shape_awx_takes():
    for owner, spec in SURVEYS:
        assert set(spec) == {"name", "description", "spec"}, owner
        variables = [q["variable"] for q in spec["spec"]]
        assert len(variables) == len(set(variables)), f"{owner}: a variable asked twice"


@pytest.mark.parametrize("template", JOB_TEMPLATES, ids=[jt["name"] for jt in JOB_TEMPLATES])
def test_every_job_template_runs_a_playbook_of_the_collection(template):
    assert set(template) <= JOB_TEMPLATE_ARGS, set(template) - JOB_TEMPLATE_ARGS
    playbook = AWX / "project" / template["playbook"]
    assert playbook.is_file(), f"{template['name']}: {template['playbook']} is not in awx/project/"
    assert any(AWX_PLAYBOOK_LINE.match(line) for line in playbook.read_text().splitlines()), "AWX would not list it"
    [play] = yaml.safe_load(playbook.read_text())
    target = play["ansible.builtin.import_playbook"]
    assert target.startswith("gpufleet.serving.")
    assert (REPO / "playbooks" / f"{target.removeprefix('gpufleet.serving.')}.yml").is_file(), target
    assert bool(template.get("survey_spec")) == bool(template.get("survey_enabled"))


def test_plan_is_never_sliced_and_apply_is():
    by_name = {jt["name"]: jt for jt in JOB_TEMPLATES}
    assert by_name["gpufleet - plan"]["job_slice_count"] == 1
    assert by_name["gpufleet - deploy"]["job_slice_count"] == 1
    assert by_name["gpufleet - apply"]["job_slice_count"] > 1
    assert by_name["gpufleet - apply"]["playbook"] == "gpufleet/apply.yml"


def test_the_workflow_plans_then_applies_in_slices_then_reports():
    assert set(WORKFLOW) <= WORKFLOW_ARGS
    names = {jt["name"] for jt in JOB_TEMPLATES}
    nodes = {node["identifier"]: node for node in WORKFLOW["schema"]}
    for node in nodes.values():
        assert set(node) <= NODE_ARGS
        assert node["unified_job_template"]["type"] == "job_template"
        assert node["unified_job_template"]["name"] in names
        assert set(node["related"]) == {"success_nodes", "failure_nodes", "always_nodes", "credentials"}
        for link in ("success_nodes", "failure_nodes", "always_nodes"):
            assert all(target["identifier"] in nodes for target in node["related"][link])
    template = {i: n["unified_job_template"]["name"] for i, n in nodes.items()}
    assert template["plan"] == "gpufleet - plan"
    assert [t["identifier"] for t in nodes["plan"]["related"]["success_nodes"]] == ["apply"]
    assert [t["identifier"] for t in nodes["plan"]["related"]["failure_nodes"]] == ["status"]
    assert template["apply"] == "gpufleet - apply"  # sliced
    # An unsliced apply of the same plan finishes what slices cannot (removals across slices), then status reports.
    assert [t["identifier"] for t in nodes["apply"]["related"]["success_nodes"]] == ["apply-all"]
    by_name = {jt["name"]: jt for jt in JOB_TEMPLATES}
    assert template["apply-all"] == "gpufleet - apply all"
    assert by_name["gpufleet - apply all"]["playbook"] == by_name["gpufleet - apply"]["playbook"]
    assert by_name["gpufleet - apply all"]["job_slice_count"] == 1
    assert [t["identifier"] for t in nodes["apply-all"]["related"]["always_nodes"]] == ["status"]
    assert template["status"] == "gpufleet - status"
    assert nodes["status"]["all_parents_must_converge"] is False


def test_import_playbook_passes_only_module_arguments():
    [play] = yaml.safe_load((AWX / "import.yml").read_text())
    modules = {
        "awx.awx.job_template": JOB_TEMPLATE_ARGS,
        "awx.awx.workflow_job_template": WORKFLOW_ARGS,
    }
    used = set()
    for task in play["tasks"]:
        for module, allowed in modules.items():
            if module in task:
                used.add(module)
                assert set(task[module]) <= allowed, set(task[module]) - allowed
    assert used == set(modules)
    files = next(t for t in play["tasks"] if "ansible.builtin.include_vars" in t)["loop"]
    assert all((AWX / f).is_file() for f in files)


def test_the_awx_folder_ships_in_the_collection_tarball():
    """ansible-galaxy leaves out what galaxy.yml's build_ignore matches (fnmatch on the path and on each parent)."""
    ignore = yaml.safe_load((REPO / "galaxy.yml").read_text()).get("build_ignore") or []
    files = [p.relative_to(REPO).as_posix() for p in AWX.rglob("*") if p.is_file()]
    assert "awx/import.yml" in files and "awx/project/gpufleet/apply.yml" in files
    for rel in files:
        parts = rel.split("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        assert not any(fnmatch.fnmatch(c, pattern) for c in candidates for pattern in ignore), rel


class _UnsafeLoader(yaml.SafeLoader):
    """YAML with Ansible's ``!unsafe`` (text Ansible must not template)."""


_UnsafeLoader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def test_the_kubeconfig_credential_type_injects_the_collections_variable():
    from test_awx_import import CREDENTIAL_TYPE_ARGS

    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import CLUSTER_VARS

    spec = yaml.load((AWX / "credential_type.yml").read_text(), Loader=_UnsafeLoader)["gpufleet_awx_credential_type"]
    assert set(spec) <= CREDENTIAL_TYPE_ARGS
    injected = spec["injectors"]["extra_vars"]
    assert set(injected) <= set(CLUSTER_VARS.values()) and "gpufleet_kubeconfig" in injected
    # The file AWX writes from the input, and its path handed over: {{ tower.filename.<name> }} of template.<name>.
    [template] = spec["injectors"]["file"]
    name = template.removeprefix("template.")
    assert injected["gpufleet_kubeconfig"] == "{{ tower.filename." + name + " }}"
    assert {f["id"] for f in spec["inputs"]["fields"]} >= {"kubeconfig"} and spec["inputs"]["fields"][0]["secret"]
