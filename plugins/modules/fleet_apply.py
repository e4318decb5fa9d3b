#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# This module runs on the controller as an action plugin (plugins/action/fleet_apply.py); this file holds its docs.
#
# kubernetes.core.k8s applies to one cluster per task and module process, reads every object back before a
# server-side apply, and has no notion of a step that must finish on every cluster before the next starts. Applying
# the fleet with it cost about eleven module processes per cluster and run. This plugin reconciles every cluster in
# one task, a thread per cluster, with kubernetes.core's own client and authentication options.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_apply
short_description: Apply, await and prune the serving objects of every cluster of the fleet in one task
version_added: 0.3.0
description:
  - Reconciles every cluster of O(connections) with the objects rendered for it in O(objects_by_cluster), in three
    steps that each finish on every cluster before the next starts.
  - B(apply) - lists the objects the collection owns (labels C(app.kubernetes.io/managed-by=gpufleet.serving),
    C(gpufleet.io/component=serving); one list per serving kind) and keeps this fleet's (C(gpufleet.io/fleet), see
    O(fleet_name)), creates missing namespaces (never applied, labelled
    or pruned), and server-side applies (field manager O(field_manager), conflicts forced) every object that is not
    already current. An object is current when it carries the digest annotation C(gpufleet.io/applied-digest) of the
    same rendering and still holds every value the rendering sets, so an unchanged fleet sends no write and a value
    somebody changed is put back.
  - Current is judged on the fields the collection manages, as server-side apply merges them. The object's
    C(metadata.managedFields) entry of O(field_manager) (read with the list, no request of its own) must still hold
    every field the rendering sets - a field another manager changed or removed since is no longer there, so the
    object is applied again - and the object must still hold every value. In a list Kubernetes merges by key
    (containers and env by name, ports by port and protocol, volumes by name, volumeMounts by mountPath, ...) each of
    our items is found by its key; items another manager added (C(kubectl set env), a mutating webhook) make no apply
    and are left alone.
    Atomic lists (args, command, tolerations) must be the same. Quantities compare as Kubernetes quantities (a C(cpu)
    of C(2) is the stored C("2"), one of C("0.5") the stored C("500m")).
  - B(wait) - with O(wait), polls each cluster's workloads until their own replica counts equal their desired counts
    (a Deployment's updated, ready and available replicas; a LeaderWorkerSet's ready and updated replicas; an
    LLMInferenceService's C(Ready) condition), or O(timeout) seconds pass. A LeaderWorkerSet whose spec was just
    changed counts as not ready until its controller has written its status since (its status has no
    C(observedGeneration)).
  - B(rolling updates) - apply and wait run in waves. An I(update) is a workload that exists and whose C(spec)
    changes (its pods restart). Of a deployment's updates, at most its C(rollout.max_unavailable) replicas (see
    O(max_unavailable)) are applied in one wave, across all clusters; everything else (new replicas, Services, claim
    templates, routes, a change to a workload's labels or annotations only) is applied in the first wave. Replicas
    that are not Ready before the run go first and use up the first wave's budget. After each wave the task waits
    (up to O(timeout) each wave) until everything applied so far is ready, then applies the next. A deployment with a
    workload that does not become ready stops there - its later waves are never applied, so those replicas keep
    their old template - and is held. Without O(wait), only the first wave is applied; the next run applies the next.
  - B(prune) - deletes owned objects that are no longer rendered for their cluster, except those of held
    deployments. A deployment is held when one of its workloads is not ready, when it has objects on a cluster whose
    apply failed, when its rolling update stopped or has waves left, or when an object of it is in O(unreadable); its
    old replicas stay everywhere until a later run, so a drain never deletes an old replica before its replacement is
    ready.
  - Another fleet's objects on a shared cluster are never pruned or taken as current. A cluster where an object to
    apply has the name of another fleet's object, or where an owned object carries no fleet label while
    C(adopt_unlabelled) is unset, is not changed and is returned in RV(failed_clusters).
  - A cluster that fails (no answer, a refused request, a timeout) never stops the others. It is returned in
    RV(failed_clusters); the task fails at the end when O(fail_on_cluster_error) is true.
author:
  - gpufleet.serving contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.serving.k8s_fleet
options:
  objects_by_cluster:
    description:
      - The objects to run on each cluster of O(connections), as returned in C(objects_by_cluster) by
        M(gpufleet.serving.fleet_manifests). A cluster of O(connections) with no entry runs none (everything it has
        that the collection owns is pruned).
      - Exactly one of O(objects_by_cluster) and O(fleet) is required.
    type: dict
  fleet:
    description:
      - The validated fleet, as returned in C(fleet) by M(gpufleet.serving.fleet_info). With O(replicas), the plugin
        renders every cluster's objects itself, exactly as M(gpufleet.serving.fleet_manifests) does, instead of
        taking them in O(objects_by_cluster); only the clusters of O(connections) are reconciled.
      - This is how the C(model_deployment) role applies - the rendered objects never pass through Ansible's
        variables, which saves about half a second a run for a few hundred objects.
    type: dict
  fleet_name:
    description:
      - The fleet whose objects these are (C(gpufleet_fleet_name)), the value of their C(gpufleet.io/fleet) label.
        Taken from O(fleet) when that is given; required with O(objects_by_cluster).
    type: str
  adopt_unlabelled:
    description:
      - With O(objects_by_cluster), what owned objects without a C(gpufleet.io/fleet) label are
        (C(gpufleet_adopt_unlabelled)) - V(true) this fleet's, V(false) another inventory's (never touched), unset an
        error for their cluster. Taken from O(fleet) when that is given.
    type: bool
  max_unavailable:
    description:
      - With O(objects_by_cluster), each deployment's C(rollout.max_unavailable) by name, for the rolling updates (see
        the description); a deployment not named gets 1. Taken from O(fleet) when that is given.
    type: dict
  field_manager:
    description: The server-side apply field manager.
    type: str
    default: gpufleet
  wait:
    description: Wait until every workload is ready before pruning.
    type: bool
    default: true
  timeout:
    description: Seconds to wait for readiness at most.
    type: float
    default: 900
  poll_interval:
    description: Seconds between two readiness polls of a cluster.
    type: float
    default: 2
  state_file:
    description:
      - A JSON file to record the placement in, for a later run that cannot read some cluster (it keeps the replicas
        recorded for it). The replicas of a cluster that could not be reconciled stay as previously recorded.
      - Written atomically, only when it changes; not in check mode.
    type: path
  replicas:
    description: Every replica of every deployment, as returned in C(replicas) by M(gpufleet.serving.fleet_placement).
      Required with O(state_file) and with O(fleet).
    type: list
    elements: dict
  unreadable:
    description:
      - The objects whose placement annotation could not be read, as returned in C(unreadable) by
        M(gpufleet.serving.fleet_placement). Their replicas were not counted by placement, so nothing of their
        deployments is pruned this run (they are in RV(held)); an object that names no deployment is itself never
        pruned.
    type: list
    elements: dict
    default: []
  fail_on_cluster_error:
    description: Fail the task when a cluster could not be reconciled (after every other cluster was).
    type: bool
    default: true
  prune:
    description:
      - V(false) applies and waits but deletes nothing. The M(gpufleet.serving.model_deployment) role sets it when the
        play is narrower than the fleet (C(--limit), a sliced inventory) and C(gpufleet_allow_partial_play) is not set.
    type: bool
    default: true
  unread:
    description:
      - Clusters of the fleet that were not read this run (unreachable, or outside the play). O(state_file) keeps
        their replicas as last recorded, as for a cluster that failed to reconcile.
    type: list
    elements: str
    default: []
  hold_deployments:
    description: Deployments nothing of which is pruned this run (a partial apply's RV(gpufleet.serving.fleet_plan#module:held_outside)).
    type: list
    elements: str
    default: []
  plan_record:
    description:
      - The plan applied (RV(gpufleet.serving.fleet_plan#module:record)). Each cluster reconciled gets it in the
        ConfigMap C(kube-system/gpufleet-plan-<fleet>) (owned, fleet-labelled), so an older plan is refused by the
        next apply.
    type: dict
  handoff_over:
    description:
      - When set, a RV(pending) whose JSON is longer than this many characters is handed to the next tasks through a
        file in the run's private local temporary directory, and RV(pending) is a handle to it (issue 26; AWX blanks a
        job event over 700,000 characters). M(gpufleet.serving.fleet_routing) and M(gpufleet.serving.fleet_report)
        take the handle in its place. The C(model_deployment) role sets 200000.
    type: int
attributes:
  check_mode:
    support: full
    description: Applies with the API server's dry run, creates no namespace, waits for nothing and deletes nothing;
      reports what would be applied and deleted.
  diff_mode:
    support: none
    description: Reports no diff.
  action:
    support: full
    description: Runs on the controller.
seealso:
  - module: gpufleet.serving.fleet_manifests
  - module: gpufleet.serving.fleet_read
  - module: kubernetes.core.k8s
"""

EXAMPLES = r"""
- name: Render and apply every cluster's serving workloads (connections pinned by fleet_info's pin_connections)
  gpufleet.serving.fleet_apply:
    connections: "{{ gpufleet_fleet.connections }}"
    fleet: "{{ gpufleet_fleet.fleet }}"
    replicas: "{{ gpufleet_placement.replicas }}"
    timeout: 600
  run_once: true
  register: gpufleet_applied

- name: Apply objects rendered beforehand
  gpufleet.serving.fleet_apply:
    connections: "{{ gpufleet_fleet.connections }}"
    objects_by_cluster: "{{ gpufleet_manifests.objects_by_cluster }}"
    fleet_name: "{{ gpufleet_fleet.fleet.name }}"
  run_once: true
"""

RETURN = r"""
clusters:
  description:
    - What happened on each cluster - bounded whatever the fleet's size (issue 26). Each list (C(applied),
      C(namespaces), C(deleted), C(pending)) holds its first 10 entries and C(<list>_count) counts them all.
    - At most 200,000 characters of JSON - the failed clusters first, then those with workloads not ready, then the
      changed ones, then the others; RV(clusters_count) counts every cluster, RV(totals) sums them all, and
      RV(truncated) says whether anything was cut.
  returned: always
  type: dict
  sample:
    lf-alpha:
      changed: true
      applied: [Service/ml-team/chat-1a2b3, Deployment/ml-team/chat-1a2b3-main]
      applied_count: 2
      unchanged: 12
      namespaces: [ml-team]
      namespaces_count: 1
      deleted: []
      deleted_count: 0
      pending: []
      pending_count: 0
      polls: 3
      requests: 17
      failed: null
