#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# This module runs on the controller as an action plugin (plugins/action/fleet_info.py); this file holds its docs.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_info
short_description: Validate the GPU fleet described in the inventory and return it normalised
version_added: 0.1.0
description:
  - Reads the fleet from the inventory the play runs with. Every host in O(group) is one Kubernetes cluster; its
    C(gpufleet_provider), C(gpufleet_gke), C(gpufleet_eks), C(gpufleet_kubeconfig), C(gpufleet_context),
    C(gpufleet_node_pools), C(gpufleet_taints), C(gpufleet_cache_storage_class) and C(gpufleet_ready) host variables
    describe it.
  - Validates inference classes, clusters, model deployments and model caches with the collection's typed model,
    including cross-references (a pool's class exists, a deployment's cache exists and is in its namespace, an engine has
    one V(Standalone) or one V(Leader) plus one V(Worker) member, DRA devices name a device class, names are DNS labels,
    no duplicates) and compiles every CEL device selector.
  - "On error the task fails with one line per problem, naming the variable and field path, for example
    C(gpufleet_model_deployments[0].engines[0].members[1].role: must be one of Standalone, Leader, Worker (got 'Boss'))."
  - Playbooks of this collection run it first, so nothing is written or applied from an invalid fleet.
  - Resolves every deployment's and cache's C(clusters) host pattern with Ansible's own pattern rules
    (V(gpufleet_clusters:&prod:!onprem-a)), restricted to the fleet group.
  - Requires the fleet's name (O(fleet_name), by default the C(gpufleet_fleet_name) variable), a Kubernetes label
    value. Every object the collection owns for the fleet carries it as label C(gpufleet.io/fleet); pruning, teardown,
    the observed replicas and status select by it, so two inventories that share a cluster never touch each other's
    objects.
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  group:
    description: Inventory group whose hosts are the fleet's clusters.
    type: str
    default: gpufleet_clusters
  inference_classes:
    description: Inference classes keyed by name. Defaults to the C(gpufleet_inference_classes) variable.
    type: dict
  model_deployments:
    description:
      - Model deployments. Defaults to the C(gpufleet_model_deployments) variable followed by every
        C(gpufleet_model_deployments_*) variable (sorted by name), merged into one list, so each team can own a file;
        a name defined in two of them is an error naming both.
    type: list
    elements: dict
  model_caches:
    description:
      - Model caches. Defaults to the C(gpufleet_model_caches) variable followed by every C(gpufleet_model_caches_*)
        variable (sorted by name), merged as O(model_deployments) is.
    type: list
    elements: dict
  fleet_name:
    description:
      - The fleet's name, put on every object the collection owns as label C(gpufleet.io/fleet). Defaults to the
        C(gpufleet_fleet_name) variable; required (a Kubernetes label value, at most 63 characters).
    type: str
  adopt_unlabelled:
    description:
      - What to do with owned objects that carry no C(gpufleet.io/fleet) label (rendered or applied before fleet
        identity). Defaults to the C(gpufleet_adopt_unlabelled) variable.
      - V(true) - they are this fleet's (adopted, labelled at the next write); V(false) - they belong to another
        inventory and are never touched; unset - finding one stops the run before anything is changed.
    type: bool
  check_selectors:
    description: Compile every CEL device selector and report the ones that do not compile.
    type: bool
    default: true
  partial:
    description:
      - The inventory holds part of the fleet (an AWX job slice's, for C(playbooks/apply.yml), which applies a plan).
        A deployment's or cache's host pattern that matches none of its clusters is then not an error.
    type: bool
    default: false
  pin_connections:
    description:
      - Inventory hosts (usually C(ansible_play_hosts)) whose Kubernetes connection to pin, returned in
        RV(connections) for M(gpufleet.serving.fleet_read) and M(gpufleet.serving.fleet_apply).
      - Each host's C(gpufleet_kubeconfig) (a path, C(~) expanded, or an inline kubeconfig mapping) and/or
        C(gpufleet_context) is its connection. A host with neither fails the task, naming every such host, so nothing
        is ever read from or applied to whatever cluster the current kube context points at.
      - Pinning here, in the step that validates the fleet, costs no task of its own (a task per host cost the
        C(model_deployment) role about half a second per run).
    type: list
    elements: str
  handoff_over:
    description:
      - When set, a RV(fleet) whose JSON is longer than this many characters is handed to the next tasks through a
        file in the run's private local temporary directory, and RV(fleet) is a handle to it (issue 26; AWX blanks a
        job event over 700,000 characters, and every task taking the fleet templated it again). Every action of this
        collection takes the handle wherever it takes the fleet; Jinja cannot read into it (use RV(cluster_names)).
      - Unset (the default), RV(fleet) is always the fleet itself. The C(model_deployment) role sets 200000.
    type: int
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Reports no diff.
  action:
    support: full
    description: Runs on the controller as an action plugin.
requirements:
  - pydantic >= 2
notes:
  - Run it once (C(run_once=true)) in a play over the fleet group, or on C(localhost) with the inventory loaded.
