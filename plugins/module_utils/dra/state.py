# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What is allocated on the nodes of one pool: placement's ``AllocatedState`` (design.md §12).

Upstream's structured allocator allocates a claim on a node against the devices other claims already hold there
(``schedulerapi.AllocatedState``: allocated devices, consumed counters, consumed capacity). Placement keeps the same per
pool, for the nodes it has put claims on:

* ``whole``: nodes held whole and anonymously: a member that takes every device of its node (the fast path), one of a
  deployment with ``placement.exclusive_nodes``, or a record that says no more than "N nodes" (annotations written
  before device-level placement);
* ``nodes``: nodes by index, each with what is allocated there (:class:`NodeUse`: devices held exclusively, as indexes
  into the class's node devices, :func:`allocator.node_devices`; capacity consumed on devices that allow multiple
  allocations; the counters those devices consume follow from them) and the taints observed on its devices beyond the
  class's. A replica record names the index of each of its pods' nodes. Nodes observed with devices held by claims of
  other workloads or tainted (``capacity: observed``) take the top indexes of the pool (the last observed such node
  ``size - 1``, ...), so that a pod placed beside such a claim is found there again next run; new nodes are taken
  from index 0 up.

A node index is placement's bookkeeping, not a Kubernetes Node: kube-scheduler may put a pod on any node of the pool,
and what the ledger promises is that the pool holds every member, as the structured allocator packs them.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.dra.api import DeviceTaint
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import Quantity, parse_quantity

Consumed = Mapping[int, Mapping[str, Quantity]]  # device -> capacity -> quantity


@dataclass(frozen=True)
class NodeUse:
    """What is allocated on one node: devices held by one claim each (``taken``), and the capacity claims consume on
    devices that allow multiple allocations (``shared``: ``((device, ((capacity, quantity), ...)), ...)``, sorted, so
    that equal states are equal and hash alike -- placement memoises allocations per node state). ``taints``: taints
    observed on the node's devices that the class does not declare (``((device, (taint, ...)), ...)``, sorted; a
    ResourceSlice's device taints, design.md §11): the allocator adds them to the device's own."""

    taken: frozenset[int] = frozenset()
    shared: tuple[tuple[int, tuple[tuple[str, str], ...]], ...] = ()
    taints: tuple[tuple[int, tuple[DeviceTaint, ...]], ...] = ()

    @property
    def consumed(self) -> dict[int, dict[str, Quantity]]:
        return {d: {k: parse_quantity(v) for k, v in caps} for d, caps in self.shared}

    @property
    def devices(self) -> frozenset[int]:
        """Every device something is allocated on (what consumes counters)."""
        return self.taken | {d for d, _caps in self.shared}

    @property
    def tainted(self) -> dict[int, tuple[DeviceTaint, ...]]:
        """Device -> the taints observed on it beyond the class's."""
        return dict(self.taints)

    def plus(self, taken: Iterable[int], consumed: Consumed | None = None) -> NodeUse:
        """This state with a claim's devices added: ``taken`` exclusive ones, ``consumed`` capacity on shared ones."""
        shared = self.shared
        if consumed:
            table = {d: dict(caps) for d, caps in self.shared}
            for d, caps in consumed.items():
                have = table.setdefault(d, {})
                for name, amount in caps.items():
                    have[name] = str(amount if name not in have else parse_quantity(have[name]).add(amount))
            shared = tuple((d, tuple(sorted(table[d].items()))) for d in sorted(table))
        return NodeUse(self.taken | frozenset(taken), shared, self.taints)

    def clashes(self, taken: Iterable[int], consumed: Consumed | None, limits: Mapping[int, Mapping[str, Any]]) -> bool:
        """Whether adding a claim's devices double-books one: an exclusive device held already, or more capacity
        than a shared device has (``limits``)."""
        if self.taken & frozenset(taken):
            return True
        if not consumed:
            return False
        now = self.plus((), consumed).consumed
        for d, caps in consumed.items():
            for name in caps:
                limit = limits.get(d, {}).get(name)
                if limit is not None and now[d][name].cmp(limit) > 0:
                    return True
        return False


EMPTY = NodeUse()

#: ``fit(use)``: the devices a claim is allocated on a node in state ``use`` and the capacity it consumes on shared
#: ones, or None.
Fit = Callable[[NodeUse], "tuple[tuple[int, ...], dict[int, dict[str, Quantity]]] | None"]


