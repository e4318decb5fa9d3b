"""Variables in their YAML form and in the text an AWX survey or ``-e`` sends (issue 26): typed, or an error naming the
variable; paths that must outlive an AWX job."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.filter.survey import FilterModule, durable_path, survey
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.survey import durable_path as durable
from ansible_collections.gpufleet.serving.plugins.module_utils.survey import (
    parse,
    parse_bool,
    parse_bool_or_list,
    parse_choice,
    parse_int,
    parse_list,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("true", True),
        ("True", True),
        (" false ", False),
        ("yes", True),
        ("no", False),
        ("on", True),
        ("off", False),
        ("1", True),
        ("0", False),
        (1, True),
        (0, False),
    ],
)
def test_a_boolean_in_every_form_a_survey_or_yaml_sends(value, expected):
    assert parse_bool(value, "gpufleet_force_drain") is expected


@pytest.mark.parametrize("value", ["ture", "", "maybe", "2", 2, None, [], "none", "y"])
def test_anything_else_is_not_a_boolean_and_names_the_variable(value):
    """Ansible's ``bool`` filter turns 'ture' into false (with a deprecation warning): here it is an error."""
    with pytest.raises(FleetValidationError) as err:
        parse_bool(value, "gpufleet_fail_on_unschedulable")
    assert str(err.value).startswith("gpufleet_fail_on_unschedulable: must be true or false")


@pytest.mark.parametrize(("value", "expected"), [(3, 3), ("3", 3), (" 900 ", 900), ("-1", -1), (2.0, 2)])
def test_an_integer_or_its_text(value, expected):
    assert parse_int(value, "model_deployment_wait_timeout") == expected


@pytest.mark.parametrize("value", ["3.5", "three", "", "+-3", True, 2.5, "٣"])
def test_not_an_integer(value):
    with pytest.raises(FleetValidationError, match=r"^model_deployment_wait_timeout: must be a whole number"):
        parse_int(value, "model_deployment_wait_timeout")


def test_an_integer_below_its_minimum():
    with pytest.raises(FleetValidationError, match=r"^n: must be at least 1 \(got 0\)"):
        parse_int("0", "n", minimum=1)


def test_a_choice_and_a_typo_in_one():
    assert parse_choice(" apply ", "gpufleet_mode", ["render", "apply"]) == "apply"
    with pytest.raises(FleetValidationError, match=r"^gpufleet_mode: must be one of render, apply \(got 'aply'\)"):
        parse_choice("aply", "gpufleet_mode", ["render", "apply"])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["a", "b"], ["a", "b"]),
        ('["a", "b"]', ["a", "b"]),
        ("a, b", ["a", "b"]),  # the space after the comma once dropped the second name
        ("a,b,", ["a", "b"]),
        ("a\nb\n", ["a", "b"]),  # one name a line: a survey's text area
        ("a,\n b", ["a", "b"]),
        ("", []),
        (None, []),
        ([], []),
    ],
)
def test_a_list_of_names_in_its_survey_forms(value, expected):
    assert parse_list(value, "gpufleet_drained_clusters") == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ('["a", ', "is not a JSON list of names"),
        ('["a", 1]', "must be a list of names"),
        ({"a": 1}, "must be a list of names"),
        (3, "must be a list of names"),
    ],
)
def test_not_a_list_of_names(value, reason):
    with pytest.raises(FleetValidationError, match=f"^gpufleet_drained_clusters: {reason}"):
        parse_list(value, "gpufleet_drained_clusters")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("False", False), ("", False), (True, True), ("a, b", ["a", "b"]), ('["a"]', ["a"])],
)
def test_true_false_or_names(value, expected):
    assert parse_bool_or_list(value, "gpufleet_allow_capacity_loss") == expected


def test_parse_dispatches_on_the_kind_and_refuses_an_unknown_one():
    assert parse("yes", "v", "bool") is True
    assert parse("7", "v", "int") == 7
    assert parse("x", "v", "str") == "x"
    with pytest.raises(FleetValidationError, match=r"^v: must be text"):
        parse(1.10, "v", "str")  # YAML reads an unquoted 1.10 as a float
    with pytest.raises(FleetValidationError, match=r"^v: unknown kind 'boolean'"):
        parse("true", "v", "boolean")
    with pytest.raises(FleetValidationError, match=r"^v: a choice needs its choices"):
        parse("a", "v", "choice")


def test_a_durable_path_outside_awx_has_its_default():
    assert durable(None, "gpufleet_render_dir", "/inv/rendered") == "/inv/rendered"
    assert durable("", "gpufleet_render_dir", "/inv/rendered") == "/inv/rendered"  # a blank survey field
    assert durable("/srv/r", "gpufleet_render_dir", "/inv/rendered") == "/srv/r"


def test_on_awx_a_durable_path_is_required_and_the_message_says_why():
    assert durable("/srv/r", "gpufleet_render_dir", "/runner/inventory/rendered", job=42) == "/srv/r"
    with pytest.raises(FleetValidationError) as err:
        durable(None, "gpufleet_render_dir", "/runner/inventory/rendered", job=42)
    message = str(err.value)
    assert message.startswith(
        "gpufleet_render_dir: is required when the play runs on AWX / Automation Controller (job 42)"
    )
    assert "/runner/inventory/rendered" in message and "deleted when the job ends" in message
    assert "nothing was written" in message


def test_on_awx_a_path_this_run_does_not_use_is_none_not_the_per_job_default():
    assert durable(None, "gpufleet_state_file", "/runner/inventory/.gpufleet/p.json", job=7, required=False) is None


def test_a_durable_path_must_be_text():
    with pytest.raises(FleetValidationError, match=r"^gpufleet_render_dir: must be a path"):
        durable(["/a"], "gpufleet_render_dir", "/inv/rendered")


def test_the_filters_are_registered_and_fail_with_the_filter_and_variable_names():
    assert set(FilterModule().filters()) == {"survey", "durable_path"}
    assert survey("true", "gpufleet_report_drift", "bool") is True
    assert survey("a, b", "gpufleet_explain", "list") == ["a", "b"]
    assert survey("summary", "gpufleet_report", "choice", ["full", "summary"]) == "summary"
    with pytest.raises(AnsibleFilterError, match=r"^survey: gpufleet_report_drift: must be true or false"):
        survey("ture", "gpufleet_report_drift", "bool")
    assert durable_path(None, "gpufleet_render_dir", "/d", None) == "/d"
    assert durable_path(None, "gpufleet_state_file", "/d", 3, "false") is None
    with pytest.raises(AnsibleFilterError, match=r"^durable_path: gpufleet_render_dir: is required"):
        durable_path(None, "gpufleet_render_dir", "/d", 3)


def test_the_filters_are_documented_as_they_are_called():
    """ansible-doc reads the YAML sidecars: every description line is text (an unquoted 'a: b' would be a mapping),
    and the options are the filters' arguments."""
    import inspect
    from pathlib import Path

    import yaml

    filter_dir = Path(__file__).resolve().parents[4] / "plugins" / "filter"
    for name, function in FilterModule().filters().items():
        doc = yaml.safe_load((filter_dir / f"{name}.yml").read_text())["DOCUMENTATION"]
        assert doc["name"] == name
        lines = [*doc["description"], *(d for o in doc["options"].values() for d in _lines(o["description"]))]
        assert all(isinstance(line, str) for line in lines), name
        arguments = list(inspect.signature(function).parameters)[1:]
        assert set(doc["options"]) - {"_input"} == set(arguments), name
        assert [a.strip() for a in doc["positional"].split(",")] == arguments, name


def _lines(description):
    return description if isinstance(description, list) else [description]
