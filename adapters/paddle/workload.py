"""PaddlePaddle training workload for dlperf: ResNet50-v1.5 or BERT-base pretraining, synthetic
data, dygraph (paddle.nn) style; `--xla` wraps the model in paddle.jit.to_static.

Runs inside the adapter's isolated virtual env and imports only paddle, numpy (a dependency of
paddle, used for the synthetic data), the standard library and the stdlib-only workload kit in
adapters/_shared (workload_kit: command line, events, host facts, timed loop, LoadGen hand-off;
model_math: shapes, FLOPs and parameter targets). It follows the dlperf events contract: JSON
lines written to the file named by $DLPERF_EVENTS ("start", "ready", one "step" per iteration,
"end", or "unsupported"); a human-readable log goes to stdout.

Usage:
    python workload.py --model resnet50 --batch-size 64 --steps 50 [--precision amp] [--xla]
    python workload.py --model bert --describe   # one JSON line: params, FLOPs; no training
    python workload.py --model resnet50 --mode infer [--loadgen-settings JSON]  # forward only
    python workload.py --model resnet50 --data-format NHWC --multi-tensor 1  # best practice
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import sys
import warnings
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn
from paddle.nn import initializer as init

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import workload_kit as kit  # noqa: E402

T = TypeVar("T")

# --------------------------------------------------------------------------------------------
# ResNet50-v1.5
# --------------------------------------------------------------------------------------------


class Bottleneck(nn.Layer):
    """1x1 reduce, 3x3 (carries the stride: the v1.5 change), 1x1 expand, plus the shortcut."""

    expansion = model_math.BOTTLENECK_EXPANSION

    def __init__(self, in_ch: int, width: int, stride: int, data_format: str = "NCHW") -> None:
        super().__init__()
        out_ch = width * self.expansion
        fmt = {"data_format": data_format}
        self.conv1 = nn.Conv2D(in_ch, width, 1, bias_attr=False, **fmt)
        self.bn1 = nn.BatchNorm2D(width, **fmt)
        self.conv2 = nn.Conv2D(width, width, 3, stride=stride, padding=1, bias_attr=False, **fmt)
        self.bn2 = nn.BatchNorm2D(width, **fmt)
        self.conv3 = nn.Conv2D(width, out_ch, 1, bias_attr=False, **fmt)
        self.bn3 = nn.BatchNorm2D(out_ch, **fmt)
        self.relu = nn.ReLU()
        self.downsample: nn.Layer | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2D(in_ch, out_ch, 1, stride=stride, bias_attr=False, **fmt),
                nn.BatchNorm2D(out_ch, **fmt),
            )

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Layer):
    """`data_format` "NHWC" (channels last) changes only the memory layout of the activations
    (and the images it takes): a conv weight is [out, in, kh, kw] in either layout, so the
    same seed gives the same weights and the same loss."""

    def __init__(self, num_classes: int = 1000, data_format: str = "NCHW") -> None:
        super().__init__()
        fmt = {"data_format": data_format}
        self.conv1 = nn.Conv2D(3, 64, 7, stride=2, padding=3, bias_attr=False, **fmt)
        self.bn1 = nn.BatchNorm2D(64, **fmt)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2D(3, stride=2, padding=1, **fmt)
        stages = []
        in_ch = 64
        for i, (width, blocks) in enumerate(model_math.RESNET50_STAGES):
            layers = []
            for b in range(blocks):
                stride = 2 if (b == 0 and i > 0) else 1
                layers.append(Bottleneck(in_ch, width, stride, data_format))
                in_ch = width * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2D(1, **fmt)
        self.fc = nn.Linear(in_ch, num_classes)

        for m in self.sublayers():
            if isinstance(m, nn.Conv2D):
                # Kaiming normal, mode fan_out (as torchvision): std = sqrt(2 / fan_out). Paddle's
                # KaimingNormal takes the fan explicitly through its `fan_in` argument.
                out_ch, _, kh, kw = m.weight.shape
                init.KaimingNormal(fan_in=out_ch * kh * kw, nonlinearity="relu")(m.weight)
            elif isinstance(m, nn.BatchNorm2D):
                init.Constant(1.0)(m.weight)
                init.Constant(0.0)(m.bias)
        # Zero-init the last BN gamma of each block (as NVIDIA's reference does): every residual
        # branch starts as identity, which helps large-batch training. Cost is unaffected.
        for m in self.sublayers():
            if isinstance(m, Bottleneck):
                init.Constant(0.0)(m.bn3.weight)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(paddle.flatten(self.avgpool(x), 1))  # [N,C,1,1] or [N,1,1,C] -> [N,C]


# --------------------------------------------------------------------------------------------
# BERT-base pretraining (MLM + NSP heads)
# --------------------------------------------------------------------------------------------


class SelfAttention(nn.Layer):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, x: paddle.Tensor, attn_mask: paddle.Tensor | None) -> paddle.Tensor:
        def split(t: paddle.Tensor) -> paddle.Tensor:  # [B, S, H] -> [B, heads, S, H/heads]
            return paddle.reshape(t, [0, 0, self.heads, self.head_dim]).transpose([0, 2, 1, 3])

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        # Plain scaled dot-product attention (Paddle's fused SDPA is a GPU flash kernel).
        scores = paddle.matmul(q, k, transpose_y=True) * (1.0 / math.sqrt(self.head_dim))
        if attn_mask is not None:
            scores = scores + attn_mask  # additive: 0 where attended, -1e4 at padding
        probs = F.dropout(
            F.softmax(scores, axis=-1), model_math.BERT_DROPOUT, training=self.training
        )
        ctx = paddle.matmul(probs, v).transpose([0, 2, 1, 3])
        return paddle.reshape(ctx, [0, 0, self.heads * self.head_dim])


class EncoderLayer(nn.Layer):
    """Post-LN transformer layer, as in the original BERT."""

    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, epsilon=model_math.BERT_LN_EPS)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.out_norm = nn.LayerNorm(hidden, epsilon=model_math.BERT_LN_EPS)
        self.dropout = nn.Dropout(model_math.BERT_DROPOUT)

    def forward(self, x: paddle.Tensor, attn_mask: paddle.Tensor | None) -> paddle.Tensor:
        x = self.attn_norm(x + self.dropout(self.attn_out(self.attention(x, attn_mask))))
        y = self.output(F.gelu(self.intermediate(x)))
        return self.out_norm(x + self.dropout(y))


class BertForPreTraining(nn.Layer):
    def __init__(self, cfg: dict[str, int]) -> None:
        super().__init__()
        hidden = cfg["hidden"]
        self.word_embeddings = nn.Embedding(cfg["vocab"], hidden)
        self.position_embeddings = nn.Embedding(cfg["max_positions"], hidden)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab"], hidden)
        self.emb_norm = nn.LayerNorm(hidden, epsilon=model_math.BERT_LN_EPS)
        self.emb_dropout = nn.Dropout(model_math.BERT_DROPOUT)
        self.layers = nn.LayerList(
            [EncoderLayer(hidden, cfg["heads"], cfg["intermediate"]) for _ in range(cfg["layers"])]
        )
        self.pooler = nn.Linear(hidden, hidden)
        self.nsp = nn.Linear(hidden, 2)
        self.mlm_transform = nn.Linear(hidden, hidden)
        self.mlm_norm = nn.LayerNorm(hidden, epsilon=model_math.BERT_LN_EPS)
        # The MLM decoder's weight is the word-embedding matrix (tied); only its bias is new.
        self.mlm_bias = self.create_parameter(
            [cfg["vocab"]], default_initializer=init.Constant(0.0), is_bias=True
        )

        normal = init.Normal(mean=0.0, std=0.02)
        for m in self.sublayers():  # BERT's init: N(0, 0.02) weights, zero biases, unit LN
            if isinstance(m, (nn.Linear, nn.Embedding)):
                normal(m.weight)
            if isinstance(m, nn.Linear):
                init.Constant(0.0)(m.bias)

    def forward(
        self,
        input_ids: paddle.Tensor,
        token_type_ids: paddle.Tensor,
        attn_mask: paddle.Tensor | None,
    ) -> tuple[paddle.Tensor, paddle.Tensor]:
        positions = paddle.arange(input_ids.shape[1], dtype="int64")
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(token_type_ids)
        )
        x = self.emb_dropout(self.emb_norm(x))
        for layer in self.layers:
            x = layer(x, attn_mask)
        nsp_logits = self.nsp(paddle.tanh(self.pooler(x[:, 0])))
        h = self.mlm_norm(F.gelu(self.mlm_transform(x)))
        mlm_logits = paddle.matmul(h, self.word_embeddings.weight, transpose_y=True)
        return mlm_logits + self.mlm_bias, nsp_logits


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------


def trainable_parameters(model: nn.Layer) -> list[paddle.Tensor]:
    """Parameters the optimizer updates. BatchNorm's running mean/variance are parameters in
    Paddle (trainable=False); PyTorch keeps them as buffers, so both count weight+bias only.
    model.parameters() yields a shared (tied) tensor once."""
    return [p for p in model.parameters() if p.trainable]


def count_params(model: nn.Layer) -> int:
    return sum(int(np.prod(p.shape)) for p in trainable_parameters(model))


def build_model(args: argparse.Namespace) -> nn.Layer:
    if args.model == "resnet50":
        return ResNet50(args.num_classes, args.data_format)
    return BertForPreTraining(model_math.BERT_BASE)


def amp_problem(amp_dtype: str, level: str = "O1") -> str | None:
    """None if paddle.amp.auto_cast (after paddle.amp.decorate at O2) really computes a Linear
    in `amp_dtype` here, else why not. (On CPUPlace Paddle 3.x's auto_cast is a no-op with a
    warning: fp32 must not be labelled as amp.)"""
    try:
        layer = nn.Linear(8, 8)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if level == "O2":
                layer = paddle.amp.decorate(models=layer, level="O2", dtype=amp_dtype)
            with paddle.amp.auto_cast(level=level, dtype=amp_dtype):
                out = layer(paddle.ones([2, 8]))
        got = str(out.dtype).replace("paddle.", "")
    except Exception as exc:  # noqa: BLE001 - any failure means the path does not work here
        return (
            f"paddle.amp.auto_cast(level={level!r}, dtype={amp_dtype!r}) failed: "
            f"{type(exc).__name__}: {exc}"
        )
    if got != amp_dtype:
        said = "; ".join(str(w.message).strip() for w in caught if "amp" in str(w.message))
        return (
            f"paddle {paddle.__version__}: paddle.amp.auto_cast(level={level!r}, "
            f"dtype={amp_dtype!r}) has no effect on {paddle.get_device()} (a Linear still "
            f"computes in {got})" + (f": {said}" if said else "")
        )
    return None


# What the best-practice flags really did here (a flag this build lacks, a layout its kernels
# refuse): reported in the start event and the log.
APPLIED: dict[str, object] = {}

# The cuDNN flags a --<flag> argument sets (argparse dest -> Paddle flag).
CUDNN_FLAGS = {
    "cudnn_exhaustive_search": "FLAGS_cudnn_exhaustive_search",
    "conv_workspace_size_limit": "FLAGS_conv_workspace_size_limit",
    "cudnn_batchnorm_spatial_persistent": "FLAGS_cudnn_batchnorm_spatial_persistent",
}


def apply_cudnn_flags(args: argparse.Namespace, on_gpu: bool) -> None:
    """paddle.set_flags for each cuDNN flag asked for, recording the value Paddle reports
    back. A CPU build has none of these flags (get/set raise): there an explicit request is
    recorded as not applicable instead of failing."""
    for dest, flag in CUDNN_FLAGS.items():
        value = getattr(args, dest)
        if value is None:
            continue
        if not on_gpu:
            APPLIED[dest] = "n/a on cpu (no cuDNN)"
            continue
        try:
            paddle.set_flags({flag: value})
            got = paddle.get_flags(flag)[flag]
        except Exception as exc:  # noqa: BLE001 - a build without the flag
            APPLIED[dest] = f"unavailable in paddle {paddle.__version__}: {type(exc).__name__}"
            continue
        APPLIED[dest] = got if isinstance(got, bool) else int(got)


def layout_problem(data_format: str) -> str | None:
    """None if a conv + batch norm + max pool + global average pool trains (forward and
    backward) in `data_format` on the current device, else why not."""
    try:
        x = paddle.ones([2, 8, 8, 3] if data_format == "NHWC" else [2, 3, 8, 8])
        x.stop_gradient = False
        fmt = {"data_format": data_format}
        block = nn.Sequential(
            nn.Conv2D(3, 4, 3, padding=1, bias_attr=False, **fmt),
            nn.BatchNorm2D(4, **fmt),
            nn.MaxPool2D(3, stride=2, padding=1, **fmt),
            nn.AdaptiveAvgPool2D(1, **fmt),
        )
        block(x).sum().backward()
    except Exception as exc:  # noqa: BLE001 - any failure means the layout does not work here
        return kit.error_line(exc)
    return None


def synthetic_images(args: argparse.Namespace, rng: np.random.RandomState) -> paddle.Tensor:
    """The batch of images, drawn in NCHW (so both layouts see the same pixels) and laid out
    as the model's `data_format` wants."""
    b, size = args.batch_size, args.image_size
    images = rng.standard_normal((b, 3, size, size)).astype("float32")
    if args.data_format == "NHWC":
        images = np.ascontiguousarray(images.transpose(0, 2, 3, 1))
    return paddle.to_tensor(images)


