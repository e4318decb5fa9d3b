# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The boundary of the provisioning roles: one inventory host's ``gpufleet_*`` variables and the inference classes,
validated once into the fleet models (errors name the inventory variable and field)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import CLUSTER_VARS, validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Cluster, InferenceClass
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain


def parse_cluster(
    name: str, hostvars: Mapping[str, Any], classes: Any, provider: str | None = None
) -> tuple[Cluster, dict[str, InferenceClass]]:
    """Validate the host ``name`` as a fleet cluster (only its ``gpufleet_*`` variables are read) and the classes."""
    if not isinstance(hostvars, Mapping):
        raise GpufleetError(f"cluster {name}: host variables must be a mapping (got {type(hostvars).__name__})")
    own = {var: to_plain(hostvars[var], var) for var in CLUSTER_VARS.values() if var in hostvars}
    fleet = validate_fleet(classes=to_plain(classes, "gpufleet_inference_classes"), hosts={name: own})
    cluster = fleet.clusters[name]
    if provider is not None and cluster.provider != provider:
        raise GpufleetError(
            f"hostvars[{name!r}].gpufleet_provider: is {cluster.provider!r}, but this is the {provider} role"
        )
    return cluster, fleet.classes
