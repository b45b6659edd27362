"""JAX training workload for dlperf: ResNet50-v1.5 or BERT-base pretraining, synthetic data.

Runs inside the adapter's isolated env and imports only jax, Flax, optax, numpy, the standard
library and the stdlib-only kit beside it (adapters/_shared: workload_kit for the command line,
events, step loop and LoadGen hand-off; model_math for shapes and FLOPs). Same architectures,
optimizers, losses and data shapes as the other five frameworks; follows the dlperf events
contract ($DLPERF_EVENTS: start, ready, step..., end).

    python workload.py --model resnet50 --batch-size 64 --steps 50 [--precision amp]
    python workload.py --model bert --describe   # one JSON line: params, FLOPs; no training
    python workload.py --model resnet50 --mode infer [--loadgen-settings JSON]  # forward only

Flax Linen, not NNX: Flax's own ImageNet example (the `current` profile's official ResNet50)
is written in Linen, so dlperf's workload and the official one use the same modules (nn.Conv,
nn.BatchNorm, nn.Dense), and Linen's pure functions of a parameter pytree are what jax.jit
compiles and donates as they are; NNX would add its split/merge of module state around the
same jitted function.

The train step is one jax.jit-compiled function of (state, batch, step): forward, backward,
the optimizer's update and the BatchNorm statistics, its state donated (--donate 1). Every jax
run is compiled by XLA, so `--xla` is refused as unsupported (there is no uncompiled jax to
compare it with). Data parallel: a jax.sharding Mesh over every device of the job, the batch
sharded along it, the state replicated; XLA inserts the gradient all-reduce. The BatchNorm
statistics are then those of the global batch (jit's global view, as Flax's example gets
with `axis_name='batch'`), where the other frameworks normalise per device.

Several devices on a CPU: `--local-devices N` gives this process N CPU devices
(jax_num_cpu_devices). Several nodes: `--coordinator HOST:PORT --num-processes N
--process-id I` join jax.distributed (CPU collectives through gloo).

Precision: fp32 (on CUDA with jax_default_matmul_precision "highest": fp32 matmuls, not the
TF32 XLA would otherwise pick, as TensorFlow's workload turns TF32 off); --precision amp
computes in --amp-dtype (bfloat16, or float16 with Flax's DynamicScale) with float32 weights,
norms' statistics and logits.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
# jax starts its backend (and reads NPROC, the device count, the XLA flags) on first use, not
# at import: the hooks below set those first.
import flax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import model_math  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import workload_kit as kit  # noqa: E402
from flax import linen as nn  # noqa: E402
from flax.training.dynamic_scale import DynamicScale  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

# PyTorch's BatchNorm: eps 1e-5, running stats updated by 0.1 of the batch (Flax: momentum 0.9)
BN = {"epsilon": 1e-5, "momentum": 0.9}
RESNET_LR, RESNET_MOMENTUM, RESNET_WEIGHT_DECAY = 0.1, 0.9, 1e-4
BERT_LR, BERT_WEIGHT_DECAY, BERT_EPS = 1e-4, 0.01, 1e-8
IGNORE = -100  # an MLM label that is not a masked position

# --------------------------------------------------------------------------------------------
# ResNet50-v1.5 (NHWC; explicit padding reproduces PyTorch's symmetric padding)
# --------------------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 carrying the stride (the v1.5 change), 1x1 expand, plus the shortcut."""

    width: int
    stride: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool):
        conv = partial(nn.Conv, use_bias=False, dtype=self.dtype)
        norm = partial(nn.BatchNorm, use_running_average=not train, dtype=self.dtype, **BN)
        out_ch = self.width * model_math.BOTTLENECK_EXPANSION
        s = (self.stride, self.stride)
        shortcut = x
        if self.stride != 1 or x.shape[-1] != out_ch:
            shortcut = norm()(conv(out_ch, (1, 1), strides=s, padding="VALID")(x))
        y = nn.relu(norm()(conv(self.width, (1, 1), padding="VALID")(x)))
        y = nn.relu(norm()(conv(self.width, (3, 3), strides=s, padding=((1, 1), (1, 1)))(y)))
        y = norm(scale_init=nn.initializers.zeros)(conv(out_ch, (1, 1), padding="VALID")(y))
        return nn.relu(y + shortcut)


