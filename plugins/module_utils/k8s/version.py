# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A cluster's Kubernetes version: the one parser and the one minimum.

Every place that reads a Kubernetes version goes through :class:`KubernetesVersion`: the inventory's declared
``kubernetes_version`` (models: GKE, EKS and existing clusters, and placement's clusters), the minor release that
decides a cluster's CEL library (``dra_cel``) and its allocator features (``dra.features``), what a provider reports
(GKE's ``currentMasterVersion``, an EKS nodegroup's ``version``) and what an API server reports (``gitVersion``, the
preflight of an existing cluster).

Two grammars, one type:

* :meth:`KubernetesVersion.parse` -- the inventory's: ``MAJOR.MINOR`` (``1.34``), ``MAJOR.MINOR.PATCH`` (``1.34.1``)
  or a provider patch version (``1.34.1-gke.1431000``); nothing else (no ``v``, spaces or trailing text).
* :meth:`KubernetesVersion.parse_reported` -- what servers and provider APIs report: an optional ``v``, then
  ``MAJOR.MINOR[.PATCH]`` and an optional ``-...`` / ``+...`` suffix (``v1.34.1+k3s1``, ``v1.35.2-eks-3025e55``).

:data:`MIN_DRA_KUBERNETES` is the oldest version the collection supports: DRA's ``resource.k8s.io/v1`` is GA from
Kubernetes 1.34 (design.md §1).

Imports nothing of the collection (a leaf of ``module_utils``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

#: The inventory's grammar: MAJOR.MINOR, optionally .PATCH and a provider build suffix of dot/dash separated
#: alphanumerics (GKE's 1.34.1-gke.1431000); nothing else (no spaces, shell characters or trailing text).
DECLARED_RE = re.compile(
    r"^(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})(?:\.(0|[1-9]\d{0,3})(-[0-9A-Za-z]+(?:[.-][0-9A-Za-z]+)*)?)?$"
)
#: The longest declared version accepted.
MAX_DECLARED = 64
#: What API servers and provider APIs report (``gitVersion`` ``v1.34.1+k3s1``, GKE's ``1.34.1-gke.1431000``).
REPORTED_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?([-+].*)?\Z")


@functools.total_ordering
@dataclass(frozen=True, eq=False)
class KubernetesVersion:
    """A Kubernetes version: ``major.minor`` and, when one was given, ``patch`` and a provider ``suffix``
    (``-gke.1431000``, ``+k3s1``).

    Versions compare by ``(major, minor, patch)`` (a missing patch counts as 0; the suffix is ignored), so
    ``version < MIN_DRA_KUBERNETES`` and ``have.minor_version < want.minor_version`` read as they should.
    ``str()`` gives the version without the ``v`` (``1.34``, ``1.34.1-gke.1431000``).
    """

    major: int
    minor: int
    patch: int | None = None
    suffix: str = ""

    @classmethod
    def parse(cls, text: str) -> KubernetesVersion:
        """A declared version (the inventory's grammar); ``ValueError`` naming the accepted forms otherwise."""
        return _parse_declared(text)

    @classmethod
    def parse_reported(cls, text: str) -> KubernetesVersion | None:
        """A version as a server or a provider API reports it (``v1.34.1+k3s1``); None when it is not one."""
        return _parse_reported(str(text))

    @property
    def release(self) -> tuple[int, int]:
        """``(major, minor)``: the minor release, which decides APIs, CEL libraries and feature gates."""
        return (self.major, self.minor)

    @property
    def minor_version(self) -> KubernetesVersion:
        """This version's minor release (``1.34.1-gke.1`` -> ``1.34``)."""
        return self if self.patch is None else KubernetesVersion(self.major, self.minor)

    def matches(self, declared: KubernetesVersion) -> bool:
        """Whether this (observed) version is ``declared`` to the precision it was declared with: the minor release
        for ``1.34``, the patch release too for ``1.34.1`` (a provider suffix is not compared)."""
        if declared.patch is None:
            return self.release == declared.release
        return self._key == declared._key

    @property
    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch or 0)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KubernetesVersion):
            return NotImplemented
        return self._key == other._key

    def __lt__(self, other: KubernetesVersion) -> bool:
        if not isinstance(other, KubernetesVersion):
            return NotImplemented
        return self._key < other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        patch = "" if self.patch is None else f".{self.patch}"
        return f"{self.major}.{self.minor}{patch}{self.suffix}"


#: DRA ``resource.k8s.io/v1`` is GA from Kubernetes 1.34: the oldest version the collection supports (design.md §1).
MIN_DRA_KUBERNETES = KubernetesVersion(1, 34)


@functools.lru_cache(maxsize=256)
def _parse_declared(text: str) -> KubernetesVersion:
    match = DECLARED_RE.fullmatch(text) if isinstance(text, str) and len(text) <= MAX_DECLARED else None
    if not match:
        raise ValueError(
            f"{text!r} must be a Kubernetes version: MAJOR.MINOR ({MIN_DRA_KUBERNETES}), MAJOR.MINOR.PATCH "
            f"({MIN_DRA_KUBERNETES}.1) or a provider patch version such as {MIN_DRA_KUBERNETES}.1-gke.1431000"
        )
    major, minor, patch, suffix = match.groups()
    return KubernetesVersion(int(major), int(minor), None if patch is None else int(patch), suffix or "")


@functools.lru_cache(maxsize=256)
def _parse_reported(text: str) -> KubernetesVersion | None:
    match = REPORTED_RE.match(text.strip())
    if not match:
        return None
    major, minor, patch, suffix = match.groups()
    return KubernetesVersion(int(major), int(minor), None if patch is None else int(patch), suffix or "")


def supported(text: str) -> KubernetesVersion:
    """A declared version the collection supports: :meth:`KubernetesVersion.parse`, and not older than
    :data:`MIN_DRA_KUBERNETES`; ``ValueError`` (the message a field path is put in front of) otherwise."""
    version = KubernetesVersion.parse(text)
    if version < MIN_DRA_KUBERNETES:
        raise ValueError(
            f"{text!r} is older than {MIN_DRA_KUBERNETES}: DRA (resource.k8s.io/v1) is GA from Kubernetes "
            f"{MIN_DRA_KUBERNETES}"
        )
    return version
