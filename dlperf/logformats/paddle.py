"""PaddlePaddle model-zoo training lines: `elapse` (PaddleCV), `steps/s` (PaddleNLP BERT) and
`ips` (PaddleClas).

    [Pass 0, train batch 19] \tloss 6.90421, acc1 0.00000, acc5 0.00781, lr 0.001, elapse 0.3621 sec
    epoch: 1, progress: 1/1, step: 60, loss: 10.487363, ..., speed: 1.060437 steps/s, file: x.gz
    [2022/04/04 17:51:19] ppcls INFO: [Train][Epoch 2/20][Iter: 0/8]lr: 0.00281, ...,
        batch_cost: 1.05037s, reader_cost: 0.63829, ips: 121.86160 images/sec, eta: 0:02:39

PaddleCV (image_classification/utils/utility.py): `elapse` is one batch's wall time on trainer
0 (`batch` is 0-based), so batches logged back to back chain into marks; a logging interval
above 1 leaves gaps and only the first run of consecutive batches is used. PaddleNLP BERT
(train.py): `speed` = logged steps x nodes / time, printed by trainer 0, `step` counts steps.
PaddleClas: `ips` is one card's samples/s over the interval since the previous line (`Iter` is
0-based); only rank 0 prints, so the other ranks are assumed to match (noted).
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

ELAPSE = re.compile(
    r"\[Pass (?P<epoch>\d+), train batch (?P<batch>\d+)\][^\n]*?elapse (?P<sec>\S+) sec"
)
SPEED = re.compile(
    r"epoch: (?P<epoch>\d+), progress: [^\n]*?step: (?P<step>\d+), [^\n]*?"
    r"speed: (?P<rate>\S+) steps/s"
)
IPS = re.compile(
    r"\[Train\]\[Epoch (?P<epoch>\d+)/\d+\]\[Iter: (?P<iter>\d+)/\d+\][^\n]*?"
    r"ips: (?P<rate>\S+) (?:images|samples|sequences)/s"
)
LOSS = re.compile(r"\bloss:? (?P<loss>[-\w.+]+)")


def parse(text: str, ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    intervals: list[Interval] = []
    counts = "global"
    for m in first_epoch(ELAPSE.finditer(text), run):
        sec, batch = finite(m["sec"]), int(m["batch"])
        intervals.append(Interval(batch, batch + 1, ctx.global_batch, sec if sec else 0.0))
    if not intervals:
        rows = [(int(m["step"]), finite(m["rate"])) for m in first_epoch(SPEED.finditer(text), run)]
        every = logging_interval(s for s, _ in rows) or 1
        for step, rate in rows:
            samples = every * ctx.global_batch
            # speed counts every node's steps: the job advances rate / nodes steps per second
            elapsed = every * ctx.nodes / rate if rate and rate > 0 else 0.0
            intervals.append(Interval(step - every, step, samples, elapsed))
    if not intervals:
        counts = "rank"
        rows = [(int(m["iter"]), finite(m["rate"])) for m in first_epoch(IPS.finditer(text), run)]
        every = logging_interval(i for i, _ in rows) or 1
        for i, rate in rows:
            samples = every * ctx.batch_size
            elapsed = samples / rate if rate and rate > 0 else 0.0
            intervals.append(Interval(i + 1 - every, i + 1, samples, elapsed))
    for m in LOSS.finditer(text):
        value = finite(m["loss"].rstrip(","))
        if value is not None:
            run.losses.append(value)
    intervals_to_marks(intervals, counts, ctx, run)
    return finish(run, text, "Paddle training lines")
