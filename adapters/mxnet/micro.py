"""MXNet microbenchmarks for dlperf (implementation kind "micro"), after FAMBench's DLRM ubench.

  linear        a stack of gluon nn.Dense layers (ReLU between them), imperative: forward +
                backward + SGD update with --mode train, forward only with --mode infer.
                Reported in TF/s.
  embeddingbag  unsupported: MXNet 1.9 has no embedding-bag op (a lookup fused with the sum over
                each bag). Its operator registry (MXListAllOpNames) holds only lookups without
                pooling: Embedding, _contrib_SparseEmbedding (row_sparse gradient),
                _npx_embedding, _contrib_quantized_embedding; gluon has nn.Embedding and
                contrib.nn.SparseEmbedding, nothing with a combiner. (A CSR batch times the table,
                sparse.dot, gives the same sums, but it is a sparse matrix product, not an
                embedding bag.) The script emits {"event": "unsupported"} rather than time
                another op under the EmbeddingBag name.

MXNet's engine is asynchronous even on a CPU: each step's timestamp is taken only after
`mx.nd.waitall()` (forward, backward and the update) and reading the loss back. Runs inside the
adapter's isolated env and imports only MXNet, numpy and the standard library. Events contract
as for workload.py: JSON lines to the file named by $DLPERF_EVENTS ("start", "ready", one "step"
per iteration, "end", or "unsupported"); a human-readable log goes to stdout.

Counting (the host turns samples/s into TF/s = flops_per_sample * samples/s / 1e12 and GB/s =
bytes_per_sample * samples/s / 1e9):
  linear        flops_per_sample = 2 * (in*out + (layers-1)*out*out) forward, x3 when training
                (backward = activation and weight gradients, 2 GEMMs per layer), as FAMBench's
                "Forward 2x and Backward 4x". bytes_per_sample = 0: the weights are shared by
                the whole batch, so a per-sample byte count would depend on the batch size.
  embeddingbag  (as the other frameworks' micro.py, for --describe) bytes_per_sample =
                bag_size * dim * element size, x3 when training; flops_per_sample = 0.

Defaults:
  linear        1024 -> 1024, 4 layers: FAMBench's linear_A GEMM shape (1024-wide, the
                batch-128..4096 rows of mlp_A) at a depth a 2-core CPU trains at batch 256 in
                well under 0.5 s per step (6.4 GFLOP); depth only repeats the same GEMM.
                FAMBench's own linear_A depth is --layers 20 (input, 18 hidden, output).
  embeddingbag  4,800,000 rows x 56, bags of 34: FAMBench's emb dataset "B" / "small".
The linear input and labels are made once.

AMP: float16 through mxnet.contrib.amp (with dynamic loss scaling) on CUDA. On the CPU, bf16
(amp.init(target_dtype="bfloat16")) needs oneDNN bf16 kernels: a bf16 FullyConnected is probed
first, and where it fails the run is reported unsupported with MXNet's error.

--threads sets OMP_NUM_THREADS, which MXNet reads when it starts: before `import mxnet`.

Usage:
    python micro.py --model linear --batch-size 256 --steps 30 [--mode infer] [--precision amp]
    python micro.py --model linear --describe   # one JSON line: params, FLOPs, bytes; no run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO


def _threads_from_argv(argv: list[str]) -> str | None:
    """--threads N (or --threads=N) from the command line, read before MXNet starts."""
    for k, arg in enumerate(argv):
        if arg == "--threads" and k + 1 < len(argv):
            return argv[k + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return None


if (_threads := _threads_from_argv(sys.argv[1:])) and _threads.isdigit():
    os.environ["OMP_NUM_THREADS"] = _threads

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

# Counting and host facts shared by every framework's micro.py (standard library only).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "_shared"))
from micro_common import (  # noqa: E402
    counts,
    cpu_name,
    cpu_native_bf16,
    parse_args,
    shape_text,
)

LR = 0.01  # FAMBench's linear ubench SGD learning rate


# --------------------------------------------------------------------------------------------
# Counting (pure functions of the arguments)
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Host facts
# --------------------------------------------------------------------------------------------


def registered_ops() -> list[str]:
    import ctypes

    from mxnet.base import _LIB, check_call, py_str

    names = ctypes.POINTER(ctypes.c_char_p)()
    size = ctypes.c_uint()
    check_call(_LIB.MXListAllOpNames(ctypes.byref(size), ctypes.byref(names)))
    return [py_str(names[k]) for k in range(size.value)]


def embeddingbag_missing() -> str:
    """Why embeddingbag cannot run: the evidence, read from this build's operator registry."""
    found: list[str] = []
    with contextlib.suppress(Exception):
        found = sorted(
            op for op in registered_ops()
            if "embedding" in op.lower() and not op.startswith("_backward")
        )  # fmt: skip
    return (
        f"mxnet {mx.__version__} has no embedding-bag op (lookup fused with a per-bag sum): its "
        f"embedding operators ({', '.join(found) or 'Embedding'}) look rows up without pooling "
        "and gluon has no EmbeddingBag. Emulating it with other ops (a lookup plus a sum, or a "
        "CSR sparse.dot) would not be an EmbeddingBag measurement"
    )


def cpu_amp_problem() -> str | None:
    """None if a bf16 FullyConnected runs on this CPU (oneDNN bf16 kernels), else why not."""
    bf16 = np.dtype([("bfloat16", np.uint16)])  # MXNet's spelling of bfloat16
    try:
        x = mx.nd.ones((2, 8)).astype(bf16)
        w = mx.nd.ones((8, 8)).astype(bf16)
        mx.nd.FullyConnected(x, w, no_bias=True, num_hidden=8).wait_to_read()
    except Exception as exc:  # noqa: BLE001 - any failure means bf16 does not run here
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (
            f"mxnet {mx.__version__}: CPU AMP is bf16 (amp.init(target_dtype='bfloat16')), and "
            f"a bf16 FullyConnected fails on this wheel and CPU: {first}"
        )[:500]
    return None


