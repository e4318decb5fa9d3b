# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The DRA allocator's public names: a façade over :mod:`dra.allocator` (issue 24 item 7, design.md §12).

The allocator -- can one node of an inference class satisfy one member's claim, and how, as Kubernetes' structured
allocator decides it -- lives in the ``dra/`` package beside the API shapes, features and allocated state it works on.
This module keeps the import path that earlier releases published; the collection's own code imports
``dra.allocator``.
"""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.dra.allocator import (
    SEARCH_BUDGET,
    SYNTHETIC,
    Allocation,
    Check,
    Chosen,
    Counters,
    NodeDevice,
    Shared,
    allocate,
    consume,
    lookup_attribute,
    node_counters,
    node_devices,
)

__all__ = [
    "SEARCH_BUDGET",
    "SYNTHETIC",
    "Allocation",
    "Check",
    "Chosen",
    "Counters",
    "NodeDevice",
    "Shared",
    "allocate",
    "consume",
    "lookup_attribute",
    "node_counters",
    "node_devices",
]
