# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The render directory: ``<root>/<cluster>/<namespace>/<kind>-<name>.yaml``, one Kubernetes object per file.

Writes are atomic (temporary file in the same directory, then ``os.replace``) and only happen when the content
changes, so a second run reports nothing changed. Pruning removes the files of objects that carry the owner's labels
but are no longer rendered, so a dropped replica disappears from Git too. Reading the directory back gives the
observed state that keeps placement sticky in render mode.
"""

from __future__ import annotations

import os
import tempfile
import traceback
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

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


@dataclass
class SyncResult:
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.written or self.removed)


def _require_yaml() -> None:
    if not HAS_YAML:
        raise GpufleetError(f"the render directory needs PyYAML: {YAML_IMPORT_ERROR}")


def dump(obj: Mapping[str, Any]) -> str:
    """Deterministic YAML for one object (key order kept as rendered, block style)."""
    _require_yaml()
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
        if not part or "/" in part or part in (".", "..") or "\\" in part:
            raise GpufleetError(f"manifest_dir: {part!r} cannot be used as a path component")
    return f"{cluster}/{namespace}/{kind}-{name}.yaml"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _labels(obj: Any) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        return {}
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def matches(obj: Any, selector: Mapping[str, str]) -> bool:
    labels = _labels(obj)
    return all(str(labels.get(k)) == str(v) for k, v in selector.items())


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
    """
    _require_yaml()
    root = Path(root)
    if not root.is_dir():
        return
    names = sorted(clusters) if clusters is not None else sorted(p.name for p in root.iterdir() if p.is_dir())
    for cluster in names:
        cdir = root / cluster
        if not cdir.is_dir():
            continue
        prefixes = tuple(f"{k.lower()}-" for k in kinds) if kinds is not None else None
        skipped = set(skip)
        for path in sorted(cdir.glob("*/*.yaml")):
            rel = str(path.relative_to(root))
            if (prefixes is not None and not path.name.startswith(prefixes)) or rel in skipped:
                continue
            try:
                obj = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
            except (OSError, yaml.YAMLError) as exc:
                raise GpufleetError(f"manifest_dir: cannot read {path}: {exc}") from None
            if selector is None or matches(obj, selector):
                yield cluster, rel, obj


def sync(
    root: str | Path,
    cluster: str,
    objects: Iterable[Mapping[str, Any]],
    owner: Mapping[str, str] | None = None,
    *,
    prune: bool = True,
    check_mode: bool = False,
) -> SyncResult:
    """Make ``<root>/<cluster>`` hold ``objects``; prune files of ``owner``-labelled objects that are not among them.

    Everything is computed (and every object serialised) before the first write, so a bad object loses nothing.
    """
    root = Path(root)
    planned: dict[str, str] = {}
    for obj in objects:
        rel = object_relpath(cluster, obj)
        if rel in planned:
            raise GpufleetError(f"manifest_dir: two objects would be written to {rel}")
        planned[rel] = dump(obj)
    result = SyncResult()
    to_write = []
    for rel, text in planned.items():
        path = root / rel
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = None
        if current == text:
            result.unchanged += 1
        else:
            to_write.append((path, text))
            result.written.append(rel)
    to_remove = []
    if prune and owner:
        # Only files that are not being (re)written can be stale; only those are read.
        for _cluster, rel, _obj in read_objects(root, [cluster], owner, skip=planned):
            to_remove.append(root / rel)
            result.removed.append(rel)
    if not check_mode:
        for path, text in to_write:
            write_atomic(path, text)
        for path in to_remove:
            path.unlink(missing_ok=True)
            if path.parent.is_dir() and not any(path.parent.iterdir()):
                path.parent.rmdir()
    return result
