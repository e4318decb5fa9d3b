#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# kubernetes.core.k8s_info can wait for one object at a time and has no readiness rule for LeaderWorkerSets (it only
# waits for them to exist), and each `until` retry of it is a new module process. This module polls every serving
# workload of a cluster in one process, with kubernetes.core's own client and authentication options.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: workloads_ready
short_description: Wait until serving workloads are ready by their own replica counts
version_added: 0.2.0
description:
  - Polls a cluster until every Deployment, LeaderWorkerSet and LLMInferenceService in O(objects) is ready, or
    O(timeout) seconds pass. Objects of other kinds are ignored.
  - Ready is decided from the workload's own counts, never from a bare condition. A Deployment is ready when its
    controller has seen the current generation and its updated, ready and available replicas all equal
    C(spec.replicas) (a one-replica Deployment with C(maxUnavailable=1) reports C(Available=True) with no pod ready).
    A LeaderWorkerSet is ready when its ready and updated replicas equal C(spec.replicas). An LLMInferenceService
    publishes no counts; its C(Ready) condition is used.
  - Each poll lists each waited kind once (filtered by O(label_selectors)), so the cost does not grow with the number
    of workloads.
  - An API error (the cluster stops answering, a kind is not served) fails the task at once; a timeout returns the
    workloads still pending and fails only when O(fail_on_timeout) is true.
author:
  - gpufleet.serving contributors (@gpufleet)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  objects:
    description: The objects that were applied (as rendered); their workloads must become ready.
    type: list
    elements: dict
    required: true
  label_selectors:
    description: Label selectors that narrow each list to the objects this collection manages.
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds to wait at most.
    type: int
    default: 900
  poll_interval:
    description: Seconds between two polls.
    type: float
    default: 2
  fail_on_timeout:
    description: Fail the task when workloads are still pending at the timeout (otherwise return them in RV(pending)).
    type: bool
    default: true
requirements:
  - kubernetes >= 24.2.0
attributes:
  check_mode:
    support: full
    description: Reads only; in check mode it reads once and does not wait.
  diff_mode:
    support: none
    description: Reports no diff.
seealso:
  - module: kubernetes.core.k8s_info
  - plugin: gpufleet.serving.workloads_pending
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Wait until this cluster's serving workloads are ready
  gpufleet.serving.workloads_ready:
    kubeconfig: "{{ gpufleet_kubeconfig }}"
    context: "{{ gpufleet_context }}"
    objects: "{{ applied_objects }}"
    label_selectors: [app.kubernetes.io/managed-by=gpufleet.serving]
    timeout: 600
    fail_on_timeout: false
  register: ready
"""

RETURN = r"""
pending:
  description: The workloads not ready when the module returned (empty when all are ready).
  returned: always
  type: list
  elements: dict
  sample:
    - kind: Deployment
      namespace: ml-team
      name: qwen-demo-3f9a1-main
      deployment: qwen-demo
      message: "Deployment ml-team/qwen-demo-3f9a1-main: 0/1 ready, 0/1 available"
polls:
  description: How many times the workloads were listed.
  returned: always
  type: int
  sample: 2
"""

import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC  # noqa: E402
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client  # noqa: E402
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule  # noqa: E402
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException  # noqa: E402

from ansible_collections.gpufleet.serving.plugins.module_utils.readiness import wait_ready  # noqa: E402


def main() -> None:
    spec = dict(AUTH_ARG_SPEC)
    spec.update(
        objects={"type": "list", "elements": "dict", "required": True},
        label_selectors={"type": "list", "elements": "str", "default": []},
        timeout={"type": "int", "default": 900},
        poll_interval={"type": "float", "default": 2},
        fail_on_timeout={"type": "bool", "default": True},
    )
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=spec, supports_check_mode=True)
    params = module.params
    selector = ",".join(params["label_selectors"])
    try:
        client = get_api_client(module)

        def list_kind(api_version: str, kind: str) -> list[dict]:
            resource = client.resource(kind, api_version)
            return client.get(resource, label_selector=selector).to_dict().get("items") or []

        pending, polls = wait_ready(
            list_kind,
            params["objects"],
            timeout=0 if module.check_mode else params["timeout"],
            interval=params["poll_interval"],
            sleep=time.sleep,
            clock=time.monotonic,
        )
    except CoreException as exc:
        module.fail_from_exception(exc)
    except Exception as exc:  # any other API failure means this cluster stopped answering
        module.fail_json(msg=f"could not read the workloads' readiness: {exc}")
    if pending and params["fail_on_timeout"] and not module.check_mode:
        module.fail_json(
            msg=f"not ready after {params['timeout']}s: " + "; ".join(p["message"] for p in pending),
            pending=pending,
            polls=polls,
        )
    module.exit_json(changed=False, pending=pending, polls=polls)


if __name__ == "__main__":
    main()
