"""LiBai (Oneflow-Inc/libai) training lines, written by libai.utils.events.CommonMetricPrinter.

    [11/26 16:40:02 lb.utils.events]:  eta: 0:00:41  iteration: 19/140  consumed_samples: 80
        total_loss: 10.98  lm_loss: 10.28  sop_loss: 0.7  time: 0.3418 s/iter
        data_time: 0.0012 s/iter total_throughput: 11.70 samples/s lr: 1.00e-04   (one line)

Only rank 0 prints, every `train.log_period` iterations and after the last one. `iteration` is
the 0-based index of the step just done; `consumed_samples` the job's samples so far. `time` is
the mean of the step times since the IterationTimer's warm-up (its default 3: the steps with
index >= 2 are timed, each measured after the step's losses were read back to rank 0), so
`time x (iteration - 1)` is the timed seconds through that step: the marks are (iteration + 1,
that sum, the samples consumed since the mark before). The clock in the line's head has only
whole seconds and is not used; lines without `time` (the first two steps) give no mark. The
time stamps are rounded to 0.1 ms per step (`{:.4f}`), so a 100-step window carries at most
about 10 ms of rounding. Hooks that run after the timer in a step (the writer, checkpoints,
evaluation) are outside the sum, as in LiBai's own 'total_throughput'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dlperf.events import Mark, ParsedRun
from dlperf.logformats.common import LogContext, finish, finite, matches

NEEDLE = "consumed_samples: "
_S = r"[^\S\n]"
LINE = re.compile(
    rf"iteration: (?P<iter>\d+)/(?P<max>\d+){_S}+consumed_samples: (?P<samples>\d+)"
    rf"{_S}+total_loss: (?P<loss>\S+)[^\n]*?{_S}time: (?P<avg>\d+(?:\.\d+)?) s/iter"
)
WARMUP = 3  # libai.engine.hooks.IterationTimer(warmup_iter=3), as DefaultTrainer builds it


def parse(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    last: tuple[int, float, int] | None = None  # step, seconds, consumed samples
    anchor: Mark | None = None  # the first mark at or past the horizon
    anchor_consumed = 0
    for m in matches(LINE, texts):
        index, avg, consumed = int(m["iter"]), finite(m["avg"]), int(m["samples"])
        timed = index + 2 - WARMUP  # steps timed through this one
        if avg is None or avg < 0 or timed < 1:
            run.malformed += avg is None or avg < 0
            continue
        step, seconds = index + 1, avg * timed
        if last is not None and (step <= last[0] or seconds < last[1] or consumed < last[2]):
            run.malformed += 1
            continue
        loss = finite(m["loss"])
        if loss is not None and (ctx.horizon is None or len(run.losses) < ctx.horizon):
            run.losses.append(loss)
        samples = 0.0 if last is None else float(consumed - last[2])
        last = (step, seconds, consumed)
        if anchor is None:
            run.marks.append(Mark(step, seconds, samples))
            if ctx.horizon is not None and step >= ctx.horizon:
                anchor, anchor_consumed = run.marks[-1], consumed
            continue
        merged = Mark(step, seconds, float(consumed - anchor_consumed))
        if run.marks[-1] is anchor:
            run.marks.append(merged)
        else:
            run.marks[-1] = merged
    return finish(run, "LiBai 'iteration: ... time: ... s/iter' lines")
