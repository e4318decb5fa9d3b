#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# community.aws.eks_nodegroup cannot be used for GPU pools: its ami_type choices stop at AL2 and Bottlerocket and
# omit AL2023_x86_64_NVIDIA (https://github.com/ansible-collections/community.aws/issues/2314), the only EKS-optimised
# NVIDIA AMI for Kubernetes >= 1.33, and it has no Capacity Block launch template. This module drives boto3 directly;
# the decisions are in plugins/module_utils/eks.py.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: eks_nodegroup
short_description: Create, update or delete an EKS managed nodegroup for a GPU pool (AL2023 NVIDIA AMI, Capacity Blocks)
version_added: 0.3.0
description:
  - Manages one Amazon EKS managed nodegroup with boto3. Unlike M(community.aws.eks_nodegroup) it accepts every
    EKS AMI type (C(AL2023_x86_64_NVIDIA), C(AL2023_x86_64_STANDARD), ...) and launches C(CAPACITY_BLOCK)
    nodegroups into an EC2 Capacity Block through a launch template it manages (C(gpufleet-<cluster>-<name>)).
  - Scaling bounds, labels and taints are updated in place. O(scaling.desired_size) is used at creation; afterwards
    the autoscaler owns it and it is only moved back inside new bounds.
  - Instance types, AMI type, disk size, capacity type and subnets cannot change in place; a difference fails the
    task naming the fields (remove the pool and create it again).
  - Waits are bounded by O(wait_timeout). An EC2 capacity failure (C(InsufficientInstanceCapacity),
    C(InstanceLimitExceeded)) reported in the nodegroup's health fails the task at once, naming the zone and the
    instance type.
  - With O(capacity_ladder), a new nodegroup is created on the first rung that has capacity; a stockout in its health
    deletes it and tries the next rung, a quota error (C(VcpuLimitExceeded), ...) stops naming the quota. A recorded
    nodegroup stays on the rung it was created on; one whose creation failed for capacity (C(CREATE_FAILED)) is
    deleted and the ladder walked again. Stockouts are only seen with O(wait=true). RV(capacity) says which rung the
    nodegroup is on.
  - The typical caller is the C(gpufleet.serving.eks_cluster) role, with specs from the
    C(gpufleet.serving.eks_nodegroups) filter.
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  cluster_name:
    description: The EKS cluster.
    type: str
    required: true
  name:
    description: The nodegroup name.
    type: str
    required: true
  pool:
    description: The fleet node pool it backs (informational; the C(gpufleet.io/pool) label is in O(labels)).
    type: str
  state:
    description: Whether the nodegroup exists.
    type: str
    choices: [present, absent]
    default: present
  instance_types:
    description: EC2 instance types. Required when O(state=present).
    type: list
    elements: str
  ami_type:
    description: The EKS AMI type, for example C(AL2023_x86_64_NVIDIA). Required when O(state=present).
    type: str
  disk_size:
    description: Root volume size in GiB.
    type: int
    default: 100
  capacity_type:
    description: On-Demand, Spot, or an EC2 Capacity Block (needs O(capacity_reservation_id)).
    type: str
    choices: [ON_DEMAND, SPOT, CAPACITY_BLOCK]
    default: ON_DEMAND
  capacity_reservation_id:
    description:
      - The Capacity Block (C(cr-...)) a C(CAPACITY_BLOCK) nodegroup launches into, or the On-Demand Capacity
        Reservation an C(ON_DEMAND) one targets (both through the launch template).
    type: str
  capacity_rung:
    description: The kind of capacity the options describe, reported in RV(capacity).
    type: str
    choices: [reservation, flex-start, spot, on-demand]
  capacity_ladder:
    description:
      - The rungs to try in order when the nodegroup is created (the C(gpufleet.serving.eks_nodegroups) filter's
        C(capacity_ladder)). Empty - the options are the one rung.
      - A rung's capacity keys (O(capacity_ladder[].capacity_type), O(capacity_ladder[].capacity_reservation_id)) are
        its own; its other keys default to the module's options.
    type: list
    elements: dict
    default: []
    suboptions:
      capacity_rung:
        description: The rung's kind.
        type: str
        required: true
        choices: [reservation, flex-start, spot, on-demand]
      capacity_type:
        description: The rung's capacity type.
        type: str
        choices: [ON_DEMAND, SPOT, CAPACITY_BLOCK]
        default: ON_DEMAND
      capacity_reservation_id:
        description: The Capacity Block or On-Demand Capacity Reservation of a reservation rung.
        type: str
      instance_types:
        description: Instance types (with the same GPUs).
        type: list
        elements: str
      subnets:
        description: The rung's subnets.
        type: list
        elements: str
      labels:
        description: Kubernetes node labels of the rung.
        type: dict
  scaling:
    description: Autoscaling bounds and the initial size.
    type: dict
    default: {}
    suboptions:
      min_size:
        description: Minimum nodes.
        type: int
        default: 0
      max_size:
        description: Maximum nodes (at least 1).
        type: int
        default: 1
      desired_size:
        description: Nodes at creation (defaults to O(scaling.min_size)).
        type: int
  labels:
    description: Kubernetes node labels. Labels on the nodegroup that are not listed are removed.
    type: dict
    default: {}
  taints:
    description: Kubernetes node taints (Kubernetes spelling of the effect). Taints not listed are removed.
    type: list
    elements: dict
    default: []
    suboptions:
      key:
        description: Taint key.
        type: str
        required: true
      value:
        description: Taint value.
        type: str
        default: ""
      effect:
        description: Taint effect.
        type: str
        choices: [NoSchedule, NoExecute, PreferNoSchedule]
        default: NoSchedule
  subnets:
    description: Subnet IDs. Required when O(state=present).
    type: list
    elements: str
  node_role:
    description: ARN of the node IAM role. Required to create the nodegroup.
    type: str
  version:
    description: Kubernetes version (C(1.36)); default is the cluster's. A different minor is an in-place upgrade.
    type: str
  tags:
    description: Tags of the nodegroup and of its launch template.
    type: dict
    default: {}
  wait:
    description: Wait until the nodegroup is C(ACTIVE) (or deleted).
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait at most.
    type: int
    default: 1800
  poll_interval:
    description: Seconds between two polls.
    type: float
    default: 15
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
attributes:
  check_mode:
    support: full
    description: Reads the nodegroup and returns the actions it would take.
  diff_mode:
    support: none
    description: The actions are listed in RV(actions).
