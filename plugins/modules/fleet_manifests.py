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
  - The render directory is written as one transaction, all clusters or none. Every cluster is planned first, then
    every new file is staged beside its target, and only when all are staged are they switched in and stale files
    pruned. A directory that cannot be written fails the task with nothing changed.
  - Symlinks below O(render_dir) are never followed. A symlinked directory or file fails the task before anything is
    written, because a file written or pruned through it could land outside the directory.
  - Writers hold an exclusive lock (C(<render_dir>/.gpufleet/lock)). A second run that finds the directory locked
    waits 30 seconds, then fails naming the holder. With O(render_token), the task also refuses to write when the
    directory changed after the placement read it.
  - With O(prune), the serving files of cluster directories whose cluster is no longer in the inventory are pruned
    too (C(removed_clusters)). Files there that are not serving objects are kept.
  - Rolling updates. The render directory is what GitOps serves, so a run writes only the first wave of the workloads
    whose C(spec) changes - at most each deployment's C(rollout.max_unavailable) replicas - and keeps the files of
    the others as they are (RV(rollout)); the next run, after a GitOps sync, writes the next wave. Replicas moved away
    (a drain or a pool change, where a replica is removed while another is created) lose their files at most
    C(rollout.max_unavailable) at a time, sharing that budget; the others keep their files until the next run. Every
    other object (new replicas, Services, claim templates, routes) is written at once.
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
    description: Remove files of serving objects that are no longer rendered, in the directories of clusters that
      left the inventory too.
    type: bool
    default: true
  render_token:
    description:
      - The C(render_token) returned by M(gpufleet.serving.fleet_placement) when it read O(render_dir). The task writes
        nothing and fails if the directory changed since then, because another run or a hand edit wrote it.
      - Omit it to skip this check.
    type: str
  unreadable:
    description:
      - The objects whose placement annotation could not be read, as returned in C(unreadable) by
        M(gpufleet.serving.fleet_placement). Their replicas were not counted by placement, so no file of their
        deployments is pruned this run; the file of an object that names no deployment is kept.
    type: list
    elements: dict
    default: []
  gitops:
    description:
      - The GitOps tool the render directory is for (C(gpufleet_gitops)). V(argocd) gives every object Argo CD's
        C(argocd.argoproj.io/sync-wave) C("10") (after the serving stack and the caches); V(flux) the Flux sync layer
        C(serving) (C(gpufleet.io/sync-layer)); V(none) writes the objects as they are.
      - Either way every namespace the serving objects use gets a C(Namespace) file under
        C(<render_dir>/<cluster>/_cluster/) (see M(gpufleet.serving.manifest_dir)).
    type: str
    choices: [flux, argocd, none]
    default: none
  prune_other_clusters:
    description:
      - With O(prune), also prune the serving files of cluster directories that are not in O(fleet) (clusters that
        left the inventory). C(apply.yml) turns it off when its play covers part of the plan's clusters.
    type: bool
    default: true
  hold_deployments:
    description: Deployments none of whose files are pruned this run (a partial apply's RV(gpufleet.serving.fleet_plan#module:held_outside)).
    type: list
    elements: str
    default: []
  plan_record:
    description:
      - The plan the files are rendered from (RV(gpufleet.serving.fleet_plan#module:record)). Recorded per cluster in
        C(<render_dir>/_fleet/applied/<fleet>/<cluster>.json), so an older plan is refused by the next apply.
    type: dict
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
  description:
    - Every fleet cluster's serving objects (an empty list for a cluster that runs no replica).
    - Not returned with O(render_dir) - the objects are in its files, and returned too they would make the task's
      result larger than AWX / Automation Controller stores for one event (700,000 characters).
  returned: when O(render_dir) is not set
  type: dict
  sample: {gke-us-central1: [{apiVersion: v1, kind: Service, metadata: {name: qwen-demo-3f9a1, namespace: ml-team}}]}
written:
  description:
    - Files (relative to O(render_dir)) created or changed.
    - Bounded (issue 26) - the first that fit in 50,000 characters of JSON; RV(written_count) counts them all and
      RV(truncated) is true when some are left out (the render directory holds every file).
  returned: success
  type: list
  elements: str
  sample: ["gke-us-central1/ml-team/deployment-qwen-demo-3f9a1-main.yaml"]
removed:
  description: Files (relative to O(render_dir)) pruned; bounded as RV(written) is (RV(removed_count)).
  returned: success
  type: list
  elements: str
  sample: ["onprem-a/ml-team/service-qwen-demo-0b2c4.yaml"]
removed_clusters:
  description:
    - Clusters no longer in the inventory whose serving files were pruned from O(render_dir); bounded as RV(written)
      is (RV(removed_clusters_count)).
  returned: success
  type: list
  elements: str
  sample: ["gke-old-region"]
files:
  description:
    - Per cluster directory, the number of files C(created), C(changed) and C(removed) (Namespace files included).
    - Bounded as RV(written) is - the first cluster directories in name order; RV(files_count) counts them all.
  returned: success
  type: dict
  sample: {"onprem-a": {"created": 2, "changed": 1, "removed": 0}}
file_lines:
  description:
    - "One line per cluster directory, C(<cluster>: +<created> ~<changed> -<removed> files)."
    - Bounded as RV(written) is (RV(file_lines_count)); when cut, the lines of the clusters whose files changed come
      first.
  returned: success
  type: list
  elements: str
  sample: ["onprem-a: +2 ~1 -0 files"]
rollout:
  description:
    - The rolling updates of this run (see the description) - C(deployments), per deployment with updates, its waves
      of replicas (C(<cluster>/<replica>)), those written now (C(updated)) and those whose files are kept for the
      next runs (C(pending), by wave); C(moves_kept) / C(moves_removed), per deployment, the replicas moved away whose
      files are kept this run / removed.
  returned: success
  type: dict
  sample:
    deployments:
      - deployment: chat
        max_unavailable: 1
        waves: [[lf-alpha/chat-1a2b3], [lf-beta/chat-4c5d6]]
        updated: [lf-alpha/chat-1a2b3]
        pending: [[lf-beta/chat-4c5d6]]
        stopped: null
    moves_kept: {}
    moves_removed: {}
rollout_lines:
  description: One report line per deployment with updates or kept moved replicas.
  returned: success
  type: list
  elements: str
routing_held:
  description:
    - Render mode - the deployments and clusters whose no longer placed replicas keep their files this run, because
      the fleet routing file of the last run still routes to them (M(gpufleet.serving.fleet_routing) writes their
      weight 0 in this run; the next run removes the files). See docs/routing.md.
  returned: success
  type: list
  elements: dict
  sample: [{deployment: chat, cluster: c1}]
written_count:
  description: How many files were created or changed (RV(written) may list fewer).
  returned: with O(render_dir)
  type: int
  sample: 13500
removed_count:
  description: How many files were pruned (RV(removed) may list fewer).
  returned: with O(render_dir)
  type: int
  sample: 0
removed_clusters_count:
  description: How many clusters' files were pruned (RV(removed_clusters) may list fewer).
  returned: with O(render_dir)
  type: int
  sample: 0
files_count:
  description: How many cluster directories RV(files) would list whole.
  returned: with O(render_dir)
  type: int
  sample: 5001
file_lines_count:
  description: How many lines RV(file_lines) would have whole.
  returned: with O(render_dir)
  type: int
  sample: 5001
truncated:
  description: Whether any of RV(written), RV(removed), RV(removed_clusters), RV(files) and RV(file_lines) was cut.
  returned: with O(render_dir)
  type: bool
  sample: false
unchanged:
  description: Number of objects whose file already held the same content.
  returned: success
  type: int
  sample: 19
"""
