#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# This module runs on the controller as an action plugin (plugins/action/manifest_dir.py); this file holds its docs.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: manifest_dir
short_description: Write Kubernetes objects to a GitOps render directory, one file per object, and prune stale ones
version_added: 0.1.0
description:
  - Writes every object in O(objects) to C(<path>/<cluster>/<namespace>/<kind>-<name>.yaml) on the controller
    (cluster-scoped objects under C(_cluster)). Kinds are lower-cased.
  - Each file is written atomically (temporary file in the same directory, then rename) and only when its content
    changes, so re-running with the same objects reports no change.
  - With O(prune), files under C(<path>/<cluster>/) whose object carries every label in O(owner) but is not in
    O(objects) are removed; this is how a dropped replica disappears from the render directory.
  - With O(fleet), only the files of that fleet's objects (label C(gpufleet.io/fleet)) are pruned, a file holding
    another fleet's object is never overwritten, and owned files without a fleet label follow O(adopt_unlabelled).
  - Every object is checked and serialised before the first write, so an invalid object changes nothing. New files
    are staged beside their targets and switched in only when all are staged (journaled, so a killed run is rolled
    forward by the next one).
  - Symlinks below O(path) are never followed. A symlinked directory or file fails the task before anything is
    written, because a file written or pruned through it could land outside O(path).
  - Writers hold an exclusive lock (C(<path>/.gpufleet/lock), ignored by Git). A writer that finds it held waits up to
    30 seconds, then fails naming the holder.
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  path:
    description: Root of the render directory.
    type: path
    required: true
  cluster:
    description: The cluster (inventory host) the objects belong to; the first directory level.
    type: str
    required: true
  objects:
    description: Kubernetes objects, each with C(kind) and C(metadata.name) (and C(metadata.namespace) when namespaced).
    type: list
    elements: dict
    default: []
  owner:
    description: Labels that mark the objects this task owns, for pruning. Without labels nothing is pruned.
    type: dict
    default: {}
  prune:
    description: Remove files of owned objects that are no longer in O(objects).
    type: bool
    default: true
  fleet:
    description:
      - The fleet whose files these are (C(gpufleet_fleet_name)). Only files whose object carries
        C(gpufleet.io/fleet=<fleet>) count as owned; writing over a file of another fleet's object fails the task
        before anything is written.
    type: str
  adopt_unlabelled:
    description:
      - With O(fleet), what an owned file whose object has no C(gpufleet.io/fleet) label is
        (C(gpufleet_adopt_unlabelled)) - V(true) the fleet's own, V(false) another inventory's (never pruned or
        overwritten), unset an error before anything is written.
    type: bool
attributes:
  check_mode:
    support: full
    description: Reports the files that would be written and removed without touching them.
  diff_mode:
    support: none
    description: Reports no diff.
  action:
    support: full
    description: Runs on the controller; the render directory is on the controller.
seealso:
  - module: gpufleet.serving.fleet_info
"""

EXAMPLES = r"""
- name: Render this cluster's serving workloads for GitOps
  gpufleet.serving.manifest_dir:
    path: "{{ gpufleet_render_dir }}"
    cluster: "{{ inventory_hostname }}"
    objects: >-
      {{ placement.replicas | gpufleet.serving.serving_manifests(deployment, cluster=inventory_hostname,
                                                                 fleet=gpufleet_fleet_name) }}
    owner:
      app.kubernetes.io/managed-by: gpufleet.serving
      gpufleet.io/deployment: "{{ deployment.name }}"
    fleet: "{{ gpufleet_fleet_name }}"
"""

RETURN = r"""
written:
  description: Files (relative to O(path)) that were created or changed.
  returned: success
  type: list
  elements: str
  sample: ["gke-us-central1/ml-team/deployment-qwen-demo-3f9a1.yaml"]
removed:
  description: Files (relative to O(path)) that were pruned.
  returned: success
  type: list
  elements: str
  sample: ["gke-us-central1/ml-team/service-qwen-demo-0b2c4.yaml"]
unchanged:
  description: Number of objects whose file already held the same content.
  returned: success
  type: int
  sample: 7
"""
