# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The post-install check (``check_cluster()``): the DeviceClasses exist, every GPU pool's nodes publish ResourceSlices
for each DRA driver of their class, and GKE's driver installers have installed the driver (``driver_problems()``).

Part of the serving stack; ``serving_stack.py`` is the façade other code imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    NODE_POOL_LABEL,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

# --------------------------------------------------------------------------------------------------------------------
# The post-install check
# --------------------------------------------------------------------------------------------------------------------


def driver_problems(plan: Mapping[str, Any], daemonsets: Any, pool_nodes: Mapping[str, list[str]]) -> list[str]:
    """The GKE GPU driver installers of the plan that have not installed the driver yet: each must exist, have
    rolled out its current spec, run on every node of its pools and be ready there (its init container, the
    installer, succeeded)."""
    found = {}
    for ds in daemonsets or []:
        if isinstance(ds, Mapping):
            meta = ds.get("metadata") or {}
            found[(str(meta.get("namespace")), str(meta.get("name")))] = ds
    problems = []
    for inst in plan.get("driver_installers") or []:
        what = f"GPU driver installer {inst['namespace']}/{inst['name']}"
        ds = found.get((inst["namespace"], inst["name"]))
        if ds is None:
            problems.append(f"{what} does not exist")
            continue
        status = ds.get("status") or {}
        generation = (ds.get("metadata") or {}).get("generation") or 0
        nodes = sum(len(pool_nodes.get(p, [])) for p in inst.get("pools") or [])
        desired = int(status.get("desiredNumberScheduled") or 0)
        ready = int(status.get("numberReady") or 0)
        updated = int(status.get("updatedNumberScheduled") or 0)
        pools = ", ".join(inst.get("pools") or [])
        if int(status.get("observedGeneration") or 0) < int(generation):
            problems.append(f"{what}: its current spec is not rolled out yet")
        elif desired < nodes:
            problems.append(f"{what} runs on {desired} of the {nodes} node(s) of pool(s) {pools}")
        elif ready < desired or updated < desired:
            problems.append(
                f"{what}: the NVIDIA driver is installed on {min(ready, updated)} of {desired} node(s) of pool(s) "
                f"{pools}"
            )
    return problems


def check_cluster(plan: Any, device_classes: Any, slices: Any, nodes: Any, daemonsets: Any = None) -> dict[str, Any]:
    """The serving stack works on this cluster when the GKE GPU driver installers it planned have installed the
    driver on every node of their pools (``daemonsets``: the DaemonSets read from the cluster; ``None`` skips this),
    every DeviceClass its pools name exists and every node of every GPU pool publishes, per DRA driver of the pool's
    class, ResourceSlices with at least the devices the class declares. Returns ``{cluster, ok, driver_ok,
    problems: [...], lines: [...]}``; each problem names what is missing."""
    if not isinstance(plan, Mapping):
        raise GpufleetError("plan: must be a serving_stack_plan result")
    cluster = plan.get("cluster", "?")
    have_classes = {(o.get("metadata") or {}).get("name") for o in device_classes or [] if isinstance(o, Mapping)}
    problems: list[str] = []
    lines: list[str] = []
    for dc in plan.get("device_classes") or []:
        if dc not in have_classes:
            problems.append(f"DeviceClass {dc} does not exist")
    published: dict[tuple[str, str], int] = {}
    for s in slices or []:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if node:
            key = (str(node), str(spec.get("driver")))
            published[key] = published.get(key, 0) + len(spec.get("devices") or [])
    pool_nodes: dict[str, list[str]] = {}
    for n in nodes or []:
        meta = n.get("metadata") or {}
        pool = (meta.get("labels") or {}).get(NODE_POOL_LABEL)
        if pool:
            pool_nodes.setdefault(str(pool), []).append(str(meta.get("name")))
    driver_issues = [] if daemonsets is None else driver_problems(plan, daemonsets, pool_nodes)
    problems.extend(driver_issues)
    if daemonsets is not None:
        for inst in plan.get("driver_installers") or []:
            what = f"GPU driver installer {inst['namespace']}/{inst['name']}"
            if not any(p.startswith(what) for p in driver_issues):
                lines.append(
                    f"GPU driver installer {inst['namespace']}/{inst['name']}: NVIDIA driver {inst['driver']} "
                    f"installed on pool(s) {', '.join(inst['pools'])}"
                )
    for pool in plan.get("pools") or []:
        drivers: dict[str, int] = pool.get("drivers") or {}
        if not drivers:
            lines.append(f"pool {pool['name']}: no DRA devices (nothing to publish)")
            continue
        members = sorted(pool_nodes.get(pool["name"], []))
        if not members:
            if pool.get("nodes", 0):
                problems.append(
                    f"pool {pool['name']}: no node labelled {NODE_POOL_LABEL}={pool['name']} ({pool['nodes']} declared)"
                )
            else:
                lines.append(f"pool {pool['name']}: scaled to zero nodes (nothing to publish)")
            continue
        missing = []
        for node in members:
            for driver, want in sorted(drivers.items()):
                got = published.get((node, driver), 0)
                if got == 0:
                    missing.append(f"{node} publishes no {driver} ResourceSlice")
                elif got < want:
                    missing.append(f"{node} publishes {got} of {want} {driver} devices")
        if missing:
            problems.append(f"pool {pool['name']}: " + "; ".join(missing))
        else:
            lines.append(
                f"pool {pool['name']}: {len(members)} node(s) publish "
                + ", ".join(f"{n} {d} device(s)" for d, n in sorted(drivers.items()))
            )
    ok = not problems
    head = f"{cluster}: {'OK' if ok else 'FAILED'}"
    return {
        "cluster": cluster,
        "ok": ok,
        "driver_ok": not driver_issues,
        "problems": problems,
        "lines": [head, *lines, *problems],
    }
