"""plugin_utils.inventory: host patterns resolved as ansible-playbook resolves them; fleet segments per host."""

from __future__ import annotations

import pytest
from ansible.parsing.dataloader import DataLoader

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.plugin_utils.inventory import host_groups, pattern_resolver

GROUPS = {
    "all": ["a", "b", "c"],
    "ungrouped": [],
    "gpufleet_clusters": ["a", "b", "c"],
    "prod": ["a", "c"],
    "onprem": ["c"],
}


@pytest.mark.parametrize(
    ("pattern", "hosts"),
    [
        ("gpufleet_clusters", ["a", "b", "c"]),
        ("gpufleet_clusters:&prod", ["a", "c"]),
        ("gpufleet_clusters:&prod:!onprem", ["a"]),
        ("prod:onprem", ["a", "c"]),
        ("~^[ab]$", ["a", "b"]),
        ("gpufleet_clusters[0]", ["a"]),
        ("nothing", []),
    ],
)
def test_patterns(pattern, hosts):
    assert sorted(pattern_resolver(DataLoader(), GROUPS)(pattern)) == hosts


def test_a_bad_pattern_is_a_gpufleet_error():
    with pytest.raises(GpufleetError, match="cannot resolve host pattern"):
        pattern_resolver(DataLoader(), GROUPS)("~(")


def test_host_groups_skip_all_and_ungrouped():
    assert host_groups(GROUPS) == {
        "a": ["gpufleet_clusters", "prod"],
        "b": ["gpufleet_clusters"],
        "c": ["gpufleet_clusters", "prod", "onprem"],
    }
