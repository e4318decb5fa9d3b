"""Replica placement (design.md §4): retain / scale down / fill, matching, taints, explain, names, memoisation.

Cases follow the reference scheduler's rules (Modelplane's scheduling tests) where design.md agrees, plus our own:
exact request matching, request device classes, explain output, names, overcommit reporting and property tests.
"""

from __future__ import annotations

import copy
import hashlib
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import SelectorEngine, place, replica_name

# --------------------------------------------------------------------------------------------------------------------
# Fleet builders
# --------------------------------------------------------------------------------------------------------------------

MEM_16 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("16Gi")) >= 0'
MEM_40 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
MEM_70 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("70Gi")) >= 0'
MEM_LT_40 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) < 0'
IS_H100 = 'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")'
IB = 'device.attributes["fabric.gpufleet.io"].linkType == "InfiniBand"'
TCPX = 'device.attributes["fabric.gpufleet.io"].linkType == "TCPX"'


def gpu(name: str = "gpu", product: str = "NVIDIA L4", memory: str = "23034Mi", count: int = 1, **extra: Any) -> dict:
    return {
        "name": name,
        "claim": "DRA",
        "driver": "gpu.nvidia.com",
        "device_class_name": "gpu.nvidia.com",
        "count": count,
        "attributes": {"productName": {"string": product}, "cudaComputeCapability": {"version": "8.9.0"}},
        "capacity": {"memory": {"value": memory}},
        **extra,
    }


def fabric(link: str = "InfiniBand", count: int = 8) -> dict:
    return {
        "name": "ib",
        "claim": "Synthetic",
        "driver": "fabric.gpufleet.io",
        "count": count,
        "attributes": {"linkType": {"string": link}, "rateGbps": {"int": 400}},
    }


H100 = {"product": "NVIDIA H100 80GB HBM3", "memory": "81559Mi"}

CLASSES: dict[str, Any] = {
    "l4": {"devices": [gpu()]},
    "h100": {"devices": [gpu(**H100)]},
    "h100x8-ib": {"devices": [gpu(count=8, **H100), fabric()]},
    "h100x8-tcpx": {"devices": [gpu(count=8, **H100), fabric("TCPX")]},
    "h100x4": {"devices": [gpu(count=4, **H100)]},
    # A node with two kinds of GPU, one of each: the small one first.
    "mixed": {"devices": [gpu("small", memory="23034Mi"), gpu("big", **H100)]},
    # Only a synthetic device with GPU-like capacity (no DRA driver publishes it).
    "syn-gpu": {"devices": [{**gpu(**H100), "claim": "Synthetic", "device_class_name": None}]},
}
for _cls in CLASSES.values():
    for _dev in _cls["devices"]:
        if _dev.get("device_class_name") is None:
            _dev.pop("device_class_name", None)


def request(name: str = "gpu", count: int = 1, selectors: list[str] | None = None, **extra: Any) -> dict:
    return {"name": name, "count": count, "selectors": [{"cel": s} for s in (selectors or [MEM_16])], **extra}


def member(role: str = "Standalone", requests: list[dict] | None = None, workers: int | None = None) -> dict:
    out: dict[str, Any] = {"role": role, "template": {"spec": {"containers": [{"name": "engine", "image": "vllm"}]}}}
    if requests is not None:
        out["node_selector"] = {"devices": requests}
    if workers is not None:
        out["worker"] = {"nodes": workers}
    return out


def engine(
    name: str = "main", requests: list[dict] | None = None, *, copies: int = 1, pipeline: int = 1, members=None
) -> dict:
    """pipeline 1: one Standalone; pipeline N > 1: a Leader plus a Worker of N - 1 nodes, same requests."""
    reqs = requests if requests is not None else [request()]
    if members is None:
        if pipeline == 1:
            members = [member("Standalone", reqs)]
        else:
            members = [member("Leader", reqs), member("Worker", reqs, workers=pipeline - 1)]
    return {"name": name, "copies": copies, "members": members}


def deployment(
    name: str = "my-model",
    replicas: int = 1,
    requests: list[dict] | None = None,
    *,
    engines: list[dict] | None = None,
    tolerations: list[dict] | None = None,
    copies: int = 1,
    pipeline: int = 1,
) -> dict:
    return {
        "name": name,
        "namespace": "ml-team",
        "replicas": replicas,
        "tolerations": tolerations or [],
        "engines": engines or [engine(requests=requests, copies=copies, pipeline=pipeline)],
    }


def cluster(name: str, pools: list[tuple[str, str, int]] | None = None, *, taints=None, ready: bool = True) -> dict:
    pools = pools if pools is not None else [("default", "l4", 2)]
    return {
        "name": name,
        "pools": [{"name": p, "class": c, "nodes": n} for p, c, n in pools],
        "taints": taints or [],
        "ready": ready,
    }


def run(dep: dict, clusters: list[dict], replicas: list[dict] | None = None, **kwargs: Any) -> dict:
    return place(deployment=dep, clusters=clusters, classes=kwargs.pop("classes", CLASSES), replicas=replicas, **kwargs)


def ids(result: dict) -> list[tuple[str, int]]:
    return [(r["cluster"], r["index"]) for r in result["replicas"]]


def pools_of(result: dict) -> list[tuple[str, int, str]]:
    return [(r["cluster"], r["index"], r["engines"][0]["members"][0]["pool"]) for r in result["replicas"]]


