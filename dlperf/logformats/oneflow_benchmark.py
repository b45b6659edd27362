"""OneFlow-Benchmark metric lines, each ending in the Unix time it was printed.

    train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000,
        samples/s: 3988.891 1597933942.9863544                                    (one line)
    step: 19, total_loss: 11.138, mlm_loss: 10.447, nsp_loss: 0.691, throughput: 52.257
        1597892693.8234866                                                        (one line)

Classification/cnns/util.py prints `iter` = steps done in the epoch; LanguageModeling/BERT/
util.py prints `step` = the 0-based index of the last step. The trailing `time.time()` is taken
when the metrics of the job's global batch came back, so marks come from those timestamps (as
DLPerf's extractors did); node 0's stdout holds the whole job's numbers.
"""

from __future__ import annotations

import re

from dlperf.events import ParsedRun
from dlperf.logformats.common import LogContext, clock_marks, finish, finite, first_epoch

CNN = re.compile(
    r"^train: epoch (?P<epoch>\d+), iter (?P<iter>\d+), loss: (?P<loss>\S+), "
    r"[^\n]*samples/s: \S+ (?P<ts>\d+\.\d+)\s*$",
    re.M,
)
BERT = re.compile(
    r"^step: (?P<step>\d+), total_loss: (?P<loss>\S+), [^\n]*throughput: \S+ (?P<ts>\d+\.\d+)\s*$",
    re.M,
)


def parse(text: str, ctx: LogContext) -> ParsedRun:
    run = ParsedRun()
    points: list[tuple[int, float]] = []
    for m in first_epoch(CNN.finditer(text), run):
        points.append((int(m["iter"]), float(m["ts"])))
        _loss(run, m["loss"])
    if not points:
        for m in BERT.finditer(text):
            points.append((int(m["step"]) + 1, float(m["ts"])))
            _loss(run, m["loss"])
    clock_marks(points, ctx.global_batch, run)
    return finish(run, text, "OneFlow-Benchmark metric lines")


def _loss(run: ParsedRun, text: str) -> None:
    value = finite(text.rstrip(","))
    if value is not None:
        run.losses.append(value)
