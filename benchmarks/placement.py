"""Benchmark replica placement (design.md §4) on a large synthetic fleet.

Generates 500 clusters x 4 node pools over 4 GPU inference classes (real device attributes and usable memory), and
20 deployments x 50 replicas with 2 CEL selectors each, then places every deployment in sequence, each run fed the
replicas placed before it (the way the deploy playbook does). Prints the total and per-deployment time, the real CEL
evaluations performed (calls into ``dra_cel.CompiledSelector.matches``) and the distinct (device shape x selector)
pairs of the fleet; placement memoises so that evaluations <= pairs.

``--reference PATH`` also runs a copy of Modelplane's ``scheduling.py`` (read it from upstream and save it outside the
repository; it is never committed) on the same fleet and the same selector engine, through small adapters, for its
first ``--reference-deployments`` deployments (it re-evaluates selectors per pool, cluster and replica, so the full
fleet takes minutes), and compares speed and placements.

``--dra-depth`` adds an HGX-like class whose GPUs and NICs carry per-device ``pcieRoot`` / ``numaNode`` attributes
(design.md §2a), and turns every other deployment into one that uses §3a: tensor-parallel GPUs on one PCIe root with a
NIC on the same root (``match_attribute``), "H100 else two A100s" (``first_available``), and every NIC of the node
(``allocation_mode: All``). The reference cannot express these, so ``--reference`` ignores that flag.

``--existing N`` (issue 24, device-level capacity) first places ``N`` replicas of 1-GPU deployments (untimed: the fleet's
existing replicas, whose records carry per-device allocations), then times one more deployment placed against them and
one of them placed again (every replica retained, its recorded devices checked), as the deploy playbook's next run does.

    python benchmarks/placement.py [--clusters 500] [--deployments 20] [--replicas 50] [--reference /tmp/scheduling.py]
    python benchmarks/placement.py --dra-depth
    python benchmarks/placement.py --clusters 5000 --existing 20000
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import random
import sys
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if (ROOT / ".venv" / "collections").is_dir():  # a checkout set up by `make setup`
    sys.path.insert(0, str(ROOT / ".venv" / "collections"))

from ansible_collections.gpufleet.serving.plugins.module_utils import dra_cel  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.dra.allocator import node_devices  # noqa: E402
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (  # noqa: E402
    InferenceClass,
    ModelDeployment,
    parse,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.placement import (  # noqa: E402
    SelectorEngine,
    place,
    plan,
    validate_classes,
    validate_clusters,
)

# --------------------------------------------------------------------------------------------------------------------
# The fleet
# --------------------------------------------------------------------------------------------------------------------


def _gpu(product: str, arch: str, cc: str, memory: str, count: int) -> dict[str, Any]:
    return {
        "name": "gpu",
        "claim": "DRA",
        "driver": "gpu.nvidia.com",
        "device_class_name": "gpu.nvidia.com",
        "count": count,
        "attributes": {
            "productName": {"string": product},
            "architecture": {"string": arch},
            "brand": {"string": "Nvidia"},
            "cudaComputeCapability": {"version": cc},
            "driverVersion": {"version": "580.95.5"},
        },
        "capacity": {"memory": {"value": memory}},
    }


CLASSES: dict[str, Any] = {
    "l4-1x": {"devices": [_gpu("NVIDIA L4", "Ada Lovelace", "8.9.0", "23034Mi", 1)]},
    "a100-40gb-1x": {"devices": [_gpu("NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", "40960Mi", 1)]},
    "h100-8x-ib": {
        "devices": [
            _gpu("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi", 8),
            {
                "name": "ib",
                "claim": "Synthetic",
                "driver": "fabric.gpufleet.io",
                "count": 8,
                "attributes": {"linkType": {"string": "InfiniBand"}, "rateGbps": {"int": 400}},
            },
        ]
    },
    "h200-8x": {"devices": [_gpu("NVIDIA H200", "Hopper", "9.0.0", "143771Mi", 8)]},
}

# design.md §2a: eight H100s over two PCIe roots / NUMA nodes, one RDMA NIC per root (another driver).
HGX_CLASS = {
    "devices": [
        {
            **_gpu("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi", 8),
            "instances": [
                {"attributes": {"pcieRoot": {"string": f"pci000{i // 4}:00"}, "numaNode": {"int": i // 4}}}
                for i in range(8)
            ],
        },
        {
            "name": "nic",
            "driver": "rdma.example.com",
            "device_class_name": "rdma.example.com",
            "count": 2,
            "attributes": {"linkType": {"string": "InfiniBand"}},
            "instances": [{"attributes": {"gpu.nvidia.com/pcieRoot": {"string": f"pci000{i}:00"}}} for i in range(2)],
        },
    ]
}
IS_H100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
IS_A100 = 'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA A100")'
IS_NIC = 'device.driver == "rdma.example.com"'


def dra_depth_selector(i: int, memory: str) -> dict[str, Any]:
    """A §3a node selector, one of three kinds by ``i``."""
    kind = i % 3
    if kind == 0:  # TP-4 on one PCIe root plus a NIC on the same root
        return {
            "devices": [
                {"name": "gpu", "count": 4, "selectors": [{"cel": memory}, {"cel": IS_H100}]},
                {"name": "nic", "selectors": [{"cel": IS_NIC}]},
            ],
            "constraints": [{"requests": ["gpu", "nic"], "match_attribute": "gpu.nvidia.com/pcieRoot"}],
        }
    if kind == 1:  # H100, else two A100s
        return {
            "devices": [
                {
                    "name": "accel",
                    "first_available": [
                        {"name": "h100", "device_class_name": "gpu.nvidia.com", "selectors": [{"cel": IS_H100}]},
                        {
                            "name": "a100",
                            "device_class_name": "gpu.nvidia.com",
                            "count": 2,
                            "selectors": [{"cel": IS_A100}, {"cel": memory}],
                        },
                    ],
                }
            ]
        }
    return {  # every NIC of the node, and two GPUs on one NUMA node
        "devices": [
            {"name": "gpu", "count": 2, "selectors": [{"cel": memory}]},
            {"name": "nics", "allocation_mode": "All", "selectors": [{"cel": IS_NIC}]},
        ],
        "constraints": [{"requests": ["gpu"], "match_attribute": "gpu.nvidia.com/numaNode"}],
    }


MEMORY_GI = [16, 18, 20, 22, 12, 30, 32, 36, 38, 14, 48, 60, 64, 70, 72, 75, 78, 96, 120, 10]
SECOND = [
    'device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("{v}")) >= 0',
    'device.attributes["gpu.nvidia.com"].architecture in ["Hopper", "Ada Lovelace", "{v}"]',
    'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA") && device.driver != "{v}"',
    'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("{v}")) >= 0',
]
SECOND_ARG = ["7.5.0", "Ampere", "example.com", "535.0.0"]


def fleet(
    n_clusters: int, n_pools: int, n_deployments: int, n_replicas: int, seed: int, classes: dict, dra_depth: bool
) -> tuple[list, list]:
    rnd = random.Random(seed)
    names = sorted(classes)
    clusters = []
    for i in range(n_clusters):
        clusters.append(
            {
                "name": f"cluster-{i:04d}",
                "pools": [
                    {"name": f"pool-{j}", "class": rnd.choice(names), "nodes": rnd.randint(0, 8)}
                    for j in range(n_pools)
                ],
                "taints": [],
                "ready": rnd.random() > 0.02,
            }
        )
    deployments = []
    for i in range(n_deployments):
        kind = i % len(SECOND)
        second = SECOND[kind].replace("{v}", f"{SECOND_ARG[kind]}" if i < len(SECOND) else f"{SECOND_ARG[kind]}{i}")
        if kind in (0, 3):  # keep versions valid: vary the patch level instead
            base = SECOND_ARG[kind].rsplit(".", 1)[0]
            second = SECOND[kind].replace("{v}", f"{base}.{i}")
        selectors = [
            f'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{MEMORY_GI[i % len(MEMORY_GI)]}Gi")) >= 0',
            second,
        ]
        count = 8 if i % 7 == 3 else 1
        members = [{"role": "Standalone", "node_selector": {"devices": [{"name": "gpu", "count": count}]}}]
        if i % 10 == 9:  # a two-node gang
            members = [
                {"role": "Leader", "node_selector": {"devices": [{"name": "gpu", "count": 8}]}},
                {"role": "Worker", "worker": {"nodes": 1}, "node_selector": {"devices": [{"name": "gpu", "count": 8}]}},
            ]
        for m in members:
            m["node_selector"]["devices"][0]["selectors"] = [{"cel": s} for s in selectors]
        if dra_depth and i % 2 == 1:
            members = [{"role": "Standalone", "node_selector": dra_depth_selector(i // 2, selectors[0])}]
        deployments.append(
            {
                "name": f"model-{i:02d}",
                "namespace": "ml-team",
                "replicas": n_replicas,
                "engines": [{"name": "main", "members": members}],
            }
        )
    return clusters, deployments


def device_shapes(classes: dict) -> set[str]:
    """Distinct device shapes (what a selector sees: driver, attributes, capacity) over every node's devices."""
    return {d.shape for data in classes.values() for d in node_devices(InferenceClass.model_validate(data))}


