"""Log formats read streaming: the same results as the whole-text parsers they replaced, whatever
the chunking, and memory that does not grow with the size of the log.

The expected results in snapshots/logformats-streaming.json were produced by the whole-text
parsers (`parse(text, ctx)` with regular expressions over the whole log, before the streaming
rewrite) on the logs below: real logs from ../shared/fixtures, each read by every format, and
logs made here line by line in each upstream's format with what real logs carry besides (other
programs' chatter, several ranks, mpirun tags, CRLF, progress bars drawn with \\r, malformed
numbers, later epochs, failures). Formats written after the rewrite (orbit_train, libai,
oneflow_models, clu) had no whole-text parser: their entries are their own first results, added
with them, every earlier entry left as it was. No wall-clock assertions: speed is
benchmarks/parse_logs.py's.
"""

from __future__ import annotations

import functools
import json
import random
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from dlperf.events import Mark, ParsedRun, parse_events, parse_events_file
from dlperf.importers.fambench import parse_bmlog_lines, read_bmlog
from dlperf.logformats import (
    FORMATS,
    LogContext,
    common,
    parse_chunks,
    parse_file,
    parse_lines,
    parse_log,
)
from dlperf.logformats.reading import file_chunks, text_chunks
from dlperf.stats import window_throughput

SNAPSHOT = Path(__file__).with_name("snapshots") / "logformats-streaming.json"
CONTEXTS = {"1x1": LogContext(128), "8x2": LogContext(32, 8, 2)}  # ordered as in the snapshot
# The fixtures this snapshot was taken of (later fixture folders have tests of their own).
FIXTURE_GLOBS = ("dlperf/tf2_resnet50/*/*.log", "mlperf_loadgen/*/*.txt", "mlperf_real/*/*.txt",
                 "fambench*/*.log")  # fmt: skip


def as_json(run: ParsedRun) -> list | None:
    """A run as the snapshot keeps it: marks, losses, notes, malformed lines, failure (None
    when it found nothing at all)."""
    marks = [[m.step, m.time, m.samples] for m in run.marks]
    found = [marks, run.losses, run.notes, run.malformed, run.failure]
    return found if any(found) else None


# ------------------------------------------------------------------ logs made line by line

NOISE = (
    "2020-08-26 17:43:10.813717: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1402] "
    "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 14753 MB memory)",
    "W0826 15:12:11.285453 140405777909504 callbacks.py:328] Callbacks method "
    "`on_train_batch_end` is slow compared to the batch time (batch time: 0.3966s).",
    "node0:12345:12401 [0] NCCL INFO Channel 00 : 0[1a000] -> 1[1b000] via P2P/IPC",
    "[14:29:13] src/operator/nn/./cudnn/./cudnn_algoreg-inl.h:97: Running performance tests to "
    "find the best convolution algorithm, this can take a while...",
    "I0826 17:43:11.705436 139979460507392 dataset_factory.py:358] Using TFRecords to load data.",
    "validation: epoch 0, iter 100, top_1: 0.001, top_k: 0.005, samples/s: 9000.000 1597933999.0",
    "Test: [ 10/196]\tTime  0.123 ( 0.456)\tLoss 6.9062e+00 (6.9101e+00)\tAcc@1   0.00 (  0.10)",
    "  1200/5005 [======>......] - ETA: 25:01 - loss: 7.0312 - accuracy: 0.0012",
    "训练中: 第 3 轮 — naïve résumé, no failure here",
    "",
)


def _steps(first: int, count: int, every: int = 1) -> range:
    return range(first, first + count * every, every)


def _keras(n: int, ranks: int) -> Iterator[str]:
    start = datetime(2020, 8, 26, 23, 59)
    for k in range(n):
        for _ in range(ranks):
            t = start + timedelta(seconds=40 * k)
            yield (
                f"I{t:%m%d %H:%M:%S.%f} 1404057 keras_utils.py:133] TimeHistory: 39.{k % 10}3 "
                f"seconds, {327.08 + k % 3:.2f} examples/second between steps {100 * k} and "
                f"{100 * k + 100}"
            )


def _absl(n: int, ranks: int) -> Iterator[str]:
    start = datetime(2000, 12, 31, 23, 59, 50)
    for step in _steps(1, n):
        t = start + timedelta(seconds=0.4 * step)
        yield (
            f"I{t:%m%d %H:%M:%S.%f} 140405777 model_training_utils.py:505] "
            f"Train Step: {step}/{n}  / loss = {10.5 - step / 1000:.4f}  lr = 0.0001"
        )


