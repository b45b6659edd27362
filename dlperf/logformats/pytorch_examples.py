"""pytorch/examples ImageNet `main.py` progress lines (ProgressMeter, printed by every rank).

    Epoch: [0][ 10/5005]\tTime  0.575 ( 1.541)\tData  0.106 ( 0.088)\tLoss 7.0139e+00 (...)

Batch index i is 0-based; `Time v (avg)` is batch i's time and the running mean since the epoch
began (batch_time is measured from before the loop, so avg * (i + 1) is the time through batch
i). Lines name no rank: for each batch index the slowest rank's cumulative time is kept. A
single rank logging every batch gives the sum of per-batch times instead, which carries less
rounding than avg * (i + 1). Only the first epoch is used (the next one restarts the clock
after validation).

Since upstream d547876 (2022-06-09) train() prints `progress.display(i + 1)`: the index shown is
1-based (`Epoch: [0][  1/5005]` is the first batch), format `pytorch_examples_1based`; the
older script (`display(i)`, DLPerf's 49ec0bd) is `pytorch_examples`. The lines are otherwise the
same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dlperf.events import Mark, ParsedRun
from dlperf.logformats.common import EpochFilter, LogContext, finish, finite, matches

_S = r"[^\S\n]"  # white space within the line
LINE = re.compile(
    rf"Epoch: \[(?P<epoch>\d+)\]\[{_S}*(?P<batch>\d+)/{_S}*(?P<total>\d+)\]{_S}+"
    rf"Time{_S}+(?P<val>\S+){_S}+\({_S}*(?P<avg>[^)\s]+){_S}*\)"
)


def parse(texts: Iterable[str], ctx: LogContext, first: int = 0) -> ParsedRun:
    """`first`: the index the script prints for its first batch (0, or 1 from d547876 on)."""
    run = ParsedRun()
    epochs = EpochFilter()
    # batch index -> [ranks' lines, the first line's time, the largest running average]
    rows: dict[int, list] = {}
    for match in matches(LINE, texts):
        if not epochs.keep(match["epoch"]):
            continue
        val, avg = finite(match["val"]), finite(match["avg"])
        if val is None or avg is None or val < 0 or avg < 0:
            run.malformed += 1
            continue
        batch = int(match["batch"]) - first
        if batch < 0:
            run.malformed += 1
            continue
        row = rows.get(batch)
        if row is None:
            rows[batch] = [1, val, avg]
        else:
            row[0] += 1
            if avg > row[2]:
                row[2] = avg
    epochs.note(run)
    indices = sorted(rows)
    if not indices:
        return finish(run, "pytorch/examples progress lines")
    ranks = max(row[0] for row in rows.values())
    consecutive = indices[0] == 0 and indices[-1] == len(indices) - 1
    run.marks.append(Mark(0, 0.0, 0.0))
    if ranks == 1 and consecutive:
        elapsed = 0.0
        for i in indices:
            elapsed += rows[i][1]
            run.marks.append(Mark(i + 1, elapsed, ctx.global_batch))
    else:
        for i in indices:
            cumulative = rows[i][2] * (i + 1)
            previous = run.marks[-1]
            if cumulative < previous.time:
                run.malformed += 1
                continue
            run.marks.append(Mark(i + 1, cumulative, (i + 1 - previous.step) * ctx.global_batch))
        run.notes.append(
            "times from the running averages (avg x batches, 3 decimals): about "
            f"{0.0005 * (indices[-1] + 1):.3f} s of rounding at the last mark"
        )
    return finish(run, "pytorch/examples progress lines")


def parse_1based(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    """imagenet/main.py from d547876 (2022) on: the first batch is printed as 1."""
    return parse(texts, ctx, first=1)
