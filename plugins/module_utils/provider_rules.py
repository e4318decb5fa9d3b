# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What GKE and EKS accept for a fleet pool and its class, checked once for both ``fleet_info`` (``validate.yml``,
``make demo``) and provisioning (``gke.node_pool_specs``, ``eks.nodegroup_specs``): the same ``(path, reason)``
pairs either way, so a pool ``validate.yml`` accepts is one provisioning creates.

* pools: the ``system`` name is the provider's own pool; GKE zones of the cluster's region and node counts that
  divide over the zones (GKE creates ``initialNodeCount`` nodes *per zone*); an autoscaling maximum of at least one;
  EKS zones of the cluster's region, and a Capacity Block pool in exactly one zone;
* classes: an EKS Capacity Block class names its reservation (``cr-...``); a GPU machine type of GKE comes with a
  fixed accelerator (type and count), an EKS GPU instance type with a fixed GPU model and architecture; a class that
  declares a ``productName`` for its ``gpu.nvidia.com`` devices names the GPU of its machine;
* capacity ladders (``gpufleet_node_pools[i].capacity_ladder``): rung kinds and fields the provider has, zones of
  the region, node counts that divide over a rung's zones, a reservation rung's reservation and single zone, and
  machine / instance types with the same GPUs as the class (the tables below); an ``existing`` cluster has none;
* Kubernetes versions: DRA ``resource.k8s.io/v1`` is GA from 1.34 on both providers (the models validate every
  declared version with ``k8s/version.py``'s ``KubernetesVersion`` and ``MIN_DRA_KUBERNETES``, with the field path,
  for every provider).

Pure functions over the fleet models; no provider API is called.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.classes import InferenceClass
from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.clusters import CapacityRung, Cluster, NodePool

#: The names the provisioning roles give the cluster's own untainted pool / nodegroup.
SYSTEM_POOL = "system"
#: The GPU driver settings of a GKE node pool that leave the driver to us (GKE installs none).
GKE_DRIVER_OFF = ("DISABLED", "INSTALLATION_DISABLED")
#: A GKE regional cluster without ``zones`` spreads its node pools over three of the region's zones.
GKE_DEFAULT_ZONE_COUNT = 3
#: The NVIDIA DRA driver's name (its devices carry the ``productName`` attribute the GPU tables below check).
NVIDIA_GPU_DRIVER = "gpu.nvidia.com"


@dataclass(frozen=True)
class Gpu:
    """The GPUs one machine comes with: the provider's accelerator name (GKE), the model as NVIDIA's driver spells it
    in ``productName`` (a word of it: ``A100`` matches ``NVIDIA A100-SXM4-40GB``), how many, and the CPU
    architecture (the EKS AMI must match it)."""

    model: str
    count: int
    accelerator: str = ""
    arch: str = "x86_64"


# --------------------------------------------------------------------------------------------------------------------
# GKE: accelerator-optimized machine types have a fixed GPU type and count.
# Sources: Compute Engine "GPU machine types" (https://cloud.google.com/compute/docs/gpus, the A4X, A4, A3, A2 and G2
# tables) and the accelerator names GKE takes (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus,
# "--accelerator type=..."). GKE still needs ``accelerators`` on these node pools: it is where the GPU driver
# installation is turned off for DRA (gpuDriverInstallationConfig).
# --------------------------------------------------------------------------------------------------------------------


def _gke(accelerator: str, model: str, counts: Mapping[str, int], arch: str = "x86_64") -> dict[str, Gpu]:
    return {machine: Gpu(model, count, accelerator, arch) for machine, count in counts.items()}


