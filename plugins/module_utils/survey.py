# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The collection's variables in the forms an AWX survey or ``-e key=value`` sends them, and where AWX keeps files.

Every answer of an AWX / Automation Controller survey is text, except an integer question (an int) and a multiple
select (a list): a "true / false" multiple choice arrives as ``"true"``, a list of names typed into a text field as
``"a, b"`` (or one name per line in a text area), and ``-e n=3`` on the command line as ``"3"``. Each parser takes a
variable's YAML value or one of those forms and returns the typed value; anything else is an error that names the
variable (``FleetValidationError``: ``<variable>: <reason>``), never a silent default: Ansible's ``bool`` filter turns
``"ture"`` into ``false``.

Booleans are ``true/yes/on/1`` and ``false/no/off/0`` in any case, as ``contract.parse_adopt`` and
``guard.parse_allow`` read them.

:func:`durable_path` is the rule for paths that must outlive a run. An AWX job runs in a private directory that holds
its inventory (``inventory_dir`` is ``<private_data_dir>/inventory``: AWX writes the inventory there as a script) and
its project checkout, and that directory is deleted when the job ends. A default anchored on ``inventory_dir`` would
land there; so on AWX (the ``awx_job_id`` / ``tower_job_id`` extra variables AWX sets on every job) such a path has no
default and is required.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError

TRUE = frozenset({"true", "yes", "on", "1"})
FALSE = frozenset({"false", "no", "off", "0"})
#: The kinds :func:`parse` knows (the ``survey`` filter's second argument).
KINDS = ("bool", "int", "choice", "str", "list", "bool_or_list")
#: The extra variables AWX / Automation Controller sets on every job (``awx_meta_vars``: both prefixes).
AWX_JOB_VARS = ("awx_job_id", "tower_job_id")
#: Where the collection's documentation explains the AWX layout (named in errors).
AWX_DOC = "docs/awx.md"
_INT = re.compile(r"[+-]?[0-9]+")


def _fail(name: str, reason: str) -> FleetValidationError:
    return FleetValidationError([(name, reason)])


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_bool(value: Any, name: str) -> bool:
    """A boolean: ``true``/``false``, or their text (``"true"``, ``"yes"``, ``"1"``, ...; any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in TRUE:
            return True
        if text in FALSE:
            return False
    raise _fail(name, f"must be true or false (a survey may send 'true' / 'false'; got {_shown(value)})")


def parse_int(value: Any, name: str, minimum: int | None = None) -> int:
    """An integer, or its text (``"3"``); at least ``minimum`` when given."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if _INT.fullmatch(text):
            number = int(text)
    if number is None:
        raise _fail(name, f"must be a whole number (a survey may send it as text, '3'; got {_shown(value)})")
    if minimum is not None and number < minimum:
        raise _fail(name, f"must be at least {minimum} (got {number})")
    return number


def parse_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    """One of ``choices`` (surrounding blanks ignored: a survey's text answer may carry them)."""
    if isinstance(value, str) and value.strip() in choices:
        return value.strip()
    raise _fail(name, f"must be one of {', '.join(choices)} (got {_shown(value)})")


def parse_str(value: Any, name: str) -> str:
    """Text; a number typed where text is meant is refused (YAML reads ``1.10`` as a float)."""
    if isinstance(value, str):
        return value
    raise _fail(name, f"must be text (got {type(value).__name__} {_shown(value)}); quote it in YAML")


def parse_list(value: Any, name: str, what: str = "names") -> list[str]:
    """A list of names: a YAML list, a JSON list as text (``'["a", "b"]'``), or names separated by commas or new lines
    (``"a, b"``; one name per line in a survey's text area). Blanks around a name are ignored; an empty text is the
    empty list. Order and duplicates are kept (the reader decides)."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise _fail(name, f"is not a JSON list of {what} (got {_shown(text)})") from None
        else:
            value = text.replace("\n", ",").split(",") if text else []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise _fail(name, f"must be a list of {what}, or {what} separated by commas (got {_shown(value)})")
    return [v.strip() for v in value if v.strip()]


def parse_bool_or_list(value: Any, name: str, what: str = "names") -> bool | list[str]:
    """``true``/``false`` or a list of names, in either's survey form (``"true"``, ``"a, b"``, ``'["a"]'``); empty
    text is ``false``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
        return value.strip().lower() in TRUE
    if isinstance(value, str) and not value.strip():
        return False
    return parse_list(value, name, what)


def parse(value: Any, name: str, kind: str, choices: Sequence[str] | None = None) -> Any:
    """``value`` of the variable ``name`` as ``kind`` (one of :data:`KINDS`)."""
    if kind == "bool":
        return parse_bool(value, name)
    if kind == "int":
        return parse_int(value, name)
    if kind == "choice":
        if not choices:
            raise _fail(name, "a choice needs its choices")
        return parse_choice(value, name, [str(c) for c in choices])
    if kind == "str":
        return parse_str(value, name)
    if kind == "list":
        return parse_list(value, name)
    if kind == "bool_or_list":
        return parse_bool_or_list(value, name)
    raise _fail(name, f"unknown kind {kind!r} (known: {', '.join(KINDS)})")


def awx_job(variables: Any) -> Any:
    """The AWX / Automation Controller job id of a run (``awx_job_id`` or ``tower_job_id``), or ``None`` outside AWX."""
    for var in AWX_JOB_VARS:
        value = variables.get(var) if hasattr(variables, "get") else None
        if value not in (None, ""):
            return value
    return None


def durable_path(value: Any, name: str, default: Any, job: Any = None, required: bool = True) -> str | None:
    """A path a run keeps after it ends (a render directory, a state file): ``value`` when it is set, else ``default``
    - except in an AWX job (``job``: its ``awx_job_id``), where ``default`` (anchored on ``inventory_dir``) would be
    inside the job's private directory, deleted with it. There an unset ``value`` is an error when ``required``, and
    ``None`` (nothing kept, nothing written) otherwise. An empty text counts as unset (an optional survey field left
    blank)."""
    if value is not None and not isinstance(value, str):
        raise _fail(name, f"must be a path (text; got {type(value).__name__} {_shown(value)})")
    if value is not None and value.strip():
        return value
    if job in (None, ""):
        if not isinstance(default, str) or not default:
            raise _fail(name, "has no default here: set it")
        return default
    if not required:
        return None
    raise _fail(
        name,
        f"is required when the play runs on AWX / Automation Controller (job {job}): its default, {default}, is in "
        "the job's private directory, which is deleted when the job ends. Set it in the job template's extra "
        "variables to a directory the execution environment keeps (a mounted volume, or a Git checkout the job "
        f"pushes); nothing was written. See {AWX_DOC}.",
    )
