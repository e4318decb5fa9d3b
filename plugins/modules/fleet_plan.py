#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# This module runs on the controller as an action plugin (plugins/action/fleet_plan.py); this file holds its docs.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_plan
short_description: Take a plan document for an apply of the play's clusters
version_added: 0.4.0
description:
  - Reads the plan C(playbooks/plan.yml) made (M(gpufleet.serving.fleet_placement)'s
    O(gpufleet.serving.fleet_placement#module:plan_file)) from O(plan) (the C(gpufleet_plan) custom stat of an AWX
    workflow - the document inline, or its C(path)) or O(plan_file), and returns what an apply of the clusters in
    O(play) renders or applies - the plan's fleet and replicas restricted to them. It decides nothing - job slices,
    C(--limit) and parallel workflow branches apply one decision.
  - Refuses (naming both sides) a plan of an unknown version, a plan edited after it was written (its digests and id
    are checked), a plan made from another inventory (fleet identity, classes, deployments, caches, or a cluster of
    the play that is not in the plan or changed since), and a plan older than the one a cluster of the play last took
    (O(render_dir)'s C(_fleet/applied/<fleet>/<cluster>.json), or the C(gpufleet-plan-<fleet>) ConfigMaps in
    O(recorded_by_cluster)).
  - When the play does not cover every cluster of the plan, a deployment whose new replicas are outside the play is
    returned in RV(held_outside) - this apply cannot wait for them to be Ready, so nothing of it is removed.
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  plan:
    description:
      - The plan, as C(playbooks/plan.yml) published it (custom stat C(gpufleet_plan)), or the document as JSON text.
    type: raw
  plan_file:
    description: A plan file (used when O(plan) carries no document or path).
    type: path
  fleet:
    description:
      - This inventory's normalised fleet (M(gpufleet.serving.fleet_info) with
        O(gpufleet.serving.fleet_info#module:partial=true)), compared with the plan's.
    type: dict
    required: true
  play:
    description: The clusters this apply renders or applies (C(ansible_play_hosts)).
    type: list
    elements: str
    required: true
  mode:
    description: The mode of this apply (C(gpufleet_mode)); a plan made for the other mode is refused.
    type: str
    choices: [render, apply]
  render_dir:
    description: Render mode - the render directory whose C(_fleet/applied/) records are read.
    type: path
  recorded_by_cluster:
    description: Apply mode - the plan record ConfigMaps read from each cluster (M(gpufleet.serving.fleet_read)).
    type: dict
    default: {}
  handoff_over:
    description:
      - When set, RV(fleet) and RV(replicas) whose JSON is longer than this many characters are handed to the next
        tasks through a file in the run's private local temporary directory (a handle each, as
        M(gpufleet.serving.fleet_placement)'s O(gpufleet.serving.fleet_placement#module:handoff_over) describes). The
        C(model_deployment) role sets 200000; unset, they are always the values themselves.
    type: int
attributes:
  check_mode:
    support: full
    description: Read-only.
  diff_mode:
    support: none
    description: Read-only.
"""

EXAMPLES = r"""
- name: Take the plan for this play's clusters
  gpufleet.serving.fleet_plan:
    plan: "{{ gpufleet_plan | default(omit) }}"
    plan_file: "{{ gpufleet_plan_file | default(omit) }}"
    fleet: "{{ fleet_info_result.fleet }}"
    play: "{{ ansible_play_hosts }}"
    render_dir: "{{ gpufleet_render_dir }}"
  run_once: true
  register: plan
"""

RETURN = r"""
source:
  description: Where the plan came from (a file, or C(gpufleet_plan)).
  returned: success
  type: str
summary:
  description: The plan's identity (C(fleet_digest), C(plan_id), C(created_at)), counts and per-deployment status.
  returned: success
  type: dict
record:
  description: What each cluster records of the plan once applied.
  returned: success
  type: dict
fleet:
  description:
    - The plan's normalised fleet with only the play's clusters.
    - With O(handoff_over) and a fleet larger than that, a handle the collection's actions take in its place.
  returned: success
  type: dict
replicas:
  description:
    - The plan's replica records on the play's clusters.
    - With O(handoff_over) and records larger than that, a handle the collection's actions take in their place.
  returned: success
  type: raw
outside:
  description: The plan's clusters outside the play (their objects are not touched).
  returned: success
  type: list
  elements: str
full:
  description: Whether the play covers every cluster of the plan (then clusters that left the plan are pruned too).
  returned: success
  type: bool
held_outside:
  description: Deployments nothing of which is removed by this apply, with the clusters outside the play that hold
    their new replicas.
  returned: success
  type: dict
held_lines:
  description: One line per held deployment, for the report.
  returned: success
  type: list
  elements: str
table:
  description: The placement table of the plan.
  returned: success
  type: list
  elements: str
status:
  description: Each deployment's status in the plan (Ready / Degraded).
  returned: success
  type: dict
degraded:
  description: Deployments short of replicas in the plan.
  returned: success
  type: list
  elements: str
routing:
  description: The plan's routing (per deployment, per cluster of the play - placed replicas, weight, draining).
  returned: success
  type: dict
fleet_routing:
  description: The plan's routing over every cluster of the plan (for M(gpufleet.serving.fleet_routing)).
  returned: success
  type: dict
dropped:
  description: The replicas the plan removes (its placement's C(dropped)).
  returned: success
  type: list
  elements: dict
"""
