# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The collection's one error spine.

Every ``module_utils`` function raises :class:`GpufleetError` (or a subclass) with a
message a user can act on; modules turn it into ``fail_json(msg=...)`` and filters
into ``AnsibleFilterError``.
"""

from __future__ import annotations


class GpufleetError(Exception):
    """Base class of every error the collection raises on purpose."""


class FleetValidationError(GpufleetError, ValueError):
    """Fleet data failed validation.

    ``errors`` holds ``(path, reason)`` pairs; ``str()`` gives one line per error,
    e.g. ``gpufleet_model_deployments[0].engines[0].members[1].role: must be one of ...``.
    """

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(f"{path}: {reason}" if path else reason for path, reason in self.errors))


def error_list(exc: BaseException) -> list[dict[str, str]]:
    """The ``errors`` of the collection's one failure shape ``{failed, msg, errors}``: ``[{path, reason}, ...]``.

    A :class:`FleetValidationError` gives one entry per problem; any other error one entry with an empty path.
    """
    pairs = exc.errors if isinstance(exc, FleetValidationError) else [("", str(exc))]
    return [{"path": path, "reason": reason} for path, reason in pairs]
