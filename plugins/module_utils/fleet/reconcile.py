# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Every cluster of the fleet at once: read, and reconcile (apply, wait, prune) in one process.

Apply mode used to cost about eleven kubernetes.core module processes per cluster and run (read, namespaces, apply,
wait, one list per kind to prune, deletes), about a second of CPU each. Here the whole fleet is one controller-side
step: one client per cluster (kubernetes.core's ``get_api_client``, so its authentication options and environment
variables apply unchanged), a thread per cluster, and the phases in lockstep across clusters:

1. **apply**: list the owned objects of every serving kind (one list per kind); create missing namespaces; server-side
   apply every rendered object that is not already current (:func:`is_current`);
2. **wait**: poll each cluster's workloads until their own replica counts say ready (:mod:`.readiness`), or time out;
3. **prune**: delete owned objects no longer rendered, except those of *held* deployments (:func:`held_deployments`):
   a deployment with a workload not ready, or with objects on a cluster whose apply failed, keeps its old replicas
   everywhere this run, so a drain never deletes an old replica before its replacement is ready. A deployment whose
   only changes are removals (a scale-down) is pruned *before* the wait instead (:func:`removals_first`): what it
   frees may be what another deployment's new replica on that cluster needs. A reconcile that deletes nothing
   (``prune`` false: the first stage of an apply routed by a hub, which stops routing to a replica before it is
   deleted) does not await what is new on a cluster where such removals wait: it looks once and reports it pending.

Apply and wait run in **waves** (:mod:`.rollout`): a workload whose spec changes restarts its replica, so of each
deployment's such updates at most ``rollout.max_unavailable`` replicas are applied per wave, fleet-wide, and each wave
is awaited before the next; a deployment with a replica that does not become ready stops there (its later waves are
never applied) and is held.

The decisions (what is current, what is held, what is pruned) are pure functions of what was read, unit-tested
without a cluster; the I/O is exercised against real control planes by ``tests/e2e``.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ANNOTATION_APPLIED_DIGEST,
    LABEL_DEPLOYMENT,
    LABEL_FLEET,
    LABEL_REPLICA,
    FleetIdentity,
    object_labels,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.lazy_kubernetes import defer_generated_classes
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import Quantity, QuantityError, parse_quantity
from ansible_collections.gpufleet.serving.plugins.module_utils.readiness import (
    PREDICATES,
    not_ready,
    pending_workloads,
    unreported,
    wait_ready,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.redact import redact_text
from ansible_collections.gpufleet.serving.plugins.module_utils.rollout import (
    Change,
    DeploymentRollout,
    plan_waves,
    replica_unit,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.rollout import report as rollout_report

# Imported when this file is: the action plugins import it at the top, and Ansible imports action plugins in the
# ansible-playbook process before it forks a worker per task, so the kubernetes package is imported once per run
# instead of once per task, and without the generated API and model classes the dynamic client does not use
# (lazy_kubernetes: 0.3 s less to import, and less for the process to carry to its exit).
try:
    defer_generated_classes()
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as _K8S_CLIENT
    from kubernetes.dynamic.resource import Resource as _Resource

    _K8S_IMPORT_ERROR = ""
except ImportError as _exc:  # pragma: no cover - the collection's requirements name both
    _K8S_CLIENT = None
    _Resource = None
    _K8S_IMPORT_ERROR = str(_exc)

Obj = dict[str, Any]
# Ask the API server for metadata only (what `kubectl get -o name` and the metadata informers ask for).
_PARTIAL_METADATA = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name
T = TypeVar("T")


class ClusterError(GpufleetError):
    """A cluster could not be reached or refused a request."""


# --------------------------------------------------------------------------------------------------------------------
# Pure decisions
# --------------------------------------------------------------------------------------------------------------------


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))


def describe(key: Key) -> str:
    return f"{key[1]}/{key[2]}/{key[3]}" if key[2] else f"{key[1]}/{key[3]}"


def applied_digest(obj: Mapping[str, Any]) -> str:
    """A digest of a rendered object (its own digest annotation left out): what the last apply sent."""
    meta = dict(obj.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != ANNOTATION_APPLIED_DIGEST}
    meta["annotations"] = annotations
    canonical = json.dumps({**obj, "metadata": meta}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def stamped(obj: Mapping[str, Any]) -> Obj:
    """``obj`` with the digest annotation set: what is server-side applied."""
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_APPLIED_DIGEST: applied_digest(obj)}
    return {**obj, "metadata": meta}


#: Maps whose every value is a Kubernetes quantity (container and pod ``resources``, a PVC's ``resources``, DRA
#: ``capacity``: ``requests`` / ``limits``; a RuntimeClass' ``overhead`` is ``podFixed``, left out: not rendered).
QUANTITY_MAPS = frozenset({"requests", "limits"})
#: Fields whose value is a quantity (an ``emptyDir``'s ``sizeLimit``).
QUANTITY_FIELDS = frozenset({"sizeLimit"})
#: What structured-merge-diff never records in a manager's field set: the object's identity (matched by key instead).
_UNTRACKED_TOP = frozenset({"apiVersion", "kind"})
_UNTRACKED_META = frozenset({"name", "namespace"})


def _as_quantity(value: Any) -> Quantity | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    try:
        return parse_quantity(value if isinstance(value, str) else str(value))
    except QuantityError:
        return None


