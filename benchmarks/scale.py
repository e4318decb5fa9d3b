"""Benchmark: the fleet at 1,000 and 5,000 clusters (issue 26, "Scale").

Generates a fleet of N clusters (4 node pools each; every third cluster has no Hopper pool, so the Hopper deployments
carry diagnostics for those clusters even when they are Ready) and 20 deployments of N/20 replicas each (a replica per
cluster on average), two of them short: ``model-17`` asks for more 8-GPU replicas than its 20 clusters hold,
``model-18`` for a shape no node has. Every figure is a ratio in one run against a floor over the same inventory:

- ``floor``: a one-task playbook (``ansible.builtin.debug``) over every host, the issue's floor;
- ``floor-once``: the same task ``run_once`` (what loading the inventory alone costs).

Runs are taken in pairs (floor, then the measured playbook) and each ratio is the median of the pairs' ratios, so the
machine's drift falls on both sides alike. CPU is the user + system time of the playbook's process and its children
(``os.wait4``), peak RSS their largest single process (``ru_maxrss``).

Modes:

- ``deploy``: ``playbooks/deploy.yml`` in render mode (``--clusters 1000 5000``).
- ``plan``: ``playbooks/plan.yml`` (when it exists); goal <= 0.5x the floor's CPU and <= 60 s wall at 5,000 clusters.
- ``apply-slice``: ``playbooks/apply.yml`` (when it exists) on a tenth of the fleet, after a ``plan.yml`` run:
  ``--limit`` to the slice; goal <= 1.5x the floor of the slice (the floor limited the same way).
- ``sizes``: one run of each ``--playbook`` (default ``deploy.yml``; e.g. ``caches.yml serving_stack.yml``) with the
  ``json`` stdout callback: every task result's size as AWX measures an event (``json.dumps`` of the result; AWX
  blanks one over 700,000 characters; a per-host task counts its largest host), the custom stats' sizes (goal: each
  <= 64 KB) and, after a ``deploy.yml``, the sizes of ``report.json`` and ``fleet.html``.

    .venv/bin/python -P benchmarks/scale.py deploy --clusters 1000 5000 [--pairs 3]
    .venv/bin/python -P benchmarks/scale.py plan --clusters 5000
    .venv/bin/python -P benchmarks/scale.py apply-slice --clusters 5000
    .venv/bin/python -P benchmarks/scale.py sizes --clusters 5000
    .venv/bin/python -P benchmarks/scale.py sizes --clusters 5000 --playbook caches.yml serving_stack.yml --limit 20
    .venv/bin/python -P benchmarks/scale.py generate --clusters 5000 --out /tmp/fleet-5000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / ".venv" / "collections"
BIN = Path(sys.executable).parent
EXAMPLE = REPO / "inventories" / "example" / "group_vars" / "all"
DEPLOYMENTS = 20
AWX_EVENT_LIMIT = 700_000
STATS_LIMIT = 64 * 1024

HOPPER_POOLS = [("l4", "l4-1x", 8), ("a10g", "a10g-1x", 8), ("h100", "h100-1x", 4), ("dgx", "h100-8x-ib", 2)]
SMALL_POOLS = [("l4", "l4-1x", 8), ("a10g", "a10g-1x", 8), ("l4-b", "l4-1x", 8), ("a10g-b", "a10g-1x", 4)]
SELECTORS = [
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) >= 0',
    'device.attributes["gpu.nvidia.com"].architecture == "Hopper"',
    'device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("8.0.0")) >= 0',
]
SMALL_GROUP = "bench_small"  # the first 20 clusters: model-17's candidates


def use_collection(checkout: Path) -> None:
    """Measure ``checkout`` instead of this one: its playbooks, linked as gpufleet.serving in a collections dir."""
    global REPO, COLLECTIONS
    COLLECTIONS = Path(tempfile.mkdtemp(prefix="gpufleet-scale-coll-"))
    (COLLECTIONS / "ansible_collections" / "gpufleet").mkdir(parents=True)
    (COLLECTIONS / "ansible_collections" / "gpufleet" / "serving").symlink_to(checkout)
    REPO = checkout


def cluster_names(clusters: int) -> list[str]:
    return [f"cluster-{i:04d}" for i in range(clusters)]


def _deployment(name: str, replicas: int, count: int, selectors: list[str], clusters: str | None = None) -> dict:
    dep: dict[str, Any] = {
        "name": name,
        "namespace": "bench",
        "replicas": replicas,
        "engines": [
            {
                "name": "main",
                "members": [
                    {
                        "role": "Standalone",
                        "node_selector": {
                            "devices": [{"name": "gpu", "count": count, "selectors": [{"cel": s} for s in selectors]}]
                        },
                        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0"}]}},
                    }
                ],
            }
        ],
    }
    if clusters:
        dep["clusters"] = clusters
    return dep


def deployments(clusters: int, count: int = DEPLOYMENTS) -> list[dict[str, Any]]:
    """``count`` deployments of ``clusters // 20`` replicas; ``model-17`` and ``model-18`` are short."""
    replicas = max(1, clusters // 20)
    out = []
    for i in range(count):
        name = f"model-{i:02d}"
        if i == 17:  # 8-GPU replicas on the 20 clusters of SMALL_GROUP: more than their DGX nodes hold
            out.append(_deployment(name, 60, 8, [SELECTORS[1]], clusters=SMALL_GROUP))
        elif i == 18:  # two Ada GPUs on one node: no node has them (an L4 node has one)
            out.append(_deployment(name, replicas, 2, ['device.attributes["gpu.nvidia.com"].architecture == "Ada"']))
        else:
            gpus = 8 if i % 5 == 4 else 1
            out.append(_deployment(name, replicas, gpus, [SELECTORS[i % 3], SELECTORS[0]]))
    return out


def generate(root: Path, clusters: int, n_deployments: int = DEPLOYMENTS) -> Path:
    """Write the inventory (one ``hosts.yml``, host vars inline), ``floor.yml`` / ``floor_once.yml``; returns
    ``hosts.yml``."""
    classes = yaml.safe_load((EXAMPLE / "inference_classes.yml").read_text())["gpufleet_inference_classes"]
    root.mkdir(parents=True, exist_ok=True)
    hosts: dict[str, Any] = {}
    names = cluster_names(clusters)
    for i, name in enumerate(names):
        pools = SMALL_POOLS if i % 3 == 0 else HOPPER_POOLS
        hosts[name] = {
            "gpufleet_provider": "existing",
            "gpufleet_node_pools": [{"name": p, "class": c, "node_count": n} for p, c, n in pools],
            "gpufleet_cache_storage_class": "rwx",
        }
    inventory = {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"},
            "children": {
                "gpufleet_clusters": {"hosts": hosts, "children": {SMALL_GROUP: {"hosts": dict.fromkeys(names[:20])}}}
            },
        }
    }
    (root / "hosts.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    gv = root / "group_vars" / "all"
    gv.mkdir(parents=True, exist_ok=True)
    (gv / "fleet.yml").write_text(
        yaml.safe_dump(
            {
                "gpufleet_inference_classes": classes,
                "gpufleet_model_deployments": deployments(clusters, n_deployments),
                "gpufleet_model_caches": [],
                "gpufleet_fleet_name": "bench",
                "gpufleet_mode": "render",
                "gpufleet_render_dir": str(root / "rendered"),
                "gpufleet_state_file": str(root / "state" / "placement-state.json"),
                "gpufleet_report_file": str(root / "state" / "report.json"),
                "gpufleet_fleet_html": str(root / "state" / "fleet.html"),
            }
        )
    )
    task = "    - name: One task\n      ansible.builtin.debug:\n        msg: hi\n"
    head = "---\n- name: Floor\n  hosts: gpufleet_clusters\n  gather_facts: false\n  tasks:\n"
    (root / "floor.yml").write_text(head + task)
    (root / "floor_once.yml").write_text(head + task + "      run_once: true\n")
    return root / "hosts.yml"


# --------------------------------------------------------------------------------------------------------------------
# Running a playbook and what it cost
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class Cost:
    wall: float
    cpu: float  # user + system of the process and its reaped children
    rss_mb: float  # the largest single process (ru_maxrss)
    stdout: str


def env(**extra: str) -> dict[str, str]:
    out = dict(os.environ)
    out.update(
        ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
        ANSIBLE_FORKS="20",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STDOUT_CALLBACK="default",
        ANSIBLE_DISPLAY_OK_HOSTS="false",
        ANSIBLE_DISPLAY_SKIPPED_HOSTS="false",
        ANSIBLE_RETRY_FILES_ENABLED="false",
    )
    out.update(extra)
    return out


def run(playbook: Path, inventory: Path, *args: str, check: bool = True, **extra_env: str) -> Cost:
    argv = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook), *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env(**extra_env), cwd=REPO)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if check and proc.returncode != 0:
        sys.stderr.write(stdout[-4000:] + stderr[-4000:])
        raise SystemExit(f"{playbook.name} failed with exit {proc.returncode}")
    return Cost(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, stdout)


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def paired(
    label: str,
    floor: tuple[Path, list[str]],
    target: tuple[Path, list[str]],
    inventory: Path,
    pairs: int,
    before: Any = None,
) -> dict[str, Any]:
    """``pairs`` (floor, target) runs; medians and the median of the pairs' ratios."""
    floors, targets = [], []
    for _pair in range(pairs):
        floors.append(run(floor[0], inventory, *floor[1]))
        if before is not None:
            before()
        targets.append(run(target[0], inventory, *target[1]))
    row = {
        "label": label,
        "pairs": pairs,
        "floor_cpu": statistics.median(c.cpu for c in floors),
        "floor_wall": statistics.median(c.wall for c in floors),
        "floor_rss": statistics.median(c.rss_mb for c in floors),
        "cpu": statistics.median(c.cpu for c in targets),
        "wall": statistics.median(c.wall for c in targets),
        "rss": max(c.rss_mb for c in targets),
        "cpu_ratio": statistics.median(t.cpu / f.cpu for f, t in zip(floors, targets, strict=True)),
        "wall_ratio": statistics.median(t.wall / f.wall for f, t in zip(floors, targets, strict=True)),
        "load": load(),
    }
    return row


