"""The hardware catalog (issue 31 item 5): every entry is a valid class, a class extends or overrides its entry, an
unknown entry says what was meant, and an expanded class is checked against real ResourceSlices like any other."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils import catalog, preflight, provider_rules
from ansible_collections.gpufleet.serving.plugins.module_utils.catalog import ENTRIES, expand, merge
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import place_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.models import InferenceClass
from ansible_collections.gpufleet.serving.plugins.module_utils.provisioning import parse_cluster

REPO = Path(__file__).resolve().parents[4]
DOC = REPO / "docs" / "catalog.md"
SCHEMA = REPO / "schemas" / "gpufleet_inventory.schema.json"
MEM_80 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'

CLUSTERS = {
    "gke": {
        "gpufleet_provider": "gke",
        "gpufleet_gke": {"project": "p", "region": "us-central1", "zones": ["us-central1-a"]},
    },
    "eks": {"gpufleet_provider": "eks", "gpufleet_eks": {"region": "us-east-1"}},
    "dgx": {"gpufleet_provider": "existing", "gpufleet_kubeconfig": "/k"},
}


def host(platform: str, klass: str = "c", nodes: int = 1) -> dict[str, Any]:
    return {**CLUSTERS[platform], "gpufleet_node_pools": [{"name": "pool", "class": klass, "node_count": nodes}]}


def fleet_errors(classes: dict[str, Any], hosts: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        validate_fleet(classes=classes, hosts=hosts, deployments=[], caches=[])
    except FleetValidationError as exc:
        return list(exc.errors)
    return []


# --------------------------------------------------------------------------------------------------------------------
# Every entry
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ENTRIES))
def test_every_entry_is_a_valid_class_that_provisioning_and_a_fleet_accept(name):
    entry = ENTRIES[name]
    klass = InferenceClass.model_validate({"catalog": name})
    assert klass.catalog == name
    assert klass.model_dump() == InferenceClass.model_validate(entry.data()).model_dump()  # the entry, nothing added
    # What GKE / EKS provisioning would refuse (the machine's GPUs, the accelerator block, the product name).
    assert provider_rules.class_errors({name: klass}) == []
    gpus = [d for d in klass.devices if d.driver == catalog.NVIDIA_DRIVER]
    assert len(gpus) == 1
    if entry.platform == "gke":
        machine = provider_rules.GKE_MACHINE_GPUS[klass.provisioning.gke.machine_type]
        assert (gpus[0].count, klass.provisioning.gke.accelerator.type) == (machine.count, machine.accelerator)
    elif entry.platform == "eks":
        assert gpus[0].count == provider_rules.EKS_INSTANCE_GPUS[klass.provisioning.eks.instance_type].count
    else:
        assert klass.provisioning.gke is None and klass.provisioning.eks is None
    # A pool of the class on a cluster of its platform: the whole fleet validates.
    assert fleet_errors({"c": {"catalog": name}}, {"c1": host(entry.platform)}) == []


@pytest.mark.parametrize("name", list(ENTRIES))
def test_every_entry_publishes_what_the_drivers_do_and_cites_its_sources(name):
    entry = ENTRIES[name]
    assert entry.sources and all(s.url.startswith("https://") and s.figure for s in entry.sources)
    gpu = entry.klass["devices"][0]
    attributes = gpu["attributes"]
    assert attributes["type"] == {"string": "gpu"}
    assert set(attributes) <= {"type", "productName", "architecture", "brand", "cudaComputeCapability"}
    assert attributes["architecture"]["string"] in {"Ampere", "Ada Lovelace", "Hopper", "Blackwell"}
    assert re.fullmatch(r"\d+Mi", gpu["capacity"]["memory"]["value"])  # NVML's figure, not the marketing size
    # Never the driver-domain spelling: the drivers publish the standard resource.kubernetes.io/pcieRoot.
    assert "pcieRoot" not in json.dumps(entry.klass).replace(catalog.PCIE_ROOT, "")
    # What each GPU-of-a-model figure rests on is cited by the entry.
    assert catalog.DRIVER_CODE in entry.sources


def test_the_docs_list_every_entry_and_every_source():
    text = DOC.read_text(encoding="utf-8")
    for name, entry in ENTRIES.items():
        assert f"`{name}`" in text, f"{DOC.name} does not list {name}"
        for source in entry.sources:
            assert source.url in text, f"{DOC.name} does not cite {source.url} (for {name})"


def test_memory_figures_are_the_usable_ones():
    figures = {e.klass["devices"][0]["attributes"]["productName"]["string"]: e.klass["devices"][0]["capacity"]
               for e in ENTRIES.values()}  # fmt: skip
    assert figures["NVIDIA H100 80GB HBM3"] == {"memory": {"value": "81559Mi"}}  # < 80Gi (81920Mi)
    assert figures["NVIDIA L4"] == {"memory": {"value": "23034Mi"}}
    assert figures["NVIDIA H200"] == {"memory": {"value": "143771Mi"}}


# --------------------------------------------------------------------------------------------------------------------
# Extending and overriding an entry
# --------------------------------------------------------------------------------------------------------------------


def test_a_reference_with_overrides_extends_the_entry():
    data = {
        "catalog": "p5.48xlarge",
        "description": "Llama pool",
        "provisioning": {"eks": {"capacity_type": "CAPACITY_BLOCK", "capacity_reservation_id": "cr-0123456789abcdef0"}},
        "devices": [
            # Merged into the entry's gpu: one attribute added, one removed (null), the others kept.
            {"name": "gpu", "attributes": {"driverVersion": {"version": "580.95.5"}, "brand": None}},
            # Added after the entry's devices.
            {"name": "ib", "claim": "Synthetic", "driver": "fabric.gpufleet.io", "count": 8},
        ],
        "labels": {"team": "ml"},
    }
    klass = InferenceClass.model_validate(data)
    assert klass.description == "Llama pool"
    eks = klass.provisioning.eks
    assert (eks.instance_type, eks.capacity_type, eks.capacity_reservation_id) == (
        "p5.48xlarge",
        "CAPACITY_BLOCK",
        "cr-0123456789abcdef0",
    )
    gpu, ib = klass.devices
    assert (gpu.name, gpu.count, ib.name, ib.claim) == ("gpu", 8, "ib", "Synthetic")
    assert sorted(gpu.attributes) == ["architecture", "cudaComputeCapability", "driverVersion", "productName", "type"]
    assert gpu.capacity["memory"].value == "81559Mi"
    assert [i.attributes[catalog.PCIE_ROOT].string for i in gpu.instances] == list(catalog.P5_PCIE_ROOTS)
    assert klass.labels == {"team": "ml"}
    # The dumped class is the expanded one, whole (a plan or fleet_info output does not depend on the catalog).
    dumped = klass.model_dump(by_alias=True, exclude_none=True)
    assert "catalog" not in dumped
    assert InferenceClass.model_validate(dumped).model_dump() == klass.model_dump()
    # The data the class was read from is not changed.
    assert data["devices"][0]["attributes"]["brand"] is None and len(data["devices"]) == 2


def test_an_override_that_breaks_the_entry_is_reported_where_it_was_written():
    errors = fleet_errors(
        {"h100": {"catalog": "p5.48xlarge", "devices": [{"name": "gpu", "count": 4}]}}, {"c1": host("eks", "h100")}
    )
    assert errors == [
        (
            "gpufleet_inference_classes.h100.devices[0] (gpu)",
            "instances lists 8 device(s) but count is 4: list every device once, in order (device i is named <name>-<i>)",
        )
    ]


def test_an_override_is_checked_by_the_provider_rules():
    errors = fleet_errors(
        {"h100": {"catalog": "a3-highgpu-8g", "provisioning": {"gke": {"accelerator": {"count": 4}}}}},
        {"c1": host("gke", "h100")},
    )
    assert errors == [
        (
            "gpufleet_inference_classes['h100'].provisioning.gke.accelerator.count",
            "a3-highgpu-8g comes with 8 nvidia-h100-80gb GPU(s), not 4",
        )
    ]


@pytest.mark.parametrize(
    ("base", "override", "merged"),
    [
        ({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": 9}}, {"a": 1, "b": {"c": 9, "d": 3}}),
        ({"a": 1, "b": 2}, {"b": None}, {"a": 1}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": {"x": 1}}, {"a": 5}, {"a": 5}),
        (None, {"a": {"b": None, "c": 1}}, {"a": {"c": 1}}),
    ],
)
def test_merge_is_a_json_merge_patch(base, override, merged):
    assert merge(base, override) == merged


def test_expand_leaves_the_catalog_untouched():
    before = json.dumps(ENTRIES["g6.xlarge"].klass, sort_keys=True)
    expanded = expand("g6.xlarge", {"devices": [{"name": "gpu", "count": 2}], "description": None})
    assert expanded["devices"][0]["count"] == 2 and "description" not in expanded
    assert json.dumps(ENTRIES["g6.xlarge"].klass, sort_keys=True) == before


# --------------------------------------------------------------------------------------------------------------------
# Unknown entries
# --------------------------------------------------------------------------------------------------------------------


def test_an_unknown_entry_says_what_was_meant_and_nothing_else():
    errors = fleet_errors({"h100": {"catalog": "a3-highgpu-8", "labels": {"a": "b"}}}, {"c1": host("gke", "h100")})
    assert len(errors) == 1  # no "devices: field required" on top of it
    path, reason = errors[0]
    assert path == "gpufleet_inference_classes.h100.catalog"
    assert reason.startswith("unknown catalog entry 'a3-highgpu-8' (did you mean 'a3-highgpu-8g'? known: a3-highgpu-1g")
    assert reason.endswith("; every entry: docs/catalog.md")
    # A name of no known family lists every entry.
    assert "dgx-b200" in catalog.unknown_entry("h100-sxm")


def test_a_pool_that_names_a_catalog_entry_is_told_how_to_use_it():
    errors = fleet_errors({"l4": {"catalog": "g2-standard-8"}}, {"c1": host("gke", "catalog/a3-highgpu-8g")})
    assert errors == [
        (
            "hostvars['c1'].gpufleet_node_pools[0] (pool).class",
            "unknown inference class 'catalog/a3-highgpu-8g' (known: l4); a pool names a class of "
            "gpufleet_inference_classes, and a class names its catalog entry: define gpufleet_inference_classes: "
            "{<class name>: {catalog: a3-highgpu-8g}} and give the pool that class",
        )
    ]


# --------------------------------------------------------------------------------------------------------------------
# Placement and explain read the expanded class
# --------------------------------------------------------------------------------------------------------------------


def llama(selectors: list[str]) -> dict[str, Any]:
    return {
        "name": "llama-70b",
        "replicas": 1,
        "engines": [
            {
                "name": "tp8",
                "members": [
                    {
                        "role": "Standalone",
                        "node_selector": {
                            "devices": [{"name": "gpu", "count": 8, "selectors": [{"cel": s} for s in selectors]}]
                        },
                        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm"}]}},
                    }
                ],
            }
        ],
    }


def test_a_memory_selector_of_80gi_is_false_on_the_h100_entry_and_explain_shows_the_value():
    """An H100 publishes 81559Mi, less than 80Gi (81920Mi): the selector is false and explain names what it read."""
    classes = {"h100": {"catalog": "a3-highgpu-8g"}, "h200": {"catalog": "a3-ultragpu-8g"}}
    hosts = {"c1": {**CLUSTERS["dgx"], "gpufleet_node_pools": [
        {"name": "h100", "class": "h100", "node_count": 1}, {"name": "h200", "class": "h200", "node_count": 1}]}}  # fmt: skip
    data = validate_fleet(classes=classes, hosts=hosts, deployments=[llama([MEM_80])], caches=[]).to_dict()
    outcome = place_fleet(data, [], explain=["llama-70b"])
    assert outcome.statuses() == {"llama-70b": "Ready"}  # on the H200s
    lines = outcome.explain(["llama-70b"])
    h100 = next(line for line in lines if line.startswith("      c1/h100: "))
    assert h100 == (
        "      c1/h100: not a candidate: engine tp8 member Standalone request gpu: "
        f"selector `{MEM_80}` is false for device gpu (NVIDIA H100 80GB HBM3) (read: memory 81559Mi < 80Gi on gpu-0)"
    )
    assert h100 in DOC.read_text(encoding="utf-8").splitlines()  # docs/catalog.md shows this very line
    assert any(line.startswith("      c1/h200: candidate") for line in lines)


def test_a_selector_can_read_the_pcie_root_of_a_p5_gpu():
    classes = {"p5": {"catalog": "p5.48xlarge"}}
    hosts = {"c1": host("dgx", "p5")}
    one_root = 'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:44"'
    dep = llama([one_root])
    dep["engines"][0]["members"][0]["node_selector"]["devices"][0]["count"] = 1
    data = validate_fleet(classes=classes, hosts=hosts, deployments=[dep], caches=[]).to_dict()
    assert place_fleet(data, []).statuses() == {"llama-70b": "Ready"}


# --------------------------------------------------------------------------------------------------------------------
# The preflight checks an expanded class against real slices, unchanged
# --------------------------------------------------------------------------------------------------------------------


def p5_slice(node: str, memory: str = "81559Mi") -> dict[str, Any]:
    """A p5.48xlarge node's gpu.nvidia.com ResourceSlice as the driver published it (catalog.P5_SLICES), in the
    published order (gpu-3 first) and with everything the catalog does not declare."""
    devices = []
    for i in (3, 4, 5, 6, 7, 0, 1, 2):
        devices.append(
            {
                "name": f"gpu-{i}",
                "attributes": {
                    "addressingMode": {"string": "HMM"},
                    "architecture": {"string": "Hopper"},
                    "brand": {"string": "Nvidia"},
                    "cudaComputeCapability": {"version": "9.0.0"},
                    "cudaDriverVersion": {"version": "13.0.0"},
                    "driverVersion": {"version": "580.105.8"},
                    "productName": {"string": "NVIDIA H100 80GB HBM3"},
                    "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x53 + 0x11 * i:02x}:00.0"},
                    catalog.PCIE_ROOT: {"string": catalog.P5_PCIE_ROOTS[i]},
                    "type": {"string": "gpu"},
                    "uuid": {"string": f"GPU-{i}"},
                },
                "capacity": {"memory": {"value": memory}},
            }
        )
    return {"spec": {"driver": "gpu.nvidia.com", "nodeName": node, "devices": devices}}


def preflight_errors(slices: list[dict[str, Any]]) -> list[str]:
    hv = {**host("dgx", "p5"), "gpufleet_kubernetes_version": "1.36"}
    cluster, classes = parse_cluster("c1", hv, {"p5": {"catalog": "p5.48xlarge"}})
    observed = preflight.Observed(
        git_version="v1.36.3",
        group_versions=frozenset({"v1", "resource.k8s.io/v1"}),
        nodes=[{"metadata": {"name": "n0", "labels": {"gpufleet.io/pool": "pool"}}}],
        device_classes=[{"metadata": {"name": "gpu.nvidia.com"}}],
        resource_slices=slices,
    )
    return [f.message for f in preflight.check_cluster(cluster, classes, observed) if f.severity == "error"]


def test_the_preflight_accepts_a_real_p5_node_for_the_p5_entry():
    assert preflight_errors([p5_slice("n0")]) == []


def test_the_preflight_reports_a_node_that_is_not_what_the_entry_says():
    wrong = p5_slice("n0", memory="80Gi")
    errors = preflight_errors([wrong])
    assert len(errors) == 1
    assert "capacity gpu.nvidia.com/memory is 80Gi, the class says 81559Mi" in errors[0]


# --------------------------------------------------------------------------------------------------------------------
# The inventory's JSON Schema
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def classes_schema() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def schema_errors(validator: jsonschema.Draft202012Validator, classes: dict[str, Any]) -> list[str]:
    return sorted(e.message for e in validator.iter_errors({"gpufleet_inference_classes": classes}))


def test_the_schema_knows_the_catalog(classes_schema):
    assert schema_errors(classes_schema, {"a": {"catalog": "a3-highgpu-8g"}}) == []
    # With an entry, a device needs only its name (it is merged with the entry's device of that name).
    override = {"catalog": "p5.48xlarge", "devices": [{"name": "gpu", "attributes": {"x": {"int": 1}}}]}
    assert schema_errors(classes_schema, {"a": override}) == []
    assert schema_errors(classes_schema, {"a": {"catalog": "a3-highgpu-8"}}) != []
    assert schema_errors(classes_schema, {"a": {"description": "no devices"}}) == ["'devices' is a required property"]
    assert schema_errors(classes_schema, {"a": {"devices": [{"name": "gpu"}]}}) == ["'driver' is a required property"]
