# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Placement artifacts that stay small at thousands of clusters (issue 26, "Scale").

Placement explains every candidate cluster that cannot take another replica (``unschedulable``: ``{cluster: {code,
reason, pools}}``). At 5,000 clusters that is megabytes, mostly about deployments that are Ready, and it travelled in
full into ``fleet_placement``'s task result and the ``gpufleet_placement`` custom stat (AWX copies custom stats into
every following workflow node's extra vars, and blanks a job event over 700,000 characters). Here:

- :func:`group_unschedulable`: clusters whose diagnosis is the same (same code, reason and pool reasons) become one
  entry, the first cluster's, listing the others under ``same`` (``same_count`` of them); a deployment explained on
  fewer than :data:`GROUP_OVER` clusters keeps one entry per cluster, as before.
- :func:`bounded_results`: ``fleet_placement``'s ``results``: Ready deployments lose their diagnostics (the count
  stays, ``unschedulable_omitted``) unless named in ``explain`` (``gpufleet_explain``); the others are grouped; the
  whole stays under :data:`RESULTS_LIMIT` characters of JSON.
- :func:`placement_summary`: the ``gpufleet_placement`` custom stat: per deployment its status, scheduled/desired,
  the clusters it is on with their replica counts, the condition (why it is short) and explain lines only for the
  deployments that are short or named in ``explain``; no replica records (the plan file holds them). At most
  :data:`SUMMARY_LIMIT` bytes of JSON: lists are cut, largest first, until it fits, and what was cut is counted.

Pure functions over the dict shapes of ``fleet.deploy.FleetPlacement`` and ``placement.PlacementResult.to_dict``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol


class FleetPlacement(Protocol):
    """What is read of ``fleet.deploy.FleetPlacement`` (a protocol, not an import: fleet.deploy imports this module,
    and an import back - even under TYPE_CHECKING, which AnsiballZ follows - would close a cycle)."""

    results: dict[str, dict[str, Any]]

    def statuses(self) -> dict[str, str]: ...

    def degraded(self) -> list[str]: ...

    def shortfalls(self) -> list[str]: ...

    def explain_deployment(self, name: str, max_groups: int = ...) -> list[str]: ...


#: The ``gpufleet_placement`` custom stat, in bytes of JSON.
SUMMARY_LIMIT = 64 * 1024
#: ``fleet_placement``'s ``results`` return value, in characters of JSON (AWX blanks a task result over 700,000).
RESULTS_LIMIT = 300_000
#: ``fleet_placement``'s ``explain`` lines (and the report's), in characters.
EXPLAIN_LIMIT = 200_000
#: A deployment explained on more clusters than this has its diagnostics grouped by diagnosis.
GROUP_OVER = 50
#: Cluster names an explain line shows of a group (the others are counted).
NAMES_SHOWN = 5


def size(value: Any) -> int:
    """Characters of ``value`` as JSON with the default separators (what AWX measures of an event; non-ASCII
    escaped, so at least the bytes of a custom stat)."""
    return len(json.dumps(value, default=str))


def group_unschedulable(
    unschedulable: Mapping[str, Any] | None,
    *,
    max_groups: int | None = None,
    max_names: int | None = None,
    group_over: int = GROUP_OVER,
) -> tuple[dict[str, Any], int]:
    """``(diagnostics, clusters not shown)``: ``unschedulable`` as it is when it names at most ``group_over``
    clusters (and ``max_groups`` allows); otherwise one entry per distinct diagnosis, keyed by its first cluster, the
    other clusters in ``same`` (at most ``max_names`` of them) and their number in ``same_count``. With
    ``max_groups``, the groups covering most clusters are kept. Entries keep their key order (cluster name)."""
    table = dict(unschedulable or {})
    if len(table) <= group_over and (max_groups is None or len(table) <= max_groups):
        return table, 0
    groups: dict[str, list[str]] = {}
    for cluster in sorted(table):
        entry = table[cluster]
        key = json.dumps({k: v for k, v in entry.items() if k not in ("same", "same_count")}, sort_keys=True)
        groups.setdefault(key, []).append(cluster)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    kept = ranked if max_groups is None else ranked[:max_groups]
    out: dict[str, Any] = {}
    for _key, clusters in sorted(kept, key=lambda kv: kv[1][0]):
        first, others = clusters[0], clusters[1:]
        entry = dict(table[first])
        if others:
            entry["same"] = others if max_names is None else others[:max_names]
            entry["same_count"] = len(others)
        out[first] = entry
    omitted = sum(len(clusters) for _key, clusters in ranked[len(kept) :])
    return out, omitted


def clusters_of(entry: Mapping[str, Any]) -> int:
    """How many clusters one (possibly grouped) diagnosis stands for."""
    return 1 + int(entry.get("same_count", len(entry.get("same") or [])))


def fit_size(build: Callable[[int], Any], steps: int, limit: int) -> Any:
    """``build(step)`` for the first step (0 = the most detail) whose JSON is at most ``limit``, else the last."""
    out = build(0)
    for step in range(1, steps):
        if size(out) <= limit:
            break
        out = build(step)
    return out


