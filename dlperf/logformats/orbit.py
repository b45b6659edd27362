"""Orbit's training progress lines (tensorflow/models orbit/controller.py), printed by the
Model Garden trainers (official/vision/train.py, official/nlp/train.py) once per
`trainer.steps_per_loop` steps, each twice: through absl logging (stderr) and print (stdout):

    I1126 16:24:28.378834 140052602669952 controller.py:535] train | step:      4 | steps/s...
    train | step:      4 | steps/sec:    2.4 | output:

(the absl line is cut here; both end in ` output:` and the output dict follows on the next
lines). The absl line is written after the loop's outputs were read back to the host, so after
the device finished those steps; its time stamp has microseconds, the rate only one decimal.
Marks come from the absl time stamps (no year: a run across New Year's Eve is unwrapped, see
`DayClock`), as absl_train_step does; a log without
absl lines (absl logging off) falls back to the printed rates, each an interval from the
previous logged step (the first from the step in `training until step`, else 0). Step n counts
finished steps of the global batch (`task.train_data.global_batch_size` is the global batch);
the chief worker's log holds the job's progress.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dlperf.events import ParsedRun
from dlperf.logformats.absl_train_step import absl_minute
from dlperf.logformats.common import (
    ClockMarks,
    DayClock,
    IntervalTable,
    LogContext,
    finish,
    finite,
    intervals_to_marks,
    matches,
)

NEEDLE = "train | step:"  # every line used has it (the absl and the printed copy)
_S = r"[^\S\n]"
LINE = re.compile(
    rf"^(?:I(?P<minute>\d{{4}} \d{{2}}:\d{{2}}):(?P<second>\d{{2}})\.(?P<fraction>\d{{1,6}}) "
    rf"[^\n]*?\] )?train \| step:{_S}*(?P<step>\d+) \| "
    rf"(?:steps/sec:{_S}*(?P<rate>\S+)|training until step)",
    re.M,
)


def parse(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    marks = ClockMarks(ctx.global_batch, run, ctx.horizon)
    clock = DayClock()
    minutes: dict[str, int | None] = {}
    table = IntervalTable(ctx.horizon)  # the printed rates, used only without absl lines
    timed = 0  # absl lines read
    previous = 0  # the step the next printed rate starts from
    malformed = 0
    for m in matches(LINE, texts):
        minute, second, fraction, step, rate = m.groups()
        step = int(step)
        if minute is None:  # the printed copy
            if rate is None:  # 'training until step N...': the rates start at step
                previous = step
                continue
            value = finite(rate)
            if value is None or value <= 0 or step <= previous:
                malformed += 1
                continue
            steps = step - previous
            table.add(previous, step, steps * ctx.global_batch, steps / value)
            previous = step
            continue
        if rate is None:
            continue
        base = minutes.get(minute, -1)
        if base == -1:
            if len(minutes) > 4096:
                minutes.clear()
            base = minutes[minute] = absl_minute(minute)
        if base is None or int(second) > 59:
            run.malformed += 1
            continue
        timed += 1
        stamp = base + int(second) * 1_000_000 + int(fraction.ljust(6, "0"))
        marks.add(step, clock.seconds(stamp))
    if timed:
        return finish(run, "Orbit train lines")
    run.malformed += malformed
    intervals_to_marks(table, "global", ctx, run)
    if run.marks:
        run.notes.append(
            "no absl time stamps: times from Orbit's steps/sec, printed with one decimal"
        )
    return finish(run, "Orbit train lines")
