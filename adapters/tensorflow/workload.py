"""TensorFlow training workload for dlperf: ResNet50-v1.5 or BERT-base pretraining, synthetic data.

Runs inside the adapter's isolated env and imports only TensorFlow/Keras, numpy, the standard
library and the stdlib-only kit beside it (adapters/_shared: workload_kit for the command line,
events, step loop and LoadGen hand-off; model_math for shapes and FLOPs). Keras layers, a custom
training step in `tf.function`; `--xla` compiles that step with `jit_compile=True`. Same
architectures, optimizers, losses and data shapes as the PyTorch workload; follows the dlperf
events contract ($DLPERF_EVENTS: start, ready, step..., end).

    python workload.py --model resnet50 --batch-size 64 --steps 50 [--precision amp] [--xla]
    python workload.py --model bert --describe   # one JSON line: params, FLOPs; no training
    python workload.py --model resnet50 --mode infer [--loadgen-settings JSON]  # forward only

Best practice (the adapter passes its defaults; see adapters/tensorflow/__init__.py):
`--data-format channels_last|channels_first` (ResNet50's layout) and `--gpu-thread-mode MODE`
(TF_GPU_THREAD_MODE). What really applied is the start event's `practice`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import workload_kit as kit  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import layers  # noqa: E402

# PyTorch's BatchNorm defaults, so both frameworks normalise alike (Keras: eps 1e-3, mom 0.99).
BN = {"epsilon": 1e-5, "momentum": 0.9}

# --------------------------------------------------------------------------------------------
# ResNet50-v1.5 (channels_last = NHWC, or channels_first = NCHW with --data-format; explicit
# zero padding reproduces PyTorch's symmetric padding). Weights have the same shapes and are
# drawn in the same order in both layouts, so one seed gives the same network.
# --------------------------------------------------------------------------------------------


def conv(x, filters: int, kernel: int, stride: int = 1, df: str = "channels_last"):
    pad = kernel // 2
    if pad:
        x = layers.ZeroPadding2D(pad, data_format=df)(x)
    return layers.Conv2D(filters, kernel, strides=stride, use_bias=False, data_format=df)(x)


def batch_norm(data_format: str, **kw) -> layers.BatchNormalization:
    return layers.BatchNormalization(axis=1 if data_format == "channels_first" else -1, **BN, **kw)


def bottleneck(x, width: int, stride: int, data_format: str = "channels_last"):
    """1x1 reduce, 3x3 carrying the stride (the v1.5 change), 1x1 expand, plus the shortcut."""
    df = data_format
    out_ch = width * model_math.BOTTLENECK_EXPANSION
    shortcut = x
    if stride != 1 or x.shape[1 if df == "channels_first" else -1] != out_ch:
        shortcut = batch_norm(df)(conv(x, out_ch, 1, stride, df))
    y = layers.ReLU()(batch_norm(df)(conv(x, width, 1, 1, df)))
    y = layers.ReLU()(batch_norm(df)(conv(y, width, 3, stride, df)))
    y = batch_norm(df, gamma_initializer="zeros")(conv(y, out_ch, 1, 1, df))
    return layers.ReLU()(layers.Add()([y, shortcut]))


def resnet50(image_size: int, num_classes: int, data_format: str = "channels_last") -> keras.Model:
    df = data_format
    shape = (3, image_size, image_size) if df == "channels_first" else (image_size, image_size, 3)
    inputs = keras.Input(shape)
    x = layers.ReLU()(batch_norm(df)(conv(inputs, 64, 7, 2, df)))
    # Zero padding before the max pool equals PyTorch's -inf padding: inputs are >= 0 (ReLU).
    x = layers.MaxPooling2D(3, 2, data_format=df)(layers.ZeroPadding2D(1, data_format=df)(x))
    for i, (width, blocks) in enumerate(model_math.RESNET50_STAGES):
        for b in range(blocks):
            x = bottleneck(x, width, 2 if b == 0 and i > 0 else 1, df)
    x = layers.GlobalAveragePooling2D(data_format=df)(x)
    # The head stays float32 under mixed precision so the loss is computed in full precision.
    return keras.Model(inputs, layers.Dense(num_classes, dtype="float32")(x), name="resnet50")


# --------------------------------------------------------------------------------------------
# BERT-base pretraining (MLM + NSP heads, decoder tied to the word embeddings)
# --------------------------------------------------------------------------------------------


class EncoderLayer(layers.Layer):
    def __init__(self, hidden: int, heads: int, intermediate: int, **kw) -> None:
        super().__init__(**kw)
        self.heads, self.hidden = heads, hidden
        self.q, self.k, self.v, self.o = (layers.Dense(hidden) for _ in range(4))
        self.ff_in = layers.Dense(intermediate)
        self.ff_out = layers.Dense(hidden)
        self.attn_norm = layers.LayerNormalization(epsilon=model_math.BERT_LN_EPS)
        self.out_norm = layers.LayerNormalization(epsilon=model_math.BERT_LN_EPS)
        self.drop = layers.Dropout(model_math.BERT_DROPOUT)

    def call(self, x, training=False):
        b, s = tf.shape(x)[0], tf.shape(x)[1]
        d = self.hidden // self.heads

        def split(t):  # [B, S, H] -> [B, heads, S, H/heads]
            return tf.transpose(tf.reshape(t, (b, s, self.heads, d)), (0, 2, 1, 3))

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = tf.matmul(q, k, transpose_b=True) / tf.cast(math.sqrt(d), q.dtype)
        probs = self.drop(tf.nn.softmax(scores, axis=-1), training=training)
        ctx = tf.reshape(tf.transpose(tf.matmul(probs, v), (0, 2, 1, 3)), (b, s, self.hidden))
        x = self.attn_norm(x + self.drop(self.o(ctx), training=training))
        y = self.ff_out(keras.activations.gelu(self.ff_in(x), approximate=False))
        return self.out_norm(x + self.drop(y, training=training))


class BertForPreTraining(keras.Model):
    def __init__(self, cfg: dict[str, int]) -> None:
        super().__init__(name="bert")
        h = cfg["hidden"]
        self.vocab = cfg["vocab"]
        self.word = layers.Embedding(cfg["vocab"], h)
        self.position = layers.Embedding(cfg["max_positions"], h)
        self.token_type = layers.Embedding(cfg["type_vocab"], h)
        self.emb_norm = layers.LayerNormalization(epsilon=model_math.BERT_LN_EPS)
        self.drop = layers.Dropout(model_math.BERT_DROPOUT)
        self.encoder = [
            EncoderLayer(h, cfg["heads"], cfg["intermediate"]) for _ in range(cfg["layers"])
        ]
        self.pooler = layers.Dense(h, activation="tanh")
        self.nsp = layers.Dense(2, dtype="float32")
        self.mlm_transform = layers.Dense(h)
        self.mlm_norm = layers.LayerNormalization(epsilon=model_math.BERT_LN_EPS)

    def build(self, input_shape) -> None:
        # autocast=False: under a mixed policy Keras would hand call() a bf16/fp16 copy, which
        # cannot be added to the float32 logits.
        self.mlm_bias = self.add_weight(
            shape=(self.vocab,),
            initializer="zeros",
            name="mlm_bias",
            dtype="float32",
            autocast=False,
        )
        super().build(input_shape)

    def call(self, inputs, training=False):
        input_ids, token_types = inputs
        positions = tf.range(tf.shape(input_ids)[1])[tf.newaxis, :]
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_types)
        x = self.drop(self.emb_norm(x), training=training)
        for layer in self.encoder:
            x = layer(x, training=training)
        nsp_logits = self.nsp(self.pooler(x[:, 0]))
        h = self.mlm_norm(keras.activations.gelu(self.mlm_transform(x), approximate=False))
        # Tied decoder: logits against the word-embedding matrix, in float32 for the loss.
        table = tf.cast(self.word.embeddings, h.dtype)
        mlm_logits = tf.cast(tf.matmul(h, table, transpose_b=True), tf.float32) + self.mlm_bias
        return mlm_logits, nsp_logits


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------


def build_model(args: argparse.Namespace) -> keras.Model:
    if args.model == "resnet50":
        return resnet50(args.image_size, args.num_classes, args.data_format)
    model = BertForPreTraining(model_math.BERT_BASE)
    model((tf.zeros((1, 8), tf.int32), tf.zeros((1, 8), tf.int32)))  # create the weights
    return model


def count_params(model: keras.Model) -> int:
    """Trainable weights only (BatchNorm moving statistics are not parameters, as in PyTorch);
    the tied embedding is one variable, so it counts once."""
    unique = {id(v): v for v in model.trainable_weights}
    return int(sum(math.prod(v.shape) for v in unique.values()))


def make_data(args: argparse.Namespace):
    """The synthetic batch, created once and reused every step (same shapes as PyTorch)."""
    g = tf.random.Generator.from_seed(args.seed)
    b = args.batch_size
    if args.model == "resnet50":
        images = g.normal((b, args.image_size, args.image_size, 3))
        labels = g.uniform((b,), 0, args.num_classes, dtype=tf.int64)
        if args.data_format == "channels_first":  # the same pixels, NCHW
            images = tf.transpose(images, (0, 3, 1, 2))
        return images, labels
    s, vocab = args.seq_len, model_math.BERT_BASE["vocab"]
    input_ids = g.uniform((b, s), 0, vocab, dtype=tf.int64)
    token_types = tf.concat(
        [tf.zeros((b, s // 2), tf.int64), tf.ones((b, s - s // 2), tf.int64)], axis=1
    )
    masked = g.uniform((b, s)) < 0.15
    masked = tf.logical_or(masked, tf.one_hot(min(1, s - 1), s, on_value=True, off_value=False))
    mlm_labels = tf.where(masked, g.uniform((b, s), 0, vocab, dtype=tf.int64), -100)
    nsp_labels = g.uniform((b,), 0, 2, dtype=tf.int64)
    return input_ids, token_types, mlm_labels, nsp_labels


# What the best-practice flags really did here (a CPU may refuse NCHW convolutions, a thread
# mode does nothing without a GPU): the start event's `practice` and the "best practice:" line.
APPLIED: dict[str, str] = {}


def usable_data_format(args: argparse.Namespace, device: str) -> tuple[str, str]:
    """The layout to build ResNet50 in, and why it is not --data-format ("" when it is).

    On a GPU cuDNN takes both layouts. On a CPU, TensorFlow's own Conv2D kernels take NHWC only
    ("The Conv2D op currently only supports the NHWC tensor format on the CPU"); the oneDNN
    kernels take NCHW too, and TensorFlow turns them on by default on Linux only for CPUs with
    AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX (tensorflow/core/util/port.cc: a Zen 4 EPYC or a
    Cascade Lake Xeon has them, an older EPYC not). So channels_first is tried on a tiny
    convolution and its gradient first, compiled as the step will be; on refusal the run falls
    back to channels_last. The probe uses no random numbers: the seeded weights stay the same.
    """
    if args.data_format == "channels_last" or device != "cpu":
        return args.data_format, ""

    def probe(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.nn.conv2d(x, tf.ones((1, 1, 1, 1)), 1, "VALID", data_format="NCHW")
        return tape.gradient(y, x)

    try:
        with tf.device("/cpu:0"):
            tf.function(probe, jit_compile=args.xla)(tf.ones((1, 1, 2, 2))).numpy()
    except tf.errors.OpError as exc:  # InvalidArgument or Unimplemented, by TF version
        lines = [line.strip() for line in str(exc.message).splitlines() if line.strip()]
        reason = next((line for line in lines if "NHWC" in line), type(exc).__name__)
        return "channels_last", f"channels_first refused on this CPU: {reason[:120]}"
    return args.data_format, ""


def bert_loss(model: keras.Model, data) -> Callable[[], tf.Tensor]:
    """BERT pretraining's MLM + NSP loss of the synthetic batch (a training forward)."""
    input_ids, token_types, mlm_labels, nsp_labels = data

    def loss_fn() -> tf.Tensor:
        mlm_logits, nsp_logits = model((input_ids, token_types), training=True)
        keep = tf.cast(mlm_labels != -100, tf.float32)
        ce = keras.losses.sparse_categorical_crossentropy(
            tf.maximum(mlm_labels, 0), mlm_logits, from_logits=True
        )
        mlm = tf.reduce_sum(ce * keep) / tf.reduce_sum(keep)  # mean over masked positions
        nsp = keras.losses.sparse_categorical_crossentropy(nsp_labels, nsp_logits, from_logits=True)
        return mlm + tf.reduce_mean(nsp)

    return loss_fn


