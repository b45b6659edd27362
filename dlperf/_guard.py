"""Ends the workloads of a dlperf process that died without ending them itself.

dlperf kills its workloads on every exit it lives through (a normal end, Ctrl-C, SIGTERM,
SIGHUP, a timeout). `kill -9`, the OOM killer or a crashed interpreter give it no chance, and a
workload started in its own session would then run on forever. `proc.run_process` therefore
starts this small program once per dlperf process, in a session of its own, with a pipe on its
standard input, and writes one line per workload: ``+PID`` once the workload is running (PID
leads its own session and process group) and ``-PID`` once dlperf has ended it. The pipe closes
when dlperf ends, however it ends: the kernel closes a dead process's files. Every workload
still registered then is dlperf's leftover, and this program ends it: SIGTERM to every process
in its session and to their descendants (also those that left the session), then SIGKILL to
those still there after the grace period.

It runs with the interpreter that runs dlperf (`python -m dlperf._guard`) and imports only
psutil, so it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import psutil

GRACE_S = 5.0


def _members(sessions: set[int]) -> list[psutil.Process]:
    """The processes of `sessions`, and their descendants wherever those moved."""
    found: dict[int, psutil.Process] = {}
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) in sessions:
                found[p.pid] = p
                for child in p.children(recursive=True):
                    found[child.pid] = child
        except (OSError, psutil.Error):
            continue
    found.pop(os.getpid(), None)
    return list(found.values())


def _signal(procs: list[psutil.Process], sig: signal.Signals) -> None:
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.Error:
            continue


def end_sessions(sessions: set[int], grace_s: float = GRACE_S) -> None:
    """SIGTERM everything in `sessions`, then SIGKILL what is left after `grace_s`."""
    procs = _members(sessions)
    if not procs:
        return
    _signal(procs, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    _signal(alive, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=grace_s)


def main() -> int:
    # A closed terminal or Ctrl-C reaches dlperf, which ends its workloads itself; this program
    # must outlive dlperf for exactly the cases where dlperf cannot.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    sessions: set[int] = set()
    for raw in sys.stdin.buffer:
        line = raw.strip()
        try:
            pid = int(line[1:])
        except ValueError:
            continue
        if line.startswith(b"+"):
            sessions.add(pid)
        elif line.startswith(b"-"):
            sessions.discard(pid)
    if sessions:
        time.sleep(0.1)  # let a dying dlperf's own kills land first
        end_sessions(sessions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
