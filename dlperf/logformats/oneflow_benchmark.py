"""OneFlow-Benchmark metric lines, each ending in the Unix time it was printed.

    train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000,
        samples/s: 3988.891 1597933942.9863544                                    (one line)
    step: 19, total_loss: 11.138, mlm_loss: 10.447, nsp_loss: 0.691, throughput: 52.257
        1597892693.8234866                                                        (one line)

Classification/cnns/util.py prints `iter` = steps done in the epoch; LanguageModeling/BERT/
util.py prints `step` = the 0-based index of the last step. The trailing `time.time()` is taken
when the metrics of the job's global batch came back, so marks come from those timestamps (as
DLPerf's extractors did); node 0's stdout holds the whole job's numbers. A log with CNN lines
is read by them alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dlperf.events import ParsedRun
from dlperf.logformats.common import ClockMarks, EpochFilter, LogContext, finish, finite

# Whole lines (`^...$`); each anchor at the line start is checked behind the literal, so that
# the search skips to it.
CNN = re.compile(
    r"train: epoch (?<=^train: epoch )(?P<epoch>\d+), iter (?P<iter>\d+), loss: (?P<loss>\S+), "
    r"[^\n]*samples/s: \S+ (?P<ts>\d+\.\d+)[^\S\n]*$",
    re.M,
)
BERT = re.compile(
    r"step: (?<=^step: )(?P<step>\d+), total_loss: (?P<loss>\S+), [^\n]*throughput: \S+ "
    r"(?P<ts>\d+\.\d+)[^\S\n]*$",
    re.M,
)


def parse(texts: Iterable[str], ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    cnn = ClockMarks(ctx.global_batch, run, ctx.horizon)
    epochs = EpochFilter()
    # BERT's lines count only in a log with no CNN line, so they go to a run of their own
    bert_run: ParsedRun | None = ParsedRun()
    bert: ClockMarks | None = ClockMarks(ctx.global_batch, bert_run, ctx.horizon)
    for text in texts:
        for m in CNN.finditer(text):
            bert_run = bert = None
            if epochs.keep(m["epoch"]):
                cnn.add(int(m["iter"]), float(m["ts"]))
                _loss(run, m["loss"], ctx.horizon)
        if bert is not None and bert_run is not None:
            for m in BERT.finditer(text):
                bert.add(int(m["step"]) + 1, float(m["ts"]))
                _loss(bert_run, m["loss"], ctx.horizon)
    epochs.note(run)
    if bert_run is not None:
        run.marks, run.losses, run.malformed = bert_run.marks, bert_run.losses, bert_run.malformed
    return finish(run, "OneFlow-Benchmark metric lines")


def _loss(run: ParsedRun, text: str, most: int | None) -> None:
    value = finite(text.rstrip(","))
    if value is not None and (most is None or len(run.losses) < most):
        run.losses.append(value)
