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


# --------------------------------------------------------------------------------------------------------------------
# Issue 16: a safe, transactional store
# --------------------------------------------------------------------------------------------------------------------


def test_a_symlinked_namespace_directory_is_never_written_through(tmp_path):
    root, outside = tmp_path / "render", tmp_path / "outside"
    outside.mkdir()
    (root / "c").mkdir(parents=True)
    (root / "c" / "ml").symlink_to(outside)
    with pytest.raises(GpufleetError, match="is a symlink"):
        sync(root, "c", [obj("Service", "qwen-1")], OWNER)
    assert list(outside.iterdir()) == []


def test_an_outside_owned_file_behind_a_symlink_is_never_pruned(tmp_path):
    root, outside = tmp_path / "render", tmp_path / "outside"
    sync(outside, "c", [obj("Service", "victim")], OWNER)  # an owned-looking file outside the render directory
    root.mkdir()
    (root / "c").symlink_to(outside / "c")
    with pytest.raises(GpufleetError, match="is a symlink"):
        sync(root, "c", [], OWNER)
    assert (outside / "c/ml/service-victim.yaml").exists()
    with pytest.raises(GpufleetError, match="is a symlink"):
        list(read_objects(root))


def test_a_symlinked_file_is_not_written_through(tmp_path):
    root, target = tmp_path / "render", tmp_path / "target.yaml"
    target.write_text("keep\n")
    (root / "c/ml").mkdir(parents=True)
    (root / "c/ml/service-qwen-1.yaml").symlink_to(target)
    with pytest.raises(GpufleetError, match="is a symlink"):
        sync(root, "c", [obj("Service", "qwen-1")], OWNER)
    assert target.read_text() == "keep\n"


def test_all_clusters_or_none_when_one_directory_cannot_be_written(tmp_path):
    import os

    from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction

    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions; the failure is injected in the next test")
    _all_or_none(tmp_path, lambda root: os.chmod(root / "b/ml", 0o500), Transaction)


def test_all_clusters_or_none_when_staging_fails(tmp_path, monkeypatch):
    from ansible_collections.gpufleet.serving.plugins.module_utils import manifest_dir

    real = manifest_dir._stage

    def failing(path, text):
        if "/b/" in str(path):
            raise OSError(28, "No space left on device")
        return real(path, text)

    _all_or_none(tmp_path, lambda root: monkeypatch.setattr(manifest_dir, "_stage", failing), manifest_dir.Transaction)


def _all_or_none(tmp_path, break_b, transaction):
    root = tmp_path / "render"
    for cluster in ("a", "b"):
        sync(root, cluster, [obj("Service", "qwen-1", labels={**OWNER, "v": "1"})], OWNER)
    before = {p: p.read_text() for p in root.rglob("*.yaml")}
    break_b(root)
    txn = transaction(root)
    for cluster in ("a", "b"):
        txn.plan(cluster, [obj("Service", "qwen-1", labels={**OWNER, "v": "2"}), obj("Service", "new")], OWNER)
    try:
        with pytest.raises(GpufleetError, match="Nothing was changed"):
            txn.commit()
    finally:
        (root / "b/ml").chmod(0o755)
    assert {p: p.read_text() for p in root.rglob("*.yaml")} == before
    assert not [p for p in root.rglob("*") if p.name.startswith(".gpufleet-stage.")]


def test_a_killed_switch_is_rolled_forward_by_the_next_run(tmp_path, monkeypatch):
    from ansible_collections.gpufleet.serving.plugins.module_utils import manifest_dir

    root = tmp_path / "render"
    sync(root, "a", [obj("Service", "old")], OWNER)
    calls = []
    real_replace = manifest_dir.os.replace

    def dies_after_one(src, dst):
        calls.append(dst)
        if len(calls) == 3:  # the journal, then one file: then the run is killed
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(manifest_dir.os, "replace", dies_after_one)
    txn = manifest_dir.Transaction(root)
    txn.plan("a", [obj("Service", "x"), obj("Service", "y")], OWNER)
    txn.plan("b", [obj("Service", "z")], OWNER)
    with pytest.raises(KeyboardInterrupt):
        txn.commit()
    monkeypatch.setattr(manifest_dir.os, "replace", real_replace)
    assert (root / ".gpufleet/commit.json").exists()
    sync(root, "c", [], OWNER)  # any next writer finishes the switch first
    names = sorted(str(p.relative_to(root)) for p in root.rglob("*.yaml"))
    assert names == ["a/ml/service-x.yaml", "a/ml/service-y.yaml", "b/ml/service-z.yaml"]
    assert not (root / ".gpufleet/commit.json").exists()


