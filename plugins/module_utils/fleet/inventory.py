# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Assemble and validate the whole fleet: inference classes, clusters (inventory hosts), deployments, caches.

``validate_fleet`` collects *every* problem (not only the first), checks cross-references, and raises one
:class:`FleetValidationError` listing ``<variable path>: <reason>`` lines. Nothing is written or applied before it passes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils import provider_rules
from ansible_collections.gpufleet.serving.plugins.module_utils.cache_image import image_volume_errors
from ansible_collections.gpufleet.serving.plugins.module_utils.catalog import pool_class_hint
from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    ADOPT_UNLABELLED_VAR,
    fleet_identity_errors,
    parse_adopt,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    CACHE_FOLLOW,
    SPILLOVER_TIER_MAX,
    Cluster,
    InferenceClass,
    ModelCache,
    ModelDeployment,
    NodePool,
    Toleration,
    annotation_errors,
    check_dns_label,
    format_loc,
    label_errors,
    require_pydantic,
    shown_input,
    translate_errors,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.suggest import did_you_mean, name_errors

try:
    from pydantic import ValidationError
except ImportError:  # pragma: no cover - require_pydantic() reports it
    ValidationError = Exception  # type: ignore[misc,assignment]

CLASSES_VAR = "gpufleet_inference_classes"
DEPLOYMENTS_VAR = "gpufleet_model_deployments"
CACHES_VAR = "gpufleet_model_caches"
CLUSTER_VARS = {
    "provider": "gpufleet_provider",
    "gke": "gpufleet_gke",
    "eks": "gpufleet_eks",
    "kubeconfig": "gpufleet_kubeconfig",
    "context": "gpufleet_context",
    "node_pools": "gpufleet_node_pools",
    "taints": "gpufleet_taints",
    "cache_storage_class": "gpufleet_cache_storage_class",
    "ready": "gpufleet_ready",
    "kubernetes_version": "gpufleet_kubernetes_version",
    "queue": "gpufleet_queue",
    "prometheus_url": "gpufleet_prometheus_url",
    "hydration_throughput": "gpufleet_hydration_throughput",
}

PatternResolver = Callable[[str], list[str]]


def source_vars(variables: Iterable[str], var: str) -> list[str]:
    """The variables a list is merged from: ``var`` first, then every ``<var>_*`` variable, sorted by name (so each
    team can own a file: ``gpufleet_model_deployments_team_a``)."""
    names = set(variables)
    return ([var] if var in names else []) + sorted(n for n in names if n.startswith(f"{var}_"))


