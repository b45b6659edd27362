"""MXNet `Speed: X samples/sec` lines (Speedometer, gluon-cv train_imagenet/train_horovod).

    Epoch[0] Batch [20-40]\tSpeed: 1234.56 samples/sec\taccuracy=0.001  (Speedometer)
    Epoch[0] Batch [40]\tSpeed: 1234.56 samples/sec ...                   (older Speedometer)
    INFO:root:Epoch[0] Batch[21]\tSpeed: 384.19 samples/sec              (gluon-cv Horovod, rank 0)

A line's rate covers the batches since the previous line. A range `[a-b]` is exclusive of a in
Speedometer (ranges chain as [0-20], [20-40]) and inclusive in NVIDIA's fit.py (ranges chain as
[0-9], [10-19], or [i-i] when it logs every batch); the chaining tells which. A lone batch
number `b` covers (previous b, b], the first line's span being the logging interval (the
smallest difference between consecutive batch numbers). The rate is the job's: Speedometer
counts the process's whole batch, NVIDIA's fit.py and gluon-cv multiply by the Horovod workers;
lines printed by several ranks for one interval merge as one. Only the first epoch is used.
"""

from __future__ import annotations

import re

from dlperf.events import ParsedRun
from dlperf.logformats.common import (
    Interval,
    LogContext,
    finish,
    finite,
    first_epoch,
    intervals_to_marks,
    logging_interval,
)

LINE = re.compile(
    r"Epoch\[(?P<epoch>\d+)\]\s*Batch\s*\[(?P<a>\d+)(?:-(?P<b>\d+))?\]\s+"
    r"Speed:\s*(?P<rate>\S+) samples/sec"
)


def parse(text: str, ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    rows: list[tuple[int | None, int, float]] = []
    for match in first_epoch(LINE.finditer(text), run):
        rate = finite(match["rate"])
        if rate is None or rate <= 0:
            run.malformed += 1
            continue
        start = int(match["a"]) if match["b"] else None
        end = int(match["b"] or match["a"])
        rows.append((start, end, rate))
    ranges = sorted({(a, b) for a, b, _ in rows if a is not None})
    inclusive = any(a == b for a, b in ranges) or any(
        nxt[0] == cur[1] + 1 for cur, nxt in zip(ranges, ranges[1:], strict=False)
    )
    if inclusive:
        rows = [(a, b + 1, rate) if a is not None else (a, b, rate) for a, b, rate in rows]
    interval = logging_interval(end for _, end, _ in rows)
    intervals = []
    for start, end, rate in rows:
        if start is None:
            if interval is None:
                run.malformed += 1  # one lone line: its span is unknown
                continue
            start = end - interval
        samples = (end - start) * ctx.global_batch
        intervals.append(Interval(start, end, samples, samples / rate))
    intervals_to_marks(intervals, "global", ctx, run)
    return finish(run, text, "MXNet Speed lines")