def make_step(args: argparse.Namespace, model: keras.Model, data, device: str, strategy=None):
    """One training step as step() -> the loss, read back to the host once the step is done."""
    if args.model == "resnet50":
        # PyTorch's SGD weight decay is L2 added to the gradient (Keras' own is decoupled), so
        # it is added by hand below to keep the optimizer identical across frameworks.
        optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)
        l2 = 1e-4
        images, labels = data

        def loss_fn():
            logits = model(images, training=True)
            ce = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            return tf.reduce_mean(ce)

    else:
        optimizer = keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01, epsilon=1e-8)
        l2 = 0.0
        loss_fn = bert_loss(model, data)

    if args.precision == "amp" and device == "gpu":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)  # fp16 needs loss scaling
    variables = model.trainable_variables

    def body():
        with tf.GradientTape() as tape:
            loss = loss_fn()
            scaled = optimizer.scale_loss(loss) if hasattr(optimizer, "scale_loss") else loss
        grads = tape.gradient(scaled, variables)
        if l2:
            grads = [g + l2 * tf.cast(v, g.dtype) for g, v in zip(grads, variables, strict=True)]
        # Under a strategy, apply_gradients all-reduces the replicas' gradients first.
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    if strategy is None:
        compiled = tf.function(body, jit_compile=args.xla)

        def run():
            with tf.device(f"/{device}:0"):
                return compiled()

    else:

        @tf.function
        def run():
            per_replica = strategy.run(body)
            return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)

    def step() -> float:
        # .numpy() copies the loss to the host: the step (and the device) has really finished.
        return float(run().numpy())

    return step


