# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""``fleet.html``: the fleet's occupancy (a :class:`fleet.view.FleetView`) as one self-contained page.

Clusters x pools x nodes x devices as inline SVG, and per deployment its replicas and their readiness. The page loads
nothing: no script, no font, no image, no style sheet from anywhere (its Content-Security-Policy says so to the
browser as well), so it opens from a CI artifact, a mail attachment or a file share as it is.

Every string drawn comes from the inventory or from the clusters (node names, taint values, claim names): untrusted
input, escaped for HTML wherever it is written, in text and in attributes alike (:func:`_e`). Geometry is computed
here from counts, colours come from a fixed palette; nothing from the inventory or the clusters ends up in a tag, an
attribute name, a style or a URL.

A fleet of more than :data:`SPLIT_OVER` clusters is drawn on several pages (:func:`render_picture`): the main page
holds the summary, what needs attention, every deployment's line, the clusters that need attention drawn in full (at
most :data:`MAIN_DRAWN`) and an index of every cluster; each cluster page beside it (``<page's name>/clusters-NNN.html``,
at most :data:`CLUSTERS_PER_PAGE` clusters and about :data:`PAGE_BYTES` of drawings) draws its clusters and the
replicas on them. The only URLs are the relative links between these pages: page numbers, cluster indexes and the
page file's own name, percent-encoded.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.view import (
    CONTENDED,
    DRIFTED,
    FOREIGN,
    HELD,
    IDLE,
    IN_USE,
    MISSING,
    NOT_RECONCILED,
    OVERCOMMITTED,
    PENDING,
    READY,
    TAINTED,
    UNAVAILABLE,
    USED,
    ClusterView,
    DeploymentView,
    FleetView,
    NodeTile,
    PoolView,
    ReplicaView,
)

#: One colour per deployment, in inventory order (then round again). None of them is a state colour.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#ff9da7",
    "#1f6fb4",
    "#17becf",
    "#bcbd22",
    "#6b4c9a",
    "#2ca02c",
)

#: Tile outline and fill per node state.
_TILE = {
    IN_USE: ("#3b3b3b", "#ffffff", ""),
    IDLE: ("#b5b5b5", "#ffffff", ""),
    OVERCOMMITTED: ("#d62728", "#fdecea", "4 3"),
    UNAVAILABLE: ("#7f7f7f", "#e6e6e6", ""),
    TAINTED: ("#e67e00", "#fff1df", ""),
    DRIFTED: ("#8e44ad", "#f4eafa", ""),
    HELD: ("#8c6d46", "#f1e9df", ""),
    MISSING: ("#7f7f7f", "#fafafa", "4 3"),
}
_STATE_WORDS = {
    IN_USE: "in use",
    IDLE: "free",
    OVERCOMMITTED: "overcommitted",
    UNAVAILABLE: "unavailable",
    TAINTED: "tainted",
    DRIFTED: "drifted",
    HELD: "held by others",
    MISSING: "missing",
}

CELL, GAP, PER_ROW = 16, 3, 8
PAGE_WIDTH = 1320
_TILE_PAD, _LABEL_H, _FOOT_H, _TILE_GAP = 6, 16, 14, 8


def _e(value: object) -> str:
    """Escaped for HTML text and for a double-quoted attribute value."""
    return html.escape(str(value), quote=True)


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(1, chars - 1)] + "\u2026"


def color_of(deployment: DeploymentView | None) -> str:
    return PALETTE[deployment.color % len(PALETTE)] if deployment else "#999999"


# -- the pieces -------------------------------------------------------------------------------------------------------

