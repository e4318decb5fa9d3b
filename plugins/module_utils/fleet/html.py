# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""``fleet.html``: the fleet's occupancy (a :class:`fleet.view.FleetView`) as one self-contained page.

Clusters x pools x nodes x devices as inline SVG, and per deployment its replicas and their readiness. The page loads
nothing: no script, no font, no image, no style sheet from anywhere (its Content-Security-Policy says so to the
browser as well), so it opens from a CI artifact, a mail attachment or a file share as it is.

Every string drawn comes from the inventory or from the clusters (node names, taint values, claim names): untrusted
input, escaped for HTML wherever it is written, in text and in attributes alike (:func:`_e`). Geometry is computed
here from counts, colours come from a fixed palette; nothing a user wrote ends up in a tag, an attribute name, a
style or a URL.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.view import (
    CONTENDED,
    DRIFTED,
    FOREIGN,
    HELD,
    IDLE,
    IN_USE,
    MISSING,
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


def _deployments(view: FleetView) -> str:
    rows = []
    for d in view.deployments:
        replicas = "".join(
            f'<span class="replica {_e(r.readiness)}" data-replica="{_e(r.name)}" data-cluster="{_e(r.cluster)}" '
            f'data-readiness="{_e(r.readiness)}" title="{_e(r.detail or r.readiness)}">'
            f"{_e(r.cluster)} #{r.index} \u00b7 {_e('/'.join(r.pools))} \u00b7 {_e(_readiness_word(r.readiness))}"
            f"</span>"
            for r in d.replicas
        )
        why = "".join(f"<li>{_e(line)}</li>" for line in d.why + d.warnings)
        rows.append(
            f'<tr data-deployment="{_e(d.name)}" data-status="{_e(d.status)}">'
            f"<td>{_swatch(color_of(d), d.name)} <b>{_e(d.name)}</b>"
            f'<div class="meta">{_e(d.namespace or "")}</div></td>'
            f"<td>{d.scheduled}/{d.desired}</td><td>{_status_badge(d.status)}"
            f'<div class="meta">{_e(d.reason)}</div></td>'
            f"<td>{replicas or '-'}{f'<ul>{why}</ul>' if why else ''}</td></tr>"
        )
    return (
        '<section class="deployments" id="deployments"><h2>Deployments</h2><table>'
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


def _cluster(cluster: ClusterView, deployments: dict[str, DeploymentView]) -> str:
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
    return (
        f'<section class="cluster" data-cluster="{_e(cluster.name)}"><h2>{_e(cluster.name)}{provider}{badges}</h2>'
        f"{f'<ul class=drift>{notes}</ul>' if notes else ''}{''.join(pools) or '<p class=meta>no node pools</p>'}"
        "</section>"
    )


def render_html(view: FleetView, title: str | None = None) -> str:
    """The page: a header with the summary, the legend, the deployments, then every cluster's pools."""
    deployments = {d.name: d for d in view.deployments}
    name = view.fleet or "fleet"
    source = (
        "drawn from the clusters (apply mode; observed capacity where it was read)"
        if view.source == "clusters"
        else "drawn from the placement (render mode: what the rendered files ask for)"
    )
    heading = title or f"gpufleet.serving \u00b7 {name}"
    return "".join(
        [
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
            # Nothing is loaded from anywhere: inline styles and SVG only.
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<title>{_e(heading)}</title><style>{_STYLE}</style></head><body>",
            _DEFS,
            f"<header><h1>{_e(heading)}</h1>",
            f"<p class='summary' id='summary'>{_e(view.summary)}</p>",
            f"<p class='meta'>mode {_e(view.mode)} \u00b7 capacity {_e(view.capacity)} \u00b7 {_e(source)}. "
            "Nodes are placement's node slots of each pool; nodes observed unusable are named.</p></header>",
            _legend(view),
            _deployments(view),
            "<div class='clusters' id='clusters'>",
            "".join(_cluster(c, deployments) for c in view.clusters),
            "</div>",
            "</body></html>\n",
        ]
    )


__all__: Sequence[str] = ("PALETTE", "color_of", "render_html")
