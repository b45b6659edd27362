"""gluon-nlp BERT pretraining (`scripts/bert/pretraining_utils.py` log / log_noacc).

    INFO:root:[step 150]\tmlm_loss=7.12345\tnsp_loss= 0.69\tthroughput=2.8K tks/s\t
    lr=0.0000250 time=0.21, latency=213.4 ms/batch

(`ms/step` since gluon-nlp #1099, 2020-02-03, in v0.10.x: the same value under a new unit name.)

`[step N]` counts finished steps; `latency` is the time since the previous log line divided by
the log interval, so a line covers steps N - interval .. N. Every Horovod rank prints its own
line for the same step (no rank in the text); all ranks advance in lockstep on the global
batch, so each line is the whole job's step and the slowest rank's time is kept.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator

from dlperf.events import ParsedRun
from dlperf.logformats.common import (
    HorizonMarks,
    LogContext,
    PastSteps,
    chain_intervals,
    cut_note,
    finish,
    gap_note,
    logging_interval,
)

LINE = re.compile(
    r"\[step (?P<step>\d+)\]\t(?P<body>[^\n]*?)latency=(?P<latency>\S+) ms/(?:batch|step)"
)
# LINE made greedy (quicker): it matches where LINE does, and as LINE does unless the line has
# another `latency=` before the one it takes
_GREEDY = re.compile(
    r"\[step (?P<step>\d+)\]\t(?P<body>[^\n]*)latency=(?P<latency>\S+) ms/(?:batch|step)"
)
LOSS = re.compile(r"mlm_loss=\s*(?P<loss>\S+)")


def _lines(texts: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    """(step, body, latency) of LINE's matches in the pieces of the log, in order."""
    for text in texts:
        for greedy in _GREEDY.finditer(text):
            if "latency=" in greedy["body"]:  # LINE's own matches in what the greedy one spans
                for match in LINE.finditer(text, greedy.start(), greedy.end()):
                    yield match.groups()
            else:
                yield greedy.groups()


def _merged(
    steps: dict[int, list], interval: int, samples: int
) -> Iterator[tuple[int, int, int, float]]:
    """Each logged step's lines merged, in order: one interval, its samples, the slowest line's
    time (each step dropped as it is given, so that steps and marks are not held together)."""
    for step in sorted(steps):
        count, per_step = steps.pop(step)
        if count:
            yield step - interval, step, samples, per_step * interval


def parse(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    global_batch = ctx.global_batch
    # step -> [lines, the longest time per step]: the interval is known only at the end, and
    # the slowest line of a step is the slowest once multiplied by it; with a horizon, the
    # steps up to it (the later ones: `past`)
    steps: dict[int, list] = {}
    past = None if ctx.horizon is None else PastSteps()
    beyond = math.inf if ctx.horizon is None else ctx.horizon
    unusable = 0  # lines whose interval would have no samples or no time
    loss_in, losses, most = LOSS.search, run.losses, ctx.horizon
    for step, body, latency in _lines(texts):
        try:
            latency = float(latency)
        except ValueError:
            latency = math.nan
        if not 0 < latency < math.inf:
            run.malformed += 1
            continue
        per_step = latency / 1000.0
        loss = loss_in(body)
        if loss and (most is None or len(losses) < most):
            try:
                value = float(loss["loss"].rstrip("\t,"))
            except ValueError:
                value = math.nan
            if math.isfinite(value):
                losses.append(value)
        step = int(step)
        usable = per_step > 0 and global_batch > 0
        if not usable:
            unusable += 1
        if step > beyond:
            past.add(step, per_step if usable else 0.0)
            continue
        row = steps.get(step)
        if not usable:
            if row is None:
                steps[step] = [0, 0.0]
        elif row is None:
            steps[step] = [1, per_step]
        else:
            row[0] += 1
            if per_step > row[1]:
                row[1] = per_step
    run.malformed += unusable
    if past is None:
        interval = logging_interval(steps) or 1
        chain_intervals(_merged(steps, interval, interval * global_batch), run)
    else:
        _chain_past(steps, past, ctx, run)
    return finish(run, "gluon-nlp [step N] lines")


def _chain_past(steps: dict[int, list], past: PastSteps, ctx: LogContext, run: ParsedRun) -> None:
    """`chain_intervals(_merged(...))` with a horizon: the steps up to it, then those past it
    (see `LogContext`)."""
    interval = past.interval(steps) or 1
    samples = interval * ctx.global_batch
    marks = HorizonMarks(run, ctx.horizon)
    time = 0.0
    last: int | None = None
    kept = ((step, steps.pop(step)) for step in sorted(steps))
    for piece in itertools.chain(kept, past.pieces()):
        if isinstance(piece, tuple):
            step, row = piece
            if row is None:  # the runs dropped past RUNS begin here
                if last is None:
                    return
                if step - interval > last:
                    gap_note(run, last, step - interval)
                else:
                    cut_note(run, last, step)
                return
            count, per_step, n, every = row[0], row[1], 1, 0
        else:
            step, count, per_step = piece.start, piece.usable, piece.first
            n, every = piece.n, piece.every
        if not count:
            continue
        start = step - interval
        if last is None:
            last = start
            marks.add(start, 0.0, 0.0)
        if start < last:
            run.malformed += 1  # (cannot happen: steps are at least an interval apart)
            continue
        if start > last:
            gap_note(run, last, start)
            return
        time += per_step * interval
        marks.add(step, time, samples)
        last = step
        if n > 1:
            if every != interval:
                gap_note(run, last, step + every - interval)
                return
            time += (piece.total - per_step) * interval
            last = piece.last
            marks.add(last, time, samples * (n - 1))
