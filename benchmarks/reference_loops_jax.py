"""Plain hand-written JAX training loops (Flax Linen + optax): the reference dlperf's jax workload
is held against.

No dlperf code: jax, Flax, optax and numpy only, written the way a JAX user writes a training
benchmark, in the style of Flax's ImageNet example: Linen modules, a flax.training TrainState
(with batch_stats, and a DynamicScale under float16), one jax.jit-compiled train step with the
state donated, the dropout key folded in from the step count. One process is one repeat: it runs
`skip + measure` steps on one synthetic batch put on the device once, waits for the device
(block_until_ready) only at the two ends of the window, and prints one JSON line as
reference_loops.py does: {"throughput": samples/s over the window, "model": ..., "params": ...}.

    python reference_loops_jax.py --model resnet50 --batch-size 16 --image-size 64 --threads 2
    python reference_loops_jax.py --model bert --device cuda --amp --batch-size 64

The model math is that of dlperf's jax workload (adapters/jax/workload.py), written out again
here, since the point is the harness around it, not another network: ResNet50-v1.5 (NHWC,
PyTorch's symmetric paddings, BatchNorm eps 1e-5 and momentum 0.9, each block's last BatchNorm
scale zero-initialised, a float32 head) trained by SGD (lr 0.1, momentum 0.9, L2 1e-4 added to
the gradient); BERT-base pretraining (post-LN, separate q/k/v projections, erf GELU, dropout
0.1 on the embeddings, the attention probabilities and both residual branches, an MLM decoder
tied to the word embeddings in float32, the NSP head) trained by AdamW (lr 1e-4, eps 1e-8,
weight decay 0.01). The parameter counts are the workload's: 25,557,032 and 110,106,428. Same
precision choices too: fp32 (on CUDA at matmul precision "highest", not TF32), --amp bfloat16
on a CPU and float16 with Flax's DynamicScale on CUDA, weights float32.

It lives apart from reference_loops.py because that file imports torch at its top (its models
subclass torch.nn.Module) and dlperf's jax env has no torch.

Diagnostic (`--model-source dlperf --workload PATH`): the same loop around dlperf's own Flax
modules, built by adapters/jax/workload.py's own `parse_args` and `build_model`, so that a gap
can be told apart into the model and the harness.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from functools import partial
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from flax.training import train_state
from flax.training.dynamic_scale import DynamicScale

VOCAB, MAX_POSITIONS, TYPE_VOCAB = 30522, 512, 2
IGNORE = -100  # an MLM label that is not a masked position


# --------------------------------------------------------------------------- models


class BottleneckBlock(nn.Module):
    filters: int
    strides: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool):
        conv = partial(nn.Conv, use_bias=False, dtype=self.dtype)
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.9,
                       epsilon=1e-5, dtype=self.dtype)  # fmt: skip
        s = (self.strides, self.strides)
        residual = x
        y = nn.relu(norm()(conv(self.filters, (1, 1), padding="VALID")(x)))
        y = nn.relu(norm()(conv(self.filters, (3, 3), s, padding=((1, 1), (1, 1)))(y)))
        y = norm(scale_init=nn.initializers.zeros)(conv(self.filters * 4, (1, 1),
                                                        padding="VALID")(y))  # fmt: skip
        if residual.shape != y.shape:
            residual = norm()(conv(self.filters * 4, (1, 1), s, padding="VALID")(residual))
        return nn.relu(residual + y)


class ResNet50(nn.Module):
    num_classes: int = 1000
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Conv(64, (7, 7), (2, 2), padding=((3, 3), (3, 3)), use_bias=False,
                    dtype=self.dtype)(x.astype(self.dtype))  # fmt: skip
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5,
                         dtype=self.dtype)(x)  # fmt: skip
        x = nn.max_pool(nn.relu(x), (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for i, blocks in enumerate((3, 4, 6, 3)):
            for j in range(blocks):
                x = BottleneckBlock(64 * 2**i, 2 if i > 0 and j == 0 else 1, self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2)).astype(jnp.float32)
        return nn.Dense(self.num_classes)(x)


class EncoderLayer(nn.Module):
    hidden: int = 768
    heads: int = 12
    inner: int = 3072
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool):
        dense = partial(nn.Dense, dtype=self.dtype)
        norm = partial(nn.LayerNorm, epsilon=1e-12, dtype=self.dtype)
        dropout = partial(nn.Dropout, 0.1, deterministic=not train)
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = (dense(h)(x).reshape(b, s, self.heads, d) for _ in range(3))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.asarray(math.sqrt(d), q.dtype)
        probs = dropout()(nn.softmax(scores, axis=-1))
        a = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, h)
        x = norm()(x + dropout()(dense(h)(a)))
        up = nn.gelu(dense(self.inner)(x), approximate=False)
        return norm()(x + dropout()(dense(h)(up)))


class BertForPreTraining(nn.Module):
    hidden: int = 768
    layers: int = 12
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, ids, types, train: bool = False):
        h = self.hidden
        words = nn.Embed(VOCAB, h, dtype=self.dtype)
        pos = jnp.arange(ids.shape[1])[None, :]
        x = (words(ids) + nn.Embed(MAX_POSITIONS, h, dtype=self.dtype)(pos)
             + nn.Embed(TYPE_VOCAB, h, dtype=self.dtype)(types))  # fmt: skip
        x = nn.LayerNorm(epsilon=1e-12, dtype=self.dtype)(x)
        x = nn.Dropout(0.1, deterministic=not train)(x)
        for _ in range(self.layers):
            x = EncoderLayer(h, dtype=self.dtype)(x, train)
        pooled = jnp.tanh(nn.Dense(h, dtype=self.dtype)(x[:, 0]))
        nsp = nn.Dense(2)(pooled.astype(jnp.float32))
        t = nn.gelu(nn.Dense(h, dtype=self.dtype)(x), approximate=False)
        t = nn.LayerNorm(epsilon=1e-12, dtype=self.dtype)(t)
        bias = self.param("mlm_bias", nn.initializers.zeros, (VOCAB,), jnp.float32)
        return words.attend(t).astype(jnp.float32) + bias, nsp


def dlperf_model(args: argparse.Namespace, dtype: Any) -> nn.Module:
    """dlperf's own Flax modules, for the diagnostic row only: built by the workload's own entry
    points (`parse_args`, `build_model`), so this loop trains exactly the network `dlperf run`
    trains, wherever its classes live."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.workload)))
    spec = importlib.util.spec_from_file_location("dlperf_jax_workload", args.workload)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Flax's dataclasses look their module up by name
    spec.loader.exec_module(module)
    argv = ["--model", args.model, "--device", args.device]
    argv += ["--image-size", str(args.image_size), "--seq-len", str(args.seq_len)]
    return module.build_model(module.parse_args(argv), dtype)


