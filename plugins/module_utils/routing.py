# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fleet routing (issue 27 item 2): one routing artifact per fleet, derived from the whole placement, and its renderers.

The artifact says, per model (deployment) and per cluster holding replicas of it: the cluster's model endpoint (the
model Service, and the cluster gateway's address + the model's stable path), the replicas placed and Ready there, a
``weight`` proportional to the Ready replicas and a ``priority`` tier; plus the model's spillover endpoints (used at
their tier while the Ready replicas are fewer than desired) and its adapter names.

* **Ready.** Render mode cannot see pods: a replica is Ready when it is placed and its cluster is not draining. Apply
  mode passes the replicas its reconcile still waits for (``fleet_apply``'s ``pending``): those are not Ready.
* **Weight.** The Ready replicas on the cluster; 0 for a drained cluster (``gpufleet_drained_clusters``) as long as the
  model has Ready replicas on a cluster that is not drained (traffic leaves before the replicas do; a model that is
  nowhere else keeps serving where it is rather than drop all its traffic, as :func:`.plan.routing` decides).
* **Priority.** ``gpufleet_routing_priority`` of the cluster (default 0; lower is preferred, Envoy's priority
  semantics). A spillover endpoint's tier is its own ``priority``.

Renderers (``gpufleet_fleet_routing``): ``httproute`` (a hub Gateway API HTTPRoute with weighted ``backendRefs`` to
one ExternalName Service per cluster), ``aigateway`` (Envoy AI Gateway ``AIGatewayRoute`` with weight + priority over
one ``AIServiceBackend`` + Envoy Gateway ``Backend`` per cluster), ``llmd`` (the llm-d router's
``multicluster-file-discovery`` endpoints file, in a ConfigMap). Every renderer's objects are for the hub cluster
(``gpufleet_routing_hub``); the artifact itself is ConfigMaps beside them: an index and a ConfigMap per model, cut
into numbered parts when a model spans more clusters than one part holds (:func:`artifact_objects`; issue 26: one
ConfigMap was 1.5 MB at 5,000 clusters, over the 1 MiB the API server accepts).

Pure: no I/O. The action ``fleet_routing`` writes ``_fleet/routing/`` or applies to the hub.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_FLEET,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    k8s_name,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError

ROUTING_VERSION = 1
NONE = "none"
HTTPROUTE = "httproute"
AIGATEWAY = "aigateway"
LLMD = "llmd"
#: ``gpufleet_fleet_routing``: which renderer turns the artifact into hub objects.
RENDERERS: tuple[str, ...] = (NONE, HTTPROUTE, AIGATEWAY, LLMD)
COMPONENT_ROUTING = "routing"
ROUTING_OWNER: dict[str, str] = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_COMPONENT: COMPONENT_ROUTING}
#: Where the hub's files live in a render directory: ``<render_dir>/_fleet/routing/<file>.yaml``.
ROUTING_DIR = "routing"
DEFAULT_PORT = 80
#: The host variables of a cluster (inventory host) that routing reads.
PRIORITY_VAR = "gpufleet_routing_priority"
ADDRESS_VAR = "gpufleet_routing_address"
#: The key of the llm-d endpoints file in its ConfigMap (mount it at the path the EPP's plugin reads).
LLMD_FILE_KEY = "endpoints.yaml"
ARTIFACT_KEY = "routing.json"
#: The artifact is split (issue 26): an index ConfigMap naming, per model, the ConfigMaps of its parts.
LAYOUT_INDEX = "index"
LAYOUT_PART = "part"
#: Each part's JSON stays under this many bytes: far below the API server's 1 MiB (:mod:`.object_size`), and below
#: the 256 KiB of annotations a client-side apply (``kubectl apply``, Argo CD's default sync) copies the object into.
PART_BYTES = 128 * 1024
#: A part's own fields (version, layout, fleet, deployment, part, parts), at most, in bytes of JSON.
PART_OVERHEAD = 512
_HOST = re.compile(r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


def parse_renderer(value: Any, var: str = "gpufleet_fleet_routing") -> str:
    if value is None or value == "":
        return NONE
    if not isinstance(value, str) or value not in RENDERERS:
        raise GpufleetError(f"{var}: must be one of {', '.join(RENDERERS)} (got {value!r})")
    return value


def parse_address(value: Any, where: str) -> tuple[str | None, int]:
    """``host`` or ``host:port`` (a DNS name or an IPv4 address the hub reaches the cluster's gateway at)."""
    if value is None or value == "":
        return None, DEFAULT_PORT
    if not isinstance(value, str):
        raise FleetValidationError([(where, f"must be a host name or host:port (got {type(value).__name__})")])
    host, sep, port_text = value.strip().rpartition(":")
    if not sep:
        host, port_text = value.strip(), str(DEFAULT_PORT)
    host = host.lower()
    if not _HOST.match(host) or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise FleetValidationError(
            [(where, f"must be a host name or IPv4 address, optionally with :port 1-65535 (got {value!r})")]
        )
    return host, int(port_text)


def cluster_settings(hostvars: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per cluster: ``priority`` (``gpufleet_routing_priority``, default 0) and the gateway ``address``/``port``
    (``gpufleet_routing_address``). ``hostvars``: ``{cluster: {var: value}}`` (only these two are read)."""
    out: dict[str, dict[str, Any]] = {}
    errors: list[tuple[str, str]] = []
    for name in sorted(hostvars):
        hv = hostvars[name] or {}
        prio = hv.get(PRIORITY_VAR)
        if prio is None or prio == "":
            prio = 0
        if isinstance(prio, str) and prio.strip().lstrip("-").isdigit():
            prio = int(prio)  # AWX survey answers arrive as strings
        if isinstance(prio, bool) or not isinstance(prio, int) or not 0 <= prio <= 1000:
            errors.append((f"hostvars[{name!r}].{PRIORITY_VAR}", f"must be an integer 0-1000 (got {prio!r})"))
            prio = 0
        try:
            host, port = parse_address(hv.get(ADDRESS_VAR), f"hostvars[{name!r}].{ADDRESS_VAR}")
        except FleetValidationError as exc:
            errors += exc.errors
            host, port = None, DEFAULT_PORT
        out[str(name)] = {"priority": prio, "address": host, "port": port}
    if errors:
        raise FleetValidationError(errors)
    return out


def model_path(namespace: str, deployment: str) -> str:
    """The model's path on every cluster gateway (``render.serving.model_endpoint_path``; repeated here to stay import-light)."""
    return f"/{namespace}/{deployment}/"


def _spillover(dep: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The deployment's ``external_endpoints`` (issue 33's field; absent → none), as artifact entries. Only the
    Secret's name and key are carried, never a credential."""
    out = []
    for ext in dep.get("external_endpoints") or []:
        if not isinstance(ext, Mapping):
            continue
        secret = ext.get("secret") if isinstance(ext.get("secret"), Mapping) else None
        weight = ext.get("weight")
        out.append(
            {
                "name": str(ext.get("name")),
                "url": str(ext.get("url")),
                "secret": None if secret is None else {"name": str(secret.get("name")), "key": str(secret.get("key"))},
                "priority": int(ext.get("priority") or 0),
                "weight": 1 if weight is None else int(weight),
            }
        )
    return sorted(out, key=lambda e: (e["priority"], e["name"]))


def build_routing(
    fleet: Mapping[str, Any],
    placed: Mapping[str, Mapping[str, int]],
    *,
    drained: Iterable[str] = (),
    clusters: Mapping[str, Mapping[str, Any]] | None = None,
    not_ready: Mapping[str, Mapping[str, int]] | None = None,
    leaving: Mapping[str, Mapping[str, int]] | None = None,
    held: Iterable[str] = (),
    mode: str = "render",
    renderer: str = NONE,
) -> dict[str, Any]:
    """The routing artifact.

    ``fleet``: the normalised fleet (its ``name`` and ``deployments``). ``placed``: ``{deployment: {cluster: n}}``, the
    replicas the placement keeps (see :func:`placed_counts`). ``drained``: the drained clusters. ``clusters``:
    :func:`cluster_settings`. ``not_ready``: ``{deployment: {cluster: n}}`` placed replicas known not to be Ready
    (apply mode: still pending after the wait); render mode passes none. ``leaving``: ``{deployment: {cluster: n}}``
    the replicas running now that the placement removes (``dropped``): they get weight 0 - they are about to be
    deleted - unless their deployment is in ``held`` (its new replicas are not Ready, so the apply deletes nothing of
    it this run): then they keep serving and keep their weight."""
    drained = set(drained)
    settings = clusters or {}
    not_ready = not_ready or {}
    leaving = leaving or {}
    held = set(held)
    deps = {str(d["name"]): d for d in fleet.get("deployments") or []}
    models = []
    for name in sorted(set(deps) | set(placed)):
        dep = deps.get(name, {})
        per = {c: int(n) for c, n in (placed.get(name) or {}).items() if int(n) > 0}
        going = {c: int(n) for c, n in (leaving.get(name) or {}).items() if int(n) > 0}
        namespace = str(dep.get("namespace") or "default")
        port = int(dep.get("port") or 8000)
        ready = {c: max(0, n - int((not_ready.get(name) or {}).get(c, 0))) for c, n in per.items()}
        if name in held:  # the old replicas stay this run: they serve until their replacements are Ready
            for c, n in going.items():
                ready[c] = ready.get(c, 0) + n
        serving_elsewhere = any(ready.get(c, 0) > 0 for c in set(per) | set(going) if c not in drained)
        rows: list[dict[str, Any]] = []
        for cluster in sorted(set(per) | set(going)):
            cs = settings.get(cluster) or {}
            draining = cluster in drained
            ready_here = 0 if (draining and serving_elsewhere) else ready.get(cluster, 0)
            rows.append(
                {
                    "cluster": cluster,
                    "service": f"{k8s_name(name)}.{namespace}.svc",
                    "address": cs.get("address"),
                    "port": int(cs.get("port") or DEFAULT_PORT),
                    "path": model_path(namespace, name),
                    "placed": per.get(cluster, 0),
                    "leaving": going.get(cluster, 0),
                    "ready": ready.get(cluster, 0),
                    "weight": ready_here,
                    "priority": int(cs.get("priority") or 0),
                    "draining": draining,
                }
            )
        desired = int(dep.get("replicas") or 0)
        total_ready = sum(int(r["weight"]) for r in rows)
        spill = _spillover(dep)
        for entry in spill:
            entry["active"] = total_ready < desired
        models.append(
            {
                "deployment": name,
                "namespace": namespace,
                "port": port,
                "path": model_path(namespace, name),
                "desired": desired,
                "ready": total_ready,
                "adapters": sorted(str(a.get("name")) for a in dep.get("adapters") or [] if isinstance(a, Mapping)),
                "clusters": rows,
                "spillover": spill,
            }
        )
    return {
        "version": ROUTING_VERSION,
        "fleet": str(fleet.get("name") or ""),
        "mode": mode,
        "renderer": renderer,
        "models": models,
    }


def placed_counts(replicas: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """``{deployment: {cluster: replicas}}`` of replica records."""
    out: dict[str, dict[str, int]] = {}
    for r in replicas:
        per = out.setdefault(str(r["deployment"]), {})
        per[str(r["cluster"])] = per.get(str(r["cluster"]), 0) + 1
    return out


def pending_counts(pending: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """``{deployment: {cluster: n}}`` of ``fleet_apply``'s ``pending`` entries (replicas not Ready after the wait)."""
    out: dict[str, dict[str, int]] = {}
    for p in pending:
        dep, cluster = p.get("deployment"), p.get("cluster")
        if dep and cluster:
            per = out.setdefault(str(dep), {})
            per[str(cluster)] = per.get(str(cluster), 0) + 1
    return out


def weight_lines(artifact: Mapping[str, Any]) -> list[str]:
    """One line per model for the run's output: ``chat: c1=3 c2=2 c3=0 (draining)``."""
    lines = []
    for m in artifact.get("models") or []:
        parts = [
            f"{c['cluster']}={c['weight']}"
            + (" (draining)" if c["draining"] else "")
            + (f" p{c['priority']}" if c["priority"] else "")
            for c in m["clusters"]
        ]
        parts += [f"{s['name']}(spillover p{s['priority']})" for s in m["spillover"] if s["active"]]
        lines.append(f"{m['deployment']}: " + (" ".join(parts) or "no endpoint"))
    return lines


# --------------------------------------------------------------------------------------------------------------------
# Renderers: the hub's objects
# --------------------------------------------------------------------------------------------------------------------


def _labels(fleet: str, deployment: str | None = None) -> dict[str, str]:
    labels = dict(ROUTING_OWNER)
    if fleet:
        labels[LABEL_FLEET] = fleet
    if deployment:
        labels[LABEL_DEPLOYMENT] = deployment
    return labels


def _meta(name: str, namespace: str, fleet: str, deployment: str | None = None) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": _labels(fleet, deployment)}


def backend_name(deployment: str, cluster: str) -> str:
    """The hub object standing for ``cluster``'s endpoint of ``deployment`` (a DNS-1035 label, stable)."""
    return k8s_name(f"{deployment}-{cluster}")


def _usable(model: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The clusters with an address (the hub can reach), and a line for each one without."""
    rows, missing = [], []
    for c in model["clusters"]:
        if c["address"]:
            rows.append(c)
        else:
            missing.append(
                f"{model['deployment']}: cluster {c['cluster']} has no {ADDRESS_VAR}: the hub cannot route to it"
            )
    return rows, missing


def _split_url(url: str, where: str) -> tuple[str, int, str, bool]:
    m = re.match(r"^(https?)://([^/:]+)(?::(\d+))?(/.*)?$", url)
    if not m:
        raise GpufleetError(f"{where}: must be an http(s) URL (got {url!r})")
    tls = m.group(1) == "https"
    return m.group(2).lower(), int(m.group(3) or (443 if tls else 80)), m.group(4) or "/", tls


def _parent_ref(gateway: Mapping[str, Any]) -> dict[str, Any]:
    """The hub Gateway a route attaches to (``gpufleet_routing_gateway``: name, optional namespace and section)."""
    parent: dict[str, Any] = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": str(gateway["name"])}
    if gateway.get("namespace"):
        parent["namespace"] = str(gateway["namespace"])
    if gateway.get("section_name"):
        parent["sectionName"] = str(gateway["section_name"])
    return parent


def render_httproute(artifact: Mapping[str, Any], gateway: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Gateway API: per model an HTTPRoute on the hub's Gateway, ``PathPrefix /<ns>/<deployment>/`` (passed through: the
    cluster gateway's own route rewrites it), one weighted ``backendRef`` per cluster to an ExternalName Service naming
    the cluster gateway's address; active spillover endpoints are more ExternalName backends at their weight (Gateway
    API has no priority: a spillover endpoint takes its weight's share while it is active)."""
    fleet = str(artifact.get("fleet") or "")
    objs: list[dict[str, Any]] = []
    notes: list[str] = []
    parent = _parent_ref(gateway)
    for model in artifact.get("models") or []:
        dep, ns = model["deployment"], model["namespace"]
        rows, missing = _usable(model)
        notes += missing
        refs = []
        for c in rows:
            svc = backend_name(dep, c["cluster"])
            objs.append(_external_service(svc, ns, fleet, dep, c["address"], c["port"], c["cluster"]))
            refs.append({"name": svc, "port": c["port"], "weight": c["weight"]})
        for s in model["spillover"]:
            if not s["active"]:
                continue
            host, port, _path, _tls = _split_url(s["url"], f"{dep}.external_endpoints.{s['name']}.url")
            svc = backend_name(dep, f"x-{s['name']}")
            objs.append(_external_service(svc, ns, fleet, dep, host, port, None))
            refs.append({"name": svc, "port": port, "weight": s["weight"]})
        if not refs:
            continue
        objs.append(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": _meta(k8s_name(dep), ns, fleet, dep),
                "spec": {
                    "parentRefs": [parent],
                    "rules": [
                        {
                            "matches": [{"path": {"type": "PathPrefix", "value": model["path"]}}],
                            "backendRefs": refs,
                            "timeouts": {"request": "0s"},
                        }
                    ],
                },
            }
        )
    return objs, notes


def _external_service(
    name: str, namespace: str, fleet: str, dep: str, host: str, port: int, cluster: str | None
) -> dict[str, Any]:
    meta = _meta(name, namespace, fleet, dep)
    if cluster:
        meta["labels"]["gpufleet.io/cluster"] = cluster
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ExternalName",
            "externalName": host,
            "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def render_aigateway(artifact: Mapping[str, Any], gateway: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Envoy AI Gateway (v1beta1): per model an ``AIGatewayRoute`` matching ``x-ai-eg-model`` on the deployment's name
    and each adapter's, with one ``backendRef`` per cluster (``weight``, ``priority``) to an ``AIServiceBackend``
    (OpenAI schema, prefix ``/<ns>/<deployment>/v1``) over an Envoy Gateway ``Backend`` (the cluster gateway's
    address). Active spillover endpoints are backends at their own priority tier."""
    fleet = str(artifact.get("fleet") or "")
    objs: list[dict[str, Any]] = []
    notes: list[str] = []
    parent = _parent_ref(gateway)
    for model in artifact.get("models") or []:
        dep, ns = model["deployment"], model["namespace"]
        rows, missing = _usable(model)
        notes += missing
        refs = []
        for c in rows:
            name = backend_name(dep, c["cluster"])
            objs += _ai_backend(name, ns, fleet, dep, c["address"], c["port"], f"{model['path']}v1", tls=False)
            refs.append({"name": name, "weight": c["weight"], "priority": c["priority"]})
        for s in model["spillover"]:
            if not s["active"]:
                continue
            host, port, path, tls = _split_url(s["url"], f"{dep}.external_endpoints.{s['name']}.url")
            name = backend_name(dep, f"x-{s['name']}")
            objs += _ai_backend(name, ns, fleet, dep, host, port, path.rstrip("/") or "/v1", tls=tls)
            refs.append({"name": name, "weight": s["weight"], "priority": s["priority"]})
        if not refs:
            continue
        names = [dep, *model["adapters"]]
        objs.append(
            {
                "apiVersion": "aigateway.envoyproxy.io/v1beta1",
                "kind": "AIGatewayRoute",
                "metadata": _meta(k8s_name(dep), ns, fleet, dep),
                "spec": {
                    "parentRefs": [parent],
                    "rules": [
                        {
                            "matches": [{"headers": [{"type": "Exact", "name": "x-ai-eg-model", "value": n}]}],
                            "backendRefs": refs,
                        }
                        for n in names
                    ],
                },
            }
        )
    return objs, notes


def _ai_backend(
    name: str, ns: str, fleet: str, dep: str, host: str, port: int, prefix: str, *, tls: bool
) -> list[dict[str, Any]]:
    ip = re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", host)
    endpoint = {"ip": {"address": host, "port": port}} if ip else {"fqdn": {"hostname": host, "port": port}}
    backend: dict[str, Any] = {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "Backend",
        "metadata": _meta(name, ns, fleet, dep),
        "spec": {"endpoints": [endpoint]},
    }
    if tls:
        backend["spec"]["tls"] = {"wellKnownCACertificates": "System"}
    service_backend = {
        "apiVersion": "aigateway.envoyproxy.io/v1beta1",
        "kind": "AIServiceBackend",
        "metadata": _meta(name, ns, fleet, dep),
        "spec": {
            "schema": {"name": "OpenAI", "prefix": prefix},
            "backendRef": {"name": name, "kind": "Backend", "group": "gateway.envoyproxy.io"},
        },
    }
    return [backend, service_backend]


def render_llmd(artifact: Mapping[str, Any], namespace: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The llm-d router's endpoints files, one per model: a ConfigMap ``gpufleet-llmd-endpoints-<fleet>.<deployment>``
    (:func:`llmd_configmap_name`) holding ``endpoints.yaml``, read by that model's endpoint picker (an EPP serves one
    pool: one model). One file for the whole fleet was past 1 MiB at about 3,000 endpoints (issue 26).

    Format: llm-d/llm-d-router ``pkg/epp/framework/plugins/datalayer/discovery/file/README.md`` ("Multi-cluster
    support", plugin type ``multicluster-file-discovery``) and ``plugin.go`` (``EndpointsFile``/``EndpointEntry``):
    ``endpoints: [{name, namespace, address, port (a string), labels}]`` where a cluster is reached by its gateway
    host. The file has no weight: a cluster with weight 0 is left out (the EPP deletes an endpoint absent on reload;
    a model with none routable gets an empty list, so its EPP drops them all); the weight, priority, cluster and model
    travel as labels for the EPP's scorers/filters. Spillover endpoints are not in it (the EPP scrapes each endpoint's
    metrics, which an external API does not serve). Compact JSON (JSON is YAML: the plugin reads both)."""
    fleet = str(artifact.get("fleet") or "")
    objs: list[dict[str, Any]] = []
    notes: list[str] = []
    for model in artifact.get("models") or []:
        rows, missing = _usable(model)
        notes += missing
        entries = [
            {
                "name": backend_name(model["deployment"], c["cluster"]),
                "namespace": model["namespace"],
                "address": c["address"],
                "port": str(c["port"]),
                "labels": {
                    "gpufleet.io/cluster": c["cluster"],
                    LABEL_DEPLOYMENT: model["deployment"],
                    "gpufleet.io/path": model["path"],
                    "gpufleet.io/weight": str(c["weight"]),
                    "gpufleet.io/priority": str(c["priority"]),
                },
            }
            for c in rows
            if c["weight"] > 0
        ]
        text = _compact({"endpoints": entries}) + "\n"
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": _meta(llmd_configmap_name(fleet, str(model["deployment"])), namespace, fleet),
                "data": {LLMD_FILE_KEY: text},
            }
        )
    return objs, notes


def llmd_configmap_name(fleet: str, deployment: str) -> str:
    """``gpufleet-llmd-endpoints-<fleet>.<deployment>``: the endpoints file of one model's endpoint picker (a dot
    holds neither in a fleet's name nor in a deployment's, so no two fleets' or models' files share a name)."""
    base = k8s_name("gpufleet-llmd-endpoints-" + (fleet or "fleet"))
    return f"{base}.{k8s_name(deployment)}"


def artifact_name(fleet: str) -> str:
    """The artifact's index ConfigMap: ``gpufleet-routing-<fleet>`` (the name the single ConfigMap had before)."""
    return k8s_name(f"gpufleet-routing-{fleet or 'fleet'}")


def model_configmap_name(fleet: str, deployment: str, part: int = 1) -> str:
    """``<index>.<deployment>`` (part 1) and ``<index>.<deployment>.<part>``: a ConfigMap name is a DNS subdomain, and
    neither the index's name nor a deployment's holds a dot, so no fleet's pieces can take another fleet's names."""
    base = f"{artifact_name(fleet)}.{k8s_name(deployment)}"
    return base if part == 1 else f"{base}.{part}"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _digest(model: Mapping[str, Any]) -> str:
    return hashlib.sha256(_compact(model).encode()).hexdigest()


def _chunks(model: Mapping[str, Any], budget: int) -> list[list[Any]]:
    """The model's clusters cut so that each part's JSON stays under ``budget`` bytes (the first part also carries
    the model's other fields); at least one part, at least one cluster in a part that has any."""
    head = {k: v for k, v in model.items() if k != "clusters"}
    out: list[list[Any]] = [[]]
    used = len(_compact(head).encode()) + PART_OVERHEAD
    for row in model.get("clusters") or []:
        cost = len(_compact(row).encode()) + 1
        if out[-1] and used + cost > budget:
            out.append([])
            used = PART_OVERHEAD
        out[-1].append(row)
        used += cost
    return out


def artifact_objects(artifact: Mapping[str, Any], namespace: str, part_bytes: int = PART_BYTES) -> list[dict[str, Any]]:
    """The artifact as ConfigMaps on the hub / in ``_fleet/routing/``: per model (deployment) one ConfigMap
    :func:`model_configmap_name` (key ``routing.json``, compact JSON ``{version, layout: part, fleet, deployment,
    part, parts, model}``), cut into numbered parts when its clusters would pass ``part_bytes``; then the index
    :func:`artifact_name` (``{version, fleet, mode, renderer, layout: index, models: [{deployment, namespace,
    configmaps, sha256}]}``, indented: people read it). The parts come first, the index last: a reader that follows
    the index finds every part it names (the hub applies them in this order; the prune deletes afterwards).
    :func:`assemble_artifact` reads them back into the artifact."""
    fleet = str(artifact.get("fleet") or "")
    parts: list[dict[str, Any]] = []
    index_models: list[dict[str, Any]] = []
    for model in artifact.get("models") or []:
        dep = str(model["deployment"])
        chunks = _chunks(model, part_bytes)
        names = [model_configmap_name(fleet, dep, i + 1) for i in range(len(chunks))]
        head = {k: v for k, v in model.items() if k != "clusters"}
        for i, rows in enumerate(chunks):
            body = {**head, "clusters": rows} if i == 0 else {"clusters": rows}
            doc = {
                "version": ROUTING_VERSION,
                "layout": LAYOUT_PART,
                "fleet": fleet,
                "deployment": dep,
                "part": i + 1,
                "parts": len(chunks),
                "model": body,
            }
            parts.append(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": _meta(names[i], namespace, fleet, dep),
                    "data": {ARTIFACT_KEY: _compact(doc) + "\n"},
                }
            )
        index_models.append(
            {"deployment": dep, "namespace": model.get("namespace"), "configmaps": names, "sha256": _digest(model)}
        )
    index = {k: v for k, v in artifact.items() if k != "models"}
    index.update(layout=LAYOUT_INDEX, models=index_models)
    return [
        *parts,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(artifact_name(fleet), namespace, fleet),
            "data": {ARTIFACT_KEY: json.dumps(index, indent=1, sort_keys=True) + "\n"},
        },
    ]


