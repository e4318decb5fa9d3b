# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Rolling updates across the fleet: which changed objects are written in which wave (docs/deploy.md).

Every replica of a deployment is its own workload (a Deployment, LeaderWorkerSet or LLMInferenceService per
deployment, cluster and index), usually of one pod whose GPUs are planned exactly, so a changed template restarts a
replica: it is out of service for as long as its model takes to load. Written all at once, an image bump would stop
every replica of a model together. So a run writes the changes in **waves**:

* an *update* is a workload that exists (live in apply mode, as a file in render mode) and whose ``spec`` changes
  (its pods restart). Of a deployment's updates, at most ``rollout.max_unavailable`` replicas are in one wave, across
  all clusters;
* everything else restarts nothing that serves and goes in the first wave: new replicas (creations), Services, claim
  templates, routes, a change to a workload's own labels or annotations only, and the updates of objects that belong
  to no deployment;
* a replica that is not Ready before the run is not serving, so updating it takes nothing more away: such replicas go
  in the first wave whatever the budget, and every replica of the deployment that is not Ready (updated or not) uses
  up the first wave's budget, as a Deployment's own rolling update counts unavailable pods;
* a replica counts once however many of its workloads (engines) change.

Apply mode applies a wave, waits until everything written so far is Ready, then applies the next; a replica that does
not become Ready stops its deployment's rollout (:mod:`.fleet.reconcile`). Render mode writes the first wave only and keeps
the old files of the rest, so every run after a GitOps sync advances one wave. The decisions are pure functions,
unit-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    LABEL_DEPLOYMENT,
    LABEL_FLEET,
    LABEL_REPLICA,
    object_labels,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.readiness import PREDICATES

Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name

#: ``rollout.max_unavailable`` of a deployment the caller knows nothing about (the model's default).
DEFAULT_MAX_UNAVAILABLE = 1


@dataclass(frozen=True)
class Change:
    """One object a run writes: applied (apply mode) or written to its file (render mode)."""

    cluster: str
    key: Key
    #: Its ``gpufleet.io/deployment`` label, or None.
    deployment: str | None = None
    #: Its ``gpufleet.io/replica`` label (the replica it serves), or "" (then the object is its own unit).
    replica: str = ""
    #: An update: a workload that exists and whose ``spec`` changes (its pods restart).
    update: bool = False

    @property
    def unit(self) -> str:
        """The replica this change takes out of service: ``<cluster>/<replica>``."""
        return f"{self.cluster}/{self.replica or self.key[3]}"


def replica_unit(cluster: str, replica: str) -> str:
    return f"{cluster}/{replica}"


