"""Fleet routing through a hub, end to end on the local fleet (issue 27, docs/routing.md "Drain and scale-down go
through routing"): a drain shows weight 0 for the drained cluster stored on the hub before the drained cluster's old
replica is deleted.

The hub is one of the fleet's own clusters; the renderer is ``llmd`` (a ConfigMap: the local fleet has no Gateway API
or AI Gateway CRDs). Run alone: ``pytest -p no:xdist tests/e2e/test_routing_hub.py`` (it deploys first, and restores
the drained cluster at the end).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any

from conftest import Fleet

OWNER = "app.kubernetes.io/managed-by=gpufleet.serving"
FLEET = "e2e"
MINE = f"{OWNER},gpufleet.io/fleet={FLEET}"
ROUTING = f"{OWNER},gpufleet.io/component=routing,gpufleet.io/fleet={FLEET}"
#: The routing artifact is split (docs/routing.md): the index names chat's ConfigMap, which holds its weights.
INDEX = f"gpufleet-routing-{FLEET}"
CHAT = f"{INDEX}.chat"


def chat_replicas(fleet: Fleet) -> dict[str, list[str]]:
    """cluster -> the chat replicas there (from the per-replica Services)."""
    out: dict[str, list[str]] = {}
    for host in fleet.names:
        for svc in fleet.list(host, "", "v1", "services", f"{MINE},gpufleet.io/deployment=chat"):
            labels = svc["metadata"]["labels"]
            if "gpufleet.io/replica" in labels:
                out.setdefault(host, []).append(labels["gpufleet.io/replica"])
    return out


def weights(cm: Any) -> dict[str, int]:
    """chat's weight per cluster in its routing ConfigMap (one part: six replicas are far from 128 KiB)."""
    doc = json.loads((cm.data or {}).get("routing.json") or "{}")
    if doc.get("layout") != "part" or doc.get("deployment") != "chat" or doc.get("parts") != 1:
        return {}
    return {c["cluster"]: c["weight"] for c in doc["model"]["clusters"]}


def test_a_drain_stores_weight_0_on_the_hub_before_the_old_replica_is_deleted(fleet: Fleet) -> None:
    hub = fleet.names[0]
    routing = [
        "-e", f"gpufleet_routing_hub={hub}",
        "-e", "gpufleet_fleet_routing=llmd",
        "-e", "gpufleet_routing_address=gw.local.test",
    ]  # fmt: skip
    fleet.playbook("deploy.yml", *routing)
    placed = chat_replicas(fleet)
    drained = sorted(c for c in placed if c != hub)[0]
    old = set(placed[drained])
    from kubernetes import client

    artifact = client.CoreV1Api(fleet.api(hub)).list_config_map_for_all_namespaces(label_selector=ROUTING).items
    (index,) = [c for c in artifact if c.metadata.name == INDEX]
    models = json.loads(index.data["routing.json"])["models"]
    assert [m["configmaps"] for m in models if m["deployment"] == "chat"] == [[CHAT]]
    (cm,) = [c for c in artifact if c.metadata.name == CHAT]
    assert weights(cm) == {c: len(r) for c, r in placed.items()}
    # a second run writes nothing to the hub (its objects are current)
    versions = {c.metadata.name: c.metadata.resource_version for c in artifact}
    fleet.playbook("deploy.yml", *routing)
    again = client.CoreV1Api(fleet.api(hub)).list_config_map_for_all_namespaces(label_selector=ROUTING).items
    assert {c.metadata.name: c.metadata.resource_version for c in again} == versions

    events: list[tuple[float, str, Any]] = []  # (monotonic time, what, detail)
    stop = threading.Event()

    def watch_hub() -> None:
        from kubernetes import watch

        api = client.CoreV1Api(fleet.api(hub))
        w = watch.Watch()
        with contextlib.suppress(Exception):
            for ev in w.stream(api.list_config_map_for_all_namespaces, label_selector=ROUTING, timeout_seconds=240):
                if ev["object"].metadata.name == CHAT:
                    events.append((time.monotonic(), "weights", weights(ev["object"])))
                if stop.is_set():
                    w.stop()

    def watch_drained() -> None:
        from kubernetes import watch

        api = client.AppsV1Api(fleet.api(drained))
        w = watch.Watch()
        with contextlib.suppress(Exception):
            for ev in w.stream(api.list_deployment_for_all_namespaces, label_selector=MINE, timeout_seconds=240):
                if ev["type"] == "DELETED":
                    events.append((time.monotonic(), "deleted", ev["object"].metadata.name))
                if stop.is_set():
                    w.stop()

    threads = [threading.Thread(target=f, daemon=True) for f in (watch_hub, watch_drained)]
    for t in threads:
        t.start()
    time.sleep(1)
    try:
        out = fleet.playbook("drain.yml", "-e", f"cluster={drained}", *routing).stdout
        time.sleep(1)
        stop.set()
        after = chat_replicas(fleet)
        assert drained not in after and sum(len(r) for r in after.values()) == sum(len(r) for r in placed.values())
        zero_at = [t for t, what, w in events if what == "weights" and w.get(drained) == 0]
        deleted_at = [t for t, what, name in events if what == "deleted" and any(name.startswith(o) for o in old)]
        assert zero_at, (events, out[-3000:])
        assert deleted_at, events
        assert min(zero_at) < min(deleted_at), "the old replica was deleted before the hub routed around it"
        # the new replicas entered the weights only once Ready: the final weights count every placed replica
        final = client.CoreV1Api(fleet.api(hub)).read_namespaced_config_map(CHAT, cm.metadata.namespace)
        assert weights(final) == {c: len(r) for c, r in after.items()}
        endpoints = [c for c in artifact if c.metadata.name == f"gpufleet-llmd-endpoints-{FLEET}.chat"]
        assert endpoints, [c.metadata.name for c in artifact]
    finally:
        stop.set()
        fleet.playbook("drain.yml", "-e", f"cluster={drained}", "-e", "drain_state=absent", *routing)
