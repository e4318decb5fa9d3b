"""Schema checks for rendered Kubernetes objects, shared by every test that renders manifests.

``validate_objects(objs)`` checks each object against

* the Kubernetes OpenAPI schemas shipped with ``kubernetes-validate`` (strict variant: unknown fields are errors) for
  every requested Kubernetes version. A kind it has no schema for is an error (``kubernetes-validate`` itself only
  warns), unless it is one of the custom resources below;
* the upstream CRD schemas of ``crd_schema_dir()`` (LeaderWorkerSet, HTTPRoute, Gateway, LLMInferenceService, Flux,
  Argo CD, ...), loaded with ``additionalProperties: false`` added to every object schema that has ``properties``, no
  ``additionalProperties``/``x-kubernetes-preserve-unknown-fields`` and is not under a ``metadata`` property (the
  rule the schemas README gives). Pod templates embedded in those custom resources are also checked against the
  Kubernetes PodTemplateSpec/PodSpec schema of every requested version;
* the API server's own object-meta rules that JSON Schema cannot express: name syntax (DNS-1035 label for Services
  and LeaderWorkerSets, DNS-1123 subdomain otherwise), namespace syntax, label key/value syntax.

``crd_schema_dir()`` is, in this order: ``$GPUFLEET_CRD_SCHEMAS`` when set; ``<repo>/../shared/schemas`` when it exists
(an optional speed-up on the machine that has it; ``GPUFLEET_NO_SHARED_SCHEMAS=1`` ignores it, for testing the
fetched set); else the cache ``make crds`` fills (tests/lib/crd_fetch.py: the CRDs at pinned versions from their Go
modules, in ``~/.cache/gpufleet-crd-schemas/<key>``). When none exists, built-in kinds are still fully checked and
the call then fails (it never skips) naming the custom resources that could not be checked and saying to run
``make crds``.

Not checked: ``x-kubernetes-validations`` CEL rules, list-map key uniqueness, admission webhooks.

Loaded schemas and compiled validators are cached per process (``functools.cache``); see ``schema_load_seconds()``.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import crd_fetch
import jsonschema
import yaml
from referencing import Registry, Resource

REPO = Path(__file__).resolve().parents[2]
SHARED_SCHEMAS = REPO.parent / "shared" / "schemas"
DEFAULT_VERSIONS: tuple[str, ...] = ("1.34", "1.35", "1.36", "1.37")

# Custom resources with an upstream schema (every one `make crds` fetches); used to tell "CRD schemas missing" from
# "unknown kind".
KNOWN_CRDS: frozenset[tuple[str, str]] = crd_fetch.known_crds()

# Embedded pod templates in custom resources: (apiVersion prefix, kind) -> [(path, core definition)].
_EMBEDDED_PODS: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "LeaderWorkerSet": [
        (("spec", "leaderWorkerTemplate", "leaderTemplate"), "PodTemplateSpec"),
        (("spec", "leaderWorkerTemplate", "workerTemplate"), "PodTemplateSpec"),
    ],
    "LLMInferenceService": [
        (("spec", "template"), "PodSpec"),
        (("spec", "worker"), "PodSpec"),
        (("spec", "prefill", "template"), "PodSpec"),
        (("spec", "prefill", "worker"), "PodSpec"),
    ],
    "LLMInferenceServiceConfig": [
        (("spec", "template"), "PodSpec"),
        (("spec", "worker"), "PodSpec"),
    ],
}

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Kinds whose name must be a DNS-1035 label (the API server's, or the controller's webhook's, rule).
DNS1035_KINDS = frozenset({"Service", "LeaderWorkerSet"})

_LOAD_SECONDS: dict[str, float] = {}


class SchemaValidationError(AssertionError):
    """Raised with one line per problem: ``<Kind>/<namespace>/<name> [<schema>]: <path>: <message>``."""


# ----------------------------------------------------------------------------------------------------------------
# Kubernetes built-in schemas (kubernetes-validate's data, loaded once per version)
# ----------------------------------------------------------------------------------------------------------------


def _kv_root() -> Any:
    return importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"


@functools.cache
def _kv_versions() -> dict[tuple[int, int], str]:
    out = {}
    for entry in _kv_root().iterdir():
        m = re.match(r"^v(\d+)\.(\d+)\.\d+-local-strict$", entry.name)
        if m:
            out[(int(m.group(1)), int(m.group(2)))] = entry.name
    return out


def _version_dir(version: str) -> str:
    m = re.match(r"^v?(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"{version!r} is not a Kubernetes version such as 1.34")
    wanted = (int(m.group(1)), int(m.group(2)))
    available = _kv_versions()
    if wanted not in available:
        known = ", ".join(f"{a}.{b}" for a, b in sorted(available))
        raise ValueError(f"kubernetes-validate has no schemas for Kubernetes {version} (has {known})")
    return available[wanted]


@functools.cache
def _k8s_registry(version: str) -> tuple[Registry, str]:
    start = time.perf_counter()
    directory = _version_dir(version)
    definitions = json.loads((_kv_root() / directory / "_definitions.json").read_text())
    registry = Resource.from_contents(definitions) @ Registry()
    _LOAD_SECONDS[f"k8s {version} definitions"] = time.perf_counter() - start
    return registry, definitions["$id"]


def _api_file_part(api_version: str) -> str:
    # kubernetes-validate's file naming: "rbac.authorization.k8s.io/v1" -> "rbac-v1", "v1" -> "v1".
    return re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)


@functools.cache
def _k8s_validator(version: str, api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    registry = _k8s_registry(version)[0]
    path = _kv_root() / _version_dir(version) / f"{kind.lower()}-{_api_file_part(api_version)}.json"
    if not path.is_file():
        return None
    schema = json.loads(path.read_text())
    # The per-kind files are generic over the group name; make sure this is really the group asked for.
    gvks = schema.get("x-kubernetes-group-version-kind") or []
    group, _sep, ver = api_version.rpartition("/")
    if gvks and not any(
        g.get("group", "") == group and g.get("version") == ver and g.get("kind") == kind for g in gvks
    ):
        return None
    return jsonschema.Draft202012Validator(schema, registry=Resource.from_contents(schema) @ registry)


@functools.cache
def _k8s_definition_validator(version: str, definition: str) -> jsonschema.protocols.Validator:
    registry, defs_id = _k8s_registry(version)
    schema = {"$ref": f"{defs_id}#/$defs/io.k8s.api.core.v1.{definition}"}
    return jsonschema.Draft202012Validator(schema, registry=registry)


# ----------------------------------------------------------------------------------------------------------------
# Upstream CRD schemas ($GPUFLEET_CRD_SCHEMAS, ../shared/schemas, or the `make crds` cache)
# ----------------------------------------------------------------------------------------------------------------


def crd_schema_candidates() -> list[Path]:
    """Where the CRD schemas are looked for, in order (the environment is read on each call)."""
    explicit = os.environ.get("GPUFLEET_CRD_SCHEMAS")
    if explicit:
        return [Path(explicit)]
    shared = [] if os.environ.get("GPUFLEET_NO_SHARED_SCHEMAS", "") not in ("", "0") else [SHARED_SCHEMAS]
    return [*shared, crd_fetch.schema_dir()]


def crd_schema_dir() -> Path | None:
    """The CRD schema directory the checks use, or None when there is none (run ``make crds``).

    ``$GPUFLEET_CRD_SCHEMAS`` when set (it must exist); else ``../shared/schemas`` beside the checkout unless
    ``GPUFLEET_NO_SHARED_SCHEMAS`` is set (test-only: check against the fetched set on a machine that has ../shared);
    else the fetched cache of the current pins when ``make crds`` completed it."""
    for candidate in crd_schema_candidates():
        if candidate == crd_fetch.schema_dir():
            if crd_fetch.is_complete(candidate):
                return candidate
        elif candidate.is_dir():
            return candidate
    return None


def missing_crd_schemas_message() -> str:
    looked = ", ".join(str(p) for p in crd_schema_candidates())
    return f"CRD schemas not found (looked in {looked}): run `make crds` to fetch them"


def close_schema(node: Any, under_metadata: bool = False) -> Any:
    """Add ``additionalProperties: false`` as the schemas README prescribes; returns a new schema."""
    if isinstance(node, list):
        return [close_schema(item, under_metadata) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {prop: close_schema(sub, under_metadata or prop == "metadata") for prop, sub in value.items()}
        elif key in ("enum", "const", "default", "examples", "required", "x-kubernetes-validations"):
            out[key] = copy.deepcopy(value)
        else:
            out[key] = close_schema(value, under_metadata)
    if (
        not under_metadata
        and isinstance(node.get("properties"), dict)
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def _crd_validators() -> dict[tuple[str, str], jsonschema.protocols.Validator]:
    directory = crd_schema_dir()
    if directory is None:
        return {}
    start = time.perf_counter()
    out = {}
    for path in sorted(directory.glob("*.json")):
        schema = json.loads(path.read_text())
        closed = close_schema(schema)
        cls = jsonschema.validators.validator_for(closed, default=jsonschema.Draft202012Validator)
        validator = cls(closed)
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            out[(f"{gvk['group']}/{gvk['version']}", gvk["kind"])] = validator
    _LOAD_SECONDS["crd schemas"] = time.perf_counter() - start
    return out


# ----------------------------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------------------------


def schema_load_seconds() -> dict[str, float]:
    """How long each cached schema load took in this process (for reports and benchmarks)."""
    return dict(_LOAD_SECONDS)


def describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', '?')}/{ns}{meta.get('name', '?')}"


def _path(error: jsonschema.ValidationError, prefix: str = "") -> str:
    parts = [prefix] if prefix else []
    for item in error.absolute_path:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1] if parts else ''}[{item}]"]
        else:
            parts.append(str(item))
    return ".".join(parts) or "<root>"


def _schema_errors(validator: jsonschema.protocols.Validator, instance: Any, prefix: str = "") -> list[str]:
    errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_path(e, prefix)}: {e.message}" for e in errors]


def _meta_errors(obj: Mapping[str, Any]) -> list[str]:
    errors: list[str] = []
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return ["metadata: is required"]
    name = meta.get("name")
    kind = obj.get("kind")
    if not isinstance(name, str) or not name:
        errors.append("metadata.name: is required")
    elif kind in DNS1035_KINDS:
        if len(name) > 63 or not DNS1035_LABEL.match(name):
            errors.append(f"metadata.name: {name!r} must be a DNS-1035 label (<= 63, [a-z]([-a-z0-9]*[a-z0-9])?)")
    elif len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        errors.append(f"metadata.name: {name!r} must be a DNS-1123 subdomain")
    namespace = meta.get("namespace")
    if namespace is not None and (len(namespace) > 63 or not DNS1123_LABEL.match(namespace)):
        errors.append(f"metadata.namespace: {namespace!r} must be a DNS-1123 label")
    errors.extend(label_errors(meta.get("labels"), "metadata.labels"))
    return errors


def label_errors(labels: Any, where: str) -> list[str]:
    """The API server's label rules: qualified-name keys (optional DNS prefix), values <= 63 chars."""
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [f"{where}: must be a mapping"]
    errors = []
    for key, value in labels.items():
        prefix, _sep, name = str(key).rpartition("/")
        if (prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix))) or (
            len(name) > 63 or not LABEL_NAME.match(name)
        ):
            errors.append(f"{where}[{key!r}]: invalid label key")
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            errors.append(f"{where}[{key!r}]: invalid label value {value!r} (<= 63 chars, alphanumerics, -_.)")
    return errors


_WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})


def _pod_label_errors(obj: Mapping[str, Any]) -> list[str]:
    """Label syntax of embedded pod templates (their labels become real pod labels)."""
    kind = str(obj.get("kind"))
    paths = [path for path, definition in _EMBEDDED_PODS.get(kind, []) if definition == "PodTemplateSpec"]
    if kind in _WORKLOAD_KINDS:
        paths.append(("spec", "template"))
    errors = []
    for path in paths:
        labels = _get(obj, (*path, "metadata", "labels"))
        errors.extend(label_errors(labels, ".".join((*path, "metadata", "labels"))))
    if kind == "LLMInferenceService":
        errors.extend(label_errors(_get(obj, ("spec", "labels")), "spec.labels"))
    return errors


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return None
        obj = obj[key]
    return obj


def check_object(obj: Mapping[str, Any], versions: Iterable[str] = DEFAULT_VERSIONS) -> tuple[list[str], list[str]]:
    """Validate one object: returns ``(errors, unchecked)``; ``unchecked`` names CRD checks that could not run."""
    errors: list[str] = []
    unchecked: list[str] = []
    what = describe(obj)
    try:
        obj = json.loads(json.dumps(obj))  # plain JSON types only: what kubectl/kubernetes.core would send
    except (TypeError, ValueError) as exc:
        return [f"{what}: not JSON-serialisable: {exc}"], []
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return [f"{what}: apiVersion and kind are required"], []
    errors.extend(f"{what}: {e}" for e in _meta_errors(obj))
    errors.extend(f"{what}: {e}" for e in _pod_label_errors(obj))

    crd = _crd_validators().get((api_version, kind))
    builtin_found = False
    for version in versions:
        validator = _k8s_validator(version, api_version, kind)
        if validator is not None:
            builtin_found = True
            errors.extend(f"{what} [kubernetes {version}]: {e}" for e in _schema_errors(validator, obj))
        for path, definition in _EMBEDDED_PODS.get(kind, []):
            node = _get(obj, path)
            if node is not None:
                sub = _k8s_definition_validator(version, definition)
                errors.extend(
                    f"{what} [kubernetes {version} {definition}]: {e}"
                    for e in _schema_errors(sub, node, ".".join(path))
                )
    if crd is not None:
        errors.extend(f"{what} [CRD {api_version} {kind}]: {e}" for e in _schema_errors(crd, obj))
    elif not builtin_found:
        if (api_version, kind) in KNOWN_CRDS and crd_schema_dir() is None:
            unchecked.append(f"{what} ({api_version} {kind})")
        else:
            errors.append(
                f"{what}: no schema for apiVersion {api_version} kind {kind} in Kubernetes "
                f"{', '.join(versions)} nor in {crd_schema_dir() or 'the CRD schemas (none found: run `make crds`)'} "
                "(unknown kind)"
            )
    return errors, unchecked


