"""Apply-mode benchmark: deploy.yml vs `kubectl apply --server-side` of the same rendered files, on a local fleet.

The render benchmark's generated fleet (deploy_render.generate: 4 pools a cluster, 10 deployments of 20 replicas,
placed as far as they fit) on 4 local clusters (scripts/localfleet). The floor is kubectl applying
each cluster's rendered directory (one process per cluster, in parallel), first on empty clusters and again
unchanged. deploy.yml does more than the floor — it validates, reads the clusters, places, renders, creates
namespaces, applies, waits until every workload is ready by its replica counts and prunes — and is timed the same
way. Second runs are taken in pairs, the floor then deploy.yml, and the ratio is the median of the pairs' ratios, so
the machine's drift over the minutes the benchmark takes falls on both sides alike.
Goal (issue 10): first run <= 3x the floor, second run <= 1.5x.

    .venv/bin/python -P benchmarks/apply.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CLUSTERS = [f"cluster-{i:03d}" for i in range(4)]  # the names deploy_render.generate gives
PAIRS = 5  # second runs, floor and deploy.yml in turn

# The fleet generator of the render benchmark (benchmarks/ is not on sys.path under `python -P`).
sys.path.append(str(Path(__file__).resolve().parent))
from deploy_render import generate  # noqa: E402


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
        generate(inv, len(CLUSTERS), 10)
        lf = [sys.executable, str(REPO / "scripts" / "localfleet")]
        subprocess.run([*lf, "up", str(inv), str(state)], check=True, stdout=subprocess.DEVNULL)
        try:
            env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
            play = [
                str(BIN / "ansible-playbook"),
                "-i",
                str(inv / "hosts.yml"),  # not the directory: it also holds the render benchmark's floor.yml
                "-i",
                str(state / "inventory"),
                str(REPO / "playbooks" / "deploy.yml"),
                "-e",
                f"gpufleet_state_file={tmpdir / 'state.json'}",
                "-e",
                "gpufleet_mode=apply",
                "-e",
                "model_deployment_poll_interval=0.5",
                "-e",
                "ansible_python_interpreter={{ ansible_playbook_python }}",
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
                                    # Not deploy.yml's manager: both apply the same objects in turn, and the
                                    # rendered files lack the digest annotation deploy.yml's manager owns.
                                    "--field-manager=bench-floor",
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
                run(kc(h, "create", "namespace", "bench"))
            floor1 = floor()
            for h in CLUSTERS:
                run(kc(h, "delete", "namespace", "bench", "--wait=true"))
            first = run(play, env)
            # Second runs (nothing to change) take a few seconds, so the machine's drift matters: one of each to settle
            # (kubectl's field manager takes its share of the fields deploy.yml applied), then PAIRS pairs in turn,
            # floor then deploy.yml, each pair's ratio taken on its own.
            floor()
            run(play, env)
            pairs = [(floor(), run(play, env)) for _pair in range(PAIRS)]
            floor2 = statistics.median(f for f, _d in pairs)
            second = statistics.median(d for _f, d in pairs)
            ratio = statistics.median(d / f for f, d in pairs)
            files = len(list(rendered.rglob("*.yaml")))
            print(f"fleet: {len(CLUSTERS)} local clusters, 10 deployments, {files} objects applied")
            print(
                f"floor (kubectl apply --server-side per cluster, parallel): first {floor1:.2f}s, second {floor2:.2f}s"
            )
            print(f"deploy.yml apply: first {first:.2f}s ({first / floor1:.2f}x), second {second:.2f}s")
            print(
                f"second run: {ratio:.2f}x the floor (median of {PAIRS} pairs run in turn; "
                f"pair ratios {min(d / f for f, d in pairs):.2f}-{max(d / f for f, d in pairs):.2f}x)"
            )
        finally:
            subprocess.run([*lf, "down", str(state)], check=False, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
