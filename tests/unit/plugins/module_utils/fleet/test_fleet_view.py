"""The fleet picture's model (fleet.view) and page (fleet.html), over a fleet placed and observed by the real code."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import fleet_view_case as case
import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.fleet import view as fv
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.html import PALETTE, render_html


def view(**kwargs: Any) -> fv.FleetView:
    options: dict[str, Any] = {
        "mode": "apply",
        "capacity": "observed",
        "drained": ["beta"],
        "applied": {"pending": [], "clusters": {}},
        "summary": "2 deployment(s) Ready; Degraded (see above): chat, huge.",
    }
    placement = kwargs.pop("placement", None) or case.placement()
    options.update(kwargs)
    return fv.build_view(case.fleet(), placement, **options)


def pool(v: fv.FleetView, cluster: str, name: str) -> fv.PoolView:
    return next(p for c in v.clusters if c.name == cluster for p in c.pools if p.name == name)


def cells(tile: fv.NodeTile) -> list[tuple[str, str, str | None, int | None]]:
    return [(c.name, c.state, c.deployment, c.index) for c in tile.devices]


def test_devices_show_which_replica_holds_them_and_what_others_hold():
    dgx = pool(view(), "alpha", "dgx")
    # observed capacity: 2 usable nodes of 4 declared (one cordoned, one not found)
    assert (dgx.declared, dgx.labelled, dgx.usable, dgx.slots) == (4, 3, 2, 2)
    node0, node1 = dgx.nodes[:2]
    # the 8-GPU member holds a whole node; the 2-GPU replicas share the node other workloads hold 2 GPUs of
    assert node0.whole and node0.state == fv.IN_USE
    assert {(c.state, c.deployment) for c in node0.devices} == {(fv.USED, "whole")}
    assert cells(node1) == [
        ("gpu-0", fv.USED, "pairs", 0),
        ("gpu-1", fv.USED, "pairs", 0),
        ("gpu-2", fv.USED, "pairs", 1),
        ("gpu-3", fv.USED, "pairs", 1),
        ("gpu-4", fv.USED, "pairs", 2),
        ("gpu-5", fv.USED, "pairs", 2),
        ("gpu-6", fv.FOREIGN, None, None),
        ("gpu-7", fv.FOREIGN, None, None),
    ]
    assert [r[0] for r in node1.replicas] == ["pairs"] * 3
    assert any("held by claims of other workloads (gpu-6, gpu-7)" in c for c in node1.causes)


def test_nodes_observed_unusable_and_missing_are_drawn_with_their_causes():
    v = view()
    dgx, l4 = pool(v, "alpha", "dgx"), pool(v, "alpha", "l4")
    unusable = {(n.label, n.state) for n in dgx.nodes[2:] + l4.nodes[1:]}
    assert unusable == {
        ("dgx-2", fv.UNAVAILABLE),
        ("missing 1", fv.MISSING),
        (case.EVIL_NODE, fv.TAINTED),
        ("l4-2", fv.DRIFTED),
    }
    dgx2 = next(n for n in dgx.nodes if n.label == "dgx-2")
    assert dgx2.causes == ["cordoned"] and dgx2.slot is None
    assert any("notes" in p.to_dict() for p in (dgx, l4))
    beta = next(c for c in v.clusters if c.name == "beta")
    assert beta.badges == ["drained"] and not beta.observed
    assert [n.state for n in beta.pools[0].nodes] == [fv.IDLE, fv.IDLE]


def test_deployments_list_their_replicas_readiness_and_why_they_are_short():
    v = view(
        applied={"pending": [{"cluster": "alpha", "deployment": "pairs", "name": "x", "message": "m"}], "clusters": {}}
    )
    deps = {d.name: d for d in v.deployments}
    assert [d.name for d in v.deployments] == ["pairs", "whole", "chat", "huge"]
    assert [d.color for d in v.deployments] == [0, 1, 2, 3]
    assert (deps["huge"].status, deps["huge"].scheduled, deps["huge"].desired) == ("Degraded", 0, 2)
    # the value the selector read is in the explanation (81559Mi H100s never satisfy memory >= 80Gi)
    assert any('quantity("80Gi")' in line and "NVIDIA H100" in line for line in deps["huge"].why)
    assert any("beta: taint gpufleet.io/drain=true:NoExecute" in line for line in deps["chat"].why)
    assert deps["pairs"].why == []
    assert {r.readiness for r in deps["pairs"].replicas} == {fv.READY}

    pairs0 = deps["pairs"].replicas[0].name
    pending = {"pending": [{"cluster": "alpha", "deployment": "pairs", "name": f"{pairs0}-main", "message": "0/1"}]}
    deps = {d.name: d for d in view(applied=pending).deployments}
    assert next((r.readiness, r.detail) for r in deps["pairs"].replicas) == (fv.PENDING, "0/1")
    assert {r.readiness for r in deps["pairs"].replicas[1:]} == {fv.READY}

    deps = {d.name: d for d in view(not_reconciled={"alpha": "connection refused"}).deployments}
    assert {(r.readiness, r.detail) for r in deps["chat"].replicas} == {(fv.NOT_RECONCILED, "connection refused")}
    assert {r.readiness for r in view(applied=None).deployments[0].replicas} == {fv.NOT_READ}
    assert {r.readiness for r in view(applied=None, waited=False).deployments[0].replicas} == {fv.NOT_READ}
    assert {r.readiness for r in view(waited=False).deployments[0].replicas} == {fv.APPLIED}
    rendered = view(mode="render", capacity="declared", applied=None, placement=case.placement("declared"))
    assert rendered.source == "placement"
    assert {r.readiness for d in rendered.deployments for r in d.replicas} == {fv.RENDERED}


def test_declared_capacity_draws_every_declared_node():
    v = view(mode="render", capacity="declared", applied=None, placement=case.placement("declared"))
    dgx = pool(v, "alpha", "dgx")
    assert dgx.slots == 4
    assert [n.slot for n in dgx.nodes if n.slot is not None] == [0, 1, 2, 3]


def _replica(dep: str, index: int, pool_: str, nodes: int = 1, allocations: list | None = None) -> dict[str, Any]:
    member: dict[str, Any] = {"role": "Standalone", "pool": pool_, "nodes": nodes}
    if allocations:
        member["allocations"] = allocations
    return {
        "deployment": dep,
        "cluster": "beta",
        "index": index,
        "name": f"{dep}-r{index}",
        "engines": [{"name": "main", "copies": 1, "members": [member]}],
    }


def test_overcommitted_slots_and_devices_claimed_twice_show():
    """Records beyond the pool's nodes (a pool that shrank under retained replicas) and two records on one device."""
    placement = {
        "replicas": [
            _replica("chat", 0, "l4", allocations=[{"node": 0, "devices": ["gpu-0"]}]),
            _replica("pairs", 0, "l4", allocations=[{"node": 0, "devices": ["gpu-0"]}]),
            _replica("pairs", 1, "l4"),
            _replica("whole", 0, "l4"),
            _replica("huge", 0, "l4", allocations=[{"node": 5, "devices": ["gpu-0"]}]),
        ]
    }
    v = fv.build_view(case.fleet(), placement)
    beta = pool(v, "beta", "l4")
    assert [(n.label, n.state) for n in beta.nodes] == [
        ("node 0", fv.IN_USE),
        ("node 1", fv.IN_USE),
        ("node 2", fv.OVERCOMMITTED),
        ("node 5", fv.OVERCOMMITTED),
    ]
    assert cells(beta.nodes[0]) == [("gpu-0", fv.CONTENDED, "pairs", 0)]
    assert beta.nodes[2].causes == ["beyond the pool's 2 node(s): the pool is overcommitted"]