GKE_MACHINE_GPUS: dict[str, Gpu] = {
    # A2 Standard: NVIDIA A100 40GB
    **_gke(
        "nvidia-tesla-a100",
        "A100",
        {"a2-highgpu-1g": 1, "a2-highgpu-2g": 2, "a2-highgpu-4g": 4, "a2-highgpu-8g": 8, "a2-megagpu-16g": 16},
    ),
    # A2 Ultra: NVIDIA A100 80GB
    **_gke(
        "nvidia-a100-80gb", "A100", {"a2-ultragpu-1g": 1, "a2-ultragpu-2g": 2, "a2-ultragpu-4g": 4, "a2-ultragpu-8g": 8}
    ),
    # A3 High / Edge: NVIDIA H100 80GB; A3 Mega: H100 Mega 80GB; A3 Ultra: H200 141GB
    **_gke(
        "nvidia-h100-80gb",
        "H100",
        {"a3-highgpu-1g": 1, "a3-highgpu-2g": 2, "a3-highgpu-4g": 4, "a3-highgpu-8g": 8, "a3-edgegpu-8g": 8},
    ),
    **_gke("nvidia-h100-mega-80gb", "H100", {"a3-megagpu-8g": 8}),
    **_gke("nvidia-h200-141gb", "H200", {"a3-ultragpu-8g": 8}),
    # A4: NVIDIA B200; A4X: NVIDIA GB200 (Arm, Grace CPUs)
    **_gke("nvidia-b200", "B200", {"a4-highgpu-8g": 8}),
    **_gke("nvidia-gb200", "GB200", {"a4x-highgpu-4g": 4}, arch="arm64"),
    # G2: NVIDIA L4
    **_gke(
        "nvidia-l4",
        "L4",
        {
            "g2-standard-4": 1,
            "g2-standard-8": 1,
            "g2-standard-12": 1,
            "g2-standard-16": 1,
            "g2-standard-24": 2,
            "g2-standard-32": 1,
            "g2-standard-48": 4,
            "g2-standard-96": 8,
        },
    ),
}
#: Machine families whose every type is in the table: an unknown type of one of them is a typo.
GKE_GPU_FAMILY_RE = re.compile(r"^(a2|a3|a4|a4x|g2)-")

# --------------------------------------------------------------------------------------------------------------------
# EKS: GPU instance types. Source: Amazon EC2 "Accelerated computing instance type specifications"
# (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html: P4d/P4de, P5/P5e/P5en, P6-B200/P6-B300/P6e-GB200,
# G5, G6, G6e) and "Use P6e-GB200 UltraServers with Amazon EKS"
# (https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html: Grace (arm64) hosts, the
# AL2023 ARM NVIDIA AMI).
# --------------------------------------------------------------------------------------------------------------------


def _eks(family: str, model: str, counts: Mapping[str, int], arch: str = "x86_64") -> dict[str, Gpu]:
    return {f"{family}.{size}": Gpu(model, count, arch=arch) for size, count in counts.items()}


_G_SIZES = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 4, "16xlarge": 1, "24xlarge": 4,
            "48xlarge": 8}  # fmt: skip
EKS_INSTANCE_GPUS: dict[str, Gpu] = {
    **_eks("p4d", "A100", {"24xlarge": 8}),
    **_eks("p4de", "A100", {"24xlarge": 8}),
    **_eks("p5", "H100", {"4xlarge": 1, "48xlarge": 8}),
    **_eks("p5e", "H200", {"48xlarge": 8}),
    **_eks("p5en", "H200", {"48xlarge": 8}),
    **_eks("p6-b200", "B200", {"48xlarge": 8}),
    **_eks("p6-b300", "B300", {"48xlarge": 8}),
    **_eks("p6e-gb200", "GB200", {"36xlarge": 4}, arch="arm64"),
    **_eks("g5", "A10G", _G_SIZES),
    **_eks("g6", "L4", _G_SIZES),
    **_eks("g6e", "L40S", _G_SIZES),
}
EKS_GPU_FAMILIES = frozenset(t.split(".", 1)[0] for t in EKS_INSTANCE_GPUS)


def _host(cluster: Cluster) -> str:
    return f"hostvars[{cluster.name!r}]"


def class_path(name: str, *fields: str) -> str:
    """``gpufleet_inference_classes['name'].a.b`` (the spelling provisioning has always used)."""
    return f"gpufleet_inference_classes[{name!r}]" + "".join(f".{f}" for f in fields)


def _choices(table: Mapping[str, Gpu], prefix: str) -> str:
    """The table's types of one family, in the table's (ascending) order."""
    return ", ".join(t for t in table if t.startswith(prefix))


def _product_errors(name: str, klass: InferenceClass, gpu: Gpu, machine: str) -> list[tuple[str, str]]:
    """A declared ``productName`` of the class's NVIDIA GPUs that is not the machine's GPU: placement would match
    devices the nodes never publish."""
    errors = []
    word = re.compile(rf"(?<![A-Za-z0-9]){re.escape(gpu.model)}(?![A-Za-z0-9])", re.I)
    for di, device in enumerate(klass.devices):
        product = device.attributes.get("productName")
        if device.driver != NVIDIA_GPU_DRIVER or product is None or product.string is None:
            continue
        if not word.search(product.string):
            errors.append(
                (
                    class_path(name, f"devices[{di}]", "attributes", "productName"),
                    f"{product.string!r} is not the GPU of {machine} (NVIDIA {gpu.model}): the nodes would publish "
                    f"{gpu.model} devices",
                )
            )
    return errors


