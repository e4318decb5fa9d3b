#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# This module runs on the controller as an action plugin (plugins/action/fleet_manifests.py); this file holds its docs.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_manifests
short_description: Render the serving objects of every cluster of the fleet in one task
version_added: 0.1.0
description:
  - Runs the logic of the P(gpufleet.serving.serving_manifests#filter) filter for every deployment
    of O(fleet) and every cluster its O(replicas) are placed on, and returns the objects per cluster. One task for the
    whole fleet instead of one per cluster.
  - With O(render_dir), writes every cluster's objects to C(<render_dir>/<cluster>/<namespace>/<kind>-<name>.yaml)
    as M(gpufleet.serving.manifest_dir) does (atomic, only when changed) and prunes the files of serving objects
    (labels C(app.kubernetes.io/managed-by=gpufleet.serving), C(gpufleet.io/component=serving)) no longer rendered.
    Everything is rendered before the first file is written.
author:
  - gpufleet.serving contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.serving.fleet
options:
  replicas:
    description: Every replica of every deployment, as returned in C(replicas) by M(gpufleet.serving.fleet_placement).
    type: list
    elements: dict
    required: true
  render_dir:
    description: Root of the render directory to write. Without it nothing is written.
    type: path
  prune:
    description: Remove files of serving objects that are no longer rendered.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Renders and reports the files that would change without writing them.
  diff_mode:
    support: none
    description: Reports no diff.
  action:
    support: full
    description: Runs on the controller.
seealso:
  - module: gpufleet.serving.fleet_placement
  - module: gpufleet.serving.manifest_dir
"""

EXAMPLES = r"""
- name: Render every cluster's serving workloads into the GitOps directory
  gpufleet.serving.fleet_manifests:
    fleet: "{{ gpufleet_fleet.fleet }}"
    replicas: "{{ gpufleet_placement.replicas }}"
    render_dir: "{{ gpufleet_render_dir }}"
  run_once: true
  register: gpufleet_manifests
"""

RETURN = r"""
objects_by_cluster:
  description: Every fleet cluster's serving objects (an empty list for a cluster that runs no replica).
  returned: success
  type: dict
  sample: {gke-us-central1: [{apiVersion: v1, kind: Service, metadata: {name: qwen-demo-3f9a1, namespace: ml-team}}]}
written:
  description: Files (relative to O(render_dir)) created or changed.
  returned: success
  type: list
  elements: str
  sample: ["gke-us-central1/ml-team/deployment-qwen-demo-3f9a1-main.yaml"]
removed:
  description: Files (relative to O(render_dir)) pruned.
  returned: success
  type: list
  elements: str
  sample: ["onprem-a/ml-team/service-qwen-demo-0b2c4.yaml"]
unchanged:
  description: Number of objects whose file already held the same content.
  returned: success
  type: int
  sample: 19
"""
