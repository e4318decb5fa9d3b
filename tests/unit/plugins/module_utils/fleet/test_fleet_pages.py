"""A large fleet's picture (fleet.html past SPLIT_OVER clusters): the main page with what needs attention, cluster
pages beside it, each bounded; links that resolve; the report files written only as files this collection owns (no
symlink followed, stale pages removed, nothing else); and the report (version 2) staying small and complete."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import fleet_view_case as case
import pytest
from action_case import run_action

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet import html as fh
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet import view as fv
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.pages import write_picture

ATTENTION = {case.DRAINED, case.OVERCOMMITTED, case.NOT_RECONCILED, case.PENDING}


def large_view(clusters: int = 350, evil: str | None = None) -> fv.FleetView:
    fleet, placement, options = case.large(clusters, evil)
    return fv.build_view(fleet, placement, **options)


def small_view() -> fv.FleetView:
    return fv.build_view(case.fleet(), case.placement(), mode="apply", capacity="observed", drained=["beta"])


class Page(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def drawn(self) -> list[str]:
        """The clusters drawn in full (their pools' SVG)."""
        return list(dict.fromkeys(a["data-cluster"] for t, a in self.tags if t == "svg" and "data-cluster" in a))

    def hrefs(self) -> list[str]:
        return [a["href"] for t, a in self.tags if "href" in a]

    def ids(self) -> set[str]:
        return {a["id"] for _t, a in self.tags if "id" in a}


def test_a_small_fleet_is_one_page_as_before(tmp_path):
    view = small_view()
    picture = fh.render_picture(view)
    assert picture.main == fh.render_html(view) and picture.pages == {} and picture.index == []
    out = write_picture(tmp_path / "fleet.html", view)
    assert out["pages"] == [] and out["removed"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.html"]
    assert len(large_view(fh.SPLIT_OVER).clusters) == fh.SPLIT_OVER
    assert fh.render_picture(large_view(fh.SPLIT_OVER)).pages == {}  # the threshold itself is one page


def test_a_large_fleet_is_a_main_page_with_what_needs_attention_and_bounded_cluster_pages():
    view = large_view(350)
    picture = fh.render_picture(view)
    assert list(picture.pages) == [f"clusters-00{k}.html" for k in (1, 2, 3, 4)]
    assert [p["clusters"] for p in picture.index] == [100, 100, 100, 50]
    assert picture.index[1] == {
        "page": "fleet/clusters-002.html",
        "first": "cluster-0100",
        "last": "cluster-0199",
        "clusters": 100,
    }
    main = Page(picture.main)
    # the main page draws the clusters that need attention, not the healthy ones; the pages draw each cluster once
    assert set(main.drawn()) == ATTENTION
    drawn = [c for page in picture.pages.values() for c in Page(page).drawn()]
    assert drawn == [c.name for c in view.clusters]
    text = " ".join(main.text)
    assert "4 of 350 clusters need attention" in text
    assert "1 deployment(s) not Ready: huge (0/2, Degraded)" in text
    for reason in ("drained", "node(s) overcommitted", "not reconciled", "replica(s) pending or not reconciled"):
        assert reason in text, reason
    # every deployment has its line; the pending replica is named and linked to its cluster's drawing
    assert [a["data-deployment"] for t, a in main.tags if t == "tr" and "data-deployment" in a] == [
        "chat",
        "pairs",
        "huge",
    ]
    named = [a["data-cluster"] for t, a in main.tags if t == "span" and "data-readiness" in a]
    assert sorted(named) == sorted([case.PENDING, case.NOT_RECONCILED, case.NOT_RECONCILED])
    # each page is bounded: its drawings by PAGE_BYTES (plus its header and the replicas on its clusters)
    assert max(len(p.encode()) for p in picture.pages.values()) < fh.PAGE_BYTES + 200_000
    assert len(picture.main.encode()) < 150_000
    # a cluster page lists only the replicas on its clusters
    first = Page(picture.pages["clusters-001.html"])
    on_page = {a["data-cluster"] for t, a in first.tags if t == "span" and "data-cluster" in a}
    assert on_page == {f"cluster-{i:04d}" for i in range(100)}


def test_pages_close_once_their_drawings_pass_the_byte_budget(monkeypatch):
    monkeypatch.setattr(fh, "PAGE_BYTES", 20_000)
    view = large_view(250)
    drawn = {c.name: len(fh._cluster(c, {}, anchor="c-0")) for c in view.clusters}
    picture = fh.render_picture(view)
    assert len(picture.pages) > 250 // fh.CLUSTERS_PER_PAGE + 1
    for page in picture.pages.values():
        names = Page(page).drawn()
        assert len(names) == 1 or sum(drawn[n] for n in names) <= 20_000 + 100 * len(names)


def _resolve(page: Path, href: str) -> tuple[Path, str]:
    parts = urlsplit(href)
    assert not parts.scheme and not parts.netloc and not parts.path.startswith("/"), href
    return (page.parent / unquote(parts.path)).resolve() if parts.path else page, parts.fragment


@pytest.mark.parametrize(
    ("name", "folder"),
    [
        ("fleet.html", "fleet"),
        ("placement-state.fleet.html", "placement-state.fleet"),
        ("my fleet #1.htm", "my fleet #1"),
    ],
)
def test_every_link_resolves_to_a_written_page_and_an_element_on_it(tmp_path, name, folder):
    out = write_picture(tmp_path / name, large_view(350))
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == sorted([name] + [f"{folder}/clusters-00{k}.html" for k in (1, 2, 3, 4)])
    assert [p["page"] for p in out["pages"]] == [f"{folder}/clusters-00{k}.html" for k in (1, 2, 3, 4)]
    seen = 0
    for rel in files:
        page = tmp_path / rel
        doc = Page(page.read_text(encoding="utf-8"))
        for href in doc.hrefs():
            target, fragment = _resolve(page, href)
            assert target.is_file(), (rel, href)
            if fragment:
                assert fragment in Page(target.read_text(encoding="utf-8")).ids(), (rel, href)
            seen += 1
    assert seen > 350  # the main page's index links every cluster


def test_the_split_pages_keep_the_page_rules_and_hostile_names_stay_text(tmp_path):
    evil = '"><script>alert(1)</script><a href="https://x.example/'
    picture = fh.render_picture(large_view(250, evil=evil))
    for text in [picture.main, *picture.pages.values()]:
        doc = Page(text)
        assert not [t for t, _a in doc.tags if t in ("script", "img", "iframe", "object", "embed", "link")]
        assert not [k for _t, attrs in doc.tags for k in attrs if k.startswith("on")]
        csp = [a for t, a in doc.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
        assert csp and csp[0]["content"] == "default-src 'none'; style-src 'unsafe-inline'"
        assert all(not urlsplit(h).scheme and "script" not in h for h in doc.hrefs())
        assert not [(t, k) for t, attrs in doc.tags for k in attrs if k in ("src", "xlink:href", "action")]
        assert "<script" not in text.lower()  # the name's markup is text (its URL too: in no href, see above)
    assert evil in "".join(Page(picture.pages["clusters-001.html"]).text)


def test_a_symlink_in_place_of_a_page_or_the_pages_directory_is_refused(tmp_path):
    outside = tmp_path / "outside.html"
    outside.write_text("not yours", encoding="utf-8")
    root = tmp_path / "state"
    (root / "fleet").mkdir(parents=True)
    (root / "fleet" / "clusters-002.html").symlink_to(outside)
    with pytest.raises(GpufleetError, match=r"clusters-002\.html is a symlink"):
        write_picture(root / "fleet.html", large_view(250))
    assert outside.read_text(encoding="utf-8") == "not yours"
    assert not (root / "fleet.html").exists() and not (root / "fleet" / "clusters-001.html").exists()

    (root / "fleet" / "clusters-002.html").unlink()
    (root / "fleet").rmdir()
    (root / "fleet").symlink_to(tmp_path)
    with pytest.raises(GpufleetError, match=r"cluster pages.*is a symlink"):
        write_picture(root / "fleet.html", large_view(250))
    assert not (root / "fleet.html").exists() and not (tmp_path / "clusters-001.html").exists()

    (root / "fleet").unlink()
    (root / "fleet.html").symlink_to(outside)
    with pytest.raises(GpufleetError, match=r"fleet\.html is a symlink"):
        write_picture(root / "fleet.html", small_view())
    assert outside.read_text(encoding="utf-8") == "not yours"


def test_shrinking_the_fleet_removes_the_stale_pages_and_nothing_else(tmp_path):
    main = tmp_path / "fleet.html"
    write_picture(main, large_view(350))
    folder = tmp_path / "fleet"
    (folder / "notes.html").write_text("mine", encoding="utf-8")
    (folder / "clusters-009.html").write_text("<!DOCTYPE html><p>a page of my own</p>", encoding="utf-8")
    out = write_picture(main, large_view(250))
    assert out["removed"] == ["fleet/clusters-004.html"]
    assert sorted(p.name for p in folder.iterdir()) == [
        "clusters-001.html",
        "clusters-002.html",
        "clusters-003.html",
        "clusters-009.html",
        "notes.html",
    ]
    out = write_picture(main, small_view())
    assert out["removed"] == [f"fleet/clusters-00{k}.html" for k in (1, 2, 3)]
    assert sorted(p.name for p in folder.iterdir()) == ["clusters-009.html", "notes.html"]
    assert "<svg" in main.read_text(encoding="utf-8") and 'id="index"' not in main.read_text(encoding="utf-8")
    for name in ("clusters-009.html", "notes.html"):
        (folder / name).unlink()
    write_picture(main, large_view(250))
    write_picture(main, small_view())
    assert not folder.exists()  # emptied of its pages: removed


def test_unchanged_pages_are_not_written_again(tmp_path):
    view = large_view(250)
    first = write_picture(tmp_path / "fleet.html", view)
    assert first["written"] == [f"fleet/clusters-00{k}.html" for k in (1, 2, 3)] + ["fleet.html"]
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.html")}
    again = write_picture(tmp_path / "fleet.html", view)
    assert again["written"] == [] and again["removed"] == []
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.html")} == stamps


def _holders(doc: dict[str, Any]) -> set[str]:
    return {
        h["replica"] for c in doc["clusters"] for p in c["pools"] for n in p["nodes"] for h in n.get("holders") or []
    }


def test_the_report_sums_up_free_nodes_and_names_each_holder_once():
    fleet, placement, options = case.large(350)
    view = fv.build_view(fleet, placement, **options)
    doc = fv.report_document(view, placement, ["line"], html_file="fleet.html", html_pages=[{"page": "p"}])
    text = fv.report_text(doc)
    assert json.loads(text) == json.loads(json.dumps(doc)) and doc["version"] == 2
    assert doc["html_pages"] == [{"page": "p"}]
    # complete: every replica is on the node it holds, with its devices; each pool's slots are accounted for
    assert _holders(doc) == {r["replica"] for d in doc["deployments"].values() for r in d["replicas"]}
    dgx0 = doc["clusters"][0]["pools"][0]
    assert dgx0["free_slots"] == [[1, 1]] and dgx0["free_nodes"] == 1
    assert dgx0["nodes"] == [
        {
            "holders": [
                {
                    "deployment": "pairs",
                    "devices": ["gpu-0", "gpu-1"],
                    "engine": "main",
                    "index": 0,
                    "replica": "pairs-cluster-0000-0",
                    "role": "Standalone",
                }
            ],
            "node": "node 0",
            "slot": 0,
            "state": "in-use",
        }
    ]
    assert doc["classes"]["h100-8x"]["devices"][7] == {"name": "gpu-7", "entry": "gpu"}
    for cluster in doc["clusters"]:
        for pool in cluster["pools"]:
            listed = [n["slot"] for n in pool["nodes"] if n["slot"] is not None and n["slot"] < pool["slots"]]
            free = [s for a, b in pool["free_slots"] for s in range(a, b + 1)]
            assert sorted(listed + free) == list(range(pool["slots"])), (cluster["cluster"], pool["pool"])
    over = next(c for c in doc["clusters"] if c["cluster"] == case.OVERCOMMITTED)
    assert over["attention"] == ["1 node(s) overcommitted"]
    assert [c["cluster"] for c in doc["clusters"] if c["attention"]] == sorted(ATTENTION)
    # a detail only where it says more than the readiness
    chat = {r["cluster"]: r for r in doc["deployments"]["chat"]["replicas"]}
    assert chat[case.PENDING]["detail"] == "0/1 ready" and "detail" not in chat["cluster-0000"]
    # one line per node: small at this size (the version-1 document was about 7x larger)
    assert len(text) < 350 * 1_200
    assert re.search(r'^      \{"holders": \[\{"deployment": "chat"', text, re.M)


def test_the_action_writes_the_pages_and_says_so(tmp_path):
    fleet, placement, options = case.large(250)
    args = {
        "fleet": fleet,
        "placement": placement,
        "lines": ["a line", options["summary"]],
        "summary": None,
        "level": "full",
        "report_file": str(tmp_path / "report.json"),
        "html_file": str(tmp_path / "fleet.html"),
        "mode": "apply",
        "capacity": "declared",
        "drained": options["drained"],
        "cordoned": [],
        "unreachable": [],
        "outside_play": [],
        "applied": options["applied"],
        "waited": True,
        "not_reconciled": options["not_reconciled"],
    }
    result = run_action("fleet_report", args)
    assert not result.get("failed"), result.get("msg")
    assert result["gpufleet_report"]["html_pages"] == 3
    assert result["msg"].splitlines()[-1] == (
        f"Written: report {tmp_path}/report.json; picture {tmp_path}/fleet.html (and 3 cluster pages in fleet/ beside it)"
    )
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert [p["page"] for p in report["html_pages"]] == [f"fleet/clusters-00{k}.html" for k in (1, 2, 3)]
    assert sorted(os.listdir(tmp_path / "fleet")) == [f"clusters-00{k}.html" for k in (1, 2, 3)]
    (tmp_path / "report.json").unlink()
    (tmp_path / "report.json").symlink_to(tmp_path / "fleet.html")
    failed = run_action("fleet_report", args)
    assert failed.get("failed") and "report.json is a symlink" in failed["msg"]


def test_the_main_page_draws_at_most_main_drawn_clusters_and_lists_the_others(monkeypatch):
    monkeypatch.setattr(fh, "MAIN_DRAWN", 2)
    main = Page(fh.render_picture(large_view(350)).main)
    assert main.drawn() == [case.DRAINED, case.OVERCOMMITTED]
    more = main.tags[[a.get("id") for _t, a in main.tags].index("more") + 1 :]
    listed = [a["href"] for t, a in more if t == "a"][:2]
    assert listed == ["fleet/clusters-003.html#c-260", "fleet/clusters-004.html#c-301"]
    assert "2 more clusters need attention" in " ".join(main.text)
