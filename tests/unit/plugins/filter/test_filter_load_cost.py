"""What naming one of the collection's filters costs a task.

Ansible resolves a filter named by FQCN (``x | gpufleet.serving.survey``) by importing *every* file of the
collection's ``plugins/filter/`` (``Jinja2Loader.get_with_context`` walks the package with ``pkgutil.iter_modules``
and loads each file to find the name), and it does so in every worker process: once per task and host. A role task
whose ``when`` or arguments touch a variable built with one of our filters paid for the render, the serving stack,
the cache objects and both cloud providers: about 0.36 s per task and host here, 3.8 s of a sliced apply's 24 s of
tasks at 5,000 clusters (issue 26). So the filter files import their logic inside the filter functions; at module
level only the light shared modules below.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]

#: What a filter file may import at module level (shared by every filter, light: no pydantic, no render).
LIGHT = {"errors", "plain", "handoff", "connection", "redact", "contract", "survey"}

PROBE = """
import json, sys
from ansible.plugins.loader import filter_loader, init_plugin_loader
init_plugin_loader(sys.argv[1:])
assert filter_loader.get("gpufleet.serving.survey") is not None
prefix = "ansible_collections.gpufleet.serving.plugins.module_utils."
print(json.dumps({
    "pydantic": "pydantic" in sys.modules,
    "module_utils": sorted(m[len(prefix):] for m in sys.modules if m.startswith(prefix)),
    "filters": sorted(m for m in sys.modules if m.startswith("ansible_collections.gpufleet.serving.plugins.filter.")),
}))
"""


def collections_root() -> str:
    for entry in sys.path:
        if (Path(entry) / "ansible_collections" / "gpufleet" / "serving").exists():
            return entry
    raise AssertionError("the collection is not on sys.path (pyproject's pythonpath: .venv/collections)")


def test_naming_one_filter_loads_every_filter_file_but_none_of_the_heavy_logic() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, collections_root()], capture_output=True, text=True, env=env, check=True
    )
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    files = {p.stem for p in (REPO / "plugins" / "filter").glob("*.py")}
    # Ansible's behaviour this test is about: every filter file was imported to resolve one name.
    assert {name.rsplit(".", 1)[-1] for name in loaded["filters"]} == files
    assert not loaded["pydantic"], "a filter file imports pydantic-based logic at module level"
    heavy = {m for m in loaded["module_utils"] if m.split(".")[0] not in LIGHT}
    assert not heavy, f"filter files import {sorted(heavy)} at module level: import them inside the filter function"
