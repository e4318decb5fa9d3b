# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Clusters: node pools and their capacity ladders, GKE / EKS settings, Kueue queue references, and the placement
view of a cluster (``PlacementCluster``: pools with observed nodes).

Part of the fleet model; ``models.py`` is the façade other code imports.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Literal

from ansible_collections.gpufleet.serving.plugins.module_utils.dra.api import (
    DeviceTaint,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.classes import (
    Taint,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.common import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    _check_source_url,
    _no_duplicates,
    _Strict,
    check_dns_label,
    check_k8s_name,
    check_positive_quantity,
    field_validator,
    model_validator,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import supported as supported_kubernetes

#: At most this many rungs in a pool's capacity ladder (each is a create attempt of up to the wait timeout).
CAPACITY_LADDER_MAX = 8
_RUNG_RESERVATION_FIELDS = ("reservation", "capacity_reservation_id", "capacity_block")


class CapacityRung(_Strict):
    """One rung of a pool's capacity ladder (docs/provisioning.md, "Capacity ladder"): the kind of capacity, and
    optionally other zones or another machine type with the same GPUs as the pool's class. Which fields a provider
    takes (``machine_type`` and ``reservation`` on GKE; ``instance_type``, ``capacity_reservation_id`` and
    ``capacity_block`` on EKS), which zones and machine types are valid, is ``provider_rules.ladder_errors``'."""

    #: The kind of capacity (contract.CAPACITY_RUNGS): ``reservation`` (a GKE reservation, an EC2 On-Demand Capacity
    #: Reservation or Capacity Block), ``flex-start`` (GKE's Dynamic Workload Scheduler), ``spot``, ``on-demand``.
    kind: Literal["reservation", "flex-start", "spot", "on-demand"]
    #: The rung's zones instead of the pool's (default: the pool's).
    zones: list[str] = Field(default_factory=list)
    #: GKE: another machine type with the class's GPUs (same accelerator type and count).
    machine_type: str | None = Field(default=None, min_length=1, max_length=63)
    #: EKS: another instance type with the class's GPUs (same family, GPU model and count).
    instance_type: str | None = Field(default=None, min_length=1, max_length=63)
    #: GKE reservation rung: the specific reservation (``name`` or ``projects/P/reservations/NAME``); default the
    #: class's ``reservation``, else any matching reservation of the project.
    reservation: str | None = Field(default=None, pattern=r"^\S+$", max_length=256)
    #: EKS reservation rung: the On-Demand Capacity Reservation or Capacity Block (``cr-...``); default the class's.
    capacity_reservation_id: str | None = Field(default=None, pattern=r"^cr-[0-9a-f]{8,17}$")
    #: EKS reservation rung: ``capacity_reservation_id`` is a Capacity Block (default: the class's capacity_type is
    #: CAPACITY_BLOCK), else an On-Demand Capacity Reservation.
    capacity_block: StrictBool | None = None

    @model_validator(mode="after")
    def _reservation_fields(self) -> CapacityRung:
        if self.kind != "reservation":
            given = [f for f in _RUNG_RESERVATION_FIELDS if getattr(self, f) is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: only for kind reservation (this rung is {self.kind})")
        return self

    def key(self) -> tuple[Any, ...]:
        """What makes two rungs the same attempt."""
        return (self.kind, tuple(self.zones), self.machine_type, self.instance_type, self.reservation,
                self.capacity_reservation_id, self.capacity_block)  # fmt: skip


class NodePool(_Strict):
    name: str
    class_: str = Field(alias="class")
    node_count: StrictInt = Field(ge=0)
    min_node_count: StrictInt | None = Field(default=None, ge=0)
    max_node_count: StrictInt | None = Field(default=None, ge=0)
    zones: list[str] = Field(default_factory=list)
    #: GKE / EKS: the capacity to try, in order, when the pool is created (docs/provisioning.md, "Capacity ladder");
    #: empty: the one rung the class describes.
    capacity_ladder: list[CapacityRung] = Field(default_factory=list, max_length=CAPACITY_LADDER_MAX)

    _name = field_validator("name")(classmethod(lambda cls, v: check_dns_label(v)))

    @field_validator("capacity_ladder")
    @classmethod
    def _distinct_rungs(cls, v: list[CapacityRung]) -> list[CapacityRung]:
        seen: dict[tuple[Any, ...], int] = {}
        for i, rung in enumerate(v):
            if rung.key() in seen:
                raise ValueError(f"rung {i} repeats rung {seen[rung.key()]}: a second attempt at the same capacity")
            seen[rung.key()] = i
        return v

    @model_validator(mode="after")
    def _bounds(self) -> NodePool:
        lo = self.min_node_count if self.min_node_count is not None else 0
        hi = self.max_node_count if self.max_node_count is not None else None
        if hi is not None and lo > hi:
            raise ValueError(f"min_node_count ({lo}) is greater than max_node_count ({hi})")
        if self.node_count < lo or (hi is not None and self.node_count > hi):
            raise ValueError(f"node_count {self.node_count} is outside [min_node_count, max_node_count] = [{lo}, {hi}]")
        return self


def _check_k8s_version(value: str) -> str:
    """A declared ``kubernetes_version``, kept as written (k8s/version.py: the grammar and the 1.34 minimum)."""
    supported_kubernetes(value)
    return value


class GkeCluster(_Strict):
    project: str
    region: str
    zones: list[str] = Field(default_factory=list)
    kubernetes_version: str = "1.34"
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED", "UNSPECIFIED"] = "REGULAR"
    network: str | None = None
    subnetwork: str | None = None

    _version = field_validator("kubernetes_version")(classmethod(lambda cls, v: _check_k8s_version(v)))


class EksCluster(_Strict):
    region: str
    kubernetes_version: str = "1.36"
    role_arn: str | None = None
    node_role_arn: str | None = None
    subnets: list[str] = Field(default_factory=list)
    security_groups: list[str] = Field(default_factory=list)
    # Availability zones of the VPC the role creates when ``subnets`` is empty (default: the pools' zones, else the
    # region's ``a`` and ``b`` zones; EKS needs two).
    zones: list[str] = Field(default_factory=list)

    _version = field_validator("kubernetes_version")(classmethod(lambda cls, v: _check_k8s_version(v)))


class QueueRef(_Strict):
    """The in-cluster queue a deployment's workloads are admitted through (docs/autoscaling.md, "Queues"): a Kueue
    LocalQueue in the deployment's namespace, or a KAI Scheduler queue."""

    kind: Literal["kueue", "kai"]
    name: str

    _name = field_validator("name")(classmethod(lambda cls, v: check_k8s_name(v, "a queue name")))


class Cluster(_Strict):
    """A fleet cluster, built from an inventory host's ``gpufleet_*`` variables."""

    name: str
    provider: Literal["gke", "eks", "existing"]
    gke: GkeCluster | None = None
    eks: EksCluster | None = None
    kubeconfig: str | None = None
    context: str | None = None
    node_pools: list[NodePool] = Field(default_factory=list)
    taints: list[Taint] = Field(default_factory=list)
    cache_storage_class: str | None = None
    ready: StrictBool = True
    groups: list[str] = Field(default_factory=list)
    # The Kubernetes version an existing cluster is declared to run (gpufleet_kubernetes_version); GKE and EKS
    # clusters declare theirs in gpufleet_gke / gpufleet_eks.
    kubernetes_version: str | None = None
    # The queue deployments placed here are admitted through unless they name one (gpufleet_queue, docs/autoscaling.md).
    queue: QueueRef | None = None
    # The Prometheus server KEDA's triggers query here (gpufleet_prometheus_url, docs/autoscaling.md).
    prometheus_url: str | None = Field(default=None, max_length=2048)
    # Bytes per second a cache hydrates at here, as a quantity (gpufleet_hydration_throughput: 200Mi is 200 MiB/s):
    # the cold-start ETA of a replica whose cache is not hydrated yet when no hydration was measured (docs/caches.md).
    hydration_throughput: str | None = None

    _name = field_validator("name")(classmethod(lambda cls, v: check_dns_label(v)))
    _throughput = field_validator("hydration_throughput", mode="before")(
        classmethod(lambda cls, v: v if v is None else check_positive_quantity(v))
    )
    _prometheus = field_validator("prometheus_url")(
        classmethod(lambda cls, v: v if v is None else _check_source_url(v, "use a URL without credentials"))
    )

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        return None if v is None else _check_k8s_version(v)

    @property
    def declared_version(self) -> str | None:
        if self.gke is not None:
            return self.gke.kubernetes_version
        if self.eks is not None:
            return self.eks.kubernetes_version
        return self.kubernetes_version

    @field_validator("node_pools")
    @classmethod
    def _unique_pools(cls, v: list[NodePool]) -> list[NodePool]:
        _no_duplicates([p.name for p in v], "node pool name")
        return v

    @model_validator(mode="after")
    def _provider_block(self) -> Cluster:
        if self.provider == "gke" and self.gke is None:
            raise ValueError("gpufleet_gke is required when gpufleet_provider is gke")
        if self.provider == "eks" and self.eks is None:
            raise ValueError("gpufleet_eks is required when gpufleet_provider is eks")
        return self


# --------------------------------------------------------------------------------------------------------------------
# Clusters as placement sees them: ``fleet_info``'s ``clusters`` (design.md §4 ``clusters``); other keys are ignored
# --------------------------------------------------------------------------------------------------------------------


class ObservedNode(_Strict):
    """One observed node of a pool (design.md §11, §12): the devices other workloads' claims hold there (names, as the
    class names them) and the taints its ResourceSlices publish on devices beyond the class's (device name ->
    taints). Placement allocates around both, device by device."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    devices: list[str] = Field(default_factory=list)
    taints: dict[str, list[DeviceTaint]] = Field(default_factory=dict)


class PlacementPool(BaseModel):
    """A pool as placement counts it: the class of its nodes and how many there are."""

    # Read-back shapes (``zones``, ``min_node_count``...) are accepted and ignored.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    name: str = Field(min_length=1)
    class_name: str = Field(alias="class", min_length=1)
    nodes: int = Field(ge=0, strict=True)
    #: Observed capacity (design.md §11, §12): per node of ``nodes`` that other workloads' claims hold devices of, the
    #: names of those devices (``gpu-3``), or an :class:`ObservedNode` (held devices and observed device taints);
    #: placement allocates around them.
    held: list[list[str] | ObservedNode] = Field(default_factory=list)


class PlacementCluster(BaseModel):
    """A candidate cluster: its pools in order, its fleet-level taints and whether it takes new replicas.

    Only native constraints here (clusters are validated in bulk on every placement); ``placement.validate_clusters``
    checks pool names are unique and their classes known."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1)
    pools: list[PlacementPool] = Field(default_factory=list)
    taints: list[Taint] = Field(default_factory=list)
    ready: StrictBool = True
    # The Kubernetes version the cluster runs (declared); None: the newest this collection knows. Decides which CEL
    # library functions its selectors may use.
    kubernetes_version: str | None = None

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        return None if v is None else _check_k8s_version(v)

    @cached_property
    def classes(self) -> tuple[str, ...]:
        """The pools' classes, in pool order (the key placement memoises a cluster's options by)."""
        return tuple(p.class_name for p in self.pools)
