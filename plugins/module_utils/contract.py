# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The collection's Kubernetes contract: every label, annotation, owner selector, taint and name rule in one place.

What the collection writes to a cluster (or a render directory) and later reads back is defined here and nowhere
else. Python imports these names; the roles read what they need from ``fleet_info``'s ``contract`` return value
(:func:`role_contract`: owner selectors, the kinds to prune and to wait on) instead of spelling them in YAML.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

# --------------------------------------------------------------------------------------------------------------------
# Ownership
# --------------------------------------------------------------------------------------------------------------------

MANAGED_BY = "gpufleet.serving"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_COMPONENT = "gpufleet.io/component"
COMPONENT_SERVING = "serving"
COMPONENT_CACHE = "model-cache"
COMPONENT_STACK = "serving-stack"

#: Labels every object the collection owns carries.
MANAGED: dict[str, str] = {LABEL_MANAGED_BY: MANAGED_BY}
#: What selects the serving objects (model_deployment prunes and reads back by these).
SERVING_OWNER: dict[str, str] = {**MANAGED, LABEL_COMPONENT: COMPONENT_SERVING}
#: What selects the model cache objects (model_cache prunes and reads back by these).
CACHE_OWNER: dict[str, str] = {**MANAGED, LABEL_COMPONENT: COMPONENT_CACHE}
#: What selects the serving stack's own objects (namespaces, quota, DeviceClasses, presets, Gateway; serving_stack).
STACK_OWNER: dict[str, str] = {**MANAGED, LABEL_COMPONENT: COMPONENT_STACK}


def selector(labels: dict[str, str]) -> list[str]:
    """``{k: v}`` -> ``["k=v", ...]``: the ``label_selectors`` form kubernetes.core's ``k8s_info`` takes."""
    return [f"{key}={value}" for key, value in labels.items()]


# --------------------------------------------------------------------------------------------------------------------
# Serving labels and annotations (design.md §6)
# --------------------------------------------------------------------------------------------------------------------

LABEL_DEPLOYMENT = "gpufleet.io/deployment"
LABEL_CLUSTER = "gpufleet.io/cluster"
LABEL_REPLICA = "gpufleet.io/replica"
LABEL_REPLICA_INDEX = "gpufleet.io/replica-index"
LABEL_ENGINE = "gpufleet.io/engine"
LABEL_POOL = "gpufleet.io/pool"
LABEL_ROLE = "gpufleet.io/role"
LABEL_ENDPOINT = "gpufleet.io/endpoint"
#: Labels the collection manages: a user's template labels or extra labels never override them.
MANAGED_LABEL_KEYS: tuple[str, ...] = (
    LABEL_MANAGED_BY,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_CLUSTER,
    LABEL_REPLICA,
    LABEL_REPLICA_INDEX,
    LABEL_ENGINE,
    LABEL_POOL,
    LABEL_ROLE,
    LABEL_ENDPOINT,
)
#: The per-replica Service carries the replica's placement record (records.ReplicaRecord.to_annotation()).
ANNOTATION_PLACEMENT = "gpufleet.io/placement"
# Model caches (design.md §5)
LABEL_CACHE = "gpufleet.io/cache"
ANNOTATION_SOURCE = "gpufleet.io/source"
ANNOTATION_REVISION = "gpufleet.io/revision"
#: Set on the PVC (apply mode) to the name of the Job that hydrated it, once that Job succeeded.
ANNOTATION_HYDRATED_BY = "gpufleet.io/hydrated-by"
#: Apply mode: the digest of the rendered object last server-side applied (fleet_k8s.is_current skips re-applying
#: an object that carries the digest of the same rendering and still holds every value it sets).
ANNOTATION_APPLIED_DIGEST = "gpufleet.io/applied-digest"
#: The node label of a provisioned cluster's system (non-GPU) pool (gke_cluster, eks_cluster).
LABEL_SYSTEM_POOL = "gpufleet.io/system"
#: The label naming which part of the serving stack an object belongs to (serving_stack).
LABEL_STACK_PART = "gpufleet.io/stack-component"
#: The node label a pool's nodes carry (set by the cluster roles and the local fleet); serving pods select it.
NODE_POOL_LABEL = "gpufleet.io/pool"

