"""Pure parts of the hydrator: path safety, patterns, redaction, error mapping, the CLI contract."""

from __future__ import annotations

import errno
import glob
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hydrate_support import HYDRATE, blob, read_manifest, run_cli, sha256


@pytest.mark.parametrize(
    "path",
    ["config.json", "a/b/c.safetensors", "lost+found/x", "weird name (1).bin", "..hidden", "a/..b/c", ".gitattributes"],
)
def test_safe_paths_accepted(hydrate: Any, path: str) -> None:
    assert hydrate.safe_relpath(path) == path


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("", "empty"),
        ("../x", "escapes"),
        ("a/../../x", "escapes"),
        ("a/./b", "escapes"),
        ("a//b", "escapes"),
        ("a/", "escapes"),
        ("/etc/passwd", "absolute"),
        ("C:/x", "absolute"),
        ("..\\x", "backslash"),
        ("a\\b", "backslash"),
        ("a\nb", "control"),
        (".gpufleet/manifest.json", "reserved"),
        ("..", "escapes"),
    ],
)
def test_unsafe_paths_rejected(hydrate: Any, path: str, why: str) -> None:
    with pytest.raises(hydrate.UsageError, match=why):
        hydrate.safe_relpath(path)


@pytest.mark.parametrize(
    ("path", "include", "exclude", "expected"),
    [
        ("model.safetensors", [], [], True),
        ("model.safetensors", ["*.safetensors"], [], True),
        ("sub/model.safetensors", ["*.safetensors"], [], True),  # '*' crosses '/'
        ("config.json", ["*.safetensors"], [], False),
        ("onnx/model.onnx", [], ["onnx/"], False),  # 'dir/' means everything under it
        ("onnx/model.onnx", ["*.onnx"], ["onnx/*"], False),  # exclude wins
        ("Model.bin", ["model.bin"], [], False),  # case-sensitive
    ],
)
def test_include_exclude(hydrate: Any, path: str, include: list[str], exclude: list[str], expected: bool) -> None:
    assert hydrate.selected(path, include, exclude) is expected


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pw@host/x.bin", "https://host/x.bin"),
        ("https://host/x.bin?X-Amz-Signature=abc", "https://host/x.bin?<redacted>"),
        ("s3://bucket/prefix", "s3://bucket/prefix"),
    ],
)
def test_redact_url(hydrate: Any, url: str, shown: str) -> None:
    assert hydrate.redact_url(url) == shown


def test_parse_size(hydrate: Any) -> None:
    assert hydrate.parse_size("32M") == 32 * 2**20
    assert hydrate.parse_size("64MiB") == 64 * 2**20
    assert hydrate.parse_size("1g") == 2**30
    with pytest.raises(Exception, match="at least"):
        hydrate.parse_size("1K")
    with pytest.raises(Exception, match="invalid size"):
        hydrate.parse_size("lots")


def test_presigned_query_changes_identity_but_is_never_shown(hydrate: Any) -> None:
    a = hydrate.HttpSource("https://h/x.bin?sig=1", None, None).identity()
    b = hydrate.HttpSource("https://h/x.bin?sig=2", None, None).identity()
    assert a["uri"] == b["uri"] == "https://h/x.bin?<redacted>"
    assert a["digest"] != b["digest"]


def test_s3_client_errors_map_to_exit_codes(hydrate: Any) -> None:
    botocore = pytest.importorskip("botocore.exceptions")

    def client_error(code: str, status: int) -> Exception:
        return botocore.ClientError(
            {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject"
        )

    cases = {
        ("AccessDenied", 403): 3,
        ("InvalidAccessKeyId", 403): 3,
        ("403", 403): 3,
        ("NoSuchKey", 404): 4,
        ("NoSuchBucket", 404): 4,
        ("404", 404): 4,
        ("SlowDown", 503): 7,
        ("InternalError", 500): 7,
        ("PreconditionFailed", 412): 7,
        ("InvalidRange", 416): 1,
    }
    for (code, status), exit_code in cases.items():
        assert hydrate._s3_error(client_error(code, status), "x").code == exit_code, code
    assert hydrate._s3_error(botocore.NoCredentialsError(), "x").code == 3
    assert hydrate._s3_error(botocore.EndpointConnectionError(endpoint_url="http://x"), "x").code == 7


def test_http_errors_map_to_exit_codes(hydrate: Any) -> None:
    import urllib.error

    for status, code in {401: 3, 403: 3, 404: 4, 410: 4, 429: 7, 500: 7, 503: 7, 400: 1}.items():
        err = urllib.error.HTTPError("http://x", status, "msg", {}, None)  # type: ignore[arg-type]
        assert hydrate._http_error(err, "x").code == code, status
    assert hydrate._http_error(ConnectionResetError(), "x").code == 7


def test_help_documents_the_contract() -> None:
    res = run_cli(["--help"])
    assert res.returncode == 0
    text = res.stdout
    for needle in (
        "--source",
        "--dest",
        "--revision",
        "--endpoint-url",
        "--include",
        "--exclude",
        "--workers",
        "--verify",
    ):
        assert needle in text
    for code in ("0  ", "1  ", "2  ", "3  ", "4  ", "5  ", "6  ", "7  "):
        assert f"\n  {code}" in text, code
    for env in ("HF_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        assert env in text


def test_missing_arguments_exit_2() -> None:
    res = run_cli(["--source", "s3://b/p"])
    assert res.returncode == 2 and "--dest" in res.stderr


@pytest.mark.parametrize("arg", ["--des", "--rev", "--sou", "--endpoint", "--wor"])
def test_abbreviated_options_are_refused(arg: str) -> None:
    # The collection refuses --dest/--revision/... in model_cache_extra_args; an abbreviation must not reach them.
    res = run_cli(["--source", "s3://b/p", "--dest", "/tmp/x", arg, "v"])
    assert res.returncode == 2 and "unrecognized arguments" in res.stderr, res


def test_enametoolong_is_a_path_error(hydrate: Any) -> None:
    err = hydrate._os_error(OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG)), "installing x")
    assert isinstance(err, hydrate.UsageError) and err.code == 2
    assert "too long" in str(err)


