"""The hydrator through huggingface_hub (HfApi.repo_info + list_repo_tree) against a small fake hub."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydrate_support import FakeHub, blob, no_symlinks, read_manifest, sha256, tree

pytest.importorskip("huggingface_hub")

TOKEN = "hf_test_token_do_not_print"

FILES = {
    "config.json": b'{"architectures": ["Tiny"]}\n',
    "model.safetensors": blob(1, 200_000),  # LFS: redirected to the "CDN", verified against the LFS sha256
    "tokenizer/tokenizer.json": b'{"vocab": {}}' * 10,  # small: git blob, verified against its git sha1
    "tokenizer/merges.bin": blob(2, 70_000),
}


@pytest.fixture
def hf_env(hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeHub:
    hub.token = TOKEN
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for var in ("HF_HUB_OFFLINE", "HF_HUB_DISABLE_IMPLICIT_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return hub


def args(dest: Path, source: str = "hf://acme/tiny", *extra: str) -> list[str]:
    return ["--source", source, "--dest", str(dest), "--chunk-size", "64K", "--progress-interval", "0", *extra]


def test_hydrates_at_the_resolved_commit_without_symlinks_or_cache(hf_env: FakeHub, tmp_path: Path, hyd) -> None:
    sha = hf_env.commit("acme/tiny", "main", FILES, private=True)
    dest = tmp_path / "cache"
    res = hyd(*args(dest))
    assert res.rc == 0, res
    assert tree(dest) == FILES
    assert no_symlinks(dest)
    assert not any(p.name in (".cache", "blobs", "snapshots") for p in dest.rglob("*"))
    m = read_manifest(dest)
    assert m["revision"] == {"requested": "main", "resolved": sha}
    assert {f["path"]: f["sha256"] for f in m["files"]} == {p: sha256(d) for p, d in FILES.items()}
    assert m["source"]["uri"] == "hf://acme/tiny"
    # every download was pinned to the commit, the LFS file went through the CDN redirect,
    # and the token reached the hub but never the CDN's other origin
    resolves = [r for r in hf_env.requests if "/resolve/" in r["path"]]
    assert resolves and all(f"/resolve/{sha}/" in r["path"] for r in resolves)
    cdn = [r for r in hf_env.requests if r["path"].startswith("/cdn/")]
    assert cdn and all(r["authorization"] is None for r in cdn)
    api = [r for r in hf_env.requests if r["path"].startswith(("/api/models/", "/api/datasets/"))]
    assert api and all(r["authorization"] == f"Bearer {TOKEN}" for r in api), api
    assert TOKEN not in res.out + res.err + (dest / ".gpufleet" / "manifest.json").read_text()


def test_moving_branch_is_sticky_until_refresh_and_pinning_a_commit_rehydrates(
    hf_env: FakeHub, tmp_path: Path, hyd
) -> None:
    sha1 = hf_env.commit("acme/tiny", "main", FILES)
    dest = tmp_path / "cache"
    assert hyd(*args(dest)).rc == 0
    v2 = {**FILES, "model.safetensors": blob(3, 200_000)}
    del v2["tokenizer/merges.bin"]
    sha2 = hf_env.commit("acme/tiny", "main", v2)

    res = hyd(*args(dest))
    assert res.rc == 0 and "already hydrated" in res.out
    assert tree(dest) == FILES

    res = hyd(*args(dest, "hf://acme/tiny", "--refresh"))
    assert res.rc == 0, res
    assert tree(dest) == v2
    m = read_manifest(dest)
    assert m["revision"]["resolved"] == sha2
    assert m["stats"]["fetched_bytes"] == len(v2["model.safetensors"])  # unchanged files were kept

    res = hyd(*args(dest, "hf://acme/tiny", "--revision", sha1))
    assert res.rc == 0, res
    assert "revision changed" in res.out
    assert tree(dest) == FILES
    assert read_manifest(dest)["revision"] == {"requested": sha1, "resolved": sha1}


def test_include_exclude_patterns(hf_env: FakeHub, tmp_path: Path, hyd) -> None:
    hf_env.commit("acme/tiny", "main", FILES)
    res = hyd(*args(tmp_path / "d", "hf://acme/tiny", "--include", "*.json", "--exclude", "tokenizer/"))
    assert res.rc == 0, res
    assert tree(tmp_path / "d") == {"config.json": FILES["config.json"]}


def test_dataset_repos(hf_env: FakeHub, tmp_path: Path, hyd) -> None:
    hf_env.commit("acme/data", "main", {"train.jsonl": b"{}\n" * 100})
    res = hyd(*args(tmp_path / "d", "hf://datasets/acme/data"))
    assert res.rc == 0, res
    assert tree(tmp_path / "d") == {"train.jsonl": b"{}\n" * 100}
    assert any(r["path"].startswith("/datasets/acme/data/resolve/") for r in hf_env.requests)


def test_tree_entry_escaping_the_destination_is_rejected(hf_env: FakeHub, tmp_path: Path, hyd) -> None:
    sha = hf_env.commit("acme/tiny", "main", FILES)
    hf_env.extra_tree[sha] = [{"type": "file", "path": "../escape.txt", "size": 3, "oid": "0" * 40}]
    res = hyd(*args(tmp_path / "inner" / "d"))
    assert res.rc == 2, res
    assert "'../escape.txt'" in res.err and "escapes" in res.err
    assert not (tmp_path / "inner" / "escape.txt").exists()
    assert not (tmp_path / "inner" / "d" / "config.json").exists()  # rejected before anything is fetched


def test_lfs_digest_mismatch_fails_with_6(hf_env: FakeHub, tmp_path: Path, hyd) -> None:
    hf_env.commit("acme/tiny", "main", FILES)
    hf_env.lie_sha256.add("model.safetensors")
    res = hyd(*args(tmp_path / "d", "hf://acme/tiny", "--digest-retries", "1"))
    assert res.rc == 6, res
    assert "model.safetensors: sha256: expected 0000" in res.err
    assert not (tmp_path / "d" / ".gpufleet" / "manifest.json").exists()
    assert not (tmp_path / "d" / "model.safetensors").exists()


@pytest.mark.parametrize(
    ("source", "extra", "token", "code", "needle"),
    [
        ("hf://acme/nope", [], TOKEN, 4, "repository not found"),
        ("hf://acme/tiny", ["--revision", "no-such-branch"], TOKEN, 4, "revision 'no-such-branch' not found"),
        ("hf://acme/private", [], None, 4, "private"),
        ("hf://acme/tiny", [], "hf_wrong", 3, "not authorized"),
        ("hf://not/a/valid/uri", [], TOKEN, 2, "invalid Hugging Face URI"),
    ],
)
def test_errors_map_to_exit_codes(
    hf_env: FakeHub, tmp_path: Path, hyd, monkeypatch, source: str, extra: list[str], token, code: int, needle: str
) -> None:
    hf_env.commit("acme/tiny", "main", FILES)
    hf_env.commit("acme/private", "main", FILES, private=True)
    if token is None:
        monkeypatch.delenv("HF_TOKEN")
    else:
        monkeypatch.setenv("HF_TOKEN", token)
    res = hyd(*args(tmp_path / "d", source, *extra))
    assert res.rc == code, res
    assert needle in res.err
    assert len(res.err.splitlines()) == 1
    assert "hf_wrong" not in res.err


def test_cli_sends_no_telemetry_request(hf_env: FakeHub, tmp_path: Path) -> None:
    """As the Job runs it: a fresh interpreter, HF_ENDPOINT from the environment, no extra calls to the hub."""
    from hydrate_support import run_cli

    hf_env.commit("acme/tiny", "main", FILES)
    res = run_cli(args(tmp_path / "d"))
    assert res.returncode == 0, res.stderr
    assert tree(tmp_path / "d") == FILES
    paths = {r["path"].split("?")[0] for r in hf_env.requests if r["path"].startswith("/api/")}
    assert all(p.startswith("/api/models/acme/tiny/") for p in paths), paths
