"""MXNet workload for dlperf: ResNet50-v1.5 or BERT-base, training or inference, synthetic data.

Runs inside the adapter's isolated env and imports only MXNet, numpy, the standard library and
the stdlib-only kit in adapters/_shared (command line, events, step loop, LoadGen hand-off,
model shapes and FLOPs). Gluon HybridBlocks; `--xla` hybridizes them (static graph, static
memory). Same architectures, optimizers, losses and data shapes as the PyTorch workload.

MXNet's engine is asynchronous even on a CPU: Python returns long before the work is done, so
each step's timestamp is taken only after `mx.nd.waitall()` (forward, backward and the update).

Best practice (the adapter passes its defaults, each switchable with --set): per-op-type
layouts for ResNet50 (`--conv-layout`, `--batchnorm-layout`, `--pooling-layout`, NHWC needing
cuDNN; the weights and the first loss stay the same in every layout), multi-tensor optimizer
updates (`--optimizer-aggregation`), op bulks of a hybridized graph (`--forward-bulk-size`,
`--backward-bulk-size`), and on a GPU `--cudnn-autotune` and `--cuda-graphs`. What each did
here is the start event's `practice` and the "best practice:" log line.

`--mode infer`: a step is one forward in predict mode (BatchNorm's running statistics, no
dropout, nothing recorded); with `--loadgen-settings` MLPerf LoadGen then drives the model
(adapters/_shared/loadgen_run.py), writing its logs to $DLPERF_LOADGEN_DIR.

    python workload.py --model resnet50 --batch-size 64 --steps 50 [--precision amp] [--xla]
    python workload.py --model resnet50 --mode infer --loadgen-settings '{"scenario": "offline"}'
    python workload.py --model bert --describe   # one JSON line: params, FLOPs; no training
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

kit.pin_omp_threads(sys.argv[1:])  # MXNet reads OMP_NUM_THREADS once, when it is imported

import mxnet as mx  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

# The most weights one multi-tensor update takes in MXNet 1.9.1: multi_sgd_mom_update's kernel
# (src/operator/optimizer_op-inl.h, N = 60) and multi_adamw_update's (contrib/adamw-inl.h, 50).
MAX_AGGREGATION = {"sgd": 60, "torchadamw": 50}

# --------------------------------------------------------------------------------------------
# ResNet50-v1.5 (NCHW as MXNet's own model zoo; NHWC per op type as NVIDIA's MXNet RN50v1.5)
# --------------------------------------------------------------------------------------------

NCHW_TO_NHWC = (0, 2, 3, 1)


class Transpose(nn.HybridBlock):
    """NCHW <-> NHWC between two ops that run in different layouts (no parameters)."""

    def __init__(self, src: str, dst: str, **kw) -> None:
        super().__init__(**kw)
        self.axes = NCHW_TO_NHWC if (src, dst) == ("NCHW", "NHWC") else (0, 3, 1, 2)

    def hybrid_forward(self, F, x):
        return F.transpose(x, axes=self.axes)


class LayoutBuilder:
    """Adds convolutions, BatchNorms and poolings each in its own layout (`--conv-layout`,
    `--batchnorm-layout`, `--pooling-layout`), with a Transpose wherever the layout changes, as
    NVIDIA's MXNet RN50v1.5 models.py does. Weights keep their count in every layout (an NHWC
    convolution's weight is OHWI), so the model is the same in all of them."""

    def __init__(self, conv: str, batchnorm: str, pooling: str, current: str) -> None:
        self.conv_layout, self.bn_layout, self.pool_layout = conv, batchnorm, pooling
        self.current = current

    def fork(self) -> LayoutBuilder:
        """A builder for a parallel path (the shortcut) that starts where this one is now."""
        return LayoutBuilder(self.conv_layout, self.bn_layout, self.pool_layout, self.current)

    def _to(self, seq: nn.HybridSequential, layout: str) -> None:
        if layout != self.current:
            seq.add(Transpose(self.current, layout))
            self.current = layout

    def conv(self, seq: nn.HybridSequential, channels: int, kernel: int, stride: int = 1,
             padding: int = 0, in_channels: int = 0) -> None:  # fmt: skip
        self._to(seq, self.conv_layout)
        seq.add(nn.Conv2D(channels, kernel, strides=stride, padding=padding, use_bias=False,
                          in_channels=in_channels, layout=self.conv_layout))  # fmt: skip

    def bn(self, seq: nn.HybridSequential, channels: int, zero_gamma: bool = False) -> None:
        # Same as PyTorch: eps 1e-5, running stats updated with weight 0.1.
        self._to(seq, self.bn_layout)
        gamma = "zeros" if zero_gamma else "ones"
        axis = self.bn_layout.index("C")
        seq.add(nn.BatchNorm(axis=axis, in_channels=channels, epsilon=1e-5, momentum=0.9,
                             gamma_initializer=gamma))  # fmt: skip

    def pool(self, seq: nn.HybridSequential, block: type, *args: int) -> None:
        self._to(seq, self.pool_layout)
        seq.add(block(*args, layout=self.pool_layout))


