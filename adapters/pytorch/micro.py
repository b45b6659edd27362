"""PyTorch microbenchmarks for dlperf (implementation kind "micro"), after FAMBench's DLRM ubench.

  linear        a stack of nn.Linear layers (ReLU between them): forward + backward + SGD update
                with --mode train, forward only with --mode infer. Reported in TF/s.
  embeddingbag  nn.EmbeddingBag(mode="sum"): one bag of --bag-size uniformly random rows per
                sample, summed. Forward only with --mode infer; forward + backward (sparse
                gradient) + SGD update of the touched rows with --mode train. Reported in GB/s.

Runs inside the adapter's isolated env and imports only torch and the standard library; the
events contract and the timed loop are the shared kit's (_shared/workload_kit.py), as for
workload.py.

Counting and defaults are the same in every framework: see the microbenchmark section of
adapters/_shared/model_math.py (linear in TF/s, 3 x the forward FLOPs when training;
embeddingbag in GB/s, the rows read, 3 x when training; FAMBench's linear_A and emb "B" shapes).
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
import math
import os
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import workload_kit as kit  # noqa: E402
from torch import nn  # noqa: E402

LR = 0.01  # FAMBench's linear ubench SGD learning rate
INDEX_POOL_BYTES = 256 * 2**20  # rows touched by the pool of index batches, at least
INDEX_POOL_MAX_BYTES = 64 * 2**20  # memory for the pool of index batches, at most


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
    row_bytes = args.embedding_dim * model_math.element_size(args)
    wanted = math.ceil(INDEX_POOL_BYTES / (per_batch_rows * row_bytes))
    room = INDEX_POOL_MAX_BYTES // (per_batch_rows * model_math.INDEX_BYTES)
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
    args = kit.parse_micro_args(argv, __doc__, threads_help="torch.set_num_threads(N)")
    if args.threads:
        torch.set_num_threads(args.threads)
    info = model_math.micro_counts(args)
    if args.describe:
        return kit.describe(**info, framework_version=torch.__version__)
    if args.device == "cuda" and not torch.cuda.is_available():
        return kit.no_device(f"torch.cuda.is_available() is False (torch {torch.__version__}, "
                             f"CUDA build: {torch.version.cuda})")  # fmt: skip
    device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        # Honest fp32: no silent TF32 for the GEMMs (it also keeps AMP's fp32 ops in fp32).
        torch.backends.cuda.matmul.allow_tf32 = False
    events = kit.Events()

    amp_dtype = None
    if args.precision == "amp":
        amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    if args.model == "linear":
        run = linear_step(args, device, amp_dtype)
        op = "torch.nn.Linear"
    else:
        run = embeddingbag_step(args, device, amp_dtype or torch.float32)
        op = "torch.nn.EmbeddingBag(mode='sum', sparse=True)"

    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else kit.cpu_name()
    amp_name = str(amp_dtype).replace("torch.", "") if amp_dtype else None
    shape = model_math.micro_shape_text(args)
    events.start(
        "pytorch", torch.__version__, args,
        device=device.type, device_name=device_name, impl="micro", op=op, amp_dtype=amp_name,
        threads=torch.get_num_threads(), shape=shape,
        tf32=False if device.type == "cuda" else None,
        cpu_native_bf16=kit.cpu_native_bf16() if device.type == "cpu" else None, **info,
    )  # fmt: skip
    print(kit.micro_start_line(
        f"pytorch {torch.__version__}", args, op=op, info=info, shape=shape, amp_dtype=amp_name,
        device=device.type, device_name=device_name, threads=torch.get_num_threads(),
    ), flush=True)  # fmt: skip
    if args.model == "linear" and device.type == "cpu":
        kit.warn_if_bf16_emulated(amp_name)

    def step() -> float | None:
        loss = run()
        # CUDA runs asynchronously: wait for the whole step (the update included), then read
        # the loss back. On the CPU every op has finished when it returns.
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return loss.item() if loss is not None else None

    ready = kit.run_steps(events, steps=args.steps, samples=args.batch_size, step=step,
                          t_launch=t_launch, set_up="import, build, data")  # fmt: skip
    return kit.finish(events, args, ready)


if __name__ == "__main__":
    sys.exit(main())
