"""Harness benchmarks: calibration fidelity and per-repeat overhead; prints figures only.

    python benchmarks/harness.py            # both
    python benchmarks/harness.py fidelity   # reported / true throughput of the paced workload
    python benchmarks/harness.py overhead   # seconds per repeat beyond the workload's own run

Fidelity: the calibration workload paces steps to an exact period, so its true throughput is
batch * 1000 / step_ms; the harness must report it within 0.5 %.
Overhead: the workload run directly (same argv, same interpreter) vs `dlperf run` with 1 and
with R repeats; the slope per extra repeat minus the direct run time is the harness's cost per
repeat (spawn, log tee, event parsing, stats), the intercept its fixed start-up cost.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dlperf.adapters.calibration import SCRIPT
from dlperf.runner import run_benchmark
from dlperf.spec import resolve_spec

STEPS = 25  # smoke preset: skip 5 + measure 20


def fidelity() -> None:
    print("calibration fidelity (measure 100, 3 repeats): reported / true throughput")
    print(f"{'step_ms':>8} {'batch':>6} {'true':>10} {'median':>10} {'ratio':>9} {'worst':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for step_ms, batch in ((5, 10), (20, 10), (50, 32)):
            spec = resolve_spec(
                "calibration",
                "pace",
                preset="smoke",
                overrides={
                    "batch_size": batch,
                    "measure": 100,
                    "repeats": 3,
                    "options": {"step_ms": str(step_ms)},
                },
            )
            result, _ = run_benchmark(spec, Path(tmp))
            true = batch * 1000.0 / step_ms
            t = result.metrics.throughput
            worst = max(abs(v / true - 1) for v in t.values)
            print(
                f"{step_ms:>8} {batch:>6} {true:>10.2f} {t.median:>10.2f} "
                f"{t.median / true:>9.5f} {worst:>8.3%}"
            )


def _wall(argv: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def overhead(runs: int = 5, repeats: int = 5) -> None:
    direct = [sys.executable, str(SCRIPT), "--batch-size", "10", "--steps", str(STEPS)]
    cli = [sys.executable, "-m", "dlperf", "run", "calibration", "pace", "--preset", "smoke"]
    with tempfile.TemporaryDirectory() as tmp:
        t_direct = statistics.median(_wall(direct, tmp) for _ in range(runs))
        t_one = statistics.median(_wall([*cli, "--repeats", "1"], tmp) for _ in range(runs))
        t_many = statistics.median(
            _wall([*cli, "--repeats", str(repeats)], tmp) for _ in range(runs)
        )
    per_repeat = (t_many - t_one) / (repeats - 1)
    print(f"workload alone ({STEPS} steps of 20 ms):        {t_direct:.3f} s (median of {runs})")
    print(f"dlperf run, 1 repeat:                       {t_one:.3f} s")
    print(f"dlperf run, {repeats} repeats:                      {t_many:.3f} s")
    print(f"harness overhead per repeat:                {per_repeat - t_direct:.3f} s")
    print(f"fixed cost per `dlperf run` (CLI start-up): {t_one - per_repeat:.3f} s")


if __name__ == "__main__":
    what = sys.argv[1:] or ["fidelity", "overhead"]
    for name in what:
        {"fidelity": fidelity, "overhead": overhead}[name]()
