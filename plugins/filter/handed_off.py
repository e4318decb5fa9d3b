# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""gpufleet.serving.handed_off: the value a handle stands for (issue 26, ``plugins/module_utils/handoff.py``).

Documentation is in ``handed_off.yml`` beside this file.
"""

from __future__ import annotations

import os
from typing import Any

from ansible import constants as C

from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import is_handle, load
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.plugin_utils.filter import filter_map, gpufleet_filter

#: Values read in this process, by (path, SHA-256, mtime, size): a task that names the value several times reads its
#: file once (3.6 MB of JSON at 5,000 clusters).
#: Ansible forks a worker per host and task, so this lives as long as one task on one host.
_READ: dict[tuple[Any, ...], Any] = {}
#: How many values a worker keeps (a task may name the fleet and the replicas).
_KEEP = 2


@gpufleet_filter
def handed_off(value: Any, what: str = "value") -> Any:
    """``result.fleet | gpufleet.serving.handed_off``: the value itself, or the one its handle's file holds (a file of
    this run's private local temporary directory with the handle's SHA-256; anything else is an error)."""
    if not is_handle(value):
        return value
    handle = to_plain(value, what)
    try:
        stat = os.stat(str(handle.get("path") or ""), follow_symlinks=False)
        key: tuple[Any, ...] = (str(handle.get("path")), str(handle.get("sha256")), stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = ()  # load() names what is wrong
    if not key or key not in _READ:
        loaded = load(handle, str(C.DEFAULT_LOCAL_TMP), what)
        if key:
            while len(_READ) >= _KEEP:
                del _READ[next(iter(_READ))]
            _READ[key] = loaded
        return loaded
    return _READ[key]


class FilterModule:
    """gpufleet.serving handoff filter."""

    def filters(self) -> dict[str, Any]:
        return filter_map(handed_off)
