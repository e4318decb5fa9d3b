"""A local HTTP endpoint that speaks the GKE container API v1 (REST JSON) well enough for the provisioning modules.

It keeps clusters, node pools and long-running operations in memory and records every request (method, path, JSON
body) so tests can assert exactly what the official google-cloud-container client sent. Operations are RUNNING when
returned and DONE at the first poll, so the modules' waits are exercised. A machine type listed in ``stockout``
makes node-pool creation fail the way Compute Engine reports a stockout; a ``(predicate, message)`` in ``fail_when``
fails the creation of every pool whose request body the predicate accepts with that message (a stockout of one
reservation or zone, a quota): the pool is left in ERROR with the message as its ``statusMessage``, as GKE does.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOC = r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
ROUTES = [
    ("GET", rf"^/v1/{LOC}/operations/(?P<op>[^/:]+)$", "get_operation"),
    ("GET", rf"^/v1/{LOC}/clusters/(?P<cluster>[^/:]+)$", "get_cluster"),
    ("POST", rf"^/v1/{LOC}/clusters$", "create_cluster"),
    ("PUT", rf"^/v1/{LOC}/clusters/(?P<cluster>[^/:]+)$", "update_cluster"),
    ("DELETE", rf"^/v1/{LOC}/clusters/(?P<cluster>[^/:]+)$", "delete_cluster"),
    ("GET", rf"^/v1/{LOC}/clusters/(?P<cluster>[^/:]+)/nodePools/(?P<pool>[^/:]+)$", "get_pool"),
    ("POST", rf"^/v1/{LOC}/clusters/(?P<cluster>[^/:]+)/nodePools$", "create_pool"),
    ("PUT", rf"^/v1/{LOC}/clusters/(?P<cluster>[^/:]+)/nodePools/(?P<pool>[^/:]+)$", "update_pool"),
    ("POST", rf"^/v1/{LOC}/clusters/(?P<cluster>[^/:]+)/nodePools/(?P<pool>[^/:]+):setAutoscaling$", "autoscale_pool"),
    ("DELETE", rf"^/v1/{LOC}/clusters/(?P<cluster>[^/:]+)/nodePools/(?P<pool>[^/:]+)$", "delete_pool"),
]


class NotFound(Exception):
    pass


def stockout_message(project: str, cluster: str, pool: str, zone: str) -> str:
    """What GKE reports when Compute Engine has no capacity for a pool's machine type in a zone."""
    return (
        f"Instance 'gke-{cluster}-{pool}-0' creation failed: The zone 'projects/{project}/zones/{zone}' does not "
        "have enough resources available to fulfill the request. '(resource type:compute)'. "
        "ZONE_RESOURCE_POOL_EXHAUSTED"
    )


