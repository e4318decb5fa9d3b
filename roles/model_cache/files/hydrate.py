# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Hydrate a model cache directory from Hugging Face, S3 or an HTTP(S) URL.

gpufleet.serving's model-cache hydrator. It runs inside the collection's one-shot
Kubernetes hydration Job and can be run by hand with the same command line. The
directory is ready when, and only when, DEST/.gpufleet/manifest.json exists: it is
written last, atomically, after every file has been fetched, verified (size and
sha256), fsynced and renamed into place.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import errno
import fnmatch
import hashlib
import json
import os
import queue
import random
import re
import socket
import ssl
import stat
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

try:  # POSIX advisory lock that serialises hydrators working on one directory
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

VERSION = "1.0.0"
NAME = "gpufleet-hydrate"
STATE_DIR = ".gpufleet"
MANIFEST = "manifest.json"
INDEX = "index.jsonl"
PARTIAL = "partial"
MANIFEST_FORMAT = 1

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
READ_SIZE = 4 * MiB  # network read / disk write / read-back unit (hashed while still in cache)
BLOCKS_PER_WORKER = 3  # READ_SIZE buffers per worker between the fetchers and the digest threads
DEFAULT_CHUNK = 32 * MiB  # byte range fetched by one request
MIN_CHUNK = 64 * KiB

# Secrets of an http(s) source, from the environment (the Job maps them from Kubernetes Secrets).
HTTP_USERNAME_ENV = "GPUFLEET_HTTP_USERNAME"
HTTP_PASSWORD_ENV = "GPUFLEET_HTTP_PASSWORD"
SOURCE_URL_ENV = "GPUFLEET_SOURCE_URL"

# BEGIN gpufleet.serving hydrator exit codes (plugins/module_utils/hydrator_exit.py; embedded verbatim in hydrate.py)
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_NOT_FOUND = 4
EXIT_DISK_FULL = 5
EXIT_DIGEST = 6
EXIT_NETWORK = 7
EXIT_INTERRUPTED = 130
#: code -> (what ``hydrate.py --help`` says, what the cache's status says when the Job's pod exited with it)
EXIT_TABLE: dict[int, tuple[str, str]] = {
    EXIT_OK: ("hydrated (or already hydrated); DEST/.gpufleet/manifest.json is present and true", "hydrated"),
    EXIT_ERROR: ("unexpected error", "unexpected error"),
    EXIT_USAGE: (
        "usage or path error (bad arguments, unsafe remote path such as ../x or a\\b, a remote name too long for "
        "the file system, symlink in DEST)",
        "usage or path error (bad arguments, unsafe remote path, a remote name too long for the volume, symlink in "
        "the destination)",
    ),
    EXIT_AUTH: (
        "authentication or authorization failed (401/403, bad or missing credentials, gated repo)",
        "authentication or authorization failed (bad or missing credentials, gated repository)",
    ),
    EXIT_NOT_FOUND: (
        "not found (repo, revision, bucket, prefix, object, URL, or no file matched --include/--exclude)",
        "not found (repository, revision, bucket, prefix, object or URL; or nothing matched include/exclude)",
    ),
    EXIT_DISK_FULL: (
        "disk full (not enough free space, ENOSPC, EDQUOT)",
        "disk full (the volume is too small for the model: raise size)",
    ),
    EXIT_DIGEST: (
        "size or digest mismatch persisted after --digest-retries re-fetches",
        "size or digest mismatch persisted after re-fetches",
    ),
    EXIT_NETWORK: (
        "network or server errors persisted after --retries attempts (safe to retry)",
        "network or server errors persisted after retries (safe to retry)",
    ),
    EXIT_INTERRUPTED: ("interrupted", "interrupted"),
}
# END gpufleet.serving hydrator exit codes

EPILOG = """\
sources:
  hf://ORG/REPO               Hugging Face model repo (hf://datasets/ORG/REPO, hf://spaces/ORG/REPO too).
                              --revision is a branch, tag or commit (default main); it is resolved to a
                              commit sha, recorded, and every file is fetched at that commit and checked
                              against the hub's LFS sha256 (git blob sha1 for small files).
  s3://BUCKET[/PREFIX]        every object under PREFIX/ (or the single object PREFIX); files keep their
                              keys relative to PREFIX. Single-part MD5 ETags and full-object SHA-256
                              checksums are verified (--no-verify-etag skips the MD5 pass).
                              --revision is a label recorded in the manifest: changing it re-hydrates.
  http(s)://HOST/PATH/FILE    one file, saved as FILE; parallel byte ranges when the server honours
                              Range. Append #sha256=HEX to verify a known digest.

environment:
  HF_TOKEN, HF_ENDPOINT                         Hugging Face token and hub URL
  GPUFLEET_HTTP_USERNAME, GPUFLEET_HTTP_PASSWORD http(s): basic auth user and password
  GPUFLEET_SOURCE_URL                           http(s): the full URL to fetch (e.g. presigned); scheme, host
                                                and path must match --source, which is all that is shown
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,     S3 credentials (any boto3 credential source works;
  AWS_SESSION_TOKEN, AWS_REGION                 none at all means anonymous access)
  AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL         S3 endpoint when --endpoint-url is not given
  HTTPS_PROXY, HTTP_PROXY, NO_PROXY             proxies
  Secrets are never printed, written to the manifest or put on a command line.

layout of DEST (--layout flat, the default):
  the files, with their source paths (no symlinks are ever created), and .gpufleet/:
  manifest.json   completion record, written last; its presence is the only meaning of "ready"
  index.jsonl     verified files (path, size, sha256, source identity) used to skip work on re-runs
  partial/        in-flight downloads (<id>.part + a byte-range journal) so a killed run resumes
  Entries the hydrator did not write (lost+found, ...) are ignored and never removed.
--layout hf (hf:// sources): DEST is a Hugging Face hub cache (HF_HUB_CACHE), as huggingface_hub writes it:
  models--ORG--NAME/blobs/<sha256 or git blob id>   each file once, verified against that very id
  models--ORG--NAME/snapshots/<commit>/<path>      relative symlinks to ../../blobs/<id>
  models--ORG--NAME/refs/<revision>                the commit (when --revision is a branch or tag)
  models--ORG--NAME/trees/<commit>.json            the commit's file list (huggingface_hub's offline
                                                   completeness check)
  so an engine loads it with --model ORG/NAME --revision <commit> and HF_HUB_OFFLINE=1.

re-runs:
  with a manifest for the same source, revision and include/exclude patterns and every recorded
  file present with its recorded size, nothing is fetched (--verify re-hashes every file first).
  Otherwise the manifest is removed first, unchanged files are kept, missing, changed or corrupt
  ones are fetched, and files that are no longer in the source are removed.

exit codes:
"""
EPILOG += "\n".join(f"  {code:<2} {text}" for code, (text, _status) in EXIT_TABLE.items()) + "\n"


# --------------------------------------------------------------------------- errors


class HydrateError(Exception):
    """An error with a one-line message and an exit code."""

    code = EXIT_ERROR
    kind = "error"


class UsageError(HydrateError):
    code = EXIT_USAGE
    kind = "usage"


class AuthError(HydrateError):
    code = EXIT_AUTH
    kind = "auth"


class NotFoundError(HydrateError):
    code = EXIT_NOT_FOUND
    kind = "not-found"


class DiskFullError(HydrateError):
    code = EXIT_DISK_FULL
    kind = "disk-full"


class DigestError(HydrateError):
    code = EXIT_DIGEST
    kind = "digest-mismatch"


class TransientError(HydrateError):
    """Retryable: connection problems, timeouts, 429 and 5xx answers, short reads."""

    code = EXIT_NETWORK
    kind = "network"


class _Aborted(Exception):
    """Raised inside workers once another worker failed."""


def _os_error(exc: OSError, what: str) -> HydrateError:
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return DiskFullError(f"{what}: no space left on device")
    if exc.errno == errno.ENAMETOOLONG:  # a remote name the volume's file system cannot hold: a path error
        return UsageError(
            f"{what}: file name too long for the destination's file system; leave the file out with --exclude"
        )
    return HydrateError(f"{what}: {exc.strerror or exc}")


# --------------------------------------------------------------------------- small helpers


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(i?[bB])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"invalid size {text!r} (examples: 32M, 64MiB, 1G)")
    value = int(m.group(1)) * {"": 1, "k": KiB, "m": MiB, "g": GiB}[m.group(2).lower()]
    if value < MIN_CHUNK:
        raise argparse.ArgumentTypeError(f"chunk size must be at least {fmt_bytes(MIN_CHUNK)}")
    return value


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def redact_url(url: str | None) -> str | None:
    """Drop user:password@ and hide query strings (presigned URLs carry signatures)."""
    if not url:
        return url
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = "<redacted>" if parts.query else ""
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def safe_relpath(path: str, origin: str = "source") -> str:
    """Return path if it is a safe relative POSIX path inside the destination, else raise UsageError."""
    shown = repr(path)
    if not path:
        raise UsageError(f"unsafe path from {origin}: empty name")
    if "\\" in path:
        raise UsageError(f"unsafe path from {origin}: {shown} contains a backslash")
    if _CONTROL.search(path):
        raise UsageError(f"unsafe path from {origin}: {shown} contains control characters")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise UsageError(f"unsafe path from {origin}: {shown} is absolute")
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise UsageError(f"unsafe path from {origin}: {shown} escapes or is not normalised ('{part}' component)")
    if parts[0] == STATE_DIR:
        raise UsageError(f"unsafe path from {origin}: {shown} is inside the reserved {STATE_DIR}/ directory")
    return path


def _pattern(p: str) -> str:
    return p + "*" if p.endswith("/") else p


def selected(path: str, include: list[str], exclude: list[str]) -> bool:
    """fnmatch-style patterns on the relative path ('*' crosses '/'; 'dir/' means everything under dir)."""
    if include and not any(fnmatch.fnmatchcase(path, _pattern(p)) for p in include):
        return False
    return not any(fnmatch.fnmatchcase(path, _pattern(p)) for p in exclude)


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def new_hasher(algo: str, size: int | None) -> Any:
    if algo == "git-sha1":  # git blob id: sha1(b"blob <size>\0" + content)
        h = hashlib.sha1()
        h.update(b"blob %d\0" % (size or 0))
        return h
    return hashlib.new(algo)


