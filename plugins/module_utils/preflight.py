# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Preflight of a cluster the fleet did not create: is it what the inventory says, so placement will be right?

A pure function of what was read from the cluster (the server version, the served API group versions, and one list
each of Nodes, DeviceClasses and ResourceSlices) and of the validated fleet models. It returns findings, each naming
the cluster and, where it applies, the pool, node and device; ``error`` findings are those that would make placement
wrong (a pool without nodes, a DeviceClass that claims would name but that does not exist, devices that are not what
the class promises), ``warning`` ones would not (more nodes than declared).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.capacity import device_report
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import NODE_POOL_LABEL
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import MIN_DRA_KUBERNETES, KubernetesVersion
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Cluster, Device, InferenceClass

DRA_GROUP_VERSION = "resource.k8s.io/v1"


@dataclass(frozen=True)
class Finding:
    severity: str  # error | warning | ok
    check: str
    cluster: str
    message: str
    pool: str | None = None
    node: str | None = None
    device: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Observed:
    """What the preflight read from one cluster."""

    git_version: str
    group_versions: frozenset[str]
    nodes: Sequence[Mapping[str, Any]] = ()
    device_classes: Sequence[Mapping[str, Any]] = ()
    resource_slices: Sequence[Mapping[str, Any]] = ()


def device_findings(devices: Sequence[Device], published: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, str]]:
    """Per declared device entry (``devices``, all of one driver): how many of its devices (its ``count``, each with
    its own ``instances`` values) distinct published devices satisfy, and what differs for the others
    (``"<published name>: <reasons>; ..."``). The entries are matched together, so one published device never counts
    for two entries (full GPUs and MIG slices of one driver, or two entries that differ only in name)."""
    wanted: list[Mapping[str, Any]] = []
    entry: list[str] = []
    for device in devices:
        for declared in device.slice_devices():
            wanted.append(declared)
            entry.append(device.name)
    matched, details = device_report(wanted, devices[0].driver, published) if devices else (set(), {})
    return {
        device.name: (
            sum(1 for i in matched if entry[i] == device.name),
            "; ".join(details[i] for i in sorted(details) if entry[i] == device.name),
        )
        for device in devices
    }