# Each step of a bound: (diagnosis groups per deployment, cluster names per group). The last drops them all.
_RESULT_STEPS = [(200, 200), (100, 50), (50, 20), (20, 10), (10, 5), (5, 0), (0, 0)]


def bounded_results(
    results: Mapping[str, Mapping[str, Any]],
    statuses: Mapping[str, str],
    *,
    explain: Iterable[str] = (),
    limit: int = RESULTS_LIMIT,
) -> dict[str, dict[str, Any]]:
    """``fleet_placement``'s ``results``: per deployment, placement's result without ``replicas``; the
    ``unschedulable`` diagnostics of a Ready deployment not named in ``explain`` dropped, of the others grouped
    (:func:`group_unschedulable`) as much as it takes to stay under ``limit`` characters. Where clusters were left
    out, ``unschedulable_omitted`` counts them."""
    asked = set(explain)

    def build(step: int) -> dict[str, dict[str, Any]]:
        groups, names = _RESULT_STEPS[step]
        out: dict[str, dict[str, Any]] = {}
        for name, res in results.items():
            item = {k: v for k, v in res.items() if k != "replicas"}
            table = res.get("unschedulable") or {}
            if table and statuses.get(name) == "Ready" and name not in asked:
                item["unschedulable"] = {}
                item["unschedulable_omitted"] = len(table)
            elif table:
                grouped, omitted = group_unschedulable(table, max_groups=groups, max_names=names)
                item["unschedulable"] = grouped
                if omitted:
                    item["unschedulable_omitted"] = omitted
            out[name] = item
        return out

    return fit_size(build, len(_RESULT_STEPS), limit)


# Each step of the summary's bound: (clusters listed per deployment, explain lines per deployment, entries of each
# fleet-wide list, characters of a condition message).
_SUMMARY_STEPS = [
    (100_000, 300, 100, 1000),
    (50, 40, 50, 1000),
    (25, 20, 20, 500),
    (10, 10, 10, 300),
    (5, 5, 5, 200),
    (0, 2, 0, 120),
]


def _cut(items: list[Any], keep: int) -> list[Any]:
    return items[:keep]


def _text(value: str, keep: int) -> str:
    return value if len(value) <= keep else value[: max(keep - 3, 0)] + "..."


def placement_summary(
    outcome: FleetPlacement,
    *,
    explain: Iterable[str] = (),
    capacity: str = "declared",
    dropped: list[Mapping[str, Any]] | None = None,
    capacity_loss: list[Mapping[str, Any]] | None = None,
    blocked: list[str] | None = None,
    unreadable: list[Mapping[str, Any]] | None = None,
    held: list[str] | None = None,
    limit: int = SUMMARY_LIMIT,
) -> dict[str, Any]:
    """The ``gpufleet_placement`` custom stat: at most ``limit`` bytes of JSON whatever the fleet's size.

    ``results``: per deployment ``status``, ``desired``, ``scheduled``, ``condition`` (``reason`` and ``message``: why
    it is short), ``clusters`` (``{cluster: replicas}``, the clusters with most replicas first when cut) with
    ``cluster_count``, and ``explain`` lines only when it is short or named in ``explain``. Fleet-wide: ``status``,
    ``shortfalls``, ``degraded``, ``blocked``, ``held``, ``capacity``, ``dropped``, ``capacity_loss``,
    ``unreadable``. A list cut to fit says so: ``<key>_count`` is its full length, ``truncated`` is true. Replica
    records are never here (the plan file holds them)."""
    statuses = outcome.statuses()
    degraded = outcome.degraded()
    asked = [name for name in outcome.results if name in set(explain)]
    to_explain = set(degraded) | set(asked)
    counts: dict[str, list[tuple[str, int]]] = {}
    for name, res in outcome.results.items():
        per: dict[str, int] = {}
        for r in res.get("replicas") or []:
            per[r["cluster"]] = per.get(r["cluster"], 0) + 1
        counts[name] = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = {name: outcome.explain_deployment(name) for name in outcome.results if name in to_explain}
    fleet_lists = {
        "dropped": list(dropped or []),
        "capacity_loss": list(capacity_loss or []),
        "unreadable": list(unreadable or []),
    }

    def build(step: int) -> dict[str, Any]:
        n_clusters, n_lines, n_items, n_chars = _SUMMARY_STEPS[step]
        truncated = False
        per_dep: dict[str, Any] = {}
        for name, res in outcome.results.items():
            cond = res.get("condition") or {}
            placed = counts[name]
            item: dict[str, Any] = {
                "status": statuses[name],
                "desired": res.get("desired"),
                "scheduled": res.get("scheduled"),
                "condition": {
                    "reason": cond.get("reason", ""),
                    "message": _text(str(cond.get("message", "")), n_chars),
                },
                "clusters": dict(sorted(_cut(placed, n_clusters))),
                "cluster_count": len(placed),
            }
            truncated |= len(placed) > n_clusters
            if res.get("overcommitted"):
                item["overcommitted"] = True
            if res.get("warnings"):
                item["warnings"] = [_text(str(w), n_chars) for w in _cut(list(res["warnings"]), n_lines)]
                truncated |= len(res["warnings"]) > n_lines
            if name in lines:
                shown = [_text(line, n_chars) for line in _cut(lines[name], n_lines)]
                if len(lines[name]) > n_lines:
                    shown.append(f"... {len(lines[name]) - n_lines} more line(s): the report and the plan file")
                    truncated = True
                item["explain"] = shown
            per_dep[name] = item
        out: dict[str, Any] = {
            "results": per_dep,
            "status": statuses,
            "shortfalls": outcome.shortfalls(),
            "degraded": degraded,
            "blocked": list(blocked or []),
            "held": list(held or []),
            "capacity": capacity,
            "explained": sorted(to_explain),
        }
        for key, items in fleet_lists.items():
            shown_items = [dict(x) for x in _cut(items, n_items)]
            for x in shown_items:
                if isinstance(x.get("lost"), list) and len(x["lost"]) > n_items:
                    x["lost_count"] = len(x["lost"])
                    x["lost"] = x["lost"][:n_items]
                    truncated = True
                for k in ("reason", "why"):
                    if isinstance(x.get(k), str):
                        x[k] = _text(x[k], n_chars)
            out[key] = shown_items
            if len(items) > n_items:
                out[f"{key}_count"] = len(items)
                truncated = True
        out["truncated"] = truncated
        return out

    return fit_size(build, len(_SUMMARY_STEPS), limit)


