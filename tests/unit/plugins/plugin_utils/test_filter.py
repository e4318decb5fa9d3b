"""One error dialect for every filter: plugin_utils/filter.py's wrapper, and every filter of plugins/filter/*.py."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.plugin_utils.filter import filter_map, gpufleet_filter

FILTER_DIR = Path(__file__).resolve().parents[4] / "plugins" / "filter"
FILTER_FILES = sorted(p.stem for p in FILTER_DIR.glob("*.py"))


def all_filters() -> dict[str, object]:
    out: dict[str, object] = {}
    for name in FILTER_FILES:
        module = importlib.import_module(f"ansible_collections.gpufleet.serving.plugins.filter.{name}")
        out.update(module.FilterModule().filters())
    return out


# --------------------------------------------------------------------------------------------------------------------
# The wrapper
# --------------------------------------------------------------------------------------------------------------------


@gpufleet_filter
def shout(value, fail=None):
    """Upper case."""
    if fail == "gpufleet":
        raise GpufleetError("value is not loud enough")
    if fail == "fields":
        raise FleetValidationError([("a[0].b", "must be loud"), ("", "and short")])
    if fail == "bug":
        raise KeyError("bug")
    return str(value).upper()


@gpufleet_filter(plain=True)
def kinds(value, *rest, **options):
    return [type(value).__name__, *(type(r).__name__ for r in rest), *(type(v).__name__ for v in options.values())]


class Tagged(str):
    """A str subclass, as Ansible's tagged values are."""


def test_a_filter_keeps_its_name_docs_and_result():
    assert shout("hi") == "HI"
    assert shout.__name__ == "shout" and shout.__doc__ == "Upper case."
    assert filter_map(shout, kinds) == {"shout": shout, "kinds": kinds}
    assert shout.gpufleet_filter == "shout"


def test_a_gpufleet_error_becomes_an_ansible_filter_error_named_by_the_filter():
    with pytest.raises(AnsibleFilterError, match=r"^shout: value is not loud enough$") as info:
        shout("hi", fail="gpufleet")
    assert isinstance(info.value.__cause__, GpufleetError)


def test_field_errors_keep_one_line_each():
    with pytest.raises(AnsibleFilterError) as info:
        shout("hi", fail="fields")
    assert info.value.message == "shout: a[0].b: must be loud\nand short"


def test_a_python_error_is_a_bug_and_is_not_wrapped():
    with pytest.raises(KeyError):
        shout("hi", fail="bug")


def test_plain_hands_over_plain_data_and_names_what_is_not():
    assert kinds(Tagged("x"), (1, 2), opt=Tagged("y")) == ["str", "list", "str"]
    with pytest.raises(AnsibleFilterError, match=r"^kinds: argument 1: object is not plain data"):
        kinds("x", object())
    with pytest.raises(AnsibleFilterError, match=r"^kinds: opt: set is not plain data"):
        kinds("x", opt={1})


# --------------------------------------------------------------------------------------------------------------------
# Every filter of the collection
# --------------------------------------------------------------------------------------------------------------------

#: One wrong call per filter and the start of the message it fails with (after ``<filter>: ``).
WRONG = {
    "cache_manifests": (({},), {}, "cluster is required"),
    "cache_job_status": (("x",), {}, "the input must be a Job object or none (got str)"),
    "cache_status_summary": (("x",), {}, "statuses must be a list of status entries"),
    "cache_job_action": (({},), {"retry_failed": "x"}, "retry_failed must be true or false"),
    "cache_jobs_to_delete": (("x",), {}, "the input must be a list of Job objects"),
    "cache_pvc_change_error": (([],), {"adopt_unlabelled": "maybe"}, "adopt_unlabelled must be true or false"),
    "cache_adopted_volume": (("x",), {}, "the input must be a list of PVC objects"),
    "fleet_identity": ((None,), {}, "gpufleet_fleet_name: is required"),
    "fleet_owned": (([], "x"), {}, "fleet must be fleet_info's fleet"),
    "fleet_pods": (("x", []), {}, "the input must be a list of Kubernetes objects"),
    "k8s_connection": (("c1",), {}, "cluster c1 has neither gpufleet_kubeconfig nor gpufleet_context"),
    "eks_subnets": (("h", {}, []), {}, "gpufleet_inference_classes: must be a mapping"),
    "eks_nodegroups": (("h", {}, []), {}, "gpufleet_inference_classes: must be a mapping"),
    "eks_kubeconfig": (("x", "h", "r"), {}, "the input must be community.aws.eks_cluster's result"),
    "gke_node_pools": (("h", {}, []), {}, "gpufleet_inference_classes: must be a mapping"),
    "gke_kubeconfig": (("x", "h"), {}, "the input must be gpufleet.serving.gke_cluster's cluster"),
    "cluster_preflight": (("h", {}, [], "v1.34", []), {}, "gpufleet_inference_classes: must be a mapping"),
    "serving_manifests": (([], {}), {}, "cluster is required"),
    "serving_stack_plan": ((object(), [], {}), {}, "argument 0: object is not plain data"),
    "serving_stack_release_action": (("x",), {}, "release: must be one of the plan's releases"),
    "serving_stack_adoptions": (({}, []), {"adopt": "x"}, "adopt must be true or false"),
    "serving_stack_objects": (([object()],), {}, "argument 0[0]: object is not plain data"),
    "serving_stack_check": (("x",), {}, "plan: must be a serving_stack_plan result"),
}


def test_every_filter_goes_through_the_wrapper():
    filters = all_filters()
    assert set(WRONG) <= set(filters)
    assert {name: getattr(f, "gpufleet_filter", None) for name, f in filters.items()} == {n: n for n in filters}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_every_filter_fails_in_the_one_dialect(name):
    args, kwargs, message = WRONG[name]
    with pytest.raises(AnsibleFilterError) as info:
        all_filters()[name](*args, **kwargs)
    assert info.value.message.startswith(f"{name}: {message}"), info.value.message
    assert isinstance(info.value.__cause__, GpufleetError)


def test_filter_files_raise_only_through_the_wrapper():
    """No filter file builds an AnsibleFilterError of its own: the wrapper is the one place that does."""
    offenders = [name for name in FILTER_FILES if "AnsibleFilterError" in (FILTER_DIR / f"{name}.py").read_text()]
    assert offenders == []


def test_objects_that_are_not_plain_data_are_the_filters_error_too():
    """fleet_owned / fleet_pods read their objects as plain data: what is not was a bare GpufleetError before the
    wrapper; now it is the filter's error like any other."""
    with pytest.raises(AnsibleFilterError, match=r"^fleet_pods: objects\[0\]: object is not plain data"):
        all_filters()["fleet_pods"]([object()], [])
