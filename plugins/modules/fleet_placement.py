#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# This module runs on the controller as an action plugin (plugins/action/fleet_placement.py); this file holds its docs.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_placement
short_description: Place every model deployment of the fleet, in order, sharing capacity
version_added: 0.1.0
description:
  - Runs M(gpufleet.serving.replica_placement)'s logic for every deployment of O(fleet) in the order they are listed,
    each one fed the replicas placed so far, so deployments share the fleet's capacity and never overcommit it.
    One task for the whole fleet; no per-deployment loop in YAML.
  - Observed replicas (what keeps placement sticky) are read from the C(gpufleet.io/placement) annotation of the
    rendered per-replica Services, from O(observed_by_cluster) or O(observed_objects) (apply mode, read from the
    clusters) and/or O(render_dir) (render mode).
  - Each object is read on its own. One whose annotation cannot be read is skipped (its replica is not counted as
    existing) and returned in RV(unreadable), named by cluster, namespace and name with the reason; the run goes on for
    every other object. Its deployment is returned in RV(held); pass RV(unreadable) to M(gpufleet.serving.fleet_apply) or
    M(gpufleet.serving.fleet_manifests) so that nothing of it is pruned while the object is unreadable.
  - A cluster in O(unreachable) takes no new replicas and keeps the ones it had, taken from O(fallback_replicas)
    (the last successful run's placement), so a blip never moves replicas.
  - A cluster in O(drained) gets the fleet's C(gpufleet.io/drain=true:NoExecute) taint (its replicas move away); one in
    O(cordoned) gets C(gpufleet.io/cordon=true:NoSchedule) (it takes no new replicas).
author:
  - gpufleet.serving contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.serving.fleet
options:
  observed_objects:
    description:
      - Objects read from the clusters (for example with M(kubernetes.core.k8s_info)) that may carry placement
        annotations. An object is reported as read from the cluster its C(gpufleet.io/cluster) label names; prefer
        O(observed_by_cluster).
    type: list
    elements: dict
    default: []
  observed_by_cluster:
    description:
      - Objects that may carry placement annotations, by the cluster they were read from, as returned in
        C(objects_by_cluster) by M(gpufleet.serving.fleet_read).
    type: dict
    default: {}
  render_dir:
    description: A render directory to read observed replicas from (render mode).
    type: path
  fallback_replicas:
    description: Replicas of the last successful run, used for the clusters in O(unreachable).
    type: list
    elements: dict
    default: []
  unreachable:
    description: Clusters that could not be read this run.
    type: list
    elements: str
    default: []
  drained:
    description:
      - Clusters to drain. Their replicas move away, each only when its replacement can be placed elsewhere (unless
        O(force_drain)); the others stay, with a warning.
      - A list, or the forms a survey sends (a JSON list as text, or names separated by commas). A name that is not a
        cluster of the fleet is an error.
    type: raw
    default: []
  cordoned:
    description:
      - Clusters to cordon (no new replicas). The same forms and check as O(drained).
    type: raw
    default: []
  force_drain:
    description:
      - Drain even the replicas no other cluster can take a replacement for (they are removed, not moved). Still
        subject to the capacity-loss guard (O(allow_capacity_loss)).
    type: bool
    default: false
  allow_capacity_loss:
    description:
      - The guarded shrink. A deployment that this run would leave with fewer placed replicas than are serving now
        (other than by a lower C(replicas)) is listed in RV(capacity_loss) and named in RV(blocked), unless this
        allows it - V(true) for every deployment, or a list of deployment names (an unknown name is an error) - or
        the deployment's C(disruption.min_available) still holds. The role fails on RV(blocked) before anything is
        written or applied.
    type: raw
    default: false
  explain:
    description:
      - Deployments to explain even when Ready (C(gpufleet_explain)). Their C(unschedulable) diagnostics stay in
        RV(results), their lines in RV(explain) and in the C(gpufleet_placement) custom stats. A deployment short of
        replicas is always explained. An unknown name is an error.
      - A list of deployment names, or the string forms a survey sends (a JSON list, or names separated by commas).
    type: raw
    default: []
  cluster_capacity:
    description:
      - Per cluster, what its pools really have, as returned in C(capacity) by M(gpufleet.serving.fleet_read) (with
        its O(gpufleet.serving.fleet_read#module:fleet) option). With it, RV(drift) says per cluster and pool what
        differs from the declared fleet, and O(capacity=observed) places against what is really usable. Clusters in
        O(unreachable) are left out.
    type: list
    elements: dict
    default: []
  capacity:
    description:
      - V(declared) places against the inventory's node counts. V(observed) counts, per pool, only the nodes read in
        O(cluster_capacity) as usable, those schedulable, Ready and publishing every device of the pool's class
        (attributes and capacity as the class says) with none tainted C(NoSchedule)/C(NoExecute) and none held by a
        ResourceClaim of another workload. Clusters not in O(cluster_capacity) (unreachable, or render mode) keep their declared
        counts.
    type: str
    choices: [declared, observed]
    default: declared
  grouped:
    description:
      - Also return the replicas grouped by deployment (RV(by_deployment)) and by cluster (RV(by_cluster)).
      - Set V(false) when only RV(replicas) is read (it is easily filtered with C(selectattr)). The same records twice
        more make the registered result, which Ansible copies and finalises, three times as large.
    type: bool
    default: true
  plan_file:
    description:
      - Write the plan document (a versioned JSON file, see C(docs/deploy.md)) here, atomically, when nothing stops
        the run before writing (no deployment in RV(blocked), and no shortfall with O(fail_on_unschedulable)).
        M(gpufleet.serving.fleet_plan) reads it for C(playbooks/apply.yml). A plan that decides what the file's plan
        decided keeps its C(created_at) and the file is not rewritten.
      - With O(publish_stats), the custom stat C(gpufleet_plan) carries its summary and path (and the whole document
        when it is under 60,000 characters).
    type: path
  fail_on_unschedulable:
    description: The run fails on a shortfall before writing (C(gpufleet_fail_on_unschedulable)); no plan is written then.
    type: bool
    default: false
  mode:
    description: The mode the plan is made for (C(gpufleet_mode)), recorded in the plan.
    type: str
    choices: [render, apply]
    default: render
  publish_stats:
    description:
      - Publish the placement as the custom stats C(gpufleet_placement) and C(gpufleet_drift) (RV(drift)), as
        M(ansible.builtin.set_stats) would with O(ansible.builtin.set_stats#module:per_host=false) and
        O(ansible.builtin.set_stats#module:aggregate=false). AWX and Tower job templates pass custom stats on as
        artifacts to the following nodes of a workflow.
      - C(gpufleet_placement) is a summary of at most 64 KB whatever the fleet's size, without replica records (the
        plan file has them). It holds C(results) (per deployment C(status), C(desired), C(scheduled), C(condition),
        C(clusters) with their replica counts and C(cluster_count), and C(explain) lines for a deployment short of
        replicas or named in O(explain)), C(status), C(shortfalls), C(degraded) (the shortfalls and the
        overcommitted), C(blocked), C(held), C(capacity), C(explained), C(dropped), C(capacity_loss) and
        C(unreadable). A list cut to fit has its full length in C(<name>_count), and C(truncated) is true.
      - They are published when the placement is made, so also when the play fails afterwards (for example, before
        writing anything, on a shortfall with C(gpufleet_fail_on_unschedulable)); a workflow's failure path sees what
        was short.
    type: bool
    default: false
  handoff_over:
    description:
      - When set, RV(replicas) whose JSON is longer than this many characters are handed to the next tasks through a
        file in the run's private local temporary directory, and RV(replicas) is a handle to it (issue 26; at 5,000
        clusters the replica records are about 2.2 MB, and AWX blanks a job event over 700,000 characters). Every
        action of this collection takes the handle wherever it takes the replicas (O(fleet) may be a handle too).
      - RV(by_deployment) and RV(by_cluster) (O(grouped=true)) are handed off the same way.
      - Unset (the default), RV(replicas) are always the records themselves. The C(model_deployment) role sets 200000.
    type: int
attributes:
  check_mode:
    support: full
    description: Pure computation; the same in check mode.
  diff_mode:
    support: none
    description: Reports no diff.
  action:
    support: full
    description: Runs on the controller.
requirements:
  - pydantic >= 2
seealso:
  - module: gpufleet.serving.replica_placement
  - module: gpufleet.serving.fleet_info
"""

EXAMPLES = r"""
- name: Place every deployment (render mode)
  gpufleet.serving.fleet_placement:
    fleet: "{{ gpufleet_fleet.fleet }}"
    render_dir: "{{ gpufleet_render_dir }}"
    drained: "{{ gpufleet_drained_clusters | default([]) }}"
  run_once: true
  register: gpufleet_placement

- name: Place every deployment and publish the placement for the next nodes of an AWX workflow
  gpufleet.serving.fleet_placement:
    fleet: "{{ gpufleet_fleet.fleet }}"
    observed_objects: "{{ gpufleet_services.objects }}"
    publish_stats: true
  run_once: true
"""

RETURN = r"""
plan:
  description: The plan written to O(plan_file) - C(path), C(written), C(summary), C(record) (what each cluster records
    of the plan it was applied with) and C(artifact) (the C(gpufleet_plan) custom stat).
  returned: when O(plan_file) is set and nothing stops the run
  type: dict
degraded:
  description: Deployments short of replicas, or with replicas on a pool that holds fewer nodes than they take.
  returned: success
  type: list
  elements: str
  sample: [llama-70b]
dropped:
  description: Every serving replica this run removes (placement's C(dropped) of each deployment, and the replicas of
    deployments no longer in the fleet), with why. Also in the C(gpufleet_placement) custom stats.
  returned: success
  type: list
  elements: dict
  sample: [{deployment: qwen-demo, cluster: gke-us-central1, index: 0, name: qwen-demo-gke-us-central1-0,
            reason: "taint gpufleet.io/drain=true:NoExecute is not tolerated (evicted)"}]
dropped_lines:
  description: RV(dropped), one line each.
  returned: success
  type: list
  elements: str
capacity_loss:
  description: The deployments this run would leave with fewer placed replicas than min(serving now, replicas), with
    the serving replicas lost, why, and what allows it (empty when nothing allows it).
  returned: success
  type: list
  elements: dict
  sample: [{deployment: qwen-demo, serving: 3, placed: 0, desired: 3, lost: [], why: "0 of 3 replica(s) scheduled",
            allowed_by: "", blocking: true}]
capacity_loss_lines:
  description: RV(capacity_loss), one line each.
  returned: success
  type: list
  elements: str
blocked:
  description: The deployments of RV(capacity_loss) that nothing allows to lose capacity; the role fails on them.
  returned: success
  type: list
  elements: str
replicas:
  description:
    - Every replica of every deployment after this run, in the shape of M(gpufleet.serving.replica_placement).
    - With O(handoff_over) and records larger than that, a handle instead - C(gpufleet_handoff) (V(replicas)), C(path),
      C(sha256), C(chars), C(items) (the number of replicas) - which the collection's actions take in their place; the
      plan file (RV(plan)) holds the same records.
  returned: success
  type: raw
  sample:
    - {name: qwen-demo-3f9a1, deployment: qwen-demo, namespace: ml-team, cluster: gke-us-central1, index: 0,
       engines: [{name: main, copies: 1, members: [{role: Standalone, pool: l4, nodes: 1, device_requests: []}]}]}
by_deployment:
  description:
    - The replicas grouped by deployment name (every deployment present, possibly with an empty list).
    - With O(handoff_over) and a value larger than that, a handle (as RV(replicas)).
  returned: success, with O(grouped=true)
  type: dict
  sample: {qwen-demo: []}
by_cluster:
  description: The replicas grouped by cluster name (a handle past O(handoff_over), as RV(by_deployment)).
  returned: success, with O(grouped=true)
  type: dict
  sample: {gke-us-central1: []}
results:
  description:
    - Per deployment, M(gpufleet.serving.replica_placement)'s result without C(replicas).
    - The C(unschedulable) diagnostics of a Ready deployment are left out unless it is named in O(explain)
      (C(unschedulable_omitted) counts its clusters). A deployment explained on more than 50 clusters has them grouped
      by diagnosis (the first cluster's entry lists the others in C(same), their number in C(same_count)); the whole
      stays under 300,000 characters (an AWX job event is blanked over 700,000).
  returned: success
  type: dict
  sample:
    qwen-demo: {desired: 3, scheduled: 3, changed: false,
                condition: {type: ReplicasScheduled, status: "True", reason: ReplicasCreated, message: 3/3 replicas scheduled}}
shortfalls:
  description: Deployments with fewer replicas scheduled than desired.
  returned: success
  type: list
  elements: str
  sample: [llama-70b]
table:
  description: The placement table, one line per deployment.
  returned: success
  type: list
  elements: str
  sample: ["DEPLOYMENT  DESIRED  SCHEDULED  CONDITION        PLACEMENT (cluster: replicas/pool)"]
explain:
  description:
    - For every shortfall and every deployment named in O(explain), why each candidate cluster and pool could not
      take a replica. Clusters with the same diagnosis share its lines when a deployment is explained on more than
      50 clusters (the first cluster, then how many more and the first five of them); the lines stay under 200,000
      characters.
  returned: success
  type: list
  elements: str
  sample: ["llama-70b: 1/2 scheduled - ...", "  gke-us-central1/l4: request gpu: selector ... is false"]
status:
  description:
    - Per deployment, C(Ready) when every desired replica is placed, C(Degraded) when some could not be (the
      deployment is in C(shortfalls)). A degraded deployment does not fail the task; the M(gpufleet.serving.model_deployment)
      role fails before writing anything only when C(gpufleet_fail_on_unschedulable) is set.
  returned: success
  type: dict
  sample: {qwen-demo: Ready, too-big: Degraded}
drift:
  description:
    - O(cluster_capacity), less the clusters in O(unreachable). Per cluster, per pool the declared, labelled and
      usable nodes and why nodes are not usable; nodes that publish GPU devices without a pool label; claims of other
      workloads that hold devices.
  returned: success
  type: list
  elements: dict
  sample:
    - cluster: lf-alpha
      pools:
        - {pool: l4, class: l4-1x, declared_nodes: 3, labelled_nodes: 3, usable_nodes: 2,
           notes: ["1 of 3 nodes cordoned"], nodes: {l4-2: [cordoned]}}
      unlabelled_nodes: []
      unknown_pools: []
      foreign_claims: []
      drift: ["lf-alpha/l4: 1 of 3 nodes cordoned"]
drift_lines:
  description: Every line of RV(drift)'s C(drift), for every cluster (empty when what was read matches the fleet).
  returned: success
  type: list
  elements: str
unreadable:
  description:
    - The objects whose C(gpufleet.io/placement) annotation could not be read, skipped by placement (their replicas are
      not counted as existing). Also in the C(gpufleet_placement) custom stats.
    - Pass it to M(gpufleet.serving.fleet_apply) or M(gpufleet.serving.fleet_manifests) (their C(unreadable) option); nothing
      of the deployment of a skipped object is pruned there, and an object that names no deployment is kept.
  returned: success
  type: list
  elements: dict
  sample:
    - {cluster: lf-beta, kind: Service, api_version: v1, namespace: chat-team, name: chat-1a2b3, deployment: chat,
       reason: "Service lf-beta/chat-team/chat-1a2b3 carries an unreadable gpufleet.io/placement annotation: Expecting
       value: line 1 column 1 (char 0)"}
unreadable_lines:
  description: RV(unreadable), one line each (the reason and what is held).
  returned: success
  type: list
  elements: str
held:
  description: The deployments of RV(unreadable) (nothing of them may be pruned this run). Also in the
    C(gpufleet_placement) custom stats.
  returned: success
  type: list
  elements: str
  sample: [chat]
cold:
  description:
    - Per placed replica of a deployment that mounts a cache - whether it starts C(cold) (its cache is not hydrated on
      that cluster yet in apply mode, not staged there yet in render mode, C(basis)) and a cold one's C(eta_seconds)
      (the cache's size divided by the cluster's measured or declared C(gpufleet_hydration_throughput); null when
      neither is known). Among equally loaded clusters, new replicas go first where the cache is warm.
    - Bounded at any fleet size - the cold replicas first, then the warm ones, at most 100,000 characters; RV(cold_count)
      counts what was left out. The plan's C(placement.cold) lists every replica.
  returned: success
  type: list
  elements: dict
  sample:
    - {deployment: chat, cluster: gke-a, index: 0, cache: qwen, cold: true, basis: hydrated, eta_seconds: 410,
       throughput: 52428800, throughput_source: declared}
cold_count:
  description: The cold and warm replicas of the whole placement, and how many entries RV(cold) left out (C(omitted)).
  returned: success
  type: dict
  sample: {cold: 1, warm: 2, omitted: 0}
cold_lines:
  description:
    - The cold replicas, one line each (where, which cache, the ETA and its basis); bounded like RV(cold), a last line
      counts the ones left out.
  returned: success
  type: list
  elements: str
  sample: ["chat replica (gke-a, 0): cold start, cache qwen (20Gi) not hydrated; ETA ~7 min at 50 MiB/s (declared)"]
render_token:
  description:
    - A fingerprint of the render directory taken just before it was read (empty when it does not exist yet), or
      null without O(render_dir). Pass it to M(gpufleet.serving.fleet_manifests) as O(gpufleet.serving.fleet_manifests#module:render_token)
      so it refuses to write over what another run wrote since.
  returned: success
  type: str
  sample: 9f2c1e0d4b7a6c5e3f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70
"""
