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
adapter's isolated env and imports only MXNet, numpy, the standard library, the stdlib-only
kit in adapters/_shared and, from workload.py beside it, the framework's hooks (CUDA check,
device sync) and its recorded backward pass. Events contract as for workload.py: JSON lines
to the file named by $DLPERF_EVENTS ("start", "ready", one "step" per iteration, "end", or
"unsupported"); a human-readable log goes to stdout.

Counting and defaults are the same in every framework: adapters/_shared/model_math.py
(micro_counts: linear in FLOPs, 3 x the forward when training; embeddingbag in bytes, for
--describe here) and workload_kit.parse_micro_args (linear 1024 -> 1024 x 4 layers, FAMBench's
linear_A GEMM shape; embeddingbag 4,800,000 x 56, bags of 34, FAMBench's emb dataset "B").
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
import os
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import workload_kit as kit  # noqa: E402

kit.pin_omp_threads(sys.argv[1:])  # MXNet reads OMP_NUM_THREADS once, when it is imported

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import gluon  # noqa: E402
from mxnet.gluon import nn  # noqa: E402
from workload import MXNet, record_backward  # noqa: E402

LR = 0.01  # FAMBench's linear ubench SGD learning rate


# --------------------------------------------------------------------------------------------
# What this MXNet build has
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
# Step: step() returns once the engine is done, with the loss as a float (None: inference)
# --------------------------------------------------------------------------------------------


def linear_step(args: argparse.Namespace, ctx: mx.Context, amp) -> Callable[[], float | None]:
    mx.random.seed(args.seed)
    net = nn.Sequential()
    for k, (n_in, n_out) in enumerate(model_math.linear_sizes(args)):
        last = k == args.layers - 1
        net.add(nn.Dense(n_out, activation=None if last else "relu", in_units=n_in, flatten=False))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    rng = np.random.default_rng(args.seed)
    x = mx.nd.array(rng.standard_normal((args.batch_size, args.in_features)), ctx=ctx)
    labels = mx.nd.array(rng.integers(0, args.out_features, args.batch_size), ctx=ctx)

    if args.mode == "infer":

        def infer() -> None:
            net(x)  # outside autograd.record(): inference
            mx.nd.waitall()  # the engine is asynchronous: only now has the batch finished

        return infer

    ce = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": LR})
    if amp is not None:
        amp.init_trainer(trainer)

    def train() -> float:
        loss = record_backward(lambda: ce(net(x).astype("float32"), labels).mean(), trainer, amp)
        trainer.step(1)  # the loss is a batch mean already
        # The engine is asynchronous: wait for the whole step (update included), then read.
        mx.nd.waitall()
        return float(loss.asscalar())

    return train


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


class MXNetMicro(MXNet):
    """The microbenchmarks' parts of the worker sequence (kit.micro_main runs them); the CUDA
    check and the device sync are workload.py's."""

    ops = {"linear": "mxnet.gluon.nn.Dense"}
    amp = None

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return kit.parse_micro_args(
            argv, __doc__, threads_help="OMP_NUM_THREADS (set before MXNet starts)"
        )

    def cannot_run(self, args: argparse.Namespace) -> str | None:
        return embeddingbag_missing() if args.model == "embeddingbag" else None

    def setup(self, args: argparse.Namespace) -> None:
        on_gpu = args.device == "cuda"
        self.ctx = mx.gpu(0) if on_gpu else mx.cpu()
        if args.precision == "amp":
            self.amp_dtype = "float16" if on_gpu else "bfloat16"
            if problem := None if on_gpu else cpu_amp_problem():
                raise kit.Unsupported(problem)
            from mxnet.contrib import amp

            amp.init(target_dtype=self.amp_dtype)
            self.amp = amp

    def make_step(self, args: argparse.Namespace, model: None) -> Callable[[], float | None]:
        return linear_step(args, self.ctx, self.amp)

    def facts(self, args: argparse.Namespace, model: None) -> kit.Facts:
        on_gpu = args.device == "cuda"
        return kit.Facts(
            args.device, f"GPU {self.ctx.device_id}" if on_gpu else kit.cpu_name(),
            self.amp_dtype, kit.omp_threads(),
            extra={"cpu_native_bf16": None if on_gpu else kit.cpu_native_bf16()},
        )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return kit.micro_main(MXNetMicro(), argv)


if __name__ == "__main__":
    sys.exit(main())