clusters_count:
  description: How many clusters were reconciled (or failed), whether or not RV(clusters) lists them all.
  returned: always
  type: int
  sample: 3
totals:
  description: Over every cluster - clusters, changed, failed, and the objects applied, deleted, unchanged, the
    namespaces created, the workloads pending and the API requests.
  returned: always
  type: dict
  sample: {clusters: 3, changed: 1, failed: 0, applied: 2, deleted: 0, unchanged: 12, namespaces: 1, pending: 0,
           requests: 51}
truncated:
  description: Whether RV(clusters), RV(rollout) or RV(failed_clusters) leaves entries out.
  returned: always
  type: bool
failed_clusters:
  description:
    - The clusters that could not be reconciled, and why - the first ones (in name order) whose reasons fit in 100,000 characters of JSON;
      RV(failed_clusters_count) counts them all and C(truncated) is true when some are left out (issue 26).
  returned: always
  type: dict
  sample: {lf-gamma: "apply Deployment/ml-team/chat-9f8e7-main: 503: the server is shutting down"}
failed_clusters_count:
  description: How many clusters could not be reconciled (every one of them, whether RV(failed_clusters) lists it or not).
  returned: always
  type: int
  sample: 1
held:
  description: Deployments none of whose objects were deleted this run (see the description).
  returned: always
  type: list
  elements: str
  sample: [chat]
