# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Options of the modules that call the GKE container API with the google-cloud-container client."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  project:
    description: The Google Cloud project.
    type: str
    required: true
  location:
    description: The cluster's region (regional cluster) or zone.
    type: str
    required: true
  auth_kind:
    description:
      - V(application) uses Application Default Credentials, V(serviceaccount) a service account key
        (O(service_account_file) or O(service_account_contents)); V(anonymous) sends no credentials and is only
        accepted with a local O(api_endpoint) (an emulator or a test server).
    type: str
    choices: [application, serviceaccount, anonymous]
    default: application
  service_account_file:
    description: Path to a service account key file.
    type: path
  service_account_contents:
    description: A service account key (JSON string or mapping). Never logged.
    type: jsonarg
  api_endpoint:
    description: Another container API endpoint (C(client_options.api_endpoint)), for example C(http://127.0.0.1:8080).
    type: str
  wait_timeout:
    description: Seconds an operation may take; the task fails after it, naming the operation.
    type: int
    default: 1800
  poll_interval:
    description: Seconds between two polls of an operation.
    type: float
    default: 10
requirements:
  - google-cloud-container >= 2.50
"""