def test_a_large_pool_sums_up_its_free_nodes():
    fleet = case.fleet()
    fleet["clusters"][1]["pools"][0]["nodes"] = 500
    v = fv.build_view(fleet, {"replicas": [_replica("chat", 0, "l4")]})
    big = pool(v, "beta", "l4")
    assert len(big.nodes) == fv.MAX_DRAWN_SLOTS and big.hidden_free == 500 - fv.MAX_DRAWN_SLOTS
    # the report counts every free slot, drawn or not, as ranges: node 0 holds chat's replica
    assert (big.to_dict()["free_nodes"], big.to_dict()["free_slots"]) == (499, [[1, 499]])
    assert 'data-count="452"' in render_html(v)


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Collect:
    parser = _Collect()
    parser.feed(page)
    return parser


def test_the_page_escapes_every_string_from_the_inventory_and_the_clusters():
    page = render_html(view())
    for evil in (case.EVIL_NODE, case.EVIL_TAINT):
        assert evil not in page
    doc = parse(page)
    assert not [t for t, _a in doc.tags if t in ("script", "img", "iframe", "object", "embed", "link")]
    assert not [k for _t, attrs in doc.tags for k in attrs if k.startswith("on")]
    # ... and still shows them, as text
    text = "".join(doc.text)
    assert case.EVIL_NODE in text and case.EVIL_TAINT in text
    assert any(a.get("data-node") == case.EVIL_NODE for _t, a in doc.tags)


