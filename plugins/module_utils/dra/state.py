# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What is allocated on the nodes of one pool: placement's ``AllocatedState`` (design.md §12).

Upstream's structured allocator allocates a claim on a node against the devices other claims already hold there
(``schedulerapi.AllocatedState``: allocated devices, consumed counters, consumed capacity). Placement keeps the same per
pool, for the nodes it has put claims on:

* ``whole``: nodes held whole and anonymously: a member that takes every device of its node (the fast path), one of a
  deployment with ``placement.exclusive_nodes``, or a record that says no more than "N nodes" (annotations written
  before device-level placement);
* ``nodes``: nodes by index, each with the devices allocated there (indexes into the class's node devices,
  :func:`allocator.node_devices`). A replica record names the index of each of its pods' nodes. Nodes observed with
  devices held by claims of other workloads (``capacity: observed``) take the top indexes of the pool (the last
  observed such node ``size - 1``, ...), so that a pod placed beside such a claim is found there again next run; new
  nodes are taken from index 0 up.

A node index is placement's bookkeeping, not a Kubernetes Node: kube-scheduler may put a pod on any node of the pool,
and what the ledger promises is that the pool holds every member, as the structured allocator packs them.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable

#: ``fit(taken)``: the devices a claim is allocated on a node whose devices ``taken`` are in use, or None.
Fit = Callable[[frozenset[int]], "tuple[int, ...] | None"]


class PoolLedger:
    """The allocated state of one pool of ``size`` nodes."""

    __slots__ = ("size", "whole", "nodes", "order", "devices", "foreign")

    def __init__(self, size: int, devices: int, held: Iterable[frozenset[int]] = ()) -> None:
        self.size = size
        #: Claimable devices a node of the pool has (a node holding that many is full).
        self.devices = devices
        self.whole = 0
        self.nodes: dict[int, frozenset[int]] = {}
        for k, taken in enumerate(held):
            self.nodes[size - 1 - k] = taken
        #: Nodes where other workloads hold devices (observed).
        self.foreign = frozenset(self.nodes)
        self.order = sorted(self.nodes)  # the keys of ``nodes``, sorted

    def copy(self) -> PoolLedger:
        out = PoolLedger.__new__(PoolLedger)
        out.size, out.devices, out.whole, out.foreign = self.size, self.devices, self.whole, self.foreign
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
        """The lowest placement index not in use."""
        i = 0
        for k in self.order:
            if k != i:
                break
            i += 1
        return i

    def _put(self, node: int, devices: frozenset[int]) -> None:
        have = self.nodes.get(node)
        if have is None:
            self.nodes[node] = devices
            insort(self.order, node)
        else:
            self.nodes[node] = have | devices

    def charge(self, node: int, devices: Iterable[int]) -> int:
        """Charge devices a record says a pod holds on ``node``; returns the node they are charged on. Devices another
        record already holds there (state read from two stale runs) are charged on the first other node of the pool
        where they are free, else on a new one: the pool counts one node more, so an overcommit shows."""
        want = frozenset(devices)
        have = self.nodes.get(node)
        if have is None or not have & want:
            self._put(node, want)
            return node
        for k in self.order:
            if not self.nodes[k] & want:
                self._put(k, want)
                return k
        k = self._fresh()
        self._put(k, want)
        return k

    def fit(self, fit: Fit, *, force: bool = False) -> tuple[int, tuple[int, ...]] | None:
        """Allocate one claim, first fit: the nodes in use in index order, then an unused node. ``fit(taken)`` allocates the claim on a node. With ``force``, a claim that fits nowhere is put on a new
        node even when the pool has none left (a retained replica: the pool shows as overcommitted). Returns ``(node,
        devices)`` or None."""
        for k in self.order:
            taken = self.nodes[k]
            if len(taken) >= self.devices:
                continue
            got = fit(taken)
            if got is not None:
                self.nodes[k] = taken | frozenset(got)
                return k, got
        if self.free() <= 0 and not force:
            return None
        got = fit(frozenset())
        if got is None:
            return None
        k = self._fresh()
        self._put(k, frozenset(got))
        return k, got

    def take_whole(self, n: int = 1, *, force: bool = False) -> bool:
        if not force and self.free() < n:
            return False
        self.whole += n
        return True

    def describe(self, limit: int = 4) -> str:
        """``2 node(s), 0 unused; devices free: node 0 0 of 8, node 1 2 of 8; 1 held whole``."""
        parts = [f"{self.size} node(s), {max(self.free(), 0)} unused"]
        if self.nodes:
            shown = [
                f"node {k}{' (other workloads hold some)' if k in self.foreign else ''} "
                f"{max(self.devices - len(self.nodes[k]), 0)} of {self.devices}"
                for k in self.order[:limit]
            ]
            more = len(self.order) - limit
            parts.append("devices free: " + ", ".join(shown) + (f" and {more} more node(s)" if more > 0 else ""))
        if self.whole:
            parts.append(f"{self.whole} held whole")
        return "; ".join(parts)