def make_predict(args: argparse.Namespace, model: keras.Model, data, device: str):
    """Inference (--mode infer) on make_data's synthetic inputs: the model called with
    training=False (BatchNorm's moving statistics, no dropout) in a tf.function, XLA-compiled
    with --xla, no gradient tape; --precision amp keeps training's mixed-precision policy.
    BERT's forward gives the MLM and NSP logits, no loss.

    predict(n) runs one forward on the first n rows and reads one logit back to the host, so
    the device has finished when it returns.
    """
    b = args.batch_size
    inputs = data[0] if args.model == "resnet50" else (data[0], data[1])
    # One shape-generic trace (reduce_retracing) serves every batch size LoadGen forms; XLA
    # compiles per shape, so there the full batch always runs (the rows past n are wasted work).
    forward = tf.function(
        lambda x: model(x, training=False), jit_compile=args.xla, reduce_retracing=True
    )

    def predict(n: int) -> float:
        rows = b if args.xla else n
        x = inputs if rows == b else tf.nest.map_structure(lambda t: t[:rows], inputs)
        with tf.device(f"/{device}:0"):
            out = forward(x)
        logits = out[0] if isinstance(out, (tuple, list)) else out
        return float(tf.reshape(logits, [-1])[0].numpy())

    return predict


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = kit.model_parser(
        __doc__, xla_help="tf.function(jit_compile=True)", threads_help="intra-op threads"
    )
    # Best practice, each switchable (the adapter passes its defaults for the device and model):
    p.add_argument(
        "--data-format",
        choices=("channels_last", "channels_first"),
        default="channels_last",
        help="resnet50: NHWC or NCHW images and convolutions",
    )
    p.add_argument(
        "--gpu-thread-mode",
        choices=("global", "gpu_private", "gpu_shared"),
        help="TF_GPU_THREAD_MODE (unset: TensorFlow's default, global)",
    )
    return kit.parse_model_args(p, argv, model_math.BERT_BASE["max_positions"])