def all_selectors(deployments: list) -> set[str]:
    out = set()
    for d in deployments:
        for e in d["engines"]:
            for m in e["members"]:
                for r in m["node_selector"]["devices"]:
                    for alt in r.get("first_available") or [r]:
                        out.update(s["cel"] for s in alt.get("selectors", []))
    return out


# --------------------------------------------------------------------------------------------------------------------
# Counting real CEL evaluations
# --------------------------------------------------------------------------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.calls = 0
        self._original = dra_cel.CompiledSelector.matches

    def __enter__(self) -> Counter:
        original = self._original
        counter = self

        def counting(selector: Any, device: Any) -> bool:
            counter.calls += 1
            return original(selector, device)

        dra_cel.CompiledSelector.matches = counting  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        dra_cel.CompiledSelector.matches = self._original  # type: ignore[method-assign]


# --------------------------------------------------------------------------------------------------------------------
# Ours
# --------------------------------------------------------------------------------------------------------------------


def run_ours(clusters: list, deployments: list, classes: dict) -> dict[str, Any]:
    engine = SelectorEngine()
    replicas: list[dict[str, Any]] = []
    results = []
    per = []
    with Counter() as counter:
        start = time.perf_counter()
        for dep in deployments:
            t0 = time.perf_counter()
            result = place(deployment=dep, clusters=clusters, classes=classes, replicas=replicas, selectors=engine)
            per.append(time.perf_counter() - t0)
            replicas = [r for r in replicas if r["deployment"] != dep["name"]] + result["replicas"]
            results.append(result)
        total = time.perf_counter() - start
    return {
        "total": total,
        "per": per,
        "evaluations": counter.calls,
        "lookups": engine.lookups,
        "results": results,
        "replicas": replicas,
    }


