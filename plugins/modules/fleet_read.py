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
  - With O(fleet), it also lists every cluster's Nodes, ResourceSlices and ResourceClaims and returns, in
    RV(capacity), what each declared pool really has (observed capacity and drift). The raw objects stay in the
    plugin (tens of KiB a cluster, which would cost seconds a run to pass through Ansible variables).
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
      metadata_only:
        description:
          - Return only each object's C(apiVersion), C(kind) and C(metadata) (labels, annotations, owner references,
            ...). The API server sends metadata only (a C(PartialObjectMetadataList)), so reading many objects to find
            an annotation moves and templates a fraction of the data.
        type: bool
        default: false
  fleet:
    description:
      - The normalised fleet, as returned in C(fleet) by M(gpufleet.serving.fleet_info). When set, every reachable
        cluster's Nodes, ResourceSlices and ResourceClaims are read too and observed against the cluster's declared
        pools and their classes (RV(capacity)); they are not returned in RV(objects_by_cluster).
      - A ResourceClaim of the collection counts as this fleet's (not as another workload's) only when the replica
        it serves (label C(gpufleet.io/replica)) has objects among O(reads) that carry the fleet's
        C(gpufleet.io/fleet) label, so another fleet's claims on a shared cluster hold their devices.
    type: dict
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
- name: Read every cluster's Deployments labelled team=ml (connections pinned by fleet_info's pin_connections)
  gpufleet.serving.fleet_read:
    connections: "{{ gpufleet_fleet.connections }}"
    reads:
      - api_version: apps/v1
        kind: Deployment
        label_selectors: [team=ml]
  run_once: true
  register: fleet_deployments

- name: Read the serving Services' metadata, and observe what every pool of the fleet really has
  gpufleet.serving.fleet_read:
    connections: "{{ gpufleet_fleet.connections }}"
    reads:
      - api_version: v1
        kind: Service
        label_selectors: "{{ gpufleet_fleet.contract.serving_owner_selector }}"
        metadata_only: true
    fleet: "{{ gpufleet_fleet.fleet }}"
  run_once: true
  register: fleet_reads
"""

RETURN = r"""
objects_by_cluster:
  description:
    - The objects of O(reads), by cluster, for every cluster that could be read (each with C(apiVersion), C(kind)).
    - Flatten them with C(objects_by_cluster.values() | flatten(levels=1)) for one list of the whole fleet.
  returned: always
  type: dict
  sample: {lf-alpha: [{apiVersion: v1, kind: Service, metadata: {name: chat-1a2b3, namespace: ml-team}}]}
capacity:
  description:
    - With O(fleet), per cluster of the fleet that could be read (in the fleet's order), per pool the declared,
      labelled and usable nodes and why nodes are not usable; nodes that publish GPU devices without a pool label;
      claims of other workloads that hold devices; and the drift lines. Pass it to M(gpufleet.serving.fleet_placement)
      as O(gpufleet.serving.fleet_placement#module:cluster_capacity).
    - A node is usable when it carries the pool's label, is schedulable and Ready, and publishes every device of the
      pool's class (attributes and capacity as the class says). Devices that ResourceClaims of other workloads hold
      do not make a node unusable - they are listed per node in C(held_devices), and placement charges only those
      devices (device-level capacity), not the node; devices tainted beyond the class are listed in
      C(observed_devices) with their taints.
    - When a cluster's or a deployment's own queue is a Kueue queue, the cluster's LocalQueues and ClusterQueues are
      read too; C(queue_quota) (only when set) gives, per deployment naming its own Kueue queue, its LocalQueue
      (C(queue), namespace/name), the C(cluster_queue) it submits to and what that still admits per resource (C(free)),
      or C(missing) when Kueue runs there without that queue.
  returned: when O(fleet) is set
  type: list
  elements: dict
  sample:
    - cluster: lf-alpha
      pools:
        - {pool: l4, class: l4-1x, declared_nodes: 3, labelled_nodes: 3, usable_nodes: 2, held_devices: [[gpu-0]],
           notes: ["1 of 3 nodes cordoned", "node l4-0: 1 device(s) (gpu-0) held by claim ml/x of another workload"],
           nodes: {l4-2: [cordoned]}}
      unlabelled_nodes: []
      unknown_pools: []
      foreign_claims: []
      drift: ["lf-alpha/l4: 1 of 3 nodes cordoned"]
unreachable_clusters:
  description: The clusters that could not be read, sorted.
  returned: always
  type: list
  elements: str
  sample: [lf-gamma]
errors:
  description:
    - Why each unreachable cluster could not be read - the first ones (in name order) whose reasons fit in 100,000 characters of JSON;
      RV(errors_count) counts them all, C(truncated) is true when some are left out, RV(unreachable_clusters) names every one (issue 26).
  returned: always
  type: dict
  sample: {lf-gamma: "list Service: HTTPSConnectionPool(host='127.0.0.1', port=6445): Max retries exceeded"}
errors_count:
  description: How many clusters could not be read.
  returned: always
  type: int
  sample: 1
truncated:
  description: Whether RV(errors) leaves some out.
  returned: always
  type: bool
  sample: false
"""
