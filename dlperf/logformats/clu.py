"""CLU metric-writer lines (google/CommonLoopUtils `LoggingWriter.write_scalars`), as Flax's
examples log their training progress, e.g. examples/imagenet/train.py:

    I1128 10:36:31.322105 140041960777408 logging_writer.py:48] [20] steps_per_second=0.825275,
        train_accuracy=0.0, train_learning_rate=1.4156e-08, train_loss=6.922216892242432

(one line). The trainer calls `write_scalars(step + 1, ...)` every `config.log_every_steps`
steps, after reading the interval's metrics back from the devices (so after they finished),
with `steps_per_second = log_every_steps / (seconds since the previous report)`. A line for
step N therefore covers steps N - interval .. N; the interval is the smallest gap between
logged steps, as for gluon-nlp, and marks are chained from the rates (6 significant digits).
The rates are the trainer's own clock, read in the training loop; the absl time stamp is when
CLU's writer thread (create_default_writer is asynchronous) got to the line, and may be
missing, so it is not used. Samples: each step is one global batch (`config.batch_size` is the
global batch; every process logs the same step, lines of one step merge, the slowest kept).

The first logged interval is never a mark's interval: it began before the first step was
compiled (`train_metrics_last_t` is taken before the loop), so the marks start at the first
logged step, time 0, and no window can include the compilation. Eval lines (`[N]
eval_loss=...`) and other writers' lines have no `steps_per_second` and are left out. Every
logged step is kept whatever the horizon (a row per report: `log_every_steps` apart); losses
stop at it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from dlperf.events import Mark, ParsedRun
from dlperf.logformats.common import (
    LogContext,
    finish,
    finite,
    gap_note,
    logging_interval,
    matches,
)

NEEDLE = "steps_per_second="  # every line used has it
LINE = re.compile(
    r"\[(?P<step>\d+)\](?: collection=\S+)? (?P<body>[^\n]*?)"
    r"\bsteps_per_second=(?P<rate>[^,\s]+)(?P<rest>[^\n]*)"
)
LOSS = re.compile(r"\btrain_loss=(?P<loss>[^,\s]+)")


def parse(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    seconds_per_step: dict[int, float] = {}  # logged step -> the slowest line's 1 / rate
    losses, most = run.losses, ctx.horizon
    for m in matches(LINE, texts):
        rate = finite(m["rate"])
        per_step = 1.0 / rate if rate is not None and rate > 0 else math.inf
        if not math.isfinite(per_step):
            run.malformed += 1
            continue
        step = int(m["step"])
        if per_step > seconds_per_step.get(step, 0.0):
            seconds_per_step[step] = per_step
        loss = LOSS.search(m["body"]) or LOSS.search(m["rest"])
        value = finite(loss["loss"]) if loss else None
        if value is not None and (most is None or len(losses) < most):
            losses.append(value)
    _chain(seconds_per_step, ctx.global_batch, run)
    return finish(run, "CLU steps_per_second lines")


def _chain(seconds_per_step: dict[int, float], global_batch: int, run: ParsedRun) -> None:
    """Marks from the logged steps in order: the first at time 0 (its interval, which holds
    the compilation, left out), then one per interval; the chain stops at a missing report."""
    steps = sorted(seconds_per_step)
    if not steps or not global_batch > 0:
        return
    interval = logging_interval(steps)
    run.marks.append(Mark(steps[0], 0.0, 0.0))
    if interval is None:
        return
    time, last = 0.0, steps[0]
    for step in steps[1:]:
        start = step - interval
        if start != last:
            gap_note(run, last, start)
            return
        time += seconds_per_step[step] * interval
        if not math.isfinite(time):
            run.malformed += 1
            return
        run.marks.append(Mark(step, time, float(interval * global_batch)))
        last = step