def run_fleet_path(clusters: list, deployments: list, classes: dict) -> float:
    """What deploy.yml does (fleet.deploy.place_fleet): classes and clusters validated once for the fleet, then one
    plan per deployment over the models. Returns the total seconds."""
    engine = SelectorEngine()
    start = time.perf_counter()
    parsed_classes = validate_classes(classes)
    models = validate_clusters(clusters, parsed_classes)
    records: list = []
    for dep in deployments:
        result = plan(parse(ModelDeployment, dep, "deployment"), parsed_classes, models, records, selectors=engine)
        records = [r for r in records if r.deployment != dep["name"]] + list(result.replicas)
    return time.perf_counter() - start


# --------------------------------------------------------------------------------------------------------------------
# The reference, through adapters (its pydantic models and CEL module are replaced by plain objects and dra_cel)
# --------------------------------------------------------------------------------------------------------------------


class _Obj(types.SimpleNamespace):
    pass


class _Device(_Obj):
    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return self.raw


class _Program:
    def __init__(self, expression: str) -> None:
        self._compiled = dra_cel.compile_selector(expression)

    def matches(self, device: dict[str, Any]) -> bool:
        try:  # like the reference's own wrapper: an evaluation error is a non-match
            return self._compiled.matches(device)
        except ValueError:
            return False


