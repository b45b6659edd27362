"""What every log format shares: the parse context, interval records and their aggregation.

Upstream scripts report throughput in one of three shapes, and each becomes step marks
(step, time, samples) the same way for all formats:

- intervals (`between steps 100 and 200: 39.1 s`, `Speed: 1234 samples/sec` over a batch range):
  `IntervalTable` merges them as they are read and `intervals_to_marks` chains them into
  cumulative marks; lines that several ranks printed for the same interval are merged (samples
  added when each rank counts its own, elapsed = slowest);
- timestamps (a Unix time or a dated clock per line): `ClockMarks`, where a time of day
  without a date rolls over at midnight (`DayClock`);
- cumulative averages (`Time 0.123 (0.456)`: running mean per step since the epoch began).

Parsers read a log once, in pieces of whole lines (`dlperf.logformats.reading`), and keep per
throughput line only a few numbers (a row per interval or logged step, a mark), never the text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from dlperf.events import Mark, ParsedRun

Counts = Literal["global", "rank"]  # a line's samples/rate: the whole job's, or one rank's


@dataclass(frozen=True)
class LogContext:
    """Facts a log leaves out: the per-device batch and how many devices ran, and optionally
    the step the measurement window ends at (`horizon`). With one, every format keeps at most
    that many losses, and the formats timed by a clock (whose marks each follow from the one
    before) keep the marks up to the first one at or past it as they are and merge all later
    ones into one, the furthest step the log reaches: their memory then stays the same however
    long the log. (Formats that merge intervals need every interval to chain them, and keep
    them all.)"""

    batch_size: int
    devices_per_node: int = 1
    nodes: int = 1
    horizon: int | None = None

    @property
    def world_size(self) -> int:
        return self.devices_per_node * self.nodes

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.world_size


# ------------------------------------------------------------------ failures

# Evidence in a log that the run died; the first match names the failure. Each pattern goes
# with the lowercase words one of its matches must contain (a line is only matched against the
# pattern when it has one of them: the search for them runs over whole chunks at C speed).
_FAILURES: tuple[tuple[re.Pattern[str], tuple[bytes, ...], str], ...] = (
    (
        re.compile(r"out of memory|\bOOM\b|ResourceExhaustedError|CUDNN_STATUS_ALLOC_FAILED", re.I),
        (b"out of memory", b"oom", b"resourceexhaustederror", b"cudnn_status_alloc_failed"),
        "out of memory",
    ),
    (
        re.compile(r"loss[^\n]{0,40}?[=:]\s*-?nan\b|\bnan loss\b|Loss is nan", re.I),
        (b"nan",),
        "the loss became NaN",
    ),
    (
        re.compile(r"^Traceback \(most recent call last\):", re.M),
        (),  # case-sensitive: searched for as written, in the text itself
        "an uncaught Python exception",
    ),
    (
        re.compile(r"Segmentation fault|core dumped|Aborted \(core", re.I),
        (b"segmentation fault", b"core dumped", b"aborted (core"),
        "the process crashed",
    ),
)
_TRACEBACK = 2
_TRACEBACK_WORD = b"Traceback (most recent call last):"


class FailureWatch:
    """`detect_failure` over a log read in chunks of whole lines (UTF-8 bytes), in one pass.

    Keeps the first matching line of each kind of failure that could still outrank the best
    found so far, and, after a traceback, the exception line that ends it: a few lines at most.
    """

    def __init__(self, errors: str = "replace") -> None:
        self.errors = errors  # how a line's bytes are decoded (as the text was read)
        self._found: dict[int, str] = {}  # failure index -> its line (stripped)
        self._best = len(_FAILURES)  # the highest-ranking failure found (lower ranks higher)
        self._after_traceback = False  # the traceback's exception line is still to come

    def feed(self, chunk: bytes) -> None:
        """The next piece of the log: whole lines, each ending in a newline (but the last)."""
        if self._after_traceback and self._best == _TRACEBACK:
            self._exception_line(chunk, 0)
        if self._best == 0:
            return
        lowered = b""
        for index in range(self._best):
            pattern, words, _ = _FAILURES[index]
            if words:
                lowered = lowered or chunk.lower()  # ASCII only: offsets stay the same
                hit = self._first_match(chunk, lowered, words, pattern)
            else:
                hit = self._first_match(chunk, chunk, (_TRACEBACK_WORD,), pattern)
            if hit is None:
                continue
            line, line_start = hit
            self._found[index] = line
            self._best = index
            if index == _TRACEBACK:  # the line that names the exception comes after it
                self._after_traceback = True
                self._exception_line(chunk, line_start, skip_first=True)
            break  # the failures after this one rank lower: no need to look for them

    def _first_match(
        self, chunk: bytes, haystack: bytes, words: tuple[bytes, ...], pattern: re.Pattern[str]
    ) -> tuple[str, int] | None:
        """The first line of `chunk` that `pattern` matches, stripped, and where it starts;
        only lines where `haystack` has one of `words` are tried."""
        next_at = {word: haystack.find(word) for word in words}
        while True:
            found = [at for at in next_at.values() if at >= 0]
            if not found:
                return None
            at = min(found)
            start = chunk.rfind(b"\n", 0, at) + 1
            end = chunk.find(b"\n", at)
            end = len(chunk) if end == -1 else end
            line = chunk[start:end].decode("utf-8", self.errors)
            if pattern.search(line):
                return line.strip(), start
            for word, word_at in next_at.items():
                if 0 <= word_at <= end:
                    next_at[word] = haystack.find(word, end + 1)

    def _exception_line(self, chunk: bytes, start: int, skip_first: bool = False) -> None:
        """Look in `chunk` from `start` for the line that names the exception (the first line
        after the traceback that is not indented and not another 'Traceback')."""
        pos = start
        while pos < len(chunk):
            end = chunk.find(b"\n", pos)
            end = len(chunk) if end == -1 else end + 1
            pieces = chunk[pos:end].decode("utf-8", self.errors).splitlines()
            if skip_first:
                pieces, skip_first = pieces[1:], False
            for line in pieces:
                if line and not line.startswith((" ", "\t", "Traceback")):
                    self._found[_TRACEBACK] = line.strip()
                    self._after_traceback = False
                    return
            pos = end

    @property
    def failure(self) -> str | None:
        """Why the log says the run died, with the line that says so; None when it does not."""
        if self._best == len(_FAILURES):
            return None
        return f"{_FAILURES[self._best][2]} ({self._found[self._best][:200]})"


def detect_failure(text: str) -> str | None:
    """Why the log says the run died, with the line that says so; None when it does not."""
    from dlperf.logformats.reading import text_chunks

    watch = FailureWatch(errors="surrogatepass")
    for chunk in text_chunks(text):
        watch.feed(chunk)
    return watch.failure


# ------------------------------------------------------------------ reading


def matches(pattern: re.Pattern[str], texts: Iterable[str]) -> Iterator[re.Match[str]]:
    """Every match of `pattern` in the log given in pieces of whole lines, in order. The
    patterns never match across a line end, so the pieces may be cut at any line."""
    for text in texts:
        yield from pattern.finditer(text)


# ------------------------------------------------------------------ epochs and intervals


class EpochFilter:
    """Keeps the lines of the first epoch seen (step counters restart with each epoch and the
    time between epochs holds evaluation); `note` says when later epochs were left out."""

    def __init__(self) -> None:
        self.first: str | None = None
        self.dropped = False

    def keep(self, epoch: str | None) -> bool:
        if self.first is None:
            self.first = epoch
        if epoch is None or epoch == self.first:
            return True
        self.dropped = True
        return False

    def note(self, run: ParsedRun) -> None:
        if self.dropped:
            run.notes.append(
                f"only epoch {self.first} is used; later epochs restart the step count"
            )


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


class IntervalTable:
    """Intervals merged as they are read: per (start, end), how many lines gave it, the sum
    and the largest of their samples, and the longest elapsed time. Lines with no interval,
    time or samples are counted as malformed and kept out."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, int], list] = {}  # [lines, samples sum, max, elapsed]
        self.malformed = 0

    def add(self, start: int, end: int, samples: float, elapsed_s: float) -> None:
        """One line's interval."""
        if end > start and elapsed_s > 0 and samples > 0:
            row = self.rows.get((start, end))
            if row is None:
                self.rows[(start, end)] = [1, samples, samples, elapsed_s]
            else:
                row[0] += 1
                row[1] += samples
                if samples > row[2]:
                    row[2] = samples
                if elapsed_s > row[3]:
                    row[3] = elapsed_s
        else:
            self.malformed += 1

    def add_lines(self, start: int, end: int, samples: float, elapsed_s: float, lines: int) -> None:
        """`lines` lines that each gave this interval, samples and the longest of their times."""
        for _ in range(lines):
            self.add(start, end, samples, elapsed_s)