#: ``fleet_placement``'s ``cold`` return value (and ``cold_lines``), in characters of JSON each.
COLD_LIMIT = 100_000


def bounded_cold(
    starts: Iterable[Mapping[str, Any]], *, limit: int = COLD_LIMIT
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``(cold, count)``: ``fleet_placement``'s ``cold`` - the replicas that start cold first (in placement order),
    then the warm ones - cut to at most ``limit`` characters of JSON, and ``count``: ``{cold, warm, omitted}`` (the
    cold and warm replicas of the whole placement, and how many entries were left out). The plan's
    ``placement.cold`` keeps every entry."""
    items = [dict(s) for s in starts]
    ordered = [s for s in items if s.get("cold")] + [s for s in items if not s.get("cold")]
    kept: list[dict[str, Any]] = []
    used = 2  # "[]"
    for item in ordered:
        cost = size(item) + (2 if kept else 0)  # ", " between entries
        if used + cost > limit:
            break
        kept.append(item)
        used += cost
    cold = sum(1 for s in items if s.get("cold"))
    return kept, {"cold": cold, "warm": len(items) - cold, "omitted": len(items) - len(kept)}


def bounded_lines(
    lines: Iterable[str], what: str, *, limit: int = COLD_LIMIT, where: str = "the plan file lists every one"
) -> list[str]:
    """``lines`` cut to at most ``limit`` characters of JSON; when some were left out, a last line counts them
    (``... and N more <what> (<where>)``)."""
    items = list(lines)
    kept: list[str] = []
    used = 2
    for line in items:
        cost = size(line) + (2 if kept else 0)
        if used + cost > limit - 200:  # room for the last line
            break
        kept.append(line)
        used += cost
    if len(kept) < len(items):
        kept.append(f"... and {len(items) - len(kept)} more {what} ({where})")
    return kept


#: A list of file paths (or lines) in a task result, in characters of JSON.
LIST_LIMIT = 50_000


def bounded_list(
    result: dict[str, Any], key: str, items: Iterable[Any], *, limit: int = LIST_LIMIT, first: int | None = None
) -> bool:
    """Set ``result[key]`` to the first items of ``items`` that fit in ``limit`` characters of JSON (and at most
    ``first`` of them) and ``result[key + "_count"]`` to how many there are in all; returns whether some were left
    out (the caller sets ``truncated``). The whole list stays where it came from (the render directory, a file)."""
    values = list(items)
    kept: list[Any] = []
    used = 2
    for item in values:
        cost = size(item) + (2 if kept else 0)
        if used + cost > limit or (first is not None and len(kept) >= first):
            break
        kept.append(item)
        used += cost
    result[key] = kept
    result[f"{key}_count"] = len(values)
    return len(kept) < len(values)


def bounded_mapping(result: dict[str, Any], key: str, items: Mapping[str, Any], *, limit: int = LIST_LIMIT) -> bool:
    """:func:`bounded_list` for a mapping (its first entries in key order); ``result[key + "_count"]`` its length."""
    kept: dict[str, Any] = {}
    used = 2
    for name, value in items.items():
        cost = size(name) + size(value) + (4 if kept else 2)
        if used + cost > limit:
            break
        kept[name] = value
        used += cost
    result[key] = kept
    result[f"{key}_count"] = len(items)
    return len(kept) < len(items)
