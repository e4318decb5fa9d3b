"""plugin_utils.action: argument specs come from DOCUMENTATION (fragments merged), one failure shape."""

from __future__ import annotations

import importlib

import pytest
import yaml

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import argument_spec, documented_options, failure

ACTION_MODULES = ["fleet_info", "fleet_manifests", "fleet_placement", "manifest_dir"]


@pytest.mark.parametrize("module", ACTION_MODULES)
def test_the_spec_is_the_documentation(module):
    doc = yaml.safe_load(
        importlib.import_module(f"ansible_collections.gpufleet.serving.plugins.modules.{module}").DOCUMENTATION
    )
    spec = argument_spec(module)
    assert set(doc.get("options") or {}) <= set(spec)
    for name, option in (doc.get("options") or {}).items():
        assert spec[name].get("type") == option.get("type"), name
        assert spec[name].get("default") == option.get("default"), name
        assert "description" not in spec[name]


@pytest.mark.parametrize("module", ["fleet_manifests", "fleet_placement"])
def test_doc_fragments_are_merged(module):
    assert documented_options(module)["fleet"]["required"] is True
    assert argument_spec(module)["fleet"] == {"type": "dict", "required": True}


def test_fleet_info_spec_agrees_with_its_documentation():
    spec = argument_spec("fleet_info")
    assert spec["inference_classes"] == {"type": "dict"}
    assert spec["model_deployments"] == {"type": "list", "elements": "dict"}
    assert spec["check_selectors"] == {"type": "bool", "default": True}


def test_failure_shape():
    assert failure("m", GpufleetError("boom")) == {
        "failed": True,
        "msg": "m: boom",
        "errors": [{"path": "", "reason": "boom"}],
    }
    out = failure("m", FleetValidationError([("a.b", "is required"), ("c", "bad")]), "the fleet is not valid")
    assert out["msg"] == "m: the fleet is not valid\na.b: is required\nc: bad"
    assert out["errors"] == [{"path": "a.b", "reason": "is required"}, {"path": "c", "reason": "bad"}]


def test_failure_redacts_every_url_credential_it_carries():
    # A client library's error may quote a URL with a password (a proxy, a kubeconfig's server); the one failure
    # shape is the last guard.
    out = failure("m", FleetValidationError([("p", "cannot reach http://u:pr0xy-pw@proxy:3128/ (refused)")]))
    assert "pr0xy-pw" not in repr(out)
    assert out["errors"] == [{"path": "p", "reason": "cannot reach http://proxy:3128/ (refused)"}]
    out = failure("m", GpufleetError("GET https://h/api?token=t0ken-value failed"))
    assert "t0ken-value" not in repr(out) and out["msg"] == "m: GET https://h/api?token=<redacted> failed"
