# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""In-cluster queues (Kueue, KAI Scheduler) for a deployment's workloads (docs/autoscaling.md, "Queues").

- :func:`queue_objects`: a cluster's rendered objects with the queue's labels: Kueue's ``kueue.x-k8s.io/queue-name``
  on every workload and pod template (Kueue's Deployment and LeaderWorkerSet integrations read it from the workload;
  for a LeaderWorkerSet Kueue makes one Workload per group itself, so a gang needs no pod-group labels), or KAI
  Scheduler's ``kai.scheduler/queue`` label and ``schedulerName: kai-scheduler`` on the pods (KAI's pod grouper
  gangs a LeaderWorkerSet's group).
- :func:`clusterqueue_free`: what a Kueue ClusterQueue still admits per resource (``nominalQuota`` minus usage, over
  its flavors); :func:`hold_beyond_quota`: placement's observed pools with every free device beyond that marked held,
  so placement never puts a replica where the queue would not admit it.

Pure functions; the readers (fleet.reconcile / capacity) hand in the objects they read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.models import InferenceClass, ModelDeployment, QueueRef
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

#: Kueue: the label that puts a workload in a LocalQueue of its namespace.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: KAI Scheduler: the queue label (NVIDIA/KAI-Scheduler CHANGELOG: ``runai/queue`` became ``kai.scheduler/queue``) and
#: the scheduler name its pods ask for (KAI-Scheduler test/e2e/modules/constant/constant.go: ``kai-scheduler``).
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_SCHEDULER_NAME = "kai-scheduler"
#: Resource names a ClusterQueue may count GPUs by besides a DeviceClass name (Kueue's deviceClassMappings may map a
#: DeviceClass to any name; these are the device plugins' names).
GPU_RESOURCE_NAMES = ("nvidia.com/gpu", "amd.com/gpu")

# Where each workload kind keeps its pod templates.
_TEMPLATES: dict[str, tuple[tuple[str, ...], ...]] = {
    "Deployment": (("spec", "template"),),
    "LeaderWorkerSet": (
        ("spec", "leaderWorkerTemplate", "leaderTemplate"),
        ("spec", "leaderWorkerTemplate", "workerTemplate"),
    ),
}


def queue_for(dep: ModelDeployment, cluster_default: QueueRef | None) -> QueueRef | None:
    """The deployment's own queue, else the cluster's default (``gpufleet_queue``)."""
    return dep.queue if dep.queue is not None else cluster_default


