# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Writing the report files: ``report.json``, ``fleet.html`` and, for a large fleet, its cluster pages.

The files live in a directory that is untrusted input (in render mode ``<render_dir>/_fleet/<fleet>/``: a Git working
tree anyone with commit rights writes). So:

* every file is written atomically (:func:`.manifest_dir.write_atomic`: a temporary file created ``O_EXCL |
  O_NOFOLLOW`` beside it, then renamed), and only when its content changes;
* a symlink, or anything but a regular file, where a file goes (or a symlink where the pages' directory goes) stops
  the write before anything is written: it is never followed, read or replaced;
* a cluster page no longer needed (the fleet shrank) is removed only when it is one this collection wrote: its name is
  a page's (``clusters-NNN.html``), it is a regular file, and it carries the pages' mark (``fleet.html.GENERATOR``).
  Anything else in the pages' directory is left alone; the directory is removed when it ends up empty.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.html import (
    GENERATOR,
    PAGE_NAME,
    render_picture,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.view import FleetView
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import write_atomic

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GpufleetError(f"fleet_report: cannot inspect {path}: {exc}") from None


def check_file(path: Path) -> None:
    """Raise unless ``path`` is absent or a regular file (never a symlink: it is not followed)."""
    st = _lstat(path)
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        raise GpufleetError(
            f"fleet_report: {path} is a symlink; the report files are never written through a symlink (it could "
            "point anywhere). Remove it; nothing was written."
        )
    if not stat.S_ISREG(st.st_mode):
        raise GpufleetError(f"fleet_report: {path} is not a regular file; remove it. Nothing was written.")


def _head(path: Path, limit: int) -> bytes | None:
    """The first ``limit`` bytes of a regular file, read without following a symlink (None when it cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(limit)


def write_text(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` atomically unless it holds it already; whether it was written."""
    check_file(path)
    data = text.encode("utf-8")
    if _head(path, len(data) + 1) == data:
        return False
    write_atomic(path, text)
    return True


def _check_dir(path: Path) -> bool:
    """Whether the pages' directory exists; raise when a symlink or something else is in its place."""
    st = _lstat(path)
    if st is None:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise GpufleetError(
            f"fleet_report: {path} (the directory of the fleet picture's cluster pages) is a symlink; it is never "
            "followed. Remove it; nothing was written."
        )
    if not stat.S_ISDIR(st.st_mode):
        raise GpufleetError(
            f"fleet_report: {path} is where the fleet picture's cluster pages go, and is not a directory"
        )
    return True


def ours(path: Path) -> bool:
    """A cluster page this collection wrote: a regular file named like one, carrying the pages' mark."""
    head = _head(path, 4096) if PAGE_NAME.match(path.name) else None
    return head is not None and GENERATOR.encode() in head


def write_picture(html_file: str | Path, view: FleetView, title: str | None = None) -> dict[str, Any]:
    """Write the fleet picture (``fleet.html``) and, past ``fleet.html.SPLIT_OVER`` clusters, its cluster pages
    beside it; remove the cluster pages no longer needed. Returns ``html``, ``pages`` (per page: ``page``, relative
    to the main page, ``first``, ``last``, ``clusters``), ``written`` (files written: unchanged ones are not) and
    ``removed`` (stale pages removed)."""
    main = Path(html_file)
    picture = render_picture(view, main.name, title)
    folder = main.parent / picture.pages_dir
    # Everything is checked before anything is written.
    check_file(main)
    if picture.pages:
        exists = _check_dir(folder)
    else:  # no pages to write: a symlink or a file of that name is not ours to follow or remove, nor an error
        st = _lstat(folder)
        exists = st is not None and stat.S_ISDIR(st.st_mode)
    for name in picture.pages:
        if exists:
            check_file(folder / name)
    written: list[str] = []
    if picture.pages:
        main.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o755)
        _check_dir(folder)  # made here, or by someone between the checks: still never a symlink
        for name, text in picture.pages.items():  # the pages first: the main page's links resolve once it is there
            if write_text(folder / name, text):
                written.append(f"{picture.pages_dir}/{name}")
    if write_text(main, picture.main):
        written.append(main.name)
    removed = _remove_stale(folder, set(picture.pages)) if exists or picture.pages else []
    return {
        "html": str(main),
        "pages": picture.index,
        "written": written,
        "removed": [f"{picture.pages_dir}/{name}" for name in removed],
    }


def _remove_stale(folder: Path, keep: set[str]) -> list[str]:
    removed = []
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        if entry.name in keep or not entry.is_file(follow_symlinks=False) or not ours(Path(entry.path)):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.path)
            removed.append(entry.name)
    if not keep:
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only when empty: whatever else is there stays
    return removed


__all__ = ("check_file", "ours", "write_picture", "write_text")
