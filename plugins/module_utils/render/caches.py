# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Kubernetes objects of a model cache on one cluster (design.md §5): PVC, hydrator ConfigMap, hydration Job.

Pure functions of their inputs, shared by the ``gpufleet.serving.cache_manifests`` filter, the ``model_cache`` role
and the unit tests:

* :func:`cache_objects` — the objects one cache needs on one cluster: a ReadWriteMany PVC, an immutable ConfigMap
  carrying the hydrator program (``roles/model_cache/files/hydrate.py``) and a one-shot Job that runs it into
  ``/mnt/models``. A cache with ``storage.backend: existing_pvc`` adopts the customer's PVC: no object at all.
* :func:`resolve_storage_class` — the cache's own ``storage.storage_class``, else the cluster's
  ``gpufleet_cache_storage_class``, else an error naming the cluster.
* :func:`summarize_status` — the per-cluster readiness table and the fleet line (``2/3 ready``).

Secrets never appear in what these functions return: credentials reach the Job as ``secretKeyRef`` references to
the Secret named in the cache's source (``token_secret`` / ``credentials_secret``), never as values.

The Job's name ends with a hash of its whole pod spec (source URI, revision, filters, image, hydrator script via the
ConfigMap name, resources, ...). A Job's pod template is immutable, so any change must produce a new Job; in
particular a changed source or revision starts a new hydration.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal

from ansible_collections.gpufleet.serving.plugins.module_utils import contract
from ansible_collections.gpufleet.serving.plugins.module_utils.cache_placement import STAGING_KEYS
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.hydrator_exit import status_meanings
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    HTTP_PASSWORD_KEY,
    HTTP_URL_SECRET_KEY,
    HTTP_USERNAME_KEY,
    BaseModel,
    ConfigDict,
    Field,
    ModelCache,
    ValidationError,
    check_dns_label,
    model_validator,
    parse,
    require_pydantic,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.redact import (
    credential_name,
    describe,
    redact_text,
    value_credentials,
)

# The cache's labels and annotations are part of the collection's Kubernetes contract (contract.py).
MANAGED_BY = contract.MANAGED_BY
COMPONENT = contract.COMPONENT_CACHE
LABEL_MANAGED_BY = contract.LABEL_MANAGED_BY
LABEL_CACHE = contract.LABEL_CACHE
LABEL_CLUSTER = contract.LABEL_CLUSTER
LABEL_COMPONENT = contract.LABEL_COMPONENT
ANNOTATION_SOURCE = contract.ANNOTATION_SOURCE
ANNOTATION_REVISION = contract.ANNOTATION_REVISION
ANNOTATION_HYDRATED_BY = contract.ANNOTATION_HYDRATED_BY

MOUNT_PATH = "/mnt/models"
MANIFEST_PATH = f"{MOUNT_PATH}/.gpufleet/manifest.json"
HYDRATOR_DIR = "/opt/gpufleet"
HYDRATOR_FILE = "hydrate.py"
PYDEPS_DIR = "/opt/pydeps"
TMP_DIR = "/tmp"
HYDRATE_CONTAINER = "hydrate"
DEPS_CONTAINER = "install-deps"

# A stock Python image; the Job's init container installs the hydrator's libraries (model_cache_pip_packages).
DEFAULT_IMAGE = "docker.io/library/python:3.13-slim"
# The versions the hydrator is tested with (requirements-dev.txt).
DEFAULT_PIP_PACKAGES: tuple[str, ...] = ("huggingface_hub==2.4.0", "boto3==1.44.5")
DEFAULT_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "1", "memory": "2Gi"},
    "limits": {"memory": "4Gi"},
}
DEFAULT_SECRET_KEYS: dict[str, str] = {
    "hf_token": "token",
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "aws_session_token": "AWS_SESSION_TOKEN",
}
DEFAULT_POD_SECURITY_CONTEXT: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
DEFAULT_SECURITY_CONTEXT: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}

# Environment variables the hydrator reads secrets of an http(s) source from (hydrate.py --help).
HTTP_USERNAME_ENV = "GPUFLEET_HTTP_USERNAME"
HTTP_PASSWORD_ENV = "GPUFLEET_HTTP_PASSWORD"
SOURCE_URL_ENV = "GPUFLEET_SOURCE_URL"

JOB_NAME_PREFIX = "gpufleet-hydrate-"
CONFIG_MAP_PREFIX = "gpufleet-hydrator-"
# A Job's name becomes the value of its pods' ``batch.kubernetes.io/job-name`` label: at most 63 characters.
JOB_NAME_MAX = 63
JOB_HASH_LEN = 10
SCRIPT_HASH_LEN = 8

STATUSES = ("Rendered", "Ready", "Hydrating", "Pending", "Failed")
# Hydrator options derived from the cache itself; extra_args may not repeat them, nor any abbreviation of them (the
# hydrator's parser takes none, allow_abbrev=False, but an older hydrator image would).
RESERVED_ARGS = frozenset(
    {"--source", "--dest", "--revision", "--endpoint-url", "--include", "--exclude", "--workers", "--layout"}
)
CHECK_JOB_PREFIX = "gpufleet-check-"

