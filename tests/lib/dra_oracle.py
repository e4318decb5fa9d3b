"""The kube-scheduler as a DRA oracle: does the real allocator allocate this claim on this node?

For each case, one ResourceClaim (the given ``spec.devices``) and one Pod that claims it, pinned to the case's node
(``nodeSelector: kubernetes.io/hostname``, tolerating the local fleet's GPU taint). Everything is created at once,
then pods and claims are polled until every pod is decided:

- allocated: the pod is bound (``spec.nodeName``) and its claim has ``status.allocation``;
- not allocated: ``PodScheduled=False`` with reason ``Unschedulable`` (the allocator found no solution), or
  ``SchedulerError`` for what the allocator rejects outright (a claim beyond the per-claim device limit).
  A filter timeout (upstream's exhaustive search gave up after the scheduler's DRA filter timeout, 10 s) is a
  ``SchedulerError`` too: the scheduler retries such a pod for ever, so it is taken as "not allocated" at once and
  marked ``timeout`` (each retry would hold the single scheduling loop for another 10 s).

A decided "not allocated" is re-read once after a short settle time (the scheduler retries unschedulable pods when
slices or claims change; nothing changes here, so the verdict must hold).
"""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import dataclass, field
from typing import Any

GPU_TAINT_KEY = "nvidia.com/gpu"
PRIORITY_CLASS = "dra-oracle-never-preempt"
RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION = "v1"
TIMEOUT = "timed out trying to allocate devices"
# Messages of a pod that failed for a reason other than DRA allocation on its node (a node not Ready yet, whose
# not-ready taint the node lifecycle controller has not removed): retried, not a verdict.
TRANSIENT = (
    "untolerated taint",
    "were unschedulable",
    "waiting for",
    "not found",
    "being allocated",
    "is being deleted",
    "not available on the node",
)


@dataclass
class Case:
    name: str  # DNS label: the claim's and the pod's name
    node: str
    devices: dict[str, Any]  # ResourceClaim spec.devices


@dataclass
class Verdict:
    allocated: bool
    node: str = ""
    reason: str = ""
    message: str = ""
    devices: list[str] = field(default_factory=list)  # driver/pool/device of the allocation
    rejected: str = ""  # the API server refused the claim (validation): not allocatable either
    timeout: bool = False  # the allocator's search timed out (never allocated: retried for ever)


def _claim(case: Case, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{RESOURCE_GROUP}/{RESOURCE_VERSION}",
        "kind": "ResourceClaim",
        "metadata": {"name": case.name, "namespace": namespace},
        "spec": {"devices": case.devices},
    }


def _pod(case: Case, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": case.name, "namespace": namespace, "labels": {"app": "dra-oracle"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": case.node},
            "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "resourceClaims": [{"name": "devices", "resourceClaimName": case.name}],
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "devices"}]},
                }
            ],
            "terminationGracePeriodSeconds": 0,
            # No preemption attempts for unschedulable pods (a PostFilter pass over every node per attempt).
            "priorityClassName": PRIORITY_CLASS,
        },
    }


def _decided(pod: dict[str, Any], claim: dict[str, Any] | None) -> Verdict | None:
    if not pod or (pod.get("metadata") or {}).get("deletionTimestamp"):
        # Deleted after it was created: evicted (kube-controller-manager's device taint eviction controller deletes a
        # pod whose claim was allocated a device with a NoExecute taint it does not tolerate with effect NoExecute).
        return Verdict(False, reason="Evicted", message="the pod was deleted after it was scheduled (evicted)")
    node = (pod.get("spec") or {}).get("nodeName") or ""
    allocation = ((claim or {}).get("status") or {}).get("allocation")
    if node and allocation:
        results = (allocation.get("devices") or {}).get("results") or []
        return Verdict(True, node=node, devices=sorted(f"{r['driver']}/{r['pool']}/{r['device']}" for r in results))
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") != "PodScheduled" or cond.get("status") != "False":
            continue
        reason, message = cond.get("reason") or "", cond.get("message") or ""
        if reason not in ("Unschedulable", "SchedulerError"):
            return None
        if any(t in message for t in TRANSIENT):
            return None
        return Verdict(False, reason=reason, message=message, timeout=TIMEOUT in message)
    return None


