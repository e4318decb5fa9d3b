"""lazy_kubernetes: kubernetes imports without its generated classes, and any use of one still gets it.

Each case runs in a fresh interpreter: the test process has imported kubernetes already (where deferring is a no-op,
which is tested too).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

PRELUDE = """
import json, sys
from ansible_collections.gpufleet.serving.plugins.module_utils.lazy_kubernetes import (
    defer_generated_classes, is_deferred)
LAZY = ("kubernetes.client", "kubernetes.client.api", "kubernetes.client.models")
def state():
    return {
        "deferred": [is_deferred(name) for name in LAZY],
        "models_loaded": "kubernetes.client.models.v1_pod" in sys.modules,
        "apis_loaded": "kubernetes.client.api.core_v1_api" in sys.modules,
    }
"""


def run(code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_defers_the_generated_classes_and_keeps_what_the_dynamic_client_needs():
    out = run(
        """
        deferred = defer_generated_classes()
        import kubernetes
        from kubernetes.client import ApiClient, Configuration
        from kubernetes.client.rest import ApiException
        from kubernetes.dynamic import DynamicClient
        from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client
        print(json.dumps({"first": deferred, "again": defer_generated_classes(), "version": kubernetes.__version__,
                          "api_client": ApiClient.__module__, "configuration": Configuration.__module__,
                          **state()}))
        """
    )
    assert out["first"] is True and out["again"] is False
    assert out["deferred"] == [True, True, True]
    assert not out["models_loaded"] and not out["apis_loaded"]
    assert out["version"] and out["version"][0].isdigit()
    assert out["api_client"] == "kubernetes.client.api_client"
    assert out["configuration"] == "kubernetes.client.configuration"


def test_a_generated_class_asked_for_loads_the_package_as_a_plain_import_would():
    out = run(
        """
        defer_generated_classes()
        import kubernetes
        from kubernetes.client import V1Pod
        pod = kubernetes.client.V1Pod(metadata=kubernetes.client.V1ObjectMeta(name="p"))
        api = kubernetes.client.CoreV1Api
        from kubernetes.client.models import V1Node
        print(json.dumps({"pod": pod.metadata.name, "same": V1Pod is kubernetes.client.models.V1Pod,
                          "api": api.__module__, "node": V1Node.__module__,
                          "api_client_model": kubernetes.client.ApiClient().sanitize_for_serialization(pod),
                          **state()}))
        """
    )
    assert out["pod"] == "p" and out["same"]
    assert out["api"] == "kubernetes.client.api.core_v1_api"
    assert out["node"] == "kubernetes.client.models.v1_node"
    assert out["api_client_model"] == {"metadata": {"name": "p"}}
    assert out["deferred"] == [False, True, False]  # client and models ran their __init__; api was not asked
    assert out["models_loaded"] and out["apis_loaded"]


def test_deserialising_a_typed_response_reaches_the_models():
    # ApiClient finds a response's model class by name on kubernetes.client.models (typed APIs, watch).
    out = run(
        """
        defer_generated_classes()
        import kubernetes
        from kubernetes.client import ApiClient
        class Response:
            data = json.dumps({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "2"}}})
        node = ApiClient().deserialize(Response(), "V1Node")
        print(json.dumps({"type": type(node).__name__, "name": node.metadata.name, "cpu": node.status.capacity["cpu"]}))
        """
    )
    assert out == {"type": "V1Node", "name": "n1", "cpu": "2"}


def test_threads_asking_at_once_load_the_package_once():
    out = run(
        """
        defer_generated_classes()
        import kubernetes
        from concurrent.futures import ThreadPoolExecutor
        names = ["V1Pod", "V1Node", "CoreV1Api", "AppsV1Api", "V1Deployment", "CustomObjectsApi"] * 4
        with ThreadPoolExecutor(8) as pool:
            found = list(pool.map(lambda n: getattr(kubernetes.client, n).__name__, names))
        print(json.dumps({"ok": found == names, **state()}))
        """
    )
    assert out["ok"] and out["deferred"][0] is False


def test_unknown_names_still_raise_attribute_error():
    out = run(
        """
        defer_generated_classes()
        import kubernetes
        try:
            kubernetes.client.NoSuchThing
            raised = False
        except AttributeError:
            raised = True
        print(json.dumps({"raised": raised, "has": hasattr(kubernetes.client, "V1Pod")}))
        """
    )
    assert out == {"raised": True, "has": True}


def test_nothing_is_deferred_once_kubernetes_is_imported():
    out = run(
        """
        import kubernetes
        print(json.dumps({"deferred_now": defer_generated_classes(), **state()}))
        """
    )
    assert out["deferred_now"] is False
    assert out["deferred"] == [False, False, False] and out["models_loaded"]