# roles/model_cache/files/hydrate.py exit codes (hydrate.py --help), plus what the kubelet reports: one table,
# plugins/module_utils/hydrator_exit.py, embedded in the hydrator.
EXIT_CODES: dict[int, str] = status_meanings()
# Pod waiting reasons that do not fix themselves.
STUCK_REASONS = frozenset({"CreateContainerConfigError", "InvalidImageName", "ErrImageNeverPull"})


class CacheObjectsError(GpufleetError, ValueError):
    """A cache cannot be turned into Kubernetes objects (bad option, no storage class, ...)."""


# --------------------------------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------------------------------


_NonEmpty = Annotated[str, Field(strict=True, min_length=1)]


class HydrationOptions(BaseModel):
    """How the hydration Job runs (the ``model_cache_*`` role variables), validated like the rest of the fleet data.

    Errors read ``<option> must be ...`` (:meth:`from_mapping` raises :class:`CacheObjectsError`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: Annotated[str, Field(strict=True, pattern=r"\S")] = DEFAULT_IMAGE
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    pip_packages: tuple[_NonEmpty, ...] = DEFAULT_PIP_PACKAGES
    workers: Annotated[int, Field(strict=True, ge=1)] = 8
    extra_args: tuple[_NonEmpty, ...] = ()
    backoff_limit: Annotated[int, Field(strict=True, ge=0)] = 3
    active_deadline_seconds: Annotated[int, Field(strict=True, ge=1)] = 21600
    ttl_seconds_after_finished: Annotated[int, Field(strict=True, ge=0)] | None = 604800
    resources: dict[str, Any] = Field(default_factory=lambda: copy.deepcopy(DEFAULT_RESOURCES))
    env: tuple[dict[str, Any], ...] = ()
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    service_account_name: Annotated[str, Field(strict=True)] = ""
    secret_keys: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_SECRET_KEYS))
    pod_security_context: dict[str, Any] = Field(default_factory=lambda: copy.deepcopy(DEFAULT_POD_SECURITY_CONTEXT))
    security_context: dict[str, Any] = Field(default_factory=lambda: copy.deepcopy(DEFAULT_SECURITY_CONTEXT))
    pvc_annotations: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _cross_checks(self) -> HydrationOptions:
        reserved = sorted({shown for shown in map(reserved_arg, self.extra_args) if shown})
        if reserved:
            raise ValueError(
                f"extra_args must not set {', '.join(reserved)}: they come from the cache's source and the role"
            )
        for i, var in enumerate(self.env):
            if not isinstance(var.get("name"), str) or not var["name"]:
                raise ValueError(f"env[{i}] needs a name (a Kubernetes EnvVar: {{name, value | valueFrom}})")
        credentials = [problem for i, var in enumerate(self.env) if (problem := env_credential(i, var))]
        if credentials:
            raise ValueError(f"{'; '.join(credentials)}: {ENV_CREDENTIAL_ADVICE}")
        unknown = sorted(set(self.secret_keys) - set(DEFAULT_SECRET_KEYS))
        if unknown:
            raise ValueError(
                f"secret_keys has unknown entries {', '.join(unknown)} (known: {', '.join(DEFAULT_SECRET_KEYS)})"
            )
        if set(self.secret_keys) != set(DEFAULT_SECRET_KEYS):
            object.__setattr__(self, "secret_keys", {**DEFAULT_SECRET_KEYS, **self.secret_keys})
        return self

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> HydrationOptions:
        """Build from a mapping of option name to value; ``None`` values mean "use the default"."""
        require_pydantic()
        values = dict(values or {})
        known = set(cls.model_fields)
        unknown = sorted(set(values) - known)
        if unknown:
            raise CacheObjectsError(f"unknown option(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        kwargs = {k: v for k, v in values.items() if v is not None or k == "ttl_seconds_after_finished"}
        try:
            return cls.model_validate(kwargs)
        except ValidationError as exc:
            raise CacheObjectsError("; ".join(_option_error(err) for err in exc.errors(include_url=False))) from None


def reserved_arg(arg: str) -> str | None:
    """How ``arg`` (one token of extra_args) sets a reserved hydrator option: the option (``--dest``, also as
    ``--dest=/x``), or the abbreviation and what it abbreviates (``--des (abbreviates --dest)``); None if it does not.
    Only the option name is shown, never a value."""
    if not arg.startswith("--"):
        return None
    name = arg.split("=", 1)[0]
    if name in RESERVED_ARGS:
        return name
    hits = sorted(opt for opt in RESERVED_ARGS if len(name) > 2 and opt.startswith(name))
    return f"{name} (abbreviates {' or '.join(hits)})" if hits else None


def env_credential(index: int, var: Mapping[str, Any]) -> str | None:
    """``env[i].value: <why>`` when an extra environment variable carries a credential as a plain value (its name looks
    like one, or its value is a URL with a user and password or a token); None otherwise. Never shows the value."""
    if "value" not in var or var["value"] is None or var["value"] == "":
        return None
    name = str(var.get("name"))
    value = var["value"]
    if credential_name(name):
        return f"env[{index}].value: {name} looks like a credential"
    found = value_credentials(value) if isinstance(value, str) else None
    return f"env[{index}].value: the value of {name} carries {found}" if found else None


#: The advice that ends the error listing :func:`env_credential`'s findings.
ENV_CREDENTIAL_ADVICE = (
    "a plain value would be rendered into every hydration Job (and into Git in render mode). Reference a Secret "
    "instead: {name: ..., valueFrom: {secretKeyRef: {name: <secret>, key: <key>}}}. The source's own token belongs in "
    "the Secret the source names (hugging_face.token_secret, s3.credentials_secret, http.credentials_secret or "
    "url_secret), whose values apply mode takes from model_cache_secrets; a value that is no secret may come from a "
    "ConfigMap (valueFrom.configMapKeyRef)"
)


_OPTION_WORDS = {
    "image": "must be a non-empty container image reference",
    "pip_packages": "must be a list of non-empty strings",
    "extra_args": "must be a list of non-empty strings",
    "env": "must be a list of mappings",
    "tolerations": "must be a list of mappings",
    "service_account_name": "must be a string",
}


def _option_error(err: Mapping[str, Any]) -> str:
    """``<option> must be ...`` for one pydantic error of :class:`HydrationOptions`."""
    loc = err.get("loc") or ()
    if not loc:  # the model's cross checks word their own message
        return str(err.get("msg", "")).removeprefix("Value error, ")
    name = str(loc[0])
    kind = str(err.get("type", ""))
    # The input of an option may carry a credential (an env list, a package index URL): shown by redact.describe.
    got = err.get("input")
    shown = describe(got, secret=name == "env")
    if kind in ("int_type", "int_parsing", "greater_than_equal", "int_from_float"):
        bound = (err.get("ctx") or {}).get("ge")
        low = bound if bound is not None else {"workers": 1, "active_deadline_seconds": 1}.get(name, 0)
        return f"{name} must be an integer >= {low} (got {shown})"
    if kind in ("dict_type", "mapping_type"):
        return f"{name} must be a mapping (got {type(got).__name__})"
    if kind == "literal_error":
        return f"{name} must be one of {(err.get('ctx') or {}).get('expected', '')} (got {shown})"
    if name in ("pip_packages", "extra_args") and len(loc) == 1:
        return f"{name} must be a list of strings (got {shown})"
    if name in _OPTION_WORDS:
        return f"{name} {_OPTION_WORDS[name]} (got {shown})"
    return f"{name}: {redact_text(str(err.get('msg', 'is invalid')))}"


# --------------------------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------------------------


def as_cache(cache: Any) -> ModelCache:
    """A validated :class:`ModelCache` from a model or a mapping (``fleet_info``'s ``fleet.caches[]`` items work)."""
    if isinstance(cache, ModelCache):
        return cache
    if not isinstance(cache, Mapping):
        raise CacheObjectsError(
            f"a cache must be a mapping (an entry of gpufleet_model_caches), got {type(cache).__name__}"
        )
    # Keys fleet_info and cache_staged add (where the cache may be / is staged) are not the cache's own fields.
    data = {k: v for k, v in cache.items() if k != "candidate_clusters" and k not in STAGING_KEYS}
    return parse(ModelCache, data, f"gpufleet_model_caches[name={data.get('name', '?')}]")


def cluster_name_and_class(cluster: Any, storage_class: str | None = None) -> tuple[str, str | None]:
    """``cluster`` is a name, or a ``fleet_info`` cluster (``{name, cache_storage_class, ...}``)."""
    if isinstance(cluster, Mapping):
        name = cluster.get("name")
        if storage_class is None:
            storage_class = cluster.get("cache_storage_class")
    else:
        name = cluster
    if not isinstance(name, str) or not name:
        raise CacheObjectsError(
            f"cluster must be a cluster name or a fleet cluster with a name (got {describe(cluster)})"
        )
    try:
        check_dns_label(name)
    except ValueError as exc:
        raise CacheObjectsError(f"cluster {exc}") from None
    if storage_class is not None and (not isinstance(storage_class, str) or not storage_class):
        raise CacheObjectsError(
            f"the storage class of cluster {name!r} must be a non-empty string (got {describe(storage_class)})"
        )
    return name, storage_class


def resolve_storage_class(cache: ModelCache, cluster: str, cluster_storage_class: str | None) -> str:
    """The cache's ``storage.storage_class``, else the cluster's ``gpufleet_cache_storage_class``."""
    chosen = cache.storage.storage_class or cluster_storage_class
    if not chosen:
        raise CacheObjectsError(
            f"cache {cache.name!r} on cluster {cluster!r}: no storage class for its ReadWriteMany volume; set "
            f"gpufleet_cache_storage_class on cluster {cluster!r} (host_vars) or storage.storage_class on the cache"
        )
    return chosen


# --------------------------------------------------------------------------------------------------------------------
# Objects
# --------------------------------------------------------------------------------------------------------------------


def labels(cache: ModelCache, cluster: str) -> dict[str, str]:
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_CACHE: cache.name,
        LABEL_CLUSTER: cluster,
        LABEL_COMPONENT: COMPONENT,
    }


