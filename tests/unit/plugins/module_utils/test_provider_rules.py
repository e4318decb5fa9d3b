"""Provider rules (issue 29): fleet_info rejects what GKE / EKS provisioning would refuse, with the same field paths and
messages provisioning gives, and the example inventory passes both validation and a provisioning dry run."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from example_fleet import copy_example_inventory, example_fleet

from ansible_collections.gpufleet.serving.plugins.module_utils import eks, gke, provider_rules
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Cluster, InferenceClass
from ansible_collections.gpufleet.serving.plugins.module_utils.suggest import index_path

REPO = Path(__file__).resolve().parents[4]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
EKS = "eks-us-east-1"
GKE = "gke-us-central1"
H100_IB = "gpufleet_inference_classes['h100-8x-ib']"
L4 = "gpufleet_inference_classes['l4-1x']"
SUBNETS = {f"us-east-1{z}": f"subnet-{z}" for z in "abc"}

Mutator = Callable[[dict[str, Any]], None]


def errors_of(data: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        validate_fleet(
            classes=data["classes"], hosts=data["hosts"], deployments=data["deployments"], caches=data["caches"]
        )
    except FleetValidationError as exc:
        return list(exc.errors)
    return []


def provisioning_errors(data: dict[str, Any], host: str) -> list[tuple[str, str]]:
    """What the provisioning role's own decision (node_pool_specs / nodegroup_specs) says, on models built without
    fleet validation (as a caller that skipped it would)."""
    classes = {name: InferenceClass.model_validate(c) for name, c in data["classes"].items()}
    hv = data["hosts"][host]
    cluster = Cluster.model_validate(
        {
            "name": host,
            "provider": hv["gpufleet_provider"],
            "gke": hv.get("gpufleet_gke"),
            "eks": hv.get("gpufleet_eks"),
            "node_pools": hv.get("gpufleet_node_pools", []),
        }
    )
    try:
        if cluster.provider == "gke":
            gke.node_pool_specs(cluster, classes)
        else:
            eks.nodegroup_specs(cluster, classes, SUBNETS)
    except FleetValidationError as exc:
        return list(exc.errors)
    return []


def pool(host: str, index: int, **changes: Any) -> Mutator:
    def apply(data: dict[str, Any]) -> None:
        data["hosts"][host]["gpufleet_node_pools"][index].update(changes)

    return apply


def klass(name: str, provider: str, **changes: Any) -> Mutator:
    def apply(data: dict[str, Any]) -> None:
        block = data["classes"][name]["provisioning"][provider]
        for key, value in changes.items():
            if value is None:
                block.pop(key, None)
            else:
                block[key] = value

    return apply


def attribute(name: str, device: int, key: str, value: Any) -> Mutator:
    def apply(data: dict[str, Any]) -> None:
        data["classes"][name]["devices"][device]["attributes"][key] = value

    return apply


# (id, mutation, the host provisioning runs for, path, reason)
CASES = [
    (
        "capacity-block-two-zones",
        pool(EKS, 1, zones=["us-east-1a", "us-east-1b"]),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[1].zones",
        "a Capacity Block lives in one availability zone: name exactly that zone",
    ),
    (
        "capacity-block-no-zone",
        pool(EKS, 1, zones=[]),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[1].zones",
        "a Capacity Block lives in one availability zone",
    ),
    (
        "capacity-block-without-reservation",
        klass("h100-8x-ib", "eks", capacity_reservation_id=None),
        EKS,
        f"{H100_IB}.provisioning.eks.capacity_reservation_id",
        "is required when capacity_type is CAPACITY_BLOCK (cr-...)",
    ),
    (
        "eks-zone-of-another-region",
        pool(EKS, 0, zones=["us-east-1a", "us-west-2b"]),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[0].zones[1]",
        "'us-west-2b' is not an availability zone of region 'us-east-1'",
    ),
    (
        "eks-system-name",
        pool(EKS, 0, name="system"),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[0].name",
        "'system' is the name of the cluster's own system nodegroup",
    ),
    (
        "eks-unknown-size-of-a-gpu-family",
        klass("h100-8x-ib", "eks", instance_type="p5.24xlarge"),
        EKS,
        f"{H100_IB}.provisioning.eks.instance_type",
        "'p5.24xlarge' is not a p5 instance type (one of p5.4xlarge, p5.48xlarge)",
    ),
    (
        "eks-gpu-without-nvidia-ami",
        klass("a10g-1x", "eks", ami_type="AL2023_x86_64_STANDARD"),
        EKS,
        "gpufleet_inference_classes['a10g-1x'].provisioning.eks.ami_type",
        "AL2023_x86_64_STANDARD has no NVIDIA driver",
    ),
    (
        "eks-arm-ami-on-x86",
        klass("a10g-1x", "eks", ami_type="AL2023_ARM_64_NVIDIA"),
        EKS,
        "gpufleet_inference_classes['a10g-1x'].provisioning.eks.ami_type",
        "AL2023_ARM_64_NVIDIA does not run on g5.2xlarge, an x86_64 instance type",
    ),
    (
        "eks-product-name-of-another-gpu",
        attribute("a10g-1x", 0, "productName", {"string": "NVIDIA L4"}),
        EKS,
        "gpufleet_inference_classes['a10g-1x'].devices[0].attributes.productName",
        "'NVIDIA L4' is not the GPU of g5.2xlarge (NVIDIA A10G)",
    ),
    (
        "gke-node-count-over-zones",
        pool(GKE, 0, zones=["us-central1-a", "us-central1-c"], node_count=3, max_node_count=8),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[0].node_count",
        "GKE creates the same number of nodes in each of the pool's 2 zones: 3 is not a multiple of 2",
    ),
    (
        "gke-node-count-over-cluster-zones",
        pool(GKE, 0, zones=[], node_count=3, max_node_count=8),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[0].node_count",
        "3 is not a multiple of 2",
    ),
    (
        "gke-zone-of-another-region",
        pool(GKE, 1, zones=["europe-west4-a"]),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[1].zones[0]",
        "'europe-west4-a' is not a zone of region 'us-central1'",
    ),
    (
        "gke-accelerator-of-another-machine",
        klass("l4-1x", "gke", accelerator={"type": "nvidia-h100-80gb", "count": 1}),
        GKE,
        f"{L4}.provisioning.gke.accelerator.type",
        "g2-standard-8 comes with nvidia-l4 GPUs, not nvidia-h100-80gb",
    ),
    (
        "gke-accelerator-count",
        klass("l4-1x", "gke", accelerator={"type": "nvidia-l4", "count": 2}),
        GKE,
        f"{L4}.provisioning.gke.accelerator.count",
        "g2-standard-8 comes with 1 nvidia-l4 GPU(s), not 2",
    ),
    (
        "gke-gpu-machine-without-accelerator",
        klass("l4-1x", "gke", accelerator=None),
        GKE,
        f"{L4}.provisioning.gke.accelerator",
        "is required for g2-standard-8, which comes with 1 nvidia-l4 GPU(s)",
    ),
    (
        "gke-unknown-machine-of-a-gpu-series",
        klass("l4-1x", "gke", machine_type="g2-standard-6"),
        GKE,
        f"{L4}.provisioning.gke.machine_type",
        "'g2-standard-6' is not a machine type of the G2 series (one of g2-standard-4, g2-standard-8,",
    ),
    (
        "gke-l4-on-a-general-purpose-machine",
        klass("l4-1x", "gke", machine_type="n2-standard-8"),
        GKE,
        f"{L4}.provisioning.gke.accelerator.type",
        "nvidia-l4 GPUs come only with their accelerator-optimized machine types (g2-standard-4,",
    ),
    (
        "gke-product-name-of-another-gpu",
        attribute("h100-1x", 0, "productName", {"string": "NVIDIA A100-SXM4-80GB"}),
        GKE,
        "gpufleet_inference_classes['h100-1x'].devices[0].attributes.productName",
        "'NVIDIA A100-SXM4-80GB' is not the GPU of a3-highgpu-1g (NVIDIA H100)",
    ),
    (
        "gke-system-name",
        pool(GKE, 0, name="system"),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[0].name",
        "'system' is the name of the cluster's own system pool",
    ),
    (
        "gke-autoscaling-maximum",
        pool(GKE, 0, node_count=0, min_node_count=0, max_node_count=0),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[0].max_node_count",
        "must be >= 1 for a GKE node pool",
    ),
    # Capacity ladders (docs/provisioning.md, "Capacity ladder")
    (
        "gke-ladder-zone-of-another-region",
        pool(GKE, 1, capacity_ladder=[{"kind": "spot"}, {"kind": "on-demand", "zones": ["europe-west4-a"]}]),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[1].capacity_ladder[1].zones[0]",
        "'europe-west4-a' is not a zone of region 'us-central1'",
    ),
    (
        "gke-ladder-machine-with-other-gpus",
        pool(GKE, 1, capacity_ladder=[{"kind": "spot"}, {"kind": "on-demand", "machine_type": "a3-highgpu-2g"}]),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[1].capacity_ladder[1].machine_type",
        "'a3-highgpu-2g' comes with 2 nvidia-h100-80gb GPU(s); the class's a3-highgpu-1g comes with 1 "
        "nvidia-h100-80gb: a rung may change the machine type only to one with the same GPUs (a3-highgpu-1g)",
    ),
    (
        "gke-ladder-node-count-over-rung-zones",
        pool(GKE, 0, capacity_ladder=[{"kind": "spot", "zones": [f"us-central1-{z}" for z in "abc"]}]),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[0].capacity_ladder[0].zones",
        "GKE creates the same number of nodes in each of the rung's 3 zones: the pool's node_count 4 is not a "
        "multiple of 3",
    ),
    (
        "gke-ladder-eks-field",
        pool(GKE, 0, capacity_ladder=[{"kind": "reservation", "capacity_reservation_id": "cr-0123456789abcdef0"}]),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[0].capacity_ladder[0].capacity_reservation_id",
        "is an EKS field: a GKE reservation rung names its reservation with reservation",
    ),
    (
        "gke-ladder-rung-after-flex-start",
        pool(GKE, 1, capacity_ladder=[{"kind": "flex-start"}, {"kind": "on-demand"}]),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[1].capacity_ladder[1]",
        "is never tried: the flex-start rung 0 creates the pool without nodes",
    ),
    (
        "ladder-of-a-pool-without-nodes",
        pool(GKE, 0, node_count=0, min_node_count=0, capacity_ladder=[{"kind": "spot"}, {"kind": "on-demand"}]),
        GKE,
        f"hostvars['{GKE}'].gpufleet_node_pools[0].capacity_ladder",
        "node_count is 0: a pool created without nodes launches none, so no rung can stock out",
    ),
    (
        "eks-ladder-flex-start",
        pool(EKS, 0, capacity_ladder=[{"kind": "flex-start"}]),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[0].capacity_ladder[0].kind",
        "flex-start is GKE's Dynamic Workload Scheduler; EKS has no such capacity",
    ),
    (
        "eks-ladder-reservation-without-id",
        pool(EKS, 0, capacity_ladder=[{"kind": "reservation", "zones": ["us-east-1a"]}, {"kind": "on-demand"}]),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[0].capacity_ladder[0].capacity_reservation_id",
        "is required for an EKS reservation rung (cr-...)",
    ),
    (
        "eks-ladder-reservation-in-two-zones",
        pool(EKS, 0, capacity_ladder=[{"kind": "reservation", "capacity_reservation_id": "cr-0123456789abcdef0"}]),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[0].capacity_ladder[0].zones",
        "an On-Demand Capacity Reservation lives in one availability zone",
    ),
    (
        "eks-ladder-capacity-block-in-two-zones",
        pool(
            EKS, 1, capacity_ladder=[{"kind": "reservation", "zones": ["us-east-1a", "us-east-1b"]}, {"kind": "spot"}]
        ),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[1].capacity_ladder[0].zones",
        "a Capacity Block lives in one availability zone",
    ),
    (
        "eks-ladder-instance-of-another-gpu",
        pool(EKS, 0, capacity_ladder=[{"kind": "spot", "instance_type": "g6.2xlarge"}]),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[0].capacity_ladder[0].instance_type",
        "'g6.2xlarge' has 1 NVIDIA L4 GPU(s); the class's g5.2xlarge has 1 NVIDIA A10G: a rung may change the "
        "instance type only to one of the same family with the same GPUs (g5.xlarge, g5.2xlarge, g5.4xlarge, "
        "g5.8xlarge, g5.16xlarge)",
    ),
    (
        "eks-ladder-zone-of-another-region",
        pool(EKS, 0, capacity_ladder=[{"kind": "spot", "zones": ["us-west-2a"]}]),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[0].capacity_ladder[0].zones[0]",
        "'us-west-2a' is not an availability zone of region 'us-east-1'",
    ),
    (
        "eks-ladder-gke-field",
        pool(EKS, 0, capacity_ladder=[{"kind": "on-demand", "machine_type": "g2-standard-8"}]),
        EKS,
        f"hostvars['{EKS}'].gpufleet_node_pools[0].capacity_ladder[0].machine_type",
        "is a GKE field: an EKS rung changes the instance type with instance_type",
    ),
]


@pytest.mark.parametrize(("mutate", "host", "path", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_fleet_info_rejects_what_provisioning_would_with_the_same_message(mutate, host, path, reason):
    data = example_fleet()
    mutate(data)
    # fleet_info's paths name the pools on them (gpufleet_node_pools[1] (p5).zones): compared without the names.
    found = [(index_path(p), r) for p, r in errors_of(data)]
    assert any(p == path and reason in r for p, r in found), found
    # One implementation: provisioning's own decision names the same field with the same words.
    said = provisioning_errors(data, host)
    assert [e for e in found if e[0] == path] == [e for e in said if e[0] == path], (found, said)


@pytest.mark.parametrize(
    ("host", "block", "version"),
    [(GKE, "gpufleet_gke", "1.33"), (EKS, "gpufleet_eks", "1.33.5"), (EKS, "gpufleet_eks", "1.31")],
)
def test_kubernetes_version_without_dra_is_rejected_for_each_provider(host, block, version):
    data = example_fleet()
    data["hosts"][host][block]["kubernetes_version"] = version
    path = f"hostvars['{host}'].{block}.kubernetes_version"
    assert any(p == path and "DRA (resource.k8s.io/v1) is GA from Kubernetes 1.34" in r for p, r in errors_of(data))


def test_a_class_is_reported_once_however_many_pools_use_it():
    data = example_fleet()
    data["hosts"][GKE]["gpufleet_node_pools"].append({"name": "l4b", "class": "l4-1x", "node_count": 2})
    klass("l4-1x", "gke", accelerator={"type": "nvidia-l4", "count": 2})(data)
    paths = [p for p, _r in errors_of(data)]
    assert paths.count(f"{L4}.provisioning.gke.accelerator.count") == 1


def test_a_provider_block_no_cluster_of_that_provider_uses_is_not_checked():
    # a10g-1x has only an EKS block; give l4-1x (GKE and EKS) a bad EKS size used by no EKS pool of the example:
    # the EKS cluster does not use l4-1x, so the fleet stays valid (provisioning would never read that block).
    data = example_fleet()
    klass("l4-1x", "eks", instance_type="g6.3xlarge")(data)
    assert errors_of(data) == []
    data["hosts"][EKS]["gpufleet_node_pools"].append({"name": "l4", "class": "l4-1x", "node_count": 1})
    assert (f"{L4}.provisioning.eks.instance_type", "'g6.3xlarge' is not a g6 instance type (one of g6.xlarge, "
            "g6.2xlarge, g6.4xlarge, g6.8xlarge, g6.12xlarge, g6.16xlarge, g6.24xlarge, g6.48xlarge)") in errors_of(
        data
    )  # fmt: skip


def test_every_error_is_reported_at_once():
    data = example_fleet()
    for case in CASES[:3]:
        case[1](data)
    paths = {index_path(p) for p, _r in errors_of(data)}
    assert {CASES[0][3], CASES[2][3]} <= paths


def test_the_example_fleet_passes_validation_and_a_provisioning_dry_run():
    data = example_fleet()
    fleet = validate_fleet(
        classes=data["classes"], hosts=data["hosts"], deployments=data["deployments"], caches=data["caches"]
    )
    for name, cluster in fleet.clusters.items():
        if cluster.provider == "gke":
            specs = gke.node_pool_specs(cluster, fleet.classes)
            assert [s["name"] for s in specs] == ["system", *(p.name for p in cluster.node_pools)], name
            if name == GKE:  # the example's capacity ladder: one spec per rung
                h100 = next(s for s in specs if s["name"] == "h100")
                assert [(r["capacity_rung"], r["locations"]) for r in h100["capacity_ladder"]] == [
                    ("reservation", ["us-central1-c"]),
                    ("spot", ["us-central1-c"]),
                    ("spot", ["us-central1-a"]),
                    ("on-demand", ["us-central1-c"]),
                ]
                assert h100["any_reservation"] is True and h100["labels"]["gpufleet.io/capacity-rung"] == "reservation"
        elif cluster.provider == "eks":
            specs = eks.nodegroup_specs(cluster, fleet.classes, SUBNETS)
            p5 = next(s for s in specs if s.name == "p5")
            assert (p5.capacity_type, p5.capacity_reservation_id) == ("CAPACITY_BLOCK", "cr-0123456789abcdef0")


def test_a_ladder_moves_the_capacity_block_zone_rule_to_its_rungs():
    # p5's class is a Capacity Block in one zone; with a ladder, a Spot rung may use another zone.
    data = example_fleet()
    pool(EKS, 1, capacity_ladder=[{"kind": "reservation"}, {"kind": "spot", "zones": ["us-east-1b"]}])(data)
    assert errors_of(data) == []
    assert provisioning_errors(data, EKS) == []


@pytest.mark.parametrize(
    ("ladder", "path", "reason"),
    [
        (
            [{"kind": "spot", "reservation": "r1"}],
            "capacity_ladder[0]",
            "reservation: only for kind reservation (this rung is spot)",
        ),
        (
            [{"kind": "spot"}, {"kind": "on-demand"}, {"kind": "spot"}],
            "capacity_ladder",
            "rung 2 repeats rung 0: a second attempt at the same capacity",
        ),
        (
            [{"kind": "preemptible"}],
            "capacity_ladder[0].kind",
            "must be one of reservation, flex-start, spot, on-demand",
        ),
    ],
)
def test_rung_fields_are_validated_with_their_path(ladder, path, reason):
    data = example_fleet()
    pool(GKE, 0, capacity_ladder=ladder)(data)
    found = [(index_path(p), r) for p, r in errors_of(data)]
    want = f"hostvars['{GKE}'].gpufleet_node_pools[0].{path}"
    assert any(p == want and reason in r for p, r in found), found


def test_an_existing_cluster_has_no_ladder():
    data = example_fleet()
    pool("onprem-a", 0, capacity_ladder=[{"kind": "spot"}])(data)
    assert (
        "hostvars['onprem-a'].gpufleet_node_pools[0].capacity_ladder",
        "is for gke and eks pools: the nodes of a cluster with gpufleet_provider existing are provisioned by whoever "
        "runs it",
    ) in [(index_path(p), r) for p, r in errors_of(data)]


def test_the_tables_are_consistent():
    for machine, gpu in provider_rules.GKE_MACHINE_GPUS.items():
        assert provider_rules.GKE_GPU_FAMILY_RE.match(machine), machine
        assert gpu.accelerator.startswith("nvidia-") and 1 <= gpu.count <= 16
    for instance, gpu in provider_rules.EKS_INSTANCE_GPUS.items():
        assert instance.split(".", 1)[0] in provider_rules.EKS_GPU_FAMILIES and gpu.count >= 1
    assert provider_rules.EKS_INSTANCE_GPUS["p6e-gb200.36xlarge"].arch == "arm64"


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_validate_playbook_rejects_provider_rule_violations_naming_the_fields(tmp_path):
    inventory = tmp_path / "inventory"
    copy_example_inventory(inventory)
    host_file = inventory / "host_vars" / f"{EKS}.yml"
    host = yaml.safe_load(host_file.read_text())
    host["gpufleet_node_pools"][1]["zones"] = ["us-east-1a", "us-east-1b"]
    host_file.write_text("---\n" + yaml.safe_dump(host, sort_keys=False))
    gke_file = inventory / "host_vars" / f"{GKE}.yml"
    gke_host = yaml.safe_load(gke_file.read_text())
    gke_host["gpufleet_node_pools"][0].update(zones=[], node_count=3)
    gke_file.write_text("---\n" + yaml.safe_dump(gke_host, sort_keys=False))
    classes_file = inventory / "group_vars" / "all" / "inference_classes.yml"
    classes = yaml.safe_load(classes_file.read_text())
    del classes["gpufleet_inference_classes"]["h100-8x-ib"]["provisioning"]["eks"]["capacity_reservation_id"]
    classes_file.write_text("---\n" + yaml.safe_dump(classes, sort_keys=False))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory / "hosts.yml"), str(REPO / "playbooks" / "validate.yml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    for expected in (
        f"hostvars['{EKS}'].gpufleet_node_pools[1] (p5).zones: a Capacity Block lives in one availability zone",
        f"{H100_IB}.provisioning.eks.capacity_reservation_id: is required when capacity_type is CAPACITY_BLOCK",
        f"hostvars['{GKE}'].gpufleet_node_pools[0] (l4).node_count: GKE creates the same number of nodes",
    ):
        assert expected in out, out[-3000:]
