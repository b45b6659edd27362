"""NVIDIA DLLogger stdout lines (DeepLearningExamples), timed by their own timestamps.

    DLL 2020-09-15 14:29:13.473765 - Epoch: 0 Iteration: 1  train.loss : 7.09304  train...
    DLL 2020-08-26 18:06:39.031755 - Training Epoch: 0 Training Iteration: 25  average_loss...
    DLL 2020-06-20 10:00:00.000000 - (0, 120) imgs_per_sec : 812.3 cross_entropy : 6.9 ...
    DLL 2020-08-26 18:06:39.031755 - Iteration: 120  throughput_train : 1234.567 seq/s ...

dllogger/logger.py: prefix `DLL <datetime.now()> - `, then the step, then `name : value [unit]`
metrics. Only rank 0 writes to stdout in these scripts. The rates these lines carry differ in
what they time (one session.run, or the mean since the previous line), and PyTorch BERT logs no
rate at all, so marks come from the timestamps (full date and time, as DLPerf's own `_time`
extractors did): step n at the time its line was written, samples = steps since the previous
line x the global batch.
"""

from __future__ import annotations

import re
from datetime import datetime

from dlperf.events import ParsedRun
from dlperf.logformats.common import LogContext, clock_marks, finish, finite, first_epoch

PREFIX = re.compile(
    r"^DLL (?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?) - (?P<rest>.*)$", re.M
)
# PyTorch: "Epoch: e Iteration: i" (ResNet) or "Training Epoch: e Training Iteration: i" (BERT).
PYTORCH_STEP = re.compile(
    r"^(?:Training )?Epoch: (?P<epoch>\d+) (?:Training )?Iteration: (?P<step>\d+)\s"
)
# TF1: "(epoch, global_step)" (ResNet) or "Iteration: n" (BERT).
TF1_STEP = re.compile(r"^(?:\((?P<epoch>\d+), (?P<gstep>\d+)\)|Iteration: (?P<step>\d+))\s")
LOSS = re.compile(r"(?:train\.loss|average_loss|total_loss) : (?P<loss>\S+)")


def _lines(text: str, step_re: re.Pattern, run: ParsedRun):
    for match in PREFIX.finditer(text):
        step = step_re.match(match["rest"] + " ")
        if not step:
            continue  # PARAMETER, summary and end-of-epoch lines
        try:
            stamp = datetime.fromisoformat(match["ts"]).timestamp()
        except ValueError:
            run.malformed += 1
            continue
        loss = LOSS.search(match["rest"])
        if loss and finite(loss["loss"]) is not None:
            run.losses.append(float(loss["loss"]))
        yield step, stamp


def parse_pytorch(text: str, ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    lines = first_epoch(_lines(text, PYTORCH_STEP, run), run, lambda line: line[0]["epoch"])
    points = [(int(step["step"]), stamp) for step, stamp in lines]
    clock_marks(points, ctx.global_batch, run)
    return finish(run, text, "DLLogger Iteration lines")


def parse_tf1(text: str, ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    points = []
    for step, stamp in _lines(text, TF1_STEP, run):
        points.append((int(step["gstep"] or step["step"]), stamp))
    clock_marks(points, ctx.global_batch, run)
    return finish(run, text, "DLLogger step lines")
