"""fleet.html in a real browser (issue 31): Debian's chromium, headless, loads the page deploy.yml writes for the
example fleet, the page of a fleet with every state, and the main page (and a cluster page) of a fleet past the split
threshold; the DOM it built and a screenshot are checked.

The test installs chromium with apt-get when it is missing (as root, with Debian's package index reachable). When it
cannot, it fails and says why; GPUFLEET_SKIP_BROWSER_TEST=1 turns that into a skip for machines without a browser."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

import fleet_view_case as case
import pytest
from example_fleet import copy_example_inventory

from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.html import PALETTE, render_html
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.pages import write_picture
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.view import build_view

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
WINDOW = (1400, 1000)


def _install() -> str | None:
    """apt-get install chromium; the reason it could not, or None."""
    if not shutil.which("apt-get"):
        return "there is no apt-get on this machine"
    if os.geteuid() != 0:
        return "installing it needs root (run: sudo apt-get update && sudo apt-get install -y chromium)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1200, check=False)
        if proc.returncode != 0:
            return f"{' '.join(argv)} failed: {(proc.stderr or proc.stdout)[-800:]}"
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    why = _install()
    found = shutil.which("chromium")
    if found:
        return found
    message = f"the fleet picture's browser test needs Debian's chromium, and it cannot be installed: {why}"
    if os.environ.get("GPUFLEET_SKIP_BROWSER_TEST") == "1":
        pytest.skip(message)
    pytest.fail(message + " (set GPUFLEET_SKIP_BROWSER_TEST=1 to skip this test)")


def headless(browser: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = [
        browser,
        "--headless",
        "--no-sandbox",  # tests run as root in CI containers
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={cwd / 'profile'}",
        *args,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        want = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in want.items())]


def dump_dom(browser: str, page: Path) -> Dom:
    dom = Dom()
    dom.feed(headless(browser, "--dump-dom", page.as_uri(), cwd=page.parent).stdout)
    return dom


def screenshot(browser: str, page: Path, size: tuple[int, int] = WINDOW) -> Path:
    out = page.with_suffix(".png")
    headless(browser, f"--screenshot={out}", f"--window-size={size[0]},{size[1]}", page.as_uri(), cwd=page.parent)
    return out


def png_pixels(path: Path) -> tuple[int, int, set[tuple[int, int, int]]]:
    """Width, height and the colours of an 8-bit RGB(A) PNG (what chromium writes), decoded here: no imaging
    library needed."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, header = 8, b"", b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6), (depth, color)
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev = bytearray(stride)
    colours: set[tuple[int, int, int]] = set()
    pos = 0
    for _y in range(height):
        kind, line = raw[pos], bytearray(raw[pos + 1 : pos + 1 + stride])
        pos += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        colours.update(tuple(line[i : i + 3]) for i in range(0, stride, bpp))  # type: ignore[misc]
        prev = line
    return width, height, colours


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return (int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16))


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_the_example_fleet_picture_in_a_browser(chromium, tmp_path):
    inventory = tmp_path / "inventory"
    copy_example_inventory(inventory)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(inventory / "hosts.yml"),
            str(REPO / "playbooks" / "deploy.yml"),
            "-e",
            f"gpufleet_render_dir={tmp_path / 'rendered'}",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    page = inventory / ".gpufleet" / "fleet.html"
    dom = dump_dom(chromium, page)

    # one section per cluster, one drawing per pool, one cell per DRA device of every node
    assert [a["data-cluster"] for a in dom.all("section") if "data-cluster" in a] == [
        "eks-us-east-1",
        "gke-europe-west4",
        "gke-us-central1",
        "onprem-a",
    ]
    assert len(dom.all("svg", **{"class": "pool"})) == 6
    devices = [a for t, a in dom.tags if t == "rect" and "data-device" in a]
    assert len(devices) == 3 * 1 + 1 * 8 + 2 * 1 + 4 * 1 + 2 * 1 + 4 * 8
    used = [a["data-deployment"] for a in devices if a["data-state"] == "used"]
    assert {d: used.count(d) for d in set(used)} == {
        "qwen-demo": 3,
        "llama-70b": 16,
        "deepseek-v3": 16,
    }  # deepseek: leader + worker
    assert [a["data-readiness"] for a in dom.all("span") if "data-readiness" in a] == ["Rendered"] * 6
    assert not dom.all("script")
    assert "3 deployment(s) Ready; none Degraded." in "".join(dom.text)

    shot = screenshot(chromium, page)
    width, height, colours = png_pixels(shot)
    assert (width, height) == WINDOW
    assert shot.stat().st_size > 20_000  # a page, not a blank window
    # each deployment's colour is on screen (the legend and the devices its replicas hold)
    assert {rgb(PALETTE[i]) for i in range(3)} <= colours


def test_every_state_of_the_picture_in_a_browser(chromium, tmp_path):
    view = build_view(
        case.fleet(),
        case.placement(),
        mode="apply",
        capacity="observed",
        drained=["beta"],
        applied={"pending": [], "clusters": {}},
        summary="2 deployment(s) Ready; Degraded (see above): chat, huge.",
    )
    page = tmp_path / "fleet.html"
    page.write_text(render_html(view), encoding="utf-8")
    dom = dump_dom(chromium, page)
    nodes = {a["data-node"]: a["data-state"] for a in dom.all("g", **{"class": "node"})}
    assert {k: v for k, v in nodes.items() if not k.startswith("node ")} == {
        "dgx-2": "unavailable",
        "missing 1": "missing",
        case.EVIL_NODE: "tainted",
        "l4-2": "drifted",
    }
    states = [a["data-state"] for a in dom.all("rect") if "data-device" in a]
    assert states.count("foreign") == 2 and states.count("used") == 8 + 6 + 1
    # the markup in a node name and a taint value from the cluster stayed text: no element was made of it
    assert not dom.all("script") and not dom.all("img")
    assert case.EVIL_TAINT in "".join(dom.text)
    badges = [t for t in dom.text if t in ("drained", "observed")]
    assert badges == ["observed", "drained"]
    width, height, colours = png_pixels(screenshot(chromium, page))
    assert (width, height) == WINDOW and len(colours) > 50


def test_a_large_fleet_main_page_in_a_browser_shows_what_needs_attention(chromium, tmp_path):
    """Past SPLIT_OVER clusters: the main page loads, leads with what needs attention, draws those clusters, and its
    index links every cluster to the cluster page that draws it (which loads too)."""
    fleet, placement, options = case.large(350)
    written = write_picture(tmp_path / "fleet.html", build_view(fleet, placement, **options))
    assert len(written["pages"]) == 4
    dom = dump_dom(chromium, tmp_path / "fleet.html")
    text = " ".join(dom.text)
    assert "Needs attention" in text and "4 of 350 clusters need attention" in text
    assert "1 deployment(s) not Ready: huge (0/2, Degraded)" in text
    drawn = {a["data-cluster"] for a in dom.all("svg", **{"class": "pool"})}
    assert drawn == {case.DRAINED, case.OVERCOMMITTED, case.NOT_RECONCILED, case.PENDING}
    links = [a["href"] for a in dom.all("a") if a.get("class", "").startswith("cl")]
    assert len(links) == 350 and links[260] == "fleet/clusters-003.html#c-260"
    assert not dom.all("script")
    page = dump_dom(chromium, tmp_path / "fleet" / "clusters-003.html")
    assert any(a.get("id") == "c-260" and a["data-cluster"] == case.NOT_RECONCILED for a in page.all("section"))
    assert len(page.all("section", **{"class": "cluster"})) == 100
