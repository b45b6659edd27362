"""Paced calibration workload: stdlib only, follows the dlperf events contract.

Step i ends at exactly ready + i * period (a deadline, not sleep(period), so per-step overhead
does not accumulate), hence the true throughput is batch / period.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import workload_kit as kit  # noqa: E402


def wait_until(deadline: float) -> None:
    # Sleep most of the way, then spin: sleep() alone can overshoot by a scheduler tick.
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        if left > 0.002:
            time.sleep(left - 0.0015)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--step-ms", type=float, default=20.0)
    p.add_argument("--crash-at-step", type=int)
    p.add_argument("--hang-at-step", type=int)
    p.add_argument("--exit-at-step", type=int)
    p.add_argument("--garbage-every", type=int)
    p.add_argument("--flops-per-sample", type=float, default=0.0)
    p.add_argument("--clock-scale", type=float, default=1.0)
    p.add_argument("--fault-rank", type=int, help="only this rank crashes/hangs/exits as asked")
    p.add_argument("--slow-rank", type=int, help="this rank's steps take twice as long")
    p.add_argument("--ranks-per-node", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--mode", choices=("train", "infer"), default="train")
    p.add_argument("--loadgen-settings", help="JSON: hand the paced 'model' to MLPerf LoadGen")
    a = p.parse_args()
    if a.world_size > 1 and "RANK" not in os.environ:
        return node_agent(a)
    rank = int(os.environ.get("RANK", "0"))
    if a.fault_rank is not None and rank != a.fault_rank:
        a.crash_at_step = a.hang_at_step = a.exit_at_step = None
    if a.slow_rank is not None and rank == a.slow_rank:
        a.step_ms *= 2

    events = kit.Events(rank)
    events.emit(
        "start",
        framework="calibration",
        framework_version="1",
        python=platform.python_version(),
        device="cpu",
        device_name=platform.processor() or platform.machine(),
        model="pace",
        params=0,
        flops_per_sample=a.flops_per_sample,
        batch_size=a.batch_size,
        step_ms=a.step_ms,
        mode=a.mode,
        rank=rank,
        world_size=a.world_size,
    )
    print(f"pace: batch {a.batch_size}, period {a.step_ms} ms, {a.steps} steps", flush=True)
    period = a.step_ms / 1000.0
    ready = time.monotonic()
    events.emit("ready", time=ready)
    for step in range(1, a.steps + 1):
        if step == a.crash_at_step:
            print(f"pace: crashing at step {step} as asked", file=sys.stderr, flush=True)
            return 3
        if step == a.exit_at_step:
            print(f"pace: exiting cleanly at step {step} as asked", flush=True)
            return 0
        if step == a.hang_at_step:
            print(f"pace: hanging at step {step} as asked", flush=True)
            while True:
                time.sleep(3600)
        wait_until(ready + step * period)
        mark = ready + (time.monotonic() - ready) * a.clock_scale
        events.emit("step", step=step, time=mark, samples=a.batch_size, loss=1.0 / step)
        print(f"step {step}/{a.steps}", flush=True)
        if a.garbage_every and step % a.garbage_every == 0:
            events.write_raw('{"event": "step", "step": \x00 garbage\nnot json at all\n')
            print("%%% garbage line %%%", flush=True)
    if a.loadgen_settings:  # a paced "model": any batch of up to batch-size takes one period
        pace_batch = lambda _n: wait_until(time.monotonic() + period)  # noqa: E731
        kit.hand_to_loadgen(a.loadgen_settings, pace_batch, a.batch_size, events)
    events.emit("end", time=time.monotonic(), peak_rss_mib=kit.peak_rss_mib())
    return 0


def node_agent(a: argparse.Namespace) -> int:
    """Start this node's ranks (as torchrun would) and fail fast: when one rank fails, stop
    the others and exit with its status."""
    first = a.node_rank * a.ranks_per_node
    children = []
    for local in range(a.ranks_per_node):
        env = {**os.environ, "RANK": str(first + local), "LOCAL_RANK": str(local),
               "WORLD_SIZE": str(a.world_size)}  # fmt: skip
        children.append(subprocess.Popen([sys.executable, *sys.argv], env=env))
    while True:
        codes = [c.poll() for c in children]
        failed = [code for code in codes if code not in (None, 0)]
        if failed or all(code == 0 for code in codes):
            break
        time.sleep(0.05)
    for c in children:
        if c.poll() is None:
            c.terminate()
    for c in children:
        c.wait()
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main())