def print_rows(rows: list[dict[str, Any]]) -> None:
    head = f"{'run':<34}{'cpu s':>8}{'wall s':>8}{'RSS MB':>8}{'floor cpu':>10}{'floor wall':>11}"
    head += f"{'floor MB':>9}{'cpu x':>7}{'wall x':>7}  load"
    print(head)
    for r in rows:
        print(
            f"{r['label']:<34}{r['cpu']:>8.1f}{r['wall']:>8.1f}{r['rss']:>8.0f}{r['floor_cpu']:>10.1f}"
            f"{r['floor_wall']:>11.1f}{r['floor_rss']:>9.0f}{r['cpu_ratio']:>7.2f}{r['wall_ratio']:>7.2f}  {r['load']}"
        )


# --------------------------------------------------------------------------------------------------------------------
# Modes
# --------------------------------------------------------------------------------------------------------------------


def mode_deploy(root: Path, clusters: list[int], pairs: int) -> None:
    rows = []
    for n in clusters:
        inv = generate(root / f"fleet-{n}", n)
        rendered = root / f"fleet-{n}" / "rendered"

        def fresh(rendered: Path = rendered) -> None:  # every deploy run renders from nothing
            shutil.rmtree(rendered, ignore_errors=True)
            shutil.rmtree(rendered.parent / "state", ignore_errors=True)

        deploy = REPO / "playbooks" / "deploy.yml"
        rows.append(
            paired(
                f"deploy.yml render, {n} clusters",
                (inv.parent / "floor.yml", []),
                (deploy, []),
                inv,
                pairs,
                before=fresh,
            )
        )
        rows[-1]["floor_once"] = run(inv.parent / "floor_once.yml", inv).cpu
        print_rows(rows[-1:])
    print_rows(rows)
    if len(rows) == 2:
        (a, b), (na, nb) = rows, clusters
        print(
            f"peak RSS {a['rss']:.0f} MB at {na} -> {b['rss']:.0f} MB at {nb} clusters: x{b['rss'] / a['rss']:.2f} "
            f"for x{nb / na:.1f} clusters; floor {a['floor_rss']:.0f} -> {b['floor_rss']:.0f} MB"
        )


