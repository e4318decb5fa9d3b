# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fleet's durable state: the clusters ``drain.yml`` drained or cordoned, in a file every run reads.

Drains and cordons used to be written into the inventory (``group_vars/all/gpufleet_drained.yml``). On AWX /
Automation Controller the inventory is a script AWX writes into the job's private directory, deleted when the job
ends, so a drain written there was lost. The state now lives beside the fleet's other durable files, where an AWX job
must keep them anyway (``docs/awx.md``): ``<render_dir>/_fleet/<fleet>/fleet-state.yml`` in render mode (committed
with the rendered files; one per fleet, as two inventories may share a render directory), beside the placement state
file and named after it in apply mode - the places of the plan document (``plan/document.py``). The roles add its clusters to
``gpufleet_drained_clusters`` / ``gpufleet_cordoned_clusters``.

The file is YAML with those two variables' names as keys, so it also reads as a vars file (``-e @fleet-state.yml``).
Every cluster has one state: drained (NoExecute: its replicas move away), cordoned (NoSchedule: no new replicas) or
neither (not listed). Names no longer in the inventory are dropped when it is read and when it is written.

Everything read is untrusted (a render directory is a Git working tree): the file and the directories below the
render directory are never reached through a symlink (``manifest_dir.check_path``), a file that is not a fleet state
is an error naming it, and a large file is not read.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import check_path, render_lock, write_atomic
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.document import FLEET_DIR
from ansible_collections.gpufleet.serving.plugins.module_utils.suggest import did_you_mean

#: The file in a render directory: ``<render_dir>/_fleet/<fleet>/fleet-state.yml`` (:func:`render_dir_file`).
FILE_NAME = "fleet-state.yml"
DRAINED_VAR = "gpufleet_drained_clusters"
CORDONED_VAR = "gpufleet_cordoned_clusters"
STATES = ("drained", "cordoned", "absent")
#: A fleet state names clusters: anything larger is not one this collection wrote.
MAX_BYTES = 1024 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_HEADER = (
    "---\n"
    "# The fleet's drained and cordoned clusters, written by gpufleet.serving's drain.yml and read by every run\n"
    "# (added to gpufleet_drained_clusters / gpufleet_cordoned_clusters). Change it with drain.yml:\n"
    "#   drain.yml -e cluster=<name> [-e drain_state=drained|cordoned|absent]\n"
)


@dataclass(frozen=True)
class FleetState:
    """Drained and cordoned clusters (sorted, unique; a cluster is in one list at most, drained winning)."""

    drained: tuple[str, ...] = ()
    cordoned: tuple[str, ...] = ()

    @classmethod
    def of(cls, drained: Iterable[str] = (), cordoned: Iterable[str] = ()) -> FleetState:
        drained_set = set(drained)
        return cls(tuple(sorted(drained_set)), tuple(sorted(set(cordoned) - drained_set)))

    @classmethod
    def parse(cls, doc: Any, source: str) -> FleetState:
        """The state in a parsed file (``None``: an empty file). ``source`` names it in errors."""
        if doc is None:
            return cls()
        if not isinstance(doc, Mapping):
            raise GpufleetError(
                f"{source}: not a fleet state (a {type(doc).__name__}, not a mapping); nothing was changed"
            )
        unknown = sorted(str(k) for k in doc if k not in (DRAINED_VAR, CORDONED_VAR))
        if unknown:
            raise GpufleetError(
                f"{source}: not a fleet state: unknown key(s) {', '.join(unknown)} (it holds only {DRAINED_VAR} and "
                f"{CORDONED_VAR}); nothing was changed"
            )
        lists = {}
        for key in (DRAINED_VAR, CORDONED_VAR):
            value = doc.get(key) or []
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise GpufleetError(f"{source}: {key} must be a list of cluster names; nothing was changed")
            lists[key] = value
        return cls.of(lists[DRAINED_VAR], lists[CORDONED_VAR])

    def known(self, clusters: Iterable[str] | None) -> FleetState:
        """Only the clusters among ``clusters`` (``None``: all): a cluster that left the inventory is not drained."""
        if clusters is None:
            return self
        names = set(clusters)
        return FleetState.of([c for c in self.drained if c in names], [c for c in self.cordoned if c in names])

    def state_of(self, cluster: str) -> str:
        return "drained" if cluster in self.drained else "cordoned" if cluster in self.cordoned else "absent"

    def with_state(self, cluster: str, state: str) -> FleetState:
        """This state with ``cluster`` drained, cordoned or neither (``absent``)."""
        if state not in STATES:
            raise GpufleetError(f"state must be one of {', '.join(STATES)} (got {state!r})")
        drained = [c for c in self.drained if c != cluster] + ([cluster] if state == "drained" else [])
        cordoned = [c for c in self.cordoned if c != cluster] + ([cluster] if state == "cordoned" else [])
        return FleetState.of(drained, cordoned)

    def union(self, other: FleetState) -> FleetState:
        return FleetState.of([*self.drained, *other.drained], [*self.cordoned, *other.cordoned])

    def to_dict(self) -> dict[str, list[str]]:
        return {"drained": list(self.drained), "cordoned": list(self.cordoned)}

    def to_text(self) -> str:
        """The file's text: deterministic, one name a line."""

        def block(key: str, names: tuple[str, ...]) -> str:
            if not names:
                return f"{key}: []\n"
            return f"{key}:\n" + "".join(f"  - {_quote(n)}\n" for n in names)

        return _HEADER + block(DRAINED_VAR, self.drained) + block(CORDONED_VAR, self.cordoned)


