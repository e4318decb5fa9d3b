# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""gpufleet.serving.fleet: the default stdout callback, with the fleet's report printed as plain lines."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: fleet
type: stdout
short_description: Ansible's default output, with the fleet's placement report printed as plain lines
version_added: 0.1.0
description:
  - Ansible's default stdout callback (every option of it applies), with three differences.
  - The report of the P(gpufleet.serving.model_deployment#role) role (the placement table, why replicas could not be
    placed, drift, the summary line; the result of M(gpufleet.serving.fleet_report)) is printed as the lines it is,
    without C(ok:), quotes or escapes.
  - Results are shown as YAML by default (O(result_format=yaml)), so any multi-line message is printed as lines.
  - With O(quiet), only the placement report (the result of M(gpufleet.serving.fleet_report)), warnings, failures and
    the play recap are printed - no task banners, no C(ok:), C(changed:), C(skipping:) or C(included:) lines, and no
    other task's message (the model caches' and serving stack's status lines included).
  - Enable it in C(ansible.cfg) with C(stdout_callback = gpufleet.serving.fleet) (C([defaults]) section), or for one
    run with C(ANSIBLE_STDOUT_CALLBACK=gpufleet.serving.fleet).
author:
  - gpufleet.serving contributors (@gpufleet)
extends_documentation_fragment:
  - ansible.builtin.default_callback
  - ansible.builtin.result_format_callback
requirements:
  - set as stdout callback in the configuration
options:
  quiet:
    description:
      - Print only the placement report, warnings, failures and the play recap.
      - The report itself can be made shorter with the role's C(gpufleet_report=summary).
    type: bool
    default: false
    env:
      - name: GPUFLEET_QUIET
    ini:
      - section: gpufleet
        key: quiet
  result_format:
    description:
      - How task results are shown. V(yaml) (this callback's default) prints a multi-line message as lines; V(json)
        is Ansible's default callback's format.
    type: str
    default: yaml
    choices: [json, yaml]
    env:
      - name: ANSIBLE_CALLBACK_RESULT_FORMAT
    ini:
      - section: defaults
        key: callback_result_format
  result_yaml_line_width:
    description:
      - The line width of YAML results (ansible-core 2.21 and later). This callback's default, V(no-break), keeps a
        long message on one line, so a line is never split in the middle of a name or a selector.
    type: str
    default: no-break
    choices:
      default: PyYAML's default, around 80 characters.
      no-break: Lines are not broken.
      terminal-width: The terminal's width.
    env:
      - name: ANSIBLE_CALLBACK_YAML_LINE_WIDTH
    ini:
      - key: callback_result_yaml_line_width
        section: defaults
"""

from typing import Any  # noqa: E402 - after the documentation, as Ansible plugins are laid out

from ansible.plugins.callback.default import CallbackModule as DefaultCallback  # noqa: E402

#: The key of a result that is a fleet report (gpufleet.serving.fleet_report's result).
REPORT_KEY = "gpufleet_report"
_QUIETED = ("display_ok_hosts", "display_skipped_hosts", "display_included_hosts")


def is_report(result: Any) -> bool:
    return isinstance(result, dict) and isinstance(result.get(REPORT_KEY), dict) and isinstance(result.get("msg"), str)


def _data(result: Any) -> Any:
    """A task result's data (``result`` from ansible-core 2.19, ``_result`` before)."""
    data = getattr(result, "result", None)
    return data if isinstance(data, dict) else getattr(result, "_result", None)


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "gpufleet.serving.fleet"

    def _quiet(self) -> bool:
        return bool(super().get_option("quiet"))

    def get_option(self, k: str, hostvars: Any = None) -> Any:
        if k in _QUIETED and self._quiet():
            return False
        return super().get_option(k, hostvars)

    def v2_runner_on_ok(self, result: Any) -> None:
        if is_report(_data(result)):
            self._print_report(result)
            return
        if self._quiet():
            self._warnings(result)  # ok and changed results are not printed, their warnings are
            return
        super().v2_runner_on_ok(result)

    def v2_runner_item_on_ok(self, result: Any) -> None:
        if self._quiet():
            self._warnings(result)
            return
        super().v2_runner_item_on_ok(result)

    def _warnings(self, result: Any) -> None:
        handle = getattr(self, "_handle_warnings_and_exception", None)  # ansible-core 2.19+
        if handle is not None:
            handle(result)
        else:  # pragma: no cover - older ansible-core
            self._handle_warnings(_data(result))

    def _print_report(self, result: Any) -> None:
        data = _data(result)
        if not self._quiet() and self._last_task_banner != result.task._uuid:
            self._print_task_banner(result.task)
        self._warnings(result)
        for line in data["msg"].splitlines():
            self._display.display(line)

    def v2_playbook_on_play_start(self, play: Any) -> None:
        if self._quiet():
            self._play = play  # the default callback reads it (strategy) when tasks start
            return
        super().v2_playbook_on_play_start(play)

    def v2_playbook_on_include(self, included_file: Any) -> None:
        if self._quiet():
            return
        super().v2_playbook_on_include(included_file)
