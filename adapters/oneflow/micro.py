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
back. Runs inside the adapter's isolated env and imports only oneflow, numpy, the standard
library, the shared harness (adapters/_shared/workload_kit.py, model_math.py) and, from
workload.py beside it, the framework's hooks (CUDA check, device facts), the AMP probe and
autocast, the eager loss scaler and the device name. Events contract as for workload.py: JSON
lines to the file named by $DLPERF_EVENTS ("start", "ready", one "step" per iteration, "end",
or "unsupported"); a human-readable log goes to stdout. The OneFlow 0.9 wheel needs the
cuDNN/cuBLAS pip wheels' lib folders on LD_LIBRARY_PATH even on the CPU (the adapter's
lib_dirs).

Counting and defaults are the same in every framework: see the microbenchmark section of
adapters/_shared/model_math.py (linear in TF/s, 3 x the forward FLOPs when training;
embeddingbag in GB/s, the rows read, 3 x when training; FAMBench's linear_A and emb "B" shapes).
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
import os
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import workload_kit as kit  # noqa: E402

kit.pin_omp_threads(sys.argv[1:])  # --threads as OMP_NUM_THREADS, which OneFlow reads at import

import numpy as np  # noqa: E402
import oneflow as flow  # noqa: E402
import oneflow.nn.functional as F  # noqa: E402
from oneflow import nn  # noqa: E402
from workload import DynamicLossScaler, OneFlow, amp_problem, autocast, device_name  # noqa: E402

LR = 0.01  # FAMBench's linear ubench SGD learning rate


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


# --------------------------------------------------------------------------------------------
# Step: returns step() -> the loss tensor (or None), not yet read back
# --------------------------------------------------------------------------------------------


def linear_step(args: argparse.Namespace, device: flow.device) -> Callable[[], flow.Tensor | None]:
    flow.manual_seed(args.seed)
    layers: list[nn.Module] = []
    for k, (n_in, n_out) in enumerate(model_math.linear_sizes(args)):
        layers += [nn.ReLU(), nn.Linear(n_in, n_out)] if k else [nn.Linear(n_in, n_out)]
    model = nn.Sequential(*layers).to(device)
    rng = np.random.default_rng(args.seed)
    x_np = rng.standard_normal((args.batch_size, args.in_features), dtype=np.float32)
    x = flow.tensor(x_np, device=device)
    labels_np = rng.integers(0, args.out_features, args.batch_size)
    labels = flow.tensor(labels_np, dtype=flow.int64, device=device)

    if args.mode == "infer":
        model.eval()

        def infer() -> None:
            with flow.no_grad(), autocast(args, device):
                model(x)

        return infer

    model.train()
    optimizer = flow.optim.SGD(model.parameters(), lr=LR)
    # fp16 needs loss scaling to keep small gradients from underflowing; bf16 does not.
    amp_on_cuda = args.precision == "amp" and device.type == "cuda"
    scaler = DynamicLossScaler(model) if amp_on_cuda else None

    def train() -> flow.Tensor:
        optimizer.zero_grad()
        with autocast(args, device):
            loss = F.cross_entropy(model(x).float(), labels)
        kit.backward_and_update(loss, optimizer, scaler)
        return loss

    return train


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


class OneFlowMicro(OneFlow):
    """The microbenchmarks' parts of the worker sequence (kit.micro_main runs them); the CUDA
    check and the device facts are workload.py's."""

    ops = {"linear": "oneflow.nn.Linear"}

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return kit.parse_micro_args(
            argv, __doc__, threads_help="OMP_NUM_THREADS + oneflow.set_num_threads"
        )

    def threads(self, args: argparse.Namespace) -> None:
        if args.threads and hasattr(flow, "set_num_threads"):
            flow.set_num_threads(args.threads)  # must precede every eager op

    def cannot_run(self, args: argparse.Namespace) -> str | None:
        return embeddingbag_missing() if args.model == "embeddingbag" else None

    def setup(self, args: argparse.Namespace) -> None:
        self.device = flow.device("cuda:0" if args.device == "cuda" else "cpu")
        if args.precision == "amp" and (problem := amp_problem(self.device.type)):
            raise kit.Unsupported(problem)

    def make_step(self, args: argparse.Namespace, model: None) -> Callable[[], float | None]:
        return kit.synced_step(linear_step(args, self.device), self.sync)

    def facts(self, args: argparse.Namespace, model: None) -> kit.Facts:
        cpu = self.device.type == "cpu"
        return kit.Facts(
            self.device.type, device_name(self.device), self.amp_name(args),
            args.threads or kit.omp_threads(),
            extra={"cpu_native_bf16": kit.cpu_native_bf16() if cpu else None},
        )  # fmt: skip

    def sync(self) -> None:
        # Drains OneFlow's virtual machine: every queued op (the update included) has run.
        flow._oneflow_internal.eager.Sync()
        super().sync()


def main(argv: list[str] | None = None) -> int:
    return kit.micro_main(OneFlowMicro(), argv)


if __name__ == "__main__":
    sys.exit(main())