def validate_objects(objs: Iterable[Mapping[str, Any]], versions: Iterable[str] = DEFAULT_VERSIONS) -> None:
    """Validate every object; raise :class:`SchemaValidationError` listing every problem found.

    When there are no CRD schemas (see ``crd_schema_dir()``) and some objects are custom resources, everything else
    is still checked first; then SchemaValidationError is raised naming what was not checked and saying to run
    ``make crds``. Nothing is skipped.
    """
    versions = tuple(versions)
    errors: list[str] = []
    unchecked: list[str] = []
    count = 0
    for obj in objs:
        count += 1
        if not isinstance(obj, Mapping):
            errors.append(f"object #{count}: must be a mapping (got {type(obj).__name__})")
            continue
        errs, unch = check_object(obj, versions)
        errors.extend(errs)
        unchecked.extend(unch)
    if errors:
        raise SchemaValidationError(f"{len(errors)} schema problem(s):\n" + "\n".join(errors))
    if unchecked:
        raise SchemaValidationError(
            f"{missing_crd_schemas_message()}. Custom resources not validated: {', '.join(dict.fromkeys(unchecked))} "
            "(built-in kinds were validated)"
        )


def _object_files(directory: Path) -> list[Path]:
    """The ``*.yml``/``*.yaml`` files under a directory that hold objects: not under a dot directory (``.gpufleet``)
    and not directly in a render directory's ``_fleet`` (its plan document and fleet state; the GitOps generator's
    objects are in ``_fleet/<namespace>/``)."""
    files = []
    for file in sorted([*directory.rglob("*.yaml"), *directory.rglob("*.yml")]):
        parts = file.relative_to(directory).parts
        if any(part.startswith(".") for part in parts) or file.parent.name == "_fleet":
            continue
        files.append(file)
    return files


