"""Deterministic (inference class, member request set) pairs for the DRA differential test (issue 12).

Every pair is a class (a node's devices, as design.md §2 / §2a describe them) and one member's ``node_selector``
(design.md §3a). The differential test (tests/e2e/test_dra_differential.py) asks placement whether a pool of that
class fits the member, and asks the real kube-scheduler whether it allocates the same requests, rendered as a
ResourceClaim, on a node of that pool. The generator only produces inputs: the expected answer is whatever the
real allocator says.

Coverage (``Pair.features`` names what a pair exercises):
  exact counts 1..8 and claims beyond the 32-device limit across several device entries; several device entries per
  class including a second driver (RDMA NICs); per-device ``instances`` (pcieRoot, numaNode, nvlinkDomain,
  productName, memory); CEL selectors over attributes, capacity (``compareTo(quantity(...))``), versions and the
  driver; ``allocation_mode: All`` matching some, zero or too many devices; ``first_available`` with 2-3 alternatives
  where the first, a later or none fits; ``constraints`` with ``match_attribute`` over one request, several requests,
  every request, a ``first_available`` parent or one of its alternatives, and over attributes some devices lack.

Every request names its DeviceClass explicitly; the local fleet creates one DeviceClass per name that selects the
devices of the driver (scripts/localfleet device_classes()), and every class here uses the driver's name as its
device class name, so DeviceClass and driver coincide.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

GPU = "gpu.nvidia.com"
NIC = "rdma.example.com"
STD = "resource.kubernetes.io"  # the standard attribute domain (resource.kubernetes.io/pcieRoot)
GPU_CLASS = GPU
NIC_CLASS = NIC

PRODUCTS: dict[str, dict[str, Any]] = {
    "H100": {"productName": "NVIDIA H100 80GB HBM3", "architecture": "Hopper", "cc": "9.0.0", "memory": "81559Mi"},
    "A100": {"productName": "NVIDIA A100-SXM4-40GB", "architecture": "Ampere", "cc": "8.0.0", "memory": "40960Mi"},
    "A100-80": {"productName": "NVIDIA A100-SXM4-80GB", "architecture": "Ampere", "cc": "8.0.0", "memory": "81920Mi"},
    "L4": {"productName": "NVIDIA L4", "architecture": "Ada Lovelace", "cc": "8.9.0", "memory": "23034Mi"},
}


@dataclass
class Pair:
    """One differential case: a class, a member's node_selector, and what it exercises."""

    id: str
    class_name: str
    node_selector: dict[str, Any]
    features: list[str] = field(default_factory=list)

    @property
    def pool(self) -> str:
        return self.id

    @property
    def node(self) -> str:
        """The Node scripts/localfleet creates for this pair's pool (node_count 1)."""
        return f"{self.id}-0"


# --------------------------------------------------------------------------------------------------------------------
# Classes
# --------------------------------------------------------------------------------------------------------------------


def _s(v: str) -> dict[str, str]:
    return {"string": v}


def _i(v: int) -> dict[str, int]:
    return {"int": v}


