# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The one base of the collection's action plugins: argument spec from DOCUMENTATION, one failure shape.

An action plugin of this collection subclasses :class:`GpufleetAction`, names its ``MODULE`` (the file under
``plugins/modules`` that holds its documentation) and implements :meth:`GpufleetAction.execute`, which receives the
validated arguments as plain data and returns the result keys. Its argument spec is built from the module's
DOCUMENTATION (doc fragments of this collection included), so the docs and the checks cannot disagree.

Failures have one shape: ``{failed: true, msg: "<module>: <message>", errors: [{path, reason}, ...]}``. Only the
collection's own errors (:class:`GpufleetError`, and ``OSError`` from the file system) become failures; anything
else is a bug and propagates with its traceback.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from typing import Any

import yaml
from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError, error_list
from ansible_collections.gpufleet.serving.plugins.module_utils.handoff import resolve
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.module_utils.redact import redact_text

COLLECTION = "gpufleet.serving"
_PACKAGE = "ansible_collections.gpufleet.serving.plugins"
# The keys of a documented option that are also argument spec keys.
_SPEC_KEYS = ("type", "required", "default", "elements", "choices", "aliases", "no_log")


def _fragment_options(name: str) -> dict[str, Any]:
    """Options of a doc fragment of this collection (``gpufleet.serving.<file>[.<VAR>]``)."""
    if not name.startswith(f"{COLLECTION}."):
        raise GpufleetError(f"doc fragment {name!r} is not one of {COLLECTION}'s")
    parts = name[len(COLLECTION) + 1 :].split(".")
    module = importlib.import_module(f"{_PACKAGE}.doc_fragments.{parts[0]}")
    var = parts[1] if len(parts) > 1 else "DOCUMENTATION"
    doc = yaml.safe_load(getattr(module.ModuleDocFragment, var))
    return dict((doc or {}).get("options") or {})


def _spec(options: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for name, option in options.items():
        entry = {key: option[key] for key in _SPEC_KEYS if key in option}
        suboptions = option.get("suboptions") or option.get("options")
        if suboptions:
            entry["options"] = _spec(suboptions)
        spec[name] = entry
    return spec


@cache
def documented_options(module: str) -> dict[str, Any]:
    """The options documented for ``plugins/modules/<module>.py``, doc fragments merged in (the module's own win)."""
    mod = importlib.import_module(f"{_PACKAGE}.modules.{module}")
    doc = yaml.safe_load(mod.DOCUMENTATION)
    options: dict[str, Any] = {}
    fragments = doc.get("extends_documentation_fragment") or []
    for fragment in [fragments] if isinstance(fragments, str) else fragments:
        options.update(_fragment_options(fragment))
    options.update(doc.get("options") or {})
    return options


def argument_spec(module: str) -> dict[str, Any]:
    """The argument spec of ``module``, built from its DOCUMENTATION."""
    return _spec(documented_options(module))


def failure(module: str, exc: BaseException, headline: str = "") -> dict[str, Any]:
    """The one failure shape: ``{failed, msg, errors: [{path, reason}]}``; ``msg`` is ``<module>: [headline\n]<error>``.

    Errors show values through redact.describe where they raise; as a last guard every URL in the message and the
    reasons is redacted here (a client library's error may quote a URL with credentials)."""
    return {
        "failed": True,
        "msg": redact_text(f"{module}: {headline}\n{exc}" if headline else f"{module}: {exc}"),
        "errors": [{key: redact_text(text) for key, text in entry.items()} for entry in error_list(exc)],
    }


def handoff_dir() -> str:
    """Where large values are handed from task to task: the run's private local temporary directory (Ansible's
    ``DEFAULT_LOCAL_TMP``, mode 0700, removed when ``ansible-playbook`` exits)."""
    return str(C.DEFAULT_LOCAL_TMP)


class GpufleetAction(ActionBase):
    """Base of the collection's controller-side action plugins."""

    TRANSFERS_FILES = False
    _requires_connection = False
    MODULE = ""
    #: A first line for the failure message (e.g. what the failure means for the play).
    FAILURE_HEADLINE = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Ansible imports an action plugin in the ansible-playbook process before it forks the task's worker: reading
        # the documentation here does it once per run, not once per task.
        if cls.MODULE:
            documented_options(cls.MODULE)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._VALID_ARGS = frozenset(argument_spec(self.MODULE))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        try:
            result = super().run(tmp, task_vars)  # rejects options the documentation does not name
        except AnsibleActionFail as exc:
            return failure(self.MODULE, GpufleetError(str(exc.message)))
        try:
            # Issue 26: a value an earlier task handed off through a file (module_utils/handoff.py) is read back here,
            # before the arguments are checked, so every action takes the value or its handle alike.
            self._task.args = resolve(self._task.args, handoff_dir())
        except (GpufleetError, OSError, ValueError) as exc:
            return failure(self.MODULE, exc)
        try:
            args = self.validate_argument_spec(argument_spec=argument_spec(self.MODULE))[1]
        except AnsibleActionFail as exc:
            return failure(self.MODULE, GpufleetError(str(exc.message)))
        try:
            result.update(self.execute(to_plain(args, "args"), task_vars))
        except (GpufleetError, OSError) as exc:
            result.update(failure(self.MODULE, exc, self.FAILURE_HEADLINE))
        return result

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """The plugin's work on validated, plain arguments; return the result keys (``changed`` included)."""
        raise NotImplementedError
