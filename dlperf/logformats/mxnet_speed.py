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
from collections.abc import Iterable

from dlperf.events import ParsedRun
from dlperf.logformats.common import (
    EpochFilter,
    IntervalTable,
    LogContext,
    finish,
    finite,
    intervals_to_marks,
    logging_interval,
    matches,
)

_S = r"[^\S\n]"  # white space within the line
LINE = re.compile(
    rf"Epoch\[(?P<epoch>\d+)\]{_S}*Batch{_S}*\[(?P<a>\d+)(?:-(?P<b>\d+))?\]{_S}+"
    rf"Speed:{_S}*(?P<rate>\S+) samples/sec"
)


def parse(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    epochs = EpochFilter()
    # (start or None for a lone batch number, end) -> [lines, their lowest rate]: the slowest
    # line of an interval, whatever its span turns out to be
    rows: dict[tuple[int | None, int], list] = {}
    for match in matches(LINE, texts):
        if not epochs.keep(match["epoch"]):
            continue
        rate = finite(match["rate"])
        if rate is None or rate <= 0:
            run.malformed += 1
            continue
        key = (int(match["a"]) if match["b"] else None, int(match["b"] or match["a"]))
        row = rows.get(key)
        if row is None:
            rows[key] = [1, rate]
        else:
            row[0] += 1
            if rate < row[1]:
                row[1] = rate
    epochs.note(run)
    ranges = sorted({key for key in rows if key[0] is not None})
    inclusive = any(a == b for a, b in ranges) or any(
        nxt[0] == cur[1] + 1 for cur, nxt in zip(ranges, ranges[1:], strict=False)
    )
    shift = 1 if inclusive else 0
    interval = logging_interval(end + shift if start is not None else end for start, end in rows)
    table = IntervalTable()
    for (start, end), (count, rate) in rows.items():
        if start is None:
            if interval is None:
                run.malformed += count  # one lone line: its span is unknown
                continue
            start = end - interval
        else:
            end += shift
        samples = (end - start) * ctx.global_batch
        table.add_lines(start, end, samples, samples / rate, count)
    intervals_to_marks(table, "global", ctx, run)
    return finish(run, "MXNet Speed lines")
