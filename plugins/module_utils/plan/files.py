# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Reading and writing the plan document (:mod:`.document`): the plan file, a render directory's per-cluster records.

Thin I/O for the ``fleet_placement`` (writes the plan), ``fleet_plan`` (reads it for an apply) and ``fleet_manifests``
(records which plan each cluster's files were rendered from) actions. Everything read is untrusted: a plan is checked
against its own digests (:meth:`.plan.Plan.from_document`), a record that cannot be read is ignored, paths under the
render directory go through :func:`.manifest_dir.check_path` (no symlinked component, nothing outside it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ANNOTATION_PLACEMENT,
    LABEL_FLEET,
    SERVING_OWNER,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.manifest_dir import check_path, write_atomic
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.document import (
    APPLIED_DIR,
    FLEET_DIR,
    INLINE_LIMIT,
    Plan,
    read_record,
    routing,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.rollout import budgets

#: A plan file larger than this is not read (a planted file must not exhaust memory); 5,000 clusters make ~30 MB.
MAX_PLAN_BYTES = 512 * 1024 * 1024
#: A cluster's plan record (``_fleet/applied/<fleet>/<cluster>.json``) is a few hundred bytes.
RECORD_BYTES = 64 * 1024


def _read_previous(path: Path) -> Plan | None:
    """The plan now at ``path``, if it is one this collection wrote (anything else is replaced, not trusted)."""
    try:
        text = _read_bounded(path)
        return Plan.from_document(text, str(path))
    except (OSError, GpufleetError):
        return None


def _read_bounded(path: Path, limit: int = MAX_PLAN_BYTES) -> str:
    """The text of ``path`` (untrusted: at most ``limit`` bytes are read; a larger file is refused)."""
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise GpufleetError(f"{path}: larger than {limit} bytes: not a file this collection wrote")
    return data.decode("utf-8", errors="replace")


def make_plan(
    path: str,
    *,
    fleet: Mapping[str, Any],
    replicas: list[dict[str, Any]],
    placement: dict[str, Any],
    drained: Iterable[str],
    mode: str,
    capacity: str,
    render_token: str | None,
    check_mode: bool,
    render_dir: str | None = None,
) -> dict[str, Any]:
    """Make the plan, write it to ``path`` (atomically; not in check mode; not when unchanged) and return what the
    run reports and publishes: ``summary``, ``record``, ``artifact`` (the AWX custom stat), ``path``, ``written``."""
    target = Path(os.path.abspath(os.path.expanduser(path)))
    _check_within(render_dir, target)
    previous = _read_previous(target) if target.is_file() else None
    plan = Plan.make(
        previous=previous,
        fleet_name=str(fleet.get("name") or ""),
        fleet=dict(fleet),
        replicas=replicas,
        placement=placement,
        contract={
            "fleet_label": LABEL_FLEET,
            "owner": dict(SERVING_OWNER),
            "placement_annotation": ANNOTATION_PLACEMENT,
        },
        waves={name: {"max_unavailable": n} for name, n in budgets(fleet.get("deployments") or []).items()},
        routing=routing(replicas, fleet.get("deployments") or [], drained),
        mode=mode,
        capacity=capacity,
        render_token=render_token,
    )
    text = plan.to_json()
    written = False
    if not check_mode and (previous is None or previous.to_json() != text):
        try:
            write_atomic(target, text)
        except OSError as exc:
            raise GpufleetError(f"plan_file: cannot write the plan to {target}: {exc}") from None
        written = True
    artifact = plan.summary(str(target))
    if len(text) <= INLINE_LIMIT:
        # Small plans travel inline, so an AWX workflow's apply needs no shared storage.
        artifact["document"] = plan.to_dict()
    return {
        "path": str(target),
        "written": written,
        "summary": plan.summary(str(target)),
        "record": plan.record(),
        "artifact": artifact,
    }


def _check_within(render_dir: str | None, target: Path) -> None:
    """A plan file inside the render directory (the default, ``_fleet/plan.json``) is written as every file there is:
    never through a symlinked directory (the render directory is untrusted input)."""
    if not render_dir:
        return
    root = Path(os.path.abspath(os.path.expanduser(render_dir)))
    try:
        rel = target.relative_to(root)
    except ValueError:
        return
    check_path(root, rel.as_posix())


def load_plan(plan: Any, plan_file: str | None) -> tuple[Plan, str]:
    """The plan an apply takes: ``plan`` (the ``gpufleet_plan`` artifact: the document inline, or a pointer with its
    ``path``) or ``plan_file``. Returns it and where it came from (for error messages)."""
    if isinstance(plan, Mapping) and plan.get("document") is not None:
        return Plan.from_document(plan["document"], "gpufleet_plan.document"), "gpufleet_plan"
    if isinstance(plan, str) and plan.strip().startswith("{"):
        return Plan.from_document(plan, "gpufleet_plan"), "gpufleet_plan"  # a survey or extra var as JSON text
    path = None
    if isinstance(plan, Mapping) and plan.get("path"):
        path = str(plan["path"])
    elif plan_file:
        path = plan_file
    if not path:
        raise GpufleetError(
            "no plan to apply: pass the plan playbooks/plan.yml published (the gpufleet_plan artifact of an AWX "
            "workflow) or -e gpufleet_plan_file=<render_dir>/_fleet/plan.json"
        )
    target = Path(os.path.expanduser(path))
    try:
        text = _read_bounded(target)
    except FileNotFoundError:
        raise GpufleetError(f"gpufleet_plan_file: {target} does not exist: run playbooks/plan.yml first") from None
    except OSError as exc:
        raise GpufleetError(f"gpufleet_plan_file: cannot read {target}: {exc}") from None
    return Plan.from_document(text, str(target)), str(target)


def applied_path(fleet: str, cluster: str) -> str:
    """``_fleet/applied/<fleet>/<cluster>.json``: per fleet (two fleets may share a render directory) and per cluster
    (parallel slices never write one file)."""
    return f"{FLEET_DIR}/{APPLIED_DIR}/{fleet or '_'}/{cluster}.json"


def read_applied(render_dir: str, fleet: str, clusters: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The plan record of each cluster's files in a render directory (unreadable or absent ones are left out)."""
    root = Path(os.path.abspath(render_dir))
    out = {}
    for cluster in clusters:
        rel = applied_path(fleet, cluster)
        try:
            check_path(root, rel)
            text = _read_bounded(root / rel, RECORD_BYTES)
        except (OSError, GpufleetError):
            continue
        rec = read_record(text)
        if rec is not None:
            out[cluster] = rec
    return out


def write_applied(render_dir: str, clusters: Iterable[str], record: Mapping[str, Any]) -> list[str]:
    """Record ``record`` as the plan of each cluster's files; returns the files written (unchanged ones are not)."""
    root = Path(os.path.abspath(render_dir))
    text = json.dumps(dict(record), sort_keys=True, indent=1) + "\n"
    written = []
    for cluster in sorted(set(clusters)):
        rel = applied_path(str(record.get("fleet_name") or ""), cluster)
        check_path(root, rel)
        target = root / rel
        try:
            if _read_bounded(target, RECORD_BYTES) == text:
                continue
        except (OSError, GpufleetError):
            pass
        target.parent.mkdir(parents=True, exist_ok=True)
        check_path(root, rel)
        write_atomic(target, text)
        written.append(rel)
    return written