def same_value(live: Any, want: Any, quantity: bool = False) -> bool:
    """``live`` holds the scalar ``want``: equal and of the same type, or, where the value is a ``quantity`` (or
    ``want`` is a number the API server stored as a string), the same Kubernetes quantity (``2`` is ``"2"``, ``"0.5"``
    is ``"500m"``, ``"1024Mi"`` is ``"1Gi"``)."""
    if type(live) is type(want) and live == want:
        return True
    if isinstance(live, bool) or isinstance(want, bool):
        return False
    if quantity or (isinstance(want, (int, float)) and isinstance(live, str)):
        a, b = _as_quantity(live), _as_quantity(want)
        return a is not None and b is not None and a == b
    return False


def _list_keys(owned: Mapping[str, Any] | None) -> tuple[list[tuple[dict[str, Any], Any]], list[Any]]:
    """The items a manager owns in a list, from its field set: ``k:{...}`` (a list Kubernetes merges by key: each key
    and the item's own field set) and ``v:...`` (a set: the values)."""
    keyed: list[tuple[dict[str, Any], Any]] = []
    values: list[Any] = []
    for name, sub in (owned or {}).items():
        if name.startswith("k:"):
            key = json.loads(name[2:])
            if isinstance(key, dict):
                keyed.append((key, sub))
        elif name.startswith("v:"):
            values.append(json.loads(name[2:]))
    return keyed, values


def _key_matches(item: Mapping[str, Any], key: Mapping[str, Any], partial: bool) -> bool:
    """``item`` has ``key``'s fields (with ``partial``, those it sets; the others are defaulted, as a port's
    ``protocol``)."""
    return all((partial and k not in item) or (k in item and same_value(item[k], v)) for k, v in key.items())


def _owned_entry(item: Any, keyed: list[tuple[dict[str, Any], Any]]) -> tuple[dict[str, Any], Any] | None:
    """The owned ``k:`` entry of one of our list items: its key exactly, or else the only one it matches when a key
    field is left to its default; None when there is none (or no single one)."""
    if not isinstance(item, dict):
        return None
    for partial in (False, True):
        found = [entry for entry in keyed if _key_matches(item, entry[0], partial)]
        if len(found) == 1:
            return found[0]
        if found:
            return None
    return None


def _holds(live: Any, want: Any, owned: Mapping[str, Any] | None, quantity: bool = False, key: str = "") -> bool:
    """``live`` holds every value of ``want`` and, when ``owned`` (a manager's field set at this point, managedFields'
    ``fieldsV1``) is given, the manager still owns every field of ``want``; ``key`` is the field ``want`` is the value
    of. See :func:`holds`."""
    if isinstance(want, dict):
        if not isinstance(live, dict):
            return False
        for k, v in want.items():
            if owned is not None and (v is None or (isinstance(v, (dict, list)) and not v)):
                # Null, or an empty map or list: nothing in it to own, and the API server may drop it (omitempty).
                if not _holds_empty(live.get(k), v, owned.get(f"f:{k}")):
                    return False
                continue
            if k not in live:
                return False
            sub = None
            if owned is not None:
                sub = owned.get(f"f:{k}")
                if sub is None:
                    return False
                if not sub:
                    sub = None  # an atomic map or list (a label selector, tolerations): owned as a whole, by value
            if not _holds(live[k], v, sub, key in QUANTITY_MAPS or k in QUANTITY_FIELDS, k):
                return False
        return True
    if isinstance(want, list):
        if not isinstance(live, list):
            return False
        keyed, values = _list_keys(owned)
        if keyed:
            # Merged by key: each of our items, found by its key, still ours and holding our values; items of other
            # managers are not ours to judge.
            for item in want:
                entry = _owned_entry(item, keyed)
                if entry is None:
                    return False
                match = [x for x in live if isinstance(x, dict) and _key_matches(x, entry[0], partial=False)]
                if len(match) != 1 or not _holds(match[0], item, entry[1]):
                    return False
            return True
        if values:  # a set: each of our values is still a member
            return all(any(same_value(x, w) for x in values) and any(same_value(x, w) for x in live) for w in want)
        # Atomic (owned as a whole, or no field set below this point): the same items in the same order.
        return len(live) == len(want) and all(_holds(a, b, None) for a, b in zip(live, want, strict=True))
    return same_value(live, want, quantity)


def _holds_empty(live: Any, want: Any, owned: Any) -> bool:
    """An empty (or null) value of ours, as stored: absent or null (dropped), the same kind of value, and an atomic
    list we own still empty (another manager's items in a list merged by key are theirs)."""
    if live is None:
        return True
    if want is None or type(live) is not type(want):
        return False
    return not (isinstance(live, list) and live and owned is not None and not any(_list_keys(owned)))


def contains(live: Any, want: Any) -> bool:
    """Every field of ``want`` has the same value in ``live`` (extra fields in ``live`` are defaults or other managers'
    fields). Lists must have the same length and contain item by item; scalars must be equal and of the same type,
    or the same quantity where the value is one (:func:`same_value`)."""
    return _holds(live, want, None)


def applied_fields(live: Mapping[str, Any], field_manager: str) -> dict[str, Any] | None:
    """The field set (``fieldsV1``) ``field_manager`` owns in ``live`` through server-side apply, from the object's
    ``metadata.managedFields`` (the main resource's entry; a status subresource's is not ours); None when it owns
    nothing there."""
    entries = [
        e
        for e in (live.get("metadata") or {}).get("managedFields") or []
        if e.get("manager") == field_manager and e.get("operation") == "Apply" and not e.get("subresource")
    ]
    if not entries:
        return None
    merged: dict[str, Any] = {}
    for entry in entries:
        _merge_fields(merged, entry.get("fieldsV1") or {})
    return merged


