"""A small fleet with every state the fleet picture draws: devices allocated per replica and whole nodes, devices
other workloads' claims hold, nodes cordoned, with a tainted device, with devices missing, a declared node not found,
an overcommitted slot, a drained cluster, a deployment short of replicas. Placed by the real placement, observed by
the real capacity code from Kubernetes-shaped objects (shared by the view, HTML and browser tests)."""

from __future__ import annotations

import copy
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import (
    declared_pools,
    observe_cluster,
    pool_notes,
    usable_nodes,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import validate_classes

#: Untrusted text from a cluster: a node name and a taint value that are markup.
EVIL_NODE = 'dgx-<script>alert("n")</script>'
EVIL_TAINT = "<img src=x onerror=alert(1)>"

H100 = {
    "name": "gpu",
    "driver": "gpu.nvidia.com",
    "device_class_name": "gpu.nvidia.com",
    "count": 8,
    "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}, "architecture": {"string": "Hopper"}},
    "capacity": {"memory": {"value": "81559Mi"}},
}
L4 = {
    "name": "gpu",
    "driver": "gpu.nvidia.com",
    "device_class_name": "gpu.nvidia.com",
    "count": 1,
    "attributes": {"productName": {"string": "NVIDIA L4"}, "architecture": {"string": "Ada Lovelace"}},
    "capacity": {"memory": {"value": "23034Mi"}},
}
CLASSES = {"h100-8x": {"devices": [H100]}, "l4-1x": {"devices": [L4]}}


def deployment(name: str, replicas: int, count: int, clusters: list[str], memory: str = "16Gi") -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "ml-team",
        "replicas": replicas,
        "candidate_clusters": clusters,
        "engines": [
            {
                "name": "main",
                "members": [
                    {
                        "role": "Standalone",
                        "node_selector": {
                            "devices": [
                                {
                                    "name": "gpu",
                                    "count": count,
                                    "selectors": [
                                        {
                                            "cel": 'device.capacity["gpu.nvidia.com"].memory.compareTo('
                                            f'quantity("{memory}")) >= 0'
                                        }
                                    ],
                                }
                            ]
                        },
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "engine",
                                        "image": "vllm/vllm-openai:v0.11.0",
                                        "env": [{"name": "MODEL_REVISION", "value": "sentinel-revision-7f3a"}],
                                    }
                                ]
                            }
                        },
                    }
                ],
            }
        ],
    }


def fleet() -> dict[str, Any]:
    """The normalised fleet (fleet_info's ``fleet`` shape)."""
    return copy.deepcopy(
        {
            "name": "picture",
            "classes": CLASSES,
            "clusters": [
                {
                    "name": "alpha",
                    "provider": "existing",
                    "pools": [
                        {"name": "dgx", "class": "h100-8x", "nodes": 4},
                        {"name": "l4", "class": "l4-1x", "nodes": 3},
                    ],
                    "taints": [],
                    "ready": True,
                },
                {
                    "name": "beta",
                    "provider": "gke",
                    "pools": [{"name": "l4", "class": "l4-1x", "nodes": 2}],
                    "taints": [],
                    "ready": True,
                },
            ],
            "deployments": [
                deployment("pairs", 3, 2, ["alpha"]),  # 2 of 8 GPUs each: device-level allocations
                deployment("whole", 1, 8, ["alpha"]),  # every GPU of a node: a whole node
                deployment("chat", 2, 1, ["alpha", "beta"]),
                deployment("huge", 2, 8, ["alpha"], memory="80Gi"),  # H100s publish 81559Mi: fits; short of nodes
            ],
            "caches": [],
        }
    )


def _node(name: str, pool: str, *, cordoned: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"gpufleet.io/pool": pool}},
        "spec": {"unschedulable": cordoned},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def _slice(node: str, klass: str, *, drop: int = 0, taint: str | None = None) -> dict[str, Any]:
    (device,) = validate_classes(CLASSES)[klass].devices
    devices = [dict(d) for d in device.slice_devices()]
    devices = [{k: v for k, v in d.items() if k != "driver"} for d in devices[: len(devices) - drop]]
    if taint:
        devices[0]["taints"] = [{"key": "gpu.nvidia.com/unhealthy", "value": taint, "effect": "NoSchedule"}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node}, "devices": devices},
    }


def observed_alpha() -> dict[str, Any]:
    """alpha as read: dgx has 3 labelled nodes of 4 declared (one cordoned, one with 2 GPUs held by another team);
    l4 has 3 nodes, one with a tainted GPU (its name and taint value are markup), one publishing no GPU."""
    nodes = [
        _node("dgx-0", "dgx"),
        _node("dgx-1", "dgx"),
        _node("dgx-2", "dgx", cordoned=True),
        _node("l4-0", "l4"),
        _node(EVIL_NODE, "l4"),
        _node("l4-2", "l4"),
    ]
    slices = [
        _slice("dgx-0", "h100-8x"),
        _slice("dgx-1", "h100-8x"),
        _slice("dgx-2", "h100-8x"),
        _slice("l4-0", "l4-1x"),
        _slice(EVIL_NODE, "l4-1x", taint=EVIL_TAINT),
        _slice("l4-2", "l4-1x", drop=1),
    ]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "other-team", "name": "batch-gpus"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"driver": "gpu.nvidia.com", "pool": "dgx-1", "device": "gpu-6", "request": "gpu"},
                        {"driver": "gpu.nvidia.com", "pool": "dgx-1", "device": "gpu-7", "request": "gpu"},
                    ]
                }
            }
        },
    }
    cluster = fleet()["clusters"][0]
    state = observe_cluster("alpha", declared_pools(cluster), validate_classes(CLASSES), nodes, slices, [claim])
    return state.to_dict()


