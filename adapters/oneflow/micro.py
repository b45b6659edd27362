"""OneFlow microbenchmarks for dlperf (implementation kind "micro"), after FAMBench's DLRM ubench.

  linear        a stack of oneflow.nn.Linear layers (ReLU between them), eager: forward +
                backward + SGD update with --mode train, forward only with --mode infer.
                Reported in TF/s.
  embeddingbag  unsupported: OneFlow 0.9 has no embedding-bag op (a lookup fused with the sum
                over each bag). oneflow.nn has only Embedding, oneflow.nn.functional only
                embedding; the OneEmbedding API (oneflow.one_embedding.MultiTableEmbedding,
                _C.one_embedding_fused_lookup) looks ids up and returns one row per id, with no
                combiner, and is built for nn.Graph on CUDA. The script emits
                {"event": "unsupported"} rather than time a lookup plus a sum under the
                EmbeddingBag name.

OneFlow's eager engine is asynchronous (ops are queued to a virtual machine): each step's
timestamp is taken only after the engine has drained (eager Sync) and the loss has been read
back. Runs inside the adapter's isolated env and imports only oneflow, numpy and the standard
library. Events contract as for workload.py: JSON lines to the file named by $DLPERF_EVENTS
("start", "ready", one "step" per iteration, "end", or "unsupported"); a human-readable log goes
to stdout. The OneFlow 0.9 wheel needs the cuDNN/cuBLAS pip wheels' lib folders on
LD_LIBRARY_PATH even on the CPU (the adapter's lib_dirs).

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

AMP: oneflow.autocast to bfloat16 on the CPU, float16 (with eager dynamic loss scaling when
training) on CUDA; probed first, and an autocast that fails or does not apply is reported
unsupported, never run as fp32 labelled amp.

--threads sets OMP_NUM_THREADS before `import oneflow` and oneflow.set_num_threads.

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
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO


def _threads_from_argv(argv: list[str]) -> str | None:
    """--threads N (or --threads=N) from the command line, read before OneFlow starts."""
    for k, arg in enumerate(argv):
        if arg == "--threads" and k + 1 < len(argv):
            return argv[k + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return None


if (_threads := _threads_from_argv(sys.argv[1:])) and _threads.isdigit():
    os.environ["OMP_NUM_THREADS"] = _threads

import numpy as np  # noqa: E402
import oneflow as flow  # noqa: E402
import oneflow.nn.functional as F  # noqa: E402
from oneflow import nn  # noqa: E402

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


def embeddingbag_missing() -> str:
    """Why embeddingbag cannot run: the evidence, checked against this build."""
    lookups = sorted(a for a in dir(flow._C) if a == "embedding" or a.endswith("_lookup"))
    return (
        f"oneflow {flow.__version__} has no embedding-bag op (lookup fused with a per-bag sum): "
        "no oneflow.nn.EmbeddingBag or nn.functional.embedding_bag; its embedding ops "
        f"({', '.join(lookups) or 'embedding'}) return one row per id without pooling "
        "(OneEmbedding is a CUDA nn.Graph lookup, no combiner). Emulating it with other ops "
        "would not be an EmbeddingBag measurement"
    )[:800]


def amp_problem(device: str) -> str | None:
    """Why autocast cannot run on `device` with this OneFlow build, or None if it can.

    CUDA: fp16 autocast. CPU: bf16 autocast, probed with a tiny Linear whose output must come
    out in bfloat16 (a no-op autocast would silently run fp32 labelled as amp)."""
    dtype = flow.float16 if device == "cuda" else flow.bfloat16
    if not hasattr(flow, "autocast"):
        return f"oneflow {flow.__version__} has no oneflow.autocast"
    try:
        a = flow.randn(4, 4, device=device, requires_grad=True)
        lin = nn.Linear(4, 4).to(device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with flow.autocast(device, dtype=dtype):
                out = lin(a)
        got = out.dtype
        out.float().sum().backward()
        float(a.grad.sum().numpy())
    except Exception as exc:  # noqa: BLE001 - any failure means autocast does not work here
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return (
            f"oneflow {flow.__version__}: {dtype} autocast on {device} fails: "
            f"{type(exc).__name__}: {first}"
        )[:500]
    if got != dtype:
        said = "; ".join(str(w.message) for w in caught)
        return (
            f"oneflow {flow.__version__}: autocast({device!r}, dtype={dtype}) is a no-op here "
            f"(a Linear under it returns {got}{'; oneflow says: ' + said if said else ''}); "
            "refusing to label fp32 as amp"
        )[:500]
    return None


class DynamicLossScaler:
    """Eager fp16 loss scaling (OneFlow 0.9's flow.amp.GradScaler only configures nn.Graph):
    the torch.amp.GradScaler recipe. Unscale the gradients, skip the update and halve the scale
    on inf/NaN, double the scale after 2000 clean steps."""

    def __init__(self, model: nn.Module, init_scale: float = 2.0**16) -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.scale = init_scale
        self.clean_steps = 0

    def step(self, optimizer: Any) -> None:
        grads = [p.grad for p in self.params if p.grad is not None]
        for g in grads:
            g.mul_(1.0 / self.scale)
        finite = bool(flow.stack([flow.isfinite(g).all() for g in grads]).all().item())
        if finite:
            optimizer.step()
            self.clean_steps += 1
            if self.clean_steps == 2000:
                self.scale, self.clean_steps = self.scale * 2.0, 0
        else:
            self.scale, self.clean_steps = self.scale * 0.5, 0


# --------------------------------------------------------------------------------------------
# Step: returns step() -> the loss tensor (or None), not yet read back
# --------------------------------------------------------------------------------------------


def linear_step(
    args: argparse.Namespace, device: flow.device, amp_dtype: flow.dtype | None
) -> Callable[[], flow.Tensor | None]:
    flow.manual_seed(args.seed)
    sizes = [args.in_features] + [args.out_features] * args.layers
    layers: list[nn.Module] = []
    for k in range(args.layers):
        if k:
            layers.append(nn.ReLU())
        layers.append(nn.Linear(sizes[k], sizes[k + 1]))
    model = nn.Sequential(*layers).to(device)
    rng = np.random.default_rng(args.seed)
    x_np = rng.standard_normal((args.batch_size, args.in_features), dtype=np.float32)
    x = flow.tensor(x_np, device=device)
    labels_np = rng.integers(0, args.out_features, args.batch_size)
    labels = flow.tensor(labels_np, dtype=flow.int64, device=device)

    def autocast() -> Any:
        if amp_dtype is None:
            return contextlib.nullcontext()
        return flow.autocast(device.type, dtype=amp_dtype)

    if args.mode == "infer":
        model.eval()

        def infer() -> None:
            with flow.no_grad(), autocast():
                model(x)

        return infer

    model.train()
    optimizer = flow.optim.SGD(model.parameters(), lr=LR)
    # fp16 needs loss scaling to keep small gradients from underflowing; bf16 does not.
    scaler = DynamicLossScaler(model) if amp_dtype == flow.float16 else None

    def train() -> flow.Tensor:
        optimizer.zero_grad()
        with autocast():
            loss = F.cross_entropy(model(x).float(), labels)
        if scaler is not None:
            (loss * scaler.scale).backward()
            scaler.step(optimizer)
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
    args = parse_args(argv, __doc__, threads_help="OMP_NUM_THREADS + oneflow.set_num_threads")
    if args.threads and hasattr(flow, "set_num_threads"):
        flow.set_num_threads(args.threads)  # must precede every eager op

    if args.describe:
        info = {**counts(args), "framework_version": flow.__version__}
        if args.model == "embeddingbag":
            info["unsupported"] = embeddingbag_missing()
        print(json.dumps(info), flush=True)
        return 0

    if args.device == "cuda" and not flow.cuda.is_available():
        print(f"error: --device cuda asked for, but oneflow.cuda.is_available() is False "
              f"(oneflow {flow.__version__})", file=sys.stderr, flush=True)  # fmt: skip
        return 2
    device = flow.device("cuda:0" if args.device == "cuda" else "cpu")

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
    amp_dtype = None
    if args.precision == "amp":
        problem = amp_problem(device.type)
        if problem:
            return unsupported(problem)
        amp_dtype = flow.float16 if device.type == "cuda" else flow.bfloat16

    step = linear_step(args, device, amp_dtype)
    op = "oneflow.nn.Linear"
    info = counts(args)
    device_name = cpu_name()
    if device.type == "cuda":
        with contextlib.suppress(Exception):
            device_name = flow.cuda.get_device_name(0)
    omp = os.environ.get("OMP_NUM_THREADS", "")
    threads = args.threads or (int(omp) if omp.isdigit() else None)
    amp_name = str(amp_dtype).replace("oneflow.", "") if amp_dtype else None
    emit(
        event="start",
        framework="oneflow",
        framework_version=flow.__version__,
        python=platform.python_version(),
        device=device.type,
        device_name=device_name,
        model=args.model,
        impl="micro",
        op=op,
        mode=args.mode,
        precision=args.precision,
        amp_dtype=amp_name,
        batch_size=args.batch_size,
        threads=threads,
        shape=shape_text(args),
        cpu_native_bf16=cpu_native_bf16() if device.type == "cpu" else None,
        **info,
    )
    print(
        f"oneflow {flow.__version__} micro {args.model} ({op}), {shape_text(args)}: "
        f"{info['params']:,} params, {args.mode}, batch {args.batch_size}, "
        f"{args.precision}{f' ({amp_name})' if amp_name else ''}, {device.type} "
        f"({device_name}), {threads or 'default'} threads, {args.steps} steps, "
        f"reported in {info['unit']}",
        flush=True,
    )
    if amp_name == "bfloat16" and cpu_native_bf16() is False:
        print("warning: this CPU has no bf16 matmul instructions (no AVX512-BF16/AMX); bf16 "
              "autocast is emulated and usually much slower than fp32", flush=True)  # fmt: skip

    def sync() -> None:
        # Drains OneFlow's virtual machine: every queued op (the update included) has run.
        flow._oneflow_internal.eager.Sync()
        if device.type == "cuda":
            flow.cuda.synchronize()

    sync()
    ready = time.monotonic()
    emit(event="ready", time=ready)
    print(f"ready after {ready - t_launch:.2f}s (import, build, data)", flush=True)

    prev = ready
    for i in range(1, args.steps + 1):
        loss_t = step()
        sync()
        loss = float(loss_t.item()) if loss_t is not None else None
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
