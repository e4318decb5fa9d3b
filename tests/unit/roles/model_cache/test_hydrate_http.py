"""The hydrator against a local HTTP server with Range support (and its failure modes)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hydrate_support import HYDRATE, BlobServer, blob, read_manifest, sha256, tree, wait_for

BIG = blob(42, 1_000_000)


def args(url: str, dest: Path, *extra: str) -> list[str]:
    return [
        "--source",
        url,
        "--dest",
        str(dest),
        "--chunk-size",
        "64K",
        "--workers",
        "4",
        "--progress-interval",
        "0",
        "--retry-wait",
        "0.01",
        *extra,
    ]


def gets(srv: BlobServer) -> list[dict]:
    return [r for r in srv.requests if r["method"] == "GET"]


def test_single_file_in_parallel_ranges(http_server: BlobServer, tmp_path: Path, hyd) -> None:
    http_server.put("/files/model.bin", BIG)
    res = hyd(*args(f"{http_server.url}/files/model.bin", tmp_path / "d"))
    assert res.rc == 0, res
    assert tree(tmp_path / "d") == {"model.bin": BIG}
    ranges = [r["range"] for r in gets(http_server) if r["range"] and r["range"] != "bytes=0-0"]
    assert len(ranges) == 16  # 1 MB in 64 KiB chunks
    m = read_manifest(tmp_path / "d")
    assert m["files"] == [
        {"path": "model.bin", "size": len(BIG), "sha256": sha256(BIG), "source_id": m["files"][0]["source_id"]}
    ]
    assert m["revision"]["resolved"] == http_server.etags["/files/model.bin"]


def test_rerun_sends_no_request(http_server: BlobServer, tmp_path: Path, hyd) -> None:
    http_server.put("/m.bin", BIG)
    assert hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d")).rc == 0
    n = len(http_server.requests)
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d"))
    assert res.rc == 0 and "already hydrated" in res.out
    assert len(http_server.requests) == n


def test_server_without_range_support(http_server: BlobServer, tmp_path: Path, hyd) -> None:
    http_server.ranges = False
    http_server.put("/m.bin", BIG)
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d"))
    assert res.rc == 0, res
    assert tree(tmp_path / "d") == {"m.bin": BIG}
    assert len(gets(http_server)) == 2  # probe + one full download


def test_transient_errors_are_retried(http_server: BlobServer, tmp_path: Path, hyd) -> None:
    http_server.put("/m.bin", BIG)
    http_server.fail_next = 3  # 503 to the probe and the first downloads
    http_server.drop_next = 2  # then connections cut half-way through a body
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d", "--workers", "1"))
    assert res.rc == 0, res
    assert res.out.count("retry") >= 5
    assert tree(tmp_path / "d") == {"m.bin": BIG}


def test_retries_exhausted_exit_7(http_server: BlobServer, tmp_path: Path, hyd) -> None:
    http_server.put("/m.bin", BIG)
    http_server.fail_chunks_next = 10**6  # the probe works, every download answers 503
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d", "--retries", "1"))
    assert res.rc == 7, res
    assert "HTTP 503" in res.err and "gave up after 1 retries" in res.err
    http_server.fail_next = 10**6  # the listing/probe step retries too, then gives up
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d", "--retries", "2"))
    assert res.rc == 7 and "gave up after 2 retries" in res.err
    assert not (tmp_path / "d" / ".gpufleet" / "manifest.json").exists()


def test_digest_mismatch_is_refetched_then_fails_with_6(http_server: BlobServer, tmp_path: Path, hyd) -> None:
    http_server.put("/m.bin", BIG)
    url = f"{http_server.url}/m.bin#sha256={sha256(BIG)}"
    http_server.corrupt_next = 1
    res = hyd(*args(url, tmp_path / "d"))
    assert res.rc == 0, res
    assert "sha256: expected" in res.out and "fetching again" in res.out
    assert tree(tmp_path / "d") == {"m.bin": BIG}

    http_server.corrupt_next = 10**6
    res = hyd(*args(url, tmp_path / "e", "--digest-retries", "1"))
    assert res.rc == 6, res
    assert "after 2 attempts" in res.err
    assert not (tmp_path / "e" / "m.bin").exists()
    assert not (tmp_path / "e" / ".gpufleet" / "manifest.json").exists()


def test_not_found_and_unauthorized(http_server: BlobServer, tmp_path: Path, hyd) -> None:
    res = hyd(*args(f"{http_server.url}/missing.bin", tmp_path / "d"))
    assert res.rc == 4 and "404" in res.err
    http_server.put("/private.bin", BIG)
    http_server.basic_auth = ("alice", "s3cr3t-pw")
    res = hyd(*args(f"{http_server.url}/private.bin", tmp_path / "d"))
    assert res.rc == 3 and "401" in res.err
    url = f"http://alice:s3cr3t-pw@127.0.0.1:{http_server.server_address[1]}/private.bin"
    res = hyd(*args(url, tmp_path / "d"))
    assert res.rc == 0, res
    assert "s3cr3t-pw" not in res.out + res.err + (tmp_path / "d" / ".gpufleet" / "manifest.json").read_text()


def test_disk_full_exits_5(http_server: BlobServer, tmp_path: Path, hyd, monkeypatch) -> None:
    http_server.put("/m.bin", BIG)

    class Tiny:
        f_bavail = 10
        f_frsize = 4096

    monkeypatch.setattr(os, "statvfs", lambda path: Tiny)
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d"))
    assert res.rc == 5 and "needed" in res.err
    monkeypatch.undo()

    def enospc(fd, data, offset):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", enospc)
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d"))
    monkeypatch.undo()
    assert res.rc == 5 and "no space left" in res.err
    assert not (tmp_path / "d" / ".gpufleet" / "manifest.json").exists()


def hydrate_cmd(url: str, dest: Path, *extra: str) -> list[str]:
    cmd = [sys.executable, str(HYDRATE), *args(url, dest, *extra)]
    cmd[cmd.index("--chunk-size") + 1] = "256K"
    cmd[cmd.index("--workers") + 1] = "2"
    return cmd


def kill_when(proc: subprocess.Popen, predicate) -> None:
    try:
        assert wait_for(predicate, timeout=30), "the hydrator made no progress"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_kill_and_resume_refetches_less(http_server: BlobServer, tmp_path: Path) -> None:
    data = blob(5, 6 * 1024 * 1024)
    http_server.put("/big.bin", data)
    http_server.throttle_bps = 3 * 1024 * 1024  # per connection
    dest = tmp_path / "d"
    proc = subprocess.Popen(hydrate_cmd(f"{http_server.url}/big.bin", dest), stdout=subprocess.DEVNULL)
    kill_when(proc, lambda: http_server.bytes_sent >= len(data) * 0.4)
    assert not (dest / ".gpufleet" / "manifest.json").exists()
    assert list((dest / ".gpufleet" / "partial").glob("*.part"))

    http_server.throttle_bps = 0
    before = http_server.bytes_sent
    res = subprocess.run(hydrate_cmd(f"{http_server.url}/big.bin", dest), capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    refetched = http_server.bytes_sent - before
    assert tree(dest) == {"big.bin": data}
    assert refetched < len(data) * 0.75
    stats = read_manifest(dest)["stats"]
    assert stats["resumed_bytes"] > 0 and stats["resumed_bytes"] + stats["fetched_bytes"] == len(data)


def test_crash_during_rehydrate_leaves_no_ready_marker(http_server: BlobServer, tmp_path: Path, hyd) -> None:
    old, new = blob(1, 300_000), blob(2, 6 * 1024 * 1024)
    http_server.put("/v1/model.bin", old)
    http_server.put("/v2/model.bin", new)
    dest = tmp_path / "d"
    assert hyd(*args(f"{http_server.url}/v1/model.bin", dest)).rc == 0
    assert (dest / ".gpufleet" / "manifest.json").exists()

    http_server.throttle_bps = 2 * 1024 * 1024
    proc = subprocess.Popen(hydrate_cmd(f"{http_server.url}/v2/model.bin", dest), stdout=subprocess.DEVNULL)
    kill_when(proc, lambda: any(r["path"] == "/v2/model.bin" and r["range"] != "bytes=0-0" for r in gets(http_server)))
    # the old manifest went first: a crash mid-rehydrate never leaves a stale "done" marker
    assert not (dest / ".gpufleet" / "manifest.json").exists()
    http_server.throttle_bps = 0
    res = hyd(*args(f"{http_server.url}/v2/model.bin", dest, "--chunk-size", "256K"))
    assert res.rc == 0, res
    assert tree(dest) == {"model.bin": new}
    assert read_manifest(dest)["source"]["uri"].endswith("/v2/model.bin")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.org/x", "unsupported source"),
        ("http://127.0.0.1:1/dir/", "single file"),
        ("http://127.0.0.1:1/x.bin#md5=abc", "fragment"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, hyd, url: str, message: str) -> None:
    res = hyd("--source", url, "--dest", str(tmp_path / "d"))
    assert res.rc == 2 and message in res.err


def test_a_file_name_too_long_for_the_volume_exits_2_before_fetching(
    http_server: BlobServer, tmp_path: Path, hyd
) -> None:
    name = "m" * 300 + ".bin"  # a URL path may hold it; a file system's names have at most 255 bytes
    http_server.put(f"/{name}", BIG)
    res = hyd(*args(f"{http_server.url}/{name}", tmp_path / "d"))
    assert res.rc == 2, res
    assert "too long" in res.err and "usage" in res.err
    assert [r for r in gets(http_server) if r["range"] != "bytes=0-0"] == []  # refused after the probe, before fetching
    assert not (tmp_path / "d" / ".gpufleet" / "manifest.json").exists()


def test_enametoolong_while_creating_the_file_exits_2(
    http_server: BlobServer, tmp_path: Path, hyd, monkeypatch
) -> None:
    # A volume whose limit the hydrator cannot learn up front (pathconf says more than it takes): the file system's
    # ENAMETOOLONG when the file is created is a path error (exit 2), not an unexpected one (exit 1).
    name = "m" * 300 + ".bin"
    http_server.put(f"/{name}", BIG)
    monkeypatch.setattr(os, "pathconf", lambda path, what: 4096)
    res = hyd(*args(f"{http_server.url}/{name}", tmp_path / "d"))
    assert res.rc == 2, res
    assert "too long" in res.err
    assert not (tmp_path / "d" / ".gpufleet" / "manifest.json").exists()


def test_dest_through_symlink_is_refused(http_server: BlobServer, tmp_path: Path, hyd) -> None:
    http_server.put("/m.bin", b"x")
    dest = tmp_path / "d"
    (dest / ".gpufleet").parent.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (dest / ".gpufleet").symlink_to(tmp_path / "elsewhere")
    res = hyd(*args(f"{http_server.url}/m.bin", dest))
    assert res.rc == 2 and "symlink" in res.err
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_two_hydrators_on_one_volume_are_serialised(http_server: BlobServer, tmp_path: Path) -> None:
    data = blob(6, 2 * 1024 * 1024)
    http_server.put("/m.bin", data)
    http_server.gate = threading.Event()  # the first download stays in flight until the second hydrator waits
    dest = tmp_path / "d"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    first = subprocess.Popen(hydrate_cmd(f"{http_server.url}/m.bin", dest), stdout=subprocess.PIPE, text=True, env=env)
    second = None
    try:
        assert wait_for(lambda: http_server.bytes_sent > 1)
        second = subprocess.Popen(
            hydrate_cmd(f"{http_server.url}/m.bin", dest), stdout=subprocess.PIPE, text=True, env=env
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(second.stdout), daemon=True)
        reader.start()
        assert wait_for(lambda: any("another hydrator is working" in line for line in lines), timeout=60)
    finally:
        http_server.gate.set()
    assert first.wait(60) == 0
    assert second.wait(60) == 0
    reader.join(10)
    out = "".join(lines)
    assert "already hydrated" in out  # it waited, then found the work done
    assert http_server.bytes_sent == len(data) + 1  # fetched once (+ the 1-byte probe)
    assert tree(dest) == {"m.bin": data}


# --------------------------------------------------------------------------- issue 16: sizes the server disagrees on


@pytest.mark.parametrize(
    ("probe_total", "extra"),
    [
        (40_000, ()),  # the probe says one small chunk: a plain GET then delivers the whole (longer) file
        (500_000, ()),  # the probe says half the size: every ranged answer names the real total
        (500_000, ("--hash-mode", "final")),
    ],
)
def test_probe_and_get_disagreeing_on_the_size_never_write_a_manifest(
    http_server: BlobServer, tmp_path: Path, hyd, probe_total: int, extra: tuple[str, ...]
) -> None:
    """Used to store the first probe_total bytes and write the completion manifest (a truncated "ready" cache)."""
    http_server.put("/m.bin", BIG)
    http_server.probe_total = probe_total
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d", *extra))
    assert res.rc == 6, res
    assert "size mismatch" in res.err or "asked for bytes" in res.err
    assert not (tmp_path / "d" / ".gpufleet" / "manifest.json").exists()
    assert not (tmp_path / "d" / "m.bin").exists()


def test_response_length_checks(hyd) -> None:
    from hydrate_support import load_hydrate

    h = load_hydrate()
    ok = h.check_response_length
    ok("f", 100, 0, 50, ranged=True, content_length="50", content_range="bytes 0-49/100")
    ok("f", 100, 0, None, ranged=False, content_length="100")
    ok("f", 100, 50, 100, ranged=True, content_length=50)  # S3-compatible server without Content-Range
    for kwargs in (
        {"ranged": True, "content_length": "50", "content_range": "bytes 0-49/120"},  # another total
        {"ranged": True, "content_length": "40", "content_range": "bytes 0-39/100"},  # a shorter range
        {"ranged": True, "content_length": "60", "content_range": "bytes 0-49/100"},  # length and range disagree
        {"ranged": True, "content_length": "49"},
    ):
        with pytest.raises(h.DigestError):
            ok("f", 100, 0, 50, **kwargs)
    with pytest.raises(h.DigestError, match="size mismatch"):
        ok("f", 100, 0, None, ranged=False, content_length="150")


def test_http_secrets_come_from_the_environment(
    http_server: BlobServer, tmp_path: Path, hyd, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_server.put("/m.bin", BIG)
    http_server.basic_auth = ("alice", "pw-from-secret")
    monkeypatch.setenv("GPUFLEET_HTTP_USERNAME", "alice")
    monkeypatch.setenv("GPUFLEET_HTTP_PASSWORD", "pw-from-secret")
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d"))
    assert res.rc == 0, res
    assert "pw-from-secret" not in res.out + res.err
    assert "pw-from-secret" not in (tmp_path / "d" / ".gpufleet" / "manifest.json").read_text()


def test_a_presigned_url_from_the_environment_is_fetched_but_never_shown(
    http_server: BlobServer, tmp_path: Path, hyd, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_server.put("/m.bin", BIG)
    monkeypatch.setenv("GPUFLEET_SOURCE_URL", f"{http_server.url}/m.bin?X-Amz-Signature=sig-from-secret")
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d"))
    assert res.rc == 0, res
    assert all("X-Amz-Signature=sig-from-secret" in r["path"] for r in gets(http_server))
    manifest = (tmp_path / "d" / ".gpufleet" / "manifest.json").read_text()
    assert "sig-from-secret" not in res.out + res.err + manifest
    # A rotated signature is the same source: nothing is fetched again.
    monkeypatch.setenv("GPUFLEET_SOURCE_URL", f"{http_server.url}/m.bin?X-Amz-Signature=rotated")
    n = len(http_server.requests)
    assert hyd(*args(f"{http_server.url}/m.bin", tmp_path / "d")).rc == 0
    assert len(http_server.requests) == n
    monkeypatch.setenv("GPUFLEET_SOURCE_URL", f"{http_server.url}/other.bin?X-Amz-Signature=x")
    res = hyd(*args(f"{http_server.url}/m.bin", tmp_path / "e"))
    assert res.rc == 2 and "does not point at" in res.err