class PoolLedger:
    """The allocated state of one pool of ``size`` nodes. ``devices`` is how many devices a node has that one claim
    holds at a time (a node holding them all is full); ``limits`` the capacity of devices that allow multiple
    allocations."""

    __slots__ = ("devices", "foreign", "held", "limits", "nodes", "order", "size", "whole")

    def __init__(
        self,
        size: int,
        devices: int,
        held: Iterable[NodeUse] = (),
        limits: Mapping[int, Mapping[str, Any]] | None = None,
    ) -> None:
        self.size = size
        self.devices = devices
        self.limits = limits or {}
        self.whole = 0
        self.nodes: dict[int, NodeUse] = {}
        for k, use in enumerate(held):
            self.nodes[size - 1 - k] = use
        #: Nodes observed with devices other workloads hold, or tainted; ``held``: those of the first kind.
        self.foreign = frozenset(self.nodes)
        self.held = frozenset(k for k, use in self.nodes.items() if use.taken or use.shared)
        self.order = sorted(self.nodes)  # the keys of ``nodes``, sorted

    def copy(self) -> PoolLedger:
        out = PoolLedger.__new__(PoolLedger)
        out.size, out.devices, out.whole, out.foreign = self.size, self.devices, self.whole, self.foreign
        out.held = self.held
        out.limits = self.limits
        out.nodes = dict(self.nodes)
        out.order = list(self.order)
        return out

    # -- what is used ------------------------------------------------------------------------------------------------

    @property
    def used(self) -> int:
        """Nodes in use: held whole, or holding some devices."""
        return self.whole + len(self.nodes)

    def free(self) -> int:
        """Nodes nothing is allocated on (may be negative: an overcommitted pool)."""
        return self.size - self.used

    # -- charging ----------------------------------------------------------------------------------------------------

    def _fresh(self) -> int:
        """The lowest node index not in use."""
        i = 0
        for k in self.order:
            if k != i:
                break
            i += 1
        return i

    def _put(self, node: int, taken: Iterable[int], consumed: Consumed | None) -> None:
        have = self.nodes.get(node)
        if have is None:
            self.nodes[node] = EMPTY.plus(taken, consumed)
            insort(self.order, node)
        else:
            self.nodes[node] = have.plus(taken, consumed)

    def charge(self, node: int, taken: Iterable[int], consumed: Consumed | None = None) -> int:
        """Charge what a record says a pod holds on ``node``; returns the node it is charged on. What another record
        holds there already (state read from two stale runs) is charged on the first other node where it fits, else
        on a new one: the pool counts one node more, so an overcommit shows."""
        taken = frozenset(taken)
        have = self.nodes.get(node)
        if have is None or not have.clashes(taken, consumed, self.limits):
            self._put(node, taken, consumed)
            return node
        for k in self.order:
            if not self.nodes[k].clashes(taken, consumed, self.limits):
                self._put(k, taken, consumed)
                return k
        k = self._fresh()
        self._put(k, taken, consumed)
        return k

    def fit(
        self, fit: Fit, *, force: bool = False
    ) -> tuple[int, tuple[int, ...], dict[int, dict[str, Quantity]]] | None:
        """Allocate one claim, first fit: the nodes in use in index order, then an unused node. ``fit(use)`` allocates
        the claim on a node. With ``force``, a claim that fits nowhere is put on a new node even when the pool has
        none left (a retained replica: the pool shows as overcommitted). Returns ``(node, devices, consumed)`` or
        None."""
        for k in self.order:
            use = self.nodes[k]
            if not self.limits and len(use.taken) >= self.devices:
                continue  # full (a node with shared devices may always have capacity left)
            got = fit(use)
            if got is not None:
                devices, consumed = got
                self.nodes[k] = use.plus([d for d in devices if d not in consumed], consumed)
                return k, devices, consumed
        if self.free() <= 0 and not force:
            return None
        got = fit(EMPTY)
        if got is None:
            return None
        devices, consumed = got
        k = self._fresh()
        self._put(k, [d for d in devices if d not in consumed], consumed)
        return k, devices, consumed

    def take_whole(self, n: int = 1, *, force: bool = False) -> bool:
        if not force and self.free() < n:
            return False
        self.whole += n
        return True

    def describe(self, limit: int = 4, names: Sequence[str] | None = None) -> str:
        """``2 node(s), 0 unused; devices free: node 0 0 of 8, node 1 2 of 8; 1 held whole``; ``names`` are the node's
        device names, to name the devices observed tainted (``node 7 7 of 8 (gpu-0 tainted gpu.nvidia.com/xid=79:
        NoSchedule)``)."""
        parts = [f"{self.size} node(s), {max(self.free(), 0)} unused"]
        if self.nodes:
            shown = []
            for k in self.order[:limit]:
                use = self.nodes[k]
                text = f"node {k}{' (other workloads hold some)' if k in self.held else ''}"
                if self.devices:
                    text += f" {max(self.devices - len(use.taken), 0)} of {self.devices}"
                if use.shared:
                    text += f"{',' if self.devices else ''} {len(use.shared)} shared device(s) in use"
                if use.taints:
                    tainted = (
                        f"{names[d] if names else f'device {d}'} tainted {', '.join(t.text() for t in ts)}"
                        for d, ts in use.taints
                    )
                    text += f" ({', '.join(tainted)})"
                shown.append(text)
            more = len(self.order) - limit
            parts.append("devices free: " + ", ".join(shown) + (f" and {more} more node(s)" if more > 0 else ""))
        if self.whole:
            parts.append(f"{self.whole} held whole")
        return "; ".join(parts)
