"""Benchmark the DRA device-selector engine (plugins/module_utils/dra_cel.py).

Prints, for typical GPU selectors, the cold compile time (parse + type-check + plan,
bypassing the cache) and evaluations per second of ``CompiledSelector.matches``
(which includes converting the ResourceSlice device dict, as the placement engine
does once per distinct device shape).  When cel-python is installed it also times
the same equality selector on celpy's interpreted and compiled runners, for
comparison with the numbers in shared/environment.md.

Run: ``.venv/bin/python benchmarks/cel_selectors.py`` (or ``make bench``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".venv" / "collections"))

from ansible_collections.gpufleet.serving.plugins.module_utils import dra_cel  # noqa: E402

DEVICE = {
    "name": "gpu-0",
    "driver": "gpu.nvidia.com",
    "attributes": {
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "550.54.15"},
        "index": {"int": 0},
        "uuid": {"string": "GPU-4a2f7d5e-0000-0000-0000-000000000000"},
    },
    "capacity": {"memory": {"value": "81559Mi"}},
}

SELECTORS = {
    "memory compareTo quantity": 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) >= 0',
    "productName equality": 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"',
    "cudaComputeCapability semver": (
        'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))'
    ),
    "cel.bind + several attributes": (
        'cel.bind(g, device.attributes["gpu.nvidia.com"], g.architecture == "Hopper" && g.index >= 0 && '
        'g.cudaComputeCapability.compareTo(semver("8.9.0")) >= 0)'
    ),
    "all of the above": (
        'device.driver == "gpu.nvidia.com" && '
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0 && '
        'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA") && '
        'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))'
    ),
    "comprehension (cost-tracked)": 'device.attributes["gpu.nvidia.com"].exists(k, k == "uuid")',
}


def _per_second(fn, min_time: float = 0.3) -> float:
    n = 0
    start = time.perf_counter()
    elapsed = 0.0
    batch = 100
    while elapsed < min_time:
        for _call in range(batch):
            fn()
        n += batch
        elapsed = time.perf_counter() - start
    return n / elapsed


def _compile_ms(expression: str, repeat: int = 50) -> float:
    start = time.perf_counter()
    for _call in range(repeat):
        dra_cel._compile(expression)  # uncached: parse + check + plan
    return (time.perf_counter() - start) / repeat * 1000


def main() -> None:
    print(f"{'selector':32} {'compile (ms)':>13} {'evals/s':>12} {'us/eval':>9}")
    for name, expression in SELECTORS.items():
        selector = dra_cel.compile_selector(expression)
        assert selector.matches(DEVICE) is True, name
        compile_ms = _compile_ms(expression)
        rate = _per_second(lambda s=selector: s.matches(DEVICE))
        print(f"{name:32} {compile_ms:13.3f} {rate:12,.0f} {1e6 / rate:9.1f}")
    cached = _per_second(lambda: dra_cel.compile_selector(SELECTORS["productName equality"]))
    print(f"{'compile_selector (cache hit)':32} {'':13} {cached:12,.0f} {1e6 / cached:9.2f}")
    start = time.perf_counter()
    try:
        # compile_selector() rejects this at compile time (estimated worst case 85,555,551 > 1,000,000); compiled
        # without the estimate check it measures how fast the runtime cost limit stops an evaluation.
        dra_cel._compile(
            "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, "
            "[1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, "
            "[1,2,3,4,5,6,7,8,9,10].all(g, int('1'.find('[0-9]*')) < 100)))))))"
        ).matches(DEVICE)
    except dra_cel.SelectorEvalError as exc:
        print(f"{'cost limit (10^7 iterations)':32} stopped after {time.perf_counter() - start:.2f}s: {exc}")
    _celpy_baseline()


def _celpy_baseline() -> None:
    try:
        import celpy
    except ImportError:
        print("celpy not installed: no cel-python baseline")
        return
    expression = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
    activation = {
        "device": celpy.json_to_cel(
            {"driver": DEVICE["driver"], "attributes": {"gpu.nvidia.com": {"productName": "NVIDIA H100 80GB HBM3"}}}
        )
    }
    for runner in (celpy.InterpretedRunner, celpy.CompiledRunner):
        celpy.CELParser.CEL_PARSER = None  # switching runner types needs a fresh parser
        env = celpy.Environment(runner_class=runner)
        start = time.perf_counter()
        program = env.program(env.compile(expression))
        compile_ms = (time.perf_counter() - start) * 1000
        rate = _per_second(lambda p=program: p.evaluate(activation), min_time=0.3)
        label = f"celpy {runner.__name__} (equality)"
        print(f"{label:32} {compile_ms:13.3f} {rate:12,.0f} {1e6 / rate:9.1f}")
    celpy.CELParser.CEL_PARSER = None


if __name__ == "__main__":
    main()
