# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Lookup plugin gpufleet.serving.fleet_state: the fleet's drained and cordoned clusters, as drain.yml recorded them."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: fleet_state
short_description: The fleet's drained and cordoned clusters, as drain.yml recorded them
version_added: 0.3.0
description:
  - Reads the fleet state file that C(playbooks/drain.yml) (M(gpufleet.serving.fleet_state)) writes, and returns its
    drained and cordoned clusters. The C(model_deployment) role adds them to C(gpufleet_drained_clusters) and
    C(gpufleet_cordoned_clusters) on every run.
  - The file is C(<render_dir>/_fleet/<gpufleet_fleet_name>/fleet-state.yml) in render mode and beside the placement
    state file in apply mode (C(model_deployment_fleet_state_file)) - places an AWX job keeps, unlike the inventory.
  - A missing file is the empty state. Clusters that are not in the inventory's C(gpufleet_clusters) group are left
    out (a cluster that left the fleet is drained nowhere).
  - Never reads through a symlink; below O(render_dir), no directory may be one either (a render directory is a Git
    working tree, untrusted). A file that is not a fleet state fails the lookup, naming it.
options:
  _terms:
    description: The fleet state file (one path).
    required: true
  render_dir:
    description: The render directory, when the file may be inside it (symlink checks below it).
    type: path
author:
  - gpufleet.serving contributors (@gpufleet)
"""

EXAMPLES = r"""
- name: Show the fleet's drained clusters
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.serving.fleet_state', model_deployment_fleet_state_file).drained }}"
"""

RETURN = r"""
_raw:
  description:
    - One mapping - C(drained) and C(cordoned) (sorted lists of cluster names; a cluster is in one at most) and
      C(path) (the file read).
  type: list
  elements: dict
"""

from typing import Any  # noqa: E402 - after the documentation, as Ansible plugins are laid out

from ansible.errors import AnsibleLookupError  # noqa: E402
from ansible.plugins.lookup import LookupBase  # noqa: E402

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.state import read  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain  # noqa: E402

CLUSTERS_GROUP = "gpufleet_clusters"


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
        terms = to_plain(terms, "terms")
        if len(terms) != 1 or not isinstance(terms[0], str) or not terms[0]:
            raise AnsibleLookupError("gpufleet.serving.fleet_state: give one path, the fleet state file")
        unknown = sorted(set(kwargs) - {"render_dir"})
        if unknown:
            raise AnsibleLookupError(f"gpufleet.serving.fleet_state: unknown option(s) {', '.join(unknown)}")
        render_dir = to_plain(kwargs.get("render_dir"), "render_dir") or None
        groups = to_plain((variables or {}).get("groups") or {}, "groups")
        clusters = groups.get(CLUSTERS_GROUP) if isinstance(groups, dict) else None
        try:
            state = read(terms[0], render_dir).known(clusters)
        except GpufleetError as exc:
            raise AnsibleLookupError(f"gpufleet.serving.fleet_state: {exc}") from None
        return [{**state.to_dict(), "path": terms[0]}]
