# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The official google-cloud-container client behind :class:`gke.ContainerApi`: REST JSON in, REST JSON out.

The REST transport is used, so ``api_endpoint`` may point at any HTTP endpoint that speaks the container API v1
(``http://127.0.0.1:PORT`` in tests)."""

from __future__ import annotations

import json
import traceback
from collections.abc import Mapping
from typing import Any

try:
    from google.api_core import exceptions as gexc
    from google.cloud import container_v1

    HAS_CONTAINER = True
    CONTAINER_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - reported by the modules with missing_required_lib
    HAS_CONTAINER = False
    CONTAINER_IMPORT_ERROR = traceback.format_exc()

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]

AUTH_SPEC: dict[str, Any] = {
    "auth_kind": {"type": "str", "choices": ["application", "serviceaccount", "anonymous"], "default": "application"},
    "service_account_file": {"type": "path"},
    "service_account_contents": {"type": "jsonarg", "no_log": True},
    "api_endpoint": {"type": "str"},
}


def _json(message: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        type(message).to_json(message, use_integers_for_enums=False, always_print_fields_with_no_presence=False)
    )
    return data


def make_client(
    auth_kind: str,
    service_account_file: str | None = None,
    service_account_contents: Any = None,
    api_endpoint: str | None = None,
) -> Any:
    """A ClusterManagerClient on the REST transport with the requested credentials."""
    if not HAS_CONTAINER:
        raise GpufleetError(f"google-cloud-container is required: {CONTAINER_IMPORT_ERROR}")
    credentials: Any = None
    if auth_kind == "serviceaccount":
        from google.oauth2 import service_account

        if service_account_contents:
            info = (
                json.loads(service_account_contents)
                if isinstance(service_account_contents, str)
                else service_account_contents
            )
            credentials = service_account.Credentials.from_service_account_info(info, scopes=SCOPES)
        elif service_account_file:
            credentials = service_account.Credentials.from_service_account_file(service_account_file, scopes=SCOPES)
        else:
            raise GpufleetError("auth_kind serviceaccount needs service_account_file or service_account_contents")
    elif auth_kind == "anonymous":
        if not api_endpoint:
            raise GpufleetError("auth_kind anonymous is only for a local api_endpoint (an emulator or a test server)")
        from google.auth.credentials import AnonymousCredentials

        credentials = AnonymousCredentials()
    options = {"api_endpoint": api_endpoint} if api_endpoint else None
    return container_v1.ClusterManagerClient(credentials=credentials, transport="rest", client_options=options)


def container_api(params: Mapping[str, Any]) -> ClientApi:
    """:class:`ClientApi` over the client a module's AUTH_SPEC options ask for."""
    return ClientApi(
        make_client(
            params["auth_kind"],
            params.get("service_account_file"),
            params.get("service_account_contents"),
            params.get("api_endpoint"),
        )
    )


class ClientApi:
    """:class:`gke.ContainerApi` over a ClusterManagerClient."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def _call(self, method: str, request_type: str, body: dict[str, Any]) -> dict[str, Any]:
        request = getattr(container_v1, request_type).from_json(json.dumps(body))
        return _json(getattr(self.client, method)(request=request))

    def _get(self, method: str, request_type: str, name: str) -> dict[str, Any] | None:
        try:
            return self._call(method, request_type, {"name": name})
        except gexc.NotFound:
            return None

    def get_cluster(self, name: str) -> dict[str, Any] | None:
        return self._get("get_cluster", "GetClusterRequest", name)

    def create_cluster(self, parent: str, cluster: dict[str, Any]) -> dict[str, Any]:
        return self._call("create_cluster", "CreateClusterRequest", {"parent": parent, "cluster": cluster})

    def update_cluster(self, name: str, update: dict[str, Any]) -> dict[str, Any]:
        return self._call("update_cluster", "UpdateClusterRequest", {"name": name, "update": update})

    def delete_cluster(self, name: str) -> dict[str, Any]:
        return self._call("delete_cluster", "DeleteClusterRequest", {"name": name})

    def get_node_pool(self, name: str) -> dict[str, Any] | None:
        return self._get("get_node_pool", "GetNodePoolRequest", name)

    def create_node_pool(self, parent: str, node_pool: dict[str, Any]) -> dict[str, Any]:
        return self._call("create_node_pool", "CreateNodePoolRequest", {"parent": parent, "nodePool": node_pool})

    def update_node_pool(self, name: str, update: dict[str, Any]) -> dict[str, Any]:
        return self._call("update_node_pool", "UpdateNodePoolRequest", {"name": name, **update})

    def set_node_pool_autoscaling(self, name: str, autoscaling: dict[str, Any]) -> dict[str, Any]:
        return self._call(
            "set_node_pool_autoscaling", "SetNodePoolAutoscalingRequest", {"name": name, "autoscaling": autoscaling}
        )

    def delete_node_pool(self, name: str) -> dict[str, Any]:
        return self._call("delete_node_pool", "DeleteNodePoolRequest", {"name": name})

    def get_operation(self, name: str) -> dict[str, Any]:
        return self._call("get_operation", "GetOperationRequest", {"name": name})