@pytest.mark.parametrize(
    "name", ['x" onload="alert(1)', "</title><script>alert(1)</script>", "a'b<c>&amp;"], ids=["attr", "tag", "mix"]
)
def test_hostile_names_stay_text(name):
    fleet = case.fleet()
    fleet["name"] = name
    fleet["clusters"][1]["name"] = name
    placement = {"replicas": [{**_replica("chat", 0, "l4"), "cluster": name, "name": name}]}
    page = render_html(fv.build_view(fleet, placement, summary=name))
    doc = parse(page)
    assert not [t for t, _a in doc.tags if t == "script"]
    assert not [k for _t, attrs in doc.tags for k in attrs if k.startswith("on")]
    assert [a["data-cluster"] for t, a in doc.tags if t == "section" and "data-cluster" in a][1] == name
    assert name in "".join(doc.text)


def test_the_page_loads_nothing_from_anywhere():
    page = render_html(view())
    doc = parse(page)
    csp = [a for t, a in doc.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and (csp[0]["content"] or "").startswith("default-src 'none'")
    lowered = page.lower()
    for needle in ("http://", "https://", "<script", "<link", "@import", "@font-face"):
        assert needle not in lowered, needle
    assert not [(t, k) for t, attrs in doc.tags for k in attrs if k in ("src", "href", "xlink:href", "action")]
    assert all(u.startswith("url(#gf-") for u in _urls(page))
    # every deployment has its own colour, from the palette
    fills = {a.get("fill") for t, a in doc.tags if t == "rect" and a.get("data-deployment") == "pairs"}
    assert fills == {PALETTE[0]}


def _urls(page: str) -> list[str]:
    out, at = [], page.find("url(")
    while at >= 0:
        out.append(page[at : page.find(")", at) + 1])
        at = page.find("url(", at + 1)
    return out


def test_the_report_document_is_json_and_holds_no_secret():
    placement = case.placement()
    v = view()
    doc = fv.report_document(v, placement, ["line 1", "see https://user:pw@example.com/x?token=abc"])
    text = json.dumps(doc)
    assert json.loads(text)["version"] == fv.VERSION
    assert doc["deployments"]["huge"]["status"] == "Degraded"
    assert doc["degraded"] == ["chat", "huge"]
    assert doc["drift"] == placement["drift_lines"]
    dgx = doc["clusters"][0]["pools"][0]
    # version 2: each holder once with its devices, the devices others' claims hold by name
    node1 = dgx["nodes"][1]
    assert node1["foreign"] == ["gpu-6", "gpu-7"]
    assert [(h["deployment"], h["index"], h["devices"]) for h in node1["holders"]] == [
        ("pairs", 0, ["gpu-0", "gpu-1"]),
        ("pairs", 1, ["gpu-2", "gpu-3"]),
        ("pairs", 2, ["gpu-4", "gpu-5"]),
    ]
    assert doc["classes"]["h100-8x"]["hardware"] == "8x gpu (NVIDIA H100 80GB HBM3)"
    alpha = doc["clusters"][0]
    assert alpha["attention"] == [
        "1 node(s) unavailable",
        "1 node(s) tainted",
        "1 node(s) drifted",
        "1 node(s) missing",
        "5 drift note(s)",
    ]
    # the pod template (its environment) never reaches the report or the page; URLs in text are redacted
    assert "sentinel-revision-7f3a" in json.dumps(case.fleet())
    for out in (text, render_html(v)):
        assert "sentinel-revision-7f3a" not in out
    assert "pw@" not in text and "token=abc" not in text and "token=<redacted>" in text
