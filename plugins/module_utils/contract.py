# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The collection's Kubernetes contract: every label, annotation, owner selector, taint and name rule in one place.

What the collection writes to a cluster (or a render directory) and later reads back is defined here and nowhere
else. Python imports these names; the roles read what they need from ``fleet_info``'s ``contract`` return value
(``plugins/plugin_utils/contract.py``'s ``role_contract()``: owner selectors, the kinds to prune and to wait on) instead
of spelling them in YAML.

This module sits at the bottom of ``module_utils``: of the collection it imports only the error spine (``errors.py``,
which imports nothing), so whatever needs a label or a name rule -- a module's AnsiballZ payload included -- gets these
two files and nothing else (``tests/unit/plugins/test_imports.py`` checks it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError

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
#: The Namespace files of workload namespaces in the render directory: manifest_dir writes one for every namespace a
#: cluster's serving or cache objects use, and prunes it when none does (module_utils/manifest_dir.py).
COMPONENT_NAMESPACE = "namespace"
NAMESPACE_OWNER: dict[str, str] = {**MANAGED, LABEL_COMPONENT: COMPONENT_NAMESPACE}
#: GitOps render (gpufleet_gitops flux): the sync layer of a rendered object (stack, stack-config, caches, serving);
#: the per-cluster Flux Kustomizations under <render_dir>/_fleet/ select their objects by it
#: (module_utils/render/gitops.py).
ANNOTATION_SYNC_LAYER = "gpufleet.io/sync-layer"


# --------------------------------------------------------------------------------------------------------------------
# Fleet identity
# --------------------------------------------------------------------------------------------------------------------

#: Every object the collection owns for a fleet carries ``gpufleet.io/fleet=<gpufleet_fleet_name>`` in its metadata, so
#: two inventories that share a cluster prune, tear down and count replicas only of their own fleet. It is *not* set
#: on pod templates or in a ResourceClaimTemplate's ``spec``: adding it there would restart every replica (a changed
#: pod template) or be refused (a claim template's spec is immutable) when a fleet first gets its name. A pod or a
#: ResourceClaim belongs to a fleet through the replica (``gpufleet.io/replica``) whose objects the fleet owns.
LABEL_FLEET = "gpufleet.io/fleet"
#: The inventory variables (group_vars/all) that name the fleet and say what to do with objects that have no name yet.
FLEET_NAME_VAR = "gpufleet_fleet_name"
ADOPT_UNLABELLED_VAR = "gpufleet_adopt_unlabelled"

MINE = "mine"
FOREIGN = "foreign"
UNLABELLED = "unlabelled"

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})

T = TypeVar("T")


def fleet_identity_errors(
    name: Any, adopt_unlabelled: Any = None, *, name_var: str = FLEET_NAME_VAR, adopt_var: str = ADOPT_UNLABELLED_VAR
) -> list[tuple[str, str]]:
    """``(variable, reason)`` for a fleet name that is missing or not a Kubernetes label value, and for an
    ``adopt_unlabelled`` that is neither unset nor a boolean."""
    errors: list[tuple[str, str]] = []
    if name is None or name == "":
        errors.append(
            (
                name_var,
                "is required: the name of this fleet, put on every object the collection owns (label "
                f"{LABEL_FLEET}) so that two inventories sharing a cluster never prune, tear down or count each "
                f"other's objects. Set it once in group_vars/all, e.g. `{FLEET_NAME_VAR}: prod`; objects deployed "
                f"before it existed carry no name yet: see {ADOPT_UNLABELLED_VAR}",
            )
        )
    elif not isinstance(name, str):
        errors.append((name_var, f"must be a string (got {type(name).__name__} {name!r}); quote it in YAML"))
    elif not is_label_value(name):
        errors.append(
            (
                name_var,
                f"must be a Kubernetes label value (it is the value of label {LABEL_FLEET}): at most {MAX_NAME} "
                f"characters, letters, digits, '-', '_' or '.', starting and ending with a letter or digit (got {name!r})",
            )
        )
    try:
        parse_adopt(adopt_unlabelled)
    except ValueError as exc:
        errors.append((adopt_var, str(exc)))
    return errors


