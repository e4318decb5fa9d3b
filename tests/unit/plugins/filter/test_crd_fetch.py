"""tests/lib/crd_fetch.py, the `make crds` fetcher: its conversion rules, file format and cache, without the network
(the Go module download is replaced by a zip built here)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import crd_fetch
import pytest
import yaml

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "port": {"x-kubernetes-int-or-string": True},
                "given": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "mode": {"type": "string", "nullable": True, "enum": ["a", "b"]},
                "nullable": {"type": "boolean", "description": "a field called nullable"},
                "items": {"type": "array", "items": {"type": "integer", "nullable": True}},
            },
        },
    },
}


def crd(versions: list[dict[str, Any]], kind: str = "Widget") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "annotations": {"z": "1", "a": "2"}},
        "spec": {"group": "example.com", "names": {"kind": kind}, "scope": "Namespaced", "versions": versions},
    }


def version(name: str, served: bool = True, storage: bool = True) -> dict[str, Any]:
    return {"name": name, "served": served, "storage": storage, "schema": {"openAPIV3Schema": SCHEMA}}


SPEC = crd_fetch.CRD("config/crd/widgets.yaml", "example.com", "Widget", ("v1",))


def test_conversion_follows_the_schemas_readme():
    out = crd_fetch.convert_schema(SCHEMA)["properties"]["spec"]["properties"]
    assert out["port"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert out["given"] == SCHEMA["properties"]["spec"]["properties"]["given"]  # already has its anyOf
    assert out["mode"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert out["nullable"] == {"type": "boolean", "description": "a field called nullable"}  # a property, kept
    assert out["items"]["items"] == {"type": ["integer", "null"]}
    assert "nullable" in SCHEMA["properties"]["spec"]["properties"]["mode"]  # the input is not modified


def test_file_format_matches_the_shared_schemas():
    files = crd_fetch.crd_to_schemas(crd([version("v1"), version("v1beta1", storage=False)]), SPEC, "somewhere")
    assert list(files) == ["widget-example.com-v1.json"]  # only the versions SOURCES keeps
    text = files["widget-example.com-v1.json"]
    assert text.startswith('{\n "$schema": "https://json-schema.org/draft/2020-12/schema",\n "$comment": ')
    assert not text.endswith("\n")
    doc = json.loads(text)
    assert list(doc)[:4] == ["$schema", "$comment", "x-kubernetes-group-version-kind", "x-crd"]
    assert list(doc)[4:] == ["properties", "type"]  # the body's keys are sorted
    assert doc["$comment"] == (
        "openAPIV3Schema of widgets.example.com v1 from somewhere; converted to JSON Schema "
        "(nullable -> type null), otherwise verbatim"
    )
    assert doc["x-kubernetes-group-version-kind"] == [{"group": "example.com", "version": "v1", "kind": "Widget"}]
    assert doc["x-crd"] == {
        "name": "widgets.example.com",
        "served": True,
        "storage": True,
        "scope": "Namespaced",
        "annotations": {"a": "2", "z": "1"},
    }
    assert list(doc["properties"]["spec"]["properties"]) == ["given", "items", "mode", "nullable", "port"]


def test_a_crd_that_is_not_what_sources_says_is_an_error():
    with pytest.raises(crd_fetch.FetchError, match="version v1 is not served"):
        crd_fetch.crd_to_schemas(crd([version("v1", served=False)]), SPEC, "x")
    with pytest.raises(crd_fetch.FetchError, match="kind is 'Gadget', expected Widget"):
        crd_fetch.crd_to_schemas(crd([version("v1")], kind="Gadget"), SPEC, "x")
    with pytest.raises(crd_fetch.FetchError, match="expected one CustomResourceDefinition, found 2"):
        crd_fetch.load_crd(b"---\na: 1\n---\nb: 2\n", "two.yaml")


def test_dates_stay_strings():
    assert crd_fetch.load_crd(b"x: 2024-01-02\n", "d.yaml") == {"x": "2024-01-02"}


def test_pins():
    files = crd_fetch.expected_files()
    assert len(files) == len(set(files)) == len(crd_fetch.known_crds())
    assert {("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), ("gateway.networking.k8s.io/v1", "Gateway")} <= (
        crd_fetch.known_crds()
    )
    for source in crd_fetch.SOURCES:
        assert source.h1.startswith("h1:") and source.h1.endswith("=")
        assert source.version.startswith("v")


def module_zip(tmp_path: Path, module: str, ver: str, files: dict[str, str]) -> Path:
    path = tmp_path / f"{ver}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(f"{module}@{ver}/{name}", text)
    return path


def test_fetch_verifies_converts_and_caches(monkeypatch, tmp_path):
    module, ver = "example.com/widgets", "v1.2.3"
    zip_path = module_zip(
        tmp_path, module, ver, {"go.mod": "module x\n", SPEC.path: yaml.safe_dump(crd([version("v1")]))}
    )
    source = crd_fetch.Source(module, ver, crd_fetch.zip_h1(zip_path), (SPEC,), "a test")
    calls = []

    def fake_download(sources=None):
        calls.append(1)
        return {module: {"Path": module, "Version": ver, "Zip": str(zip_path)}}

    monkeypatch.setattr(crd_fetch, "SOURCES", (source,))
    monkeypatch.setattr(crd_fetch, "go_download", fake_download)
    monkeypatch.setenv("GPUFLEET_CRD_SCHEMAS_CACHE", str(tmp_path / "cache"))
    out = crd_fetch.fetch(log=lambda _m: None)
    assert out == tmp_path / "cache" / crd_fetch.cache_key()
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "widget-example.com-v1.json"]
    assert crd_fetch.is_complete(out)
    doc = json.loads((out / "widget-example.com-v1.json").read_text())
    assert doc["$comment"].startswith(
        f"openAPIV3Schema of widgets.example.com v1 from Go module {module}@{ver} ({source.h1}) {SPEC.path};"
    )
    assert f"`{module}@{ver}`" in (out / "README.md").read_text()
    assert crd_fetch.fetch(log=lambda _m: None) == out
    assert len(calls) == 1  # cached: no second download
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temporary directory left

    # Another pin is another key; a zip that does not match its pinned hash is refused.
    bad = crd_fetch.Source(module, ver, "h1:AAAA=", (SPEC,), "a test")
    monkeypatch.setattr(crd_fetch, "SOURCES", (bad,))
    assert crd_fetch.schema_dir() != out
    with pytest.raises(crd_fetch.FetchError, match="is not the pinned h1:AAAA="):
        crd_fetch.fetch(log=lambda _m: None)
    assert not crd_fetch.schema_dir().exists()
    # A module Go could not download is named with Go's error.
    monkeypatch.setattr(crd_fetch, "go_download", lambda sources=None: {module: {"Path": module, "Error": "403"}})
    with pytest.raises(crd_fetch.FetchError, match=r"example.com/widgets@v1.2.3: no module zip: 403"):
        crd_fetch.fetch(log=lambda _m: None)
