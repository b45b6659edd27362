"""pytorch/examples ImageNet `main.py` progress lines (ProgressMeter, printed by every rank).

    Epoch: [0][ 10/5005]\tTime  0.575 ( 1.541)\tData  0.106 ( 0.088)\tLoss 7.0139e+00 (...)

Batch index i is 0-based; `Time v (avg)` is batch i's time and the running mean since the epoch
began (batch_time is measured from before the loop, so avg * (i + 1) is the time through batch
i). Lines name no rank: for each batch index the slowest rank's cumulative time is kept. A
single rank logging every batch gives the sum of per-batch times instead, which carries less
rounding than avg * (i + 1). Only the first epoch is used (the next one restarts the clock
after validation).
"""

from __future__ import annotations

import re

from dlperf.events import Mark, ParsedRun
from dlperf.logformats.common import LogContext, finish, finite, first_epoch

LINE = re.compile(
    r"Epoch: \[(?P<epoch>\d+)\]\[\s*(?P<batch>\d+)/\s*(?P<total>\d+)\]\s+"
    r"Time\s+(?P<val>\S+)\s+\(\s*(?P<avg>[^)\s]+)\s*\)"
)


def parse(text: str, ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    rows: dict[int, list[tuple[float, float]]] = {}  # batch index -> [(val, avg)] per rank
    for match in first_epoch(LINE.finditer(text), run):
        val, avg = finite(match["val"]), finite(match["avg"])
        if val is None or avg is None or val < 0 or avg < 0:
            run.malformed += 1
            continue
        rows.setdefault(int(match["batch"]), []).append((val, avg))
    indices = sorted(rows)
    if not indices:
        return finish(run, text, "pytorch/examples progress lines")
    ranks = max(len(v) for v in rows.values())
    consecutive = indices == list(range(indices[0], indices[-1] + 1)) and indices[0] == 0
    run.marks.append(Mark(0, 0.0, 0.0))
    if ranks == 1 and consecutive:
        elapsed = 0.0
        for i in indices:
            elapsed += rows[i][0][0]
            run.marks.append(Mark(i + 1, elapsed, ctx.global_batch))
    else:
        for i in indices:
            cumulative = max(avg for _, avg in rows[i]) * (i + 1)
            previous = run.marks[-1]
            if cumulative < previous.time:
                run.malformed += 1
                continue
            run.marks.append(Mark(i + 1, cumulative, (i + 1 - previous.step) * ctx.global_batch))
        run.notes.append(
            "times from the running averages (avg x batches, 3 decimals): about "
            f"{0.0005 * (indices[-1] + 1):.3f} s of rounding at the last mark"
        )
    return finish(run, text, "pytorch/examples progress lines")
