# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""EKS provisioning: the VPC subnets and managed nodegroups a fleet cluster needs, how a recorded nodegroup differs
from the desired one, capacity failures, and the kubeconfig of a cluster.

Pure functions over the fleet models (unit-tested), plus :func:`ensure_nodegroup`, which drives a boto3 EKS client
(passed in, so this file imports no AWS library) with bounded waits (``provider.poll``). :data:`PROVIDER` is EKS
behind ``provider.Provider``. community.aws's ``eks_nodegroup`` cannot be
used: its ``ami_type`` choices stop at the AL2 and Bottlerocket types and omit ``AL2023_x86_64_NVIDIA``
(community.aws issue #2314), the only EKS-optimised NVIDIA AMI for Kubernetes >= 1.33.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

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
    LABEL_CLUSTER,
    LABEL_SYSTEM_POOL,
    NODE_POOL_LABEL,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.classes import InferenceClass
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.clusters import Cluster
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import KubernetesVersion

GPU_TAINT: dict[str, str] = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
SYSTEM_NODEGROUP = provider_rules.SYSTEM_POOL
EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}
EFFECTS_BACK = {v: k for k, v in EFFECTS.items()}
# Fields a managed nodegroup cannot change in place (UpdateNodegroupConfig takes scaling, labels and taints only).
IMMUTABLE = ("instance_types", "ami_type", "disk_size", "capacity_type", "subnets", "launch_template")
#: The keys of a nodegroup spec each rung of a capacity ladder sets (eks_nodegroup's ``capacity_ladder`` items): the
#: capacity keys (``capacity_type``, ``capacity_reservation_id``) are a rung's own, the others default to the pool's.
LADDER_KEYS = ("capacity_rung", "capacity_type", "capacity_reservation_id", "instance_types", "subnets", "labels")
#: What a nodegroup's capacity type is as a rung of the capacity ladder (CAPACITY_BLOCK and an On-Demand Capacity
#: Reservation (ON_DEMAND with capacity_reservation_id) are reservations).
RUNG_OF_CAPACITY = {"CAPACITY_BLOCK": "reservation", "SPOT": "spot", "ON_DEMAND": "on-demand"}
ZONE_RE = re.compile(r"\b([a-z]{2}(?:-gov)?-[a-z]+-\d[a-z])\b")


@dataclass(frozen=True)
class NodegroupSpec:
    """One managed nodegroup as the collection wants it (snake_case; ``taints`` in Kubernetes spelling)."""

    name: str
    pool: str | None
    instance_types: list[str]
    ami_type: str
    disk_size: int
    capacity_type: str
    min_size: int
    max_size: int
    desired_size: int
    labels: dict[str, str]
    taints: list[dict[str, str]]
    subnets: list[str]
    capacity_reservation_id: str | None = None
    #: The capacity-rung kind of this spec (contract.CAPACITY_RUNGS; None: the system nodegroup).
    capacity_rung: str | None = None
    #: Every rung of the pool's capacity ladder (this spec is the first); empty: this spec is the one rung.
    ladder: tuple[NodegroupSpec, ...] = ()

    @property
    def rung_kind(self) -> str:
        if self.capacity_rung:
            return self.capacity_rung
        if self.capacity_reservation_id:
            return "reservation"
        return RUNG_OF_CAPACITY.get(self.capacity_type, "on-demand")

    def rung_fields(self) -> dict[str, Any]:
        return {
            "capacity_rung": self.capacity_rung,
            "capacity_type": self.capacity_type,
            "capacity_reservation_id": self.capacity_reservation_id,
            "instance_types": list(self.instance_types),
            "subnets": list(self.subnets),
            "labels": dict(self.labels),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pool": self.pool,
            "instance_types": list(self.instance_types),
            "ami_type": self.ami_type,
            "disk_size": self.disk_size,
            "capacity_type": self.capacity_type,
            "capacity_reservation_id": self.capacity_reservation_id,
            "capacity_rung": self.capacity_rung,
            "capacity_ladder": [r.rung_fields() for r in self.ladder] if len(self.ladder) > 1 else [],
            "scaling": {"min_size": self.min_size, "max_size": self.max_size, "desired_size": self.desired_size},
            "labels": dict(self.labels),
            "taints": [dict(t) for t in self.taints],
            "subnets": list(self.subnets),
        }

    def rungs(self) -> list[NodegroupSpec]:
        """The specs to try in order: the ladder, else this spec alone."""
        return list(self.ladder) or [self]


@dataclass(frozen=True)
class SystemPool:
    """The small untainted nodegroup for cluster add-ons, controllers and hydration Jobs."""

    instance_type: str = "m6i.large"
    ami_type: str = "AL2023_x86_64_STANDARD"
    disk_size: int = 50
    min_size: int = 1
    max_size: int = 3
    desired_size: int = 2


def default_zones(cluster: Cluster) -> list[str]:
    """The VPC's zones: ``gpufleet_eks.zones``, else every zone the pools name, else the region's ``a`` and ``b``."""
    if cluster.eks is None:
        raise GpufleetError(f"cluster {cluster.name}: gpufleet_eks is required")
    if cluster.eks.zones:
        return list(cluster.eks.zones)
    zones = sorted(
        {z for p in cluster.node_pools for z in [*p.zones, *(z for r in p.capacity_ladder for z in r.zones)]}
    )
    if len(zones) >= 2:
        return zones
    region = cluster.eks.region
    for zone in (f"{region}a", f"{region}b"):
        if len(zones) < 2 and zone not in zones:
            zones.append(zone)
    return sorted(zones)