def merged_sources(sources: Mapping[str, Any], errors: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    """``(path, item)`` for every item of the lists in ``sources`` (``{variable: list}``, in merge order), each path
    naming the variable it came from (``gpufleet_model_deployments_team_a[0]``); a value that is not a list is an
    error naming its variable."""
    out: list[tuple[str, Any]] = []
    for name, value in sources.items():
        out.extend((f"{name}[{i}]", item) for i, item in enumerate(_as_list(value, name, errors)))
    return out


@dataclass
class Fleet:
    """The validated fleet. ``targets``/``cache_targets`` map a deployment/cache name to its candidate clusters."""

    classes: dict[str, InferenceClass]
    clusters: dict[str, Cluster]
    deployments: list[ModelDeployment]
    caches: list[ModelCache]
    targets: dict[str, list[str]] = field(default_factory=dict)
    cache_targets: dict[str, list[str]] = field(default_factory=dict)
    #: Clusters a deployment's host pattern matches that do not host the cache it mounts (so are not candidates):
    #: ``{deployment: {cluster: reason}}``. Placement's explain names them.
    cache_exclusions: dict[str, dict[str, str]] = field(default_factory=dict)
    #: ``gpufleet_fleet_name``: the ``gpufleet.io/fleet`` label of every object the fleet owns (fleet_info requires
    #: it; None only for callers that validate part of a fleet, such as provisioning one cluster).
    name: str | None = None
    #: ``gpufleet_adopt_unlabelled``: owned objects without a fleet label are this fleet's (True), another
    #: inventory's (False), or stop the run (None). See contract.FleetIdentity.
    adopt_unlabelled: bool | None = None
    #: Where each deployment / cache was read from (``{name: "gpufleet_model_deployments_team_a[0]"}``): deployments
    #: and caches may come from several variables (:func:`merged_sources`). Absent: ``<variable>[<list index>]``.
    deployment_paths: dict[str, str] = field(default_factory=dict)
    cache_paths: dict[str, str] = field(default_factory=dict)

    def deployment_path(self, i: int, name: str) -> str:
        return self.deployment_paths.get(name) or f"{DEPLOYMENTS_VAR}[{i}]"

    # -- normalised, JSON-able views ---------------------------------------------------------------------------------

    def classes_dict(self) -> dict[str, Any]:
        return {name: cls.model_dump(by_alias=True, exclude_none=True) for name, cls in self.classes.items()}

    def to_dict(self) -> dict[str, Any]:
        clusters = []
        for name in sorted(self.clusters):
            c = self.clusters[name]
            item = c.model_dump(by_alias=True, exclude_none=True)
            # Each cluster once: its node pools as placement reads them (name, class, nodes). The class's devices are
            # in `classes`, once (repeating them in every pool made the fleet, which several tasks of a run template,
            # grow with pools x devices).
            item.pop("node_pools", None)
            if c.declared_version is not None:
                item["kubernetes_version"] = c.declared_version
            item["pools"] = [{"name": p.name, "class": p.class_, "nodes": p.node_count} for p in c.node_pools]
            clusters.append(item)
        deployments = []
        for d in self.deployments:
            item = d.model_dump(by_alias=True, exclude_none=True)
            item["candidate_clusters"] = self.targets.get(d.name, [])
            deployments.append(item)
        caches = []
        for cache in self.caches:
            item = cache.model_dump(by_alias=True, exclude_none=True)
            item["candidate_clusters"] = self.cache_targets.get(cache.name, [])
            caches.append(item)
        out: dict[str, Any] = {
            "clusters": clusters,
            "classes": self.classes_dict(),
            "deployments": deployments,
            "caches": caches,
        }
        if self.name is not None:
            # Fleet identity (contract.identity_of reads it back): every plugin that renders, prunes or observes.
            out["name"] = self.name
            out["adopt_unlabelled"] = self.adopt_unlabelled
        if self.cache_exclusions:
            out["cache_exclusions"] = self.cache_exclusions
        return out

    def summary(self) -> list[str]:
        """A human table: clusters with pools and nodes, then deployments with their candidates."""
        rows: list[tuple[str, ...]] = [("CLUSTER", "PROVIDER", "POOL", "CLASS", "NODES", "DEVICES/NODE")]
        for name in sorted(self.clusters):
            c = self.clusters[name]
            pools: list[NodePool | None] = list(c.node_pools) or [None]
            for i, p in enumerate(pools):
                devices = "-"
                if p is not None:
                    devices = ", ".join(
                        f"{d.count}x {d.name}{'' if d.claim == 'DRA' else ' (synthetic)'}"
                        for d in self.classes[p.class_].devices
                    )
                rows.append(
                    (
                        c.name if i == 0 else "",
                        c.provider if i == 0 else "",
                        p.name if p else "-",
                        p.class_ if p else "-",
                        str(p.node_count) if p else "0",
                        devices,
                    )
                )
        lines = _table(rows)
        lines.append("")
        drows: list[tuple[str, ...]] = [
            ("DEPLOYMENT", "NAMESPACE", "REPLICAS", "ENGINES", "CACHE", "CANDIDATE CLUSTERS")
        ]
        for d in self.deployments:
            engines = ", ".join(_engine_label(e) for e in d.engines)
            drows.append(
                (d.name, d.namespace, str(d.replicas), engines, d.cache or "-", str(len(self.targets.get(d.name, []))))
            )
        lines.extend(_table(drows))
        if self.caches:
            lines.append("")
            crows: list[tuple[str, ...]] = [("CACHE", "NAMESPACE", "SOURCE", "SIZE", "STORAGE", "CLUSTERS")]
            for cache in self.caches:
                crows.append(
                    (
                        cache.name,
                        cache.namespace,
                        cache.source.uri,
                        cache.size,
                        cache.storage.backend,
                        str(len(self.cache_targets.get(cache.name, []))),
                    )
                )
            lines.extend(_table(crows))
        return lines


def _engine_label(engine: Any) -> str:
    pods = sum(m.pods for m in engine.members)
    shape = f"gang of {pods} pods" if engine.is_gang else "standalone"
    return f"{engine.name} ({shape}{f', x{engine.copies}' if engine.copies > 1 else ''})"


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows]


