# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Provisioning filters: gpufleet.serving.eks_subnets, eks_nodegroups, eks_kubeconfig, gke_node_pools, gke_kubeconfig, cluster_preflight.

Documentation is in the ``<filter>.yml`` sidecars beside this file; the logic is ``plugins/module_utils/eks.py``
and ``gke.py`` (and ``provisioning.py`` for the host variables).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.plugin_utils.filter import filter_map, gpufleet_filter


@gpufleet_filter
def eks_subnets(
    host: Any, hostvars: Any, classes: Any, vpc_cidr: Any = "10.42.0.0/16", prefix: Any = 20
) -> list[dict[str, str]]:
    """``inventory_hostname | eks_subnets(hostvars[inventory_hostname], gpufleet_inference_classes, vpc_cidr)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils import eks
    from ansible_collections.gpufleet.serving.plugins.module_utils.provisioning import parse_cluster

    cluster = parse_cluster(str(host), hostvars, classes, provider="eks")[0]
    return eks.subnet_plan(str(vpc_cidr), eks.default_zones(cluster), int(prefix))


@gpufleet_filter
def eks_nodegroups(
    host: Any, hostvars: Any, classes: Any, subnets_by_zone: Any = None, system: Any = None
) -> list[dict[str, Any]]:
    """``inventory_hostname | eks_nodegroups(hostvars[inventory_hostname], gpufleet_inference_classes, {zone: subnet})``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils import eks
    from ansible_collections.gpufleet.serving.plugins.module_utils.provisioning import parse_cluster

    cluster, parsed = parse_cluster(str(host), hostvars, classes, provider="eks")
    sysdata = to_plain(system or {}, "system")
    if not isinstance(sysdata, dict):
        raise GpufleetError(f"system must be a mapping (got {type(sysdata).__name__})")
    try:
        sysp = eks.SystemPool(**sysdata)
    except TypeError as exc:
        raise GpufleetError(f"system: {exc}") from None
    zones = to_plain(subnets_by_zone or {}, "subnets_by_zone")
    return [s.to_dict() for s in eks.nodegroup_specs(cluster, parsed, zones, sysp)]


@gpufleet_filter
def eks_kubeconfig(cluster: Any, host: Any, region: Any) -> dict[str, Any]:
    """``eks_cluster_result | eks_kubeconfig(inventory_hostname, region)``: community.aws.eks_cluster's return value
    (``endpoint``, ``certificate_authority.data``, ``name``) as a kubeconfig."""
    from ansible_collections.gpufleet.serving.plugins.module_utils import eks

    data = to_plain(cluster, "cluster")
    if not isinstance(data, dict) or not data.get("endpoint") or not data.get("name"):
        raise GpufleetError(
            "the input must be community.aws.eks_cluster's result (name, endpoint, certificate_authority)"
        )
    ca = (data.get("certificate_authority") or {}).get("data") or ""
    return eks.kubeconfig(data["name"], data["endpoint"], ca, str(region), context=str(host))


@gpufleet_filter
def gke_node_pools(host: Any, hostvars: Any, classes: Any, system: Any = None) -> list[dict[str, Any]]:
    """``inventory_hostname | gke_node_pools(hostvars[inventory_hostname], gpufleet_inference_classes)``: the system
    pool first, then one GPU pool per fleet pool, in gke_node_pool's option shape."""
    from ansible_collections.gpufleet.serving.plugins.module_utils import gke
    from ansible_collections.gpufleet.serving.plugins.module_utils.provisioning import parse_cluster

    cluster, parsed = parse_cluster(str(host), hostvars, classes, provider="gke")
    sysdata = to_plain(system or {}, "system")
    if not isinstance(sysdata, dict):
        raise GpufleetError(f"system must be a mapping (got {type(sysdata).__name__})")
    try:
        sysp = gke.SystemPool(**sysdata)
    except TypeError as exc:
        raise GpufleetError(f"system: {exc}") from None
    return gke.node_pool_specs(cluster, parsed, sysp)


@gpufleet_filter
def gke_kubeconfig(cluster: Any, host: Any) -> dict[str, Any]:
    """``gke_cluster_result.cluster | gke_kubeconfig(inventory_hostname)``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils import gke

    data = to_plain(cluster, "cluster")
    if not isinstance(data, dict) or not data.get("endpoint"):
        raise GpufleetError("the input must be gpufleet.serving.gke_cluster's cluster (endpoint, masterAuth)")
    ca = (data.get("masterAuth") or {}).get("clusterCaCertificate") or ""
    return gke.kubeconfig(str(host), data["endpoint"], ca)


@gpufleet_filter
def cluster_preflight(
    host: Any,
    hostvars: Any,
    classes: Any,
    git_version: Any,
    group_versions: Any,
    nodes: Any = None,
    device_classes: Any = None,
    resource_slices: Any = None,
) -> dict[str, Any]:
    """``inventory_hostname | cluster_preflight(hostvars[inventory_hostname], gpufleet_inference_classes, version,
    api_group_versions, nodes, device_classes, resource_slices)`` -> ``{ok, errors, findings, report}``."""
    from ansible_collections.gpufleet.serving.plugins.module_utils import preflight
    from ansible_collections.gpufleet.serving.plugins.module_utils.provisioning import parse_cluster

    cluster, parsed = parse_cluster(str(host), hostvars, classes)
    observed = preflight.Observed(
        git_version=str(git_version),
        group_versions=frozenset(str(g) for g in to_plain(group_versions or [], "group_versions")),
        nodes=to_plain(nodes or [], "nodes"),
        device_classes=to_plain(device_classes or [], "device_classes"),
        resource_slices=to_plain(resource_slices or [], "resource_slices"),
    )
    findings = preflight.check_cluster(cluster, parsed, observed)
    errors = [f for f in findings if f.severity == "error"]
    return {
        "ok": not errors,
        "errors": preflight.report(errors),
        "findings": [f.to_dict() for f in findings],
        "report": preflight.report(findings),
    }


class FilterModule:
    """gpufleet.serving cluster provisioning filters."""

    def filters(self) -> dict[str, Any]:
        return filter_map(
            eks_subnets, eks_nodegroups, eks_kubeconfig, gke_node_pools, gke_kubeconfig, cluster_preflight
        )