def gke_class_errors(name: str, klass: InferenceClass) -> list[tuple[str, str]]:
    """The GKE machine type and accelerator of a class: a GPU machine type comes with one accelerator type and count."""
    prov = klass.provisioning.gke
    if prov is None:
        return []
    errors: list[tuple[str, str]] = []
    gpu = GKE_MACHINE_GPUS.get(prov.machine_type)
    accel = prov.accelerator
    if gpu is None:
        family = GKE_GPU_FAMILY_RE.match(prov.machine_type)
        if family:
            errors.append(
                (
                    class_path(name, "provisioning", "gke", "machine_type"),
                    f"{prov.machine_type!r} is not a machine type of the {family.group(1).upper()} series "
                    f"(one of {_choices(GKE_MACHINE_GPUS, family.group(0))})",
                )
            )
        elif accel is not None:
            homes = [m for m, g in GKE_MACHINE_GPUS.items() if g.accelerator == accel.type]
            if homes:
                errors.append(
                    (
                        class_path(name, "provisioning", "gke", "accelerator", "type"),
                        f"{accel.type} GPUs come only with their accelerator-optimized machine types "
                        f"({', '.join(homes)}), not with {prov.machine_type!r}",
                    )
                )
        return errors
    if accel is None:
        errors.append(
            (
                class_path(name, "provisioning", "gke", "accelerator"),
                f"is required for {prov.machine_type}, which comes with {gpu.count} {gpu.accelerator} GPU(s): declare "
                f"accelerator: {{type: {gpu.accelerator}, count: {gpu.count}}} (it is also where GKE's own GPU driver "
                "installation is turned off for DRA)",
            )
        )
    else:
        if accel.type != gpu.accelerator:
            errors.append(
                (
                    class_path(name, "provisioning", "gke", "accelerator", "type"),
                    f"{prov.machine_type} comes with {gpu.accelerator} GPUs, not {accel.type}",
                )
            )
        elif accel.count != gpu.count:
            errors.append(
                (
                    class_path(name, "provisioning", "gke", "accelerator", "count"),
                    f"{prov.machine_type} comes with {gpu.count} {gpu.accelerator} GPU(s), not {accel.count}",
                )
            )
    errors.extend(_product_errors(name, klass, gpu, prov.machine_type))
    return errors


def eks_class_errors(name: str, klass: InferenceClass) -> list[tuple[str, str]]:
    """The EKS instance type, AMI and capacity of a class."""
    prov = klass.provisioning.eks
    if prov is None:
        return []
    errors: list[tuple[str, str]] = []
    if prov.capacity_type == "CAPACITY_BLOCK" and not prov.capacity_reservation_id:
        errors.append(
            (
                class_path(name, "provisioning", "eks", "capacity_reservation_id"),
                "is required when capacity_type is CAPACITY_BLOCK (cr-...)",
            )
        )
    gpu = EKS_INSTANCE_GPUS.get(prov.instance_type)
    family = prov.instance_type.split(".", 1)[0]
    if gpu is None:
        if family in EKS_GPU_FAMILIES:
            errors.append(
                (
                    class_path(name, "provisioning", "eks", "instance_type"),
                    f"{prov.instance_type!r} is not a {family} instance type "
                    f"(one of {_choices(EKS_INSTANCE_GPUS, family + '.')})",
                )
            )
        return errors
    ami = prov.ami_type
    if ami != "CUSTOM" and "NVIDIA" not in ami:
        errors.append(
            (
                class_path(name, "provisioning", "eks", "ami_type"),
                f"{ami} has no NVIDIA driver, which the {gpu.model} GPUs of {prov.instance_type} need (the DRA driver "
                f"uses the host's): use {'AL2023_ARM_64_NVIDIA' if gpu.arch == 'arm64' else 'AL2023_x86_64_NVIDIA'}",
            )
        )
    elif ami != "CUSTOM" and ("ARM_64" in ami or "arm64" in ami) != (gpu.arch == "arm64"):
        errors.append(
            (
                class_path(name, "provisioning", "eks", "ami_type"),
                f"{ami} does not run on {prov.instance_type}, an {gpu.arch} instance type: use "
                f"{'AL2023_ARM_64_NVIDIA' if gpu.arch == 'arm64' else 'AL2023_x86_64_NVIDIA'}",
            )
        )
    errors.extend(_product_errors(name, klass, gpu, prov.instance_type))
    return errors


