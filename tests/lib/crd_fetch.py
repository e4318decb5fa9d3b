"""Fetch the upstream CRDs the tests validate against, at pinned versions, and convert them to JSON Schemas.

    python tests/lib/crd_fetch.py             # fetch whatever is missing, print the schema directory (`make crds`)
    python tests/lib/crd_fetch.py --print     # print the schema directory only (exit 1 when it is not there yet)
    python tests/lib/crd_fetch.py --compare DIR   # compare the fetched files with another schema directory

Each CRD comes from its Go module through the Go module proxy (``go mod download -json MODULE@VERSION``, default
module cache, ``GOFLAGS=-mod=mod GOTOOLCHAIN=local``). The module zip is checked against the ``h1:`` hash pinned in
``SOURCES`` (the go.sum hash; this also covers the one module sum.golang.org does not know, Grove), the CRD YAML is
read from the zip, and each kept version's ``openAPIV3Schema`` is written as ``<kind>-<group>-<version>.json`` in the
format of the shared schemas (README rules): ``$schema``, ``$comment`` (the source),
``x-kubernetes-group-version-kind``, ``x-crd``, then the schema body with sorted keys; OpenAPI ``nullable: true``
becomes a ``"null"`` type and an ``x-kubernetes-int-or-string`` without ``anyOf`` gets ``anyOf: [integer, string]``.

The files are read from the zip, not from the extracted ``Dir``: Argo CD v3.6.1's go.mod says ``go 1.27``, so a Go
1.26 ``go mod download`` reports an error and no ``Dir`` for it, although the zip is downloaded and verified.

Output: ``${GPUFLEET_CRD_SCHEMAS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/gpufleet-crd-schemas}/<key>``, where the key is
a digest of ``SOURCES`` and the converter's format version, so changing a pin writes a new directory. It is written
to a temporary directory and renamed into place when complete; a ``README.md`` in it lists every file's source.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Bump when the conversion or the file format changes: the cache key changes with it.
FORMAT_VERSION = 1
SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class CRD:
    """One CRD file of a module and the versions of it that are kept (each must be served)."""

    path: str
    group: str
    kind: str
    versions: tuple[str, ...]


@dataclass(frozen=True)
class Source:
    """A Go module at a pinned version, its go.sum ``h1:`` hash, and the CRDs taken from it."""

    module: str
    version: str
    h1: str
    crds: tuple[CRD, ...]
    why: str
    nosumdb: bool = False  # not in sum.golang.org: fetched with GONOSUMDB, checked against h1 only


_GW = "config/crd/standard/gateway.networking.k8s.io_"
_FLUX = "config/crd/bases/"
_KUEUE = "config/components/crd/bases/kueue.x-k8s.io_"
_AIGW = "manifests/charts/ai-gateway-crds-helm/templates/aigateway.envoyproxy.io_"

SOURCES: tuple[Source, ...] = (
    Source(
        "sigs.k8s.io/lws",
        "v0.7.0",
        "h1:qWfzX8+UBak+Hq0+m/PuE3uO0mp/3dmm5q/h/7z31A8=",
        (
            CRD(
                "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
                "leaderworkerset.x-k8s.io",
                "LeaderWorkerSet",
                ("v1",),
            ),
        ),
        "the version the serving stack installs (chart 0.7.0) and the local fleet runs; the proxy refuses v0.10.0",
    ),
    Source(
        "sigs.k8s.io/gateway-api",
        "v1.6.1",
        "h1:mock6phZbI6rvZerwrVNk7hVNymQgHo+6sJ81Ia7ftY=",
        (
            CRD(_GW + "httproutes.yaml", "gateway.networking.k8s.io", "HTTPRoute", ("v1",)),
            CRD(_GW + "gateways.yaml", "gateway.networking.k8s.io", "Gateway", ("v1",)),
            CRD(_GW + "gatewayclasses.yaml", "gateway.networking.k8s.io", "GatewayClass", ("v1",)),
            CRD(_GW + "referencegrants.yaml", "gateway.networking.k8s.io", "ReferenceGrant", ("v1", "v1beta1")),
        ),
        "standard channel; v1 of the route/gateway kinds (v1beta1 is also served), both ReferenceGrant versions",
    ),
    Source(
        "sigs.k8s.io/gateway-api-inference-extension",
        "v1.6.0",
        "h1:cjtwMJYcTnLXBYE5ffR1/hHhn7U1aIFfe2RITYmOXVA=",
        (
            CRD(
                "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml",
                "inference.networking.k8s.io",
                "InferencePool",
                ("v1",),
            ),
            CRD(
                "config/crd/bases/inference.networking.x-k8s.io_inferencepoolimports.yaml",
                "inference.networking.x-k8s.io",
                "InferencePoolImport",
                ("v1alpha1",),
            ),
        ),
        "newest release",
    ),
    Source(
        "github.com/kserve/kserve",
        "v0.20.0",
        "h1:Bs7HxmGV4KFqqptDcWseKv+mwD4YOYHJWcuVgPG2Gug=",
        (
            CRD(
                "config/crd/full/llmisvc/serving.kserve.io_llminferenceservices.yaml",
                "serving.kserve.io",
                "LLMInferenceService",
                ("v1alpha1", "v1alpha2"),
            ),
            CRD(
                "config/crd/full/llmisvc/serving.kserve.io_llminferenceserviceconfigs.yaml",
                "serving.kserve.io",
                "LLMInferenceServiceConfig",
                ("v1alpha1", "v1alpha2"),
            ),
        ),
        "the version the serving stack installs; the `full` CRDs (the `minimal` ones have an empty v1alpha1 schema)",
    ),
    Source(
        "github.com/fluxcd/helm-controller",
        "v1.6.3",
        "h1:MSiDP/s8xRSkO3g11vBiDStxfmJ5ZVdwDEpW7BSE/UA=",
        (CRD(_FLUX + "helm.toolkit.fluxcd.io_helmreleases.yaml", "helm.toolkit.fluxcd.io", "HelmRelease", ("v2",)),),
        "newest release",
    ),
    Source(
        "github.com/fluxcd/source-controller",
        "v1.9.6",
        "h1:nG534/bI6nVpyHra7ONAk6xDB3xPsVT+EOLHZHXPrrc=",
        (
            CRD(
                _FLUX + "source.toolkit.fluxcd.io_helmrepositories.yaml",
                "source.toolkit.fluxcd.io",
                "HelmRepository",
                ("v1",),
            ),
            CRD(
                _FLUX + "source.toolkit.fluxcd.io_ocirepositories.yaml",
                "source.toolkit.fluxcd.io",
                "OCIRepository",
                ("v1",),
            ),
            CRD(
                _FLUX + "source.toolkit.fluxcd.io_gitrepositories.yaml",
                "source.toolkit.fluxcd.io",
                "GitRepository",
                ("v1",),
            ),
        ),
        "the source API (v1.9) helm-controller v1.6.3 is built against",
    ),
    Source(
        "github.com/fluxcd/kustomize-controller",
        "v1.9.6",
        "h1:XB+G3A0mky0j5uVHZWv4oSlS2RvZBoNIUhstIvY0JKE=",
        (
            CRD(
                _FLUX + "kustomize.toolkit.fluxcd.io_kustomizations.yaml",
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                ("v1",),
            ),
        ),
        "the same Flux release as source-controller v1.9.6",
    ),
    Source(
        "github.com/argoproj/argo-cd/v3",
        "v3.6.1",
        "h1:OmhqeKiR3C//awbFrhQqFdtRI+Qiv17j8vqm3UkMj/g=",
        (
            CRD("manifests/crds/application-crd.yaml", "argoproj.io", "Application", ("v1alpha1",)),
            CRD("manifests/crds/applicationset-crd.yaml", "argoproj.io", "ApplicationSet", ("v1alpha1",)),
            CRD("manifests/crds/appproject-crd.yaml", "argoproj.io", "AppProject", ("v1alpha1",)),
        ),
        "newest release",
    ),
    Source(
        "github.com/ai-dynamo/grove/operator/api",
        "v0.1.0-alpha.8",
        "h1:hsAJ8YOsmxDBqB4bpFlnss5jVBJ8rSZ0W7mPLKIPo5A=",
        (CRD("core/v1alpha1/crds/grove.io_podcliquesets.yaml", "grove.io", "PodCliqueSet", ("v1alpha1",)),),
        "the newest the proxy serves (alpha.9 to alpha.11 are refused); the first with resourceClaimTemplates",
        nosumdb=True,
    ),
    Source(
        "github.com/kedacore/keda/v2",
        "v2.21.0",
        "h1:R6z2HZvstK4RLUMxroNACzBj74xGxt3kG59b5Xc+Xps=",
        (
            CRD("config/crd/bases/keda.sh_scaledobjects.yaml", "keda.sh", "ScaledObject", ("v1alpha1",)),
            CRD(
                "config/crd/bases/keda.sh_triggerauthentications.yaml",
                "keda.sh",
                "TriggerAuthentication",
                ("v1alpha1",),
            ),
        ),
        "newest release the proxy lists",
    ),
    Source(
        "sigs.k8s.io/kueue",
        "v0.17.0",
        "h1:7hzb38M4eKGzYW+CFv2s1L+swzzacUCHOCXxZmAV90I=",
        tuple(
            CRD(f"{_KUEUE}{plural}.yaml", "kueue.x-k8s.io", kind, ("v1beta1", "v1beta2"))
            for plural, kind in (
                ("localqueues", "LocalQueue"),
                ("clusterqueues", "ClusterQueue"),
                ("workloads", "Workload"),
                ("resourceflavors", "ResourceFlavor"),
            )
        ),
        "the version the proxy lists",
    ),
    Source(
        "github.com/envoyproxy/ai-gateway",
        "v1.0.0",
        "h1:cTdSnQmtQQ2Ea5T/LLK50pIthG2SJAOxU9XPXZbtDkU=",
        (
            CRD(_AIGW + "aigatewayroutes.yaml", "aigateway.envoyproxy.io", "AIGatewayRoute", ("v1alpha1", "v1beta1")),
            CRD(
                _AIGW + "aiservicebackends.yaml", "aigateway.envoyproxy.io", "AIServiceBackend", ("v1alpha1", "v1beta1")
            ),
        ),
        "newest the proxy serves (v1.1.0 is refused)",
    ),
    Source(
        "github.com/envoyproxy/gateway",
        "v1.5.0",
        "h1:wfHytSeNoinwu0vCtWT61XK23qJuRmJyU+CPWdIJp2I=",
        (
            CRD(
                "charts/gateway-helm/crds/generated/gateway.envoyproxy.io_backends.yaml",
                "gateway.envoyproxy.io",
                "Backend",
                ("v1alpha1",),
            ),
        ),
        "the minor of the Envoy Gateway the serving stack installs (v1.5.4, which the proxy refuses)",
    ),
)


class FetchError(RuntimeError):
    """A module could not be fetched or verified, or a CRD is not what SOURCES says."""


# ----------------------------------------------------------------------------------------------------------------
# Where the schemas live
# ----------------------------------------------------------------------------------------------------------------


def cache_key() -> str:
    """A digest of every pin (module, version, hash, files, versions) and of the converter's format."""
    pins = [
        [s.module, s.version, s.h1, s.nosumdb, [[c.path, c.group, c.kind, list(c.versions)] for c in s.crds]]
        for s in SOURCES
    ]
    digest = hashlib.sha256(json.dumps([FORMAT_VERSION, pins]).encode()).hexdigest()[:16]
    return f"v{FORMAT_VERSION}-{digest}"