def observed(dep: str, cluster_name: str, index: int = 0, pool: str = "default", *, pipeline: int = 1, copies: int = 1):
    """A replica as a previous run (or a read-back) would report it, at its own (possibly old) shape."""
    dr = [{"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 1, "selectors": [MEM_16]}]
    if pipeline == 1:
        members = [{"role": "Standalone", "pool": pool, "nodes": copies, "device_requests": dr}]
    else:
        members = [
            {"role": "Leader", "pool": pool, "nodes": copies, "device_requests": dr},
            {"role": "Worker", "pool": pool, "nodes": (pipeline - 1) * copies, "device_requests": dr},
        ]
    return {
        "name": replica_name(dep, cluster_name, index),
        "deployment": dep,
        "namespace": "ml-team",
        "cluster": cluster_name,
        "index": index,
        "engines": [{"name": "main", "copies": copies, "members": members}],
    }


def feed(result: dict, others: list[dict] | None = None) -> list[dict]:
    return [*(others or []), *copy.deepcopy(result["replicas"])]


# --------------------------------------------------------------------------------------------------------------------
# Shape and names
# --------------------------------------------------------------------------------------------------------------------


def test_single_cluster_full_result_shape():
    result = run(deployment(), [cluster("cluster-a")])
    assert result["replicas"] == [
        {
            "name": "my-model-" + hashlib.sha256(b"my-model/cluster-a/0").hexdigest()[:5],
            "deployment": "my-model",
            "namespace": "ml-team",
            "cluster": "cluster-a",
            "index": 0,
            "engines": [
                {
                    "name": "main",
                    "copies": 1,
                    "members": [
                        {
                            "role": "Standalone",
                            "pool": "default",
                            "nodes": 1,
                            "device_requests": [
                                {
                                    "name": "gpu",
                                    "device_class_name": "gpu.nvidia.com",
                                    "count": 1,
                                    "selectors": [MEM_16],
                                }
                            ],
                        }
                    ],
                }
            ],
        }
    ]
    assert result["desired"] == 1
    assert result["scheduled"] == 1
    assert result["changed"] is True
    assert result["condition"] == {
        "type": "ReplicasScheduled",
        "status": "True",
        "reason": "ReplicasCreated",
        "message": "1 of 1 replica(s) scheduled on 1 cluster(s)",
    }
    assert result["unschedulable"] == {}
    assert result["dropped"] == []
    assert result["overcommitted"] == []


def test_replica_name_is_deployment_and_5_hex_of_sha256():
    assert replica_name("qwen-demo", "gke-us-central1", 0) == (
        "qwen-demo-" + hashlib.sha256(b"qwen-demo/gke-us-central1/0").hexdigest()[:5]
    )
    assert replica_name("qwen-demo", "gke-us-central1", 1) != replica_name("qwen-demo", "gke-us-central1", 0)
    long = "a" * 63
    assert len(replica_name(long, "c", 0)) == 63
    assert replica_name(long, "c", 0).endswith("-" + hashlib.sha256(f"{long}/c/0".encode()).hexdigest()[:5])


def _colliding_indices(dep: str, cluster_name: str) -> tuple[int, int]:
    seen: dict[str, int] = {}
    for index in range(200_000):
        digest = hashlib.sha256(f"{dep}/{cluster_name}/{index}".encode()).hexdigest()[:5]
        if digest in seen:
            return seen[digest], index
        seen[digest] = index
    raise AssertionError("no collision found")  # pragma: no cover


def test_name_collision_gives_the_newer_replica_one_more_digit():
    first, second = _colliding_indices("m", "c")
    # Every index up to `second` exists except `first`, so the one new replica lands on `first`, whose 5-hex name
    # is already taken by the replica at `second`.
    existing = [observed("m", "c", i) for i in range(second + 1) if i != first]
    dep = deployment("m", replicas=len(existing) + 1)
    clusters = [cluster("c", [("default", "l4", second + 2)])]
    result = run(dep, clusters, existing)
    names = {r["index"]: r["name"] for r in result["replicas"]}
    assert names[second] == replica_name("m", "c", second)  # kept
    assert names[first] == replica_name("m", "c", first, 6)  # newer: one more digit
    assert names[first].startswith(names[second])
    assert len(set(names.values())) == len(names)
    again = run(dep, clusters, feed(result))
    assert again["replicas"] == result["replicas"]
    assert again["changed"] is False


def test_same_input_same_output_regardless_of_input_order():
    dep = deployment(replicas=5)
    clusters = [cluster("c"), cluster("a"), cluster("b", [("x", "h100", 1), ("y", "l4", 3)])]
    others = [observed("other", "a", 0), observed("other", "b", 0, "y")]
    first = run(dep, clusters, others)
    shuffled = list(reversed(clusters))
    second = run(dep, shuffled, list(reversed(others)))
    assert first == second


# --------------------------------------------------------------------------------------------------------------------
# Retain, fill, scale down (table)
# --------------------------------------------------------------------------------------------------------------------

SCHEDULE_CASES = [
    pytest.param(deployment(), [], [], [], id="no clusters"),
    pytest.param(
        deployment(), [cluster("cluster-a", ready=False)], [], [], id="not-ready cluster takes no new replica"
    ),
    pytest.param(
        deployment(),
        [cluster("cluster-a", ready=False)],
        [observed("my-model", "cluster-a")],
        [("cluster-a", 0)],
        id="not-ready cluster keeps its replica",
    ),
    pytest.param(
        deployment(pipeline=4), [cluster("cluster-a", [("default", "l4", 2)])], [], [], id="multi-node needs nodes"
    ),
    pytest.param(
        deployment(),
        [cluster("cluster-a"), cluster("cluster-b")],
        [observed("my-model", "cluster-b")],
        [("cluster-b", 0)],
        id="existing replica is retained on its cluster although cluster-a sorts first",
    ),
    pytest.param(
        deployment(),
        [cluster("cluster-b")],
        [observed("my-model", "cluster-a")],
        [("cluster-b", 0)],
        id="cluster no longer a candidate: dropped and re-placed",
    ),
    pytest.param(
        deployment(replicas=2),
        [cluster("cluster-a"), cluster("cluster-b")],
        [observed("my-model", "cluster-a")],
        [("cluster-a", 0), ("cluster-b", 0)],
        id="scale up spreads to another cluster",
    ),
    pytest.param(
        deployment(replicas=2),
        [cluster("cluster-a", [("default", "l4", 1)])],
        [observed("my-model", "cluster-a")],
        [("cluster-a", 0)],
        id="scale up without capacity keeps only the retained",
    ),
    pytest.param(
        deployment(replicas=2),
        [cluster("cluster-a", [("default", "l4", 2)])],
        [],
        [("cluster-a", 0), ("cluster-a", 1)],
        id="pack onto the only cluster",
    ),
    pytest.param(
        deployment(replicas=2),
        [cluster("cluster-a"), cluster("cluster-b")],
        [],
        [("cluster-a", 0), ("cluster-b", 0)],
        id="spread before packing",
    ),
    pytest.param(
        deployment(replicas=3),
        [cluster("cluster-a", [("default", "l4", 4)]), cluster("cluster-b", [("default", "l4", 4)])],
        [],
        [("cluster-a", 0), ("cluster-a", 1), ("cluster-b", 0)],
        id="spread then pack the remainder on the first name",
    ),
    pytest.param(
        deployment(replicas=3),
        [cluster("cluster-b", [("default", "l4", 4)]), cluster("cluster-a", [("default", "l4", 1)])],
        [],
        [("cluster-a", 0), ("cluster-b", 0), ("cluster-b", 1)],
        id="capacity forces packing past spread",
    ),
    pytest.param(
        deployment(replicas=3),
        [cluster("cluster-a", [("default", "l4", 4)])],
        [observed("my-model", "cluster-a", 0), observed("my-model", "cluster-a", 2)],
        [("cluster-a", 0), ("cluster-a", 1), ("cluster-a", 2)],
        id="new replica takes the lowest free index",
    ),
    pytest.param(
        deployment(replicas=2),
        [cluster("cluster-a", [("default", "l4", 4)]), cluster("cluster-b", [("default", "l4", 4)])],
        [
            observed("my-model", "cluster-a", 0),
            observed("my-model", "cluster-a", 1),
            observed("my-model", "cluster-b", 3),
        ],
        [("cluster-a", 0), ("cluster-b", 3)],
        id="scale down drops from the most-loaded cluster, highest index",
    ),
    pytest.param(
        deployment(replicas=1),
        [cluster("cluster-a"), cluster("cluster-b")],
        [observed("my-model", "cluster-b"), observed("my-model", "cluster-a")],
        [("cluster-a", 0)],
        id="scale down between equally loaded clusters drops the later name",
    ),
    pytest.param(
        deployment(replicas=3),
        [cluster(n, [("default", "l4", 4)]) for n in ("a", "b", "c")],
        [observed("my-model", n, i) for n in ("a", "b", "c") for i in (0, 1)],
        [("a", 0), ("b", 0), ("c", 0)],
        id="scale down 6 to 3 keeps one per cluster",
    ),
    pytest.param(
        deployment(replicas=2),
        [cluster("cluster-a", [("default", "l4", 4)])],
        [observed("my-model", "cluster-a", 0), observed("my-model", "cluster-a", 1)],
        [("cluster-a", 0), ("cluster-a", 1)],
        id="co-located replicas are both retained",
    ),
    pytest.param(
        deployment(replicas=2),
        [cluster("cluster-c"), cluster("cluster-a"), cluster("cluster-b")],
        [],
        [("cluster-a", 0), ("cluster-b", 0)],
        id="ties break by cluster name",
    ),
    pytest.param(
        deployment(),
        [cluster("cluster-a", [("default", "l4", 1)])],
        [observed("other", "cluster-a")],
        [],
        id="other deployments' replicas consume capacity",
    ),
    pytest.param(
        deployment(),
        [cluster("cluster-a", [("default", "l4", 1)])],
        [observed("my-model", "cluster-a")],
        [("cluster-a", 0)],
        id="our own replica is not charged against itself",
    ),
    pytest.param(
        deployment(),
        [cluster("cluster-a", [("frontier", "l4", 1)])],
        [observed("other", "cluster-a", pool="gone")],
        [("cluster-a", 0)],
        id="another deployment pinned to a deleted pool consumes nothing",
    ),
    pytest.param(
        deployment(replicas=0),
        [cluster("cluster-a")],
        [observed("my-model", "cluster-a")],
        [],
        id="scale to zero",
    ),
]


@pytest.mark.parametrize(("dep", "clusters", "replicas", "want"), SCHEDULE_CASES)
def test_schedule(dep, clusters, replicas, want):
    assert ids(run(dep, clusters, replicas)) == want


def test_colliding_identity_retains_deterministically():
    """Two of our replicas claim (cluster-a, 0) on different pools: one is kept whatever the input order."""
    clusters = [cluster("cluster-a", [("a", "l4", 2), ("b", "l4", 2)])]
    one = observed("my-model", "cluster-a", 0, "a")
    two = observed("my-model", "cluster-a", 0, "b")
    two["name"] = "my-model-zzzzz"
    first = run(deployment(), clusters, [two, one])
    second = run(deployment(), clusters, [one, two])
    assert first == second
    assert pools_of(first) == [("cluster-a", 0, "a")]
    assert [d["reason"] for d in first["dropped"]] == ["duplicate of replica (cluster-a, 0)"]


def test_retained_replica_is_charged_its_own_cost_and_returned_at_the_new_shape():
    """The gang grew from 2 to 4 nodes; the retained one still occupies 2 (6 - 2 = 4 free for a new one)."""
    dep = deployment(replicas=2, pipeline=4)
    result = run(dep, [cluster("cluster-a", [("default", "l4", 6)])], [observed("my-model", "cluster-a", pipeline=2)])
    assert ids(result) == [("cluster-a", 0), ("cluster-a", 1)]
    for r in result["replicas"]:
        assert [(m["role"], m["nodes"]) for m in r["engines"][0]["members"]] == [("Leader", 1), ("Worker", 3)]
    # Fed back, the pool is now overcommitted (4 + 4 > 6): reported, never hidden, and nothing moves.
    again = run(dep, [cluster("cluster-a", [("default", "l4", 6)])], feed(result))
    assert again["replicas"] == result["replicas"]
    assert again["changed"] is False
    assert again["overcommitted"] == [{"cluster": "cluster-a", "pool": "default", "nodes": 6, "used": 8}]
    assert again["warnings"] == ["pool default of cluster cluster-a is overcommitted: 8 node(s) in use of 6"]


def test_scale_down_reports_dropped_replicas():
    result = run(
        deployment(replicas=1),
        [cluster("a", [("default", "l4", 4)]), cluster("b")],
        [observed("my-model", "a", 0), observed("my-model", "a", 1), observed("my-model", "b", 0)],
    )
    assert ids(result) == [("a", 0)]
    assert [(d["cluster"], d["index"], d["reason"]) for d in result["dropped"]] == [
        ("a", 1, "scaled down to 1 replica(s)"),
        ("b", 0, "scaled down to 1 replica(s)"),
    ]


def test_stale_own_replica_frees_its_node_for_the_refill():
    """a/1 sits on a pool that is gone: dropped, and re-placed at index 1 on the pool a/0 shares (2 nodes)."""
    dep = deployment(replicas=2)
    result = run(
        dep,
        [cluster("cluster-a", [("frontier", "l4", 2)])],
        [observed("my-model", "cluster-a", 0, "frontier"), observed("my-model", "cluster-a", 1, "gone")],
    )
    assert pools_of(result) == [("cluster-a", 0, "frontier"), ("cluster-a", 1, "frontier")]
    assert result["replicas"][1]["name"] == replica_name("my-model", "cluster-a", 1)
    assert result["dropped"] == [
        {
            "name": replica_name("my-model", "cluster-a", 1),
            "cluster": "cluster-a",
            "index": 1,
            "reason": "pool gone no longer exists on cluster cluster-a",
        }
    ]
    assert result["changed"] is True


def test_no_clusters_condition():
    result = run(deployment(replicas=2), [], [observed("my-model", "gone")])
    assert result["replicas"] == []
    assert result["condition"]["status"] == "False"
    assert result["condition"]["reason"] == "NoClusters"
    assert result["changed"] is True
    assert result["dropped"][0]["reason"] == "cluster gone is no longer a candidate"


def test_insufficient_capacity_condition_and_explain():
    result = run(
        deployment(replicas=3),
        [cluster("a", [("default", "l4", 1)]), cluster("b", ready=False), cluster("c", [])],
    )
    assert ids(result) == [("a", 0)]
    assert result["condition"]["status"] == "False"
    assert result["condition"]["reason"] == "InsufficientCapacity"
    assert result["condition"]["message"].startswith(
        "1 of 3 replica(s) scheduled; no candidate cluster can take another"
    )
    assert "b: not ready" in result["condition"]["message"]
    assert result["unschedulable"] == {
        "a": {
            "code": "InsufficientCapacity",
            "reason": "insufficient capacity: no pool that matches engine main has 1 free node(s)",
            "pools": {"default": "engine main needs 1 node(s), 0 of 1 free"},
        },
        "b": {"code": "NotReady", "reason": "not ready: takes no new replicas", "pools": {}},
        "c": {"code": "NoPools", "reason": "has no node pools", "pools": {}},
    }


def test_scale_to_zero_is_success():
    result = run(deployment(replicas=0), [cluster("a")])
    assert result["condition"]["status"] == "True"
    assert result["condition"]["reason"] == "ReplicasCreated"
    assert result["changed"] is False


# --------------------------------------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------------------------------------


def test_false_selector_is_explained_with_request_selector_and_device():
    result = run(deployment(requests=[request(selectors=[MEM_16, MEM_40])]), [cluster("a", [("l4", "l4", 2)])])
    assert result["replicas"] == []
    assert result["unschedulable"]["a"] == {
        "code": "NoMatchingPool",
        "reason": "no pool can host engine main",
        "pools": {
            "l4": f"engine main member Standalone request gpu: selector `{MEM_40}` is false for device gpu (NVIDIA L4)"
        },
    }


def test_device_count_not_covered():
    result = run(deployment(requests=[request(count=8)]), [cluster("a", [("p", "h100x4", 2)])])
    assert result["replicas"] == []
    assert result["unschedulable"]["a"]["pools"]["p"] == (
        "engine main member Standalone request gpu: needs 8 devices, a node has 4 (gpu (NVIDIA H100 80GB HBM3)) "
        "that match"
    )


def test_device_count_is_per_pool_not_summed_over_the_cluster():
    result = run(deployment(requests=[request(count=8)]), [cluster("a", [("a", "h100x4", 2), ("b", "h100x8-ib", 1)])])
    assert pools_of(result) == [("a", 0, "b")]
    assert result["replicas"][0]["engines"][0]["members"][0]["device_requests"][0]["count"] == 8


def test_pool_with_zero_nodes_hosts_nothing():
    result = run(deployment(), [cluster("a", [("p", "l4", 0)])])
    assert result["replicas"] == []
    assert result["unschedulable"]["a"]["pools"]["p"] == "engine main needs 1 node(s), 0 of 0 free"


def test_synthetic_device_is_matched_but_not_claimed():
    dep = deployment(requests=[request("gpu", 8, [IS_H100]), request("nic", 8, [IB])])
    result = run(dep, [cluster("a", [("dgx", "h100x8-ib", 1)])])
    assert result["replicas"][0]["engines"][0]["members"][0]["device_requests"] == [
        {"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 8, "selectors": [IS_H100]}
    ]


def test_missing_fabric_filters_the_pool_and_says_which_selector():
    dep = deployment(requests=[request("gpu", 8, [IS_H100]), request("nic", 8, [IB])])
    result = run(dep, [cluster("a", [("dgx", "h100x8-tcpx", 1)])])
    assert result["replicas"] == []
    assert result["unschedulable"]["a"]["pools"]["dgx"].startswith(
        "engine main member Standalone request nic: selector `"
        + IB
        + "` failed on device gpu (NVIDIA H100 80GB HBM3): "
    )
    assert result["unschedulable"]["a"]["pools"]["dgx"].endswith(f"; selector `{IB}` is false for device ib")


def test_first_matching_pool_in_pool_order_wins():
    dep = deployment(requests=[request("gpu", 8, [IS_H100]), request("nic", 8, [IB])])
    both = [("tcpx", "h100x8-tcpx", 1), ("ib-1", "h100x8-ib", 1), ("ib-2", "h100x8-ib", 1)]
    assert pools_of(run(dep, [cluster("a", both)])) == [("a", 0, "ib-1")]
    assert pools_of(run(dep, [cluster("a", list(reversed(both)))])) == [("a", 0, "ib-2")]


@pytest.mark.parametrize(
    ("requests", "klass", "fits"),
    [
        pytest.param([request("a"), request("b")], "l4", False, id="two requests cannot share one single-count device"),
        pytest.param([request("a", 5), request("b", 5)], "h100x8-ib", False, id="5 + 5 exceeds a count of 8"),
        pytest.param([request("a", 4), request("b", 4)], "h100x8-ib", True, id="4 + 4 fits a count of 8"),
        pytest.param([request("a", 1, [MEM_16]), request("b", 1, [MEM_70])], "mixed", True, id="two kinds of GPU"),
    ],
)
def test_requests_consume_device_count(requests, klass, fits):
    result = run(deployment(requests=requests), [cluster("a", [("p", klass, 1)])])
    assert bool(result["replicas"]) is fits
    if not fits:
        assert "together need more devices than one node has" in result["unschedulable"]["a"]["pools"]["p"]


def test_exact_search_assigns_the_small_device_to_the_loose_request():
    """The big GPU comes first: greedy first-fit gives it to the loose request and then fails the tight one (the
    reference scheduler's documented false reject); the exact search gives the loose request the small GPU."""
    dep = deployment(requests=[request("loose", 1, [MEM_16]), request("tight", 1, [MEM_70])])
    mixed_big_first = {"devices": [gpu("big", **H100), gpu("small")]}
    result = run(dep, [cluster("a", [("p", "mixed2", 1)])], classes={**CLASSES, "mixed2": mixed_big_first})
    assert [r["name"] for r in result["replicas"][0]["engines"][0]["members"][0]["device_requests"]] == [
        "loose",
        "tight",
    ]


def test_request_device_class_name_restricts_devices():
    dep = deployment(requests=[request(device_class_name="other.example.com")])
    result = run(dep, [cluster("a", [("p", "l4", 1)])])
    assert result["replicas"] == []
    assert result["unschedulable"]["a"]["pools"]["p"] == (
        "engine main member Standalone request gpu: device gpu (NVIDIA L4) has device class gpu.nvidia.com, "
        "not other.example.com"
    )
    dep = deployment(requests=[request(device_class_name="gpu.nvidia.com")])
    assert ids(run(dep, [cluster("a", [("p", "l4", 1)])])) == [("a", 0)]


def test_synthetic_only_match_cannot_place_a_replica():
    dep = deployment(requests=[request("nic", 1, [IB])])
    result = run(dep, [cluster("a", [("dgx", "h100x8-ib", 4)])])
    assert result["replicas"] == []
    assert result["unschedulable"]["a"] == {
        "code": "NoMatchingPool",
        "reason": "no pool can host engine main",
        "pools": {"dgx": "engine main: only synthetic devices matched (ib); no DRA device would be claimed"},
    }


def test_synthetic_gpu_lookalike_is_never_claimed():
    result = run(deployment(requests=[request(selectors=[MEM_70])]), [cluster("a", [("p", "syn-gpu", 2)])])
    assert result["replicas"] == []
    assert "only synthetic devices matched (gpu)" in result["unschedulable"]["a"]["pools"]["p"]


def test_selector_error_on_a_device_means_no_match_and_is_explained():
    dep = deployment(requests=[request(selectors=['device.attributes["gpu.nvidia.com"].missing == "x"'])])
    result = run(dep, [cluster("a", [("p", "l4", 1)])])
    assert result["replicas"] == []
    why = result["unschedulable"]["a"]["pools"]["p"]
    assert why.startswith('engine main member Standalone request gpu: selector `device.attributes["gpu.nvidia.com"]')
    assert "failed on device gpu (NVIDIA L4): " in why


# --------------------------------------------------------------------------------------------------------------------
# Retained replicas and selector drift
# --------------------------------------------------------------------------------------------------------------------


def test_retained_replica_keeps_its_pool_while_it_still_matches():
    dep = deployment(requests=[request("gpu", 8, [IS_H100]), request("nic", 8, [IB])])
    clusters = [cluster("a", [("first", "h100x8-ib", 2), ("second", "h100x8-ib", 2)])]
    result = run(dep, clusters, [observed("my-model", "a", 0, "second")])
    assert pools_of(result) == [("a", 0, "second")]


def test_retained_replica_is_returned_with_the_current_selectors():
    clusters = [cluster("a")]
    first = run(deployment(), clusters)
    edited = deployment(requests=[request(selectors=[MEM_16, IS_H100.replace("H100", "L4")])])
    second = run(edited, clusters, feed(first))
    assert ids(second) == ids(first)
    assert second["replicas"][0]["name"] == first["replicas"][0]["name"]
    assert second["replicas"][0]["engines"][0]["members"][0]["device_requests"][0]["selectors"] == [
        MEM_16,
        IS_H100.replace("H100", "L4"),
    ]
    assert second["changed"] is True
    assert second["dropped"] == []
    third = run(edited, clusters, feed(second))
    assert third["replicas"] == second["replicas"]
    assert third["changed"] is False


def test_compact_read_back_without_device_requests_is_no_change():
    """A record read back from a rendered object may omit device_requests: the placement is unchanged."""
    clusters = [cluster("a"), cluster("b")]
    first = run(deployment(replicas=2), clusters)
    compact = feed(first)
    for r in compact:
        for m in r["engines"][0]["members"]:
            del m["device_requests"]
    again = run(deployment(replicas=2), clusters, compact)
    assert again["replicas"] == first["replicas"]
    assert again["changed"] is False
    moved = run(deployment(replicas=1), clusters, compact)
    assert moved["changed"] is True


def test_copies_change_keeps_the_replica_and_updates_its_nodes():
    clusters = [cluster("a", [("default", "l4", 4)])]
    first = run(deployment(), clusters)
    second = run(deployment(copies=3), clusters, feed(first))
    assert second["replicas"][0]["engines"][0]["copies"] == 3
    assert second["replicas"][0]["engines"][0]["members"][0]["nodes"] == 3
    assert second["changed"] is True


def test_selector_drift_replaces_onto_a_now_matching_pool():
    dep = deployment(requests=[request("gpu", 8, [IS_H100]), request("nic", 8, [IB])])
    clusters = [cluster("a", [("tcpx", "h100x8-tcpx", 2), ("ib", "h100x8-ib", 2)])]
    result = run(dep, clusters, [observed("my-model", "a", 0, "tcpx")])
    assert pools_of(result) == [("a", 0, "ib")]
    assert result["dropped"][0]["reason"].startswith("pool tcpx no longer satisfies it: engine main member Standalone")


def test_no_matching_pool_anywhere_drops_the_replica():
    dep = deployment(requests=[request("gpu", 8, [IS_H100]), request("nic", 8, [IB])])
    result = run(dep, [cluster("a", [("tcpx", "h100x8-tcpx", 2)])], [observed("my-model", "a", 0, "tcpx")])
    assert result["replicas"] == []
    assert result["condition"]["reason"] == "InsufficientCapacity"


def test_member_shape_change_replaces_the_replica():
    dep = deployment(pipeline=2)
    result = run(dep, [cluster("a", [("default", "l4", 4)])], [observed("my-model", "a")])
    assert [m["role"] for m in result["replicas"][0]["engines"][0]["members"]] == ["Leader", "Worker"]
    assert result["dropped"][0]["reason"] == ("engine main: its members (Standalone) no longer match the deployment's")


def test_engine_rename_replaces_the_replica():
    dep = deployment(engines=[engine("renamed")])
    result = run(dep, [cluster("a", [("default", "l4", 4)])], [observed("my-model", "a")])
    assert result["replicas"][0]["engines"][0]["name"] == "renamed"
    assert "no longer match the deployment's (renamed)" in result["dropped"][0]["reason"]


def test_member_split_across_pools_is_replaced_on_one_pool():
    dep = deployment(pipeline=2)
    split = observed("my-model", "a", pipeline=2)
    split["engines"][0]["members"][1]["pool"] = "other"
    result = run(dep, [cluster("a", [("default", "l4", 4), ("other", "l4", 4)])], [split])
    assert {m["pool"] for m in result["replicas"][0]["engines"][0]["members"]} == {"default"}
    assert "split across pools" in result["dropped"][0]["reason"]


# --------------------------------------------------------------------------------------------------------------------
# Gangs, copies, multi-engine replicas
# --------------------------------------------------------------------------------------------------------------------


def gang(leader: list[dict] | None, worker: list[dict] | None, workers: int = 1, copies: int = 1) -> dict:
    return engine(members=[member("Leader", leader), member("Worker", worker, workers=workers)], copies=copies)


def test_one_pool_satisfying_every_member_hosts_the_whole_engine():
    dep = deployment(engines=[gang([request(selectors=[MEM_16])], [request(selectors=[MEM_70])])])
    result = run(dep, [cluster("a", [("small", "l4", 2), ("big", "h100", 2)])])
    assert [(m["role"], m["pool"]) for m in result["replicas"][0]["engines"][0]["members"]] == [
        ("Leader", "big"),
        ("Worker", "big"),
    ]


def test_members_no_single_pool_satisfies_are_not_scheduled():
    dep = deployment(engines=[gang([request(selectors=[MEM_70])], [request(selectors=[MEM_LT_40])])])
    result = run(dep, [cluster("a", [("small", "l4", 2), ("big", "h100", 2)])])
    assert result["replicas"] == []
    pools = result["unschedulable"]["a"]["pools"]
    assert pools["small"].startswith("engine main member Leader request gpu: selector `" + MEM_70)
    assert pools["big"].startswith("engine main member Worker request gpu: selector `" + MEM_LT_40)


def test_gang_too_big_for_one_cluster_lands_whole_on_another():
    dep = deployment(engines=[gang([request(selectors=[MEM_70])], [request(selectors=[MEM_70])])])
    clusters = [cluster("a", [("small", "l4", 8), ("big", "h100", 1)]), cluster("b", [("big", "h100", 2)])]
    result = run(dep, clusters)
    assert pools_of(result) == [("b", 0, "big")]
    assert result["unschedulable"]["a"]["pools"]["big"] == "engine main needs 2 node(s), 1 of 1 free"


def test_member_claimable_elsewhere_is_not_stranded_on_a_synthetic_match():
    syn_and_small = {"devices": [gpu(), {**gpu("syn", **H100), "claim": "Synthetic"}]}
    syn_and_small["devices"][1].pop("device_class_name")
    classes = {**CLASSES, "syn-small": syn_and_small}
    dep = deployment(engines=[gang([request(selectors=[MEM_70])], [request(selectors=[MEM_16])])])
    result = run(dep, [cluster("a", [("p", "syn-small", 2), ("q", "h100", 2)])], classes=classes)
    members = result["replicas"][0]["engines"][0]["members"]
    assert [(m["pool"], m["nodes"], bool(m["device_requests"])) for m in members] == [("q", 1, True), ("q", 1, True)]
    # Without pool q, the only pool would strand the leader claimless: it is then placed claimless (it cannot claim
    # anywhere on that cluster), riding on the worker's node at no cost.
    alone = run(dep, [cluster("a", [("p", "syn-small", 1)])], classes=classes)
    members = alone["replicas"][0]["engines"][0]["members"]
    assert [(m["role"], m["nodes"], m["device_requests"] == []) for m in members] == [
        ("Leader", 0, True),
        ("Worker", 1, False),
    ]


def test_stranding_is_explained():
    syn_and_small = {"devices": [gpu(), {**gpu("syn", **H100), "claim": "Synthetic"}]}
    syn_and_small["devices"][1].pop("device_class_name")
    classes = {**CLASSES, "syn-small": syn_and_small}
    dep = deployment(engines=[gang([request(selectors=[MEM_70])], [request(selectors=[MEM_16])])])
    result = run(dep, [cluster("a", [("p", "syn-small", 2), ("q", "h100", 0)])], classes=classes)
    assert result["replicas"] == []
    assert result["unschedulable"]["a"]["pools"] == {
        "p": "engine main member Leader would claim only synthetic devices (syn) here but can claim a DRA device "
        "on another pool",
        "q": "engine main needs 2 node(s), 0 of 0 free",
    }


def test_synthetic_only_member_rides_claimless_with_its_gang():
    dep = deployment(engines=[gang([request("nic", 8, [IB])], [request("gpu", 8, [IS_H100])])])
    result = run(dep, [cluster("a", [("dgx", "h100x8-ib", 1)])])
    members = result["replicas"][0]["engines"][0]["members"]
    assert [(m["role"], m["pool"], m["nodes"], m["device_requests"]) for m in members] == [
        ("Leader", "dgx", 0, []),
        (
            "Worker",
            "dgx",
            1,
            [{"name": "gpu", "device_class_name": "gpu.nvidia.com", "count": 8, "selectors": [IS_H100]}],
        ),
    ]


def test_claimless_leader_rides_along_at_zero_cost_and_others_claimless_members_cost_nothing():
    dep = deployment(engines=[gang(None, [request()])])
    result = run(dep, [cluster("a", [("frontier", "l4", 1)])])
    assert [(m["role"], m["nodes"]) for m in result["replicas"][0]["engines"][0]["members"]] == [
        ("Leader", 0),
        ("Worker", 1),
    ]
    # Another deployment's gang with that shape occupies one node of a 2-node pool: ours still fits.
    other = copy.deepcopy(result["replicas"][0])
    other["deployment"] = "other"
    placed = run(deployment(), [cluster("a", [("frontier", "l4", 2)])], [other])
    assert ids(placed) == [("a", 0)]
    retained = run(dep, [cluster("a", [("frontier", "l4", 1)])], feed(result))
    assert retained["replicas"] == result["replicas"]


@pytest.mark.parametrize(("nodes", "fits"), [(8, True), (7, False)])
def test_gang_costs_worker_nodes_plus_one_times_copies(nodes, fits):
    dep = deployment(engines=[gang([request()], [request()], workers=3, copies=2)])
    result = run(dep, [cluster("a", [("p", "l4", nodes)])])
    if fits:
        members = result["replicas"][0]["engines"][0]["members"]
        assert [(m["role"], m["nodes"]) for m in members] == [("Leader", 2), ("Worker", 6)]
    else:
        assert result["unschedulable"]["a"]["pools"]["p"] == "engine main needs 8 node(s), 7 of 7 free"


def test_engines_of_one_replica_do_not_double_book_a_pool():
    dep = deployment(engines=[engine("prefill"), engine("decode")])
    result = run(dep, [cluster("a", [("one", "l4", 1), ("two", "l4", 1)])])
    assert [(e["name"], e["members"][0]["pool"]) for e in result["replicas"][0]["engines"]] == [
        ("prefill", "one"),
        ("decode", "two"),
    ]
    full = run(dep, [cluster("a", [("one", "l4", 1)])])
    assert full["replicas"] == []
    assert full["unschedulable"]["a"] == {
        "code": "InsufficientCapacity",
        "reason": "insufficient capacity: no pool that matches engine decode has 1 free node(s)",
        "pools": {"one": "engine decode needs 1 node(s), 0 of 1 free"},
    }


# --------------------------------------------------------------------------------------------------------------------
# Taints and tolerations
# --------------------------------------------------------------------------------------------------------------------

MAINT = {"key": "gpufleet.io/maintenance", "value": "on", "effect": "NoSchedule"}
DRAIN = {"key": "gpufleet.io/drain", "effect": "NoExecute"}


def test_noschedule_keeps_new_replicas_off_and_says_so():
    result = run(deployment(), [cluster("a", taints=[MAINT]), cluster("b")])
    assert ids(result) == [("b", 0)]
    assert result["unschedulable"] == {
        "a": {
            "code": "TaintNotTolerated",
            "reason": "taint gpufleet.io/maintenance=on:NoSchedule is not tolerated",
            "pools": {},
        }
    }


def test_noschedule_leaves_an_existing_replica_in_place():
    result = run(deployment(), [cluster("a", taints=[MAINT])], [observed("my-model", "a")])
    assert ids(result) == [("a", 0)]
    assert result["changed"] is False


def test_toleration_allows_placement_on_a_tainted_cluster():
    tol = [{"key": "gpufleet.io/maintenance", "operator": "Exists"}]
    assert ids(run(deployment(tolerations=tol), [cluster("a", taints=[MAINT])])) == [("a", 0)]


def test_noexecute_drains_and_reschedules():
    result = run(deployment(), [cluster("a", taints=[DRAIN]), cluster("b")], [observed("my-model", "a")])
    assert ids(result) == [("b", 0)]
    assert result["dropped"] == [
        {
            "name": replica_name("my-model", "a", 0),
            "cluster": "a",
            "index": 0,
            "reason": "taint gpufleet.io/drain:NoExecute is not tolerated (evicted)",
        }
    ]
    assert result["unschedulable"]["a"]["code"] == "TaintNotTolerated"


def test_noexecute_toleration_retains_in_place():
    tol = [{"key": "gpufleet.io/drain", "operator": "Exists"}]
    result = run(deployment(tolerations=tol), [cluster("a", taints=[DRAIN])], [observed("my-model", "a")])
    assert ids(result) == [("a", 0)]


def test_a_forced_drain_with_nowhere_to_go_leaves_the_count_unmet():
    result = run(deployment(), [cluster("a", taints=[DRAIN])], [observed("my-model", "a")], force_drain=True)
    assert result["replicas"] == []
    assert result["condition"]["reason"] == "InsufficientCapacity"


def test_a_safe_drain_keeps_the_replicas_it_cannot_replace():
    """Issue 25: a drain with no room elsewhere removed every replica of the drained cluster (6 -> 3)."""
    result = run(deployment(), [cluster("a", taints=[DRAIN])], [observed("my-model", "a")])
    assert ids(result) == [("a", 0)]
    assert result["dropped"] == []
    assert result["condition"]["reason"] == "ReplicasCreated"
    assert result["warnings"] == [
        "replica (a, 0) stays on drained cluster a: no other cluster can take its replacement (drain with force to "
        "remove it anyway)"
    ]


def test_a_safe_drain_moves_what_fits_and_keeps_the_rest():
    dep = deployment(replicas=3)
    clusters = [cluster("a", [("default", "l4", 3)], taints=[DRAIN]), cluster("b", [("default", "l4", 1)])]
    seen = [observed("my-model", "a", i) for i in range(3)]
    result = run(dep, clusters, seen)
    assert sorted(ids(result)) == [("a", 0), ("a", 1), ("b", 0)]  # one moved (the highest index), two stay
    assert [(d["cluster"], d["index"]) for d in result["dropped"]] == [("a", 2)]
    assert len(result["warnings"]) == 2


def test_noschedule_toleration_does_not_cover_a_noexecute_taint():
    tol = [{"key": "gpufleet.io/drain", "operator": "Exists", "effect": "NoSchedule"}]
    result = run(deployment(tolerations=tol), [cluster("a", taints=[DRAIN]), cluster("b")], [observed("my-model", "a")])
    assert ids(result) == [("b", 0)]


def test_an_untolerated_second_taint_still_repels():
    other = {"key": "gpufleet.io/reserved", "effect": "NoSchedule"}
    tol = [{"key": "gpufleet.io/maintenance", "operator": "Exists"}]
    result = run(deployment(tolerations=tol), [cluster("a", taints=[MAINT, other]), cluster("b")])
    assert ids(result) == [("b", 0)]
    assert result["unschedulable"]["a"]["reason"] == "taint gpufleet.io/reserved:NoSchedule is not tolerated"


@pytest.mark.parametrize(
    ("toleration", "placed"),
    [
        ({"key": "gpufleet.io/maintenance", "operator": "Equal", "value": "on"}, True),
        ({"key": "gpufleet.io/maintenance", "operator": "Equal", "value": "off"}, False),
        ({"key": "gpufleet.io/maintenance", "value": "on"}, True),  # Equal is the default operator
        ({"operator": "Exists"}, True),
        ({"key": "gpufleet.io/maintenance", "operator": "Exists", "effect": "NoExecute"}, False),
    ],
)
def test_toleration_semantics(toleration, placed):
    result = run(deployment(tolerations=[toleration]), [cluster("a", taints=[MAINT])])
    assert bool(result["replicas"]) is placed


def test_keyless_exists_tolerates_every_taint():
    result = run(deployment(tolerations=[{"operator": "Exists"}]), [cluster("a", taints=[MAINT, DRAIN])])
    assert ids(result) == [("a", 0)]


def test_not_ready_and_tainted_are_both_reported():
    result = run(deployment(), [cluster("a", taints=[MAINT], ready=False)])
    assert result["unschedulable"]["a"] == {
        "code": "NotReady",
        "reason": "not ready: takes no new replicas; taint gpufleet.io/maintenance=on:NoSchedule is not tolerated",
        "pools": {},
    }


# --------------------------------------------------------------------------------------------------------------------
# Invalid selectors, validation
# --------------------------------------------------------------------------------------------------------------------


def test_invalid_cel_sets_invalid_node_selector_and_places_nothing():
    bad = "device.attributes[ ) nope ("
    existing = observed("my-model", "a")
    result = run(deployment(replicas=3, requests=[request(selectors=[MEM_16, bad])]), [cluster("a")], [existing])
    assert result["condition"]["type"] == "ReplicasScheduled"
    assert result["condition"]["status"] == "False"
    assert result["condition"]["reason"] == "InvalidNodeSelector"
    message = result["condition"]["message"]
    assert (
        f"deployment.engines[0].members[0].node_selector.devices[0].selectors[1].cel: `{bad}` does not compile: "
        in (message)
    )
    # Nothing placed, moved or dropped: the existing replica comes back as it was.
    assert result["replicas"] == [existing]
    assert result["changed"] is False
    assert result["dropped"] == []
    fresh = run(deployment(requests=[request(selectors=[bad])]), [cluster("a")])
    assert fresh["replicas"] == []
    assert fresh["scheduled"] == 0


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d, c, r: d["engines"][0]["members"][0].update(role="Boss"), "deployment.engines[0].members[0].role"),
        (lambda d, c, r: d.update(replicas=-1), "deployment.replicas"),
        (lambda d, c, r: d.pop("name"), "deployment.name"),
        (lambda d, c, r: c[0]["pools"][0].update(nodes=-2), "clusters[0].pools[0].nodes"),
        (lambda d, c, r: c[0]["pools"][0].update(nodes="many"), "clusters[0].pools[0].nodes"),
        (lambda d, c, r: c[0]["pools"][0].update({"class": "nope"}), "clusters[0].pools[0].class"),
        (lambda d, c, r: c[0].pop("name"), "clusters[0].name"),
        (lambda d, c, r: c.append(dict(c[0])), "clusters[1].name"),
        (lambda d, c, r: c[0].update(taints=[{"key": "k", "effect": "Sometimes"}]), "clusters[0].taints[0].effect"),
        (lambda d, c, r: c[0].update(ready="perhaps"), "clusters[0].ready"),
        (lambda d, c, r: r[0].update(index=-1), "replicas[0].index"),
        (lambda d, c, r: r[0].update(index="first"), "replicas[0].index"),
        (lambda d, c, r: r[0]["engines"][0]["members"][0].pop("role"), "replicas[0].engines[0].members[0].role"),
        (lambda d, c, r: r[1].pop("cluster"), "replicas[1].cluster"),
        (lambda d, c, r: r[1]["engines"][0]["members"][0].pop("nodes"), "replicas[1].engines[0].members[0].nodes"),
        (lambda d, c, r: r[1]["engines"][0]["members"][0].update(pool=3), "replicas[1].engines[0].members[0].pool"),
        (lambda d, c, r: r[1].update(engines={}), "replicas[1].engines"),
        (lambda d, c, r: r.append("x"), "replicas[2]"),
    ],
)
def test_malformed_input_fails_with_the_field_path(mutate, path):
    dep, clusters = deployment(), [cluster("a", [("default", "l4", 4)])]
    replicas = [observed("my-model", "a"), observed("other", "a")]
    mutate(dep, clusters, replicas)
    with pytest.raises(FleetValidationError) as info:
        run(dep, clusters, replicas)
    assert path in [p for p, _reason in info.value.errors]


