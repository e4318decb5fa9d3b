# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Why not: the unschedulable explanation, per cluster and pool ``candidates()`` (:class:`_Planner`, what
``placement.plan()`` runs), and ``selector_reads()``: what a false selector read on a device.

Part of placement; ``placement.py`` is the façade other code imports (``plan()``, ``place()``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils import dra_cel, pd_instances, semver
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity
from ansible_collections.gpufleet.serving.plugins.module_utils.scheduling.matching import (
    _MISS,
    _ledger_members,
    _minor,
    _Placed,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.scheduling.planner import (
    _Placer,
)

# --------------------------------------------------------------------------------------------------------------------
# Explain: what a selector read
# --------------------------------------------------------------------------------------------------------------------

_FALSE_SELECTOR = re.compile(r"selector `((?:[^`])+)` is false for device")
_COMPARISONS = {"_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">=", "_==_": "==", "_!=_": "!="}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _holder_text(held: Sequence[tuple[str, int | None]], shown: int = 4) -> str:
    """``qwen2-5-32b replica 1, llama replicas 0, 2``: who holds a pool, per deployment, in order."""
    by: dict[str, list[int | None]] = {}
    for name, index in held:
        by.setdefault(name, []).append(index)
    parts = []
    for name, indexes in by.items():
        known = [str(i) for i in indexes if i is not None]
        if not known:
            parts.append(f"{name} ({len(indexes)} replica(s))")
            continue
        listed = ", ".join(known[:shown]) + (f" and {len(known) - shown} more" if len(known) > shown else "")
        parts.append(f"{name} replica{'s' if len(known) > 1 else ''} {listed}")
    return ", ".join(parts)


def _reference(node: Any) -> tuple[str, str, str] | None:
    """``(table, domain, name)`` of a literal ``device.attributes["d"].name`` / ``device.capacity["d"]["name"]``."""
    if isinstance(node, dra_cel.Select) and not node.test_only:
        inner, name = node.operand, node.field
    elif isinstance(node, dra_cel.Index) and isinstance(node.index, dra_cel.Const) and node.index.kind == "string":
        inner, name = node.operand, node.index.value
    else:
        return None
    if not (isinstance(inner, dra_cel.Index) and isinstance(inner.index, dra_cel.Const)):
        return None
    table = inner.operand
    if (
        isinstance(table, dra_cel.Select)
        and table.field in ("attributes", "capacity")
        and isinstance(table.operand, dra_cel.Ident)
        and table.operand.name == "device"
        and isinstance(inner.index.value, str)
    ):
        return str(table.field), inner.index.value, str(name)
    return None


def _device_value(device: Mapping[str, Any], ref: tuple[str, str, str]) -> Any:
    """What a device publishes for a reference: a Quantity (capacity), an attribute's value, or None."""
    table, domain, name = ref
    entries = device.get(table) or {}
    entry = entries.get(f"{domain}/{name}")
    if entry is None and device.get("driver") == domain:
        entry = entries.get(name)
    if not isinstance(entry, Mapping):
        return None
    if table == "capacity":
        return parse_quantity(str(entry.get("value")))
    for kind in ("int", "bool", "string", "version"):
        if kind in entry:
            return semver.parse_semver(str(entry[kind])) if kind == "version" else entry[kind]
    return None


def _literal(node: Any) -> Any:
    """The value of a literal operand: a constant, ``quantity("80Gi")``, ``semver("1.2.3")``; else a sentinel."""
    if isinstance(node, dra_cel.Const):
        return node.value
    if (
        isinstance(node, dra_cel.Call)
        and node.target is None
        and node.fn in ("quantity", "semver")
        and len(node.args) == 1
        and isinstance(node.args[0], dra_cel.Const)
        and isinstance(node.args[0].value, str)
    ):
        text = node.args[0].value
        return parse_quantity(text) if node.fn == "quantity" else semver.parse_semver(text)
    return _MISS


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def _holds(left: Any, op: str, right: Any) -> bool | None:
    """``left op right`` for values of one kind, None when they do not compare."""
    if type(left) is not type(right) and not (
        isinstance(left, (int, float)) and isinstance(right, (int, float)) and not isinstance(left, bool)
    ):
        return None
    try:
        if op in ("==", "!="):
            return (left == right) == (op == "==")
        lt, gt = left < right, right < left
    except TypeError:
        return None
    return {"<": lt, "<=": not gt, ">": gt, ">=": not lt}[op]


def selector_reads(expression: str, device: Mapping[str, Any]) -> str:
    """What ``expression`` read on ``device`` (a ResourceSlice device: ``{driver, attributes, capacity}``), for explain:
    each comparison of a device attribute or capacity with a literal that is false, as the device's value and the
    failed bound (``memory 81559Mi < 80Gi``, ``productName "NVIDIA L4" != "NVIDIA H100"``); when none can be shown
    so, every attribute and capacity it names with the device's value (``architecture = "Ada"``; a name the device
    does not publish: ``memory: not published``). Empty when it names none."""
    try:
        tree = dra_cel.parse(expression)
    except (dra_cel.CelSyntaxError, ValueError):
        return ""
    failed: list[str] = []
    refs: dict[tuple[str, str, str], None] = {}
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, dra_cel.Node):
            continue
        ref = _reference(node)
        if ref is not None:
            refs[ref] = None
            continue
        if isinstance(node, dra_cel.Call) and node.fn in _COMPARISONS and len(node.args) == 2:
            op = _COMPARISONS[node.fn]
            left: dra_cel.Node = node.args[0]
            right: dra_cel.Node = node.args[1]
            call = left if isinstance(left, dra_cel.Call) else None
            if (
                call is not None
                and call.fn == "compareTo"
                and call.target is not None
                and len(call.args) == 1
                and isinstance(right, dra_cel.Const)
                and right.value == 0
            ):
                left, right = call.target, call.args[0]  # x.compareTo(q) >= 0  is  x >= q
            if _reference(left) is None and _reference(right) is not None:
                left, right, op = right, left, _FLIPPED[op]
            ref, bound = _reference(left), _literal(right)
            if ref is not None and bound is not _MISS:
                refs[ref] = None
                value = _device_value(device, ref)
                if value is None:
                    failed.append(f"{ref[2]}: not published")
                elif _holds(value, op, bound) is False:
                    failed.append(f"{ref[2]} {_shown(value)} {_NEGATED[op]} {_shown(bound)}")
                continue
        for slot in getattr(type(node), "__slots__", ()):
            value = getattr(node, slot, None)
            if isinstance(value, (list, tuple)):
                for item in value:
                    stack.extend(item if isinstance(item, tuple) else (item,))
            else:
                stack.append(value)
    if failed:
        return ", ".join(dict.fromkeys(reversed(failed)))
    shown = []
    for ref in refs:
        value = _device_value(device, ref)
        shown.append(f"{ref[2]}: not published" if value is None else f"{ref[2]} = {_shown(value)}")
    return ", ".join(shown)


class _Planner(_Placer):
    """The planner :func:`placement.plan` runs: placement, and why the rest did not place (``explain()``, per cluster
    and pool ``candidates()``)."""

    def explain(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for cluster in sorted(self.clusters, key=lambda c: c.name):
            ineligible = self.eligibility(cluster)
            if ineligible is not None:
                out[cluster.name] = {"code": ineligible[0], "reason": ineligible[1], "pools": {}}
                continue
            engines, code, pools, reason = self.try_place(cluster)
            if engines is None:
                out[cluster.name] = {"code": code, "reason": reason, "pools": pools}
        return out

    def candidates(self, placed: Sequence[_Placed]) -> dict[str, dict[str, Any]]:
        """Explain for a deployment, placed or not (``gpufleet_explain``): per cluster, and per pool of an eligible
        one, whether it is a candidate and why, after this placement (``placed``: this deployment's replicas)::

            {cluster: {"reason": None or why the cluster takes nothing, "pools": {pool: why}}}

        A pool whose devices do not match says which and, for a selector that is false, the values it read on the
        first device of the class it was false for (``memory 81559Mi < 80Gi``); a matching pool says whether it has
        room for another replica, and who holds it (``held by qwen2-5-32b replica 1``)."""
        holders = self._holders(placed)
        out: dict[str, dict[str, Any]] = {}
        for cluster in sorted(self.clusters, key=lambda c: c.name):
            ineligible = self.eligibility(cluster)
            if ineligible is not None:
                out[cluster.name] = {"reason": f"not a candidate: {ineligible[1]}", "pools": {}}
                continue
            if not cluster.pools:
                out[cluster.name] = {"reason": "not a candidate: has no node pools", "pools": {}}
                continue
            table = self.options(cluster)
            version = _minor(cluster.kubernetes_version)
            pools: dict[str, str] = {}
            for pi, pool in enumerate(cluster.pools):
                parts: list[str] = []
                held = holders.get((cluster.name, pool.name), [])
                for ei in range(len(self.engines)):
                    option = table[ei][pi]
                    label = pd_instances.engine_label(self.dep.engines[ei]) if len(self.engines) > 1 else ""
                    if isinstance(option, str):
                        parts.append(f"{label}not a candidate: {self._with_reads(option, pool.class_name, version)}")
                        continue
                    led = self.ledger[(cluster.name, pool.name)]
                    if option.whole:
                        free = led.free()
                        room = free >= option.cost
                        state = f"{max(free, 0)} of {pool.nodes} node(s) free, {option.cost} needed"
                    else:
                        room = self.pack(led.copy(), pool.class_name, ei, option, version) is not None
                        names = [d.name for d in self.devices(pool.class_name)]
                        state = led.describe(names=names)
                    verdict = "candidate, room for another replica" if room else "candidate, but full"
                    parts.append(f"{label}{verdict} ({state})")
                if held:
                    parts.append(f"held by {_holder_text(held)}")
                pools[pool.name] = "; ".join(parts)
            out[cluster.name] = {"reason": None, "pools": pools}
        return out

    def _holders(self, placed: Sequence[_Placed]) -> dict[tuple[str, str], list[tuple[str, int | None]]]:
        """Per ``(cluster, pool)``, the replicas that hold devices or nodes there: ``(deployment, index)``, other
        deployments' first, then this one's ``placed`` replicas."""
        out: dict[tuple[str, str], list[tuple[str, int | None]]] = {}
        for r in self.replicas:
            index: int | None
            if isinstance(r, dict):
                given = r.get("index")
                name, index = str(r["deployment"]), given if isinstance(given, int) else None
            elif r.deployment == self.dep.name:
                continue
            else:
                name, index = r.deployment, r.index
            for cluster, pool, nodes, pods in _ledger_members(r):
                if nodes or pods:
                    entry = out.setdefault((cluster, pool), [])
                    if (name, index) not in entry:
                        entry.append((name, index))
        for p in sorted(placed, key=lambda p: (p.cluster, p.index)):
            for landing in p.engines:
                entry = out.setdefault((p.cluster, landing.pool), [])
                if (self.dep.name, p.index) not in entry:
                    entry.append((self.dep.name, p.index))
        return out

    def _with_reads(self, why: str, class_name: str, version: str | None) -> str:
        """``why`` with, after each selector it says is false, what that selector read on the first device of the
        class it is false for (``memory 81559Mi < 80Gi``)."""
        check = self.check(version)
        reads = []
        for expr in dict.fromkeys(_FALSE_SELECTOR.findall(why)):
            for dev in self.devices(class_name):
                if check(expr, dev) == (False, None):
                    text = selector_reads(expr, dev.slice)
                    if text:
                        reads.append(f"{text} on {dev.name}")
                    break
        return f"{why} (read: {'; '.join(reads)})" if reads else why