# --------------------------------------------------------------------------------------------
# Step: returns step() -> the loss NDArray (or None), not yet waited for
# --------------------------------------------------------------------------------------------


def linear_step(
    args: argparse.Namespace, ctx: mx.Context, amp
) -> Callable[[], mx.nd.NDArray | None]:
    mx.random.seed(args.seed)
    net = nn.Sequential()
    in_units = args.in_features
    for k in range(args.layers):
        last = k == args.layers - 1
        net.add(nn.Dense(args.out_features, activation=None if last else "relu",
                         in_units=in_units, flatten=False))  # fmt: skip
        in_units = args.out_features
    net.initialize(mx.init.Xavier(), ctx=ctx)
    rng = np.random.default_rng(args.seed)
    x = mx.nd.array(rng.standard_normal((args.batch_size, args.in_features)), ctx=ctx)
    labels = mx.nd.array(rng.integers(0, args.out_features, args.batch_size), ctx=ctx)

    if args.mode == "infer":

        def infer() -> None:
            net(x)  # outside autograd.record(): inference

        return infer

    ce = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": LR})
    if amp is not None:
        amp.init_trainer(trainer)

    def train() -> mx.nd.NDArray:
        with autograd.record():
            loss = ce(net(x).astype("float32"), labels).mean()
            if amp is not None:
                with amp.scale_loss(loss, trainer) as scaled:
                    autograd.backward(scaled)
        if amp is None:
            loss.backward()
        trainer.step(1)  # the loss is a batch mean already
        return loss

    return train


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    t_launch = time.monotonic()
    args = parse_args(argv, __doc__, threads_help="OMP_NUM_THREADS (set before MXNet starts)")

    if args.describe:
        info = {**counts(args), "framework_version": mx.__version__}
        if args.model == "embeddingbag":
            info["unsupported"] = embeddingbag_missing()
        print(json.dumps(info), flush=True)
        return 0

    if args.device == "cuda" and mx.context.num_gpus() == 0:
        print(f"error: --device cuda asked for, but MXNet {mx.__version__} sees no GPU",
              file=sys.stderr, flush=True)  # fmt: skip
        return 2

    path = os.environ.get("DLPERF_EVENTS", "")
    events: TextIO | None = open(path, "a", buffering=1) if path else None  # noqa: SIM115

    def emit(**event: object) -> None:
        if events is not None:
            events.write(json.dumps(event) + "\n")
            events.flush()

    def unsupported(reason: str) -> int:
        # Exit 0: the run did what was asked, which is to say it cannot be done here.
        emit(event="unsupported", reason=reason)
        print(f"unsupported: {reason}", flush=True)
        if events is not None:
            events.close()
        return 0

    if args.model == "embeddingbag":
        return unsupported(embeddingbag_missing())
    on_gpu = args.device == "cuda"
    ctx = mx.gpu(0) if on_gpu else mx.cpu()
    amp, amp_dtype = None, None
    if args.precision == "amp":
        amp_dtype = "float16" if on_gpu else "bfloat16"
        problem = None if on_gpu else cpu_amp_problem()
        if problem:
            return unsupported(problem)
        from mxnet.contrib import amp

        amp.init(target_dtype=amp_dtype)

    step = linear_step(args, ctx, amp)
    op = "mxnet.gluon.nn.Dense"
    info = counts(args)
    device_name = cpu_name() if not on_gpu else f"GPU {ctx.device_id}"
    omp = os.environ.get("OMP_NUM_THREADS", "")
    threads = int(omp) if omp.isdigit() else None
    emit(
        event="start",
        framework="mxnet",
        framework_version=mx.__version__,
        python=platform.python_version(),
        device=args.device,
        device_name=device_name,
        model=args.model,
        impl="micro",
        op=op,
        mode=args.mode,
        precision=args.precision,
        amp_dtype=amp_dtype,
        batch_size=args.batch_size,
        threads=threads,
        shape=shape_text(args),
        cpu_native_bf16=None if on_gpu else cpu_native_bf16(),
        **info,
    )
    print(
        f"mxnet {mx.__version__} micro {args.model} ({op}), {shape_text(args)}: "
        f"{info['params']:,} params, {args.mode}, batch {args.batch_size}, "
        f"{args.precision}{f' ({amp_dtype})' if amp_dtype else ''}, {args.device} "
        f"({device_name}), {threads or 'default'} threads, {args.steps} steps, "
        f"reported in {info['unit']}",
        flush=True,
    )

    mx.nd.waitall()
    ready = time.monotonic()
    emit(event="ready", time=ready)
    print(f"ready after {ready - t_launch:.2f}s (import, build, data)", flush=True)

    prev = ready
    for i in range(1, args.steps + 1):
        loss_nd = step()
        # The engine is asynchronous: wait for the whole step (update included), then read.
        mx.nd.waitall()
        loss = float(loss_nd.asscalar()) if loss_nd is not None else None
        now = time.monotonic()
        event: dict[str, object] = {"step": i, "time": now, "samples": args.batch_size}
        if loss is not None:
            event["loss"] = loss if math.isfinite(loss) else None
        emit(event="step", **event)
        shown = f" loss {loss:.4f}" if loss is not None else ""
        print(f"step {i}/{args.steps}{shown} time {now - prev:.3f}s", flush=True)
        prev = now

    end = time.monotonic()
    emit(event="end", time=end)
    if args.steps:
        print(f"done: {args.steps} steps in {end - ready:.2f}s", flush=True)
    if events is not None:
        events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
