"""Parsing big logs: MB/s and peak memory of every log format; prints figures only.

    python benchmarks/parse_logs.py                    # every format, a 200 MB log each
    python benchmarks/parse_logs.py --mb 100,400       # two sizes: does memory grow?
    python benchmarks/parse_logs.py --mb 100,400 --horizon 120   # as dlperf parse/run parse
    python benchmarks/parse_logs.py --formats keras_time_history --noise 0   # every line counts

For each format it writes a synthetic log of the asked size (lines shaped exactly like the
upstream's, each followed by `--noise` lines of the chatter real runs print: library warnings,
NCCL/cuDNN notices, progress bars, validation lines; formats that count steps per epoch start
a new epoch every 5000 steps), then parses it with `dlperf.logformats.parse_file` in a fresh
interpreter and reports the parse time, MB/s (MB = 10^6 bytes of log) by wall clock and by
CPU time, and that process's peak resident memory (`ru_maxrss`) beside the interpreter's own
before parsing. Target: >= 100 MB/s for every format. The text is never held, so the peak
grows only with what the throughput lines give (`marks`, `losses`; see dlperf.logformats):
with `--horizon` (the window's last step) the formats timed by a clock and the interval formats
(keras_time_history, gluonnlp) keep a bounded number, so their peak stays the same at any size.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

TARGET_MB_S = 100.0
EPOCH_STEPS = 5000  # formats that count steps per epoch restart here (ImageNet: 5005 at 256)
CONTEXTS = {  # (batch per device, devices per node, nodes) the logs were made with
    "absl_train_step": (32, 8, 1),
    "dllogger_pytorch": (256, 8, 1),
    "dllogger_tf1": (256, 8, 1),
    "gluonnlp": (32, 8, 1),
    "keras_time_history": (128, 8, 1),
    "mxnet_speed": (128, 8, 1),
    "oneflow_benchmark": (128, 8, 1),
    "paddle": (128, 8, 1),
    "pytorch_examples": (256, 1, 1),
}

# ------------------------------------------------------------------ noise real runs print

TF_NOISE = (
    "W0826 15:12:11.285453 140405777909504 callbacks.py:328] Callbacks method "
    "`on_train_batch_end` is slow compared to the batch time (batch time: 0.3966s vs "
    "`on_train_batch_end` time: 1.7075s). Check your callbacks.",
    "WARNING:tensorflow:Callbacks method `on_train_batch_end` is slow compared to the batch "
    "time (batch time: 0.3966s vs `on_train_batch_end` time: 1.7075s). Check your callbacks.",
    "2020-08-26 17:43:10.813717: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1402] "
    "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 14753 MB "
    "memory) -> physical GPU (device: 0, name: Tesla V100-SXM2-16GB, pci bus id: 0000:1a:00.0)",
    " 1200/5005 [======>.......................] - ETA: 25:01 - loss: 7.0312 - accuracy: 0.0012"
    " - top_5_accuracy: 0.0061",
    "I0826 17:43:11.705436 139979460507392 dataset_factory.py:358] Using TFRecords to load data.",
    "2020-08-26 17:44:02.118201: I tensorflow/core/profiler/lib/profiler_session.cc:159] "
    "Profiler session started.",
)
TORCH_NOISE = (
    "node0:12345:12401 [0] NCCL INFO Channel 00 : 0[1a000] -> 1[1b000] via P2P/IPC",
    "/opt/conda/lib/python3.6/site-packages/torch/optim/lr_scheduler.py:122: UserWarning: "
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
    "later, you should call them in the opposite order.",
    '  warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. "',
    "node0:12345:12401 [0] NCCL INFO Ring 00 : 0[1a000] -> 1[1b000] [receive] via NET/IB/0",
    "Test: [ 10/196]\tTime  0.123 ( 0.456)\tLoss 6.9062e+00 (6.9101e+00)\tAcc@1   0.00 "
    "(  0.10)\tAcc@5   0.78 (  0.51)",
)
MXNET_NOISE = (
    "[14:29:13] src/operator/nn/./cudnn/./cudnn_algoreg-inl.h:97: Running performance tests to "
    "find the best convolution algorithm, this can take a while... (set the environment "
    "variable MXNET_CUDNN_AUTOTUNE_DEFAULT to 0 to disable)",
    "[14:29:14] src/kvstore/./comm.h:757: only 32 out of 56 GPU pairs are enabled direct access.",
    "INFO:root:Epoch[0] Train-accuracy=0.001953",
    "INFO:root:Epoch[0] Time cost=1234.567",
    "INFO:root:Epoch[0] Validation-accuracy=0.004883",
)
GLOG_NOISE = (
    "I0820 12:00:00.123456 12345 parallel_executor.cc:440] The Program will be executed on "
    "CUDA using ParallelExecutor, 8 cards are used, so 8 programs are executed in parallel.",
    "W0820 12:00:00.223456 12345 device_context.cc:252] Please NOTE: device: 0, CUDA Capability: "
    "70, Driver API Version: 10.2, Runtime API Version: 10.0",
    "I0820 12:00:01.000000 12345 build_strategy.cc:365] SeqOnlyAllReduceOps:0, num_trainers:1",
    "validation: epoch 0, iter 100, top_1: 0.001, top_k: 0.005, samples/s: 9000.000 1597933999.0",
    "feed_queue size: 70, current learning_rate: 0.0001",
)


def clock(start: datetime, seconds_per_step: float) -> Callable[[int], datetime]:
    return lambda step: start + timedelta(seconds=seconds_per_step * step)


# ------------------------------------------------------------------ throughput lines


def keras_time_history() -> Iterator[str]:
    at = clock(datetime(2020, 8, 26, 15, 12), 0.395)
    for k in itertools.count():
        rate = 2600.0 + (k % 7)
        line = (
            f"keras_utils.py:133] TimeHistory: {100 * 1024 / rate:.2f} seconds, {rate:.2f} "
            f"examples/second between steps {100 * k} and {100 * k + 100}"
        )
        yield f"I{at(100 * k + 100):%m%d %H:%M:%S.%f} 140405777909504 {line}"
        yield f"INFO:tensorflow:{line.split('] ', 1)[1]}"  # tf logging prints it again


def absl_train_step() -> Iterator[str]:
    at = clock(datetime(2020, 12, 31, 23, 0), 0.41)  # crosses New Year's Eve
    for step in itertools.count(1):
        yield (
            f"I{at(step):%m%d %H:%M:%S.%f} 140405777909504 model_training_utils.py:505] "
            f"Train Step: {step}/1000000  / loss = {10.9 - step * 1e-6:.7f}  lr = 0.0001"
        )


def dllogger_pytorch() -> Iterator[str]:
    at = clock(datetime(2020, 9, 15, 14, 29), 0.25)
    yield f"DLL {at(0)} - PARAMETER data : /data/image  arch : resnet50  world_size : 8 "
    for n in itertools.count():
        epoch, i = divmod(n, EPOCH_STEPS)
        yield (
            f"DLL {at(n)} - Epoch: {epoch} Iteration: {i + 1}  train.loss : {7.09 - i * 1e-6:.5f}"
            f"  train.total_ips : {8192.0 + i % 13:.2f} img/s  train.lr : 0.256  "
            f"train.compute_ips : 8301.11 img/s  train.data_time : 0.00412 s"
        )


def dllogger_tf1() -> Iterator[str]:
    at = clock(datetime(2020, 6, 20, 10), 0.2)
    for s in itertools.count(1):
        yield (
            f"DLL {at(s)} - ({s // 5005}, {s}) imgs_per_sec : {10240.0 + s % 11:.1f} "
            f"cross_entropy : 6.9 l2_loss : 0.3 total_loss : 7.2 learning_rate : 0.001"
        )


def gluonnlp() -> Iterator[str]:
    for step in itertools.count(10, 10):
        for rank in range(2):  # every Horovod rank prints the step
            ms = 213.4 + rank
            yield (
                f"INFO:root:[step {step}]\tmlm_loss=7.12345\tnsp_loss= 0.69\t"
                f"throughput=2.8K tks/s\tlr=0.0000250 time={ms * 10 / 1000:.2f}, "
                f"latency={ms:.1f} ms/batch"
            )


def mxnet_speed() -> Iterator[str]:
    for n in itertools.count(0, 20):
        epoch, a = divmod(n, EPOCH_STEPS)
        yield (
            f"INFO:root:Epoch[{epoch}] Batch [{a}-{a + 20}]\tSpeed: {1234.56 + a % 7:.2f} "
            "samples/sec\taccuracy=0.001953\ttop_k_accuracy_5=0.009766"
        )


def oneflow_benchmark() -> Iterator[str]:
    for n in itertools.count(0, 20):
        epoch, it = divmod(n, EPOCH_STEPS)
        yield (
            f"train: epoch {epoch}, iter {it + 20}, loss: 7.087004, top_1: 0.000000, "
            f"top_k: 0.000000, samples/s: 3988.891 {1597933942.9863544 + n * 0.25:.7f}"
        )


def paddle() -> Iterator[str]:
    for n in itertools.count():
        epoch, b = divmod(n, EPOCH_STEPS)
        yield (
            f"2020-08-20 10:{n // 60 % 60:02d}:{n % 60:02d},000-INFO: [Pass {epoch}, train "
            f"batch {b}] \tloss 6.90421, acc1 0.00000, acc5 0.00781, lr 0.00100, elapse 0.2500 sec"
        )


def pytorch_examples() -> Iterator[str]:
    for epoch in itertools.count():  # later epochs are read, not used
        for i in range(EPOCH_STEPS):
            yield (
                f"Epoch: [{epoch}][{i:4d}/{EPOCH_STEPS}]\tTime  0.575 ( 0.575)\t"
                "Data  0.106 ( 0.088)\tLoss 7.0139e+00 (7.0234e+00)\tAcc@1   0.00 (  0.10)\t"
                "Acc@5   0.78 (  0.51)"
            )


FORMATS: dict[str, tuple[Callable[[], Iterator[str]], tuple[str, ...]]] = {
    "absl_train_step": (absl_train_step, TF_NOISE),
    "dllogger_pytorch": (dllogger_pytorch, TORCH_NOISE),
    "dllogger_tf1": (dllogger_tf1, TF_NOISE),
    "gluonnlp": (gluonnlp, MXNET_NOISE),
    "keras_time_history": (keras_time_history, TF_NOISE),
    "mxnet_speed": (mxnet_speed, MXNET_NOISE),
    "oneflow_benchmark": (oneflow_benchmark, GLOG_NOISE),
    "paddle": (paddle, GLOG_NOISE),
    "pytorch_examples": (pytorch_examples, TORCH_NOISE),
}


def write_log(path: Path, log_format: str, size: int, noise: int) -> int:
    """A log of about `size` bytes: each throughput line, then `noise` lines of chatter."""
    make, pool = FORMATS[log_format]
    rng = random.Random(0)
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        block: list[str] = []
        for line in make():
            block.append(line)
            block.extend(rng.choice(pool) for _ in range(noise))
            if len(block) >= 4096:
                text = "\n".join(block) + "\n"
                out.write(text)
                written += len(text)
                block = []
                if written >= size:
                    break
    return written


# ------------------------------------------------------------------ measuring

CHILD = """
import json, resource, sys, time
from dlperf.logformats import LogContext, parse_file
path, log_format, ctx = sys.argv[1], sys.argv[2], LogContext(*json.loads(sys.argv[3]))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
wall, cpu = time.perf_counter(), time.process_time()
run = parse_file(path, log_format, ctx)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"wall": wall, "cpu": cpu, "before_kb": before, "peak_kb": peak,
                  "marks": len(run.marks), "losses": len(run.losses)}))
