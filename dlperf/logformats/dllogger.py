"""NVIDIA DLLogger stdout lines (DeepLearningExamples), timed by their own timestamps.

    DLL 2020-09-15 14:29:13.473765 - Epoch: 0 Iteration: 1  train.loss : 7.09304  train...
    DLL 2020-08-26 18:06:39.031755 - Training Epoch: 0 Training Iteration: 25  average_loss...
    DLL 2020-06-20 10:00:00.000000 - (0, 120) imgs_per_sec : 812.3 cross_entropy : 6.9 ...
    DLL 2020-08-26 18:06:39.031755 - Iteration: 120  throughput_train : 1234.567 seq/s ...
    DLL 2024-04-04 10:00:00.000000 - Epoch: 0 Iteration: 0  train.loss : 7.1  train.ips ... (MXNet)

dllogger/logger.py: prefix `DLL <datetime.now()> - `, then the step, then `name : value [unit]`
metrics. Only rank 0 writes to stdout in these scripts. The rates these lines carry differ in
what they time (one session.run, or the mean since the previous line), and PyTorch BERT logs no
rate at all, so marks come from the timestamps (full date and time, as DLPerf's own `_time`
extractors did): step n at the time its line was written, samples = steps since the previous
line x the global batch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime

from dlperf.events import ParsedRun
from dlperf.logformats.common import (
    ClockMarks,
    EpochFilter,
    LogContext,
    finish,
    finite,
    matches,
)

# `^DLL ...`: the anchor is checked behind the literal, so that the search skips to "DLL "
PREFIX = re.compile(
    r"DLL (?<=^DLL )(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?) - (?P<rest>.*)$",
    re.M,
)
# PyTorch: "Epoch: e Iteration: i" (ResNet) or "Training Epoch: e Training Iteration: i" (BERT).
PYTORCH_STEP = re.compile(
    r"^(?:Training )?Epoch: (?P<epoch>\d+) (?:Training )?Iteration: (?P<step>\d+)\s"
)
# TF1: "(epoch, global_step)" (ResNet) or "Iteration: n" (BERT).
TF1_STEP = re.compile(r"^(?:\((?P<epoch>\d+), (?P<gstep>\d+)\)|Iteration: (?P<step>\d+))\s")
# `(?:train\.loss|average_loss|total_loss) : ...`, written to start with its literal so that
# the search skips ahead quickly
LOSS = re.compile(r"loss(?:(?<=train\.loss)|(?<=average_loss)|(?<=total_loss)) : (?P<loss>\S+)")


class _Timestamps:
    """`datetime.fromisoformat(ts).timestamp()` (local time), with the local time of each
    minute worked out once: the same float, bit for bit, for stamps with 0 or 6 decimals."""

    def __init__(self) -> None:
        self.minutes: dict[str, int] = {}

    def __call__(self, ts: str) -> float:
        fraction = ts[20:]
        if len(fraction) not in (0, 6) or not ts.isascii() or int(ts[17:19]) > 59:
            return datetime.fromisoformat(ts).timestamp()  # what it accepts depends on Python
        minute = ts[:16]
        base = self.minutes.get(minute)
        if base is None:
            if len(self.minutes) > 4096:
                self.minutes.clear()
            base = self.minutes[minute] = int(datetime.fromisoformat(minute).timestamp())
        # datetime.timestamp() is (local seconds - epoch) + microsecond / 1e6, in that order
        return (base + int(ts[17:19])) + (int(fraction) if fraction else 0) / 1e6


def _steps(
    texts: Iterable[str], step_re: re.Pattern[str], run: ParsedRun, most_losses: int | None
) -> Iterator[tuple[re.Match[str], float]]:
    timestamp = _Timestamps()
    losses = run.losses
    for match in matches(PREFIX, texts):
        rest = match["rest"]
        step = step_re.match(rest + " ")
        if not step:
            continue  # PARAMETER, summary and end-of-epoch lines
        try:
            stamp = timestamp(match["ts"])
        except ValueError:
            run.malformed += 1
            continue
        loss = LOSS.search(rest)
        kept = most_losses is None or len(losses) < most_losses
        if kept and loss and finite(loss["loss"]) is not None:
            losses.append(float(loss["loss"]))
        yield step, stamp


def parse_pytorch(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    marks = ClockMarks(ctx.global_batch, run, ctx.horizon)
    epochs = EpochFilter()
    for step, stamp in _steps(texts, PYTORCH_STEP, run, ctx.horizon):
        if epochs.keep(step["epoch"]):
            marks.add(int(step["step"]), stamp)
    epochs.note(run)
    return finish(run, "DLLogger Iteration lines")


def parse_mxnet(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    """NVIDIA's MXNet RN50v1.5 since 2020 (fit.py `dllogger.log((epoch, i), ...)`): the PyTorch
    shape, but `Iteration: i` is the 0-based index of the batch just finished, so it marks step
    i + 1 (`--benchmark-iters N` logs Iteration 0 .. N-1, i.e. steps 1 .. N)."""
    run = ParsedRun()
    marks = ClockMarks(ctx.global_batch, run, ctx.horizon)
    epochs = EpochFilter()
    for step, stamp in _steps(texts, PYTORCH_STEP, run, ctx.horizon):
        if epochs.keep(step["epoch"]):
            marks.add(int(step["step"]) + 1, stamp)
    epochs.note(run)
    return finish(run, "DLLogger Iteration lines")


def parse_tf1(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    marks = ClockMarks(ctx.global_batch, run, ctx.horizon)
    for step, stamp in _steps(texts, TF1_STEP, run, ctx.horizon):
        marks.add(int(step["gstep"] or step["step"]), stamp)
    return finish(run, "DLLogger step lines")