def _orbit(n: int, ranks: int) -> Iterator[str]:
    """Orbit (Model Garden 2.20): each line through absl and print, the output dict below."""
    start = datetime(2000, 12, 31, 23, 59, 30)
    yield "I1231 23:59:29.000000 1 controller.py:278] train | step:      0 | training until step"
    yield "train | step:      0 | training until step 600..."
    for k in _steps(1, n):
        t = start + timedelta(seconds=0.9 * k + 0.01 * (k % 3))
        body = f"train | step: {20 * k: 6d} | steps/sec: {20 / 0.9:6.1f} | output: "
        yield f"I{t:%m%d %H:%M:%S.%f} 140052602669952 controller.py:535] {body}"
        yield f"    {{'lm_example_loss': np.float32({10.4 - k / 100:.4f}),"
        yield f"     'learning_rate': np.float32({1e-8 * k:.4g})}}"
        yield body


def _clu(n: int, ranks: int) -> Iterator[str]:
    """CLU's LoggingWriter (Flax examples/imagenet): every process logs each report."""
    start = datetime(2000, 12, 31, 23, 59, 40)
    for k in _steps(1, n):
        t = start + timedelta(seconds=25 * k)
        for rank in range(ranks):
            rate = 20 / (24.9 + k % 3 / 10 + rank / 100)
            yield (
                f"I{t:%m%d %H:%M:%S.%f} 14004196077 logging_writer.py:48] [{20 * k}] "
                f"steps_per_second={rate:.6g}, train_accuracy=0.0, "
                f"train_learning_rate={1.4e-08 * k:.8g}, train_loss={6.92 - k / 1e4:.16g}"
            )
        if k % 25 == 0:
            yield f"I{t:%m%d %H:%M:%S.%f} 1 logging_writer.py:48] [{20 * k}] eval_loss=6.9"


def _dll(stamp: datetime, rest: str) -> str:
    return f"DLL {stamp} - {rest}"


