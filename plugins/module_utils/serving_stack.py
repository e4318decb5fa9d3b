# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The serving stack of one cluster: which Helm releases (chart, repository, version, values) and which plain objects
make DRA GPU serving work there, what to do about what is already installed, and the post-install check.

Pure functions over typed models; the ``serving_stack`` role reads and writes Kubernetes with ``kubernetes.core`` and
asks these functions (through the ``gpufleet.serving.serving_stack_*`` filters) for every decision:

* :func:`plan_cluster` - the releases in install order and the plain objects (namespaces, the ResourceQuota GKE needs
  to admit the DRA driver's critical pods, the DeviceClasses the cluster's pools name and no chart ships, the
  LLMInferenceServiceConfig presets the KServe chart does not ship, the optional Gateway), from the version matrix
  (``serving_stack_versions``, one place, overridable per cluster) and the fleet's inference classes;
* :func:`release_action` - install/upgrade a release, or skip it because the component is already installed by
  something else (its marker CRD exists and no Helm release of ours is deployed);
* :func:`adoptions` - objects a chart ships that already exist without Helm ownership (adopted into the release so
  the install does not fail with an ownership conflict, or refused);
* :func:`objects_to_apply` - the plain objects to server-side apply; an object that exists and is not ours (another
  manager, or a Helm release) is kept as it is and reported;
* :func:`check_cluster` - the DeviceClasses exist and every GPU pool's nodes publish ResourceSlices for each DRA
  driver of their class (as many devices as the class declares);
* render mode (``gpufleet_gitops``, module_utils/render/gitops.py): :func:`render_objects` - the plan as real Kubernetes
  objects for the GitOps tool (each release a Flux ``HelmRelease`` with its ``HelmRepository`` / ``OCIRepository``,
  or an Argo CD ``Application``; every object with its sync wave), and :func:`fleet_generator` - the fleet's
  generator under ``<render_dir>/_fleet/`` (a Flux Kustomization per cluster and sync layer, or an Argo CD
  ApplicationSet over the cluster directories).

