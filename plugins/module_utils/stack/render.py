# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Render mode (``gpufleet_gitops``): the plan as objects for the GitOps tool (``render_objects()``: a release as a
Flux HelmRelease with its HelmRepository / OCIRepository, or an Argo CD Application; every object with its sync
wave) and the fleet's generator under ``<render_dir>/_fleet/`` (``fleet_generator()``).

Part of the serving stack; ``serving_stack.py`` is the façade other code imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    LABEL_CLUSTER,
    LABEL_STACK_PART,
    STACK_OWNER,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    parse,
    require_pydantic,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.gitops import (
    ANNOTATION_SYNC_LAYER,
    ARGOCD,
    FLUX,
    LAYERS,
    NONE,
    WAVE_DRIVER,
    WAVE_NAMESPACES,
    WAVE_RELEASES,
    WAVE_STACK_CONFIG,
    decorate,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.apply import (
    _meta,
    _obj_labels,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.versions import (
    ARGOCD_API,
    ARGOCD_IN_CLUSTER,
    COMPONENTS,
    CRD_DEPENDENCIES,
    FLUX_HELMRELEASE,
    FLUX_KUSTOMIZATION,
    FLUX_RELEASE_INTERVAL,
    FLUX_SOURCE,
    FLUX_SOURCE_INTERVAL,
    FLUX_SYNC_INTERVAL,
    GENERATOR_PART,
    GKE_DRIVER,
    HELM_CHART_LAYER,
    GitopsOptions,
)


def _stack_wave(obj: Mapping[str, Any]) -> int:
    """The sync wave of one of the plan's plain objects (module_utils/render/gitops.py has the table)."""
    if obj.get("kind") in ("Namespace", "ResourceQuota"):
        return WAVE_NAMESPACES
    if _obj_labels(obj).get(LABEL_STACK_PART) == GKE_DRIVER.replace("_", "-"):
        return WAVE_DRIVER
    return WAVE_STACK_CONFIG  # DeviceClasses, presets, GatewayClass, Gateway: kinds a release may install


def _flux_release(rel: Mapping[str, Any], depends: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A release as Flux installs it: its chart source (HelmRepository, or OCIRepository for an OCI chart) and the
    HelmRelease, the chart version pinned, the values carried over as they are."""
    name, namespace, component = rel["release"], rel["namespace"], rel["component"]
    spec: dict[str, Any] = {"releaseName": name, "interval": FLUX_RELEASE_INTERVAL}
    if rel["repository"].startswith("oci://"):
        source = {
            "apiVersion": FLUX_SOURCE,
            "kind": "OCIRepository",
            "metadata": _meta(name, component, namespace),
            "spec": {
                "url": f"{rel['repository']}/{rel['chart']}",
                "ref": {"tag": rel["version"]},
                "layerSelector": {"mediaType": HELM_CHART_LAYER, "operation": "copy"},
                "interval": FLUX_SOURCE_INTERVAL,
            },
        }
        spec["chartRef"] = {"kind": "OCIRepository", "name": name}
    else:
        source = {
            "apiVersion": FLUX_SOURCE,
            "kind": "HelmRepository",
            "metadata": _meta(name, component, namespace),
            "spec": {"url": rel["repository"], "interval": FLUX_SOURCE_INTERVAL},
        }
        spec["chart"] = {
            "spec": {
                "chart": rel["chart"],
                "version": rel["version"],
                "sourceRef": {"kind": "HelmRepository", "name": name},
                "interval": FLUX_SOURCE_INTERVAL,
            }
        }
    spec["timeout"] = f"{rel['wait_timeout']}s"
    if depends:
        spec["dependsOn"] = [{"name": d["release"], "namespace": d["namespace"]} for d in depends]
    # Atomic, as in apply mode: a failed install is uninstalled and retried, a failed upgrade rolled back. The chart's
    # CRDs are created and kept up to date with it.
    spec["install"] = {"crds": "CreateReplace", "remediation": {"retries": 3}}
    spec["upgrade"] = {"crds": "CreateReplace", "remediation": {"retries": 3, "remediateLastFailure": True}}
    spec["values"] = rel["values"]
    release = {
        "apiVersion": FLUX_HELMRELEASE,
        "kind": "HelmRelease",
        "metadata": _meta(name, component, namespace),
        "spec": spec,
    }
    return [source, release]


def _argocd_release(rel: Mapping[str, Any], gitops: GitopsOptions) -> dict[str, Any]:
    """A release as Argo CD installs it: an Application in Argo CD's namespace of the cluster, a Helm source (the
    chart version pinned, the values carried over as they are), deploying to the release namespace of that cluster."""
    helm = {"releaseName": rel["release"], "valuesObject": rel["values"]}
    source: dict[str, Any]
    if rel["repository"].startswith("oci://"):
        # Argo CD >= 3.1 reads OCI artifacts natively: the chart's repository, the version as the tag, path ".".
        source = {"repoURL": f"{rel['repository']}/{rel['chart']}", "targetRevision": rel["version"], "path": "."}
    else:
        source = {"repoURL": rel["repository"], "chart": rel["chart"], "targetRevision": rel["version"]}
    source["helm"] = helm
    return {
        "apiVersion": ARGOCD_API,
        "kind": "Application",
        "metadata": _meta(rel["release"], rel["component"], gitops.home()),
        "spec": {
            "project": gitops.project,
            "source": source,
            "destination": {"server": ARGOCD_IN_CLUSTER, "namespace": rel["namespace"]},
            "syncPolicy": {
                "automated": {"prune": True, "selfHeal": True},
                # Server-side apply: a chart's CRDs (KServe's) exceed client-side apply's annotation limit.
                "syncOptions": ["ServerSideApply=true"],
                "retry": {"limit": 5, "backoff": {"duration": "30s", "factor": 2, "maxDuration": "10m"}},
            },
        },
    }


def render_objects(
    plan: Mapping[str, Any], gitops: GitopsOptions, warnings: list[str] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The plan as the render directory holds it for ``gitops.tool``: the plain objects and GKE's driver installers,
    then each release as Flux (a ``HelmRelease`` and its ``HelmRepository`` or ``OCIRepository``, ``dependsOn`` the
    releases whose CRDs it needs) or Argo CD (an ``Application``) renders it, or not at all (``none``); every object
    with its sync wave (module_utils/render/gitops.py). Returns ``(objects, lines)``: one line per release saying how
    it was rendered. A release whose chart is a local path (no repository) cannot be rendered for a GitOps tool: it is
    left out and warned about."""
    tool = gitops.tool
    objects = [
        decorate(obj, tool, _stack_wave(obj))
        for obj in [*(plan.get("objects") or []), *(plan.get("driver_objects") or [])]
    ]
    lines: list[str] = []
    releases = list(plan.get("releases") or [])
    rendered = {r["component"]: r for r in releases if r["repository"]}
    for rel in releases:
        name = rel["release"]
        if tool == NONE:
            lines.append(f"{name}: not rendered: gpufleet_gitops none")
            continue
        if not rel["repository"]:
            lines.append(f"{name}: not rendered: its chart {rel['chart']} is a local path")
            if warnings is not None:
                warnings.append(
                    f"release {name}: its chart {rel['chart']!r} is a local path (no repository), which "
                    f"{'Flux' if tool == FLUX else 'Argo CD'} cannot install from: not rendered; set "
                    f"serving_stack_overrides.{rel['component']}.repository to a Helm or OCI repository"
                )
            continue
        wave = WAVE_RELEASES + COMPONENTS.index(rel["component"])
        if tool == FLUX:
            depends = [rendered[c] for c in CRD_DEPENDENCIES.get(rel["component"], ()) if c in rendered]
            objs = _flux_release(rel, depends)
            after = f", after {', '.join(d['release'] for d in depends)}" if depends else ""
            lines.append(
                f"{name}: rendered as Flux HelmRelease {rel['namespace']}/{name} ({objs[0]['kind']} "
                f"{rel['repository']}, chart {rel['chart']} {rel['version']}{after})"
            )
        else:
            objs = [_argocd_release(rel, gitops)]
            lines.append(
                f"{name}: rendered as Argo CD Application {gitops.home()}/{name} (sync wave {wave}, chart "
                f"{rel['chart']} {rel['version']} into {rel['namespace']})"
            )
        objects.extend(decorate(o, tool, wave) for o in objs)
    return objects, lines


def fleet_generator(clusters: Any, gitops: Any, fleet: Any = None) -> list[dict[str, Any]]:
    """The fleet's GitOps generator, written under ``<render_dir>/_fleet/<namespace>/`` (a dict boundary: ``clusters``
    the fleet's cluster names, ``gitops`` the :class:`GitopsOptions`, ``fleet`` its name):

    * ``argocd``: an ``ApplicationSet`` whose git directory generator lists the cluster directories
      (``<path>/*``, ``_fleet`` excluded) at ``repo_url``/``revision``, and whose template is one Application per
      cluster directory, deploying it to the Argo CD cluster named like the inventory host (its cluster secret's
      ``name``), in sync-wave order, never deleting Namespaces;
    * ``flux``: per cluster, one ``Kustomization`` per sync layer (stack, stack-config, caches, serving) of the
      cluster directory (``./<path>/<cluster>``), from the GitRepository ``source``, applied to the cluster through the
      kubeconfig in the Secret ``<cluster>-kubeconfig`` (``kubeConfig.secretRef``), each keeping only its layer's
      objects and depending on the previous layer (``wait: true``);
    * ``none``: nothing.
    """
    require_pydantic()
    opts: GitopsOptions = parse(GitopsOptions, gitops if gitops is not None else {}, "gitops")
    if not isinstance(clusters, list) or not all(isinstance(c, str) and c for c in clusters):
        raise GpufleetError("clusters: must be a list of the fleet's cluster names")
    names = sorted(set(clusters))
    fleet_name = str(fleet) if fleet else "gpufleet"
    if opts.tool == NONE:
        return []
    if opts.tool == ARGOCD:
        if not opts.repo_url:
            raise GpufleetError(
                "gpufleet_gitops_repo_url: is required with gpufleet_gitops argocd: the ApplicationSet's git "
                "directory generator reads the cluster directories from that repository"
            )
        return [_argocd_application_set(opts, fleet_name)]
    out = []
    for cluster in names:
        previous = None
        for layer, _low in LAYERS:
            out.append(_flux_kustomization(opts, cluster, layer, previous))
            previous = f"{cluster}-{layer}"
    return out


def _generator_meta(name: str, namespace: str) -> dict[str, Any]:
    return _meta(name, GENERATOR_PART, namespace)


def _argocd_application_set(opts: GitopsOptions, fleet: str) -> dict[str, Any]:
    prefix = f"{opts.path}/" if opts.path else ""
    return {
        "apiVersion": ARGOCD_API,
        "kind": "ApplicationSet",
        "metadata": _generator_meta(fleet, opts.home()),
        "spec": {
            "goTemplate": True,
            "goTemplateOptions": ["missingkey=error"],
            "generators": [
                {
                    "git": {
                        "repoURL": opts.repo_url,
                        "revision": opts.revision,
                        "directories": [{"path": f"{prefix}*"}, {"path": f"{prefix}_fleet", "exclude": True}],
                    }
                }
            ],
            "template": {
                "metadata": {
                    "name": f"{fleet}-{{{{.path.basename}}}}",
                    "labels": {**STACK_OWNER, LABEL_STACK_PART: GENERATOR_PART},
                },
                "spec": {
                    "project": opts.project,
                    "source": {
                        "repoURL": opts.repo_url,
                        "targetRevision": opts.revision,
                        "path": "{{.path.path}}",
                        "directory": {"recurse": True},
                    },
                    # The cluster secret of each cluster is named like its inventory host.
                    "destination": {"name": "{{.path.basename}}"},
                    "syncPolicy": {
                        "automated": {"prune": True, "selfHeal": True},
                        # Custom resources whose CRD a release of an earlier sync wave installs are not dry-run
                        # before it exists; server-side apply (large objects, shared fields).
                        "syncOptions": ["ServerSideApply=true", "SkipDryRunOnMissingResource=true"],
                        "retry": {"limit": 10, "backoff": {"duration": "30s", "factor": 2, "maxDuration": "10m"}},
                    },
                },
            },
        },
    }


def _flux_kustomization(opts: GitopsOptions, cluster: str, layer: str, previous: str | None) -> dict[str, Any]:
    names = [name for name, _low in LAYERS]
    if layer == names[-1]:
        # The last layer also takes every file without a layer (added to the directory by hand).
        target = {"annotationSelector": f"{ANNOTATION_SYNC_LAYER} in ({','.join(names[:-1])})"}
    else:
        target = {"annotationSelector": f"{ANNOTATION_SYNC_LAYER} notin ({layer})"}
    spec: dict[str, Any] = {
        "interval": FLUX_SYNC_INTERVAL,
        "retryInterval": "1m",
        "timeout": "30m",
        "path": opts.cluster_path(cluster),
        "prune": True,
        # Ready only once what it applied is ready (HelmReleases installed, hydration Jobs complete): the next layer
        # waits for it.
        "wait": True,
        "sourceRef": {"kind": "GitRepository", "name": opts.source},
        "kubeConfig": {"secretRef": {"name": f"{cluster}-kubeconfig"}},
        # Every layer reads the whole cluster directory and keeps only its own objects.
        "patches": [
            {
                "target": target,
                "patch": "$patch: delete\napiVersion: v1\nkind: Object\nmetadata:\n  name: other-layer\n",
            }
        ],
    }
    if previous:
        spec["dependsOn"] = [{"name": previous}]
    meta = _generator_meta(f"{cluster}-{layer}", opts.home())
    meta["labels"][LABEL_CLUSTER] = cluster
    return {"apiVersion": FLUX_KUSTOMIZATION, "kind": "Kustomization", "metadata": meta, "spec": spec}