def make_optimizer(
    args: argparse.Namespace, params: list[paddle.Tensor]
) -> paddle.optimizer.Optimizer:
    """ResNet50: Momentum (lr 0.1, momentum 0.9, L2 1e-4); BERT: AdamW (lr 1e-4, decay 0.01).
    --multi-tensor 1 merges Momentum's per-parameter updates into one op (use_multi_tensor);
    AMP O2 keeps fp32 master weights (multi_precision), as paddle.amp.decorate expects."""
    master = args.precision == "amp" and args.amp_level == "O2"
    if args.model != "resnet50":
        if args.multi_tensor:
            APPLIED["multi_tensor"] = (
                f"n/a: AdamW has no use_multi_tensor in paddle {paddle.__version__}"
            )
        return paddle.optimizer.AdamW(
            learning_rate=1e-4, parameters=params, weight_decay=0.01, multi_precision=master
        )
    kw = {"learning_rate": 0.1, "momentum": 0.9, "weight_decay": 1e-4, "multi_precision": master}
    kw["parameters"] = params
    if args.multi_tensor:
        try:
            optimizer = paddle.optimizer.Momentum(use_multi_tensor=True, **kw)
            APPLIED["multi_tensor"] = True
            return optimizer
        except (TypeError, ValueError, RuntimeError) as exc:
            APPLIED["multi_tensor"] = f"off (Momentum(use_multi_tensor=True) failed: {exc})"
    else:
        APPLIED["multi_tensor"] = False
    return paddle.optimizer.Momentum(**kw)


