#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: replica_placement
short_description: Place a model deployment's replicas on node pools whose devices satisfy its DRA device requests
version_added: 0.1.0
description:
  - A pure function of its options (nothing is contacted or changed). Given one model deployment, its candidate
    clusters, the inference classes and every replica already in the fleet, it returns where this deployment's
    replicas run. Feed RV(replicas) of one run (merged with the other deployments' replicas) into O(replicas) of the
    next and the placement stays put.
  - "B(Retain): an existing replica of this deployment stays on its C((cluster, index)) while the cluster is in
    O(clusters), carries no untolerated C(NoExecute) taint, and its pool still satisfies every member with the current
    selectors. Healthy replicas are never moved to rebalance. A retained replica is returned as the deployment is now:
    current selectors, copies and node cost."
  - "B(Scale down): excess replicas are dropped from the cluster hosting the most of them first, highest index first;
    between equally loaded clusters the later name first."
  - "B(Fill): the shortfall is placed one replica at a time on the eligible cluster hosting the fewest of this
    deployment's replicas (ties by cluster name) at the lowest free index there - spread first, pack only when forced -
    against a ledger of free nodes per pool that charges every other deployment's replicas and this deployment's
    retained ones. Nothing is ever overcommitted. A cluster that is not C(ready), or carries a C(NoSchedule) or
    C(NoExecute) taint the deployment does not tolerate (Kubernetes toleration rules), takes no new replica."
  - "B(Matching): a node's devices are its pool's inference class's devices, one by one (C(count) devices per entry,
    each overlaid with its C(instances) values). A member's requests form one claim per node, allocated as Kubernetes'
    structured allocator does: requests in order; C(ExactCount) takes C(count) unused devices of the request's
    C(device_class_name) (if set) whose CEL selectors are all true; C(allocation_mode=All) takes every matching device
    (at least one, none taken by an earlier request); C(first_available) tries its alternatives in order, backtracking;
    C(constraints) with C(match_attribute) require one attribute value across the named requests' devices; a claim holds
    at most 32 devices. An engine lands on the first pool, in the cluster's pool order, that satisfies every member and
    has room; all its members share that pool. Node cost = C(pods x copies) for each member that claims a DRA device
    (C(pods) is C(worker.nodes) for a Worker, else 1), 0 for one that claims none."
  - "B(Synthetic devices) (C(claim: Synthetic)) are matched for placement but never claimed: they do not appear in
    C(device_requests), an engine none of whose members claims a DRA device is never placed, and a member is not left
    claimless on a pool where it matches only synthetic devices while another pool of the cluster would give it a DRA
    device."
  - CEL selectors are evaluated with the collection's own engine (Kubernetes DRA semantics). A cluster's
    C(kubernetes_version) decides which library functions its selectors may use; a selector newer than the cluster
    matches nothing there, and RV(unschedulable) says so.
    Every selector is compiled once and evaluated once per distinct device shape. An expression that does not
    compile does not fail the task; it yields the condition reason V(InvalidNodeSelector) and nothing is placed, moved
    or dropped. A selector that errors on a device (for example a missing attribute) does not match that device.
  - "Replica names are C(<deployment>-<h>) where C(h) is the first 5 hex digits of the SHA-256 of
    C(<deployment>/<cluster>/<index>); stable for an identity and at most 63 characters."
  - "Malformed input (a deployment, class, cluster or replica that does not validate) fails the task with one
    C(path: reason) line per problem, for example C(deployment.engines[0].members[0].role: must be one of Standalone,
    Leader, Worker); RV(errors) lists them."
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  deployment:
    description:
      - One entry of C(gpufleet_model_deployments) (see the collection's fleet documentation).
      - Placement uses C(name), C(namespace), C(replicas), C(tolerations) and C(engines).
    type: dict
    required: true
  clusters:
    description:
      - The deployment's candidate clusters, for example the C(clusters) of
        M(gpufleet.serving.fleet_info) restricted to the deployment's C(candidate_clusters).
      - "Each item: C(name), C(pools) (a list of C({name, class, nodes}) in preference order), C(taints) (a list of
        C({key, value, effect}) with C(effect) V(NoSchedule) or V(NoExecute); default none), C(ready) (default
        V(true)) and C(kubernetes_version) (for example V(1.34); default the newest the collection knows). Other keys
        are ignored."
    type: list
    elements: dict
    required: true
  classes:
    description:
      - C(gpufleet_inference_classes) - inference classes keyed by name. Every pool's C(class) must be one of them.
    type: dict
    required: true
  replicas:
    description:
      - Every replica already in the fleet, of any deployment, in the shape of RV(replicas).
      - This deployment's entries are the placement to keep; the others only take up nodes in the ledger (each
        member's C(nodes) on its C(pool)). Other keys are ignored.
    type: list
    elements: dict
    default: []
