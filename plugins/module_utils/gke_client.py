# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The google-cloud-container client of GKE: the façade of ``cloud/gke_client.py`` (issue 32 step 5: the
providers live behind ``cloud/provider.py``'s ``Provider``). This module keeps the import path filters, playbooks and
earlier releases use; the collection's modules import ``cloud/`` directly, so their AnsiballZ payloads do not carry
this file.
"""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.cloud.gke_client import (
    AUTH_SPEC,
    CONTAINER_IMPORT_ERROR,
    HAS_CONTAINER,
    SCOPES,
    ClientApi,
    make_client,
)

__all__ = [
    "AUTH_SPEC",
    "CONTAINER_IMPORT_ERROR",
    "HAS_CONTAINER",
    "SCOPES",
    "ClientApi",
    "make_client",
]