@dataclass
class RolloutPlan:
    """The waves of one run: ``waves[0]`` holds every change that is not a budgeted update, and the first updates."""

    waves: list[list[Change]]
    #: The budget of each deployment with updates.
    max_unavailable: dict[str, int] = field(default_factory=dict)

    def keys(self, wave: int, skip: Iterable[str] = ()) -> dict[str, list[Key]]:
        """Per cluster, the keys of ``wave`` (in the order they were given), but those of deployments in ``skip``."""
        skipped = set(skip)
        out: dict[str, list[Key]] = {}
        if wave < len(self.waves):
            for c in self.waves[wave]:
                if c.deployment is None or c.deployment not in skipped:
                    out.setdefault(c.cluster, []).append(c.key)
        return out

    def later(self, wave: int) -> dict[str, set[Key]]:
        """Per cluster, the keys of the waves after ``wave``: still to write (their old object stays meanwhile)."""
        out: dict[str, set[Key]] = {}
        for changes in self.waves[wave + 1 :]:
            for c in changes:
                out.setdefault(c.cluster, set()).add(c.key)
        return out

    def updates(self) -> dict[str, list[tuple[int, list[str]]]]:
        """Per deployment, its update waves: ``(wave index, replicas)``, replicas as ``<cluster>/<replica>``."""
        out: dict[str, list[tuple[int, list[str]]]] = {}
        for i, changes in enumerate(self.waves):
            per: dict[str, list[str]] = {}
            for c in changes:
                if c.update and c.deployment is not None and c.unit not in per.get(c.deployment, []):
                    per.setdefault(c.deployment, []).append(c.unit)
            for dep, units in per.items():
                out.setdefault(dep, []).append((i, units))
        return out


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def plan_waves(
    changes: Iterable[Change],
    max_unavailable: Mapping[str, int] | None = None,
    unready: Mapping[str, Iterable[str]] | None = None,
    default: int = DEFAULT_MAX_UNAVAILABLE,
) -> RolloutPlan:
    """Split ``changes`` into waves (see the module docstring).

    ``max_unavailable``: each deployment's ``rollout.max_unavailable`` (``default`` for one not named).
    ``unready``: per deployment, its replicas (``<cluster>/<replica>``, :func:`replica_unit`) that are out of service
    during the first wave: in apply mode those that exist and are not Ready before this run; render mode cannot tell
    and passes the replicas moved away whose files this run removes (:func:`plan_render`). Replicas of a deployment
    are updated in the order of their cluster and name; not Ready ones first."""
    budgets = dict(max_unavailable or {})
    down_by_dep = {dep: set(units) for dep, units in (unready or {}).items()}
    first: list[Change] = []
    units: dict[str, dict[str, list[Change]]] = {}
    for c in changes:
        if c.update and c.deployment is not None:
            units.setdefault(c.deployment, {}).setdefault(c.unit, []).append(c)
        else:
            first.append(c)
    waves: list[list[Change]] = [first]
    used: dict[str, int] = {}
    for dep in sorted(units):
        mine = units[dep]
        budget = max(1, int(budgets.get(dep, default)))
        used[dep] = budget
        down = down_by_dep.get(dep, set())
        free = sorted(u for u in mine if u in down)
        healthy = sorted(u for u in mine if u not in down)
        room = max(0, budget - len(down))
        groups = [free + healthy[:room], *_chunks(healthy[room:], budget)]
        for i, group in enumerate(groups):
            while len(waves) <= i:
                waves.append([])
            waves[i].extend(c for u in group for c in mine[u])
    while len(waves) > 1 and not waves[-1]:
        waves.pop()
    return RolloutPlan(waves=waves, max_unavailable=used)


@dataclass
class DeploymentRollout:
    """What a run did with one deployment's updates."""

    deployment: str
    max_unavailable: int
    #: Its update waves, each a list of replicas (``<cluster>/<replica>``).
    waves: list[list[str]]
    #: How many of them were written.
    written: int = 0
    #: Why the rollout stopped (a replica that did not become Ready, a cluster that failed), or "".
    stopped: str = ""
    #: Render mode, or apply mode without waiting: the rest is written by the next runs.
    deferred: bool = False

    @property
    def updated(self) -> list[str]:
        return [u for wave in self.waves[: self.written] for u in wave]

    @property
    def pending(self) -> list[list[str]]:
        return self.waves[self.written :]

    def line(self) -> str:
        total = sum(len(w) for w in self.waves)
        budget = f"max_unavailable {self.max_unavailable}"
        rest = [u for wave in self.pending for u in wave]
        if self.stopped:
            return (
                f"{self.deployment}: rolling update stopped after {len(self.updated)} of {total} replica(s) ({budget}): "
                f"{self.stopped}. {len(rest)} replica(s) keep the old template: {', '.join(rest) or '-'}; nothing of "
                f"{self.deployment} was pruned"
            )
        if rest:
            waves = "; ".join(f"wave {self.written + i + 1}: {', '.join(w)}" for i, w in enumerate(self.pending))
            return (
                f"{self.deployment}: rolling update, wave {self.written} of {len(self.waves)} written "
                f"({', '.join(self.updated) or '-'}; {budget}); {len(rest)} replica(s) keep the old template until the "
                f"next runs ({waves}). Run again once the written replicas are Ready"
            )
        return (
            f"{self.deployment}: rolling update of {total} replica(s) in {len(self.waves)} wave(s) ({budget}): "
            f"{', '.join(self.updated)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment,
            "max_unavailable": self.max_unavailable,
            "waves": self.waves,
            "updated": self.updated,
            "pending": self.pending,
            "stopped": self.stopped or None,
            "line": self.line(),
        }


