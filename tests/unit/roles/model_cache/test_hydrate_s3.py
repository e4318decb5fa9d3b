"""The hydrator against a real S3 endpoint (rclone serve s3 on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hydrate_support import (
    HYDRATE,
    S3_KEY,
    S3_SECRET,
    S3Server,
    blob,
    no_symlinks,
    read_manifest,
    sha256,
    tree,
    wait_for,
)

CHUNK = "64K"


def model(prefix: str = "models/tiny") -> dict[str, bytes]:
    return {
        f"{prefix}/config.json": b'{"hidden": 8}\n',
        f"{prefix}/model-00001-of-00002.safetensors": blob(1, 300_000),  # > chunk: parallel ranges
        f"{prefix}/model-00002-of-00002.safetensors": blob(2, 150_001),
        f"{prefix}/tokenizer/vocab.txt": b"a\nb\nc\n",
        f"{prefix}/empty.txt": b"",
    }


def upload(s3: S3Server, bucket: str, objects: dict[str, bytes]) -> None:
    for key, data in objects.items():
        s3.put(bucket, key, data)


def args(s3: S3Server, source: str, dest: Path, *extra: str) -> list[str]:
    return [
        "--source",
        source,
        "--dest",
        str(dest),
        "--endpoint-url",
        s3.endpoint,
        "--chunk-size",
        CHUNK,
        "--workers",
        "4",
        "--progress-interval",
        "0",
        *extra,
    ]


def test_fresh_hydrate_writes_verified_files_and_manifest(s3_env: S3Server, bucket: str, tmp_path: Path, hyd) -> None:
    objects = model()
    upload(s3_env, bucket, objects)
    dest = tmp_path / "cache"
    res = hyd(*args(s3_env, f"s3://{bucket}/models/tiny", dest))
    assert res.rc == 0, res
    expected = {k.removeprefix("models/tiny/"): v for k, v in objects.items()}
    assert tree(dest) == expected
    assert no_symlinks(dest)
    assert os.listdir(dest / ".gpufleet" / "partial") == []
    m = read_manifest(dest)
    assert m["source"]["uri"] == f"s3://{bucket}/models/tiny"
    assert m["source"]["endpoint"] == s3_env.endpoint
    assert m["revision"] == {"requested": None, "resolved": None}
    assert m["hydrator"]["version"] == "1.0.0"
    assert m["bytes"] == sum(len(v) for v in objects.values())
    assert m["file_count"] == len(objects)
    assert {f["path"]: (f["size"], f["sha256"]) for f in m["files"]} == {
        p: (len(d), sha256(d)) for p, d in expected.items()
    }
    assert m["started"] <= m["finished"]
    assert m["stats"]["fetched_bytes"] == m["bytes"]
    # the ranged file really was fetched as parallel chunks and hashed in order (digest matches)
    assert "5 files" in res.out and "done:" in res.out
    assert S3_SECRET not in res.out + res.err + json.dumps(m)


def test_rerun_is_a_noop_without_touching_the_network(s3_env: S3Server, bucket: str, tmp_path: Path, hyd, monkeypatch):
    upload(s3_env, bucket, model())
    dest = tmp_path / "cache"
    assert hyd(*args(s3_env, f"s3://{bucket}/models/tiny", dest)).rc == 0
    before = {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.is_file()}
    # wrong credentials: any request would fail with an auth error, so exit 0 proves nothing was fetched
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    res = hyd(*args(s3_env, f"s3://{bucket}/models/tiny", dest))
    assert res.rc == 0, res
    assert "already hydrated" in res.out
    assert {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.is_file()} == before


def test_verify_detects_corruption_and_refetches(s3_env: S3Server, bucket: str, tmp_path: Path, hyd) -> None:
    objects = model()
    upload(s3_env, bucket, objects)
    dest = tmp_path / "cache"
    assert hyd(*args(s3_env, f"s3://{bucket}/models/tiny", dest)).rc == 0
    victim = dest / "model-00001-of-00002.safetensors"
    st = victim.stat()
    data = bytearray(victim.read_bytes())
    data[1000] ^= 0x01  # same size, same mtime: only a re-hash can see it
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))

    res = hyd(*args(s3_env, f"s3://{bucket}/models/tiny", dest))
    assert res.rc == 0 and "already hydrated" in res.out  # documented: sizes only without --verify

    res = hyd(*args(s3_env, f"s3://{bucket}/models/tiny", dest, "--verify"))
    assert res.rc == 0, res
    assert "mismatch" in res.out
    assert victim.read_bytes() == objects["models/tiny/model-00001-of-00002.safetensors"]
    m = read_manifest(dest)
    assert m["stats"]["fetched_bytes"] == victim.stat().st_size  # only the corrupt file was fetched again
    assert m["stats"]["reused_files"] == len(objects) - 1


def test_revision_change_rehydrates_and_removes_vanished_files(
    s3_env: S3Server, bucket: str, tmp_path: Path, hyd
) -> None:
    objects = model()
    upload(s3_env, bucket, objects)
    dest = tmp_path / "cache"
    src = f"s3://{bucket}/models/tiny"
    assert hyd(*args(s3_env, src, dest, "--revision", "v1")).rc == 0
    kept_inode = (dest / "model-00002-of-00002.safetensors").stat().st_ino

    new_shard = blob(3, 300_000)
    s3_env.put(bucket, "models/tiny/model-00001-of-00002.safetensors", new_shard)
    (s3_env.root / bucket / "models/tiny/tokenizer/vocab.txt").unlink()
    s3_env.put(bucket, "models/tiny/generation_config.json", b"{}")

    res = hyd(*args(s3_env, src, dest, "--revision", "v1"))
    assert res.rc == 0 and "already hydrated" in res.out  # same label: the volume is left alone

    res = hyd(*args(s3_env, src, dest, "--revision", "v2"))
    assert res.rc == 0, res
    assert "revision changed" in res.out
    m = read_manifest(dest)
    assert m["revision"]["requested"] == "v2"
    assert (dest / "model-00001-of-00002.safetensors").read_bytes() == new_shard
    assert not (dest / "tokenizer").exists()  # vanished file and its now-empty directory are gone
    assert (dest / "generation_config.json").read_bytes() == b"{}"
    assert {f["path"] for f in m["files"]} == set(tree(dest))
    assert (dest / "model-00002-of-00002.safetensors").stat().st_ino == kept_inode  # unchanged: not re-fetched
    assert m["stats"]["fetched_bytes"] == len(new_shard) + 2


def test_include_exclude_select_files_and_a_change_rehydrates(
    s3_env: S3Server, bucket: str, tmp_path: Path, hyd
) -> None:
    upload(s3_env, bucket, model())
    dest = tmp_path / "cache"
    src = f"s3://{bucket}/models/tiny"
    res = hyd(
        *args(s3_env, src, dest, "--include", "*.safetensors", "--include", "tokenizer/", "--exclude", "model-00002-*")
    )
    assert res.rc == 0, res
    assert set(tree(dest)) == {"model-00001-of-00002.safetensors", "tokenizer/vocab.txt"}
    assert read_manifest(dest)["include"] == ["*.safetensors", "tokenizer/"]

    res = hyd(*args(s3_env, src, dest, "--include", "*.json"))
    assert res.rc == 0, res
    assert set(tree(dest)) == {"config.json"}

    res = hyd(*args(s3_env, src, dest, "--include", "*.bin"))
    assert res.rc == 4 and "matches" in res.err
    assert not (dest / ".gpufleet" / "manifest.json").exists()


def test_lost_and_found_does_not_count_and_survives(s3_env: S3Server, bucket: str, tmp_path: Path, hyd) -> None:
    objects = model()
    upload(s3_env, bucket, objects)
    dest = tmp_path / "volume"
    (dest / "lost+found").mkdir(parents=True)
    (dest / "lost+found" / "#1234").write_bytes(b"orphan")
    (dest / "README.customer").write_text("not ours")
    res = hyd(*args(s3_env, f"s3://{bucket}/models/tiny", dest))
    assert res.rc == 0, res
    assert "fetch 5 files" in res.out  # a non-empty volume is not mistaken for a hydrated one
    assert (dest / "lost+found" / "#1234").read_bytes() == b"orphan"
    assert (dest / "README.customer").read_text() == "not ours"
    assert {f["path"] for f in read_manifest(dest)["files"]} == {k.removeprefix("models/tiny/") for k in objects}


def test_key_that_escapes_the_destination_is_rejected(s3_env: S3Server, bucket: str, tmp_path: Path, hyd) -> None:
    s3_env.put(bucket, "odd/fine.txt", b"ok")
    s3_env.put(bucket, "odd/..\\..\\evil.txt", b"pwned")  # S3 keys may hold backslashes and dots
    dest = tmp_path / "inner" / "cache"
    res = hyd(*args(s3_env, f"s3://{bucket}/odd", dest))
    assert res.rc == 2, res
    assert "unsafe path" in res.err and "evil.txt" in res.err
    assert res.err.count("\n") == 1  # one line
    assert not (dest / ".gpufleet" / "manifest.json").exists()
    assert not list(tmp_path.rglob("evil.txt"))
    assert not [p for p in tmp_path.rglob("*") if "evil" in p.name]


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("s3://no-such-bucket-here/x", "NoSuchBucket"),
        ("s3://{bucket}/nothing/here", "no objects under this prefix"),
    ],
)
def test_missing_bucket_or_prefix_exits_4(s3_env: S3Server, bucket: str, tmp_path: Path, hyd, source, needle) -> None:
    s3_env.put(bucket, "present/a.txt", b"a")
    res = hyd(*args(s3_env, source.format(bucket=bucket), tmp_path / "d"))
    assert res.rc == 4, res
    assert needle in res.err
    assert res.err.startswith("[hydrate] error: (not-found, exit 4)")


def test_single_object_uri(s3_env: S3Server, bucket: str, tmp_path: Path, hyd) -> None:
    s3_env.put(bucket, "weights/only.bin", blob(7, 70_000))
    res = hyd(*args(s3_env, f"s3://{bucket}/weights/only.bin", tmp_path / "d"))
    assert res.rc == 0, res
    assert tree(tmp_path / "d") == {"only.bin": blob(7, 70_000)}


def test_bad_credentials_exit_3(s3_env: S3Server, bucket: str, tmp_path: Path, hyd, monkeypatch) -> None:
    s3_env.put(bucket, "m/a.txt", b"a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "definitely-wrong")
    res = hyd(*args(s3_env, f"s3://{bucket}/m", tmp_path / "d"))
    assert res.rc == 3, res
    assert "auth" in res.err and "definitely-wrong" not in res.out + res.err


def test_json_log_format(s3_env: S3Server, bucket: str, tmp_path: Path, hyd) -> None:
    upload(s3_env, bucket, model())
    res = hyd(*args(s3_env, f"s3://{bucket}/models/tiny", tmp_path / "d", "--log-format", "json"))
    assert res.rc == 0, res
    events = [json.loads(line) for line in res.out.splitlines()]
    assert events[0]["event"] == "start"
    done = events[-1]
    assert done["event"] == "done" and done["files"] == 5 and done["bytes_fetched"] == done["bytes"]


@pytest.fixture
def slow_s3(tmp_path: Path) -> Any:
    (tmp_path / "slowroot").mkdir()
    server = S3Server(tmp_path / "slowroot", extra=["--bwlimit", "3M"])
    yield server
    server.stop()


def test_kill_and_resume_refetches_less_than_everything(slow_s3: S3Server, tmp_path: Path) -> None:
    objects = {f"m/shard-{i}.bin": blob(10 + i, 1_500_000) for i in range(4)}  # 6 MB at 3 MB/s
    upload(slow_s3, "slow", objects)
    total = sum(len(v) for v in objects.values())
    dest = tmp_path / "cache"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": S3_KEY,
        "AWS_SECRET_ACCESS_KEY": S3_SECRET,
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
    }
    cmd = [sys.executable, str(HYDRATE), *args(slow_s3, "s3://slow/m", dest)]
    cmd[cmd.index("--chunk-size") + 1] = "256K"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = dest / ".gpufleet" / "partial"

    def journaled() -> int:
        n = sum(1 for f in dest.glob("shard-*.bin"))
        lines = sum(p.read_text().count("\n") for p in partial.glob("*.ranges")) if partial.exists() else 0
        return n * 6 + lines  # 1.5 MB file = 6 chunks

    try:
        assert wait_for(lambda: journaled() >= 10, timeout=30), "hydrator made no progress"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not (dest / ".gpufleet" / "manifest.json").exists()

    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert tree(dest) == {k.removeprefix("m/"): v for k, v in objects.items()}
    stats = read_manifest(dest)["stats"]
    assert 0 < stats["fetched_bytes"] < total
    assert stats["reused_bytes"] + stats["resumed_bytes"] + stats["fetched_bytes"] == total
