"""gluon-nlp BERT pretraining (`scripts/bert/pretraining_utils.py` log / log_noacc).

    INFO:root:[step 150]\tmlm_loss=7.12345\tnsp_loss= 0.69\tthroughput=2.8K tks/s\t
    lr=0.0000250 time=0.21, latency=213.4 ms/batch

`[step N]` counts finished steps; `latency` is the time since the previous log line divided by
the log interval, so a line covers steps N - interval .. N. Every Horovod rank prints its own
line for the same step (no rank in the text); all ranks advance in lockstep on the global
batch, so each line is the whole job's step and the slowest rank's time is kept.
"""

from __future__ import annotations

import re

from dlperf.events import ParsedRun
from dlperf.logformats.common import (
    Interval,
    LogContext,
    finish,
    finite,
    intervals_to_marks,
    logging_interval,
)

LINE = re.compile(r"\[step (?P<step>\d+)\]\t(?P<body>[^\n]*?)latency=(?P<latency>\S+) ms/batch")
LOSS = re.compile(r"mlm_loss=\s*(?P<loss>\S+)")


def parse(text: str, ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    points: list[tuple[int, float]] = []
    for match in LINE.finditer(text):
        latency = finite(match["latency"])
        if latency is None or latency <= 0:
            run.malformed += 1
            continue
        points.append((int(match["step"]), latency / 1000.0))
        loss = LOSS.search(match["body"])
        if loss and finite(loss["loss"].rstrip("\t,")) is not None:
            run.losses.append(float(loss["loss"].rstrip("\t,")))
    interval = logging_interval(s for s, _ in points) or 1
    intervals = [
        Interval(step - interval, step, interval * ctx.global_batch, per_step * interval)
        for step, per_step in points
    ]
    intervals_to_marks(intervals, "global", ctx, run)
    return finish(run, text, "gluon-nlp [step N] lines")