def hub_objects(
    artifact: Mapping[str, Any],
    renderer: str,
    *,
    gateway: Mapping[str, Any] | None = None,
    namespace: str = "gpufleet-routing",
) -> tuple[list[dict[str, Any]], list[str]]:
    """The hub's objects for ``renderer`` (the artifact's ConfigMaps always first: :func:`artifact_objects`) and lines
    naming what could not be routed. ``gateway``: the hub Gateway (``{name, namespace, section_name}``), required by
    httproute and aigateway.
    ``namespace``: where the artifact and the llm-d ConfigMap live (routes live in their model's namespace)."""
    renderer = parse_renderer(renderer)
    objs = artifact_objects(artifact, namespace)
    if renderer == NONE:
        return objs, []
    if renderer in (HTTPROUTE, AIGATEWAY):
        if not gateway or not gateway.get("name"):
            raise GpufleetError(
                f"gpufleet_routing_gateway: gpufleet_fleet_routing={renderer} needs the hub's Gateway "
                "({name, namespace, section_name})"
            )
        more, notes = (render_httproute if renderer == HTTPROUTE else render_aigateway)(artifact, gateway)
    else:
        more, notes = render_llmd(artifact, namespace)
    return objs + more, notes


def routing_relpath(obj: Mapping[str, Any]) -> str:
    """``_fleet/routing/<namespace>.<kind>-<name>.yaml``: three components, as every journaled path of the render
    directory (:func:`.manifest_dir.read_journal`)."""
    meta = obj["metadata"]
    return f"_fleet/{ROUTING_DIR}/{meta['namespace']}.{str(obj['kind']).lower()}-{meta['name']}.yaml"