def _digest(data: Any, length: int) -> str:
    text = data if isinstance(data, str) else json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def _source_annotations(cache: ModelCache) -> dict[str, str]:
    out = {ANNOTATION_SOURCE: cache.source.uri}
    if cache.source.revision:
        out[ANNOTATION_REVISION] = cache.source.revision
    return out


def hydrator_args(cache: ModelCache, workers: int, extra_args: Sequence[str] = ()) -> list[str]:
    """The hydrator's command line (after ``python3 hydrate.py``)."""
    src = cache.source
    args = ["--source", src.uri, "--dest", MOUNT_PATH]
    include: list[str] = []
    exclude: list[str] = []
    if src.hugging_face:
        args += ["--revision", src.hugging_face.revision]
        include, exclude = src.hugging_face.include, src.hugging_face.exclude
    elif src.s3:
        if src.s3.endpoint:
            args += ["--endpoint-url", src.s3.endpoint]
        include, exclude = src.s3.include, src.s3.exclude
    for pattern in include:
        args += ["--include", pattern]
    for pattern in exclude:
        args += ["--exclude", pattern]
    if cache.layout != "flat":
        args += ["--layout", cache.layout]  # the flat default is left out: its Jobs keep their names
    args += ["--workers", str(workers)]
    return args + list(extra_args)