def intervals_to_marks(
    table: IntervalTable, counts: Counts, ctx: LogContext, run: ParsedRun
) -> None:
    """Chain intervals into cumulative marks on `run` (time 0 at the first interval's start).

    Lines for the same interval merge, each line being one rank's (these logs name no rank):
    `counts="rank"` adds their samples (each rank counted its own), `"global"` keeps one copy;
    the elapsed time is the slowest rank's. When a per-rank log holds fewer ranks than ran,
    the missing ranks are assumed to match the ones present (noted). The chain stops at a gap
    (a missing interval), since the time across it is unknown.
    """
    run.malformed += table.malformed
    merged = table.rows
    if not merged:
        return
    ranks_seen = max(row[0] for row in merged.values())
    scale = 1.0
    if counts == "rank" and ranks_seen < ctx.world_size:
        scale = ctx.world_size / ranks_seen
        run.notes.append(
            f"the log has per-rank rates from {ranks_seen} of {ctx.world_size} ranks; "
            f"samples scaled by {scale:g} assuming the other ranks kept the same pace"
        )
    chain_intervals(_merged(merged, scale, counts == "rank"), run)


def _merged(
    rows: dict[tuple[int, int], list], scale: float, rank: bool
) -> Iterator[tuple[int, int, float, float]]:
    """The merged intervals in order, each row dropped as it is given (so that the rows and the
    marks made of them are not held at the same time)."""
    for key in sorted(rows):
        _, total, largest, elapsed = rows.pop(key)
        yield key[0], key[1], total * scale if rank else largest, elapsed