def subnet_plan(vpc_cidr: str, zones: list[str], prefix: int = 20) -> list[dict[str, str]]:
    """One public subnet per zone, carved in order out of the VPC block: ``[{zone, cidr}]``."""
    try:
        network = ipaddress.ip_network(vpc_cidr)
    except ValueError as exc:
        raise GpufleetError(f"eks_cluster_vpc_cidr: {exc}") from None
    if prefix <= network.prefixlen:
        raise GpufleetError(f"eks_cluster_vpc_cidr: {vpc_cidr} is too small for /{prefix} subnets")
    blocks = network.subnets(new_prefix=prefix)
    out = []
    for zone in zones:
        try:
            out.append({"zone": zone, "cidr": str(next(blocks))})
        except StopIteration:
            raise GpufleetError(
                f"eks_cluster_vpc_cidr: {vpc_cidr} holds fewer than {len(zones)} /{prefix} subnets"
            ) from None
    return out


def nodegroup_specs(
    cluster: Cluster,
    classes: Mapping[str, InferenceClass],
    subnets_by_zone: Mapping[str, str],
    system: SystemPool | None = None,
) -> list[NodegroupSpec]:
    """The system nodegroup then one nodegroup per pool, from the pools and their classes' ``provisioning.eks``.

    Raises FleetValidationError naming the inventory variable of every problem."""
    if not subnets_by_zone:
        raise GpufleetError(f"cluster {cluster.name}: no subnets to place nodegroups in")
    host = f"hostvars[{cluster.name!r}]"
    errors: list[tuple[str, str]] = []
    all_subnets = [subnets_by_zone[z] for z in sorted(subnets_by_zone)]
    sysp = system or SystemPool()
    out = [
        NodegroupSpec(
            name=SYSTEM_NODEGROUP,
            pool=None,
            instance_types=[sysp.instance_type],
            ami_type=sysp.ami_type,
            disk_size=sysp.disk_size,
            capacity_type="ON_DEMAND",
            min_size=sysp.min_size,
            max_size=sysp.max_size,
            desired_size=sysp.desired_size,
            labels={LABEL_SYSTEM_POOL: "true"},
            taints=[],
            subnets=all_subnets,
        )
    ]
    # The provider's rules (provider_rules: the same checks and messages as fleet_info's), then the subnets.
    errors.extend(provider_rules.cluster_errors(cluster, classes))
    reported = {path for path, _reason in errors}
    for i, pool in enumerate(cluster.node_pools):
        path = f"{host}.gpufleet_node_pools[{i}]"
        if pool.name == SYSTEM_NODEGROUP:
            continue
        cls = classes.get(pool.class_)
        if cls is None:
            errors.append((f"{path}.class", f"unknown inference class {pool.class_!r}"))
            continue
        prov = cls.provisioning.eks
        if prov is None:  # provider_rules reports it
            continue
        lo = pool.min_node_count if pool.min_node_count is not None else pool.node_count
        hi = pool.max_node_count if pool.max_node_count is not None else max(pool.node_count, lo)
        labels = {**cls.labels, NODE_POOL_LABEL: pool.name}
        if "NVIDIA" in prov.ami_type:
            labels[GPU_PRESENT_LABEL] = "true"
        rungs: list[NodegroupSpec] = []
        # Each rung of the pool's capacity ladder; without one, the class's capacity is the one rung.
        for k, rung in enumerate(pool.capacity_ladder or [None]):
            zone_path = f"{path}.capacity_ladder[{k}]" if rung is not None and rung.zones else path
            zones = list(rung.zones) if rung is not None and rung.zones else list(pool.zones)
            subnets = []
            for zi, zone in enumerate(zones):
                if zone in subnets_by_zone:
                    subnets.append(subnets_by_zone[zone])
                elif f"{zone_path}.zones[{zi}]" not in reported:  # a zone of another region is reported as that
                    errors.append(
                        (
                            f"{zone_path}.zones[{zi}]",
                            f"no subnet in zone {zone!r} (subnets: {', '.join(sorted(subnets_by_zone))})",
                        )
                    )
            capacity_type, reservation = provider_rules.eks_rung_capacity(rung, cls)
            kind = rung.kind if rung is not None else RUNG_OF_CAPACITY[capacity_type]
            rungs.append(
                NodegroupSpec(
                    name=pool.name,
                    pool=pool.name,
                    instance_types=[(rung.instance_type if rung is not None else None) or prov.instance_type],
                    ami_type=prov.ami_type,
                    disk_size=prov.disk_size_gb,
                    capacity_type=capacity_type,
                    capacity_reservation_id=reservation,
                    capacity_rung=kind,
                    min_size=lo,
                    max_size=hi,
                    desired_size=pool.node_count,
                    labels={**labels, LABEL_CAPACITY_RUNG: kind},
                    taints=[dict(GPU_TAINT)],
                    subnets=subnets or all_subnets,
                )
            )
        out.append(replace(rungs[0], ladder=tuple(rungs) if len(rungs) > 1 else ()))
    if errors:
        raise FleetValidationError(errors)
    return out