def check_cluster(cluster: Cluster, classes: Mapping[str, InferenceClass], observed: Observed) -> list[Finding]:
    """Every check, in order: version, DRA API, then per pool: nodes, DeviceClasses, ResourceSlices and devices."""
    name = cluster.name
    out: list[Finding] = []
    version = KubernetesVersion.parse_reported(observed.git_version)
    declared = cluster.declared_version
    if version is None:
        out.append(Finding("error", "version", name, f"cannot read the server version {observed.git_version!r}"))
    elif version < MIN_DRA_KUBERNETES:
        out.append(
            Finding(
                "error",
                "version",
                name,
                f"the API server runs {observed.git_version}, older than {MIN_DRA_KUBERNETES}: DRA "
                f"(resource.k8s.io/v1) is GA from {MIN_DRA_KUBERNETES}",
            )
        )
    elif declared is not None and not version.matches(KubernetesVersion.parse(declared)):
        # Compared to the precision declared: the minor release for 1.34, the patch release for 1.34.1.
        out.append(
            Finding(
                "error",
                "version",
                name,
                f"the API server runs {observed.git_version} but the inventory declares {declared}",
            )
        )
    if not any(f.check == "version" for f in out):
        out.append(Finding("ok", "version", name, f"API server {observed.git_version}"))

    if DRA_GROUP_VERSION not in observed.group_versions:
        out.append(
            Finding("error", "dra-api", name, f"{DRA_GROUP_VERSION} is not served: DRA claims cannot be created")
        )
        return out
    out.append(Finding("ok", "dra-api", name, f"{DRA_GROUP_VERSION} served"))

    device_classes = {(dc.get("metadata") or {}).get("name") for dc in observed.device_classes}
    slices_by_node: dict[str, list[Mapping[str, Any]]] = {}
    for rs in observed.resource_slices:
        spec = rs.get("spec") or {}
        if spec.get("nodeName"):
            slices_by_node.setdefault(spec["nodeName"], []).append(spec)
    labelled: dict[str, list[str]] = {}
    for node in observed.nodes:
        meta = node.get("metadata") or {}
        pool = (meta.get("labels") or {}).get(NODE_POOL_LABEL)
        if pool:
            labelled.setdefault(pool, []).append(meta.get("name", "?"))

    for pool in cluster.node_pools:
        cls = classes[pool.class_]
        nodes = sorted(labelled.get(pool.name, []))
        if not nodes:
            if pool.node_count > 0:
                out.append(
                    Finding(
                        "error",
                        "pool-nodes",
                        name,
                        f"no Node is labelled {NODE_POOL_LABEL}={pool.name} (the inventory declares {pool.node_count}): "
                        "placement would put replicas on a pool the scheduler cannot reach",
                        pool=pool.name,
                    )
                )
            continue
        if len(nodes) < pool.node_count:
            out.append(
                Finding(
                    "error",
                    "pool-nodes",
                    name,
                    f"{len(nodes)} Node(s) labelled {NODE_POOL_LABEL}={pool.name}, the inventory declares "
                    f"{pool.node_count}: placement would overcommit the pool",
                    pool=pool.name,
                )
            )
        elif len(nodes) > pool.node_count:
            out.append(
                Finding(
                    "warning",
                    "pool-nodes",
                    name,
                    f"{len(nodes)} Node(s) labelled {NODE_POOL_LABEL}={pool.name}, more than the {pool.node_count} declared",
                    pool=pool.name,
                )
            )
        else:
            out.append(Finding("ok", "pool-nodes", name, f"{len(nodes)} Node(s)", pool=pool.name))

        dra = [device for device in cls.devices if device.claim == "DRA"]  # Synthetic ones have no driver publishing
        drivers = sorted({device.driver for device in dra})
        published = {
            (node_name, driver): [
                d
                for spec in slices_by_node.get(node_name, [])
                if spec.get("driver") == driver
                for d in spec.get("devices") or []
            ]
            for node_name in nodes
            for driver in drivers
        }
        # Per node, what each entry gets of the devices published for its driver, every entry of the driver matched
        # together.
        found = {
            (node_name, entry): result
            for node_name in nodes
            for driver in drivers
            for entry, result in device_findings(
                [device for device in dra if device.driver == driver], published[node_name, driver]
            ).items()
        }
        for device in dra:
            if device.device_class_name not in device_classes:
                out.append(
                    Finding(
                        "error",
                        "device-class",
                        name,
                        f"DeviceClass {device.device_class_name} does not exist: claims for {device.name} would never "
                        "be allocated",
                        pool=pool.name,
                        device=device.name,
                    )
                )
            bad_nodes = 0
            for node_name in nodes:
                if not published[node_name, device.driver]:
                    bad_nodes += 1
                    out.append(
                        Finding(
                            "error",
                            "slices",
                            name,
                            f"no ResourceSlice of driver {device.driver} on node {node_name}",
                            pool=pool.name,
                            node=node_name,
                            device=device.name,
                        )
                    )
                    continue
                matching, detail = found[node_name, device.name]
                if matching < device.count:
                    bad_nodes += 1
                    out.append(
                        Finding(
                            "error",
                            "devices",
                            name,
                            f"node {node_name} publishes {matching} {device.driver} device(s) matching class "
                            f"{pool.class_}'s {device.name}, the class says {device.count}"
                            + (f" ({detail})" if detail else ""),
                            pool=pool.name,
                            node=node_name,
                            device=device.name,
                        )
                    )
            if not bad_nodes:
                out.append(
                    Finding(
                        "ok",
                        "devices",
                        name,
                        f"{len(nodes)} node(s) x {device.count} {device.name} as the class says",
                        pool=pool.name,
                        device=device.name,
                    )
                )
    return out


def report(findings: Sequence[Finding]) -> list[str]:
    """One line per finding: ``SEVERITY cluster/pool[/device] [node] message``."""
    lines = []
    for f in findings:
        where = "/".join(p for p in (f.cluster, f.pool, f.device) if p)
        node = f" node={f.node}" if f.node else ""
        lines.append(f"{f.severity.upper():7} {where}{node}: {f.message}")
    return lines
