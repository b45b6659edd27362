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
the stdlib-only workload kit in adapters/_shared (workload_kit, model_math), and from
workload.py beside it the framework's hooks (threads, CUDA check, device facts, sync) and its
AMP probe. Events contract as for workload.py: JSON lines to the file named by $DLPERF_EVENTS
("start", "ready", one "step" per iteration, "end", or "unsupported"); a human-readable log
goes to stdout.

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
from collections.abc import Callable

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import workload_kit as kit  # noqa: E402
from workload import Paddle, amp_dtype, amp_problem, no_tf32  # noqa: E402

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


# --------------------------------------------------------------------------------------------
# Step: returns step() -> the loss tensor (or None), not yet read back
# --------------------------------------------------------------------------------------------


def linear_step(args: argparse.Namespace, on_gpu: bool) -> Callable[[], paddle.Tensor | None]:
    paddle.seed(args.seed)
    layers: list[nn.Layer] = []
    for k, (n_in, n_out) in enumerate(model_math.linear_sizes(args)):
        layers += [nn.ReLU(), nn.Linear(n_in, n_out)] if k else [nn.Linear(n_in, n_out)]
    model = nn.Sequential(*layers)
    rng = np.random.default_rng(args.seed)
    x = paddle.to_tensor(rng.standard_normal((args.batch_size, args.in_features), np.float32))
    labels = paddle.to_tensor(rng.integers(0, args.out_features, args.batch_size))
    amp = args.precision == "amp"

    def autocast() -> contextlib.AbstractContextManager:
        if not amp:
            return contextlib.nullcontext()
        return paddle.amp.auto_cast(level="O1", dtype=amp_dtype(on_gpu))

    if args.mode == "infer":
        model.eval()

        def infer() -> None:
            with paddle.no_grad(), autocast():
                model(x)

        return infer

    model.train()
    optimizer = paddle.optimizer.SGD(learning_rate=LR, parameters=model.parameters())
    # fp16 needs loss scaling to keep small gradients from underflowing; bf16 does not.
    scaler = paddle.amp.GradScaler(init_loss_scaling=2.0**16) if amp and on_gpu else None

    def train() -> paddle.Tensor:
        optimizer.clear_grad(set_to_zero=False)
        with autocast():
            loss = F.cross_entropy(model(x).astype("float32"), labels)
        kit.backward_and_update(loss, optimizer, scaler)
        return loss

    return train


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


class PaddleMicro(Paddle):
    """The microbenchmarks' parts of the worker sequence (kit.micro_main runs them); the
    threads, the CUDA check, the device facts and sync are workload.py's."""

    ops = {"linear": "paddle.nn.Linear"}

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return kit.parse_micro_args(argv, __doc__, threads_help="CPU math library threads")

    def cannot_run(self, args: argparse.Namespace) -> str | None:
        return embeddingbag_missing() if args.model == "embeddingbag" else None

    def setup(self, args: argparse.Namespace) -> None:
        self.on_gpu = args.device == "cuda"
        paddle.set_device("gpu:0" if self.on_gpu else "cpu")
        if self.on_gpu:
            no_tf32()
        if args.precision == "amp":
            self.amp_dtype = amp_dtype(self.on_gpu)
            if problem := amp_problem(self.amp_dtype):
                raise kit.Unsupported(problem)

    def make_step(self, args: argparse.Namespace, model: None) -> Callable[[], float | None]:
        # Waits for the device (the update included), then reads the loss back.
        return kit.synced_step(linear_step(args, self.on_gpu), self.sync)

    def facts(self, args: argparse.Namespace, model: None) -> kit.Facts:
        return self.device_facts(args)


def main(argv: list[str] | None = None) -> int:
    return kit.micro_main(PaddleMicro(), argv)


if __name__ == "__main__":
    sys.exit(main())
