#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# google.cloud.gcp_container_node_pool cannot turn off GKE's GPU driver installation
# (accelerators[].gpuDriverInstallationConfig; https://github.com/ansible-collections/google.cloud/issues/611), which
# the NVIDIA DRA driver needs, and has no Spot VMs or reservation affinity. This module uses the official
# google-cloud-container client; the decisions are in plugins/module_utils/gke.py.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gke_node_pool
short_description: Create, update or delete a GKE GPU node pool ready for Kubernetes DRA
version_added: 0.3.0
description:
  - Manages one node pool of a GKE cluster with the official C(google-cloud-container) client (REST transport).
  - GPU pools get their accelerators with C(gpuDriverInstallationConfig.gpuDriverVersion=INSTALLATION_DISABLED) by
    default, so the NVIDIA DRA driver (not GKE) owns the GPUs; the labels GKE needs for that
    (C(gke-no-default-nvidia-gpu-device-plugin=true), C(nvidia.com/gpu.present=true)) come in O(labels) from the
    C(gpufleet.serving.gke_node_pools) filter.
  - Autoscaling bounds (totals over the pool's zones), labels and zones are updated in place; the initial size is
    used at creation only. Machine type, accelerators, disk, image, Spot and reservation cannot change in place; a
    difference fails the task naming the fields.
  - Every operation is awaited at most O(wait_timeout) seconds; a Compute Engine stockout
    (C(ZONE_RESOURCE_POOL_EXHAUSTED), C(GCE_STOCKOUT)) or quota error fails at once naming the zone and machine type.
  - With O(capacity_ladder), a new pool is created on the first rung that has capacity; a stockout deletes the failed
    pool and tries the next rung, a quota error stops naming the quota. A recorded pool stays on the rung it was
    created on; a pool whose creation failed for capacity (status C(ERROR)) is deleted and the ladder walked again.
    RV(capacity) says which rung the pool is on.
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  cluster:
    description: The cluster name.
    type: str
    required: true
  name:
    description: The node pool name.
    type: str
    required: true
  state:
    description: Whether the node pool exists.
    type: str
    choices: [present, absent]
    default: present
  machine_type:
    description: Compute Engine machine type.
    type: str
    default: e2-standard-4
  accelerator:
    description: The GPUs of each node.
    type: dict
    suboptions:
      type:
        description: Accelerator type, for example C(nvidia-l4).
        type: str
        required: true
      count:
        description: GPUs per node.
        type: int
        required: true
      gpu_driver_version:
        description: V(INSTALLATION_DISABLED) leaves the driver to the NVIDIA DRA driver's stack.
        type: str
        choices: [INSTALLATION_DISABLED, DEFAULT, LATEST]
        default: INSTALLATION_DISABLED
  disk_size_gb:
    description: Boot disk size.
    type: int
    default: 100
  disk_type:
    description: Boot disk type.
    type: str
    default: pd-balanced
  image_type:
    description: Node image.
    type: str
    default: COS_CONTAINERD
  spot:
    description: Spot VMs.
    type: bool
    default: false
  reservation:
    description: A specific reservation to consume (name or C(projects/P/reservations/NAME)).
    type: str
  any_reservation:
    description: Consume any matching reservation of the project (C(reservationAffinity=ANY_RESERVATION)).
    type: bool
    default: false
  flex_start:
    description:
      - Flex-start VMs (Dynamic Workload Scheduler) - the pool has no reservation, the C(ANY) location policy and no
        auto-repair; give it O(initial_node_count=0) and O(autoscaling.min_node_count=0).
    type: bool
    default: false
  capacity_rung:
    description: The kind of capacity the options describe, recorded by the caller in the pool's labels and reported.
    type: str
    choices: [reservation, flex-start, spot, on-demand]
  capacity_ladder:
    description:
      - The rungs to try in order when the pool is created (the C(gpufleet.serving.gke_node_pools) filter's
        C(capacity_ladder)). Empty - the options are the one rung.
      - A rung's capacity keys (O(capacity_ladder[].spot), O(capacity_ladder[].reservation),
        O(capacity_ladder[].any_reservation), O(capacity_ladder[].flex_start)) are its own; its other keys default to
        the module's options.
    type: list
    elements: dict
    default: []
    suboptions:
      capacity_rung:
        description: The rung's kind.
        type: str
        required: true
        choices: [reservation, flex-start, spot, on-demand]
      machine_type:
        description: Machine type (with the same GPUs).
        type: str
      spot:
        description: Spot VMs.
        type: bool
        default: false
      reservation:
        description: A specific reservation to consume.
        type: str
      any_reservation:
        description: Consume any matching reservation.
        type: bool
        default: false
      flex_start:
        description: Flex-start VMs.
        type: bool
        default: false
      locations:
        description: The rung's zones.
        type: list
        elements: str
      initial_node_count:
        description: Nodes per zone at creation.
        type: int
      autoscaling:
        description: Autoscaling bounds, totals over the rung's zones.
        type: dict
        suboptions:
          min_node_count:
            description: Minimum nodes.
            type: int
            default: 0
          max_node_count:
            description: Maximum nodes.
            type: int
            default: 1
      labels:
        description: Kubernetes node labels of the rung (the pool's whole set).
        type: dict
  locations:
    description: The pool's zones (default, the cluster's).
    type: list
    elements: str
    default: []
  initial_node_count:
    description: Nodes per zone at creation.
    type: int
    default: 1
  autoscaling:
    description: Autoscaling bounds, totals over the pool's zones.
    type: dict
    default: {}
    suboptions:
      min_node_count:
        description: Minimum nodes.
        type: int
        default: 0
      max_node_count:
        description: Maximum nodes.
        type: int
        default: 1
  labels:
    description: Kubernetes node labels (the pool's whole set).
    type: dict
    default: {}
extends_documentation_fragment:
  - gpufleet.serving.gke
attributes:
  check_mode:
    support: full
    description: Reads the node pool and returns the actions it would take.
  diff_mode:
    support: none
    description: The actions are listed in RV(actions).
seealso:
  - module: gpufleet.serving.gke_cluster
  - module: google.cloud.gcp_container_node_pool
"""

EXAMPLES = r"""
- name: Create an L4 pool for DRA
  gpufleet.serving.gke_node_pool:
    project: gpufleet-prod
    location: us-central1
    cluster: gke-us-central1
    name: l4
    machine_type: g2-standard-8
    accelerator: {type: nvidia-l4, count: 1}
    disk_size_gb: 200
    locations: [us-central1-a]
    initial_node_count: 4
    autoscaling: {min_node_count: 0, max_node_count: 8}
    labels: {gpufleet.io/pool: l4, gke-no-default-nvidia-gpu-device-plugin: "true", nvidia.com/gpu.present: "true"}
"""

RETURN = r"""
capacity:
  description:
    - The rung of the capacity ladder the pool is on (C({}) when absent) - C(rung), C(of), C(kind), C(machine_type),
      C(zones), C(availability) (what the rung costs in availability), C(attempts) (the rungs that had no capacity on
      the way, with C(class), C(code) and C(message)), C(predicted) (check mode) and C(report) (one line).
  returned: always
  type: dict
  sample:
    rung: 2
    of: 3
    kind: spot
    machine_type: a3-highgpu-8g
    zones: [us-central1-c]
    attempts: [{rung: 1, kind: reservation, class: stockout, code: ZONE_RESOURCE_POOL_EXHAUSTED}]
    report: "h100: got rung 2 of 3, spot, a3-highgpu-8g in us-central1-c - Spot: nodes can be preempted at any time"
actions:
  description: What was done (or would be done in check mode).
  returned: always
  type: list
  elements: str
  sample: ["autoscaling 0..4 -> 0..8"]
node_pool:
  description: The node pool as the API returns it (REST JSON), the request body in check mode, C({}) when absent.
  returned: always
  type: dict
  sample: {name: l4, status: RUNNING, config: {machineType: g2-standard-8}}
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402

from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.gke import (  # noqa: E402
    ensure_node_pool,
    ladder_specs,
    node_count_check,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.gke_client import (  # noqa: E402
    AUTH_SPEC,
    CONTAINER_IMPORT_ERROR,
    HAS_CONTAINER,
    container_api,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.provider import module_waiter  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import CAPACITY_RUNGS  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError  # noqa: E402

RUNG_KINDS = list(CAPACITY_RUNGS)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            project=dict(type="str", required=True),
            location=dict(type="str", required=True),
            cluster=dict(type="str", required=True),
            name=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            machine_type=dict(type="str", default="e2-standard-4"),
            accelerator=dict(
                type="dict",
                options=dict(
                    type=dict(type="str", required=True),
                    count=dict(type="int", required=True),
                    gpu_driver_version=dict(
                        type="str",
                        choices=["INSTALLATION_DISABLED", "DEFAULT", "LATEST"],
                        default="INSTALLATION_DISABLED",
                    ),
                ),
            ),
            disk_size_gb=dict(type="int", default=100),
            disk_type=dict(type="str", default="pd-balanced"),
            image_type=dict(type="str", default="COS_CONTAINERD"),
            spot=dict(type="bool", default=False),
            reservation=dict(type="str"),
            any_reservation=dict(type="bool", default=False),
            flex_start=dict(type="bool", default=False),
            capacity_rung=dict(type="str", choices=RUNG_KINDS),
            capacity_ladder=dict(
                type="list",
                elements="dict",
                default=[],
                options=dict(
                    capacity_rung=dict(type="str", required=True, choices=RUNG_KINDS),
                    machine_type=dict(type="str"),
                    spot=dict(type="bool", default=False),
                    reservation=dict(type="str"),
                    any_reservation=dict(type="bool", default=False),
                    flex_start=dict(type="bool", default=False),
                    locations=dict(type="list", elements="str"),
                    initial_node_count=dict(type="int"),
                    autoscaling=dict(
                        type="dict",
                        options=dict(
                            min_node_count=dict(type="int", default=0), max_node_count=dict(type="int", default=1)
                        ),
                    ),
                    labels=dict(type="dict"),
                ),
            ),
            locations=dict(type="list", elements="str", default=[]),
            initial_node_count=dict(type="int", default=1),
            autoscaling=dict(
                type="dict",
                default={},
                options=dict(min_node_count=dict(type="int", default=0), max_node_count=dict(type="int", default=1)),
            ),
            labels=dict(type="dict", default={}),
            wait_timeout=dict(type="int", default=1800),
            poll_interval=dict(type="float", default=10),
            **AUTH_SPEC,
        ),
        supports_check_mode=True,
    )
    if not HAS_CONTAINER:
        module.fail_json(msg=missing_required_lib("google-cloud-container"), exception=CONTAINER_IMPORT_ERROR)
    p = module.params
    spec = {
        key: p[key]
        for key in (
            "name",
            "machine_type",
            "accelerator",
            "disk_size_gb",
            "disk_type",
            "image_type",
            "spot",
            "reservation",
            "any_reservation",
            "flex_start",
            "capacity_rung",
            "locations",
            "initial_node_count",
            "autoscaling",
        )
    }
    spec["labels"] = {str(k): str(v) for k, v in p["labels"].items()}
    ladder = ladder_specs(spec, p["capacity_ladder"]) if p["capacity_ladder"] else None
    for rung in ladder or []:
        rung["labels"] = {str(k): str(v) for k, v in (rung.get("labels") or {}).items()}
    try:
        if p["state"] == "present":
            for rung in ladder or [spec]:
                node_count_check(rung)
        api = container_api(p)
        result = ensure_node_pool(
            api,
            p["project"],
            p["location"],
            p["cluster"],
            spec,
            state=p["state"],
            waiter=module_waiter(p),
            check_mode=module.check_mode,
            ladder=ladder,
        )
    except GpufleetError as exc:
        module.fail_json(msg=str(exc))
    except Exception as exc:  # google.api_core errors: name the pool
        module.fail_json(msg=f"GKE node pool {p['name']} of cluster {p['cluster']}: {exc}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