def placement(capacity: str = "observed", drained: tuple[str, ...] = ("beta",)) -> dict[str, Any]:
    """fleet_placement's result for the case (the keys the report reads)."""
    states = [observed_alpha()]
    outcome = place_fleet(
        fleet(),
        [],
        drained=drained,
        observed_nodes=usable_nodes(states) if capacity == "observed" else None,
        capacity_notes=pool_notes(states),
    )
    return {
        "replicas": outcome.replicas,
        "results": {n: {k: v for k, v in r.items() if k != "replicas"} for n, r in outcome.results.items()},
        "status": outcome.statuses(),
        "degraded": outcome.degraded(),
        "shortfalls": outcome.shortfalls(),
        "table": outcome.table(),
        "explain": outcome.explain(),
        "drift": states,
        "drift_lines": [line for s in states for line in s["drift"]],
        "dropped": [],
        "capacity_loss": [],
        "unreadable": [],
        "held": [],
        "blocked": [],
    }


#: Clusters of :func:`large` that need attention, and why: drained (a badge), a pool overcommitted (a record beyond
#: its nodes), not reconciled (apply mode), and a replica pending.
DRAINED, OVERCOMMITTED, NOT_RECONCILED, PENDING = "cluster-0007", "cluster-0123", "cluster-0260", "cluster-0301"


def _record(dep: str, cluster: str, index: int, pool: str, node: int, devices: list[str]) -> dict[str, Any]:
    member = {"role": "Standalone", "pool": pool, "nodes": 1, "allocations": [{"node": node, "devices": devices}]}
    return {
        "deployment": dep,
        "cluster": cluster,
        "index": index,
        "name": f"{dep}-{cluster}-{index}",
        "engines": [{"name": "main", "copies": 1, "members": [member]}],
    }


def large(clusters: int = 350, evil: str | None = None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A fleet past the picture's split threshold, built in-process without placing (fast): ``clusters`` clusters of
    two pools (``dgx``: 2 nodes of 8 H100s, ``l4``: 4 nodes of one L4); ``chat`` has a replica on every cluster's l4
    node 0, ``pairs`` one on every other cluster's dgx node 0 (2 GPUs), ``huge`` none (Degraded). The clusters of
    :data:`DRAINED` .. :data:`PENDING` need attention. ``evil``: the name of cluster 1 (markup). Returns the fleet,
    the placement and build_view's keyword arguments (apply mode)."""
    names = [f"cluster-{i:04d}" for i in range(clusters)]
    if evil:
        names[1] = evil
    deployments = [
        deployment("chat", clusters, 1, names),
        deployment("pairs", (clusters + 1) // 2, 2, names),
        deployment("huge", 2, 8, names, memory="80Gi"),
    ]
    fleet = {
        "name": "large",
        "classes": CLASSES,
        "clusters": [
            {
                "name": n,
                "provider": "existing",
                "pools": [
                    {"name": "dgx", "class": "h100-8x", "nodes": 2},
                    {"name": "l4", "class": "l4-1x", "nodes": 4},
                ],
                "taints": [],
                "ready": True,
            }
            for n in names
        ],
        "deployments": deployments,
        "caches": [],
    }
    replicas = [_record("chat", n, i, "l4", 0, ["gpu-0"]) for i, n in enumerate(names)]
    replicas += [_record("pairs", n, i // 2, "dgx", 0, ["gpu-0", "gpu-1"]) for i, n in enumerate(names) if i % 2 == 0]
    replicas.append(_record("chat", OVERCOMMITTED, clusters, "l4", 6, ["gpu-0"]))  # beyond the pool's 4 nodes
    scheduled = {"chat": clusters + 1, "pairs": (clusters + 1) // 2, "huge": 0}
    desired = {"chat": clusters + 1, "pairs": (clusters + 1) // 2, "huge": 2}
    status = {d: "Ready" if scheduled[d] == desired[d] else "Degraded" for d in desired}
    placement = {
        "replicas": replicas,
        "results": {
            d: {"desired": desired[d], "scheduled": scheduled[d], "condition": {"reason": "r", "message": "m"}}
            for d in desired
        },
        "status": status,
        "degraded": ["huge"],
        "shortfalls": ["huge"],
        "drift": [],
        "drift_lines": [],
    }
    pending = {"cluster": PENDING, "deployment": "chat", "name": f"chat-{PENDING}-301-main", "message": "0/1 ready"}
    options = {
        "mode": "apply",
        "capacity": "declared",
        "drained": [DRAINED],
        "applied": {"pending": [pending], "clusters": {}},
        "not_reconciled": {NOT_RECONCILED: "connection refused"},
        "summary": "2 deployment(s) Ready; Degraded (see above): huge.",
    }
    return fleet, placement, options
