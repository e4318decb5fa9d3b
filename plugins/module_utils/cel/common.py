# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Errors and limits of the DRA CEL engine (the selector errors are the façade's public ones, ``dra_cel.py``)."""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError


class SelectorCompileError(GpufleetError, ValueError):
    """A selector does not compile in the Kubernetes DRA CEL environment."""


class SelectorEvalError(GpufleetError, ValueError):
    """A selector failed while being evaluated against a device."""


class CelError(Exception):
    """A CEL runtime error value (raised; absorbed by ``&&``/``||`` where CEL says so)."""


class CheckError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


# --------------------------------------------------------------------------- limits

MAX_EXPRESSION_BYTES = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength
COST_LIMIT = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1
