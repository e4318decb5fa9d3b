# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The hardware catalog: inference classes for common GPU node shapes, as their DRA drivers publish them.

An inference class names the catalog entry it starts from (``catalog: a3-highgpu-8g``); its own fields extend or
override the entry (:func:`expand`, called by ``models.InferenceClass`` before validation, so every place a class is
validated -- ``fleet_info``, placement, provisioning, the serving stack, the existing-cluster preflight and observed
capacity -- sees the expanded class and checks it against real ResourceSlices unchanged). docs/catalog.md lists the
entries and their sources.

What an entry declares, and why (every declared attribute and capacity must be published with the same value, or the
preflight and the drift report say the node is not what the class promises):

* ``gpu.nvidia.com`` GPUs (the NVIDIA DRA driver, ``cmd/gpu-kubelet-plugin/deviceinfo.go``): ``type`` (``gpu``),
  ``productName`` (NVML's name), ``architecture`` and ``brand`` (NVML enums as go-nvlib spells them),
  ``cudaComputeCapability`` (a version, ``9.0.0``) and the ``memory`` capacity: NVML's total memory as a binary
  quantity, the usable figure (an H100 80GB publishes ``81559Mi``, less than ``80Gi``). ``brand`` only where a
  published slice or ``nvidia-smi -q`` shows it. Not declared: ``driverVersion`` and ``cudaDriverVersion`` (the
  node image's, not the hardware's), ``uuid`` and the PCI bus ID (one per GPU), ``addressingMode`` (platform
  dependent), and ``index`` / ``minor`` (no longer published from driver 25.8). Declare the ones you select on in
  your class (``devices: [{name: gpu, attributes: {driverVersion: {version: 580.95.5}}}]``).
* ``resource.kubernetes.io/pcieRoot`` (the standard attribute both the NVIDIA driver and DraNet publish, never
  ``gpu.nvidia.com/pcieRoot``) per device, only where the values were read from a real node of the machine type.
* NICs: ``+dranet`` entries add the RDMA NICs DraNet (driver ``dra.net``) publishes with ``dra.net/rdma: true``;
  ``+efa`` entries add the EFA adapters as ``claim: Synthetic`` devices of ``vpc.amazonaws.com`` (the EFA device
  plugin advertises an extended resource, not DRA devices).
* NVLink: the driver publishes no NVLink attribute for an 8-GPU HGX / DGX node (its GPUs share one NVSwitch
  domain: the node is the domain); multi-node NVLink (GB200 NVL72) is ComputeDomains, not in this catalog.

Pure data and a merge; importable inside AnsiballZ and action plugins (no file is read).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NVIDIA_DRIVER = "gpu.nvidia.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
DRANET_DRIVER = "dra.net"
#: The DeviceClass name DraNet's own documentation creates for its devices (``device.driver == "dra.net"``).
DRANET_DEVICE_CLASS = "dranet"
EFA_DRIVER = "vpc.amazonaws.com"
#: Where the entries and their sources are listed.
DOCS = "docs/catalog.md"


@dataclass(frozen=True)
class Source:
    """Where a figure of an entry comes from: what it backs, and the document or code that shows it."""

    figure: str
    url: str


# --------------------------------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------------------------------

DRIVER_CODE = Source(
    "attribute names and types (type, productName, brand, architecture, cudaComputeCapability) and the memory "
    "capacity: NVML's total memory in bytes as a binary quantity (NVIDIA DRA driver 25.8.1, GpuInfo.GetDevice)",
    "https://github.com/NVIDIA/k8s-dra-driver-gpu/blob/v25.8.1/cmd/gpu-kubelet-plugin/deviceinfo.go",
)
NVLIB_STRINGS = Source(
    "architecture and brand strings (NVML enums as go-nvlib spells them: Ampere, Ada Lovelace, Hopper, Blackwell; "
    "Nvidia, NvidiaRTX)",
    "https://github.com/NVIDIA/go-nvlib/blob/main/pkg/nvlib/device/device.go",
)
DRIVER_ATTRIBUTES_DOC = Source(
    "the published attributes, resource.kubernetes.io/pcieRoot among them (and that index/minor are gone)",
    "https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/blob/main/site/content/docs/reference/"
    "resourceslice-attributes.md",
)
PCIE_ROOT_NAME = Source(
    "resource.kubernetes.io/pcieRoot, the standard attribute (StandardDeviceAttributePCIeRoot)",
    "https://github.com/kubernetes/kubernetes/blob/master/staging/src/k8s.io/dynamic-resource-allocation/"
    "deviceattribute/attribute.go",
)
GKE_MACHINES = Source(
    "machine type -> GPU model and count (the A2, A3, A4 and G2 tables)",
    "https://cloud.google.com/compute/docs/gpus",
)
GKE_ACCELERATORS = Source(
    "the accelerator names GKE takes (--accelerator type=...)",
    "https://cloud.google.com/kubernetes-engine/docs/how-to/gpus",
)
EKS_INSTANCES = Source(
    "instance type -> GPU model and count (P4d, P5, P5e, P6-B200, G5, G6, G6e)",
    "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html",
)
P5_SLICES = Source(
    "p5.48xlarge ResourceSlices from three nodes (NVIDIA/aicr conformance evidence): productName, architecture, "
    "brand, cudaComputeCapability, memory 81559Mi and the per-GPU pcieRoot pci0000:44, :55, :66, :77, :88, :99, :aa, "
    ":bb (gpu-0 .. gpu-7, the same on every node)",
    "https://github.com/resker/aicr/blob/1eeda31a2d184aa7c607d7164c65b146402e4719/docs/conformance/cncf/evidence/"
    "secure-accelerator-access.md",
)
H200_SLICE = Source(
    "an a3-ultragpu-8g ResourceSlice: productName NVIDIA H200, Hopper, brand Nvidia, 9.0.0, memory 143771Mi; and the "
    "DraNet RDMA NICs (gpu0rdma0 ..., dra.net/rdma: true) beside the GPUs",
    "https://github.com/ai-on-gke/website/blob/aa89a12755c846f00f97dbc5ac16e3297d31867f/site/content/docs/tutorials/"
    "dynamic-resource-allocation/gpu-nic-cpu-alignment/index.md",
)
A100_80_SLICE = Source(
    "an 80GB A100's ResourceSlice: Ampere, brand Nvidia, 8.0.0, memory 80Gi (81920Mi)",
    "https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/issues/719",
)
A100_80_SMI = Source(
    "nvidia-smi -q of an A100-SXM4-80GB: Product Brand NVIDIA",
    "https://github.com/NVIDIA/CUDALibrarySamples/issues/104",
)
A100_40_SMI = Source(
    "nvidia-smi of EC2 A100-SXM4-40GB GPUs: 40960MiB",
    "https://github.com/bottlerocket-os/bottlerocket-core-kit/pull/834",
)
B200_SMI = Source(
    "nvidia-smi of 8x NVIDIA B200: 183359MiB each",
    "https://github.com/NVIDIA/TensorRT-LLM/issues/10278",
)
L4_SMI = Source(
    "nvidia-smi of a GCE g2 NVIDIA L4: 23034MiB",
    "https://github.com/GoogleCloudPlatform/pubsec-declarative-toolkit/issues/655",
)
A10G_SMI = Source(
    "nvidia-smi of an EC2 NVIDIA A10G: 23028MiB",
    "https://github.com/NVIDIA/DCGM/issues/232",
)
A10G_BRAND = Source(
    "nvidia-smi -q of an EC2 NVIDIA A10G: Product Brand NVIDIA RTX (NvidiaRTX), Ampere",
    "https://github.com/NVIDIA/k8s-device-plugin/issues/344",
)
L40S_SMI = Source(
    "nvidia-smi of a g6e.xlarge NVIDIA L40S: 46068 MiB",
    "https://github.com/akash-network/provider-configs/pull/95",
)
L40S_BRAND = Source(
    "nvidia-smi -q of an NVIDIA L40S: Product Brand NVIDIA, Ada Lovelace",
    "https://github.com/isaac-sim/IsaacSim/issues/228",
)
DRANET_CODE = Source(
    "DraNet publishes every NIC with dra.net/rdma (bool) and the standard pcieRoot",
    "https://github.com/google/dranet/blob/7b7661a153a6815194e957bd33147b538675e56e/pkg/inventory/db.go",
)
DRANET_A4 = Source(
    "an a4-highgpu-8g node's 8 RDMA NICs as DraNet publishes them (gpu0rdma0 .. gpu7rdma0, dra.net/rdma)",
    "https://github.com/google/dranet/blob/7b7661a153a6815194e957bd33147b538675e56e/site/content/docs/user/gke-rdma.md",
)
EFA_P5 = Source(
    "P5 and P5e instances: 32 EFA devices (EFA configuration for P5 and P5e instances)",
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html",
)
DGX_A100 = Source(
    "DGX A100: 8x A100-SXM4 (40GB in the 320GB system, 80GB in the 640GB system)",
    "https://docs.nvidia.com/dgx/dgxa100-user-guide/introduction-to-dgxa100.html",
)
DGX_H100 = Source(
    "DGX H100: 8x H100 80GB SXM5",
    "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html",
)
DGX_B200 = Source(
    "DGX B200: 8x B200",
    "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html",
)


# --------------------------------------------------------------------------------------------------------------------
# GPUs: what the NVIDIA DRA driver publishes for one GPU of each model
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """One GPU model as the NVIDIA DRA driver publishes it (``brand`` None: not declared, no source shows it)."""

    product: str
    architecture: str
    compute_capability: str
    memory: str
    brand: str | None
    sources: tuple[Source, ...]

    def attributes(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {
            "type": {"string": "gpu"},
            "productName": {"string": self.product},
            "architecture": {"string": self.architecture},
        }
        if self.brand is not None:
            out["brand"] = {"string": self.brand}
        out["cudaComputeCapability"] = {"version": self.compute_capability}
        return out


A100_40GB = Gpu("NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", "40960Mi", "Nvidia", (A100_40_SMI, A100_80_SMI))
A100_80GB = Gpu("NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0", "81920Mi", "Nvidia", (A100_80_SLICE, A100_80_SMI))
H100_80GB = Gpu("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi", "Nvidia", (P5_SLICES,))
H200 = Gpu("NVIDIA H200", "Hopper", "9.0.0", "143771Mi", "Nvidia", (H200_SLICE,))
B200 = Gpu("NVIDIA B200", "Blackwell", "10.0.0", "183359Mi", None, (B200_SMI,))
L4 = Gpu("NVIDIA L4", "Ada Lovelace", "8.9.0", "23034Mi", None, (L4_SMI,))
A10G = Gpu("NVIDIA A10G", "Ampere", "8.6.0", "23028Mi", "NvidiaRTX", (A10G_SMI, A10G_BRAND))
L40S = Gpu("NVIDIA L40S", "Ada Lovelace", "8.9.0", "46068Mi", "Nvidia", (L40S_SMI, L40S_BRAND))

#: The per-GPU PCIe roots of a p5.48xlarge (gpu-0 .. gpu-7), read from three nodes' ResourceSlices (P5_SLICES).
P5_PCIE_ROOTS = ("pci0000:44", "pci0000:55", "pci0000:66", "pci0000:77",
                 "pci0000:88", "pci0000:99", "pci0000:aa", "pci0000:bb")  # fmt: skip


def gpu_device(gpu: Gpu, count: int, pcie_roots: Sequence[str] = ()) -> dict[str, Any]:
    """The ``gpu`` device entry: ``count`` GPUs of the model, each with its own PCIe root when they are known."""
    device: dict[str, Any] = {
        "name": "gpu",
        "claim": "DRA",
        "driver": NVIDIA_DRIVER,
        "device_class_name": NVIDIA_DRIVER,
        "count": count,
        "attributes": gpu.attributes(),
        "capacity": {"memory": {"value": gpu.memory}},
    }
    if pcie_roots:
        if len(pcie_roots) != count:  # pragma: no cover - a mistake in the table below
            raise AssertionError(f"{len(pcie_roots)} PCIe roots for {count} GPUs")
        device["instances"] = [{"attributes": {PCIE_ROOT: {"string": root}}} for root in pcie_roots]
    return device


def dranet_rdma_nics(count: int) -> dict[str, Any]:
    """``count`` RDMA NICs as DraNet publishes them (only what every one of them publishes: ``dra.net/rdma``)."""
    return {
        "name": "nic",
        "claim": "DRA",
        "driver": DRANET_DRIVER,
        "device_class_name": DRANET_DEVICE_CLASS,
        "count": count,
        "attributes": {"rdma": {"bool": True}},
    }


def efa_adapters(count: int) -> dict[str, Any]:
    """``count`` EFA adapters: ``claim: Synthetic`` devices of ``vpc.amazonaws.com`` (the EFA device plugin advertises
    the extended resource ``vpc.amazonaws.com/efa``; pods request it in their template)."""
    return {"name": "efa", "claim": "Synthetic", "driver": EFA_DRIVER, "count": count}


# --------------------------------------------------------------------------------------------------------------------
# Entries
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One catalog entry: an inference class (``models.InferenceClass`` data) and the sources of its figures."""

    name: str
    #: ``gke``, ``eks`` or ``dgx`` (no provisioning: an existing cluster's nodes).
    platform: str
    klass: Mapping[str, Any]
    sources: tuple[Source, ...]

    def data(self) -> dict[str, Any]:
        """The class, a fresh copy (callers merge into it)."""
        return copy.deepcopy(dict(self.klass))


def _unique(sources: Sequence[Source]) -> tuple[Source, ...]:
    return tuple(dict.fromkeys(sources))


def _gke(machine: str, accelerator: str, gpu: Gpu, count: int, nics: int = 0, extra: Sequence[Source] = ()) -> Entry:
    devices = [gpu_device(gpu, count)]
    description = f"GKE {machine}: {count}x {gpu.product}"
    if nics:
        devices.append(dranet_rdma_nics(nics))
        description += f", {nics} RDMA NICs (DraNet)"
    name = f"{machine}+dranet" if nics else machine
    klass = {
        "description": description,
        "provisioning": {"gke": {"machine_type": machine, "accelerator": {"type": accelerator, "count": count}}},
        "devices": devices,
    }
    base = (DRIVER_CODE, NVLIB_STRINGS, *gpu.sources, GKE_MACHINES, GKE_ACCELERATORS)
    nic_sources = (DRANET_CODE, *extra) if nics else ()
    return Entry(name, "gke", klass, _unique((*base, *nic_sources)))


def _eks(
    instance: str, gpu: Gpu, count: int, pcie_roots: Sequence[str] = (), efa: int = 0, extra: Sequence[Source] = ()
) -> Entry:
    devices = [gpu_device(gpu, count, pcie_roots)]
    description = f"EKS {instance}: {count}x {gpu.product}"
    if efa:
        devices.append(efa_adapters(efa))
        description += f", {efa} EFA adapters (EFA device plugin)"
    klass = {"description": description, "provisioning": {"eks": {"instance_type": instance}}, "devices": devices}
    sources = (DRIVER_CODE, NVLIB_STRINGS, *gpu.sources, EKS_INSTANCES)
    if pcie_roots:
        sources += (PCIE_ROOT_NAME, DRIVER_ATTRIBUTES_DOC)
    return Entry(f"{instance}+efa" if efa else instance, "eks", klass, _unique((*sources, *extra)))


def _dgx(name: str, system: str, gpu: Gpu, source: Source) -> Entry:
    klass = {"description": f"{system}: 8x {gpu.product}", "devices": [gpu_device(gpu, 8)]}
    return Entry(name, "dgx", klass, _unique((DRIVER_CODE, NVLIB_STRINGS, *gpu.sources, source)))


#: G-family sizes: GPUs per instance (the same for g5, g6 and g6e; provider_rules' table).
G_SIZES = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 4, "16xlarge": 1, "24xlarge": 4,
           "48xlarge": 8}  # fmt: skip
G2_SIZES = {"g2-standard-4": 1, "g2-standard-8": 1, "g2-standard-12": 1, "g2-standard-16": 1, "g2-standard-24": 2,
            "g2-standard-32": 1, "g2-standard-48": 4, "g2-standard-96": 8}  # fmt: skip


def _entries() -> dict[str, Entry]:
    entries: list[Entry] = []
    for n in (1, 2, 4, 8):
        entries.append(_gke(f"a2-highgpu-{n}g", "nvidia-tesla-a100", A100_40GB, n))
    for n in (1, 2, 4, 8):
        entries.append(_gke(f"a2-ultragpu-{n}g", "nvidia-a100-80gb", A100_80GB, n))
    for n in (1, 2, 4, 8):
        entries.append(_gke(f"a3-highgpu-{n}g", "nvidia-h100-80gb", H100_80GB, n))
    entries.append(_gke("a3-megagpu-8g", "nvidia-h100-mega-80gb", H100_80GB, 8))
    entries.append(_gke("a3-ultragpu-8g", "nvidia-h200-141gb", H200, 8))
    entries.append(_gke("a3-ultragpu-8g", "nvidia-h200-141gb", H200, 8, nics=8, extra=(H200_SLICE,)))
    entries.append(_gke("a4-highgpu-8g", "nvidia-b200", B200, 8))
    entries.append(_gke("a4-highgpu-8g", "nvidia-b200", B200, 8, nics=8, extra=(DRANET_A4,)))
    entries.extend(_gke(machine, "nvidia-l4", L4, n) for machine, n in G2_SIZES.items())

    entries.append(_eks("p4d.24xlarge", A100_40GB, 8))
    entries.append(_eks("p5.48xlarge", H100_80GB, 8, P5_PCIE_ROOTS))
    entries.append(_eks("p5.48xlarge", H100_80GB, 8, P5_PCIE_ROOTS, efa=32, extra=(EFA_P5,)))
    entries.append(_eks("p5e.48xlarge", H200, 8))
    entries.append(_eks("p5e.48xlarge", H200, 8, efa=32, extra=(EFA_P5,)))
    entries.append(_eks("p6-b200.48xlarge", B200, 8))
    for family, gpu in (("g5", A10G), ("g6", L4), ("g6e", L40S)):
        entries.extend(_eks(f"{family}.{size}", gpu, n) for size, n in G_SIZES.items())

    entries.append(_dgx("dgx-a100-320gb", "NVIDIA DGX A100 320GB", A100_40GB, DGX_A100))
    entries.append(_dgx("dgx-a100-640gb", "NVIDIA DGX A100 640GB", A100_80GB, DGX_A100))
    entries.append(_dgx("dgx-h100", "NVIDIA DGX H100", H100_80GB, DGX_H100))
    entries.append(_dgx("dgx-b200", "NVIDIA DGX B200", B200, DGX_B200))
    out = {e.name: e for e in entries}
    if len(out) != len(entries):  # pragma: no cover - a mistake in the table above
        raise AssertionError("two catalog entries have one name")
    return out


#: Every entry by name, in the order above (GKE, EKS, DGX).
ENTRIES: dict[str, Entry] = _entries()


# --------------------------------------------------------------------------------------------------------------------
# Expansion
# --------------------------------------------------------------------------------------------------------------------


def merge(base: Any, override: Any) -> Any:
    """``override`` over ``base`` as a JSON merge patch (RFC 7396): mappings merge key by key, a ``None`` value removes
    the key, anything else (lists included) replaces."""
    if not isinstance(override, Mapping):
        return copy.deepcopy(override)
    out = dict(base) if isinstance(base, Mapping) else {}
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def merge_devices(base: Sequence[Any], override: Any) -> Any:
    """A class's ``devices`` over an entry's: a device of the entry's name is merged into it (:func:`merge`: set
    ``count``, add or change ``attributes``...), any other is added after the entry's."""
    if not isinstance(override, list):
        return copy.deepcopy(override)  # not a list: the field's own validation reports it
    out = [copy.deepcopy(d) for d in base]
    index = {d.get("name"): i for i, d in enumerate(out) if isinstance(d, Mapping)}
    for device in override:
        name = device.get("name") if isinstance(device, Mapping) else None
        if isinstance(name, str) and name in index:
            out[index[name]] = merge(out[index[name]], device)
        else:
            out.append(copy.deepcopy(device))
    return out


def expand(name: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The class data of catalog entry ``name`` with a class's own fields (``overrides``, ``catalog`` itself left
    out) merged over it: ``devices`` by device name, everything else as a JSON merge patch (:func:`merge`)."""
    out: dict[str, Any] = ENTRIES[name].data()
    for key, value in overrides.items():
        if key == "catalog":
            continue
        if key == "devices":
            out["devices"] = merge_devices(out.get("devices", []), value)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def _family(name: str) -> str:
    return re.split(r"[-.+]", name, maxsplit=1)[0]


def unknown_entry(name: Any) -> str:
    """The reason for a ``catalog`` value that names no entry, with the closest names of its family (``a3``, ``p5``,
    ``dgx``; every entry when the family is unknown) and where the entries are listed."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.suggest import did_you_mean

    family = _family(name) if isinstance(name, str) else ""
    known = [n for n in ENTRIES if _family(n) == family] or list(ENTRIES)
    return f"unknown catalog entry {name!r}{did_you_mean(name, known)}; every entry: {DOCS}"


def pool_class_hint(name: str) -> str:
    """For a pool whose ``class`` is ``catalog/<entry>`` and no class of that name exists: how to use the entry (a pool
    names a class of ``gpufleet_inference_classes``; a class names its catalog entry)."""
    if not name.startswith("catalog/"):
        return ""
    entry = name.removeprefix("catalog/")
    if entry not in ENTRIES:
        return f"; {unknown_entry(entry)}"
    return (
        f"; a pool names a class of gpufleet_inference_classes, and a class names its catalog entry: define "
        f"gpufleet_inference_classes: {{<class name>: {{catalog: {entry}}}}} and give the pool that class"
    )
