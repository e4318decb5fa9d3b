"""plugins/module_utils/dra/state.py: what is allocated on the nodes of one pool (design.md §12)."""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils.dra.state import EMPTY, NodeUse, PoolLedger
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity


def q(text: str):
    return parse_quantity(text)


def one_of_eight(use: NodeUse):
    """A claim of one device of eight: the first free one."""
    free = [d for d in range(8) if d not in use.taken]
    return ((free[0],), {}) if free else None


def test_first_fit_packs_nodes_in_use_before_an_unused_one():
    led = PoolLedger(2, 8)
    got = [led.fit(one_of_eight) for _n in range(17)]
    assert [g[:2] for g in got[:9]] == [(0, (d,)) for d in range(8)] + [(1, (0,))]
    assert got[16] is None  # 16 devices, 17th claim
    assert led.used == 2 and led.free() == 0


def test_whole_nodes_and_partial_ones_share_the_count():
    led = PoolLedger(3, 8)
    assert led.take_whole(2)
    led.fit(one_of_eight)
    assert led.used == 3 and not led.take_whole(1)
    assert led.take_whole(1, force=True) and led.free() == -1  # a retained replica beyond the pool: overcommitted
    assert led.describe() == "3 node(s), 0 unused; devices free: node 0 7 of 8; 3 held whole"


def test_a_device_held_twice_is_charged_on_another_node():
    led = PoolLedger(1, 8)
    assert led.charge(0, [0]) == 0
    assert led.charge(0, [1]) == 0  # beside it
    assert led.charge(0, [0]) == 1  # gpu-0 of node 0 is held: a node more (the pool has one: overcommitted)
    assert led.used == 2


def test_shared_capacity_adds_up_and_clashes_over_the_limit():
    limits = {0: {"memory": q("80Gi")}}
    led = PoolLedger(1, 0, limits=limits)
    assert led.charge(0, [], {0: {"memory": q("50Gi")}}) == 0
    assert led.charge(0, [], {0: {"memory": q("30Gi")}}) == 0
    assert led.nodes[0].consumed == {0: {"memory": q("80Gi")}}
    assert led.charge(0, [], {0: {"memory": q("10Gi")}}) == 1  # over 80Gi on node 0
    assert EMPTY.plus([3], {0: {"memory": q("1Gi")}}).devices == frozenset({0, 3})


def test_observed_nodes_take_the_top_indexes():
    led = PoolLedger(4, 8, held=[NodeUse(frozenset({1}))])
    assert led.foreign == frozenset({3}) and led.order == [3]
    assert led.fit(one_of_eight)[:2] == (3, (0,))  # beside the other workload's claim, on the node in use
    assert "node 3 (other workloads hold some) 6 of 8" in led.describe()


def test_observed_device_taints_stay_with_their_node_and_are_named():
    from ansible_collections.gpufleet.serving.plugins.module_utils.dra.api import DeviceTaint

    xid = DeviceTaint(key="gpu.nvidia.com/xid", value="79", effect="NoSchedule")
    tainted = NodeUse(taints=((0, (xid,)),))
    assert tainted != EMPTY and tainted.tainted == {0: (xid,)}
    # Allocating beside the taint keeps it (the allocator sees it on every later claim of the node).
    assert tainted.plus([1]).taints == tainted.taints and hash(tainted.plus([1])) == hash(tainted.plus([1]))
    led = PoolLedger(2, 8, held=[NodeUse(frozenset({5})), tainted])
    assert led.order == [0, 1] and led.held == frozenset({1})
    names = [f"gpu-{d}" for d in range(8)]
    assert led.describe(names=names) == (
        "2 node(s), 0 unused; devices free: node 0 8 of 8 (gpu-0 tainted gpu.nvidia.com/xid=79:NoSchedule), "
        "node 1 (other workloads hold some) 7 of 8"
    )
