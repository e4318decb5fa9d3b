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
  - With O(gitops), every object gets what its GitOps tool needs to sync it in order (stack, then caches, then
    serving) - Argo CD's C(argocd.argoproj.io/sync-wave) annotation, or the C(gpufleet.io/sync-layer) annotation the
    Flux Kustomizations of the fleet generator select by - and a Namespace an annotation that keeps the tool from ever
    deleting it. An annotation the object already has is kept. See C(docs/deploy.md), section GitOps - Flux and Argo CD.
  - When O(owner) selects serving or model cache objects (C(gpufleet.io/component) C(serving) or C(model-cache)),
    every namespace the cluster's serving and cache files use gets a C(v1 Namespace) file under
    C(<path>/<cluster>/_cluster/) (labelled C(gpufleet.io/component=namespace)); such a file is pruned once no serving
    or cache file uses its namespace. A Namespace file that is not one of these (the serving stack's) is left alone.
  - C(_fleet) is the fleet directory, never a cluster; O(cluster=_fleet) writes the fleet's GitOps generator into its
    namespace directories (C(<path>/_fleet/<namespace>/<kind>-<name>.yaml)), pruning only the O(owner)-labelled files
    there (never the plan document C(_fleet/plan.json)).
  - With O(clusters) (the fleet's clusters) and O(prune), the O(owner)-labelled files of every other cluster
    directory (a cluster that left the inventory) are pruned, and its workload Namespace files once no serving or cache
    file is left there; other files stay and are returned in RV(left).
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  path:
    description: Root of the render directory.
    type: path
    required: true
  cluster:
    description:
      - The cluster (inventory host) the objects belong to; the first directory level. V(_fleet) writes the fleet
        directory (the GitOps generator).
      - Required unless O(clusters) is given (then only clusters that left the inventory are pruned).
    type: str
  clusters:
    description:
      - The fleet's clusters (every inventory host of C(gpufleet_clusters)). With O(prune), the O(owner)-labelled files
        of every cluster directory not listed are pruned.
    type: list
    elements: str
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
  gitops:
    description:
      - The GitOps tool the render directory is for (C(gpufleet_gitops)); V(none) writes the objects as they are.
    type: str
    choices: [flux, argocd, none]
    default: none
attributes:
  check_mode:
    support: full
    description: Reports the files that would be written and removed without touching them.
  diff_mode:
    support: full
    description: Returns each file written or removed with its content before and after.
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
  description:
    - Files (relative to O(path)) that were created or changed.
    - RV(written), RV(created), RV(removed) and RV(removed_clusters) each hold their first entries that fit in 50,000
      characters of JSON (issue 26 - a fleet directory of thousands of clusters); C(written_count), C(created_count),
      C(removed_count) and C(removed_clusters_count) count them all, RV(truncated) says whether any was cut.
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
created:
  description: The files of RV(written) that did not exist before.
  returned: success
  type: list
  elements: str
removed_clusters:
  description: Cluster directories (clusters no longer in O(clusters)) whose owned files were pruned.
  returned: success
  type: list
  elements: str
left:
  description: Per cluster of RV(removed_clusters), the files kept there (not gpufleet.serving's, or another fleet's).
  returned: success
  type: dict
files:
  description: Per cluster directory written or pruned, the number of files C(created), C(changed) and C(removed).
  returned: success
  type: dict
  sample: {"onprem-a": {"created": 2, "changed": 1, "removed": 0}}
lines:
  description: >-
    One line per cluster directory, C(<cluster>: +<created> ~<changed> -<removed> files), then the files kept in the
    directories of clusters that left the inventory.
  returned: success
  type: list
  elements: str
  sample: ["onprem-a: +2 ~1 -0 files"]
truncated:
  description: Whether RV(written), RV(created), RV(removed) or RV(removed_clusters) leaves files out.
  returned: success
  type: bool
"""
