"""What every log format shares: the parse context, interval records and their aggregation.

Upstream scripts report throughput in one of three shapes, and each becomes step marks
(step, time, samples) the same way for all formats:

- intervals (`between steps 100 and 200: 39.1 s`, `Speed: 1234 samples/sec` over a batch range):
  `intervals_to_marks` chains them into cumulative marks; lines that several ranks printed for
  the same interval are merged (samples added when each rank counts its own, elapsed = slowest);
- timestamps (a Unix time or a dated clock per line): `clock_marks`, where a time of day
  without a date rolls over at midnight;
- cumulative averages (`Time 0.123 (0.456)`: running mean per step since the epoch began).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, TypeVar

from dlperf.events import Mark, ParsedRun

T = TypeVar("T")
Counts = Literal["global", "rank"]  # a line's samples/rate: the whole job's, or one rank's


@dataclass(frozen=True)
class LogContext:
    """Facts a log leaves out: the per-device batch and how many devices ran."""

    batch_size: int
    devices_per_node: int = 1
    nodes: int = 1

    @property
    def world_size(self) -> int:
        return self.devices_per_node * self.nodes

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.world_size


@dataclass(frozen=True)
class Interval:
    start: int  # step count at the interval's start (its samples are not included)
    end: int
    samples: float
    elapsed_s: float


# Evidence in a log that the run died; the first match names the failure.
_FAILURES = (
    (
        re.compile(r"out of memory|\bOOM\b|ResourceExhaustedError|CUDNN_STATUS_ALLOC_FAILED", re.I),
        "out of memory",
    ),
    (
        re.compile(r"loss[^\n]{0,40}?[=:]\s*-?nan\b|\bnan loss\b|Loss is nan", re.I),
        "the loss became NaN",
    ),
    (re.compile(r"^Traceback \(most recent call last\):", re.M), "an uncaught Python exception"),
    (re.compile(r"Segmentation fault|core dumped|Aborted \(core", re.I), "the process crashed"),
)


def detect_failure(text: str) -> str | None:
    """Why the log says the run died, with the line that says so; None when it does not."""
    for pattern, what in _FAILURES:
        match = pattern.search(text)
        if match:
            line_start = text.rfind("\n", 0, match.start()) + 1
            line_end = text.find("\n", match.end())
            line = text[line_start : line_end if line_end != -1 else len(text)].strip()
            if what == "an uncaught Python exception":
                line = _last_exception_line(text[match.start() :]) or line
            return f"{what} ({line[:200]})"
    return None


def _last_exception_line(tail: str) -> str | None:
    for line in tail.splitlines()[1:]:
        if line and not line.startswith((" ", "\t", "Traceback")):
            return line.strip()
    return None


def first_epoch(
    items: Iterable[T], run: ParsedRun, epoch_of: Callable[[T], str | None] = lambda m: m["epoch"]
) -> Iterator[T]:
    """The items of the first epoch seen (step counters restart with each epoch and the time
    between epochs holds evaluation); a note says when later epochs were left out."""
    first = None
    dropped = False
    for match in items:
        epoch = epoch_of(match)
        if first is None:
            first = epoch
        if epoch is None or epoch == first:
            yield match
        else:
            dropped = True
    if dropped:
        run.notes.append(f"only epoch {first} is used; later epochs restart the step count")


def logging_interval(steps: Iterable[int]) -> int | None:
    """Steps between log lines: the smallest gap between consecutive logged steps."""
    ordered = sorted(set(steps))
    gaps = [b - a for a, b in zip(ordered, ordered[1:], strict=False)]
    return min(gaps) if gaps else None


def finite(value: str | float) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def intervals_to_marks(
    intervals: Iterable[Interval], counts: Counts, ctx: LogContext, run: ParsedRun
) -> None:
    """Chain intervals into cumulative marks on `run` (time 0 at the first interval's start).

    Lines for the same interval merge, each line being one rank's (these logs name no rank):
    `counts="rank"` adds their samples (each rank counted its own), `"global"` keeps one copy;
    the elapsed time is the slowest rank's. When a per-rank log holds fewer ranks than ran,
    the missing ranks are assumed to match the ones present (noted). The chain stops at a gap
    (a missing interval), since the time across it is unknown.
    """
    merged: dict[tuple[int, int], list[Interval]] = {}
    for iv in intervals:
        if iv.end > iv.start and iv.elapsed_s > 0 and iv.samples > 0:
            merged.setdefault((iv.start, iv.end), []).append(iv)
        else:
            run.malformed += 1
    if not merged:
        return
    ranks_seen = max(len(ivs) for ivs in merged.values())
    scale = 1.0
    if counts == "rank" and ranks_seen < ctx.world_size:
        scale = ctx.world_size / ranks_seen
        run.notes.append(
            f"the log has per-rank rates from {ranks_seen} of {ctx.world_size} ranks; "
            f"samples scaled by {scale:g} assuming the other ranks kept the same pace"
        )
    keys = sorted(merged)
    time = 0.0
    run.marks.append(Mark(keys[0][0], 0.0, 0.0))
    for start, end in keys:
        last = run.marks[-1].step
        if start < last:
            run.malformed += 1  # overlaps what is already chained (a restarted log)
            continue
        if start > last:
            run.notes.append(
                f"no throughput line covers steps {last}..{start}; marks after step {last} unused"
            )
            break
        ivs = merged[(start, end)]
        if counts == "rank":
            samples = sum(iv.samples for iv in ivs) * scale
        else:
            samples = max(iv.samples for iv in ivs)
        time += max(iv.elapsed_s for iv in ivs)
        run.marks.append(Mark(end, time, samples))


def clock_marks(
    points: Sequence[tuple[int, float]], samples_per_step: float, run: ParsedRun
) -> None:
    """Marks from (step, timestamp) points: samples are steps since the previous point."""
    for step, stamp in points:
        if run.marks and (step <= run.marks[-1].step or stamp < run.marks[-1].time):
            run.malformed += 1
            continue
        previous = run.marks[-1].step if run.marks else step
        run.marks.append(Mark(step, stamp, (step - previous) * samples_per_step))


def times_of_day(stamps: Sequence[datetime]) -> list[float]:
    """Seconds since the first stamp for clock readings that may lack the date or year.

    A reading earlier than the one before it by more than an hour means the clock passed
    midnight (or the year turned); small backward steps are clock noise and stay as they are.
    """
    out: list[float] = []
    offset = timedelta(0)
    previous: datetime | None = None
    for stamp in stamps:
        if previous is not None and stamp + offset < previous - timedelta(hours=1):
            gap = previous - (stamp + offset)
            offset += timedelta(days=math.ceil(gap / timedelta(days=1)))
        current = stamp + offset
        out.append((current - stamps[0]).total_seconds() if stamps else 0.0)
        previous = current
    return out


def finish(run: ParsedRun, text: str, what: str) -> ParsedRun:
    """Common tail of every parser: failure evidence and the malformed-line note."""
    run.what = what
    run.failure = detect_failure(text)
    if run.malformed:
        run.notes.append(f"{run.malformed} malformed or out-of-order {what} ignored")
    return run