def load_documents(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every non-empty YAML document of the given files (or of the object files under given directories, see
    ``_object_files``)."""
    docs: list[dict[str, Any]] = []
    for entry in paths:
        path = Path(entry)
        files = _object_files(path) if path.is_dir() else [path]
        for file in files:
            docs.extend(doc for doc in yaml.safe_load_all(file.read_text()) if doc)
    return docs


#: Namespaces a cluster has before anything of the render directory is applied: Kubernetes' own, and where the
#: GitOps tools run (the Argo CD Applications of the serving stack's releases live in ``argocd``).
PREEXISTING_NAMESPACES: frozenset[str] = frozenset(
    {"default", "kube-system", "kube-public", "kube-node-lease", "argocd", "flux-system"}
)


def render_dir_problems(root: str | Path, preexisting: Iterable[str] = PREEXISTING_NAMESPACES) -> list[str]:
    """What keeps a render directory from being applied as it is, one cluster directory at a time (``kubectl apply
    -R -f <cluster>`` or a GitOps tool pointed at it): a file that holds other than one object, an object whose file
    is not ``<cluster>/<namespace or _cluster>/<kind>-<name>.yaml``, and a namespaced object whose namespace has no
    Namespace object in its cluster directory (and is not one of ``preexisting``). ``_fleet/<namespace>/`` (the
    GitOps generator, applied where the GitOps tool runs) and ``_fleet/routing/`` (the hub's fleet routing,
    ``<namespace>.<kind>-<name>.yaml``) are checked for the file layout only."""
    root = Path(root)
    keep = set(preexisting)
    problems: list[str] = []
    namespaces: dict[str, set[str]] = {}
    used: dict[str, dict[str, str]] = {}
    for file in _object_files(root):
        rel = file.relative_to(root)
        docs = [doc for doc in yaml.safe_load_all(file.read_text()) if doc]
        if len(rel.parts) != 3:
            problems.append(f"{rel}: not <cluster>/<namespace>/<kind>-<name>.yaml")
            continue
        if len(docs) != 1 or not isinstance(docs[0], Mapping):
            problems.append(f"{rel}: holds {len(docs)} documents, not one object")
            continue
        obj = docs[0]
        cluster, directory, name = rel.parts
        meta = obj.get("metadata") or {}
        expected = f"{str(obj.get('kind', '')).lower()}-{meta.get('name')}.yaml"
        ns = meta.get("namespace")
        if cluster == "_fleet" and directory == "routing":  # the hub's fleet routing: routing/<namespace>.<kind>-<name>
            if name != f"{ns}.{expected}":
                problems.append(f"{rel}: holds {describe(obj)}, expected at _fleet/routing/{ns}.{expected}")
            continue
        if name != expected or directory != (ns or "_cluster"):
            problems.append(f"{rel}: holds {describe(obj)}, expected at {cluster}/{ns or '_cluster'}/{expected}")
        if cluster == "_fleet":
            continue
        if obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1":
            namespaces.setdefault(cluster, set()).add(str(meta.get("name")))
        elif ns:
            used.setdefault(cluster, {}).setdefault(str(ns), str(rel))
    for cluster, by_ns in sorted(used.items()):
        for ns, first in sorted(by_ns.items()):
            if ns not in namespaces.get(cluster, set()) and ns not in keep:
                problems.append(f"{cluster}: namespace {ns} (used by {first}) has no Namespace in {cluster}/_cluster/")
    return problems


def validate_render_dir(
    root: str | Path, versions: Iterable[str] = DEFAULT_VERSIONS, preexisting: Iterable[str] = PREEXISTING_NAMESPACES
) -> dict[str, int]:
    """Validate a render directory: every object file (the cluster directories and the GitOps generator under
    ``_fleet/``) against the Kubernetes and CRD schemas (:func:`validate_objects`), and its layout
    (:func:`render_dir_problems`). Returns the number of objects per top-level directory; raises
    :class:`SchemaValidationError` listing every problem."""
    root = Path(root)
    files = _object_files(root)
    problems = render_dir_problems(root, preexisting)
    try:
        validate_objects(load_documents(files), versions)
    except SchemaValidationError as exc:
        problems.insert(0, str(exc))
    if problems:
        raise SchemaValidationError(f"render directory {root}:\n" + "\n".join(problems))
    counts: dict[str, int] = {}
    for file in files:
        top = file.relative_to(root).parts[0]
        counts[top] = counts.get(top, 0) + 1
    return counts


def validate_files(paths: Iterable[str | Path], versions: Iterable[str] = DEFAULT_VERSIONS) -> int:
    """Validate every object in the given YAML files/directories (e.g. a render directory); returns the count."""
    docs = load_documents(paths)
    validate_objects(docs, versions)
    return len(docs)
