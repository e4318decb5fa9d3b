# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""GKE provisioning: the façade of ``cloud/gke.py`` (issue 32 step 5: the providers live behind
``cloud/provider.py``'s ``Provider``). This module keeps the import path filters, playbooks and earlier releases use;
the collection's modules import ``cloud/`` directly, so their AnsiballZ payloads do not carry this file.
"""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.gke import (
    CAPACITY_KEYS,
    DRA_LABELS,
    DRIVER_VERSIONS,
    LADDER_KEYS,
    PROVIDER,
    SYSTEM_POOL,
    ZONE_RE,
    ContainerApi,
    PoolPlan,
    SystemPool,
    Waiter,
    _minor,
    capacity_failure,
    cluster_body,
    ensure_cluster,
    ensure_node_pool,
    kubeconfig,
    ladder_specs,
    node_count_check,
    node_pool_body,
    node_pool_specs,
    parent,
    plan_cluster,
    plan_node_pool,
    recorded_rung,
    rung_kind,
    wait_operation,
)

__all__ = [
    "CAPACITY_KEYS",
    "DRA_LABELS",
    "DRIVER_VERSIONS",
    "LADDER_KEYS",
    "PROVIDER",
    "SYSTEM_POOL",
    "ZONE_RE",
    "ContainerApi",
    "PoolPlan",
    "SystemPool",
    "Waiter",
    "capacity_failure",
    "cluster_body",
    "ensure_cluster",
    "ensure_node_pool",
    "kubeconfig",
    "ladder_specs",
    "node_count_check",
    "node_pool_body",
    "node_pool_specs",
    "parent",
    "plan_cluster",
    "plan_node_pool",
    "recorded_rung",
    "rung_kind",
    "wait_operation",
]

# Reached through this module by tests and earlier releases, not part of __all__.
_REEXPORTED = (_minor,)