class ResNet50(nn.Module):
    num_classes: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = x.astype(self.dtype)
        x = nn.Conv(64, (7, 7), strides=(2, 2), padding=((3, 3), (3, 3)), use_bias=False,
                    dtype=self.dtype)(x)  # fmt: skip
        x = nn.relu(nn.BatchNorm(use_running_average=not train, dtype=self.dtype, **BN)(x))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))  # -inf padding
        for i, (width, blocks) in enumerate(model_math.RESNET50_STAGES):
            for b in range(blocks):
                x = Bottleneck(width, 2 if (b == 0 and i > 0) else 1, self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, dtype=jnp.float32)(x.astype(jnp.float32))


# --------------------------------------------------------------------------------------------
# BERT-base pretraining (MLM + NSP heads, decoder tied to the word embeddings)
# --------------------------------------------------------------------------------------------


def gelu(x):
    return nn.gelu(x, approximate=False)  # BERT's erf GELU, as the other five


class EncoderLayer(nn.Module):
    hidden: int
    heads: int
    intermediate: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool):
        dense = partial(nn.Dense, dtype=self.dtype)
        norm = partial(nn.LayerNorm, epsilon=model_math.BERT_LN_EPS, dtype=self.dtype)
        drop = partial(nn.Dropout, model_math.BERT_DROPOUT, deterministic=not train)
        b, s, _ = x.shape
        d = self.hidden // self.heads

        def split(t):  # [B, S, H] -> [B, S, heads, H/heads]
            return t.reshape(b, s, self.heads, d)

        q, k, v = (split(dense(self.hidden)(x)) for _ in range(3))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.asarray(math.sqrt(d), q.dtype)
        probs = drop()(nn.softmax(scores, axis=-1))
        ctx = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, self.hidden)
        x = norm()(x + drop()(dense(self.hidden)(ctx)))
        y = dense(self.hidden)(gelu(dense(self.intermediate)(x)))
        return norm()(x + drop()(y))


class BertForPreTraining(nn.Module):
    cfg: dict
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, input_ids, token_types, train: bool = False):
        cfg, h = self.cfg, self.cfg["hidden"]
        norm = partial(nn.LayerNorm, epsilon=model_math.BERT_LN_EPS, dtype=self.dtype)
        word = nn.Embed(cfg["vocab"], h, dtype=self.dtype, name="word")
        positions = jnp.arange(input_ids.shape[1])[None, :]
        x = (word(input_ids) + nn.Embed(cfg["max_positions"], h, dtype=self.dtype)(positions)
             + nn.Embed(cfg["type_vocab"], h, dtype=self.dtype)(token_types))  # fmt: skip
        x = nn.Dropout(model_math.BERT_DROPOUT, deterministic=not train)(norm()(x))
        for _ in range(cfg["layers"]):
            x = EncoderLayer(h, cfg["heads"], cfg["intermediate"], self.dtype)(x, train)
        pooled = jnp.tanh(nn.Dense(h, dtype=self.dtype)(x[:, 0]))
        nsp_logits = nn.Dense(2, dtype=jnp.float32)(pooled.astype(jnp.float32))
        t = norm()(gelu(nn.Dense(h, dtype=self.dtype)(x)))
        # Tied decoder: logits against the word-embedding matrix, in float32 for the loss.
        bias = self.param("mlm_bias", nn.initializers.zeros, (cfg["vocab"],), jnp.float32)
        mlm_logits = word.attend(t).astype(jnp.float32) + bias
        return mlm_logits, nsp_logits


# --------------------------------------------------------------------------------------------
# The model, its data, its loss
# --------------------------------------------------------------------------------------------


def build_model(args: argparse.Namespace, dtype: Any = jnp.float32) -> nn.Module:
    if args.model == "resnet50":
        return ResNet50(args.num_classes, dtype)
    return BertForPreTraining(model_math.BERT_BASE, dtype)