def write_json_atomic(path: str, data: Any) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path))


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def pwrite_all(fd: int, data: Any, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n


# --------------------------------------------------------------------------- logging


class Log:
    """Line-by-line log for `kubectl logs`: text ('[hydrate] ...') or JSON lines. Errors go to stderr."""

    def __init__(self, fmt: str = "text", out: Any = None, err: Any = None) -> None:
        self.fmt = fmt
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._lock = threading.Lock()

    def _emit(self, stream: Any, level: str, event: str, msg: str, fields: dict[str, Any]) -> None:
        if self.fmt == "json":
            line = json.dumps({"ts": now_iso(), "level": level, "event": event, "msg": msg, **fields}, sort_keys=True)
        else:
            line = f"[hydrate] {msg}" if level != "error" else f"[hydrate] error: {msg}"
        with self._lock:
            stream.write(line + "\n")
            stream.flush()

    def info(self, event: str, msg: str, **fields: Any) -> None:
        self._emit(self.out, "info", event, msg, fields)

    def warn(self, event: str, msg: str, **fields: Any) -> None:
        self._emit(self.out, "warning", event, "warning: " + msg if self.fmt == "text" else msg, fields)

    def error(self, msg: str, **fields: Any) -> None:
        self._emit(self.err, "error", "error", msg, fields)


# --------------------------------------------------------------------------- remote files and sources


class RemoteFile:
    """One file to hydrate. expect maps an algorithm (sha256, md5, git-sha1) to the hex digest the source vouches for."""

    __slots__ = ("expect", "path", "ranges", "ref", "size", "source_id")

    def __init__(
        self,
        path: str,
        size: int | None,
        source_id: str,
        expect: dict[str, str] | None = None,
        ranges: bool = True,
        ref: Any = None,
    ) -> None:
        self.path = path
        self.size = size
        self.source_id = source_id
        self.expect = {k: v.lower() for k, v in (expect or {}).items()}
        self.ranges = ranges
        self.ref = ref


class Reader:
    """A streaming body: readinto(buf) fills the start of ``buf`` and returns the byte count (0 at EOF)."""

    def readinto(self, buf: memoryview) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        pass


class Source:
    kind = "?"

    def __init__(self, uri: str, revision: str | None, endpoint: str | None) -> None:
        self.uri = uri
        self.revision = revision
        self.endpoint = endpoint

    def display(self) -> str:
        return redact_url(self.uri) or ""

    def identity(self) -> dict[str, Any]:
        full = json.dumps({"kind": self.kind, "uri": self.uri, "endpoint": self.endpoint}, sort_keys=True)
        return {
            "kind": self.kind,
            "uri": self.display(),
            "endpoint": redact_url(self.endpoint),
            "digest": "sha256:" + hashlib.sha256(full.encode()).hexdigest(),
        }

    def plan(self) -> tuple[str | None, list[RemoteFile]]:  # pragma: no cover - interface
        """Return (resolved revision, files)."""
        raise NotImplementedError

    def open(self, rf: RemoteFile, start: int, end: int | None) -> Reader:  # pragma: no cover - interface
        """Open bytes [start, end) of rf (end None: to EOF)."""
        raise NotImplementedError

    def explain_mismatch(self, rf: RemoteFile, algos: list[str]) -> str | None:
        """Return a reason when a digest mismatch is not a real one (e.g. an ETag that is not an MD5)."""
        return None


# ---- HTTP(S) via urllib (proxies from the environment, redirects without leaking credentials)


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urllib.parse.urlsplit(a), urllib.parse.urlsplit(b)
    return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port)


