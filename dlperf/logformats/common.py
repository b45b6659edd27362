"""What every log format shares: the parse context, interval records and their aggregation.

Upstream scripts report throughput in one of three shapes, and each becomes step marks
(step, time, samples) the same way for all formats:

- intervals (`between steps 100 and 200: 39.1 s`, `Speed: 1234 samples/sec` over a batch range):
  `IntervalTable` merges them as they are read and `intervals_to_marks` chains them into
  cumulative marks; lines that several ranks printed for the same interval are merged (samples
  added when each rank counts its own, elapsed = slowest); past a horizon, in bounded memory
  (`LogContext`; gluon-nlp's steps: `PastSteps`);
- timestamps (a Unix time or a dated clock per line): `ClockMarks`, where a time of day
  without a date rolls over at midnight (`DayClock`);
- cumulative averages (`Time 0.123 (0.456)`: running mean per step since the epoch began).

Parsers read a log once, in pieces of whole lines (`dlperf.logformats.reading`), and keep per
throughput line only a few numbers (a row per interval or logged step, a mark), never the text.
"""

from __future__ import annotations

import bisect
import heapq
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
    the step the measurement window ends at (`horizon`).

    With a horizon, every format keeps at most that many losses; the formats timed by a clock
    and the interval formats (keras_time_history, gluonnlp) keep their marks up to the first
    one at or past the horizon as they are and merge all later ones into one: the furthest
    step the chain reaches, its time, and the samples since the mark before. Their memory then
    stays the same however long the log, and the window (`stats.window_throughput`: marks up
    to the horizon) is the one without a horizon. (The formats that use only their first epoch
    keep its marks or rows whatever the horizon.)

    The interval formats need every interval to chain them. They keep the rows that start
    before the horizon as they are (gluon-nlp: the steps up to it and the first after it) and,
    past it, the rows of the last `PENDING` intervals read, merged as without a horizon (the
    lines of several ranks for one interval, rows out of order, overlapping rows). Older rows
    are folded, in order, into runs of contiguous intervals (`RUNS` at most): where a run
    starts and ends, its sums, how many rows overlapped it. The reach, the notes, the
    malformed count and the rank scaling are then those without a horizon, unless a row past
    the horizon comes after `PENDING` later intervals were read (a rank whose lines come in a
    block after another's). Exact answers for such a late row would need every row kept:

    - one that repeats an interval of a run is another rank's line for it, as before, but it
      leaves the run as it is: its time does not raise the run's, its samples are not added
      where each rank counts its own, and it does not count as one more rank for the scaling
      (the merged mark, never the window, then has the earlier lines' time and samples);
    - one that otherwise overlaps a run counts as malformed, even where it would have been
      chained first (the same start as one of the run's rows, an earlier end) and, in a run
      whose intervals differ in length, where it repeats one of them; one that overlaps the
      rows before the horizon counts as malformed every time it comes;
    - one that starts where a run ends, ends where one starts, or lies between runs extends,
      joins or starts a run: a gap it fills is filled as without a horizon; a gluon-nlp step
      between two of a run's shortens the interval as without a horizon;
    - a row before the horizon is always kept as it is, but if one comes that late and moves
      where their chain ends, the rows folded before it stay placed against the chain as it
      was: those that started inside it count as malformed, and a run that the new chain
      ends inside of is taken whole.

    Past `RUNS` runs apart (more than `RUNS` gaps past the horizon) the furthest are dropped.
    The chain stops at the first gap anyway, so nothing changes unless late rows fill every
    gap up to the dropped runs: the chain then stops where they began, with a note saying so,
    and a late gluon-nlp step among them no longer shortens the interval (the one case where
    the window can differ from the one without a horizon: that interval sets every mark)."""

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
    """Why a log says its run died, with the line that says so (None when it does not), over
    the log read in chunks of whole lines (UTF-8 bytes), in one pass.

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


# Past a horizon (see LogContext): the rows of the last PENDING intervals read are merged as they
# are, older ones are folded into at most RUNS runs of contiguous intervals. The tests lower them.
PENDING = 1024
RUNS = 64


class IntervalTable:
    """Intervals merged as they are read: per (start, end), how many lines gave it, the sum
    and the largest of their samples, and the longest elapsed time. Lines with no interval,
    time or samples are counted as malformed and kept out. With a `horizon`, the rows that
    start at or past it go to a `_PastIntervals`, in bounded memory (see `LogContext`)."""

    def __init__(self, horizon: int | None = None) -> None:
        self.rows: dict[tuple[int, int], list] = {}  # [lines, samples sum, max, elapsed]
        self.malformed = 0
        self.horizon = horizon
        self.past = None if horizon is None else _PastIntervals(self)
        self._end: int | None | bool = False  # kept_end's answer; False: to be worked out

    def add(self, start: int, end: int, samples: float, elapsed_s: float) -> None:
        """One line's interval."""
        if end > start and elapsed_s > 0 and samples > 0:
            if self.past is not None and start >= self.horizon:
                self.past.add((start, end), samples, elapsed_s)
                return
            row = self.rows.get((start, end))
            if row is None:
                self.rows[(start, end)] = [1, samples, samples, elapsed_s]
                self._end = False
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

    def kept_end(self) -> int | None:
        """Where the chain of the rows kept as they are ends, as it stands (None: no rows)."""
        if self._end is False:
            last = None
            for start, end in sorted(self.rows):
                if last is None or start == last:
                    last = end
                elif start > last:
                    break
            self._end = last
        return self._end


class _Run:
    """Contiguous intervals folded into one: where they start and end, the sums of their
    samples (each row's sum over lines and its largest) and times, the rows that overlapped
    them (malformed), how many rows in all, and the rows' common length (0: lengths differ)."""

    __slots__ = ("start", "end", "total", "largest", "elapsed", "malformed", "rows", "length")

    def __init__(self, start: int, end: int, row: list) -> None:
        self.start, self.end = start, end
        _, self.total, self.largest, self.elapsed = row
        self.malformed = 0
        self.rows = 1
        self.length = end - start

    def absorb(self, other: _Run) -> None:
        """`other`, which starts where this run ends, joins it."""
        self.end = other.end
        self.total += other.total
        self.largest += other.largest
        self.elapsed += other.elapsed
        self.malformed += other.malformed
        self.rows += other.rows
        if other.length != self.length:
            self.length = 0


class _PastIntervals:
    """An `IntervalTable`'s rows past its horizon, in bounded memory: the rows of the last
    `PENDING` intervals as they are (so that lines repeated by several ranks merge, and rows
    that arrive out of order are put in order), older ones folded in order into runs of
    contiguous intervals (see `LogContext`)."""

    def __init__(self, table: IntervalTable) -> None:
        self.table = table
        self.pending: dict[tuple[int, int], list] = {}  # as IntervalTable.rows
        self.heap: list[tuple[int, int]] = []  # the pending keys
        self.frontier: tuple[int, int] | None = None  # the last interval folded
        self.runs: list[_Run] = []  # in order, apart
        self.cut: int | None = None  # where the runs dropped past RUNS began
        self.overlaps = 0  # rows folded that start inside the kept rows' chain
        self.ranks = 0  # the most lines of one interval folded

    def add(self, key: tuple[int, int], samples: float, elapsed_s: float) -> None:
        row = self.pending.get(key)
        if row is not None:
            row[0] += 1
            row[1] += samples
            if samples > row[2]:
                row[2] = samples
            if elapsed_s > row[3]:
                row[3] = elapsed_s
        elif self.frontier is None or key > self.frontier:
            self.pending[key] = [1, samples, samples, elapsed_s]
            heapq.heappush(self.heap, key)
            if len(self.heap) > PENDING:
                first = heapq.heappop(self.heap)
                self._fold(first, self.pending.pop(first))
        else:
            self._late(key, [1, samples, samples, elapsed_s])

    def _outside(self, start: int, end: int) -> bool:
        """Whether a row past the horizon is left out of the runs: it ends past the runs dropped
        at RUNS, or starts inside the kept rows' chain (counted as an overlap)."""
        if self.cut is not None and end > self.cut:
            return True
        kept_end = self.table.kept_end()
        if kept_end is not None and start < kept_end:
            self.overlaps += 1
            return True
        return False

    def _fold(self, key: tuple[int, int], row: list) -> None:
        """The next interval in order (every one folded before it is smaller)."""
        self.frontier = key
        if row[0] > self.ranks:
            self.ranks = row[0]
        start, end = key
        if self._outside(start, end):
            return
        runs = self.runs
        last = runs[-1] if runs else None
        if last is not None and start < last.end:
            last.malformed += 1  # overlaps the run: after the row chained before it
            last.rows += 1
        elif last is not None and start == last.end:
            last.absorb(_Run(start, end, row))
        else:
            self._insert(len(runs), _Run(start, end, row))

    def _late(self, key: tuple[int, int], row: list) -> None:
        """A row that comes after later ones were folded (see `LogContext`)."""
        start, end = key
        if self._outside(start, end):
            return
        runs = self.runs
        i = bisect.bisect_right(runs, start, key=_start) - 1
        x = runs[i] if i >= 0 else None
        y = runs[i + 1] if i + 1 < len(runs) else None
        if x is not None and start < x.end:
            span = x.length
            if end <= x.end and span == end - start and (start - x.start) % span == 0:
                return  # one of the run's intervals, from another rank
            x.malformed += 1
            x.rows += 1
        elif y is not None and end > y.start:
            y.malformed += 1
            y.rows += 1
        elif x is not None and start == x.end:
            x.absorb(_Run(start, end, row))
            if y is not None and end == y.start:
                x.absorb(y)
                del runs[i + 1]
        elif y is not None and end == y.start:
            new = _Run(start, end, row)
            new.absorb(y)
            runs[i + 1] = new
        else:
            self._insert(i + 1, _Run(start, end, row))

    def _insert(self, index: int, run: _Run) -> None:
        runs = self.runs
        runs.insert(index, run)
        if len(runs) > RUNS:
            self.cut = runs.pop().start

    def most_lines(self) -> int:
        """The most lines of one interval past the horizon (rows that came late not counted)."""
        return max([self.ranks, *(row[0] for row in self.pending.values())])

    def pieces(
        self, scale: float, rank: bool
    ) -> Iterator[tuple[int, int, float, float, int, int, bool]]:
        """The runs, then the pending rows, in order: (start, end, samples, elapsed, malformed
        rows, rows, whether it is a run), each dropped as it is given."""
        runs, self.runs = self.runs, []
        for r in runs:
            samples = r.total * scale if rank else r.largest
            yield r.start, r.end, samples, r.elapsed, r.malformed, r.rows, True
        pending, cut = self.pending, self.cut
        for key in sorted(pending):
            _, total, largest, elapsed = pending.pop(key)
            if cut is None or key[1] <= cut:
                yield key[0], key[1], total * scale if rank else largest, elapsed, 0, 1, False


class _Steps:
    """Logged steps folded into one: the first and last, their spacing (0: one step so far),
    how many, the first one's time per step and the sum of them all; a step with no usable
    line stays alone (`usable` False)."""

    __slots__ = ("start", "last", "every", "n", "first", "total", "usable")

    def __init__(self, step: int, row: list) -> None:
        self.start = self.last = step
        self.every = 0
        self.n = 1
        self.usable = row[0] > 0
        self.first = self.total = row[1]

    def joins(self, step: int) -> bool:
        """Whether `step`, past the last, continues the spacing."""
        return self.usable and (self.n == 1 or step - self.last == self.every)

    def append(self, step: int, per_step: float) -> None:
        if self.n == 1:
            self.every = step - self.last
        self.last = step
        self.n += 1
        self.total += per_step

    def absorb(self, other: _Steps) -> None:
        """`other`, whose steps continue this one's spacing, joins it."""
        if self.n == 1:
            self.every = other.start - self.last
        self.last = other.last
        self.n += other.n
        self.total += other.total


class PastSteps:
    """Logged steps past the horizon, for a format whose interval is known only at the end (the
    smallest gap between logged steps, gluon-nlp's), in bounded memory: the first step past
    the horizon and the last `PENDING` steps read as they are (per step [usable lines, the
    longest time per step], as the format keeps them), older ones folded in order into runs at
    a constant spacing, and the smallest gap between the steps folded (see `LogContext`)."""

    def __init__(self) -> None:
        self.first: tuple[int, list] | None = None  # the lowest step past the horizon
        self.pending: dict[int, list] = {}
        self.heap: list[int] = []
        self.frontier: int | None = None  # the last step folded
        self.low: int | None = None  # the lowest step folded
        self.gap: int | None = None  # the smallest gap between steps folded
        self.runs: list[_Steps] = []
        self.cut: int | None = None  # where the runs dropped past RUNS began

    def add(self, step: int, per_step: float) -> None:
        """One line: its step and time per step (0 when the line gives no time)."""
        first = self.first
        if first is None or step < first[0]:
            self.first = (step, [1, per_step] if per_step > 0 else [0, 0.0])
            if first is not None:
                self._place(*first)
            return
        row = first[1] if step == first[0] else self.pending.get(step)
        if row is not None:
            if per_step > 0:
                row[0] += 1
                if per_step > row[1]:
                    row[1] = per_step
            return
        self._place(step, [1, per_step] if per_step > 0 else [0, 0.0])

    def _place(self, step: int, row: list) -> None:
        """A step not read before (but as a late step)."""
        if self.frontier is None or step > self.frontier:
            self.pending[step] = row
            heapq.heappush(self.heap, step)
            if len(self.heap) > PENDING:
                first = heapq.heappop(self.heap)
                self._fold(first, self.pending.pop(first))
        else:
            self._late(step, row)

    def _gap(self, gap: int) -> None:
        if self.gap is None or gap < self.gap:
            self.gap = gap

    def _fold(self, step: int, row: list) -> None:
        """The next step in order (every one folded before it is lower)."""
        if self.frontier is None:
            self.low = step
        else:
            self._gap(step - self.frontier)
        self.frontier = step
        if self.cut is not None:
            return
        runs = self.runs
        if runs and row[0] and runs[-1].joins(step):
            runs[-1].append(step, row[1])
        else:
            self._insert(len(runs), _Steps(step, row))

    def _late(self, step: int, row: list) -> None:
        """A step lower than one folded already (see `LogContext`)."""
        if self.cut is not None and step >= self.cut:
            return
        runs = self.runs
        i = bisect.bisect_right(runs, step, key=_start) - 1
        x = runs[i] if i >= 0 else None
        if x is not None and step <= x.last:
            off = (step - x.start) % x.every if x.every else step - x.start
            if off == 0:
                return  # a step of the run, from another rank
            # a step between two of the run's: the run splits around it
            below = step - off
            above = below + x.every
            self._gap(step - below)
            self._gap(above - step)
            right = _Steps(above, [1, x.total / x.n])  # (its times: an estimate)
            right.usable = x.usable
            if x.last > above:
                right.every = x.every
                right.last = x.last
                right.n = (x.last - above) // x.every + 1
                right.total = x.total / x.n * right.n
            x.n -= right.n
            x.last = below
            x.total -= right.total
            if x.n == 1:
                x.every = 0
            runs.insert(i + 1, right)
            self._insert(i + 1, _Steps(step, row))
            return
        y = runs[i + 1] if i + 1 < len(runs) else None
        if x is None:
            self.low = step
        else:
            self._gap(step - x.last)
        above = y.start if y is not None else self.cut
        if above is not None:
            self._gap(above - step)
        new = _Steps(step, row)
        if x is not None and row[0] and x.joins(step):
            x.append(step, row[1])
            if y is not None and y.usable and x.joins(y.start) and (y.n == 1 or y.every == x.every):
                x.absorb(y)
                del runs[i + 1]
        elif y is not None and new.joins(y.start) and y.joins(y.last + y.start - step):
            new.absorb(y)
            runs[i + 1] = new
        else:
            self._insert(i + 1, new)

    def _insert(self, index: int, run: _Steps) -> None:
        runs = self.runs
        runs.insert(index, run)
        while len(runs) > RUNS:
            self.cut = runs.pop().start

    def interval(self, kept: Iterable[int]) -> int | None:
        """The smallest gap between logged steps: `kept` (those up to the horizon) and these."""
        steps = sorted(kept)
        if self.first is not None:
            steps.append(self.first[0])
        gaps = [b - a for a, b in zip(steps, steps[1:], strict=False)]
        previous = steps[-1] if steps else None
        if self.frontier is not None:
            if previous is not None:
                gaps.append(self.low - previous)
            if self.gap is not None:
                gaps.append(self.gap)
            previous = self.frontier
        for step in sorted(self.pending):
            if previous is not None:
                gaps.append(step - previous)
            previous = step
        return min(gaps) if gaps else None

    def pieces(self) -> Iterator[tuple[int, list] | _Steps]:
        """The first step, the runs, then the pending steps, in order (each dropped as it is
        given); after the runs, if runs were dropped, the step where they began, as (cut, None)."""
        if self.first is not None:
            yield self.first
        runs, self.runs = self.runs, []
        yield from runs
        if self.cut is not None:
            yield self.cut, None
            return
        pending = self.pending
        for step in sorted(pending):
            yield step, pending.pop(step)


def _start(run: _Run | _Steps) -> int:
    return run.start


class HorizonMarks:
    """Marks appended to a run's: those up to the first one at or past the horizon as they
    are, later ones merged into one (the last step and time, the samples since the first)."""

    def __init__(self, run: ParsedRun, horizon: int) -> None:
        self.marks = run.marks
        self.horizon = horizon
        self.anchor = -1  # the index of the first mark at or past the horizon
        self.since = 0.0  # samples after it

    def add(self, step: int, time: float, samples: float) -> None:
        marks = self.marks
        if self.anchor < 0:
            marks.append(Mark(step, time, samples))
            if step >= self.horizon:
                self.anchor = len(marks) - 1
            return
        self.since += samples
        mark = Mark(step, time, self.since)
        if len(marks) - 1 == self.anchor:
            marks.append(mark)
        else:
            marks[-1] = mark


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
    merged, past = table.rows, table.past
    if past is None:
        if not merged:
            return
        ranks_seen = max(row[0] for row in merged.values())
    else:
        if not (merged or past.pending or past.runs):
            return
        ranks_seen = max([past.most_lines(), *(row[0] for row in merged.values())])
    scale = 1.0
    if counts == "rank" and ranks_seen < ctx.world_size:
        scale = ctx.world_size / ranks_seen
        run.notes.append(
            f"the log has per-rank rates from {ranks_seen} of {ctx.world_size} ranks; "
            f"samples scaled by {scale:g} assuming the other ranks kept the same pace"
        )
    if past is None:
        chain_intervals(_merged(merged, scale, counts == "rank"), run)
    else:
        _chain_past(table, past, scale, counts == "rank", run)


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
            gap_note(run, last, start)
            break
        time += elapsed
        marks.append(Mark(end, time, samples))
        last = end


def gap_note(run: ParsedRun, last: int, start: int) -> None:
    run.notes.append(
        f"no throughput line covers steps {last}..{start}; marks after step {last} unused"
    )


def cut_note(run: ParsedRun, last: int, cut: int) -> None:
    """The chain reached the runs dropped past `RUNS` (see `LogContext`)."""
    run.notes.append(
        f"intervals from step {cut} on not kept (more than {RUNS} runs of them apart past the "
        f"horizon); marks after step {last} unused"
    )


def _chain_past(
    table: IntervalTable, past: _PastIntervals, scale: float, rank: bool, run: ParsedRun
) -> None:
    """`chain_intervals` over a table with a horizon: its kept rows, then what is past it."""
    marks = HorizonMarks(run, table.horizon)
    time = 0.0
    last: int | None = None
    for start, end, samples, elapsed in _merged(table.rows, scale, rank):
        if last is None:
            last = start
            marks.add(start, 0.0, 0.0)
        if start < last:
            run.malformed += 1
            continue
        if start > last:
            gap_note(run, last, start)
            return
        time += elapsed
        marks.add(end, time, samples)
        last = end
    run.malformed += past.overlaps  # they start inside the chain above, before its end
    for start, end, samples, elapsed, malformed, rows, whole in past.pieces(scale, rank):
        if last is None:
            last = start
            marks.add(start, 0.0, 0.0)
        if start < last and (end <= last or not whole):
            run.malformed += rows
            continue
        # (a run that starts inside the chain and ends past it is taken whole)
        if start > last:
            gap_note(run, last, start)
            return
        time += elapsed
        run.malformed += malformed
        marks.add(end, time, samples)
        last = end
    if past.cut is not None and last is not None:
        if last < past.cut:
            gap_note(run, last, past.cut)
        else:
            cut_note(run, last, past.cut)


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
