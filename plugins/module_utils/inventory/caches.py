# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Model caches: where the weights come from (Hugging Face, S3, HTTP), where they are staged (storage) and
``ModelCache``.

Part of the fleet model; ``models.py`` is the façade other code imports.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from ansible_collections.gpufleet.serving.plugins.module_utils.inventory.common import (
    Field,
    _check_source_url,
    _Strict,
    check_dns_label,
    check_dns_subdomain,
    check_positive_quantity,
    field_validator,
    model_validator,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.redact import (
    has_userinfo,
    url_credentials,
)

# --------------------------------------------------------------------------------------------------------------------
# Model caches (design.md §5)
# --------------------------------------------------------------------------------------------------------------------


class HuggingFaceSource(_Strict):
    repo: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
    revision: str = "main"
    token_secret: str | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


class S3Source(_Strict):
    uri: str = Field(pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^?#\s]*)?$")
    endpoint: str | None = None
    region: str | None = None
    credentials_secret: str | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)

    @field_validator("uri", mode="before")
    @classmethod
    def _uri_credentials(cls, v: Any) -> Any:
        # Before the pattern check, whose generic message would show the URI (redacted, but not saying why).
        if isinstance(v, str) and (has_userinfo(v) or url_credentials(v)):
            raise ValueError(
                "carries credentials (KEY:SECRET@ or a token): credentials never go into fleet data (they would be "
                "copied into every cluster's Job, annotations and logs); put the access keys in a Secret and name it "
                "in source.s3.credentials_secret"
            )
        return v

    _endpoint = field_validator("endpoint")(
        classmethod(
            lambda cls, v: (
                v
                if v is None
                else _check_source_url(v, "put the access keys in a Secret and name it in source.s3.credentials_secret")
            )
        )
    )


HTTP_URL_SECRET_KEY = "url"
HTTP_USERNAME_KEY = "username"
HTTP_PASSWORD_KEY = "password"


class HttpSource(_Strict):
    """One file over http(s). Credentials live in Secrets: ``credentials_secret`` (keys ``username``/``password``, HTTP
    basic auth) or ``url_secret`` (key ``url``: the full URL, e.g. a presigned one; ``url`` is then its credential-free
    form — scheme, host and path — used for display, annotations and identity)."""

    url: str
    credentials_secret: str | None = None
    url_secret: str | None = None

    _url = field_validator("url")(
        classmethod(
            lambda cls, v: _check_source_url(
                v,
                "put user and password in a Secret named by source.http.credentials_secret (keys username, password), "
                "or the whole URL (presigned) in a Secret named by source.http.url_secret (key url) and keep only "
                "scheme, host and path in source.http.url",
            )
        )
    )
    _secrets = field_validator("credentials_secret", "url_secret")(
        classmethod(lambda cls, v: v if v is None else check_dns_subdomain(v))
    )

    @model_validator(mode="after")
    def _one_secret(self) -> HttpSource:
        if self.credentials_secret and self.url_secret:
            raise ValueError("set credentials_secret (basic auth) or url_secret (a presigned URL), not both")
        return self


#: An OCI model image reference (ModelPack / model-car): ``oci://REGISTRY/REPO[:TAG][@sha256:DIGEST]``.
OCI_PREFIX = "oci://"
_OCI_RE = (
    r"^oci://[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)+"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)


class OciSource(_Strict):
    """A model packaged as an OCI image (a ModelPack artifact or a model-car image), mounted read-only as an image
    volume (Kubernetes ImageVolume, GA in 1.36) where the cache would be: no PVC, no hydration Job."""

    reference: str
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    # The directory inside the image that holds the model (a model-car image's ``models``), mounted as the cache
    # (volumeMounts subPath); unset: the image's root (a ModelPack artifact's layers are the model's files).
    path: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$", max_length=255)

    @field_validator("reference")
    @classmethod
    def _reference(cls, v: str) -> str:
        if len(v) > 512 or not re.match(_OCI_RE, v):
            raise ValueError(
                "must be an OCI image reference oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST "
                "(lowercase registry and repository, e.g. oci://ghcr.io/org/qwen2.5-0.5b:v1)"
            )
        return v

    @property
    def image(self) -> str:
        """The image reference as Kubernetes takes it (without ``oci://``)."""
        return self.reference[len(OCI_PREFIX) :]


class CacheSource(_Strict):
    hugging_face: HuggingFaceSource | None = None
    s3: S3Source | None = None
    http: HttpSource | None = None
    oci: OciSource | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> CacheSource:
        set_ = [k for k in ("hugging_face", "s3", "http", "oci") if getattr(self, k) is not None]
        if len(set_) != 1:
            raise ValueError(f"must set exactly one of hugging_face, s3, http, oci (got {', '.join(set_) or 'none'})")
        return self

    @property
    def uri(self) -> str:
        if self.hugging_face:
            return f"hf://{self.hugging_face.repo}"
        if self.s3:
            return self.s3.uri
        if self.oci:
            return self.oci.reference
        return self.http.url if self.http else ""

    @property
    def revision(self) -> str | None:
        return self.hugging_face.revision if self.hugging_face else None


class CacheStorage(_Strict):
    backend: Literal["pvc", "existing_pvc"] = "pvc"
    claim_name: str | None = None
    storage_class: str | None = None

    @model_validator(mode="after")
    def _claim(self) -> CacheStorage:
        if self.backend == "existing_pvc" and not self.claim_name:
            raise ValueError("claim_name is required when backend is existing_pvc (the PVC to adopt)")
        if self.claim_name:
            check_dns_subdomain(self.claim_name)
        return self


#: ``ModelCache.clusters`` value: the cache follows the placement of the deployments that mount it.
CACHE_FOLLOW = "follow"


class ModelCache(_Strict):
    name: str
    namespace: str = "default"
    # ``follow`` (CACHE_FOLLOW): staged exactly where the deployments that mount it are placed (cache_placement.py);
    # a host pattern pre-warms those clusters on purpose. Unset: ``follow`` when a deployment mounts the cache, else
    # ``gpufleet_clusters``.
    clusters: str | None = None
    source: CacheSource
    size: str
    storage: CacheStorage = Field(default_factory=CacheStorage)
    # flat: the files at their paths (vLLM --model=/mnt/models); hf: a Hugging Face hub cache (blobs, snapshots, refs;
    # the engine gets HF_HUB_CACHE and --model ORG/NAME --revision REV). docs/caches.md.
    layout: Literal["flat", "hf"] = "flat"
    # Filled in by fleet_info (the clusters the cache may be staged on); accepted so its output can be fed back.
    candidate_clusters: list[str] = Field(default_factory=list, exclude=True)

    _name = field_validator("name", "namespace")(classmethod(lambda cls, v: check_dns_label(v)))
    _size = field_validator("size", mode="before")(classmethod(lambda cls, v: check_positive_quantity(v)))

    @model_validator(mode="after")
    def _layout(self) -> ModelCache:
        if self.layout == "hf" and self.source.hugging_face is None:
            raise ValueError("layout hf needs a hugging_face source (its cache is keyed by repo and commit)")
        if self.layout == "hf" and self.storage.backend != "pvc":
            raise ValueError("layout hf is written by the hydration Job: it needs storage.backend pvc")
        if self.source.oci is not None and self.storage != CacheStorage():  # the default round-trips (fleet_info)
            raise ValueError(
                "source.oci is mounted as an image volume (no PVC, no hydration Job): remove storage from this cache"
            )
        return self

    @property
    def image_volume(self) -> bool:
        """Mounted as an OCI image volume (``source.oci``): nothing is staged or hydrated on the cluster."""
        return self.source.oci is not None

    @property
    def claim_name(self) -> str:
        return self.storage.claim_name or f"gpufleet-cache-{self.name}"

    @property
    def follows(self) -> bool:
        """Staged where its deployments are placed (``clusters: follow``; fleet/inventory.py resolves an unset ``clusters``)."""
        return self.clusters == CACHE_FOLLOW