def _quote(name: str) -> str:
    return json.dumps(name)  # a JSON string is a YAML string: no name can change the file's structure


def render_dir_file(fleet: str) -> str:
    """The fleet state's path in a render directory, for the fleet named ``fleet`` (``gpufleet_fleet_name``)."""
    return f"{FLEET_DIR}/{fleet}/{FILE_NAME}"


def _check(path: Path, render_dir: str | None) -> None:
    """Inside the render directory, no component below it is a symlink (the directory is untrusted input); anywhere,
    the file itself is not one."""
    if render_dir:
        root = Path(os.path.abspath(os.path.expanduser(render_dir)))
        try:
            rel = path.relative_to(root)
        except ValueError:
            pass
        else:
            check_path(root, rel.as_posix())
    if path.is_symlink():
        raise GpufleetError(f"{path} is a symlink; the fleet state is never read or written through one")


def _resolve(path: str) -> Path:
    return Path(os.path.abspath(os.path.expanduser(path)))


def read(path: str, render_dir: str | None = None) -> FleetState:
    """The fleet state at ``path`` (none there: the empty state)."""
    import yaml

    target = _resolve(path)
    _check(target, render_dir)
    try:
        fd = os.open(target, os.O_RDONLY | _NOFOLLOW)
    except FileNotFoundError:
        return FleetState()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise GpufleetError(f"{target} is a symlink; the fleet state is never read through one") from None
        if exc.errno == errno.ENOTDIR:
            return FleetState()
        raise GpufleetError(f"cannot read the fleet state {target}: {exc}") from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise GpufleetError(f"{target}: larger than {MAX_BYTES} bytes, not a fleet state; nothing was changed")
    try:
        doc = yaml.safe_load(data.decode("utf-8", errors="replace"))
    except yaml.YAMLError as exc:
        raise GpufleetError(
            f"{target}: not a fleet state (not YAML: {str(exc).splitlines()[0]}); nothing was changed"
        ) from None
    return FleetState.parse(doc, str(target))


def write(path: str, state: FleetState, render_dir: str | None = None) -> bool:
    """Write ``state`` to ``path`` atomically, when its text changes; under the render directory's writer lock when the
    file is in it. Returns whether it was written."""
    target = _resolve(path)
    _check(target, render_dir)
    text = state.to_text()
    try:
        current = target.read_text(encoding="utf-8") if target.is_file() else None
    except OSError:
        current = None
    if current == text:
        return False
    root = Path(os.path.abspath(os.path.expanduser(render_dir))) if render_dir else None
    if root is not None and root in target.parents:
        with render_lock(root):
            _check(target, render_dir)  # again, under the lock
            _write(target, text)
    else:
        _write(target, text)
    return True


def _write(target: Path, text: str) -> None:
    try:
        write_atomic(target, text)
    except OSError as exc:
        raise GpufleetError(f"cannot write the fleet state {target}: {exc}; nothing was changed") from None


def change(
    path: str,
    cluster: str | None,
    state: str,
    clusters: Iterable[str],
    variables: FleetState,
    *,
    render_dir: str | None = None,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Record ``cluster`` as ``state`` in the fleet state at ``path`` (``cluster`` ``None``: only read it). ``clusters``
    are the fleet's: ``cluster`` must be one of them, and names that are not are dropped from the file. ``variables``
    is what ``gpufleet_drained_clusters`` / ``gpufleet_cordoned_clusters`` say this run: it applies too, so a cluster
    they name cannot be set otherwise here (an error naming the variable, before anything is written).

    Returns ``recorded`` (the file's state after the change), ``effective`` (with the variables'), ``changed``,
    ``before`` / ``after`` (the file's text, for a diff) and ``path``."""
    known = list(clusters)
    target = _resolve(path)
    before = read(path, render_dir)
    after = before.known(known)
    if cluster is not None:
        if cluster not in known:
            raise GpufleetError(
                f"cluster: unknown cluster {cluster!r}{did_you_mean(cluster, known)}; nothing was changed"
            )
        after = after.with_state(cluster, state)
        effective = after.union(variables.known(known))
        if effective.state_of(cluster) != state:
            var = DRAINED_VAR if cluster in variables.drained else CORDONED_VAR
            raise GpufleetError(
                f"{cluster} stays {effective.state_of(cluster)}: {var} names it (in the inventory or the extra "
                f"variables, which this does not change; an older drain.yml wrote group_vars/all/gpufleet_drained.yml). "
                f"Remove {cluster} from {var} there. Nothing was changed."
            )
    effective = after.union(variables.known(known))
    exists = target.is_file()
    before_text = before.to_text() if exists else ""
    after_text = after.to_text() if (exists or after != FleetState()) else ""
    # Only a change of a cluster's state writes (reading never does); names that left the inventory go with it.
    changed = cluster is not None and before_text != after_text
    if changed and not check_mode:
        write(path, after, render_dir)
    return {
        "path": str(target),
        "recorded": after.to_dict(),
        "effective": effective.to_dict(),
        "changed": changed,
        "before": before_text,
        "after": after_text,
    }
