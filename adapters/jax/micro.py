"""JAX microbenchmarks for dlperf (implementation kind "micro"), after FAMBench ubench.

  linear        a stack of Flax nn.Dense layers (ReLU between them): forward + backward + SGD
                update with --mode train, forward only with --mode infer, each step one
                jax.jit call (the train state donated). Reported in TF/s.
  embeddingbag  a gather of --bag-size uniformly random rows per sample from a jax array,
                summed (jnp.take + sum: XLA has no embedding-bag op; it fuses the two). Forward
                only with --mode infer; with --mode train the gradient of the summed rows and
                an SGD update of the touched rows only (`table.at[ids].add`, a scatter-add into
                the donated table, as FAMBench's sparse update). Reported in GB/s.

Runs inside the adapter's isolated env and imports only jax, Flax, optax, numpy, the standard
library and the stdlib-only kit in adapters/_shared (workload_kit: the worker sequence,
command line, events, step loop; model_math: the counts below), and from workload.py beside
it the framework's hooks (the thread pool, the CUDA check, the device name). Events contract
as for workload.py.

Counting, defaults and embeddingbag's pool of index batches (another batch each step, so
repeated bags are not served from cache) are the same in every framework: see the
microbenchmark section of adapters/_shared/model_math.py. The linear input and labels are made
once, on the device.

AMP: bfloat16 compute on a CPU, float16 on CUDA (the linear weights stay float32; the loss is
scaled by Flax's DynamicScale under float16). For embeddingbag, amp stores the table in that
dtype (FAMBench's half-precision embedding weights): the bytes count halves with the element
size.

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
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import model_math  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import workload_kit as kit  # noqa: E402
from flax import linen as nn  # noqa: E402
from workload import Jax, device_name, loss_scale  # noqa: E402

TABLE_INIT_BLOCK = 4096  # the table repeats one random block: a full-size RNG pass is slow
LR = 0.01  # FAMBench's linear ubench SGD learning rate


class Stack(nn.Module):
    sizes: tuple[tuple[int, int], ...]
    dtype: object = jnp.float32

    @nn.compact
    def __call__(self, x):
        for k, (_, out) in enumerate(self.sizes):
            x = nn.Dense(out, dtype=self.dtype)(x)
            if k < len(self.sizes) - 1:
                x = nn.relu(x)
        return x


def amp_dtype(args: argparse.Namespace) -> str | None:
    if args.precision != "amp":
        return None
    return "float16" if args.device == "cuda" else "bfloat16"


def linear_step(args: argparse.Namespace, dtype) -> Callable[[], jax.Array]:
    model = Stack(tuple(model_math.linear_sizes(args)), dtype)
    rng = np.random.default_rng(args.seed)
    x = jnp.asarray(rng.standard_normal((args.batch_size, args.in_features), dtype=np.float32))
    labels = jnp.asarray(rng.integers(0, args.out_features, args.batch_size), jnp.int32)
    params = jax.jit(model.init)(jax.random.PRNGKey(args.seed), x[:1])

    if args.mode == "infer":
        forward = jax.jit(lambda p, x: model.apply(p, x)[0, 0])
        return lambda: forward(params, x)

    tx = optax.sgd(LR)
    scaled = dtype == jnp.float16
    state = {"params": params, "opt": tx.init(params)}
    if scaled:
        state["scale"] = loss_scale()

    def loss_fn(p):
        logits = model.apply(p, x).astype(jnp.float32)
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))

    def train(state):
        new = dict(state)
        if scaled:
            new["scale"], finite, loss, grads = state["scale"].value_and_grad(loss_fn)(
                state["params"]
            )
        else:
            loss, grads = jax.value_and_grad(loss_fn)(state["params"])
        updates, new["opt"] = tx.update(grads, state["opt"], state["params"])
        new["params"] = optax.apply_updates(state["params"], updates)
        if scaled:  # keep the old weights where this step's gradients overflowed
            new["params"] = jax.tree_util.tree_map(
                lambda a, b: jnp.where(finite, a, b), new["params"], state["params"]
            )
        return new, loss

    train = jax.jit(train, donate_argnums=(0,))
    current = {"state": state}

    def step() -> jax.Array:
        current["state"], loss = train(current["state"])
        jax.block_until_ready(current["state"])  # the update done, not only the loss
        return loss

    return step


def embeddingbag_step(args: argparse.Namespace, table_dtype) -> Callable[[], jax.Array]:
    e, d, p, b = args.num_embeddings, args.embedding_dim, args.bag_size, args.batch_size

    @jax.jit
    def make_table():
        block = jax.random.normal(jax.random.PRNGKey(args.seed), (min(e, TABLE_INIT_BLOCK), d))
        return jnp.tile(block, (math.ceil(e / TABLE_INIT_BLOCK), 1))[:e].astype(table_dtype)

    table = make_table()
    rng = np.random.default_rng(args.seed)
    pool = model_math.index_pool_size(args)
    ids = jnp.asarray(rng.integers(0, e, (pool, b * p)), jnp.int32)
    grad_out = jnp.asarray(rng.standard_normal((b, d), dtype=np.float32)).astype(table_dtype)

    def bag_sum(rows):
        return rows.reshape(b, p, d).sum(axis=1)

    if args.mode == "infer":

        @jax.jit
        def infer(table, k):
            return bag_sum(jnp.take(table, ids[k % pool], axis=0))[0, 0]

        counter = {"k": 0}

        def infer_step() -> jax.Array:
            counter["k"] += 1
            return infer(table, counter["k"])

        return infer_step

    def train(table, k):
        index = ids[k % pool]
        rows = jnp.take(table, index, axis=0)
        # d(loss)/d(rows) for loss = sum(bag_sum(rows) * grad_out): the backward pass of
        # out.backward(grad_out), then the touched rows updated in place.
        grad = jax.grad(lambda r: jnp.sum(bag_sum(r) * grad_out))(rows)
        table = table.at[index].add(-LR * grad)
        return table, table[0, 0]

    train = jax.jit(train, donate_argnums=(0,))
    current = {"table": table, "k": 0}

    def step() -> jax.Array:
        current["k"] += 1
        current["table"], value = train(current["table"], current["k"])
        return value

    return step


class JaxMicro(Jax):
    """The microbenchmarks' parts of the worker sequence (kit.micro_main runs them); the
    thread pool and the CUDA check are workload.py's."""

    label = ""
    ops = {"linear": "flax.linen.Dense",
           "embeddingbag": "jnp.take + sum (scatter-add update)"}  # fmt: skip

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        args = kit.parse_micro_args(argv, __doc__, threads_help="XLA's CPU thread pool (NPROC)")
        # workload.py's thread hook reads these: one process, one device, no GPU flags.
        args.local_devices, args.num_processes, args.latency_hiding_scheduler = 1, 1, "0"
        return args

    def setup(self, args: argparse.Namespace) -> None:
        if args.device == "cuda":
            jax.config.update("jax_default_matmul_precision", "highest")  # fp32, not TF32

    def make_step(self, args: argparse.Namespace, model: None) -> Callable[[], float | None]:
        amp = amp_dtype(args)
        dtype = jnp.dtype(amp or "float32")
        run = linear_step(args, dtype) if args.model == "linear" else embeddingbag_step(args, dtype)
        train_linear = args.model == "linear" and args.mode == "train"

        def step() -> float | None:
            value = float(run())  # a copy to the host: the device has finished the step
            return value if train_linear else None  # only linear training has a loss

        return step

    def facts(self, args: argparse.Namespace, model: None) -> kit.Facts:
        on_gpu = args.device == "cuda"
        return kit.Facts(
            args.device, device_name(jax.local_devices()[0]), amp_dtype(args), self.threads_used,
            extra={"compiler": "XLA (jax.jit)", **kit.precision_fields(on_gpu)},
        )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return kit.micro_main(JaxMicro(), argv)


if __name__ == "__main__":
    sys.exit(main())