def test_a_concurrent_writer_fails_with_a_clear_message(tmp_path):
    from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import render_lock

    root = tmp_path / "render"
    with (
        render_lock(root),
        pytest.raises(GpufleetError, match=r"being written by another run \(pid \d+"),
        render_lock(root, wait=0.3),
    ):
        pass
    with render_lock(root, wait=0):  # released
        pass
    # The lock and journal never reach Git.
    assert (root / ".gpufleet/.gitignore").read_text().splitlines()[-1] == "*"


def test_a_run_does_not_overwrite_what_another_run_wrote_since_it_read(tmp_path):
    from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction, tree_token

    root = tmp_path / "render"
    sync(root, "a", [obj("Service", "one")], OWNER)
    token = tree_token(root)  # run 1 reads for placement
    sync(root, "a", [obj("Service", "two")], OWNER)  # run 2 writes meanwhile
    txn = Transaction(root, expect_token=token)
    txn.plan("a", [obj("Service", "three")], OWNER)
    with pytest.raises(GpufleetError, match="changed since this run read it"):
        txn.commit()
    assert sorted(p.name for p in root.rglob("*.yaml")) == ["service-two.yaml"]
    fresh = Transaction(root, expect_token=tree_token(root))
    fresh.plan("a", [obj("Service", "three")], OWNER)
    assert fresh.commit().written == ["a/ml/service-three.yaml"]
    assert tree_token(tmp_path / "missing") == ""


def test_clusters_that_left_the_inventory_lose_their_owned_files_only(tmp_path):
    from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction

    root = tmp_path / "render"
    sync(root, "gone", [obj("Service", "qwen-1"), obj("Service", "x", labels={"other": "1"})], OWNER)
    sync(root, "kept", [obj("Service", "qwen-2")], OWNER)
    txn = Transaction(root)
    txn.plan("kept", [obj("Service", "qwen-2")], OWNER)
    assert txn.prune_other_clusters(["kept"], OWNER) == ["gone"]
    result = txn.commit()
    assert result.removed == ["gone/ml/service-qwen-1.yaml"] and result.removed_clusters == ["gone"]
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*.yaml")) == [
        "gone/ml/service-x.yaml",
        "kept/ml/service-qwen-2.yaml",
    ]


# A planted journal: the render directory is a Git working tree, so its journal is untrusted input (issue 23).


def _plant(root, journal: object) -> None:
    import json

    (root / ".gpufleet").mkdir(parents=True, exist_ok=True)
    (root / ".gpufleet/commit.json").write_text(json.dumps(journal) if not isinstance(journal, str) else journal)


@pytest.mark.parametrize(
    "journal",
    [
        {"remove": ["../victim.txt"]},
        {"remove": ["a/../../victim.txt"]},
        {"remove": ["a/ml/../../../victim.txt"]},
        {"remove": ["VICTIM_ABS"]},
        {"replace": [["../kubeconfig", "a/ml/service-stolen.yaml"]]},
        {"replace": [["a/ml/.gpufleet-stage.service-x.yaml.1.ab", "../victim.txt"]]},
        {"replace": [["a/ml/other-file.yaml", "a/ml/service-x.yaml"]]},
        {"remove": [".gpufleet/lock"]},
        {"remove": ["a/ml/service-old.yaml"], "run": "rm -rf /"},
        {"remove": "a/ml/service-old.yaml"},
        "not json",
    ],
    ids=[
        "remove-dotdot",
        "remove-dotdot-deep",
        "remove-dotdot-deeper",
        "remove-absolute",
        "replace-from-outside",
        "replace-to-outside",
        "replace-from-non-stage-file",
        "remove-state-dir",
        "unknown-key",
        "remove-not-list",
        "not-json",
    ],
)
def test_a_planted_journal_is_refused_and_nothing_outside_is_touched(tmp_path, journal):
    root = tmp_path / "render"
    sync(root, "a", [obj("Service", "old")], OWNER)
    victim, kubeconfig = tmp_path / "victim.txt", tmp_path / "kubeconfig"
    victim.write_text("keep me")
    kubeconfig.write_text("token: s3cr3t")
    if isinstance(journal, dict) and journal.get("remove") == ["VICTIM_ABS"]:
        journal = {"remove": [str(victim)]}
    _plant(root, journal)
    before = {p: p.read_text() for p in root.rglob("*.yaml")}
    with pytest.raises(GpufleetError, match=r"refusing the commit journal .*commit\.json.*Nothing was changed"):
        sync(root, "a", [obj("Service", "new")], OWNER)
    assert victim.read_text() == "keep me"
    assert kubeconfig.read_text() == "token: s3cr3t"
    assert {p: p.read_text() for p in root.rglob("*.yaml")} == before
    assert (root / ".gpufleet/commit.json").exists()  # left for the user to inspect


