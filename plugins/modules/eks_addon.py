#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Neither amazon.aws nor community.aws has a module for EKS add-ons; the decisions are in plugins/module_utils/eks.py.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: eks_addon
short_description: Install, update or remove an Amazon EKS add-on (such as the EFS CSI driver)
version_added: 0.3.0
description:
  - Manages one EKS add-on with boto3 (C(CreateAddon), C(UpdateAddon), C(DeleteAddon)) and waits, bounded by
    O(wait_timeout), until it is C(ACTIVE) or gone. A C(*_FAILED) or C(DEGRADED) add-on fails the task with its
    health issues.
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  cluster_name:
    description: The EKS cluster.
    type: str
    required: true
  name:
    description: The add-on, for example C(aws-efs-csi-driver).
    type: str
    required: true
  state:
    description: Whether the add-on is installed.
    type: str
    choices: [present, absent]
    default: present
  version:
    description: The add-on version (C(v2.1.13-eksbuild.1)); default is the one EKS picks for the cluster.
    type: str
  service_account_role_arn:
    description: IAM role for the add-on's service account (IRSA).
    type: str
  tags:
    description: Tags of the add-on.
    type: dict
    default: {}
  wait:
    description: Wait until the add-on is C(ACTIVE) (or deleted).
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait at most.
    type: int
    default: 900
  poll_interval:
    description: Seconds between two polls.
    type: float
    default: 10
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
attributes:
  check_mode:
    support: full
    description: Reads the add-on and returns what would change.
  diff_mode:
    support: none
    description: No diff.
"""

EXAMPLES = r"""
- name: Install the EFS CSI driver
  gpufleet.serving.eks_addon:
    region: us-east-1
    cluster_name: eks-us-east-1
    name: aws-efs-csi-driver
    service_account_role_arn: arn:aws:iam::123456789012:role/efs-csi
"""

RETURN = r"""
addon:
  description: The add-on as EKS recorded it (C(DescribeAddon)), the request in check mode, C({}) when absent.
  returned: always
  type: dict
  sample: {addonName: aws-efs-csi-driver, addonVersion: v2.1.13-eksbuild.1, status: ACTIVE}
"""

from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule  # noqa: E402

from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.eks import ensure_addon  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.provider import module_waiter  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError  # noqa: E402


def main() -> None:
    module = AnsibleAWSModule(
        argument_spec=dict(
            cluster_name=dict(type="str", required=True),
            name=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            version=dict(type="str"),
            service_account_role_arn=dict(type="str"),
            tags=dict(type="dict", default={}),
            wait=dict(type="bool", default=True),
            wait_timeout=dict(type="int", default=900),
            poll_interval=dict(type="float", default=10),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = ensure_addon(
            module.client("eks"),
            p["cluster_name"],
            p["name"],
            state=p["state"],
            version=p["version"],
            role_arn=p["service_account_role_arn"],
            tags={str(k): str(v) for k, v in p["tags"].items()},
            waiter=module_waiter(p),
            check_mode=module.check_mode,
        )
    except GpufleetError as exc:
        module.fail_json(msg=str(exc))
    except Exception as exc:  # botocore errors
        module.fail_json_aws(exc, msg=f"EKS add-on {p['name']} of cluster {p['cluster_name']}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
