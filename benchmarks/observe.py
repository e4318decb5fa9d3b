"""Observed-capacity benchmark: what reading Nodes, ResourceSlices and ResourceClaims costs a run, on local clusters.

The render benchmark's generated fleet (deploy_render.generate: 4 pools and 22 GPU nodes a cluster) on N local
clusters (scripts/localfleet, default 20). ``status.yml`` in apply mode (it reads every cluster, places, reports;
it applies nothing) is timed three ways, each the median of ``--runs``:

- ``reads off``: only the serving Services are read (``gpufleet_report_drift=false``, declared capacity);
- ``drift``: declared capacity, Nodes, ResourceSlices and ResourceClaims read for the drift report (the default);
- ``observed``: ``gpufleet_capacity=observed``, placement against the usable nodes.

The added cost is ``drift - reads off`` (and ``observed - reads off``), reported in total and per cluster, in wall
seconds and in CPU seconds of the ansible-playbook process and its workers (on a loaded machine the wall time of a
run also waits for the 20 local API servers, which share the same cores, and moves by seconds from run to run; the
CPU seconds move much less). The load average is printed with the results.
Goal (issue 14): observing 20 local clusters adds <= 2 s to a run.

    .venv/bin/python -P benchmarks/observe.py [--clusters 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

sys.path.append(str(Path(__file__).resolve().parent))
from deploy_render import generate  # noqa: E402


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds of the process and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-observe-") as tmp:
        tmpdir = Path(tmp)
        inv, state = tmpdir / "inventory", tmpdir / "fleet"
        generate(inv, args.clusters, 4)
        lf = [sys.executable, str(REPO / "scripts" / "localfleet")]
        t0 = time.perf_counter()
        subprocess.run([*lf, "up", str(inv / "hosts.yml"), str(state)], check=True, stdout=subprocess.DEVNULL)
        print(f"localfleet: {args.clusters} clusters up in {time.perf_counter() - t0:.0f}s")
        try:
            env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
            play = [
                str(BIN / "ansible-playbook"),
                "-i",
                str(inv / "hosts.yml"),
                "-i",
                str(state / "inventory"),
                str(REPO / "playbooks" / "status.yml"),
                "-e",
                "gpufleet_mode=apply",
                "-e",
                f"gpufleet_state_file={tmpdir / 'state.json'}",
                "-e",
                "ansible_python_interpreter={{ ansible_playbook_python }}",
            ]
            variants = {
                "reads off": ["-e", "gpufleet_report_drift=false"],
                "drift": [],
                "observed": ["-e", "gpufleet_capacity=observed"],
            }
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
            run(play, env)  # warm-up (discovery caches, page cache)
            for _run in range(args.runs):
                for name, extra in variants.items():  # interleaved, so drift in the machine's speed hits all alike
                    times[name].append(run([*play, *extra], env))
            med = {name: statistics.median(t[0] for t in ts) for name, ts in times.items()}
            cpu = {name: statistics.median(t[1] for t in ts) for name, ts in times.items()}
            print(
                f"fleet: {args.clusters} local clusters x 22 GPU nodes (deploy_render.generate's pools); "
                f"status.yml in apply mode, median of {args.runs}; load average {os.getloadavg()[0]:.1f}"
            )
            for name in variants:
                print(
                    f"  {name:9s}: {med[name]:.2f}s wall, {cpu[name]:.2f}s CPU  "
                    f"(runs: {', '.join(f'{t[0]:.2f}/{t[1]:.2f}' for t in times[name])})"
                )
            for name in ("drift", "observed"):
                added = med[name] - med["reads off"]
                added_cpu = cpu[name] - cpu["reads off"]
                print(
                    f"added by {name}: {added:.2f}s wall in total, {added / args.clusters * 1000:.0f} ms per cluster "
                    f"(goal: <= 2 s for 20 clusters: {'met' if added <= 2 * args.clusters / 20 else 'NOT met'}); "
                    f"{added_cpu:.2f}s CPU, {added_cpu / args.clusters * 1000:.0f} ms per cluster"
                )
        finally:
            subprocess.run([*lf, "down", str(state)], check=False, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