def mode_plan(root: Path, clusters: list[int], pairs: int) -> None:
    plan = REPO / "playbooks" / "plan.yml"
    if not plan.exists():
        raise SystemExit("playbooks/plan.yml does not exist yet")
    rows = []
    for n in clusters:
        inv = generate(root / f"fleet-{n}", n)
        rows.append(paired(f"plan.yml, {n} clusters", (inv.parent / "floor.yml", []), (plan, []), inv, pairs))
        print_rows(rows[-1:])
        r = rows[-1]
        print(
            f"goal: cpu <= 0.5x floor: {'met' if r['cpu_ratio'] <= 0.5 else 'NOT met'}; "
            f"wall <= 60 s: {'met' if r['wall'] <= 60 else 'NOT met'}"
        )
    print_rows(rows)


def slice_inventory(full: Path, out: Path, hosts: int) -> Path:
    """An AWX job slice's inventory: the first ``hosts`` clusters of ``full`` (its ``hosts.yml``), the same group
    vars (so the same render directory and plan file), the floors beside it."""
    inventory = yaml.safe_load(full.read_text())
    group = inventory["all"]["children"]["gpufleet_clusters"]
    group["hosts"] = dict(list(group["hosts"].items())[:hosts])
    small = group["children"][SMALL_GROUP]
    small["hosts"] = {h: None for h in small["hosts"] if h in group["hosts"]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "hosts.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    shutil.copytree(full.parent / "group_vars", out / "group_vars", dirs_exist_ok=True)
    for floor in ("floor.yml", "floor_once.yml"):
        shutil.copy(full.parent / floor, out / floor)
    return out / "hosts.yml"


def mode_apply_slice(root: Path, clusters: list[int], pairs: int, how: str) -> None:
    plan, apply = REPO / "playbooks" / "plan.yml", REPO / "playbooks" / "apply.yml"
    if not (plan.exists() and apply.exists()):
        raise SystemExit("playbooks/plan.yml and playbooks/apply.yml do not exist yet")
    rows = []
    for n in clusters:
        inv = generate(root / f"fleet-{n}", n)
        run(plan, inv)  # the plan every slice applies
        if how == "limit":  # --limit over the whole inventory
            args = ["--limit", f"gpufleet_clusters[0:{n // 10 - 1}]"]
            target = inv
        else:  # an AWX job slice: an inventory of its hosts only
            args = []
            target = slice_inventory(inv, root / f"slice-{n}", n // 10)
        label = f"apply.yml, 1/10 of {n} ({how})"
        rows.append(paired(label, (target.parent / "floor.yml", args), (apply, args), target, pairs))
        print_rows(rows[-1:])
        r = rows[-1]
        print(
            f"goal: <= 1.5x the floor of the slice: cpu {'met' if r['cpu_ratio'] <= 1.5 else 'NOT met'}, "
            f"wall {'met' if r['wall_ratio'] <= 1.5 else 'NOT met'}"
        )
    print_rows(rows)


def task_sizes(output: str) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """``(size, task name)`` of every task result (the largest host's), and each custom stat's size."""
    doc = json.loads(output)
    sizes = []
    for play in doc.get("plays", []):
        for task in play.get("tasks", []):
            biggest = max((len(json.dumps(res)) for res in task.get("hosts", {}).values()), default=0)
            sizes.append((biggest, task["task"]["name"]))
    stats = {k: len(json.dumps(v)) for k, v in (doc.get("global_custom_stats") or {}).items()}
    return sizes, stats


def mode_sizes(root: Path, clusters: list[int], playbooks: list[str], limit: int | None = None) -> None:
    """Every task result's size and every custom stat's, per playbook; with deploy.yml also the report files'.
    ``limit``: run the play on the first ``limit`` clusters only (``--limit``): the fleet-wide tasks still validate
    the whole inventory (what a per-cluster playbook such as caches.yml costs per host is not the point here)."""
    for n in clusters:
        inv = generate(root / f"fleet-{n}", n)
        for playbook in playbooks:
            sizes_of(inv, n, playbook, limit)


def sizes_of(inv: Path, n: int, playbook: str, limit: int | None = None) -> None:
    started = load()
    args = ["--limit", f"gpufleet_clusters[0:{limit - 1}]"] if limit else []
    cost = run(
        REPO / "playbooks" / playbook,
        inv,
        *args,
        check=False,
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_SHOW_CUSTOM_STATS="true",
    )
    try:
        sizes, stats = task_sizes(cost.stdout)
    except ValueError:  # not the json callback's document: the playbook failed before it printed one
        raise SystemExit(f"{playbook} gave no JSON document; its output ends with:\n{cost.stdout[-4000:]}") from None
    play = f", play limited to {limit}" if limit else ""
    print(
        f"{playbook}, {n} clusters{play} ({cost.wall:.0f} s wall, {cost.cpu:.0f} s CPU, {cost.rss_mb:.0f} MB; "
        f"{started} -> {load()})"
    )
    for size, name in sorted(sizes, reverse=True)[:8]:
        print(f"  {size:>10,} chars  {'OVER 700,000' if size > AWX_EVENT_LIMIT else 'ok':<13}{name}")
    over = [name for size, name in sizes if size > AWX_EVENT_LIMIT]
    print(f"  task results over {AWX_EVENT_LIMIT:,} characters: {len(over)} {over}")
    for key, size in stats.items():
        print(
            f"  custom stat {key}: {size:,} bytes (goal <= {STATS_LIMIT:,}: {'met' if size <= STATS_LIMIT else 'NOT met'})"
        )
    state = inv.parent / "state"
    for name in ("report.json", "fleet.html"):
        if (state / name).exists():
            print(f"  {name}: {(state / name).stat().st_size:,} bytes")
    pages = sorted((state / "fleet").glob("*.html")) if (state / "fleet").is_dir() else []
    if pages:  # past 200 clusters fleet.html is a main page and cluster pages beside it (docs/deploy.md)
        sizes = [page.stat().st_size for page in pages]
        print(f"  fleet/ cluster pages: {len(pages)}, the largest {max(sizes):,} bytes, {sum(sizes):,} in all")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["deploy", "plan", "apply-slice", "sizes", "generate"])
    parser.add_argument("--clusters", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--pairs", type=int, default=3, help="(floor, playbook) pairs per figure")
    parser.add_argument(
        "--playbook", nargs="+", default=["deploy.yml"], help="sizes: the playbook(s) to measure, in this order"
    )
    parser.add_argument(
        "--slice",
        choices=["inventory", "limit"],
        default="inventory",
        help="apply-slice: an inventory of the slice's hosts (as AWX slices) or --limit over the whole inventory",
    )
    parser.add_argument(
        "--limit", type=int, help="sizes: run each playbook on the first N clusters only (the fleet stays whole)"
    )
    parser.add_argument("--out", type=Path, help="generate: where; other modes: keep the fleets there")
    parser.add_argument(
        "--collection", type=Path, help="measure this checkout of the collection (its playbooks and plugins)"
    )
    args = parser.parse_args()
    if args.collection:
        use_collection(args.collection.resolve())
    if args.mode == "generate":
        for n in args.clusters:
            out = args.out if len(args.clusters) == 1 and args.out else (args.out or Path(".")) / f"fleet-{n}"
            print(generate(out, n))
        return
    root = args.out or Path(tempfile.mkdtemp(prefix="gpufleet-scale-"))
    try:
        print(f"{os.cpu_count()} cores; {load()}")
        if args.mode == "deploy":
            mode_deploy(root, args.clusters, args.pairs)
        elif args.mode == "plan":
            mode_plan(root, args.clusters, args.pairs)
        elif args.mode == "apply-slice":
            mode_apply_slice(root, args.clusters, args.pairs, args.slice)
        else:
            mode_sizes(root, args.clusters, args.playbook, args.limit)
    finally:
        if args.out is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