def gpu_entry(name: str, product: str, count: int, instances: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    p = PRODUCTS[product]
    entry: dict[str, Any] = {
        "name": name,
        "claim": "DRA",
        "driver": GPU,
        "device_class_name": GPU_CLASS,
        "count": count,
        "attributes": {
            "productName": _s(p["productName"]),
            "architecture": _s(p["architecture"]),
            "cudaComputeCapability": {"version": p["cc"]},
        },
        "capacity": {"memory": {"value": p["memory"]}},
    }
    if instances is not None:
        assert len(instances) == count
        entry["instances"] = instances
    return entry


def nic_entry(name: str, count: int, instances: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "claim": "DRA",
        "driver": NIC,
        "device_class_name": NIC_CLASS,
        "count": count,
        "attributes": {"linkType": _s("InfiniBand"), "rateGbps": _i(400)},
    }
    if instances is not None:
        assert len(instances) == count
        entry["instances"] = instances
    return entry


def _gpu_locality(i: int, roots: int, numas: int, per_root: int, nvlink: list[int] | None) -> dict[str, Any]:
    """A GPU's locality attributes: pcieRoot both in the driver's domain and the standard one."""
    root = f"pci{(i // per_root) % roots:04x}:00"
    attrs: dict[str, Any] = {
        "pcieRoot": _s(root),
        f"{STD}/pcieRoot": _s(root),
        "numaNode": _i((i * numas) // max(1, roots * per_root) % numas),
        "index": _i(i),
    }
    if nvlink is not None and nvlink[i] >= 0:
        attrs["nvlinkDomain"] = _i(nvlink[i])
    return {"attributes": attrs}


def _nic_locality(i: int, roots: int, numas: int) -> dict[str, Any]:
    root = f"pci{i % roots:04x}:00"
    # The NIC's own (rdma.example.com) pcieRoot and the standard one; never gpu.nvidia.com/pcieRoot.
    return {"attributes": {"pcieRoot": _s(root), f"{STD}/pcieRoot": _s(root), "numaNode": _i((i * numas) // roots)}}


def make_classes(rng: random.Random) -> dict[str, dict[str, Any]]:
    """The inference classes of the differential fleet: fixed families plus seeded random ones."""
    classes: dict[str, dict[str, Any]] = {}

    def add(name: str, devices: list[dict[str, Any]]) -> None:
        classes[name] = {"description": f"dra-diff {name}", "devices": devices}

    # HGX H100: 8 GPUs, 2 per PCIe root, 4 per NUMA node, one NVLink domain; 4 NICs, one per root.
    add(
        "hgx-h100",
        [
            gpu_entry("gpu", "H100", 8, [_gpu_locality(i, 4, 2, 2, [0] * 8) for i in range(8)]),
            nic_entry("nic", 4, [_nic_locality(i, 4, 2) for i in range(4)]),
        ],
    )
    # The same box split into two NVLink domains of 4, and only 2 NICs (roots 0 and 2).
    add(
        "hgx-h100-split",
        [
            gpu_entry("gpu", "H100", 8, [_gpu_locality(i, 4, 2, 2, [i // 4] * 8) for i in range(8)]),
            nic_entry("nic", 2, [_nic_locality(2 * i, 4, 2) for i in range(2)]),
        ],
    )
    # "H100 else two A100s": one H100 and two A100 entries of one device each, on different roots.
    add(
        "mixed-h100-a100",
        [
            gpu_entry("h100", "H100", 1, [_gpu_locality(0, 3, 1, 1, [0, -1, -1])]),
            gpu_entry("a100a", "A100", 1, [_gpu_locality(1, 3, 1, 1, [-1, 1, -1])]),
            gpu_entry("a100b", "A100", 1, [_gpu_locality(2, 3, 1, 1, [-1, -1, 1])]),
        ],
    )
    # Four A100s whose memory differs per device (two 40 GB, two 80 GB): per-device productName and capacity.
    add(
        "a100x4-mixedmem",
        [
            gpu_entry(
                "gpu",
                "A100",
                4,
                [
                    {
                        "attributes": {
                            "pcieRoot": _s(f"pci{i // 2:04x}:00"),
                            "numaNode": _i(i // 2),
                            **({"productName": _s(PRODUCTS["A100-80"]["productName"])} if i >= 2 else {}),
                        },
                        **({"capacity": {"memory": {"value": PRODUCTS["A100-80"]["memory"]}}} if i >= 2 else {}),
                    }
                    for i in range(4)
                ],
            )
        ],
    )
    # Only some GPUs are on an NVLink domain (the attribute is missing on the others).
    add(
        "sparse-nvlink",
        [gpu_entry("gpu", "H100", 4, [_gpu_locality(i, 2, 1, 2, [0, 0, -1, -1]) for i in range(4)])],
    )
    # Plain identical devices (no instances).
    for n in (1, 2, 4):
        add(f"l4x{n}", [gpu_entry("gpu", "L4", n)])
    add("l4x2-nic2", [gpu_entry("gpu", "L4", 2), nic_entry("nic", 2)])
    # Wide: 3 entries of 16 identical L4s (48 devices): claims beyond the 32-device limit across entries.
    add("wide-l4x48", [gpu_entry(f"gpu{k}", "L4", 16) for k in range(3)])
    # Wide with a second driver: 24 GPUs in two entries and 12 NICs.
    add(
        "wide-mixed",
        [gpu_entry("gpua", "L4", 12), gpu_entry("gpub", "A100", 12), nic_entry("nic", 12)],
    )

    # Selectors over an attribute only some devices have (a CEL runtime error on the others), in both orders: the
    # devices without numaNode listed first, then last. And numaNode typed int on two devices, string on two.
    bare = gpu_entry("bare", "H100", 2)
    local = gpu_entry("local", "H100", 2, [{"attributes": {"numaNode": _i(i)}} for i in range(2)])
    add("cel-order", [bare, local])
    add("cel-order-rev", [copy.deepcopy(local), copy.deepcopy(bare)])
    add(
        "typed-mix",
        [
            gpu_entry("gpu", "H100", 4, [{"attributes": {"numaNode": _i(0) if i < 2 else _s("0")}} for i in range(4)]),
        ],
    )

    # Seeded random classes: 1-3 GPU entries, optional NICs, per-device locality.
    for k in range(6):
        devices: list[dict[str, Any]] = []
        entries = rng.randint(1, 3)
        products = rng.sample(sorted(PRODUCTS), entries)
        offset = 0
        roots = rng.choice([1, 2, 4])
        for e, product in enumerate(products):
            count = rng.choice([1, 2, 2, 4, 4, 8])
            with_instances = rng.random() < 0.7
            nvl = [rng.choice([0, 0, 1, -1]) for _gpu in range(offset + count)]
            per_root = rng.choice([1, 2])
            numas = rng.choice([1, 2])
            devices.append(
                gpu_entry(
                    f"g{e}",
                    product,
                    count,
                    [_gpu_locality(offset + i, roots, numas, per_root, nvl) for i in range(count)]
                    if with_instances
                    else None,
                )
            )
            offset += count
        if rng.random() < 0.6:
            n = rng.randint(1, 4)
            devices.append(nic_entry("nic", n, [_nic_locality(i, roots, 1) for i in range(n)]))
        add(f"rand-{k}", devices)
    return classes


def slice_devices(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The ResourceSlice devices a class entry publishes (design.md §2a), for the generator's own choices."""
    out = []
    for i in range(entry.get("count", 1)):
        inst = (entry.get("instances") or [{}] * entry.get("count", 1))[i]
        out.append(
            {
                "name": f"{entry['name']}-{i}",
                "driver": entry["driver"],
                "attributes": {**entry.get("attributes", {}), **inst.get("attributes", {})},
                "capacity": {**entry.get("capacity", {}), **inst.get("capacity", {})},
            }
        )
    return out


# --------------------------------------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------------------------------------


def _attr(name: str, domain: str = GPU) -> str:
    return f'device.attributes["{domain}"].{name}'


SEL_PRODUCT = {p: f'{_attr("productName")} == "{v["productName"]}"' for p, v in PRODUCTS.items()}
SEL_HOPPER = f'{_attr("architecture")} == "Hopper"'
SEL_AMPERE = f'{_attr("architecture")} == "Ampere"'
SEL_IS_GPU = f'device.driver == "{GPU}"'
SEL_IS_NIC = f'device.driver == "{NIC}"'


def sel_mem_at_least(q: str) -> str:
    return f'device.capacity["{GPU}"].memory.compareTo(quantity("{q}")) >= 0'


def sel_cc_at_least(v: str) -> str:
    return f'{_attr("cudaComputeCapability")}.compareTo(semver("{v}")) >= 0'


def sel_numa(n: int, domain: str = GPU) -> str:
    return f"{_attr('numaNode', domain)} == {n}"


def sel_root(root: str) -> str:
    return f'device.attributes["{STD}"].pcieRoot == "{root}"'


def req(
    name: str, count: int | None = 1, selectors: list[str] | None = None, *, klass: str = GPU_CLASS, all_: bool = False
) -> dict[str, Any]:
    """A node_selector device request (design.md §3a); ``all_`` for allocation_mode All (no count)."""
    out: dict[str, Any] = {"name": name, "device_class_name": klass}
    if all_:
        out["allocation_mode"] = "All"
    else:
        out["count"] = count
    out["selectors"] = [{"cel": s} for s in (selectors or [])]
    return out


def first_available(name: str, *alternatives: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "first_available": list(alternatives)}


def match(attribute: str, *requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"match_attribute": attribute}
    if requests:
        out["requests"] = list(requests)
    return out


def selector(devices: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"devices": devices}
    if constraints:
        out["constraints"] = constraints
    return out


def _gpu_selectors(rng: random.Random, devs: list[dict[str, Any]]) -> list[str]:
    """0-2 selectors drawn from what the class's GPUs look like (so that they are true for some, false for others)."""
    pool = [SEL_IS_GPU, SEL_HOPPER, SEL_AMPERE, sel_mem_at_least(rng.choice(["16Gi", "40Gi", "64Gi", "80Gi"]))]
    pool.append(sel_cc_at_least(rng.choice(["8.0.0", "8.9.0", "9.0.0"])))
    products = sorted({d["attributes"]["productName"]["string"] for d in devs if "productName" in d["attributes"]})
    pool += [f'{_attr("productName")} == "{p}"' for p in products]
    if any("numaNode" in d["attributes"] for d in devs):
        pool.append(sel_numa(rng.choice([0, 1])))
    k = rng.choice([0, 1, 1, 2])
    return rng.sample(pool, k)


def requests_for(name: str, klass: dict[str, Any], rng: random.Random) -> list[tuple[list[str], dict[str, Any]]]:
    """Request sets for one class: (features, node_selector) with parameters drawn around the class's contents."""
    devices = [d for e in klass["devices"] for d in slice_devices(e)]
    gpus = [d for d in devices if d["driver"] == GPU]
    nics = [d for d in devices if d["driver"] == NIC]
    n_gpu, n_nic = len(gpus), len(nics)
    out: list[tuple[list[str], dict[str, Any]]] = []

    def add(features: list[str], ns: dict[str, Any]) -> None:
        out.append((features, ns))

    # Exact counts with selectors, around the number of GPUs the node has.
    for _draw in range(3):
        c = rng.randint(1, 8)
        add(["exact", "selectors"], selector([req("gpu", c, _gpu_selectors(rng, gpus))]))
    # Several requests over several entries / both drivers.
    if n_nic:
        add(
            ["exact", "two-drivers"],
            selector(
                [
                    req("gpu", rng.randint(1, max(1, n_gpu)), [SEL_IS_GPU]),
                    req("nic", rng.randint(1, 3), klass=NIC_CLASS),
                ]
            ),
        )
    add(
        ["exact", "multi-request"],
        selector(
            [
                req("a", rng.randint(1, 4), _gpu_selectors(rng, gpus)),
                req("b", rng.randint(1, 4), _gpu_selectors(rng, gpus)),
            ]
        ),
    )
    # allocation_mode All: matching some devices, none, or overlapping an exact request.
    if n_nic:
        add(["all"], selector([req("gpu", 1), req("nic", None, klass=NIC_CLASS, all_=True)]))
    add(["all", "all-none"], selector([req("gpu", None, [f'{_attr("productName")} == "no such GPU"'], all_=True)]))
    add(["all"], selector([req("gpu", None, _gpu_selectors(rng, gpus)[:1], all_=True)]))
    add(["all", "all-overlap"], selector([req("one", 1), req("rest", None, [SEL_IS_GPU], all_=True)]))
    # first_available: the first, a later, or no alternative fits.
    alts = [
        req("h100", 1, [SEL_PRODUCT["H100"]]),
        req("a100x2", 2, [SEL_AMPERE]),
        req("l4x4", 4, [SEL_PRODUCT["L4"]]),
    ]
    rng.shuffle(alts)
    add(["first-available"], selector([first_available("accel", *alts[: rng.choice([2, 3])])]))
    # An All alternative that matches nothing (All needs at least one device) before one that fits.
    nothing = [f'{_attr("productName")} == "no such GPU"']
    add(
        ["first-available", "all", "all-none"],
        selector([first_available("accel", req("none", None, nothing, all_=True), req("one", 1))]),
    )
    add(
        ["first-available", "first-too-big"],
        # One more than the node has (beyond 12 GPUs: beyond the claim limit, or upstream's exhaustive search of an
        # infeasible count over n identical devices, 2^n steps, outlasts the scheduler's 10 s filter timeout).
        selector(
            [first_available("accel", req("many", n_gpu + 1 if n_gpu <= 12 else 33), req("some", max(1, n_gpu // 2)))]
        ),
    )
    # Constraints over one request (locality of a TP group).
    attrs = ["pcieRoot", "numaNode", "nvlinkDomain", "productName"]
    for attr in rng.sample(attrs, 2):
        c = rng.choice([2, 2, 4, 8])
        add(["constraints", "match-one"], selector([req("gpu", c)], [match(f"{GPU}/{attr}", "gpu")]))
    if n_nic:
        # GPU + NIC on the same PCIe root (standard attribute), named and implicit (all requests).
        c = rng.choice([1, 2, 2, 4])
        add(
            ["constraints", "match-several", "two-drivers"],
            selector([req("gpu", c), req("nic", 1, klass=NIC_CLASS)], [match(f"{STD}/pcieRoot", "gpu", "nic")]),
        )
        add(
            ["constraints", "match-all-requests", "two-drivers"],
            selector([req("gpu", rng.choice([1, 2])), req("nic", 1, klass=NIC_CLASS)], [match(f"{STD}/pcieRoot")]),
        )
        # The NIC lacks gpu.nvidia.com/pcieRoot (it publishes rdma.example.com/pcieRoot): never satisfiable.
        add(
            ["constraints", "match-missing-attr", "two-drivers"],
            selector([req("gpu", 1), req("nic", 1, klass=NIC_CLASS)], [match(f"{GPU}/pcieRoot", "gpu", "nic")]),
        )
        # All NICs on one root as the GPUs.
        add(
            ["constraints", "all", "two-drivers"],
            selector(
                [req("gpu", 1), req("nic", None, klass=NIC_CLASS, all_=True)], [match(f"{STD}/pcieRoot", "gpu", "nic")]
            ),
        )
    local_nics = [d for d in nics if f"{STD}/pcieRoot" in d["attributes"]]
    if len(local_nics) >= 2:
        # An All request whose device breaks a constraint: upstream treats this as an error ("cannot add device ...
        # because a claim constraint would not be satisfied"), not as a reason to backtrack. Here the GPU chosen
        # first sits on another root than the one NIC the All request selects; a GPU on the NIC's root exists.
        last = local_nics[-1]["attributes"][f"{STD}/pcieRoot"]["string"]
        one_nic = req("nic", None, [sel_root(last)], klass=NIC_CLASS, all_=True)
        pcie = match(f"{STD}/pcieRoot", "gpu", "nic")
        add(["constraints", "all", "all-constraint", "two-drivers"], selector([req("gpu", 1), one_nic], [pcie]))
        # The same requests in the other order: the All request fixes the root first.
        add(["constraints", "all", "all-constraint", "two-drivers"], selector([one_nic, req("gpu", 1)], [pcie]))
        # An All alternative that breaks the constraint before one that keeps it.
        add(
            ["constraints", "all", "all-constraint", "first-available", "two-drivers"],
            selector(
                [
                    req("gpu", 1),
                    first_available(
                        "nic", req("every", None, klass=NIC_CLASS, all_=True), req("one", 1, klass=NIC_CLASS)
                    ),
                ],
                [pcie],
            ),
        )
    # Constraint over a first_available parent, and over one alternative.
    add(
        ["constraints", "first-available", "match-parent"],
        selector(
            [
                req("gpu", 1, [SEL_HOPPER]),
                first_available("peer", req("same", 1, [SEL_HOPPER]), req("any", 1, [SEL_AMPERE])),
            ],
            [match(f"{GPU}/{rng.choice(['pcieRoot', 'nvlinkDomain', 'numaNode'])}", "gpu", "peer")],
        ),
    )
    add(
        ["constraints", "first-available", "match-subrequest"],
        selector(
            [first_available("tp", req("four", 4), req("two", 2)), req("extra", 1)],
            [match(f"{GPU}/{rng.choice(['nvlinkDomain', 'numaNode'])}", "tp/four")],
        ),
    )
    # An attribute only some devices have (nvlinkDomain is missing on some GPUs of several classes).
    add(
        ["constraints", "match-missing-attr"],
        selector([req("gpu", rng.choice([2, 3]))], [match(f"{GPU}/nvlinkDomain")]),
    )
    return out


def cel_error_requests() -> list[tuple[list[str], dict[str, Any]]]:
    """Selectors that fail to evaluate on some devices (a missing attribute): upstream's allocator stops with an
    error as soon as it evaluates one on such a device, so the order it visits devices in matters."""
    numa0, numa_any = sel_numa(0), f"{_attr('numaNode')} >= 0"
    guarded = f"has({_attr('numaNode')}) && {_attr('numaNode')} == 0"
    f = ["selectors", "cel-error"]
    return [
        (["exact", *f], selector([req("gpu", 1, [numa0])])),
        (["exact", *f], selector([req("gpu", 2, [numa0])])),
        (["exact", *f], selector([req("gpu", 2, [numa_any])])),
        (["exact", *f], selector([req("gpu", 1, [guarded])])),
        (["exact", *f], selector([req("gpu", 1, [SEL_PRODUCT["L4"], numa0])])),
        (["exact", *f], selector([req("gpu", 1, [SEL_HOPPER, numa_any])])),
        (["exact", "multi-request", *f], selector([req("any", 1), req("local", 1, [numa0])])),
        (["all", *f], selector([req("gpu", None, [numa0], all_=True)])),
        (["all", *f], selector([req("gpu", None, [guarded], all_=True)])),
        (["first-available", *f], selector([first_available("gpu", req("local", 1, [numa0]), req("any", 1))])),
        # An All alternative is evaluated on every device before the search, even when a later one would do.
        (
            ["first-available", "all", *f],
            selector([first_available("gpu", req("every", None, [numa0], all_=True), req("any", 1))]),
        ),
        # Devices an earlier request took are skipped before selectors are evaluated on them.
        (["exact", "multi-request", *f], selector([req("one", 1, [sel_numa(1)]), req("zero", 1, [numa0])])),
        (["exact", "multi-request", *f], selector([req("zero", 1, [numa0]), req("rest", 3)])),
        (["exact", "multi-request", *f], selector([req("two", 2), req("local", 1, [numa_any])])),
        (["constraints", "match-one"], selector([req("gpu", 2)], [match(f"{GPU}/numaNode", "gpu")])),
        (["constraints", "match-one"], selector([req("gpu", 3)], [match(f"{GPU}/numaNode", "gpu")])),
    ]


def cel_library_requests() -> list[tuple[list[str], dict[str, Any]]]:
    """Selectors over the CEL library Kubernetes gives DRA (strings, regular expressions, lists, quantities, semver,
    optionals, cross-type numbers), on a class whose devices all have every attribute used (no evaluation errors)."""
    a, mem = _attr, f'device.capacity["{GPU}"].memory'
    exprs = [
        (f'{a("productName")}.matches("^NVIDIA H[0-9]+ ")', 1),
        (f'{a("productName")}.startsWith("NVIDIA A")', 1),
        (f'{a("productName")}.lowerAscii().contains("h100")', 1),
        (f'{a("productName")} in ["NVIDIA L4", "{PRODUCTS["H100"]["productName"]}"]', 1),
        (f"size({a('productName')}) > 30", 1),
        (f'{mem}.isGreaterThan(quantity("80Gi"))', 1),
        (f'{mem}.compareTo(quantity("79Gi")) > 0', 8),
        (f"{mem}.asApproximateFloat() > 8.5e10", 1),
        (f'{a("cudaComputeCapability")}.isLessThan(semver("9.0.0"))', 1),
        (f'{a("cudaComputeCapability")}.isGreaterThan(semver("8.9.9"))', 8),
        (f"{a('numaNode')} < 1.5", 8),
        (f"{a('numaNode')} + 1 == 2", 4),
        (f"{a('index')} % 2 == 0", 4),
        (f"{a('index')} % 2 == 0", 5),
        (f'{a("pcieRoot")}.split(":")[0] == "pci0001"', 2),
        (f'"nvlinkDomain" in device.attributes["{GPU}"]', 8),
        (f"{a('numaNode').replace('.numaNode', '.?numaNode')}.orValue(-1) == 1", 4),
        (f'device.attributes["{GPU}"].?noSuchAttribute.orValue(0) == 0', 1),
    ]
    return [(["exact", "selectors", "cel-library"], selector([req("gpu", n, [e])])) for e, n in exprs]


def over_limit_requests(rng: random.Random, n_gpu: int) -> list[tuple[list[str], dict[str, Any]]]:
    """Request sets for the wide classes: claims around the 32-device limit across several entries.

    Only counts the node can hold, or counts beyond the limit: an infeasible count below the limit over n identical
    devices makes upstream's exhaustive search take ~2^n steps (beyond the scheduler's filter timeout for n = 24)."""
    out: list[tuple[list[str], dict[str, Any]]] = []
    for total in (30, 32, 33, 40):
        if total <= 32 < n_gpu or total > 32:
            a = rng.randint(total // 3, total // 2)
            out.append((["exact", "limit"], selector([req("a", a), req("b", total - a)])))
    out.append((["exact", "limit"], selector([req("gpu", min(32, n_gpu))])))
    out.append((["exact", "limit"], selector([req("gpu", 33)])))
    # A first alternative beyond the limit is skipped; the second fits.
    out.append((["first-available", "limit"], selector([first_available("gpus", req("x40", 40), req("x24", 24))])))
    rest = min(8, n_gpu - 20)
    out.append(
        (
            ["first-available", "limit"],
            selector([req("a", 20), first_available("b", req("x16", 16), req(f"x{rest}", rest))]),
        )
    )
    # All matching more devices than one claim may hold.
    out.append((["all", "limit"], selector([req("gpu", None, [SEL_IS_GPU], all_=True)])))
    # An All alternative beyond the limit is skipped for the next one.
    out.append(
        (
            ["all", "first-available", "limit"],
            selector([first_available("gpus", req("every", None, [SEL_IS_GPU], all_=True), req("four", 4))]),
        )
    )
    out.append(
        (["all", "limit"], selector([req("gpu", None, [SEL_PRODUCT["L4"]], all_=True), req("nic", 1, klass=NIC_CLASS)]))
    )
    return out


def generate(seed: int = 12, repeat: int = 1) -> tuple[dict[str, dict[str, Any]], list[Pair]]:
    """Classes and pairs; deterministic for a seed. ``repeat`` draws that many request sets per class and family."""
    rng = random.Random(seed)
    classes = make_classes(rng)
    pairs: list[Pair] = []
    for _round in range(repeat):
        for name in sorted(classes):
            sets = requests_for(name, classes[name], rng)
            if name.startswith(("cel-", "typed-")):
                sets = cel_error_requests()
            if name == "hgx-h100":
                sets += cel_library_requests()
            if name.startswith("wide"):
                sets += over_limit_requests(
                    rng, sum(d.get("count", 1) for d in classes[name]["devices"] if d["driver"] == GPU)
                )
            for features, ns in sets:
                pairs.append(Pair(f"p{len(pairs):03d}", name, copy.deepcopy(ns), features))
    return classes, pairs


# --------------------------------------------------------------------------------------------------------------------
# Several pods per node (design.md §12, issue 24): steps of identical pods on one node, one step after the other
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class Packing:
    """One node of a class and steps of pods for it: step ``k`` is ``attempts`` pods of one member's claim, created
    once every pod of step ``k - 1`` is decided. Placement's answer per step (replicas of a deployment placed against
    the earlier steps' replicas on a one-node pool) must equal how many of the step's pods kube-scheduler binds."""

    id: str
    class_name: str
    steps: list[tuple[dict[str, Any], int]]
    features: list[str] = field(default_factory=list)

    @property
    def pool(self) -> str:
        return self.id

    @property
    def node(self) -> str:
        return f"{self.id}-0"


XID = {"key": f"{GPU}/xid", "value": "79", "effect": "NoSchedule"}
ECC = {"key": f"{GPU}/ecc", "effect": "NoExecute"}
INFO = {"key": f"{GPU}/info", "value": "hot", "effect": "None"}


def packing_classes() -> dict[str, dict[str, Any]]:
    """Classes of the packing scenarios beyond the pairs' (design.md §12): device taints, a GPU shared by memory
    (consumable capacity), and MIG profiles on shared counters (partitionable devices)."""
    tainted = gpu_entry("gpu", "H100", 4, [{"taints": [XID]}, {"taints": [ECC]}, {"taints": [INFO]}, {}])
    shared = gpu_entry("gpu", "H100", 2, [{"attributes": {"uuid": _s(f"GPU-{k}")}} for k in range(2)])
    shared["allow_multiple_allocations"] = True
    shared["capacity"] = {
        "memory": {
            "value": "80Gi",
            "request_policy": {"default": "10Gi", "valid_range": {"min": "10Gi", "step": "10Gi"}},
        }
    }

    def profile(name: str, count: int, per_gpu: int, memory: str, sms: str) -> dict[str, Any]:
        entry = gpu_entry(name, "H100", count)
        entry["attributes"]["profile"] = _s(name)
        entry["consumes_counters"] = [
            {
                "counter_set": f"gpu-{{i//{per_gpu}}}" if per_gpu > 1 else "gpu-{i}",
                "counters": {"memory": {"value": memory}, "multiprocessors": {"value": sms}},
            }
        ]
        return entry

    mig = {
        "description": "dra-diff mig-h100x2",
        "shared_counters": [
            {
                "name": "gpu-{i}",
                "count": 2,
                "counters": {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "132"}},
            }
        ],
        "devices": [
            profile("full", 2, 1, "80Gi", "132"),
            profile("mig-3g40gb", 4, 2, "40Gi", "60"),
            profile("mig-1g10gb", 8, 4, "10Gi", "16"),
        ],
    }
    return {
        "tainted-h100x4": {"description": "dra-diff tainted-h100x4", "devices": [tainted]},
        "shared-h100x2": {"description": "dra-diff shared-h100x2", "devices": [shared]},
        "mig-h100x2": mig,
    }


def tolerate(request: dict[str, Any], *tolerations: dict[str, Any]) -> dict[str, Any]:
    return {**request, "tolerations": list(tolerations)}


def memory(request: dict[str, Any], amount: str) -> dict[str, Any]:
    return {**request, "capacity": {"requests": {"memory": amount}}}


def packings(classes: dict[str, dict[str, Any]], seed: int = 12) -> list[Packing]:
    """The packing scenarios: fixed ones over the differential fleet's classes, then seeded ones over its random
    classes. Counts stay within what upstream's exhaustive search decides quickly (at most 12 identical devices)."""
    rng = random.Random(seed * 7919 + 24)
    out: list[Packing] = []

    def add(class_name: str, features: list[str], *steps: tuple[dict[str, Any], int]) -> None:
        out.append(Packing(f"k{len(out):03d}", class_name, [copy.deepcopy(s) for s in steps], ["packing", *features]))

    one = selector([req("gpu", 1)])
    add("hgx-h100", ["exact"], (one, 10))
    add(
        "hgx-h100",
        ["exact", "several-deployments"],
        (one, 1),
        (selector([req("gpu", 4, [SEL_HOPPER])]), 3),
        (selector([req("gpu", 2)]), 3),
        (one, 5),
    )
    pcie = match(f"{STD}/pcieRoot", "gpu", "nic")
    add(
        "hgx-h100",
        ["constraints", "match-several", "two-drivers"],
        (selector([req("gpu", 2), req("nic", 1, klass=NIC_CLASS)], [pcie]), 6),
    )
    nvlink = match(f"{GPU}/nvlinkDomain", "gpu")
    add("hgx-h100-split", ["constraints", "match-one"], (selector([req("gpu", 4)], [nvlink]), 3), (one, 2))
    add(
        "hgx-h100-split",
        ["constraints", "match-one", "several-deployments"],
        (one, 1),
        (selector([req("gpu", 4)], [nvlink]), 3),
    )
    add(
        "l4x2-nic2",
        ["all", "two-drivers", "several-deployments"],
        (selector([req("nic", 1, klass=NIC_CLASS)]), 1),
        (selector([req("gpu", 1), req("nic", None, klass=NIC_CLASS, all_=True)]), 2),
        (selector([req("gpu", 1)]), 3),
    )
    add(
        "l4x2-nic2",
        ["first-available", "two-drivers"],
        (selector([first_available("nic", req("two", 2, klass=NIC_CLASS), req("one", 1, klass=NIC_CLASS))]), 3),
    )
    add(
        "hgx-h100",
        ["first-available", "several-deployments"],
        (one, 1),
        (selector([first_available("accel", req("eight", 8), req("four", 4))]), 3),
    )
    numa0 = [sel_numa(0)]
    # Devices in use are skipped before selectors are evaluated on them: the bare GPUs (no numaNode, a CEL runtime
    # error for a numaNode selector) are taken first, then the selector only meets the GPUs that have the attribute.
    add(
        "cel-order",
        ["cel-error", "several-deployments"],
        (selector([req("gpu", 2)]), 1),
        (selector([req("gpu", 1, numa0)]), 2),
    )
    add("cel-order-rev", ["cel-error"], (selector([req("gpu", 1, numa0)]), 2))
    add(
        "a100x4-mixedmem",
        ["selectors", "several-deployments"],
        (selector([req("gpu", 1, [sel_mem_at_least("64Gi")])]), 1),
        (selector([req("gpu", 2, [sel_mem_at_least("16Gi")])]), 2),
        (selector([req("gpu", 1, [sel_mem_at_least("64Gi")])]), 2),
    )
    add("l4x4", ["exact", "several-deployments"], (one, 2), (selector([req("gpu", 2)]), 2), (one, 2))
    add("sparse-nvlink", ["constraints", "match-missing-attr"], (selector([req("gpu", 2)], [nvlink]), 2))
    add(
        "wide-mixed",
        ["exact", "selectors"],
        (selector([req("gpu", 8, [SEL_PRODUCT["L4"]])]), 3),
        (selector([req("gpu", 4, [SEL_AMPERE]), req("nic", 2, klass=NIC_CLASS)]), 4),
    )
    # Device taints: NoSchedule and NoExecute keep untolerating claims off, None does not; a toleration lets one on.
    add(
        "tainted-h100x4",
        ["taints", "several-deployments"],
        (one, 5),
        (selector([tolerate(req("gpu", 1), {"key": f"{GPU}/xid", "operator": "Exists", "effect": "NoSchedule"})]), 3),
        # An effect-less toleration lets the NoExecute GPU be allocated, and the pod be evicted moments later
        # (kube-controller-manager's device taint eviction wants effect NoExecute): it does not count.
        (selector([tolerate(req("gpu", 1), {"operator": "Exists"})]), 2),
        (selector([tolerate(req("gpu", 1), {"key": f"{GPU}/ecc", "operator": "Exists", "effect": "NoExecute"})]), 2),
    )
    every_taint = [
        {"key": f"{GPU}/xid", "operator": "Exists", "effect": "NoSchedule"},
        {"key": f"{GPU}/ecc", "operator": "Exists", "effect": "NoExecute"},
    ]
    add(
        "tainted-h100x4",
        ["taints", "all"],
        (selector([req("gpu", None, all_=True)]), 1),
        (selector([tolerate(req("gpu", None, all_=True), {"operator": "Exists"})]), 1),
        (selector([tolerate(req("gpu", None, all_=True), *every_taint)]), 1),
    )
    add(
        "tainted-h100x4",
        ["taints", "first-available"],
        (
            selector(
                [
                    first_available(
                        "gpu", req("two", 2), tolerate(req("any", 2), {"key": f"{GPU}/ecc", "operator": "Exists"})
                    )
                ]
            ),
            2,
        ),
    )
    # Consumable capacity: two models share a GPU by memory (30Gi, then 45Gi rounding up to 50Gi), the default (10Gi)
    # when a claim asks for none, and distinct_attribute keeping two requests of one claim on two GPUs.
    add(
        "shared-h100x2",
        ["consumable-capacity", "several-deployments"],
        (selector([memory(req("gpu", 1), "30Gi")]), 5),
        (selector([memory(req("gpu", 1), "45Gi")]), 2),
        (selector([req("gpu", 1)]), 5),
    )
    add(
        "shared-h100x2",
        ["consumable-capacity", "distinct"],
        (
            selector(
                [memory(req("a", 1), "20Gi"), memory(req("b", 1), "20Gi")],
                [{"requests": ["a", "b"], "distinct_attribute": f"{GPU}/uuid"}],
            ),
            3,
        ),
        (selector([memory(req("gpu", 1), "30Gi")]), 3),
    )
    # MIG: profiles consume their GPU's counters; whole GPUs need untouched counter sets.
    prof = [lambda p: f'device.attributes["{GPU}"].profile == "{p}"'][0]
    add(
        "mig-h100x2",
        ["counters", "several-deployments"],
        (selector([req("gpu", 1, [prof("mig-3g40gb")])]), 5),
        (selector([req("gpu", 1, [prof("mig-1g10gb")])]), 3),
    )
    add(
        "mig-h100x2",
        ["counters", "several-deployments"],
        (selector([req("gpu", 1, [prof("mig-1g10gb")])]), 5),
        (selector([req("gpu", 1, [prof("full")])]), 2),
        (selector([req("gpu", 1, [prof("mig-3g40gb")])]), 3),
    )
    # Seeded: two or three steps of exact requests (some constrained) over the random classes.
    for name in sorted(c for c in classes if c.startswith("rand-")):
        devices = [d for e in classes[name]["devices"] for d in slice_devices(e)]
        gpus = [d for d in devices if d["driver"] == GPU]
        steps = []
        for _step in range(rng.choice([2, 3])):
            count = rng.choice([1, 1, 2, 3])
            constraints = [match(f"{GPU}/{rng.choice(['pcieRoot', 'numaNode'])}", "gpu")] if rng.random() < 0.3 else []
            ns = selector([req("gpu", count, _gpu_selectors(rng, gpus)[:1])], constraints)
            steps.append((ns, len(gpus) // count + 1))
        add(name, ["exact", "selectors", "several-deployments"], *steps)
    return out


def packing_placement(
    pack: Packing, classes: dict[str, dict[str, Any]], place: Any, kubernetes_version: str = "1.36"
) -> list[tuple[int, dict[str, Any] | None, str]]:
    """Placement's answer per step of ``pack``: ``(replicas placed, a placed member record or None, why not more)``.
    Step ``k`` is a deployment of ``attempts`` replicas, placed (``place``: placement.place) on the scenario's one-node
    pool against the replicas of the steps before it, as the deploy playbook places deployment after deployment."""
    cluster = {
        "name": CLUSTER,
        "pools": [{"name": pack.pool, "class": pack.class_name, "nodes": 1}],
        "kubernetes_version": kubernetes_version,
    }
    fleet: list[dict[str, Any]] = []
    out = []
    for k, (node_selector, attempts) in enumerate(pack.steps):
        member = {"role": "Standalone", "node_selector": node_selector, "template": {"spec": {"containers": []}}}
        dep = {
            "name": f"step-{k}",
            "namespace": "dra-pack",
            "replicas": attempts,
            "engines": [{"name": "main", "members": [member]}],
        }
        result = place(
            deployment=dep, clusters=[cluster], classes={pack.class_name: classes[pack.class_name]}, replicas=fleet
        )
        fleet += result["replicas"]
        placed = result["replicas"][0]["engines"][0]["members"][0] if result["replicas"] else None
        why = "; ".join(f"{p}: {w}" for c in result["unschedulable"].values() for p, w in c["pools"].items())
        out.append((result["scheduled"], placed, why))
    return out


# --------------------------------------------------------------------------------------------------------------------
# The member's requests in placement's replica-record shape (what render.claim_devices renders)
# --------------------------------------------------------------------------------------------------------------------


def record_requests(node_selector: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(device_requests, constraints)`` of a node_selector in the replica-record shape (design.md §4, §3a)."""

    def exact(r: dict[str, Any]) -> dict[str, Any]:
        mode = r.get("allocation_mode", "ExactCount")
        out = {
            "name": r["name"],
            "device_class_name": r["device_class_name"],
            "allocation_mode": mode,
            "count": None if mode == "All" else r.get("count", 1),
            "selectors": [s["cel"] for s in r.get("selectors", [])],
        }
        for key in ("tolerations", "capacity"):  # design.md §12
            if key in r:
                out[key] = r[key]
        return out

    requests = []
    for r in node_selector.get("devices", []):
        if "first_available" in r:
            requests.append({"name": r["name"], "first_available": [exact(s) for s in r["first_available"]]})
        else:
            requests.append(exact(r))
    constraints = [
        {
            "requests": list(c.get("requests", [])),
            **{k: c[k] for k in ("match_attribute", "distinct_attribute") if k in c},
        }
        for c in node_selector.get("constraints", [])
    ]
    return requests, constraints


def summary(pairs: list[Pair]) -> dict[str, int]:
    """How many pairs exercise each feature."""
    out: dict[str, int] = {}
    for p in pairs:
        for f in p.features:
            out[f] = out.get(f, 0) + 1
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------------------------------------------------
# The local fleet's inventory: one cluster, one single-node pool per pair
# --------------------------------------------------------------------------------------------------------------------

CLUSTER = "dra-diff"


def write_inventory(
    directory: Any, classes: dict[str, dict[str, Any]], pairs: list[Pair], packs: list[Packing] | None = None
) -> Any:
    if packs:
        classes = {**classes, **packing_classes()}
    """An inventory for scripts/localfleet: host ``dra-diff`` with one pool (node_count 1) per pair and per packing
    scenario. Returns hosts.yml."""
    import json
    from pathlib import Path

    root = Path(directory)
    (root / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    (root / "host_vars").mkdir(parents=True, exist_ok=True)
    # JSON is YAML: no YAML library needed, and the files are exact.
    hosts = {"all": {"children": {"gpufleet_clusters": {"hosts": {CLUSTER: None}}}}}
    (root / "hosts.yml").write_text(json.dumps(hosts, indent=1) + "\n")
    (root / "group_vars" / "all" / "inference_classes.yml").write_text(
        json.dumps({"gpufleet_inference_classes": classes}, indent=1, sort_keys=True) + "\n"
    )
    host = {
        "ansible_connection": "local",
        "gpufleet_provider": "existing",
        "gpufleet_node_pools": [
            {"name": p.pool, "class": p.class_name, "node_count": 1} for p in [*pairs, *(packs or [])]
        ],
    }
    (root / "host_vars" / f"{CLUSTER}.yml").write_text(json.dumps(host, indent=1) + "\n")
    return root / "hosts.yml"


def basic(classes: dict[str, dict[str, Any]], pairs: list[Pair]) -> tuple[dict[str, dict[str, Any]], list[Pair]]:
    """Only what predates design.md §2a/§3a: classes without ``instances``, pairs of exact counts and selectors."""
    stripped = {
        n: {**c, "devices": [{k: v for k, v in d.items() if k != "instances"} for d in c["devices"]]}
        for n, c in classes.items()
    }
    plain = [
        p
        for p in pairs
        if not p.node_selector.get("constraints")
        and all("first_available" not in r and "allocation_mode" not in r for r in p.node_selector["devices"])
    ]
    return stripped, plain


if __name__ == "__main__":  # write the inventory, to bring a fleet up by hand: localfleet up DIR/hosts.yml STATE
    import sys

    seed = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 12
    generated = generate(seed)
    if "--basic" in sys.argv:
        print(write_inventory(sys.argv[1], *basic(*generated)))
    else:
        print(write_inventory(sys.argv[1], *generated, packings(generated[0], seed)))