class GkeApi:
    def __init__(self) -> None:
        self.clusters: dict[str, dict[str, Any]] = {}
        self.pools: dict[str, dict[str, dict[str, Any]]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.stockout: set[str] = set()
        self.fail_when: list[tuple[Callable[[dict[str, Any]], bool], str]] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------------------
    def start(self) -> str:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                body = json.loads(raw) if raw else None
                status, payload = api.dispatch(self.command, path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- what the tests read ------------------------------------------------------------------------------------------
    def mutations(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] != "GET"]

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()

    # -- dispatch -----------------------------------------------------------------------------------------------------
    def dispatch(self, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append({"method": method, "path": path, "body": copy.deepcopy(body)})
            for verb, pattern, handler in ROUTES:
                match = re.match(pattern, path)
                if verb == method and match:
                    try:
                        return 200, getattr(self, handler)(body or {}, **match.groupdict())
                    except NotFound as exc:
                        return 404, {"error": {"code": 404, "message": str(exc), "status": "NOT_FOUND"}}
            return 400, {"error": {"code": 400, "message": f"no route {method} {path}", "status": "INVALID_ARGUMENT"}}

    def _op(self, project: str, location: str, kind: str, target: str, error: str | None = None) -> dict[str, Any]:
        name = f"operation-{len(self.operations) + 1}"
        op = {
            "name": name,
            "operationType": kind,
            "status": "RUNNING",
            "targetLink": target,
            "selfLink": f"https://container.googleapis.com/v1/projects/{project}/locations/{location}/operations/{name}",
        }
        self.operations[name] = {**op, "_error": error}
        return op

    def get_operation(self, body: Any, project: str, location: str, op: str) -> dict[str, Any]:
        if op not in self.operations:
            raise NotFound(f"operation {op}")
        rec = self.operations[op]
        out = {k: v for k, v in rec.items() if not k.startswith("_")}
        out["status"] = "DONE"
        if rec["_error"]:
            out["error"] = {"code": 8, "message": rec["_error"]}
            out["statusMessage"] = rec["_error"]
        return out

    def _key(self, project: str, location: str, cluster: str) -> str:
        return f"projects/{project}/locations/{location}/clusters/{cluster}"

    def _cluster(self, project: str, location: str, cluster: str) -> dict[str, Any]:
        key = self._key(project, location, cluster)
        if key not in self.clusters:
            raise NotFound(f"Not found: {key}.")
        return self.clusters[key]

    def get_cluster(self, body: Any, project: str, location: str, cluster: str) -> dict[str, Any]:
        rec = copy.deepcopy(self._cluster(project, location, cluster))
        rec["nodePools"] = [copy.deepcopy(p) for p in self.pools[self._key(project, location, cluster)].values()]
        return rec

    def create_cluster(self, body: Any, project: str, location: str) -> dict[str, Any]:
        cluster = copy.deepcopy(body["cluster"])
        key = self._key(project, location, cluster["name"])
        version = cluster["initialClusterVersion"] + ".5-gke.1000"
        pools = cluster.pop("nodePools", [])
        cluster.update(
            status="RUNNING",
            location=location,
            currentMasterVersion=version,
            endpoint="203.0.113.10",
            masterAuth={"clusterCaCertificate": "Q0EtREFUQQ=="},
        )
        self.clusters[key] = cluster
        self.pools[key] = {p["name"]: {**p, "status": "RUNNING", "version": version} for p in pools}
        return self._op(project, location, "CREATE_CLUSTER", key)

    def update_cluster(self, body: Any, project: str, location: str, cluster: str) -> dict[str, Any]:
        rec = self._cluster(project, location, cluster)
        update = body["update"]
        if "desiredMasterVersion" in update:
            rec["currentMasterVersion"] = update["desiredMasterVersion"] + ".5-gke.1000"
        if "desiredReleaseChannel" in update:
            rec["releaseChannel"] = update["desiredReleaseChannel"]
        if "desiredAddonsConfig" in update:
            rec.setdefault("addonsConfig", {}).update(update["desiredAddonsConfig"])
        return self._op(project, location, "UPDATE_CLUSTER", self._key(project, location, cluster))

    def delete_cluster(self, body: Any, project: str, location: str, cluster: str) -> dict[str, Any]:
        self._cluster(project, location, cluster)
        key = self._key(project, location, cluster)
        del self.clusters[key]
        del self.pools[key]
        return self._op(project, location, "DELETE_CLUSTER", key)

    def _pool(self, project: str, location: str, cluster: str, pool: str) -> dict[str, Any]:
        self._cluster(project, location, cluster)
        pools = self.pools[self._key(project, location, cluster)]
        if pool not in pools:
            raise NotFound(f"Not found: node pool {pool}.")
        return pools[pool]

    def get_pool(self, body: Any, project: str, location: str, cluster: str, pool: str) -> dict[str, Any]:
        return copy.deepcopy(self._pool(project, location, cluster, pool))

    def create_pool(self, body: Any, project: str, location: str, cluster: str) -> dict[str, Any]:
        rec = self._cluster(project, location, cluster)
        pool = copy.deepcopy(body["nodePool"])
        key = self._key(project, location, cluster)
        machine = pool["config"]["machineType"]
        zone = (pool.get("locations") or rec.get("locations") or [f"{location}-a"])[0]
        message = next((m for accepts, m in self.fail_when if accepts(pool)), None)
        if machine in self.stockout and message is None:
            message = stockout_message(project, cluster, pool["name"], zone)
        if message is not None:
            pool.update(status="ERROR", statusMessage=message, version=rec["currentMasterVersion"])
            self.pools[key][pool["name"]] = pool
            return self._op(project, location, "CREATE_NODE_POOL", key, error=message)
        pool.update(status="RUNNING", version=rec["currentMasterVersion"])
        self.pools[key][pool["name"]] = pool
        return self._op(project, location, "CREATE_NODE_POOL", f"{key}/nodePools/{pool['name']}")

    def update_pool(self, body: Any, project: str, location: str, cluster: str, pool: str) -> dict[str, Any]:
        rec = self._pool(project, location, cluster, pool)
        if "labels" in body:
            rec["config"]["labels"] = dict(body["labels"].get("labels") or {})
        if "locations" in body:
            rec["locations"] = list(body["locations"])
        return self._op(project, location, "UPGRADE_NODES", f"{self._key(project, location, cluster)}/nodePools/{pool}")

    def autoscale_pool(self, body: Any, project: str, location: str, cluster: str, pool: str) -> dict[str, Any]:
        rec = self._pool(project, location, cluster, pool)
        rec["autoscaling"] = dict(body["autoscaling"])
        return self._op(
            project, location, "SET_NODE_POOL_MANAGEMENT", f"{self._key(project, location, cluster)}/nodePools/{pool}"
        )

    def delete_pool(self, body: Any, project: str, location: str, cluster: str, pool: str) -> dict[str, Any]:
        self._pool(project, location, cluster, pool)
        del self.pools[self._key(project, location, cluster)][pool]
        return self._op(
            project, location, "DELETE_NODE_POOL", f"{self._key(project, location, cluster)}/nodePools/{pool}"
        )


if __name__ == "__main__":  # python tests/e2e/gke_api.py PORT_FILE: serve until killed (the molecule scenario)
    import sys
    import time
    from pathlib import Path

    server = GkeApi()
    Path(sys.argv[1]).write_text(server.start())
    while True:
        time.sleep(3600)
