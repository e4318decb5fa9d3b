# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What a validation message says besides the reason: the names of the list items on its path, and "did you mean".

``gpufleet_model_deployments[2].engines[0].members[1].role`` names indexes only; a user looks for names.
:func:`named_path` annotates every list index of a path whose item has a name in the data it was read from:
``gpufleet_model_deployments[2] (qwen2-5-7b).engines[0] (tp8).members[1] (Worker).role``. :func:`did_you_mean` adds
the closest known names (difflib) to an "unknown ..." reason.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: The keys that name a list item, in the order they are tried (``role`` names an engine's member).
NAME_KEYS = ("name", "role", "key")
_SHOWN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$")
_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]")


def did_you_mean(name: Any, known: Iterable[str], what: str = "known") -> str:
    """`` (did you mean 'x'? known: a, b)`` with the closest of ``known`` to ``name``, else `` (known: a, b)``
    (`` (known: none defined)`` when nothing is known)."""
    names = sorted({str(k) for k in known})
    if not names:
        return f" ({what}: none defined)"
    listed = ", ".join(names)
    close: list[str] = []
    if isinstance(name, str):
        # A name cut short or run on ("h100-8x" for "h100-8x-ib") first, then the closest spelling, then a difference
        # of case only ("leader" for "Leader").
        close = sorted((n for n in names if len(name) >= 3 and (n.startswith(name) or name.startswith(n))), key=len)
        close = close[:1] or difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        close = close or [n for n in names if n.lower() == name.lower()][:1]
    return f" (did you mean {close[0]!r}? {what}: {listed})" if close else f" ({what}: {listed})"


def _item_name(item: Any) -> tuple[str, str] | None:
    if not isinstance(item, Mapping):
        return None
    for key in NAME_KEYS:
        value = item.get(key)
        if isinstance(value, str) and _SHOWN_NAME.match(value):
            return key, value
    return None


def named_path(path: str, root: str, data: Any) -> str:
    """``path`` (which starts with ``root``, the place ``data`` was read from) with every list index whose item has a
    name followed by `` (name)``. An index whose next step is the naming field itself (``.name``, ``.role``) is not
    annotated: that value is what the message is about. A path not under ``root``, or one that leaves ``data``, is
    returned as far as it could be followed."""
    if not path.startswith(root) or data is None:
        return path
    rest = path[len(root) :]
    out = [root]
    node: Any = data
    at = 0
    tokens = list(_TOKEN.finditer(rest))
    for n, token in enumerate(tokens):
        if token.start() != at:
            break
        at = token.end()
        out.append(token.group(0))
        field, index, key = token.group(1), token.group(2), token.group(3)
        if field is not None:
            node = node.get(field) if isinstance(node, Mapping) else None
        elif key is not None:
            node = node.get(key[1:-1]) if isinstance(node, Mapping) else None
        else:
            i = int(index)
            node = node[i] if isinstance(node, list) and i < len(node) else None
            named = _item_name(node)
            following = tokens[n + 1].group(1) if n + 1 < len(tokens) else None
            if named is not None and following != named[0]:
                out.append(f" ({named[1]})")
        if node is None:
            break
    return "".join(out) + rest[at:]


def name_errors(errors: Iterable[tuple[str, str]], roots: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(path, reason)`` errors with :func:`named_path` applied, ``roots`` mapping each path root (a variable name,
    ``hostvars['x']``) to the data read from it. The longest matching root wins."""
    ordered = sorted(roots, key=len, reverse=True)
    out = []
    for path, reason in errors:
        root = next((r for r in ordered if path == r or path.startswith((f"{r}.", f"{r}["))), None)
        out.append((named_path(path, root, roots[root]) if root is not None else path, reason))
    return out


_NAMED = re.compile(r"(?<=\]) \([A-Za-z0-9][A-Za-z0-9._/-]{0,62}\)")


def index_path(path: str) -> str:
    """A path of :func:`named_path` with the names taken out: the index-only locator
    (``gpufleet_model_deployments[2].engines[0]``)."""
    return _NAMED.sub("", path)
