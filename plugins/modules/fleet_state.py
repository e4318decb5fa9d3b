#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# This module runs on the controller as an action plugin (plugins/action/fleet_state.py); this file holds its docs.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_state
short_description: Record a cluster of the fleet as drained, cordoned or neither, in the fleet's durable state
version_added: 0.3.0
description:
  - The fleet's durable state is a small YAML file of drained and cordoned clusters that every run of the
    C(model_deployment) role reads (P(gpufleet.serving.fleet_state#lookup)) and adds to C(gpufleet_drained_clusters) and
    C(gpufleet_cordoned_clusters). C(playbooks/drain.yml) changes it with this module.
  - It lives where the fleet's other durable files are, not in the inventory, because an AWX / Automation Controller
    job's inventory is deleted when the job ends - C(<render_dir>/_fleet/<gpufleet_fleet_name>/fleet-state.yml) in
    render mode (commit it with the rendered files), beside the placement state file in apply mode.
  - A cluster has one state. V(drained) - the fleet taint C(gpufleet.io/drain=true:NoExecute), its replicas move away;
    V(cordoned) - C(gpufleet.io/cordon=true:NoSchedule), no new replicas; V(absent) - neither.
  - O(cluster) must be one of O(clusters) (an unknown name fails, with the closest one), and names that are no longer
    among O(clusters) are dropped from the file when it is written.
  - What O(drained) and O(cordoned) (the variables) say applies too and is not changed here. A cluster they name
    cannot be set otherwise with this module - the task fails, naming the variable, before anything is written.
  - The file is written atomically, only when it changes, never through a symlink (nor, below O(render_dir), through a
    symlinked directory), under the render directory's writer lock when it is inside it.
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  path:
    description: The fleet state file (C(model_deployment_fleet_state_file)).
    type: path
    required: true
  render_dir:
    description: The render directory, when O(path) may be inside it.
    type: path
  cluster:
    description: The cluster to record. Omitted, the state is only read.
    type: str
  state:
    description: What O(cluster) is to be.
    type: str
    choices: [drained, cordoned, absent]
    default: drained
  clusters:
    description: The fleet's clusters (the inventory group C(gpufleet_clusters)).
    type: list
    elements: str
    required: true
  drained:
    description:
      - C(gpufleet_drained_clusters) - clusters the variables drain this run; a list, a JSON list as text, or names
        separated by commas or new lines (a survey's forms).
    type: raw
    default: []
  cordoned:
    description: C(gpufleet_cordoned_clusters), in the same forms as O(drained).
    type: raw
    default: []
attributes:
  check_mode:
    support: full
    description: Returns the state the change would make, and writes nothing.
  diff_mode:
    support: full
    description: The file's text before and after.
  action:
    support: full
    description: Runs on the controller.
seealso:
  - module: gpufleet.serving.fleet_placement
"""

EXAMPLES = r"""
- name: Cordon a cluster for the whole fleet (it keeps its replicas and takes no new ones)
  gpufleet.serving.fleet_state:
    path: "{{ gpufleet_render_dir }}/_fleet/{{ gpufleet_fleet_name }}/fleet-state.yml"
    render_dir: "{{ gpufleet_render_dir }}"
    cluster: gke-us-central1
    state: cordoned
    clusters: "{{ groups['gpufleet_clusters'] }}"
    drained: "{{ gpufleet_drained_clusters | default([]) }}"
    cordoned: "{{ gpufleet_cordoned_clusters | default([]) }}"
"""

RETURN = r"""
drained:
  description: The clusters drained this run - the file's (after the change) and the variables'.
  returned: success
  type: list
  elements: str
  sample: ["gke-us-central1"]
cordoned:
  description: The clusters cordoned this run (a drained cluster is not listed here).
  returned: success
  type: list
  elements: str
  sample: []
recorded:
  description: The file's content after the change, C(drained) and C(cordoned).
  returned: success
  type: dict
  sample: {drained: ["gke-us-central1"], cordoned: []}
path:
  description: The fleet state file.
  returned: success
  type: str
  sample: /srv/gitops/fleet/_fleet/prod/fleet-state.yml
"""
