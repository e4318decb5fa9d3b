#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Neither amazon.aws nor community.aws lists EKS nodegroups; the eks_cluster role needs the list to remove the
# nodegroups of pools that left the inventory (EKS refuses to delete a cluster that still has nodegroups).

from __future__ import annotations

DOCUMENTATION = r"""
---
module: eks_nodegroup_info
short_description: List the managed nodegroups of an EKS cluster
version_added: 0.3.0
description:
  - Returns every nodegroup of O(cluster_name) as C(DescribeNodegroup) records it, and the names of those this
    collection created for the cluster (tag C(gpufleet.io/cluster)) that are not in O(wanted).
  - A cluster that does not exist has no nodegroups.
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  cluster_name:
    description: The EKS cluster.
    type: str
    required: true
  wanted:
    description: The nodegroups the inventory wants; the others created by this collection are returned in RV(stale).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
attributes:
  check_mode:
    support: full
    description: Reads only.
  diff_mode:
    support: none
    description: Reads only.
"""

EXAMPLES = r"""
- name: Find the nodegroups no pool wants any more
  gpufleet.serving.eks_nodegroup_info:
    region: us-east-1
    cluster_name: eks-us-east-1
    wanted: [system, a10g]
  register: nodegroups
"""

RETURN = r"""
nodegroups:
  description: Every nodegroup (C(DescribeNodegroup)).
  returned: always
  type: list
  elements: dict
  sample: [{nodegroupName: a10g, amiType: AL2023_x86_64_NVIDIA, status: ACTIVE}]
stale:
  description: Nodegroups this collection created for the cluster that are not in O(wanted), GPU pools first, system last.
  returned: always
  type: list
  elements: str
  sample: [l4-spot]
"""

from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule  # noqa: E402

from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.eks import (  # noqa: E402
    list_nodegroups,
    stale_nodegroups,
)


def main() -> None:
    module = AnsibleAWSModule(
        argument_spec=dict(
            cluster_name=dict(type="str", required=True),
            wanted=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    name = module.params["cluster_name"]
    try:
        recorded = list_nodegroups(module.client("eks"), name)
    except Exception as exc:  # botocore errors
        module.fail_json_aws(exc, msg=f"listing the nodegroups of EKS cluster {name}")
    module.exit_json(
        changed=False, nodegroups=recorded, stale=stale_nodegroups(recorded, module.params["wanted"], name)
    )


if __name__ == "__main__":
    main()