seealso:
  - module: gpufleet.serving.replica_placement
"""

EXAMPLES = r"""
- name: Validate the fleet and show the summary
  gpufleet.serving.fleet_info:
  run_once: true
  register: gpufleet_fleet

- name: Print the summary table
  ansible.builtin.debug:
    msg: "{{ gpufleet_fleet.summary }}"
  run_once: true

- name: Validate the fleet and pin every cluster's connection for fleet_read / fleet_apply
  gpufleet.serving.fleet_info:
    pin_connections: "{{ ansible_play_hosts }}"
  run_once: true
  register: gpufleet_fleet  # gpufleet_fleet.connections: {cluster: {kubeconfig?, context?}}

- name: Validate a candidate change to the deployments without touching the inventory
  gpufleet.serving.fleet_info:
    model_deployments: "{{ lookup('file', 'new-deployments.yml') | from_yaml }}"
  run_once: true
"""

RETURN = r"""
fleet:
  description:
    - The validated fleet, normalised (defaults filled in).
    - With O(handoff_over) and a fleet larger than that, a handle instead - C(gpufleet_handoff) (V(fleet)), C(path)
      (the file in the run's local temporary directory), C(sha256), C(chars), C(items) - which the collection's actions
      take in its place (the file must still have that SHA-256). At 5,000 clusters the fleet is about 4.6 MB.
  returned: success
  type: dict
  contains:
    clusters:
      description: Every fleet cluster with its pools (name, class and node count; the class's devices are in
        C(classes)).
      type: list
      elements: dict
      sample:
        - name: gke-us-central1
          provider: gke
          pools:
            - {name: l4, class: l4-1x, nodes: 4}
    classes:
      description: Inference classes keyed by name, normalised.
      type: dict
      sample: {l4-1x: {devices: [{name: gpu, driver: gpu.nvidia.com, count: 1, claim: DRA}]}}
    deployments:
      description: Model deployments, normalised, each with C(candidate_clusters) (its resolved host pattern).
      type: list
      elements: dict
      sample: [{name: qwen-demo, namespace: ml-team, replicas: 3, candidate_clusters: [eks-us-east-1, gke-us-central1]}]
    caches:
      description: Model caches, normalised, each with C(candidate_clusters).
      type: list
      elements: dict
      sample: [{name: qwen-2-5-0-5b, namespace: ml-team, size: 20Gi, candidate_clusters: [gke-us-central1]}]
    name:
      description: The fleet's name (O(fleet_name)), the value of label C(gpufleet.io/fleet).
      type: str
      sample: prod
    adopt_unlabelled:
      description: O(adopt_unlabelled) (V(null) when unset).
      type: bool
      sample: null
cluster_names:
  description: The name of every fleet cluster, in the order of RV(fleet)'s C(clusters) (whether or not it is handed off).
  returned: success
  type: list
  elements: str
  sample: [gke-us-central1, onprem-a]
summary:
  description:
    - A human-readable table of clusters, pools, deployments and caches, one line per element.
    - At most 200,000 characters of JSON; when longer, the lines that fit and a last line counting the others.
  returned: success
  type: list
  elements: str
  sample:
    - "CLUSTER          PROVIDER  POOL  CLASS  NODES  DEVICES/NODE"
    - "gke-us-central1  gke       l4    l4-1x  4      1x gpu"
contract:
  description:
    - The collection's Kubernetes contract as the roles need it, so their YAML spells no label or kind itself.
    - C(serving_owner_selector) and C(cache_owner_selector) select the objects the collection owns, of every fleet
      (C(label_fleet) is the label that tells fleets apart; the plugins and filters select this fleet's);
      C(serving_kinds) are every kind a serving render emits (pruned in apply mode); C(workload_kinds) are the
      backends' workload kinds (their readiness is awaited).
  returned: success
  type: dict
  sample:
    serving_owner_selector: [app.kubernetes.io/managed-by=gpufleet.serving, gpufleet.io/component=serving]
    cache_owner_selector: [app.kubernetes.io/managed-by=gpufleet.serving, gpufleet.io/component=model-cache]
    annotation_placement: gpufleet.io/placement
    node_pool_label: gpufleet.io/pool
    serving_kinds: [{api_version: v1, kind: Service}, {api_version: apps/v1, kind: Deployment}]
    workload_kinds: [{api_version: apps/v1, kind: Deployment}]
connections:
  description: With O(pin_connections), each host's kubernetes.core connection options (C(kubeconfig) and/or
    C(context)), by host name.
  returned: success and O(pin_connections) is set
  type: dict
  sample: {gke-us-central1: {kubeconfig: /home/me/.kube/gke-us-central1}, onprem-a: {context: onprem-a}}
errors:
  description: On failure, every problem found as C(path) and C(reason).
  returned: failure
  type: list
  elements: dict
  sample: [{path: "gpufleet_model_deployments[0].replicas", reason: "must be >= 0 (got -1)"}]
"""