def parse_adopt(value: Any) -> bool | None:
    """``gpufleet_adopt_unlabelled``: unset (``None``), or a boolean (also as a survey's or ``-e``'s text)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    if isinstance(value, str) and not value.strip():
        return None
    raise ValueError(f"must be true or false, or unset (got {value!r})")


@dataclass
class Ownership(Generic[T]):
    """Objects split by fleet: this fleet's (``mine``, adopted unlabelled ones included), another fleet's or left
    alone (``other``), and unlabelled ones nobody decided about yet (``undecided``: the caller stops)."""

    mine: list[T] = field(default_factory=list)
    other: list[T] = field(default_factory=list)
    undecided: list[T] = field(default_factory=list)


@dataclass(frozen=True)
class FleetIdentity:
    """Which fleet a run works for (``gpufleet_fleet_name``) and what it does with owned objects that carry no fleet
    label: objects rendered or applied before fleet identity (``gpufleet_adopt_unlabelled``).

    * ``adopt_unlabelled=True``: they are this fleet's (adopted: pruned like its own, labelled at the next write);
    * ``False``: they belong to some other inventory: never pruned, overwritten, torn down or counted;
    * ``None`` (unset): finding one stops the run before anything is changed, saying what to set.
    """

    name: str
    adopt_unlabelled: bool | None = None

    @classmethod
    def parse(
        cls,
        name: Any,
        adopt_unlabelled: Any = None,
        *,
        name_var: str = FLEET_NAME_VAR,
        adopt_var: str = ADOPT_UNLABELLED_VAR,
    ) -> FleetIdentity:
        errors = fleet_identity_errors(name, adopt_unlabelled, name_var=name_var, adopt_var=adopt_var)
        if errors:
            raise FleetValidationError(errors)
        return cls(name, parse_adopt(adopt_unlabelled))

    @property
    def labels(self) -> dict[str, str]:
        return {LABEL_FLEET: self.name}

    def owner(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` (an owner's labels) with this fleet's label: what the fleet's own objects carry."""
        return {**base, LABEL_FLEET: self.name}

    def classify(self, labels: Mapping[str, Any] | None) -> str:
        """:data:`MINE`, :data:`FOREIGN` (another fleet's) or :data:`UNLABELLED` (no fleet label)."""
        fleet = (labels or {}).get(LABEL_FLEET)
        if fleet is None or fleet == "":
            return UNLABELLED
        return MINE if str(fleet) == self.name else FOREIGN

    def owns(self, labels: Mapping[str, Any] | None) -> bool:
        kind = self.classify(labels)
        return kind == MINE or (kind == UNLABELLED and self.adopt_unlabelled is True)

    def split(self, items: Iterable[T], labels_of: Callable[[T], Mapping[str, Any] | None]) -> Ownership[T]:
        out: Ownership[T] = Ownership()
        for item in items:
            kind = self.classify(labels_of(item))
            if kind == MINE or (kind == UNLABELLED and self.adopt_unlabelled is True):
                out.mine.append(item)
            elif kind == UNLABELLED and self.adopt_unlabelled is None:
                out.undecided.append(item)
            else:
                out.other.append(item)
        return out

    def unlabelled_error(self, described: Iterable[str], limit: int = 10) -> GpufleetError:
        """The error of a run that found owned objects without a fleet label while ``adopt_unlabelled`` is unset."""
        names = sorted(set(described))
        shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
        return GpufleetError(
            f"{len(names)} object(s) carry gpufleet.serving's owner labels but no {LABEL_FLEET} label: they were "
            f"rendered or applied before fleet identity, or by an inventory that has no {FLEET_NAME_VAR} yet: "
            f"{shown}. Nothing was changed. Set {ADOPT_UNLABELLED_VAR}: true if they are this fleet's "
            f"({self.name}): they are treated as its own and get its label on this run; or "
            f"{ADOPT_UNLABELLED_VAR}: false if they belong to another inventory sharing the cluster: they are then "
            "never pruned, overwritten, torn down or counted as this fleet's replicas."
        )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "adopt_unlabelled": self.adopt_unlabelled}


