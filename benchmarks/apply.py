"""Apply-mode benchmark: deploy.yml vs `kubectl apply --server-side` of the same rendered files, on a local fleet.

A generated fleet of 4 clusters (scripts/localfleet) and 10 deployments (20 replicas). The floor is kubectl applying
each cluster's rendered directory (one process per cluster, in parallel), first on empty clusters and again
unchanged. deploy.yml does more than the floor — it validates, reads the clusters, places, renders, creates
namespaces, applies, waits until every workload is ready by its replica counts and prunes — and is timed the same
way. Goal (issue 10): first run <= 3x the floor, second run <= 1.5x.

    .venv/bin/python -P benchmarks/apply.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CLUSTERS = [f"bench-{i}" for i in range(4)]
L4 = {"productName": {"string": "NVIDIA L4"}, "architecture": {"string": "Ada Lovelace"}}


def write_inventory(root: Path) -> None:
    (root / "group_vars" / "all").mkdir(parents=True)
    (root / "hosts.yml").write_text(
        yaml.safe_dump({"all": {"children": {"gpufleet_clusters": {"hosts": dict.fromkeys(CLUSTERS)}}}})
    )
    hostvars = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "gpufleet_provider": "existing",
        "gpufleet_mode": "apply",
        "gpufleet_node_pools": [{"name": "l4", "class": "l4-1x", "node_count": 8}],
    }
    classes = {
        "l4-1x": {
            "devices": [
                {
                    "name": "gpu",
                    "driver": "gpu.nvidia.com",
                    "device_class_name": "gpu.nvidia.com",
                    "count": 1,
                    "attributes": L4,
                    "capacity": {"memory": {"value": "23034Mi"}},
                }
            ]
        }
    }
    deployments = [
        {
            "name": f"model-{i}",
            "namespace": f"team-{i % 3}",
            "replicas": 2,
            "engines": [
                {
                    "name": "main",
                    "members": [
                        {
                            "role": "Standalone",
                            "node_selector": {
                                "devices": [
                                    {"name": "gpu", "selectors": [{"cel": 'device.driver == "gpu.nvidia.com"'}]}
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
        for i in range(10)
    ]
    (root / "group_vars" / "all" / "fleet.yml").write_text(
        yaml.safe_dump({**hostvars, "gpufleet_inference_classes": classes, "gpufleet_model_deployments": deployments})
    )


def run(argv: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-apply-") as tmp:
        tmpdir = Path(tmp)
        inv, state, rendered = tmpdir / "inventory", tmpdir / "fleet", tmpdir / "rendered"
        write_inventory(inv)
        lf = [sys.executable, str(REPO / "scripts" / "localfleet")]
        subprocess.run([*lf, "up", str(inv), str(state)], check=True, stdout=subprocess.DEVNULL)
        try:
            env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
            play = [
                str(BIN / "ansible-playbook"),
                "-i",
                str(inv),
                "-i",
                str(state / "inventory"),
                str(REPO / "playbooks" / "deploy.yml"),
                "-e",
                f"gpufleet_state_file={tmpdir / 'state.json'}",
                "-e",
                "model_deployment_poll_interval=0.5",
            ]
            run([*play, "-e", "gpufleet_mode=render", "-e", f"gpufleet_render_dir={rendered}"], env)
            kubectl = (
                Path(
                    subprocess.run(
                        [str(REPO / "scripts" / "localfleet-build.sh"), "--print"],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout.strip()
                )
                / "kubectl"
            )

            def kc(host: str, *args: str) -> list[str]:
                return [str(kubectl), "--kubeconfig", str(state / "kubeconfigs" / host), *args]

            def floor() -> float:
                t0 = time.perf_counter()
                with ThreadPoolExecutor(len(CLUSTERS)) as pool:
                    list(
                        pool.map(
                            lambda h: run(
                                kc(
                                    h,
                                    "apply",
                                    "--server-side",
                                    "--field-manager=gpufleet",
                                    "-R",
                                    "-f",
                                    str(rendered / h),
                                )
                            ),
                            CLUSTERS,
                        )
                    )
                return time.perf_counter() - t0

            for h in CLUSTERS:
                for ns in ("team-0", "team-1", "team-2"):
                    run(kc(h, "create", "namespace", ns))
            floor1, floor2 = floor(), floor()
            for h in CLUSTERS:
                run(kc(h, "delete", "namespace", "team-0", "team-1", "team-2", "--wait=true"))
            first = run(play, env)
            second = run(play, env)
            files = len(list(rendered.rglob("*.yaml")))
            print(f"fleet: {len(CLUSTERS)} local clusters, 10 deployments, 20 replicas, {files} objects")
            print(
                f"floor (kubectl apply --server-side per cluster, parallel): first {floor1:.2f}s, second {floor2:.2f}s"
            )
            print(
                f"deploy.yml apply: first {first:.2f}s ({first / floor1:.1f}x), second {second:.2f}s ({second / floor2:.1f}x)"
            )
        finally:
            subprocess.run([*lf, "down", str(state)], check=False, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
