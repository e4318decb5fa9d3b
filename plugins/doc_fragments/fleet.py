# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Options shared by the fleet-wide plugins that consume fleet_info's result."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  fleet:
    description: The normalised fleet, as returned in C(fleet) by M(gpufleet.serving.fleet_info).
    type: dict
    required: true
"""