"""


def measure(path: Path, log_format: str, horizon: int | None) -> dict:
    """Parse in a fresh interpreter, so that its peak memory is this parse's alone."""
    ctx = json.dumps([*CONTEXTS[log_format], horizon])
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), log_format, ctx],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", default="200", help="log size(s) in MB, comma-separated")
    parser.add_argument("--noise", type=int, default=4, help="noise lines per throughput line")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated")
    parser.add_argument("--dir", default=None, help="where to write the logs (default: a temp)")
    parser.add_argument(
        "--horizon",
        type=int,
        default=None,
        help="the window's last step, as dlperf parse and run pass it (e.g. 120: skip 20 + "
        "measure 100); default: none, every mark kept",
    )
    args = parser.parse_args()
    sizes = [float(s) for s in args.mb.split(",")]
    formats = args.formats.split(",")
    print(
        f"{args.noise} noise lines per throughput line; horizon {args.horizon}; MB = 10^6 bytes; "
        "MB/s by wall clock and by the parse's CPU time (the machine may be shared); RSS in MiB: "
        "the interpreter's before parsing, and the peak"
    )
    header = (
        f"{'format':<19} {'MB':>6} {'wall s':>7} {'MB/s':>6} {'cpu MB/s':>8} {'RSS before':>10} "
        f"{'peak RSS':>8} {'marks':>8} {'losses':>8}  >= {TARGET_MB_S:g} MB/s"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for log_format in formats:
            for mb in sizes:
                path = Path(tmp) / f"{log_format}.log"
                size = write_log(path, log_format, int(mb * 1e6), args.noise)
                got = measure(path, log_format, args.horizon)
                path.unlink()
                rate, cpu_rate = size / 1e6 / got["wall"], size / 1e6 / got["cpu"]
                meets = "yes" if rate >= TARGET_MB_S else "NO"
                if rate < TARGET_MB_S <= cpu_rate:
                    meets = "by cpu time"
                print(
                    f"{log_format:<19} {size / 1e6:>6.0f} {got['wall']:>7.2f} {rate:>6.0f} "
                    f"{cpu_rate:>8.0f} {got['before_kb'] / 1024:>10.1f} "
                    f"{got['peak_kb'] / 1024:>8.1f} {got['marks']:>8} {got['losses']:>8}  {meets}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
