#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# This module runs on the controller as an action plugin (plugins/action/fleet_read.py); this file holds its docs.
#
# kubernetes.core.k8s_info reads one kind from one cluster per task and per module process; reading the fleet that
# way costs a process per cluster and kind. This plugin reads every cluster at once, a thread per cluster, with
# kubernetes.core's own client and authentication options.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_read
short_description: Read objects from every cluster of the fleet in one task
version_added: 0.3.0
description:
  - Lists each kind of O(reads) on every cluster of O(connections), one list per kind and cluster, clusters in
    parallel. A kind a cluster does not serve (its CRD is not installed) has no objects there.
  - A cluster that cannot be read (no answer, refused credentials) does not fail the task; it is returned in
    RV(unreachable_clusters) with the reason in RV(errors), so a play can go on with the others.
author:
  - gpufleet.serving contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.serving.k8s_fleet
options:
  reads:
    description: The kinds to list.
    type: list
    elements: dict
    required: true
    suboptions:
      api_version:
        description: API group and version, e.g. C(v1) or C(apps/v1).
        type: str
        required: true
      kind:
        description: The kind, e.g. C(Service).
        type: str
        required: true
      label_selectors:
        description: Label selectors (C(key=value), C(key!=value), C(key)) every listed object must match.
        type: list
        elements: str
        default: []
attributes:
  check_mode:
    support: full
    description: Reads only.
  diff_mode:
    support: none
    description: Reports no diff.
  action:
    support: full
    description: Runs on the controller.
seealso:
  - module: kubernetes.core.k8s_info
  - module: gpufleet.serving.fleet_apply
"""

EXAMPLES = r"""
- name: Read the serving Services of every cluster
  gpufleet.serving.fleet_read:
    connections: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'cluster_connection_k8s'))) }}"
    reads:
      - api_version: v1
        kind: Service
        label_selectors: [app.kubernetes.io/managed-by=gpufleet.serving, gpufleet.io/component=serving]
  run_once: true
  register: fleet_services
"""

RETURN = r"""
objects_by_cluster:
  description: The objects read, by cluster, for every cluster that could be read (each with C(apiVersion), C(kind)).
  returned: always
  type: dict
  sample: {lf-alpha: [{apiVersion: v1, kind: Service, metadata: {name: chat-1a2b3, namespace: ml-team}}]}
objects:
  description: Every object read, of every cluster.
  returned: always
  type: list
  elements: dict
unreachable_clusters:
  description: The clusters that could not be read, sorted.
  returned: always
  type: list
  elements: str
  sample: [lf-gamma]
errors:
  description: Why each unreachable cluster could not be read.
  returned: always
  type: dict
  sample: {lf-gamma: "list Service: HTTPSConnectionPool(host='127.0.0.1', port=6445): Max retries exceeded"}
"""