def test_bad_class_fails_with_its_name_in_the_path():
    classes = {**CLASSES, "broken-class": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com"}]}}
    with pytest.raises(FleetValidationError) as info:
        run(deployment(), [cluster("a")], classes=classes)
    assert str(info.value).startswith("classes['broken-class'].devices[0]: device_class_name is required")


def test_extra_keys_are_tolerated_and_readback_shapes_accepted():
    c = cluster("a")
    c.update(provider="gke", groups=["prod"])
    c["pools"][0]["zones"] = ["us-central1-a"]
    other = observed("other", "a")
    other.update(labels={"x": "y"}, index="0")  # a label read back from a cluster is a string
    other["engines"][0]["members"][0]["device_requests"][0]["selectors"] = [{"cel": MEM_16}]
    result = run(deployment(), [c], [other])
    assert ids(result) == [("a", 0)]


# --------------------------------------------------------------------------------------------------------------------
# Memoisation
# --------------------------------------------------------------------------------------------------------------------


def test_each_selector_is_evaluated_once_per_distinct_device_shape():
    engine_ = SelectorEngine()
    dep = deployment(replicas=12, requests=[request(selectors=[MEM_16, IS_H100])])
    clusters = [
        cluster(f"c{i:02d}", [("l4", "l4", 2), ("h100", "h100", 1), ("dgx", "h100x8-ib", 1)]) for i in range(20)
    ]
    result = run(dep, clusters, selectors=engine_)
    assert result["scheduled"] == 12
    # Distinct device shapes (what CEL sees; the per-node count is not part of it): the L4 gpu, the H100 gpu (same in
    # the h100 and h100x8-ib classes) and the fabric. MEM_16 is true on both GPUs, then IS_H100 runs on them; on the
    # fabric MEM_16 errors, so IS_H100 is never asked there: 2 + 2 + 1 evaluations for 60 pools and 12 replicas.
    assert engine_.evaluations == engine_.distinct_pairs == 5
    again = run(dep, clusters, feed(result), selectors=engine_)
    assert again["changed"] is False
    assert engine_.evaluations == 5  # nothing new to evaluate


# --------------------------------------------------------------------------------------------------------------------
# Property tests on random fleets
# --------------------------------------------------------------------------------------------------------------------

PROPERTY_CLASSES = {name: CLASSES[name] for name in ("l4", "h100", "h100x8-ib", "h100x4")}
SELECTOR_CHOICES = [[MEM_16], [MEM_70], [IS_H100], [MEM_16, IS_H100]]

taint_st = st.sampled_from([None, MAINT, DRAIN])
pool_st = st.tuples(st.sampled_from(sorted(PROPERTY_CLASSES)), st.integers(0, 4))
cluster_st = st.tuples(st.lists(pool_st, min_size=0, max_size=3), taint_st, st.booleans())


@st.composite
def fleets(draw):
    raw = draw(st.lists(cluster_st, min_size=1, max_size=6))
    clusters = []
    for i, (pools, taint, ready) in enumerate(raw):
        clusters.append(
            cluster(
                f"c{i}",
                [(f"p{j}", klass, nodes) for j, (klass, nodes) in enumerate(pools)],
                taints=[taint] if taint else [],
                ready=ready or i == 0,
            )
        )
    deps = []
    for i in range(draw(st.integers(1, 3))):
        selectors = draw(st.sampled_from(SELECTOR_CHOICES))
        count = draw(st.sampled_from([1, 1, 4, 8]))
        pipeline = draw(st.integers(1, 2))
        tolerate = draw(st.booleans())
        deps.append(
            deployment(
                f"d{i}",
                replicas=draw(st.integers(0, 6)),
                requests=[request(count=count, selectors=selectors)],
                pipeline=pipeline,
                copies=draw(st.integers(1, 2)),
                tolerations=[{"operator": "Exists"}] if tolerate else None,
            )
        )
    return clusters, deps


def place_all(clusters: list[dict], deps: list[dict], replicas: list[dict] | None = None) -> tuple[list[dict], list]:
    fleet = list(replicas or [])
    results = []
    for dep in deps:
        result = run(dep, clusters, fleet)
        results.append(result)
        fleet = [r for r in fleet if r["deployment"] != dep["name"]] + copy.deepcopy(result["replicas"])
    return fleet, results


def used_nodes(replicas: list[dict]) -> dict[tuple[str, str], int]:
    """Nodes in use per pool, as the records say (design.md §12): a member without ``allocations`` holds its ``nodes``
    whole; with them, its pods hold the listed devices of the listed nodes, which pods share. No device is held twice."""
    whole: dict[tuple[str, str], int] = {}
    held: dict[tuple[str, str], dict[int, set[str]]] = {}
    for r in replicas:
        for e in r["engines"]:
            for m in e["members"]:
                key = (r["cluster"], m["pool"])
                if not m.get("allocations"):
                    whole[key] = whole.get(key, 0) + m["nodes"]
                    continue
                assert m["nodes"] == len({a["node"] for a in m["allocations"]}), m
                for a in m["allocations"]:
                    devices = held.setdefault(key, {}).setdefault(a["node"], set())
                    assert not devices & set(a["devices"]), (key, a, devices)
                    devices.update(a["devices"])
    return {key: whole.get(key, 0) + len(held.get(key, {})) for key in {*whole, *held}}


FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(fleets())
def test_property_never_overcommits(fleet):
    clusters, deps = fleet
    replicas, results = place_all(clusters, deps)
    capacity = {(c["name"], p["name"]): p["nodes"] for c in clusters for p in c["pools"]}
    for key, used in used_nodes(replicas).items():
        assert used <= capacity[key], key
    for result in results:
        assert result["overcommitted"] == []
        assert result["scheduled"] <= result["desired"]
        assert (result["condition"]["status"] == "True") is (result["scheduled"] == result["desired"])


@FAST
@given(fleets(), st.randoms(use_true_random=False))
def test_property_deterministic_and_order_independent(fleet, rnd):
    clusters, deps = fleet
    replicas, _results = place_all(clusters, deps)
    for dep in deps:
        one = run(dep, clusters, replicas)
        shuffled_clusters = list(clusters)
        shuffled_replicas = list(replicas)
        rnd.shuffle(shuffled_clusters)
        rnd.shuffle(shuffled_replicas)
        assert run(dep, shuffled_clusters, shuffled_replicas) == one


@FAST
@given(fleets())
def test_property_sticky_feeding_output_back_changes_nothing(fleet):
    clusters, deps = fleet
    replicas, _results = place_all(clusters, deps)
    again, results = place_all(clusters, deps, replicas)
    assert sorted(again, key=lambda r: (r["deployment"], r["cluster"], r["index"])) == sorted(
        replicas, key=lambda r: (r["deployment"], r["cluster"], r["index"])
    )
    assert all(result["changed"] is False for result in results)
    assert all(result["dropped"] == [] for result in results)


@FAST
@given(
    st.integers(1, 6),
    st.integers(0, 20),
    st.lists(st.booleans(), min_size=6, max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_property_spread_is_optimal_when_capacity_allows(n_clusters, replicas, ready, tainted):
    clusters = [
        cluster(f"c{i}", [("p", "l4", replicas)], taints=[MAINT] if tainted[i] else [], ready=ready[i])
        for i in range(n_clusters)
    ]
    eligible = [c["name"] for c in clusters if c["ready"] and not c["taints"]]
    result = run(deployment(replicas=replicas), clusters)
    counts = {name: 0 for name in eligible}
    for cluster_name, _index in ids(result):
        counts[cluster_name] += 1
    if eligible:
        assert result["scheduled"] == replicas
        assert max(counts.values()) - min(counts.values()) <= 1
    else:
        assert result["scheduled"] == 0


@FAST
@given(st.integers(1, 5), st.integers(1, 12), st.integers(0, 12))
def test_property_spread_keeps_retained_and_balances_the_rest(n_clusters, first, second):
    """Scaling from `first` to `second` replicas keeps every replica that still counts and stays balanced."""
    clusters = [cluster(f"c{i}", [("p", "l4", 12)]) for i in range(n_clusters)]
    before = run(deployment(replicas=first), clusters)
    after = run(deployment(replicas=second), clusters, feed(before))
    kept = set(ids(before)) & set(ids(after))
    assert len(kept) == min(first, second)
    counts = [sum(1 for c, _i in ids(after) if c == f"c{i}") for i in range(n_clusters)]
    assert max(counts) - min(counts) <= 1


def test_randomised_fleet_smoke_does_no_repeated_work():
    """A 40-cluster fleet with 5 deployments: every (selector, device shape) pair is evaluated once, whatever the
    number of clusters, pools and replicas (guards accidental quadratic work with counters, not the wall clock)."""
    rnd = random.Random(7)
    clusters = [
        cluster(f"c{i:02d}", [(f"p{j}", rnd.choice(sorted(PROPERTY_CLASSES)), rnd.randint(0, 6)) for j in range(3)])
        for i in range(40)
    ]
    deps = [
        deployment(f"d{i}", replicas=20, requests=[request(selectors=rnd.choice(SELECTOR_CHOICES))]) for i in range(5)
    ]
    sel = SelectorEngine()
    fleet: list[dict] = []
    for dep in deps:
        result = run(dep, clusters, fleet, selectors=sel)
        fleet = [r for r in fleet if r["deployment"] != dep["name"]] + copy.deepcopy(result["replicas"])
    expressions = {
        s["cel"] for d in deps for s in d["engines"][0]["members"][0]["node_selector"]["devices"][0]["selectors"]
    }
    shapes = sum(len(PROPERTY_CLASSES[c]["devices"]) for c in {p["class"] for c_ in clusters for p in c_["pools"]})
    assert sel.evaluations == sel.distinct_pairs  # never the same question twice
    assert sel.evaluations <= len(expressions) * shapes
    assert len(fleet) > 0


def test_the_validated_fleet_is_remembered_by_content_not_by_identity():
    # place() remembers the last validated candidate list; a list changed in place must be validated afresh.
    clusters = [cluster("a", [("p", "l4", 1)])]
    assert run(deployment(), clusters)["scheduled"] == 1
    clusters[0]["pools"][0]["nodes"] = 0
    assert run(deployment(), clusters)["scheduled"] == 0
    clusters[0]["pools"][0]["class"] = "nope"
    with pytest.raises(FleetValidationError, match="unknown inference class 'nope'"):
        run(deployment(), clusters)