_DEFS = """<svg width="0" height="0" style="position:absolute" aria-hidden="true"><defs>
<pattern id="gf-foreign" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
<rect width="6" height="6" fill="#d9c8b0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#8c6d46" stroke-width="3"/>
</pattern>
<pattern id="gf-contended" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
<rect width="6" height="6" fill="#f6c1c1"/><line x1="0" y1="0" x2="0" y2="6" stroke="#d62728" stroke-width="3"/>
</pattern>
</defs></svg>"""

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;margin:20px;color:#222;
background:#fafafa;max-width:1360px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:0}h3{font-size:14px;margin:10px 0 4px;font-weight:600}
.meta{color:#555;font-size:13px;margin:2px 0}.summary{font-size:15px;margin:8px 0 14px}
section.cluster,section.deployments,section.legend{background:#fff;border:1px solid #ddd;border-radius:6px;
padding:10px 14px;margin:0 0 14px}.clusters{display:flex;flex-wrap:wrap;gap:0 14px;align-items:flex-start}
.clusters section.cluster{flex:0 1 auto;max-width:1330px}
.badge{display:inline-block;font-size:12px;padding:1px 7px;border-radius:9px;margin-left:6px;background:#eee;
color:#333;border:1px solid #ccc}
.badge.bad{background:#fdecea;border-color:#d62728;color:#a01010}.badge.ok{background:#e9f6ec;border-color:#59a14f;
color:#2d6a2d}.badge.warn{background:#fff1df;border-color:#e67e00;color:#8a4b00}
table{border-collapse:collapse;font-size:13px;width:100%}td,th{text-align:left;padding:4px 8px;
border-bottom:1px solid #eee;vertical-align:top}th{color:#555;font-weight:600}
ul{margin:4px 0 4px 18px;padding:0;font-size:12px;color:#444}li{margin:1px 0}
.replica{display:inline-block;margin:1px 6px 1px 0;padding:0 6px;border-radius:4px;border:1px solid #ccc;
font-size:12px;white-space:nowrap}.replica.Ready{border-color:#59a14f}.replica.Pending,.replica.NotReconciled{
border-color:#d62728}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif}
"""
#: The split picture's pages add these (a small fleet's page keeps :data:`_STYLE` alone, as it was).
_SPLIT_STYLE = """
section.attention,section.index,nav.pages{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;
margin:0 0 14px}section.attention{border-color:#d62728}nav.pages a{margin-right:12px}
.index a.cl{display:inline-block;font-size:12px;margin:1px 4px 1px 0;padding:0 5px;border-radius:4px;
border:1px solid #ccc;color:#222;text-decoration:none}.index a.cl.bad{border-color:#d62728;background:#fdecea}
ul.attention{color:#a01010}
"""


def _swatch(fill: str, title: str, stroke: str = "#555", dash: str = "") -> str:
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<svg width="16" height="16" class="swatch"><rect x="1" y="1" width="14" height="14" rx="2" fill="{fill}" '
        f'stroke="{stroke}"{dashed}><title>{_e(title)}</title></rect></svg>'
    )


def _legend(view: FleetView) -> str:
    items = [(_swatch(color_of(d), d.name), d.name) for d in view.deployments]
    items += [
        (_swatch("#ffffff", "free", "#999"), "free device"),
        (_swatch("url(#gf-foreign)", "held by another workload"), "held by another workload"),
        (_swatch("url(#gf-contended)", "claimed twice"), "claimed twice (overcommitted)"),
    ]
    items += [
        (_swatch(_TILE[s][1], _STATE_WORDS[s], _TILE[s][0], _TILE[s][2]), f"node {_STATE_WORDS[s]}")
        for s in (OVERCOMMITTED, UNAVAILABLE, TAINTED, DRIFTED, HELD, MISSING)
    ]
    spans = "".join(
        f'<span style="display:inline-flex;align-items:center;gap:4px;margin:2px 12px 2px 0;font-size:12px">'
        f"{swatch}{_e(text)}</span>"
        for swatch, text in items
    )
    return f'<section class="legend" id="legend"><h2>Legend</h2><div>{spans}</div></section>'


def _status_badge(status: str) -> str:
    kind = "ok" if status == "Ready" else "bad"
    return f'<span class="badge {kind}">{_e(status)}</span>'


def _replica_span(r: ReplicaView) -> str:
    return (
        f'<span class="replica {_e(r.readiness)}" data-replica="{_e(r.name)}" data-cluster="{_e(r.cluster)}" '
        f'data-readiness="{_e(r.readiness)}" title="{_e(r.detail or r.readiness)}">'
        f"{_e(r.cluster)} #{r.index} \u00b7 {_e('/'.join(r.pools))} \u00b7 {_e(_readiness_word(r.readiness))}"
        f"</span>"
    )


def _replicas_summed_up(d: DeploymentView, link: dict[str, str]) -> str:
    """A deployment's replicas on the main page of a split picture: counts by readiness and by pool, then the ones
    pending or not reconciled (at most :data:`MAIN_LISTED_REPLICAS`), each linked to its cluster's drawing."""
    if not d.replicas:
        return ""
    by_state: dict[str, int] = {}
    by_pool: dict[str, int] = {}
    for r in d.replicas:
        by_state[r.readiness] = by_state.get(r.readiness, 0) + 1
        for pool in r.pools:
            by_pool[pool] = by_pool.get(pool, 0) + 1
    clusters = len({r.cluster for r in d.replicas})
    states = ", ".join(f"{n} {_readiness_word(s)}" for s, n in sorted(by_state.items()))
    pools = ", ".join(f"{p} \u00d7{n}" for p, n in sorted(by_pool.items(), key=lambda kv: (-kv[1], kv[0]))[:8])
    more = f" (+{len(by_pool) - 8} more)" if len(by_pool) > 8 else ""
    out = f'<div class="meta">{len(d.replicas)} on {clusters} cluster(s): {_e(states)} \u00b7 pools {_e(pools)}{more}</div>'
    waiting = [r for r in d.replicas if r.readiness in (PENDING, NOT_RECONCILED)]
    for r in waiting[:MAIN_LISTED_REPLICAS]:
        out += f'<a href="{link[r.cluster]}">{_replica_span(r)}</a>' if r.cluster in link else _replica_span(r)
    if len(waiting) > MAIN_LISTED_REPLICAS:
        out += f'<span class="meta">and {len(waiting) - MAIN_LISTED_REPLICAS} more not running</span>'
    return out


def _deployments(
    view: FleetView,
    link: dict[str, str] | None = None,
    only: set[str] | None = None,
    heading: str = "Deployments",
) -> str:
    """Every deployment with its replicas; with ``link`` (a split picture's main page) their replicas summed up;
    with ``only`` (a cluster page) the deployments with replicas on those clusters, and those replicas."""
    rows = []
    for d in view.deployments:
        if link is not None:
            replicas = _replicas_summed_up(d, link)
        else:
            shown = d.replicas if only is None else [r for r in d.replicas if r.cluster in only]
            if only is not None and not shown:
                continue
            replicas = "".join(_replica_span(r) for r in shown)
        why = "".join(f"<li>{_e(line)}</li>" for line in d.why + d.warnings) if only is None else ""
        rows.append(
            f'<tr data-deployment="{_e(d.name)}" data-status="{_e(d.status)}">'
            f"<td>{_swatch(color_of(d), d.name)} <b>{_e(d.name)}</b>"
            f'<div class="meta">{_e(d.namespace or "")}</div></td>'
            f"<td>{d.scheduled}/{d.desired}</td><td>{_status_badge(d.status)}"
            f'<div class="meta">{_e(d.reason)}</div></td>'
            f"<td>{replicas or '-'}{f'<ul>{why}</ul>' if why else ''}</td></tr>"
        )
    return (
        f'<section class="deployments" id="deployments"><h2>{_e(heading)}</h2><table>'
        "<tr><th>deployment</th><th>replicas</th><th>status</th><th>replicas: cluster #index \u00b7 pools \u00b7 "
        "readiness</th></tr>" + "".join(rows) + "</table></section>"
    )


def _readiness_word(readiness: str) -> str:
    return {
        READY: "ready",
        PENDING: "pending",
        "NotReconciled": "not reconciled",
        "Rendered": "rendered",
        "Applied": "applied",
        "NotRead": "placed (readiness not read)",
    }.get(readiness, readiness)


# -- a pool's SVG -----------------------------------------------------------------------------------------------------


def _tile_size(tile: NodeTile) -> tuple[int, int, list[list[int]]]:
    """Width, height, and the rows of device indexes (a row per device entry, at most PER_ROW cells each)."""
    rows: list[list[int]] = []
    current: list[int] = []
    last = None
    for i, d in enumerate(tile.devices):
        if current and (d.entry != last or len(current) == PER_ROW):
            rows.append(current)
            current = []
        current.append(i)
        last = d.entry
    if current:
        rows.append(current)
    inner = max((len(r) * (CELL + GAP) - GAP for r in rows), default=0)
    width = max(inner + 2 * _TILE_PAD, 96)
    body = len(rows) * (CELL + GAP) if rows else 14
    return width, _LABEL_H + body + _FOOT_H + _TILE_PAD, rows


def _tile_svg(
    tile: NodeTile, x: int, y: int, deployments: dict[str, DeploymentView], cluster: str, pool: str
) -> tuple[str, int, int]:
    width, height, rows = _tile_size(tile)
    stroke, fill, dash = _TILE.get(tile.state, _TILE[IDLE])
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    title = [f"{cluster}/{pool} {tile.label}: {_STATE_WORDS.get(tile.state, tile.state)}"]
    title += [f"{d}: replica {i} ({r})" for d, r, i in tile.replicas]
    title += tile.causes
    out = [
        f'<g class="node" data-node="{_e(tile.label)}" data-state="{_e(tile.state)}">',
        f"<title>{_e(chr(10).join(title))}</title>",
        f'<rect x="{x}" y="{y}" width="{width}" height="{height}" rx="4" fill="{fill}" stroke="{stroke}" '
        f'stroke-width="1.5"{dashed}/>',
        f'<text x="{x + _TILE_PAD}" y="{y + 12}" font-size="11" fill="#333">{_e(_clip(tile.label, 16))}</text>',
    ]
    cy = y + _LABEL_H
    for row in rows:
        cx = x + _TILE_PAD
        for i in row:
            cell = tile.devices[i]
            dep = deployments.get(cell.deployment or "")
            if cell.state == USED:
                cfill, cstroke = color_of(dep), "#333"
            elif cell.state == FOREIGN:
                cfill, cstroke = "url(#gf-foreign)", "#8c6d46"
            elif cell.state == CONTENDED:
                cfill, cstroke = "url(#gf-contended)", "#d62728"
            else:
                cfill, cstroke = "#ffffff", "#9a9a9a"
            if cell.state in (USED, CONTENDED) and cell.deployment:
                what = f"{cell.deployment} replica {cell.index} ({cell.replica}), engine {cell.engine}, {cell.role}"
            elif cell.state == FOREIGN:
                what = "held by a claim of another workload"
            else:
                what = "free"
            who = (
                f' data-deployment="{_e(cell.deployment)}" data-replica="{_e(cell.replica)}"' if cell.deployment else ""
            )
            out.append(
                f'<rect class="device" x="{cx}" y="{cy}" width="{CELL}" height="{CELL}" rx="2" fill="{cfill}" '
                f'stroke="{cstroke}" data-device="{_e(cell.name)}" data-state="{_e(cell.state)}"{who}>'
                f"<title>{_e(f'{cell.name} - {cell.label}: {what}')}</title></rect>"
            )
            cx += CELL + GAP
        cy += CELL + GAP
    if not rows:
        out.append(
            f'<text x="{x + _TILE_PAD}" y="{cy + 10}" font-size="11" fill="{stroke}">'
            f"{_e(_STATE_WORDS.get(tile.state, tile.state))}</text>"
        )
        cy += 14
    foot = ""
    if tile.replicas:
        first = tile.replicas[0]
        roles = sorted(
            {c.role for c in tile.devices if (c.deployment, c.index) == (first[0], first[2]) and c.role}
            - {"Standalone"}
        )
        foot = f"{first[0]} #{first[2]}" + (f" {'/'.join(roles)}" if roles else "")
        foot += f" +{len(tile.replicas) - 1}" if len(tile.replicas) > 1 else ""
    elif tile.state == OVERCOMMITTED:
        foot = "overcommitted"
    elif tile.causes and rows:
        foot = _STATE_WORDS.get(tile.state, tile.state) if tile.state != IDLE else "partly held"
    elif tile.causes:
        foot = tile.causes[0]
    if foot:
        chars = max(8, (width - 2 * _TILE_PAD) // 6)
        out.append(
            f'<text x="{x + _TILE_PAD}" y="{cy + 10}" font-size="10" fill="#444">{_e(_clip(foot, chars))}</text>'
        )
    out.append("</g>")
    return "".join(out), width, height


def _pool_svg(pool: PoolView, cluster: str, deployments: dict[str, DeploymentView]) -> str:
    parts: list[str] = []
    x = y = 0
    row_height = right = 0
    tiles = list(pool.nodes)
    for tile in tiles:
        width, height, _rows = _tile_size(tile)
        if x and x + width > PAGE_WIDTH:
            x, y = 0, y + row_height + _TILE_GAP
            row_height = 0
        svg, width, height = _tile_svg(tile, x, y, deployments, cluster, pool.name)
        parts.append(svg)
        right = max(right, x + width)
        x += width + _TILE_GAP
        row_height = max(row_height, height)
    if pool.hidden_free:
        if x and x + 140 > PAGE_WIDTH:
            x, y = 0, y + row_height + _TILE_GAP
            row_height = 0
        parts.append(
            f'<g class="node" data-node="more" data-state="{IDLE}" data-count="{pool.hidden_free}">'
            f'<rect x="{x}" y="{y}" width="140" height="40" rx="4" fill="#fff" stroke="#b5b5b5" stroke-dasharray="2 2"/>'
            f'<text x="{x + 8}" y="{y + 24}" font-size="12" fill="#555">+{pool.hidden_free} free node(s)</text></g>'
        )
        row_height = max(row_height, 40)
        right = max(right, x + 140)
    total = y + row_height + 2 if parts else 20
    if not parts:
        parts.append('<text x="0" y="14" font-size="12" fill="#777">no nodes</text>')
        right = 80
    return (
        f'<svg class="pool" data-cluster="{_e(cluster)}" data-pool="{_e(pool.name)}" width="{right + 2}" '
        f'height="{total}" viewBox="-1 -1 {right + 2} {total}" role="img" '
        f'aria-label="{_e(f"pool {pool.name} of {cluster}")}">' + "".join(parts) + "</svg>"
    )


def _pool_heading(pool: PoolView) -> str:
    counts = f"{pool.used_slots} of {pool.slots} node(s) in use"
    if pool.labelled is not None:
        counts += f"; declared {pool.declared}, labelled {pool.labelled}, usable {pool.usable}"
    elif pool.slots != pool.declared:
        counts += f"; declared {pool.declared}"
    return (
        f"<h3>pool {_e(pool.name)} <span class='meta'>class {_e(pool.class_name)} \u00b7 {_e(pool.hardware)} per node "
        f"\u00b7 {_e(counts)}</span></h3>"
    )


_BAD_BADGES = ("unreachable", "not reconciled", "drained", "outside the play")


def _cluster(
    cluster: ClusterView, deployments: dict[str, DeploymentView], anchor: str | None = None, page: str | None = None
) -> str:
    """A cluster's section. In a split picture: ``anchor`` its id (links reach it), ``page`` the link to its page
    (from the main page), and why it needs attention above its pools."""
    badges = "".join(
        f'<span class="badge {"bad" if b in _BAD_BADGES else "warn"}">{_e(b)}</span>' for b in cluster.badges
    )
    if cluster.observed:
        badges += '<span class="badge">observed</span>'
    notes = "".join(f"<li>{_e(n)}</li>" for n in cluster.notes)
    pools = []
    for pool in cluster.pools:
        pool_notes = "".join(f"<li>{_e(n)}</li>" for n in pool.notes)
        pools.append(
            f'<div class="pool" data-pool="{_e(pool.name)}">{_pool_heading(pool)}'
            f"{_pool_svg(pool, cluster.name, deployments)}"
            f"{f'<ul class=drift>{pool_notes}</ul>' if pool_notes else ''}</div>"
        )
    provider = f' <span class="meta">{_e(cluster.provider)}</span>' if cluster.provider else ""
    split = ""
    if anchor is not None:
        reasons = "".join(f"<li>{_e(r)}</li>" for r in cluster.attention)
        split = f"<ul class=attention>{reasons}</ul>" if reasons else ""
        if page:
            badges += f' <a class="meta" href="{page}">its page</a>'
    ident = f' id="{anchor}"' if anchor is not None else ""
    return (
        f'<section class="cluster"{ident} data-cluster="{_e(cluster.name)}"><h2>{_e(cluster.name)}{provider}{badges}</h2>'
        f"{split}{f'<ul class=drift>{notes}</ul>' if notes else ''}"
        f"{''.join(pools) or '<p class=meta>no node pools</p>'}</section>"
    )


def _source(view: FleetView) -> str:
    return (
        "drawn from the clusters (apply mode; observed capacity where it was read)"
        if view.source == "clusters"
        else "drawn from the placement (render mode: what the rendered files ask for)"
    )


def _heading(view: FleetView, title: str | None) -> str:
    return title or f"gpufleet.serving \u00b7 {view.fleet or 'fleet'}"


def _head(heading: str, split: bool = False, page: bool = False) -> str:
    """The document's head: ``split`` adds the split picture's styles, ``page`` the mark of a cluster page."""
    return "".join(
        [
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
            # Nothing is loaded from anywhere: inline styles and SVG only.
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            GENERATOR if page else "",
            f"<title>{_e(heading)}</title><style>{_STYLE}{_SPLIT_STYLE if split else ''}</style></head><body>",
            _DEFS,
        ]
    )


def render_html(view: FleetView, title: str | None = None) -> str:
    """The page: a header with the summary, the legend, the deployments, then every cluster's pools."""
    deployments = {d.name: d for d in view.deployments}
    heading = _heading(view, title)
    return "".join(
        [
            _head(heading),
            f"<header><h1>{_e(heading)}</h1>",
            f"<p class='summary' id='summary'>{_e(view.summary)}</p>",
            f"<p class='meta'>mode {_e(view.mode)} \u00b7 capacity {_e(view.capacity)} \u00b7 {_e(_source(view))}. "
            "Nodes are placement's node slots of each pool; nodes observed unusable are named.</p></header>",
            _legend(view),
            _deployments(view),
            "<div class='clusters' id='clusters'>",
            "".join(_cluster(c, deployments) for c in view.clusters),
            "</div>",
            "</body></html>\n",
        ]
    )


# -- a large fleet: the main page and the cluster pages ----------------------------------------------------------------

#: Past this many clusters the picture is split: the main page and cluster pages beside it.
SPLIT_OVER = 200
#: A cluster page holds at most this many clusters, and no more once its drawings pass PAGE_BYTES (at least one).
CLUSTERS_PER_PAGE = 100
PAGE_BYTES = 2_000_000
#: The main page draws at most this many of the clusters that need attention in full; the others are listed.
MAIN_DRAWN = 50
#: Per deployment, the replicas pending or not reconciled the main page names (the cluster pages name every one).
MAIN_LISTED_REPLICAS = 20
#: A cluster page's file name, and the mark every cluster page carries (only such files are ever removed).
PAGE_NAME = re.compile(r"clusters-[0-9]{3,}\.html\Z")
GENERATOR = "<meta name='generator' content='gpufleet.serving fleet.html cluster pages'>"


@dataclass
class Picture:
    """What :func:`render_picture` draws: the main page, and the cluster pages by file name (none for a small fleet)
    in the directory :attr:`pages_dir` beside the main page."""

    main: str
    pages_dir: str
    pages: dict[str, str] = field(default_factory=dict)
    #: Per page: ``page`` (its path relative to the main page), ``first`` / ``last`` cluster, ``clusters``.
    index: list[dict[str, Any]] = field(default_factory=list)


def pages_dir(html_name: str) -> str:
    """The directory of the cluster pages beside a page named ``html_name``: ``fleet.html`` -> ``fleet``."""
    stem = re.sub(r"\.html?\Z", "", html_name, flags=re.I)
    return stem if stem and stem != html_name else f"{html_name}.pages"


def _href(*parts: str) -> str:
    return _e("/".join(quote(p, safe="") for p in parts))


def render_picture(view: FleetView, html_name: str = "fleet.html", title: str | None = None) -> Picture:
    """The fleet picture: :func:`render_html` for up to :data:`SPLIT_OVER` clusters; beyond, the main page and the
    cluster pages (see the module's docstring)."""
    folder = pages_dir(html_name)
    if len(view.clusters) <= SPLIT_OVER:
        return Picture(render_html(view, title), folder)
    deployments = {d.name: d for d in view.deployments}
    heading = _heading(view, title)
    drawn = [_cluster(c, deployments, anchor=f"c-{i}") for i, c in enumerate(view.clusters)]
    groups: list[list[int]] = []
    size = 0
    for i, text in enumerate(drawn):
        if not groups or len(groups[-1]) >= CLUSTERS_PER_PAGE or size + len(text) > PAGE_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += len(text)
    width = max(3, len(str(len(groups))))
    names = [f"clusters-{k + 1:0{width}d}.html" for k in range(len(groups))]
    page_of = {i: names[k] for k, group in enumerate(groups) for i in group}
    link = {c.name: _href(folder, page_of[i]) + f"#c-{i}" for i, c in enumerate(view.clusters)}
    picture = Picture("", folder)
    for k, group in enumerate(groups):
        first, last = view.clusters[group[0]], view.clusters[group[-1]]
        picture.index.append(
            {"page": f"{folder}/{names[k]}", "first": first.name, "last": last.name, "clusters": len(group)}
        )
        nav = [f'<a href="../{_href(html_name)}">\u2190 the fleet</a>']
        if k:
            nav.append(f'<a href="{_href(names[k - 1])}">\u2190 page {k}</a>')
        if k + 1 < len(groups):
            nav.append(f'<a href="{_href(names[k + 1])}">page {k + 2} \u2192</a>')
        page_heading = f"{heading} \u00b7 {first.name} \u2013 {last.name}"
        picture.pages[names[k]] = "".join(
            [
                _head(page_heading, split=True, page=True),
                f"<header><h1>{_e(page_heading)}</h1>",
                f"<p class='meta'>page {k + 1} of {len(groups)}: {len(group)} of {len(view.clusters)} clusters \u00b7 "
                f"mode {_e(view.mode)} \u00b7 capacity {_e(view.capacity)} \u00b7 {_e(_source(view))}.</p></header>",
                f"<nav class='pages'>{''.join(nav)}</nav>",
                _legend(view),
                _deployments(view, only={view.clusters[i].name for i in group}, heading="Replicas on these clusters"),
                "<div class='clusters' id='clusters'>",
                "".join(drawn[i] for i in group),
                "</div>",
                f"<nav class='pages'>{''.join(nav)}</nav>",
                "</body></html>\n",
            ]
        )
    picture.main = _main_page(view, heading, deployments, link, groups, names, folder)
    return picture


def _main_page(
    view: FleetView,
    heading: str,
    deployments: dict[str, DeploymentView],
    link: dict[str, str],
    groups: list[list[int]],
    names: list[str],
    folder: str,
) -> str:
    attention = [(i, c) for i, c in enumerate(view.clusters) if c.attention]
    kinds: dict[str, int] = {}
    for _i, c in attention:
        for reason in {re.sub(r"\A[0-9]+ ", "", r) for r in c.attention}:
            kinds[reason] = kinds.get(reason, 0) + 1
    short = view.short()
    waiting = sum(1 for d in view.deployments for r in d.replicas if r.readiness in (PENDING, NOT_RECONCILED))
    items = []
    if short:
        items.append(
            f"<li>{len(short)} deployment(s) not Ready: "
            + ", ".join(f"{_e(d.name)} ({d.scheduled}/{d.desired}, {_e(d.status)})" for d in short)
            + "</li>"
        )
    if attention:
        counted = ", ".join(f"{n} {_e(k)}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
        items.append(f"<li>{len(attention)} of {len(view.clusters)} clusters need attention: {counted}</li>")
    if waiting:
        items.append(f"<li>{waiting} replica(s) pending or not reconciled</li>")
    if not items:
        items.append("<li>nothing: every deployment is Ready and no cluster needs attention</li>")
    full = "".join(_cluster(c, deployments, anchor=f"a-{i}", page=link[c.name]) for i, c in attention[:MAIN_DRAWN])
    rest = "".join(
        f'<a class="cl bad" href="{link[c.name]}" title="{_e("; ".join(c.attention))}">{_e(c.name)}</a>'
        for _i, c in attention[MAIN_DRAWN:]
    )
    index = []
    for k, group in enumerate(groups):
        clusters = [view.clusters[i] for i in group]
        used = sum(p.used_slots for c in clusters for p in c.pools)
        slots = sum(p.slots for c in clusters for p in c.pools)
        bad = sum(1 for c in clusters if c.attention)
        chips = "".join(
            f'<a class="cl{" bad" if c.attention else ""}" href="{link[c.name]}"'
            + (f' title="{_e("; ".join(c.attention))}"' if c.attention else "")
            + f">{_e(c.name)}</a>"
            for c in clusters
        )
        index.append(
            f'<div class="page" data-page="{_e(names[k])}"><h3><a href="{_href(folder, names[k])}">page {k + 1}</a> '
            f"<span class='meta'>{_e(clusters[0].name)} \u2013 {_e(clusters[-1].name)} \u00b7 {len(clusters)} clusters "
            f"\u00b7 {used} of {slots} node(s) in use \u00b7 {bad} need attention</span></h3><div>{chips}</div></div>"
        )
    return "".join(
        [
            _head(heading, split=True),
            f"<header><h1>{_e(heading)}</h1>",
            f"<p class='summary' id='summary'>{_e(view.summary)}</p>",
            f"<p class='meta'>mode {_e(view.mode)} \u00b7 capacity {_e(view.capacity)} \u00b7 {_e(_source(view))}. "
            f"{len(view.clusters)} clusters: more than {SPLIT_OVER}, so each is drawn on a cluster page beside this one "
            f"({len(groups)} pages); here, the clusters that need attention.</p></header>",
            f"<section class='attention' id='attention'><h2>Needs attention</h2><ul>{''.join(items)}</ul></section>",
            _deployments(view, link=link),
            _legend(view),
            "<div class='clusters' id='clusters'>",
            full,
            "</div>",
            (
                f"<section class='index' id='more'><h2>{len(attention) - MAIN_DRAWN} more clusters need attention"
                f"</h2><div>{rest}</div></section>"
                if rest
                else ""
            ),
            f"<section class='index' id='index'><h2>Every cluster</h2>{''.join(index)}</section>",
            "</body></html>\n",
        ]
    )


__all__: Sequence[str] = ("PALETTE", "Picture", "color_of", "pages_dir", "render_html", "render_picture")
