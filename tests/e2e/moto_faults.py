"""A small HTTP proxy in front of moto's server that injects EC2 capacity failures into EKS nodegroups.

moto creates every nodegroup ACTIVE. Real EKS creates it, the Auto Scaling group fails to launch instances, and the
nodegroup turns CREATE_FAILED with a health issue that carries EC2's error (``AsgInstanceLaunchFailures: ... Could not
launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient p5.48xlarge capacity
...``). The proxy forwards every request to moto unchanged and rewrites only DescribeNodegroup answers
(``GET /clusters/<c>/node-groups/<ng>``) of a nodegroup a :class:`Fault` matches, the way EKS reports the failure. The
nodegroup stays in moto, so deleting it (what the capacity ladder does before its next rung) works as usual.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

DESCRIBE_NODEGROUP = re.compile(r"^/clusters/(?P<cluster>[^/?]+)/node-groups/(?P<nodegroup>[^/?]+)$")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade"}


@dataclass
class Fault:
    """Nodegroup ``nodegroup`` reports ``code: message`` (CREATE_FAILED) while ``when`` holds for what moto recorded."""

    nodegroup: str
    when: Callable[[dict[str, Any]], bool]
    message: str
    code: str = "AsgInstanceLaunchFailures"


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                with proxy.lock:
                    proxy.requests.append((self.command, self.path))
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    status, out_headers = resp.status, resp.getheaders()
                finally:
                    conn.close()
                data = proxy.rewrite(self.command, self.path.split("?", 1)[0], status, data)
                self.send_response(status)
                for key, value in out_headers:
                    if key.lower() not in HOP_BY_HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def calls(self, method: str, path_re: str) -> list[str]:
        """The paths of the requests of ``method`` whose path matches ``path_re``."""
        with self.lock:
            return [p for m, p in self.requests if m == method and re.search(path_re, p)]

    def rewrite(self, method: str, path: str, status: int, data: bytes) -> bytes:
        match = DESCRIBE_NODEGROUP.match(path)
        if method != "GET" or status != 200 or not match:
            return data
        answer = json.loads(data)
        nodegroup = answer.get("nodegroup") or {}
        for fault in list(self.faults):
            if fault.nodegroup == match.group("nodegroup") and fault.when(nodegroup):
                nodegroup["status"] = "CREATE_FAILED"
                nodegroup["health"] = {
                    "issues": [
                        {"code": fault.code, "message": fault.message, "resourceIds": [f"eks-{fault.nodegroup}"]}
                    ]
                }
                return json.dumps(answer).encode()
        return data
