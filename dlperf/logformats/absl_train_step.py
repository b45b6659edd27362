"""tensorflow/models BERT pretraining `Train Step:` lines, timed by their absl prefix.

    I0826 18:06:39.031755 1399794 model_training_utils.py:505] Train Step: 20/120  / loss = 10.9

official/nlp/bert/model_training_utils.py logs one line per step (or per `steps_per_loop`) with
no rate, so marks come from the absl/glog prefix `I<MMDD> <HH:MM:SS.ffffff>`: it has no year,
so a run across New Year's Eve is unwrapped (see `DayClock`). Step n counts finished steps;
the chief worker's log holds the job's progress on the global batch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from dlperf.events import ParsedRun
from dlperf.logformats.common import ClockMarks, DayClock, LogContext, finish, finite, matches

# Only the lines with this are read: most lines of a TensorFlow log start like this one
NEEDLE = "Train Step: "
LINE = re.compile(
    r"^I(?P<minute>\d{4} \d{2}:\d{2}):(?P<second>\d{2})\.(?P<fraction>\d{1,6}) [^\n]*?"
    r"Train Step: (?P<step>\d+)/\d+[^\S\n]+/ loss = (?P<loss>\S+)",
    re.M,
)
_YEAR = datetime(2000, 1, 1)  # a leap year, so that 0229 parses; only differences are used


def absl_minute(minute: str) -> int | None:
    """`MMDD HH:MM` in microseconds since the start of 2000; None where strptime refuses it."""
    try:
        at = datetime(2000, int(minute[:2]), int(minute[2:4]), int(minute[5:7]), int(minute[8:]))
    except ValueError:
        return None
    return (at - _YEAR) // timedelta(microseconds=1)


def parse(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    marks = ClockMarks(ctx.global_batch, run, ctx.horizon)
    losses, most = run.losses, ctx.horizon
    clock = DayClock()
    minutes: dict[str, int | None] = {}  # each minute's start, worked out once
    for m in matches(LINE, texts):
        minute, second, fraction, step, loss = m.groups()
        base = minutes.get(minute, -1)
        if base == -1:
            if len(minutes) > 4096:
                minutes.clear()
            base = minutes[minute] = absl_minute(minute)
        second = int(second)
        if base is None or second > 59:
            run.malformed += 1
            continue
        stamp = base + second * 1_000_000 + int(fraction.ljust(6, "0"))
        loss = finite(loss)
        if loss is not None and (most is None or len(losses) < most):
            losses.append(loss)
        marks.add(int(step), clock.seconds(stamp))
    return finish(run, "Train Step lines")