def chain_intervals(rows: Iterable[tuple[int, int, float, float]], run: ParsedRun) -> None:
    """Marks on `run` from merged intervals (start, end, samples, elapsed) in order: time 0 at
    the first one's start; the chain stops at a gap, since the time across it is unknown."""
    marks = run.marks
    time = 0.0
    last: int | None = None
    for start, end, samples, elapsed in rows:
        if last is None:
            last = start
            marks.append(Mark(start, 0.0, 0.0))
        if start < last:
            run.malformed += 1  # overlaps what is already chained (a restarted log)
            continue
        if start > last:
            run.notes.append(
                f"no throughput line covers steps {last}..{start}; marks after step {last} unused"
            )
            break
        time += elapsed
        marks.append(Mark(end, time, samples))
        last = end


# ------------------------------------------------------------------ clocks


class ClockMarks:
    """Marks from (step, timestamp) points as they are read: samples are steps since the
    previous point; a point that does not move forward is malformed. Past a `horizon`, one
    mark stands for all the points after the first one there (see `LogContext`)."""

    def __init__(self, samples_per_step: float, run: ParsedRun, horizon: int | None = None) -> None:
        self.samples_per_step = samples_per_step
        self.run = run
        self.horizon = horizon
        self.last_step: int | None = None
        self.last_time = 0.0
        self.anchor: Mark | None = None  # the first mark at or past the horizon

    def add(self, step: int, stamp: float) -> None:
        last_step = self.last_step
        if last_step is None:
            samples = 0 * self.samples_per_step
        elif step <= last_step or stamp < self.last_time:
            self.run.malformed += 1
            return
        else:
            samples = (step - last_step) * self.samples_per_step
        self.last_step, self.last_time = step, stamp
        marks, anchor = self.run.marks, self.anchor
        if anchor is None:
            marks.append(Mark(step, stamp, samples))
            if self.horizon is not None and step >= self.horizon:
                self.anchor = marks[-1]
            return
        merged = Mark(step, stamp, (step - anchor.step) * self.samples_per_step)
        if marks[-1] is anchor:
            marks.append(merged)
        else:
            marks[-1] = merged


_HOUR_US = 3600 * 10**6
_DAY_US = 24 * _HOUR_US


class DayClock:
    """Seconds since the first reading of a clock whose readings may lack the date or year,
    one reading at a time (in integer microseconds, so the seconds are exact).

    A reading earlier than the one before it by more than an hour means the clock passed
    midnight (or the year turned); small backward steps are clock noise and stay as they are.
    """

    def __init__(self) -> None:
        self.first: int | None = None
        self.previous = 0
        self.offset = 0

    def seconds(self, stamp_us: int) -> float:
        if self.first is None:
            self.first = self.previous = stamp_us
            return 0.0
        if stamp_us + self.offset < self.previous - _HOUR_US:
            gap = self.previous - (stamp_us + self.offset)
            self.offset += math.ceil(gap / _DAY_US) * _DAY_US
        current = stamp_us + self.offset
        self.previous = current
        return (current - self.first) / 10**6


def finish(run: ParsedRun, what: str) -> ParsedRun:
    """Common tail of every parser: what was read, and the malformed-line note."""
    run.what = what
    if run.malformed:
        run.notes.append(f"{run.malformed} malformed or out-of-order {what} ignored")
    return run