# --------------------------------------------------------------------------------------------------------------------
# Render mode: a replica leaves the weights before its files go
# --------------------------------------------------------------------------------------------------------------------


def _document(obj: Any) -> dict[str, Any] | None:
    """The JSON a routing ConfigMap holds (untrusted: None when it is not one of this version)."""
    if not isinstance(obj, Mapping) or obj.get("kind") != "ConfigMap":
        return None
    text = (obj.get("data") or {}).get(ARTIFACT_KEY) if isinstance(obj.get("data"), Mapping) else None
    if not isinstance(text, str):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, Mapping) or doc.get("version") != ROUTING_VERSION:
        return None
    return dict(doc)


def read_artifact(obj: Any) -> dict[str, Any] | None:
    """The whole routing artifact one ConfigMap holds: the single ConfigMap earlier versions wrote (read for one
    release, so that an upgraded render still knows what the last routing file sends traffic to); None for anything
    else, the index and parts of the split form included (:func:`assemble_artifact`)."""
    doc = _document(obj)
    if doc is None or "layout" in doc or not isinstance(doc.get("models"), list):
        return None
    return doc


def _model_of(entry: Any, namespace: str, docs: Mapping[tuple[str, str], Mapping[str, Any]], fleet: str) -> Any:
    """The model an index entry names, from its parts; None when a part is missing or does not fit the others."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("configmaps"), list) or not entry["configmaps"]:
        return None
    names = entry["configmaps"]
    rows: list[Any] = []
    model: dict[str, Any] | None = None
    for number, name in enumerate(names, start=1):
        part = docs.get((namespace, str(name)))
        body = (part or {}).get("model")
        if (
            part is None
            or part.get("layout") != LAYOUT_PART
            or part.get("fleet") != fleet
            or part.get("deployment") != entry.get("deployment")
            or part.get("part") != number
            or part.get("parts") != len(names)
            or not isinstance(body, Mapping)
            or not isinstance(body.get("clusters"), list)
        ):
            return None
        if model is None:
            model = dict(body)
        rows += body["clusters"]
    if model is None:
        return None
    model["clusters"] = rows
    if entry.get("sha256") != _digest(model):  # parts of different runs (a torn read, a partial revert)
        return None
    return model


def assemble_artifact(objects: Iterable[Any], fleet: str) -> dict[str, Any] | None:
    """The routing artifact of ``fleet`` from its ConfigMaps (``objects``: what ``_fleet/routing/`` or the hub holds,
    untrusted): the index and every part it names (:func:`artifact_objects`), in the index's namespace; or, when
    there is no index, the single ConfigMap of earlier versions (:func:`read_artifact`). A model whose parts are
    missing or do not match the index's digest is left out (nothing of it counts as routed); None when there is
    neither form."""
    docs: dict[tuple[str, str], dict[str, Any]] = {}
    for obj in objects:
        doc = _document(obj)
        meta = obj.get("metadata") if doc is not None else None
        if doc is None or not isinstance(meta, Mapping) or doc.get("fleet") != fleet:
            continue
        docs[(str(meta.get("namespace") or ""), str(meta.get("name")))] = doc
    for (namespace, _name), doc in sorted(docs.items()):
        if doc.get("layout") == LAYOUT_INDEX and isinstance(doc.get("models"), list):
            out = {k: v for k, v in doc.items() if k not in ("layout", "models")}
            models = [_model_of(entry, namespace, docs, fleet) for entry in doc["models"]]
            out["models"] = [m for m in models if m is not None]
            return out
    for _key, doc in sorted(docs.items()):
        if "layout" not in doc and isinstance(doc.get("models"), list):
            return doc
    return None


def routed_weights(artifact: Mapping[str, Any] | None) -> dict[tuple[str, str], int]:
    """``{(deployment, cluster): weight}`` of an artifact (an unreadable entry counts as not routed)."""
    out: dict[tuple[str, str], int] = {}
    for m in (artifact or {}).get("models") or []:
        if not isinstance(m, Mapping):
            continue
        for c in m.get("clusters") or []:
            if isinstance(c, Mapping) and isinstance(c.get("weight"), int):
                out[(str(m.get("deployment")), str(c.get("cluster")))] = int(c["weight"])
    return out


def still_routed(previous: Mapping[str, Any] | None, replicas: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """The ``(deployment, cluster)`` pairs whose replicas a render keeps one more run: the routing written by the last
    run (``previous``) sends them more traffic than the replicas placed there now can take (a drain, a scale-down, a
    deployment removed). This run writes the lower weight (0 when none is left); the next run, reading that, removes
    the files. Without a previous routing file nothing is held (nothing of this collection routed to them)."""
    now = placed_counts(replicas)
    return {
        (dep, cluster)
        for (dep, cluster), weight in routed_weights(previous).items()
        if weight > 0 and (now.get(dep) or {}).get(cluster, 0) < weight
    }


# --------------------------------------------------------------------------------------------------------------------
# The bounded summary: the task result and the ``gpufleet_routing`` custom stat (issue 26, "Scale")
# --------------------------------------------------------------------------------------------------------------------

#: The ``gpufleet_routing`` custom stat (and ``fleet_routing``'s ``routing``), in characters of JSON.
SUMMARY_LIMIT = 64 * 1024
#: Model names the summary's ``totals.short`` / ``totals.over`` list (the others are counted).
SUMMARY_NAMES = 10
#: Routing files the summary lists (``files_count`` counts them all; ``artifact.file`` is the artifact's).
SUMMARY_FILES = 50


def _json_size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def artifact_file(fleet: str, namespace: str) -> str:
    """The render-directory path of the artifact's index ConfigMap (:func:`artifact_objects`, :func:`routing_relpath`)."""
    return routing_relpath(
        {
            "kind": "ConfigMap",
            "metadata": {"namespace": namespace, "name": artifact_name(fleet)},
        }
    )


