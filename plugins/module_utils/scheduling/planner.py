# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Placing replicas (:class:`_Placer`): retain what records say (drain, scale down, keep unreplaced), charge the
ledgers, pack pods on a pool's nodes, fill up to the desired count, warm clusters first; the replica records.

Part of placement; ``placement.py`` is the façade other code imports (``plan()``, ``place()``).
"""

from __future__ import annotations

import heapq
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils import pd_instances
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.allocator import (
    NodeDevice,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.state import PoolLedger
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    PlacementCluster,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import (
    ReplicaRecord,
    copy_request,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.scheduling.common import (
    CODE_INSUFFICIENT_CAPACITY,
    CODE_NO_MATCHING_POOL,
    CODE_NO_POOLS,
    CODE_NOT_READY,
    CODE_TAINTED,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.scheduling.matching import (
    _is_drain_taint,
    _Landing,
    _ledger_members,
    _Ledgers,
    _Matcher,
    _MemberLanding,
    _minor,
    _Option,
    _Placed,
    _taint_text,
    _untolerated,
)


class _Placer(_Matcher):
    """Placement on top of matching: retain recorded replicas, drain, scale down, charge the ledgers, fill up to the
    desired count, and each placed replica as a record."""

    def retained_engines(self, r: ReplicaRecord, cluster: PlacementCluster) -> list[_Landing] | str:
        want = [e.name for e in self.engines]
        have = [e.name for e in r.engines]
        if sorted(want) != sorted(have):
            return f"its engines ({', '.join(have) or 'none'}) no longer match the deployment's ({', '.join(want)})"
        observed = {e.name: e for e in r.engines}
        pools = {p.name: p for p in cluster.pools}
        version = _minor(cluster.kubernetes_version)
        out: list[_Landing] = []
        for ei, engine in enumerate(self.engines):
            got = observed[engine.name]
            roles = [m.role for m in got.members]
            if roles != [m.role for m in engine.members]:
                return f"engine {engine.name}: its members ({', '.join(roles)}) no longer match the deployment's"
            pool_names = {m.pool for m in got.members}
            if len(pool_names) != 1:
                return f"engine {engine.name}: its members are split across pools {', '.join(sorted(pool_names))}"
            pool_name = pool_names.pop()
            pool = pools.get(pool_name)
            if pool is None:
                return f"pool {pool_name} no longer exists on cluster {cluster.name}"
            matches, why = self.engine_on_class(pool.class_name, ei, version)
            if why is not None:
                return f"pool {pool_name} no longer satisfies it: {why}"
            # What each member holds: as recorded while that still makes its claim ("charged as it was placed", so a
            # shape change never evicts it); a member recorded by node count alone is allocated devices again.
            members: list[_MemberLanding] = []
            for mi, (member, mm, rm) in enumerate(zip(engine.members, matches, got.members, strict=True)):
                if not mm.claims or mm.whole:
                    held = rm.nodes if not rm.allocations else (member.pods * engine.copies if mm.claims else 0)
                    members.append(_MemberLanding(whole=held))
                    continue
                pods = self._recorded_pods(
                    pool.class_name, ei, mi, version, rm.allocations, member.pods * engine.copies
                )
                members.append(_MemberLanding(pods=pods) if pods is not None else _MemberLanding(stale=True))
            out.append(_Landing(pool_name, _Option(matches, self.cost(ei, matches)), members))
        return out

    def drop(self, r: ReplicaRecord, reason: str) -> None:
        self.dropped.append({"name": r.name, "cluster": r.cluster, "index": r.index, "reason": reason})

    def retain(self, ours: list[ReplicaRecord]) -> list[_Placed]:
        tolerations = self.dep.tolerations
        kept: list[_Placed] = []
        seen: set[tuple[str, int]] = set()
        for r in ours:
            cluster = self.by_name.get(r.cluster)
            if cluster is None:
                self.drop(r, f"cluster {r.cluster} is no longer a candidate")
                continue
            evicting = _untolerated(cluster, tolerations, ("NoExecute",))
            if evicting:
                if (r.cluster, r.index) not in seen and all(_is_drain_taint(t) for t in evicting):
                    engines = self.retained_engines(r, cluster)
                    if not isinstance(engines, str):
                        seen.add((r.cluster, r.index))
                        self.drained.append((r, engines))
                self.drop(r, f"taint {', '.join(map(_taint_text, evicting))} is not tolerated (evicted)")
                continue
            if (r.cluster, r.index) in seen:
                self.drop(r, f"duplicate of replica ({r.cluster}, {r.index})")
                continue
            engines = self.retained_engines(r, cluster)
            if isinstance(engines, str):
                self.drop(r, engines)
                continue
            seen.add((r.cluster, r.index))
            kept.append(_Placed(r.cluster, r.index, engines, observed=r))
        return kept

    def keep_unreplaced(self, placed: int, desired: int) -> list[_Placed]:
        """Safe drain: the drained replicas that no other cluster could take a replacement for stay where they are
        (``kubectl drain`` respects a PodDisruptionBudget the same way). They count against the drained cluster's
        pools again (nothing new was placed there: the drain taint keeps new replicas off it)."""
        target = min(desired, placed + len(self.drained))
        stay = self.drained[: max(0, target - placed)]
        out = []
        for r, engines in stay:
            self.dropped = [d for d in self.dropped if (d["cluster"], d["index"]) != (r.cluster, r.index)]
            self.hold(r.cluster, engines)
            self.warnings.append(
                f"replica ({r.cluster}, {r.index}) stays on drained cluster {r.cluster}: no other cluster can take its "
                "replacement (drain with force to remove it anyway)"
            )
            out.append(_Placed(r.cluster, r.index, engines, observed=r))
        return out

    def scale_down(self, kept: list[_Placed], desired: int) -> list[_Placed]:
        if len(kept) <= desired:
            return kept
        per_cluster: dict[str, list[_Placed]] = {}
        for p in kept:
            per_cluster.setdefault(p.cluster, []).append(p)
        for items in per_cluster.values():
            items.sort(key=lambda p: p.index)
        excess = len(kept) - desired
        victims: set[int] = set()
        for _step in range(excess):
            name = max((n for n in per_cluster if per_cluster[n]), key=lambda n: (len(per_cluster[n]), n))
            victim = per_cluster[name].pop()
            victims.add(id(victim))
            if victim.observed is not None:
                self.drop(victim.observed, f"scaled down to {desired} replica(s)")
        return [p for p in kept if id(p) not in victims]

    def build_ledger(self, kept: list[_Placed]) -> None:
        """The allocated state of every candidate pool: what other deployments' replicas hold (their recorded devices,
        or whole nodes), what was observed held by other workloads, and this deployment's kept replicas."""
        # Pools are given their ledger when first needed (most of a large fleet's pools are never asked about).
        self._pools = {(c.name, p.name): (c, p) for c in self.clusters for p in c.pools}
        self.ledger = ledger = _Ledgers(self._new_ledger)
        versions = {c.name: _minor(c.kubernetes_version) for c in self.clusters}
        pools = self._pools
        for r in self.replicas:
            if not isinstance(r, dict) and r.deployment == self.dep.name:
                continue  # ours: the kept ones are charged below, as they are kept now
            for cluster, pool, nodes, pods in _ledger_members(r):
                if (cluster, pool) not in pools:
                    continue
                led = ledger[(cluster, pool)]
                if not pods:
                    if nodes:
                        led.take_whole(nodes, force=True)
                    continue
                class_name = self._pool_class(cluster, pool)
                version = versions[cluster]
                index = self.device_index(class_name)
                for node, names, capacity in pods:
                    consumed = self._consumed(class_name, version, names, capacity)
                    devices = [index[n] for n in names if n in index and index[n] not in consumed]
                    if devices or consumed:
                        led.charge(node, devices, consumed)
                    else:  # devices the class no longer publishes: hold a node, as the record's pod does
                        led.take_whole(1, force=True)
        stale: list[tuple[_Placed, int]] = []
        for placed in kept:
            self.hold(placed.cluster, placed.engines)
            stale.extend(
                (placed, ei) for ei, landing in enumerate(placed.engines) if any(m.stale for m in landing.members)
            )
        # Members whose recorded devices no longer make their claim (or recorded by node count only, before
        # device-level placement) are allocated again, after everything recorded: placed where they fit, or beyond
        # the pool's nodes (an overcommit shows) -- a kept replica is never evicted for it.
        for placed, ei in stale:
            landing = placed.engines[ei]
            led = ledger[(placed.cluster, landing.pool)]
            version = _minor(self.by_name[placed.cluster].kubernetes_version)
            class_name = self._pool_class(placed.cluster, landing.pool)
            engine = self.engines[ei]
            for mi, (member, ml) in enumerate(zip(engine.members, landing.members, strict=True)):
                if not ml.stale:
                    continue
                ml.stale = False
                for _pod in range(member.pods * engine.copies):
                    got = led.fit(self.fitter(class_name, ei, mi, version), force=True)
                    if got is not None:
                        ml.pods.append(got)

    def hold(self, cluster: str, engines: list[_Landing]) -> None:
        """Charge what a kept replica's engines hold; recorded devices another replica holds already move to another
        node (:meth:`PoolLedger.charge`), and the landing says where."""
        for landing in engines:
            led = self.ledger[(cluster, landing.pool)]
            for ml in landing.members:
                if ml.whole:
                    led.take_whole(ml.whole, force=True)
                ml.pods = [
                    (led.charge(node, [d for d in devices if d not in consumed], consumed), devices, consumed)
                    for node, devices, consumed in ml.pods
                ]

    def pack(
        self, led: PoolLedger, class_name: str, ei: int, option: _Option, version: str | None
    ) -> list[_MemberLanding] | None:
        """Allocate one engine's pods on a pool's ledger (changed in place), in the order kube-scheduler would meet them
        (copy by copy, member by member): whole-node members take unused nodes, the others first fit. None: no room."""
        engine = self.engines[ei]
        out = [_MemberLanding() for _m in engine.members]
        for _copy in range(engine.copies):
            for mi, (member, mm) in enumerate(zip(engine.members, option.members, strict=True)):
                if not mm.claims:
                    continue
                if mm.whole:
                    if not led.take_whole(member.pods):
                        return None
                    out[mi].whole += member.pods
                    continue
                for _pod in range(member.pods):
                    got = led.fit(self.fitter(class_name, ei, mi, version))
                    if got is None:
                        return None
                    out[mi].pods.append(got)
        return out

    def try_place(
        self, cluster: PlacementCluster, only_pool: str | None = None
    ) -> tuple[list[_Landing] | None, str, dict[str, str], str]:
        """Fit one replica on ``cluster`` against the ledger: (placement, or None with code, per-pool reasons, reason).
        Every engine of the replica lands on this cluster or none does (a prefill/decode instance is all-or-nothing);
        ``colocate: fabric`` puts them all in one pool (``pd_instances.place_colocated``; ``only_pool``)."""
        if only_pool is None and self.dep.colocate == "fabric":
            return pd_instances.place_colocated(self, cluster)
        table = self.options(cluster)
        version = _minor(cluster.kubernetes_version)
        trial: dict[str, PoolLedger] = {}
        placed: list[_Landing] = []
        for ei, engine in enumerate(self.engines):
            reasons: dict[str, str] = {}
            chosen = None
            capacity = False
            need = 0
            for pool, option in zip(cluster.pools, table[ei], strict=True):
                if only_pool is not None and pool.name != only_pool:
                    continue
                if isinstance(option, str):
                    reasons[pool.name] = option
                    continue
                led = trial.get(pool.name) or self.ledger[(cluster.name, pool.name)]
                if option.whole:
                    # The fast path: whole nodes, counted.
                    free = led.free()
                    if free < option.cost:
                        capacity = True
                        need = need or option.cost
                        reasons[pool.name] = (
                            f"engine {engine.name} needs {option.cost} node(s), {max(free, 0)} of {pool.nodes} free"
                        )
                        continue
                    after = led.copy()
                    members = self.pack(after, pool.class_name, ei, option, version)
                else:
                    after = led.copy()
                    members = self.pack(after, pool.class_name, ei, option, version)
                    if members is None:
                        beside = [(m, mm) for m, mm in zip(engine.members, option.members, strict=True) if not mm.alone]
                        if beside and not led.nodes:
                            # Nothing holds a device on any node: the claim stops at its CEL error on every one.
                            member, mm = beside[0]
                            reasons[pool.name] = f"engine {engine.name} member {member.role} {mm.why}"
                            continue
                        capacity = True
                        names = [d.name for d in self.devices(pool.class_name)]
                        reasons[pool.name] = (
                            f"engine {engine.name}: no node has the devices its {option.cost} pod(s) claim free "
                            f"({led.describe(names=names)})"
                        ) + "".join(
                            f"; member {m.role} fits only beside claims that hold {mm.beside_text()} ({mm.why})"
                            for m, mm in beside
                        )
                        continue
                if members is None:  # pragma: no cover - whole nodes were counted free above
                    continue
                trial[pool.name] = after
                chosen = _Landing(pool.name, option, members)
                break
            if chosen is None:
                if not cluster.pools:
                    return None, CODE_NO_POOLS, {}, "has no node pools"
                if capacity:
                    room = f"{need} free node(s)" if need else "room for it"
                    return (
                        None,
                        CODE_INSUFFICIENT_CAPACITY,
                        reasons,
                        f"insufficient capacity: no pool that matches engine {engine.name} has {room}",
                    )
                return None, CODE_NO_MATCHING_POOL, reasons, f"no pool can host engine {engine.name}"
            placed.append(chosen)
        return placed, "", {}, ""

    def commit(self, cluster: str, engines: list[_Landing]) -> None:
        self.hold(cluster, engines)

    def eligibility(self, cluster: PlacementCluster) -> tuple[str, str] | None:
        """Why ``cluster`` takes no new replica regardless of capacity, or None."""
        problems = []
        code = ""
        if not cluster.ready:
            problems.append("not ready: takes no new replicas")
            code = CODE_NOT_READY
        tainted = _untolerated(cluster, self.dep.tolerations, ("NoSchedule", "NoExecute"))
        if tainted:
            problems.append(f"taint {', '.join(map(_taint_text, tainted))} is not tolerated")
            code = code or CODE_TAINTED
        return (code, "; ".join(problems)) if problems else None

    def fill(self, kept: list[_Placed], desired: int) -> list[_Placed]:
        load: dict[str, int] = {}
        used: dict[str, set[int]] = {}
        for p in kept:
            load[p.cluster] = load.get(p.cluster, 0) + 1
            used.setdefault(p.cluster, set()).add(p.index)
        placed: list[_Placed] = []
        shortfall = desired - len(kept)
        if shortfall <= 0:
            return placed
        # Spread first; among equally loaded clusters a warm one (its caches hydrated) first, then by name.
        heap = [
            (load.get(c.name, 0), c.name not in self.warm, c.name) for c in self.clusters if self.eligibility(c) is None
        ]
        heapq.heapify(heap)
        while shortfall > 0 and heap:
            count, cold, name = heapq.heappop(heap)
            cluster = self.by_name[name]
            engines = self.try_place(cluster)[0]
            if engines is None:
                continue  # the ledger only fills up during fill: this cluster cannot take any more
            taken = used.setdefault(name, set())
            index = 0
            while index in taken:
                index += 1
            taken.add(index)
            self.commit(name, engines)
            placed.append(_Placed(name, index, engines))
            shortfall -= 1
            heapq.heappush(heap, (count + 1, cold, name))
        return placed

    # -- output ------------------------------------------------------------------------------------------------------

    def replica_dict(self, p: _Placed) -> dict[str, Any]:
        """The placed replica in the record's dict shape (``ReplicaRecord.to_dict``), built directly: every value
        comes from validated models, and the record itself is only built when a caller asks for it."""
        engines = []
        for engine, landing in zip(self.engines, p.engines, strict=True):
            pool = landing.pool
            names: list[NodeDevice] | None = None
            members = []
            for member, mm, ml in zip(engine.members, landing.option.members, landing.members, strict=True):
                out: dict[str, Any] = {"role": member.role, "pool": pool}
                if ml.pods:
                    if names is None:
                        names = self.devices(self._pool_class(p.cluster, pool))
                    out["nodes"] = len({node for node, _devices, _consumed in ml.pods})
                    out["allocations"] = [
                        {
                            "node": node,
                            "devices": [names[i].name for i in devices],
                            **(
                                {
                                    "capacity": {
                                        names[d].name: {k: str(v) for k, v in caps.items()}
                                        for d, caps in consumed.items()
                                    }
                                }
                                if consumed
                                else {}
                            ),
                        }
                        for node, devices, consumed in ml.pods
                    ]
                else:
                    out["nodes"] = member.pods * engine.copies if mm.claims else 0
                out["device_requests"] = [copy_request(r) for r in mm.device_requests]
                members.append(out)
                if mm.constraints:
                    members[-1]["constraints"] = [dict(c, requests=list(c["requests"])) for c in mm.constraints]
            engines.append({"name": engine.name, "copies": engine.copies, "members": members})
        return {
            "name": p.name,
            "deployment": self.dep.name,
            "namespace": self.dep.namespace,
            "cluster": p.cluster,
            "index": p.index,
            "engines": engines,
        }

    def overcommitted(self, ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Pools holding one of ``ours`` whose ledger uses more nodes than the pool has."""
        touched = {(mine["cluster"], m["pool"]) for mine in ours for e in mine["engines"] for m in e["members"]}
        out = []
        for cluster in sorted(self.clusters, key=lambda c: c.name):
            for pool in cluster.pools:
                key = (cluster.name, pool.name)
                led = self.ledger.get(key)
                if key in touched and led is not None and led.used > pool.nodes:
                    out.append({"cluster": cluster.name, "pool": pool.name, "nodes": pool.nodes, "used": led.used})
        return out
