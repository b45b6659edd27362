"""Keras `TimeHistory` (tensorflow/models, official/utils/misc/keras_utils.py).

    TimeHistory: 39.13 seconds, 327.08 examples/second between steps 100 and 200

One line per `log_steps` steps. The rate is the global batch (all replicas) times the steps
over the elapsed time, so a line is the whole job's; workers of a multi-worker job each print
the same interval and merge as one. The elapsed time is taken from the rate (printed with more
significant digits than the seconds) and the samples from the context's global batch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dlperf.events import ParsedRun
from dlperf.logformats.common import (
    IntervalTable,
    LogContext,
    finish,
    finite,
    intervals_to_marks,
    matches,
)

LINE = re.compile(
    r"TimeHistory: (?P<seconds>\S+) seconds, (?P<rate>\S+) examples/second "
    r"between steps (?P<start>\d+) and (?P<end>\d+)"
)


def parse(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    table = IntervalTable(ctx.horizon)
    add, global_batch = table.add, ctx.global_batch
    for match in matches(LINE, texts):
        start, end = int(match["start"]), int(match["end"])
        rate = finite(match["rate"])
        samples = (end - start) * global_batch
        if rate and rate > 0:
            elapsed = samples / rate
        else:
            seconds = finite(match["seconds"])
            if not (seconds and seconds > 0):
                run.malformed += 1
                continue
            elapsed = seconds
        add(start, end, samples, elapsed)
    intervals_to_marks(table, "global", ctx, run)
    return finish(run, "Keras TimeHistory lines")
