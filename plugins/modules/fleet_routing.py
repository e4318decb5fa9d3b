#!/usr/bin/python
# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# This module runs on the controller as an action plugin (plugins/action/fleet_routing.py); this file holds its docs.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_routing
short_description: Route each model's traffic across the fleet by its placement
version_added: 0.5.0
description:
  - Builds the fleet routing artifact from the whole placement - per model and per cluster holding replicas of it, the
    cluster's model endpoint, the replicas placed and Ready there, a C(weight) proportional to the Ready replicas
    (0 for a drained cluster while the model is Ready elsewhere) and a C(priority) tier (the cluster's
    C(gpufleet_routing_priority), default 0), plus the model's spillover endpoints and adapter names (docs/routing.md).
  - In render mode a replica is Ready when it is placed and its cluster is not draining. In apply mode the replicas
    in O(pending) (not Ready after the workloads' wait) are not.
  - Renders it for the hub cluster with O(renderer) - a Gateway API HTTPRoute with weighted backends, an Envoy AI
    Gateway AIGatewayRoute, or the llm-d router's multicluster endpoints file - plus the artifact as a ConfigMap.
  - With O(render_dir), writes them under C(_fleet/routing/) of the render directory (atomically, never through a
    symlink; this fleet's routing files no longer rendered are removed). With O(hub) in apply mode, server-side
    applies them to the hub, awaits the API server's answer for each, then deletes this fleet's routing objects no
    longer rendered.
  - Publishes the artifact as the custom stat C(gpufleet_routing) (AWX artifact) with O(publish_stats).
author:
  - gpufleet.serving contributors (@gpufleet)
options:
  fleet:
    description: The normalised fleet (M(gpufleet.serving.fleet_info)'s C(fleet)) - its name and deployments.
    type: dict
    required: true
  plan_routing:
    description:
      - The plan's routing (C(routing) of the plan document - per deployment, per cluster C(placed) and C(draining)).
        Used instead of O(replicas) and O(drained) when given - a partial apply routes by the whole plan.
    type: dict
  replicas:
    description: The placement's replica records (every cluster's), when no O(plan_routing) is given.
    type: list
    elements: dict
  drained:
    description: The drained clusters, with O(replicas).
    type: list
    elements: str
    default: []
  pending:
    description: Apply mode - M(gpufleet.serving.fleet_apply)'s C(pending) (replicas not Ready after the wait).
    type: list
    elements: dict
    default: []
  leaving:
    description:
      - Apply mode - the replicas running now that the placement removes (M(gpufleet.serving.fleet_placement)'s
        C(dropped)) - weight 0 before they are deleted, unless their deployment is in O(held).
    type: list
    elements: dict
    default: []
  held:
    description:
      - Apply mode - deployments nothing of which the apply deletes this run (M(gpufleet.serving.fleet_apply)'s
        C(held) - a new replica not Ready) - their leaving replicas keep serving and keep their weight.
    type: list
    elements: str
    default: []
  renderer:
    description: C(gpufleet_fleet_routing) - what the hub gets besides the artifact.
    type: str
    choices: [none, httproute, aigateway, llmd]
    default: none
  gateway:
    description:
      - The hub's Gateway the routes attach to (C(gpufleet_routing_gateway)), C({name, namespace, section_name}).
        Required by V(httproute) and V(aigateway).
    type: dict
  namespace:
    description: The hub namespace of the artifact ConfigMap and the llm-d endpoints ConfigMap.
    type: str
    default: gpufleet-routing
  mode:
    description: C(gpufleet_mode).
    type: str
    choices: [render, apply]
    default: render
  render_dir:
    description: Render mode - the render directory; the files go to C(_fleet/routing/).
    type: path
  hub:
    description: Apply mode - the inventory host of the hub cluster (C(gpufleet_routing_hub)); its C(gpufleet_kubeconfig)
      / C(gpufleet_context) pin the connection.
    type: str
  field_manager:
    description: The server-side apply field manager on the hub.
    type: str
    default: gpufleet
  request_timeout:
    description: Seconds per API request to the hub.
    type: float
    default: 30
  publish_stats:
    description: Publish the artifact as the custom stat C(gpufleet_routing).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Nothing is written; the hub gets server-side dry-run applies.
  diff_mode:
    support: none
    description: The artifact is returned instead.
"""

EXAMPLES = r"""
- name: Route the fleet's traffic by the placement
  gpufleet.serving.fleet_routing:
    fleet: "{{ fleet_info_result.fleet }}"
    replicas: "{{ placement.replicas }}"
    drained: "{{ gpufleet_drained_clusters | default([]) }}"
    renderer: httproute
    gateway: {name: hub-gateway, namespace: gateway-system}
    render_dir: "{{ gpufleet_render_dir }}"
  run_once: true
"""

RETURN = r"""
routing:
  description: The routing artifact (version, fleet, mode, renderer, models with their clusters and spillover).
  returned: success
  type: dict
  sample:
    version: 1
    fleet: prod
    mode: render
    renderer: httproute
    models:
      - deployment: chat
        namespace: ml
        port: 8000
        path: /ml/chat/
        desired: 6
        ready: 6
        adapters: []
        clusters:
          - {cluster: c1, service: chat.ml.svc, address: gw.c1.example.com, port: 80, path: /ml/chat/, placed: 3,
             ready: 3, weight: 3, priority: 0, draining: false}
        spillover: []
lines:
  description: One line per model with each cluster's weight.
  returned: success
  type: list
  elements: str
  sample: ["chat: c1=3 c2=2 c3=1"]
notes:
  description: What could not be routed (a cluster without C(gpufleet_routing_address)).
  returned: success
  type: list
  elements: str
  sample: ["chat: cluster c3 has no gpufleet_routing_address: the hub cannot route to it"]
objects:
  description: The hub's objects.
  returned: success
  type: list
  elements: dict
  sample: []
written:
  description: Render mode - files written under C(_fleet/routing/).
  returned: success
  type: list
  elements: str
  sample: ["_fleet/routing/ml.httproute-chat.yaml"]
removed:
  description: Render mode - this fleet's routing files removed.
  returned: success
  type: list
  elements: str
  sample: []
hub:
  description: Apply mode - the hub, the objects applied (with the stored C(resourceVersion) of each) and deleted.
  returned: success
  type: dict
  sample: {cluster: hub, applied: ["HTTPRoute/ml/chat"], deleted: [], stored: {"HTTPRoute/ml/chat": "4711"}}
"""
