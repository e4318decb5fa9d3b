# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller-side helpers shared by the collection's action plugins: the fleet group and host patterns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleError
from ansible.inventory.manager import InventoryManager

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

FLEET_GROUP = "gpufleet_clusters"


def pattern_resolver(loader: Any, groups: Mapping[str, Any]) -> Callable[[str], list[str]]:
    """Resolve Ansible host patterns (``a:&b:!c``, wildcards, ``~regex``) exactly as ansible-playbook does.

    Built the way ``ansible.builtin.inventory_hostnames`` builds its inventory: from the play's ``groups``.
    """
    manager = InventoryManager(loader, parse=False)
    for group, hosts in groups.items():
        manager.add_group(group)
        for host in hosts:
            manager.add_host(host, group=group)

    def resolve(pattern: str) -> list[str]:
        try:
            return [host.name for host in manager.get_hosts(pattern=pattern)]
        except AnsibleError as exc:
            raise GpufleetError(f"cannot resolve host pattern {pattern!r}: {exc}") from None

    return resolve


def host_groups(groups: Mapping[str, Any]) -> dict[str, list[str]]:
    """host -> the groups (fleet segments) it belongs to, without ``all``/``ungrouped``."""
    out: dict[str, list[str]] = {}
    for group, hosts in groups.items():
        if group in ("all", "ungrouped"):
            continue
        for host in hosts:
            out.setdefault(host, []).append(group)
    return out
