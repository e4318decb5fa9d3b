"""The collection's files in each module's AnsiballZ payload, listed the way ansible-core builds it.

``ansible.executor.module_common.recursive_finder`` is what ``_find_module_utils`` calls to put a module's
``module_utils`` in its zip: it reads each file's imports with ``ast`` (imports inside functions included) and follows
them. Run in its own process (``python tests/lib/ansiballz_payload.py [module ...]``): the collection loader it needs
is installed for the whole process. Prints ``{module: {path: size}}`` as JSON, paths relative to the collection root.
"""

from __future__ import annotations

import datetime
import io
import json
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / ".venv" / "collections"
PREFIX = "ansible_collections/gpufleet/serving/"


def payload(module: str) -> dict[str, int]:
    """``{path: size}`` of the collection's files in ``module``'s payload (the module itself excluded)."""
    from ansible._internal._ansiballz import _builder
    from ansible.executor import module_common

    source = (REPO / "plugins" / "modules" / f"{module}.py").read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf:
        module_common.recursive_finder(
            module,
            f"ansible_collections.gpufleet.serving.plugins.modules.{module}",
            source,
            zf,
            datetime.datetime.now(datetime.UTC),
            _builder.ExtensionManager.create(task_vars={}),
        )
        return {i.filename[len(PREFIX) :]: i.file_size for i in zf.infolist() if i.filename.startswith(PREFIX)}


def main(argv: list[str]) -> None:
    from ansible.plugins.loader import init_plugin_loader

    init_plugin_loader([str(COLLECTIONS)])
    modules = argv or sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py"))
    json.dump({m: payload(m) for m in modules}, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