def class_errors(classes: Mapping[str, InferenceClass], provider: str | None = None) -> list[tuple[str, str]]:
    """Every class's provider rules (``provider``: only that provider's block)."""
    errors: list[tuple[str, str]] = []
    for name in sorted(classes):
        if provider in (None, "gke"):
            errors.extend(gke_class_errors(name, classes[name]))
        if provider in (None, "eks"):
            errors.extend(eks_class_errors(name, classes[name]))
    return errors


def _bounds(pool_min: int | None, pool_max: int | None, count: int) -> tuple[int, int]:
    lo = pool_min if pool_min is not None else count
    hi = pool_max if pool_max is not None else max(count, lo)
    return lo, hi


def gke_zone_count(cluster: Cluster, pool_zones: list[str]) -> int:
    """The zones a GKE pool's nodes are created in: its own, else the cluster's, else GKE's default three."""
    if cluster.gke is None:
        return 0
    return len(pool_zones or cluster.gke.zones) or GKE_DEFAULT_ZONE_COUNT


def pool_errors(cluster: Cluster, classes: Mapping[str, InferenceClass]) -> list[tuple[str, str]]:
    """The provider rules of a GKE or EKS cluster's pools (nothing for ``existing``). Pools whose class is unknown are
    left to the caller (it reports them)."""
    if cluster.provider not in ("gke", "eks"):
        return [
            (
                f"{_host(cluster)}.gpufleet_node_pools[{i}].capacity_ladder",
                f"is for gke and eks pools: the nodes of a cluster with gpufleet_provider {cluster.provider} are "
                "provisioned by whoever runs it",
            )
            for i, pool in enumerate(cluster.node_pools)
            if pool.capacity_ladder
        ]
    provider = cluster.provider
    errors: list[tuple[str, str]] = []
    for i, pool in enumerate(cluster.node_pools):
        path = f"{_host(cluster)}.gpufleet_node_pools[{i}]"
        if pool.name == SYSTEM_POOL:
            what = "system pool" if provider == "gke" else "system nodegroup"
            errors.append((f"{path}.name", f"{SYSTEM_POOL!r} is the name of the cluster's own {what}"))
            continue
        klass = classes.get(pool.class_)
        if klass is None:
            continue
        if getattr(klass.provisioning, provider) is None:
            errors.append(
                (
                    f"{path}.class",
                    f"class {pool.class_!r} has no provisioning.{provider}, so a {provider} cluster cannot create "
                    "this pool",
                )
            )
            continue
        _lo, hi = _bounds(pool.min_node_count, pool.max_node_count, pool.node_count)
        if provider == "gke" and cluster.gke is not None:
            region = cluster.gke.region
            for zi, zone in enumerate(pool.zones):
                if not zone.startswith(region + "-"):
                    errors.append((f"{path}.zones[{zi}]", f"{zone!r} is not a zone of region {region!r}"))
            n_zones = gke_zone_count(cluster, list(pool.zones))
            if pool.node_count % n_zones:
                errors.append(
                    (
                        f"{path}.node_count",
                        f"GKE creates the same number of nodes in each of the pool's {n_zones} zones: "
                        f"{pool.node_count} is not a multiple of {n_zones}",
                    )
                )
            elif hi < 1:
                errors.append((f"{path}.max_node_count", "must be >= 1 for a GKE node pool"))
        elif provider == "eks" and cluster.eks is not None:
            region = cluster.eks.region
            for zi, zone in enumerate(pool.zones):
                if not re.fullmatch(rf"{re.escape(region)}[a-z]", zone):
                    errors.append((f"{path}.zones[{zi}]", f"{zone!r} is not an availability zone of region {region!r}"))
            prov = klass.provisioning.eks
            # With a ladder, its rungs say where a Capacity Block is used (ladder_errors).
            block = prov is not None and prov.capacity_type == "CAPACITY_BLOCK"
            if block and len(pool.zones) != 1 and not pool.capacity_ladder:
                errors.append(
                    (f"{path}.zones", "a Capacity Block lives in one availability zone: name exactly that zone")
                )
            if hi < 1:
                errors.append((f"{path}.max_node_count", "must be >= 1: an EKS nodegroup's maxSize is at least 1"))
        errors.extend(ladder_errors(cluster, pool, klass, path))
    return errors