attributes:
  check_mode:
    support: full
    description: A pure computation; check mode returns exactly what a normal run returns.
  diff_mode:
    support: none
    description: Returns no diff; compare RV(replicas) with O(replicas), or read RV(dropped) and RV(changed).
requirements:
  - pydantic >= 2
notes:
  - The module runs wherever the task runs; use it on C(localhost) (or with C(delegate_to=localhost) and
    C(run_once=true)) since it reads no cluster.
  - RV(changed) is V(true) when this deployment's replica set differs from the one passed in O(replicas), so a play can
    tell a placement change apart from a no-op.
  - Two placements computed in parallel from the same stale O(replicas) can overcommit a pool. Place deployments one
    after another, feeding each result into the next; any overcommit found is reported in RV(overcommitted) and as a
    warning.
seealso:
  - module: gpufleet.serving.fleet_info
"""

EXAMPLES = r"""
- name: Place qwen-demo on its candidate clusters
  gpufleet.serving.replica_placement:
    deployment: "{{ gpufleet_model_deployments | selectattr('name', 'eq', 'qwen-demo') | first }}"
    clusters: "{{ fleet.fleet.clusters | selectattr('name', 'in', candidates) }}"
    classes: "{{ gpufleet_inference_classes }}"
    replicas: "{{ observed_replicas | default([]) }}"
  vars:
    candidates: "{{ (fleet.fleet.deployments | selectattr('name', 'eq', 'qwen-demo') | first).candidate_clusters }}"
  delegate_to: localhost
  run_once: true
  register: qwen_placement

- name: Show why clusters were passed over
  ansible.builtin.debug:
    var: qwen_placement.unschedulable
  when: qwen_placement.condition.status == 'False'

- name: Place every deployment in turn, each run seeing the replicas placed before it
  gpufleet.serving.replica_placement:
    deployment: "{{ item }}"
    clusters: "{{ fleet.fleet.clusters | selectattr('name', 'in', item_candidates) }}"
    classes: "{{ gpufleet_inference_classes }}"
    replicas: "{{ fleet_replicas | default([]) }}"
  vars:
    item_candidates: "{{ (fleet.fleet.deployments | selectattr('name', 'eq', item.name) | first).candidate_clusters }}"
  loop: "{{ gpufleet_model_deployments }}"
  loop_control:
    label: "{{ item.name }}"
  register: placed
  # Feeding each result forward needs a task per deployment (set_fact in between), or the
  # gpufleet.serving deploy playbook, which does exactly that.

- name: Drain a cluster - tolerate nothing, taint it NoExecute and the replicas move away
  gpufleet.serving.replica_placement:
    deployment: "{{ deployment }}"
    clusters:
      - {name: gke-us-central1, pools: [{name: l4, class: l4-1x, nodes: 4}],
         taints: [{key: gpufleet.io/drain, value: "true", effect: NoExecute}]}
      - {name: eks-us-east-1, pools: [{name: a10g, class: a10g-1x, nodes: 3}]}
    classes: "{{ gpufleet_inference_classes }}"
    replicas: "{{ current_replicas }}"
  register: drained

- name: Fail the play when not every replica could be placed
  ansible.builtin.assert:
    that: qwen_placement.condition.status == 'True'
    fail_msg: "{{ qwen_placement.condition.message }}"
"""

RETURN = r"""
replicas:
  description:
    - This deployment's replicas, sorted by cluster then index. Pass them (with the other deployments' replicas) as
      O(replicas) to the next run.
    - Each engine lists its members in the deployment's order; every member of an engine is on the same C(pool).
    - C(nodes) is the nodes the member occupies in its pool for this replica - C(pods x copies) when it claims a DRA
      device, 0 otherwise.
    - C(device_requests) holds only the requests resolved to C(claim=DRA) devices, with the matched device's
      C(device_class_name) and the deployment's current selectors; requests matched to synthetic devices are left out.
      C(count) is the devices the request takes on a node of the pool; an C(All) request adds
      C(allocation_mode=All) (C(count) is how many it found); a C(first_available) request adds the alternatives as
      rendered (C(first_available), each with its device class resolved on the pool) and C(chosen), the alternative
      this pool takes. A member with constraints adds C(constraints) (C({requests, match_attribute})).
  returned: always
  type: list
  elements: dict
  sample:
    - name: qwen-demo-3dcb7
      deployment: qwen-demo
      namespace: ml-team
      cluster: gke-us-central1
      index: 0
      engines:
        - name: main
          copies: 1
          members:
            - role: Standalone
              pool: l4
              nodes: 1
              device_requests:
                - name: gpu
                  device_class_name: gpu.nvidia.com
                  count: 1
                  selectors: ['device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("16Gi")) >= 0']
desired:
  description: The number of replicas the deployment asks for.
  returned: always
  type: int
  sample: 3
scheduled:
  description: The number of replicas in RV(replicas).
  returned: always
  type: int
  sample: 2
