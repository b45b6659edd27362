"""TensorFlow microbenchmarks for dlperf (implementation kind "micro"), after FAMBench ubench.

  linear        a stack of keras Dense layers (ReLU between them): forward + backward + SGD
                update with --mode train, forward only with --mode infer. Reported in TF/s.
  embeddingbag  tf.nn.embedding_lookup_sparse(combiner="sum") on a tf.Variable table: one bag
                of --bag-size uniformly random rows per sample, summed. Inside tf.function
                TensorFlow runs it as Unique + ResourceGather + SparseSegmentSum (the fused
                gather-and-sum kernel). Forward only with --mode infer; forward + backward (an
                IndexedSlices gradient) + SGD update of the touched rows (scatter_sub) with
                --mode train. Reported in GB/s.

Each step is one tf.function call. Runs inside the adapter's isolated env and imports only
TensorFlow/Keras, numpy, the standard library and the stdlib-only kit in adapters/_shared
(workload_kit: the worker sequence, command line, events, step loop; model_math: the counts
below), and from workload.py beside it the framework's hooks (the CUDA check, the device name).
Events contract as for workload.py: JSON lines to the file named by $DLPERF_EVENTS ("start",
"ready", one "step" per iteration, "end", or "unsupported"); a human-readable log goes to
stdout.

Counting, defaults and embeddingbag's pool of index batches (another batch each step, so
repeated bags are not served from cache) are the same in every framework: see the
microbenchmark section of adapters/_shared/model_math.py (linear in TF/s, 3 x the forward FLOPs
when training; embeddingbag in GB/s, the rows read, 3 x when training; FAMBench's linear_A and
emb "B" shapes). The linear input and labels are made once.

AMP: the Keras mixed_bfloat16 policy on the CPU, mixed_float16 (with LossScaleOptimizer when
training) on CUDA. For embeddingbag, amp stores the table in that dtype (FAMBench's
half-precision embedding weights): the bytes count halves with the element size.

Usage:
    python micro.py --model linear --batch-size 256 --steps 30 [--mode infer] [--precision amp]
    python micro.py --model embeddingbag --batch-size 2048 --steps 30
    python micro.py --model linear --describe   # one JSON line: params, FLOPs, bytes; no run
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import workload_kit as kit  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from workload import TensorFlow, amp_dtype, device_name  # noqa: E402

TABLE_INIT_BLOCK = 4096  # the table repeats one random block: a full-size RNG pass takes ~20 s

LR = 0.01  # FAMBench's linear ubench SGD learning rate


# --------------------------------------------------------------------------------------------
# Steps: each returns step() -> a scalar tensor (the loss, or one output element) to read back
# --------------------------------------------------------------------------------------------


def linear_step(args: argparse.Namespace, on_gpu: bool) -> Callable[[], tf.Tensor]:
    keras.utils.set_random_seed(args.seed)
    layers = [keras.Input((args.in_features,))]
    for k in range(args.layers):
        last = k == args.layers - 1
        layers.append(keras.layers.Dense(args.out_features, activation=None if last else "relu"))
    model = keras.Sequential(layers)
    rng = np.random.default_rng(args.seed)
    x = tf.constant(rng.standard_normal((args.batch_size, args.in_features), dtype=np.float32))
    labels = tf.constant(rng.integers(0, args.out_features, args.batch_size), dtype=tf.int64)

    if args.mode == "infer":

        @tf.function
        def infer() -> tf.Tensor:
            return model(x, training=False)[0, 0]

        return infer

    optimizer = keras.optimizers.SGD(learning_rate=LR)
    if args.precision == "amp" and on_gpu:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)  # fp16 needs loss scaling
    variables = model.trainable_variables

    @tf.function
    def train() -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(x, training=True), tf.float32)
            loss = tf.reduce_mean(
                keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            )
            scaled = optimizer.scale_loss(loss) if hasattr(optimizer, "scale_loss") else loss
        grads = tape.gradient(scaled, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    return train


def embeddingbag_step(args: argparse.Namespace, table_dtype: tf.DType) -> Callable[[], tf.Tensor]:
    e, d, p, b = args.num_embeddings, args.embedding_dim, args.bag_size, args.batch_size
    tf.random.set_seed(args.seed)
    block = tf.random.normal([min(e, TABLE_INIT_BLOCK), d])
    repeats = math.ceil(e / TABLE_INIT_BLOCK)
    table = tf.Variable(tf.cast(tf.tile(block, [repeats, 1])[:e], table_dtype), name="table")
    del block
    rng = np.random.default_rng(args.seed)
    pool = model_math.index_pool_size(args)
    ids = tf.constant(rng.integers(0, e, (pool, b * p)), dtype=tf.int64)
    # The bag layout of a [batch, bag_size] SparseTensor: row-major coordinates, fixed.
    coords = tf.constant(
        np.stack([np.repeat(np.arange(b), p), np.tile(np.arange(p), b)], axis=1), dtype=tf.int64
    )
    lr = tf.constant(LR, table_dtype)
    grad_out = tf.constant(rng.standard_normal((b, d), dtype=np.float32))
    grad_out = tf.cast(grad_out, table_dtype)
    counter = tf.Variable(0, dtype=tf.int64, trainable=False)

    def bags() -> tf.SparseTensor:
        k = counter.assign_add(1) % pool
        return tf.SparseTensor(coords, tf.gather(ids, k), [b, p])

    if args.mode == "infer":

        @tf.function
        def infer() -> tf.Tensor:
            return tf.nn.embedding_lookup_sparse(table, bags(), None, combiner="sum")[0, 0]

        return infer

    @tf.function
    def train() -> tf.Tensor:
        sp = bags()
        with tf.GradientTape() as tape:
            out = tf.nn.embedding_lookup_sparse(table, sp, None, combiner="sum")
            # d(loss)/d(out) = grad_out: the backward pass of out.backward(grad_out).
            loss = tf.reduce_sum(out * grad_out)
        grad = tape.gradient(loss, table)  # IndexedSlices: the touched rows only
        table.scatter_sub(tf.IndexedSlices(grad.values * lr, grad.indices))
        # One row read back after the update (ordered after it by tf.function's automatic
        # control dependencies). sparse_read gathers that row; table[0, 0] would first copy
        # the whole table (a resource variable's copy-on-read after a sparse update).
        return table.sparse_read([0])[0, 0]

    return train


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


class TensorFlowMicro(TensorFlow):
    """The microbenchmarks' parts of the worker sequence (kit.micro_main runs them); the CUDA
    check is workload.py's."""

    label = ""  # the log names TensorFlow without Keras here
    ops = {"linear": "keras.layers.Dense",
           "embeddingbag": "tf.nn.embedding_lookup_sparse(combiner='sum')"}  # fmt: skip

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return kit.parse_micro_args(argv, __doc__, threads_help="intra-op threads")

    def threads(self, args: argparse.Namespace) -> None:
        if args.threads:
            tf.config.threading.set_intra_op_parallelism_threads(args.threads)

    def setup(self, args: argparse.Namespace) -> None:
        self.device = "gpu" if args.device == "cuda" else "cpu"
        if self.device == "gpu":
            tf.config.experimental.enable_tensor_float_32_execution(False)  # honest fp32

    def make_step(self, args: argparse.Namespace, model: None) -> Callable[[], float | None]:
        on_gpu, device = self.device == "gpu", f"/{self.device}:0"
        amp = amp_dtype(on_gpu) if args.precision == "amp" else None
        with tf.device(device):
            if args.model == "linear":
                if amp:
                    keras.mixed_precision.set_global_policy(f"mixed_{amp}")
                run = linear_step(args, on_gpu)
            else:
                run = embeddingbag_step(args, tf.as_dtype(amp or "float32"))
        train_linear = args.model == "linear" and args.mode == "train"

        def step() -> float | None:
            with tf.device(device):
                value_t = run()
            # A GPU runs asynchronously: wait for every queued kernel (the update included).
            # Then .numpy() copies the value to the host. The first call also traces the
            # tf.function.
            if on_gpu:
                tf.test.experimental.sync_devices()
            value = float(value_t.numpy())
            return value if train_linear else None  # only linear training has a loss

        return step

    def facts(self, args: argparse.Namespace, model: None) -> kit.Facts:
        on_gpu = self.device == "gpu"
        return kit.Facts(
            args.device, device_name(on_gpu),
            amp_dtype(on_gpu) if args.precision == "amp" else None,
            tf.config.threading.get_intra_op_parallelism_threads() or None,
            extra={"keras_version": keras.__version__, **kit.precision_fields(on_gpu)},
        )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return kit.micro_main(TensorFlowMicro(), argv)


if __name__ == "__main__":
    sys.exit(main())