def _dllogger_pytorch(n: int, ranks: int) -> Iterator[str]:
    start = datetime(2020, 9, 15, 23, 59, 50)
    yield _dll(start, "PARAMETER data : /data/image  arch : resnet50  world_size : 16 ")
    for i in _steps(1, n):
        epoch, it = divmod(i, n // 2 + 1)
        yield _dll(
            start + timedelta(seconds=0.25 * i),
            f"Epoch: {epoch} Iteration: {it + 1}  train.loss : {7.09 - i / 1000:.5f}  "
            f"train.total_ips : {4294.91 + i:.2f} img/s",
        )
    yield _dll(start + timedelta(seconds=0.25 * n), "Epoch: 0  train.loss : 6.9 ")


def _dllogger_tf1(n: int, ranks: int) -> Iterator[str]:
    start = datetime(2020, 6, 20, 10)
    for s in _steps(20, n):
        yield _dll(
            start + timedelta(seconds=0.2 * s),
            f"({s // 100}, {s}) imgs_per_sec : 640.1 cross_entropy : 6.9 l2_loss : 0.3 "
            f"total_loss : {7.2 - s / 1e4:.4f} learning_rate : 0.001",
        )
    yield _dll(start, "() train_throughput : 640.0")


def _gluonnlp(n: int, ranks: int) -> Iterator[str]:
    for step in _steps(10, n, 10):
        for rank in range(ranks):
            ms = 200.0 + 10 * rank + step % 7
            yield (
                f"INFO:root:[step {step}]\tmlm_loss={7.1 - step / 1e4:7.5f}\tnsp_loss= 0.69\t"
                f"throughput=2.8K tks/s\tlr=0.0000250 time={ms / 100:.2f}, "
                f"latency={ms:.1f} ms/batch"
            )


def _mxnet_speed(n: int, ranks: int) -> Iterator[str]:
    for a in _steps(0, n, 20):
        for _ in range(ranks):
            yield (
                f"INFO:root:Epoch[{a // 400}] Batch [{a % 400}-{a % 400 + 20}]\t"
                f"Speed: {1234.56 + a % 9:.2f} samples/sec\taccuracy=0.001"
            )


def _oneflow_benchmark(n: int, ranks: int) -> Iterator[str]:
    for it in _steps(20, n, 20):
        yield (
            f"train: epoch {it // 1000}, iter {it % 1000}, loss: {7.087004 - it / 1e5:.6f}, "
            f"top_1: 0.000000, top_k: 0.000000, samples/s: 3988.891 {1597933942.9863544 + it:.7f}"
        )
    for step in _steps(19, n, 20):  # BERT's lines count only in a log without CNN lines
        yield (
            f"step: {step}, total_loss: 9.725, mlm_loss: 8.960, nsp_loss: 0.766, "
            f"throughput: 54.982 {1598056519.8844702 + step:.7f}"
        )


def _oneflow_bert(n: int, ranks: int) -> Iterator[str]:
    yield from (line for line in _oneflow_benchmark(n, ranks) if line.startswith("step"))


def _oneflow_models(n: int, ranks: int) -> Iterator[str]:
    for it in _steps(20, n, 20):
        for rank in range(ranks):  # every rank prints (--metric-local True); rank 0 is used
            yield (
                f"[rank:{rank}] [train], epoch: {it // 1000}/50, iter: {it % 1000}/5004, "
                f"loss: {7.01456 - it / 1e5:.5f}, top1: 0.00000, throughput: 1200.45, "
                f"timestamp: {27484.661344 + it / 10 + rank / 1e3:.6f} | 2026-11-26 16:25:17.886"
            )


def _libai(n: int, ranks: int) -> Iterator[str]:
    for i in _steps(19, n, 20):
        yield (
            f"[11/26 16:40:02 lb.utils.events]:  eta: 0:00:41  iteration: {i}/140  "
            f"consumed_samples: {(i + 1) * 64}  total_loss: {10.98 - i / 1e4:.4g}  "
            f"time: {0.3418 + i / 1e4:.4f} s/iter  data_time: 0.0012 s/iter "
            "total_throughput: 187.25 samples/s lr: 1.00e-04  "
        )


def _paddle(n: int, ranks: int) -> Iterator[str]:
    for b in _steps(0, n):
        yield (
            f"2020-08-20 10:00:{b % 60:02d},000-INFO: [Pass {b // 150}, train batch {b % 150}] "
            f"\tloss {6.9 - b / 1e3:.5f}, acc1 0.00000, acc5 0.00781, lr 0.00100, elapse "
            f"{0.25 + (b % 3) / 100:.4f} sec"
        )


def _paddle_speed(n: int, ranks: int) -> Iterator[str]:
    for s in _steps(1, n):
        yield "feed_queue size: 70, current learning_rate: 0.0001"
        yield (
            f"epoch: 1, progress: 1/1, step: {s}, loss: 10.487363, ppl: 17796.2, "
            f"next_sent_acc: 0.56, speed: {4.0 + s % 3:.6f} steps/s, file: demo_wiki_train.gz"
        )


def _paddle_ips(n: int, ranks: int) -> Iterator[str]:
    for i in _steps(0, n, 10):
        yield (
            f"[2022/04/04 17:51:{i % 60:02d}] ppcls INFO: [Train][Epoch 1/20][Iter: {i}/5005]lr: "
            f"0.00031, CELoss: 4.64081, loss: 4.64081, batch_cost: 0.25000s, reader_cost: 0.01, "
            f"ips: {512.0 + i % 5:.5f} images/sec, eta: 0:08:23"
        )


def _pytorch_examples(n: int, ranks: int) -> Iterator[str]:
    total = [0.0] * ranks
    for epoch in range(2):
        for i in range(n // 2):
            for r in range(ranks):
                step = 0.25 * (1 + 0.1 * r) + (5.0 if i == 0 else 0.0)
                total[r] += step
                yield (
                    f"Epoch: [{epoch}][{i:4d}/5005]\tTime {step:6.3f} ({total[r] / (i + 1):6.3f})"
                    "\tData  0.100 ( 0.090)\tLoss 6.9828e+00 (6.9828e+00)\tAcc@1   0.78 (  0.78)"
                )
            if i == n // 4:
                yield "Test: [ 0/196]\tTime  1.000 ( 1.000)"


MAKERS: dict[str, Callable[[int, int], Iterator[str]]] = {
    "absl_train_step": _absl,
    "clu": _clu,
    "dllogger_pytorch": _dllogger_pytorch,
    "dllogger_tf1": _dllogger_tf1,
    "gluonnlp": _gluonnlp,
    "keras_time_history": _keras,
    "libai": _libai,
    "mxnet_speed": _mxnet_speed,
    "oneflow_benchmark": _oneflow_benchmark,
    "oneflow_bert": _oneflow_bert,
    "oneflow_models": _oneflow_models,
    "orbit_train": _orbit,
    "paddle": _paddle,
    "paddle_speed": _paddle_speed,
    "paddle_ips": _paddle_ips,
    "pytorch_examples": _pytorch_examples,
}
FAILURES = (
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "INFO:root:[step 30]\tmlm_loss=nan\tnsp_loss= 0.69",
    'Traceback (most recent call last):\n  File "train.py", line 1, in <module>\n'
    "\n    main()\nValueError: boom",
    "Segmentation fault (core dumped)",
)


@functools.cache
def made_logs() -> dict[str, str]:
    """name -> text: per maker a clean log and a messy one (the same lines, then mangled)."""
    logs = {}
    for name, make in MAKERS.items():
        rng = random.Random(name)
        lines = []
        for line in make(60, 2):
            lines.append(line)
            lines.extend(rng.choice(NOISE) for _ in range(rng.randrange(3)))
        logs[f"{name}-clean"] = "\n".join(lines) + "\n"
        messy = []
        for line in lines:
            roll = rng.random()
            if roll < 0.03 and line:  # a digit or separator mangled
                at = rng.randrange(len(line))
                line = line[:at] + rng.choice("x-.9 ") + line[at + 1 :]
            elif roll < 0.05:
                line = rng.choice(FAILURES[1:])  # never the first: OOM then outranks the rest
            elif roll < 0.08:
                line = f"[1,{rng.randrange(2)}]<stdout>:{line}"
            elif roll < 0.10:
                line = f"  12/100 [==>....] - ETA: 3s\r{line}"  # a progress bar before it
            elif roll < 0.11:
                messy.append(line)  # printed twice
            messy.append(line)
        logs[f"{name}-messy"] = "\r\n".join(messy[: len(messy) // 2]) + "\n".join(
            ["", *messy[len(messy) // 2 :], FAILURES[0]]
        )
    return logs


def fixture_logs(fixtures: Path) -> dict[str, str]:
    return {
        str(p.relative_to(fixtures)): p.read_text(errors="replace")
        for pattern in FIXTURE_GLOBS
        for p in sorted(fixtures.glob(pattern))
    }


@functools.cache
def expected() -> dict:
    return json.loads(SNAPSHOT.read_text())


def snapshot_of(want: dict, log_format: str) -> list:
    """The snapshot's results for a format; dllogger_mxnet (added after the streaming rewrite,
    no whole-text parser of its own) is the PyTorch shape's parse with every step one later."""
    if log_format != "dllogger_mxnet":
        return want[log_format]

    def later(found: list | None) -> list | None:
        if found is None:
            return None
        marks = [[step + 1, time, samples] for step, time, samples in found[0]]
        return [marks, *found[1:]]

    return [later(found) for found in want["dllogger_pytorch"]]


def check(name: str, text: str, tmp_path: Path, want: dict, chunk: int = 97) -> None:
    """Every way into the parsers gives the results the whole-text parsers gave: per format,
    [each context's results from the text] + [from the file, where its newlines differ]."""
    path = tmp_path / "log"
    path.write_bytes(text.encode("utf-8"))
    for log_format in FORMATS:
        expect = snapshot_of(want, log_format)
        for i, ctx in enumerate(CONTEXTS.values()):
            from_text = expect[i]
            from_file = expect[i + len(CONTEXTS)] if len(expect) > len(CONTEXTS) else from_text
            where = f"{name} / {log_format} / {ctx}"
            assert as_json(parse_log(log_format, text, ctx)) == from_text, where
            lines = iter(text.split("\n"))
            assert as_json(parse_lines(log_format, lines, ctx)) == from_text, where
            assert as_json(parse_file(path, log_format, ctx)) == from_file, where
            # small chunks: every line end and every failure can fall on a chunk boundary
            small = parse_chunks(log_format, file_chunks(path, chunk), ctx)
            assert as_json(small) == from_file, where
            pieces = parse_chunks(log_format, text_chunks(text, chunk - 8), ctx, "surrogatepass")
            assert as_json(pieces) == from_text, where
            assert parse_log(log_format, text, ctx).what == parse_log(log_format, "", ctx).what


@pytest.mark.parametrize("name", sorted(made_logs()))
def test_made_logs_parse_as_before(name: str, tmp_path: Path) -> None:
    check(name, made_logs()[name], tmp_path, expected()["made"][name])


def test_real_logs_parse_as_before_by_every_format(fixtures: Path, tmp_path: Path) -> None:
    want = expected()["fixtures"]
    logs = fixture_logs(fixtures)
    assert sorted(logs) == sorted(want)
    for name, text in logs.items():
        check(name, text, tmp_path, want[name], chunk=4099)


def test_failures_split_across_chunks() -> None:
    text = "x\n" * 40 + 'Traceback (most recent call last):\n  File "a.py"\n' + "  y\n" * 30
    text += "KeyError: 'lr'\nmore\n"
    for size in (1, 5, 33, 1 << 20):
        chunks = text_chunks(text, size)
        run = parse_chunks("keras_time_history", chunks, LogContext(8), "surrogatepass")
        assert run.failure == "an uncaught Python exception (KeyError: 'lr')"
    # an OOM anywhere outranks a traceback before it
    oom = parse_log("keras_time_history", text + "OOM when allocating\n", LogContext(8))
    assert oom.failure.startswith("out of memory")


# ------------------------------------------------------------------ a horizon

CLOCKED = (
    "absl_train_step",
    "dllogger_mxnet",
    "dllogger_pytorch",
    "dllogger_tf1",
    "oneflow_benchmark",
    "oneflow_models",
    "orbit_train",
)
INTERVALS = ("gluonnlp", "keras_time_history")  # they fold the intervals past the horizon
COUNTED = ("libai",)  # timed by a clock, samples counted by the log: merged like intervals


def windows(marks: list[Mark], horizon: int) -> list:
    """Every window that ends at the horizon, or why there is none."""
    found: list = []
    for skip in range(0, horizon, 7):
        try:
            found.append(window_throughput(marks, skip, horizon - skip))
        except ValueError as exc:
            found.append(str(exc))
    return found


def check_horizon(full: ParsedRun, kept: ParsedRun, horizon: int, per_step: int, name) -> None:
    """`kept` (parsed with a horizon) is `full` (without) as `LogContext` says: the same notes,
    malformed count and failure, the losses up to the horizon, the marks up to the first one
    at or past it, then one mark for all later ones, so the same windows."""
    same = (kept.malformed, kept.notes, kept.failure, kept.what)
    assert same == (full.malformed, full.notes, full.failure, full.what), name
    assert kept.losses == full.losses[:horizon], name
    cut = next((i + 1 for i, m in enumerate(full.marks) if m.step >= horizon), None)
    if cut is None or cut >= len(full.marks) - 1:
        assert kept.marks == full.marks, name
        return
    anchor, last = full.marks[cut - 1], full.marks[-1]
    if per_step:  # a clock's: samples are steps since the anchor
        merged = Mark(last.step, last.time, (last.step - anchor.step) * per_step)
    else:  # intervals': the sum of theirs
        merged = Mark(last.step, last.time, sum(m.samples for m in full.marks[cut:]))
    assert kept.marks[:cut] == full.marks[:cut], name
    assert kept.marks[cut:] == [merged] or (  # folded runs add their times up in another order
        len(kept.marks) == cut + 1
        and kept.marks[cut].step == merged.step
        and kept.marks[cut].time == pytest.approx(merged.time, rel=1e-12)
        and kept.marks[cut].samples == pytest.approx(merged.samples, rel=1e-12)
    ), name
    assert windows(kept.marks, horizon) == windows(full.marks, horizon), name


@pytest.mark.parametrize("log_format", sorted(FORMATS))
@pytest.mark.parametrize("horizon", [1, 45, 10_000])
def test_a_horizon_keeps_what_the_window_sees(log_format: str, horizon: int) -> None:
    ctx, windowed = LogContext(32, 8, 2), LogContext(32, 8, 2, horizon=horizon)
    for name, text in made_logs().items():
        full, kept = parse_log(log_format, text, ctx), parse_log(log_format, text, windowed)
        if log_format not in CLOCKED + INTERVALS + COUNTED:  # the others keep every mark
            assert (kept.marks, kept.malformed, kept.notes) == (
                full.marks,
                full.malformed,
                full.notes,
            ), name
            assert kept.losses == full.losses[:horizon], name
            continue
        check_horizon(full, kept, horizon, ctx.global_batch if log_format in CLOCKED else 0, name)


@pytest.fixture
def tiny_limits(monkeypatch: pytest.MonkeyPatch) -> Callable[[int, int], None]:
    """Sets how many intervals past the horizon are held as they are and how many runs."""

    def set_limits(pending: int, runs: int) -> None:
        monkeypatch.setattr(common, "PENDING", pending)
        monkeypatch.setattr(common, "RUNS", runs)

    return set_limits


@pytest.mark.parametrize("log_format", INTERVALS)
@pytest.mark.parametrize("limits", [(1, 1), (2, 64), (3, 2)])
def test_intervals_folded_past_the_horizon_give_the_same_results(
    log_format: str, limits: tuple[int, int], tiny_limits: Callable[[int, int], None]
) -> None:
    """The made logs (two ranks, lines printed twice, mangled numbers, failures) with almost
    every interval past the horizon folded: nothing changes but the merged mark's rounding."""
    tiny_limits(*limits)  # (a parse without a horizon does not use them)
    ctx = LogContext(32, 8, 2)
    for horizon in (1, 45, 10_000):
        for name, text in made_logs().items():
            full = parse_log(log_format, text, ctx)
            kept = parse_log(log_format, text, LogContext(32, 8, 2, horizon=horizon))
            check_horizon(full, kept, horizon, 0, (name, horizon))


def keras_log(rows: Iterable[tuple[int, int, float]]) -> str:
    """Keras TimeHistory lines for (start, end, seconds); the rate is 0, so the seconds count."""
    return "".join(
        f"TimeHistory: {sec:.3f} seconds, 0 examples/second between steps {a} and {b}\n"
        for a, b, sec in rows
    )


def gluonnlp_log(steps: Iterable[tuple[int, float]]) -> str:
    """gluon-nlp lines for (step, ms per step)."""
    return "".join(
        f"INFO:root:[step {step}]\tmlm_loss=7.0\tlatency={ms:.1f} ms/batch\n" for step, ms in steps
    )


def both(log_format: str, text: str, horizon: int = 120) -> tuple[ParsedRun, ParsedRun]:
    """The log parsed without a horizon and with one."""
    ctx = LogContext(4, 2)
    return parse_log(log_format, text, ctx), parse_log(
        log_format, text, LogContext(4, 2, 1, horizon)
    )


def outcome(run: ParsedRun, horizon: int = 120) -> tuple:
    """What a horizon must not change: notes, malformed lines, reach, the windows."""
    return run.notes, run.malformed, run.marks[-1].step, windows(run.marks, horizon)


def test_late_lines_of_another_rank_past_the_horizon(
    tiny_limits: Callable[[int, int], None],
) -> None:
    """A second rank's lines that come in a block after the first rank's: those of intervals
    already folded are taken as repeats, without their (longer) times; the rest is as before."""
    tiny_limits(8, 4)
    rank0 = [(100 * k, 100 * k + 100, 10.0) for k in range(300)]
    rank1 = [(a, b, 12.0) for a, b, _ in rank0]
    full, kept = both("keras_time_history", keras_log(rank0 + rank1))
    assert outcome(kept) == outcome(full) == ([], 0, 30_000, outcome(full)[3])
    # up to the horizon the slower rank's times; past it, for the folded intervals, rank 0's
    assert full.marks[-1].time == pytest.approx(300 * 12.0)
    assert kept.marks[-1].time == pytest.approx(2 * 12.0 + 290 * 10.0 + 8 * 12.0)

    steps0 = [(10 * k, 100.0) for k in range(1, 300)]
    steps1 = [(step, 120.0) for step, _ in steps0]
    full, kept = both("gluonnlp", gluonnlp_log(steps0 + steps1))
    assert outcome(kept) == outcome(full)
    assert kept.marks[-1].time < full.marks[-1].time


def test_out_of_order_and_repeated_lines_within_pending_are_as_before(
    tiny_limits: Callable[[int, int], None],
) -> None:
    tiny_limits(8, 4)
    rows = [(100 * k, 100 * k + 100, 10.0 + k % 3) for k in range(200)]
    mixed = []
    for i in range(0, len(rows), 4):  # each block of 4 backwards, each line twice
        for row in reversed(rows[i : i + 4]):
            mixed += [row, (row[0], row[1], row[2] + 1)]
    full, kept = both("keras_time_history", keras_log(mixed))
    check_horizon(full, kept, 120, 0, "keras")
    steps = [(10 * k, 100.0 + k % 5) for k in range(1, 200)]
    mixed_steps = [s for i in range(0, len(steps), 4) for s in reversed(steps[i : i + 4])]
    full, kept = both("gluonnlp", gluonnlp_log(mixed_steps + mixed_steps))
    check_horizon(full, kept, 120, 0, "gluonnlp")


def test_gaps_past_the_horizon(tiny_limits: Callable[[int, int], None]) -> None:
    """A gap stops the chain, as before; a late line that fills it (another rank's, after the
    rest) joins the runs again; past RUNS runs apart, the furthest are dropped."""
    tiny_limits(4, 3)
    rows = [(100 * k, 100 * k + 100, 10.0) for k in range(100)]
    holes = [rows[k] for k in (30, 50, 70)]
    gappy = [row for row in rows if row not in holes]
    full, kept = both("keras_time_history", keras_log(gappy))
    assert outcome(kept) == outcome(full)
    assert full.notes == [
        "no throughput line covers steps 3000..3100; marks after step 3000 unused"
    ]
    full, kept = both("keras_time_history", keras_log(gappy + holes[:2]))
    assert outcome(kept) == outcome(full)
    assert full.notes == [
        "no throughput line covers steps 7000..7100; marks after step 7000 unused"
    ]
    # four runs apart: the last is dropped, so that filling every gap reaches where it began
    full, kept = both("keras_time_history", keras_log(gappy + holes))
    assert (full.notes, full.marks[-1].step) == ([], 10_000)
    assert kept.notes == [
        "intervals from step 7100 on not kept (more than 3 runs of them apart past the "
        "horizon); marks after step 7100 unused"
    ]
    assert windows(kept.marks, 120) == windows(full.marks, 120)

    steps = [(10 * k, 100.0) for k in range(1, 100)]
    missing = [steps[k] for k in (30, 50, 70)]
    gappy_steps = [step for step in steps if step not in missing]
    for late in ([], missing[:2]):
        full, kept = both("gluonnlp", gluonnlp_log(gappy_steps + late))
        assert outcome(kept) == outcome(full)
        assert full.notes  # the chain stops at a gap


def test_overlapping_lines_past_the_horizon(tiny_limits: Callable[[int, int], None]) -> None:
    """Rows that overlap the chain count as malformed, as before; a late one counts so even
    where it would have come first in the chain (the same start, an earlier end)."""
    tiny_limits(4, 3)
    rows = [(100 * k, 100 * k + 100, 10.0) for k in range(100)]
    for odd in [(50, 170, 1.0), (110, 150, 1.0), (5000, 5150, 1.0), (5000, 5100, 1.0)]:
        in_place = rows[:52] + [odd] + rows[52:]
        full, kept = both("keras_time_history", keras_log(in_place))
        assert outcome(kept) == outcome(full), odd
    full, kept = both("keras_time_history", keras_log([*rows, (5000, 5050, 1.0)]))
    malformed = "1 malformed or out-of-order Keras TimeHistory lines ignored"
    gap = "no throughput line covers steps 5050..5100; marks after step 5050 unused"
    assert (full.notes, full.malformed, full.marks[-1].step) == ([gap, malformed], 1, 5050)
    assert (kept.notes, kept.malformed, kept.marks[-1].step) == ([malformed], 1, 10_000)
    assert windows(kept.marks, 120) == windows(full.marks, 120)


def test_a_late_step_between_two_steps_shortens_the_interval(
    tiny_limits: Callable[[int, int], None],
) -> None:
    """gluon-nlp's interval is the smallest gap between steps: a late step between two folded
    ones shortens it as before (the chain then stops at the first wider gap), unless it comes
    past the runs kept (RUNS)."""
    tiny_limits(4, 3)
    steps = [(10 * k, 100.0) for k in range(1, 100)]
    first_gap = "no throughput line covers steps 10..15; marks after step 10 unused"
    full, kept = both("gluonnlp", gluonnlp_log([*steps, (555, 100.0)]))
    assert outcome(kept) == outcome(full)
    assert full.notes == [first_gap]
    # four runs apart (the last, from step 710, dropped); a late step in the third is seen,
    # one in the fourth is not
    gappy = [step for step in steps if step[0] not in (300, 500, 700)]
    full, kept = both("gluonnlp", gluonnlp_log([*gappy, (555, 100.0)]))
    assert outcome(kept) == outcome(full)
    assert full.notes == [first_gap]
    full, kept = both("gluonnlp", gluonnlp_log([*gappy, (905, 100.0)]))
    assert full.notes == [first_gap]
    assert kept.notes == ["no throughput line covers steps 290..300; marks after step 290 unused"]
    assert outcome(kept) == outcome(both("gluonnlp", gluonnlp_log(gappy))[0])


def test_a_horizon_bounds_a_clocked_log(tmp_path: Path) -> None:
    """Every line a mark: without a horizon the marks grow with the log, with one they do not."""
    small, big = tmp_path / "small.log", tmp_path / "big.log"
    for path, steps in ((small, 2000), (big, 8000)):
        path.write_text("\n".join(_absl(steps, 1)) + "\n", encoding="utf-8")
    ctx = LogContext(32, 8, horizon=120)

    def peak(path: Path) -> int:
        return peak_bytes(lambda: parse_chunks("absl_train_step", file_chunks(path, 1 << 14), ctx))

    assert peak(big) - peak(small) < 1 << 14
    assert len(parse_file(big, "absl_train_step", ctx).marks) == 121


@pytest.mark.parametrize("log_format", INTERVALS)
def test_a_horizon_bounds_an_interval_log(log_format: str, tmp_path: Path) -> None:
    """Two ranks' lines for every interval: with a horizon, 4000 intervals or 16000 hold the
    same (the rows of the last PENDING intervals, one run), without one four times as much."""
    small, big = tmp_path / "small.log", tmp_path / "big.log"
    for path, intervals in ((small, 4000), (big, 16000)):
        path.write_text("\n".join(MAKERS[log_format](intervals, 2)) + "\n", encoding="utf-8")

    def peak(path: Path, ctx: LogContext) -> int:
        return peak_bytes(lambda: parse_chunks(log_format, file_chunks(path, 1 << 14), ctx))

    ctx = LogContext(32, 8, horizon=120)
    assert peak(big, ctx) - peak(small, ctx) < 1 << 16  # (the pending dict's table: 37 kB)
    assert peak(big, LogContext(32, 8)) > 3 * peak(big, ctx)
    kept = parse_file(big, log_format, ctx)
    assert len(kept.marks) <= 120 // 10 + 3 and not kept.notes
    last = parse_file(big, log_format, LogContext(32, 8)).marks[-1]
    assert kept.marks[-1].step == last.step
    assert kept.marks[-1].time == pytest.approx(last.time, rel=1e-12)


# ------------------------------------------------------------------ memory


def noise_log(path: Path, kilobytes: int) -> None:
    """A log of chatter after a few hundred throughput lines of every format: what the parsers
    keep is the same whatever its size."""
    throughput = [line for make in MAKERS.values() for line in make(100, 1)]
    chatter = "\n".join(line for line in NOISE * 50 if "loss" not in line) + "\n"  # paddle's
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(throughput) + "\n")
        for _ in range(kilobytes * 1000 // len(chatter.encode())):
            out.write(chatter)


def peak_bytes(parse: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        parse()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("log_format", sorted(FORMATS))
def test_memory_does_not_grow_with_the_log(log_format: str, tmp_path: Path) -> None:
    small, big = tmp_path / "small.log", tmp_path / "big.log"
    noise_log(small, 1000)
    noise_log(big, 4000)
    chunk, ctx = 1 << 16, LogContext(32, 8)  # small chunks, so that small logs show it

    def peak(path: Path) -> int:
        return peak_bytes(lambda: parse_chunks(log_format, file_chunks(path, chunk), ctx))

    held = peak(big)
    assert held - peak(small) < chunk  # 3 MB more of log: not one chunk more held
    assert held < 1_000_000  # less than even the small log


def test_lines_are_read_as_they_are_needed() -> None:
    """A generator of 14 MB of lines is read lazily: at no point is the text held."""
    read = 0

    def lines() -> Iterator[str]:
        nonlocal read
        for i in range(100_000):
            read += len(NOISE[i % 5])
            yield f"{NOISE[i % 5]} {i}"
            if i % 1000 == 0:
                yield from _keras(1, 1)

    peak = peak_bytes(lambda: parse_lines("keras_time_history", lines(), LogContext(8)))
    assert read > 12_000_000 and peak < read / 2


# ------------------------------------------------------------------ the other readers


def test_events_and_fambench_files_read_as_their_text(fixtures: Path, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    lines = [{"event": "start", "framework": "x"}, {"event": "ready", "time": 1.0}]
    lines += [{"event": "step", "step": i, "time": 1 + i / 2, "samples": 4} for i in range(1, 9)]
    text = "\r\n".join(map(json.dumps, lines)) + "\nnot json\x0c{}\n"
    events.write_bytes(text.encode())
    assert parse_events_file(events) == parse_events(events.read_text())
    for log in sorted((fixtures / "fambench").glob("*.log")):
        assert read_bmlog(log) == parse_bmlog_lines(log.read_text().splitlines())