def cache_root() -> Path:
    explicit = os.environ.get("GPUFLEET_CRD_SCHEMAS_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpufleet-crd-schemas"


def schema_dir() -> Path:
    """The directory ``make crds`` writes the schemas of the current pins to (it may not exist yet)."""
    return cache_root() / cache_key()


def is_complete(directory: Path) -> bool:
    """True when a fetch into ``directory`` finished (it is renamed into place only then)."""
    return (directory / "README.md").is_file() and len(list(directory.glob("*.json"))) == expected_file_count()


def expected_files() -> list[str]:
    return sorted(schema_file_name(c.kind, c.group, v) for s in SOURCES for c in s.crds for v in c.versions)


def expected_file_count() -> int:
    return len(expected_files())


def known_crds() -> frozenset[tuple[str, str]]:
    """Every ``(apiVersion, kind)`` the fetched directory has a schema for."""
    return frozenset((f"{c.group}/{v}", c.kind) for s in SOURCES for c in s.crds for v in c.versions)


def schema_file_name(kind: str, group: str, version: str) -> str:
    return f"{kind.lower()}-{group}-{version}.json"


# ----------------------------------------------------------------------------------------------------------------
# Conversion (the shared schemas README's rules)
# ----------------------------------------------------------------------------------------------------------------

_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("not", "additionalItems", "contains", "propertyNames", "if", "then", "else")


def convert_schema(node: Any) -> Any:
    """OpenAPI v3 (structural CRD schema) to JSON Schema: ``nullable`` becomes a ``"null"`` type, an
    ``x-kubernetes-int-or-string`` without ``anyOf`` gets ``anyOf: [integer, string]``; everything else is kept.
    Only schema positions are rewritten: property names, ``enum``/``default``/``example`` values are data."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "nullable":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: convert_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [convert_schema(sub) for sub in value]
        elif key in (*_SCHEMA_ONE, "additionalProperties") and isinstance(value, dict):
            out[key] = convert_schema(value)
        elif key == "items":
            out[key] = [convert_schema(sub) for sub in value] if isinstance(value, list) else convert_schema(value)
        else:
            out[key] = value
    if node.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    if node.get("x-kubernetes-int-or-string") is True and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    return out


def _sorted(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True))


def crd_to_schemas(crd: dict[str, Any], spec: CRD, source: str) -> dict[str, str]:
    """The JSON text of each kept version of one CRD document: ``{file name: text}``.

    ``source`` is the provenance that goes into ``$comment`` after ``openAPIV3Schema of <crd> <version> from``."""
    name = crd.get("metadata", {}).get("name", "?")
    body = crd.get("spec") or {}
    if crd.get("kind") != "CustomResourceDefinition" or body.get("group") != spec.group:
        raise FetchError(f"{name}: not a CustomResourceDefinition of group {spec.group}")
    if body.get("names", {}).get("kind") != spec.kind:
        raise FetchError(f"{name}: kind is {body.get('names', {}).get('kind')!r}, expected {spec.kind}")
    versions = {v.get("name"): v for v in body.get("versions") or []}
    out = {}
    for version in spec.versions:
        entry = versions.get(version)
        if entry is None or not entry.get("served"):
            raise FetchError(f"{name}: version {version} is not served (served: {sorted(versions)})")
        schema = (entry.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            raise FetchError(f"{name}: version {version} has no openAPIV3Schema")
        header = {
            "$schema": SCHEMA_DRAFT,
            "$comment": f"openAPIV3Schema of {name} {version} from {source}; converted to JSON Schema "
            "(nullable -> type null), otherwise verbatim",
            "x-kubernetes-group-version-kind": [{"group": spec.group, "version": version, "kind": spec.kind}],
            "x-crd": {
                "name": name,
                "served": bool(entry.get("served")),
                "storage": bool(entry.get("storage")),
                "scope": body.get("scope"),
                "annotations": _sorted(crd.get("metadata", {}).get("annotations") or {}),
            },
        }
        converted = _sorted(convert_schema(schema))
        clash = set(header) & set(converted)
        if clash:
            raise FetchError(f"{name} {version}: the schema already has {sorted(clash)}")
        out[schema_file_name(spec.kind, spec.group, version)] = json.dumps({**header, **converted}, indent=1)
    return out


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML without the timestamp resolver: a date-like string stays a string, as in JSON."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_crd(text: bytes, where: str) -> dict[str, Any]:
    docs = [doc for doc in yaml.load_all(text, Loader=_Loader) if doc]  # _Loader is a safe loader
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise FetchError(f"{where}: expected one CustomResourceDefinition, found {len(docs)} documents")
    return docs[0]


# ----------------------------------------------------------------------------------------------------------------
# Go modules
# ----------------------------------------------------------------------------------------------------------------


def zip_h1(path: Path) -> str:
    """The go.sum ``h1:`` hash of a module zip (golang.org/x/mod/sumdb/dirhash.HashZip)."""
    summary = hashlib.sha256()
    with zipfile.ZipFile(path) as archive:
        for name in sorted(info.filename for info in archive.infolist()):
            if "\n" in name:
                raise FetchError(f"{path}: file name with a newline")
            digest = hashlib.sha256()
            with archive.open(name) as handle:
                for chunk in iter(lambda h=handle: h.read(1 << 20), b""):
                    digest.update(chunk)
            summary.update(f"{digest.hexdigest()}  {name}\n".encode())
    return "h1:" + base64.b64encode(summary.digest()).decode()


def _json_stream(text: str) -> list[dict[str, Any]]:
    decoder, pos, out = json.JSONDecoder(), 0, []
    text = text.strip()
    while pos < len(text):
        obj, end = decoder.raw_decode(text, pos)
        out.append(obj)
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def go_download(sources: tuple[Source, ...] = SOURCES) -> dict[str, dict[str, Any]]:
    """``go mod download -json`` every module (one call; Go fetches them in parallel): ``{module: its JSON}``."""
    if shutil.which("go") is None:
        raise FetchError("the Go toolchain is required (go not found on PATH); see docs/dev/testing.md")
    env = dict(os.environ, GOFLAGS="-mod=mod", GOTOOLCHAIN="local", GOWORK="off")
    nosumdb = [s.module for s in sources if s.nosumdb]
    if nosumdb:
        env["GONOSUMDB"] = ",".join(filter(None, [os.environ.get("GONOSUMDB", ""), *nosumdb]))
    with tempfile.TemporaryDirectory(prefix="gpufleet-crds-go-") as cwd:  # outside any go.mod
        proc = subprocess.run(
            ["go", "mod", "download", "-json", *(f"{s.module}@{s.version}" for s in sources)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    try:
        results = {item.get("Path", ""): item for item in _json_stream(proc.stdout)}
    except ValueError:
        raise FetchError(f"go mod download failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}") from None
    for source in sources:
        if source.module not in results:
            raise FetchError(f"go mod download printed nothing for {source.module}:\n{proc.stderr}")
    return results


def verified_zip(source: Source, result: dict[str, Any]) -> Path:
    """The module's zip, after checking it against the pinned ``h1:`` hash (whatever Go said about it)."""
    zip_path = Path(result.get("Zip") or "")
    if not result.get("Zip") or not zip_path.is_file():
        raise FetchError(
            f"{source.module}@{source.version}: no module zip: {result.get('Error') or 'go mod download gave no Zip'}"
        )
    actual = zip_h1(zip_path)
    if actual != source.h1:
        raise FetchError(f"{source.module}@{source.version}: zip hash {actual} is not the pinned {source.h1}")
    return zip_path


def _provenance(source: Source, info: dict[str, Any], crd: CRD) -> str:
    commit = (info.get("Origin") or {}).get("Hash")
    extra = f", git {commit}" if commit else ""
    text = f"Go module {source.module}@{source.version} ({source.h1}{extra}) {crd.path}"
    if source.nosumdb:
        text += "; not in sum.golang.org: fetched with GONOSUMDB, module zip checked against the pinned h1 hash"
    return text


def build(out: Path, log: Any = print) -> list[dict[str, str]]:
    """Fetch, verify and convert every source into ``out`` (an existing, empty directory); returns README rows."""
    start = time.perf_counter()
    results = go_download()
    log(f"crd_fetch: go mod download of {len(SOURCES)} modules took {time.perf_counter() - start:.1f}s")
    rows = []
    for source in SOURCES:
        result = results[source.module]
        zip_path = verified_zip(source, result)
        info = {}
        if result.get("Info") and Path(result["Info"]).is_file():
            info = json.loads(Path(result["Info"]).read_text())
        prefix = f"{source.module}@{source.version}/"
        with zipfile.ZipFile(zip_path) as archive:
            for crd in source.crds:
                try:
                    raw = archive.read(prefix + crd.path)
                except KeyError:
                    raise FetchError(f"{source.module}@{source.version}: no {crd.path} in the module zip") from None
                doc = load_crd(raw, f"{source.module}@{source.version}/{crd.path}")
                for name, text in crd_to_schemas(doc, crd, _provenance(source, info, crd)).items():
                    (out / name).write_text(text)
                    rows.append(
                        {
                            "file": name,
                            "module": f"{source.module}@{source.version}",
                            "h1": source.h1,
                            "path": crd.path,
                            "sha256": hashlib.sha256(raw).hexdigest(),
                        }
                    )
    return rows


def crd_documents(select: Any = None) -> list[dict[str, Any]]:
    """The upstream ``CustomResourceDefinition`` objects themselves (not converted), for installing on a test control
    plane: every CRD of ``SOURCES`` whose ``(group, kind)`` is in ``select`` (all when None), read from the module
    zips after checking them against the pinned ``h1:`` hashes, in ``SOURCES`` order. An unknown ``(group, kind)``
    is a :class:`FetchError`."""
    wanted = None if select is None else {(str(g), str(k)) for g, k in select}
    known = {(c.group, c.kind) for s in SOURCES for c in s.crds}
    if wanted is not None and wanted - known:
        raise FetchError(f"no pinned CRD for {sorted(wanted - known)} (SOURCES has {sorted(known)})")
    sources = tuple(s for s in SOURCES if wanted is None or any((c.group, c.kind) in wanted for c in s.crds))
    if not sources:
        return []
    results = go_download(sources)
    docs = []
    for source in sources:
        zip_path = verified_zip(source, results[source.module])
        prefix = f"{source.module}@{source.version}/"
        with zipfile.ZipFile(zip_path) as archive:
            for crd in source.crds:
                if wanted is not None and (crd.group, crd.kind) not in wanted:
                    continue
                try:
                    raw = archive.read(prefix + crd.path)
                except KeyError:
                    raise FetchError(f"{source.module}@{source.version}: no {crd.path} in the module zip") from None
                doc = load_crd(raw, f"{source.module}@{source.version}/{crd.path}")
                if doc.get("kind") != "CustomResourceDefinition" or (doc.get("spec") or {}).get("group") != crd.group:
                    raise FetchError(f"{source.module}@{source.version}/{crd.path}: not a CRD of group {crd.group}")
                docs.append(doc)
    return docs


def _readme(rows: list[dict[str, str]]) -> str:
    lines = [
        "# Upstream CRD schemas for gpufleet.serving's tests",
        "",
        f"Written by `tests/lib/crd_fetch.py` (`make crds`), cache key `{cache_key()}`. Each file is one served",
        "version's `openAPIV3Schema` of an upstream CRD as a JSON Schema (rules: the module docstring). Do not edit:",
        "change `SOURCES` in crd_fetch.py and run `make crds` again (a new key, a new directory).",
        "",
        "| file | Go module @ version | h1 | path in the module | sha256 of the CRD YAML |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [f"| `{r['file']}` | `{r['module']}` | `{r['h1']}` | `{r['path']}` | {r['sha256']} |" for r in rows]
    lines += ["", "Why these versions:", ""]
    lines += [f"- `{s.module}@{s.version}`: {s.why}" for s in SOURCES]
    return "\n".join(lines) + "\n"


def fetch(force: bool = False, log: Any = print) -> Path:
    """Make sure the schemas of the current pins are in the cache; returns their directory."""
    target = schema_dir()
    if is_complete(target) and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        rows = build(work, log)
        written = sorted(p.name for p in work.glob("*.json"))
        if written != expected_files():
            raise FetchError(f"wrote {written}, expected {expected_files()}")
        (work / "README.md").write_text(_readme(rows))
        if target.exists():
            shutil.rmtree(target)  # incomplete, or --force
        try:
            work.rename(target)
        except OSError:
            if not is_complete(target):  # a concurrent fetch finished first: keep its directory
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return target


# ----------------------------------------------------------------------------------------------------------------
# Comparing with another schema directory (../shared/schemas)
# ----------------------------------------------------------------------------------------------------------------


def _diff_paths(a: Any, b: Any, path: str = "", limit: int = 5) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            sub = f"{path}/{key}"
            if key not in a or key not in b:
                out.append(f"{sub}: only in {'ours' if key in a else 'theirs'}")
            else:
                out.extend(_diff_paths(a[key], b[key], sub, limit))
            if len(out) >= limit:
                break
        return out[:limit]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            out.extend(_diff_paths(x, y, f"{path}[{index}]", limit))
            if len(out) >= limit:
                break
        return out[:limit]
    return [] if a == b else [f"{path or '/'}: differs"]


def compare(ours: Path, theirs: Path) -> list[tuple[str, str, list[str]]]:
    """Every file of ``ours`` that ``theirs`` also has: ``(name, verdict, differences)``; the verdict is
    ``identical`` (byte for byte), ``same but $comment`` (equal JSON apart from the provenance) or ``differs``."""
    out = []
    for path in sorted(ours.glob("*.json")):
        other = theirs / path.name
        if not other.is_file():
            out.append((path.name, "only here", []))
            continue
        a_text, b_text = path.read_text(), other.read_text()
        if a_text == b_text:
            out.append((path.name, "identical", []))
            continue
        a, b = json.loads(a_text), json.loads(b_text)
        a.pop("$comment", None)
        b.pop("$comment", None)
        if a == b:
            out.append((path.name, "same but $comment", []))
        else:
            out.append((path.name, "differs", _diff_paths(a, b)))
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0], allow_abbrev=False)
    parser.add_argument("--print", action="store_true", help="print the directory; exit 1 when it is not complete")
    parser.add_argument("--force", action="store_true", help="fetch and convert again even when cached")
    parser.add_argument("--compare", metavar="DIR", help="compare the fetched files with the files in DIR")
    args = parser.parse_args(argv)
    if args.print:
        if not is_complete(schema_dir()):
            print(f"crd_fetch: {schema_dir()} is not there yet: run `make crds`", file=sys.stderr)
            return 1
        print(schema_dir())
        return 0

    def log(message: str) -> None:
        print(message, file=sys.stderr)

    try:
        directory = fetch(force=args.force, log=log)
    except FetchError as exc:
        print(f"crd_fetch: {exc}", file=sys.stderr)
        return 1
    if args.compare:
        results = compare(directory, Path(args.compare))
        for name, verdict, diffs in results:
            print(f"{verdict:18} {name}")
            for line in diffs:
                print(f"    {line}")
        return 1 if any(verdict == "differs" for _n, verdict, _d in results) else 0
    print(directory)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
