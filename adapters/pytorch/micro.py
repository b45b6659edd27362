"""PyTorch microbenchmarks for dlperf (implementation kind "micro"), after FAMBench's DLRM ubench.

  linear        a stack of nn.Linear layers (ReLU between them): forward + backward + SGD update
                with --mode train, forward only with --mode infer. Reported in TF/s.
  embeddingbag  nn.EmbeddingBag(mode="sum"): one bag of --bag-size uniformly random rows per
                sample, summed. Forward only with --mode infer; forward + backward (sparse
                gradient) + SGD update of the touched rows with --mode train. Reported in GB/s.

Runs inside the adapter's isolated env and imports only torch, the standard library, the
shared kit (_shared/workload_kit.py: the worker sequence, the events contract, the timed loop)
and, from workload.py beside it, its hooks (threads, CUDA check, device sync) and autocast.

Counting, defaults and embeddingbag's pool of index batches (another batch each step, so
repeated bags are not served from cache) are the same in every framework: see the
microbenchmark section of adapters/_shared/model_math.py (linear in TF/s, 3 x the forward FLOPs
when training; embeddingbag in GB/s, the rows read, 3 x when training; FAMBench's linear_A and
emb "B" shapes). The linear input and labels are made once.

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
import itertools
import os
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import workload_kit as kit  # noqa: E402
from torch import nn  # noqa: E402
from workload import PyTorch, amp_dtype, autocast  # noqa: E402

LR = 0.01  # FAMBench's linear ubench SGD learning rate


# --------------------------------------------------------------------------------------------
# Steps: each returns step() -> the loss tensor (or None), not yet read back
# --------------------------------------------------------------------------------------------


def linear_step(
    args: argparse.Namespace, device: torch.device
) -> Callable[[], torch.Tensor | None]:
    torch.manual_seed(args.seed)
    layers: list[nn.Module] = []
    for k, (n_in, n_out) in enumerate(model_math.linear_sizes(args)):
        layers += [nn.ReLU(), nn.Linear(n_in, n_out)] if k else [nn.Linear(n_in, n_out)]
    model = nn.Sequential(*layers).to(device)
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    x = torch.randn(args.batch_size, args.in_features, generator=g).to(device)
    labels = torch.randint(0, args.out_features, (args.batch_size,), generator=g).to(device)

    if args.mode == "infer":
        model.eval()

        def infer() -> None:
            with torch.inference_mode(), autocast(args, device):
                model(x)

        return infer

    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    # fp16 needs loss scaling to keep small gradients from underflowing; bf16 does not.
    amp_on_cuda = args.precision == "amp" and device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda") if amp_on_cuda else None

    def train() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with autocast(args, device):
            loss = F.cross_entropy(model(x), labels)
        kit.backward_and_update(loss, optimizer, scaler)
        return loss

    return train


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
    pool = model_math.index_pool_size(args)
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


class PyTorchMicro(PyTorch):
    """The microbenchmarks' parts of the worker sequence (kit.micro_main runs them); the
    threads, the CUDA check and the device sync are workload.py's."""

    ops = {"linear": "torch.nn.Linear",
           "embeddingbag": "torch.nn.EmbeddingBag(mode='sum', sparse=True)"}  # fmt: skip

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return kit.parse_micro_args(argv, __doc__, threads_help="torch.set_num_threads(N)")

    def setup(self, args: argparse.Namespace) -> None:
        self.device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
        if args.device == "cuda":
            torch.cuda.set_device(self.device)
            # Honest fp32: no silent TF32 for the GEMMs (it also keeps AMP's fp32 ops in fp32).
            torch.backends.cuda.matmul.allow_tf32 = False

    def make_step(self, args: argparse.Namespace, model: None) -> Callable[[], float | None]:
        if args.model == "linear":
            run = linear_step(args, self.device)
        else:
            amp = args.precision == "amp"
            run = embeddingbag_step(
                args, self.device, amp_dtype(self.device) if amp else torch.float32
            )
        # CUDA runs asynchronously: the step ends once the device is done (on the CPU every
        # op has finished when it returns).
        return kit.synced_step(run, self.sync)

    def facts(self, args: argparse.Namespace, model: None) -> kit.Facts:
        cuda = self.device.type == "cuda"
        amp = str(amp_dtype(self.device)).replace("torch.", "")
        return kit.Facts(
            self.device.type, torch.cuda.get_device_name(self.device) if cuda else kit.cpu_name(),
            amp if args.precision == "amp" else None, torch.get_num_threads(),
            extra=kit.precision_fields(cuda),
        )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return kit.micro_main(PyTorchMicro(), argv)


if __name__ == "__main__":
    sys.exit(main())