def example_inputs(args: argparse.Namespace, rows: int = 1) -> tuple:
    if args.model == "resnet50":
        return (jnp.zeros((rows, args.image_size, args.image_size, 3), jnp.float32),)
    ids = jnp.zeros((rows, args.seq_len), jnp.int32)
    return ids, ids


def init_variables(args: argparse.Namespace, model: nn.Module) -> dict:
    """The model's variables from --seed, the same on every process (so replicas agree)."""
    return model.init(jax.random.PRNGKey(args.seed), *example_inputs(args), train=False)


def count_params(params: Any) -> int:
    """Trainable weights only (BatchNorm's running statistics live in batch_stats, not in
    params); the tied embedding is one array, so it counts once."""
    return int(sum(math.prod(p.shape) for p in jax.tree_util.tree_leaves(params)))


def make_data(args: argparse.Namespace, rows: int, seed: int) -> tuple[np.ndarray, ...]:
    """The synthetic batch of `rows` rows on the host (the caller puts it on the devices once,
    and every step reuses it): the other frameworks' shapes and label rules."""
    g = np.random.default_rng(seed)
    if args.model == "resnet50":
        images = g.standard_normal((rows, args.image_size, args.image_size, 3), np.float32)
        labels = g.integers(0, args.num_classes, (rows,), dtype=np.int32)
        return images, labels
    s, vocab = args.seq_len, model_math.BERT_BASE["vocab"]
    input_ids = g.integers(0, vocab, (rows, s), dtype=np.int32)
    token_types = np.concatenate(
        [np.zeros((rows, s // 2), np.int32), np.ones((rows, s - s // 2), np.int32)], axis=1
    )
    masked = g.random((rows, s)) < 0.15
    masked[:, min(1, s - 1)] = True  # at least one masked position per sequence
    mlm_labels = np.where(masked, g.integers(0, vocab, (rows, s), dtype=np.int32), IGNORE)
    nsp_labels = g.integers(0, 2, (rows,), dtype=np.int32)
    return input_ids, token_types, mlm_labels.astype(np.int32), nsp_labels


def cross_entropy(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


def loss_of(args: argparse.Namespace, outputs: Any, data: tuple) -> jax.Array:
    """ResNet50: mean cross entropy. BERT: MLM (mean over masked positions) + NSP."""
    if args.model == "resnet50":
        return jnp.mean(cross_entropy(outputs, data[1]))
    mlm_logits, nsp_logits = outputs
    mlm_labels, nsp_labels = data[2], data[3]
    keep = (mlm_labels != IGNORE).astype(jnp.float32)
    mlm = jnp.sum(cross_entropy(mlm_logits, jnp.maximum(mlm_labels, 0)) * keep) / jnp.sum(keep)
    return mlm + jnp.mean(cross_entropy(nsp_logits, nsp_labels))


def optimizer(args: argparse.Namespace) -> optax.GradientTransformation:
    """The other five's optimizers: ResNet50 SGD (lr 0.1, momentum 0.9) with PyTorch's weight
    decay (L2 added to the gradient, before the momentum); BERT AdamW (lr 1e-4, decoupled
    weight decay 0.01, eps 1e-8)."""
    if args.model == "resnet50":
        return optax.chain(
            optax.add_decayed_weights(RESNET_WEIGHT_DECAY),
            optax.sgd(RESNET_LR, momentum=RESNET_MOMENTUM),
        )
    return optax.adamw(BERT_LR, eps=BERT_EPS, weight_decay=BERT_WEIGHT_DECAY)


# --------------------------------------------------------------------------------------------
# The jitted train step and the forward
# --------------------------------------------------------------------------------------------


def model_inputs(args: argparse.Namespace, data: tuple) -> tuple:
    return data[:1] if args.model == "resnet50" else data[:2]


def make_train_step(args: argparse.Namespace, model: nn.Module, tx: optax.GradientTransformation,
                    scaled: bool) -> Callable:  # fmt: skip
    """step(state, data) -> (state, loss): the whole training step, for jax.jit. `state` is a
    dict: params, batch_stats (ResNet50), opt_state, step, and under float16 the loss scale
    (Flax's DynamicScale: the update is skipped and the scale halved when a gradient is not
    finite)."""
    resnet = args.model == "resnet50"

    def loss_fn(params, state, data):
        variables = {"params": params}
        if resnet:
            variables["batch_stats"] = state["batch_stats"]
        rng = jax.random.fold_in(jax.random.PRNGKey(args.seed + 1), state["step"])
        outputs, updates = model.apply(
            variables, *model_inputs(args, data), train=True, rngs={"dropout": rng},
            mutable=["batch_stats"] if resnet else [],
        )  # fmt: skip
        return loss_of(args, outputs, data), updates

    def step(state, data):
        new = dict(state)
        if scaled:
            grad_fn = state["scale"].value_and_grad(loss_fn, has_aux=True)
            new["scale"], finite, (loss, updates), grads = grad_fn(state["params"], state, data)
        else:
            grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
            (loss, updates), grads = grad_fn(state["params"], state, data)
        deltas, opt_state = tx.update(grads, state["opt_state"], state["params"])
        params = optax.apply_updates(state["params"], deltas)
        if scaled:  # keep the old weights where this step's gradients overflowed
            keep = partial(jnp.where, finite)
            params = jax.tree_util.tree_map(keep, params, state["params"])
            opt_state = jax.tree_util.tree_map(keep, opt_state, state["opt_state"])
        new.update(params=params, opt_state=opt_state, step=state["step"] + 1)
        if resnet:
            new["batch_stats"] = updates["batch_stats"]
        return new, loss

    return step


def make_forward(args: argparse.Namespace, model: nn.Module) -> Callable:
    """forward(variables, data) -> the logits (BERT: the MLM logits), in eval mode."""

    def forward(variables, data):
        out = model.apply(variables, *model_inputs(args, data), train=False)
        return out if args.model == "resnet50" else out[0]

    return forward


# --------------------------------------------------------------------------------------------
# The command line and the framework's hooks
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = kit.model_parser(
        __doc__,
        xla_help="not a switch for jax: every step is jax.jit-compiled by XLA (reported as "
        "unsupported)",
        threads_help="XLA's CPU thread pool size (NPROC)",
    )
    # Best practice, each switchable (the adapter passes its defaults for the device and model):
    p.add_argument(
        "--donate",
        choices=("0", "1"),
        default="0",
        help="1: donate the train state's buffers to the jitted step",
    )
    p.add_argument(
        "--amp-dtype",
        choices=("bfloat16", "float16"),
        help="--precision amp's compute dtype (default bfloat16 on a CPU, float16 on "
        "CUDA); float16 with DynamicScale loss scaling",
    )
    p.add_argument(
        "--latency-hiding-scheduler",
        choices=("0", "1"),
        default="0",
        help="1: XLA's GPU latency-hiding scheduler (CUDA)",
    )
    # The job, from the node agent (dlperf.adapters.jax LAUNCH):
    p.add_argument(
        "--local-devices",
        type=int,
        default=1,
        help="devices this process drives (a CPU emulates them)",
    )
    p.add_argument("--coordinator", help="HOST:PORT of process 0 (jax.distributed)")
    p.add_argument("--num-processes", type=int, default=1)
    p.add_argument("--process-id", type=int, default=0)  # fmt: skip
    args = kit.parse_model_args(p, argv, model_math.BERT_BASE["max_positions"])
    if args.local_devices < 1 or not 0 <= args.process_id < args.num_processes:
        p.error("--local-devices must be >= 1 and --process-id in 0..--num-processes-1")
    if args.num_processes > 1 and not args.coordinator:
        p.error("--num-processes > 1 needs --coordinator HOST:PORT")
    return args


def loss_scale() -> DynamicScale:
    """Flax's dynamic loss scale with its counters as typed arrays: the step's outputs then
    have its inputs' types, so the jitted step compiles once (Python numbers in the defaults
    are weakly typed, and the second call would compile again)."""
    return DynamicScale(fin_steps=jnp.zeros((), jnp.int32), scale=jnp.float32(2.0**16))


def amp_dtype(args: argparse.Namespace) -> str | None:
    if args.precision != "amp":
        return None
    return args.amp_dtype or ("float16" if args.device == "cuda" else "bfloat16")


def device_name(device: jax.Device) -> str:
    return kit.cpu_name() if device.platform == "cpu" else str(device.device_kind)


class Jax(kit.Hooks):
    """This framework's parts of the worker sequence (kit.main runs them)."""

    framework, version = "jax", jax.__version__
    label = f"jax {jax.__version__} (flax {flax.__version__}, jax.jit: XLA-compiled)"
    practice_empty = "none for this model and device"
    warn_bf16 = True
    threads_used: int | None = None

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return parse_args(argv)

    def threads(self, args: argparse.Namespace) -> None:
        if args.describe:
            return
        # Read when the backend starts (nothing has started it yet): XLA's CPU thread pool,
        # this process's devices, the GPU flags.
        # Simulated nodes share the host's cores: a share per process (the launcher counts
        # ranks, and each jax process drives --local-devices of them).
        on_host = max(1, kit.ranks_on_host() // args.local_devices)
        threads = args.threads or (kit.cores_per_rank(on_host) if on_host > 1 else 0)
        if threads and args.device == "cpu":
            os.environ["NPROC"] = str(threads)
            self.threads_used = threads
        if args.device == "cpu":
            jax.config.update("jax_platforms", "cpu")
            jax.config.update("jax_num_cpu_devices", args.local_devices)
            if args.num_processes > 1:
                jax.config.update("jax_cpu_collectives_implementation", "gloo")
        if args.latency_hiding_scheduler == "1" and args.device == "cuda":
            flag = "--xla_gpu_enable_latency_hiding_scheduler=true"
            os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()

    def describe(self, args: argparse.Namespace) -> dict[str, object]:
        shapes = jax.eval_shape(lambda: init_variables(args, build_model(args)))
        return {"params": count_params(shapes["params"]),
                "flops_per_sample": model_math.flops_per_sample(args)}  # fmt: skip

    def cuda_missing(self) -> str | None:
        try:
            jax.devices("gpu")
        except RuntimeError as exc:
            return f"jax {jax.__version__} sees no GPU: {kit.error_line(exc)}"
        return None

    def place(self, args: argparse.Namespace) -> kit.Place:
        if args.num_processes > 1:
            host = args.coordinator.rsplit(":", 1)[0].strip("[]")
            try:  # jax would wait its whole 300 s start-up timeout, then abort in C++
                socket.getaddrinfo(host, None)
            except OSError as exc:
                sys.exit(f"error: cannot resolve the coordinator's host {host!r} ({exc}): "
                         "name node 0 by an address every node can reach")  # fmt: skip
            jax.distributed.initialize(
                coordinator_address=args.coordinator,
                num_processes=args.num_processes,
                process_id=args.process_id,
            )
        local = jax.local_device_count()
        rank = jax.process_index() * local
        return kit.Place(rank, jax.device_count(), replicas=local)

    def setup(self, args: argparse.Namespace) -> None:
        if args.xla:
            raise kit.Unsupported(
                "--xla: jax always compiles with XLA (every jax step runs under jax.jit), so "
                "there is no uncompiled jax to set it against; jax results without --xla are "
                "already XLA-compiled"
            )
        if args.device == "cuda" and args.precision == "fp32":
            jax.config.update("jax_default_matmul_precision", "highest")  # fp32, not TF32
        self.dtype = {None: jnp.float32, "bfloat16": jnp.bfloat16,
                      "float16": jnp.float16}[amp_dtype(args)]  # fmt: skip
        # Training: one mesh over every device of the job, gradients reduced by the compiler.
        # Inference: each process serves on its own devices (LoadGen drives process 0).
        devices = jax.devices() if args.mode == "train" else jax.local_devices()
        self.mesh = Mesh(np.array(devices), ("data",))
        self.replicated = NamedSharding(self.mesh, P())
        self.sharded = NamedSharding(self.mesh, P("data"))
        self.applied: dict[str, object] = {}

    def build(self, args: argparse.Namespace) -> dict:
        model = build_model(args, self.dtype)
        init = jax.jit(lambda: init_variables(args, model), out_shardings=self.replicated)
        variables = dict(init())
        self.model = model
        # Each process its own synthetic rows (seed + process), made once, on the devices.
        rows = args.batch_size * jax.local_device_count()
        host = make_data(args, rows, args.seed + 1000 * (jax.process_index() + 1))
        if args.mode == "infer":
            local = np.array(jax.local_devices())
            self.data = tuple(jax.device_put(a, NamedSharding(Mesh(local, ("data",)), P("data")))
                              for a in host)  # fmt: skip
        else:
            self.data = tuple(jax.make_array_from_process_local_data(self.sharded, a)
                              for a in host)  # fmt: skip
        return variables

    def make_step(self, args: argparse.Namespace, variables: dict) -> Callable[[], float]:
        tx = optimizer(args)
        scaled = self.dtype == jnp.float16
        state = {
            "params": variables["params"],
            "opt_state": jax.jit(tx.init, out_shardings=self.replicated)(variables["params"]),
            "step": jax.device_put(jnp.zeros((), jnp.int32), self.replicated),
        }
        if "batch_stats" in variables:
            state["batch_stats"] = variables["batch_stats"]
        if scaled:
            state["scale"] = jax.device_put(loss_scale(), self.replicated)
        donate = args.donate == "1"
        self.applied["donate"] = args.donate
        if args.precision == "amp":
            self.applied["amp_dtype"] = amp_dtype(args) + (" + DynamicScale" if scaled else "")
        if args.latency_hiding_scheduler == "1":
            self.applied["latency_hiding_scheduler"] = (
                "1" if args.device == "cuda" else "1 (no effect: no GPU)"
            )
        train_step = jax.jit(
            make_train_step(args, self.model, tx, scaled),
            out_shardings=(self.replicated, self.replicated),
            donate_argnums=(0,) if donate else (),
        )
        data = self.data
        current = {"state": state}

        def run():
            current["state"], loss = train_step(current["state"], data)
            # The device has finished the step (the update included) once every output is.
            jax.block_until_ready((current["state"], loss))
            return float(loss)

        return run

    def make_predict(self, args: argparse.Namespace, variables: dict) -> Callable[[int], float]:
        """Inference (--mode infer): the model in eval mode (BatchNorm's running statistics, no
        dropout), jitted once for the full batch. XLA compiles per shape, so predict(n) always
        runs the whole batch (the rows past n are wasted work), as TensorFlow's does under
        --xla: a smaller batch LoadGen forms costs no new compilation."""
        if args.precision == "amp":
            self.applied["amp_dtype"] = amp_dtype(args)
        forward = jax.jit(make_forward(args, self.model))
        data = self.data
        local = NamedSharding(Mesh(np.array(jax.local_devices()), ("data",)), P())
        variables = jax.device_put(variables, local)

        def predict(n: int) -> float:
            out = forward(variables, data)
            out.block_until_ready()
            return float(out.reshape(-1)[0])

        return predict

    def facts(self, args: argparse.Namespace, variables: dict) -> kit.Facts:
        first = jax.local_devices()[0]
        world = jax.device_count() if args.mode == "train" else None
        return kit.Facts(
            args.device, device_name(first), amp_dtype(args), self.threads_used,
            params=count_params(variables["params"]), flops=model_math.flops_per_sample(args),
            practice=self.applied, world_size=world,
            extra={"flax_version": flax.__version__, "optax_version": optax.__version__,
                   "local_devices": jax.local_device_count(), "compiler": "XLA (jax.jit)",
                   **kit.precision_fields(args.device == "cuda")},
        )  # fmt: skip

    def teardown(self) -> None:
        if jax.process_count() > 1:
            jax.distributed.shutdown()


def main(argv: list[str] | None = None) -> int:
    return kit.main(Jax(), argv)


if __name__ == "__main__":
    sys.exit(main())