seealso:
  - module: community.aws.eks_nodegroup
  - module: community.aws.eks_cluster
"""

EXAMPLES = r"""
- name: Create a GPU nodegroup with the AL2023 NVIDIA AMI
  gpufleet.serving.eks_nodegroup:
    region: us-east-1
    cluster_name: eks-us-east-1
    name: a10g
    instance_types: [g5.2xlarge]
    ami_type: AL2023_x86_64_NVIDIA
    disk_size: 200
    scaling: {min_size: 1, max_size: 6, desired_size: 3}
    labels: {gpufleet.io/pool: a10g, nvidia.com/gpu.present: "true"}
    taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
    subnets: [subnet-0123456789abcdef0, subnet-0fedcba9876543210]
    node_role: arn:aws:iam::123456789012:role/gpufleet-eks-us-east-1-node
    wait_timeout: 1200

- name: Delete it
  gpufleet.serving.eks_nodegroup:
    region: us-east-1
    cluster_name: eks-us-east-1
    name: a10g
    state: absent
"""

RETURN = r"""
capacity:
  description:
    - The rung of the capacity ladder the nodegroup is on (C({}) when absent, or without O(pool)) - C(rung), C(of),
      C(kind), C(machine_type), C(zones), C(availability) (what the rung costs in availability), C(attempts) (the rungs
      that had no capacity on the way, with C(class), C(code) and C(message)), C(predicted) (check mode) and
      C(report) (one line).
  returned: always
  type: dict
  sample:
    rung: 2
    of: 3
    kind: spot
    machine_type: p5.48xlarge
    zones: [us-east-1b]
    attempts: [{rung: 1, kind: reservation, class: stockout, code: InsufficientInstanceCapacity}]
    report: "p5: got rung 2 of 3, spot, p5.48xlarge in us-east-1b - Spot: nodes can be preempted at any time"