def model_summary(model: Mapping[str, Any]) -> dict[str, Any]:
    """One model of the artifact in a few fixed-size fields: its ``endpoints`` (clusters routed to, weight > 0, and
    in all), the priority ``tiers`` they are in, the ``weight`` in all, ``ready`` / ``desired``, ``short`` (fewer
    Ready replicas than desired) and ``over`` (more: replicas leaving that still serve), the ``draining`` clusters
    and those the hub cannot reach (``unroutable``: no ``gpufleet_routing_address``), the active spillover
    endpoints."""
    rows = list(model.get("clusters") or [])
    routed = [c for c in rows if int(c.get("weight") or 0) > 0]
    desired, ready = int(model.get("desired") or 0), int(model.get("ready") or 0)
    return {
        "namespace": model.get("namespace"),
        "desired": desired,
        "ready": ready,
        "weight": sum(int(c.get("weight") or 0) for c in rows),
        "endpoints": len(routed),
        "clusters": len(rows),
        "tiers": sorted({int(c.get("priority") or 0) for c in routed}),
        "draining": sum(1 for c in rows if c.get("draining")),
        "leaving": sum(int(c.get("leaving") or 0) for c in rows),
        "unroutable": sum(1 for c in rows if not c.get("address")),
        "spillover": [str(s.get("name")) for s in model.get("spillover") or [] if s.get("active")],
        "short": ready < desired,
        "over": ready > desired,
    }