# --------------------------------------------------------------------------------------------------------------------
# Capacity ladders (docs/provisioning.md, "Capacity ladder")
# --------------------------------------------------------------------------------------------------------------------

_GKE_ONLY = {
    "machine_type": "is a GKE field: an EKS rung changes the instance type with instance_type",
    "reservation": "is a GKE field: an EKS reservation rung names its reservation with capacity_reservation_id",
}
_EKS_ONLY = {
    "instance_type": "is an EKS field: a GKE rung changes the machine type with machine_type",
    "capacity_reservation_id": "is an EKS field: a GKE reservation rung names its reservation with reservation",
    "capacity_block": "is an EKS field: a GKE reservation is named with reservation",
}


def gke_same_gpus(machine: str, other: str) -> str | None:
    """Why ``other`` cannot stand in for the GKE machine type ``machine`` (``None``: it can): both come with the same
    accelerator type and count (the table), or, outside the GPU families, both are of the same series (the class's
    accelerator is attached to either)."""
    gpu, alt = GKE_MACHINE_GPUS.get(machine), GKE_MACHINE_GPUS.get(other)
    if gpu is not None:
        same = [m for m, g in GKE_MACHINE_GPUS.items() if g == gpu]
        if alt == gpu:
            return None
        have = f"comes with {alt.count} {alt.accelerator} GPU(s)" if alt is not None else "is not a GPU machine type"
        return (
            f"{other!r} {have}; the class's {machine} comes with {gpu.count} {gpu.accelerator}: a rung may change the "
            f"machine type only to one with the same GPUs ({', '.join(same)})"
        )
    if alt is not None or GKE_GPU_FAMILY_RE.match(other):
        return (
            f"{other!r} is an accelerator-optimized machine type; the class's {machine} is not: the GPUs would differ"
        )
    if other.split("-", 1)[0] != machine.split("-", 1)[0]:
        return (
            f"{other!r} is not of the {machine.split('-', 1)[0].upper()} series of the class's {machine}: the class's "
            "accelerator may not attach to it"
        )
    return None


def eks_same_gpus(instance: str, other: str) -> str | None:
    """Why ``other`` cannot stand in for the EKS instance type ``instance`` (``None``: it can): both are in the GPU
    table, of the same family, with the same GPU count (p4d and p4de differ in GPU memory, g5 and g6 in model)."""
    gpu, alt = EKS_INSTANCE_GPUS.get(instance), EKS_INSTANCE_GPUS.get(other)
    family = instance.split(".", 1)[0]
    if gpu is None:
        return (
            f"the class's {instance} is not in the GPU table (families {', '.join(sorted(EKS_GPU_FAMILIES))}), so no "
            "instance type can be shown to carry the same GPUs: leave instance_type out"
        )
    same = [t for t, g in EKS_INSTANCE_GPUS.items() if g == gpu and t.split(".", 1)[0] == family]
    if alt == gpu and other.split(".", 1)[0] == family:
        return None
    have = (
        f"has {alt.count} NVIDIA {alt.model} GPU(s)" if alt is not None else "is not a GPU instance type of the table"
    )
    return (
        f"{other!r} {have}; the class's {instance} has {gpu.count} NVIDIA {gpu.model}: a rung may change the instance "
        f"type only to one of the same family with the same GPUs ({', '.join(same)})"
    )


def eks_rung_capacity(rung: CapacityRung | None, klass: InferenceClass) -> tuple[str, str | None]:
    """``(capacity_type, capacity_reservation_id)`` of an EKS rung (``None``: the class's one rung)."""
    prov = klass.provisioning.eks
    if prov is None:  # pragma: no cover - pool_errors reported it
        return "ON_DEMAND", None
    if rung is None:
        return prov.capacity_type, prov.capacity_reservation_id
    if rung.kind == "reservation":
        block = rung.capacity_block if rung.capacity_block is not None else prov.capacity_type == "CAPACITY_BLOCK"
        return (
            "CAPACITY_BLOCK" if block else "ON_DEMAND"
        ), rung.capacity_reservation_id or prov.capacity_reservation_id
    return ("SPOT" if rung.kind == "spot" else "ON_DEMAND"), None


