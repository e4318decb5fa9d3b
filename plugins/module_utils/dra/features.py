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

from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import KubernetesVersion

#: Feature -> (gate, the first minor release where it is on by default).
ON_BY_DEFAULT: dict[str, tuple[str, KubernetesVersion]] = {
    "prioritized_list": ("DRAPrioritizedList", KubernetesVersion(1, 34)),
    "device_taints": ("DRADeviceTaints", KubernetesVersion(1, 36)),
    "consumable_capacity": ("DRAConsumableCapacity", KubernetesVersion(1, 36)),
    "partitionable_devices": ("DRAPartitionableDevices", KubernetesVersion(1, 36)),
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
        gate, since = ON_BY_DEFAULT[wanted]
        return f"{what} needs the {gate} feature, on by default from Kubernetes {since}"


ALL = Features()


def for_version(version: str | KubernetesVersion | None) -> Features:
    """The features on by default in Kubernetes ``version`` (``"1.35"``; None, or a text that is no version: the
    newest, everything)."""
    parsed = KubernetesVersion.parse_reported(version) if isinstance(version, str) else version
    if parsed is None:
        return ALL
    minor = parsed.minor_version
    return Features(**{name: minor >= since for name, (_gate, since) in ON_BY_DEFAULT.items()})
