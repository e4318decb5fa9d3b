# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""GKE provisioning: the container API (v1, REST JSON spelling) request bodies of a fleet cluster and its node pools,
how a recorded object differs from the desired one, capacity failures, and a kubeconfig.

Pure functions over the fleet models, plus ``ensure_cluster`` / ``ensure_node_pool``, which drive a
``google.cloud.container_v1.ClusterManagerClient`` through a small adapter (:class:`ContainerApi`, built by
``gke_client.py``), so this file imports no Google library; :data:`PROVIDER` is GKE behind ``provider.Provider``.
google.cloud's ``gcp_container_node_pool`` cannot be used: it has no
``gpuDriverInstallationConfig`` (GKE installs its own NVIDIA driver and device plugin, which must be off for the NVIDIA
DRA driver; google.cloud issue #611), no Spot VMs and no reservation affinity; ``gcp_container_cluster`` cannot
enable the Filestore CSI driver.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ansible_collections.gpufleet.serving.plugins.module_utils import capacity_ladder, provider_rules
from ansible_collections.gpufleet.serving.plugins.module_utils.capacity_ladder import (
    CapacityError,
    Failure,
    Outcome,
    Rung,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.provider import (
    Waiter,
    capacity_message,
    exec_kubeconfig,
    minor_version,
    poll,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    LABEL_CAPACITY_RUNG,
    LABEL_SYSTEM_POOL,
    NODE_POOL_LABEL,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.classes import InferenceClass
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.clusters import Cluster
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import KubernetesVersion

# What GKE needs on GPU nodes for the NVIDIA DRA driver (GKE docs, "Prepare GKE infrastructure for DRA workloads"):
# no GKE-installed driver, no default device plugin, and the label the DRA driver's kubelet plugin selects.
DRA_LABELS: dict[str, str] = {"gke-no-default-nvidia-gpu-device-plugin": "true", "nvidia.com/gpu.present": "true"}
DRIVER_VERSIONS = {
    "DISABLED": "INSTALLATION_DISABLED",
    "INSTALLATION_DISABLED": "INSTALLATION_DISABLED",
    "DEFAULT": "DEFAULT",
    "LATEST": "LATEST",
}
SYSTEM_POOL = provider_rules.SYSTEM_POOL
#: The keys of a node pool spec each rung of a capacity ladder sets (gke_node_pool's ``capacity_ladder`` items).
#: The capacity keys (``spot``, ``reservation``, ``any_reservation``, ``flex_start``) are a rung's own; the others
#: default to the pool's.
LADDER_KEYS = (
    "capacity_rung",
    "machine_type",
    "spot",
    "reservation",
    "any_reservation",
    "flex_start",
    "locations",
    "initial_node_count",
    "autoscaling",
    "labels",
)
CAPACITY_KEYS = ("spot", "reservation", "any_reservation", "flex_start")
ZONE_RE = re.compile(r"zones/([a-z]+-[a-z]+\d+-[a-z])|\b([a-z]+-[a-z]+\d+-[a-z])\b")


# ---------------------------------------------------------------------------------------------------------------------
# Desired state
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SystemPool:
    machine_type: str = "e2-standard-4"
    disk_size_gb: int = 50
    min_node_count: int = 1
    max_node_count: int = 3


def parent(project: str, location: str) -> str:
    return f"projects/{project}/locations/{location}"


def node_pool_specs(
    cluster: Cluster, classes: Mapping[str, InferenceClass], system: SystemPool | None = None
) -> list[dict[str, Any]]:
    """The system pool then one GPU pool per fleet pool, in the option shape of ``gpufleet.serving.gke_node_pool``.

    Raises FleetValidationError naming the inventory field of every problem."""
    if cluster.gke is None:
        raise GpufleetError(f"cluster {cluster.name}: gpufleet_gke is required")
    host = f"hostvars[{cluster.name!r}]"
    zones = list(cluster.gke.zones)
    errors: list[tuple[str, str]] = []
    sysp = system or SystemPool()
    per_zone = max(1, len(zones) or 3)  # a regional cluster without zones spreads over three
    out: list[dict[str, Any]] = [
        {
            "name": SYSTEM_POOL,
            "machine_type": sysp.machine_type,
            "accelerator": None,
            "disk_size_gb": sysp.disk_size_gb,
            "disk_type": "pd-balanced",
            "image_type": "COS_CONTAINERD",
            "spot": False,
            "reservation": None,
            "any_reservation": False,
            "flex_start": False,
            "locations": zones,
            "initial_node_count": 1,
            "autoscaling": {
                "min_node_count": max(sysp.min_node_count, 0),
                "max_node_count": max(sysp.max_node_count, per_zone),
            },
            "labels": {LABEL_SYSTEM_POOL: "true"},
        }
    ]
    for i, pool in enumerate(cluster.node_pools):
        if pool.class_ not in classes:
            errors.append((f"{host}.gpufleet_node_pools[{i}].class", f"unknown inference class {pool.class_!r}"))
    errors.extend(provider_rules.cluster_errors(cluster, classes))
    if errors:
        raise FleetValidationError(errors)
    for pool in cluster.node_pools:
        cls = classes[pool.class_]
        prov = cls.provisioning.gke
        if prov is None:  # pragma: no cover - provider_rules reported it
            continue
        lo = pool.min_node_count if pool.min_node_count is not None else pool.node_count
        hi = pool.max_node_count if pool.max_node_count is not None else max(pool.node_count, lo)
        accel = None
        labels = {**cls.labels, NODE_POOL_LABEL: pool.name}
        if prov.accelerator is not None:
            accel = {
                "type": prov.accelerator.type,
                "count": prov.accelerator.count,
                "gpu_driver_version": DRIVER_VERSIONS[prov.accelerator.gpu_driver_version],
            }
            if accel["gpu_driver_version"] == "INSTALLATION_DISABLED":
                labels.update(DRA_LABELS)
        rungs: list[dict[str, Any]] = []
        # Each rung of the pool's capacity ladder; without one, the class's capacity is the one rung.
        ladder: list[Any] = list(pool.capacity_ladder) or [None]
        for rung in ladder:
            if rung is None:
                kind = capacity_ladder.implicit_kind(spot=prov.spot, reservation=bool(prov.reservation))
                rung_zones, machine, reservation = list(pool.zones), prov.machine_type, prov.reservation
            else:
                kind, rung_zones = rung.kind, list(rung.zones or pool.zones)
                machine = rung.machine_type or prov.machine_type
                reservation = (rung.reservation or prov.reservation) if kind == "reservation" else None
            flex = kind == "flex-start"
            n_zones = provider_rules.gke_zone_count(cluster, rung_zones)
            rungs.append(
                {
                    "capacity_rung": kind,
                    "machine_type": machine,
                    "spot": kind == "spot",
                    "reservation": reservation,
                    "any_reservation": kind == "reservation" and not reservation,
                    # A flex-start pool starts empty and scales from zero: its nodes come when capacity frees up.
                    "flex_start": flex,
                    "locations": rung_zones or zones,
                    "initial_node_count": 0 if flex else pool.node_count // n_zones,
                    "autoscaling": {"min_node_count": 0 if flex else lo, "max_node_count": hi},
                    "labels": {**labels, LABEL_CAPACITY_RUNG: kind},
                }
            )
        out.append(
            {
                "name": pool.name,
                "accelerator": accel,
                "disk_size_gb": prov.disk_size_gb,
                "disk_type": prov.disk_type,
                "image_type": prov.image_type,
                **rungs[0],
                "capacity_ladder": rungs if len(rungs) > 1 else [],
            }
        )
    return out


def ladder_specs(spec: Mapping[str, Any], ladder: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The full spec of each rung: a ladder item's capacity keys are its own (absent: off), its other keys default to
    the pool's (``spec``). No ladder: ``spec`` is the one rung."""
    if not ladder:
        return [dict(spec)]
    out = []
    for item in ladder:
        rung = {**spec, **{k: v for k, v in item.items() if k in LADDER_KEYS and v is not None}}
        for key in CAPACITY_KEYS:
            rung[key] = item.get(key) or (None if key == "reservation" else False)
        out.append(rung)
    return out


def rung_kind(spec: Mapping[str, Any]) -> str:
    """The capacity-rung kind of a spec: its ``capacity_rung``, else what its capacity keys say."""
    kind = spec.get("capacity_rung")
    if kind:
        return str(kind)
    return capacity_ladder.implicit_kind(
        spot=bool(spec.get("spot")),
        reservation=bool(spec.get("reservation") or spec.get("any_reservation")),
        flex_start=bool(spec.get("flex_start")),
    )


def _rung(spec: Mapping[str, Any], index: int, total: int) -> Rung:
    kind = rung_kind(spec)
    detail = ""
    if spec.get("reservation"):
        detail = f"reservation {spec['reservation']}"
    elif spec.get("any_reservation"):
        detail = "any matching reservation"
    return Rung(index, total, kind, str(spec.get("machine_type")), tuple(spec.get("locations") or ()), detail)


def cluster_body(
    name: str,
    *,
    project: str,
    version: str,
    release_channel: str,
    locations: list[str],
    network: str | None,
    subnetwork: str | None,
    system_pool: Mapping[str, Any],
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """The ``Cluster`` of ``CreateCluster``: regional, at ``version``, with the system pool, VPC-native, Workload
    Identity and the Filestore CSI driver (model caches are ReadWriteMany Filestore volumes)."""
    body: dict[str, Any] = {
        "name": name,
        "initialClusterVersion": version,
        "releaseChannel": {"channel": release_channel},
        "nodePools": [node_pool_body(system_pool)],
        "addonsConfig": {"gcpFilestoreCsiDriverConfig": {"enabled": True}},
        "ipAllocationPolicy": {"useIpAliases": True},
        "workloadIdentityConfig": {"workloadPool": f"{project}.svc.id.goog"},
        "resourceLabels": dict(labels),
    }
    if locations:
        body["locations"] = list(locations)
    if network:
        body["network"] = network
    if subnetwork:
        body["subnetwork"] = subnetwork
    return body


def node_pool_body(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The ``NodePool`` of ``CreateNodePool`` from the module's options."""
    config: dict[str, Any] = {
        "machineType": spec["machine_type"],
        "diskSizeGb": spec["disk_size_gb"],
        "diskType": spec["disk_type"],
        "imageType": spec["image_type"],
        "labels": dict(spec.get("labels") or {}),
        "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
    }
    accel = spec.get("accelerator")
    if accel:
        config["accelerators"] = [
            {
                "acceleratorType": accel["type"],
                "acceleratorCount": str(accel["count"]),
                "gpuDriverInstallationConfig": {"gpuDriverVersion": accel["gpu_driver_version"]},
            }
        ]
    if spec.get("spot"):
        config["spot"] = True
    if spec.get("reservation"):
        config["reservationAffinity"] = {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [spec["reservation"]],
        }
    elif spec.get("any_reservation"):
        config["reservationAffinity"] = {"consumeReservationType": "ANY_RESERVATION"}
    flex = bool(spec.get("flex_start"))
    if flex:
        # GKE's flex-start VMs (Dynamic Workload Scheduler): no reservation, any zone of the pool, no auto-repair.
        config["flexStart"] = True
        config["reservationAffinity"] = {"consumeReservationType": "NO_RESERVATION"}
    auto = spec["autoscaling"]
    body: dict[str, Any] = {
        "name": spec["name"],
        "initialNodeCount": spec["initial_node_count"],
        "config": config,
        "autoscaling": _autoscaling(auto, "ANY" if flex else "BALANCED"),
    }
    if flex:
        body["management"] = {"autoRepair": False, "autoUpgrade": True}
    if spec.get("locations"):
        body["locations"] = list(spec["locations"])
    return body


def _autoscaling(auto: Mapping[str, Any], location_policy: str = "BALANCED") -> dict[str, Any]:
    # total* bounds count nodes over all the pool's zones, as gpufleet_node_pools does.
    return {
        "enabled": True,
        "totalMinNodeCount": int(auto["min_node_count"]),
        "totalMaxNodeCount": int(auto["max_node_count"]),
        "locationPolicy": location_policy,
    }


# ---------------------------------------------------------------------------------------------------------------------
# Differences
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class PoolPlan:
    autoscaling: dict[str, Any] | None = None
    update: dict[str, Any] = field(default_factory=dict)
    immutable: list[tuple[str, Any, Any]] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.autoscaling or self.update or self.immutable)


def _accel_view(config: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (
            a.get("acceleratorType", ""),
            str(a.get("acceleratorCount", "")),
            (a.get("gpuDriverInstallationConfig") or {}).get("gpuDriverVersion", ""),
        )
        for a in config.get("accelerators") or []
    ]


def plan_node_pool(desired: Mapping[str, Any], recorded: Mapping[str, Any]) -> PoolPlan:
    """Compare a recorded ``NodePool`` (REST JSON) with the desired body."""
    plan = PoolPlan()
    want, have = desired.get("config") or {}, recorded.get("config") or {}
    for key in ("machineType", "diskSizeGb", "diskType", "imageType"):
        if str(want.get(key)) != str(have.get(key)):
            plan.immutable.append((f"config.{key}", have.get(key), want.get(key)))
    if _accel_view(want) != _accel_view(have):
        plan.immutable.append(("config.accelerators", _accel_view(have), _accel_view(want)))
    if bool(want.get("spot")) != bool(have.get("spot")):
        plan.immutable.append(("config.spot", bool(have.get("spot")), bool(want.get("spot"))))
    if bool(want.get("flexStart")) != bool(have.get("flexStart")):
        plan.immutable.append(("config.flexStart", bool(have.get("flexStart")), bool(want.get("flexStart"))))
    want_res = (want.get("reservationAffinity") or {}).get("values") or []
    have_res = (have.get("reservationAffinity") or {}).get("values") or []
    if want_res and want_res != have_res:
        plan.immutable.append(("config.reservationAffinity", have_res, want_res))
    want_type = (want.get("reservationAffinity") or {}).get("consumeReservationType")
    have_type = (have.get("reservationAffinity") or {}).get("consumeReservationType")
    if want_type and want_type != have_type and not want_res:
        plan.immutable.append(("config.reservationAffinity.consumeReservationType", have_type, want_type))

    auto_want, auto_have = desired.get("autoscaling") or {}, recorded.get("autoscaling") or {}
    keys = ("enabled", "totalMinNodeCount", "totalMaxNodeCount", "locationPolicy")
    if any(_norm(auto_want.get(k)) != _norm(auto_have.get(k)) for k in keys):
        plan.autoscaling = dict(auto_want)
        plan.changes.append(
            f"autoscaling {auto_have.get('totalMinNodeCount', 0)}..{auto_have.get('totalMaxNodeCount', 0)} -> "
            f"{auto_want['totalMinNodeCount']}..{auto_want['totalMaxNodeCount']}"
        )
    labels_want, labels_have = want.get("labels") or {}, have.get("labels") or {}
    if labels_want != labels_have:
        plan.update["labels"] = {"labels": dict(labels_want)}
        plan.changes.append(f"labels {sorted(labels_have.items())} -> {sorted(labels_want.items())}")
    if desired.get("locations") and sorted(desired["locations"]) != sorted(recorded.get("locations") or []):
        plan.update["locations"] = list(desired["locations"])
        plan.changes.append(f"locations {recorded.get('locations')} -> {desired['locations']}")
    if plan.update:
        # UpdateNodePool requires both; the recorded ones change nothing.
        plan.update["nodeVersion"] = recorded.get("version") or "-"
        plan.update["imageType"] = have.get("imageType") or want.get("imageType")
    return plan


def _norm(value: Any) -> Any:
    if value in (None, 0, "0", False, "", "LOCATION_POLICY_UNSPECIFIED"):
        return None
    return str(value)


def _minor(version: str) -> KubernetesVersion:
    """The minor release of a version GKE reports or is asked for (``1.34.1-gke.1431000`` -> 1.34)."""
    return minor_version(version)


def plan_cluster(desired: Mapping[str, Any], recorded: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``ClusterUpdate`` bodies (GKE takes one ``desired*`` field per update) that bring the recorded cluster to
    the desired one: a newer master minor, the release channel, the Filestore CSI driver."""
    updates: list[dict[str, Any]] = []
    have_v = recorded.get("currentMasterVersion") or recorded.get("initialClusterVersion") or ""
    want_v = desired["initialClusterVersion"]
    if have_v and _minor(have_v) < _minor(want_v):
        updates.append({"desiredMasterVersion": want_v})
    elif have_v and _minor(have_v) > _minor(want_v):
        raise GpufleetError(
            f"cluster {desired['name']} runs Kubernetes {have_v}, newer than the declared {want_v}: GKE cannot "
            "downgrade a control plane; declare the version it runs"
        )
    channel = (desired.get("releaseChannel") or {}).get("channel")
    if channel and (recorded.get("releaseChannel") or {}).get("channel", "UNSPECIFIED") != channel:
        updates.append({"desiredReleaseChannel": {"channel": channel}})
    fs = ((recorded.get("addonsConfig") or {}).get("gcpFilestoreCsiDriverConfig") or {}).get("enabled", False)
    if not fs:
        updates.append({"desiredAddonsConfig": {"gcpFilestoreCsiDriverConfig": {"enabled": True}}})
    return updates


# ---------------------------------------------------------------------------------------------------------------------
# Capacity failures
# ---------------------------------------------------------------------------------------------------------------------


class _Gke:
    """GKE behind :class:`provider.Provider`."""

    name = "gke"
    pool_noun = "node pool"
    compute = "Compute Engine"
    capacity_advice = "choose other zones or another machine type, use a reservation, or retry later"

    def zones_in(self, message: str) -> list[str]:
        return sorted({a or b for a, b in ZONE_RE.findall(message)})

    def classify(self, code: str, message: str, machine: str = "", capacity: str = "") -> Failure | None:
        """GKE reports a stockout or quota failure in the operation's message (the code is part of it)."""
        return capacity_ladder.classify_gke(f"{code}: {message}" if code else message)

    def kubeconfig(
        self, context: str, endpoint: str, ca_data: str, *, cluster: str = "", location: str = ""
    ) -> dict[str, Any]:
        """Credentials from ``gke-gcloud-auth-plugin`` (what ``gcloud container clusters get-credentials`` writes)."""
        server = endpoint if endpoint.startswith("https://") else f"https://{endpoint}"
        return exec_kubeconfig(
            context,
            server,
            ca_data,
            {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "gke-gcloud-auth-plugin",
                "provideClusterInfo": True,
                "interactiveMode": "IfAvailable",
            },
        )


PROVIDER = _Gke()


def capacity_failure(message: str, pool: str, machine_type: str, zones: list[str]) -> str | None:
    """A message naming zone(s) and machine type when GKE reports a stockout or quota failure; ``None`` otherwise
    (capacity_ladder.classify_gke says which)."""
    if PROVIDER.classify("", message) is None:
        return None
    return capacity_message(PROVIDER, pool, machine_type, PROVIDER.zones_in(message) or zones, message.strip())


# ---------------------------------------------------------------------------------------------------------------------
# Kubeconfig
# ---------------------------------------------------------------------------------------------------------------------


def kubeconfig(context: str, endpoint: str, ca_data: str) -> dict[str, Any]:
    """A kubeconfig for a GKE cluster authenticating with ``gke-gcloud-auth-plugin`` (what ``gcloud container clusters
    get-credentials`` writes)."""
    return PROVIDER.kubeconfig(context, endpoint, ca_data)


# ---------------------------------------------------------------------------------------------------------------------
# Driving the container API
# ---------------------------------------------------------------------------------------------------------------------


class ContainerApi(Protocol):
    """The calls the executors make, in REST JSON (the module adapts ClusterManagerClient to this)."""

    def get_cluster(self, name: str) -> dict[str, Any] | None: ...
    def create_cluster(self, parent: str, cluster: dict[str, Any]) -> dict[str, Any]: ...
    def update_cluster(self, name: str, update: dict[str, Any]) -> dict[str, Any]: ...
    def delete_cluster(self, name: str) -> dict[str, Any]: ...
    def get_node_pool(self, name: str) -> dict[str, Any] | None: ...
    def create_node_pool(self, parent: str, node_pool: dict[str, Any]) -> dict[str, Any]: ...
    def update_node_pool(self, name: str, update: dict[str, Any]) -> dict[str, Any]: ...
    def set_node_pool_autoscaling(self, name: str, autoscaling: dict[str, Any]) -> dict[str, Any]: ...
    def delete_node_pool(self, name: str) -> dict[str, Any]: ...
    def get_operation(self, name: str) -> dict[str, Any]: ...


def wait_operation(
    api: ContainerApi,
    location_parent: str,
    operation: Mapping[str, Any],
    waiter: Waiter | None,
    what: str,
    on_error: Callable[[str], str | None] | None = None,
) -> None:
    """Poll a long-running operation until DONE (bounded); its error fails, a capacity error with zone and machine.
    Without a waiter, the operation as given is checked once."""
    op = dict(operation)
    first = True

    def check() -> tuple[bool, None]:
        nonlocal op, first
        if not first:
            op = api.get_operation(f"{location_parent}/operations/{op['name'].rsplit('/', 1)[-1]}")
        first = False
        error = (op.get("error") or {}).get("message") or (op.get("statusMessage") if op.get("error") else "")
        if error:
            raise GpufleetError((on_error(error) if on_error else None) or f"{what} failed: {error}")
        return op.get("status") == "DONE", None

    if waiter is None:
        check()
        return
    timeout = waiter.timeout
    poll(
        waiter,
        check,
        lambda: f"{what} still {op.get('status', 'RUNNING')} after {timeout:.0f}s (operation {op.get('name')})",
    )


def ensure_cluster(
    api: ContainerApi,
    project: str,
    location: str,
    desired: dict[str, Any],
    *,
    state: str,
    waiter: Waiter | None,
    check_mode: bool,
) -> dict[str, Any]:
    loc = parent(project, location)
    name = f"{loc}/clusters/{desired['name']}"
    recorded = api.get_cluster(name)
    if state == "absent":
        if recorded is None:
            return {"changed": False, "actions": [], "cluster": {}}
        if not check_mode:
            op = api.delete_cluster(name)
            wait_operation(api, loc, op, waiter, f"deleting cluster {desired['name']}")
        return {"changed": True, "actions": ["delete"], "cluster": {}}
    if recorded is None:
        if check_mode:
            return {"changed": True, "actions": ["create"], "cluster": desired}
        op = api.create_cluster(loc, desired)
        pool = desired["nodePools"][0]
        wait_operation(
            api,
            loc,
            op,
            waiter,
            f"creating cluster {desired['name']}",
            lambda msg: capacity_failure(
                msg, pool["name"], pool["config"]["machineType"], desired.get("locations") or []
            ),
        )
        return {"changed": True, "actions": ["create"], "cluster": api.get_cluster(name) or {}}
    updates = plan_cluster(desired, recorded)
    actions = [f"update {next(iter(u))}" for u in updates]
    if check_mode or not updates:
        return {"changed": bool(updates), "actions": actions, "cluster": recorded}
    for update in updates:
        op = api.update_cluster(name, update)
        wait_operation(api, loc, op, waiter, f"updating cluster {desired['name']} ({next(iter(update))})")
    return {"changed": True, "actions": actions, "cluster": api.get_cluster(name) or {}}


def recorded_rung(rungs: Sequence[Mapping[str, Any]], recorded: Mapping[str, Any]) -> int | None:
    """The rung of ``rungs`` a recorded pool was created on (capacity_ladder.pick_recorded): its immutable fields
    match the rung's; ``None`` when no rung's do."""
    label = ((recorded.get("config") or {}).get("labels") or {}).get(LABEL_CAPACITY_RUNG)
    have_zones = sorted(recorded.get("locations") or [])
    candidates = []
    for i, rung in enumerate(rungs):
        if not plan_node_pool(node_pool_body(rung), recorded).immutable:
            candidates.append((i, sorted(rung.get("locations") or []) == have_zones, rung_kind(rung) == label))
    return capacity_ladder.pick_recorded(candidates)


def ensure_node_pool(
    api: ContainerApi,
    project: str,
    location: str,
    cluster: str,
    spec: Mapping[str, Any],
    *,
    state: str,
    waiter: Waiter | None,
    check_mode: bool,
    ladder: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Create, update or delete one node pool; returns ``{changed, actions, node_pool, capacity}``.

    ``ladder`` (the full spec of each rung, ``ladder_specs``): a new pool is created on the first rung with capacity
    (capacity_ladder.walk: a stockout deletes the failed pool and tries the next rung, a quota stops); a recorded
    pool stays on the rung it was created on; a pool whose creation failed for capacity (status ERROR) is deleted
    and the ladder walked again. ``capacity`` says which rung the pool is on (``{}`` when absent)."""
    loc = parent(project, location)
    cluster_name = f"{loc}/clusters/{cluster}"
    name = f"{cluster_name}/nodePools/{spec['name']}"
    what = f"node pool {spec['name']}"
    recorded = api.get_node_pool(name)
    if state == "absent":
        if recorded is None:
            return {"changed": False, "actions": [], "node_pool": {}, "capacity": {}}
        if not check_mode:
            op = api.delete_node_pool(name)
            wait_operation(api, loc, op, waiter, f"deleting {what}")
        return {"changed": True, "actions": ["delete"], "node_pool": {}, "capacity": {}}
    rungs = [dict(r) for r in ladder] if ladder else [dict(spec)]
    views = [_rung(r, i, len(rungs)) for i, r in enumerate(rungs)]
    actions: list[str] = []

    def stockout(rung: Mapping[str, Any]) -> Callable[[str], str | None]:
        def on_error(msg: str) -> str | None:
            text = capacity_failure(msg, spec["name"], rung["machine_type"], list(rung.get("locations") or []))
            failure = capacity_ladder.classify_gke(msg)
            if text and failure:
                raise CapacityError(failure, text)
            return None

        return on_error

    if recorded is not None and recorded.get("status") == "ERROR":
        failure = capacity_ladder.classify_gke(recorded.get("statusMessage", ""))
        if failure is not None:
            # Its creation failed for capacity (an earlier run's last rung): delete it and walk the ladder again.
            actions.append(f"delete the pool left in ERROR by {failure.code}")
            if not check_mode:
                wait_operation(api, loc, api.delete_node_pool(name), waiter, f"deleting {what} (in ERROR)")
            recorded = None
    if recorded is None:
        if check_mode:
            outcome = Outcome(spec["name"], views[0], predicted=True)
            return {
                "changed": True,
                "actions": [*actions, "create"],
                "node_pool": node_pool_body(rungs[0]),
                "capacity": outcome.to_dict(),
            }

        def attempt(view: Rung) -> None:
            rung = rungs[view.index]
            on_error = stockout(rung)
            try:
                op = api.create_node_pool(cluster_name, node_pool_body(rung))
            except GpufleetError:
                raise
            except Exception as exc:  # the API refused at once (a quota often is): classified by its message
                on_error(str(exc))
                raise
            wait_operation(api, loc, op, waiter, f"creating {what}", on_error)

        def clear(view: Rung) -> None:
            actions.append(f"{view.label} ({view.kind}) had no capacity: deleted the failed pool")
            if api.get_node_pool(name) is not None:
                wait_operation(api, loc, api.delete_node_pool(name), waiter, f"deleting {what} after a stockout")

        outcome = capacity_ladder.walk(spec["name"], what, views, attempt, clear)
        actions.append(f"create ({outcome.rung.label}: {outcome.rung.kind})" if len(rungs) > 1 else "create")
        return {
            "changed": True,
            "actions": actions,
            "node_pool": api.get_node_pool(name) or {},
            "capacity": outcome.to_dict(),
        }
    index = recorded_rung(rungs, recorded)
    if recorded.get("status") == "RUNNING_WITH_ERROR":  # running nodes: never deleted; a capacity error is reported
        rung = rungs[index if index is not None else 0]
        text = capacity_failure(recorded.get("statusMessage", ""), spec["name"], rung["machine_type"],
                                list(rung.get("locations") or []))  # fmt: skip
        if text:
            raise GpufleetError(text)
    chosen = rungs[index if index is not None else 0]
    body = node_pool_body(chosen)
    plan = plan_node_pool(body, recorded)
    if plan.immutable:
        diffs = "; ".join(f"{k}: recorded {old!r}, wanted {new!r}" for k, old, new in plan.immutable)
        ladder_note = f" and matches none of the {len(rungs)} rungs of its capacity ladder" if len(rungs) > 1 else ""
        raise GpufleetError(
            f"node pool {spec['name']} of cluster {cluster} cannot be changed in place ({diffs}){ladder_note}: remove "
            "the pool (state: absent) and create it again, or give the new pool another name"
        )
    capacity = Outcome(spec["name"], views[index if index is not None else 0]).to_dict()
    if check_mode or not plan.changed:
        return {"changed": plan.changed, "actions": plan.changes, "node_pool": recorded, "capacity": capacity}
    on_update_error = stockout(chosen)
    if plan.autoscaling is not None:
        op = api.set_node_pool_autoscaling(name, plan.autoscaling)
        wait_operation(api, loc, op, waiter, f"autoscaling of {what}", on_update_error)
    if plan.update:
        op = api.update_node_pool(name, plan.update)
        wait_operation(api, loc, op, waiter, f"updating {what}", on_update_error)
    return {"changed": True, "actions": plan.changes, "node_pool": api.get_node_pool(name) or {}, "capacity": capacity}


def node_count_check(spec: Mapping[str, Any]) -> None:
    """Reject option combinations the API would refuse, before any call."""
    auto = spec.get("autoscaling") or {}
    lo, hi = int(auto.get("min_node_count", 0)), int(auto.get("max_node_count", 1))
    if not 0 <= lo <= hi or hi < 1:
        raise GpufleetError(f"autoscaling: need 0 <= min_node_count ({lo}) <= max_node_count ({hi}), max >= 1")
    zones = len(spec.get("locations") or []) or 1
    if int(spec.get("initial_node_count", 0)) * zones > hi:
        raise GpufleetError(
            f"initial_node_count {spec['initial_node_count']} per zone x {zones} zones exceeds max_node_count {hi}"
        )
    capacity = [k for k in ("spot", "reservation", "any_reservation", "flex_start") if spec.get(k)]
    if len(capacity) > 1:
        raise GpufleetError(f"{' and '.join(capacity)} exclude each other: a node pool has one kind of capacity")