def amp_dtype(on_gpu: bool) -> str:
    """--precision amp's auto_cast dtype: fp16 on a GPU (with loss scaling), bf16 on a CPU."""
    return "float16" if on_gpu else "bfloat16"


def autocast(args: argparse.Namespace, on_gpu: bool) -> contextlib.AbstractContextManager:
    if args.precision != "amp":
        return contextlib.nullcontext()
    return paddle.amp.auto_cast(level=args.amp_level, dtype=amp_dtype(on_gpu))


Task = Callable[[nn.Layer], paddle.Tensor]


def resnet_task(args: argparse.Namespace, rng: np.random.RandomState) -> Task:
    """loss_fn(m): cross entropy of a synthetic batch of images through m."""
    images = synthetic_images(args, rng)
    labels = paddle.to_tensor(rng.randint(0, args.num_classes, (args.batch_size,)).astype("int64"))
    amp = args.precision == "amp"

    def loss_fn(m: nn.Layer) -> paddle.Tensor:
        logits = m(images)
        # fp16 logits at O2: the softmax cross entropy is taken in fp32, as BERT's is.
        return F.cross_entropy(logits.astype("float32") if amp else logits, labels)

    return loss_fn


def bert_task(args: argparse.Namespace, rng: np.random.RandomState) -> Task:
    """loss_fn(m): BERT pretraining's MLM + NSP loss of a synthetic batch through m."""
    b, s = args.batch_size, args.seq_len
    vocab = model_math.BERT_BASE["vocab"]
    input_ids = rng.randint(0, vocab, (b, s)).astype("int64")
    token_types = np.zeros((b, s), dtype="int64")
    token_types[:, s // 2 :] = 1
    attention_mask = np.ones((b, s), dtype="int64")
    # MLM labels at ~15% of positions (at least one per batch), -100 (ignored) elsewhere.
    masked = rng.random_sample((b, s)) < 0.15
    masked[:, min(1, s - 1)] = True
    mlm_labels = np.where(masked, rng.randint(0, vocab, (b, s)), -100).astype("int64")
    nsp_labels = rng.randint(0, 2, (b,)).astype("int64")
    input_ids_t, token_types_t, mlm_labels_t, nsp_labels_t = (
        paddle.to_tensor(t) for t in (input_ids, token_types, mlm_labels, nsp_labels)
    )
    # The mask is all ones, so attention needs none. Kept general for a padded batch.
    attn_mask = None
    if not bool(attention_mask.all()):
        additive = (1.0 - attention_mask[:, None, None, :].astype("float32")) * -1e4
        attn_mask = paddle.to_tensor(additive)

    def loss_fn(m: nn.Layer) -> paddle.Tensor:
        mlm_logits, nsp_logits = m(input_ids_t, token_types_t, attn_mask)
        mlm = F.cross_entropy(
            paddle.reshape(mlm_logits, [-1, vocab]).astype("float32"),
            paddle.reshape(mlm_labels_t, [-1]),
            ignore_index=-100,
        )
        return mlm + F.cross_entropy(nsp_logits.astype("float32"), nsp_labels_t)

    return loss_fn


def make_step(
    args: argparse.Namespace, model: nn.Layer, on_gpu: bool
) -> Callable[[], paddle.Tensor]:
    """The synthetic batch (made once, on the device), the optimizer and step(): one
    forward/backward/update, returning the loss tensor, not yet read back."""
    optimizer = make_optimizer(args, trainable_parameters(model))
    rng = np.random.RandomState(args.seed)
    loss_fn = resnet_task(args, rng) if args.model == "resnet50" else bert_task(args, rng)
    # paddle.jit.to_static (the "--xla" flag: Paddle's dynamic-to-static graph compiler, whole
    # graph via AST conversion). Conversion happens lazily inside step 1, so step 1 is slow;
    # the harness's warm-up window absorbs it.
    run_model = paddle.jit.to_static(model, full_graph=True) if args.xla else model
    # fp16 needs loss scaling to keep small gradients from underflowing; bf16 does not.
    amp_on_gpu = args.precision == "amp" and on_gpu
    scaler = paddle.amp.GradScaler(init_loss_scaling=2.0**16) if amp_on_gpu else None

    def step() -> paddle.Tensor:
        with autocast(args, on_gpu):
            loss = loss_fn(run_model)
        kit.backward_and_update(loss, optimizer, scaler)
        optimizer.clear_grad(set_to_zero=False)
        return loss

    return step


def make_predict(args: argparse.Namespace, model: nn.Layer, on_gpu: bool) -> Callable[[int], float]:
    """Inference (--mode infer) on make_step's synthetic inputs (same seed, same shapes): the
    model in eval mode (BatchNorm's running statistics, no dropout) under paddle.no_grad(),
    the training's auto_cast and paddle.jit.to_static. BERT's forward gives the MLM and NSP
    logits, no loss.

    predict(n) runs one forward on the first n rows, synchronises the device and reads one logit
    back to the host, so the batch has truly finished when it returns.
    """
    rng = np.random.RandomState(args.seed)
    b = args.batch_size
    if args.model == "resnet50":
        inputs: tuple[paddle.Tensor | None, ...] = (synthetic_images(args, rng),)
    else:
        s = args.seq_len
        input_ids = rng.randint(0, model_math.BERT_BASE["vocab"], (b, s)).astype("int64")
        token_types = np.zeros((b, s), dtype="int64")
        token_types[:, s // 2 :] = 1
        inputs = (paddle.to_tensor(input_ids), paddle.to_tensor(token_types), None)  # no mask
    model.eval()
    # A static graph is built per input shape, so the converted model always gets the full
    # batch (the rows past n are wasted work) instead of converting for each batch LoadGen forms.
    run_model = paddle.jit.to_static(model, full_graph=True) if args.xla else model

    def predict(n: int) -> float:
        rows = b if args.xla else n
        with paddle.no_grad(), autocast(args, on_gpu):
            out = run_model(*(t if t is None or rows == b else t[:rows] for t in inputs))
        if on_gpu:
            paddle.device.synchronize()
        return float((out[0] if isinstance(out, (tuple, list)) else out).flatten()[0])

    return predict


def guard_conversion(args: argparse.Namespace, run: Callable[..., T]) -> Callable[..., T]:
    """`run` with step 1 guarded where paddle.jit.to_static (--xla) converts the model inside
    it: a failure there is a configuration Paddle cannot run (kit.Unsupported), not a crash."""
    if not args.xla:
        return run
    return kit.unsupported_if_first_fails(run, f"paddle.jit.to_static failed on {args.model}")


def no_tf32() -> None:
    """Honest fp32 on a GPU: no TF32 tensor-core math for matmuls and convolutions."""
    with contextlib.suppress(Exception):
        paddle.set_flags({"FLAGS_enable_cublas_tensor_op_math": False})


def resolve_amp(args: argparse.Namespace, on_gpu: bool) -> str | None:
    """--precision amp's dtype, once checked that auto_cast really computes in it here
    (kit.Unsupported where not), with the AMP level recorded in APPLIED."""
    if args.precision != "amp":
        if args.amp_level != "O1":
            APPLIED["amp_level"] = f"n/a ({args.precision})"
        return None
    dtype = amp_dtype(on_gpu)
    if problem := amp_problem(dtype, args.amp_level):
        raise kit.Unsupported(problem)
    pure = f"O2 ({dtype} weights, fp32 master weights)"
    APPLIED["amp_level"] = pure if args.amp_level == "O2" else "O1"
    return dtype


def resolve_data_format(args: argparse.Namespace) -> None:
    """ResNet50's layout as asked where its kernels train in it here, else NCHW (recorded)."""
    if args.model == "resnet50":
        APPLIED["data_format"] = args.data_format
        if args.data_format == "NHWC" and (problem := layout_problem("NHWC")):
            args.data_format = "NCHW"
            APPLIED["data_format"] = f"NCHW (NHWC fails on {paddle.get_device()}: {problem})"
    elif args.data_format != "NCHW":
        APPLIED["data_format"] = "n/a (no convolutions)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = kit.model_parser(
        __doc__,
        xla_help="wrap the model in paddle.jit.to_static",
        threads_help="CPU math library threads",
    )
    # Best practice, each switchable (the adapter passes its defaults for the device and model);
    # left out, each is Paddle's own default (the cuDNN flags: left as Paddle set them).
    amp_help = "amp: O1 (listed ops in low precision) or O2 (low-precision weights, fp32 master)"
    p.add_argument("--amp-level", choices=("O1", "O2"), default="O1", help=amp_help)
    layout_help = "resnet50: layout of the images and every conv/BN/pool layer"
    p.add_argument("--data-format", choices=("NCHW", "NHWC"), default="NCHW", help=layout_help)
    switch = {"type": int, "choices": (0, 1)}
    p.add_argument("--multi-tensor", **switch, default=0, help="resnet50: Momentum multi-tensor")
    p.add_argument("--cudnn-exhaustive-search", **switch, help="FLAGS_cudnn_exhaustive_search")
    p.add_argument("--conv-workspace-size-limit", type=int, metavar="MB", help="cuDNN conv scratch")
    p.add_argument("--cudnn-batchnorm-spatial-persistent", **switch, help="persistent cuDNN BN")
    return kit.parse_model_args(p, argv, model_math.BERT_BASE["max_positions"])


class Paddle(kit.Hooks):
    """This framework's parts of the worker sequence (kit.main runs them)."""

    framework, version, compiler = "paddle", paddle.__version__, "paddle.jit.to_static"
    rank, world, on_gpu = 0, 1, False
    amp_dtype: str | None = None

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return parse_args(argv)

    def threads(self, args: argparse.Namespace) -> None:
        if not args.threads and (on_host := kit.ranks_on_host()) > 1:  # nodes on one host
            args.threads = kit.cores_per_rank(on_host)
        if args.threads:
            paddle.base.core.set_num_threads(args.threads)

    def describe(self, args: argparse.Namespace) -> dict[str, object]:
        paddle.set_device("cpu")
        model = build_model(args)  # real (small) allocations: Paddle has no meta device
        return {"params": count_params(model),
                "flops_per_sample": model_math.flops_per_sample(args)}  # fmt: skip

    def cuda_missing(self) -> str | None:
        if paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0:
            return None
        return (f"paddle has no usable CUDA device (paddle {paddle.__version__}, compiled with "
                f"CUDA: {paddle.is_compiled_with_cuda()})")  # fmt: skip

    def place(self, args: argparse.Namespace) -> kit.Place:
        # Data parallel when paddle.distributed.launch started several workers.
        self.world = int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))
        self.rank = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
        return kit.Place(self.rank, self.world)

    def setup(self, args: argparse.Namespace) -> None:
        self.on_gpu = args.device == "cuda"
        if self.world > 1 and args.xla and args.mode == "train":
            raise kit.Unsupported("--xla (paddle.jit.to_static) with several workers")
        paddle.set_device(("gpu" if self.world > 1 else "gpu:0") if self.on_gpu else "cpu")
        if self.world > 1:
            import paddle.distributed as dist

            dist.init_parallel_env()
        if self.on_gpu:
            no_tf32()
        apply_cudnn_flags(args, self.on_gpu)
        self.amp_dtype = resolve_amp(args, self.on_gpu)
        resolve_data_format(args)

    def build(self, args: argparse.Namespace) -> nn.Layer:
        paddle.seed(args.seed)  # the same initial weights on every worker
        model = build_model(args)
        if self.amp_dtype and args.amp_level == "O2":
            # Pure low precision: weights cast once (norm layers stay fp32); the optimizer
            # keeps fp32 master weights (multi_precision), as PaddleClas's and PaddleNLP's O2
            # runs do.
            model = paddle.amp.decorate(models=model, level="O2", dtype=self.amp_dtype,
                                        save_dtype="float32")  # fmt: skip
        model.train()
        if self.world > 1 and args.mode == "train":  # inference: each worker its own model
            model = paddle.DataParallel(model)
            args.seed += self.rank  # each worker its own synthetic batch
        return model

    def make_step(self, args: argparse.Namespace, model: nn.Layer) -> Callable[[], float | None]:
        # float() copies the loss back to the host, once the device is done (the dygraph
        # engine is asynchronous on a GPU), before the harness takes the timestamp.
        return guard_conversion(
            args, kit.synced_step(make_step(args, model, self.on_gpu), self.sync)
        )

    def make_predict(self, args: argparse.Namespace, model: nn.Layer) -> Callable[[int], float]:
        return guard_conversion(args, make_predict(args, model, self.on_gpu))

    def device_facts(self, args: argparse.Namespace) -> kit.Facts:
        """The facts a run announces about its device (micro.py's all)."""
        gpu = self.on_gpu
        return kit.Facts(
            args.device, paddle.device.cuda.get_device_name() if gpu else kit.cpu_name(),
            self.amp_dtype, args.threads or kit.omp_threads(),
            extra=kit.precision_fields(gpu),
        )  # fmt: skip

    def facts(self, args: argparse.Namespace, model: nn.Layer) -> kit.Facts:
        return dataclasses.replace(
            self.device_facts(args), params=count_params(model),
            flops=model_math.flops_per_sample(args), practice=APPLIED,
        )  # fmt: skip

    def sync(self) -> None:
        if self.on_gpu:
            paddle.device.synchronize()


def main(argv: list[str] | None = None) -> int:
    return kit.main(Paddle(), argv)


if __name__ == "__main__":
    sys.exit(main())
