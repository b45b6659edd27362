"""Log adapters: the throughput lines of official upstream scripts, turned into step marks.

Upstream scripts write no dlperf events; each format here is a pure function
`parse(texts, ctx) -> ParsedRun` over one log given in pieces of whole lines (all ranks' lines
may be mixed in it), tested on real logs. The formats belong to the upstream programs, not to a
framework adapter: NVIDIA's DLLogger, for one, is shared by three frameworks. Manifests name
their format.

Logs are read once, streaming (`dlperf.logformats.reading`): `parse_file` holds a few chunks of
the text (about 10 MB), whatever its size; lines of other programs' output cost nothing more.
Without a horizon (`LogContext.horizon`, the window's end), what grows is what the throughput
lines give: a mark per line or interval and a loss per line where the format has one (about
170 bytes a line), and, for the formats that merge intervals or ranks, a row per logged
interval while the log is read (the marks are made from the rows, which are dropped as they
are used: about 250-400 bytes per interval at the peak). With a horizon, the formats timed by
a clock and the interval formats (keras_time_history, gluonnlp) keep the same memory however
long the log (marks and losses up to the horizon, then one mark; the interval formats hold
the rows of the last `common.PENDING` intervals and fold older ones into runs). What still
grows with a horizon: the formats that use only the first epoch (mxnet_speed, paddle,
pytorch_examples) keep a mark or row per logged step of it, whatever the horizon, but nothing
for the later ones; clu keeps a number per logged step (its reports are `log_every_steps`
apart). `benchmarks/parse_logs.py` measures both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from os import PathLike

from dlperf import DlperfError
from dlperf.events import ParsedRun
from dlperf.logformats import (
    absl_train_step,
    clu,
    dllogger,
    gluonnlp,
    keras,
    libai,
    mxnet_speed,
    oneflow_benchmark,
    oneflow_models,
    orbit,
    paddle,
    pytorch_examples,
)
from dlperf.logformats.common import FailureWatch, LogContext
from dlperf.logformats.reading import file_chunks, line_chunks, scan, text_chunks

Parser = Callable[[Iterable[str], LogContext], ParsedRun]


@dataclass(frozen=True)
class LogFormat:
    """A format's parser, over the log in pieces of whole lines; with a `needle`, it is given
    only the lines that contain it (every line it uses does)."""

    parse: Parser
    needle: str | None = None


FORMATS: dict[str, LogFormat] = {
    "absl_train_step": LogFormat(absl_train_step.parse, absl_train_step.NEEDLE),
    "clu": LogFormat(clu.parse, clu.NEEDLE),
    "dllogger_mxnet": LogFormat(dllogger.parse_mxnet),
    "dllogger_pytorch": LogFormat(dllogger.parse_pytorch),
    "dllogger_tf1": LogFormat(dllogger.parse_tf1),
    "gluonnlp": LogFormat(gluonnlp.parse),
    "keras_time_history": LogFormat(keras.parse),
    "libai": LogFormat(libai.parse, libai.NEEDLE),
    "mxnet_speed": LogFormat(mxnet_speed.parse),
    "oneflow_benchmark": LogFormat(oneflow_benchmark.parse),
    "oneflow_models": LogFormat(oneflow_models.parse),
    "orbit_train": LogFormat(orbit.parse, orbit.NEEDLE),
    "paddle": LogFormat(paddle.parse),
    "pytorch_examples": LogFormat(pytorch_examples.parse),
    "pytorch_examples_1based": LogFormat(pytorch_examples.parse_1based),
}


def get_format(log_format: str) -> LogFormat:
    try:
        return FORMATS[log_format]
    except KeyError:
        raise DlperfError(
            f"unknown log format {log_format!r}; known: {', '.join(sorted(FORMATS))}"
        ) from None


def parse_chunks(
    log_format: str, chunks: Iterable[bytes], ctx: LogContext, errors: str = "replace"
) -> ParsedRun:
    """Parse a log given as UTF-8 chunks of whole lines (see `dlperf.logformats.reading`);
    `errors` is how their bytes are decoded."""
    fmt = get_format(log_format)
    watch = FailureWatch(errors)
    pieces = scan(chunks, fmt.needle, watch)
    run = fmt.parse(pieces, ctx)
    for _ in pieces:  # a parser may stop early; the failure evidence needs the whole log
        pass
    run.failure = watch.failure
    return run


def parse_file(path: str | PathLike[str], log_format: str, ctx: LogContext) -> ParsedRun:
    """Parse a log file, streaming: memory does not grow with the size of the text."""
    return parse_chunks(log_format, file_chunks(path), ctx)


def parse_lines(log_format: str, lines: Iterable[str], ctx: LogContext) -> ParsedRun:
    """Parse the lines of a log (with or without their `\\n`), read lazily, a chunk at a time."""
    return parse_chunks(log_format, line_chunks(lines), ctx, errors="surrogatepass")


def parse_log(log_format: str, text: str, ctx: LogContext) -> ParsedRun:
    """Parse the whole text of a log (mpirun's rank tags are removed from its lines)."""
    return parse_chunks(log_format, text_chunks(text), ctx, errors="surrogatepass")


__all__ = [
    "FORMATS",
    "LogContext",
    "LogFormat",
    "get_format",
    "parse_chunks",
    "parse_file",
    "parse_lines",
    "parse_log",
]
