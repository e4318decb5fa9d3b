# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The model-cache hydrator's exit codes: one table for the hydrator and for ``cache_objects``.

The hydrator (roles/model_cache/files/hydrate.py) runs alone in the hydration Job's Python, where this collection
cannot be imported; so the block between the ``BEGIN``/``END`` markers below is embedded in it verbatim (a unit test,
tests/unit/plugins/module_utils/test_hydrator_exit.py, fails when the two differ and prints the block to paste).
The hydrator exits with these codes and lists them in ``--help``; ``cache_objects`` turns the exit code of a failed
Job's pod into the cache's status message with the same table. Standard library only, no third-party import.
"""

from __future__ import annotations

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

#: Exit codes of a hydration container that the kubelet reports, not the hydrator.
KUBELET_EXIT_CODES: dict[int, str] = {
    137: "killed (SIGKILL: out of memory, or the Job's deadline)",
    143: "terminated (SIGTERM)",
}

BEGIN_MARKER = "# BEGIN gpufleet.serving hydrator exit codes"
END_MARKER = "# END gpufleet.serving hydrator exit codes"


def status_meanings() -> dict[int, str]:
    """``{exit code: meaning}`` of a failed hydration container, for the cache's status message (no 0)."""
    out = {code: status for code, (_help, status) in EXIT_TABLE.items() if code != EXIT_OK}
    out.update(KUBELET_EXIT_CODES)
    return out


def help_lines() -> list[str]:
    """The ``exit codes:`` section of ``hydrate.py --help`` (the hydrator builds the same lines from its copy)."""
    return [f"  {code:<2} {text}" for code, (text, _status) in EXIT_TABLE.items()]


def embedded_block(text: str) -> str:
    """The text from the ``BEGIN`` marker line to the ``END`` marker line (inclusive) of ``text``; ``""`` if absent."""
    start = text.find(BEGIN_MARKER)
    end = text.find(END_MARKER, start)
    if start < 0 or end < 0:
        return ""
    line_end = text.find("\n", end)
    return text[start : len(text) if line_end < 0 else line_end + 1]