def test_a_journal_reaching_a_file_through_a_symlinked_directory_is_refused(tmp_path):
    root = tmp_path / "render"
    sync(root, "a", [obj("Service", "old")], OWNER)
    outside = tmp_path / "outside/ml"
    outside.mkdir(parents=True)
    (outside / "service-victim.yaml").write_text("keep me")
    (root / "evil").symlink_to(tmp_path / "outside")
    _plant(root, {"remove": ["evil/ml/service-victim.yaml"]})
    with pytest.raises(GpufleetError, match=r"refusing the commit journal.*symlink"):
        sync(root, "a", [], OWNER)
    assert (outside / "service-victim.yaml").read_text() == "keep me"


def test_a_symlinked_state_directory_is_refused(tmp_path):
    from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import recover

    root = tmp_path / "render"
    sync(root, "a", [obj("Service", "old")], OWNER)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "commit.json").write_text('{"remove": ["a/ml/service-old.yaml"]}')
    import shutil

    shutil.rmtree(root / ".gpufleet")
    (root / ".gpufleet").symlink_to(elsewhere)
    with pytest.raises(GpufleetError, match="symlink"):
        recover(root)
    assert (root / "a/ml/service-old.yaml").exists()
    assert (elsewhere / "commit.json").exists()


def test_a_journal_written_by_a_real_switch_is_accepted(tmp_path):
    """The checks accept exactly what commit() writes (stage files beside their targets, object files to remove)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import Transaction, read_journal

    root = tmp_path / "render"
    sync(root, "a", [obj("Service", "old")], OWNER)
    seen = {}
    txn = Transaction(root)
    txn.plan("a", [obj("Service", "new")], OWNER)
    real_unlink = __import__("os").unlink

    def capture(path, *args, **kwargs):
        if str(path).endswith("commit.json"):
            seen["journal"] = read_journal(root)
        return real_unlink(path, *args, **kwargs)

    import unittest.mock

    with unittest.mock.patch("os.unlink", capture):
        txn.commit()
    replace, remove = seen["journal"]
    assert [t for _s, t in replace] == ["a/ml/service-new.yaml"]
    assert remove == ["a/ml/service-old.yaml"]


def test_current_objects_parses_only_the_files_a_run_would_change(tmp_path, monkeypatch):
    from ansible_collections.gpufleet.serving.plugins.module_utils import manifest_dir

    owner = {"app": "x"}
    same, edited = obj("Service", "same", labels=owner), obj("Service", "edited", labels=owner)
    sync(tmp_path, "c1", [same, edited], owner)
    (tmp_path / "c1" / "ml" / "service-edited.yaml").write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: edited, namespace: ml, labels: {app: x, by: hand}}\n"
    )
    parsed = []
    real_load = manifest_dir.yaml.load
    monkeypatch.setattr(manifest_dir.yaml, "load", lambda text, Loader: parsed.append(text) or real_load(text, Loader))
    txn = manifest_dir.Transaction(tmp_path)
    found = dict(txn.current_objects("c1", [same, edited], owner, ["Service"]))
    # the unchanged file is the object this run writes (not parsed); the edited one is read as it is on disk
    assert found["c1/ml/service-same.yaml"]["metadata"]["name"] == "same"
    assert found["c1/ml/service-edited.yaml"]["metadata"]["labels"] == {"app": "x", "by": "hand"}
    assert len(parsed) == 1 and "by: hand" in parsed[0]
    # and the transaction then writes the edited file back, the unchanged one not
    result = txn.plan("c1", [same, edited], owner)
    assert result.written == ["c1/ml/service-edited.yaml"] and result.unchanged == 1
