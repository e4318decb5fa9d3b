"""Cheaper verification (issue 30, item 5): an S3 object that publishes a full-object SHA-256 (x-amz-checksum-sha256)
is verified against it and gets no MD5 pass; one without keeps the single-part MD5 ETag check. Against moto's S3."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from hydrate_support import blob, read_manifest, sha256, tree

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")


@pytest.fixture(scope="module")
def moto_s3() -> Any:
    srv = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    yield f"http://{host}:{port}"
    srv.stop()


@pytest.fixture
def s3_client(moto_s3: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    return boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")


def test_a_published_sha256_replaces_the_md5_pass(
    moto_s3: str, s3_client: Any, tmp_path: Path, hydrate, hyd, monkeypatch
) -> None:
    s3_client.create_bucket(Bucket="weights")
    with_sum = blob(1, 300_000)
    without = blob(2, 200_000)
    s3_client.put_object(Bucket="weights", Key="m/with.bin", Body=with_sum, ChecksumAlgorithm="SHA256")
    s3_client.put_object(Bucket="weights", Key="m/without.bin", Body=without)
    head = s3_client.head_object(Bucket="weights", Key="m/with.bin", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(with_sum).digest()).decode()  # moto publishes it

    hashed: dict[int | None, list[str]] = {}
    real_init = hydrate.Digester.__init__

    def spy(self: Any, algos: list[str], size: int | None, pool: Any) -> None:
        hashed.setdefault(size, list(algos))
        real_init(self, algos, size, pool)

    monkeypatch.setattr(hydrate.Digester, "__init__", spy)
    dest = tmp_path / "cache"
    res = hyd("--source", "s3://weights/m", "--dest", str(dest), "--endpoint-url", moto_s3, "--progress-interval", "0")
    assert res.rc == 0, res
    assert tree(dest) == {"with.bin": with_sum, "without.bin": without}
    assert hashed[len(with_sum)] == ["sha256"]  # verified against the published sha256 alone
    assert hashed[len(without)] == ["sha256", "md5"]  # the MD5 ETag is all the source vouches for
    m = read_manifest(dest)
    assert {f["path"]: f["sha256"] for f in m["files"]} == {
        "with.bin": sha256(with_sum),
        "without.bin": sha256(without),
    }