def _template(obj: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    node: Any = obj
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node if isinstance(node, dict) else None


def queue_objects(objects: list[dict[str, Any]], queue: QueueRef | None) -> list[dict[str, Any]]:
    """``objects`` with ``queue``'s labels on every workload (and its pod templates), edited in place."""
    if queue is None:
        return objects
    label = KUEUE_QUEUE_LABEL if queue.kind == "kueue" else KAI_QUEUE_LABEL
    for obj in objects:
        paths = _TEMPLATES.get(str(obj.get("kind")))
        if paths is None:
            continue
        obj.setdefault("metadata", {}).setdefault("labels", {})[label] = queue.name
        for path in paths:
            template = _template(obj, path)
            if template is None:
                continue
            template.setdefault("metadata", {}).setdefault("labels", {})[label] = queue.name
            if queue.kind == "kai":
                template.setdefault("spec", {})["schedulerName"] = KAI_SCHEDULER_NAME
    return objects


def local_queue_target(local_queues: Iterable[Mapping[str, Any]], namespace: str, name: str) -> str | None:
    """The ClusterQueue a LocalQueue ``namespace/name`` submits to (``spec.clusterQueue``), or None."""
    for lq in local_queues:
        meta = lq.get("metadata") or {}
        if meta.get("name") == name and meta.get("namespace") == namespace:
            target = (lq.get("spec") or {}).get("clusterQueue")
            return str(target) if target else None
    return None


def clusterqueue_free(cq: Mapping[str, Any], resources: Iterable[str]) -> dict[str, int]:
    """Per resource of ``resources`` the ClusterQueue defines: the sum of ``nominalQuota`` over its flavors minus the
    sum of ``status.flavorsUsage`` (what admitted workloads use), at least 0, whole devices (rounded down)."""
    wanted = set(resources)
    quota: dict[str, float] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                name = res.get("name")
                if name in wanted and res.get("nominalQuota") is not None:
                    quota[name] = quota.get(name, 0) + _count(res["nominalQuota"])
    used: dict[str, float] = {}
    for flavor in (cq.get("status") or {}).get("flavorsUsage") or []:
        for res in flavor.get("resources") or []:
            name = res.get("name")
            if name in quota and res.get("total") is not None:
                used[name] = used.get(name, 0) + _count(res["total"])
    out: dict[str, int] = {}
    for name, total in quota.items():
        out[name] = max(math.floor(total - used.get(name, 0) + 1e-9), 0)
    return out


def _count(value: Any) -> float:
    """A quota or usage quantity as a number (``2``, ``"8"``, ``"500m"``)."""
    text = str(value).strip()
    whole, exact = parse_quantity(text).as_int64()  # validates it (a malformed quantity raises)
    if exact:
        return float(whole)
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    try:
        return float(text)
    except ValueError:
        return 0.0  # a fractional quantity with a binary suffix: not a device count


def _device_resource(device_class: str | None, free: Mapping[str, int]) -> str | None:
    """The ClusterQueue resource a device of ``device_class`` counts against: its DeviceClass's name when the queue
    has that resource (a Kueue deviceClassMapping to the class's own name), else a GPU resource name it has."""
    if device_class and device_class in free:
        return device_class
    return next((r for r in GPU_RESOURCE_NAMES if r in free), None)


def hold_beyond_quota(
    pools: Mapping[str, str],
    capacity: Mapping[str, Any],
    classes: Mapping[str, InferenceClass],
    free: Mapping[str, int],
) -> dict[str, Any]:
    """Placement's capacity of one cluster (``{pool: nodes | {nodes, held}}``, capacity.usable_nodes' shape) with the
    devices a queue would not admit marked held: per resource, the first ``free[resource]`` free devices (pools and
    nodes in order) stay free, every later one is held. ``pools``: pool name -> class name."""
    left = dict(free)
    out: dict[str, Any] = {}
    for pool, class_name in pools.items():
        cls = classes.get(class_name)
        cap = capacity.get(pool, 0)
        nodes = int(cap["nodes"]) if isinstance(cap, Mapping) else int(cap)
        held_in: list[Any] = list(cap.get("held") or []) if isinstance(cap, Mapping) else []
        if cls is None:
            out[pool] = cap
            continue
        devices = [(x["name"], d.device_class_name) for d in cls.devices if d.claim == "DRA" for x in d.slice_devices()]
        held_out: list[Any] = []
        for i in range(nodes):
            entry = held_in[i] if i < len(held_in) else []
            if isinstance(entry, Mapping):
                taken, taints = list(entry.get("devices") or []), dict(entry.get("taints") or {})
            else:
                taken, taints = list(entry), {}
            for name, device_class in devices:
                resource = _device_resource(device_class, free)
                if resource is None or name in taken or name in taints:
                    continue
                if left[resource] > 0:
                    left[resource] -= 1
                else:
                    taken.append(name)
            held_out.append({"devices": taken, "taints": taints} if taints else taken)
        out[pool] = {"nodes": nodes, "held": held_out} if any(held_out) else nodes
    return out


def admission_note(queue: QueueRef | None, free: Mapping[str, int] | None) -> str | None:
    """What explain says of a cluster's queue: its name and what it still admits."""
    if queue is None:
        return None
    kind = "Kueue LocalQueue" if queue.kind == "kueue" else "KAI queue"
    if not free:
        return f"admitted through {kind} {queue.name}"
    left = ", ".join(f"{n} {r}" for r, n in sorted(free.items()))
    return f"admitted through {kind} {queue.name} (its ClusterQueue admits {left} more)"


#: The Kueue kinds observed capacity reads (a cluster that does not serve them has none: no quota applies).
KUEUE_KINDS: tuple[tuple[str, str], ...] = (
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
)


def cluster_queue_free(
    queue: Mapping[str, Any] | None,
    cluster_queues: Iterable[Mapping[str, Any]],
    local_queues: Iterable[Mapping[str, Any]],
    resources: Iterable[str],
) -> dict[str, int] | None:
    """What a cluster's default queue (``gpufleet_queue``, a Kueue LocalQueue name) still admits per resource: the
    LocalQueues of that name (one per namespace) and the ClusterQueues they submit to; with several, the least per
    resource. None: no Kueue queue, or none of that name found (nothing to apply)."""
    if not queue or queue.get("kind") != "kueue":
        return None
    wanted = list(resources)
    by_name = {str((cq.get("metadata") or {}).get("name")): cq for cq in cluster_queues}
    targets = sorted(
        {
            str((lq.get("spec") or {}).get("clusterQueue"))
            for lq in local_queues
            if (lq.get("metadata") or {}).get("name") == queue.get("name")
            and (lq.get("spec") or {}).get("clusterQueue")
        }
    )
    frees = [clusterqueue_free(by_name[t], wanted) for t in targets if t in by_name]
    if not frees:
        return None
    out: dict[str, int] = {}
    for free in frees:
        for name, n in free.items():
            out[name] = min(out.get(name, n), n)
    return out


def hold_state_beyond_quota(
    state: Any,
    classes: Mapping[str, InferenceClass],
    free: Mapping[str, int],
    why: str,
    exempt: Mapping[str, set[str]] | None = None,
) -> None:
    """capacity.ClusterState ``state`` with every free device beyond ``free`` held (in place): usable nodes in pool
    order, each device a queue resource counts that no claim holds and no taint blocks takes one unit of the quota;
    once a resource's quota is spent, the rest are held (``why`` names the queue in the node's notes). ``exempt``
    (node name -> devices): the fleet's own admitted replicas' devices, in the queue's usage already: never held, and
    they take none of ``free``."""
    left = dict(free)
    for pool in state.pools:
        cls = classes.get(pool.class_name)
        if cls is None:
            continue
        devices = [(x["name"], d.device_class_name) for d in cls.devices if d.claim == "DRA" for x in d.slice_devices()]
        for node in pool.nodes:
            if not node.usable:
                continue
            extra = []
            own = (exempt or {}).get(node.name, set())
            for name, device_class in devices:
                resource = _device_resource(device_class, free)
                if resource is None or name in node.held_devices or name in node.device_taints or name in own:
                    continue
                if left[resource] > 0:
                    left[resource] -= 1
                else:
                    extra.append(name)
            if extra:
                node.held.append(f"{len(extra)} device(s) ({', '.join(extra)}) beyond {why}")
                node.held_devices = sorted({*node.held_devices, *extra})
                claimable = {name for name, _c in devices}
                node.held_whole = node.held_whole or claimable <= set(node.held_devices)


def apply_queue_quota(
    state: Any,
    queue: Mapping[str, Any],
    classes: Mapping[str, InferenceClass],
    by_kind: Mapping[str, Iterable[Mapping[str, Any]]],
    own_claims: Iterable[Mapping[str, Any]] = (),
) -> dict[str, int] | None:
    """Observed capacity of one cluster (capacity.ClusterState, in place) bounded by its Kueue queue's free quota;
    the free quota applied (None: nothing to apply). ``own_claims``: the allocated ResourceClaims of the fleet's own
    replicas admitted through this queue: their devices are in its usage, so they stay free for those replicas (a
    spent quota must not make the fleet's running replicas look overcommitted)."""
    resources: set[str] = set(GPU_RESOURCE_NAMES)
    for pool in state.pools:
        cls = classes.get(pool.class_name)
        if cls is not None:
            resources.update(d.device_class_name for d in cls.devices if d.device_class_name)
    free = cluster_queue_free(queue, by_kind.get("ClusterQueue") or [], by_kind.get("LocalQueue") or [], resources)
    if free is None:
        return None
    exempt = claimed_devices(own_claims, by_kind.get("ResourceSlice") or [])
    hold_state_beyond_quota(state, classes, free, f"the quota of Kueue queue {queue.get('name')}", exempt)
    return free


def claimed_devices(claims: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """``{node name: devices}`` that ``claims`` are allocated (their results, located by the ResourceSlices)."""
    where: dict[tuple[str, str, str], str] = {}
    for sl in slices:
        spec = sl.get("spec") or {}
        node = spec.get("nodeName")
        if not node:
            continue
        pool = str((spec.get("pool") or {}).get("name", node))
        for dev in spec.get("devices") or []:
            where[(str(spec.get("driver")), pool, str(dev.get("name")))] = str(node)
    out: dict[str, set[str]] = {}
    for claim in claims:
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        for r in results:
            node = where.get((str(r.get("driver")), str(r.get("pool")), str(r.get("device"))))
            if node is not None:
                out.setdefault(node, set()).add(str(r.get("device")))
    return out


# -- A deployment's own queue (``queue: {kind: kueue, name}``): its LocalQueue in the deployment's namespace ----------


def uses_kueue(fleet: Mapping[str, Any]) -> bool:
    """Whether observed capacity must read Kueue's queues: a cluster's default queue or a deployment's own is Kueue's."""
    queues = [c.get("queue") for c in fleet.get("clusters") or []] + [
        d.get("queue") for d in fleet.get("deployments") or []
    ]
    return any(isinstance(q, Mapping) and q.get("kind") == "kueue" for q in queues)


def deployment_queue_quotas(
    fleet: Mapping[str, Any],
    cluster: str,
    classes: Mapping[str, InferenceClass],
    by_kind: Mapping[str, Iterable[Mapping[str, Any]]],
) -> dict[str, dict[str, Any]]:
    """On ``cluster``: per deployment of ``fleet`` (fleet_info's) that names its own Kueue queue and may use the
    cluster, ``{queue, cluster_queue, free}``: its LocalQueue ``<namespace>/<name>``, the ClusterQueue that LocalQueue
    submits to, and what that ClusterQueue still admits per resource (nominalQuota minus usage). A deployment whose
    LocalQueue or ClusterQueue is not on the cluster gets ``free: {}`` and ``missing`` (Kueue admits nothing through a
    queue that does not exist: placement puts none of its replicas there)."""
    pools = [p for c in fleet.get("clusters") or [] if c.get("name") == cluster for p in c.get("pools") or []]
    resources: set[str] = set(GPU_RESOURCE_NAMES)
    for pool in pools:
        cls = classes.get(str(pool.get("class")))
        if cls is not None:
            resources.update(d.device_class_name for d in cls.devices if d.device_class_name)
    local_queues = list(by_kind.get("LocalQueue") or [])
    cluster_queues = {str((cq.get("metadata") or {}).get("name")): cq for cq in by_kind.get("ClusterQueue") or []}
    out: dict[str, dict[str, Any]] = {}
    for dep in fleet.get("deployments") or []:
        queue = dep.get("queue")
        if not isinstance(queue, Mapping) or queue.get("kind") != "kueue":
            continue
        if cluster not in (dep.get("candidate_clusters") or []):
            continue
        namespace = str(dep.get("namespace") or "default")
        name = f"{namespace}/{queue.get('name')}"
        target = local_queue_target(local_queues, namespace, str(queue.get("name")))
        entry: dict[str, Any] = {"queue": name, "cluster_queue": target}
        if target is None:
            entry.update(free={}, missing=f"Kueue LocalQueue {name} not found")
        elif target not in cluster_queues:
            entry.update(free={}, missing=f"ClusterQueue {target} of Kueue LocalQueue {name} not found")
        else:
            entry["free"] = clusterqueue_free(cluster_queues[target], resources)
            refused = kueue_dra_refusal(dep)
            if refused and set(entry["free"]) & (resources - set(GPU_RESOURCE_NAMES)):
                # The ClusterQueue counts a DeviceClass (a deviceClassMapping: Kueue's DRA accounting is on), and that
                # accounting marks every Workload of this deployment Inadmissible: nothing of it is admitted here.
                entry.update(free={}, refused=refused)
        out[str(dep.get("name"))] = entry
    return out


def kueue_dra_refusal(dep: Mapping[str, Any]) -> str | None:
    """What of ``dep``'s device requests (fleet_info's deployment) Kueue's DRA quota accounting refuses, or None.

    Kueue v0.17 (``pkg/dra/claims.go`` ``countDevicesPerClass``, behind its ``DynamicResourceAllocation`` gate) counts
    a ResourceClaimTemplate only when each request is ``exactly`` an ExactCount of a DeviceClass with no CEL
    selectors, and the claim has no constraints (and no config, no adminAccess); otherwise the Workload is marked
    Inadmissible (``CEL selectors are not supported``, ...) and never admitted. The local fleet's real Kueue shows it
    (tests/e2e/test_kueue_queue.py)."""
    for engine in dep.get("engines") or []:
        for member in engine.get("members") or []:
            selector = member.get("node_selector") or {}
            if selector.get("constraints"):
                return "device constraints (matchAttribute) are not supported"
            for req in selector.get("devices") or []:
                if req.get("first_available"):
                    return "firstAvailable device selection is not supported"
                if req.get("selectors"):
                    return "CEL selectors are not supported"
                if req.get("allocation_mode") == "All":
                    return "allocationMode All is not supported"
    return None


def _own_devices(
    records: Iterable[Any], deployment: str, cluster: str
) -> tuple[dict[tuple[str, int], set[str]], dict[str, int]]:
    """What ``deployment``'s replicas on ``cluster`` hold: the devices of those with allocations (``{(pool, node
    index): devices}``) and, per pool, the nodes those without allocations hold whole (records.MemberRecord: a member
    that takes every device of its node; read back from a cluster's objects, such a replica says no more)."""
    held: dict[tuple[str, int], set[str]] = {}
    whole: dict[str, int] = {}
    for rec in records:
        if rec.deployment != deployment or rec.cluster != cluster:
            continue
        for engine in rec.engines:
            for member in engine.members:
                if not member.allocations:
                    whole[member.pool] = whole.get(member.pool, 0) + member.nodes
                for alloc in member.allocations:
                    held.setdefault((member.pool, alloc.node), set()).update(alloc.devices)
    return held, whole


def quota_bounded_cluster(
    cluster: Mapping[str, Any],
    classes: Mapping[str, InferenceClass],
    quota: Mapping[str, Any],
    records: Iterable[Any],
    deployment: str,
) -> dict[str, Any]:
    """``cluster`` (placement's cluster dict, pools with ``nodes`` and observed ``held``) as ``deployment`` may use it
    through its own Kueue queue: of the free devices, the first ``free`` per resource stay free and every later one
    is held (as ``hold_beyond_quota``), so placement never puts a replica beyond the queue's nominalQuota minus usage.
    The deployment's kept replicas on the cluster are admitted already (their devices are in the ClusterQueue's usage
    and observed free, as claims of the fleet's own): their devices are never held and take none of ``free``, so each
    keeps its node and devices and only what the quota has left is added. Kept replicas that hold whole nodes (no
    allocations) keep as many wholly free nodes, the first ones, none of whose devices count against ``free``; the
    rest of the pool is bounded as any other."""
    free = dict(quota.get("free") or {})
    mine, whole = _own_devices(records, deployment, str(cluster.get("name")))
    pools = []
    for pool in cluster.get("pools") or []:
        name = str(pool.get("name"))
        reserve = whole.get(name, 0)  # the kept replicas' whole nodes: admitted, in the usage
        cls = classes.get(str(pool.get("class")))
        nodes = int(pool.get("nodes") or 0)
        held_in = list(pool.get("held") or [])
        if cls is None:
            pools.append(dict(pool))
            continue
        devices = [(x["name"], d.device_class_name) for d in cls.devices if d.claim == "DRA" for x in d.slice_devices()]
        held_out: list[Any] = []
        for i in range(nodes):
            entry = held_in[i] if i < len(held_in) else []
            if isinstance(entry, Mapping):
                taken, taints = list(entry.get("devices") or []), dict(entry.get("taints") or {})
            else:
                taken, taints = list(entry), {}
            own = mine.get((name, i), set()) if free else set()
            if reserve > 0 and not taken and not taints:
                reserve -= 1  # a node a kept replica holds whole: none of the quota, never held
                held_out.append([])
                continue
            for device, device_class in devices:
                resource = _device_resource(device_class, free) if free else None
                if device in taken or device in taints or device in own:
                    continue
                if resource is not None and free[resource] > 0:
                    free[resource] -= 1
                elif resource is not None or not free:
                    taken.append(device)  # beyond the quota (or no quota at all: a queue that does not exist)
            held_out.append({"devices": taken, "taints": taints} if taints else taken)
        pools.append({**pool, "nodes": nodes, "held": held_out} if any(held_out) else {**pool, "nodes": nodes})
    return {**cluster, "pools": pools}


def quota_note(quota: Mapping[str, Any]) -> str:
    """What explain says of a deployment's own Kueue queue on a cluster."""
    if quota.get("refused"):
        return (
            f"admitted through Kueue LocalQueue {quota['queue']}: ClusterQueue {quota['cluster_queue']} counts DRA "
            f"devices and Kueue's DRA accounting refuses this deployment's claims ({quota['refused']}: its Workloads "
            "stay Inadmissible), so it admits nothing here; request devices by DeviceClass and count only"
        )
    if quota.get("missing"):
        return f"admitted through Kueue LocalQueue {quota['queue']}: {quota['missing']}, so it admits nothing here"
    left = ", ".join(f"{n} {r}" for r, n in sorted((quota.get("free") or {}).items())) or "nothing it counts"
    return (
        f"admitted through Kueue LocalQueue {quota['queue']} (ClusterQueue {quota['cluster_queue']}: nominalQuota "
        f"minus usage leaves {left}); placement put no replica beyond it"
    )
