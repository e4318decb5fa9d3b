# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Model caches from OCI model images (issue 30, item 4): ``source.oci`` (a ModelPack artifact or a model-car image,
``oci://REGISTRY/REPOSITORY:TAG``) is mounted read-only as an image volume (Kubernetes ImageVolume, GA in 1.36:
``volumes[].image: {reference, pullPolicy}``) where the cache's volume would be, so there is no PVC and no
hydration Job: the kubelet pulls the image when a serving pod starts on a node.

A cluster older than 1.36 cannot mount one, and the hydrator cannot fetch OCI artifacts (that needs a registry client
the collection does not ship), so a cache with ``source.oci`` that may be staged on such a cluster is a validation
error naming the field and the clusters (:func:`image_volume_errors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import KubernetesVersion

#: Image volumes are GA (and on by default) from Kubernetes 1.36.
MIN_IMAGE_VOLUME = KubernetesVersion(1, 36)


def image_volume(name: str, cache: Any) -> dict[str, Any]:
    """The pod volume ``name`` of a ``source.oci`` cache (a ``ModelCache``): the image, read-only by construction."""
    oci = cache.source.oci
    return {"name": name, "image": {"reference": oci.image, "pullPolicy": oci.pull_policy}}


def image_sub_path(cache: Any) -> dict[str, str]:
    """``{"subPath": path}`` for the cache's volume mount when ``source.oci.path`` names a directory of the image (a
    model-car image keeps the model under ``models``); ``{}`` otherwise (and for a cache that is not an image)."""
    oci = cache.source.oci
    return {"subPath": oci.path} if oci is not None and oci.path else {}


def image_volume_errors(
    caches: Iterable[Any],
    targets: Mapping[str, Sequence[str]],
    paths: Mapping[str, str],
    clusters: Mapping[str, Any],
) -> list[tuple[str, str]]:
    """``(field path, message)`` for each ``source.oci`` cache that may be staged on a cluster whose declared
    Kubernetes version is older than 1.36, or not declared (an existing cluster without
    ``gpufleet_kubernetes_version``). ``targets``: the clusters each cache may be staged on; ``paths``: where each
    cache was read from; ``clusters``: the fleet's ``Cluster`` models by name."""
    errors = []
    for cache in caches:
        if cache.source.oci is None:
            continue
        old, unknown = [], []
        for name in targets.get(cache.name) or []:
            declared = getattr(clusters.get(name), "declared_version", None)
            if declared is None:
                unknown.append(name)
            elif KubernetesVersion.parse(declared) < MIN_IMAGE_VOLUME:
                old.append(f"{name} ({declared})")
        if not old and not unknown:
            continue
        why = []
        if old:
            why.append(f"cluster(s) {', '.join(old)} run Kubernetes older than {MIN_IMAGE_VOLUME}")
        if unknown:
            why.append(
                f"cluster(s) {', '.join(unknown)} declare no Kubernetes version (set gpufleet_kubernetes_version in "
                "their host_vars)"
            )
        errors.append(
            (
                f"{paths.get(cache.name, cache.name)}.source.oci",
                f"an OCI model image is mounted as an image volume, GA from Kubernetes {MIN_IMAGE_VOLUME}, but "
                f"{'; '.join(why)}. Limit the cache and the deployments that mount it to clusters of "
                f"{MIN_IMAGE_VOLUME} or later (clusters), or publish the model to Hugging Face, S3 or HTTP: the "
                "hydrator cannot fetch OCI artifacts (it would need a registry client the collection does not ship)",
            )
        )
    return errors
