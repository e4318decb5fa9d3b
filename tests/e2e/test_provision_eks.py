"""EKS provisioning end to end against moto's server on 127.0.0.1 (started and stopped here).

create -> second run changed=0 -> check mode of a change (nothing recorded changes) -> the change in place -> a pool
leaving the inventory -> a capacity ladder whose first rung stocks out (the pool gets its second rung) -> a quota
error (the ladder stops naming the quota; once raised, the next run deletes the failed nodegroup and walks again) ->
teardown.yml with teardown_clusters=true, asserting what the AWS API recorded: AMI type, capacity type, launch template
of the Capacity Block pool, taints, labels, scaling and version.

EC2 capacity failures are injected by a small proxy in front of moto (tests/e2e/moto_faults.py): it rewrites a
nodegroup's DescribeNodegroup answer to CREATE_FAILED with the health issue EKS reports.

moto 5.2 implements neither EKS add-ons nor EFS DescribeTags (which community.aws.efs calls), and there is no
Kubernetes API behind its cluster endpoint: the run sets eks_cluster_efs=false and eks_cluster_storage_class=false.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from moto_faults import Fault, FaultProxy

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
INVENTORY = Path(__file__).resolve().parent / "provision" / "eks"
CLUSTER = "eks-moto"
REGION = "us-east-1"

pytest.importorskip("boto3")
if not (BIN / "moto_server").exists():  # pragma: no cover - requirements-dev.txt installs moto[server]
    pytest.skip("moto_server is not installed beside this Python (pip install 'moto[server]')", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def proxy() -> Iterator[FaultProxy]:
    """moto's server behind the fault-injecting proxy; ``proxy.url`` is what every client talks to."""
    port = _free_port()
    env = dict(os.environ, MOTO_IAM_LOAD_MANAGED_POLICIES="true")  # AmazonEKSClusterPolicy & co. must exist
    proc = subprocess.Popen(
        [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError("moto_server did not start") from None
                time.sleep(0.2)
        faults = FaultProxy(url)
        faults.url = faults.start()  # type: ignore[attr-defined]
        try:
            yield faults
        finally:
            faults.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def moto(proxy: FaultProxy) -> str:
    return proxy.url  # type: ignore[attr-defined,no-any-return]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("eks")
    shutil.copytree(INVENTORY, work / "inventory")
    return work


def client(moto: str, service: str) -> Any:
    import boto3

    return boto3.client(
        service, region_name=REGION, endpoint_url=moto, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def run(moto: str, work: Path, playbook: str, *extra: str, ok: bool = True) -> str:
    aws = {"endpoint_url": moto, "access_key": "testing", "secret_key": "testing"}
    variables = {
        "eks_cluster_aws": aws,
        "eks_cluster_efs": False,
        "eks_cluster_storage_class": False,
        "eks_cluster_poll_interval": 0.2,
        "eks_cluster_wait_timeout": 60,
        "eks_cluster_kubeconfig_dir": str(work / "kubeconfigs"),
        "gpufleet_render_dir": str(work / "rendered"),
    }
    (work / "vars.yml").write_text(yaml.safe_dump(variables))
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_DEPRECATION_WARNINGS="0",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    argv = [str(BIN / "ansible-playbook"), "-i", str(work / "inventory"), str(REPO / "playbooks" / playbook)]
    proc = subprocess.run(
        [*argv, "-e", f"@{work / 'vars.yml'}", *extra], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )
    assert (proc.returncode == 0) == ok, f"{playbook}:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout


def changed(output: str) -> int:
    match = re.search(rf"^{CLUSTER}\s*:.*changed=(\d+)", output, re.M)
    assert match, output[-2000:]
    return int(match.group(1))


def nodegroups(moto: str) -> dict[str, dict[str, Any]]:
    eks = client(moto, "eks")
    names = eks.list_nodegroups(clusterName=CLUSTER)["nodegroups"]
    return {n: eks.describe_nodegroup(clusterName=CLUSTER, nodegroupName=n)["nodegroup"] for n in names}


def set_pool(work: Path, name: str, **fields: Any) -> None:
    path = work / "inventory" / "host_vars" / f"{CLUSTER}.yml"
    data = yaml.safe_load(path.read_text())
    next(p for p in data["gpufleet_node_pools"] if p["name"] == name).update(fields)
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))


GPU_TAINT = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
RUNG = "gpufleet.io/capacity-rung"


def test_create_records_what_the_classes_say(moto, work):
    out = run(moto, work, "provision.yml")
    assert changed(out) > 0
    eks = client(moto, "eks")
    cluster = eks.describe_cluster(name=CLUSTER)["cluster"]
    assert cluster["version"] == "1.36"
    assert cluster["status"] == "ACTIVE"
    assert cluster["roleArn"].endswith(f"role/gpufleet-{CLUSTER}-cluster")
    subnets = client(moto, "ec2").describe_subnets(SubnetIds=cluster["resourcesVpcConfig"]["subnetIds"])["Subnets"]
    zone_of = {s["SubnetId"]: s["AvailabilityZone"] for s in subnets}
    assert sorted(zone_of.values()) == ["us-east-1a", "us-east-1b"]

    groups = nodegroups(moto)
    assert sorted(groups) == ["a10g", "l4-spot", "p5", "system"]
    system = groups["system"]
    assert system["amiType"] == "AL2023_x86_64_STANDARD"
    assert system["taints"] == []
    assert system["labels"] == {"gpufleet.io/system": "true"}

    a10g = groups["a10g"]
    assert a10g["amiType"] == "AL2023_x86_64_NVIDIA"
    assert a10g["instanceTypes"] == ["g5.2xlarge"]
    assert a10g["capacityType"] == "ON_DEMAND"
    assert a10g["diskSize"] == 200
    assert a10g["version"] == "1.36"
    assert a10g["scalingConfig"] == {"minSize": 1, "maxSize": 6, "desiredSize": 3}
    assert a10g["labels"] == {"gpufleet.io/pool": "a10g", "nvidia.com/gpu.present": "true", RUNG: "on-demand"}
    assert a10g["taints"] == GPU_TAINT
    assert a10g["nodeRole"].endswith(f"role/gpufleet-{CLUSTER}-node")
    assert sorted(zone_of[s] for s in a10g["subnets"]) == ["us-east-1a", "us-east-1b"]

    spot = groups["l4-spot"]
    assert spot["capacityType"] == "SPOT"
    assert spot["scalingConfig"] == {"minSize": 0, "maxSize": 4, "desiredSize": 0}
    assert spot["labels"] == {
        "gpufleet.io/spot": "true",
        "gpufleet.io/pool": "l4-spot",
        "nvidia.com/gpu.present": "true",
        RUNG: "spot",
    }

    p5 = groups["p5"]
    assert p5["capacityType"] == "CAPACITY_BLOCK"
    assert p5["labels"][RUNG] == "reservation"
    assert p5["amiType"] == "AL2023_x86_64_NVIDIA"
    assert [zone_of[s] for s in p5["subnets"]] == ["us-east-1a"]
    # EKS rejects diskSize with a launch template: ours is in the template (moto records its default 20 instead)
    assert p5.get("diskSize") in (None, 20)
    ec2 = client(moto, "ec2")
    (template,) = ec2.describe_launch_templates(LaunchTemplateNames=[f"gpufleet-{CLUSTER}-p5"])["LaunchTemplates"]
    assert p5["launchTemplate"]["id"] == template["LaunchTemplateId"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"], Versions=["$Latest"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert data["InstanceMarketOptions"]["MarketType"] == "capacity-block"
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": "cr-0123456789abcdef0"
    }
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 1000

    kubeconfig = yaml.safe_load((work / "kubeconfigs" / CLUSTER).read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == cluster["endpoint"]
    assert kubeconfig["current-context"] == CLUSTER
    assert kubeconfig["users"][0]["user"]["exec"]["args"][:4] == ["eks", "get-token", "--cluster-name", CLUSTER]


def test_second_run_changes_nothing(moto, work):
    before = nodegroups(moto)
    assert changed(run(moto, work, "provision.yml")) == 0
    assert nodegroups(moto) == before


def test_check_mode_predicts_a_change_and_records_nothing(moto, work):
    set_pool(work, "a10g", max_node_count=8)
    before = nodegroups(moto)
    out = run(moto, work, "provision.yml", "--check")
    assert changed(out) == 1, out[-3000:]
    assert "scaling 1..6" in out or "changed: [eks-moto] => (item=a10g" in out
    assert nodegroups(moto) == before


def test_change_is_applied_in_place(moto, work):
    out = run(moto, work, "provision.yml")
    assert changed(out) == 1, out[-3000:]
    a10g = nodegroups(moto)["a10g"]
    assert a10g["scalingConfig"] == {"minSize": 1, "maxSize": 8, "desiredSize": 3}
    assert a10g["taints"] == GPU_TAINT
    assert changed(run(moto, work, "provision.yml")) == 0


def test_a_pool_that_left_the_inventory_loses_its_nodegroup(moto, work):
    path = work / "inventory" / "host_vars" / f"{CLUSTER}.yml"
    data = yaml.safe_load(path.read_text())
    data["gpufleet_node_pools"] = [p for p in data["gpufleet_node_pools"] if p["name"] != "l4-spot"]
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))
    assert changed(run(moto, work, "provision.yml")) == 1
    assert sorted(nodegroups(moto)) == ["a10g", "p5", "system"]
    assert changed(run(moto, work, "provision.yml")) == 0


