"""--layout hf (issue 30, item 3): the hydrator writes a Hugging Face hub cache (blobs, snapshots with relative
symlinks, refs, trees) that huggingface_hub itself loads offline, from a local Hub-compatible endpoint; a corrupted
blob is found by --verify and fetched again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydrate_support import FakeHub, blob, git_oid, read_manifest, sha256
from test_hydrate_hf import FILES, TOKEN, args

huggingface_hub = pytest.importorskip("huggingface_hub")

REPO = "acme/tiny"
FOLDER = "models--acme--tiny"


@pytest.fixture
def hf_env(hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeHub:
    hub.token = TOKEN
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for var in ("HF_HUB_OFFLINE", "HF_HUB_DISABLE_IMPLICIT_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    return hub


def blob_id(path: str, data: bytes) -> str:
    """The id huggingface_hub names a blob by: the LFS sha256 (FakeHub: files >= 1024 bytes), else the git blob id."""
    return sha256(data) if len(data) >= 1024 else git_oid(data)


def offline_snapshot(cache: Path, revision: str) -> Path:
    return Path(huggingface_hub.snapshot_download(REPO, revision=revision, cache_dir=str(cache), local_files_only=True))


def test_the_hf_layout_loads_offline_with_huggingface_hub(hf_env: FakeHub, tmp_path: Path, hyd) -> None:
    sha = hf_env.commit(REPO, "main", {**FILES, "copy-of-config.json": FILES["config.json"]}, private=True)
    cache = tmp_path / "cache"
    res = hyd(*args(cache, "hf://acme/tiny", "--layout", "hf"))
    assert res.rc == 0, res

    root = cache / FOLDER
    # Each distinct blob once, named by its id (two paths with the same bytes share one blob).
    assert sorted(p.name for p in (root / "blobs").iterdir()) == sorted({blob_id(p, d) for p, d in FILES.items()})
    assert (root / "refs" / "main").read_text() == sha  # no newline: huggingface_hub reads it as is
    link = root / "snapshots" / sha / "tokenizer" / "tokenizer.json"
    assert link.is_symlink() and os.readlink(link) == f"../../../blobs/{git_oid(FILES['tokenizer/tokenizer.json'])}"
    assert (root / "trees" / f"{sha}.json").is_file()

    # huggingface_hub itself, offline, by branch and by commit: the same files, the same bytes.
    for revision in ("main", sha):
        snap = offline_snapshot(cache, revision)
        assert snap == root / "snapshots" / sha
        got = {str(p.relative_to(snap)): p.read_bytes() for p in snap.rglob("*") if p.is_file()}
        assert got == {**FILES, "copy-of-config.json": FILES["config.json"]}
    path = huggingface_hub.hf_hub_download(REPO, "config.json", cache_dir=str(cache), local_files_only=True)
    assert Path(path).read_bytes() == FILES["config.json"]

    # The manifest records the layout and the snapshot; every blob was verified against its id.
    m = read_manifest(cache)
    assert m["layout"] == "hf" and m["hf"]["commit"] == sha and m["hf"]["dir"] == FOLDER
    assert {f["path"] for f in m["files"]} == {f"{FOLDER}/blobs/{blob_id(p, d)}" for p, d in FILES.items()}

    # A re-run fetches nothing.
    before = len(hf_env.requests)
    again = hyd(*args(cache, "hf://acme/tiny", "--layout", "hf"))
    assert again.rc == 0 and "already hydrated" in again.out
    assert not [r for r in hf_env.requests[before:] if "/resolve/" in r["path"] or r["path"].startswith("/cdn/")]


def test_a_corrupted_blob_is_refetched_and_a_broken_link_relinked(hf_env: FakeHub, tmp_path: Path, hyd) -> None:
    sha = hf_env.commit(REPO, "main", FILES)
    cache = tmp_path / "cache"
    assert hyd(*args(cache, "hf://acme/tiny", "--layout", "hf")).rc == 0
    victim = cache / FOLDER / "blobs" / sha256(FILES["model.safetensors"])
    data = bytearray(victim.read_bytes())
    data[1000] ^= 0xFF  # same size: only a re-hash finds it
    victim.write_bytes(bytes(data))
    os.unlink(cache / FOLDER / "snapshots" / sha / "config.json")

    before = len(hf_env.requests)
    res = hyd(*args(cache, "hf://acme/tiny", "--layout", "hf", "--verify"))
    assert res.rc == 0, res
    assert victim.read_bytes() == FILES["model.safetensors"]
    fetched = [r["path"] for r in hf_env.requests[before:] if r["path"].startswith("/cdn/") and r["method"] == "GET"]
    assert fetched and all(p == f"/cdn/{sha256(FILES['model.safetensors'])}" for p in fetched)
    assert (offline_snapshot(cache, "main") / "config.json").read_bytes() == FILES["config.json"]


def test_a_new_commit_replaces_the_snapshot_and_keeps_shared_blobs(hf_env: FakeHub, tmp_path: Path, hyd) -> None:
    old = hf_env.commit(REPO, "main", FILES)
    cache = tmp_path / "cache"
    assert hyd(*args(cache, "hf://acme/tiny", "--layout", "hf")).rc == 0
    changed = {**FILES, "model.safetensors": blob(9, 200_000)}
    new = hf_env.commit(REPO, "main", changed)
    res = hyd(*args(cache, "hf://acme/tiny", "--layout", "hf", "--refresh"))
    assert res.rc == 0, res
    root = cache / FOLDER
    assert (root / "refs" / "main").read_text() == new
    assert not (root / "snapshots" / old).exists()  # the old commit's links are gone with its blob
    assert not (root / "blobs" / sha256(FILES["model.safetensors"])).exists()
    snap = offline_snapshot(cache, "main")
    assert (snap / "model.safetensors").read_bytes() == changed["model.safetensors"]


def test_the_hf_layout_needs_an_hf_source(tmp_path: Path, hydrate, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        hydrate.main(["--source", "https://example.com/x.bin", "--dest", str(tmp_path / "d"), "--layout", "hf"])
    assert exc.value.code == 2
    assert "--layout hf needs an hf:// source" in capsys.readouterr().err