def report(
    plan: RolloutPlan,
    written_through: Mapping[str, int] | int,
    stopped: Mapping[str, str] | None = None,
    deferred: bool = False,
) -> list[DeploymentRollout]:
    """Per deployment with updates, what was written: its waves with index up to ``written_through`` (per deployment,
    or one index for all; -1: none), and why it ``stopped``, by deployment."""
    out = []
    for dep, waves in sorted(plan.updates().items()):
        through = written_through if isinstance(written_through, int) else written_through.get(dep, -1)
        out.append(
            DeploymentRollout(
                deployment=dep,
                max_unavailable=plan.max_unavailable.get(dep, DEFAULT_MAX_UNAVAILABLE),
                waves=[units for _i, units in waves],
                written=sum(1 for i, _units in waves if i <= through),
                stopped=(stopped or {}).get(dep, ""),
                deferred=deferred,
            )
        )
    return out


def budgets(deployments: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Each deployment's ``rollout.max_unavailable`` from the normalised fleet's deployments (``fleet_info``)."""
    out = {}
    for d in deployments:
        rollout = d.get("rollout") or {}
        out[str(d["name"])] = int(rollout.get("max_unavailable") or DEFAULT_MAX_UNAVAILABLE)
    return out


# --------------------------------------------------------------------------------------------------------------------
# Render mode: the render directory is what GitOps serves
# --------------------------------------------------------------------------------------------------------------------


def object_key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))


def _replica(cluster: str, obj: Any) -> tuple[str, str] | None:
    """``(deployment, <cluster>/<replica>)`` of an object that serves a replica, else None."""
    labels = object_labels(obj)
    dep, replica = labels.get(LABEL_DEPLOYMENT), labels.get(LABEL_REPLICA)
    return (str(dep), replica_unit(cluster, str(replica))) if dep and replica else None


@dataclass
class RenderRollout:
    """What a render-mode run writes now and what it keeps as it is (:func:`plan_render`)."""

    plan: RolloutPlan
    #: Per cluster, the keys of rendered objects not written this run (later waves): their old files stay.
    held_back: dict[str, set[Key]] = field(default_factory=dict)
    #: Files (relative to the render directory) kept as they are: held-back workloads, replicas moved away.
    kept: set[str] = field(default_factory=set)
    #: Per deployment, replicas moved away (``<cluster>/<replica>``) whose files are kept this run / removed.
    moves_kept: dict[str, list[str]] = field(default_factory=dict)
    moves_removed: dict[str, list[str]] = field(default_factory=dict)
    #: Each deployment's max_unavailable, as given.
    budgets: dict[str, int] = field(default_factory=dict)

    def report(self) -> list[DeploymentRollout]:
        return report(self.plan, 0, deferred=True)

    def lines(self) -> list[str]:
        out = [r.line() for r in self.report()]
        for dep, units in sorted(self.moves_kept.items()):
            budget = self.budgets.get(dep, DEFAULT_MAX_UNAVAILABLE)
            removed = self.moves_removed.get(dep, [])
            out.append(
                f"{dep}: {len(units)} replica(s) moved away keep their files until the next run: {', '.join(units)} "
                f"(their replacements are written now; {len(removed)} removed now: {', '.join(removed) or '-'}; "
                f"max_unavailable {budget}). Run again once the new replicas are Ready"
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployments": [r.to_dict() for r in self.report()],
            "moves_kept": self.moves_kept,
            "moves_removed": self.moves_removed,
        }


def plan_render(
    objects_by_cluster: Mapping[str, Iterable[Mapping[str, Any]]],
    files: Mapping[str, Iterable[tuple[str, Mapping[str, Any]]]],
    max_unavailable: Mapping[str, int] | None = None,
    fleet: str | None = None,
) -> RenderRollout:
    """The first wave of a render-mode run.

    ``objects_by_cluster``: what this run renders; ``files``: per cluster, the owned objects the render directory holds
    now (``(relpath, object)``; at least every workload and Service). With ``fleet``, files of another fleet are not
    considered. Two kinds of change take a serving replica away when GitOps syncs them, and share the deployment's
    ``max_unavailable``:

    * an update (a workload file whose ``spec`` changes): the first wave is written, the later ones keep their files;
    * a move (a replica no longer placed where it ran while another is created: a drain, a pool change): its file
      going now stops it while its replacement is still loading. At most ``max_unavailable`` moved replicas lose
      their files in one run; the others keep them, so they serve until the next run (by then the replacements
      exist and these are pruned as any replica no longer placed). Removals beyond the created replicas are a
      scale-down (or a deployment leaving the fleet) and are not held."""
    budgets = dict(max_unavailable or {})
    live: dict[str, dict[Key, tuple[str, Mapping[str, Any]]]] = {}
    existing: dict[str, dict[str, list[str]]] = {}
    for cluster, items in files.items():
        for rel, obj in items:
            if not isinstance(obj, Mapping):
                continue
            whose = object_labels(obj).get(LABEL_FLEET)
            if fleet is not None and whose and str(whose) != fleet:
                continue  # another fleet's file
            live.setdefault(cluster, {})[object_key(obj)] = (rel, obj)
            served = _replica(cluster, obj)
            if served is not None:
                existing.setdefault(served[0], {}).setdefault(served[1], []).append(rel)
    wanted: dict[str, set[str]] = {}
    changes: list[Change] = []
    for cluster, objs in objects_by_cluster.items():
        for obj in objs:
            key = object_key(obj)
            served = _replica(cluster, obj)
            if served is not None:
                wanted.setdefault(served[0], set()).add(served[1])
            old = live.get(cluster, {}).get(key)
            if old is not None and key[1] in PREDICATES and old[1].get("spec") != obj.get("spec"):
                labels = object_labels(obj)
                changes.append(
                    Change(
                        cluster=cluster,
                        key=key,
                        deployment=served[0] if served else (str(labels.get(LABEL_DEPLOYMENT) or "") or None),
                        replica=str(labels.get(LABEL_REPLICA) or ""),
                        update=True,
                    )
                )
    kept: set[str] = set()
    moves_kept: dict[str, list[str]] = {}
    moves_removed: dict[str, list[str]] = {}
    down: dict[str, list[str]] = {}
    for dep, units in sorted(existing.items()):
        gone = sorted(set(units) - wanted.get(dep, set()))
        created = wanted.get(dep, set()) - set(units)
        moves = min(len(gone), len(created))
        if not moves:
            continue
        budget = max(1, int(budgets.get(dep, DEFAULT_MAX_UNAVAILABLE)))
        removed = gone[: len(gone) - moves + min(moves, budget)]  # the scale-down part, then the budget's moves
        holding = gone[len(removed) :]
        down[dep] = removed[-min(moves, budget) :]  # the moved ones removed now: out of service this wave
        moves_removed[dep] = removed
        if holding:
            moves_kept[dep] = holding
            kept.update(rel for unit in holding for rel in units[unit])
    plan = plan_waves(changes, budgets, down)
    held_back = plan.later(0)
    for cluster, keys in held_back.items():
        kept.update(live[cluster][key][0] for key in keys)
    return RenderRollout(
        plan=plan,
        held_back=held_back,
        kept=kept,
        moves_kept=moves_kept,
        moves_removed=moves_removed,
        budgets=budgets,
    )
