# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Large task values handed to the next tasks through a file, not a registered result (issue 26, "Scale").

At 5,000 clusters ``fleet_info``'s normalised ``fleet`` is 4.6 MB and ``fleet_placement``'s ``replicas`` 2.2 MB of
JSON. As registered results they were job events over AWX's limit (700,000 characters: AWX blanks the event) and
every task taking them as an argument templated megabytes. With ``handoff_over`` set, such a value larger than that
many characters is written once to a file in the run's private local temporary directory (Ansible's
``DEFAULT_LOCAL_TMP``: mode 0700, one per ``ansible-playbook`` process, removed when it exits) and the result carries
a *handle* in its place::

    {"gpufleet_handoff": "replicas", "path": ".../gpufleet-replicas-<sha256>.json", "sha256": "...",
     "chars": 2212345, "items": 4500}

Every action of this collection takes a handle wherever it takes the value (the action base resolves it before the
arguments are checked: :func:`resolve`), so a role passes ``"{{ result.replicas }}"`` on either way. A handle is
honoured only for a file inside that directory whose SHA-256 is the handle's: a file that changed, or a handle
naming another path, is an error, never data.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

#: The key that marks a handle (its value names what was handed off).
HANDOFF_KEY = "gpufleet_handoff"
#: A handed-off file larger than this is not read.
MAX_BYTES = 512 * 1024 * 1024
#: The roles' threshold: values larger than this many characters of JSON go through a file.
ROLE_OVER = 200_000


def is_handle(value: Any) -> bool:
    """Whether ``value`` is a handle :func:`handoff` made."""
    return isinstance(value, Mapping) and HANDOFF_KEY in value


def handoff(value: Any, what: str, directory: str | os.PathLike[str], over: int | None) -> Any:
    """``value`` itself when ``over`` is None or its JSON is at most ``over`` characters; otherwise the value is
    written to ``<directory>/gpufleet-<what>-<sha256>.json`` (content-addressed: the same value is one file) and a
    handle to it is returned."""
    if over is None:
        return value
    # Key order kept: rendered objects follow the order of the fleet they are rendered from.
    text = json.dumps(value, separators=(",", ":"), default=str)
    if len(text) <= over:
        return value
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    root = Path(directory)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = root / f"gpufleet-{what}-{digest}.json"
    if not _matches(path, digest):
        tmp = root / f".{path.name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    handle: dict[str, Any] = {HANDOFF_KEY: what, "path": str(path), "sha256": digest, "chars": len(text)}
    if isinstance(value, (list, dict)):
        handle["items"] = len(value)
    return handle


def _matches(path: Path, digest: str) -> bool:
    try:
        return hashlib.sha256(_read(path)).hexdigest() == digest
    except (OSError, GpufleetError):
        return False


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise GpufleetError(f"{path}: larger than {MAX_BYTES} bytes: not a file this collection handed off")
    return data


def load(handle: Mapping[str, Any], directory: str | os.PathLike[str], where: str = "") -> Any:
    """The value ``handle`` stands for: the file it names, which must be directly inside ``directory`` and have the
    handle's SHA-256 (anything else is an error naming ``where``)."""
    label = where or str(handle.get(HANDOFF_KEY) or "value")
    path = Path(str(handle.get("path") or ""))
    root = Path(os.path.abspath(directory))
    if not path.name or Path(os.path.abspath(path)).parent != root or not path.name.startswith("gpufleet-"):
        raise GpufleetError(
            f"{label}: a handed-off value must be a file of this run's ({root}); {str(path)!r} is not one "
            "(pass the registered result of the task that made it, in the same run)"
        )
    try:
        data = _read(path)
    except OSError as exc:
        raise GpufleetError(f"{label}: cannot read the handed-off value {path}: {exc.strerror or exc}") from None
    if hashlib.sha256(data).hexdigest() != str(handle.get("sha256") or ""):
        raise GpufleetError(f"{label}: {path} changed since it was handed off (its SHA-256 is not the handle's)")
    return json.loads(data.decode("utf-8"))


def resolve(args: Mapping[str, Any], directory: str | os.PathLike[str]) -> dict[str, Any]:
    """``args`` with every handle replaced by its value: an argument that is a handle, and a handle one level down
    (``placement.replicas`` of ``fleet_report``)."""
    out: dict[str, Any] = {}
    for key, value in args.items():
        if is_handle(value):
            out[key] = load(value, directory, key)
        elif isinstance(value, Mapping) and any(is_handle(v) for v in value.values()):
            out[key] = {k: load(v, directory, f"{key}.{k}") if is_handle(v) else v for k, v in value.items()}
        else:
            out[key] = value
    return out