def _validate(model: type[Any], data: Any, prefix: str, errors: list[tuple[str, str]]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors.extend(translate_errors(prefix, exc))
        return None


def cluster_data(name: str, hostvars: Mapping[str, Any], groups: Iterable[str] = ()) -> dict[str, Any]:
    """Map an inventory host's ``gpufleet_*`` variables onto the Cluster model's fields."""
    data: dict[str, Any] = {"name": name, "groups": sorted(groups)}
    for fld, var in CLUSTER_VARS.items():
        if var in hostvars and hostvars[var] is not None:
            data[fld] = hostvars[var]
    return data


def _cluster_reason(err: Mapping[str, Any]) -> str | None:
    if tuple(err.get("loc", ())) == ("kubeconfig",) and err.get("type") == "string_type":
        return (
            f"must be the path of a kubeconfig file (got {shown_input(err)}); an inline kubeconfig is not accepted: "
            "write it to a file (from a vaulted variable, say) and give its path"
        )
    return None


def _cluster_errors(name: str, exc: ValidationError) -> list[tuple[str, str]]:
    """Name a cluster's errors by the inventory variable the user wrote (``hostvars['x'].gpufleet_node_pools[0]...``)."""
    renamed = {**CLUSTER_VARS, "name": "inventory_hostname"}
    return translate_errors(f"hostvars[{name!r}]", exc, rename_first=renamed, reason=_cluster_reason)


def validate_fleet(
    *,
    classes: Any,
    hosts: Mapping[str, Mapping[str, Any]],
    deployments: Any = None,
    caches: Any = None,
    deployment_sources: Mapping[str, Any] | None = None,
    cache_sources: Mapping[str, Any] | None = None,
    resolve_pattern: PatternResolver | None = None,
    host_groups: Mapping[str, Iterable[str]] | None = None,
    check_selectors: bool = True,
    fleet_name: Any = None,
    adopt_unlabelled: Any = None,
    require_name: bool = False,
    partial: bool = False,
) -> Fleet:
    """Validate the fleet; raise FleetValidationError with every ``path: reason`` found.

    ``hosts`` maps each fleet cluster (inventory host) to its variables. ``resolve_pattern`` turns a deployment's or
    cache's ``clusters`` host pattern into host names (Ansible semantics); without it every fleet cluster is a candidate.
    ``fleet_name`` / ``adopt_unlabelled``: ``gpufleet_fleet_name`` / ``gpufleet_adopt_unlabelled`` (fleet identity);
    ``require_name`` makes a missing name an error (fleet_info, which reads the whole inventory, sets it).
    ``deployment_sources`` / ``cache_sources`` (``{variable: list}``, in merge order: :func:`source_vars`) replace
    ``deployments`` / ``caches``: the lists are merged, each error path names the variable its item came from, and a
    name defined twice is an error naming both places.
    ``partial``: ``hosts`` are part of the fleet (an AWX job slice's inventory, for ``apply.yml``, which takes its
    placement from a plan): a host pattern that matches none of them, and a deployment none of whose clusters hosts its
    cache, are not errors (they are the other slices' business; the plan decided).
    """
    require_pydantic()
    errors: list[tuple[str, str]] = []

    # Fleet identity ------------------------------------------------------------------------------------------------
    if fleet_name is not None or require_name:
        errors.extend(fleet_identity_errors(fleet_name, adopt_unlabelled))
    elif adopt_unlabelled is not None:
        errors.extend(e for e in fleet_identity_errors("x", adopt_unlabelled) if e[0] == ADOPT_UNLABELLED_VAR)

    # Inference classes --------------------------------------------------------------------------------------------
    parsed_classes: dict[str, InferenceClass] = {}
    if classes is None:
        classes = {}
    if not isinstance(classes, Mapping):
        errors.append((CLASSES_VAR, f"must be a mapping of class name to class (got {type(classes).__name__})"))
        classes = {}
    for cname, cdata in classes.items():
        prefix = format_loc(CLASSES_VAR, (cname,))
        if not isinstance(cname, str):
            errors.append((prefix, "class names must be strings"))
            continue
        try:
            check_dns_label(cname)
        except ValueError as exc:
            errors.append((prefix, f"class name {exc}"))
        model = _validate(InferenceClass, cdata, prefix, errors)
        if model is not None:
            parsed_classes[cname] = model

    # Clusters -----------------------------------------------------------------------------------------------------
    parsed_clusters: dict[str, Cluster] = {}
    for hname in sorted(hosts):
        groups = (host_groups or {}).get(hname, ())
        try:
            parsed = Cluster.model_validate(cluster_data(hname, hosts[hname], groups))
        except ValidationError as exc:
            errors.extend(_cluster_errors(hname, exc))
            continue
        parsed_clusters[hname] = parsed
        for pi, pool in enumerate(parsed.node_pools):
            path = f"hostvars[{hname!r}].gpufleet_node_pools[{pi}].class"
            if pool.class_ not in parsed_classes and pool.class_ not in classes:  # not merely invalid: unknown
                errors.append(
                    (
                        path,
                        f"unknown inference class {pool.class_!r}{did_you_mean(pool.class_, classes)}"
                        + pool_class_hint(pool.class_),
                    )
                )
    # What provisioning would refuse (provider_rules: the same checks and messages as provision.yml): the pools of
    # every GKE and EKS cluster, and the provider block of each class such a pool uses (once per class).
    for parsed in parsed_clusters.values():
        for error in provider_rules.cluster_errors(parsed, parsed_classes):
            if error not in errors:
                errors.append(error)

    # Caches -------------------------------------------------------------------------------------------------------
    parsed_caches: list[ModelCache] = []
    cache_names: dict[str, ModelCache] = {}
    cache_paths: dict[str, str] = {}
    if cache_sources is None:
        cache_sources = {CACHES_VAR: caches}
    for prefix, cdata in merged_sources(cache_sources, errors):
        model = _validate(ModelCache, cdata, prefix, errors)
        if model is None:
            continue
        if model.name in cache_names:
            errors.append((f"{prefix}.name", _duplicate("cache", model.name, prefix, cache_paths[model.name])))
            continue
        cache_names[model.name] = model
        cache_paths[model.name] = prefix
        parsed_caches.append(model)

    # Deployments --------------------------------------------------------------------------------------------------
    parsed_deployments: list[ModelDeployment] = []
    deployment_paths: dict[str, str] = {}
    if deployment_sources is None:
        deployment_sources = {DEPLOYMENTS_VAR: deployments}
    # The fleet's device vocabulary, when every class is valid (a class that failed would make its names "unknown").
    vocab = None
    if check_selectors and isinstance(classes, Mapping) and len(parsed_classes) == len(classes):
        from ansible_collections.gpufleet.serving.plugins.module_utils.vocabulary import fleet_vocabulary

        vocab = fleet_vocabulary(parsed_classes)
    for prefix, ddata in merged_sources(deployment_sources, errors):
        model = _validate(ModelDeployment, ddata, prefix, errors)
        if model is None:
            continue
        if model.name in deployment_paths:
            errors.append(
                (f"{prefix}.name", _duplicate("deployment", model.name, prefix, deployment_paths[model.name]))
            )
            continue
        deployment_paths[model.name] = prefix
        errors.extend(deployment_reference_errors(model, prefix, cache_names, check_selectors=check_selectors))
        if vocab is not None:
            from ansible_collections.gpufleet.serving.plugins.module_utils.vocabulary import deployment_errors

            errors.extend(deployment_errors(model, prefix, vocab))
        parsed_deployments.append(model)

    # Every path names the list items on it: gpufleet_model_deployments[2] (qwen2-5-7b).engines[0] (tp8)...
    roots: dict[str, Any] = {CLASSES_VAR: classes, **deployment_sources, **cache_sources}
    roots.update({f"hostvars[{h!r}]": hosts[h] for h in hosts})
    if errors:
        raise FleetValidationError(name_errors(errors, roots))

    fleet = Fleet(
        classes=parsed_classes,
        clusters=parsed_clusters,
        deployments=parsed_deployments,
        caches=parsed_caches,
        name=fleet_name,
        adopt_unlabelled=parse_adopt(adopt_unlabelled),
        deployment_paths=deployment_paths,
        cache_paths=cache_paths,
    )
    fleet_names = set(parsed_clusters)
    mounted = _resolve_cache_clusters(parsed_caches, parsed_deployments)
    sources: list[tuple[dict[str, str], Sequence[ModelDeployment | ModelCache], dict[str, list[str]]]] = [
        (deployment_paths, parsed_deployments, fleet.targets),
        (cache_paths, [c for c in parsed_caches if not c.follows], fleet.cache_targets),
    ]
    for paths, items, target in sources:
        for item in items:
            where = paths[item.name]
            pattern = item.clusters or "gpufleet_clusters"  # a cache's is resolved above (never None here)
            if resolve_pattern is None:
                names = sorted(fleet_names)
            else:
                try:
                    names = sorted(set(resolve_pattern(pattern)) & fleet_names)
                except GpufleetError as exc:
                    errors.append((f"{where}.clusters", str(exc)))
                    continue
            if not names and partial:
                target[item.name] = []
                continue
            if not names:
                # A typo in a host pattern must not read as "no cluster wanted": that would prune every object.
                errors.append(
                    (
                        f"{where}.clusters",
                        f"host pattern {pattern!r} matches no cluster of the fleet "
                        f"({', '.join(sorted(fleet_names)) or 'the fleet has no clusters'}); check the group names"
                        + _pattern_suggestions(pattern, fleet_names, host_groups),
                    )
                )
                continue
            target[item.name] = names
    errors.extend(_follow_targets(fleet, mounted, partial))
    errors.extend(_claim_name_errors(parsed_caches, fleet.cache_targets, cache_paths))
    # source.oci: an image volume needs Kubernetes 1.36 on every cluster the cache may be staged on (issue 30).
    errors.extend(image_volume_errors(parsed_caches, fleet.cache_targets, cache_paths, parsed_clusters))
    errors.extend(spillover_tier_errors(fleet, hosts))
    follow_errors = _follow_caches(fleet)
    if not partial:
        errors.extend(follow_errors)
    if errors:
        raise FleetValidationError(name_errors(errors, roots))
    return fleet


#: A cluster's routing tier (routing.PRIORITY_VAR; spelled here so fleet/inventory.py does not import the routing module, and a
#: unit test keeps the two equal).
ROUTING_PRIORITY_VAR = "gpufleet_routing_priority"


def _routing_tier(value: Any) -> int | None:
    """A cluster's ``gpufleet_routing_priority`` as routing reads it (unset: 0; a survey's text: its number), or None
    when it is not an integer (routing.cluster_settings reports that, naming the variable)."""
    if value is None or value == "":
        return 0
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def spillover_tier_errors(fleet: Fleet, hosts: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Every ``external_endpoints[].priority`` of a deployment must be greater than the ``gpufleet_routing_priority``
    of every cluster the deployment may be placed on: spillover is the last resort, tried only when no tier of the
    fleet's own replicas can serve (a router tries the lower tier first)."""
    tiers = {name: _routing_tier((hosts.get(name) or {}).get(ROUTING_PRIORITY_VAR)) for name in fleet.clusters}
    errors: list[tuple[str, str]] = []
    for i, dep in enumerate(fleet.deployments):
        if not dep.external_endpoints:
            continue
        clusters = fleet.targets.get(dep.name) or sorted(fleet.clusters)
        known = {c: t for c in clusters if (t := tiers.get(c)) is not None}
        for j, ext in enumerate(dep.external_endpoints):
            under = sorted((c, t) for c, t in known.items() if t >= ext.priority)
            if not under:
                continue
            listed = ", ".join(f"{c}={t}" for c, t in under)
            top = max(known.values())
            fix = (
                f"use priority {top + 1} or more, or lower those clusters' tier"
                if top < SPILLOVER_TIER_MAX
                else f"lower those clusters' tier below {SPILLOVER_TIER_MAX} (the highest spillover tier)"
            )
            errors.append(
                (
                    f"{fleet.deployment_path(i, dep.name)}.external_endpoints[{j}].priority",
                    f"spillover tier {ext.priority} of endpoint {ext.name!r} must be greater than the "
                    f"{ROUTING_PRIORITY_VAR} of every cluster the deployment may use, but {listed} (a lower tier is "
                    f"tried first: the endpoint would take requests before the fleet's own replicas); {fix}",
                )
            )
    return errors


def _duplicate(kind: str, name: str, path: str, first: str) -> str:
    """A name defined twice: where else, when that is another variable (``gpufleet_model_deployments_team_a[0]``)."""
    if first.split("[", 1)[0] == path.split("[", 1)[0]:
        return f"duplicate {kind} name {name!r}"
    return f"duplicate {kind} name {name!r}: {first} defines it too (each name once across the merged variables)"


def _pattern_suggestions(pattern: str, clusters: Iterable[str], host_groups: Mapping[str, Iterable[str]] | None) -> str:
    """For a host pattern that matches no cluster: its names that are neither a cluster nor a group of one, each with
    the closest known name (``; 'prdo' is not a group or cluster of the fleet (did you mean 'prod'? ...)``)."""
    known = set(clusters) | {g for groups in (host_groups or {}).values() for g in groups}
    out = []
    for term in re.split(r"[:,]", pattern):
        name = term.strip().lstrip("!&")
        if name and not any(c in name for c in "*?~[") and name not in known and name != "all":
            out.append(f"; {name!r} is not a group or cluster of the fleet{did_you_mean(name, known)}")
    return "".join(out)


def _resolve_cache_clusters(
    caches: Sequence[ModelCache], deployments: Sequence[ModelDeployment]
) -> dict[str, list[str]]:
    """Resolve each cache's unset ``clusters``: ``follow`` when a deployment mounts it, else ``gpufleet_clusters`` (a
    cache nobody mounts is pre-warmed, as before). Returns ``{cache: [deployments mounting it]}``."""
    mounted: dict[str, list[str]] = {}
    for dep in deployments:
        if dep.cache is not None:
            mounted.setdefault(dep.cache, []).append(dep.name)
    for cache in caches:
        if cache.clusters is None:
            cache.clusters = CACHE_FOLLOW if cache.name in mounted else "gpufleet_clusters"
    return mounted


def _follow_targets(fleet: Fleet, mounted: Mapping[str, list[str]], partial: bool) -> list[tuple[str, str]]:
    """A ``follow`` cache may be staged wherever a deployment that mounts it may go (the union of their candidate
    clusters); where it *is* staged is decided from the placement (cache_placement.staged_clusters)."""
    errors = []
    for i, cache in enumerate(fleet.caches):
        if not cache.follows:
            continue
        deps = mounted.get(cache.name, [])
        fleet.cache_targets[cache.name] = sorted({c for d in deps for c in fleet.targets.get(d, [])})
        if not deps and not partial:
            where = fleet.cache_paths.get(cache.name) or f"{CACHES_VAR}[{i}]"
            errors.append(
                (
                    f"{where}.clusters",
                    f"{CACHE_FOLLOW!r} stages the cache where the deployments that mount it are placed, but no "
                    f"deployment mounts cache {cache.name!r}; give it a host pattern to pre-warm clusters "
                    "(e.g. gpufleet_clusters)",
                )
            )
    return errors


def _follow_caches(fleet: Fleet) -> list[tuple[str, str]]:
    """A replica is placed only where the cache it mounts is staged: a deployment's candidates are the clusters its
    pattern matches that also host its cache (the others are recorded in ``cache_exclusions``, for explain). None
    left is an error: its pods would wait forever for a PersistentVolumeClaim that is not there."""
    errors = []
    for i, dep in enumerate(fleet.deployments):
        if dep.cache is None or dep.name not in fleet.targets or dep.cache not in fleet.cache_targets:
            continue
        hosts = set(fleet.cache_targets[dep.cache])
        wanted = fleet.targets[dep.name]
        excluded = {
            c: f"does not host cache {dep.cache}, which the deployment mounts" for c in wanted if c not in hosts
        }
        if not excluded:
            continue
        fleet.targets[dep.name] = [c for c in wanted if c in hosts]
        fleet.cache_exclusions[dep.name] = excluded
        if not fleet.targets[dep.name]:
            errors.append(
                (
                    f"{fleet.deployment_path(i, dep.name)}.cache",
                    f"mounts cache {dep.cache!r}, which none of its clusters ({', '.join(wanted)}) hosts (the cache's "
                    f"clusters: {', '.join(sorted(hosts))}); widen the cache's clusters or narrow the deployment's",
                )
            )
    return errors


def _claim_name_errors(
    caches: Sequence[ModelCache], targets: Mapping[str, list[str]], paths: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """Two caches that would use one PVC (same namespace and claim name) on a cluster they share."""
    errors: list[tuple[str, str]] = []
    paths = paths or {}
    seen: dict[tuple[str, str], list[tuple[int, ModelCache]]] = {}
    for i, cache in enumerate(caches):
        key = (cache.namespace, cache.claim_name)
        for j, other in seen.get(key, []):
            shared = sorted(set(targets.get(cache.name, [])) & set(targets.get(other.name, [])))
            if not shared:
                continue
            field = "storage.claim_name" if cache.storage.claim_name else "name"
            errors.append(
                (
                    f"{paths.get(cache.name) or f'{CACHES_VAR}[{i}]'}.{field}",
                    f"cache {cache.name!r} would use PVC {cache.namespace}/{cache.claim_name}, which cache "
                    f"{other.name!r} ({paths.get(other.name) or f'{CACHES_VAR}[{j}]'}) uses too on {', '.join(shared)}; give each cache its own "
                    "storage.claim_name",
                )
            )
            break
        seen.setdefault(key, []).append((i, cache))
    return errors


def deployment_reference_errors(
    model: ModelDeployment,
    prefix: str,
    caches: Mapping[str, ModelCache] | None,
    *,
    check_selectors: bool = True,
) -> list[tuple[str, str]]:
    """Cross-reference and semantic checks of one deployment (caches, templates, CEL selectors)."""
    errors: list[tuple[str, str]] = []
    if model.cache is not None and caches is not None:
        cache = caches.get(model.cache)
        if cache is None:
            errors.append(
                (f"{prefix}.cache", f"unknown model cache {model.cache!r}{did_you_mean(model.cache, caches)}")
            )
        elif cache.namespace != model.namespace:
            errors.append(
                (
                    f"{prefix}.cache",
                    f"cache {model.cache!r} lives in namespace {cache.namespace!r} but the deployment runs in "
                    f"{model.namespace!r}; a pod can only mount a PVC of its own namespace",
                )
            )
    for ei, engine in enumerate(model.engines):
        for mi, member in enumerate(engine.members):
            path = f"{prefix}.engines[{ei}].members[{mi}].template"
            tmpl = member.template
            if tmpl is None:
                errors.append((path, "is required: the pod template (spec.containers) this member runs"))
                continue
            spec = tmpl.get("spec")
            containers = spec.get("containers") if isinstance(spec, Mapping) else None
            if not isinstance(containers, list) or not containers:
                errors.append((f"{path}.spec.containers", "at least one container is required"))
            else:
                for ci, c in enumerate(containers):
                    if not isinstance(c, Mapping) or not c.get("name") or not c.get("image"):
                        errors.append((f"{path}.spec.containers[{ci}]", "needs a name and an image"))
            errors.extend(pod_template_errors(tmpl, path))
    if check_selectors:
        from ansible_collections.gpufleet.serving.plugins.module_utils.dra_cel import compile_selector

        for path, cel in model.selector_paths():
            try:
                compile_selector(cel)
            except ValueError as exc:
                errors.append((f"{prefix}.{path}", f"invalid CEL selector: {exc}"))
    return errors


def pod_template_errors(template: Mapping[str, Any], path: str) -> list[tuple[str, str]]:
    """What the API server would reject in the parts of a member's pod template the collection passes through and
    merges into (labels, annotations, ``nodeSelector``, ``tolerations``), as ``(path, reason)``."""
    errors: list[tuple[str, str]] = []
    meta = template.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        errors.append((f"{path}.metadata", f"must be a mapping (got {type(meta).__name__})"))
    elif meta is not None:
        if meta.get("labels") is not None:
            errors.extend(label_errors(meta["labels"], f"{path}.metadata.labels"))
        if meta.get("annotations") is not None:
            errors.extend(annotation_errors(meta["annotations"], f"{path}.metadata.annotations"))
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return errors
    if spec.get("nodeSelector") is not None:
        errors.extend(label_errors(spec["nodeSelector"], f"{path}.spec.nodeSelector", "node label"))
    tolerations = spec.get("tolerations")
    if tolerations is not None and not isinstance(tolerations, list):
        errors.append((f"{path}.spec.tolerations", f"must be a list (got {type(tolerations).__name__})"))
    elif tolerations is not None:
        for ti, toleration in enumerate(tolerations):
            _validate(Toleration, toleration, f"{path}.spec.tolerations[{ti}]", errors)
    return errors


def _as_list(value: Any, var: str, errors: list[tuple[str, str]]) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append((var, f"must be a list (got {type(value).__name__})"))
        return []
    return value