def _secret_env(env_name: str, secret: str, key: str, optional: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": env_name, "valueFrom": {"secretKeyRef": ref}}


def source_env(cache: ModelCache, secret_keys: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Credential and region variables of the source: Secret references only, never values."""
    keys = {**DEFAULT_SECRET_KEYS, **dict(secret_keys or {})}
    src = cache.source
    env: list[dict[str, Any]] = []
    if src.hugging_face and src.hugging_face.token_secret:
        env.append(_secret_env("HF_TOKEN", src.hugging_face.token_secret, keys["hf_token"]))
    if src.s3:
        if src.s3.credentials_secret:
            secret = src.s3.credentials_secret
            env.append(_secret_env("AWS_ACCESS_KEY_ID", secret, keys["aws_access_key_id"]))
            env.append(_secret_env("AWS_SECRET_ACCESS_KEY", secret, keys["aws_secret_access_key"]))
            env.append(_secret_env("AWS_SESSION_TOKEN", secret, keys["aws_session_token"], optional=True))
        if src.s3.region:
            env.append({"name": "AWS_REGION", "value": src.s3.region})
            env.append({"name": "AWS_DEFAULT_REGION", "value": src.s3.region})
    if src.http:
        if src.http.credentials_secret:
            env.append(_secret_env(HTTP_USERNAME_ENV, src.http.credentials_secret, HTTP_USERNAME_KEY))
            env.append(_secret_env(HTTP_PASSWORD_ENV, src.http.credentials_secret, HTTP_PASSWORD_KEY))
        if src.http.url_secret:
            env.append(_secret_env(SOURCE_URL_ENV, src.http.url_secret, HTTP_URL_SECRET_KEY))
    return env


def secret_refs(cache: ModelCache, secret_keys: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The Secrets the hydration Job reads: ``[{name, keys: [required keys]}]`` (for apply-mode checks)."""
    out: dict[str, list[str]] = {}
    for var in source_env(cache, secret_keys):
        ref = var.get("valueFrom", {}).get("secretKeyRef")
        if ref and not ref.get("optional"):
            out.setdefault(ref["name"], []).append(ref["key"])
    return [{"name": name, "keys": keys} for name, keys in out.items()]


def _merge_env(base: list[dict[str, Any]], extra: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``extra`` wins by name (a Kubernetes env list is keyed by name; duplicates break server-side apply)."""
    out = [dict(v) for v in base]
    index = {v["name"]: i for i, v in enumerate(out)}
    for var in extra:
        item = copy.deepcopy(dict(var))
        if item["name"] in index:
            out[index[item["name"]]] = item
        else:
            index[item["name"]] = len(out)
            out.append(item)
    return out


def config_map_name(cache: ModelCache, script: str) -> str:
    return f"{CONFIG_MAP_PREFIX}{cache.name}-{_digest(script, SCRIPT_HASH_LEN)}"


def hydrator_config_map(cache: ModelCache, cluster: str, script: str) -> dict[str, Any]:
    """Immutable ConfigMap carrying the hydrator; its name changes with the script's content."""
    if not isinstance(script, str) or not script.strip():
        raise CacheObjectsError(
            "hydrator must be the hydrator program's source text (roles/model_cache/files/hydrate.py)"
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": config_map_name(cache, script),
            "namespace": cache.namespace,
            "labels": labels(cache, cluster),
        },
        "immutable": True,
        "data": {HYDRATOR_FILE: script},
    }


def cache_pvc(
    cache: ModelCache, cluster: str, storage_class: str, annotations: Mapping[str, str] | None = None
) -> dict:
    meta: dict[str, Any] = {"name": cache.claim_name, "namespace": cache.namespace, "labels": labels(cache, cluster)}
    meta["annotations"] = {**dict(annotations or {}), **_source_annotations(cache)}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "volumeMode": "Filesystem",
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": cache.size}},
        },
    }


