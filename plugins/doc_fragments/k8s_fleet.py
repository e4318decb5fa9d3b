# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Options of the plugins that talk to every cluster of the fleet at once (fleet_read, fleet_apply)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  connections:
    description:
      - How to reach each cluster, by inventory host name. Each value holds kubernetes.core authentication options
        (C(kubeconfig), C(context), C(host), C(api_key), C(validate_certs), ...), as the internal
        C(gpufleet.serving.cluster_connection) role sets them in C(cluster_connection_k8s).
      - Environment variables C(K8S_AUTH_*) apply as they do for kubernetes.core modules.
      - Credentials in it (an inline kubeconfig, C(api_key)) are never returned or printed - the plugins return only
        what they read and did.
    type: dict
    required: true
  request_timeout:
    description: Seconds a single API request may take before the cluster is recorded as failed.
    type: float
    default: 30
requirements:
  - kubernetes >= 24.2.0 (on the controller)
  - the kubernetes.core collection
"""