def identity_of(fleet: Mapping[str, Any]) -> FleetIdentity:
    """The identity of a fleet as ``fleet_info`` returns it (``name``, ``adopt_unlabelled``)."""
    if not isinstance(fleet, Mapping) or not fleet.get("name"):
        raise GpufleetError(
            f"the fleet carries no name: pass fleet_info's `fleet` ({FLEET_NAME_VAR} is required in the inventory)"
        )
    return FleetIdentity.parse(
        fleet.get("name"), fleet.get("adopt_unlabelled"), name_var="fleet.name", adopt_var="fleet.adopt_unlabelled"
    )


def object_labels(obj: Any) -> Mapping[str, Any]:
    """An object's ``metadata.labels`` (empty when it has none or is not an object)."""
    if not isinstance(obj, Mapping):
        return {}
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def describe_object(obj: Mapping[str, Any], cluster: str | None = None) -> str:
    """``[<cluster> ]<Kind> <namespace>/<name>`` (``<Kind> <name>`` when cluster-scoped)."""
    meta = obj.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
    return f"{cluster + ' ' if cluster else ''}{obj.get('kind') or 'object'} {where}"


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
    LABEL_FLEET,
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
#: The ConfigMap recording, on a cluster, the plan it was last applied with (plan.plan_record_object).
LABEL_PLAN_RECORD = "gpufleet.io/plan-record"
PLAN_RECORD_OWNER: dict[str, str] = {**SERVING_OWNER, LABEL_PLAN_RECORD: "true"}
# Model caches (design.md §5)
LABEL_CACHE = "gpufleet.io/cache"
ANNOTATION_SOURCE = "gpufleet.io/source"
ANNOTATION_REVISION = "gpufleet.io/revision"
#: Set on the PVC (apply mode) to the name of the Job that hydrated it, once that Job succeeded.
ANNOTATION_HYDRATED_BY = "gpufleet.io/hydrated-by"
#: Set on the PVC with hydrated-by: the source (``<uri>@<revision>``) the volume holds, and how many seconds its
#: hydration took. Placement prefers clusters whose volume holds the cache's current source (warm_first.py).
ANNOTATION_HYDRATED_SOURCE = "gpufleet.io/hydrated-source"
ANNOTATION_HYDRATION_SECONDS = "gpufleet.io/hydration-seconds"
#: Apply mode: the digest of the rendered object last server-side applied (fleet.reconcile.is_current skips re-applying
#: an object that carries the digest of the same rendering and still holds every value it sets).
ANNOTATION_APPLIED_DIGEST = "gpufleet.io/applied-digest"
#: The node label of a provisioned cluster's system (non-GPU) pool (gke_cluster, eks_cluster).
LABEL_SYSTEM_POOL = "gpufleet.io/system"
#: The label naming which part of the serving stack an object belongs to (serving_stack).
LABEL_STACK_PART = "gpufleet.io/stack-component"
#: The node label a pool's nodes carry (set by the cluster roles and the local fleet); serving pods select it.
NODE_POOL_LABEL = "gpufleet.io/pool"
#: The node label naming the capacity a provisioned pool's nodes run on: the rung of its capacity ladder provisioning
#: got (docs/provisioning.md, "Capacity ladder"), one of ``CAPACITY_RUNGS``; set by gke_cluster / eks_cluster on every
#: GPU pool they create (a pool without a ladder has one rung, from its class).
LABEL_CAPACITY_RUNG = "gpufleet.io/capacity-rung"
#: The rung kinds, from the most to the least assured capacity.
CAPACITY_RUNGS: tuple[str, ...] = ("reservation", "flex-start", "spot", "on-demand")

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