def spec_from_dict(data: Mapping[str, Any]) -> NodegroupSpec:
    """The module's options back into a spec (the module's argument spec already checked the types)."""
    scaling = data.get("scaling") or {}
    taints = []
    for t in data.get("taints") or []:
        effect = t.get("effect", "NoSchedule")
        if effect not in EFFECTS:
            raise GpufleetError(f"taints: effect {effect!r} must be one of {', '.join(EFFECTS)}")
        taints.append({"key": t["key"], "value": t.get("value") or "", "effect": effect})
    lo, hi = int(scaling.get("min_size", 0)), int(scaling.get("max_size", 1))
    desired = int(scaling.get("desired_size", lo))
    if not 0 <= lo <= desired <= hi or hi < 1:
        raise GpufleetError(
            f"scaling: need 0 <= min_size ({lo}) <= desired_size ({desired}) <= max_size ({hi}), max >= 1"
        )
    _check_capacity(data.get("capacity_type") or "ON_DEMAND", data.get("capacity_reservation_id"))
    spec = NodegroupSpec(
        name=data["name"],
        pool=data.get("pool"),
        instance_types=list(data["instance_types"]),
        ami_type=data["ami_type"],
        disk_size=int(data["disk_size"]),
        capacity_type=data.get("capacity_type") or "ON_DEMAND",
        capacity_reservation_id=data.get("capacity_reservation_id"),
        min_size=lo,
        max_size=hi,
        desired_size=desired,
        labels={str(k): str(v) for k, v in (data.get("labels") or {}).items()},
        taints=taints,
        subnets=list(data["subnets"]),
        capacity_rung=data.get("capacity_rung"),
    )
    ladder = data.get("capacity_ladder") or []
    if not ladder:
        return spec
    rungs = []
    for item in ladder:
        own = {k: item[k] for k in ("instance_types", "subnets", "labels") if item.get(k) is not None}
        if "labels" in own:
            own["labels"] = {str(k): str(v) for k, v in own["labels"].items()}
        capacity_type = item.get("capacity_type") or "ON_DEMAND"
        _check_capacity(capacity_type, item.get("capacity_reservation_id"))
        rungs.append(
            replace(
                spec,
                **own,
                capacity_type=capacity_type,
                capacity_reservation_id=item.get("capacity_reservation_id"),
                capacity_rung=item.get("capacity_rung"),
            )
        )
    return replace(rungs[0], ladder=tuple(rungs))


def _check_capacity(capacity_type: str, reservation: str | None) -> None:
    if capacity_type == "CAPACITY_BLOCK" and not reservation:
        raise GpufleetError("capacity_reservation_id is required when capacity_type is CAPACITY_BLOCK")
    if capacity_type == "SPOT" and reservation:
        raise GpufleetError(
            "capacity_reservation_id is for CAPACITY_BLOCK (a Capacity Block) or ON_DEMAND (an On-Demand Capacity "
            "Reservation), not SPOT"
        )


# ---------------------------------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------------------------------


def launch_template_name(cluster_name: str, spec: NodegroupSpec) -> str:
    return f"gpufleet-{cluster_name}-{spec.name}"


