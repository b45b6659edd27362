"""tensorflow/models BERT pretraining `Train Step:` lines, timed by their absl prefix.

    I0826 18:06:39.031755 1399794 model_training_utils.py:505] Train Step: 20/120  / loss = 10.9

official/nlp/bert/model_training_utils.py logs one line per step (or per `steps_per_loop`) with
no rate, so marks come from the absl/glog prefix `I<MMDD> <HH:MM:SS.ffffff>`: it has no year,
so a run across New Year's Eve is unwrapped (see `times_of_day`). Step n counts finished steps;
the chief worker's log holds the job's progress on the global batch.
"""

from __future__ import annotations

import re
from datetime import datetime

from dlperf.events import ParsedRun
from dlperf.logformats.common import LogContext, clock_marks, finish, finite, times_of_day

LINE = re.compile(
    r"^I(?P<md>\d{4}) (?P<hms>\d{2}:\d{2}:\d{2}\.\d{1,6}) [^\n]*?"
    r"Train Step: (?P<step>\d+)/\d+\s+/ loss = (?P<loss>\S+)",
    re.M,
)


def parse(text: str, ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    steps, stamps = [], []
    for m in LINE.finditer(text):
        try:  # a leap year, so that 0229 parses; only differences are used
            stamps.append(datetime.strptime(f"2000{m['md']} {m['hms']}", "%Y%m%d %H:%M:%S.%f"))
        except ValueError:
            run.malformed += 1
            continue
        steps.append(int(m["step"]))
        loss = finite(m["loss"])
        if loss is not None:
            run.losses.append(loss)
    clock_marks(list(zip(steps, times_of_day(stamps), strict=True)), ctx.global_batch, run)
    return finish(run, text, "Train Step lines")
