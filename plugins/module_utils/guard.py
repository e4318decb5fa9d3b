# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Guarded shrink: a run never leaves a deployment with fewer replicas than are serving now, silently.

Pure decisions over what placement returns and what was observed serving (docs/capacity-loss.md lists every path
that can remove a replica and its guard). A deployment *loses capacity* when this run would place fewer replicas than
``min(serving now, replicas)``: a lower ``replicas`` is the one intended way to shrink, everything else (a selector
or class change that no pool satisfies any more, a drain with no room, a pool that shrank, a cluster that left) is a
loss. A loss blocks the run before anything is written or applied, unless the user allows it for that deployment
(``gpufleet_allow_capacity_loss``) or its ``disruption.min_available`` still holds. Every dropped replica is listed
either way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.suggest import did_you_mean


@dataclass
class CapacityLoss:
    """One deployment that this run would leave with fewer replicas than are serving now."""

    deployment: str
    serving: int
    placed: int
    desired: int
    #: The serving replicas this run would remove without a replacement: ``{cluster, index, name, reason}``.
    lost: list[dict[str, Any]] = field(default_factory=list)
    why: str = ""
    #: What allows it (``gpufleet_allow_capacity_loss`` or ``disruption.min_available``), or "" when it blocks the run.
    allowed_by: str = ""

    @property
    def blocking(self) -> bool:
        return not self.allowed_by

    def line(self) -> str:
        lost = ", ".join(f"({d['cluster']}, {d['index']})" for d in self.lost) or "-"
        verdict = f"allowed by {self.allowed_by}" if self.allowed_by else "blocked"
        return (
            f"{self.deployment}: {self.serving} serving now, this run would place {self.placed} (replicas: "
            f"{self.desired}); it would remove {lost} without a replacement - {self.why} [{verdict}]"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment,
            "serving": self.serving,
            "placed": self.placed,
            "desired": self.desired,
            "lost": self.lost,
            "why": self.why,
            "allowed_by": self.allowed_by,
            "blocking": self.blocking,
        }


def _survey_list(value: Any, path: str, what: str) -> list[str]:
    """A list of names from its YAML form or the forms a survey or ``-e`` sends: ``'["a", "b"]'``, ``"a, b"``."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise FleetValidationError([(path, f"is not a JSON list of {what} (got {text!r:.200})")]) from None
        else:
            value = text.split(",") if text else []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FleetValidationError([(path, f"must be a list of {what}")])
    return [v.strip() for v in value if v.strip()]


def parse_names(value: Any, known: Sequence[str], path: str, what: str = "cluster names") -> list[str]:
    """A list of names that must all be ``known`` (a typo names nothing, silently, otherwise), in its YAML or survey
    form; sorted and unique."""
    names = sorted(set(_survey_list(value, path, what)))
    unknown = sorted(set(names) - set(known))
    if unknown:
        one = what[:-1] if what.endswith("s") else what
        raise FleetValidationError([(path, f"unknown {one} {n!r}{did_you_mean(n, known)}") for n in unknown])
    return names


def parse_allow(value: Any, deployments: Sequence[str], path: str = "gpufleet_allow_capacity_loss") -> bool | set[str]:
    """``true``/``false``, a list of deployment names, or their survey forms (``"true"``, ``'["a", "b"]'``,
    ``"a, b"``). An unknown name is an error: a typo must not silently allow nothing."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no", "off", "0", ""):
        return False
    return set(parse_names(value, deployments, path, "deployment names"))


def dropped_replicas(
    results: Mapping[str, Mapping[str, Any]], observed: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Every serving replica this run removes, with why: placement's ``dropped`` of each deployment, and the replicas
    of deployments that are no longer in the fleet."""
    out = [
        {"deployment": name, **{k: d[k] for k in ("cluster", "index", "name", "reason") if k in d}}
        for name, res in results.items()
        for d in res.get("dropped") or []
    ]
    out += [
        {
            "deployment": r["deployment"],
            "cluster": r["cluster"],
            "index": r["index"],
            "name": r.get("name", ""),
            "reason": "the deployment is no longer in the fleet",
        }
        for r in observed
        if r.get("deployment") not in results
    ]
    return sorted(out, key=lambda d: (d["deployment"], d["cluster"], d["index"]))


def capacity_losses(
    results: Mapping[str, Mapping[str, Any]],
    observed: Iterable[Mapping[str, Any]],
    *,
    allow: bool | set[str] = False,
    min_available: Mapping[str, int | None] | None = None,
) -> list[CapacityLoss]:
    """The deployments this run would leave with fewer placed replicas than ``min(serving now, replicas)``.

    ``results`` is placement's per-deployment result (``desired``, ``scheduled``, ``replicas``, ``dropped``,
    ``condition``); ``observed`` the replicas serving now (every deployment). Removed deployments are not losses
    (removing one from the inventory is the intended way to stop it); :func:`dropped_replicas` lists them."""
    serving: dict[str, list[Mapping[str, Any]]] = {}
    for r in observed:
        serving.setdefault(str(r.get("deployment")), []).append(r)
    floors = min_available or {}
    out = []
    for name, res in results.items():
        now = serving.get(name, [])
        placed = int(res["scheduled"])
        desired = int(res["desired"])
        if placed >= min(len(now), desired):
            continue
        kept = {(r["cluster"], r["index"]) for r in res.get("replicas") or []}
        reasons = {(d["cluster"], d["index"]): d.get("reason", "") for d in res.get("dropped") or []}
        lost = [
            {
                "cluster": r["cluster"],
                "index": r["index"],
                "name": r.get("name", ""),
                "reason": reasons.get((r["cluster"], r["index"]), "not placed again"),
            }
            for r in sorted(now, key=lambda r: (r["cluster"], r["index"]))
            if (r["cluster"], r["index"]) not in kept
        ]
        floor = floors.get(name)
        allowed_by = ""
        if allow is True or (isinstance(allow, set) and name in allow):
            allowed_by = "gpufleet_allow_capacity_loss"
        elif floor is not None and placed >= floor:
            allowed_by = f"disruption.min_available ({placed} >= {floor})"
        out.append(
            CapacityLoss(
                deployment=name,
                serving=len(now),
                placed=placed,
                desired=desired,
                lost=lost,
                why=str((res.get("condition") or {}).get("message", "")),
                allowed_by=allowed_by,
            )
        )
    return out