def _stub_module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    module.__getattr__ = lambda attr: type(attr, (_Obj,), {})  # type: ignore[method-assign]
    sys.modules[name] = module
    parent, _dot, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, module)
    return module


def load_reference(path: str) -> types.ModuleType:
    for pkg in (
        "models",
        "models.ai",
        "models.ai.modelplane",
        "models.ai.modelplane.inferencecluster",
        "models.ai.modelplane.modeldeployment",
        "models.ai.modelplane.modelreplica",
        "models.io",
        "models.io.k8s",
        "models.io.k8s.apimachinery",
        "models.io.k8s.apimachinery.pkg",
        "models.io.k8s.apimachinery.pkg.apis",
        "models.io.k8s.apimachinery.pkg.apis.meta",
        "function",
    ):
        _stub_module(pkg).__path__ = []  # type: ignore[attr-defined]
    for mod in ("inferencecluster", "modeldeployment", "modelreplica"):
        _stub_module(f"models.ai.modelplane.{mod}.v1alpha1")
    _stub_module("models.io.k8s.apimachinery.pkg.apis.meta.v1")
    _stub_module("function.cel", Program=_Program, CELCompileError=ValueError)
    spec = importlib.util.spec_from_file_location("reference_scheduling", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ref_clusters(clusters: list, classes: dict) -> list:
    devices = {}
    for name, data in classes.items():
        cls = InferenceClass.model_validate(data)
        devices[name] = [
            _Device(raw=d.as_resource_slice_device(), count=d.count, claim=d.claim, deviceClassName=d.device_class_name)
            for d in cls.devices
        ]
    out = []
    for c in clusters:
        pools = [_Obj(name=p["name"], nodes=p["nodes"], devices=devices[p["class"]]) for p in c["pools"]]
        status = _Obj(
            gpuPools=pools,
            gateway=_Obj(address="10.0.0.1"),
            conditions=[_Obj(type="Ready", status="True" if c["ready"] else "False")],
        )
        out.append(_Obj(metadata=_Obj(name=c["name"], labels={}), status=status))
    return out


def ref_deployment(dep: dict) -> Any:
    engines = []
    for e in dep["engines"]:
        members = []
        for m in e["members"]:
            reqs = [
                _Obj(name=r["name"], count=r.get("count", 1), selectors=[_Obj(cel=s["cel"]) for s in r["selectors"]])
                for r in m["node_selector"]["devices"]
            ]
            worker = _Obj(nodes=m["worker"]["nodes"]) if "worker" in m else None
            members.append(_Obj(role=m["role"], worker=worker, nodeSelector=_Obj(devices=reqs)))
        engines.append(_Obj(name=e["name"], copies=e.get("copies", 1), members=members))
    return _Obj(metadata=_Obj(name=dep["name"], labels={}), spec=_Obj(replicas=dep["replicas"], engines=engines))


def ref_replica(dep: dict, cand: Any) -> Any:
    """A Candidate turned into the ModelReplica the next run observes."""
    by_name = {e["name"]: e for e in dep["engines"]}
    engines = []
    for ep in cand.engines:
        spec = by_name[ep.name]
        members = []
        for m, mp in zip(spec["members"], ep.members, strict=True):
            worker = _Obj(nodes=m["worker"]["nodes"]) if "worker" in m else None
            members.append(_Obj(role=mp.role, worker=worker, nodePoolName=mp.pool, deviceRequests=mp.device_requests))
        engines.append(_Obj(name=ep.name, copies=spec.get("copies", 1), members=members))
    labels = {
        "modelplane.ai/deployment": dep["name"],
        "modelplane.ai/cluster": cand.name,
        "modelplane.ai/replica-index": str(cand.index),
    }
    meta = _Obj(name=f"{dep['name']}-{cand.name}-{cand.index}", labels=labels)
    return _Obj(metadata=meta, spec=_Obj(clusterName=cand.name, engines=engines))


def run_reference(path: str, clusters: list, deployments: list, classes: dict) -> dict[str, Any]:
    ref = load_reference(path)
    rclusters = ref_clusters(clusters, classes)
    observed: list[Any] = []
    placements = []
    per = []
    with Counter() as counter:
        for dep in deployments:
            t0 = time.perf_counter()
            got = ref.schedule(ref_deployment(dep), rclusters, observed)
            per.append(time.perf_counter() - t0)
            observed = [r for r in observed if r.metadata.labels["modelplane.ai/deployment"] != dep["name"]]
            observed += [ref_replica(dep, c) for c in got]
            placements.append([(c.name, c.index, tuple(m.pool for e in c.engines for m in e.members)) for c in got])
    return {"per": per, "evaluations": counter.calls, "placements": placements}


def _placements(result: dict[str, Any]) -> list[tuple[str, int, tuple[str, ...]]]:
    return [
        (r["cluster"], r["index"], tuple(m["pool"] for e in r["engines"] for m in e["members"]))
        for r in result["replicas"]
    ]


# --------------------------------------------------------------------------------------------------------------------


def run_existing(clusters: list, classes: dict, existing: int) -> None:
    """Issue 24: ``existing`` replicas of 1-GPU deployments packed on the fleet, then one new deployment and one re-run
    against them, timed."""
    engine = SelectorEngine()
    per = 1000
    memory = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{q}Gi")) >= 0'

    def dep(name: str, replicas: int, gib: int) -> dict[str, Any]:
        request = {"name": "gpu", "count": 1, "selectors": [{"cel": memory.replace("{q}", str(gib))}]}
        return {
            "name": name,
            "namespace": "ml-team",
            "replicas": replicas,
            "engines": [{"name": "main", "members": [{"role": "Standalone", "node_selector": {"devices": [request]}}]}],
        }

    deployments = [dep(f"existing-{k:02d}", per, 16 + k % 4) for k in range((existing + per - 1) // per)]
    parsed_classes = validate_classes(classes)
    models = validate_clusters(clusters, parsed_classes)
    records: list = []
    t0 = time.perf_counter()
    for d in deployments:
        result = plan(parse(ModelDeployment, d, "deployment"), parsed_classes, models, records, selectors=engine)
        records = [r for r in records if r.deployment != d["name"]] + list(result.replicas)
    built = time.perf_counter() - t0
    shared = sum(1 for r in records for e in r.engines for m in e.members if m.allocations)
    nodes = sum(p["nodes"] for c in clusters for p in c["pools"])
    print(
        f"existing: {len(records)} replicas of {len(deployments)} 1-GPU deployments on {len(clusters)} clusters "
        f"({nodes} nodes), {shared} sharing nodes; built in {built:.2f} s"
    )
    with Counter() as counter:
        t0 = time.perf_counter()
        new = plan(
            parse(ModelDeployment, dep("new", 1000, 20), "deployment"),
            parsed_classes,
            models,
            records,
            selectors=engine,
        )
        t_new = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = plan(
            parse(ModelDeployment, deployments[0], "deployment"), parsed_classes, models, records, selectors=engine
        )
        t_again = time.perf_counter() - t0
    # The module's path: every replica as a dict (the annotations read back: compact, with allocations), validated.
    dicts = [r.to_compact() for r in records]
    t0 = time.perf_counter()
    via_place = place(
        deployment=dep("new", 1000, 20), clusters=clusters, classes=classes, replicas=dicts, selectors=engine
    )
    t_place = time.perf_counter() - t0
    print(
        f"existing: through place() (every replica a dict, validated; {len(dicts)} records): {t_place:.3f} s "
        f"(scheduled {via_place['scheduled']})"
    )
    print(
        f"existing: one new deployment of 1000 1-GPU replicas placed against them in {t_new:.3f} s "
        f"(scheduled {new.scheduled}); {deployments[0]['name']} placed again in {t_again:.3f} s "
        f"(changed: {again.changed}); CEL evaluations {counter.calls}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--clusters", type=int, default=500)
    parser.add_argument("--pools", type=int, default=4)
    parser.add_argument("--deployments", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reference", metavar="PATH", help="a copy of Modelplane's scheduling.py (outside the repo)")
    parser.add_argument("--reference-deployments", type=int, default=2, metavar="N")
    parser.add_argument("--max-seconds", type=float, default=None, help="exit 1 when our total exceeds this")
    parser.add_argument("--dra-depth", action="store_true", help="add constrained / prioritized / All requests")
    parser.add_argument("--existing", type=int, default=0, metavar="N", help="time placements against N replicas")
    args = parser.parse_args()

    if args.existing:
        clusters, _deployments = fleet(args.clusters, args.pools, 1, 1, args.seed, CLASSES, False)
        run_existing(clusters, copy.deepcopy(CLASSES), args.existing)
        return 0

    dra_depth = args.dra_depth and not args.reference
    classes = {**CLASSES, "h100-8x-hgx": HGX_CLASS} if dra_depth else CLASSES
    clusters, deployments = fleet(
        args.clusters, args.pools, args.deployments, args.replicas, args.seed, classes, dra_depth
    )
    selectors = all_selectors(deployments)
    shapes = device_shapes(classes)
    pairs = len(selectors) * len(shapes)
    desired = sum(d["replicas"] for d in deployments)

    # Fresh fleet copies per run: placement must not depend on (or mutate) its inputs.
    ours = run_ours(copy.deepcopy(clusters), copy.deepcopy(deployments), copy.deepcopy(classes))
    scheduled = sum(r["scheduled"] for r in ours["results"])
    print(
        f"fleet: {args.clusters} clusters x {args.pools} pools over {len(classes)} classes "
        f"({len(shapes)} distinct device shapes); {args.deployments} deployments x {args.replicas} replicas, "
        f"{len(selectors)} distinct selectors"
        + (" (half the deployments use constraints, first_available, All)" if dra_depth else "")
    )
    print(
        f"ours: total {ours['total']:.3f} s, {ours['total'] / len(deployments):.4f} s per deployment "
        f"(slowest {max(ours['per']):.4f} s), scheduled {scheduled}/{desired}"
    )
    print(
        f"ours: CEL evaluations {ours['evaluations']} (selector lookups {ours['lookups']}); "
        f"distinct device shape x selector pairs {pairs}; evaluations <= pairs: {ours['evaluations'] <= pairs}"
    )
    fleet_path = run_fleet_path(copy.deepcopy(clusters), copy.deepcopy(deployments), copy.deepcopy(classes))
    print(
        f"ours, the fleet path (deploy.yml: the fleet validated once, one plan per deployment): total {fleet_path:.3f} s"
    )
    again = run_ours(copy.deepcopy(clusters), copy.deepcopy(deployments), copy.deepcopy(classes))
    print(f"ours: deterministic across runs: {[_placements(r) for r in again['results']] == [_placements(r) for r in ours['results']]}")  # fmt: skip

    status = 0
    if args.reference:
        n = max(1, min(args.reference_deployments, len(deployments)))
        ref = run_reference(args.reference, clusters, deployments[:n], CLASSES)
        ours_n = sum(ours["per"][:n])
        ref_n = sum(ref["per"])
        same = ref["placements"] == [_placements(r) for r in ours["results"][:n]]
        print(
            f"reference (first {n} deployment(s)): {ref_n:.3f} s, {ref_n / n:.3f} s per deployment, "
            f"CEL evaluations {ref['evaluations']}"
        )
        print(
            f"ours on the same {n}: {ours_n:.4f} s -> {ref_n / ours_n:.0f}x faster; "
            f"estimated reference total for all {len(deployments)}: {ref_n / n * len(deployments):.1f} s; "
            f"identical placements: {same}"
        )
    if args.max_seconds is not None and ours["total"] > args.max_seconds:
        print(f"FAIL: total {ours['total']:.3f} s exceeds {args.max_seconds} s")
        status = 1
    if ours["evaluations"] > pairs:
        print("FAIL: more CEL evaluations than distinct (device shape x selector) pairs")
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