state_changed:
  description: Whether O(state_file) was written.
  returned: when O(state_file) is set, not in check mode
  type: bool
rollout:
  description:
    - Per deployment with updates (workloads whose spec changed), its rolling update - its waves of replicas
      (C(<cluster>/<replica>)), those updated, those still on the old template (C(pending), by wave), why it stopped
      (or null) and a line for the report.
    - C(waves), C(updated) and C(pending) hold their first entries within a share of 150,000 characters;
      C(waves_count), C(updated_count) and C(pending_count) count them all.
  returned: always
  type: list
  elements: dict
  sample:
    - deployment: chat
      max_unavailable: 1
      waves: [[lf-alpha/chat-1a2b3], [lf-beta/chat-4c5d6]]
      updated: [lf-alpha/chat-1a2b3]
      pending: [[lf-beta/chat-4c5d6]]
      stopped: "replica chat-1a2b3 on lf-alpha did not become Ready within 900s (Deployment ml-team/chat-1a2b3-main: 0/1 ready)"
      line: "chat: rolling update stopped after 1 of 2 replica(s) ..."
rollout_stopped:
  description: The report line of each deployment whose rolling update stopped.
  returned: always
  type: list
  elements: str
pending:
  description:
    - Workloads not ready when the wait ended (every cluster, every one of them).
    - With O(handoff_over) and a list longer than that, a handle to the file that holds it instead - C(gpufleet_handoff)
      (V(pending)), C(path), C(sha256), C(chars), C(items).
  returned: always
  type: raw
  sample:
    - cluster: lf-alpha
      kind: Deployment
      namespace: ml-team
      name: chat-1a2b3-main
      deployment: chat
      message: "Deployment ml-team/chat-1a2b3-main: 0/1 ready, 0/1 available"
pending_count:
  description: How many workloads were not ready when the wait ended (RV(pending)'s length).
  returned: always
  type: int
  sample: 1
"""