def test_dest_that_is_a_file_exits_2(tmp_path: Path, hyd) -> None:
    (tmp_path / "f").write_text("x")
    res = hyd("--source", "https://127.0.0.1:1/x.bin", "--dest", str(tmp_path / "f"))
    assert res.rc == 2 and "not a directory" in res.err


def test_standard_library_only_at_import() -> None:
    """The file must run in any Python image: third-party packages are imported lazily, per source."""
    code = (
        "import sys, importlib.util;"
        "spec = importlib.util.spec_from_file_location('h', sys.argv[1]);"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m);"
        "bad = [n for n in ('boto3', 'botocore', 'huggingface_hub') if n in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code, str(HYDRATE)], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def _oldest_python() -> list[str]:
    """The oldest Python 3.8-3.11 interpreter on this machine (pyenv), if any."""

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"/(\d+)\.(\d+)\.", path)[0])

    found = [p for p in glob.glob("/root/.pyenv/versions/3.*/bin/python3") if (3, 8) <= version(p) < (3, 12)]
    return sorted(found, key=version)[:1]


@pytest.mark.parametrize(
    "python", _oldest_python() or [pytest.param(None, marks=pytest.mark.skip(reason="no Python < 3.12 found"))]
)
def test_hydrates_on_an_older_python(python: str, http_server: Any, tmp_path: Path) -> None:
    """Hydration images are not ours to choose: the file must work on the oldest Python found (3.8 here)."""
    data = blob(9, 300_000)
    http_server.put("/m.bin", data)
    cmd = [
        python,
        str(HYDRATE),
        "--source",
        f"{http_server.url}/m.bin",
        "--dest",
        str(tmp_path / "d"),
        "--chunk-size",
        "64K",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "d" / "m.bin").read_bytes() == data
    assert read_manifest(tmp_path / "d")["files"][0]["sha256"] == sha256(data)


def test_digester_hashes_every_byte_in_order_while_buffers_are_reused(hydrate: Any, tmp_path: Path) -> None:
    """Blocks are hashed on the digest threads while the feeder goes on: a buffer given back to the pool before
    every algorithm hashed it would be overwritten by the next block, and the digests would be wrong."""
    import hashlib
    import os

    data = os.urandom(3 * hydrate.READ_SIZE + 12345)
    pool = hydrate.BlockPool(2)  # the feeder waits for buffers: the digest threads must give each one back
    digester = hydrate.Digester(["sha256", "md5", "git-sha1"], len(data), pool)
    step = hydrate.READ_SIZE // 3
    for off in range(0, len(data), step):
        buf = pool.take()
        chunk = data[off : off + step]
        buf[: len(chunk)] = chunk
        digester.feed(buf, len(chunk))
    got = digester.hexdigests()
    git = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert got == {"sha256": hashlib.sha256(data).hexdigest(), "md5": hashlib.md5(data).hexdigest(), "git-sha1": git}
    assert pool._made <= 2 and len(pool._free) == pool._made  # every buffer came back

    path = tmp_path / "blob"
    path.write_bytes(data)
    assert hydrate.hash_file(str(path), ["md5", "sha256"]) == {k: got[k] for k in ("md5", "sha256")}


def test_a_closed_digester_drops_what_is_fed_and_gives_the_buffers_back(hydrate: Any) -> None:
    pool = hydrate.BlockPool(2)
    digester = hydrate.Digester(["sha256", "md5"], None, pool)
    digester.feed(pool.take(), 100)
    digester.close()
    digester.feed(pool.take(), 100)  # a restarted file's old attempt
    assert pool._made >= 1 and len(pool._free) == pool._made
