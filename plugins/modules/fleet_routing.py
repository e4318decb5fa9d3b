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
    Gateway AIGatewayRoute, or the llm-d router's multicluster endpoints file - plus the artifact as ConfigMaps - an
    index C(gpufleet-routing-<fleet>) naming, per model, the ConfigMaps C(gpufleet-routing-<fleet>.<deployment>)
    (and numbered parts C(.<n>) past 128 KiB) that hold it, each far under the 1 MiB a ConfigMap may hold.
  - A ConfigMap or Secret over 1 MiB of data fails the task naming it, before anything is written or applied.
  - With O(render_dir), writes them under C(_fleet/routing/) of the render directory (atomically, never through a
    symlink; this fleet's routing files no longer rendered are removed). With O(hub) in apply mode, server-side
    applies them to the hub, awaits the API server's answer for each, then deletes this fleet's routing objects no
    longer rendered (the artifact's parts before its index, deletions last).
  - Returns, and publishes as the custom stat C(gpufleet_routing) (AWX artifact) with O(publish_stats), a bounded
    summary of the artifact (at most 64 KB of JSON whatever the fleet's size) pointing at the whole artifact - the
    index ConfigMap's file under C(_fleet/routing/) of the render directory, and that ConfigMap on the hub. The artifact and
    the hub's objects are handed to later tasks through files in the run's private local temporary directory
    (RV(artifact), RV(objects)); they are never in the task result (issue 26 - at 5,000 clusters the artifact is
    about 1 MB and the objects about 4 MB, and AWX blanks a job event over 700,000 characters).
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
    description: Publish the summary RV(routing) as the custom stat C(gpufleet_routing).
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
  description:
    - A bounded summary of the routing artifact (at most 64 KB of JSON whatever the fleet's size), also the custom
      stat C(gpufleet_routing). The whole artifact is the index ConfigMap named in C(artifact) (key C(routing.json))
      and the ConfigMaps it names - their files under C(_fleet/routing/) of the render directory in render mode, the
      hub's objects in apply mode with a hub - and RV(artifact) in this run.
    - C(models) - per deployment its C(namespace), C(desired), C(ready) (the Ready replicas routed to), C(weight) (in
      all), C(endpoints) (clusters with weight above 0) and C(clusters) (all, draining ones included), the priority
      C(tiers) of its endpoints, C(draining) and C(unroutable) (no C(gpufleet_routing_address)) clusters, C(leaving)
      replicas, the active C(spillover) endpoints, C(short) (fewer Ready than desired) and C(over) (more - leaving
      replicas that still serve). C(models_count) counts them all.
    - C(totals) - models, endpoints, clusters, weight, ready, desired, unroutable, and the names of the C(short) and
      C(over) models (the first 10; C(short_count) / C(over_count) when there are more).
    - C(files) - the first 50 routing files of this fleet under C(_fleet/routing/) (render mode; C(files_count) of
      them). When the summary would be larger than 64 KB the models are cut (the short and over ones kept first) and
      C(truncated) is true.
  returned: success
  type: dict
  sample:
    version: 1
    fleet: prod
    mode: render
    renderer: httproute
    artifact:
      configmap: {namespace: gpufleet-routing, name: gpufleet-routing-prod, key: routing.json}
      render_dir: /srv/fleet/rendered
      file: _fleet/routing/gpufleet-routing.configmap-gpufleet-routing-prod.yaml
    totals: {models: 1, endpoints: 3, clusters: 3, weight: 6, ready: 6, desired: 6, unroutable: 0, short: [], over: []}
    models:
      chat: {namespace: ml, desired: 6, ready: 6, weight: 6, endpoints: 3, clusters: 3, tiers: [0, 1], draining: 0,
             leaving: 0, unroutable: 0, spillover: [], short: false, over: false}
    models_count: 1
    files: [_fleet/routing/gpufleet-routing.configmap-gpufleet-routing-prod.yaml, _fleet/routing/ml.httproute-chat.yaml]
    files_count: 5
    truncated: false
artifact:
  description:
    - The whole routing artifact (version, fleet, mode, renderer, models with their clusters and spillover;
      docs/routing.md), handed off through a file in the run's private local temporary directory - a handle
      C({gpufleet_handoff, path, sha256, chars, items}) that the collection's actions take in its place. Read it
      from the ConfigMap of RV(routing)'s C(artifact) across runs.
  returned: success
  type: dict
  sample: {gpufleet_handoff: routing, path: /home/u/.ansible/tmp/ansible-local-123/gpufleet-routing-1f0c.json,
           sha256: 1f0c..., chars: 2310, items: 5}
objects:
  description: The hub's objects (the artifact's ConfigMaps first, its index last of them), handed off through a file like RV(artifact).
  returned: success
  type: dict
  sample: {gpufleet_handoff: routing-objects, path: /home/u/.ansible/tmp/ansible-local-123/gpufleet-routing-objects-9a7e.json,
           sha256: 9a7e..., chars: 5230, items: 5}
objects_count:
  description: How many hub objects there are.
  returned: success
  type: int
  sample: 5
lines:
  description: One line per model with each cluster's weight (at most 100,000 characters; a last line counts the
    lines left out).
  returned: success
  type: list
  elements: str
  sample: ["chat: c1=3 c2=2 c3=1"]
notes:
  description: What could not be routed (a cluster without C(gpufleet_routing_address)); at most 50,000 characters,
    RV(notes_count) counts them all.
  returned: success
  type: list
  elements: str
  sample: ["chat: cluster c3 has no gpufleet_routing_address: the hub cannot route to it"]
notes_count:
  description: How many notes there are.
  returned: success
  type: int
written:
  description: Render mode - files written under C(_fleet/routing/) (the first that fit in 50,000 characters;
    C(written_count) counts them all).
  returned: success
  type: list
  elements: str
  sample: ["_fleet/routing/ml.httproute-chat.yaml"]
removed:
  description: Render mode - this fleet's routing files removed (bounded as RV(written); C(removed_count)).
  returned: success
  type: list
  elements: str
  sample: []
hub:
  description:
    - Apply mode - the hub, the objects applied (with the stored C(resourceVersion) of each) and deleted. Each list
      and C(stored) holds the first entries that fit in 50,000 characters; C(applied_count), C(deleted_count) and
      C(stored_count) count them all.
  returned: success
  type: dict
  sample: {cluster: hub, applied: ["HTTPRoute/ml/chat"], applied_count: 1, deleted: [], deleted_count: 0,
           stored: {"HTTPRoute/ml/chat": "4711"}, stored_count: 1}
truncated:
  description: Whether any list of the result, or the summary, was cut.
  returned: success
  type: bool
"""
