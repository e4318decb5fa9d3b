"""One exit-code table for the model-cache hydrator and cache_objects (issue 30, item 7, the part that landed): the
hydrator embeds plugins/module_utils/hydrator_exit.py's block verbatim, exits with its codes, lists them in --help, and
cache_objects explains a failed Job's exit code with the same table."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils import hydrator_exit
from ansible_collections.gpufleet.serving.plugins.module_utils.render import caches as cache_objects

REPO = Path(__file__).resolve().parents[4]
HYDRATE = REPO / "roles" / "model_cache" / "files" / "hydrate.py"
TABLE = REPO / "plugins" / "module_utils" / "hydrator_exit.py"


def load_hydrate() -> Any:
    spec = importlib.util.spec_from_file_location("gpufleet_hydrate_exit_test", HYDRATE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hydrator_embeds_the_table_verbatim():
    block = hydrator_exit.embedded_block(TABLE.read_text(encoding="utf-8"))
    assert block.startswith(hydrator_exit.BEGIN_MARKER) and "EXIT_TABLE" in block
    embedded = hydrator_exit.embedded_block(HYDRATE.read_text(encoding="utf-8"))
    assert embedded == block, (
        "roles/model_cache/files/hydrate.py's exit-code block differs from plugins/module_utils/hydrator_exit.py's; "
        f"paste this block into hydrate.py:\n{block}"
    )


def test_the_hydrator_s_errors_exit_with_the_table_s_codes():
    hydrate = load_hydrate()
    assert hydrate.EXIT_TABLE == hydrator_exit.EXIT_TABLE
    codes = {
        hydrate.HydrateError: hydrator_exit.EXIT_ERROR,
        hydrate.UsageError: hydrator_exit.EXIT_USAGE,
        hydrate.AuthError: hydrator_exit.EXIT_AUTH,
        hydrate.NotFoundError: hydrator_exit.EXIT_NOT_FOUND,
        hydrate.DiskFullError: hydrator_exit.EXIT_DISK_FULL,
        hydrate.DigestError: hydrator_exit.EXIT_DIGEST,
        hydrate.TransientError: hydrator_exit.EXIT_NETWORK,
    }
    for cls, code in codes.items():
        assert cls.code == code, cls.__name__
        assert code in hydrator_exit.EXIT_TABLE


def test_help_lists_every_code_of_the_table():
    out = subprocess.run(
        [sys.executable, str(HYDRATE), "--help"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    section = out[out.index("exit codes:") :].splitlines()[1:]
    assert section == hydrator_exit.help_lines()
    assert "  130 interrupted" in section


def test_a_usage_error_exits_with_the_table_s_usage_code():
    proc = subprocess.run(
        [sys.executable, str(HYDRATE), "--source", "ftp://example/x", "--dest", "/nonexistent/gpufleet-test"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == hydrator_exit.EXIT_USAGE, proc.stderr[-2000:]


def test_cache_objects_explains_exit_codes_with_the_same_table():
    for code, (_help, status) in hydrator_exit.EXIT_TABLE.items():
        if code == hydrator_exit.EXIT_OK:
            assert code not in cache_objects.EXIT_CODES
        else:
            assert cache_objects.EXIT_CODES[code] == status
    assert cache_objects.EXIT_CODES[137].startswith("killed (SIGKILL")
    job = {
        "metadata": {"name": "gpufleet-cache-x-1"},
        "status": {"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]},
    }
    pod = {
        "metadata": {"name": "gpufleet-cache-x-1-abc"},
        "status": {"containerStatuses": [{"name": "hydrate", "state": {"terminated": {"exitCode": 5}}}]},
    }
    status = cache_objects.job_status(job, [pod])
    assert status["status"] == "Failed"
    assert "exit code 5: disk full (the volume is too small for the model: raise size)" in status["message"]
