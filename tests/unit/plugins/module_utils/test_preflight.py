"""The existing-cluster preflight checks over hand-written API objects (the local-fleet e2e test reads real ones)."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils import preflight
from ansible_collections.gpufleet.serving.plugins.module_utils.provisioning import parse_cluster

CLASSES = {
    "l4": {
        "devices": [
            {
                "name": "gpu",
                "driver": "gpu.nvidia.com",
                "device_class_name": "gpu.nvidia.com",
                "count": 2,
                "attributes": {"productName": {"string": "NVIDIA L4"}},
                "capacity": {"memory": {"value": "23034Mi"}},
            },
            {"name": "ib", "claim": "Synthetic", "driver": "fabric.example.com", "count": 1},
        ]
    }
}
HOST = {
    "gpufleet_provider": "existing",
    "gpufleet_kubeconfig": "/k",
    "gpufleet_kubernetes_version": "1.36",
    "gpufleet_node_pools": [{"name": "l4", "class": "l4", "node_count": 1}],
}


def node(name, pool=None):
    return {"metadata": {"name": name, "labels": {"gpufleet.io/pool": pool} if pool else {}}}


def rs(node_name, devices, driver="gpu.nvidia.com"):
    return {"spec": {"driver": driver, "nodeName": node_name, "devices": devices}}


def gpu(i, memory="23034Mi", product="NVIDIA L4"):
    return {
        "name": f"gpu-{i}",
        "attributes": {"productName": {"string": product}, "index": {"int": i}},
        "capacity": {"memory": {"value": memory}},
    }


GOOD = preflight.Observed(
    git_version="v1.36.3",
    group_versions=frozenset({"v1", "resource.k8s.io/v1"}),
    nodes=[node("n0", "l4"), node("sys")],
    device_classes=[{"metadata": {"name": "gpu.nvidia.com"}}],
    resource_slices=[rs("n0", [gpu(0), gpu(1, memory="22.494140625Gi")])],  # the same quantity, spelled otherwise
)


def run(observed, host=None):
    cluster, classes = parse_cluster("c1", host or HOST, CLASSES)
    return preflight.check_cluster(cluster, classes, observed)


def errors(findings):
    return [(f.check, f.pool, f.device, f.node, f.message) for f in findings if f.severity == "error"]


def test_a_cluster_as_declared_has_no_error():
    findings = run(GOOD)
    assert errors(findings) == []
    assert [f.check for f in findings] == ["version", "dra-api", "pool-nodes", "devices"]  # synthetic ib: not checked


@pytest.mark.parametrize(
    ("change", "check", "words"),
    [
        ({"git_version": "v1.33.5"}, "version", "older than 1.34"),
        ({"git_version": "v1.35.1"}, "version", "runs v1.35.1 but the inventory declares 1.36"),
        (
            {"group_versions": frozenset({"v1", "resource.k8s.io/v1beta1"})},
            "dra-api",
            "resource.k8s.io/v1 is not served",
        ),
        ({"nodes": [node("n0")]}, "pool-nodes", "no Node is labelled gpufleet.io/pool=l4"),
        ({"device_classes": []}, "device-class", "DeviceClass gpu.nvidia.com does not exist"),
        ({"resource_slices": []}, "slices", "no ResourceSlice of driver gpu.nvidia.com on node n0"),
        ({"resource_slices": [rs("n0", [gpu(0)])]}, "devices", "publishes 1 gpu.nvidia.com device(s) matching"),
        (
            {"resource_slices": [rs("n0", [gpu(0), gpu(1, product="NVIDIA L40S")])]},
            "devices",
            "gpu-1: attribute gpu.nvidia.com/productName is 'NVIDIA L40S', the class says 'NVIDIA L4'",
        ),
        (
            {"resource_slices": [rs("n0", [gpu(0), gpu(1, memory="20000Mi")])]},
            "devices",
            "gpu-1: capacity gpu.nvidia.com/memory is 20000Mi, the class says 23034Mi",
        ),
        ({"resource_slices": [rs("n0", [gpu(0), gpu(1)], driver="other.example.com")]}, "slices", "no ResourceSlice"),
    ],
)
def test_each_fault_is_named(change, check, words):
    observed = preflight.Observed(**{**GOOD.__dict__, **change})
    errs = errors(run(observed))
    assert len(errs) == 1, errs
    assert errs[0][0] == check and words in errs[0][4], errs
    if check in ("slices", "devices", "device-class"):
        assert errs[0][1:3] == ("l4", "gpu")


def test_more_nodes_than_declared_is_a_warning_and_fewer_an_error():
    more = preflight.Observed(
        **{
            **GOOD.__dict__,
            "nodes": [node("n0", "l4"), node("n1", "l4")],
            "resource_slices": [rs("n0", [gpu(0), gpu(1)]), rs("n1", [gpu(0), gpu(1)])],
        }
    )
    assert errors(run(more)) == []
    assert [f.severity for f in run(more) if f.check == "pool-nodes"] == ["warning"]
    host = copy.deepcopy(HOST)
    host["gpufleet_node_pools"][0]["node_count"] = 3
    assert "the inventory declares 3" in errors(run(GOOD, host))[0][4]


def test_without_a_declared_version_only_the_minimum_is_checked():
    host = {k: v for k, v in HOST.items() if k != "gpufleet_kubernetes_version"}
    assert errors(run(preflight.Observed(**{**GOOD.__dict__, "git_version": "v1.34.0"}), host)) == []


def test_report_lines_name_cluster_pool_device_and_node():
    observed = preflight.Observed(**{**GOOD.__dict__, "resource_slices": []})
    lines = preflight.report(run(observed))
    assert "ERROR   c1/l4/gpu node=n0: no ResourceSlice of driver gpu.nvidia.com on node n0" in lines


def test_per_device_instances_are_checked_whatever_the_published_order():
    classes = copy.deepcopy(CLASSES)
    classes["l4"]["devices"][0]["instances"] = [
        {"attributes": {"pcieRoot": {"string": "pci0000:00"}}},
        {"attributes": {"pcieRoot": {"string": "pci0001:00"}}},
    ]

    def with_root(i, root):
        dev = gpu(i)
        dev["attributes"]["pcieRoot"] = {"string": root}
        return dev

    def check(devices):
        cluster, parsed = parse_cluster("c1", HOST, classes)
        observed = preflight.Observed(**{**GOOD.__dict__, "resource_slices": [rs("n0", devices)]})
        return errors(preflight.check_cluster(cluster, parsed, observed))

    assert check([with_root(0, "pci0000:00"), with_root(1, "pci0001:00")]) == []
    assert check([with_root(0, "pci0001:00"), with_root(1, "pci0000:00")]) == []  # the scheduler ignores names
    # Shared attributes all match, but both GPUs sit on one root: before, this passed.
    (err,) = check([with_root(0, "pci0000:00"), with_root(1, "pci0000:00")])
    assert err[0] == "devices" and "publishes 1 gpu.nvidia.com device(s) matching class l4's gpu" in err[4]
    assert "gpu-1: attribute gpu.nvidia.com/pcieRoot is 'pci0000:00', the class says 'pci0001:00'" in err[4]


def test_two_entries_of_one_driver_do_not_share_published_devices():
    # Two entries of gpu.nvidia.com that differ only in name: 4 GPUs declared. Each was matched against every published
    # device of the driver on its own, so 2 published GPUs satisfied both entries and the node passed.
    classes = copy.deepcopy(CLASSES)
    second = {**copy.deepcopy(classes["l4"]["devices"][0]), "name": "gpu-b"}
    classes["l4"]["devices"].insert(1, second)

    def check(devices):
        cluster, parsed = parse_cluster("c1", HOST, classes)
        observed = preflight.Observed(**{**GOOD.__dict__, "resource_slices": [rs("n0", devices)]})
        return errors(preflight.check_cluster(cluster, parsed, observed))

    (err,) = check([gpu(0), gpu(1)])
    assert err[:4] == ("devices", "l4", "gpu-b", "n0")
    assert "publishes 0 gpu.nvidia.com device(s) matching class l4's gpu-b, the class says 2" in err[4]
    assert check([gpu(i) for i in range(4)]) == []
    (err,) = check([gpu(i) for i in range(3)])
    assert err[2] == "gpu-b" and "publishes 1 gpu.nvidia.com device(s)" in err[4]
