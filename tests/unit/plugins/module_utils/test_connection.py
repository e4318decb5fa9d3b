"""connection.py: a cluster is reached through its pinned kubeconfig/context, never the current kube context."""

from __future__ import annotations

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.filter.k8s_connection import k8s_connection
from ansible_collections.gpufleet.serving.plugins.module_utils.connection import UnpinnedClusterError, kube_connection
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError


@pytest.mark.parametrize(
    ("kubeconfig", "context", "expected"),
    [
        ("/k/c1", None, {"kubeconfig": "/k/c1"}),
        (None, "ctx", {"context": "ctx"}),
        ("~/k", "ctx", {"kubeconfig": os.path.expanduser("~/k"), "context": "ctx"}),
        ({"apiVersion": "v1", "kind": "Config"}, "", {"kubeconfig": {"apiVersion": "v1", "kind": "Config"}}),
    ],
)
def test_pinned(kubeconfig, context, expected):
    assert kube_connection("c1", kubeconfig, context) == expected


@pytest.mark.parametrize(("kubeconfig", "context"), [(None, None), ("", ""), (None, "")])
def test_unpinned_is_refused(kubeconfig, context):
    with pytest.raises(UnpinnedClusterError, match="cluster c1 has neither gpufleet_kubeconfig nor gpufleet_context"):
        kube_connection("c1", kubeconfig, context)


def test_bad_types():
    with pytest.raises(GpufleetError, match="gpufleet_kubeconfig must be a path or a kubeconfig mapping"):
        kube_connection("c1", 3)
    with pytest.raises(GpufleetError, match="gpufleet_context must be a string"):
        kube_connection("c1", None, ["a"])


def test_filter_prefixes_its_name():
    assert k8s_connection("c1", None, "ctx") == {"context": "ctx"}
    with pytest.raises(AnsibleFilterError, match=r"^k8s_connection: cluster c1 has neither"):
        k8s_connection("c1")


def test_a_fleet_is_pinned_whole_or_not_at_all():
    from ansible_collections.gpufleet.serving.plugins.module_utils.connection import kube_connections

    hostvars = {
        "a": {"gpufleet_kubeconfig": "/k/a"},
        "b": {"gpufleet_context": "b-ctx"},
        "c": {},
        "d": {"gpufleet_kubeconfig": "", "gpufleet_context": None},
    }
    assert kube_connections(["a", "b"], hostvars) == {"a": {"kubeconfig": "/k/a"}, "b": {"context": "b-ctx"}}
    # every unpinned cluster is named in one error, so the user fixes them all at once
    with pytest.raises(UnpinnedClusterError, match=r"^cluster\(s\) c, d have neither gpufleet_kubeconfig"):
        kube_connections(["a", "c", "b", "d"], hostvars)