class Bottleneck(nn.HybridBlock):
    """1x1 reduce, 3x3 carrying the stride (the v1.5 change), 1x1 expand, plus the shortcut.
    Both paths end in a BatchNorm, so the block's output is in the BatchNorm layout."""

    def __init__(self, b: LayoutBuilder, in_ch: int, width: int, stride: int, **kw) -> None:
        super().__init__(**kw)
        out_ch = width * model_math.BOTTLENECK_EXPANSION
        shortcut = b.fork()
        with self.name_scope():
            self.body = nn.HybridSequential()
            b.conv(self.body, width, 1, in_channels=in_ch)
            b.bn(self.body, width)
            self.body.add(nn.Activation("relu"))
            b.conv(self.body, width, 3, stride=stride, padding=1, in_channels=width)
            b.bn(self.body, width)
            self.body.add(nn.Activation("relu"))
            b.conv(self.body, out_ch, 1, in_channels=width)
            b.bn(self.body, out_ch, zero_gamma=True)
            self.downsample = None
            if stride != 1 or in_ch != out_ch:
                self.downsample = nn.HybridSequential()
                shortcut.conv(self.downsample, out_ch, 1, stride=stride, in_channels=in_ch)
                shortcut.bn(self.downsample, out_ch)
            # An identity shortcut carries the previous block's output: BatchNorm layout too.
            assert shortcut.current == b.current, "the shortcut must end in the body's layout"

    def hybrid_forward(self, F, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.Activation(self.body(x) + shortcut, act_type="relu")


def resnet50(num_classes: int, layout: tuple[str, str, str] = ("NCHW",) * 3) -> nn.HybridSequential:
    """`layout`: (conv, batchnorm, pooling); the images come in the convolutions' layout."""
    b = LayoutBuilder(*layout, current=layout[0])
    net = nn.HybridSequential()
    with net.name_scope():
        b.conv(net, 64, 7, stride=2, padding=3, in_channels=3)
        b.bn(net, 64)
        net.add(nn.Activation("relu"))
        b.pool(net, nn.MaxPool2D, 3, 2, 1)
        in_ch = 64
        for stage, (width, blocks) in enumerate(model_math.RESNET50_STAGES):
            for i in range(blocks):
                stride = 2 if (i == 0 and stage > 0) else 1
                net.add(Bottleneck(b, in_ch, width, stride))
                in_ch = width * model_math.BOTTLENECK_EXPANSION
        b.pool(net, nn.GlobalAvgPool2D)
        net.add(nn.Flatten(), nn.Dense(num_classes, in_units=in_ch))
    return net


class LayoutXavier(mx.init.Xavier):
    """Xavier as for NCHW, stored transposed into NHWC convolutions' OHWI weights: every layout
    starts from the same weights (and gives the same first loss) for the same seed."""

    def __init__(self, nhwc_convs: bool, **kw) -> None:
        super().__init__(**kw)
        self.nhwc_convs = nhwc_convs

    def _init_weight(self, name, arr):
        if not (self.nhwc_convs and arr.ndim == 4):
            return super()._init_weight(name, arr)
        o, h, w, i = arr.shape
        oihw = mx.nd.zeros((o, i, h, w), ctx=arr.context, dtype=arr.dtype)
        super()._init_weight(name, oihw)
        arr[:] = oihw.transpose(NCHW_TO_NHWC)


# --------------------------------------------------------------------------------------------
# BERT-base pretraining (MLM + NSP heads, decoder tied to the word embeddings)
# --------------------------------------------------------------------------------------------


class EncoderLayer(nn.HybridBlock):
    def __init__(self, hidden: int, heads: int, intermediate: int, **kw) -> None:
        super().__init__(**kw)
        self.heads, self.head_dim = heads, hidden // heads
        with self.name_scope():
            self.q, self.k, self.v, self.o = (
                nn.Dense(hidden, flatten=False, in_units=hidden) for _ in range(4)
            )
            self.ff_in = nn.Dense(intermediate, flatten=False, in_units=hidden)
            self.ff_out = nn.Dense(hidden, flatten=False, in_units=intermediate)
            self.attn_norm = nn.LayerNorm(epsilon=model_math.BERT_LN_EPS, in_channels=hidden)
            self.out_norm = nn.LayerNorm(epsilon=model_math.BERT_LN_EPS, in_channels=hidden)
            self.drop = nn.Dropout(model_math.BERT_DROPOUT)

    def hybrid_forward(self, F, x):
        h = self.heads

        def split(t):  # [B, S, H] -> [B*heads, S, H/heads]
            t = F.transpose(F.reshape(t, shape=(0, 0, h, -1)), axes=(0, 2, 1, 3))
            return F.reshape(t, shape=(-3, 0, 0))

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = F.batch_dot(q, k, transpose_b=True) / math.sqrt(self.head_dim)
        probs = self.drop(F.softmax(scores, axis=-1))
        ctx = F.reshape(F.batch_dot(probs, v), shape=(-4, -1, h, 0, 0))
        ctx = F.reshape(F.transpose(ctx, axes=(0, 2, 1, 3)), shape=(0, 0, -3))
        x = self.attn_norm(x + self.drop(self.o(ctx)))
        y = self.ff_out(F.LeakyReLU(self.ff_in(x), act_type="gelu"))
        return self.out_norm(x + self.drop(y))


class BertForPreTraining(nn.HybridBlock):
    def __init__(self, cfg: dict[str, int], **kw) -> None:
        super().__init__(**kw)
        h, v = cfg["hidden"], cfg["vocab"]
        self.cfg = cfg
        with self.name_scope():
            # One matrix for the word embeddings and the MLM decoder (tied), plus its own bias.
            self.word_weight = self.params.get("word_weight", shape=(v, h))
            self.mlm_bias = self.params.get("mlm_bias", shape=(v,), init="zeros")
            self.position = nn.Embedding(cfg["max_positions"], h)
            self.token_type = nn.Embedding(cfg["type_vocab"], h)
            self.emb_norm = nn.LayerNorm(epsilon=model_math.BERT_LN_EPS, in_channels=h)
            self.drop = nn.Dropout(model_math.BERT_DROPOUT)
            self.encoder = nn.HybridSequential()
            for _ in range(cfg["layers"]):
                self.encoder.add(EncoderLayer(h, cfg["heads"], cfg["intermediate"]))
            self.pooler = nn.Dense(h, activation="tanh", in_units=h)
            self.nsp = nn.Dense(2, in_units=h)
            self.mlm_transform = nn.Dense(h, flatten=False, in_units=h)
            self.mlm_norm = nn.LayerNorm(epsilon=model_math.BERT_LN_EPS, in_channels=h)

    def hybrid_forward(self, F, input_ids, token_types, word_weight, mlm_bias):
        h, v = self.cfg["hidden"], self.cfg["vocab"]
        positions = F.contrib.arange_like(input_ids, axis=1)
        x = F.Embedding(input_ids, word_weight, input_dim=v, output_dim=h)
        x = F.broadcast_add(
            x + self.token_type(token_types), F.expand_dims(self.position(positions), 0)
        )
        x = self.drop(self.emb_norm(x))
        x = self.encoder(x)
        cls = F.squeeze(F.slice_axis(x, axis=1, begin=0, end=1), axis=1)
        nsp_logits = self.nsp(self.pooler(cls))
        t = self.mlm_norm(F.LeakyReLU(self.mlm_transform(x), act_type="gelu"))
        mlm_logits = F.FullyConnected(t, word_weight, mlm_bias, num_hidden=v, flatten=False)
        return mlm_logits, nsp_logits


@mx.optimizer.register
class TorchAdamW(mx.optimizer.Optimizer):
    """PyTorch's AdamW on MXNet's fused `adamw_update` op (MXNet 1.9 registers no AdamW).

    PyTorch: w -= lr * wd * w; w -= lr * m_hat / (sqrt(v_hat) + eps), with bias-corrected
    moments. The op computes w -= eta * (alpha * m / (sqrt(v) + eps) + wd' * w), so
    alpha = lr * sqrt(1 - beta2^t) / (1 - beta1^t) carries the bias correction (eps is then
    scaled by sqrt(1 - beta2^t): a negligible difference), wd' = lr * wd, eta = 1.

    Like gluon-nlp's BERTAdam, it updates MXNET_OPTIMIZER_AGGREGATION_SIZE weights per call of
    the multi-tensor `multi_adamw_update` (the same arithmetic; its kernel takes at most 50),
    and one weight per `adamw_update` call when that is unset or below 2.
    """

    def __init__(self, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8, **kw):
        super().__init__(**kw)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        size = int(os.environ.get("MXNET_OPTIMIZER_AGGREGATION_SIZE", "0"))
        self.aggregate_num = max(0, min(MAX_AGGREGATION["torchadamw"], size))

    def create_state(self, index, weight):
        zeros = mx.nd.zeros(weight.shape, weight.context, dtype=weight.dtype)
        return zeros, zeros.copy()

    def update_multi_precision(self, index, weight, grad, state):
        self.update(index, weight, grad, state)  # fp32 weights only (AMP keeps them fp32)

    def update(self, index, weight, grad, state):
        if not isinstance(index, (list, tuple)):  # one weight; the Updater groups otherwise
            index, weight, grad, state = [index], [weight], [grad], [state]
        self._update_count(index)
        lrs, wds = self._get_lrs(index), self._get_wds(index)
        alphas = [
            lr * math.sqrt(1 - self.beta2**t) / (1 - self.beta1**t)
            for lr, t in zip(lrs, (self._index_update_count[i] for i in index), strict=True)
        ]
        decays = [lr * wd for lr, wd in zip(lrs, wds, strict=True)]
        common = {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon,
                  "rescale_grad": self.rescale_grad}  # fmt: skip
        if len(index) > 1:
            means, variances = zip(*state, strict=True)
            mx.nd.contrib.multi_adamw_update(
                list(weight), list(grad), means, variances, out=list(weight), size=len(index),
                lrs=alphas, wds=decays, etas=[1.0] * len(index), **common,
            )  # fmt: skip
            return
        mean, var = state[0]
        mx.nd.contrib.adamw_update(weight[0], grad[0], mean, var, lr=alphas[0], eta=1.0,
                                   wd=decays[0], out=weight[0], **common)  # fmt: skip


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------

# What the best-practice flags really did here: reported in the start event and the log.
APPLIED: dict[str, object] = {}


def layouts(args: argparse.Namespace) -> tuple[str, str, str]:
    return args.conv_layout, args.batchnorm_layout, args.pooling_layout


def build_model(args: argparse.Namespace, ctx: mx.Context) -> nn.HybridBlock:
    if args.model == "bert":
        net = BertForPreTraining(model_math.BERT_BASE)
        net.initialize(mx.init.Normal(0.02), ctx=ctx)
        return net
    net = resnet50(args.num_classes, layouts(args))
    net.initialize(LayoutXavier(args.conv_layout == "NHWC", magnitude=2), ctx=ctx)
    return net


def count_params(net: nn.HybridBlock) -> int:
    """Trainable parameters only: BatchNorm running statistics have grad_req 'null', and are
    not parameters in PyTorch's count either."""
    return sum(math.prod(p.shape) for p in net.collect_params().values() if p.grad_req != "null")


def model_inputs(args: argparse.Namespace, ctx: mx.Context) -> tuple[mx.nd.NDArray, ...]:
    """The synthetic batch the model takes: images, or BERT's token ids and segment ids (drawn
    first, so training and inference see the same inputs for the same seed)."""
    b, nd = args.batch_size, mx.nd
    if args.model == "resnet50":  # in the first convolution's layout, as DALI can deliver them
        images = nd.random.normal(shape=(b, 3, args.image_size, args.image_size), ctx=ctx)
        return (images.transpose(NCHW_TO_NHWC) if args.conv_layout == "NHWC" else images,)
    s, vocab = args.seq_len, model_math.BERT_BASE["vocab"]
    input_ids = nd.random.randint(0, vocab, shape=(b, s), ctx=ctx).astype("float32")
    token_types = nd.concat(
        nd.zeros((b, s // 2), ctx=ctx), nd.ones((b, s - s // 2), ctx=ctx), dim=1
    )
    return input_ids, token_types


def make_trainer(
    args: argparse.Namespace, net: nn.HybridBlock, optimizer: str, params: dict[str, float]
) -> gluon.Trainer:
    """The Trainer, its optimizer updating `--optimizer-aggregation` weights per multi-tensor
    kernel call: MXNet's SGD (and TorchAdamW) read MXNET_OPTIMIZER_AGGREGATION_SIZE when they
    are created (MXNet's own default: SGD 4; TorchAdamW one weight per call)."""
    asked, limit = args.optimizer_aggregation, MAX_AGGREGATION[optimizer]
    if asked is not None:
        os.environ["MXNET_OPTIMIZER_AGGREGATION_SIZE"] = str(max(0, min(limit, asked)))
    trainer = gluon.Trainer(net.collect_params(), optimizer, params)
    size = trainer._optimizer.aggregate_num
    APPLIED["optimizer_aggregation"] = (
        size if asked in (None, size) else f"{size} ({asked} asked; the kernel takes 0-{limit})"
    )
    return trainer


Task = tuple[Callable[[], mx.nd.NDArray], gluon.Trainer]


def resnet_task(args: argparse.Namespace, net: nn.HybridBlock, ctx: mx.Context) -> Task:
    """(loss_fn, trainer): cross entropy of a synthetic batch of images, SGD with momentum."""
    (images,) = model_inputs(args, ctx)
    labels = mx.nd.random.randint(0, args.num_classes, shape=(args.batch_size,), ctx=ctx)
    labels = labels.astype("float32")
    ce = gluon.loss.SoftmaxCrossEntropyLoss()
    # MXNet's sgd adds wd * weight to the gradient, exactly as PyTorch's SGD does.
    trainer = make_trainer(args, net, "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4})

    def loss_fn() -> mx.nd.NDArray:
        return ce(net(images), labels).mean()

    return loss_fn, trainer


def bert_task(args: argparse.Namespace, net: nn.HybridBlock, ctx: mx.Context) -> Task:
    """(loss_fn, trainer): BERT pretraining's MLM + NSP loss of a synthetic batch, AdamW."""
    b, s, vocab, nd = args.batch_size, args.seq_len, model_math.BERT_BASE["vocab"], mx.nd
    input_ids, token_types = model_inputs(args, ctx)
    masked = nd.random.uniform(shape=(b, s), ctx=ctx) < 0.15
    masked[:, min(1, s - 1)] = 1
    mlm_targets = nd.random.randint(0, vocab, shape=(b, s), ctx=ctx).astype("float32")
    nsp_labels = nd.random.randint(0, 2, shape=(b,), ctx=ctx).astype("float32")
    trainer = make_trainer(
        args, net, "torchadamw",
        {"learning_rate": 1e-4, "wd": 0.01, "epsilon": 1e-8, "beta1": 0.9, "beta2": 0.999},
    )  # fmt: skip

    def loss_fn() -> mx.nd.NDArray:
        mlm_logits, nsp_logits = net(input_ids, token_types)
        logp = nd.log_softmax(mlm_logits, axis=-1)
        picked = nd.pick(logp, mlm_targets, axis=-1)
        mlm = -(picked * masked).sum() / masked.sum()  # mean over the masked positions
        nsp = -nd.pick(nd.log_softmax(nsp_logits, axis=-1), nsp_labels, axis=-1).mean()
        return mlm + nsp

    return loss_fn, trainer


def gradient_sum(net: nn.HybridBlock, kv) -> Callable[[], None]:
    """Data parallel: every step the kvstore sums each gradient over all workers, and each
    worker updates its own copy with the mean (as DDP does; the servers could not unpickle
    TorchAdamW). Not the Trainer's kvstore: its lazy first-step broadcast of the weights and
    the first gradient push share a key with no ordering, so a rank can pull the gradient sum
    into its weights. Here rank 0's weights are pulled, and landed, before any push."""
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    keys = list(range(len(params)))
    kv.init(keys, [p.data() for p in params])
    kv.pull(keys, out=[p.data() for p in params])
    mx.nd.waitall()

    def push_pull() -> None:
        for key, p in zip(keys, params, strict=True):
            kv.pushpull(key, p.grad(), priority=-key)  # in place: the sum over workers

    return push_pull


def record_backward(loss_fn: Callable[[], mx.nd.NDArray], trainer: gluon.Trainer,
                    amp) -> mx.nd.NDArray:  # fmt: skip
    """The forward recorded by autograd, then the backward pass (with --precision amp through
    mxnet.contrib.amp's dynamic loss scale); returns the loss."""
    with autograd.record():
        loss = loss_fn()
        if amp is not None:
            with amp.scale_loss(loss, trainer) as scaled:
                autograd.backward(scaled)
    if amp is None:
        loss.backward()
    return loss


def make_step(
    args: argparse.Namespace, net: nn.HybridBlock, ctx: mx.Context, kv=None
) -> Callable[[], float]:
    """The synthetic batch, the Trainer and step(): one forward/backward/update, returning the
    loss once the engine has finished the step."""
    loss_fn, trainer = (resnet_task if args.model == "resnet50" else bert_task)(args, net, ctx)
    push_pull = gradient_sum(net, kv) if kv is not None else None
    amp = None
    if args.precision == "amp":
        from mxnet.contrib import amp

        amp.init_trainer(trainer)  # dynamic loss scaling for float16

    def step() -> float:
        loss = record_backward(loss_fn, trainer, amp)
        if push_pull is not None:
            push_pull()
        # The loss is a batch mean already: 1/workers makes the workers' sum a mean.
        trainer.step(kv.num_workers if kv is not None else 1)
        # The engine is asynchronous: wait for the whole step (update included), then read.
        mx.nd.waitall()
        return float(loss.asscalar())

    return step


def make_predict(args: argparse.Namespace, net: nn.HybridBlock, ctx: mx.Context):
    """Inference (--mode infer) on make_step's synthetic inputs: predict(n) runs one forward of
    the first n rows in predict mode (no autograd recording) and returns once the engine is
    done. BERT's forward gives the MLM and NSP logits, no loss.

    autograd's training/recording state is thread-local in MXNet (LoadGen calls predict from
    its own thread), so predict sets it itself. A hybridized net (static_shape) always gets the
    full batch: another shape would re-plan its static graph and memory for each batch LoadGen
    forms (the rows past n are wasted work).
    """
    inputs = model_inputs(args, ctx)
    b = args.batch_size

    def predict(n: int) -> None:
        rows = b if args.xla else n
        with autograd.predict_mode():
            net(*(t if rows == b else t[:rows] for t in inputs))
        mx.nd.waitall()  # the engine is asynchronous: only now has the batch finished

    return predict


def apply_practice(args: argparse.Namespace) -> dict[str, int]:
    """Set the MXNET_* variables of the best-practice flags (MXNet reads these when it first
    creates a convolution or a hybridized graph, not at import, so setting them here works)
    and record what each flag does on this device; returns hybridize's bulk-size arguments."""
    cuda = args.device == "cuda"
    if args.model == "resnet50":
        keys = ("conv_layout", "batchnorm_layout", "pooling_layout")
        APPLIED.update(zip(keys, layouts(args), strict=True))
    if args.cudnn_autotune is not None:
        os.environ["MXNET_CUDNN_AUTOTUNE_DEFAULT"] = str(args.cudnn_autotune)
    if cuda and (args.model == "resnet50" or args.cudnn_autotune is not None):
        APPLIED["cudnn_autotune"] = int(os.environ.get("MXNET_CUDNN_AUTOTUNE_DEFAULT", "1"))
    elif args.cudnn_autotune is not None:
        APPLIED["cudnn_autotune"] = "unused (no cuDNN on a CPU)"
    if args.cuda_graphs is not None:
        # MXNet 1.9.1 captures the bulked segments of a static_alloc/static_shape graph only.
        graphs = bool(args.cuda_graphs) and cuda and args.xla
        os.environ["MXNET_ENABLE_CUDA_GRAPHS"] = "1" if graphs else "0"
        APPLIED["cuda_graphs"] = graphs
        if args.cuda_graphs and not graphs:
            APPLIED["cuda_graphs"] = "off (needs --xla)" if cuda else "off (GPU only)"
    bulk = {}
    for key in ("forward_bulk_size", "backward_bulk_size"):
        size = getattr(args, key)
        if size is None:
            continue
        if args.xla and args.mode == "train":  # bulking applies to a hybridized graph
            bulk[key] = APPLIED[key] = size
        else:
            APPLIED[key] = "unused (needs --xla, training)"
    return bulk


def conv_layout_unsupported(args: argparse.Namespace, ctx: mx.Context) -> str | None:
    """Why MXNet cannot run the NHWC convolutions asked for on `ctx`, None if it can: MXNet
    1.9.1's CPU kernels take NC(D)HW only ("Only support NCW, NCHW and NCDHW layout"; its oneDNN
    path refuses NHWC too), and cuDNN's NHWC needs a GPU. Probed with one tiny convolution,
    forward and backward, with constant weights (the seeded weights draw nothing here)."""
    if args.model != "resnet50" or args.conv_layout != "NHWC":
        return None
    conv = nn.Conv2D(2, 3, padding=1, use_bias=False, in_channels=2, layout="NHWC")
    conv.initialize(mx.init.One(), ctx=ctx)
    x = mx.nd.ones((1, 4, 4, 2), ctx=ctx)
    x.attach_grad()
    try:
        with autograd.record():
            y = conv(x)
        y.backward()
        mx.nd.waitall()  # the engine is asynchronous: a kernel's refusal surfaces here
    except mx.base.MXNetError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        why = "its CPU convolutions take NCHW only; " if args.device == "cpu" else ""
        return (
            f"conv_layout NHWC: MXNet {mx.__version__} cannot run NHWC convolutions on "
            f"{args.device} ({lines[-1] if lines else type(exc).__name__}); {why}run with "
            "--set conv_layout=NCHW"
        )
    return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = kit.model_parser(
        __doc__, xla_help="hybridize(static_alloc, static_shape)",
        threads_help="OMP threads (set before MXNet starts)",
    )  # fmt: skip
    # Best practice, each switchable (the adapter passes its defaults for the device, model,
    # precision and --xla); unset, MXNet's own default stands.
    layout = {"choices": ("NCHW", "NHWC"), "default": "NCHW"}
    p.add_argument("--conv-layout", **layout, help="ResNet50's convolutions (and the images)")
    p.add_argument("--batchnorm-layout", **layout, help="ResNet50's BatchNorms (axis 1 or 3)")
    p.add_argument("--pooling-layout", **layout, help="ResNet50's max and average pooling")
    p.add_argument("--optimizer-aggregation", type=int, metavar="N",
                   help="weights per multi-tensor optimizer update "
                   "(MXNET_OPTIMIZER_AGGREGATION_SIZE)")  # fmt: skip
    p.add_argument("--cudnn-autotune", type=int, choices=(0, 1, 2),
                   help="MXNET_CUDNN_AUTOTUNE_DEFAULT (GPU)")  # fmt: skip
    p.add_argument("--cuda-graphs", type=int, choices=(0, 1),
                   help="MXNET_ENABLE_CUDA_GRAPHS (GPU, with --xla)")  # fmt: skip
    p.add_argument("--forward-bulk-size", type=int, metavar="N",
                   help="ops per engine bulk, hybridized forward (training, --xla)")  # fmt: skip
    p.add_argument("--backward-bulk-size", type=int, metavar="N",
                   help="ops per engine bulk, hybridized backward (training, --xla)")  # fmt: skip
    return kit.parse_model_args(p, argv, model_math.BERT_BASE["max_positions"])


class MXNet(kit.Hooks):
    """This framework's parts of the worker sequence (kit.main runs them)."""

    framework, version, compiler = "mxnet", mx.__version__, "hybridized"
    practice_empty = "none (MXNet defaults)"
    kv, ctx, amp_dtype = None, mx.cpu(), None
    bulk: dict[str, int] = {}

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return parse_args(argv)

    def describe(self, args: argparse.Namespace) -> dict[str, object]:
        return {"params": count_params(build_model(args, mx.cpu())),
                "flops_per_sample": model_math.flops_per_sample(args)}  # fmt: skip

    def cuda_missing(self) -> str | None:
        return None if mx.context.num_gpus() else f"MXNet {mx.__version__} sees no GPU"

    def place(self, args: argparse.Namespace) -> kit.Place:
        # Data parallel when dist_node.py started this as one of several ps-lite workers:
        # joining the kvstore waits for the scheduler, the servers and every other worker.
        # Inference joins it too, but only for its rank (the events file's name) and so that
        # the scheduler and the servers leave when the workers finalize; it never exchanges a
        # value through it.
        if (os.environ.get("DMLC_ROLE") == "worker"
                and int(os.environ.get("DMLC_NUM_WORKER", "1")) > 1):  # fmt: skip
            self.kv = mx.kv.create("dist_sync")
            return kit.Place(self.kv.rank, self.kv.num_workers)
        return kit.Place()

    def setup(self, args: argparse.Namespace) -> None:
        if args.precision == "amp" and args.device == "cpu":
            raise kit.Unsupported(
                "MXNet 1.9 AMP is float16 on GPUs; its CPU path, amp.init(target_dtype="
                "'bfloat16'), needs oneDNN bf16 kernels (AVX512-BF16/AMX) and fails on this "
                "wheel and CPU with 'could not create a primitive descriptor iterator'"
            )
        self.ctx = mx.gpu(0) if args.device == "cuda" else mx.cpu()
        self.bulk = apply_practice(args)
        reason = conv_layout_unsupported(args, self.ctx)  # before the seed: it draws nothing
        if reason:
            raise kit.Unsupported(reason)
        mx.random.seed(args.seed)
        if args.precision == "amp":
            from mxnet.contrib import amp

            amp.init()
            self.amp_dtype = "float16"

    def build(self, args: argparse.Namespace) -> nn.HybridBlock:
        net = build_model(args, self.ctx)  # the same weights on every rank (rank 0's pulled too)
        if args.xla:
            net.hybridize(static_alloc=True, static_shape=True, **self.bulk)
        if self.kv is not None:
            mx.random.seed(args.seed + self.kv.rank)  # each rank its own synthetic batch
        return net

    def make_step(self, args: argparse.Namespace, net: nn.HybridBlock) -> Callable[[], float]:
        return make_step(args, net, self.ctx, self.kv)

    def make_predict(self, args: argparse.Namespace, net: nn.HybridBlock) -> Callable[[int], None]:
        return make_predict(args, net, self.ctx)

    def facts(self, args: argparse.Namespace, net: nn.HybridBlock) -> kit.Facts:
        cpu, kv = args.device == "cpu", self.kv
        notes = ()
        if kv is not None:
            threads_text = os.environ.get("OMP_NUM_THREADS", "MXNet's default")
            notes = (f"rank {kv.rank} of {kv.num_workers} (kvstore {kv.type}), "
                     f"{threads_text} threads",)  # fmt: skip
        return kit.Facts(
            args.device, kit.cpu_name() if cpu else f"GPU {self.ctx.device_id}", self.amp_dtype,
            # MXNet's CPU operators read OMP_NUM_THREADS at start-up (unset: one per CPU, 0)
            (kit.omp_threads() or 0) if cpu else None,
            params=count_params(net), flops=model_math.flops_per_sample(args),
            practice=APPLIED, notes=notes,
        )  # fmt: skip

    def sync(self) -> None:
        mx.nd.waitall()


def main(argv: list[str] | None = None) -> int:
    return kit.main(MXNet(), argv)


if __name__ == "__main__":
    sys.exit(main())
