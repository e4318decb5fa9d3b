# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Which DRA allocator features a cluster's Kubernetes version has on by default (upstream's ``structured.Features``,
from the feature gates of ``pkg/features/kube_features.go``; design.md §12).

Placement allocates as the cluster's scheduler would: a feature that is off there changes nothing the allocator does
(a published device taint is ignored), and a member whose claim *needs* a feature the cluster lacks (tolerations,
capacity requests, a ``distinct_attribute`` constraint, a device that consumes counters) does not match the cluster's
pools, and the explanation names the feature and the version that has it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Feature -> (gate, the first minor release where it is on by default).
ON_BY_DEFAULT: dict[str, tuple[str, tuple[int, int]]] = {
    "prioritized_list": ("DRAPrioritizedList", (1, 34)),
    "device_taints": ("DRADeviceTaints", (1, 36)),
    "consumable_capacity": ("DRAConsumableCapacity", (1, 36)),
    "partitionable_devices": ("DRAPartitionableDevices", (1, 36)),
}


@dataclass(frozen=True)
class Features:
    """Upstream's ``Features``, as far as placement models them."""

    prioritized_list: bool = True
    device_taints: bool = True
    consumable_capacity: bool = True
    partitionable_devices: bool = True

    def missing(self, wanted: str, what: str) -> str | None:
        """Why ``what`` (a request field, a class field) cannot be used here, or None."""
        if getattr(self, wanted):
            return None
        gate, (major, minor) = ON_BY_DEFAULT[wanted]
        return f"{what} needs the {gate} feature, on by default from Kubernetes {major}.{minor}"


ALL = Features()


def for_version(version: str | None) -> Features:
    """The features on by default in Kubernetes ``version`` (``"1.35"``; None: the newest, everything)."""
    if version is None:
        return ALL
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return ALL
    return Features(**{name: (major, minor) >= since for name, (_gate, since) in ON_BY_DEFAULT.items()})
