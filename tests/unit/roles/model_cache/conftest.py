"""Fixtures for the model-cache hydrator tests (servers live in hydrate_support.py)."""

from __future__ import annotations

import os
import re
import shutil
import threading
from typing import Any

import pytest
from hydrate_support import S3_KEY, S3_SECRET, BlobServer, FakeHub, S3Server, load_hydrate


@pytest.fixture(scope="session")
def hydrate() -> Any:
    return load_hydrate()


@pytest.fixture
def http_server() -> Any:
    srv = BlobServer()
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def hub() -> Any:
    srv = FakeHub()
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = S3Server(tmp_path_factory.mktemp("s3root"))
    yield server
    server.stop()


@pytest.fixture
def s3_env(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for var in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    return s3


@pytest.fixture
def bucket(s3: S3Server, request: pytest.FixtureRequest) -> str:
    """A fresh bucket per test."""
    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:50].strip("-") or "bucket"
    path = s3.root / name
    if path.exists():
        shutil.rmtree(path)
    path.mkdir()
    return name


@pytest.fixture
def hyd(hydrate: Any, capsys: pytest.CaptureFixture[str]) -> Any:
    """hyd(*args) runs the hydrator in-process and returns a Result(rc, out, err)."""
    from hydrate_support import run_inproc

    return lambda *args: run_inproc(hydrate, capsys, list(args))