actions:
  description: What was done (or would be done in check mode).
  returned: always
  type: list
  elements: str
  sample: ["create"]
nodegroup:
  description: The nodegroup as EKS recorded it (C(DescribeNodegroup)), the request in check mode, C({}) when absent.
  returned: always
  type: dict
  sample:
    nodegroupName: a10g
    amiType: AL2023_x86_64_NVIDIA
    capacityType: ON_DEMAND
    instanceTypes: [g5.2xlarge]
    scalingConfig: {minSize: 1, maxSize: 6, desiredSize: 3}
    labels: {gpufleet.io/pool: a10g}
    taints: [{key: nvidia.com/gpu, value: "true", effect: NO_SCHEDULE}]
    status: ACTIVE
"""

from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule  # noqa: E402

from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.eks import (  # noqa: E402
    ensure_nodegroup,
    spec_from_dict,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.provider import module_waiter  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import CAPACITY_RUNGS  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError  # noqa: E402


def main() -> None:
    argument_spec = dict(
        cluster_name=dict(type="str", required=True),
        name=dict(type="str", required=True),
        pool=dict(type="str"),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        instance_types=dict(type="list", elements="str"),
        ami_type=dict(type="str"),
        disk_size=dict(type="int", default=100),
        capacity_type=dict(type="str", choices=["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"], default="ON_DEMAND"),
        capacity_reservation_id=dict(type="str"),
        capacity_rung=dict(type="str", choices=list(CAPACITY_RUNGS)),
        capacity_ladder=dict(
            type="list",
            elements="dict",
            default=[],
            options=dict(
                capacity_rung=dict(type="str", required=True, choices=list(CAPACITY_RUNGS)),
                capacity_type=dict(type="str", choices=["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"], default="ON_DEMAND"),
                capacity_reservation_id=dict(type="str"),
                instance_types=dict(type="list", elements="str"),
                subnets=dict(type="list", elements="str"),
                labels=dict(type="dict"),
            ),
        ),
        scaling=dict(
            type="dict",
            default={},
            options=dict(
                min_size=dict(type="int", default=0),
                max_size=dict(type="int", default=1),
                desired_size=dict(type="int"),
            ),
        ),
        labels=dict(type="dict", default={}),
        taints=dict(
            type="list",
            elements="dict",
            default=[],
            options=dict(
                key=dict(type="str", required=True, no_log=False),
                value=dict(type="str", default=""),
                effect=dict(type="str", choices=["NoSchedule", "NoExecute", "PreferNoSchedule"], default="NoSchedule"),
            ),
        ),
        subnets=dict(type="list", elements="str"),
        node_role=dict(type="str"),
        version=dict(type="str"),
        tags=dict(type="dict", default={}),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=1800),
        poll_interval=dict(type="float", default=15),
    )
    module = AnsibleAWSModule(
        argument_spec=argument_spec,
        supports_check_mode=True,
        required_if=[("state", "present", ["instance_types", "ami_type", "subnets"])],
    )
    p = module.params
    try:
        spec = spec_from_dict(
            {
                **p,
                "instance_types": p["instance_types"] or [],
                "ami_type": p["ami_type"] or "",
                "subnets": p["subnets"] or [],
                "scaling": {k: v for k, v in (p["scaling"] or {}).items() if v is not None},
            }
        )
        waiter = module_waiter(p)
        result = ensure_nodegroup(
            module.client("eks"),
            module.client("ec2"),
            p["cluster_name"],
            spec,
            state=p["state"],
            node_role=p["node_role"],
            version=p["version"],
            tags={str(k): str(v) for k, v in p["tags"].items()},
            waiter=waiter,
            check_mode=module.check_mode,
        )
    except GpufleetError as exc:
        module.fail_json(msg=str(exc))
    except Exception as exc:  # botocore errors: name the call that failed
        module.fail_json_aws(exc, msg=f"EKS nodegroup {p['name']} of cluster {p['cluster_name']}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
