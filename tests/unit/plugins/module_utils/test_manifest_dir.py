"""Render directory: atomic, idempotent writes; pruning of owned objects only; read-back."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import object_relpath, read_objects, sync

OWNER = {"app.kubernetes.io/managed-by": "gpufleet.serving", "gpufleet.io/deployment": "qwen"}


def obj(kind: str, name: str, namespace: str | None = "ml", labels: dict | None = None) -> dict:
    meta = {"name": name, "labels": dict(OWNER if labels is None else labels)}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": kind, "metadata": meta}


def test_layout_is_cluster_namespace_kind_name(tmp_path):
    result = sync(tmp_path, "gke-a", [obj("Service", "qwen-1"), obj("StorageClass", "rwx", namespace=None)], OWNER)
    assert sorted(result.written) == ["gke-a/_cluster/storageclass-rwx.yaml", "gke-a/ml/service-qwen-1.yaml"]
    assert (tmp_path / "gke-a/ml/service-qwen-1.yaml").read_text().startswith("apiVersion: v1\nkind: Service\n")


def test_second_sync_changes_nothing(tmp_path):
    objects = [obj("Service", "qwen-1"), obj("Deployment", "qwen-1")]
    assert sync(tmp_path, "c", objects, OWNER).changed
    again = sync(tmp_path, "c", objects, OWNER)
    assert not again.changed
    assert again.unchanged == 2


def test_prune_removes_only_owned_stale_objects(tmp_path):
    sync(tmp_path, "c", [obj("Service", "qwen-1"), obj("Service", "qwen-2")], OWNER)
    foreign = obj(
        "Service",
        "other",
        labels={"gpufleet.io/deployment": "llama", "app.kubernetes.io/managed-by": "gpufleet.serving"},
    )
    sync(tmp_path, "c", [foreign], {"gpufleet.io/deployment": "llama"})
    result = sync(tmp_path, "c", [obj("Service", "qwen-1")], OWNER)
    assert result.removed == ["c/ml/service-qwen-2.yaml"]
    assert (tmp_path / "c/ml/service-other.yaml").exists()
    assert not (tmp_path / "c/ml/service-qwen-2.yaml").exists()


def test_check_mode_reports_without_writing(tmp_path):
    result = sync(tmp_path, "c", [obj("Service", "qwen-1")], OWNER, check_mode=True)
    assert result.written == ["c/ml/service-qwen-1.yaml"]
    assert not (tmp_path / "c").exists()


def test_bad_object_writes_nothing(tmp_path):
    with pytest.raises(GpufleetError, match=r"kind and metadata\.name"):
        sync(tmp_path, "c", [obj("Service", "ok"), {"kind": "Service"}], OWNER)
    assert not (tmp_path / "c").exists()


def test_path_components_cannot_escape(tmp_path):
    with pytest.raises(GpufleetError, match="path component"):
        object_relpath("c", obj("Service", "../../etc"))
    with pytest.raises(GpufleetError, match="path component"):
        object_relpath("..", obj("Service", "x"))


def test_duplicate_targets_are_rejected(tmp_path):
    with pytest.raises(GpufleetError, match="two objects"):
        sync(tmp_path, "c", [obj("Service", "a"), obj("Service", "a")], OWNER)


def test_read_back_by_selector(tmp_path):
    sync(tmp_path, "a", [obj("Service", "qwen-1")], OWNER)
    sync(
        tmp_path,
        "b",
        [obj("Service", "x", labels={"gpufleet.io/deployment": "llama"})],
        {"gpufleet.io/deployment": "llama"},
    )
    found = list(read_objects(tmp_path, selector={"gpufleet.io/deployment": "qwen"}))
    assert [(c, o["metadata"]["name"]) for c, _rel, o in found] == [("a", "qwen-1")]
    assert list(read_objects(tmp_path / "missing")) == []