def job_name(cache: ModelCache, spec: Mapping[str, Any], prefix: str = JOB_NAME_PREFIX) -> str:
    """``<prefix><cache>-<hash of the spec>``, at most 63 characters, the same on every cluster."""
    hashed = copy.deepcopy(dict(spec))
    # The whole pod template is immutable, its metadata too: hash all of it. Only the value of the cluster label
    # differs between clusters (the work does not), so it is left out to keep one name fleet-wide.
    meta = hashed.get("template", {}).get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("labels"), dict):
        meta["labels"].pop(LABEL_CLUSTER, None)
    digest = _digest({"namespace": cache.namespace, "spec": hashed}, JOB_HASH_LEN)
    room = JOB_NAME_MAX - len(prefix) - 1 - JOB_HASH_LEN
    stem = cache.name[:room].rstrip("-")
    return f"{prefix}{stem}-{digest}"


def hydration_job(cache: ModelCache, cluster: str, config_map: str, options: HydrationOptions) -> dict[str, Any]:
    """One-shot Job running ``python3 hydrate.py --source URI --dest /mnt/models ...`` against the cache PVC."""
    lab = labels(cache, cluster)
    base_env = [
        {"name": "HOME", "value": TMP_DIR},
        {"name": "HF_HOME", "value": f"{TMP_DIR}/hf-home"},
        {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
    ]
    mounts = [
        {"name": "models", "mountPath": MOUNT_PATH},
        {"name": "hydrator", "mountPath": HYDRATOR_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": TMP_DIR},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "models", "persistentVolumeClaim": {"claimName": cache.claim_name}},
        {"name": "hydrator", "configMap": {"name": config_map, "defaultMode": 0o444}},
        {"name": "tmp", "emptyDir": {}},
    ]
    init_containers: list[dict[str, Any]] = []
    if options.pip_packages:
        base_env.append({"name": "PYTHONPATH", "value": PYDEPS_DIR})
        mounts.append({"name": "pydeps", "mountPath": PYDEPS_DIR, "readOnly": True})
        volumes.append({"name": "pydeps", "emptyDir": {}})
        init_containers.append(
            {
                "name": DEPS_CONTAINER,
                "image": options.image,
                "imagePullPolicy": options.image_pull_policy,
                "command": [
                    "python3",
                    "-m",
                    "pip",
                    "install",
                    "--no-cache-dir",
                    "--disable-pip-version-check",
                    "--no-warn-script-location",
                    "--target",
                    PYDEPS_DIR,
                    *options.pip_packages,
                ],
                "env": _merge_env(
                    [{"name": "HOME", "value": TMP_DIR}, {"name": "PIP_ROOT_USER_ACTION", "value": "ignore"}],
                    options.env,
                ),
                "resources": copy.deepcopy(dict(options.resources)),
                "securityContext": copy.deepcopy(dict(options.security_context)),
                "volumeMounts": [{"name": "pydeps", "mountPath": PYDEPS_DIR}, {"name": "tmp", "mountPath": TMP_DIR}],
            }
        )
    container = {
        "name": HYDRATE_CONTAINER,
        "image": options.image,
        "imagePullPolicy": options.image_pull_policy,
        "command": ["python3", f"{HYDRATOR_DIR}/{HYDRATOR_FILE}"],
        "args": hydrator_args(cache, options.workers, options.extra_args),
        "env": _merge_env(base_env + source_env(cache, options.secret_keys), options.env),
        "resources": copy.deepcopy(dict(options.resources)),
        "securityContext": copy.deepcopy(dict(options.security_context)),
        "volumeMounts": mounts,
    }
    pod_spec = _job_pod_spec(options)
    if init_containers:
        pod_spec["initContainers"] = init_containers
    pod_spec["containers"] = [container]
    pod_spec["volumes"] = volumes
    return _job(
        cache,
        lab,
        pod_spec,
        options,
        backoff_limit=options.backoff_limit,
        deadline=options.active_deadline_seconds,
        prefix=JOB_NAME_PREFIX,
        annotations=_source_annotations(cache),
    )


# Read-only check of an adopted volume's completion manifest (the same rules the hydrator applies on a re-run:
# the manifest exists, is readable, and every file it lists is a regular file of the recorded size).
CHECK_SCRIPT = """\
import json, os, stat, sys
root = os.path.realpath(sys.argv[1])
path = os.path.join(root, ".gpufleet", "manifest.json")
try:
    with open(path, encoding="utf-8") as handle:
        manifest = json.load(handle)
except FileNotFoundError:
    print(f"not ready: no completion manifest at {path}")
    sys.exit(4)
except (OSError, ValueError) as exc:
    print(f"not ready: unreadable manifest {path}: {exc}")
    sys.exit(1)
files = manifest.get("files") if isinstance(manifest, dict) else None
if not isinstance(files, list):
    print("not ready: the manifest has no file list")
    sys.exit(1)
bad = []
for entry in files:
    rel = str(entry.get("path", "")) if isinstance(entry, dict) else ""
    full = os.path.realpath(os.path.join(root, rel))
    try:
        if not rel or not full.startswith(root + os.sep):
            raise OSError("outside the volume")
        info = os.lstat(full)
        if not stat.S_ISREG(info.st_mode) or info.st_size != entry.get("size"):
            raise OSError("wrong size")
    except OSError:
        bad.append(rel)
if bad:
    print(f"not ready: {len(bad)} file(s) missing or of the wrong size, e.g. {', '.join(bad[:5])}")
    sys.exit(6)
source = manifest.get("source") or {}
revision = manifest.get("revision") or {}
print(json.dumps({"ready": True, "files": len(files), "bytes": manifest.get("bytes"),
                  "source": source.get("uri"), "revision": revision.get("resolved") or revision.get("requested")}))
"""


def adopted_check_job(cache: ModelCache, cluster: str, options: HydrationOptions) -> dict[str, Any]:
    """A one-shot, read-only Job that checks an adopted PVC's completion manifest (apply mode, opt-in; never rendered)."""
    if cache.storage.backend != "existing_pvc":
        raise CacheObjectsError(
            f"cache {cache.name!r}: the manifest check is for adopted PVCs (storage.backend existing_pvc)"
        )
    lab = labels(cache, cluster)
    container = {
        "name": "check",
        "image": options.image,
        "imagePullPolicy": options.image_pull_policy,
        "command": ["python3", "-c", CHECK_SCRIPT, MOUNT_PATH],
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": copy.deepcopy(dict(options.security_context)),
        "volumeMounts": [{"name": "models", "mountPath": MOUNT_PATH, "readOnly": True}],
    }
    pod_spec = _job_pod_spec(options)
    pod_spec["containers"] = [container]
    pod_spec["volumes"] = [
        {"name": "models", "persistentVolumeClaim": {"claimName": cache.claim_name, "readOnly": True}}
    ]
    return _job(cache, lab, pod_spec, options, backoff_limit=0, deadline=900, prefix=CHECK_JOB_PREFIX)


def cache_objects(
    cache: Any,
    cluster: Any,
    hydrator: str,
    *,
    storage_class: str | None = None,
    options: HydrationOptions | Mapping[str, Any] | None = None,
    adopted_check: bool = False,
    fleet: str | None = None,
) -> list[dict[str, Any]]:
    """The objects ``cache`` needs on ``cluster``: ``[PVC, ConfigMap, Job]``, or ``[]`` for an adopted PVC or an OCI
    model image (``source.oci``: mounted as an image volume by the serving pods, nothing is staged).

    ``fleet`` (``gpufleet_fleet_name``) labels every object ``gpufleet.io/fleet=<fleet>``, on its own metadata only:
    the Job's pod template (and so its name, a hash of it) stays the same, so naming a fleet re-hydrates nothing.

    ``cluster`` is a name or a ``fleet_info`` cluster; ``storage_class`` is the cluster's default storage class (taken
    from the fleet cluster's ``cache_storage_class`` when not given). ``hydrator`` is the hydrator's source text.
    With ``adopted_check``, an adopted PVC gets ``[check Job]`` (a read-only manifest check; apply mode only).
    """
    model = as_cache(cache)
    name, cluster_class = cluster_name_and_class(cluster, storage_class)
    opts = options if isinstance(options, HydrationOptions) else HydrationOptions.from_mapping(options)
    if model.image_volume:
        objects = []  # source.oci: an image volume the kubelet pulls (cache_image.py); nothing to stage
    elif model.storage.backend == "existing_pvc":
        objects = [adopted_check_job(model, name, opts)] if adopted_check else []
    else:
        chosen = resolve_storage_class(model, name, cluster_class)
        cm = hydrator_config_map(model, name, hydrator)
        objects = [
            cache_pvc(model, name, chosen, opts.pvc_annotations),
            cm,
            hydration_job(model, name, cm["metadata"]["name"], opts),
        ]
    if fleet is not None:
        for obj in objects:
            obj["metadata"]["labels"] = {**obj["metadata"]["labels"], contract.LABEL_FLEET: fleet}
    return objects


# --------------------------------------------------------------------------------------------------------------------
# Job status
# --------------------------------------------------------------------------------------------------------------------


def _true_conditions(obj: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    status = (obj or {}).get("status") or {}
    out = {}
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and str(cond.get("status")) == "True" and cond.get("type"):
            out[str(cond["type"])] = cond
    return out


def _exit_text(code: Any) -> str:
    meaning = EXIT_CODES.get(code) if isinstance(code, int) else None
    return f"exit code {code}" + (f": {meaning}" if meaning else "")


def _latest_pod(pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    items = [p for p in pods if isinstance(p, Mapping)]
    if not items:
        return None
    return max(
        items,
        key=lambda p: (
            str((p.get("metadata") or {}).get("creationTimestamp") or ""),
            str((p.get("metadata") or {}).get("name") or ""),
        ),
    )


def _pod_facts(pod: Mapping[str, Any] | None) -> dict[str, Any]:
    """The interesting state of a Job's pod: name, scheduling problem, stuck/waiting reason, failed container."""
    facts: dict[str, Any] = {
        "pod": None,
        "container": HYDRATE_CONTAINER,
        "waiting": None,
        "stuck": None,
        "running": False,
    }
    if pod is None:
        return facts
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    facts["pod"] = meta.get("name")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and str(cond.get("status")) == "False":
            facts["waiting"] = f"not scheduled: {cond.get('message') or cond.get('reason') or 'unschedulable'}"
    statuses = [(s, True) for s in status.get("initContainerStatuses") or []] + [
        (s, False) for s in status.get("containerStatuses") or []
    ]
    for cstatus, is_init in statuses:
        state = cstatus.get("state") or {}
        name = cstatus.get("name") or ""
        if "running" in state:
            facts["running"] = True
        waiting = state.get("waiting")
        if waiting and waiting.get("reason") not in (None, "PodInitializing", "ContainerCreating"):
            text = f"{name}: {waiting.get('reason')}" + (f": {waiting['message']}" if waiting.get("message") else "")
            facts["waiting"] = text
            if waiting.get("reason") in STUCK_REASONS:
                facts["stuck"] = text
        terminated = state.get("terminated") or (cstatus.get("lastState") or {}).get("terminated")
        if terminated and terminated.get("exitCode") not in (None, 0):
            facts["container"] = name
            facts["exit"] = f"{name} {'(init) ' if is_init else ''}{_exit_text(terminated.get('exitCode'))}"
            if terminated.get("reason") and terminated.get("reason") not in ("Error", "Completed"):
                facts["exit"] += f" [{terminated['reason']}]"
    return facts


def _seconds_between(start: Any, end: Any) -> int | None:
    """Whole seconds between two RFC 3339 times (a Job's ``startTime`` / ``completionTime``), None if either is
    missing or unreadable, or the interval is negative."""
    import datetime

    try:
        first = datetime.datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        last = datetime.datetime.fromisoformat(str(end).replace("Z", "+00:00"))
    except ValueError:
        return None
    if start is None or end is None or last < first:
        return None
    return int((last - first).total_seconds())


def job_status(job: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Interpret a hydration (or check) Job and its pods as read with ``kubernetes.core.k8s_info``.

    Returns ``{status, reason, message, finished, pod, container}``: ``status`` is Ready (the Job succeeded, so the
    hydrator wrote the completion manifest), Failed (the Job failed, or its pod is stuck on an error that does not fix
    itself), Hydrating (a container runs) or Pending (nothing runs yet). ``finished`` is true for Ready and Failed.
    ``pod``/``container`` name where the last log lines are (for ``kubernetes.core.k8s_log``).
    """
    facts = _pod_facts(_latest_pod(list(pods or [])))
    out: dict[str, Any] = {"pod": facts["pod"], "container": facts["container"]}
    if not job:
        return {
            **out,
            "status": "Failed",
            "reason": "JobNotFound",
            "message": "the Job does not exist",
            "finished": True,
        }
    name = (job.get("metadata") or {}).get("name", "?")
    conds = _true_conditions(job)
    status = job.get("status") or {}
    for kind in ("Complete", "SuccessCriteriaMet"):
        if kind in conds:
            message = f"Job {name} succeeded: the completion manifest is on the volume"
            if status.get("startTime") and status.get("completionTime"):
                message += f" ({status['startTime']} - {status['completionTime']})"
            # How long it took (warm_first: the cluster's measured hydration throughput), when the times parse.
            seconds = _seconds_between(status.get("startTime"), status.get("completionTime"))
            if seconds is not None:
                out["seconds"] = seconds
            return {**out, "status": "Ready", "reason": "Complete", "message": message, "finished": True}
    for kind in ("Failed", "FailureTarget"):
        if kind in conds:
            cond = conds[kind]
            reason = str(cond.get("reason") or kind)
            message = f"Job {name} failed ({reason}"
            message += f": {cond['message']})" if cond.get("message") else ")"
            if facts.get("exit"):
                message += f"; {facts['exit']}"
            return {**out, "status": "Failed", "reason": reason, "message": message, "finished": True}
    if facts["stuck"]:
        return {
            **out,
            "status": "Failed",
            "reason": "PodStuck",
            "message": f"Job {name}: {facts['stuck']}",
            "finished": True,
        }
    if facts["running"] or status.get("ready"):
        message = f"Job {name} is running"
        if facts.get("exit"):
            message += f" (a previous attempt failed: {facts['exit']})"
        return {**out, "status": "Hydrating", "reason": "Running", "message": message, "finished": False}
    message = f"Job {name} has not started: {facts['waiting'] or 'waiting for its pod'}"
    return {**out, "status": "Pending", "reason": "Waiting", "message": message, "finished": False}


# --------------------------------------------------------------------------------------------------------------------
# Status report
# --------------------------------------------------------------------------------------------------------------------


def _short(message: str, limit: int = 160) -> str:
    first = message.splitlines()[0] if message else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


def summarize_status(
    statuses: Sequence[Mapping[str, Any]],
    caches: Sequence[Mapping[str, Any]] | None = None,
    hosts: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Per (cache, cluster) status lines and the fleet line, e.g. ``2/3 ready (1 failed)``.

    ``statuses`` are ``{cache, cluster, status, message}`` entries. With ``caches`` (``fleet_info`` caches, each with
    ``candidate_clusters``) and ``hosts`` (the play's hosts), every expected (cache, cluster) pair that reported
    nothing is listed as Failed, so a cluster whose run broke off is never silently missing.
    """
    if isinstance(statuses, (str, Mapping)) or not isinstance(statuses, Iterable):
        raise CacheObjectsError(f"statuses must be a list of status entries (got {type(statuses).__name__})")
    entries: dict[tuple[str, str], dict[str, str]] = {}
    for i, item in enumerate(statuses):
        if not isinstance(item, Mapping) or not item.get("cache") or not item.get("cluster"):
            raise CacheObjectsError(
                f"statuses[{i}] must be a mapping with cache, cluster and status (got {describe(item)})"
            )
        status = item.get("status")
        if status not in STATUSES:
            raise CacheObjectsError(
                f"statuses[{i}].status must be one of {', '.join(STATUSES)} (got {describe(status)})"
            )
        key = (str(item["cache"]), str(item["cluster"]))
        entries[key] = {"cache": key[0], "cluster": key[1], "status": status, "message": str(item.get("message") or "")}
    if caches is not None:
        wanted_hosts = set(hosts) if hosts is not None else None
        for ci, cache in enumerate(caches):
            if not isinstance(cache, Mapping) or not isinstance(cache.get("name"), str) or not cache["name"]:
                raise CacheObjectsError(f"caches[{ci}] must be a fleet_info cache with a name (got {describe(cache)})")
            candidates = cache.get("candidate_clusters", [])
            if isinstance(candidates, (str, Mapping)) or not isinstance(candidates, Iterable):
                raise CacheObjectsError(f"caches[{ci}].candidate_clusters must be a list of cluster names")
            for cluster in candidates:
                if wanted_hosts is not None and cluster not in wanted_hosts:
                    continue
                entries.setdefault(
                    (cache["name"], cluster),
                    {
                        "cache": cache["name"],
                        "cluster": cluster,
                        "status": "Failed",
                        "message": "no status reported: the play stopped on this cluster before it finished",
                    },
                )
    rows = sorted(entries.values(), key=lambda e: (e["cache"], e["cluster"]))
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in STATUSES}
    total = len(rows)
    if total and counts["Rendered"] == total:
        line = f"{total}/{total} rendered"
    else:
        line = f"{counts['Ready']}/{total} ready"
        extra = [f"{counts[s]} {s.lower()}" for s in ("Hydrating", "Pending", "Failed", "Rendered") if counts[s]]
        if extra:
            line += f" ({', '.join(extra)})"
    table = [("CACHE", "CLUSTER", "STATUS", "MESSAGE")] + [
        (r["cache"], r["cluster"], r["status"], _short(r["message"])) for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table]
    return {
        "caches": rows,
        "lines": [*lines, line],
        "summary": line,
        "total": total,
        "ready": counts["Ready"],
        "rendered": counts["Rendered"],
        "hydrating": counts["Hydrating"],
        "pending": counts["Pending"],
        "failed": counts["Failed"],
        "failures": [f"{r['cache']} on {r['cluster']}: {r['message']}" for r in rows if r["status"] == "Failed"],
    }


def _job_pod_spec(options: HydrationOptions) -> dict[str, Any]:
    """The pod spec every cache Job starts from: no service-account token, never restarted, scheduling options."""
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if options.service_account_name:
        pod_spec["serviceAccountName"] = options.service_account_name
    if options.pod_security_context:
        pod_spec["securityContext"] = copy.deepcopy(dict(options.pod_security_context))
    if options.node_selector:
        pod_spec["nodeSelector"] = dict(options.node_selector)
    if options.tolerations:
        pod_spec["tolerations"] = [copy.deepcopy(dict(t)) for t in options.tolerations]
    return pod_spec


def _job(
    cache: ModelCache,
    lab: Mapping[str, str],
    pod_spec: dict[str, Any],
    options: HydrationOptions,
    *,
    backoff_limit: int,
    deadline: int,
    prefix: str,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A one-shot cache Job around ``pod_spec``, named by a hash of its spec (a changed spec is a new Job)."""
    spec: dict[str, Any] = {"backoffLimit": backoff_limit, "activeDeadlineSeconds": deadline}
    if options.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = options.ttl_seconds_after_finished
    spec["template"] = {"metadata": {"labels": dict(lab)}, "spec": pod_spec}
    metadata: dict[str, Any] = {
        "name": job_name(cache, spec, prefix),
        "namespace": cache.namespace,
        "labels": dict(lab),
    }
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}
