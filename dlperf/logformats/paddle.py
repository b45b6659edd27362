"""PaddlePaddle model-zoo training lines: `elapse` (PaddleCV), `steps/s` (PaddleNLP BERT, Paddle
1.8), `ips` (PaddleClas) and `global step` (PaddleNLP BERT run_pretrain.py, Paddle 2.x/3.x).

    [Pass 0, train batch 19] \tloss 6.90421, acc1 0.00000, acc5 0.00781, lr 0.001, elapse 0.3621 sec
    epoch: 1, progress: 1/1, step: 60, loss: 10.487363, ..., speed: 1.060437 steps/s, file: x.gz
    [2022/04/04 17:51:19] ppcls INFO: [Train][Epoch 2/20][Iter: 0/8]lr: 0.00281, ...,
        batch_cost: 1.05037s, reader_cost: 0.63829, ips: 121.86160 images/sec, eta: 0:02:39
    [2026-11-26 16:40:36,646] [    INFO] - global step: 1, epoch: 0, batch: 0, loss: 11.343805,
        avg_reader_cost: 0.00306 sec, avg_batch_cost: 2.69549 sec, avg_samples: 2.00000,
        ips: 0.74198 sequences/sec, max_mem_reserved: ... MB, max_mem_allocated: ... MB

PaddleCV (image_classification/utils/utility.py): `elapse` is one batch's wall time on trainer
0 (`batch` is 0-based), so batches logged back to back chain into marks; a logging interval
above 1 leaves gaps and only the first run of consecutive batches is used. PaddleNLP BERT
(train.py): `speed` = logged steps x nodes / time, printed by trainer 0, `step` counts steps.
PaddleClas: `ips` is one card's samples/s over the interval since the previous line (`Iter` is
0-based); only rank 0 prints, so the other ranks are assumed to match (noted). PaddleNLP
run_pretrain.py: `ips` is one card's sequences/s over the `logging_steps` steps up to `global
step` (1-based, counted across files and epochs); launch echoes rank 0's lines, so the other
ranks are assumed to match too. A log with `elapse` lines is read by them alone, else one with
`steps/s` lines, else by its PaddleClas `ips` lines, else by its `global step` lines.
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
GLOBAL_STEP = re.compile(
    r"global step: (?P<step>\d+), epoch: (?P<epoch>\d+), [^\n]*?ips: (?P<rate>\S+) sequences/sec"
)
# `\bloss:? ...`, written to start with its literal so that the search skips ahead quickly
LOSS = re.compile(r"loss(?<!\wloss):? (?P<loss>[-\w.+]+)")


class _Kind:
    """One kind of throughput line: its first-epoch filter and, per logged step, how many
    lines gave it and their best number (the longest `elapse`, the lowest rate)."""

    def __init__(self, pattern: re.Pattern[str], step: str, number: str, best: type) -> None:
        self.pattern, self.step, self.number, self.best = pattern, step, number, best
        self.epochs = EpochFilter()
        self.rows: dict[int, list] = {}  # step -> [lines with a usable number, best number]
        self.unusable = 0  # lines whose number gives no time

    def read(self, text: str) -> bool:
        """Whether the text has lines of this kind (those of the first epoch are kept)."""
        found = False
        keep, rows, best = self.epochs.keep, self.rows, self.best
        for m in self.pattern.finditer(text):
            found = True
            if not keep(m["epoch"]):
                continue
            step, value = int(m[self.step]), finite(m[self.number])
            row = rows.get(step)
            if row is None:
                row = rows[step] = [0, None]
            if not value or value <= 0:  # no time (an elapse of 0, a rate of 0)
                self.unusable += 1
            elif row[1] is None:
                row[0], row[1] = 1, value
            else:
                row[0] += 1
                row[1] = best(row[1], value)
        return found


def parse(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    elapse = _Kind(ELAPSE, "batch", "sec", max)
    speed = _Kind(SPEED, "step", "rate", min)
    ips = _Kind(IPS, "iter", "rate", min)
    global_step = _Kind(GLOBAL_STEP, "step", "rate", min)
    kinds = [elapse, speed, ips, global_step]  # the first kind in the log wins, the rest go
    losses, most = run.losses, ctx.horizon
    for text in texts:
        for i, kind in enumerate(kinds):
            if kind.read(text):
                del kinds[i + 1 :]
                break
        if most is not None and len(losses) >= most:
            continue
        for m in LOSS.finditer(text):
            value = finite(m["loss"].rstrip(","))
            if value is not None and (most is None or len(losses) < most):
                losses.append(value)
    table = IntervalTable()
    counts = "global"
    kind = kinds[-1]
    kind.epochs.note(run)
    table.malformed = kind.unusable
    if kind is elapse:
        for batch, (count, sec) in kind.rows.items():
            if count:
                table.add_lines(batch, batch + 1, ctx.global_batch, sec, count)
    elif kind is speed:
        every = logging_interval(kind.rows) or 1
        samples = every * ctx.global_batch
        for step, (count, rate) in kind.rows.items():
            if count:
                # speed counts every node's steps: the job advances rate / nodes steps per second
                table.add_lines(step - every, step, samples, every * ctx.nodes / rate, count)
    else:  # one rank's samples/s over the interval up to the line's step
        counts = "rank"
        every = logging_interval(kind.rows) or 1
        samples = every * ctx.batch_size
        last = 1 if kind is ips else 0  # ips counts steps from 0, global_step from 1
        for i, (count, rate) in kind.rows.items():
            if count:
                table.add_lines(i + last - every, i + last, samples, samples / rate, count)
    intervals_to_marks(table, counts, ctx, run)
    return finish(run, "Paddle training lines")