def device_name(on_gpu: bool) -> str:
    """The first GPU's name as TensorFlow reports it, or the CPU's."""
    if not on_gpu:
        return kit.cpu_name()
    details = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
    return details.get("device_name", "GPU")


def amp_dtype(on_gpu: bool) -> str:
    """--precision amp's mixed-precision dtype: fp16 on a GPU (loss scaled), bf16 on a CPU."""
    return "float16" if on_gpu else "bfloat16"


class TensorFlow(kit.Hooks):
    """This framework's parts of the worker sequence (kit.main runs them)."""

    framework, version, compiler = "tensorflow", tf.__version__, "XLA"
    label = f"tensorflow {tf.__version__} (keras {keras.__version__})"
    practice_empty = "none for this model and device"
    rank, world, device, strategy = 0, 1, "cpu", None

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return parse_args(argv)

    def threads(self, args: argparse.Namespace) -> None:
        if args.gpu_thread_mode and not args.describe:
            # Read once, when TensorFlow creates its GPU device (common_runtime/gpu/
            # gpu_device.cc); nothing has created one yet (the strategy is the first that does).
            os.environ["TF_GPU_THREAD_MODE"] = args.gpu_thread_mode
        on_host = kit.ranks_on_host()  # simulated nodes share cores
        threads = args.threads or (kit.cores_per_rank(on_host) if on_host > 1 else 0)
        if threads:
            tf.config.threading.set_intra_op_parallelism_threads(threads)

    def describe(self, args: argparse.Namespace) -> dict[str, object]:
        return {"params": count_params(build_model(args)),
                "flops_per_sample": model_math.flops_per_sample(args)}  # fmt: skip

    def cuda_missing(self) -> str | None:
        if tf.config.list_physical_devices("GPU"):
            return None
        return f"TensorFlow {tf.__version__} sees no GPU"

    def place(self, args: argparse.Namespace) -> kit.Place:
        # Data parallel across nodes: TF_CONFIG names the workers (one per node, each driving
        # its local devices); MultiWorkerMirroredStrategy all-reduces the gradients every step.
        if not os.environ.get("TF_CONFIG"):
            return kit.Place()
        cluster = json.loads(os.environ["TF_CONFIG"])
        self.world = len(cluster["cluster"]["worker"])
        self.rank = int(cluster["task"]["index"])
        replicas = 1
        if args.mode == "train":  # inference: each worker runs its own model on one device
            self.strategy = tf.distribute.MultiWorkerMirroredStrategy()
            replicas = self.strategy.num_replicas_in_sync // self.world
        # One events file per replica: this worker's is its first replica's rank.
        return kit.Place(self.rank, self.world, self.rank * replicas, replicas)

    def setup(self, args: argparse.Namespace) -> None:
        self.device = "gpu" if args.device == "cuda" else "cpu"
        if args.precision == "amp":
            keras.mixed_precision.set_global_policy(f"mixed_{amp_dtype(self.device == 'gpu')}")
        if self.device == "gpu":
            tf.config.experimental.enable_tensor_float_32_execution(False)  # honest fp32
        if self.strategy is not None and args.xla:
            raise kit.Unsupported("--xla with several TensorFlow workers")
        if args.model == "resnet50":
            args.data_format, fallback = usable_data_format(args, self.device)
            APPLIED["data_format"] = (
                f"{args.data_format} ({fallback})" if fallback else args.data_format
            )
        if args.gpu_thread_mode:
            no_gpu = " (no effect: no GPU)" if self.device != "gpu" else ""
            APPLIED["gpu_thread_mode"] = os.environ["TF_GPU_THREAD_MODE"] + no_gpu

    def scope(self) -> contextlib.AbstractContextManager:
        return self.strategy.scope() if self.strategy else tf.device(f"/{self.device}:0")

    def build(self, args: argparse.Namespace) -> keras.Model:
        tf.keras.utils.set_random_seed(args.seed)  # the same initial weights on every worker
        with self.scope():
            model = build_model(args)
            args.seed += self.rank  # each worker its own synthetic batch
            self.data = make_data(args)
        return model

    def make_step(self, args: argparse.Namespace, model: keras.Model) -> Callable[[], float]:
        with self.scope():
            return make_step(args, model, self.data, self.device, self.strategy)

    def make_predict(self, args: argparse.Namespace, model: keras.Model) -> Callable[[int], float]:
        with self.scope():
            return make_predict(args, model, self.data, self.device)

    def facts(self, args: argparse.Namespace, model: keras.Model) -> kit.Facts:
        on_gpu = self.device == "gpu"
        strategy = self.strategy
        return kit.Facts(
            args.device, device_name(on_gpu),
            amp_dtype(on_gpu) if args.precision == "amp" else None,
            # intra-op threads (0: TensorFlow's own choice, one per logical CPU)
            tf.config.threading.get_intra_op_parallelism_threads(),
            params=count_params(model), flops=model_math.flops_per_sample(args),
            practice=APPLIED, world_size=strategy.num_replicas_in_sync if strategy else None,
            extra={"keras_version": keras.__version__},
        )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return kit.main(TensorFlow(), argv)


if __name__ == "__main__":
    sys.exit(main())
