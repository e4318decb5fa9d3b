# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The render directory: ``<root>/<cluster>/<namespace>/<kind>-<name>.yaml``, one Kubernetes object per file.

A safe, transactional store:

* **Inside only.** Nothing below the root is ever followed through a symlink: a symlinked cluster or namespace
  directory, or a symlinked file, stops the run before anything is written (it could point outside the root, and a
  file written or pruned there would be written or deleted outside it). Files are opened with ``O_NOFOLLOW``.
* **All or nothing.** A :class:`Transaction` plans every cluster first (every object serialised, every file compared,
  every stale owned file found), then stages every new file as a temporary file beside its target, and only when all
  of them are staged switches them in (``os.replace``) and prunes. A cluster whose directory cannot be written fails
  the staging step, which removes what it staged: no cluster is changed. The switch is recorded in a journal
  (``.gpufleet/commit.json``) first, so a run killed half-way through it is rolled forward by the next run. The
  journal is untrusted input like everything in the directory (a GitOps working tree anyone with commit rights
  writes): :func:`read_journal` accepts only stage files beside their targets and ``<cluster>/<namespace>/<file>.yaml``
  paths, reached through no symlink, and refuses the whole journal otherwise.
* **One writer.** Writers hold an exclusive lock (``.gpufleet/lock``, ``flock``) for the whole transaction. A second
  run that finds the directory locked waits briefly, then fails naming the holder. :func:`tree_token` fingerprints the
  directory when a run reads it back for placement; writing with that token refuses to overwrite what another run
  wrote in between.
* Writes only happen when the content changes, so a second run reports nothing changed. Pruning removes the files of
  objects that carry the owner's labels but are no longer rendered (so a dropped replica disappears from Git too),
  and :meth:`Transaction.prune_other_clusters` those of clusters that left the inventory. Reading the directory back
  gives the observed state that keeps placement sticky in render mode.
* **One fleet's files.** With a ``fleet`` (:class:`~.contract.FleetIdentity`), only files of objects labelled
  ``gpufleet.io/fleet=<fleet>`` are pruned (and unlabelled ones the fleet adopts); a file of another fleet is never
  pruned or overwritten, and an unlabelled one nobody decided about stops the run before anything is written.