class Oracle:
    """Runs cases against one cluster of a local fleet (a kubeconfig) in one namespace."""

    def __init__(self, kubeconfig: str, namespace: str = "dra-diff") -> None:
        from kubernetes import client, config

        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.namespace = namespace
        self.timings: dict[str, float] = {}  # seconds since run() began: nodes, clear, create, decided, settled

    # -- plumbing ---------------------------------------------------------------------------------------------------
    def _ensure_namespace(self, clear: bool = True) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.custom.create_cluster_custom_object(
                "scheduling.k8s.io",
                "v1",
                "priorityclasses",
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": PRIORITY_CLASS},
                    "value": 0,
                    "preemptionPolicy": "Never",
                },
            )
        except ApiException as exc:
            if exc.status != 409:
                raise

        try:
            self.core.read_namespace(self.namespace)
            if clear:
                self._clear()
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.core.create_namespace({"metadata": {"name": self.namespace}})

    def _clear(self, timeout: float = 120) -> None:
        """Delete the pods and claims of an earlier run in the namespace (reused fleets)."""
        self.core.delete_collection_namespaced_pod(self.namespace, grace_period_seconds=0)
        self.custom.delete_collection_namespaced_custom_object(
            RESOURCE_GROUP, RESOURCE_VERSION, self.namespace, "resourceclaims"
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pods = self.core.list_namespaced_pod(self.namespace).items
            claims = self._claims()
            if not pods and not claims:
                return
            for pod in pods:  # kwok has no kubelet to confirm termination: force it
                if pod.metadata.deletion_timestamp is not None:
                    self.core.delete_namespaced_pod(pod.metadata.name, self.namespace, grace_period_seconds=0)
            time.sleep(1)
        raise AssertionError(f"namespace {self.namespace}: pods/claims of an earlier run did not go away")

    def _claims(self) -> dict[str, dict[str, Any]]:
        items = self.custom.list_namespaced_custom_object(
            RESOURCE_GROUP, RESOURCE_VERSION, self.namespace, "resourceclaims"
        )["items"]
        return {c["metadata"]["name"]: c for c in items}

    def _pods(self) -> dict[str, dict[str, Any]]:
        data = self.api.call_api(
            f"/api/v1/namespaces/{self.namespace}/pods",
            "GET",
            query_params=[("labelSelector", "app=dra-oracle")],
            response_types_map={200: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
        return {p["metadata"]["name"]: p for p in data["items"]}

    def _create(self, case: Case) -> str:
        """Create the claim and the pod; the API server's refusal of the claim (if any) is returned."""
        from kubernetes.client.exceptions import ApiException

        try:
            self.custom.create_namespaced_custom_object(
                RESOURCE_GROUP, RESOURCE_VERSION, self.namespace, "resourceclaims", _claim(case, self.namespace)
            )
        except ApiException as exc:
            if exc.status in (400, 422):
                return f"{exc.status}: {exc.body}"
            raise
        self.core.create_namespaced_pod(self.namespace, _pod(case, self.namespace))
        return ""

    def _events(self) -> dict[str, str]:
        """The latest FailedScheduling message per pod (what `kubectl describe` shows)."""
        out: dict[str, tuple[Any, str]] = {}
        for ev in self.core.list_namespaced_event(self.namespace).items:
            if ev.reason != "FailedScheduling" or ev.involved_object.kind != "Pod":
                continue
            when = ev.last_timestamp or ev.event_time or ev.metadata.creation_timestamp
            name = ev.involved_object.name
            if name not in out or (when and out[name][0] and when > out[name][0]):
                out[name] = (when, ev.message or "")
        return {k: v[1] for k, v in out.items()}

    def wait_nodes(self, names: set[str], timeout: float = 180) -> None:
        """Wait until every node is Ready and carries no taint but the GPU one (a fresh fleet's nodes start with
        ``node.kubernetes.io/not-ready`` until the node lifecycle controller sees kwok's heartbeat)."""
        deadline = time.monotonic() + timeout
        while True:
            waiting = set(names)
            for node in self.core.list_node().items:
                ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
                taints = [t.key for t in node.spec.taints or [] if t.key != GPU_TAINT_KEY]
                if ready and not taints:
                    waiting.discard(node.metadata.name)
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{len(waiting)} nodes not Ready/untainted after {timeout:.0f}s: {sorted(waiting)[:5]}"
                )
            time.sleep(2)

    # -- the run ------------------------------------------------------------------------------------------------------
    def run(
        self, cases: list[Case], timeout: float = 300, settle: float = 5, interval: float = 2, *, clear: bool = True
    ) -> dict[str, Verdict]:
        """Create every case at once and wait until each pod is decided. ``clear=False`` keeps the pods and claims
        of an earlier run in the namespace (a later step of pods on the same nodes: what they hold stays held)."""
        t0 = time.monotonic()
        self.wait_nodes({c.node for c in cases})
        self.timings = {"nodes": time.monotonic() - t0}
        self._ensure_namespace(clear)
        self.timings["clear"] = time.monotonic() - t0
        verdicts: dict[str, Verdict] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            for case, refused in zip(cases, pool.map(self._create, cases), strict=True):
                if refused:
                    verdicts[case.name] = Verdict(False, reason="Invalid", message=refused, rejected=refused)
        pending = {c.name for c in cases} - set(verdicts)
        self.timings["create"] = time.monotonic() - t0
        deadline = time.monotonic() + timeout
        rereads = 0
        while True:
            pods, claims = self._pods(), self._claims()
            for name in list(pending):
                v = _decided(pods.get(name, {}), claims.get(name))
                if v is not None:
                    verdicts[name] = v
                    pending.discard(name)
            if not pending:
                # Re-read once: an unschedulable verdict must not turn into an allocation.
                self.timings.setdefault("decided", time.monotonic() - t0)
                rereads += 1
                time.sleep(settle)
                pods, claims = self._pods(), self._claims()
                for name, v in list(verdicts.items()):
                    if v.rejected:
                        continue
                    again = _decided(pods.get(name, {}), claims.get(name))
                    if again is None or again.allocated != v.allocated:
                        pending.add(name)
                        verdicts.pop(name)
                if not pending:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the scheduler did not decide {len(pending)} of {len(cases)} pods in {timeout:.0f}s: "
                    + ", ".join(sorted(pending)[:20])
                )
            time.sleep(interval)
        self.timings["settled"] = time.monotonic() - t0
        self.timings["rereads"] = rereads
        events = self._events()
        for name, v in verdicts.items():
            if not v.allocated and name in events and not v.rejected:
                v.message = events[name]
        return verdicts