def launch_template_data(spec: NodegroupSpec) -> dict[str, Any]:
    """EC2 launch template data for a nodegroup that launches into a capacity reservation: a Capacity Block
    (``capacity-block`` market) or an On-Demand Capacity Reservation (targeted); EKS takes the disk from the template
    then."""
    data: dict[str, Any] = {
        "BlockDeviceMappings": [
            {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": spec.disk_size, "VolumeType": "gp3"}},
        ],
    }
    if spec.capacity_type == "CAPACITY_BLOCK":
        data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    data["CapacityReservationSpecification"] = {
        "CapacityReservationTarget": {"CapacityReservationId": spec.capacity_reservation_id}
    }
    return data


def uses_launch_template(spec: NodegroupSpec) -> bool:
    """A nodegroup launching into a capacity reservation needs our launch template."""
    return bool(spec.capacity_reservation_id) and spec.capacity_type in ("CAPACITY_BLOCK", "ON_DEMAND")


def create_request(
    cluster_name: str,
    spec: NodegroupSpec,
    node_role: str,
    version: str | None,
    tags: Mapping[str, str],
    launch_template: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``CreateNodegroup`` keyword arguments."""
    req: dict[str, Any] = {
        "clusterName": cluster_name,
        "nodegroupName": spec.name,
        "scalingConfig": {"minSize": spec.min_size, "maxSize": spec.max_size, "desiredSize": spec.desired_size},
        "subnets": list(spec.subnets),
        "instanceTypes": list(spec.instance_types),
        "amiType": spec.ami_type,
        "nodeRole": node_role,
        "labels": dict(spec.labels),
        "taints": [{"key": t["key"], "value": t["value"], "effect": EFFECTS[t["effect"]]} for t in spec.taints],
        "capacityType": spec.capacity_type,
        "tags": dict(tags),
    }
    if version:
        req["version"] = version
    if launch_template is not None:
        req["launchTemplate"] = dict(launch_template)  # the disk is in the template: EKS rejects diskSize with one
    else:
        req["diskSize"] = spec.disk_size
    return req


def _recorded_taints(recorded: Mapping[str, Any]) -> list[dict[str, str]]:
    return sorted(
        (
            {"key": t["key"], "value": t.get("value") or "", "effect": EFFECTS_BACK.get(t["effect"], t["effect"])}
            for t in recorded.get("taints") or []
        ),
        key=lambda t: (t["key"], t["effect"]),
    )


@dataclass
class NodegroupPlan:
    """What reconciling a recorded nodegroup needs: nothing, an in-place config update, a version update, or a
    replacement (fields that cannot change in place)."""

    config: dict[str, Any] = field(default_factory=dict)
    version: str | None = None
    immutable: list[tuple[str, Any, Any]] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.config or self.version or self.immutable)


def plan_update(
    spec: NodegroupSpec, recorded: Mapping[str, Any], version: str | None, launch_template_id: str | None = None
) -> NodegroupPlan:
    """Compare a ``DescribeNodegroup`` record with the spec. Desired size is left to the autoscaler once created,
    unless it falls outside the new bounds."""
    plan = NodegroupPlan()
    rec_scaling = recorded.get("scalingConfig") or {}
    observed = {
        "instance_types": sorted(recorded.get("instanceTypes") or []),
        "ami_type": recorded.get("amiType"),
        "capacity_type": recorded.get("capacityType") or "ON_DEMAND",
        "subnets": sorted(recorded.get("subnets") or []),
    }
    wanted: dict[str, Any] = {
        "instance_types": sorted(spec.instance_types),
        "ami_type": spec.ami_type,
        "capacity_type": spec.capacity_type,
        "subnets": sorted(spec.subnets),
    }
    if launch_template_id is None:
        observed["disk_size"] = recorded.get("diskSize")
        wanted["disk_size"] = spec.disk_size
    else:
        observed["launch_template"] = (recorded.get("launchTemplate") or {}).get("id")
        wanted["launch_template"] = launch_template_id
    for key in wanted:
        if observed.get(key) != wanted[key]:
            plan.immutable.append((key, observed.get(key), wanted[key]))

    rmin, rmax, rdes = rec_scaling.get("minSize"), rec_scaling.get("maxSize"), rec_scaling.get("desiredSize")
    if (rmin, rmax) != (spec.min_size, spec.max_size) or rdes is None or not spec.min_size <= rdes <= spec.max_size:
        desired = spec.desired_size if rdes is None else min(max(rdes, spec.min_size), spec.max_size)
        plan.config["scalingConfig"] = {"minSize": spec.min_size, "maxSize": spec.max_size, "desiredSize": desired}
        plan.changes.append(
            f"scaling {rmin}..{rmax} (desired {rdes}) -> {spec.min_size}..{spec.max_size} (desired {desired})"
        )

    rec_labels = dict(recorded.get("labels") or {})
    add = {k: v for k, v in spec.labels.items() if rec_labels.get(k) != v}
    remove = sorted(k for k in rec_labels if k not in spec.labels)
    if add or remove:
        plan.config["labels"] = {k: v for k, v in (("addOrUpdateLabels", add), ("removeLabels", remove)) if v}
        plan.changes.append(f"labels +{sorted(add)} -{remove}")

    have = _recorded_taints(recorded)
    want = sorted(spec.taints, key=lambda t: (t["key"], t["effect"]))
    if have != want:
        to_k = [{"key": t["key"], "value": t["value"], "effect": EFFECTS[t["effect"]]} for t in want if t not in have]
        gone = [
            {"key": t["key"], "value": t["value"], "effect": EFFECTS[t["effect"]]}
            for t in have
            if (t["key"], t["effect"]) not in {(w["key"], w["effect"]) for w in want}
        ]
        plan.config["taints"] = {k: v for k, v in (("addOrUpdateTaints", to_k), ("removeTaints", gone)) if v}
        plan.changes.append(f"taints {have} -> {want}")

    rec_version = recorded.get("version")
    if version and rec_version and _minor(rec_version) != _minor(version):
        plan.version = version
        plan.changes.append(f"version {rec_version} -> {version}")
    return plan


def _minor(version: str) -> KubernetesVersion:
    """The minor release of a version EKS reports or is asked for (``1.35`` / ``1.35.2``)."""
    return minor_version(version)


# ---------------------------------------------------------------------------------------------------------------------
# Capacity failures
# ---------------------------------------------------------------------------------------------------------------------


class _Eks:
    """EKS behind :class:`provider.Provider`."""

    name = "eks"
    pool_noun = "nodegroup"
    compute = "EC2"
    capacity_advice = "choose another zone or instance type, a Capacity Block, or retry later"

    def zones_in(self, message: str) -> list[str]:
        return sorted(set(ZONE_RE.findall(message)))

    def classify(self, code: str, message: str, machine: str = "", capacity: str = "") -> Failure | None:
        """EC2's launch error code (``InsufficientInstanceCapacity``, ``VcpuLimitExceeded``...) or message."""
        return capacity_ladder.classify_ec2(code, message, machine, capacity or "ON_DEMAND")

    def kubeconfig(
        self, context: str, endpoint: str, ca_data: str, *, cluster: str = "", location: str = ""
    ) -> dict[str, Any]:
        """Tokens from ``aws eks get-token`` (what ``aws eks update-kubeconfig`` writes)."""
        return exec_kubeconfig(
            context,
            endpoint,
            ca_data,
            {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "aws",
                "args": ["eks", "get-token", "--cluster-name", cluster, "--region", location, "--output", "json"],
                "interactiveMode": "Never",
            },
        )


PROVIDER = _Eks()


def capacity_issue(recorded: Mapping[str, Any]) -> Failure | None:
    """The classified capacity failure (stockout or quota: capacity_ladder.classify_ec2) among a nodegroup's health
    issues; ``None`` when none is about capacity. EKS reports EC2's launch errors as ``AsgInstanceLaunchFailures``
    whose message carries EC2's code (``InsufficientInstanceCapacity``, ``VcpuLimitExceeded``...), or under the EC2
    code itself (``InstanceLimitExceeded``)."""
    types = recorded.get("instanceTypes") or [""]
    for issue in ((recorded.get("health") or {}).get("issues")) or []:
        failure = capacity_ladder.classify_ec2(
            issue.get("code", ""), issue.get("message", "") or "", types[0], recorded.get("capacityType") or "ON_DEMAND"
        )
        if failure is not None:
            return failure
    return None


def capacity_failure(recorded: Mapping[str, Any], zone_of_subnet: Mapping[str, str] | None = None) -> str | None:
    """A message naming the zone and instance type when the nodegroup's health says EC2 had no capacity (or the
    account's limit) for it; ``None`` otherwise (capacity_issue says which)."""
    issues = ((recorded.get("health") or {}).get("issues")) or []
    types = ", ".join(recorded.get("instanceTypes") or []) or "?"
    name = recorded.get("nodegroupName", "?")
    for issue in issues:
        code = issue.get("code", "")
        message = issue.get("message", "") or ""
        if capacity_ladder.classify_ec2(code, message) is not None:
            zones = PROVIDER.zones_in(message)
            if not zones and zone_of_subnet:
                zones = sorted({zone_of_subnet[s] for s in recorded.get("subnets") or [] if s in zone_of_subnet})
            return capacity_message(PROVIDER, name, types, zones, f"{code}: {message.strip()}")
    return None


# ---------------------------------------------------------------------------------------------------------------------
# Kubeconfig
# ---------------------------------------------------------------------------------------------------------------------


def kubeconfig(name: str, endpoint: str, ca_data: str, region: str, context: str | None = None) -> dict[str, Any]:
    """A kubeconfig for one EKS cluster whose user gets tokens from ``aws eks get-token`` (what ``aws eks
    update-kubeconfig`` writes), with the context named after the inventory host."""
    return PROVIDER.kubeconfig(context or name, endpoint, ca_data, cluster=name, location=region)


# ---------------------------------------------------------------------------------------------------------------------
# Driving the EKS API
# ---------------------------------------------------------------------------------------------------------------------


def _not_found(exc: Exception) -> bool:
    response = getattr(exc, "response", None) or {}
    return (response.get("Error") or {}).get("Code") in ("ResourceNotFoundException", "NotFoundException")


def describe_nodegroup(eks: Any, cluster_name: str, name: str) -> dict[str, Any] | None:
    try:
        return eks.describe_nodegroup(clusterName=cluster_name, nodegroupName=name)["nodegroup"]
    except Exception as exc:
        if _not_found(exc):
            return None
        raise


def wait_nodegroup(
    eks: Any,
    cluster_name: str,
    name: str,
    waiter: Waiter,
    *,
    gone: bool = False,
    zone_of_subnet: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """Poll until the nodegroup is ACTIVE (or gone); fail at once on a capacity failure or a *_FAILED status, and
    after ``waiter.timeout`` seconds at the latest."""
    status: Any = None

    def check() -> tuple[bool, dict[str, Any] | None]:
        nonlocal status
        recorded = describe_nodegroup(eks, cluster_name, name)
        if gone and recorded is None:
            return True, None
        if recorded is None:
            raise GpufleetError(f"nodegroup {name} of cluster {cluster_name} disappeared while waiting for it")
        status = recorded.get("status")
        if not gone:
            issue = capacity_issue(recorded)
            if issue is not None:
                raise CapacityError(issue, capacity_failure(recorded, zone_of_subnet) or issue.message)
            if status == "ACTIVE":
                return True, recorded
        if status in ("CREATE_FAILED", "DELETE_FAILED", "DEGRADED"):
            issues = "; ".join(
                f"{i.get('code')}: {i.get('message')}" for i in (recorded.get("health") or {}).get("issues") or []
            )
            raise GpufleetError(f"nodegroup {name} of cluster {cluster_name} is {status}: {issues or 'no details'}")
        return False, None

    return poll(
        waiter,
        check,
        lambda: (
            f"nodegroup {name} of cluster {cluster_name} is still {status} after {waiter.timeout:.0f}s "
            "(raise the wait timeout, or look at the nodegroup's health in the EKS console)"
        ),
    )


def ensure_launch_template(
    ec2: Any, name: str, data: dict[str, Any], tags: Mapping[str, str], check_mode: bool
) -> tuple[str | None, bool]:
    """The launch template of a Capacity Block nodegroup: ``(id, changed)``. A template whose latest version differs
    gets a new default version."""
    try:
        found = ec2.describe_launch_templates(LaunchTemplateNames=[name])["LaunchTemplates"]
    except Exception as exc:
        code = ((getattr(exc, "response", None) or {}).get("Error") or {}).get("Code", "")
        if "NotFound" not in code:
            raise
        found = []
    if not found:
        if check_mode:
            return None, True
        tag_spec = [{"ResourceType": "launch-template", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
        made = ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData=data, TagSpecifications=tag_spec)
        return made["LaunchTemplate"]["LaunchTemplateId"], True
    template = found[0]
    latest = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"], Versions=["$Latest"])
    current = (latest.get("LaunchTemplateVersions") or [{}])[0].get("LaunchTemplateData") or {}
    if _subset(data, current):
        return template["LaunchTemplateId"], False
    if not check_mode:
        ver = ec2.create_launch_template_version(LaunchTemplateId=template["LaunchTemplateId"], LaunchTemplateData=data)
        ec2.modify_launch_template(
            LaunchTemplateId=template["LaunchTemplateId"],
            DefaultVersion=str(ver["LaunchTemplateVersion"]["VersionNumber"]),
        )
    return template["LaunchTemplateId"], True


def _subset(want: Any, have: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_subset(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(want) == len(have)
            and all(_subset(a, b) for a, b in zip(want, have, strict=True))
        )
    return want == have


def _zones_of_subnets(ec2: Any, subnets: set[str]) -> dict[str, str]:
    """``{subnet: zone}`` for messages and the capacity report; ``{}`` when EC2 cannot say (nothing depends on it)."""
    if not subnets:
        return {}
    try:
        found = ec2.describe_subnets(SubnetIds=sorted(subnets)).get("Subnets") or []
    except Exception:  # only names zones in messages: a caller without ec2:DescribeSubnets loses nothing else
        return {}
    return {s["SubnetId"]: s["AvailabilityZone"] for s in found if "SubnetId" in s and "AvailabilityZone" in s}


def rung_view(spec: NodegroupSpec, index: int, total: int, zone_of_subnet: Mapping[str, str]) -> Rung:
    """A rung as the capacity ladder's walk and report see it."""
    zones = sorted({zone_of_subnet[s] for s in spec.subnets if s in zone_of_subnet}) or list(spec.subnets)
    detail = ""
    if spec.capacity_reservation_id:
        what = "Capacity Block" if spec.capacity_type == "CAPACITY_BLOCK" else "capacity reservation"
        detail = f"{what} {spec.capacity_reservation_id}"
    return Rung(index, total, spec.rung_kind, ", ".join(spec.instance_types), tuple(zones), detail)


def recorded_rung(rungs: list[NodegroupSpec], recorded: Mapping[str, Any]) -> int | None:
    """The rung of ``rungs`` a recorded nodegroup was created on (capacity_ladder.pick_recorded): the same capacity
    type, instance types, subnets and use of a launch template; ``None`` when no rung has them."""
    label = (recorded.get("labels") or {}).get(LABEL_CAPACITY_RUNG)
    have = (
        recorded.get("capacityType") or "ON_DEMAND",
        sorted(recorded.get("instanceTypes") or []),
        sorted(recorded.get("subnets") or []),
        bool((recorded.get("launchTemplate") or {}).get("id") or (recorded.get("launchTemplate") or {}).get("name")),
    )
    candidates = [
        (i, True, r.rung_kind == label)
        for i, r in enumerate(rungs)
        if (r.capacity_type, sorted(r.instance_types), sorted(r.subnets), uses_launch_template(r)) == have
    ]
    return capacity_ladder.pick_recorded(candidates)


def ensure_nodegroup(
    eks: Any,
    ec2: Any,
    cluster_name: str,
    spec: NodegroupSpec,
    *,
    state: str,
    node_role: str | None,
    version: str | None,
    tags: Mapping[str, str],
    waiter: Waiter | None,
    check_mode: bool,
    zone_of_subnet: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Create, update or delete one nodegroup; returns ``{changed, actions, nodegroup, capacity}`` (``nodegroup`` is
    the recorded one after the change, or the predicted request in check mode).

    ``spec.ladder`` (the capacity ladder): a new nodegroup is created on the first rung with capacity
    (capacity_ladder.walk: a stockout in its health deletes it and tries the next rung, a quota stops; the stockout is
    only seen when ``waiter`` waits); a recorded nodegroup stays on the rung it was created on; one whose creation
    failed for capacity (CREATE_FAILED) is deleted and the ladder walked again. ``capacity`` says which rung the
    nodegroup is on (``{}`` when absent or for the system nodegroup)."""
    recorded = describe_nodegroup(eks, cluster_name, spec.name)
    actions: list[str] = []
    lt_name = launch_template_name(cluster_name, spec)
    if state == "absent":
        # The launch template of a reservation pool goes too (the spec of a deletion carries no capacity type).
        if recorded is not None:
            actions.append("delete")
            if not check_mode:
                if recorded.get("status") != "DELETING":
                    eks.delete_nodegroup(clusterName=cluster_name, nodegroupName=spec.name)
                if waiter is not None:
                    wait_nodegroup(eks, cluster_name, spec.name, waiter, gone=True)
        if _launch_template_exists(ec2, lt_name):
            actions.append(f"delete launch template {lt_name}")
            if not check_mode:
                ec2.delete_launch_template(LaunchTemplateName=lt_name)
        return {"changed": bool(actions), "actions": actions, "nodegroup": {}, "capacity": {}}

    rungs = spec.rungs()
    if zone_of_subnet is None:
        zone_of_subnet = _zones_of_subnets(ec2, {s for r in rungs for s in r.subnets})
    views = [rung_view(r, i, len(rungs), zone_of_subnet) for i, r in enumerate(rungs)]

    def capacity(outcome: Outcome) -> dict[str, Any]:
        return outcome.to_dict() if spec.pool is not None else {}

    def template_of(rung: NodegroupSpec, check: bool) -> tuple[dict[str, Any] | None, str | None]:
        if not uses_launch_template(rung):
            return None, None
        template_id, lt_changed = ensure_launch_template(ec2, lt_name, launch_template_data(rung), tags, check)
        if lt_changed:
            actions.append(f"launch template {lt_name}")
        return ({"id": template_id} if template_id else {"name": lt_name}), template_id

    if recorded is not None and recorded.get("status") == "CREATE_FAILED":
        issue = capacity_issue(recorded)
        if issue is not None:
            # Its creation failed for capacity (an earlier run's last rung): delete it and walk the ladder again.
            actions.append(f"delete the nodegroup left in CREATE_FAILED by {issue.code}")
            if not check_mode:
                eks.delete_nodegroup(clusterName=cluster_name, nodegroupName=spec.name)
                if waiter is not None:
                    wait_nodegroup(eks, cluster_name, spec.name, waiter, gone=True)
            recorded = None

    if recorded is None:
        if not node_role:
            raise GpufleetError(f"nodegroup {spec.name}: node_role is required to create it")
        if check_mode:
            template, _tid = template_of(rungs[0], True)
            request = create_request(cluster_name, rungs[0], node_role, version, tags, template)
            return {
                "changed": True,
                "actions": [*actions, "create"],
                "nodegroup": request,
                "capacity": capacity(Outcome(spec.name, views[0], predicted=True)),
            }
        result: dict[str, Any] | None = None

        def attempt(view: Rung) -> None:
            nonlocal result
            rung = rungs[view.index]
            template, _tid = template_of(rung, False)
            eks.create_nodegroup(**create_request(cluster_name, rung, node_role or "", version, tags, template))
            if waiter is not None:
                result = wait_nodegroup(eks, cluster_name, rung.name, waiter, zone_of_subnet=zone_of_subnet)

        def clear(view: Rung) -> None:
            actions.append(f"{view.label} ({view.kind}) had no capacity: deleted the failed nodegroup")
            eks.delete_nodegroup(clusterName=cluster_name, nodegroupName=spec.name)
            if waiter is not None:
                wait_nodegroup(eks, cluster_name, spec.name, waiter, gone=True)
            if uses_launch_template(rungs[view.index]) and _launch_template_exists(ec2, lt_name):
                # The next reservation rung gets a template of its own, not a new version of this one.
                ec2.delete_launch_template(LaunchTemplateName=lt_name)

        outcome = capacity_ladder.walk(spec.name, f"nodegroup {spec.name}", views, attempt, clear)
        chosen = rungs[outcome.rung.index]
        if outcome.attempts and not uses_launch_template(chosen) and _launch_template_exists(ec2, lt_name):
            ec2.delete_launch_template(LaunchTemplateName=lt_name)  # a failed reservation rung's
            actions.append(f"delete launch template {lt_name}")
        actions.append(f"create ({outcome.rung.label}: {outcome.rung.kind})" if len(rungs) > 1 else "create")
        return {
            "changed": True,
            "actions": actions,
            "nodegroup": result or describe_nodegroup(eks, cluster_name, spec.name),
            "capacity": capacity(outcome),
        }

    if recorded.get("status") in ("CREATE_FAILED", "DEGRADED"):
        failure = capacity_failure(recorded, zone_of_subnet)
        if failure:
            raise GpufleetError(failure)
    index = recorded_rung(rungs, recorded)
    index = 0 if index is None else index
    chosen = rungs[index]
    _template, template_id = template_of(chosen, check_mode)
    plan = plan_update(chosen, recorded, version, template_id if uses_launch_template(chosen) else None)
    if plan.immutable:
        diffs = "; ".join(f"{k}: recorded {old!r}, wanted {new!r}" for k, old, new in plan.immutable)
        ladder_note = f" and matches none of the {len(rungs)} rungs of its capacity ladder" if len(rungs) > 1 else ""
        raise GpufleetError(
            f"nodegroup {spec.name} of cluster {cluster_name} cannot be changed in place ({diffs}){ladder_note}: "
            "remove the pool (state: absent) and create it again, or give the new pool another name"
        )
    actions.extend(plan.changes)
    found = capacity(Outcome(spec.name, views[index]))
    if check_mode or not plan.changed:
        return {"changed": bool(actions), "actions": actions, "nodegroup": recorded, "capacity": found}
    if plan.config:
        eks.update_nodegroup_config(clusterName=cluster_name, nodegroupName=spec.name, **plan.config)
        if waiter is not None:
            wait_nodegroup(eks, cluster_name, spec.name, waiter, zone_of_subnet=zone_of_subnet)
    if plan.version:
        eks.update_nodegroup_version(clusterName=cluster_name, nodegroupName=spec.name, version=plan.version)
        if waiter is not None:
            wait_nodegroup(eks, cluster_name, spec.name, waiter, zone_of_subnet=zone_of_subnet)
    return {
        "changed": True,
        "actions": actions,
        "nodegroup": describe_nodegroup(eks, cluster_name, spec.name),
        "capacity": found,
    }


def _launch_template_exists(ec2: Any, name: str) -> bool:
    try:
        return bool(ec2.describe_launch_templates(LaunchTemplateNames=[name])["LaunchTemplates"])
    except Exception as exc:
        code = ((getattr(exc, "response", None) or {}).get("Error") or {}).get("Code", "")
        if "NotFound" in code:
            return False
        raise


# ---------------------------------------------------------------------------------------------------------------------
# Add-ons (the EFS CSI driver)
# ---------------------------------------------------------------------------------------------------------------------


def describe_addon(eks: Any, cluster_name: str, name: str) -> dict[str, Any] | None:
    try:
        return eks.describe_addon(clusterName=cluster_name, addonName=name)["addon"]
    except Exception as exc:
        if _not_found(exc):
            return None
        raise


def addon_plan(recorded: Mapping[str, Any] | None, version: str | None, role_arn: str | None) -> dict[str, Any]:
    """``UpdateAddon`` arguments that bring a recorded add-on to the wanted version/role (``{}``: nothing to do)."""
    if recorded is None:
        return {}
    out: dict[str, Any] = {}
    if version and recorded.get("addonVersion") != version:
        out["addonVersion"] = version
    if role_arn and recorded.get("serviceAccountRoleArn") != role_arn:
        out["serviceAccountRoleArn"] = role_arn
    return out


def ensure_addon(
    eks: Any,
    cluster_name: str,
    name: str,
    *,
    state: str,
    version: str | None,
    role_arn: str | None,
    tags: Mapping[str, str],
    waiter: Waiter | None,
    check_mode: bool,
) -> dict[str, Any]:
    """Create, update or delete one EKS add-on; waits until it is ACTIVE (or gone), bounded by the waiter."""
    recorded = describe_addon(eks, cluster_name, name)
    if state == "absent":
        if recorded is None:
            return {"changed": False, "addon": {}}
        if not check_mode:
            if recorded.get("status") != "DELETING":
                eks.delete_addon(clusterName=cluster_name, addonName=name)
            if waiter is not None:
                _wait_addon(eks, cluster_name, name, waiter, gone=True)
        return {"changed": True, "addon": {}}
    if recorded is None:
        request: dict[str, Any] = {"clusterName": cluster_name, "addonName": name, "tags": dict(tags)}
        if version:
            request["addonVersion"] = version
        if role_arn:
            request["serviceAccountRoleArn"] = role_arn
        if check_mode:
            return {"changed": True, "addon": request}
        eks.create_addon(**request)
    else:
        update = addon_plan(recorded, version, role_arn)
        if not update or check_mode:
            return {"changed": bool(update), "addon": recorded}
        eks.update_addon(clusterName=cluster_name, addonName=name, resolveConflicts="OVERWRITE", **update)
    if waiter is not None:
        return {"changed": True, "addon": _wait_addon(eks, cluster_name, name, waiter) or {}}
    return {"changed": True, "addon": describe_addon(eks, cluster_name, name) or {}}


def _wait_addon(eks: Any, cluster_name: str, name: str, waiter: Waiter, gone: bool = False) -> dict[str, Any] | None:
    status: Any = None

    def check() -> tuple[bool, dict[str, Any] | None]:
        nonlocal status
        recorded = describe_addon(eks, cluster_name, name)
        if recorded is None and gone:
            return True, None
        status = (recorded or {}).get("status")
        if not gone and status == "ACTIVE":
            return True, recorded
        if status in ("CREATE_FAILED", "DELETE_FAILED", "DEGRADED", "UPDATE_FAILED"):
            issues = "; ".join(
                f"{i.get('code')}: {i.get('message')}" for i in (recorded or {}).get("health", {}).get("issues", [])
            )
            raise GpufleetError(f"add-on {name} of cluster {cluster_name} is {status}: {issues or 'no details'}")
        return False, None

    return poll(
        waiter, check, lambda: f"add-on {name} of cluster {cluster_name} is still {status} after {waiter.timeout:.0f}s"
    )


def list_nodegroups(eks: Any, cluster_name: str) -> list[dict[str, Any]]:
    """Every nodegroup of the cluster as ``DescribeNodegroup`` records it (``[]`` when the cluster does not exist)."""
    names: list[str] = []
    token: str | None = None
    try:
        eks.describe_cluster(name=cluster_name)  # a missing cluster: ResourceNotFoundException (moto: 500 on the list)
        while True:
            page = eks.list_nodegroups(clusterName=cluster_name, **({"nextToken": token} if token else {}))
            names.extend(page.get("nodegroups") or [])
            token = page.get("nextToken")
            if not token:
                break
    except Exception as exc:
        if _not_found(exc):
            return []
        raise
    out = [describe_nodegroup(eks, cluster_name, n) for n in names]
    return [ng for ng in out if ng is not None]


def stale_nodegroups(recorded: list[Mapping[str, Any]], wanted: list[str], cluster: str) -> list[str]:
    """Nodegroups this collection created for ``cluster`` (tag ``gpufleet.io/cluster``) that no pool wants any more,
    GPU pools first and the system nodegroup last (the order a teardown deletes them in)."""
    ours = [
        ng["nodegroupName"]
        for ng in recorded
        if (ng.get("tags") or {}).get(LABEL_CLUSTER) == cluster and ng["nodegroupName"] not in wanted
    ]
    return sorted(ours, key=lambda n: (n == SYSTEM_NODEGROUP, n))
