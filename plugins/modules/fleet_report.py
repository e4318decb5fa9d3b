#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# This module runs on the controller as an action plugin (plugins/action/fleet_report.py); this file holds its docs.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_report
short_description: Report the fleet's placement as text, as a JSON report file and as a picture (fleet.html)
version_added: 0.1.0
description:
  - The last step of the P(gpufleet.serving.model_deployment#role) role (deploy and status). Returns the report as one
    multi-line C(msg), which the P(gpufleet.serving.fleet#callback) callback prints as plain lines (and the default
    callback with C(callback_result_format = yaml) as a block of lines).
  - With O(level=summary) only O(summary) is printed (the placement table and the summary line); the report file
    holds everything.
  - With O(report_file), writes the machine-readable report there (JSON, version 2, atomically, only when it
    changed) - the summary, every deployment with its replicas and their readiness, every cluster's pools, nodes and
    devices with what holds each one, drift, what was removed or lost, and the text lines. It never holds a secret - no pod
    template, environment, connection or provisioning setting is read, and every text in it has URLs redacted.
  - With O(html_file), writes C(fleet.html) there, a self-contained page (inline SVG, no script, nothing loaded from
    the network) drawing clusters x pools x nodes x devices (used by which deployment and replica, free, held by
    other workloads, nodes tainted, cordoned, missing or drifted (what observed capacity knows, apply mode)) and per
    deployment its replicas and their readiness. From the placement in render mode, from the clusters in apply mode.
  - A fleet of more than 200 clusters is drawn on several pages - the main page (O(html_file)) holds the summary, what
    needs attention, every deployment's line, the clusters that need attention drawn in full and an index of every
    cluster; cluster pages (C(clusters-NNN.html), at most 100 clusters and about 2 MB each) in a directory beside it
    named after it (C(fleet.html) - C(fleet/)) draw every cluster. Pages no longer needed are removed (only pages this
    module wrote). A symlink where a report file or page goes fails the task before anything is written.
author:
  - gpufleet.serving contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.serving.fleet
options:
  placement:
    description: The result of M(gpufleet.serving.fleet_placement) (its C(replicas), C(results), C(status), C(drift),
      C(dropped), C(capacity_loss), C(unreadable)).
    type: dict
    required: true
  lines:
    description: The full report, one line each (the placement table, why replicas could not be placed, drift, ...).
    type: list
    elements: str
    required: true
  summary:
    description: The lines printed with O(level=summary) (the role passes the placement table and the summary line).
      Default, the last line of O(lines).
    type: list
    elements: str
  level:
    description: V(full) prints O(lines); V(summary) prints only O(summary).
    type: str
    choices: [full, summary]
    default: full
  report_file:
    description: Where to write the JSON report. Empty or omitted, none is written.
    type: path
  html_file:
    description: Where to write the fleet picture (C(fleet.html)). Empty or omitted, none is written.
    type: path
  mode:
    description: The role's mode. V(apply) draws what the clusters were observed to have and the replicas' readiness.
    type: str
    choices: [render, apply]
    default: render
  capacity:
    description: The capacity placement counted (C(gpufleet_capacity)).
    type: str
    choices: [declared, observed]
    default: declared
  drained:
    description: The drained clusters (C(gpufleet_drained_clusters)), in any form placement accepts.
    type: raw
    default: []
  cordoned:
    description: The cordoned clusters (C(gpufleet_cordoned_clusters)), in any form placement accepts.
    type: raw
    default: []
  unreachable:
    description: Clusters that could not be read this run.
    type: list
    elements: str
    default: []
  outside_play:
    description: Clusters of the fleet outside this play (C(--limit), a job slice).
    type: list
    elements: str
    default: []
  applied:
    description: The result of M(gpufleet.serving.fleet_apply) (apply mode), for the replicas' readiness.
    type: dict
  waited:
    description: Whether the apply waited for readiness; without, an applied replica is reported V(Applied).
    type: bool
    default: true
  not_reconciled:
    description: Clusters not read or not reconciled this run, with why (C(name -> reason)).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Reports, and writes no file.
  diff_mode:
    support: none
    description: Reports no diff.
  action:
    support: full
    description: Runs on the controller.
seealso:
  - module: gpufleet.serving.fleet_placement
  - module: gpufleet.serving.fleet_apply
"""

EXAMPLES = r"""
- name: Show the placement, write the JSON report and the fleet picture
  gpufleet.serving.fleet_report:
    fleet: "{{ fleet.fleet }}"
    placement: "{{ placement }}"
    lines: "{{ placement.table + placement.explain }}"
    summary: "{{ placement.table }}"
    level: summary
    report_file: "{{ inventory_dir }}/.gpufleet/report.json"
    html_file: "{{ inventory_dir }}/.gpufleet/fleet.html"
"""

RETURN = r"""
msg:
  description: The report (or, with O(level=summary), its summary), one multi-line text.
  returned: always
  type: str
gpufleet_report:
  description: What was reported and where it was written.
  returned: always
  type: dict
  contains:
    level:
      description: O(level).
      type: str
    file:
      description: The JSON report's path (null when none was written).
      type: str
    html:
      description: The fleet picture's path (null when none was written).
      type: str
    html_pages:
      description: How many cluster pages were written beside the fleet picture (0 up to 200 clusters).
      type: int
"""