class _RedirectHandler(urllib.request.HTTPRedirectHandler):
    """Follow redirects; carry Authorization only to the same origin (never to a CDN)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            auth = req.unredirected_hdrs.get("Authorization")
            if auth and _same_origin(req.full_url, new.full_url):
                new.add_unredirected_header("Authorization", auth)
        return new


_OPENER = urllib.request.build_opener(_RedirectHandler())


class _UrlReader(Reader):
    def __init__(self, resp: Any, what: str) -> None:
        self.resp = resp
        self.what = what

    def readinto(self, buf: memoryview) -> int:
        try:
            return int(self.resp.readinto(buf))
        except Exception as exc:
            raise _http_error(exc, self.what) from None

    def close(self) -> None:
        self.resp.close()


def _http_error(exc: BaseException, what: str) -> HydrateError:
    if isinstance(exc, HydrateError):
        return exc
    if isinstance(exc, urllib.error.HTTPError):
        code = exc.code
        detail = exc.headers.get("X-Error-Message") if exc.headers else None
        suffix = f" ({detail})" if detail else ""
        if code in (401, 403):
            return AuthError(f"{what}: HTTP {code}{suffix}: not authorized (check the token/credentials)")
        if code in (404, 410):
            return NotFoundError(f"{what}: HTTP {code}{suffix}: not found")
        if code in (408, 425, 429) or code >= 500:
            return TransientError(f"{what}: HTTP {code}{suffix}")
        return HydrateError(f"{what}: HTTP {code}{suffix}")
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        if isinstance(reason, ssl.SSLCertVerificationError):
            return HydrateError(f"{what}: TLS certificate verification failed: {reason.verify_message}")
        return TransientError(f"{what}: {reason}")
    if isinstance(exc, (OSError, ConnectionError, socket.timeout, EOFError)) or type(exc).__module__ == "http.client":
        return TransientError(f"{what}: {type(exc).__name__}: {exc}")
    return HydrateError(f"{what}: {type(exc).__name__}: {exc}")


def check_response_length(
    what: str,
    size: int | None,
    start: int,
    end: int | None,
    *,
    ranged: bool,
    content_length: Any = None,
    content_range: str | None = None,
) -> None:
    """Check a response against what was asked for: bytes [start, end) of a file of ``size`` bytes (the size the
    listing or the range probe reported). A server whose answer disagrees (another total, another range, another
    length) would make the hydrator store a truncated or padded file of the "right" size: refuse it (exit 6)."""
    if ranged and content_range:
        m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", content_range.strip())
        if not m:
            raise DigestError(f"{what}: unusable Content-Range {content_range!r} for bytes {start}-")
        first, last, total = int(m.group(1)), int(m.group(2)), m.group(3)
        if size is not None and total != "*" and int(total) != size:
            raise DigestError(
                f"{what}: size mismatch: the source listed {size} bytes, the server now says {total} "
                "(the file changed, or the server's range answers disagree); nothing of it is kept"
            )
        want_last = (end if end is not None else (size if size is not None else last + 1)) - 1
        if first != start or last != want_last:
            raise DigestError(f"{what}: asked for bytes {start}-{want_last}, the server sent {first}-{last}")
        expected = last - first + 1
    elif ranged and end is not None:
        expected = end - start  # no Content-Range (some S3-compatible servers): the length must still be right
    elif not ranged and size is not None:
        expected = size  # a whole-file answer must be the whole file
    else:
        return
    if content_length not in (None, "") and (not str(content_length).isdigit() or int(content_length) != expected):
        raise DigestError(
            f"{what}: size mismatch: expected {expected} bytes, the server announces Content-Length {content_length}; "
            "nothing of it is kept"
        )


class HttpBase(Source):
    timeout = 60.0

    def _headers(self, rf: RemoteFile | None) -> dict[str, str]:
        return {}

    def _auth(self) -> str | None:
        return None

    def _get(self, url: str, headers: dict[str, str], what: str) -> Any:
        req = urllib.request.Request(url, headers={"Accept-Encoding": "identity", **headers})
        auth = self._auth()
        if auth:
            req.add_unredirected_header("Authorization", auth)
        try:
            return _OPENER.open(req, timeout=self.timeout)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise _http_error(exc, what) from None

    def open(self, rf: RemoteFile, start: int, end: int | None) -> Reader:
        url, etag = rf.ref
        headers = self._headers(rf)
        ranged = rf.ranges and (start > 0 or (end is not None and rf.size is not None and end < rf.size))
        if ranged:
            headers["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
            if etag and not etag.startswith("W/"):
                headers["If-Range"] = etag
        what = f"{self.display()}: {rf.path}"
        resp = self._get(url, headers, what)
        try:
            encoding = resp.headers.get("Content-Encoding", "identity")
            if encoding not in ("identity", ""):
                raise HydrateError(f"{what}: server applied Content-Encoding {encoding!r}; cannot verify sizes")
            status = resp.status
            crange = resp.headers.get("Content-Range", "")
            m = re.match(r"bytes (\d+)-(\d+)/(\d+|\*)", crange)
            if ranged and status != 206 and not m:
                if start != 0:
                    raise TransientError(f"{what}: server ignored the byte range or the file changed (HTTP {status})")
                ranged = False  # server ignored Range: read the head of the full body, whose length is checked below
            elif ranged and m and int(m.group(1)) != start:
                raise TransientError(f"{what}: server answered range {crange!r} for bytes {start}-")
            elif not ranged and start > 0:
                raise HydrateError(f"{what}: cannot resume: the server does not support byte ranges")
            check_response_length(
                what,
                rf.size,
                start,
                end,
                ranged=ranged,
                content_length=resp.headers.get("Content-Length"),
                content_range=crange,
            )
        except BaseException:
            resp.close()
            raise
        return _UrlReader(resp, what)


class HttpSource(HttpBase):
    kind = "http"

    def __init__(self, uri: str, revision: str | None, endpoint: str | None) -> None:
        url, _sep, fragment = uri.partition("#")
        super().__init__(url, revision, endpoint)
        self.expect: dict[str, str] = {}
        m = re.fullmatch(r"sha256[=:]([0-9a-fA-F]{64})", fragment) if fragment else None
        if fragment and not m:
            raise UsageError(f"unsupported URL fragment #{fragment} (only #sha256=<64 hex digits>)")
        if m:
            self.expect["sha256"] = m.group(1).lower()
        parts = urllib.parse.urlsplit(url)
        self._user = urllib.parse.unquote(parts.username) if parts.username else None
        self._password = urllib.parse.unquote(parts.password) if parts.password else None
        if parts.username:
            self.uri = urllib.parse.urlunsplit(
                (parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path, parts.query, "")
            )
        elif os.environ.get(HTTP_USERNAME_ENV):
            self._user = os.environ[HTTP_USERNAME_ENV]
            self._password = os.environ.get(HTTP_PASSWORD_ENV, "")
        # The URL requests go to: --source, or the full URL (a presigned one) from a Secret. --source stays the
        # identity (a new signature is not a new source) and is all that is ever shown.
        self.fetch_url = self.uri
        secret_url = os.environ.get(SOURCE_URL_ENV)
        if secret_url:
            full = urllib.parse.urlsplit(secret_url.strip())
            if (full.scheme, full.hostname, full.port, full.path) != (
                parts.scheme,
                parts.hostname,
                parts.port,
                parts.path,
            ):
                raise UsageError(
                    f"${SOURCE_URL_ENV} (from the cache's url_secret) does not point at {self.display()}: scheme, "
                    "host and path must match --source"
                )
            self.fetch_url = secret_url.strip()
        name = urllib.parse.unquote(parts.path.rstrip("/").rsplit("/", 1)[-1]) if parts.path else ""
        if not name or parts.path.endswith("/"):
            raise UsageError(
                f"{self.display()}: the URL must name a single file (directory listings are not supported)"
            )
        self.name = safe_relpath(name, "URL")

    def identity(self) -> dict[str, Any]:
        ident = super().identity()
        if self.expect:
            ident["sha256"] = self.expect["sha256"]
        return ident

    def _auth(self) -> str | None:
        if self._user is None:
            return None
        token = base64.b64encode(f"{self._user}:{self._password or ''}".encode()).decode()
        return f"Basic {token}"

    def plan(self) -> tuple[str | None, list[RemoteFile]]:
        what = self.display()
        resp = self._get(self.fetch_url, {"Range": "bytes=0-0"}, what)
        try:
            headers = resp.headers
            crange = headers.get("Content-Range", "")
            m = re.match(r"bytes \d+-\d+/(\d+)", crange)
            if resp.status == 206 and m:
                size: int | None = int(m.group(1))
                ranges = True
            else:
                length = headers.get("Content-Length")
                size = int(length) if length and length.isdigit() else None
                ranges = False
        finally:
            resp.close()
        etag = headers.get("ETag")
        modified = headers.get("Last-Modified")
        if etag:
            source_id = f"etag:{etag}"
        elif modified:
            source_id = f"last-modified:{modified}:{size}"
        else:
            source_id = f"size:{size}"
        resolved = etag or modified
        rf = RemoteFile(self.name, size, source_id, dict(self.expect), ranges=ranges, ref=(self.fetch_url, etag))
        return resolved, [rf]


# ---- Hugging Face (listing through huggingface_hub's HfApi, bytes streamed here: no cache, no symlinks)

_HF_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}


class HfSource(HttpBase):
    kind = "hf"

    def __init__(self, uri: str, revision: str | None, endpoint: str | None) -> None:
        super().__init__(uri, revision, endpoint)
        rest = uri[len("hf://") :].strip("/")
        parts = rest.split("/")
        repo_type = "model"
        if parts and parts[0] in _HF_TYPES and len(parts) == 3:
            repo_type = _HF_TYPES[parts[0]]
            parts = parts[1:]
        if len(parts) != 2 or not all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", p) for p in parts):
            raise UsageError(f"invalid Hugging Face URI {uri!r} (expected hf://ORG/REPO or hf://datasets/ORG/REPO)")
        self.repo_id = "/".join(parts)
        self.repo_type = repo_type
        self.uri = "hf://" + ("" if repo_type == "model" else repo_type + "s/") + self.repo_id
        self._headers_cache: dict[str, str] | None = None
        self._auth_header: str | None = None

    def _hf(self) -> Any:
        # a hydration Job sends no telemetry (huggingface_hub would also fetch an agent registry from the hub)
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        try:
            import huggingface_hub
        except ImportError:
            raise HydrateError("hf:// sources need the huggingface_hub package (pip install huggingface_hub)") from None
        return huggingface_hub

    def _headers(self, rf: RemoteFile | None) -> dict[str, str]:
        if self._headers_cache is None:
            from huggingface_hub.utils import build_hf_headers

            headers = dict(build_hf_headers(library_name=NAME, library_version=VERSION))
            self._auth_header = headers.pop("authorization", None) or headers.pop("Authorization", None)
            self._headers_cache = headers
        return dict(self._headers_cache)

    def _auth(self) -> str | None:
        self._headers(None)
        return self._auth_header

    def _map_hf_error(self, exc: BaseException, what: str) -> HydrateError:
        from huggingface_hub import errors as hf_errors

        if isinstance(exc, hf_errors.GatedRepoError):
            return AuthError(f"{what}: gated repository: accept its conditions and use a token with access")
        if isinstance(exc, hf_errors.RepositoryNotFoundError):
            return NotFoundError(f"{what}: repository not found (or private and the token has no access)")
        if isinstance(exc, hf_errors.RevisionNotFoundError):
            return NotFoundError(f"{what}: revision {self.revision!r} not found")
        if isinstance(exc, hf_errors.HfHubHTTPError):
            status = getattr(getattr(exc, "response", None), "status_code", None)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if status in (401, 403):
                return AuthError(f"{what}: HTTP {status}: not authorized (check HF_TOKEN)")
            if status == 404:
                return NotFoundError(f"{what}: {first}")
            if status is None or status in (408, 429) or status >= 500:
                return TransientError(f"{what}: {first}")
            return HydrateError(f"{what}: {first}")
        return _http_error(exc, what)

    def plan(self) -> tuple[str | None, list[RemoteFile]]:
        hf = self._hf()
        from huggingface_hub import RepoFile

        api = hf.HfApi(endpoint=self.endpoint or None, library_name=NAME, library_version=VERSION)
        revision = self.revision or "main"
        what = f"{self.display()}@{revision}"
        try:
            info = api.repo_info(self.repo_id, repo_type=self.repo_type, revision=revision)
            sha = getattr(info, "sha", None)
            if not sha:
                raise HydrateError(f"{what}: the hub did not return a commit sha for the revision")
            entries = list(api.list_repo_tree(self.repo_id, repo_type=self.repo_type, revision=sha, recursive=True))
        except HydrateError:
            raise
        except Exception as exc:
            raise self._map_hf_error(exc, what) from None
        files = []
        for entry in entries:
            if not isinstance(entry, RepoFile):
                continue
            lfs = entry.lfs
            if lfs is not None:
                size = int(lfs.size)
                expect = {"sha256": lfs.sha256}
                source_id = f"sha256:{lfs.sha256}"
            else:
                size = int(entry.size)
                expect = {"git-sha1": entry.blob_id}
                source_id = f"git:{entry.blob_id}"
            url = hf.hf_hub_url(self.repo_id, entry.path, repo_type=self.repo_type, revision=sha, endpoint=api.endpoint)
            files.append(RemoteFile(entry.path, size, source_id, expect, ranges=True, ref=(url, None)))
        self._headers(None)  # build the request headers once, before the workers start
        return sha, files


# ---- S3-compatible object stores (boto3)


def _s3_error(exc: BaseException, what: str) -> HydrateError:
    if isinstance(exc, HydrateError):
        return exc
    try:
        from botocore import exceptions as bx
    except ImportError:  # pragma: no cover
        return _http_error(exc, what)
    if isinstance(exc, bx.ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        message = err.get("Message") or code
        auth_codes = {
            "AccessDenied",
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "ExpiredToken",
            "InvalidToken",
            "TokenRefreshRequired",
            "AllAccessDisabled",
            "AccountProblem",
            "403",
        }
        if code in auth_codes or status in (401, 403):
            return AuthError(f"{what}: {code}: {message} (check the S3 credentials)")
        if code in ("NoSuchBucket", "NoSuchKey", "NotFound", "404") or status == 404:
            return NotFoundError(f"{what}: {code}: {message}")
        if code in ("PreconditionFailed", "412") or status == 412:
            return TransientError(f"{what}: the object changed during hydration")
        if code in ("SlowDown", "RequestTimeout", "Throttling", "ThrottlingException", "ServiceUnavailable") or (
            status and (status >= 500 or status == 429)
        ):
            return TransientError(f"{what}: {code}: {message}")
        return HydrateError(f"{what}: {code}: {message}")
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        return AuthError(f"{what}: {exc}")
    if isinstance(exc, bx.ParamValidationError):
        return UsageError(f"{what}: {exc}")
    if isinstance(exc, bx.BotoCoreError):
        return TransientError(f"{what}: {type(exc).__name__}: {exc}")
    return _http_error(exc, what)


class _S3Reader(Reader):
    """The body of a GetObject. When botocore's stream is a plain (not content-decoded) urllib3 response over
    http.client, bytes are read straight into the caller's buffer (one copy, no allocation per block); the length is
    checked by the caller against the requested range either way."""

    def __init__(self, body: Any, what: str) -> None:
        self.body = body
        self.what = what
        raw = getattr(body, "_raw_stream", None)
        fp = getattr(raw, "_fp", None)
        plain = raw is not None and not getattr(raw, "_decoder", None) and not getattr(raw, "decode_content", True)
        self.fast = fp if plain and callable(getattr(fp, "readinto", None)) else None

    def readinto(self, buf: memoryview) -> int:
        try:
            if self.fast is not None:
                return int(self.fast.readinto(buf))
            data = self.body.read(len(buf))
        except HydrateError:
            raise
        except Exception as exc:
            raise _s3_error(exc, self.what) from None
        if len(data) > len(buf):
            raise TransientError(f"{self.what}: server sent more bytes than asked for")
        buf[: len(data)] = data
        return len(data)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.body.close()


class S3Source(Source):
    kind = "s3"

    def __init__(self, uri: str, revision: str | None, endpoint: str | None, workers: int, verify_etag: bool) -> None:
        super().__init__(uri, revision, endpoint)
        rest = uri[len("s3://") :]
        bucket, _sep, prefix = rest.partition("/")
        if not bucket:
            raise UsageError(f"invalid S3 URI {uri!r} (expected s3://BUCKET[/PREFIX])")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")  # canonical: a trailing slash changes nothing
        self.workers = workers
        self.verify_etag = verify_etag
        self._client: Any = None
        self.anonymous = False

    def client(self) -> Any:
        if self._client is not None:
            return self._client
        try:
            import boto3
            from botocore import UNSIGNED
            from botocore.config import Config
        except ImportError:
            raise HydrateError("s3:// sources need the boto3 package (pip install boto3)") from None
        session = boto3.session.Session()
        region = session.region_name or ("us-east-1" if self.endpoint else None)
        kwargs: dict[str, Any] = {
            "max_pool_connections": self.workers + 4,
            "retries": {"max_attempts": 4, "mode": "standard"},
            "connect_timeout": 10,
            "read_timeout": 60,
        }
        if self.endpoint:
            kwargs["s3"] = {"addressing_style": "path"}
        if session.get_credentials() is None:
            kwargs["signature_version"] = UNSIGNED
            self.anonymous = True
        self._client = session.client(
            "s3", endpoint_url=self.endpoint or None, region_name=region, config=Config(**kwargs)
        )
        return self._client

    def _key_prefix(self) -> str:
        return self.prefix + "/" if self.prefix else ""

    def plan(self) -> tuple[str | None, list[RemoteFile]]:
        client = self.client()
        what = f"s3://{self.bucket}/{self.prefix}"
        base = self._key_prefix()
        objects: list[dict[str, Any]] = []
        try:
            paginator = client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=base):
                objects.extend(page.get("Contents", []))
            if not objects and self.prefix:  # maybe a single object
                try:
                    head = client.head_object(Bucket=self.bucket, Key=self.prefix)
                except Exception as exc:
                    err = _s3_error(exc, what)
                    if isinstance(err, NotFoundError):
                        raise NotFoundError(f"{what}: no objects under this prefix") from None
                    raise err from None
                objects = [{"Key": self.prefix, "Size": head["ContentLength"], "ETag": head.get("ETag", "")}]
                base = self.prefix.rsplit("/", 1)[0] + "/" if "/" in self.prefix else ""
        except HydrateError:
            raise
        except Exception as exc:
            raise _s3_error(exc, what) from None
        files: list[RemoteFile] = []
        checksummed: list[RemoteFile] = []
        for obj in objects:
            key = obj["Key"]
            if key.endswith("/"):
                if obj.get("Size", 0) == 0:
                    continue  # "directory" marker
                raise UsageError(f"unsafe path from source: key {key!r} ends with '/' but has content")
            rel = key[len(base) :]
            etag = str(obj.get("ETag", "")).strip('"')
            size = int(obj["Size"])
            expect = {}
            if self.verify_etag and re.fullmatch(r"[0-9a-fA-F]{32}", etag):
                expect["md5"] = etag
            rf = RemoteFile(rel, size, f"etag:{etag}:{size}", expect, ranges=True, ref=(key, etag))
            files.append(rf)
            if "SHA256" in (obj.get("ChecksumAlgorithm") or []) and obj.get("ChecksumType", "FULL_OBJECT") == (
                "FULL_OBJECT"
            ):
                checksummed.append(rf)
        if checksummed:
            with ThreadPoolExecutor(max(1, min(self.workers, len(checksummed)))) as pool:
                list(pool.map(self._fetch_checksum, checksummed))
        return None, files

    def _fetch_checksum(self, rf: RemoteFile) -> None:
        key = rf.ref[0]
        try:
            head = self.client().head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
        except Exception as exc:
            raise _s3_error(exc, f"s3://{self.bucket}/{key}") from None
        value = head.get("ChecksumSHA256")
        if value and "-" not in value:
            with contextlib.suppress(binascii.Error, ValueError):
                rf.expect["sha256"] = binascii.hexlify(base64.b64decode(value)).decode()
                # The object's full sha256 is the stronger check, and the manifest records a sha256 anyway: no MD5
                # pass over the bytes (one digest instead of two per byte).
                rf.expect.pop("md5", None)

    def open(self, rf: RemoteFile, start: int, end: int | None) -> Reader:
        key, etag = rf.ref
        what = f"s3://{self.bucket}/{key}"
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if end is not None:
            kwargs["Range"] = f"bytes={start}-{end - 1}"
        if etag:
            kwargs["IfMatch"] = f'"{etag}"'
        try:
            resp = self.client().get_object(**kwargs)
        except Exception as exc:
            raise _s3_error(exc, what) from None
        try:
            check_response_length(
                what,
                rf.size,
                start,
                end,
                ranged=end is not None,
                content_length=resp.get("ContentLength"),
                content_range=resp.get("ContentRange"),
            )
        except BaseException:
            resp["Body"].close()
            raise
        return _S3Reader(resp["Body"], what)

    def explain_mismatch(self, rf: RemoteFile, algos: list[str]) -> str | None:
        if algos != ["md5"]:
            return None
        try:
            head = self.client().head_object(Bucket=self.bucket, Key=rf.ref[0])
        except Exception:
            return None
        sse = str(head.get("ServerSideEncryption", ""))
        if sse.startswith("aws:kms") or head.get("SSECustomerAlgorithm"):
            return f"the ETag of an SSE-KMS/SSE-C object is not an MD5 ({sse or 'SSE-C'})"
        return None


def make_source(args: argparse.Namespace) -> Source:
    uri = args.source
    endpoint = args.endpoint_url
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    if scheme == "hf":
        return HfSource(uri, args.revision or "main", endpoint or os.environ.get("HF_ENDPOINT"))
    if scheme == "s3":
        endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        return S3Source(uri, args.revision, endpoint, args.workers, args.verify_etag)
    if scheme in ("http", "https"):
        return HttpSource(uri, args.revision, endpoint)
    raise UsageError(f"unsupported source {redact_url(uri)!r} (use hf://ORG/REPO, s3://BUCKET/PREFIX or http(s)://...)")


# --------------------------------------------------------------------------- on-disk state


class Index:
    """Append-only JSON-lines record of files this hydrator wrote and verified (last line per path wins)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._fd: int | None = None

    def load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue  # torn last line after a kill
                    if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                        if entry.get("removed"):
                            self.entries.pop(entry["path"], None)
                        else:
                            self.entries[entry["path"]] = entry
        except FileNotFoundError:
            pass

    def rewrite(self) -> None:
        tmp = f"{self.path}.tmp.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            for path in sorted(self.entries):
                f.write(json.dumps(self.entries[path], sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def append(self, entry: dict[str, Any]) -> None:
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, line)
            if entry.get("removed"):
                self.entries.pop(entry["path"], None)
            else:
                self.entries[entry["path"]] = entry

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def ensure_parent_dirs(dest: str, rel: str, created: set[str]) -> str:
    """Create the parents of rel under dest without following symlinks; return the target path."""
    cur = dest
    for part in rel.split("/")[:-1]:
        cur = os.path.join(cur, part)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            try:
                os.mkdir(cur, 0o755)
                created.add(cur)
                continue
            except FileExistsError:
                st = os.lstat(cur)
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(f"{cur} is a symlink; refusing to write through it")
        if not stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{cur} exists and is not a directory (needed for {rel})")
    target = os.path.join(dest, rel)
    try:
        st = os.lstat(target)
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{target} is a directory; cannot replace it with file {rel}")
    except FileNotFoundError:
        pass
    return target


class BlockPool:
    """READ_SIZE buffers shared by every file: a fetcher (or a read-back) takes one per block and the digest threads
    give it back once every algorithm has hashed it. Bounded: when the digests fall behind, the fetchers wait for a
    buffer (back-pressure) instead of reading ahead without limit. Taking never waits on another taker: a buffer in
    use is either being filled by its taker or queued for digest threads, which always finish with it."""

    def __init__(self, limit: int) -> None:
        self.limit = max(2, limit)
        self._free: list[memoryview] = []
        self._made = 0
        self._cond = threading.Condition()

    def take(self) -> memoryview:
        with self._cond:
            while not self._free and self._made >= self.limit:
                self._cond.wait()
            if self._free:
                return self._free.pop()
            self._made += 1
        return memoryview(bytearray(READ_SIZE))

    def give(self, buf: memoryview) -> None:
        with self._cond:
            self._free.append(buf)
            self._cond.notify()


class Digester:
    """Every digest of one file, fed its bytes in order, each algorithm hashed on a thread of its own.

    hashlib releases the GIL while it hashes a large buffer, so sha256 and MD5 run at once on two cores and beside the
    network reads and disk writes of the fetchers, instead of one after the other on the fetcher's thread (which
    then stops reading the network). Every byte fed is hashed by every algorithm: hexdigests() waits for that.
    """

    def __init__(self, algos: list[str], size: int | None, pool: BlockPool) -> None:
        self.hashers = {a: new_hasher(a, size) for a in algos}
        self._pool = pool
        self._queues: list[queue.SimpleQueue[tuple[memoryview, int] | None]] = []
        self._threads: list[threading.Thread] = []
        self._refs: dict[int, int] = {}  # id(buffer) -> algorithms that have not hashed it yet
        self._lock = threading.Lock()
        self._closed = False
        self._discard = False

    def feed(self, buf: memoryview, n: int) -> None:
        """Hash ``buf[:n]`` after everything fed before; ``buf`` (taken from the pool) goes back to it once hashed."""
        with self._lock:
            if self._closed:  # a restarted file's old attempt: nothing more to hash
                self._pool.give(buf)
                return
            if not self._threads:
                for algo, hasher in self.hashers.items():
                    q: queue.SimpleQueue[tuple[memoryview, int] | None] = queue.SimpleQueue()
                    t = threading.Thread(target=self._run, args=(hasher, q), name=f"digest-{algo}", daemon=True)
                    self._queues.append(q)
                    self._threads.append(t)
                    t.start()
            self._refs[id(buf)] = len(self._queues)
            for q in self._queues:
                q.put((buf, n))

    def _run(self, hasher: Any, q: queue.SimpleQueue[tuple[memoryview, int] | None]) -> None:
        while True:
            item = q.get()
            if item is None:
                return
            buf, n = item
            if not self._discard:
                hasher.update(buf[:n])
            with self._lock:
                self._refs[id(buf)] -= 1
                last = not self._refs[id(buf)]
                if last:
                    del self._refs[id(buf)]
            if last:
                self._pool.give(buf)

    def _join(self) -> None:
        with self._lock:
            self._closed = True
            queues, threads = self._queues, self._threads
        for q in queues:
            q.put(None)
        for t in threads:
            t.join()

    def hexdigests(self) -> dict[str, str]:
        """The digests of every byte fed (waits for the digest threads); feeding afterwards hashes nothing."""
        self._join()
        return {a: h.hexdigest() for a, h in self.hashers.items()}

    def close(self) -> None:
        """Stop hashing (what is still queued is dropped, its buffers given back)."""
        self._discard = True
        self._join()


def hash_file(path: str, algos: list[str], size: int | None = None, pool: BlockPool | None = None) -> dict[str, str]:
    """Every digest of a file on disk (read in this thread, hashed on the digest threads)."""
    pool = pool or BlockPool(BLOCKS_PER_WORKER)
    digester = Digester(algos, size, pool)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        while True:
            buf = pool.take()
            try:
                n = os.readv(fd, [buf])
            except BaseException:
                pool.give(buf)
                raise
            if not n:
                pool.give(buf)
                break
            digester.feed(buf, n)
    except BaseException:
        digester.close()
        raise
    finally:
        os.close(fd)
    return digester.hexdigests()


# --------------------------------------------------------------------------- progress


class Progress:
    def __init__(self, log: Log, total_files: int, total_bytes: int, interval: float) -> None:
        self.log = log
        self.total_files = total_files
        self.total_bytes = total_bytes
        self.interval = interval
        self.files_done = 0
        self.bytes_done = 0  # on disk and verified or downloaded (includes reused/resumed)
        self.fetched = 0  # downloaded in this run
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = time.monotonic()

    def add(self, n: int, fetched: bool = True) -> None:
        with self._lock:
            self.bytes_done += n
            if fetched:
                self.fetched += n

    def file_done(self) -> None:
        with self._lock:
            self.files_done += 1

    def line(self, rate: float) -> None:
        with self._lock:
            files, done, fetched = self.files_done, self.bytes_done, self.fetched
        total = max(self.total_bytes, done)
        unit, uname = (GiB, "GiB") if total >= GiB else (MiB, "MiB") if total >= MiB else (KiB, "KiB")
        msg = f"{files}/{self.total_files} files {done / unit:.1f}/{total / unit:.1f} {uname} {rate / MiB:.0f} MiB/s"
        if rate > 0 and total > done:
            msg += f" eta {int((total - done) / rate)}s"
        self.log.info(
            "progress",
            msg,
            files_done=files,
            files_total=self.total_files,
            bytes_done=done,
            bytes_total=total,
            bytes_fetched=fetched,
            rate_bytes_per_s=int(rate),
        )

    def _run(self) -> None:
        last_t, last_b = time.monotonic(), self.fetched
        while not self._stop.wait(self.interval):
            t = time.monotonic()
            b = self.fetched
            self.line((b - last_b) / max(t - last_t, 1e-6))
            last_t, last_b = t, b

    def start(self) -> None:
        if self.interval > 0:
            self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


# --------------------------------------------------------------------------- the per-file download state


class FileJob:
    """One file fetched into .gpufleet/partial/<id>.part as byte-range chunks, hashed in order.

    The hash cursor (hash_pos) only moves forward over bytes that are on disk and have been handed to the file's
    Digester. The worker whose block lands exactly at the cursor hands it over from memory (one pass, the
    hashing itself on the digest threads); bytes that arrived ahead of the cursor (another worker's chunk, or a
    resumed chunk) are read back from the page cache later.
    """

    def __init__(self, rf: RemoteFile, partial_dir: str, chunk: int, blocks: BlockPool) -> None:
        self.rf = rf
        self.blocks = blocks
        self.id = partial_id(rf.path)
        self.part = os.path.join(partial_dir, self.id + ".part")
        self.meta_path = os.path.join(partial_dir, self.id + ".json")
        self.journal_path = os.path.join(partial_dir, self.id + ".ranges")
        self.chunk = chunk
        if rf.size is not None and rf.ranges and rf.size > chunk:
            self.chunks: list[tuple[int, int | None]] = [(s, min(s + chunk, rf.size)) for s in range(0, rf.size, chunk)]
        else:
            self.chunks = [(0, rf.size)]
        self.multi = len(self.chunks) > 1
        self.algos = ["sha256", *sorted(a for a in rf.expect if a != "sha256")]
        self.lock = threading.Lock()
        self.attempt = 0
        self.fd: int | None = None
        self.journal_fd: int | None = None
        self.resume = False
        self.reset()

    def reset(self) -> None:
        self.done = [False] * len(self.chunks)
        self.written_end = [s for s, _e in self.chunks]  # contiguous bytes on disk from each chunk's start
        self.hash_pos = 0
        self.hash_busy = False
        self.finalized = False
        self.digester = Digester(self.algos, self.rf.size, self.blocks)
        self.length = 0  # bytes received, for single-chunk files of unknown size

    def header(self) -> dict[str, Any]:
        return {
            "path": self.rf.path,
            "size": self.rf.size,
            "source_id": self.rf.source_id,
            "chunk": self.chunk,
            "boot_id": boot_id(),
            "hydrator": VERSION,
        }

    def remove_partial(self) -> None:
        self.close()
        for p in (self.part, self.meta_path, self.journal_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)

    def close(self) -> None:
        self.digester.close()
        for attr in ("fd", "journal_fd"):
            fd = getattr(self, attr)
            if fd is not None:
                os.close(fd)
                setattr(self, attr, None)

    def prepare(self, log: Log) -> int:
        """Decide from the journal which chunks survive from an earlier run (no fd is kept). Returns their bytes."""
        self.resume = False
        if not self.multi:
            return 0
        try:
            with open(self.meta_path, encoding="utf-8") as f:
                header = json.load(f)
        except (OSError, ValueError):
            return 0
        mine = self.header()
        if not isinstance(header, dict) or any(
            header.get(k) != mine[k] for k in ("path", "size", "source_id", "chunk")
        ):
            return 0
        if header.get("boot_id") != mine["boot_id"] and not self.rf.expect:
            # unsynced page-cache data may have been lost with the machine; nothing could detect it later
            log.info("resume", f"{self.rf.path}: partial download from before a reboot; restarting it")
            return 0
        starts = {s: i for i, (s, _e) in enumerate(self.chunks)}
        try:
            with open(self.journal_path, encoding="ascii") as f:
                lines = f.read().split("\n")[:-1]  # a torn last line has no newline
            size = os.stat(self.part).st_size
        except (OSError, ValueError):
            return 0
        resumed = 0
        for line in lines:
            fields = line.split()
            if len(fields) != 2 or not all(x.isdigit() for x in fields):
                continue
            s, e = int(fields[0]), int(fields[1])
            i = starts.get(s)
            if i is not None and self.chunks[i][1] == e and e <= size and not self.done[i]:
                self.done[i] = True
                self.written_end[i] = e
                resumed += e - s
        self.resume = resumed > 0
        return resumed

    def ensure_open(self) -> int:
        """Open (or create) the partial file on first use; called with self.lock held."""
        if self.fd is None:
            if self.resume:
                self.fd = os.open(self.part, os.O_RDWR)
            else:
                for p in (self.meta_path, self.journal_path):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(p)
                self.fd = os.open(self.part, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                if self.multi:
                    write_json_atomic(self.meta_path, self.header())
            if self.multi:
                self.journal_fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self.resume = True  # from now on the partial file is ours
        return self.fd

    def restart(self) -> None:
        """Throw the partial file away (digest mismatch) and start from zero."""
        self.remove_partial()
        self.reset()
        self.resume = False


def partial_id(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()[:24]


# --------------------------------------------------------------------------- the hydrator


# ---- the Hugging Face cache layout (--layout hf)

HF_TREE_FORMAT = 1  # huggingface_hub's trees/<commit>.json format_version


def hf_repo_folder(repo_type: str, repo_id: str) -> str:
    """huggingface_hub's repo_folder_name: models--ORG--NAME (datasets--..., spaces--...)."""
    return "--".join([f"{repo_type}s", *repo_id.split("/")])


def hf_snapshot_plan(
    repo_type: str, repo_id: str, commit: str, revision: str | None, files: list[RemoteFile]
) -> tuple[dict[str, Any], list[RemoteFile]]:
    """The snapshot to link ({dir, commit, revision, files: {path: {blob, size, lfs}}}) and the distinct blobs to
    fetch, each at <dir>/blobs/<id> and verified against that id (an LFS file's sha256, else its git blob sha1:
    the ids huggingface_hub names blobs by)."""
    folder = hf_repo_folder(repo_type, repo_id)
    snapshot: dict[str, Any] = {"dir": folder, "commit": commit, "revision": revision or "main", "files": {}}
    blobs: dict[str, RemoteFile] = {}
    for rf in files:
        lfs = rf.source_id.startswith("sha256:")
        blob = rf.expect.get("sha256") if lfs else rf.expect.get("git-sha1")
        if not blob or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", blob):
            raise HydrateError(f"{rf.path}: the hub gave no blob id to name it by in the cache")
        snapshot["files"][rf.path] = {"blob": blob, "size": rf.size, "lfs": lfs}
        path = f"{folder}/blobs/{blob}"
        if path not in blobs:
            blobs[path] = RemoteFile(path, rf.size, rf.source_id, rf.expect, ranges=rf.ranges, ref=rf.ref)
    return snapshot, list(blobs.values())


def _hf_link_target(rel: str, blob: str) -> str:
    """The relative target of snapshots/<commit>/<rel>: ../../blobs/<blob>, one more ../ per directory of rel."""
    return "../" * (rel.count("/") + 2) + f"blobs/{blob}"


def hf_broken_links(dest: str, snapshot: Any) -> list[str]:
    """Snapshot entries of a manifest's hf record that are not the symlink they should be (empty when flat)."""
    if not isinstance(snapshot, dict):
        return []
    bad = []
    base = os.path.join(dest, str(snapshot.get("dir")), "snapshots", str(snapshot.get("commit")))
    for rel, info in (snapshot.get("files") or {}).items():
        link = os.path.join(base, rel)
        try:
            if os.readlink(link) != _hf_link_target(rel, str(info.get("blob"))) or not os.path.isfile(link):
                bad.append(f"{snapshot.get('dir')}/snapshots/{snapshot.get('commit')}/{rel}")
        except OSError:
            bad.append(f"{snapshot.get('dir')}/snapshots/{snapshot.get('commit')}/{rel}")
    return bad


def _write_text_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_hf_snapshot(dest: str, snapshot: dict[str, Any], old: Any, created: set[str]) -> None:
    """Link snapshots/<commit>/<path> to its blob (relative symlinks, replaced atomically), write refs/<revision>
    (unless the revision is the commit) and trees/<commit>.json; remove the links of a previous commit's snapshot.
    Runs after every blob is verified and before the manifest is written: the manifest still means "complete"."""
    folder, commit = str(snapshot["dir"]), str(snapshot["commit"])
    for rel, info in sorted(snapshot["files"].items()):
        safe_relpath(rel)
        link = ensure_parent_dirs(dest, f"{folder}/snapshots/{commit}/{rel}", created)
        target = _hf_link_target(rel, info["blob"])
        with contextlib.suppress(OSError):
            if os.readlink(link) == target:
                continue
        tmp = f"{link}.tmp-{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.symlink(target, tmp)
        try:
            os.replace(tmp, link)
        except OSError as exc:
            raise _os_error(exc, f"linking {folder}/snapshots/{commit}/{rel}") from None
    revision = str(snapshot.get("revision") or "main")
    if revision != commit:
        safe_relpath(revision, "revision")
        _write_text_atomic(ensure_parent_dirs(dest, f"{folder}/refs/{revision}", created), commit)
    tree = {
        "format_version": HF_TREE_FORMAT,
        "files": {
            rel: {"size": info["size"], "blob_id": info["blob"]}
            if not info["lfs"]
            else {"size": info["size"], "blob_id": "", "lfs_sha256": info["blob"], "lfs_size": info["size"]}
            for rel, info in sorted(snapshot["files"].items())
        },
    }
    write_json_atomic(ensure_parent_dirs(dest, f"{folder}/trees/{commit}.json", created), tree)
    if isinstance(old, dict) and old.get("commit") not in (None, commit) and old.get("dir") == folder:
        stale = os.path.join(dest, folder, "snapshots", str(old["commit"]))
        for rel in old.get("files") or {}:
            with contextlib.suppress(OSError):
                if os.path.islink(os.path.join(stale, rel)):
                    os.unlink(os.path.join(stale, rel))
        for root, _dirs, _files in sorted(os.walk(stale, topdown=False), key=lambda w: -len(w[0])):
            with contextlib.suppress(OSError):
                os.rmdir(root)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(dest, folder, "trees", f"{old['commit']}.json"))


class Hydrator:
    def __init__(self, args: argparse.Namespace, log: Log) -> None:
        self.args = args
        self.log = log
        self.dest = os.path.abspath(args.dest)
        self.state = os.path.join(self.dest, STATE_DIR)
        self.partial = os.path.join(self.state, PARTIAL)
        self.manifest_path = os.path.join(self.state, MANIFEST)
        self.index = Index(os.path.join(self.state, INDEX))
        self.include = sorted(set(args.include or []))
        self.exclude = sorted(set(args.exclude or []))
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._pending = 0
        self._cond = threading.Condition()
        self.pool: ThreadPoolExecutor | None = None
        self.streams = 1  # parallel range streams per file (set by _download)
        self.created_dirs: set[str] = set()
        self.touched_dirs: set[str] = set()
        self.results: dict[str, dict[str, Any]] = {}
        self.source: Source | None = None
        self.progress: Progress | None = None
        self._lock_fd: int | None = None
        self.verified: dict[str, str] = {}  # path -> sha256 re-hashed in this run
        self.hf: dict[str, Any] | None = None  # --layout hf: the snapshot to link (hf_snapshot_plan)
        self.blocks = BlockPool(BLOCKS_PER_WORKER * args.workers)

    # ---- entry point
    def run(self) -> int:
        started = now_iso()
        t0 = time.monotonic()
        source = make_source(self.args)
        self.source = source
        self._prepare_dest()
        self._lock()
        try:
            return self._run_locked(source, started, t0)
        finally:
            self.index.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)

    def _prepare_dest(self) -> None:
        dest = self.dest
        try:
            st = os.stat(dest)
            if not stat.S_ISDIR(st.st_mode):
                raise UsageError(f"--dest {dest} exists and is not a directory")
        except FileNotFoundError:
            try:
                os.makedirs(dest, exist_ok=True)
            except OSError as exc:
                raise _os_error(exc, f"cannot create --dest {dest}") from None
        for d in (self.state, self.partial):
            try:
                st = os.lstat(d)
                if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
                    raise UsageError(f"{d} must be a real directory (not a symlink or file)")
            except FileNotFoundError:
                try:
                    os.mkdir(d, 0o755)
                except OSError as exc:
                    raise _os_error(exc, f"cannot create {d}") from None

    def _lock(self) -> None:
        if fcntl is None:
            return
        self._lock_fd = os.open(os.path.join(self.state, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.log.info("lock", f"another hydrator is working on {self.dest}; waiting for it to finish")
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        except OSError as exc:  # e.g. NFS without lock support
            self.log.warn("lock", f"cannot lock {self.state} ({exc.strerror}); continuing without the lock")

    # ---- manifest
    def _identity(self, source: Source) -> dict[str, Any]:
        return {
            "source": source.identity(),
            "revision_requested": source.revision,
            "include": self.include,
            "exclude": self.exclude,
            "layout": self.args.layout,
        }

    def _load_manifest(self) -> dict[str, Any] | None:
        try:
            with open(self.manifest_path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            self.log.warn("manifest", "unreadable manifest; re-hydrating")
            return {}
        return data if isinstance(data, dict) else {}

    def _manifest_matches(self, m: dict[str, Any], source: Source) -> str | None:
        """None when m describes the requested hydration, else the reason it does not."""
        ident = self._identity(source)
        if m.get("format") != MANIFEST_FORMAT:
            return "manifest format changed"
        if (m.get("source") or {}).get("digest") != ident["source"]["digest"]:
            return "source changed"
        if (m.get("revision") or {}).get("requested") != ident["revision_requested"]:
            return "revision changed"
        if m.get("include", []) != self.include or m.get("exclude", []) != self.exclude:
            return "include/exclude patterns changed"
        if m.get("layout", "flat") != ident["layout"]:
            return "layout changed"
        return None

    def _check_manifest_files(self, m: dict[str, Any]) -> list[str]:
        """Paths whose on-disk state contradicts the manifest (size; sha256 with --verify)."""
        files = m.get("files")
        if not isinstance(files, list):
            return ["<manifest has no file list>"]
        bad: list[str] = []
        to_hash: list[dict[str, Any]] = []
        for entry in files:
            path = entry.get("path", "")
            try:
                safe_relpath(path, "manifest")
                st = os.lstat(os.path.join(self.dest, path))
            except (OSError, UsageError):
                bad.append(path)
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size != entry.get("size"):
                bad.append(path)
            elif self.args.verify:
                to_hash.append(entry)
        if to_hash:
            self.log.info("verify", f"verifying {len(to_hash)} files ({fmt_bytes(sum(e['size'] for e in to_hash))})")

            def check(entry: dict[str, Any]) -> str | None:
                got = hash_file(os.path.join(self.dest, entry["path"]), ["sha256"], None, self.blocks)["sha256"]
                if got != entry.get("sha256"):
                    self.log.warn("verify", f"{entry['path']}: sha256 mismatch on disk; it will be re-fetched")
                    return entry["path"]
                self.verified[entry["path"]] = got
                return None

            with ThreadPoolExecutor(self.args.workers) as pool:
                bad.extend(p for p in pool.map(check, to_hash) if p)
        bad.extend(hf_broken_links(self.dest, m.get("hf")))
        return bad

    def _remove_manifest(self) -> None:
        try:
            os.unlink(self.manifest_path)
        except FileNotFoundError:
            return
        fsync_dir(self.state)

    # ---- main flow
    def _run_locked(self, source: Source, started: str, t0: float) -> int:
        log = self.log
        args = self.args
        self.index.load()
        old = self._load_manifest()
        bad_paths: set[str] = set()
        if old is not None:
            reason = self._manifest_matches(old, source) if old else "unreadable manifest"
            if reason is None:
                bad = self._check_manifest_files(old)
                if not bad and not args.refresh:
                    log.info(
                        "noop",
                        f"already hydrated: {len(old.get('files', []))} files {fmt_bytes(old.get('bytes', 0))} "
                        f"from {source.display()} (revision {(old.get('revision') or {}).get('resolved') or '-'}); "
                        "nothing to do",
                        manifest=self.manifest_path,
                    )
                    return EXIT_OK
                if bad:
                    bad_paths = set(bad)
                    reason = f"{len(bad)} files missing, resized or corrupt (e.g. {bad[0]})"
            if reason:
                log.info("rehydrate", f"manifest does not match: {reason}; removing it before re-hydrating")
                self._remove_manifest()

        log.info(
            "start",
            f"{NAME} {VERSION}: {source.display()}"
            + (f" (endpoint {redact_url(source.endpoint)})" if source.endpoint else "")
            + f" -> {self.dest} (workers {args.workers}, chunk {fmt_bytes(args.chunk_size)})",
        )
        resolved, remote = self._retrying(source.plan)
        files = self._select(remote)
        if args.layout == "hf":
            files = self._hf_blobs(source, resolved, files)

        if old and args.refresh and not bad_paths and self._manifest_matches(old, source) is None:
            if (old.get("revision") or {}).get("resolved") == resolved and self._same_files(old, files):
                log.info("noop", f"already hydrated and up to date at revision {resolved or '-'}; nothing to do")
                return EXIT_OK
            log.info("rehydrate", f"the source moved (revision {resolved or '-'}); removing the manifest and updating")
            self._remove_manifest()

        if isinstance(source, S3Source) and source.anonymous:
            log.info("auth", "no AWS credentials found; using anonymous (unsigned) requests")

        total_bytes = sum(rf.size or 0 for rf in files)
        reused, fetch = self._reuse(files, bad_paths)
        self._remove_stale(files, old or {}, reused)
        self._clean_partials(fetch)

        self.progress = Progress(log, len(files), total_bytes, args.progress_interval)
        jobs = [FileJob(rf, self.partial, args.chunk_size, self.blocks) for rf in fetch]
        resumed = sum(job.prepare(log) for job in jobs)
        need = sum(rf.size or 0 for rf in fetch) - resumed
        self._check_space(need)
        reused_bytes = sum(self.results[p]["size"] for p in self.results)
        log.info(
            "plan",
            f"{len(files)} files {fmt_bytes(total_bytes)} at revision {resolved or '-'}: "
            f"reuse {len(reused)} files {fmt_bytes(reused_bytes)}, resume {fmt_bytes(resumed)}, "
            f"fetch {len(fetch)} files {fmt_bytes(need)}",
            revision_resolved=resolved,
            files=len(files),
            bytes=total_bytes,
            reused_files=len(reused),
            reused_bytes=reused_bytes,
            resumed_bytes=resumed,
            fetch_files=len(fetch),
            fetch_bytes=need,
        )
        self.progress.add(reused_bytes, fetched=False)
        self.progress.add(resumed, fetched=False)
        for _rf in reused:
            self.progress.file_done()

        if jobs:
            self._download(jobs)

        if self.hf is not None:
            write_hf_snapshot(self.dest, self.hf, (old or {}).get("hf"), self.created_dirs)
        self._finish_dirs()
        self._write_manifest(source, resolved, files, started, t0, len(reused), reused_bytes, resumed)
        self.index.close()
        with contextlib.suppress(OSError):
            self.index.rewrite()
        seconds = time.monotonic() - t0
        fetched = self.progress.fetched
        log.info(
            "done",
            f"done: {len(files)} files {fmt_bytes(total_bytes)}; fetched {fmt_bytes(fetched)} in {seconds:.1f} s "
            f"({fetched / MiB / max(seconds, 1e-6):.0f} MiB/s); manifest {self.manifest_path}",
            files=len(files),
            bytes=total_bytes,
            bytes_fetched=fetched,
            seconds=round(seconds, 3),
            manifest=self.manifest_path,
        )
        return EXIT_OK

    def _hf_blobs(self, source: Source, resolved: str | None, files: list[RemoteFile]) -> list[RemoteFile]:
        """--layout hf: fetch each distinct blob once, as models--ORG--NAME/blobs/<id>; remember the snapshot."""
        if not isinstance(source, HfSource):
            raise UsageError("--layout hf needs an hf:// source (the Hugging Face cache is keyed by repo and commit)")
        if not resolved:
            raise HydrateError(f"{source.display()}: the hub returned no commit for the revision")
        self.hf, blobs = hf_snapshot_plan(source.repo_type, source.repo_id, resolved, source.revision, files)
        return blobs

    def _retrying(self, fn: Callable[[], Any]) -> Any:
        """Call fn, retrying TransientError with exponential backoff and jitter."""
        failures = 0
        while True:
            try:
                return fn()
            except TransientError as exc:
                failures += 1
                if failures > self.args.retries:
                    raise TransientError(f"{exc} (gave up after {self.args.retries} retries)") from None
                delay = self._backoff(failures)
                self.log.warn("retry", f"{exc}; retry {failures}/{self.args.retries} in {delay:.1f}s")
                time.sleep(delay)

    def _backoff(self, failures: int) -> float:
        return min(30.0, self.args.retry_wait * (2 ** (failures - 1))) * (0.5 + random.random())

    def _name_limits(self) -> tuple[int, int]:
        """The destination file system's longest file name and path, in bytes (POSIX pathconf; 255 and 4096 when
        it does not say)."""
        limits = []
        for what, default in (("PC_NAME_MAX", 255), ("PC_PATH_MAX", 4096)):
            try:
                value = os.pathconf(self.dest, what)
            except (AttributeError, OSError, ValueError):
                value = -1
            limits.append(value if value > 0 else default)
        return limits[0], limits[1]

    def _check_name_lengths(self, files: list[RemoteFile]) -> None:
        """Refuse, before fetching anything, a remote path the volume cannot hold (ENAMETOOLONG otherwise, after the
        download)."""
        name_max, path_max = self._name_limits()
        room = path_max - len(os.fsencode(self.dest)) - 2
        for rf in files:
            longest = max(len(os.fsencode(part)) for part in rf.path.split("/"))
            shown = repr(rf.path if len(rf.path) <= 80 else rf.path[:77] + "...")
            if longest > name_max:
                raise UsageError(
                    f"remote file {shown}: a name of {longest} bytes is too long for the destination's file system "
                    f"(at most {name_max}); leave the file out with --exclude"
                )
            if len(os.fsencode(rf.path)) > room:
                raise UsageError(
                    f"remote file {shown}: its path is too long for the destination's file system (at most "
                    f"{path_max} bytes with {self.dest}); leave the file out with --exclude"
                )

    def _select(self, remote: list[RemoteFile]) -> list[RemoteFile]:
        files = [rf for rf in remote if selected(rf.path, self.include, self.exclude)]
        if not remote:
            raise NotFoundError(f"{self.source.display() if self.source else ''}: the source has no files")
        if not files:
            raise NotFoundError(
                f"no file of the {len(remote)} in the source matches --include {self.include} / --exclude {self.exclude}"
            )
        seen: set[str] = set()
        for rf in files:
            safe_relpath(rf.path)
            if rf.path in seen:
                raise UsageError(f"the source lists {rf.path!r} twice")
            seen.add(rf.path)
        for rf in files:  # a file that is also a directory of another file
            parts = rf.path.split("/")
            for i in range(1, len(parts)):
                if "/".join(parts[:i]) in seen:
                    raise UsageError(f"path conflict in source: {'/'.join(parts[:i])!r} is both a file and a directory")
        self._check_name_lengths(files)
        files.sort(key=lambda rf: rf.path)
        return files

    @staticmethod
    def _same_files(old: dict[str, Any], files: list[RemoteFile]) -> bool:
        have = {(e.get("path"), e.get("size"), e.get("source_id")) for e in old.get("files", [])}
        return have == {(rf.path, rf.size, rf.source_id) for rf in files}

    def _reuse(self, files: list[RemoteFile], bad_paths: set[str]) -> tuple[list[RemoteFile], list[RemoteFile]]:
        reused: list[RemoteFile] = []
        candidates: list[tuple[RemoteFile, dict[str, Any]]] = []
        fetch: list[RemoteFile] = []
        for rf in files:
            entry = self.index.entries.get(rf.path)
            ok = (
                entry is not None
                and rf.path not in bad_paths
                and entry.get("source_id") == rf.source_id
                and (rf.size is None or entry.get("size") == rf.size)
            )
            if ok:
                try:
                    st = os.lstat(os.path.join(self.dest, rf.path))
                    ok = (
                        stat.S_ISREG(st.st_mode)
                        and st.st_size == entry["size"]
                        and st.st_mtime_ns == entry.get("mtime_ns")
                        and st.st_ino == entry.get("ino")
                    )
                except OSError:
                    ok = False
            if ok:
                candidates.append((rf, entry))  # type: ignore[arg-type]
            else:
                fetch.append(rf)
        if self.args.verify and candidates:
            self.log.info("verify", f"verifying {len(candidates)} files already on disk")

            def check(item: tuple[RemoteFile, dict[str, Any]]) -> bool:
                rf, entry = item
                if self.verified.get(rf.path) == entry.get("sha256") and not set(rf.expect) - {"sha256"}:
                    return rf.expect.get("sha256", entry["sha256"]) == entry["sha256"]  # hashed a moment ago
                algos = ["sha256", *sorted(a for a in rf.expect if a != "sha256")]
                got = hash_file(os.path.join(self.dest, rf.path), algos, entry["size"], self.blocks)
                good = got["sha256"] == entry.get("sha256") and all(got[a] == v for a, v in rf.expect.items())
                if not good:
                    self.log.warn("verify", f"{rf.path}: digest mismatch on disk; it will be re-fetched")
                return good

            with ThreadPoolExecutor(self.args.workers) as pool:
                verdicts = list(pool.map(check, candidates))
            for (rf, _entry), good in zip(candidates, verdicts):  # noqa: B905 - same length by construction
                (reused if good else fetch).append(rf)
        else:
            reused.extend(rf for rf, _entry in candidates)
        for rf in reused:
            entry = self.index.entries[rf.path]
            self.results[rf.path] = {
                "path": rf.path,
                "size": entry["size"],
                "sha256": entry["sha256"],
                "source_id": rf.source_id,
            }
        fetch.sort(key=lambda rf: (-(rf.size or 0), rf.path))
        return reused, fetch

    def _remove_stale(self, files: list[RemoteFile], old: dict[str, Any], reused: list[RemoteFile]) -> None:
        """Delete files this hydrator wrote earlier that are gone from the source or about to be replaced."""
        wanted = {rf.path for rf in files}
        keep = {rf.path for rf in reused}
        ours = set(self.index.entries)
        ours.update(e.get("path") for e in old.get("files", []) if isinstance(e, dict) and e.get("path"))
        removed = 0
        dirs: set[str] = set()
        for path in sorted(ours - keep):
            try:
                safe_relpath(path, "index")
            except UsageError:
                continue
            full = os.path.join(self.dest, path)
            if path in wanted:
                # replaced by the new download: free the space now, the manifest is already gone
                try:
                    if stat.S_ISREG(os.lstat(full).st_mode) and self._inside_real_dirs(path):
                        os.unlink(full)
                except OSError:
                    pass
                continue
            try:
                st = os.lstat(full)
                if stat.S_ISREG(st.st_mode) and self._inside_real_dirs(path):
                    os.unlink(full)
                    removed += 1
                    dirs.add(os.path.dirname(full))
            except FileNotFoundError:
                pass
            except OSError as exc:
                self.log.warn("cleanup", f"cannot remove stale file {path}: {exc.strerror}")
            self.index.append({"path": path, "removed": True})
        for d in sorted(dirs, key=len, reverse=True):
            while d != self.dest and d.startswith(self.dest + os.sep):
                try:
                    os.rmdir(d)
                except OSError:
                    break
                d = os.path.dirname(d)
        if removed:
            self.log.info("cleanup", f"removed {removed} files that are no longer in the source")

    def _inside_real_dirs(self, rel: str) -> bool:
        cur = self.dest
        for part in rel.split("/")[:-1]:
            cur = os.path.join(cur, part)
            try:
                if not stat.S_ISDIR(os.lstat(cur).st_mode):
                    return False
            except OSError:
                return False
        return True

    def _clean_partials(self, fetch: list[RemoteFile]) -> None:
        keep = set()
        for rf in fetch:
            ident = partial_id(rf.path)
            keep.update({ident + ".part", ident + ".json", ident + ".ranges"})
        try:
            names = os.listdir(self.partial)
        except OSError:
            return
        for name in names:
            if name not in keep:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.partial, name))

    def _check_space(self, need: int) -> None:
        if need <= 0:
            return
        try:
            st = os.statvfs(self.dest)
        except OSError:
            return
        free = st.f_bavail * st.f_frsize
        if free < need:
            raise DiskFullError(
                f"{self.dest}: {fmt_bytes(free)} free, {fmt_bytes(need)} needed; grow the volume (the cache size)"
            )

    # ---- the parallel download
    def _submit(self, fn: Callable[..., None], *a: Any) -> None:
        with self._cond:
            self._pending += 1
        if self.pool is None:  # pragma: no cover
            raise HydrateError("internal error: no worker pool")
        self.pool.submit(self._wrap, fn, *a)

    def _wrap(self, fn: Callable[..., None], *a: Any) -> None:
        try:
            if not self.stop.is_set():
                fn(*a)
        except _Aborted:
            pass
        except BaseException as exc:  # first error wins, the others stop
            with self._cond:
                if self.error is None:
                    self.error = exc
            self.stop.set()
        finally:
            with self._cond:
                self._pending -= 1
                self._cond.notify_all()

    def _task_order(self, jobs: list[FileJob]) -> list[tuple[Callable[..., None], tuple[Any, ...]]]:
        """Interleave the chunks of a window of files so that each worker tends to stream one file in order
        (its blocks land at the hash cursor and are hashed from memory) and few files are open at once."""
        width = max(1, 2 * self.args.workers)
        queue = list(reversed(jobs))
        active: list[list[tuple[Callable[..., None], tuple[Any, ...]]]] = []
        order: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        while queue or active:
            while len(active) < width and queue:
                active.append(self._job_tasks(queue.pop()))
            nxt = []
            for tasks in active:
                order.append(tasks.pop(0))
                if tasks:
                    nxt.append(tasks)
            active = nxt
        return order

    def _job_tasks(self, job: FileJob) -> list[tuple[Callable[..., None], tuple[Any, ...]]]:
        """A file's work: its missing chunks as at most ``self.streams`` tasks, each fetching a contiguous run of
        chunks in order. One worker streaming a run in order lands every block at the hash cursor, so it is hashed
        from memory while it is still in cache; only the starts of the other runs are ever read back."""
        if job.rf.size == 0:
            return [(self._finalize, (job,))]
        tasks: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        if any(job.done):  # resumed chunks: hash them (and finalize if nothing is missing)
            tasks.append((self._advance, (job,)))
        todo = [i for i, d in enumerate(job.done) if not d]
        streams = max(1, min(len(todo), self.streams))
        per = -(-len(todo) // streams) if todo else 1
        tasks.extend((self._fetch_chunks, (job, todo[g : g + per])) for g in range(0, len(todo), per))
        return tasks

    def _fetch_chunks(self, job: FileJob, indexes: list[int]) -> None:
        for i in indexes:
            self._fetch_chunk(job, i)

    def _download(self, jobs: list[FileJob]) -> None:
        progress = self.progress
        if progress is None:  # pragma: no cover
            raise HydrateError("internal error: no progress")
        progress.start()
        # Parallel streams per file: all workers on one file, one each when there are as many files as workers.
        fetching = sum(1 for job in jobs if job.rf.size != 0 and not all(job.done))
        self.streams = max(1, -(-self.args.workers // max(1, fetching)))
        self.pool = ThreadPoolExecutor(self.args.workers, thread_name_prefix="hydrate")
        try:
            for fn, a in self._task_order(jobs):
                self._submit(fn, *a)
            with self._cond:
                while self._pending > 0:
                    self._cond.wait(0.5)
        except KeyboardInterrupt:
            self.stop.set()
            raise
        finally:
            if self.error is not None:
                self.stop.set()
            self.pool.shutdown(wait=True)
            progress.stop()
            for job in jobs:
                job.close()
        if self.error is not None:
            raise self.error
        if progress.interval > 0:
            progress.line(progress.fetched / max(time.monotonic() - progress.started, 1e-6))

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise _Aborted

    def _open_job(self, job: FileJob) -> int:
        with job.lock:
            try:
                return job.ensure_open()
            except OSError as exc:
                raise _os_error(exc, f"creating the partial file of {job.rf.path}") from None

    def _fetch_chunk(self, job: FileJob, i: int) -> None:
        source = self.source
        progress = self.progress
        if source is None or progress is None:  # pragma: no cover
            raise HydrateError("internal error")
        rf = job.rf
        fd = self._open_job(job)
        start, end = job.chunks[i]
        multi = job.multi
        attempt = job.attempt  # a digest mismatch restarts the file: this task then belongs to a finished attempt
        inline_ok = self.args.hash_mode == "ordered"
        blocks = self.blocks
        off = start
        failures = 0
        while True:
            self._check_stop()
            try:
                reader = source.open(rf, off, end)
                try:
                    while end is None or off < end:
                        want = READ_SIZE if end is None else min(READ_SIZE, end - off)
                        buf = blocks.take()
                        handed = False  # to the digest threads, which give the buffer back
                        try:
                            n = reader.readinto(buf[:want])
                            if not n:
                                break
                            try:
                                pwrite_all(fd, buf[:n], off)
                            except OSError as exc:
                                raise _os_error(exc, f"writing {rf.path}") from None
                            if not multi:
                                job.digester.feed(buf, n)
                                handed = True
                            else:
                                with job.lock:
                                    job.written_end[i] = off + n
                                    take = inline_ok and not job.hash_busy and job.hash_pos == off
                                    if take:
                                        job.hash_busy = True
                                        digester = job.digester
                                if take:
                                    digester.feed(buf, n)
                                    handed = True
                                    with job.lock:
                                        if job.attempt == attempt:
                                            job.hash_pos = off + n
                                            job.hash_busy = False
                        finally:
                            if not handed:
                                blocks.give(buf)
                        off += n
                        progress.add(n)
                        failures = 0
                        self._check_stop()
                finally:
                    reader.close()
                if end is not None and off < end:
                    raise TransientError(f"{rf.path}: connection closed after {off - start} of {end - start} bytes")
                break
            except TransientError as exc:
                failures += 1
                if failures > self.args.retries:
                    raise TransientError(f"{exc} (gave up after {self.args.retries} retries)") from None
                if off > start and not rf.ranges:  # cannot resume mid-file without Range: start over
                    progress.add(-(off - start))
                    off = start
                    job.digester.close()
                    job.digester = Digester(job.algos, rf.size, blocks)
                delay = self._backoff(failures)
                self.log.warn("retry", f"{exc}; retry {failures}/{self.args.retries} in {delay:.1f}s")
                if self.stop.wait(delay):
                    raise _Aborted from None
        if not multi:
            job.length = off
            job.done[0] = True
            self._finalize(job)
            return
        with job.lock:
            if job.attempt != attempt:
                return  # the file was restarted meanwhile: its new attempt's tasks own it now
            if job.journal_fd is not None:
                os.write(job.journal_fd, f"{start} {end}\n".encode())
            job.done[i] = True
        self._advance(job)

    def _advance(self, job: FileJob) -> None:
        """Move the hash cursor over bytes already on disk (read back from the page cache); finalize at the end."""
        with job.lock:
            if job.hash_busy or job.finalized:
                return
            job.hash_busy = True
            attempt = job.attempt
            digester = job.digester
        fd = self._open_job(job)
        final_mode = self.args.hash_mode == "final"
        size = job.rf.size or 0
        blocks = self.blocks
        while True:
            with job.lock:
                pos = job.hash_pos
                last = pos >= size
                avail = pos
                if not last and (not final_mode or all(job.done)):
                    avail = job.written_end[pos // job.chunk]
                if avail <= pos:
                    job.hash_busy = False
                    break
            while pos < avail:
                self._check_stop()
                buf = blocks.take()
                try:
                    n = os.preadv(fd, [buf[: min(READ_SIZE, avail - pos)]], pos)
                except BaseException:
                    blocks.give(buf)
                    raise
                if n <= 0:
                    blocks.give(buf)
                    raise HydrateError(f"{job.rf.path}: short read while hashing the partial file")
                digester.feed(buf, n)
                pos += n
            with job.lock:
                if job.attempt != attempt:  # pragma: no cover - only the hash holder restarts a file
                    return
                job.hash_pos = pos
        if last:
            with job.lock:
                if job.finalized or job.attempt != attempt:
                    return
                job.finalized = True
            self._finalize(job)

    def _finalize(self, job: FileJob) -> None:
        rf = job.rf
        progress = self.progress
        if progress is None:  # pragma: no cover
            raise HydrateError("internal error")
        fd = self._open_job(job)
        size = rf.size if rf.size is not None else job.length
        actual = os.fstat(fd).st_size
        digests = job.digester.hexdigests()
        problems = [a for a, v in sorted(rf.expect.items()) if digests.get(a) != v]
        if problems and actual == size:
            reason = self.source.explain_mismatch(rf, problems) if self.source else None
            if reason:
                self.log.info("verify", f"{rf.path}: not checking the source's {'/'.join(problems)}: {reason}")
                problems = []
        if actual != size:
            problems.insert(0, "size")
        if problems:
            detail = ", ".join(
                f"{a}: expected {size if a == 'size' else rf.expect[a]}, got {actual if a == 'size' else digests[a]}"
                for a in problems
            )
            progress.add(-actual, fetched=False)
            with job.lock:  # tasks of the finished attempt see the new attempt number and leave the file alone
                job.attempt += 1
                job.restart()
            if job.attempt > self.args.digest_retries:
                raise DigestError(f"{rf.path}: {detail} (after {job.attempt} attempts)")
            self.log.warn("verify", f"{rf.path}: {detail}; deleting it and fetching again ({job.attempt})")
            for fn, a in self._job_tasks(job):
                self._submit(fn, *a)
            return
        try:
            os.fsync(fd)
            job.close()
            target = ensure_parent_dirs(self.dest, rf.path, self.created_dirs)
            os.replace(job.part, target)
            st = os.lstat(target)
        except OSError as exc:
            raise _os_error(exc, f"installing {rf.path}") from None
        for p in (job.meta_path, job.journal_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
        entry = {
            "path": rf.path,
            "size": size,
            "sha256": digests["sha256"],
            "source_id": rf.source_id,
            "mtime_ns": st.st_mtime_ns,
            "ino": st.st_ino,
        }
        self.index.append(entry)
        with self._cond:
            self.results[rf.path] = {
                "path": rf.path,
                "size": size,
                "sha256": digests["sha256"],
                "source_id": rf.source_id,
            }
            self.touched_dirs.add(os.path.dirname(target))
        progress.file_done()

    def _finish_dirs(self) -> None:
        for d in sorted(self.touched_dirs | self.created_dirs | {self.dest, self.state}):
            fsync_dir(d)
        self._clean_partials([])

    def _write_manifest(
        self,
        source: Source,
        resolved: str | None,
        files: list[RemoteFile],
        started: str,
        t0: float,
        reused_files: int,
        reused_bytes: int,
        resumed: int,
    ) -> None:
        entries = [self.results[rf.path] for rf in files]
        progress = self.progress
        manifest = {
            "format": MANIFEST_FORMAT,
            "hydrator": {"name": NAME, "version": VERSION},
            "source": source.identity(),
            "revision": {"requested": source.revision, "resolved": resolved},
            "include": self.include,
            "exclude": self.exclude,
            "layout": self.args.layout,
            **({"hf": self.hf} if self.hf is not None else {}),
            "files": entries,
            "file_count": len(entries),
            "bytes": sum(e["size"] for e in entries),
            "started": started,
            "finished": now_iso(),
            "stats": {
                "seconds": round(time.monotonic() - t0, 3),
                "fetched_bytes": progress.fetched if progress else 0,
                "reused_files": reused_files,
                "reused_bytes": reused_bytes,
                "resumed_bytes": resumed,
            },
        }
        try:
            write_json_atomic(self.manifest_path, manifest)
        except OSError as exc:
            raise _os_error(exc, "writing the manifest") from None


# --------------------------------------------------------------------------- command line


def usable_cpus() -> float:
    """CPUs this process may use: its affinity mask, capped by a cgroup v2 CPU quota (a container's CPU limit)."""
    try:
        cpus: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError):
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1.0, int(quota) / int(period)))
    return cpus


def default_workers() -> int:
    """Hashing (MD5 against the source, sha256 for the manifest) keeps a worker busy: two per usable CPU, 2 to 8."""
    return max(2, min(8, int(2 * usable_cpus())))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hydrate.py",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # No abbreviations: --des would reach --dest past the collection's check of model_cache_extra_args.
        allow_abbrev=False,
    )
    p.add_argument("--source", required=True, metavar="URI", help="hf://ORG/REPO, s3://BUCKET/PREFIX or http(s)://...")
    p.add_argument("--dest", required=True, metavar="DIR", help="directory to hydrate (created if missing)")
    p.add_argument("--revision", metavar="REV", help="hf: branch, tag or commit (default main); s3/http: a label")
    p.add_argument(
        "--endpoint-url",
        metavar="URL",
        help="S3 endpoint (default $AWS_ENDPOINT_URL_S3 / $AWS_ENDPOINT_URL) or hub URL",
    )
    p.add_argument(
        "--include", action="append", metavar="GLOB", help="only files matching (repeatable; '*' crosses '/')"
    )
    p.add_argument("--exclude", action="append", metavar="GLOB", help="skip files matching (repeatable)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="parallel requests (default: 2 per usable CPU, at least 2 and at most 8: every byte is hashed twice, "
        "so more threads than that only take turns)",
    )
    p.add_argument(
        "--chunk-size",
        type=parse_size,
        default=DEFAULT_CHUNK,
        metavar="SIZE",
        help="bytes per ranged request; larger files are fetched as parallel ranges (default 32M)",
    )
    p.add_argument("--verify", action="store_true", help="re-hash every file already on disk instead of trusting sizes")
    p.add_argument(
        "--layout",
        choices=["flat", "hf"],
        default="flat",
        help="flat: the files at their paths; hf: a Hugging Face hub cache (blobs, snapshots, refs; hf:// only)",
    )
    p.add_argument(
        "--refresh",
        action="store_true",
        help="even when the manifest matches, ask the source whether the revision moved (hf branches) and update",
    )
    p.add_argument(
        "--no-verify-etag",
        dest="verify_etag",
        action="store_false",
        help="s3: do not check single-part MD5 ETags (saves an MD5 pass; sizes and sha256 are still recorded)",
    )
    p.add_argument("--retries", type=int, default=5, metavar="N", help="retries per request on network errors (5)")
    p.add_argument("--retry-wait", type=float, default=1.0, metavar="S", help="first backoff delay in seconds (1.0)")
    p.add_argument(
        "--digest-retries", type=int, default=2, metavar="N", help="re-fetches of a file whose digest is wrong (2)"
    )
    p.add_argument("--log-format", choices=("text", "json"), default="text", help="text lines or JSON lines")
    p.add_argument("--progress-interval", type=float, default=5.0, metavar="S", help="seconds between progress lines")
    p.add_argument(
        "--hash-mode",
        choices=("ordered", "final"),
        default="ordered",
        help="hash ranged files chunk by chunk in order while downloading (default), or after the last chunk",
    )
    p.add_argument("--version", action="version", version=f"{NAME} {VERSION}")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.workers is None:
        args.workers = default_workers()
    if args.workers < 1 or args.retries < 0 or args.digest_retries < 0:
        parser.error("--workers must be >= 1 and --retries/--digest-retries >= 0")
    if args.layout == "hf" and not args.source.startswith("hf://"):
        parser.error("--layout hf needs an hf:// source (the Hugging Face cache is keyed by repo and commit)")
    log = Log(args.log_format)
    try:
        return Hydrator(args, log).run()
    except HydrateError as exc:
        log.error(f"({exc.kind}, exit {exc.code}) {exc}", kind=exc.kind, exit_code=exc.code)
        return exc.code
    except KeyboardInterrupt:
        log.error("interrupted", kind="interrupted", exit_code=EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    except OSError as exc:
        err = _os_error(exc, exc.filename or "I/O error")
        log.error(f"({err.kind}, exit {err.code}) {err}", kind=err.kind, exit_code=err.code)
        return err.code


if __name__ == "__main__":
    sys.exit(main())
