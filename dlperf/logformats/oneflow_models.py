"""Oneflow-Inc/models ResNet50 (Vision/classification/image/resnet50) metric lines.

    [rank:0] [train], epoch: 0/1, iter: 20/640583, loss: 7.08614, top1: 0.00000,
        throughput: 0.32, timestamp: 27305.402297 | 2026-11-26 16:22:18.627        (one line)

utils/logger.py prints one line per rank (--metric-local True, upstream's default) when
`iter % --print-interval == 0`; `iter` is the steps done in the epoch. With --print-timestamp
the line carries `time.perf_counter()` taken after the loss and top-1 were read back from the
device (microseconds); without it, the wall-clock date at the end (milliseconds) is used. The
job's steps are lockstep (nn.Graph), so marks come from rank 0's lines and count the job's
global batch per step; 'throughput' is one rank's own rate and is not used. Eval lines and
later epochs (the step count restarts) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from dlperf.events import ParsedRun
from dlperf.logformats.common import ClockMarks, EpochFilter, LogContext, finish, finite, matches

LINE = re.compile(
    r"\[rank:0\] \[train\], epoch: (?P<epoch>\d+)/\d+, iter: (?P<iter>\d+)/\d+, "
    r"loss: (?P<loss>[^,\s]+),[^\n]*?throughput: [^,\s]+"
    r"(?:, timestamp: (?P<ts>\d+(?:\.\d+)?))?[^\S\n]*\|[^\S\n]*"
    r"(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)"
)


def parse(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    marks = ClockMarks(ctx.global_batch, run, ctx.horizon)
    epochs = EpochFilter()
    for m in matches(LINE, texts):
        if not epochs.keep(m["epoch"]):
            continue
        if m["ts"] is not None:
            stamp = float(m["ts"])
        else:
            stamp = datetime.fromisoformat(m["date"]).timestamp()
        marks.add(int(m["iter"]), stamp)
        loss = finite(m["loss"])
        if loss is not None and (ctx.horizon is None or len(run.losses) < ctx.horizon):
            run.losses.append(loss)
    epochs.note(run)
    return finish(run, "OneFlow models ResNet50 [rank:0] [train] lines")