def _merge_fields(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    for k, v in more.items():
        if isinstance(v, Mapping):
            _merge_fields(into.setdefault(k, {}), v)


def holds(live: Mapping[str, Any], want: Mapping[str, Any], owned: Mapping[str, Any]) -> bool:
    """``live`` still holds every value of ``want`` and the field set ``owned`` (:func:`applied_fields`) still has
    every field ``want`` sets: nobody changed or took one of them.

    Judged on the fields we manage, as server-side apply merges: a list Kubernetes merges by key (its field set names
    the items by ``k:{...}``: containers by name, env by name, ports by containerPort and protocol, volumes by name,
    volumeMounts by mountPath, ...) must hold each of our items, found by key, and items of other managers (``kubectl
    set env``, a mutating webhook) are ignored; an atomic list (args, command, tolerations, ...) must be the same. A
    field another manager changed is no longer in our set (an update that changes a field takes it from its
    appliers), so it is not current even where the value reads the same. Quantities compare as quantities."""
    body = {k: v for k, v in want.items() if k not in _UNTRACKED_TOP and k != "metadata"}
    meta = {k: v for k, v in (want.get("metadata") or {}).items() if k not in _UNTRACKED_META}
    if meta:
        body["metadata"] = meta
    return _holds(live, body, owned)


def is_current(live: Mapping[str, Any] | None, desired: Mapping[str, Any], field_manager: str) -> bool:
    """True when applying ``desired`` (a :func:`stamped` object) as ``field_manager`` would change nothing: ``live``
    carries the digest of the same rendered object (so the set of fields the last apply sent is the same), the
    manager still owns every field it sets (``metadata.managedFields``: a field somebody else changed or removed
    since is not), and ``live`` still holds every value (:func:`holds`). Fields and list items that other managers
    added are not ours to judge: they make no apply."""
    if live is None:
        return False
    want = ((desired.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_APPLIED_DIGEST)
    got = ((live.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_APPLIED_DIGEST)
    if want is None or want != got:
        return False
    owned = applied_fields(live, field_manager)
    return owned is not None and holds(live, desired, owned)


def deployment_of(obj: Mapping[str, Any]) -> str | None:
    label = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_DEPLOYMENT)
    return str(label) if label else None


def held_deployments(
    desired: Mapping[str, list[Obj]], failed: Iterable[str], pending: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Deployments none of whose objects may be deleted this run: those with objects on a cluster that ``failed``
    to apply, and those of a ``pending`` (not ready) workload."""
    held = {d for cluster in failed for d in map(deployment_of, desired.get(cluster, [])) if d}
    held |= {str(p["deployment"]) for p in pending if p.get("deployment")}
    return sorted(held)


def prune_candidates(
    existing: Iterable[Mapping[str, Any]],
    desired: Iterable[Mapping[str, Any]],
    held: Iterable[str],
    keep: Iterable[Key] = (),
) -> list[Mapping[str, Any]]:
    """Owned objects ``existing`` on a cluster that are no longer rendered for it, minus those of ``held``
    deployments and those ``keep`` names, in the order listed (the prune order of the kinds)."""
    kept = {key_of(o) for o in desired} | set(keep)
    held_set = set(held)
    return [o for o in existing if key_of(o) not in kept and deployment_of(o) not in held_set]


def removals_first(
    existing: Mapping[str, Iterable[Mapping[str, Any]]],
    desired: Mapping[str, Iterable[Mapping[str, Any]]],
    changes: Iterable[Change],
    not_ready: Iterable[str],
    held: Iterable[str],
    keep: Mapping[str, Iterable[Key]] | None = None,
) -> dict[str, list[Mapping[str, Any]]]:
    """Per cluster, the owned objects to delete *before* anything is awaited: the dropped objects of deployments
    whose every change this run is a removal (a scale-down, a replica the placement no longer wants), whose remaining
    workloads are all Ready, and which nothing else holds (``held``: a failure, an unreadable placement record, the
    caller's holds). The final prune would delete them anyway; deleting them first frees the devices they hold, so a
    new replica of another deployment placed on those nodes in the same run can start instead of waiting out the
    timeout. A deployment that also creates or updates a workload anywhere (a move, a rollout) keeps its old objects
    until the new ones are Ready, as before; ``not_ready``: deployments with a workload that is not Ready now."""
    holding = set(held) | set(not_ready)
    live = {cluster: {key_of(o) for o in listed} for cluster, listed in existing.items()}
    for change in changes:
        if change.deployment is None or change.key[1] not in PREDICATES:
            continue
        created = change.key not in live.get(change.cluster, set())
        if created or change.update:
            holding.add(change.deployment)
    first: dict[str, list[Mapping[str, Any]]] = {}
    for cluster, listed in existing.items():
        candidates = prune_candidates(listed, desired.get(cluster, []), holding, (keep or {}).get(cluster, ()))
        found = [o for o in candidates if deployment_of(o) is not None]
        if found:
            first[cluster] = found
    return first


def skipped_holds(skipped: Iterable[Mapping[str, Any]]) -> tuple[list[str], dict[str, list[Key]]]:
    """What the objects placement skipped (``fleet_placement``'s ``skipped``: their placement annotation could not be
    read, so their replicas were not counted) hold back from pruning: their deployments everywhere, and, for an
    object that names no deployment, the object itself on its cluster."""
    held: set[str] = set()
    keep: dict[str, list[Key]] = {}
    for s in skipped:
        if s.get("deployment"):
            held.add(str(s["deployment"]))
        else:
            key = (str(s.get("api_version") or "v1"), str(s["kind"]), str(s.get("namespace") or ""), str(s["name"]))
            keep.setdefault(str(s["cluster"]), []).append(key)
    return sorted(held), keep


def recorded_placement(
    replicas: Iterable[Mapping[str, Any]], previous: Iterable[Mapping[str, Any]], failed: Iterable[str]
) -> list[dict[str, Any]]:
    """The placement state to keep for the next run (which uses it for clusters it cannot read): this run's replicas
    of every cluster but those that ``failed`` to reconcile, whose replicas stay as last recorded (what this run
    placed there may never have been applied)."""
    failed_set = set(failed)
    return [dict(r) for r in replicas if r.get("cluster") not in failed_set] + [
        dict(r) for r in previous if r.get("cluster") in failed_set
    ]


# --------------------------------------------------------------------------------------------------------------------
# One cluster's API
# --------------------------------------------------------------------------------------------------------------------


def _k8s() -> Any:
    if _K8S_CLIENT is None:
        raise GpufleetError(
            f"the kubernetes.core collection and the kubernetes Python package are required ({_K8S_IMPORT_ERROR})"
        )
    return _K8S_CLIENT


def _reason(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    if body:
        try:
            message = json.loads(body).get("message")
        except (TypeError, ValueError, AttributeError):
            message = None
        text = f"{status}: {message or body}" if status else str(message or body)
    else:
        text = str(exc) or type(exc).__name__
    # An API server or proxy may echo a URL with credentials or a token in its message: never show it.
    text = redact_text(text)
    return text if len(text) < 400 else text[:400] + "…"


class ClusterAPI:
    """One cluster, through kubernetes.core's client (its auth options: kubeconfig, context, host, api_key, …).

    Create instances one at a time (kubernetes' kubeconfig loader sets process-wide defaults); afterwards an instance
    may be used from one thread while other instances are used from others.
    """

    def __init__(self, name: str, connection: Mapping[str, Any], request_timeout: float = 30) -> None:
        self.name = name
        self._timeout = request_timeout
        self._resources: dict[tuple[str, str], Any] = {}
        self._group_versions: dict[str, list[dict[str, Any]]] = {}
        try:
            self._dyn = _k8s().get_api_client(**dict(connection)).client  # kubernetes' DynamicClient
        except Exception as exc:  # any failure to build a client means the cluster is unusable
            raise ClusterError(f"cannot build a client: {_reason(exc)}") from None
        self.requests = 0

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.requests += 1
        try:
            return fn(*args, _request_timeout=self._timeout, **kwargs)
        except Exception as exc:  # every API/transport error becomes this cluster's failure
            if type(exc).__name__ == "NotFoundError":
                raise
            raise ClusterError(f"{what}: {_reason(exc)}") from None

    def resource(self, api_version: str, kind: str) -> Any | None:
        """The API resource of a kind, or None when the cluster does not serve it (its CRD is not installed).

        Discovery reads the one group version's resource list (``/api/v1`` or ``/apis/<group>/<version>``), once per
        group version and instance. kubernetes.core's discoverer (kubernetes' ``LazyDiscoverer``) rewrites its whole
        cache file after each group it fetches and, for a kind that is not served, invalidates the cache and fetches
        every group again: about 50 ms per cluster and task for the six serving kinds, against 6 ms here.
        """
        cache_key = (api_version, kind)
        if cache_key not in self._resources:
            found = [r for r in self._group_version(api_version) if r.get("kind") == kind and "/" not in r["name"]]
            self._resources[cache_key] = (
                _Resource(
                    prefix="api" if api_version == "v1" else "apis",
                    group=api_version.rpartition("/")[0],
                    api_version=api_version.rpartition("/")[2],
                    kind=kind,
                    namespaced=bool(found[0].get("namespaced")),
                    name=found[0]["name"],
                    verbs=found[0].get("verbs"),
                )
                if found
                else None
            )
        return self._resources[cache_key]

    def _group_version(self, api_version: str) -> list[dict[str, Any]]:
        """The resources a group version serves (none when the cluster does not serve it)."""
        if api_version not in self._group_versions:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            try:
                resp = self._call(f"discovery of {api_version}", self._dyn.request, "GET", path, serialize=False)
                self._group_versions[api_version] = list(json.loads(resp.data).get("resources") or [])
            except Exception as exc:
                if type(exc).__name__ != "NotFoundError":
                    raise
                self._group_versions[api_version] = []
        return self._group_versions[api_version]

    def list(
        self,
        api_version: str,
        kind: str,
        selector: Iterable[str] = (),
        metadata_only: bool = False,
        managed_by: str | None = None,
    ) -> list[Obj]:
        """Every object of a kind in every namespace matching the label ``selector`` (``["k=v", ...]``); a kind the
        cluster does not serve has none. With ``metadata_only``, the API server sends each object's metadata only
        (``PartialObjectMetadataList``), returned as ``{apiVersion, kind, metadata}`` of the listed kind.
        ``metadata.managedFields`` is dropped, but for the server-side apply entries of field manager ``managed_by``
        (what :func:`is_current` reads; the list carries them anyway, so keeping them costs no request)."""
        res = self.resource(api_version, kind)
        if res is None:
            return []
        headers = {"Accept": _PARTIAL_METADATA} if metadata_only else {}
        items: list[Obj] = []
        token: str | None = None
        while True:
            resp = self._call(
                f"list {kind}",
                self._dyn.get,
                res,
                label_selector=",".join(selector) or None,
                limit=500,
                _continue=token,
                serialize=False,
                header_params=headers,
            )
            body = json.loads(resp.data)
            for item in body.get("items") or []:
                meta = item.get("metadata") or {}
                managed = meta.pop("managedFields", None)  # large; only our own apply entries are of use
                if managed_by and managed:
                    meta["managedFields"] = [
                        e for e in managed if e.get("manager") == managed_by and e.get("operation") == "Apply"
                    ]
                if metadata_only:
                    item = {"apiVersion": api_version, "kind": kind, "metadata": item.get("metadata") or {}}
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item)
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return items

    def ensure_namespace(self, name: str, dry_run: bool = False) -> bool:
        """Create namespace ``name`` when it is missing (never applied, labelled or pruned); True when created."""
        res = self.resource("v1", "Namespace")
        try:
            self._call(f"read Namespace {name}", self._dyn.get, res, name=name, serialize=False)
            return False
        except Exception as exc:
            if type(exc).__name__ != "NotFoundError":
                raise
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        try:
            self._call(
                f"create Namespace {name}",
                self._dyn.create,
                res,
                body=body,
                dry_run="All" if dry_run else None,
                serialize=False,
            )
        except ClusterError as exc:
            if "409" not in str(exc):  # created meanwhile
                raise
        return True

    def apply(self, obj: Mapping[str, Any], field_manager: str, dry_run: bool = False) -> Obj:
        """Server-side apply ``obj`` (conflicts forced: the collection owns what it renders); the object as stored."""
        api_version, kind, namespace, name = key_of(obj)
        res = self.resource(api_version, kind)
        if res is None:
            raise ClusterError(f"{api_version} {kind} is not served by this cluster (is its CRD installed?)")
        resp = self._call(
            f"apply {describe(key_of(obj))}",
            self._dyn.server_side_apply,
            res,
            body=dict(obj),
            name=name,
            namespace=namespace or None,
            force_conflicts=True,
            field_manager=field_manager,
            dry_run="All" if dry_run else None,
            serialize=False,
        )
        return dict(json.loads(resp.data))

    def delete(self, obj: Mapping[str, Any]) -> None:
        """Delete ``obj`` (dependents in the background, as kubectl does); one already gone is fine."""
        api_version, kind, namespace, name = key_of(obj)
        res = self.resource(api_version, kind)
        if res is None:
            return
        try:
            self._call(
                f"delete {describe(key_of(obj))}",
                self._dyn.delete,
                res,
                name=name,
                namespace=namespace or None,
                propagation_policy="Background",
                serialize=False,
            )
        except Exception as exc:
            if type(exc).__name__ != "NotFoundError":
                raise


def connect(
    connections: Mapping[str, Mapping[str, Any]], request_timeout: float
) -> tuple[dict[str, ClusterAPI], dict[str, str]]:
    """A client per cluster (built one after another), and the clusters whose client could not be built."""
    apis: dict[str, ClusterAPI] = {}
    errors: dict[str, str] = {}
    for name, connection in connections.items():
        try:
            apis[name] = ClusterAPI(name, connection, request_timeout)
        except ClusterError as exc:
            errors[name] = str(exc)
    return apis, errors


def _each(fn: Callable[[str], T], names: Iterable[str]) -> dict[str, T | ClusterError]:
    """``fn(name)`` for every cluster, a thread each; a cluster's ClusterError is its result, not the fleet's."""
    names = list(names)

    def guarded(name: str) -> T | ClusterError:
        try:
            return fn(name)
        except ClusterError as exc:
            return exc

    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=min(len(names), 16), thread_name_prefix="gpufleet-cluster") as pool:
        return dict(zip(names, pool.map(guarded, names), strict=True))


# --------------------------------------------------------------------------------------------------------------------
# Read every cluster
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    api_version: str
    kind: str
    label_selectors: tuple[str, ...] = ()
    metadata_only: bool = False


def read_fleet(apis: Mapping[str, ClusterAPI], reads: list[Read]) -> tuple[dict[str, list[list[Obj]]], dict[str, str]]:
    """One list per read per cluster, clusters in parallel: for each reachable cluster, the objects of each read (in
    the order of ``reads``), and why each other cluster could not be read."""

    def read(name: str) -> list[list[Obj]]:
        api = apis[name]
        return [api.list(r.api_version, r.kind, r.label_selectors, r.metadata_only) for r in reads]

    objects: dict[str, list[list[Obj]]] = {}
    errors: dict[str, str] = {}
    for name, result in _each(read, apis).items():
        if isinstance(result, ClusterError):
            errors[name] = str(result)
        else:
            objects[name] = result
    return objects, errors


# --------------------------------------------------------------------------------------------------------------------
# Reconcile every cluster
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class ReconcileOptions:
    #: Every kind the collection may have applied, in prune order (``backends.serving_kinds()``).
    kinds: list[tuple[str, str]]
    #: Label selectors of the objects the collection owns (``contract.selector(SERVING_OWNER)``), of every fleet.
    owner_selector: list[str]
    field_manager: str = "gpufleet"
    wait: bool = True
    timeout: float = 900
    poll_interval: float = 2
    check_mode: bool = False
    #: Deployments none of whose objects may be pruned this run (besides those held for readiness or a failure).
    hold: list[str] = field(default_factory=list)
    #: Per cluster, objects never to prune this run.
    keep: dict[str, list[Key]] = field(default_factory=dict)
    #: False: apply and wait, delete nothing (a play narrower than the fleet, see the model_deployment role).
    prune: bool = True
    #: The fleet this run reconciles: only its objects are pruned or taken as current (:func:`fleet_objects`).
    fleet: FleetIdentity | None = None
    #: Each deployment's ``rollout.max_unavailable`` (:mod:`.rollout`); a deployment not named gets the default.
    max_unavailable: dict[str, int] = field(default_factory=dict)


@dataclass
class ClusterOutcome:
    applied: list[str] = field(default_factory=list)
    unchanged: int = 0
    namespaces: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    pending: list[dict[str, str]] = field(default_factory=list)
    polls: int = 0
    requests: int = 0
    failed: str | None = None
    #: Owned objects found before applying (prune candidates); not returned.
    existing: list[Obj] = field(default_factory=list, repr=False)
    #: The objects to apply (stamped: not current), by key, and what each is (:class:`.rollout.Change`); not returned.
    todo: dict[Key, Obj] = field(default_factory=dict, repr=False)
    changes: list[Change] = field(default_factory=list, repr=False)
    #: The deployment's replicas (``<cluster>/<replica>``) whose workload is not Ready before this run; not returned.
    unready: dict[str, set[str]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "changed": bool(self.applied or self.namespaces or self.deleted),
            "applied": self.applied,
            "unchanged": self.unchanged,
            "namespaces": self.namespaces,
            "deleted": self.deleted,
            "pending": self.pending,
            "polls": self.polls,
            "requests": self.requests,
            "failed": self.failed,
        }


def fleet_objects(listed: list[Obj], desired: Iterable[Mapping[str, Any]], fleet: FleetIdentity | None) -> list[Obj]:
    """The owned objects ``listed`` on a cluster that are ``fleet``'s (all of them without a fleet): what may be pruned
    and what is judged current. Raises :class:`ClusterError` (the cluster is not changed) when an unlabelled object
    nobody decided about is there, or when an object to apply is another fleet's (two fleets would share it)."""
    if fleet is None:
        return listed
    split = fleet.split(listed, object_labels)
    if split.undecided:
        raise ClusterError(str(fleet.unlabelled_error(describe(key_of(o)) for o in split.undecided)))
    others = {key_of(o): o for o in split.other}
    clashes = []
    for obj in desired:
        other = others.get(key_of(obj))
        if other is not None:
            whose = object_labels(other).get(LABEL_FLEET)
            clashes.append(
                f"{describe(key_of(obj))} (fleet {whose})" if whose else f"{describe(key_of(obj))} (no fleet)"
            )
    if clashes:
        raise ClusterError(
            f"objects of another fleet have the names this fleet ({fleet.name}) would apply: {', '.join(clashes)}. "
            "Nothing was applied to this cluster. Fleets that share a cluster need different deployment names or "
            "namespaces (or different inventory names for the cluster)."
        )
    return split.mine


def _replica_of(objects: Iterable[Mapping[str, Any]], pending: Mapping[str, str]) -> str:
    """The replica a pending workload serves (its ``gpufleet.io/replica`` label), or the workload."""
    for o in objects:
        k = key_of(o)
        if (k[1], k[2], k[3]) == (pending.get("kind"), pending.get("namespace"), pending.get("name")):
            replica = object_labels(o).get(LABEL_REPLICA)
            if replica:
                return f"replica {replica}"
    return f"{pending.get('kind')} {pending.get('namespace')}/{pending.get('name')}"


def _apply_cluster(
    api: ClusterAPI, objects: list[Obj], opts: ReconcileOptions, out: ClusterOutcome, cluster: str = ""
) -> None:
    listed = [
        obj
        for api_version, kind in opts.kinds
        for obj in api.list(api_version, kind, opts.owner_selector, managed_by=opts.field_manager)
    ]
    # Fleet identity: another fleet's objects on a shared cluster are never pruned, nor taken over.
    out.existing = fleet_objects(listed, objects, opts.fleet)
    live = {key_of(o): o for o in out.existing}
    # An owned object listed in a namespace proves the namespace exists; the others are read and created if missing.
    have = {key[2] for key in live}
    for namespace in sorted({key_of(o)[2] for o in objects} - have - {""}):
        if api.ensure_namespace(namespace, dry_run=opts.check_mode):
            out.namespaces.append(namespace)
    # What to apply is decided here; when is the rollout's (the waves, across clusters): see reconcile_fleet.
    for obj in objects:
        want = stamped(obj)
        key = key_of(want)
        before = live.get(key)
        if is_current(before, want, opts.field_manager):
            out.unchanged += 1
        else:
            out.todo[key] = want
            out.changes.append(change_of(cluster, before, want, opts.field_manager))
        if before is not None and not_ready(before) is not None:
            labels = object_labels(want)
            if labels.get(LABEL_DEPLOYMENT):
                unit = replica_unit(cluster, str(labels.get(LABEL_REPLICA) or key[3]))
                out.unready.setdefault(str(labels[LABEL_DEPLOYMENT]), set()).add(unit)


def change_of(cluster: str, live: Mapping[str, Any] | None, want: Mapping[str, Any], field_manager: str) -> Change:
    """What applying ``want`` over ``live`` is for the rollout: an *update* when a workload that exists changes its
    ``spec`` (its pods restart); a creation, another kind, or a change to the object's own metadata only is not."""
    labels = object_labels(want)
    key = key_of(want)
    update = False
    if live is not None and key[1] in PREDICATES:
        owned = applied_fields(live, field_manager)
        update = owned is None or not holds(live, {"spec": want.get("spec")}, owned)
    return Change(
        cluster=cluster,
        key=key,
        deployment=str(labels[LABEL_DEPLOYMENT]) if labels.get(LABEL_DEPLOYMENT) else None,
        replica=str(labels.get(LABEL_REPLICA) or ""),
        update=update,
    )


def _apply_wave(api: ClusterAPI, keys: list[Key], opts: ReconcileOptions, out: ClusterOutcome) -> dict[Key, str]:
    """Apply the objects ``keys`` names (from ``out.todo``); the workloads whose stored status cannot tell yet whether
    the change is rolled out (:func:`.readiness.unreported`), with the resourceVersion the apply stored."""
    live = {key_of(o): o for o in out.existing}
    stale: dict[Key, str] = {}
    for key in keys:
        stored = api.apply(out.todo[key], opts.field_manager, dry_run=opts.check_mode)
        out.applied.append(describe(key))
        if isinstance(stored, Mapping) and unreported(stored, live.get(key)):
            stale[key] = str((stored.get("metadata") or {}).get("resourceVersion"))
    return stale


def _wait_cluster(
    api: ClusterAPI,
    objects: list[Obj],
    opts: ReconcileOptions,
    out: ClusterOutcome,
    clock: Callable[[], float],
    applied: bool = True,
    stale: Mapping[Key, str] | None = None,
    timeout: float | None = None,
) -> list[dict[str, str]]:
    """Wait until ``objects``' workloads are ready (or the timeout: ``opts.timeout`` unless ``timeout`` is given; 0
    looks once); those that are not. Without ``applied`` (nothing written on this cluster before this wait), what was
    listed before is current: poll only when something of it is not ready yet."""
    if not applied:
        pending = pending_workloads(out.existing, objects)
        if not pending:
            return []
    pending, polls = wait_ready(
        lambda api_version, kind: api.list(api_version, kind, opts.owner_selector),
        objects,
        opts.timeout if timeout is None else timeout,
        opts.poll_interval,
        time.sleep,
        clock,
        stale=stale,
    )
    out.polls += polls
    return pending


@dataclass
class _Wave:
    """One wave of a rollout on every cluster: apply its objects, then wait for everything applied so far."""

    apis: Mapping[str, ClusterAPI]
    desired: Mapping[str, list[Obj]]
    opts: ReconcileOptions
    outcomes: dict[str, ClusterOutcome]
    clock: Callable[[], float]
    index: int
    #: Per cluster, the keys to apply in this wave.
    keys: dict[str, list[Key]]
    #: Per cluster, the keys of later waves: their old objects stay, not waited for.
    held_back: dict[str, set[Key]]
    #: Deployments whose rollout stopped: not applied, not waited for.
    skip: set[str] = field(default_factory=set)
    #: Clusters whose workloads are looked at once, not awaited (:func:`reconcile_fleet`: removals wait for the prune).
    defer: set[str] = field(default_factory=set)
    stale: dict[str, dict[Key, str]] = field(default_factory=dict)
    pending: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def apply(self, name: str) -> None:
        self.stale[name] = _apply_wave(self.apis[name], self.keys.get(name, []), self.opts, self.outcomes[name])

    def wait(self, name: str) -> None:
        applied = bool(self.keys.get(name))
        if self.index and not applied:
            return  # nothing applied here in this wave: what was waited for before is ready
        objects = [
            o
            for o in self.desired.get(name, [])
            if key_of(o) not in self.held_back.get(name, ()) and deployment_of(o) not in self.skip
        ]
        self.pending[name] = _wait_cluster(
            self.apis[name],
            objects,
            self.opts,
            self.outcomes[name],
            self.clock,
            applied=applied,
            stale=self.stale.get(name),
            timeout=0 if name in self.defer else None,
        )


def reconcile_fleet(
    apis: Mapping[str, ClusterAPI],
    desired: Mapping[str, list[Obj]],
    opts: ReconcileOptions,
    lost: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    report: list[DeploymentRollout] | None = None,
) -> tuple[dict[str, ClusterOutcome], list[str]]:
    """Apply, wait and prune on every cluster of ``apis`` in lockstep; each cluster's outcome and the held
    deployments. A cluster's failure (unreachable, a request refused) is recorded in its outcome and holds back
    the pruning of its deployments everywhere; it never stops the other clusters. ``lost`` names clusters to
    reconcile whose client could not be built (they count as failed to apply). Changed workloads are applied in the
    waves of :func:`.rollout.plan_waves`; ``report`` (when given) receives what each deployment's rollout did."""
    outcomes = {name: ClusterOutcome() for name in apis}
    for name, why in (lost or {}).items():
        outcomes[name] = ClusterOutcome(failed=why)

    def run_phase(phase: Callable[[str], None], names: Iterable[str]) -> None:
        for name, result in _each(phase, names).items():
            if isinstance(result, ClusterError):
                outcomes[name].failed = str(result)

    # List every cluster and decide what is not current, then apply it in waves (.rollout): of a deployment's
    # workloads whose spec changes, at most rollout.max_unavailable replicas a wave, fleet-wide; everything else in
    # the first. After each wave, wait until everything applied so far is ready; a deployment with a workload that is
    # not (or with objects on a cluster that failed) stops there: its later waves are never applied.
    run_phase(lambda n: _apply_cluster(apis[n], desired.get(n, []), opts, outcomes[n], n), apis)
    applied_ok = [n for n in apis if outcomes[n].failed is None]
    unready: dict[str, set[str]] = {}
    for n in applied_ok:
        for dep, units in outcomes[n].unready.items():
            unready.setdefault(dep, set()).update(units)
    plan = plan_waves(
        [c for n in applied_ok for c in outcomes[n].changes],
        opts.max_unavailable,
        unready,
    )
    waiting = opts.wait and not opts.check_mode
    # Pure removals first (removals_first): the devices a scale-down frees may be what another deployment's new
    # replica on the same cluster waits for.
    first = removals_first(
        {n: outcomes[n].existing for n in applied_ok},
        desired,
        [c for n in applied_ok for c in outcomes[n].changes],
        unready,
        held_deployments(desired, set(outcomes) - set(applied_ok), []) + list(opts.hold),
        opts.keep,
    )
    # Deleting nothing (prune false: the first stage of an apply routed by a hub, which must stop sending a replica
    # traffic before it is deleted): on a cluster where such removals wait for the next stage's prune, what is new
    # may need the devices they free, so it is looked at once, not awaited. Not Ready, it is pending (its deployment
    # held: its old replicas keep serving, with their weight); the next stage deletes the removals first and awaits it.
    deferred = set() if opts.prune else set(first)
    if opts.prune:

        def delete_first(name: str) -> None:
            out = outcomes[name]
            gone = {key_of(o) for o in first[name]}
            for obj in first[name]:
                if not opts.check_mode:
                    apis[name].delete(obj)
                out.deleted.append(describe(key_of(obj)))
            out.existing = [o for o in out.existing if key_of(o) not in gone]

        run_phase(delete_first, [n for n in applied_ok if n in first])
    updates = plan.updates()
    stopped: dict[str, str] = {}  # deployment -> why its rollout stopped
    written: dict[str, int] = {}  # deployment -> the last wave applied for it
    failed_at: set[str] = set(outcomes) - set(applied_ok)
    for wave in range(len(plan.waves)):
        if wave and not waiting and not opts.check_mode:
            break  # without waiting, one wave per run: the next run starts from what is Ready by then
        if wave:
            # A deployment with objects on a cluster that failed cannot know its replicas there are Ready.
            for dep in held_deployments(desired, failed_at, []):
                if dep not in stopped and any(i >= wave for i, _u in updates.get(dep, [])):
                    stopped[dep] = "it has objects on a cluster that failed (" + ", ".join(sorted(failed_at)) + ")"
        step = _Wave(apis, desired, opts, outcomes, clock, wave, plan.keys(wave, skip=stopped), plan.later(wave))
        step.skip = set(stopped)
        step.defer = deferred
        names = [n for n in applied_ok if n not in failed_at]
        run_phase(step.apply, names)
        failed_at |= {n for n in names if outcomes[n].failed is not None}
        for dep in updates:
            if dep not in stopped:
                written[dep] = wave
        if not waiting:
            continue
        names = [n for n in names if n not in failed_at]
        run_phase(step.wait, names)
        failed_at |= {n for n in names if outcomes[n].failed is not None}
        for n, found in sorted(step.pending.items()):
            outcomes[n].pending.extend(found)
            for p in found:
                dep = str(p.get("deployment") or "")
                if dep and dep not in stopped:
                    stopped[dep] = f"{_replica_of(desired.get(n, []), p)} on {n} " + (
                        f"was not awaited: it may need the devices this run's removals there free ({p['message']})"
                        if n in deferred
                        else f"did not become Ready within {opts.timeout:g}s ({p['message']})"
                    )
    for n in applied_ok:
        out = outcomes[n]
        if out.pending and out.failed is None:
            out.failed = (
                "not awaited before this run's removals on it are deleted (the old replicas of their deployments are "
                "kept): "
                if n in deferred
                else f"not ready after {opts.timeout:g}s (the old replicas of their deployments are kept): "
            ) + "; ".join(p["message"] for p in out.pending)
    rollout = rollout_report(plan, written, stopped, deferred=not waiting and not opts.check_mode)
    if report is not None:
        report.extend(rollout)
    # Clusters whose apply failed (not those that only timed out: their pending workloads hold their deployments),
    # and deployments whose rollout stopped: nothing of them is pruned. (Waves left for the next run, without
    # waiting, hold nothing: that rollout is paced, not stopped.)
    apply_failed = sorted(failed_at)
    held = held_deployments(desired, apply_failed, [p for o in outcomes.values() for p in o.pending])
    held = sorted(set(held) | set(opts.hold) | {r.deployment for r in rollout if r.stopped})

    def prune(name: str) -> None:
        out = outcomes[name]
        for obj in prune_candidates(out.existing, desired.get(name, []), held, opts.keep.get(name, ())):
            if not opts.check_mode:
                apis[name].delete(obj)
            out.deleted.append(describe(key_of(obj)))

    if opts.prune:
        run_phase(prune, applied_ok)
    for name, api in apis.items():
        outcomes[name].requests = api.requests
    return outcomes, held
