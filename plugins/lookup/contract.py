# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Lookup plugin gpufleet.serving.contract: the collection's Kubernetes contract for roles and playbooks."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: contract
short_description: The collection's Kubernetes contract (owner labels, selectors, label and annotation keys)
version_added: 0.3.0
description:
  - Returns, as one mapping, what roles and playbooks need of the labels, annotations and owner selectors the
    collection puts on what it creates, so no YAML spells a C(gpufleet.io/*) key of its own. The same mapping is
    returned by M(gpufleet.serving.fleet_info) as C(contract).
  - Takes no terms.
author:
  - gpufleet.serving contributors (@gpufleet)
"""

EXAMPLES = r"""
- name: Find every object the collection owns on a cluster
  kubernetes.core.k8s_info:
    kind: Pod
    label_selectors: "{{ lookup('gpufleet.serving.contract').managed_selector }}"
"""

RETURN = r"""
_raw:
  description:
    - One mapping with C(managed_selector), C(serving_owner_selector), C(cache_owner_selector) (label selector lists),
      C(serving_owner_labels), C(cache_owner_labels) (label mappings), C(label_component), C(component_cache),
      C(label_cache), C(label_cluster), C(label_fleet), C(annotation_hydrated_by), C(annotation_placement),
      C(node_pool_label) (keys and values) and C(serving_kinds), C(workload_kinds) (lists of C({api_version, kind})).
    - The selectors and owner labels match the collection's objects of every fleet; C(label_fleet)
      (C(gpufleet.io/fleet)) tells fleets apart - select one fleet's with the P(gpufleet.serving.fleet_owned#filter)
      filter.
  type: list
  elements: dict
"""

from typing import Any  # noqa: E402 - after the documentation, as Ansible plugins are laid out

from ansible.errors import AnsibleLookupError  # noqa: E402
from ansible.plugins.lookup import LookupBase  # noqa: E402

from ansible_collections.gpufleet.serving.plugins.plugin_utils.contract import role_contract  # noqa: E402


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
        if terms or kwargs:
            raise AnsibleLookupError("gpufleet.serving.contract takes no terms or options")
        return [role_contract()]
