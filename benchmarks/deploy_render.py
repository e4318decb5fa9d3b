"""Benchmark: `ansible-playbook playbooks/deploy.yml` in render mode over a generated 100-cluster fleet.

Prints the wall time of a one-task `debug` playbook over the same inventory (Ansible's floor), of the first deploy
run and of the second run (which must report changed=0). Target: first run <= 4x the floor.

    .venv/bin/python benchmarks/deploy_render.py [--clusters 100] [--deployments 10] [--forks 20]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "inventories" / "example" / "group_vars" / "all"


def generate(root: Path, clusters: int, deployments: int) -> None:
    classes = yaml.safe_load((EXAMPLE / "inference_classes.yml").read_text())["gpufleet_inference_classes"]
    gv = root / "group_vars" / "all"
    gv.mkdir(parents=True)
    (root / "host_vars").mkdir()
    (root / "group_vars" / "gpufleet_clusters.yml").write_text("---\nansible_connection: local\n")
    names = [f"cluster-{i:03d}" for i in range(clusters)]
    hosts = {"all": {"children": {"gpufleet_clusters": {"hosts": dict.fromkeys(names)}}}}
    (root / "hosts.yml").write_text(yaml.safe_dump(hosts))
    pools = [("l4", "l4-1x", 8), ("a10g", "a10g-1x", 8), ("h100", "h100-1x", 4), ("dgx", "h100-8x-ib", 2)]
    for name in names:
        hv = {
            "gpufleet_provider": "existing",
            "gpufleet_node_pools": [{"name": p, "class": c, "node_count": n} for p, c, n in pools],
            "gpufleet_cache_storage_class": "rwx",
        }
        (root / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(hv))
    deps = []
    selectors = [
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) >= 0',
        'device.attributes["gpu.nvidia.com"].architecture == "Hopper"',
        'device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("8.0.0")) >= 0',
    ]
    for i in range(deployments):
        count = 8 if i % 5 == 4 else 1
        deps.append(
            {
                "name": f"model-{i:02d}",
                "namespace": "bench",
                "replicas": 20,
                "engines": [
                    {
                        "name": "main",
                        "members": [
                            {
                                "role": "Standalone",
                                "node_selector": {
                                    "devices": [
                                        {
                                            "name": "gpu",
                                            "count": count,
                                            "selectors": [{"cel": selectors[i % 3]}, {"cel": selectors[0]}],
                                        }
                                    ]
                                },
                                "template": {
                                    "spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0"}]}
                                },
                            }
                        ],
                    }
                ],
            }
        )
    (gv / "fleet.yml").write_text(
        yaml.safe_dump(
            {
                "gpufleet_inference_classes": classes,
                "gpufleet_model_deployments": deps,
                "gpufleet_model_caches": [],
                "gpufleet_fleet_name": "bench",
                "gpufleet_mode": "render",
                "gpufleet_render_dir": str(root / "rendered"),
            }
        )
    )
    (root / "floor.yml").write_text(
        "---\n- name: Floor\n  hosts: gpufleet_clusters\n  gather_facts: false\n  tasks:\n"
        "    - name: One task\n      ansible.builtin.debug:\n        msg: hi\n"
    )


def run(playbook: Path, inventory: Path, forks: int) -> tuple[float, str]:
    env = dict(os.environ)
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"),
        ANSIBLE_FORKS=str(forks),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STDOUT_CALLBACK="default",
        ANSIBLE_DISPLAY_OK_HOSTS="false",
        ANSIBLE_DISPLAY_SKIPPED_HOSTS="false",
    )
    start = time.perf_counter()
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"{playbook.name} failed with exit {proc.returncode}")
    return elapsed, proc.stdout


def changed_total(output: str) -> int:
    return sum(int(n) for n in re.findall(r"changed=(\d+)", output))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--deployments", type=int, default=10)
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the generated inventory and render dir")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gpufleet-bench-"))
    try:
        generate(root, args.clusters, args.deployments)
        inventory = root / "hosts.yml"
        floor, _floor_out = run(root / "floor.yml", inventory, args.forks)
        first, out1 = run(REPO / "playbooks" / "deploy.yml", inventory, args.forks)
        second, out2 = run(REPO / "playbooks" / "deploy.yml", inventory, args.forks)
        files = len(list((root / "rendered").rglob("*.yaml")))
        print(
            f"fleet: {args.clusters} clusters, {args.deployments} deployments, forks={args.forks}; {files} files rendered"
        )
        print(f"{'run':<28}{'seconds':>10}{'x floor':>10}{'changed':>10}")
        print(f"{'floor (one debug task)':<28}{floor:>10.2f}{1:>10.2f}{'-':>10}")
        print(f"{'deploy.yml first run':<28}{first:>10.2f}{first / floor:>10.2f}{changed_total(out1):>10}")
        print(f"{'deploy.yml second run':<28}{second:>10.2f}{second / floor:>10.2f}{changed_total(out2):>10}")
        print(
            f"target: first run <= 4x floor: {'met' if first <= 4 * floor else 'NOT met'}; "
            f"second run changed=0: {'met' if changed_total(out2) == 0 else 'NOT met'}"
        )
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