def routing_summary(
    artifact: Mapping[str, Any],
    *,
    namespace: str,
    files: Iterable[str] = (),
    render_dir: str | None = None,
    hub: str | None = None,
    limit: int = SUMMARY_LIMIT,
) -> dict[str, Any]:
    """The routing artifact as the task result and the ``gpufleet_routing`` custom stat carry it: at most ``limit``
    characters of JSON whatever the fleet's size, pointing at the full artifact.

    ``models``: per deployment :func:`model_summary`; ``totals``: models, endpoints, weight, ready, desired, and the
    models ``short`` and ``over``; ``artifact``: where the whole artifact is - the ConfigMap file under
    ``_fleet/routing/`` of ``render_dir`` (render mode) and/or the ConfigMap on the ``hub`` (key ``routing.json``);
    ``files``: the first :data:`SUMMARY_FILES` routing files of this fleet under ``_fleet/routing/`` (``files_count``
    of them). When it would be
    larger, models are cut (the short and over ones first, then by name) and ``models_count`` / ``files_count``
    count the whole, ``truncated`` is true."""
    fleet = str(artifact.get("fleet") or "")
    per = {str(m["deployment"]): model_summary(m) for m in artifact.get("models") or []}
    short = sorted(name for name, m in per.items() if m["short"])
    over = sorted(name for name, m in per.items() if m["over"])
    configmap = {"namespace": namespace, "name": artifact_name(fleet), "key": ARTIFACT_KEY}
    pointer: dict[str, Any] = {"configmap": configmap}
    if render_dir:
        pointer["render_dir"] = str(render_dir)
        pointer["file"] = artifact_file(fleet, namespace)
    if hub:
        pointer["hub"] = hub
    all_files = sorted(files)
    base: dict[str, Any] = {
        "version": artifact.get("version"),
        "fleet": fleet,
        "mode": artifact.get("mode"),
        "renderer": artifact.get("renderer"),
        "artifact": pointer,
        "totals": {
            "models": len(per),
            "endpoints": sum(m["endpoints"] for m in per.values()),
            "clusters": len(
                {str(c.get("cluster")) for m in artifact.get("models") or [] for c in m.get("clusters") or []}
            ),
            "weight": sum(m["weight"] for m in per.values()),
            "ready": sum(m["ready"] for m in per.values()),
            "desired": sum(m["desired"] for m in per.values()),
            "unroutable": sum(m["unroutable"] for m in per.values()),
            "short": short[:SUMMARY_NAMES],
            "over": over[:SUMMARY_NAMES],
        },
    }
    if len(short) > SUMMARY_NAMES:
        base["totals"]["short_count"] = len(short)
    if len(over) > SUMMARY_NAMES:
        base["totals"]["over_count"] = len(over)
    # Models in the order they are kept when cut: the short and over ones first, then by name.
    ranked = sorted(per, key=lambda name: (not (per[name]["short"] or per[name]["over"]), name))
    used = _json_size(base) + 200  # the keys below and their counts
    models: dict[str, Any] = {}
    for name in ranked:
        cost = _json_size(name) + _json_size(per[name]) + 4
        if used + cost > limit * 3 // 4:
            break
        models[name] = per[name]
        used += cost
    shown: list[str] = []
    for path in all_files:
        cost = _json_size(path) + 2
        if used + cost > limit or len(shown) >= SUMMARY_FILES:
            break
        shown.append(path)
        used += cost
    out = dict(base)
    out["models"] = {name: models[name] for name in sorted(models)}
    out["models_count"] = len(per)
    out["files"] = shown
    out["files_count"] = len(all_files)
    out["truncated"] = (
        len(models) < len(per)
        or len(shown) < len(all_files)
        or bool(base["totals"].get("short_count") or base["totals"].get("over_count"))
    )
    return out


def bounded_lines(lines: Iterable[str], what: str, limit: int) -> list[str]:
    """``lines`` cut to at most ``limit`` characters of JSON, a last line counting those left out."""
    items = list(lines)
    kept: list[str] = []
    used = 2
    for line in items:
        cost = _json_size(line) + 2
        if used + cost > limit - 200:
            break
        kept.append(line)
        used += cost
    if len(kept) < len(items):
        kept.append(f"... and {len(items) - len(kept)} more {what} (the routing artifact has every one)")
    return kept
