#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# google.cloud.gcp_container_cluster cannot enable the Filestore CSI driver (model caches need RWX volumes) and, like
# every google.cloud module, has hard-coded API URLs. This module uses the official google-cloud-container client;
# the decisions are in plugins/module_utils/gke.py.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gke_cluster
short_description: Create, update or delete a regional GKE cluster for a GPU fleet (system pool, Filestore CSI)
version_added: 0.3.0
description:
  - Manages one GKE cluster with the official C(google-cloud-container) client (REST transport) - regional, created at
    O(kubernetes_version) (DRA needs 1.34 or newer) with a small system node pool, VPC-native, Workload Identity and
    the Filestore CSI driver enabled.
  - A newer Kubernetes minor than the one running upgrades the control plane; an older one fails (GKE cannot
    downgrade). The release channel and the Filestore CSI driver are reconciled. Other fields are set at creation.
  - GPU node pools are M(gpufleet.serving.gke_node_pool)'s business.
  - Every operation is awaited at most O(wait_timeout) seconds; a Compute Engine stockout or quota error fails at
    once, naming the zone and the machine type.
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  name:
    description: The cluster name.
    type: str
    required: true
  state:
    description: Whether the cluster exists.
    type: str
    choices: [present, absent]
    default: present
  kubernetes_version:
    description: The Kubernetes version (C(1.35) or a full GKE version).
    type: str
    default: "1.34"
  release_channel:
    description: The GKE release channel.
    type: str
    choices: [RAPID, REGULAR, STABLE, EXTENDED, UNSPECIFIED]
    default: REGULAR
  zones:
    description: Zones of the cluster's nodes (default, GKE picks three of the region).
    type: list
    elements: str
    default: []
  network:
    description: VPC network (default network when unset).
    type: str
  subnetwork:
    description: Subnetwork.
    type: str
  system_pool:
    description: The system node pool, in the option shape of M(gpufleet.serving.gke_node_pool) (name, machine_type, ...).
    type: dict
    required: true
  labels:
    description: Resource labels of the cluster.
    type: dict
    default: {}
extends_documentation_fragment:
  - gpufleet.serving.gke
attributes:
  check_mode:
    support: full
    description: Reads the cluster and returns the actions it would take.
  diff_mode:
    support: none
    description: The actions are listed in RV(actions).
seealso:
  - module: gpufleet.serving.gke_node_pool
  - module: google.cloud.gcp_container_cluster
"""

EXAMPLES = r"""
- name: Create a regional cluster for DRA
  gpufleet.serving.gke_cluster:
    project: gpufleet-prod
    location: us-central1
    name: gke-us-central1
    kubernetes_version: "1.34"
    zones: [us-central1-a, us-central1-c]
    system_pool: "{{ (inventory_hostname | gpufleet.serving.gke_node_pools(hostvars[inventory_hostname], gpufleet_inference_classes))[0] }}"
"""

RETURN = r"""
actions:
  description: What was done (or would be done in check mode).
  returned: always
  type: list
  elements: str
  sample: ["create"]
cluster:
  description: The cluster as the API returns it (REST JSON), the request body in check mode, C({}) when absent.
  returned: always
  type: dict
  sample: {name: gke-us-central1, currentMasterVersion: 1.34.1-gke.1200, endpoint: 203.0.113.10, status: RUNNING}
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402

from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.gke import (  # noqa: E402
    cluster_body,
    ensure_cluster,
    node_count_check,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.gke_client import (  # noqa: E402
    AUTH_SPEC,
    CONTAINER_IMPORT_ERROR,
    HAS_CONTAINER,
    container_api,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.provider import module_waiter  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError  # noqa: E402


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            project=dict(type="str", required=True),
            location=dict(type="str", required=True),
            name=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            kubernetes_version=dict(type="str", default="1.34"),
            release_channel=dict(
                type="str", choices=["RAPID", "REGULAR", "STABLE", "EXTENDED", "UNSPECIFIED"], default="REGULAR"
            ),
            zones=dict(type="list", elements="str", default=[]),
            network=dict(type="str"),
            subnetwork=dict(type="str"),
            system_pool=dict(type="dict", required=True),
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
    try:
        node_count_check(p["system_pool"])
        body = cluster_body(
            p["name"],
            project=p["project"],
            version=p["kubernetes_version"],
            release_channel=p["release_channel"],
            locations=p["zones"],
            network=p["network"],
            subnetwork=p["subnetwork"],
            system_pool=p["system_pool"],
            labels={str(k): str(v) for k, v in p["labels"].items()},
        )
        api = container_api(p)
        result = ensure_cluster(
            api,
            p["project"],
            p["location"],
            body,
            state=p["state"],
            waiter=module_waiter(p),
            check_mode=module.check_mode,
        )
    except GpufleetError as exc:
        module.fail_json(msg=str(exc))
    except Exception as exc:  # google.api_core errors: name the cluster
        module.fail_json(msg=f"GKE cluster {p['name']} in {p['project']}/{p['location']}: {exc}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
