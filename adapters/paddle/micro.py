"""PaddlePaddle microbenchmarks for dlperf (implementation kind "micro"), after FAMBench ubench.

  linear        a stack of paddle.nn.Linear layers (ReLU between them), dygraph: forward +
                backward + SGD update with --mode train, forward only with --mode infer.
                Reported in TF/s.
  embeddingbag  unsupported: PaddlePaddle has no embedding-bag op (a lookup fused with the sum
                over each bag). paddle.nn / paddle.nn.functional have no EmbeddingBag or
                embedding_bag; the op registry of Paddle 3.x holds only plain lookups (embedding,
                lookup_table, lookup_table_v2, c_embedding, sparse_weight_embedding) and
                separate poolings (segment_pool, sequence_pool). The fluid-era fused op
                (fused_embedding_seq_pool, CPU only, LoD input) is gone from the registry. The
                script emits {"event": "unsupported"} rather than time a lookup plus a
                segment_sum under the EmbeddingBag name.

Runs inside the adapter's isolated env and imports only paddle, numpy, the standard library and
the stdlib-only workload kit in adapters/_shared (workload_kit, model_math). Events contract as
for workload.py: JSON lines to the file named by $DLPERF_EVENTS ("start", "ready", one "step"
per iteration, "end", or "unsupported"); a human-readable log goes to stdout.

Counting and defaults are the same in every framework: see the microbenchmark section of
adapters/_shared/model_math.py (linear in TF/s, 3 x the forward FLOPs when training;
embeddingbag in GB/s, the rows read, 3 x when training; FAMBench's linear_A and emb "B" shapes).
The linear input and labels are made once.

AMP: paddle.amp.auto_cast (O1) to bfloat16 on the CPU, float16 with GradScaler on CUDA; a dtype
that auto_cast does not really apply here (a probe Linear still computes in fp32) is reported
as unsupported, never run as fp32 labelled amp.

Usage:
    python micro.py --model linear --batch-size 256 --steps 30 [--mode infer] [--precision amp]
    python micro.py --model linear --describe   # one JSON line: params, FLOPs, bytes; no run
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import workload_kit as kit  # noqa: E402

LR = 0.01  # FAMBench's linear ubench SGD learning rate


def embeddingbag_missing() -> str:
    """Why embeddingbag cannot run: the evidence, checked against this build."""
    ops: set[str] = set()
    with contextlib.suppress(Exception):
        ops = set(paddle.base.core._get_all_register_op_kernels("all"))
    fused = "fused_embedding_seq_pool"
    return (
        f"paddle {paddle.__version__} has no embedding-bag op (lookup fused with a per-bag sum): "
        "no paddle.nn.EmbeddingBag or paddle.nn.functional.embedding_bag, and the op registry "
        f"{'has no ' + fused if fused not in ops else 'has ' + fused + ' only as a legacy op'}; "
        "only plain lookups (embedding, lookup_table_v2) and separate poolings (segment_pool, "
        "sequence_pool). Emulating it with other ops would not be an EmbeddingBag measurement"
    )


def amp_problem(amp_dtype: str) -> str | None:
    """None if paddle.amp.auto_cast really computes a Linear in `amp_dtype` here, else why not.
    (On the CPU Paddle 3.x's auto_cast can be a no-op with a warning: fp32 must not be labelled
    as amp.)"""
    try:
        layer = nn.Linear(8, 8)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with paddle.amp.auto_cast(level="O1", dtype=amp_dtype):
                out = layer(paddle.ones([2, 8]))
        got = str(out.dtype).replace("paddle.", "")
    except Exception as exc:  # noqa: BLE001 - any failure means the path does not work here
        return f"paddle.amp.auto_cast(dtype={amp_dtype!r}) failed: {type(exc).__name__}: {exc}"
    if got != amp_dtype:
        said = "; ".join(str(w.message).strip() for w in caught if "amp" in str(w.message))
        return (
            f"paddle {paddle.__version__}: paddle.amp.auto_cast(level='O1', dtype={amp_dtype!r}) "
            f"has no effect on {paddle.get_device()} (a Linear still computes in {got})"
            + (f": {said}" if said else "")
        )
    return None


# --------------------------------------------------------------------------------------------
# Step: returns step() -> the loss tensor (or None), not yet read back
# --------------------------------------------------------------------------------------------


def linear_step(
    args: argparse.Namespace, amp_dtype: str | None, on_gpu: bool
) -> Callable[[], paddle.Tensor | None]:
    paddle.seed(args.seed)
    sizes = [args.in_features] + [args.out_features] * args.layers
    layers: list[nn.Layer] = []
    for k in range(args.layers):
        if k:
            layers.append(nn.ReLU())
        layers.append(nn.Linear(sizes[k], sizes[k + 1]))
    model = nn.Sequential(*layers)
    rng = np.random.default_rng(args.seed)
    x = paddle.to_tensor(rng.standard_normal((args.batch_size, args.in_features), np.float32))
    labels = paddle.to_tensor(rng.integers(0, args.out_features, args.batch_size))

    def autocast() -> contextlib.AbstractContextManager:
        if amp_dtype is None:
            return contextlib.nullcontext()
        return paddle.amp.auto_cast(level="O1", dtype=amp_dtype)

    if args.mode == "infer":
        model.eval()

        def infer() -> None:
            with paddle.no_grad(), autocast():
                model(x)

        return infer

    model.train()
    optimizer = paddle.optimizer.SGD(learning_rate=LR, parameters=model.parameters())
    # fp16 needs loss scaling to keep small gradients from underflowing; bf16 does not.
    scaler = paddle.amp.GradScaler(init_loss_scaling=2.0**16) if amp_dtype and on_gpu else None

    def train() -> paddle.Tensor:
        optimizer.clear_grad(set_to_zero=False)
        with autocast():
            loss = F.cross_entropy(model(x).astype("float32"), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss

    return train


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    t_launch = time.monotonic()
    args = kit.parse_micro_args(argv, __doc__, threads_help="CPU math library threads")
    if args.threads:
        paddle.base.core.set_num_threads(args.threads)

    if args.describe:
        extra = {"unsupported": embeddingbag_missing()} if args.model == "embeddingbag" else {}
        return kit.describe(
            **model_math.micro_counts(args), framework_version=paddle.__version__, **extra
        )

    on_gpu = args.device == "cuda"
    if on_gpu and not (paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0):
        return kit.no_device(
            f"paddle has no usable CUDA device (paddle {paddle.__version__}, compiled with "
            f"CUDA: {paddle.is_compiled_with_cuda()})"
        )
    paddle.set_device("gpu:0" if on_gpu else "cpu")
    if on_gpu:  # honest fp32: no TF32 tensor-core math for the GEMMs
        with contextlib.suppress(Exception):
            paddle.set_flags({"FLAGS_enable_cublas_tensor_op_math": False})
    events = kit.Events()

    if args.model == "embeddingbag":
        return events.unsupported(embeddingbag_missing())
    amp_dtype = None
    if args.precision == "amp":
        amp_dtype = "float16" if on_gpu else "bfloat16"
        problem = amp_problem(amp_dtype)
        if problem:
            return events.unsupported(problem)

    linear = linear_step(args, amp_dtype, on_gpu)
    op = "paddle.nn.Linear"
    info = model_math.micro_counts(args)
    device_name = paddle.device.cuda.get_device_name() if on_gpu else kit.cpu_name()
    threads = args.threads or kit.omp_threads()
    events.start(
        "paddle",
        paddle.__version__,
        args,
        device=args.device,
        device_name=device_name,
        impl="micro",
        op=op,
        amp_dtype=amp_dtype,
        threads=threads,
        shape=model_math.micro_shape_text(args),
        tf32=False if on_gpu else None,
        cpu_native_bf16=None if on_gpu else kit.cpu_native_bf16(),
        **info,
    )
    print(
        kit.micro_start_line(f"paddle {paddle.__version__}", args, op=op, info=info,
                             shape=model_math.micro_shape_text(args), amp_dtype=amp_dtype,
                             device=args.device, device_name=device_name, threads=threads),
        flush=True,
    )  # fmt: skip
    kit.warn_if_bf16_emulated(amp_dtype)

    def sync() -> None:
        if on_gpu:
            paddle.device.synchronize()

    def step() -> float | None:
        loss = linear()
        sync()  # wait for the device (the update included), then read the loss back
        return float(loss) if loss is not None else None

    sync()
    ready = kit.run_steps(events, steps=args.steps, samples=args.batch_size, step=step,
                          t_launch=t_launch, set_up="import, build, data")  # fmt: skip
    return kit.finish(events, args, ready)


if __name__ == "__main__":
    sys.exit(main())