def add_pool(work: Path, pool: dict[str, Any]) -> None:
    path = work / "inventory" / "host_vars" / f"{CLUSTER}.yml"
    data = yaml.safe_load(path.read_text())
    data["gpufleet_node_pools"].append(pool)
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False))


def zones_of(moto: str, subnets: list[str]) -> list[str]:
    found = client(moto, "ec2").describe_subnets(SubnetIds=subnets)["Subnets"]
    return sorted(s["AvailabilityZone"] for s in found)


NODEGROUPS = rf"^/clusters/{CLUSTER}/node-groups"


def test_a_stockout_of_the_first_rung_gives_the_pool_its_second(moto, proxy, work):
    # The Capacity Block has no p5.48xlarge capacity left in us-east-1a: the pool gets Spot in us-east-1b.
    proxy.faults.append(
        Fault(
            "h100l",
            lambda ng: ng.get("capacityType") == "CAPACITY_BLOCK",
            "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient "
            "p5.48xlarge capacity in the Availability Zone you requested (us-east-1a). Launching EC2 instance failed.",
        )
    )
    add_pool(
        work,
        {
            "name": "h100l",
            "class": "h100-8x-block",
            "node_count": 1,
            "min_node_count": 0,
            "max_node_count": 2,
            "zones": ["us-east-1a"],
            "capacity_ladder": [
                {"kind": "reservation"},
                {"kind": "spot", "zones": ["us-east-1b"]},
                {"kind": "on-demand"},
            ],
        },
    )
    proxy.requests.clear()
    out = run(moto, work, "provision.yml")
    assert len(proxy.calls("POST", NODEGROUPS + "$")) == 2  # the Capacity Block rung, then the Spot rung
    assert proxy.calls("DELETE", NODEGROUPS + "/h100l$") == [f"/clusters/{CLUSTER}/node-groups/h100l"]
    h100l = nodegroups(moto)["h100l"]
    assert h100l["status"] == "ACTIVE" and h100l["capacityType"] == "SPOT"
    assert h100l["instanceTypes"] == ["p5.48xlarge"] and zones_of(moto, h100l["subnets"]) == ["us-east-1b"]
    assert h100l["labels"][RUNG] == "spot"  # the rung the pool got, for placement to read
    assert not h100l.get("launchTemplate")
    # The failed rung's launch template (Capacity Block) is gone with it; p5's own stays.
    templates = client(moto, "ec2").describe_launch_templates()["LaunchTemplates"]
    assert sorted(t["LaunchTemplateName"] for t in templates) == [f"gpufleet-{CLUSTER}-p5"]
    # The report names the rung the pool got, what it costs and what failed before it.
    assert "h100l: got rung 2 of 3, spot, p5.48xlarge in us-east-1b - Spot: nodes can be preempted" in out
    assert "(after rung 1 of 3 reservation: InsufficientInstanceCapacity)" in out
    # The pool stays on its rung: the next run changes nothing.
    assert changed(run(moto, work, "provision.yml")) == 0


