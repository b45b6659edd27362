"""PyTorch microbenchmarks for dlperf (implementation kind "micro"), after FAMBench's DLRM ubench.

  linear        a stack of nn.Linear layers (ReLU between them): forward + backward + SGD update
                with --mode train, forward only with --mode infer. Reported in TF/s.
  embeddingbag  nn.EmbeddingBag(mode="sum"): one bag of --bag-size uniformly random rows per
                sample, summed. Forward only with --mode infer; forward + backward (sparse
                gradient) + SGD update of the touched rows with --mode train. Reported in GB/s.

Runs inside the adapter's isolated env and imports only torch and the standard library. Events
contract as for workload.py: JSON lines to the file named by $DLPERF_EVENTS ("start", "ready",
one "step" per iteration, "end", or "unsupported"); a human-readable log goes to stdout.

Counting (the host turns samples/s into TF/s = flops_per_sample * samples/s / 1e12 and GB/s =
bytes_per_sample * samples/s / 1e9):
  linear        flops_per_sample = 2 * (in*out + (layers-1)*out*out) forward, x3 when training
                (backward = activation and weight gradients, 2 GEMMs per layer), as FAMBench's
                "Forward 2x and Backward 4x". bytes_per_sample = 0: the weights are shared by
                the whole batch, so a per-sample byte count would depend on the batch size.
  embeddingbag  bytes_per_sample = bag_size * dim * element size of the table (the rows read),
                x3 when training (FAMBench's FBGEMM rule: rows read forward, gradient rows read
                and table rows read+written by the update). The int64 indices (8 bytes per row
                looked up) are left out, as FAMBench does; the start event carries them as
                index_bytes_per_sample. flops_per_sample = 0: a lookup is not FLOP-bound.

Defaults:
  linear        1024 -> 1024, 4 layers: FAMBench's linear_A GEMM shape (1024-wide, the
                batch-128..4096 rows of mlp_A) at a depth a 2-core CPU trains at batch 256 in
                well under 0.5 s per step (6.4 GFLOP); depth only repeats the same GEMM.
                FAMBench's own linear_A depth is --layers 20 (input, 18 hidden, output).
  embeddingbag  4,800,000 rows x 56, bags of 34: FAMBench's emb dataset "B" / "small" (a
                1.07 GB fp32 table, far bigger than any CPU cache, which is the point).
Each step uses another batch of indices from a pool that together touch at least 256 MiB of
rows (or one batch per step when there are fewer steps), so repeated bags are not served from
cache. The linear input and labels are made once.

AMP: autocast to bfloat16 on the CPU, float16 (with GradScaler when training) on CUDA. For
embeddingbag, amp stores the table in that dtype (FAMBench's half-precision embedding
weights): the bytes count halves with the element size.

Usage:
    python micro.py --model linear --batch-size 256 --steps 30 [--mode infer] [--precision amp]
    python micro.py --model embeddingbag --batch-size 2048 --steps 30
    python micro.py --model linear --describe   # one JSON line: params, FLOPs, bytes; no run
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import torch
import torch.nn.functional as F
from torch import nn

# Counting and host facts shared by every framework's micro.py (standard library only).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "_shared"))
from micro_common import (  # noqa: E402
    INDEX_BYTES,
    counts,
    cpu_name,
    cpu_native_bf16,
    element_size,
    parse_args,
    shape_text,
)

LR = 0.01  # FAMBench's linear ubench SGD learning rate
INDEX_POOL_BYTES = 256 * 2**20  # rows touched by the pool of index batches, at least
INDEX_POOL_MAX_BYTES = 64 * 2**20  # memory for the pool of index batches, at most


# --------------------------------------------------------------------------------------------
# Counting (pure functions of the arguments)
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Host facts
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Steps: each returns step() -> the loss tensor (or None), not yet read back
# --------------------------------------------------------------------------------------------


def linear_step(
    args: argparse.Namespace, device: torch.device, amp_dtype: torch.dtype | None
) -> Callable[[], torch.Tensor | None]:
    torch.manual_seed(args.seed)
    sizes = [args.in_features] + [args.out_features] * args.layers
    layers: list[nn.Module] = []
    for k in range(args.layers):
        if k:
            layers.append(nn.ReLU())
        layers.append(nn.Linear(sizes[k], sizes[k + 1]))
    model = nn.Sequential(*layers).to(device)
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    x = torch.randn(args.batch_size, args.in_features, generator=g).to(device)
    labels = torch.randint(0, args.out_features, (args.batch_size,), generator=g).to(device)

    def autocast() -> contextlib.AbstractContextManager:
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=amp_dtype)

    if args.mode == "infer":
        model.eval()

        def infer() -> None:
            with torch.inference_mode(), autocast():
                model(x)

        return infer

    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    # fp16 needs loss scaling to keep small gradients from underflowing; bf16 does not.
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None

    def train() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = F.cross_entropy(model(x), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss

    return train


def index_pool_size(args: argparse.Namespace) -> int:
    """How many distinct index batches the steps cycle through (see the module docstring)."""
    per_batch_rows = args.batch_size * args.bag_size
    row_bytes = args.embedding_dim * element_size(args)
    wanted = math.ceil(INDEX_POOL_BYTES / (per_batch_rows * row_bytes))
    room = INDEX_POOL_MAX_BYTES // (per_batch_rows * INDEX_BYTES)
    return max(1, min(max(args.steps, 1), wanted, room))


def embeddingbag_step(
    args: argparse.Namespace, device: torch.device, table_dtype: torch.dtype
) -> Callable[[], torch.Tensor | None]:
    train = args.mode == "train"
    torch.manual_seed(args.seed)
    # sparse=True: the backward pass yields only the touched rows (a dense gradient would cost
    # a whole-table write per step); torch.optim.SGD applies such a gradient row by row.
    bag = nn.EmbeddingBag(
        args.num_embeddings, args.embedding_dim, mode="sum", sparse=True,
        device=device, dtype=table_dtype,
    )  # fmt: skip
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    pool = index_pool_size(args)
    indices = torch.randint(
        0, args.num_embeddings, (pool, args.batch_size * args.bag_size), generator=g
    ).to(device)
    offsets = (torch.arange(args.batch_size, dtype=torch.int64) * args.bag_size).to(device)
    counter = itertools.count()

    if not train:
        bag.eval()

        def infer() -> None:
            with torch.inference_mode():
                bag(indices[next(counter) % pool], offsets)

        return infer

    optimizer = torch.optim.SGD(bag.parameters(), lr=LR)
    grad_out = torch.randn(args.batch_size, args.embedding_dim, generator=g)
    grad_out = grad_out.to(device=device, dtype=table_dtype)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        bag(indices[next(counter) % pool], offsets).backward(grad_out)
        optimizer.step()

    return step


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    t_launch = time.monotonic()
    args = parse_args(argv, __doc__, threads_help="torch.set_num_threads(N)")
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.describe:
        print(json.dumps({**counts(args), "framework_version": torch.__version__}), flush=True)
        return 0

    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda asked for, but torch.cuda.is_available() is False "
              f"(torch {torch.__version__}, CUDA build: {torch.version.cuda})",
              file=sys.stderr, flush=True)  # fmt: skip
        return 2
    device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        # Honest fp32: no silent TF32 for the GEMMs (it also keeps AMP's fp32 ops in fp32).
        torch.backends.cuda.matmul.allow_tf32 = False

    path = os.environ.get("DLPERF_EVENTS", "")
    events: TextIO | None = open(path, "a", buffering=1) if path else None  # noqa: SIM115

    def emit(**event: object) -> None:
        if events is not None:
            events.write(json.dumps(event) + "\n")
            events.flush()

    amp_dtype = None
    if args.precision == "amp":
        amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    if args.model == "linear":
        step = linear_step(args, device, amp_dtype)
        op = "torch.nn.Linear"
    else:
        step = embeddingbag_step(args, device, amp_dtype or torch.float32)
        op = "torch.nn.EmbeddingBag(mode='sum', sparse=True)"

    info = counts(args)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    amp_name = str(amp_dtype).replace("torch.", "") if amp_dtype else None
    emit(
        event="start",
        framework="pytorch",
        framework_version=torch.__version__,
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
        threads=torch.get_num_threads(),
        shape=shape_text(args),
        tf32=False if device.type == "cuda" else None,
        cpu_native_bf16=cpu_native_bf16() if device.type == "cpu" else None,
        **info,
    )
    print(
        f"pytorch {torch.__version__} micro {args.model} ({op}), {shape_text(args)}: "
        f"{info['params']:,} params, {args.mode}, batch {args.batch_size}, "
        f"{args.precision}{f' ({amp_name})' if amp_name else ''}, {device.type} ({device_name}), "
        f"{torch.get_num_threads()} threads, {args.steps} steps, reported in {info['unit']}",
        flush=True,
    )

    if amp_name == "bfloat16" and args.model == "linear" and cpu_native_bf16() is False:
        print("warning: this CPU has no bf16 matmul instructions (no AVX512-BF16/AMX); bf16 "
              "autocast is emulated and usually much slower than fp32", flush=True)  # fmt: skip

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    sync()
    ready = time.monotonic()
    emit(event="ready", time=ready)
    print(f"ready after {ready - t_launch:.2f}s (import, build, data)", flush=True)

    prev = ready
    for i in range(1, args.steps + 1):
        loss_t = step()
        # CUDA runs asynchronously: wait for the whole step (the update included), then read
        # the loss back. On the CPU every op has finished when it returns.
        sync()
        loss = loss_t.item() if loss_t is not None else None
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