condition:
  description:
    - A Kubernetes-style condition of type V(ReplicasScheduled).
    - C(status) V(True) with reason V(ReplicasCreated) when every desired replica is placed.
    - C(status) V(False) with reason V(InsufficientCapacity) when fewer could be placed (the message names the first
      clusters and why), V(NoClusters) when O(clusters) is empty, or V(InvalidNodeSelector) when a CEL selector does
      not compile (the message names the field path, the expression and the error).
  returned: always
  type: dict
  contains:
    type:
      description: Always V(ReplicasScheduled).
      type: str
      sample: ReplicasScheduled
    status:
      description: V(True) or V(False).
      type: str
      sample: "False"
    reason:
      description: V(ReplicasCreated), V(InsufficientCapacity), V(NoClusters) or V(InvalidNodeSelector).
      type: str
      sample: InsufficientCapacity
    message:
      description: A one-line human explanation.
      type: str
      sample: "2 of 3 replica(s) scheduled; no candidate cluster can take another (gke-europe-west4: not ready: takes no
        new replicas; gke-us-central1: insufficient capacity: no pool that matches engine main has 1 free node(s))"
unschedulable:
  description:
    - Every candidate cluster that cannot take one more replica of this deployment (after this placement), keyed by
      cluster name, with why.
    - "C(code) is one of V(NotReady), V(TaintNotTolerated), V(NoPools), V(NoMatchingPool) (no pool satisfies every
      member of an engine, or only synthetic devices matched) or V(InsufficientCapacity) (a pool matches but lacks free
      nodes). C(reason) says it in words."
    - C(pools) maps each pool to why it cannot host the engine that did not fit - the request and the selector that
      was false on which device, the device count, nodes needed versus free, or that only synthetic devices matched. It
      is empty for a cluster-level reason (not ready, taint).
  returned: always
  type: dict
  sample:
    gke-europe-west4:
      code: TaintNotTolerated
      reason: "taint gpufleet.io/maintenance=true:NoSchedule is not tolerated"
      pools: {}
    eks-us-east-1:
      code: InsufficientCapacity
      reason: "insufficient capacity: no pool that matches engine main has 1 free node(s)"
      pools:
        a10g: "engine main needs 1 node(s), 0 of 3 free"
        p5: 'engine main member Standalone request gpu: selector `device.attributes["gpu.nvidia.com"].productName
          == "NVIDIA L4"` is false for device gpu (NVIDIA H100 80GB HBM3)'
    onprem-a:
      code: NoMatchingPool
      reason: no pool can host engine main
      pools:
        dgx: "engine main: only synthetic devices matched (ib); no DRA device would be claimed"
changed:
  description: Whether this deployment's replica set differs from the one passed in O(replicas).
  returned: always
  type: bool
  sample: true
dropped:
  description:
    - This deployment's replicas from O(replicas) that are not kept, and why (cluster no longer a candidate, an
      untolerated C(NoExecute) taint, the pool no longer satisfies a member, scaled down). A dropped replica's
      workload is deleted; fill may place a new one elsewhere.
  returned: always
  type: list
  elements: dict
  sample:
    - {name: qwen-demo-3dcb7, cluster: gke-us-central1, index: 0,
       reason: "taint gpufleet.io/drain=true:NoExecute is not tolerated (evicted)"}
overcommitted:
  description:
    - Pools holding one of this deployment's replicas whose nodes in use (all deployments) exceed the pool's nodes -
      possible only when retained replicas outgrow a shrunk pool or placements were computed from stale O(replicas).
      Each one is also reported as a warning.
  returned: always
  type: list
  elements: dict
  sample: [{cluster: gke-us-central1, pool: l4, nodes: 2, used: 3}]
errors:
  description: On failure, every problem found as C(path) and C(reason) (one entry with an empty path when the
    failure is not about one field).
  returned: failure
  type: list
  elements: dict
  sample: [{path: "deployment.replicas", reason: "must be >= 0 (got -1)"}]
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import (  # noqa: E402
    GpufleetError,
    error_list,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (  # noqa: E402
    HAS_PYDANTIC,
    PYDANTIC_IMPORT_ERROR,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import place  # noqa: E402

ARGUMENT_SPEC = {
    "deployment": {"type": "dict", "required": True},
    "clusters": {"type": "list", "elements": "dict", "required": True},
    "classes": {"type": "dict", "required": True},
    "replicas": {"type": "list", "elements": "dict", "default": []},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    if not HAS_PYDANTIC:
        module.fail_json(msg=missing_required_lib("pydantic"), exception=PYDANTIC_IMPORT_ERROR)
    params = module.params
    try:
        result = place(
            deployment=params["deployment"],
            clusters=params["clusters"],
            classes=params["classes"],
            replicas=params["replicas"],
        )
    except GpufleetError as exc:
        module.fail_json(msg=str(exc), errors=error_list(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