# --------------------------------------------------------------------------- loop


class TrainState(train_state.TrainState):
    batch_stats: Any = None
    dynamic_scale: DynamicScale | None = None


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("resnet50", "bert"), required=True)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--amp", action="store_true", help="bfloat16 on a CPU, float16 on CUDA")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--skip", type=int, default=20)
    p.add_argument("--measure", type=int, default=100)
    p.add_argument("--threads", type=int, help="XLA's CPU thread pool (NPROC)")
    p.add_argument("--model-source", choices=("reference", "dlperf"), default="reference")
    p.add_argument("--workload", help="dlperf's adapters/jax/workload.py (diagnostic)")
    args = p.parse_args()
    if args.model_source == "dlperf" and not args.workload:
        p.error("--model-source dlperf needs --workload (dlperf's adapters/jax/workload.py)")
    return args


def synthetic_batch(args: argparse.Namespace) -> tuple[np.ndarray, ...]:
    """One batch of random images and labels, or of tokens with 15 % of them masked."""
    g, b = np.random.default_rng(0), args.batch_size
    if args.model == "resnet50":
        size = args.image_size
        return g.standard_normal((b, size, size, 3), np.float32), g.integers(0, 1000, b, np.int32)
    s = args.seq_len
    ids = g.integers(0, VOCAB, (b, s), np.int32)
    types = np.repeat((np.arange(s) >= s // 2).astype(np.int32)[None], b, axis=0)
    mlm_labels = np.where(g.random((b, s)) < 0.15, ids, IGNORE).astype(np.int32)
    return ids, types, mlm_labels, g.integers(0, 2, b, np.int32)


def loss_fn(params, state: TrainState, batch: tuple, dropout_key, resnet: bool):
    """The loss and the new BatchNorm statistics: ResNet50 cross entropy; BERT's MLM loss over
    the masked positions plus its NSP loss."""
    ce = optax.softmax_cross_entropy_with_integer_labels
    if resnet:
        logits, updates = state.apply_fn(
            {"params": params, "batch_stats": state.batch_stats}, batch[0], train=True,
            mutable=["batch_stats"],
        )  # fmt: skip
        return ce(logits, batch[1]).mean(), updates["batch_stats"]
    ids, types, mlm_labels, nsp_labels = batch
    mlm, nsp = state.apply_fn({"params": params}, ids, types, train=True,
                              rngs={"dropout": dropout_key})  # fmt: skip
    masked = (mlm_labels != IGNORE).astype(jnp.float32)
    mlm_loss = (ce(mlm, jnp.maximum(mlm_labels, 0)) * masked).sum() / masked.sum()
    return mlm_loss + ce(nsp, nsp_labels).mean(), None


def train_step(state: TrainState, batch: tuple, key, resnet: bool):
    dropout_key = jax.random.fold_in(key, state.step)
    f = partial(loss_fn, state=state, batch=batch, dropout_key=dropout_key, resnet=resnet)
    if state.dynamic_scale is not None:
        grad_fn = state.dynamic_scale.value_and_grad(f, has_aux=True)
        scale, finite, (loss, batch_stats), grads = grad_fn(state.params)
    else:
        (loss, batch_stats), grads = jax.value_and_grad(f, has_aux=True)(state.params)
    new = state.apply_gradients(grads=grads, batch_stats=batch_stats)
    if state.dynamic_scale is not None:  # skip the update where the gradients overflowed
        keep = partial(jnp.where, finite)
        new = new.replace(
            params=jax.tree_util.tree_map(keep, new.params, state.params),
            opt_state=jax.tree_util.tree_map(keep, new.opt_state, state.opt_state),
            dynamic_scale=scale,
        )
    return new, loss


def main() -> int:
    args = parse_args()
    if args.threads and args.device == "cpu":
        os.environ["NPROC"] = str(args.threads)  # read when jax starts its CPU backend
    if args.device == "cpu":
        jax.config.update("jax_platforms", "cpu")
    elif not args.amp:
        jax.config.update("jax_default_matmul_precision", "highest")  # fp32, not TF32
    half = args.amp and args.device == "cuda"
    dtype = (jnp.float16 if half else jnp.bfloat16) if args.amp else jnp.float32
    resnet = args.model == "resnet50"
    if args.model_source == "dlperf":
        model, what = dlperf_model(args, dtype), f"dlperf {'ResNet50' if resnet else 'BERT'} class"
    elif resnet:
        model, what = ResNet50(dtype=dtype), "Flax Linen ResNet50-v1.5"
    else:
        model, what = BertForPreTraining(dtype=dtype), "Flax Linen BERT-base"

    batch = tuple(jax.device_put(a) for a in synthetic_batch(args))
    inputs = batch[:1] if resnet else batch[:2]
    variables = jax.jit(partial(model.init, train=False))(jax.random.PRNGKey(0), *inputs)
    if resnet:
        tx = optax.chain(optax.add_decayed_weights(1e-4), optax.sgd(0.1, momentum=0.9))
    else:
        tx = optax.adamw(1e-4, eps=1e-8, weight_decay=0.01)
    # Typed counters (Python numbers would be weakly typed: a second compilation at step 2).
    scale = DynamicScale(fin_steps=jnp.zeros((), jnp.int32), scale=jnp.float32(2.0**16))
    state = TrainState.create(
        apply_fn=model.apply, params=variables["params"], tx=tx,
        batch_stats=variables.get("batch_stats"), dynamic_scale=scale if half else None,
    )  # fmt: skip
    state = state.replace(step=jnp.zeros((), jnp.int32))
    step = jax.jit(partial(train_step, resnet=resnet), donate_argnums=0)
    key = jax.random.PRNGKey(1)

    loss = None
    for _ in range(args.skip):
        state, loss = step(state, batch, key)
    jax.block_until_ready((state, loss))
    start = time.perf_counter()
    for _ in range(args.measure):
        state, loss = step(state, batch, key)
    jax.block_until_ready((state, loss))
    elapsed = time.perf_counter() - start
    facts = {
        "throughput": args.measure * args.batch_size / elapsed,
        "model": what,
        "params": sum(math.prod(p.shape) for p in jax.tree_util.tree_leaves(state.params)),
        "jax": jax.__version__,
        "flax": flax.__version__,
        "device": str(jax.devices()[0].device_kind),
        "threads": int(os.environ.get("NPROC", 0)) or os.cpu_count(),
        "loss": float(loss),
    }
    print(json.dumps(facts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
