"""Log adapters: the throughput lines of official upstream scripts, turned into step marks.

Upstream scripts write no dlperf events; each format here is a pure function
`parse(text, ctx) -> ParsedRun` over the text of one log (all ranks' lines may be mixed in it),
tested on real logs. The formats belong to the upstream programs, not to a framework adapter:
NVIDIA's DLLogger, for one, is shared by three frameworks. Manifests name their format.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dlperf import DlperfError
from dlperf.events import ParsedRun
from dlperf.logformats import (
    absl_train_step,
    dllogger,
    gluonnlp,
    keras,
    mxnet_speed,
    oneflow_benchmark,
    paddle,
    pytorch_examples,
)
from dlperf.logformats.common import LogContext

Parser = Callable[[str, LogContext], ParsedRun]
# mpirun --tag-output / horovodrun put "[1,0]<stdout>:" before every line of rank 0 of job 1.
RANK_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:", re.M)

FORMATS: dict[str, Parser] = {
    "absl_train_step": absl_train_step.parse,
    "dllogger_pytorch": dllogger.parse_pytorch,
    "dllogger_tf1": dllogger.parse_tf1,
    "gluonnlp": gluonnlp.parse,
    "keras_time_history": keras.parse,
    "mxnet_speed": mxnet_speed.parse,
    "oneflow_benchmark": oneflow_benchmark.parse,
    "paddle": paddle.parse,
    "pytorch_examples": pytorch_examples.parse,
}


def parse_log(log_format: str, text: str, ctx: LogContext) -> ParsedRun:
    try:
        parser = FORMATS[log_format]
    except KeyError:
        raise DlperfError(
            f"unknown log format {log_format!r}; known: {', '.join(sorted(FORMATS))}"
        ) from None
    return parser(RANK_PREFIX.sub("", text), ctx)


__all__ = ["FORMATS", "LogContext", "parse_log"]