* **Ready for GitOps** (``gitops``, module_utils/render/gitops.py). Every object written gets what its GitOps tool needs to
  sync it in order (Argo CD's sync wave, the Flux layer; Namespaces are never deleted by the tool). Every namespace a
  cluster's serving or cache objects use gets a ``v1 Namespace`` file under ``<cluster>/_cluster/`` (pruned when no
  such object uses it any more), so a cluster directory applies as it is. ``_fleet`` (:data:`FLEET_DIR`) is the fleet
  directory: the GitOps generator (:meth:`Transaction.plan_fleet`) and the plan document live there; it is never a
  cluster, never read back and never pruned as one (only the owner-labelled files in its namespace directories are
  the generator's).
* **What changed.** :class:`SyncResult` counts per cluster files created, changed and removed (``+N ~M -K``) and, with
  ``diff``, holds each changed file's text before and after (Ansible's ``--diff``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import socket
import stat
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    COMPONENT_CACHE,
    COMPONENT_SERVING,
    FOREIGN,
    LABEL_COMPONENT,
    LABEL_FLEET,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    MINE,
    UNLABELLED,
    FleetIdentity,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.object_size import check_data_size
from ansible_collections.gpufleet.serving.plugins.module_utils.render.gitops import (
    decorate,
    is_workload,
    is_workload_namespace,
    namespace_object,
    parse_tool,
)

try:  # POSIX advisory lock serialising writers of one render directory
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX controllers
    fcntl = None  # type: ignore[assignment]

try:
    import yaml

    # libyaml when available: the render directory can hold thousands of files.
    _Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
        """Multi-line strings (scripts, configs) as literal blocks, so GitOps diffs stay readable."""

    def _str(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value and not any(c in value for c in "\r\t") and value == value.strip(" ") else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    HAS_YAML = True
    YAML_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - ansible-core always ships PyYAML
    HAS_YAML = False
    YAML_IMPORT_ERROR = traceback.format_exc()

CLUSTER_SCOPED_DIR = "_cluster"
#: The fleet directory: the GitOps generator and the plan document; never a cluster.
FLEET_DIR = "_fleet"
STATE_DIR = ".gpufleet"
LOCK_FILE = "lock"
JOURNAL_FILE = "commit.json"
STAGE_PREFIX = ".gpufleet-stage."
LOCK_WAIT_SECONDS = 30.0
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass
class SyncResult:
    #: Files created or changed (relative to the root); ``created`` the ones among them that did not exist.
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed_clusters: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    #: The clusters planned (and the fleet directory when its generator was), in order.
    clusters: list[str] = field(default_factory=list)
    #: Clusters that left the inventory: the files kept in their directories (not gpufleet.serving's, or another
    #: fleet's).
    left: dict[str, list[str]] = field(default_factory=dict)
    #: With ``diff``: ``{before, after, before_header, after_header}`` per file written or removed (Ansible's diff).
    diff: list[dict[str, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.written or self.removed)

    def files(self) -> dict[str, dict[str, int]]:
        """Per cluster directory (and ``_fleet``): files ``created``, ``changed`` and ``removed``."""
        out: dict[str, dict[str, int]] = {
            c: {"created": 0, "changed": 0, "removed": 0} for c in [*self.clusters, *self.removed_clusters]
        }
        created = set(self.created)
        for rel in self.written:
            entry = out.setdefault(rel.split("/", 1)[0], {"created": 0, "changed": 0, "removed": 0})
            entry["created" if rel in created else "changed"] += 1
        for rel in self.removed:
            out.setdefault(rel.split("/", 1)[0], {"created": 0, "changed": 0, "removed": 0})["removed"] += 1
        return out

    def lines(self) -> list[str]:
        """``<cluster>: +N ~M -K files`` per cluster directory (created, changed, removed), then, per cluster
        that left the inventory, the files kept there."""
        out = [
            f"{cluster}: +{n['created']} ~{n['changed']} -{n['removed']} files"
            + (" (left the inventory: its owned files are pruned)" if cluster in self.removed_clusters else "")
            for cluster, n in self.files().items()
        ]
        for cluster, kept in sorted(self.left.items()):
            shown = ", ".join(kept[:10]) + (f" and {len(kept) - 10} more" if len(kept) > 10 else "")
            out.append(
                f"{cluster}: left the inventory; {len(kept)} file(s) kept, not this fleet's or not "
                f"gpufleet.serving's: {shown}"
            )
        return out


def _require_yaml() -> None:
    if not HAS_YAML:
        raise GpufleetError(f"the render directory needs PyYAML: {YAML_IMPORT_ERROR}")


def dump(obj: Mapping[str, Any]) -> str:
    """Deterministic YAML for one object (key order kept as rendered, block style). Every file a transaction writes
    is dumped here while it is planned, before anything is written: a ConfigMap or Secret over the 1 MiB the API
    server accepts is refused here, naming it (:func:`.object_size.check_data_size`)."""
    _require_yaml()
    check_data_size((obj,), "manifest_dir")
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096, allow_unicode=True)


def object_relpath(cluster: str, obj: Mapping[str, Any]) -> str:
    """``<cluster>/<namespace>/<kind>-<name>.yaml`` (cluster-scoped objects go under ``_cluster``)."""
    try:
        kind = str(obj["kind"]).lower()
        meta = obj["metadata"]
        name = str(meta["name"])
    except (KeyError, TypeError):
        raise GpufleetError(
            f"manifest_dir: every object needs kind and metadata.name (got {dict(obj)!r:.200})"
        ) from None
    namespace = str(meta.get("namespace") or CLUSTER_SCOPED_DIR)
    for part in (cluster, namespace, kind, name):
        if not part or "/" in part or part in (".", "..") or "\\" in part or part.startswith("."):
            raise GpufleetError(f"manifest_dir: {part!r} cannot be used as a path component")
    return f"{cluster}/{namespace}/{kind}-{name}.yaml"


# --------------------------------------------------------------------------------------------------------------------
# Never through a symlink
# --------------------------------------------------------------------------------------------------------------------


def _symlink_error(root: Path, path: Path) -> GpufleetError:
    return GpufleetError(
        f"manifest_dir: {path} is a symlink; the render directory {root} never follows symlinks (a file written or "
        "pruned through it could land outside the directory). Replace it with a real directory or file; nothing was "
        "written."
    )


def check_path(root: Path, rel: str) -> None:
    """Raise when a component of ``root/rel`` below ``root`` is a symlink or a non-directory where a directory is
    needed. Missing components are fine (they will be created as real directories)."""
    path = root
    parts = rel.split("/")
    for i, part in enumerate(parts):
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise GpufleetError(f"manifest_dir: cannot inspect {path}: {exc}") from None
        if stat.S_ISLNK(st.st_mode):
            raise _symlink_error(root, path)
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise GpufleetError(f"manifest_dir: {path} is not a directory")
        if i == len(parts) - 1 and stat.S_ISDIR(st.st_mode):
            raise GpufleetError(f"manifest_dir: {path} is a directory where an object's file belongs")


def _mkdirs(root: Path, rel_dir: str) -> None:
    path = root
    for part in rel_dir.split("/"):
        path = path / part
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o755)
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise _symlink_error(root, path)


def _read_text(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise GpufleetError(
                f"manifest_dir: {path} is a symlink; the render directory never follows symlinks"
            ) from None
        raise GpufleetError(f"manifest_dir: cannot read {path}: {exc}") from None
    with os.fdopen(fd, encoding="utf-8") as handle:
        return handle.read()


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it (never through a symlink)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _stage(path, text)
    os.replace(tmp, path)


def _stage(path: Path, text: str) -> Path:
    """A temporary file beside ``path`` holding ``text``, flushed to disk; the caller renames it into place."""
    tmp = path.parent / f"{STAGE_PREFIX}{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


# --------------------------------------------------------------------------------------------------------------------
# Reading back
# --------------------------------------------------------------------------------------------------------------------


def _labels(obj: Any) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        return {}
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def matches(obj: Any, selector: Mapping[str, str]) -> bool:
    labels = _labels(obj)
    return all(str(labels.get(k)) == str(v) for k, v in selector.items())


def _entries(root: Path, directory: Path) -> list[os.DirEntry[str]]:
    """The visible entries of a directory, sorted; a symlink among them is an error (it would be followed)."""
    try:
        with os.scandir(directory) as it:
            entries = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise GpufleetError(f"manifest_dir: cannot list {directory}: {exc}") from None
    for entry in entries:
        if entry.is_symlink():
            raise _symlink_error(root, Path(entry.path))
    return entries


def cluster_dirs(root: str | Path) -> list[str]:
    """The cluster directories of the render directory (dot entries such as ``.gpufleet`` and the fleet directory
    ``_fleet`` are not clusters)."""
    root = Path(root)
    if not root.is_dir():
        return []
    return [e.name for e in _entries(root, root) if e.is_dir(follow_symlinks=False) and e.name != FLEET_DIR]


def _files(root: Path, cluster: str) -> Iterator[Path]:
    """``<cluster>/<namespace>/*.yaml`` files, never through a symlink."""
    cdir = root / cluster
    try:
        st = os.lstat(cdir)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise _symlink_error(root, cdir)
    if not stat.S_ISDIR(st.st_mode):
        return
    for ns in _entries(root, cdir):
        if not ns.is_dir(follow_symlinks=False):
            continue
        for f in _entries(root, Path(ns.path)):
            if f.name.endswith(".yaml") and f.is_file(follow_symlinks=False):
                yield Path(f.path)


def read_objects(
    root: str | Path,
    clusters: Iterable[str] | None = None,
    selector: Mapping[str, str] | None = None,
    *,
    kinds: Iterable[str] | None = None,
    skip: Iterable[str] = (),
) -> Iterator[tuple[str, str, Any]]:
    """Yield ``(cluster, relpath, object)`` for every rendered object matching ``selector`` (all when None).

    ``kinds`` limits the files read to those kinds (by file name); ``skip`` lists relative paths not to read.
    A symlink anywhere below ``root`` is an error: it is never followed.
    """
    _require_yaml()
    root = Path(root)
    if not root.is_dir():
        return
    names = sorted(clusters) if clusters is not None else cluster_dirs(root)
    prefixes = tuple(f"{k.lower()}-" for k in kinds) if kinds is not None else None
    skipped = set(skip)
    for cluster in names:
        for path in _files(root, cluster):
            rel = str(path.relative_to(root))
            if (prefixes is not None and not path.name.startswith(prefixes)) or rel in skipped:
                continue
            text = _read_text(path)
            if text is None:
                continue
            try:
                obj = yaml.load(text, Loader=_Loader)
            except yaml.YAMLError as exc:
                raise GpufleetError(f"manifest_dir: cannot read {path}: {exc}") from None
            if selector is None or matches(obj, selector):
                yield cluster, rel, obj


def tree_token(root: str | Path) -> str:
    """A fingerprint of every object file under ``root`` (path, size, modification time): it changes whenever a run
    (or a hand edit) writes, prunes or touches a file. ``""`` when it holds no object file (or does not exist)."""
    root = Path(root)
    if not root.is_dir():
        return ""
    digest = hashlib.sha256()
    count = 0
    for cluster in cluster_dirs(root):
        for path in _files(root, cluster):
            st = os.lstat(path)
            digest.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            count += 1
    return digest.hexdigest() if count else ""


# --------------------------------------------------------------------------------------------------------------------
# The lock
# --------------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def render_lock(root: str | Path, wait: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
    """Hold the render directory's exclusive writer lock; fail with the holder's identity after ``wait`` seconds."""
    root = Path(root)
    state = root / STATE_DIR
    root.mkdir(parents=True, exist_ok=True)
    _mkdirs(root, STATE_DIR)
    ignore = state / ".gitignore"
    if not ignore.exists():
        write_atomic(ignore, "# gpufleet.serving's lock and commit journal: not for Git\n*\n")
    path = state / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644)
    except OSError as exc:
        raise GpufleetError(f"manifest_dir: cannot open the lock {path}: {exc}") from None
    try:
        if fcntl is not None:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "unknown"
                        raise GpufleetError(
                            f"manifest_dir: the render directory {root} is being written by another run ({holder}); "
                            f"waited {wait:.0f}s for its lock {path}. Nothing was written: run again when it has "
                            "finished. Two runs must not write one render directory at once."
                        ) from None
                    time.sleep(0.2)
        info = f"pid {os.getpid()} (ansible-playbook pid {os.getppid()}) on {socket.gethostname()} since {_now()}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, info.encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# --------------------------------------------------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------------------------------------------------


def recover(root: str | Path) -> None:
    """Finish a switch that a killed run left half-done, before anything reads or plans the directory."""
    root = Path(os.path.abspath(root))
    if os.path.lexists(root / STATE_DIR / JOURNAL_FILE):
        with render_lock(root):
            _recover(root)


def _object_path_error(rel: Any) -> str | None:
    """Why ``rel`` is not the path of an object file below the root (``<cluster>/<namespace>/<file>.yaml``), or None.

    The journal is data from the render directory, which is a GitOps working tree: whoever can commit to it can
    write it. Only a path of exactly the shape this module writes is accepted, so nothing it names can be above the
    root, absolute, or a dot entry (``.gpufleet`` itself included)."""
    if not isinstance(rel, str):
        return f"{rel!r:.80} is not a path"
    parts = rel.split("/")
    if len(parts) != 3 or not parts[2].endswith(".yaml"):
        return f"{rel!r:.200} is not <cluster>/<namespace>/<file>.yaml"
    for part in parts:
        if not part or part in (".", "..") or part.startswith(".") or "\\" in part or "\0" in part:
            return f"{rel!r:.200} has the component {part!r:.80} (absolute, '..', or a dot entry)"
    return None


def _staged_path_error(staged: Any, target: str) -> str | None:
    """Why ``staged`` is not a stage file beside ``target`` (the only thing a journal may move into place), or None."""
    if not isinstance(staged, str):
        return f"{staged!r:.80} is not a path"
    head, _sep, name = staged.rpartition("/")
    directory, _sep, base = target.rpartition("/")
    if head != directory or not name.startswith(f"{STAGE_PREFIX}{base}.") or "\\" in name or "\0" in name:
        return f"{staged!r:.200} is not a stage file beside {target!r:.200}"
    return None


def read_journal(root: Path) -> tuple[list[tuple[str, str]], list[str]] | None:
    """The commit journal's switch (files to move into place, files to remove), or None when there is none.

    Every path is checked before anything is done: a journal that names anything but stage files and object files
    below the root, or reaches one through a symlink, is refused whole (naming it), and nothing is changed."""
    state = root / STATE_DIR
    try:
        st = os.lstat(state)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise _symlink_error(root, state)
    journal = state / JOURNAL_FILE
    if not os.path.lexists(journal):
        return None
    text = _read_text(journal)  # O_NOFOLLOW: a symlinked journal is refused

    def refuse(why: str) -> GpufleetError:
        return GpufleetError(
            f"manifest_dir: refusing the commit journal {journal}: {why}. A journal is written by this collection "
            "only while it switches files in, and names only files below the render directory; this one was edited "
            "or planted (the render directory is a Git working tree). Nothing was changed: inspect it, then delete "
            "it and run again."
        )

    try:
        plan = json.loads(text or "")
    except ValueError:
        raise refuse("it is not JSON") from None
    if not isinstance(plan, dict) or set(plan) - {"replace", "remove"}:
        raise refuse("it is not an object with 'replace' and 'remove' lists")
    replace_raw, remove_raw = plan.get("replace", []), plan.get("remove", [])
    if not isinstance(replace_raw, list) or not isinstance(remove_raw, list):
        raise refuse("'replace' and 'remove' must be lists")
    replace: list[tuple[str, str]] = []
    for item in replace_raw:
        if not isinstance(item, list) or len(item) != 2:
            raise refuse(f"a 'replace' entry is not a [staged, target] pair: {item!r:.200}")
        staged, target = item
        why = _object_path_error(target) or _staged_path_error(staged, target)
        if why:
            raise refuse(why)
        replace.append((staged, target))
    for rel in remove_raw:
        why = _object_path_error(rel)
        if why:
            raise refuse(why)
    for rel in [p for pair in replace for p in pair] + remove_raw:
        try:
            check_path(root, rel)
        except GpufleetError as exc:
            raise refuse(str(exc)) from None
    return replace, list(remove_raw)


def _recover(root: Path) -> None:
    """Roll forward a switch that a killed run left half-done (its journal is still there); drop stray stage files."""
    switch = read_journal(root)
    if switch is not None:
        replace, remove = switch
        for staged, target in replace:
            if os.path.lexists(root / staged):
                os.replace(root / staged, root / target)
        for rel in remove:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(root / rel)
        os.unlink(root / STATE_DIR / JOURNAL_FILE)
    for cluster in [*cluster_dirs(root), FLEET_DIR]:
        for ns in _entries(root, root / cluster):
            if not ns.is_dir(follow_symlinks=False):
                continue
            with os.scandir(ns.path) as it:
                for entry in it:
                    if entry.name.startswith(STAGE_PREFIX) and entry.is_file(follow_symlinks=False):
                        with contextlib.suppress(OSError):
                            os.unlink(entry.path)


class Transaction:
    """Plan the contents of several clusters of one render directory, then write them all or none.

    ``plan()`` per cluster (nothing is written), then ``commit()`` once. ``expect_token`` (from :func:`tree_token` at
    read time) makes the commit refuse to overwrite a directory another run changed in between. ``gitops``
    (``flux``, ``argocd`` or ``none``/None) decorates every object for its GitOps tool (:func:`.gitops.decorate`);
    ``diff`` keeps every changed file's text before and after (``result.diff``).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        check_mode: bool = False,
        expect_token: str | None = None,
        gitops: str | None = None,
        diff: bool = False,
    ) -> None:
        self.root = Path(os.path.abspath(root))
        self.check_mode = check_mode
        self.expect_token = expect_token
        self.gitops = parse_tool(gitops, "gitops")
        self.diff = diff
        self.result = SyncResult()
        self._write: list[tuple[str, str]] = []
        self._remove: list[str] = []
        self._planned: set[str] = set()
        #: The objects planned, by file (for the namespaces the cluster's workloads use).
        self._objects: dict[str, Mapping[str, Any]] = {}
        #: The same, per cluster (each cluster's namespaces read its own: linear in the fleet, not quadratic).
        self._cluster_objects: dict[str, dict[str, Mapping[str, Any]]] = {}
        #: ``_remove`` as a set.
        self._removing: set[str] = set()
        #: Per file: the object given, decorated, and its text (:meth:`text_of`), so each object is dumped once.
        self._texts: dict[str, tuple[Mapping[str, Any], Mapping[str, Any], str]] = {}
        if not check_mode:
            recover(self.root)

    def plan(
        self,
        cluster: str,
        objects: Iterable[Mapping[str, Any]],
        owner: Mapping[str, str] | None = None,
        *,
        prune: bool = True,
        keep: Callable[[str, Any], bool] | None = None,
        fleet: FleetIdentity | None = None,
    ) -> SyncResult:
        """Make ``<root>/<cluster>`` hold ``objects``; prune files of ``owner``-labelled objects not among them (but
        those for which ``keep(relpath, object)`` is true). With ``fleet``, only that fleet's files are pruned, and a
        file of another fleet is never overwritten (see the module docstring). When ``owner`` is the serving or the
        model cache owner, the cluster's workload Namespace files are brought up to date too."""
        if cluster == FLEET_DIR:
            raise GpufleetError(
                f"manifest_dir: {FLEET_DIR} is the fleet directory (the GitOps generator, the plan document), never a "
                "cluster: rename the inventory host"
            )
        result = self._plan(cluster, objects, owner, prune=prune, keep=keep, fleet=fleet, decorated=True)
        if _workload_owner(owner):
            self._plan_namespaces(cluster, fleet, result)
        self._merge(result)
        return result

    def text_of(self, cluster: str, obj: Mapping[str, Any]) -> tuple[str, Mapping[str, Any], str]:
        """``(relpath, decorated object, text)``: what :meth:`plan` writes for ``obj`` in ``cluster``. Remembered per
        file, so planning the same object afterwards does not dump it again."""
        rel = object_relpath(cluster, obj)
        cached = self._texts.get(rel)
        if cached is not None and cached[0] is obj:
            return rel, cached[1], cached[2]
        decorated = decorate(obj, self.gitops)
        text = dump(decorated)
        self._texts[rel] = (obj, decorated, text)
        return rel, decorated, text

    def current_objects(
        self,
        cluster: str,
        objects: Iterable[Mapping[str, Any]],
        selector: Mapping[str, str],
        kinds: Iterable[str],
    ) -> list[tuple[str, Any]]:
        """``(relpath, object)`` of every ``kinds`` file of ``cluster`` matching ``selector``, as
        :func:`read_objects` reads them; a file whose text is exactly what this run writes for one of ``objects`` is
        not parsed: it holds that object (decorated), so a fleet whose files did not change costs one read and one
        string comparison per file (at 5,000 clusters parsing them was the largest cost of a sliced render)."""
        known = {}
        for given in objects:
            rel, decorated, text = self.text_of(cluster, given)
            known[rel] = (decorated, text)
        prefixes = tuple(f"{k.lower()}-" for k in kinds)
        out: list[tuple[str, Any]] = []
        for path in _files(self.root, cluster):
            if not path.name.startswith(prefixes):
                continue
            rel = f"{cluster}/{path.parent.name}/{path.name}"
            current = _read_text(path)
            if current is None:
                continue
            mine = known.get(rel)
            obj: Any
            if mine is not None and mine[1] == current:
                obj = mine[0]
            else:
                _require_yaml()
                try:
                    obj = yaml.load(current, Loader=_Loader)
                except yaml.YAMLError as exc:
                    raise GpufleetError(f"manifest_dir: cannot read {path}: {exc}") from None
            if matches(obj, selector):
                out.append((rel, obj))
        return out

    def plan_fleet(self, objects: Iterable[Mapping[str, Any]], owner: Mapping[str, str]) -> SyncResult:
        """Make the fleet directory's namespace directories (``<root>/_fleet/<namespace>/``) hold ``objects`` (the
        GitOps generator, written as they are); prune the ``owner``-labelled files there that are not among them.
        Anything else in ``_fleet`` (the plan document) is never touched."""
        result = self._plan(FLEET_DIR, objects, owner, prune=True, keep=None, fleet=None, decorated=False)
        self._merge(result)
        return result

    def plan_fleet_files(
        self, subdir: str, files: Mapping[str, Mapping[str, Any]], owner: Mapping[str, str], fleet_name: str
    ) -> SyncResult:
        """Make ``<root>/_fleet/<subdir>/`` hold ``files`` (``{file name: object}``, written as they are: the fleet
        routing of module_utils/routing.py); prune the files there whose object carries ``owner``'s labels and
        ``gpufleet.io/fleet=<fleet_name>`` and is not among them (another fleet's files are never touched)."""
        rel_dir = f"{FLEET_DIR}/{subdir}"
        result = SyncResult(clusters=[FLEET_DIR])
        planned: dict[str, str] = {}
        for fname, obj in files.items():
            if "/" in fname or fname.startswith(".") or not fname.endswith(".yaml") or "\\" in fname:
                raise GpufleetError(f"manifest_dir: {fname!r} cannot be a file name under {rel_dir}")
            rel = f"{rel_dir}/{fname}"
            if rel in self._planned:
                raise GpufleetError(f"manifest_dir: two objects would be written to {rel}")
            planned[rel] = dump(obj)
        check_path(self.root, f"{rel_dir}/_")  # the directory itself: never a symlink
        for rel, text in planned.items():
            check_path(self.root, rel)
            current = _read_text(self.root / rel)
            if current == text:
                result.unchanged += 1
            else:
                self._add_write(result, rel, text, current)
        for entry in _entries(self.root, self.root / rel_dir):
            rel = f"{rel_dir}/{entry.name}"
            if rel in planned or not entry.name.endswith(".yaml") or not entry.is_file(follow_symlinks=False):
                continue
            obj = self._load(rel)
            if matches(obj, owner) and str(_labels(obj).get(LABEL_FLEET)) == fleet_name:
                self._add_remove(result, rel)
        self._planned.update(planned)
        self._merge(result)
        return result

    def _plan(
        self,
        cluster: str,
        objects: Iterable[Mapping[str, Any]],
        owner: Mapping[str, str] | None,
        *,
        prune: bool,
        keep: Callable[[str, Any], bool] | None,
        fleet: FleetIdentity | None,
        decorated: bool,
    ) -> SyncResult:
        planned: dict[str, str] = {}
        objs: dict[str, Mapping[str, Any]] = {}
        for obj in objects:
            if decorated:
                rel, obj, text = self.text_of(cluster, obj)
            else:
                rel, text = object_relpath(cluster, obj), dump(obj)
            if rel in planned or rel in self._planned:
                raise GpufleetError(f"manifest_dir: two objects would be written to {rel}")
            planned[rel] = text
            objs[rel] = obj
        result = SyncResult(clusters=[cluster])
        undecided: list[str] = []
        for rel, text in planned.items():
            check_path(self.root, rel)
            current = _read_text(self.root / rel)
            if current == text:
                result.unchanged += 1
            else:
                if fleet is not None and current is not None:
                    undecided += _overwrite_check(rel, current, owner or {}, fleet)
                self._add_write(result, rel, text, current)
        if prune and owner:
            # Only files that are not being (re)written can be stale; only those are read.
            found = list(read_objects(self.root, [cluster], owner, skip=planned))
            if fleet is not None:
                split = fleet.split(found, lambda item: _labels(item[2]))
                undecided += [rel for _c, rel, _o in split.undecided]
                found = split.mine
            for _cluster, rel, obj in found:
                if keep is not None and keep(rel, obj):
                    continue
                self._add_remove(result, rel)
        if fleet is not None and undecided:
            raise fleet.unlabelled_error(undecided)
        self._planned.update(planned)
        self._objects.update(objs)
        self._cluster_objects.setdefault(cluster, {}).update(objs)
        return result

    def _add_write(self, result: SyncResult, rel: str, text: str, current: str | None) -> None:
        self._write.append((rel, text))
        result.written.append(rel)
        if current is None:
            result.created.append(rel)
        if self.diff:
            result.diff.append({"before": current or "", "after": text, "before_header": rel, "after_header": rel})

    def _add_remove(self, result: SyncResult, rel: str) -> None:
        self._remove.append(rel)
        self._removing.add(rel)
        result.removed.append(rel)
        if self.diff:
            before = _read_text(self.root / rel) or ""
            result.diff.append({"before": before, "after": "", "before_header": rel, "after_header": "(removed)"})

    def _load(self, rel: str) -> Any:
        text = _read_text(self.root / rel)
        if text is None:
            return None
        try:
            return yaml.load(text, Loader=_Loader)
        except yaml.YAMLError:
            return None  # not an object of ours

    def _used_namespaces(self, cluster: str) -> set[str]:
        """The namespaces of the serving and cache objects (of any fleet) ``<root>/<cluster>`` holds once this
        transaction is committed: those it writes, and the files it neither writes nor removes."""
        used: set[str] = set()
        for obj in self._cluster_objects.get(cluster, {}).values():
            namespace = (obj.get("metadata") or {}).get("namespace")
            if namespace and is_workload(obj):
                used.add(str(namespace))
        removing = self._removing
        for ns in _entries(self.root, self.root / cluster):
            if not ns.is_dir(follow_symlinks=False) or ns.name == CLUSTER_SCOPED_DIR or ns.name in used:
                continue
            for f in _entries(self.root, Path(ns.path)):
                rel = f"{cluster}/{ns.name}/{f.name}"
                if not f.name.endswith(".yaml") or not f.is_file(follow_symlinks=False):
                    continue
                if rel in removing or rel in self._objects:
                    continue  # going away, or planned (counted above)
                if is_workload(self._load(rel)):
                    used.add(ns.name)
                    break
        return used

    def _fleets_using(self, cluster: str, namespace: str) -> set[str]:
        """The fleets (``gpufleet.io/fleet`` values, ``""`` for none) whose serving or cache objects
        ``<root>/<cluster>/<namespace>/`` holds once this transaction is committed."""
        fleets = set()
        for rel, obj in self._cluster_objects.get(cluster, {}).items():
            if rel.startswith(f"{cluster}/{namespace}/") and is_workload(obj):
                fleets.add(str(_labels(obj).get(LABEL_FLEET) or ""))
        removing = self._removing
        for f in _entries(self.root, self.root / cluster / namespace):
            rel = f"{cluster}/{namespace}/{f.name}"
            if not f.name.endswith(".yaml") or not f.is_file(follow_symlinks=False):
                continue
            if rel in removing or rel in self._objects:
                continue
            obj = self._load(rel)
            if is_workload(obj):
                fleets.add(str(_labels(obj).get(LABEL_FLEET) or ""))
        return fleets

    def _plan_namespaces(
        self, cluster: str, fleet: FleetIdentity | None, result: SyncResult, *, write: bool = True
    ) -> None:
        """Every namespace the cluster's serving and cache objects use gets a Namespace file
        (``<cluster>/_cluster/namespace-<ns>.yaml``); the fleet's own Namespace files no such object uses any more
        are pruned. A Namespace file that is not a workload one (the serving stack's, a hand-written one) is left as it
        is: the namespace is in the directory either way. Another fleet's is left too while that fleet's objects use the
        namespace, and taken over when only this fleet's do (so it goes when they go)."""
        used = self._used_namespaces(cluster)
        removing = self._removing
        name = fleet.name if fleet is not None else None

        def ours(obj: Any) -> bool:
            return is_workload_namespace(obj) and (fleet is None or fleet.owns(_labels(obj)))

        for ns in sorted(used):
            rel = f"{cluster}/{CLUSTER_SCOPED_DIR}/namespace-{ns}.yaml"
            if not write or rel in self._planned or rel in removing:
                continue
            check_path(self.root, rel)
            current = _read_text(self.root / rel)
            if current is not None and not ours(self._load(rel)):
                existing = self._load(rel)
                whose = str(_labels(existing).get(LABEL_FLEET) or "")
                if not is_workload_namespace(existing) or name is None or whose in self._fleets_using(cluster, ns):
                    continue
            obj = decorate(namespace_object(ns, name), self.gitops)
            text = dump(obj)
            self._planned.add(rel)
            self._objects[rel] = obj
            self._cluster_objects.setdefault(cluster, {})[rel] = obj
            if current == text:
                result.unchanged += 1
            else:
                self._add_write(result, rel, text, current)
        for f in _entries(self.root, self.root / cluster / CLUSTER_SCOPED_DIR):
            rel = f"{cluster}/{CLUSTER_SCOPED_DIR}/{f.name}"
            if not (f.name.startswith("namespace-") and f.name.endswith(".yaml")) or not f.is_file(
                follow_symlinks=False
            ):
                continue
            if rel in self._planned or rel in removing:
                continue
            obj = self._load(rel)
            meta = obj.get("metadata") if isinstance(obj, Mapping) else None
            if ours(obj) and isinstance(meta, Mapping) and str(meta.get("name")) not in used:
                self._add_remove(result, rel)

    def prune_other_clusters(
        self,
        keep: Iterable[str],
        owner: Mapping[str, str],
        keep_file: Callable[[str, Any], bool] | None = None,
        fleet: FleetIdentity | None = None,
    ) -> list[str]:
        """Plan pruning the ``owner``-labelled files of every cluster directory not in ``keep`` (clusters that left
        the inventory), but those for which ``keep_file(relpath, object)`` is true; other files there are kept
        (``result.left`` lists those that are not gpufleet.serving's or are another fleet's). The workload Namespace
        files of such a cluster go once no serving or cache file is left there. With ``fleet``, only that fleet's
        files (another fleet's cluster directories are not clusters that left). Returns those clusters' names."""
        keep = set(keep)
        gone = []
        result = SyncResult()
        for cluster in cluster_dirs(self.root):
            if cluster in keep:
                continue
            found = list(read_objects(self.root, [cluster], owner))
            if fleet is not None:
                split = fleet.split(found, lambda item: _labels(item[2]))
                if split.undecided:
                    raise fleet.unlabelled_error(rel for _c, rel, _o in split.undecided)
                found = split.mine
            files = [rel for _c, rel, obj in found if keep_file is None or not keep_file(rel, obj)]
            before = len(result.removed)
            for rel in files:
                self._add_remove(result, rel)
            if files or _workload_owner(owner):
                self._plan_namespaces(cluster, fleet, result, write=False)
            if len(result.removed) > before:
                gone.append(cluster)
                removing = set(self._remove)
                left = []
                for _c, rel, obj in read_objects(self.root, [cluster], None, skip=removing):
                    labels = _labels(obj)
                    if labels.get(LABEL_MANAGED_BY) != MANAGED_BY or (
                        fleet is not None and fleet.classify(labels) == FOREIGN
                    ):
                        left.append(rel)
                if left:
                    result.left[cluster] = left
        result.removed_clusters = gone
        self._merge(result)
        return gone

    def _merge(self, part: SyncResult) -> None:
        self.result.written += part.written
        self.result.removed += part.removed
        self.result.unchanged += part.unchanged
        self.result.removed_clusters += part.removed_clusters
        self.result.created += part.created
        self.result.clusters += [c for c in part.clusters if c not in self.result.clusters]
        self.result.left.update(part.left)
        self.result.diff += part.diff

    def commit(self) -> SyncResult:
        """Stage every file, then switch them all in and prune (journaled); on a staging failure nothing changes."""
        if self.check_mode or not self.result.changed:
            return self.result
        root = self.root
        with render_lock(root):
            _recover(root)
            if self.expect_token is not None and tree_token(root) != self.expect_token:
                raise GpufleetError(
                    f"manifest_dir: the render directory {root} changed since this run read it for placement (another "
                    "run or a hand edit wrote it). Nothing was written: run again to place against what is there now."
                )
            staged: list[tuple[Path, str]] = []
            try:
                for rel, text in self._write:
                    check_path(root, rel)
                    _mkdirs(root, rel.rsplit("/", 1)[0])
                    staged.append((_stage(root / rel, text), rel))
                for rel in self._remove:
                    check_path(root, rel)
                    if not os.access(root / rel.rsplit("/", 1)[0], os.W_OK):
                        raise PermissionError(errno.EACCES, "directory not writable", str(root / rel))
            except (OSError, GpufleetError) as exc:
                for tmp, _rel in staged:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                if isinstance(exc, GpufleetError):
                    raise
                raise GpufleetError(
                    f"manifest_dir: cannot write the render directory {root}: {exc}. Nothing was changed in any "
                    "cluster's directory."
                ) from None
            journal = root / STATE_DIR / JOURNAL_FILE
            write_atomic(
                journal,
                json.dumps(
                    {"replace": [[str(tmp.relative_to(root)), rel] for tmp, rel in staged], "remove": self._remove}
                ),
            )
            for tmp, rel in staged:
                os.replace(tmp, root / rel)
            for rel in self._remove:
                path = root / rel
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                for parent in (path.parent, path.parent.parent):
                    with contextlib.suppress(OSError):
                        parent.rmdir()  # only when empty
            os.unlink(journal)
        return self.result


def _workload_owner(owner: Mapping[str, str] | None) -> bool:
    """Whether ``owner`` selects serving or model cache objects (whose namespaces the writer renders)."""
    if not owner or owner.get(LABEL_MANAGED_BY) != MANAGED_BY:
        return False
    return str(owner.get(LABEL_COMPONENT)) in (COMPONENT_SERVING, COMPONENT_CACHE)


def _overwrite_check(rel: str, current: str, owner: Mapping[str, str], fleet: FleetIdentity) -> list[str]:
    """Writing over the file ``rel`` (its text ``current``) for ``fleet``: refused when it holds another fleet's object
    (or an unlabelled owned one the fleet leaves alone); ``[rel]`` when it is an unlabelled owned one nobody decided
    about (the caller stops), else nothing."""
    try:
        labels = _labels(yaml.load(current, Loader=_Loader))
    except yaml.YAMLError:
        return []  # not ours to judge: it is replaced, as before
    kind = fleet.classify(labels)
    if kind == MINE or (kind == UNLABELLED and not all(str(labels.get(k)) == str(v) for k, v in owner.items())):
        return []
    if kind == UNLABELLED and fleet.adopt_unlabelled is None:
        return [rel]
    if kind == UNLABELLED and fleet.adopt_unlabelled:
        return []
    whose = f"fleet {labels.get(LABEL_FLEET)}" if kind == FOREIGN else "another inventory (it has no fleet label)"
    raise GpufleetError(
        f"manifest_dir: {rel} holds an object of {whose}, not of fleet {fleet.name}: two fleets would write the same "
        "object. Nothing was written. Give the deployments or caches of fleets that share a cluster and a render "
        "directory different names or namespaces."
    )


def sync(
    root: str | Path,
    cluster: str,
    objects: Iterable[Mapping[str, Any]],
    owner: Mapping[str, str] | None = None,
    *,
    prune: bool = True,
    check_mode: bool = False,
    fleet: FleetIdentity | None = None,
    gitops: str | None = None,
    diff: bool = False,
) -> SyncResult:
    """Make ``<root>/<cluster>`` hold ``objects``; prune files of ``owner``-labelled objects that are not among them.

    One :class:`Transaction`: everything is computed (and every object serialised) before the first write, so a bad
    object loses nothing.
    """
    txn = Transaction(root, check_mode=check_mode, gitops=gitops, diff=diff)
    txn.plan(cluster, objects, owner, prune=prune, fleet=fleet)
    return txn.commit()
