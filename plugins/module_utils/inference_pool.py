# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A deployment's InferencePool and endpoint picker on one cluster (``routing.inference_pool``, issue 27 item 1).

With it, the model endpoint of a cluster (render/serving.py ``_model_endpoint``) gets, beside the model Service:

* an ``inference.networking.k8s.io/v1`` **InferencePool** ``<deployment>`` selecting the same serving pods as the model
  Service (``targetPorts`` = the deployment's port), whose ``endpointPickerRef`` names the EPP Service (gRPC 9002,
  ``failureMode: FailOpen``: requests still flow, unscheduled, while the picker is down);
* the llm-d router's **endpoint picker** (EPP): a Deployment ``<deployment>-epp`` (one replica, ``Recreate``: the
  picker keeps per-pod state such as the prefix cache index), its Service, a ServiceAccount with a Role that reads
  pods and InferencePools (and the router's objectives) in the namespace, and its configuration - the prefill/decode
  router's ConfigMap for a P/D deployment (pd_instances.py), else ``<deployment>-epp`` with the router's default
  scheduling profile (queue, KV-cache utilisation and prefix-cache scorers);
* the cluster's HTTPRoute then sends to the InferencePool (``backendRefs: [{group: inference.networking.k8s.io,
  kind: InferencePool}]``) instead of the Service.

The Deployment follows llm-d/llm-d-router ``config/charts/routerlib/templates/_deployment.yaml`` (args ``--pool-name``,
``--pool-namespace``, ``--pool-group``, ``--config-file``, ``--grpc-health-port``; ports 9002 / 9003 / 9090; gRPC
probes on the health port), the Role its ``llm-d-router-standalone`` chart's ``rbac.yaml`` plus pods, the config its
``routerlib`` ``_config.yaml``. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import k8s_name

POOL_GROUP = "inference.networking.k8s.io"
POOL_API_VERSION = f"{POOL_GROUP}/v1"
EXT_PROC_PORT = 9002
HEALTH_PORT = 9003
METRICS_PORT = 9090
CONFIG_KEY = "config.yaml"
CONFIG_DIR = "/config"
#: The EndpointPickerConfig API the prefill/decode router's configuration uses too (pd_instances.EPP_API_VERSION).
EPP_CONFIG_API_VERSION = "inference.networking.x-k8s.io/v1alpha1"
EPP_RESOURCES: dict[str, Any] = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}}

Metadata = Callable[[str], dict[str, Any]]


def epp_name(deployment: str) -> str:
    return k8s_name(f"{deployment}-epp")


def default_config() -> dict[str, Any]:
    """The router's default scheduling profile (llm-d-router ``routerlib`` ``_config.yaml``, without a tokenizer or
    a latency predictor)."""
    return {
        "apiVersion": EPP_CONFIG_API_VERSION,
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "queue-scorer"},
            {"type": "kv-cache-utilization-scorer"},
            {"type": "prefix-cache-scorer"},
            {"type": "max-score-picker"},
        ],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [
                    {"pluginRef": "queue-scorer", "weight": 2},
                    {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
                    {"pluginRef": "prefix-cache-scorer", "weight": 3},
                    {"pluginRef": "max-score-picker"},
                ],
            }
        ],
    }


def backend_ref(deployment: str) -> dict[str, Any]:
    """The HTTPRoute ``backendRef`` of the deployment's InferencePool."""
    return {"group": POOL_GROUP, "kind": "InferencePool", "name": k8s_name(deployment)}


def pool_objects(
    deployment: str,
    namespace: str,
    port: int,
    selector: dict[str, str],
    metadata: Metadata,
    *,
    image: str,
    config_map: str | None = None,
) -> list[dict[str, Any]]:
    """The InferencePool and its EPP for ``deployment`` on one cluster. ``selector``: the model Service's selector (the
    serving pods of every replica there). ``metadata(name)``: the owned metadata of an object (labels included).
    ``config_map``: an EPP configuration ConfigMap rendered elsewhere (key ``config.yaml``; the P/D router's), else
    ``<deployment>-epp`` is rendered here with :func:`default_config`."""
    pool = k8s_name(deployment)
    epp = epp_name(deployment)
    epp_labels = {"gpufleet.io/endpoint-picker": pool}
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": POOL_API_VERSION,
            "kind": "InferencePool",
            "metadata": metadata(pool),
            "spec": {
                "selector": {"matchLabels": dict(selector)},
                "targetPorts": [{"number": port}],
                "endpointPickerRef": {
                    "name": epp,
                    "port": {"number": EXT_PROC_PORT},
                    "failureMode": "FailOpen",
                },
            },
        }
    ]
    if config_map is None:
        config_map = epp
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata(epp),
                "data": {CONFIG_KEY: json.dumps(default_config(), indent=2) + "\n"},
            }
        )
    objs.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(epp)})
    objs.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(epp),
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "verbs": ["get", "list", "watch"]},
                {
                    "apiGroups": ["inference.networking.x-k8s.io", "llm-d.ai"],
                    "resources": ["inferenceobjectives", "inferencemodelrewrites"],
                    "verbs": ["get", "list", "watch"],
                },
            ],
        }
    )
    objs.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(epp),
            "subjects": [{"kind": "ServiceAccount", "name": epp, "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": epp},
        }
    )
    pod_meta = {"labels": {**metadata(epp).get("labels", {}), **epp_labels}}
    objs.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": metadata(epp),
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": epp_labels},
                "template": {
                    "metadata": pod_meta,
                    "spec": {
                        "serviceAccountName": epp,
                        "terminationGracePeriodSeconds": 130,
                        "containers": [
                            {
                                "name": "epp",
                                "image": image,
                                "imagePullPolicy": "IfNotPresent",
                                "args": [
                                    "--pool-name",
                                    pool,
                                    "--pool-namespace",
                                    namespace,
                                    "--pool-group",
                                    POOL_GROUP,
                                    "--config-file",
                                    f"{CONFIG_DIR}/{CONFIG_KEY}",
                                    "--grpc-health-port",
                                    str(HEALTH_PORT),
                                ],
                                "ports": [
                                    {"name": "grpc", "containerPort": EXT_PROC_PORT},
                                    {"name": "grpc-health", "containerPort": HEALTH_PORT},
                                    {"name": "metrics", "containerPort": METRICS_PORT},
                                ],
                                "livenessProbe": {
                                    "grpc": {"port": HEALTH_PORT, "service": "inference-extension"},
                                    "initialDelaySeconds": 5,
                                    "periodSeconds": 10,
                                },
                                "readinessProbe": {
                                    "grpc": {"port": HEALTH_PORT, "service": "inference-extension"},
                                    "periodSeconds": 2,
                                },
                                "env": [
                                    {
                                        "name": "NAMESPACE",
                                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                    },
                                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                ],
                                "resources": EPP_RESOURCES,
                                "volumeMounts": [{"name": "epp-config", "mountPath": CONFIG_DIR, "readOnly": True}],
                            }
                        ],
                        "volumes": [
                            {
                                "name": "epp-config",
                                "configMap": {"name": config_map, "items": [{"key": CONFIG_KEY, "path": CONFIG_KEY}]},
                            }
                        ],
                    },
                },
            },
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(epp),
            "spec": {
                "type": "ClusterIP",
                "selector": epp_labels,
                "ports": [
                    {
                        "name": "grpc-ext-proc",
                        "port": EXT_PROC_PORT,
                        "targetPort": EXT_PROC_PORT,
                        "protocol": "TCP",
                        "appProtocol": "http2",
                    },
                    {"name": "http-metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT, "protocol": "TCP"},
                ],
            },
        }
    )
    return objs
