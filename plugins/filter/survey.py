# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters gpufleet.serving.survey and gpufleet.serving.durable_path: variables as AWX surveys send them, and paths
that must outlive an AWX job.

Documentation is in ``survey.yml`` and ``durable_path.yml`` beside this file; the logic is
``plugins/module_utils/survey.py``.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils import survey as _survey
from ansible_collections.gpufleet.serving.plugins.plugin_utils.filter import filter_map, gpufleet_filter


@gpufleet_filter(plain=True)
def survey(value: Any, name: Any, kind: Any, choices: Any = None) -> Any:
    """``gpufleet_force_drain | default(false) | gpufleet.serving.survey('gpufleet_force_drain', 'bool')``."""
    return _survey.parse(value, str(name), str(kind), choices)


@gpufleet_filter(plain=True)
def durable_path(value: Any, name: Any, default: Any, job: Any = None, required: Any = True) -> str | None:
    """``gpufleet_render_dir | default(none) | gpufleet.serving.durable_path('gpufleet_render_dir',
    inventory_dir ~ '/rendered', awx_job_id | default(tower_job_id | default(none)))``."""
    return _survey.durable_path(value, str(name), default, job, _survey.parse_bool(required, "required"))


class FilterModule:
    """gpufleet.serving survey filters."""

    def filters(self) -> dict[str, Any]:
        return filter_map(survey, durable_path)