def ladder_errors(cluster: Cluster, pool: NodePool, klass: InferenceClass, path: str) -> list[tuple[str, str]]:
    """The rules of one GKE / EKS pool's capacity ladder (``path``: the pool's, ``hostvars['c'].gpufleet_node_pools[i]``)."""
    if not pool.capacity_ladder or cluster.provider not in ("gke", "eks"):
        return []
    provider = cluster.provider
    errors: list[tuple[str, str]] = []
    if pool.node_count == 0:
        errors.append(
            (
                f"{path}.capacity_ladder",
                "node_count is 0: a pool created without nodes launches none, so no rung can stock out and the first "
                "always wins; give the pool nodes or leave the ladder out",
            )
        )
    foreign = _EKS_ONLY if provider == "gke" else _GKE_ONLY
    for k, rung in enumerate(pool.capacity_ladder):
        rp = f"{path}.capacity_ladder[{k}]"
        for fld, reason in foreign.items():
            if getattr(rung, fld) is not None:
                errors.append((f"{rp}.{fld}", reason))
        if provider == "gke" and cluster.gke is not None:
            prov = klass.provisioning.gke
            region = cluster.gke.region
            for zi, zone in enumerate(rung.zones):
                if not zone.startswith(region + "-"):
                    errors.append((f"{rp}.zones[{zi}]", f"{zone!r} is not a zone of region {region!r}"))
            if rung.zones and rung.kind != "flex-start" and pool.node_count % len(rung.zones):
                errors.append(
                    (
                        f"{rp}.zones",
                        f"GKE creates the same number of nodes in each of the rung's {len(rung.zones)} zones: the "
                        f"pool's node_count {pool.node_count} is not a multiple of {len(rung.zones)}",
                    )
                )
            if prov is not None and rung.machine_type is not None:
                why = gke_same_gpus(prov.machine_type, rung.machine_type)
                if why:
                    errors.append((f"{rp}.machine_type", why))
            if rung.kind == "flex-start" and prov is not None and prov.accelerator is None:
                errors.append((f"{rp}.kind", "flex-start provisions GPUs (or TPUs): the class declares no accelerator"))
            if rung.kind == "flex-start" and k + 1 < len(pool.capacity_ladder):
                errors.append(
                    (
                        f"{path}.capacity_ladder[{k + 1}]",
                        f"is never tried: the flex-start rung {k} creates the pool without nodes (they come when "
                        "capacity frees up), so its creation never stocks out; make flex-start the last rung",
                    )
                )
        elif provider == "eks" and cluster.eks is not None:
            prov_e = klass.provisioning.eks
            region = cluster.eks.region
            if rung.kind == "flex-start":
                errors.append(
                    (
                        f"{rp}.kind",
                        "flex-start is GKE's Dynamic Workload Scheduler; EKS has no such capacity: reserve an EC2 "
                        "Capacity Block instead (kind: reservation, capacity_block: true)",
                    )
                )
                continue
            for zi, zone in enumerate(rung.zones):
                if not re.fullmatch(rf"{re.escape(region)}[a-z]", zone):
                    errors.append((f"{rp}.zones[{zi}]", f"{zone!r} is not an availability zone of region {region!r}"))
            if prov_e is not None and rung.instance_type is not None:
                why = eks_same_gpus(prov_e.instance_type, rung.instance_type)
                if why:
                    errors.append((f"{rp}.instance_type", why))
            if rung.kind == "reservation":
                capacity_type, reservation = eks_rung_capacity(rung, klass)
                if not reservation:
                    errors.append(
                        (
                            f"{rp}.capacity_reservation_id",
                            "is required for an EKS reservation rung (cr-...): the On-Demand Capacity Reservation or "
                            "Capacity Block to launch into (the class names none)",
                        )
                    )
                what = "a Capacity Block" if capacity_type == "CAPACITY_BLOCK" else "an On-Demand Capacity Reservation"
                if len(rung.zones or pool.zones) != 1:
                    errors.append(
                        (
                            f"{rp}.zones",
                            f"{what} lives in one availability zone: name exactly that zone (the rung's zones or the "
                            "pool's)",
                        )
                    )
    return errors


def cluster_errors(cluster: Cluster, classes: Mapping[str, InferenceClass]) -> list[tuple[str, str]]:
    """What provisioning ``cluster`` would refuse: its pools' rules, then the rules of the classes its pools use."""
    errors = pool_errors(cluster, classes)
    if cluster.provider in ("gke", "eks"):
        used = {p.class_: classes[p.class_] for p in cluster.node_pools if p.class_ in classes}
        errors.extend(class_errors(used, cluster.provider))
    return errors
