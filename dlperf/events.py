"""The events contract between a workload script and the host.

A workload writes one JSON object per line to the file named by ``DLPERF_EVENTS``:

- ``{"event": "start", "framework": ..., "framework_version": ..., "device": ...,
  "device_name": ..., "params": int, "flops_per_sample": float, "python": ...}``
- ``{"event": "ready", "time": t}``: the origin mark, taken (after a device sync) just before
  step 1 runs; it counts as step 0 with no samples.
- ``{"event": "step", "step": i, "time": t, "samples": n, "loss": x}`` for i = 1, 2, ...:
  ``time`` is ``time.monotonic()`` taken after the device is synchronised at the end of step i.
- ``{"event": "loadgen", "dir": path}`` after an MLPerf LoadGen test (inference with
  ``--loadgen-settings``): LoadGen's logs are in that folder.
- ``{"event": "end", "time": t, "peak_rss_mib": m}`` when the workload finishes cleanly;
  ``peak_rss_mib`` (optional) is the process's resident-memory high-water mark in MiB.
- ``{"event": "unsupported", "reason": "..."}`` when the asked configuration cannot run on this
  device (e.g. AMP where the framework has no low-precision kernels); the workload then exits
  non-zero without training, and the repeat gets the status ``unsupported``, never a
  mislabelled number.

A workload also prints ``step <i>/<steps> ...`` on stdout right after each step event; the host
timestamps those lines as they arrive, an outside check on the workload's own clock.

Malformed lines are counted and skipped, never fatal: the marks that parse are still used.
`parse_events_file` reads a file line by line: memory grows with its steps, not its text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

# The host side of the contract with the workload scripts, in one place. The scripts run in the
# framework's env without dlperf, so they spell these names themselves;
# tests/test_workload_contract.py checks that every DLPERF_* name they use is one of these.
EVENTS_ENV = "DLPERF_EVENTS"  # the events file this process writes ("{rank}" per rank)
LOADGEN_DIR_ENV = "DLPERF_LOADGEN_DIR"  # where a workload's LoadGen run writes its logs
RANKS_ON_HOST_ENV = "DLPERF_RANKS_ON_HOST"  # ranks a per-host launcher starts on its host
ONEFLOW_SINGLE_HOST_ENV = "DLPERF_ONEFLOW_SINGLE_HOST"  # "1": every rank on one OneFlow node
WORKLOAD_ENV = (EVENTS_ENV, LOADGEN_DIR_ENV, RANKS_ON_HOST_ENV, ONEFLOW_SINGLE_HOST_ENV)
STEP_LINE = re.compile(r"step (\d+)/")  # a workload's progress line: "step 7/100 ..."


@dataclass(frozen=True, slots=True)
class Mark:
    """State after `step` iterations: `samples` processed since the previous mark, at `time` s."""

    step: int
    time: float
    samples: float


@dataclass
class ParsedRun:
    start: dict[str, Any] = field(default_factory=dict)
    marks: list[Mark] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    ended: bool = False
    peak_rss_mib: float | None = None  # the workload process's (a job's: its largest rank's)
    unsupported: str | None = None
    malformed: int = 0
    notes: list[str] = field(default_factory=list)
    failure: str | None = None  # the output shows the run died (OOM, NaN loss, traceback)
    what: str = "events"  # what the marks were read from, for messages
    rank_marks: list[list[Mark]] = field(default_factory=list)  # a job's (merge_ranks), by rank


def parse_events(text: str) -> ParsedRun:
    return parse_event_lines(text.splitlines())


def parse_events_file(path: str | PathLike[str]) -> ParsedRun:
    """`parse_events` of a file's text, read a line at a time."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse_event_lines(split_lines(f))


def split_lines(lines: Iterable[str]) -> Iterator[str]:
    """The lines `str.splitlines` would give of the text those lines make up (it also ends a
    line at a form feed, \x1c-\x1e, \x85, \u2028 and \u2029)."""
    for line in lines:
        yield from line.splitlines()


def parse_event_lines(lines: Iterable[str]) -> ParsedRun:
    run = ParsedRun()
    for line in lines:
        if not line.strip():
            continue
        try:
            event = json.loads(line)
            kind = event["event"]
            if kind == "start":
                run.start = {k: v for k, v in event.items() if k != "event"}
            elif kind == "ready":
                run.marks.append(Mark(0, _finite(event["time"]), 0.0))
            elif kind == "step":
                mark = Mark(int(event["step"]), _finite(event["time"]), _finite(event["samples"]))
                if run.marks and (
                    mark.step <= run.marks[-1].step or mark.time < run.marks[-1].time
                ):
                    raise ValueError("step or time went backwards")
                run.marks.append(mark)
                if "loss" in event and event["loss"] is not None:
                    run.losses.append(float(event["loss"]))
            elif kind == "end":
                run.ended = True
                run.peak_rss_mib = _peak_mib(event.get("peak_rss_mib"), run)
            elif kind == "loadgen":
                pass  # the host reads LoadGen's logs from the folder it gave the workload
            elif kind == "unsupported":
                run.unsupported = str(event.get("reason") or "not supported on this device")
            else:
                raise ValueError(kind)
        except (ValueError, KeyError, TypeError, AttributeError):
            run.malformed += 1
    if run.malformed:
        run.notes.append(f"{run.malformed} malformed event line(s) ignored")
    return run


def _peak_mib(value: Any, run: ParsedRun) -> float | None:
    """An end event's memory: a positive finite number of MiB, else None with a note (the end
    itself still counts)."""
    if value is None:
        return None
    try:
        mib = _finite(value)
    except (TypeError, ValueError):
        mib = -1.0
    if mib > 0:
        return mib
    run.notes.append(f"the end event's peak_rss_mib {str(value)[:40]!r} is not a size: ignored")
    return None


def _finite(value: Any) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("not finite")
    return number


def merge_ranks(runs: list[ParsedRun]) -> ParsedRun:
    """One job's run from every rank's: rank 0's start line and losses describe the job, it
    ended when every rank did, and any rank's failure or refusal is the job's. Each rank's marks
    are kept apart in `rank_marks`, since ranks on different hosts share no clock: the job's
    window is computed from them (`stats.job_window`: every rank's samples over the slowest
    rank's own window). `marks` are rank 0's on the steps every rank reached."""
    by_rank = [{m.step: m for m in r.marks} for r in runs]
    common = set.intersection(*(set(m) for m in by_rank)) if by_rank else set()
    return ParsedRun(
        start=dict(runs[0].start) if runs else {},
        marks=[m for m in runs[0].marks if m.step in common] if runs else [],
        rank_marks=[list(r.marks) for r in runs],
        losses=list(runs[0].losses) if runs else [],
        ended=all(r.ended for r in runs),
        peak_rss_mib=max((r.peak_rss_mib for r in runs if r.peak_rss_mib), default=None),
        unsupported=next((r.unsupported for r in runs if r.unsupported), None),
        malformed=sum(r.malformed for r in runs),
        notes=[note for r in runs for note in r.notes],
        failure=next((r.failure for r in runs if r.failure), None),
    )