def test_a_quota_error_stops_the_ladder_naming_the_quota(moto, proxy, work):
    # The account may run no more G instances on demand: the ladder stops instead of falling back to Spot.
    first: list[str] = []

    def first_nodegroup(ng: dict[str, Any]) -> bool:
        """The first nodegroup created under the name (a later one is created after the quota was raised)."""
        created = f"{ng['nodegroupArn']}@{ng.get('createdAt')}"
        first[:] = first or [created]
        return first == [created]

    proxy.faults.append(
        Fault(
            "l4q",
            first_nodegroup,
            "Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more vCPU capacity than your "
            "current vCPU limit of 0 allows for the instance bucket that the specified instance type belongs to. "
            "Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit. "
            "Launching EC2 instance failed.",
        )
    )
    add_pool(
        work,
        {
            "name": "l4q",
            "class": "l4-1x-spot",
            "node_count": 1,
            "max_node_count": 2,
            "zones": ["us-east-1a"],
            "capacity_ladder": [{"kind": "on-demand"}, {"kind": "spot"}],
        },
    )
    proxy.requests.clear()
    out = run(moto, work, "provision.yml", ok=False)
    assert (
        "nodegroup l4q: quota Running On-Demand G and VT instances exceeded at rung 1 of 2 (on-demand, g6.2xlarge in "
        "us-east-1a): VcpuLimitExceeded" in out
    )
    assert "the capacity ladder stops here" in out
    assert len(proxy.calls("POST", NODEGROUPS + "$")) == 1  # the Spot rung is never tried
    assert proxy.calls("DELETE", NODEGROUPS + "/l4q$") == []
    assert nodegroups(moto)["l4q"]["status"] == "CREATE_FAILED"
    # Once the quota is raised, the next run deletes the failed nodegroup and walks the ladder again: rung 1.
    proxy.requests.clear()
    out = run(moto, work, "provision.yml")
    assert proxy.calls("DELETE", NODEGROUPS + "/l4q$") == [f"/clusters/{CLUSTER}/node-groups/l4q"]
    l4q = nodegroups(moto)["l4q"]
    assert (l4q["status"], l4q["capacityType"], l4q["labels"][RUNG]) == ("ACTIVE", "ON_DEMAND", "on-demand")
    assert "l4q: got rung 1 of 2, on-demand, g6.2xlarge in us-east-1a" in out


def test_teardown_deletes_in_safe_order(moto, work):
    run(moto, work, "teardown.yml", "-e", "teardown_confirm=true", "-e", "teardown_clusters=true")
    eks = client(moto, "eks")
    assert eks.list_clusters()["clusters"] == []
    assert client(moto, "ec2").describe_launch_templates()["LaunchTemplates"] == []
    iam = client(moto, "iam")
    assert not [r for r in iam.list_roles()["Roles"] if r["RoleName"].startswith(f"gpufleet-{CLUSTER}")]
    vpcs = client(moto, "ec2").describe_vpcs(Filters=[{"Name": "tag:gpufleet.io/cluster", "Values": [CLUSTER]}])
    assert vpcs["Vpcs"] == []
    # and again: nothing left to delete
    assert changed(run(moto, work, "teardown.yml", "-e", "teardown_confirm=true", "-e", "teardown_clusters=true")) == 0
