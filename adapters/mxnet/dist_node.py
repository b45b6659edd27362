"""Node agent of an MXNet data-parallel job (kvstore dist_sync over ps-lite). Stdlib only.

On node 0 it starts the ps-lite scheduler; on every node one server and one worker per device
(the workload command after `--`). Servers and the scheduler are plain `import mxnet` with
DMLC_ROLE set: MXNet runs them at import and exits when the workers finalize. The agent exits 0
only when every worker did; when any child fails it stops the others and exits non-zero, so
the launcher can stop the other nodes (a ps-lite peer never notices a dead one: it would wait).

    python dist_node.py --node-rank 0 --hosts 10.0.0.1,10.0.0.2 --port 9000 --workers 2 \
        [--split-threads] [--gpus] -- python workload.py --model resnet50 ...
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import workload_kit as kit  # noqa: E402

KILL_GRACE_S = 5.0
SERVER_EXIT_S = 60.0  # servers and the scheduler leave once all workers have finalized


def stop(children: list[tuple[str, subprocess.Popen]]) -> None:
    """SIGTERM every child still running, then SIGKILL the ones that outlive the grace."""
    alive = [p for _, p in children if p.poll() is None]
    for p in alive:
        p.terminate()
    deadline = time.monotonic() + KILL_GRACE_S
    for p in alive:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def exit_code(code: int) -> int:
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--node-rank", type=int, required=True)
    p.add_argument("--hosts", required=True, help="comma-separated node addresses, master first")
    p.add_argument("--port", type=int, required=True, help="the scheduler's port on the master")
    p.add_argument("--workers", type=int, required=True, help="workers (devices) on this node")
    p.add_argument("--split-threads", action="store_true", help="cores / DLPERF_RANKS_ON_HOST")
    p.add_argument("--gpus", action="store_true", help="one GPU per worker")
    p.add_argument("workload", nargs=argparse.REMAINDER, help="-- the worker's argv")
    return p.parse_args()


def node_env(args: argparse.Namespace, hosts: list[str], world: int) -> dict[str, str]:
    """The environment every child of this node starts from: ps-lite's DMLC_* names."""
    base = {k: v for k, v in os.environ.items() if k != "PORT"}  # ps-lite reads PORT
    base.update(
        DMLC_PS_ROOT_URI=hosts[0],
        DMLC_PS_ROOT_PORT=str(args.port),
        DMLC_NUM_SERVER=str(len(hosts)),
        DMLC_NUM_WORKER=str(world),
        DMLC_NODE_HOST=hosts[args.node_rank],
    )
    if args.split_threads:  # ranks sharing this host's cores; MXNet reads it at start-up
        base["OMP_NUM_THREADS"] = str(kit.cores_per_rank(kit.ranks_on_host(args.workers)))
    return base


def supervise(children: list[tuple[str, subprocess.Popen]], workers: list[subprocess.Popen],
              log: Callable[[str], None]) -> int:  # fmt: skip
    """Wait for the workers, then for the servers and the scheduler to leave (they do once
    every worker has finalized); any child failing (a server too) fails the node at once."""
    deadline = None
    while True:
        running = [n for n, c in children if c.poll() is None]  # before `failed`: no race
        failed = [(n, c) for n, c in children if c.poll() not in (None, 0)]
        if failed:
            name, proc = failed[0]
            log(f"{name} failed with exit code {proc.returncode}: stopping the others")
            return exit_code(proc.returncode) or 1
        if not running:
            return 0
        if deadline is None and all(w.poll() is not None for w in workers):
            deadline = time.monotonic() + SERVER_EXIT_S
        if deadline is not None and time.monotonic() > deadline:
            log(f"stopping {', '.join(running)}: still running after the workers finished")
            return 0
        time.sleep(0.1)


def main() -> int:
    args = parse_args()
    workload = args.workload[1:] if args.workload[:1] == ["--"] else args.workload
    hosts = args.hosts.split(",")

    def log(text: str) -> None:
        print(f"[dist_node {args.node_rank}] {text}", flush=True)

    world = len(hosts) * args.workers
    base = node_env(args, hosts, world)
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
    if gpus == [""]:
        gpus = [str(i) for i in range(args.workers)]

    # Children stay in this process group: whoever stops the agent's group stops them too.
    # SIGTERM to the agent alone (another launcher) still stops them, through `finally`.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    children: list[tuple[str, subprocess.Popen]] = []
    shared = ("DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_SERVER", "DMLC_NUM_WORKER",
              "DMLC_NODE_HOST", "OMP_NUM_THREADS")  # fmt: skip
    env_text = " ".join(f"{k}={base[k]}" for k in shared if k in base)
    log(f"node {args.node_rank} of {len(hosts)}, {args.workers} workers, world {world}: {env_text}")

    def start(name: str, argv: list[str], **env: str) -> subprocess.Popen:
        log(f"starting {name} ({' '.join(f'{k}={v}' for k, v in env.items())}): {' '.join(argv)}")
        proc = subprocess.Popen(argv, env={**base, **env})
        children.append((name, proc))
        return proc

    try:
        server = [sys.executable, "-c", "import mxnet"]
        if args.node_rank == 0:
            start("scheduler", server, DMLC_ROLE="scheduler")
        start("server", server, DMLC_ROLE="server")
        workers = []
        for j in range(args.workers):
            g = args.node_rank * args.workers + j
            env = {"DMLC_ROLE": "worker"}
            # The scheduler numbers workers of one host by their port: fixed ascending ports
            # make kv.rank = node_rank * workers + j here (ps-lite picks another if taken).
            if args.port + 1 + world <= 65535:
                env["PORT"] = str(args.port + 1 + g)
            if args.gpus:
                env["CUDA_VISIBLE_DEVICES"] = gpus[j]
            workers.append(start(f"worker {g}", workload, **env))
        code = supervise(children, workers, log)
        if code == 0:
            log(f"all {args.workers} workers finished")
        return code
    finally:
        stop(children)


if __name__ == "__main__":
    sys.exit(main())