# --------------------------------------------------------------------------------------------------------------------
# Taints
# --------------------------------------------------------------------------------------------------------------------

#: Fleet-level drain (replicas move away) and cordon (no new replicas) taints placement applies to a cluster.
DRAIN_TAINT: dict[str, str] = {"key": "gpufleet.io/drain", "value": "true", "effect": "NoExecute"}
CORDON_TAINT: dict[str, str] = {"key": "gpufleet.io/cordon", "value": "true", "effect": "NoSchedule"}
#: GPU nodes carry this taint; DRA pods request no nvidia.com/gpu, so nothing adds the toleration for them.
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TOLERATION: dict[str, str] = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}

# --------------------------------------------------------------------------------------------------------------------
# Name rules
# --------------------------------------------------------------------------------------------------------------------

MAX_NAME = 63
MAX_SUBDOMAIN = 253
HASH_DIGITS = 5
DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_KEY_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def k8s_name(base: str, max_len: int = MAX_NAME) -> str:
    """A stable DNS-1035 label from ``base``: lower-cased, invalid characters -> ``-``, must start with a letter
    (``gf-`` is prefixed otherwise), and at most ``max_len`` characters: a longer name keeps its beginning and gets
    ``-<5 hex of sha256(base)>`` so different long names stay different and the same name maps to the same result."""
    name = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-") or "x"
    if not name[0].isalpha():
        name = f"gf-{name}"
    if len(name) > max_len:
        digest = hashlib.sha256(base.encode()).hexdigest()[:HASH_DIGITS]
        name = f"{name[: max_len - HASH_DIGITS - 1].rstrip('-')}-{digest}"
    return name


def replica_name(deployment: str, cluster: str, index: int, digits: int = HASH_DIGITS) -> str:
    """``<deployment>-<first `digits` hex of sha256("<deployment>/<cluster>/<index>")>``, at most 63 characters."""
    digest = hashlib.sha256(f"{deployment}/{cluster}/{index}".encode()).hexdigest()[:digits]
    prefix = deployment[: MAX_NAME - 1 - digits].rstrip("-")
    return f"{prefix}-{digest}"


def is_label_value(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_NAME and bool(LABEL_VALUE_RE.fullmatch(value))


def is_dns_label(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_NAME and bool(DNS_LABEL_RE.fullmatch(value))


def is_dns_subdomain(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_SUBDOMAIN and bool(DNS_SUBDOMAIN_RE.fullmatch(value))


def is_label_key(key: Any) -> bool:
    """Kubernetes' qualified name (IsQualifiedName): a label key, node-selector key or toleration key."""
    if not isinstance(key, str):
        return False
    prefix, sep, name = key.rpartition("/")
    if sep and not (len(prefix) <= MAX_SUBDOMAIN and DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        return False  # "/name" (an empty prefix) is invalid too
    return len(name) <= MAX_NAME and bool(LABEL_KEY_NAME_RE.fullmatch(name))


def role_contract() -> dict[str, Any]:
    """What the roles' YAML needs of the contract, returned by ``fleet_info`` as ``contract`` and by the
    ``gpufleet.serving.contract`` lookup: owner labels and selectors, label and annotation keys the roles read or
    write, the kinds a serving render emits (pruned in apply mode) and the workload kinds whose readiness is awaited."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.backends import serving_kinds, workload_kinds

    return {
        "managed_selector": selector(MANAGED),
        "managed_labels": dict(MANAGED),
        "serving_owner_selector": selector(SERVING_OWNER),
        "cache_owner_selector": selector(CACHE_OWNER),
        "cache_owner_labels": dict(CACHE_OWNER),
        "label_component": LABEL_COMPONENT,
        "component_cache": COMPONENT_CACHE,
        "label_cache": LABEL_CACHE,
        "label_cluster": LABEL_CLUSTER,
        "annotation_hydrated_by": ANNOTATION_HYDRATED_BY,
        "stack_owner": dict(STACK_OWNER),
        "stack_owner_selector": selector(STACK_OWNER),
        "annotation_placement": ANNOTATION_PLACEMENT,
        "node_pool_label": NODE_POOL_LABEL,
        "serving_kinds": [k.to_dict() for k in serving_kinds()],
        "workload_kinds": [k.to_dict() for k in workload_kinds()],
    }