The code lives in ``stack/``: ``versions.py`` (the version matrix, the options, the docs' tables), ``plan.py``
(:func:`plan_cluster`), ``render.py`` (render mode: :func:`render_objects`, :func:`fleet_generator`), ``apply.py``
(the objects' labels and Helm ownership, the apply-time decisions) and ``checks.py`` (:func:`check_cluster`). This
module re-exports the names other code uses.
"""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import STACK_OWNER
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.apply import (
    _annotations,
    _labels,
    _meta,
    _obj_labels,
    adoptions,
    helm_owner,
    objects_to_apply,
    release_action,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.checks import (
    check_cluster,
    driver_problems,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.plan import (
    _cel_driver,
    _component_values,
    _device_class_drivers,
    _dra_ships,
    _driver_installer,
    _fabric_pools,
    _gke_driver_pools,
    _gke_minor,
    _plan_gke_driver,
    _pool_affinity,
    _pool_expectations,
    _preset,
    _uninstalled_driver_warnings,
    _wants_compute_domains,
    plan_cluster,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.render import (
    _argocd_application_set,
    _argocd_release,
    _flux_kustomization,
    _flux_release,
    _generator_meta,
    _stack_wave,
    fleet_generator,
    render_objects,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.versions import (
    ARGOCD_API,
    ARGOCD_IN_CLUSTER,
    COMPONENT_TITLES,
    COMPONENTS,
    COMPUTE_DOMAIN_DRIVER,
    CRD_DEPENDENCIES,
    DEFAULT_DRIVER_ROOTS,
    DEFAULT_GROVE_PIN,
    DRANET_DRIVER,
    DRIVER_VERSION_RE,
    EFA_DRIVER,
    EPP_IMAGE,
    FABRIC_COMPONENTS,
    FLUX_HELMRELEASE,
    FLUX_KUSTOMIZATION,
    FLUX_RELEASE_INTERVAL,
    FLUX_SOURCE,
    FLUX_SOURCE_INTERVAL,
    FLUX_SYNC_INTERVAL,
    GATEWAY_CONTROLLER_MAX,
    GATEWAY_CONTROLLER_RE,
    GENERATOR_PART,
    GITOPS_PATH_RE,
    GKE_ACCELERATOR_LABEL,
    GKE_DRIVER,
    GKE_DRIVER_VERSION_LABEL,
    GPU_DRIVER,
    HELM_CHART_LAYER,
    HELM_MANAGED_BY,
    HELM_RELEASE_NAME,
    HELM_RELEASE_NAMESPACE,
    KSERVE_API_VERSION,
    OPTIONAL_COMPONENTS,
    PRESETS,
    ChartPin,
    ClusterPool,
    CriticalPodsQuota,
    GatewayOptions,
    GitopsOptions,
    GkeDriverPin,
    GkeDriverVersion,
    Provider,
    StackCluster,
    StackOptions,
    VersionMatrix,
    _gke_only,
    deep_merge,
    gke_driver_table,
    matrix_table,
    parse_versions,
)

__all__ = [
    "ARGOCD_API",
    "ARGOCD_IN_CLUSTER",
    "COMPONENTS",
    "COMPONENT_TITLES",
    "COMPUTE_DOMAIN_DRIVER",
    "CRD_DEPENDENCIES",
    "DEFAULT_DRIVER_ROOTS",
    "DEFAULT_GROVE_PIN",
    "DRANET_DRIVER",
    "DRIVER_VERSION_RE",
    "EFA_DRIVER",
    "EPP_IMAGE",
    "FABRIC_COMPONENTS",
    "FLUX_HELMRELEASE",
    "FLUX_KUSTOMIZATION",
    "FLUX_RELEASE_INTERVAL",
    "FLUX_SOURCE",
    "FLUX_SOURCE_INTERVAL",
    "FLUX_SYNC_INTERVAL",
    "GATEWAY_CONTROLLER_MAX",
    "GATEWAY_CONTROLLER_RE",
    "GENERATOR_PART",
    "GITOPS_PATH_RE",
    "GKE_ACCELERATOR_LABEL",
    "GKE_DRIVER",
    "GKE_DRIVER_VERSION_LABEL",
    "GPU_DRIVER",
    "HELM_CHART_LAYER",
    "HELM_MANAGED_BY",
    "HELM_RELEASE_NAME",
    "HELM_RELEASE_NAMESPACE",
    "KSERVE_API_VERSION",
    "OPTIONAL_COMPONENTS",
    "PRESETS",
    "STACK_OWNER",
    "ChartPin",
    "ClusterPool",
    "CriticalPodsQuota",
    "GatewayOptions",
    "GitopsOptions",
    "GkeDriverPin",
    "GkeDriverVersion",
    "Provider",
    "StackCluster",
    "StackOptions",
    "VersionMatrix",
    "_annotations",
    "_argocd_application_set",
    "_argocd_release",
    "_cel_driver",
    "_component_values",
    "_device_class_drivers",
    "_dra_ships",
    "_driver_installer",
    "_fabric_pools",
    "_flux_kustomization",
    "_flux_release",
    "_generator_meta",
    "_gke_driver_pools",
    "_gke_minor",
    "_gke_only",
    "_labels",
    "_meta",
    "_obj_labels",
    "_plan_gke_driver",
    "_pool_affinity",
    "_pool_expectations",
    "_preset",
    "_stack_wave",
    "_uninstalled_driver_warnings",
    "_wants_compute_domains",
    "adoptions",
    "check_cluster",
    "deep_merge",
    "driver_problems",
    "fleet_generator",
    "gke_driver_table",
    "helm_owner",
    "matrix_table",
    "objects_to_apply",
    "parse_versions",
    "plan_cluster",
    "release_action",
    "render_objects",
]
