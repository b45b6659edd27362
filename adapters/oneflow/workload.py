"""OneFlow workload for dlperf: ResNet50-v1.5 or BERT-base, training or inference, synthetic data.

Runs inside the adapter's isolated virtual env and imports only oneflow, numpy (a oneflow
dependency, used to make the synthetic batch), the standard library and the shared harness
(adapters/_shared: workload_kit for the command line, events, timed loop and LoadGen hand-off,
model_math for the shapes and FLOPs). It follows the dlperf events contract: JSON lines written
to the file named by $DLPERF_EVENTS ("start", "ready", one "step" per iteration, "end", or
"unsupported"); a human-readable log goes to stdout.

OneFlow's eager engine is asynchronous (ops are queued to a virtual machine): each step's
timestamp is taken only after the loss has been read back to a Python float.

Data parallel when oneflow.distributed.launch starts several ranks (RANK / WORLD_SIZE /
LOCAL_RANK): oneflow.nn.parallel.DistributedDataParallel all-reduces the gradients every step;
the batch size is per rank, and each rank writes its own events file ("{rank}" in the path).

`--mode infer`: a step is one forward of the model in eval mode under oneflow.no_grad() (with
--xla an nn.Graph of the forward); each rank runs its own, no DDP. With `--loadgen-settings`
MLPerf LoadGen then drives the model (adapters/_shared/loadgen_run.py) on rank 0, writing its
logs to $DLPERF_LOADGEN_DIR.

Best practice: the adapter passes OneFlow's own settings (its ResNet50 and LiBai BERT scripts)
as flags: NHWC and fused batch norms for ResNet50, LiBai's fused kernels for BERT, nn.Graph's
fusion passes with --xla, cuDNN's algorithm search. Each is checked on the device first (a tiny
run of its kernels; NHWC against NCHW) and turned off, with the reason, where it cannot run or
gives other numbers; the start event's "practice" says what was applied.

Usage:
    python workload.py --model resnet50 --batch-size 64 --steps 50 [--precision amp] [--xla]
    python workload.py --model resnet50 --mode infer --loadgen-settings '{"scenario": "offline"}'
    python workload.py --model bert --describe   # one JSON line: params, FLOPs; no training
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# OneFlow counts nodes by the distinct IP addresses its ranks reach the master from, and places
# rank r on device r % (world / nodes). Simulated nodes on one host all come from 127.0.0.1: one
# OneFlow node, whose device index for rank r is r itself, while the launcher sets LOCAL_RANK to
# the index within the simulated node (0 on node 1). Left so, rank 1 finds itself missing from
# the all-reduce placement ("@1:1") and aborts (value_not_found in cpu_all_reduce.cpp; the
# master then reports "Machine 1 lost"). OneFlow reads LOCAL_RANK once, so fix it before import.
if os.environ.get("DLPERF_ONEFLOW_SINGLE_HOST") == "1" and "RANK" in os.environ:
    os.environ["LOCAL_RANK"] = os.environ["RANK"]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import workload_kit as kit  # noqa: E402

kit.pin_omp_threads(sys.argv[1:])  # --threads as OMP_NUM_THREADS, which OneFlow reads at import

import numpy as np  # noqa: E402
import oneflow as flow  # noqa: E402
import oneflow.nn.functional as F  # noqa: E402
from oneflow import nn  # noqa: E402

# --------------------------------------------------------------------------------------------
# ResNet50-v1.5
# --------------------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carries the stride: the v1.5 change), 1x1 expand, plus the shortcut.

    `fuse_bn_relu` / `fuse_bn_add_relu`: nn.FusedBatchNorm2d (one normalization_add_relu kernel)
    in place of BatchNorm2d + ReLU / BatchNorm2d + add + ReLU, as OneFlow's own ResNet50 does
    (Oneflow-Inc/models Vision/classification/image/resnet50/models/resnet50.py). The same
    parameters (gamma, beta) and the same math; only the kernels differ."""

    def __init__(
        self,
        in_ch: int,
        width: int,
        stride: int,
        fuse_bn_relu: bool = False,
        fuse_bn_add_relu: bool = False,
    ) -> None:
        super().__init__()
        out_ch = width * model_math.BOTTLENECK_EXPANSION
        self.fuse_bn_relu = fuse_bn_relu
        self.fuse_bn_add_relu = fuse_bn_add_relu
        norm = nn.FusedBatchNorm2d if fuse_bn_relu else nn.BatchNorm2d
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = norm(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = norm(width)
        self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
        self.bn3 = (nn.FusedBatchNorm2d if fuse_bn_add_relu else nn.BatchNorm2d)(out_ch)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def bn_relu(self, bn: nn.Module, x: flow.Tensor) -> flow.Tensor:
        return bn(x, None) if self.fuse_bn_relu else self.relu(bn(x))

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        # The shortcut first: upstream found it faster with nn.Graph's add-to-output fusion.
        identity = x if self.downsample is None else self.downsample(x)
        out = self.bn_relu(self.bn1, self.conv1(x))
        out = self.bn_relu(self.bn2, self.conv2(out))
        out = self.conv3(out)
        if self.fuse_bn_add_relu:
            return self.bn3(out, identity)
        return self.relu(self.bn3(out) + identity)


class ResNet50(nn.Module):
    """ResNet50-v1.5. `channels_last`: built while ONEFLOW_ENABLE_NHWC=1, OneFlow 0.9's NHWC
    switch, which its Conv2d, BatchNorm2d, FusedBatchNorm2d and MaxPool2d read when they are
    created (and its cuDNN batch-norm kernel when it runs): they then take NHWC tensors, and
    the conv weights are stored (out, kh, kw, in), the same number of parameters."""

    def __init__(
        self,
        num_classes: int = 1000,
        fuse_bn_relu: bool = False,
        fuse_bn_add_relu: bool = False,
        channels_last: bool = False,
    ) -> None:
        super().__init__()
        self.channels_last = channels_last
        self.fuse_bn_relu = fuse_bn_relu
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = (nn.FusedBatchNorm2d if fuse_bn_relu else nn.BatchNorm2d)(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages = []
        in_ch = 64
        for i, (width, blocks) in enumerate(model_math.RESNET50_STAGES):
            layers = []
            for b in range(blocks):
                stride = 2 if (b == 0 and i > 0) else 1
                layers.append(Bottleneck(in_ch, width, stride, fuse_bn_relu, fuse_bn_add_relu))
                in_ch = width * model_math.BOTTLENECK_EXPANSION
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)  # NCHW only; NHWC averages over axes 1, 2
        self.fc = nn.Linear(in_ch, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.FusedBatchNorm2d)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        # Zero-init the last BN gamma of each block (as NVIDIA's reference does), like the
        # PyTorch workload. Cost is unaffected.
        for m in self.modules():
            if isinstance(m, Bottleneck):
                nn.init.zeros_(m.bn3.weight)

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        x = self.conv1(x)
        x = self.bn1(x, None) if self.fuse_bn_relu else self.relu(self.bn1(x))
        x = self.maxpool(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        pooled = x.mean(dim=(1, 2)) if self.channels_last else flow.flatten(self.avgpool(x), 1)
        return self.fc(pooled)


# --------------------------------------------------------------------------------------------
# BERT-base pretraining (MLM + NSP heads)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BertFusions:
    """LiBai's fused BERT kernels (Oneflow-Inc/libai configs/common/models/bert.py:
    bias_gelu_fusion, bias_dropout_fusion, scale_mask_softmax_fusion, all True), as its layers
    call them (libai/layers/mlp.py, libai/layers/attention.py). The Linear modules stay as
    they are (same parameters); a fused layer skips their bias add and hands the bias to the
    fused kernel."""

    bias_gelu: bool = False  # flow._C.fused_bias_add_gelu after the intermediate matmul
    bias_dropout: bool = False  # flow._C.fused_bias_add_dropout after both output matmuls
    scale_mask_softmax: bool = False  # flow._C.fused_scale_mask_softmax_dropout on the scores


def matmul_no_bias(x: flow.Tensor, linear: nn.Linear) -> flow.Tensor:
    return flow.matmul(x, linear.weight, transpose_b=True)


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, fusions: BertFusions, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.scale = 1.0 / math.sqrt(hidden // heads)
        self.fusions = fusions
        self.dropout_p = dropout
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, x: flow.Tensor, attn_mask: flow.Tensor | None) -> flow.Tensor:
        b, s, h = x.shape

        def split(t: flow.Tensor) -> flow.Tensor:  # [B, S, H] -> [B, heads, S, H/heads]
            return t.reshape(b, s, self.heads, h // self.heads).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        # OneFlow 0.9 has no fused scaled_dot_product_attention: the same math, written out.
        scores = flow.matmul(q, k.transpose(-2, -1))
        if self.fusions.scale_mask_softmax:
            # One kernel scales, masks (fill -10000, as LiBai), softmaxes and drops out. The
            # mask is [B, 1, S, S], broadcast over the heads, as LiBai's BERT passes it.
            if attn_mask is None:
                keep = flow.ones(b, 1, s, s, dtype=flow.bool, device=x.device)
            else:
                keep = (attn_mask > 0.5).expand(b, 1, s, s).contiguous()
            p = self.dropout_p if self.training else 0.0
            probs = flow._C.fused_scale_mask_softmax_dropout(
                scores, keep, fill_value=-10000.0, scale=self.scale, p=p
            )[0]
        else:
            scores = scores * self.scale
            if attn_mask is not None:
                scores = scores + (1.0 - attn_mask.to(scores.dtype)) * -10000.0
            probs = self.attn_dropout(flow.softmax(scores, dim=-1))
        ctx = flow.matmul(probs, v)
        return ctx.transpose(1, 2).reshape(b, s, h)


class EncoderLayer(nn.Module):
    """Post-LN transformer layer, as in the original BERT."""

    def __init__(
        self, hidden: int, heads: int, intermediate: int, fusions: BertFusions, dropout: float
    ) -> None:
        super().__init__()
        self.fusions = fusions
        self.dropout_p = dropout
        self.attention = SelfAttention(hidden, heads, fusions, dropout)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=model_math.BERT_LN_EPS)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=model_math.BERT_LN_EPS)
        self.dropout = nn.Dropout(dropout)

    def linear_dropout(self, x: flow.Tensor, linear: nn.Linear) -> flow.Tensor:
        if self.fusions.bias_dropout:
            p = self.dropout_p if self.training else 0.0
            return flow._C.fused_bias_add_dropout(
                matmul_no_bias(x, linear), linear.bias, p=p, axis=x.ndim - 1
            )
        return self.dropout(linear(x))

    def forward(self, x: flow.Tensor, attn_mask: flow.Tensor | None) -> flow.Tensor:
        x = self.attn_norm(x + self.linear_dropout(self.attention(x, attn_mask), self.attn_out))
        if self.fusions.bias_gelu:
            y = matmul_no_bias(x, self.intermediate)
            y = flow._C.fused_bias_add_gelu(y, self.intermediate.bias, axis=y.ndim - 1)
        else:
            y = F.gelu(self.intermediate(x))
        return self.out_norm(x + self.linear_dropout(y, self.output))


class BertForPreTraining(nn.Module):
    def __init__(
        self,
        cfg: dict[str, int],
        fusions: BertFusions = BertFusions(),
        dropout: float = model_math.BERT_DROPOUT,
    ) -> None:
        super().__init__()
        hidden = cfg["hidden"]
        self.vocab = cfg["vocab"]
        self.word_embeddings = nn.Embedding(cfg["vocab"], hidden)
        self.position_embeddings = nn.Embedding(cfg["max_positions"], hidden)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab"], hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=model_math.BERT_LN_EPS)
        self.emb_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            [
                EncoderLayer(hidden, cfg["heads"], cfg["intermediate"], fusions, dropout)
                for _ in range(cfg["layers"])
            ]
        )
        self.pooler = nn.Linear(hidden, hidden)
        self.nsp = nn.Linear(hidden, 2)
        self.mlm_transform = nn.Linear(hidden, hidden)
        self.mlm_norm = nn.LayerNorm(hidden, eps=model_math.BERT_LN_EPS)
        # The MLM decoder's weight is the word-embedding matrix (tied); only its bias is new.
        self.mlm_bias = nn.Parameter(flow.zeros(cfg["vocab"]))

        for m in self.modules():  # BERT's init: N(0, 0.02) weights, zero biases, unit LN
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(
        self,
        input_ids: flow.Tensor,
        token_type_ids: flow.Tensor,
        position_ids: flow.Tensor,
        attn_mask: flow.Tensor | None,
    ) -> tuple[flow.Tensor, flow.Tensor]:
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(position_ids)
            + self.token_type_embeddings(token_type_ids)
        )
        x = self.emb_dropout(self.emb_norm(x))
        for layer in self.layers:
            x = layer(x, attn_mask)
        nsp_logits = self.nsp(flow.tanh(self.pooler(x[:, 0])))
        h = self.mlm_norm(F.gelu(self.mlm_transform(x)))
        b, s, hidden = h.shape
        mlm_logits = flow.matmul(h.reshape(b * s, hidden), self.word_embeddings.weight.t())
        return mlm_logits + self.mlm_bias, nsp_logits  # [B*S, vocab], [B, 2]


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------


def count_params(model: nn.Module) -> int:
    """Unique parameters: a shared (tied) tensor is counted once."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def set_nhwc(on: bool) -> None:
    """OneFlow 0.9's layout switch: modules created while it is "1" work in NHWC, and its cuDNN
    batch norm reads it at every call, so it stays set for the run. Set in the process, before
    the model is built, as OneFlow's own ResNet50 does (models/resnet50.py, models/data.py)."""
    os.environ["ONEFLOW_ENABLE_NHWC"] = "1" if on else "0"


def build_model(args: argparse.Namespace) -> nn.Module:
    """The model as the (resolved) best-practice flags ask. A channels-last ResNet50 starts from
    the same weights as the NCHW one (built first, its conv weights copied in NHWC order), so
    the two give the same losses for the same seed."""
    if args.model == "bert":
        fusions = BertFusions(
            bias_gelu=bool(args.bias_gelu_fusion),
            bias_dropout=bool(args.bias_dropout_fusion),
            scale_mask_softmax=bool(args.scale_mask_softmax_fusion),
        )
        return BertForPreTraining(model_math.BERT_BASE, fusions, args.dropout)

    def resnet(channels_last: bool) -> ResNet50:
        set_nhwc(channels_last)
        fuse = (bool(args.fuse_bn_relu), bool(args.fuse_bn_add_relu))
        return ResNet50(args.num_classes, *fuse, channels_last=channels_last)

    model = resnet(False)  # also overrides an ONEFLOW_ENABLE_NHWC inherited from the shell
    if not args.channels_last:
        return model
    nhwc = resnet(True)
    source = dict(model.named_parameters()) | dict(model.named_buffers())
    with flow.no_grad():
        for name, tensor in [*nhwc.named_parameters(), *nhwc.named_buffers()]:
            value = source[name]
            if value.ndim == 4:  # conv weight: (out, in, kh, kw) -> (out, kh, kw, in)
                value = value.permute(0, 2, 3, 1).contiguous()
            tensor.copy_(value)
    return nhwc


def amp_problem(device: str) -> str | None:
    """Why autocast cannot run on `device` with this OneFlow build, or None if it can.

    CUDA: fp16 autocast. CPU: bf16 autocast, probed with a tiny matmul whose output must come
    out in bfloat16 (a no-op autocast would silently run fp32 labelled as amp)."""
    dtype = flow.float16 if device == "cuda" else flow.bfloat16
    if not hasattr(flow, "autocast"):
        return f"oneflow {flow.__version__} has no oneflow.autocast"
    try:
        a = flow.randn(4, 4, device=device, requires_grad=True)
        lin = nn.Linear(4, 4).to(device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with flow.autocast(device, dtype=dtype):
                out = lin(a)
        got = out.dtype
        out.float().sum().backward()
        float(a.grad.sum().numpy())
    except Exception as exc:
        why = f"oneflow {flow.__version__}: {dtype} autocast on {device} fails"
        return f"{why}: {kit.error_line(exc)}"[:500]
    if got != dtype:
        said = "; ".join(str(w.message) for w in caught)
        return (
            f"oneflow {flow.__version__}: autocast({device!r}, dtype={dtype}) is a no-op here "
            f"(a Linear under it returns {got}{'; oneflow says: ' + said if said else ''}); "
            "refusing to label fp32 as amp"
        )[:500]
    return None


# --------------------------------------------------------------------------------------------
# Best practice: OneFlow's own settings (the adapter passes its defaults), each switchable
# --------------------------------------------------------------------------------------------

RESNET_SETTINGS = ("fuse_bn_relu", "fuse_bn_add_relu", "channels_last")  # NHWC checked last
BERT_SETTINGS = ("bias_gelu_fusion", "bias_dropout_fusion", "scale_mask_softmax_fusion")
GRAPH_SETTINGS = ("fuse_add_to_output", "fuse_model_update_ops", "fuse_cast_scale")
TRAIN_GRAPH_SETTINGS = ("fuse_model_update_ops", "fuse_cast_scale")  # optimizer / grad scaling

# What the best-practice flags really did here, reported in the start event and the log: True
# or False as asked, a word for a choice, or "off: <why>" where a setting asked for cannot
# apply (no kernel for this device in this OneFlow, an nn.Graph pass in an eager run, ...).
APPLIED: dict[str, object] = {}


def run_autocast(args: argparse.Namespace, device: flow.device) -> Any:
    """The eager run's autocast context, for the checks below: a no-op without --precision amp,
    and with --xla, where nn.Graph's own AMP pass (config.enable_amp) places the casts and the
    checks can only ask whether the device has the kernels."""
    if args.precision != "amp" or args.xla:
        return contextlib.nullcontext()
    return flow.autocast(
        device.type, dtype=flow.float16 if device.type == "cuda" else flow.bfloat16
    )


def kernel_problem(args: argparse.Namespace, device: flow.device, key: str) -> str | None:
    """Why the fused kernels behind `key` cannot run on `device` here, or None: they run once on
    tiny tensors the way the model calls them (under the run's autocast; forward and backward
    when training, with the run's dropout). OneFlow 0.9 registers several fused kernels for
    CUDA only, and says so only when one is first called."""
    train = args.mode == "train"
    p = args.dropout if train else 0.0
    try:
        with contextlib.nullcontext() if train else flow.no_grad():
            x = flow.randn(2, 4, 4, 8, device=device, requires_grad=train)
            with run_autocast(args, device):
                if key in ("fuse_bn_relu", "fuse_bn_add_relu"):
                    conv = nn.Conv2d(4, 4, 1, bias=False).to(device)
                    norm = nn.FusedBatchNorm2d(4).to(device)
                    h = conv(x)
                    y = norm(h, h if key == "fuse_bn_add_relu" else None)
                elif key in ("bias_gelu_fusion", "bias_dropout_fusion"):
                    lin = nn.Linear(8, 8).to(device)
                    h = matmul_no_bias(x, lin)
                    if key == "bias_gelu_fusion":
                        y = flow._C.fused_bias_add_gelu(h, lin.bias, axis=3)
                    else:
                        y = flow._C.fused_bias_add_dropout(h, lin.bias, p=p, axis=3)
                else:  # scale_mask_softmax_fusion: x as [batch, heads, seq, head size]
                    keep = flow.ones(2, 1, 4, 4, dtype=flow.bool, device=device)
                    scores = flow.matmul(x, x, transpose_b=True)
                    y = flow._C.fused_scale_mask_softmax_dropout(
                        scores, keep, fill_value=-10000.0, scale=0.125, p=p
                    )[0]
            if train:
                y.float().sum().backward()
                float(x.grad.float().sum().item())  # the engine is asynchronous: wait for it
            else:
                float(y.float().sum().item())
    except Exception as exc:
        missing = re.search(r"op_type_name: (\w+)", str(exc))
        if "Cannot find the kernel" in str(exc) and missing:
            return f"oneflow {flow.__version__} has no {device.type} kernel for {missing[1]}"
        return f"fails on {device.type} in oneflow {flow.__version__}: {kit.error_line(exc)}"[:300]
    return None


def nhwc_problem(args: argparse.Namespace, device: flow.device) -> str | None:
    """Why channels-last cannot serve here, or None: a tiny conv + batch norm (+ ReLU) + max pool
    built in NHWC must give what the NCHW one gives from the same weights and images (forward,
    and the image gradient when training). OneFlow 0.9's CPU conv and batch-norm kernels take
    NHWC tensors without complaint and return wrong numbers (conv off by ~20 on unit-scale
    data, seen on this project's VM), so running is not enough."""
    train = args.mode == "train"
    rng = np.random.RandomState(0)
    images = rng.standard_normal((2, 8, 6, 6)).astype(np.float32)
    weight = (0.1 * rng.standard_normal((8, 8, 3, 3))).astype(np.float32)

    def nhwc(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a.transpose(0, 2, 3, 1))

    results = []
    try:
        for on in (False, True):
            set_nhwc(on)
            conv = nn.Conv2d(8, 8, 3, padding=1, bias=False).to(device)
            norm = (nn.FusedBatchNorm2d if args.fuse_bn_relu else nn.BatchNorm2d)(8).to(device)
            pool = nn.MaxPool2d(3, stride=2, padding=1)
            with flow.no_grad():
                conv.weight.copy_(flow.tensor(nhwc(weight) if on else weight, device=device))
            x = flow.tensor(nhwc(images) if on else images, device=device, requires_grad=train)
            with contextlib.nullcontext() if train else flow.no_grad():
                with run_autocast(args, device):
                    h = conv(x)
                    y = pool(norm(h, None) if args.fuse_bn_relu else flow.relu(norm(h)))
                out = [y.float().numpy()]
                if train:
                    (y.float() * y.float()).sum().backward()
                    out.append(x.grad.float().numpy())
            results.append(out if on else [nhwc(a) for a in out])
    except Exception as exc:
        return f"fails on {device.type} in oneflow {flow.__version__}: {kit.error_line(exc)}"[:300]
    finally:
        set_nhwc(False)
    tol = 2e-2 if args.precision == "amp" else 1e-3
    for name, want, got in zip(("output", "image gradient"), *results, strict=False):
        limit = tol * max(1.0, float(np.abs(want).max()))
        diff = float(np.abs(want - got).max())
        if not diff <= limit:
            return (
                f"oneflow {flow.__version__}'s NHWC conv / batch norm on {device.type} give "
                f"another {name} than NCHW from the same weights (max abs difference "
                f"{diff:.3g} > {limit:.3g})"
            )
    return None


def resolve_practice(args: argparse.Namespace, device: flow.device) -> None:
    """Apply the best-practice flags that can apply here and turn off those that cannot, each
    recorded in APPLIED; the model, step and graphs are then built from `args` as resolved."""
    own, other = RESNET_SETTINGS, BERT_SETTINGS
    if args.model == "bert":
        own, other = other, own
    for key in own:
        problem = None
        if getattr(args, key) and key == "channels_last":
            problem = nhwc_problem(args, device)
        elif getattr(args, key):
            problem = kernel_problem(args, device, key)
        APPLIED[key] = f"off: {problem}" if problem else bool(getattr(args, key))
        if problem:
            setattr(args, key, 0)
    for key in other:
        if getattr(args, key):
            APPLIED[key] = f"off: a {'BERT' if args.model == 'resnet50' else 'ResNet50'} setting"
            setattr(args, key, 0)

    if device.type == "cuda" and args.cudnn_conv_algo != "heuristic":
        # Eager convolutions; nn.Graph takes the same choice from its config (configure_graph).
        try:
            flow.backends.cudnn.enable_conv_heuristic_search_algo(False)
            APPLIED["cudnn_conv_algo"] = args.cudnn_conv_algo
        except Exception as exc:  # an nn.Graph still searches through its own config
            where = "nn.Graph only" if args.xla else "off"
            APPLIED["cudnn_conv_algo"] = f"{where}: flow.backends.cudnn says {kit.error_line(exc)}"
    elif device.type == "cuda" and args.model == "resnet50":
        APPLIED["cudnn_conv_algo"] = args.cudnn_conv_algo
    elif args.cudnn_conv_algo != "heuristic":
        APPLIED["cudnn_conv_algo"] = f"off: cuDNN is CUDA only (this run is on {device.type})"
        args.cudnn_conv_algo = "heuristic"

    for key in GRAPH_SETTINGS:
        asked = bool(getattr(args, key))
        if not args.xla:
            if asked:
                APPLIED[key] = "off: an nn.Graph pass; this run is eager (no --xla)"
        elif args.mode == "infer" and key in TRAIN_GRAPH_SETTINGS:
            if asked:
                APPLIED[key] = "off: a training-graph pass; this run is inference"
        else:
            APPLIED[key] = asked
            continue
        setattr(args, key, 0)


def configure_graph(graph: nn.Graph, args: argparse.Namespace, device: flow.device) -> None:
    """The resolved nn.Graph best practice, as OneFlow's ResNet50 (models graph.py) and LiBai
    (libai/models/utils/graph_base.py) configure their graphs."""
    if args.fuse_add_to_output:
        graph.config.allow_fuse_add_to_output(True)
    if args.fuse_model_update_ops:
        graph.config.allow_fuse_model_update_ops(True)
    if args.fuse_cast_scale:
        graph.config.allow_fuse_cast_scale(True)
    if device.type == "cuda":
        graph.config.enable_cudnn_conv_heuristic_search_algo(args.cudnn_conv_algo == "heuristic")


class DynamicLossScaler:
    """Eager fp16 loss scaling (OneFlow 0.9's flow.amp.GradScaler only configures nn.Graph):
    the torch.amp.GradScaler recipe, and its calls (scale, step, update). Unscale the
    gradients, skip the update and halve the scale on inf/NaN, double the scale after 2000
    clean steps."""

    def __init__(self, model: nn.Module, init_scale: float = 2.0**16) -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.loss_scale = init_scale
        self.clean_steps = 0
        self.finite = True

    def scale(self, loss: flow.Tensor) -> flow.Tensor:
        return loss * self.loss_scale

    def step(self, optimizer: Any) -> None:
        grads = [p.grad for p in self.params if p.grad is not None]
        for g in grads:
            g.mul_(1.0 / self.loss_scale)
        self.finite = bool(flow.stack([flow.isfinite(g).all() for g in grads]).all().item())
        if self.finite:
            optimizer.step()

    def update(self) -> None:
        self.clean_steps = self.clean_steps + 1 if self.finite else 0
        if not self.finite:
            self.loss_scale *= 0.5
        elif self.clean_steps == 2000:
            self.loss_scale, self.clean_steps = self.loss_scale * 2.0, 0


def model_inputs(
    args: argparse.Namespace, device: flow.device, rng: np.random.RandomState
) -> tuple[flow.Tensor | None, ...]:
    """The synthetic batch the model takes, on the device: images, or BERT's token ids, segment
    ids, positions and attention mask. Drawn first from `rng`, so training and inference see
    the same inputs for the same seed."""
    b = args.batch_size
    if args.model == "resnet50":
        images_np = rng.standard_normal((b, 3, args.image_size, args.image_size))
        if args.channels_last:  # the same images, NHWC
            images_np = np.ascontiguousarray(images_np.transpose(0, 2, 3, 1))
        return (flow.tensor(images_np.astype(np.float32), device=device),)
    s = args.seq_len
    input_ids_np = rng.randint(0, model_math.BERT_BASE["vocab"], (b, s))
    token_types_np = np.zeros((b, s), dtype=np.int64)
    token_types_np[:, s // 2 :] = 1
    attention_mask_np = np.ones((b, s), dtype=np.int64)
    position_ids_np = np.broadcast_to(np.arange(s), (b, s)).copy()
    input_ids, token_types, position_ids = (
        flow.tensor(a.astype(np.int64), dtype=flow.int64, device=device)
        for a in (input_ids_np, token_types_np, position_ids_np)
    )
    # The mask is all ones, so attention needs none (kept general for a padded batch).
    attn_mask = None
    if not attention_mask_np.all():
        attn_mask = flow.tensor(
            attention_mask_np[:, None, None, :].astype(np.float32), device=device
        )
    return input_ids, token_types, position_ids, attn_mask


Task = tuple[Callable[[nn.Module], flow.Tensor], Any]


def resnet_task(args: argparse.Namespace, model: nn.Module, device: flow.device,
                rng: np.random.RandomState) -> Task:  # fmt: skip
    """(loss_fn, optimizer): cross entropy of a synthetic batch of images, SGD with momentum."""
    (images,) = model_inputs(args, device, rng)
    labels = flow.tensor(rng.randint(0, args.num_classes, (args.batch_size,)), dtype=flow.int64,
                         device=device)  # fmt: skip
    optimizer = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()

    def loss_fn(m: nn.Module) -> flow.Tensor:
        return criterion(m(images), labels)

    return loss_fn, optimizer


def bert_task(args: argparse.Namespace, model: nn.Module, device: flow.device,
              rng: np.random.RandomState) -> Task:  # fmt: skip
    """(loss_fn, optimizer): BERT pretraining's MLM + NSP loss of a synthetic batch, AdamW."""
    b, s, vocab = args.batch_size, args.seq_len, model_math.BERT_BASE["vocab"]
    input_ids, token_types, position_ids, attn_mask = model_inputs(args, device, rng)
    # MLM labels at ~15% of positions (at least one per batch), -100 (ignored) elsewhere.
    masked = rng.random_sample((b, s)) < 0.15
    masked[:, min(1, s - 1)] = True
    mlm_labels_np = np.where(masked, rng.randint(0, vocab, (b, s)), -100)
    nsp_labels_np = rng.randint(0, 2, (b,))
    mlm_labels, nsp_labels = (
        flow.tensor(a.astype(np.int64), dtype=flow.int64, device=device)
        for a in (mlm_labels_np, nsp_labels_np)
    )
    optimizer = flow.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    mlm_criterion = nn.CrossEntropyLoss(ignore_index=-100)
    nsp_criterion = nn.CrossEntropyLoss()

    def loss_fn(m: nn.Module) -> flow.Tensor:
        mlm_logits, nsp_logits = m(input_ids, token_types, position_ids, attn_mask)
        mlm = mlm_criterion(mlm_logits, mlm_labels.reshape(-1))
        return mlm + nsp_criterion(nsp_logits, nsp_labels)

    return loss_fn, optimizer


def amp_dtype(device: flow.device) -> flow.dtype:
    """--precision amp's autocast dtype: fp16 on CUDA (with loss scaling), bf16 on a CPU."""
    return flow.float16 if device.type == "cuda" else flow.bfloat16


def autocast(args: argparse.Namespace, device: flow.device) -> Any:
    if args.precision != "amp":
        return contextlib.nullcontext()
    return flow.autocast(device.type, dtype=amp_dtype(device))


def train_graph(args: argparse.Namespace, model: nn.Module, device: flow.device,
                task: Task) -> nn.Graph:  # fmt: skip
    """oneflow.nn.Graph, the static-graph (lazy) mode: build() holds forward, backward and the
    optimizer update; the graph is compiled on its first call (inside step 1, which the
    harness's warm-up window absorbs)."""
    loss_fn, optimizer = task
    amp = args.precision == "amp"

    class TrainGraph(nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.model = model
            self.add_optimizer(optimizer)
            configure_graph(self, args, device)
            if amp:
                self.config.enable_amp(True)
            if amp and device.type == "cuda":  # fp16 needs loss scaling; bf16 does not
                self.set_grad_scaler(flow.amp.GradScaler(
                    init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                    growth_interval=2000,
                ))  # fmt: skip

        def build(self) -> flow.Tensor:
            loss = loss_fn(self.model)
            loss.backward()
            return loss

    return TrainGraph()


def make_step(
    args: argparse.Namespace, model: nn.Module, device: flow.device
) -> Callable[[], flow.Tensor]:
    """The synthetic batch (made once, on the device), the optimizer and step(): one
    forward/backward/update, returning the loss tensor, not yet read back. With --xla the
    step is one nn.Graph call (forward, backward and the update compiled into the graph);
    otherwise it is eager OneFlow."""
    rng = np.random.RandomState(args.seed)
    task = (resnet_task if args.model == "resnet50" else bert_task)(args, model, device, rng)
    if args.xla:
        return train_graph(args, model, device, task)
    loss_fn, optimizer = task
    # fp16 needs loss scaling to keep small gradients from underflowing; bf16 does not.
    amp_on_cuda = args.precision == "amp" and device.type == "cuda"
    scaler = DynamicLossScaler(model) if amp_on_cuda else None

    def eager_step() -> flow.Tensor:
        optimizer.zero_grad()
        with autocast(args, device):
            loss = loss_fn(model)
        kit.backward_and_update(loss, optimizer, scaler)
        return loss

    return eager_step


def infer_graph(args: argparse.Namespace, model: nn.Module, device: flow.device,
                inputs: tuple[flow.Tensor | None, ...]) -> nn.Graph:  # fmt: skip
    """The forward on the full batch as an nn.Graph (compiled for its fixed shapes)."""

    class InferGraph(nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.model = model
            configure_graph(self, args, device)
            if args.precision == "amp":
                self.config.enable_amp(True)

        def build(self) -> Any:
            return self.model(*inputs)

    return InferGraph()


def as_tuple(out: Any) -> tuple[flow.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def graph_logits_problem(args: argparse.Namespace, eager: Callable[[int], Any],
                         graph: nn.Graph) -> str | None:  # fmt: skip
    """Why the inference graph's logits differ from the eager forward's on the full batch (or
    it fails), or None. Its first call compiles it."""
    names = ("MLM logits", "NSP logits") if args.model == "bert" else ("logits",)
    try:
        pairs = zip(names, as_tuple(eager(args.batch_size)), as_tuple(graph()), strict=True)
        for name, want, got in pairs:
            w, g = (t.to(flow.float32).numpy() for t in (want, got))
            tol = (2e-2 if args.precision == "amp" else 1e-3) * max(1.0, float(np.abs(w).max()))
            diff = float(np.abs(w - g).max())
            if not diff <= tol:
                return (
                    f"oneflow {flow.__version__} nn.Graph inference gives other {name} than the "
                    f"eager forward on {args.model} (max abs difference {diff:.3g} > {tol:.3g})"
                )
    except Exception as exc:
        return f"oneflow.nn.Graph inference fails on {args.model}: {kit.error_line(exc)}"[:500]
    return None


def make_predict(
    args: argparse.Namespace, model: nn.Module, device: flow.device
) -> Callable[[int], float]:
    """Inference (--mode infer) on make_step's synthetic inputs (same seed, same shapes): the
    model in eval mode (BatchNorm's running statistics, no dropout) under oneflow.no_grad(),
    the training's autocast. BERT's forward gives the MLM and NSP logits, no loss.

    predict(n) runs one forward on the first n rows and reads one logit back to the host, so the
    batch has truly finished when it returns (OneFlow's engine is asynchronous). Grad mode and
    autocast are per thread, and LoadGen calls predict from its own: predict sets both itself.
    With --xla the forward is an nn.Graph, which is compiled for fixed shapes: it always gets
    the full batch (the rows past n are wasted work). It is compiled here (before "ready", as
    the training's warm-up would), and its logits checked against the eager forward's
    (kit.Unsupported where they differ).
    """
    inputs = model_inputs(args, device, np.random.RandomState(args.seed))
    b = args.batch_size
    model.eval()

    def eager(n: int) -> Any:
        with flow.no_grad(), autocast(args, device):
            return model(*(t if t is None or n == b else t[:n] for t in inputs))

    run: Callable[[int], Any] = eager
    if args.xla:
        graph = infer_graph(args, model, device, inputs)
        if problem := graph_logits_problem(args, eager, graph):
            raise kit.Unsupported(problem)
        print("nn.Graph forward compiled; its logits match the eager forward's", flush=True)

        def run(n: int) -> Any:
            return graph()

    def predict(n: int) -> float:
        logits = as_tuple(run(n))[0]  # BERT: the MLM logits, made last
        value = float(logits[0, 0].to(flow.float32).item())
        sync(device)
        return value

    return predict


def graph_problem(args: argparse.Namespace, device: flow.device) -> str | None:
    """Check on a tiny model that an nn.Graph training step really updates the weights here
    (an earlier test saw nn.Graph print the same loss step after step on a CPU build)."""
    try:
        flow.manual_seed(args.seed)
        lin = nn.Linear(8, 4).to(device)
        opt = flow.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
        x = flow.randn(16, 8, device=device)
        y = flow.tensor(np.arange(16) % 4, dtype=flow.int64, device=device)
        crit = nn.CrossEntropyLoss()

        class Probe(nn.Graph):
            def __init__(self) -> None:
                super().__init__()
                self.lin = lin
                self.add_optimizer(opt)

            def build(self) -> flow.Tensor:
                loss = crit(self.lin(x), y)
                loss.backward()
                return loss

        probe = Probe()
        before = lin.weight.numpy().copy()
        losses = [float(probe().numpy()) for _ in range(3)]
        after = lin.weight.numpy().copy()
    except Exception as exc:
        return f"oneflow.nn.Graph training fails here: {kit.error_line(exc)}"[:500]
    if np.array_equal(before, after) or len(set(losses)) == 1:
        return (
            f"oneflow {flow.__version__} nn.Graph training does not update the weights on "
            f"{device.type} (losses {losses}, weight unchanged: {np.array_equal(before, after)})"
        )
    return None


def check_supported(args: argparse.Namespace, device: flow.device, world: int) -> None:
    """kit.Unsupported, with the reason, for what this OneFlow cannot run here."""
    if args.precision == "amp":
        if args.xla and device.type == "cpu":
            raise kit.Unsupported(
                "oneflow.nn.Graph AMP (config.enable_amp) targets CUDA fp16 only; no bf16 graph "
                "AMP on CPU"
            )
        if problem := amp_problem(device.type):
            raise kit.Unsupported(problem)
    if args.xla and world > 1 and args.mode == "infer":
        # Seen on 2 CPU ranks: rank 1's graph gave other logits than its eager forward (max abs
        # difference 0.4), rank 0's never returned, and the exit aborted (thread.cpp:71).
        raise kit.Unsupported(
            "oneflow 0.9 nn.Graph in a multi-rank job is one plan over all ranks, not a graph "
            "per rank: with local tensors it returns wrong logits or hangs; per-rank inference "
            "graphs would need global tensors placed on each rank alone"
        )
    if args.xla and world > 1:
        raise kit.Unsupported(
            "data-parallel oneflow.nn.Graph needs global tensors (to_global); this workload's "
            "data parallelism is eager DistributedDataParallel only"
        )
    # (inference checks its graph's logits against the eager forward's instead)
    if args.xla and args.mode == "train" and (problem := graph_problem(args, device)):
        raise kit.Unsupported(problem)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = kit.model_parser(
        __doc__,
        xla_help="train through oneflow.nn.Graph",
        threads_help="CPU threads (set by the adapter via OMP env)",
    )
    p.add_argument(
        "--dropout",
        type=float,
        default=model_math.BERT_DROPOUT,
        help="BERT dropout probability (0 makes fused and unfused kernels comparable)",
    )
    # Best practice, each switchable (the adapter passes its defaults for the device and model;
    # one that cannot apply here is turned off and says why, see resolve_practice):
    flag = {"type": int, "choices": (0, 1), "default": 0}
    p.add_argument("--channels-last", **flag, help="ResNet50 in NHWC (ONEFLOW_ENABLE_NHWC=1)")
    p.add_argument("--fuse-bn-relu", **flag, help="ResNet50: FusedBatchNorm2d for BN + ReLU")
    p.add_argument("--fuse-bn-add-relu", **flag, help="ResNet50: FusedBatchNorm2d, BN+add+ReLU")
    p.add_argument(
        "--cudnn-conv-algo",
        choices=("heuristic", "search"),
        default="heuristic",
        help="CUDA: cuDNN conv algorithms by heuristic (OneFlow's default) or search",
    )
    p.add_argument("--bias-gelu-fusion", **flag, help="BERT: fused_bias_add_gelu")
    p.add_argument("--bias-dropout-fusion", **flag, help="BERT: fused_bias_add_dropout")
    p.add_argument(
        "--scale-mask-softmax-fusion", **flag, help="BERT: fused_scale_mask_softmax_dropout"
    )
    p.add_argument("--fuse-add-to-output", **flag, help="nn.Graph: allow_fuse_add_to_output")
    p.add_argument("--fuse-model-update-ops", **flag, help="nn.Graph: allow_fuse_model_update_ops")
    p.add_argument("--fuse-cast-scale", **flag, help="nn.Graph: allow_fuse_cast_scale")

    def dropout_problem(args: argparse.Namespace) -> str | None:
        return None if 0.0 <= args.dropout < 1.0 else "--dropout must be in [0, 1)"

    return kit.parse_model_args(p, argv, model_math.BERT_BASE["max_positions"], dropout_problem)


def device_name(device: flow.device) -> str:
    """The GPU's name as OneFlow reports it, or the CPU's."""
    name = kit.cpu_name()
    if device.type == "cuda":
        with contextlib.suppress(Exception):
            name = flow.cuda.get_device_name(device.index or 0)
    return name


def sync(device: flow.device) -> None:
    if device.type == "cuda":
        flow.cuda.synchronize()


class OneFlow(kit.Hooks):
    """This framework's parts of the worker sequence (kit.main runs them)."""

    framework, version, compiler = "oneflow", flow.__version__, "nn.Graph"
    warn_bf16 = True
    rank, world, device = 0, 1, flow.device("cpu")
    split_threads: int | None = None

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return parse_args(argv)

    def describe(self, args: argparse.Namespace) -> dict[str, object]:
        return {"params": count_params(build_model(args)),
                "flops_per_sample": model_math.flops_per_sample(args)}  # fmt: skip

    def cuda_missing(self) -> str | None:
        if flow.cuda.is_available():
            return None
        return f"oneflow.cuda.is_available() is False (oneflow {flow.__version__})"

    def place(self, args: argparse.Namespace) -> kit.Place:
        # Data parallel when oneflow.distributed.launch started several ranks: one process per
        # device, gradients all-reduced every step, batch = per device.
        self.rank, self.world = flow.env.get_rank(), flow.env.get_world_size()
        if self.world > 1:
            nodes, local_rank = flow.env.get_node_size(), flow.env.get_local_rank()
            placed = self.rank % (self.world // nodes)  # OneFlow's device index for this rank
            if local_rank != placed:  # see the LOCAL_RANK note at the top
                print(f"error: rank {self.rank} has LOCAL_RANK {local_rank}, but OneFlow sees "
                      f"{nodes} node(s) and places it on device {placed}; its all-reduce would "
                      "abort", file=sys.stderr, flush=True)  # fmt: skip
                raise SystemExit(2)
        return kit.Place(self.rank, self.world)

    def setup(self, args: argparse.Namespace) -> None:
        if self.world > 1 and args.device == "cpu" and not args.threads:  # ranks share cores
            nodes = flow.env.get_node_size()
            self.split_threads = kit.cores_per_rank(kit.ranks_on_host(self.world // nodes))
            # Overrides the launcher's OMP_NUM_THREADS=1; must precede every eager op.
            flow.set_num_threads(self.split_threads)
        local_rank = flow.env.get_local_rank()
        self.device = flow.device(f"cuda:{local_rank}" if args.device == "cuda" else "cpu")
        check_supported(args, self.device, self.world)
        resolve_practice(args, self.device)

    def build(self, args: argparse.Namespace) -> nn.Module:
        flow.manual_seed(args.seed)  # the same initial weights on every rank
        model = build_model(args).to(self.device)
        model.train()
        if self.world > 1 and args.mode == "train":  # inference: each rank runs its own model
            # Broadcasts rank 0's parameters, then all-reduces (averages) the gradients in
            # buckets from backward hooks and broadcasts the BN buffers before each forward,
            # like torch's.
            model = nn.parallel.DistributedDataParallel(model)
            args.seed += self.rank  # each rank its own synthetic batch
        return model

    def make_step(self, args: argparse.Namespace, model: nn.Module) -> Callable[[], float | None]:
        # The loss read back to the host: OneFlow's engine is asynchronous, so only then has
        # the step truly finished and the timestamp can be taken.
        step = kit.synced_step(make_step(args, model, self.device), self.sync)
        if args.xla:  # the graph compiles in step 1: its failure there is not a crash
            return kit.unsupported_if_first_fails(step, f"oneflow.nn.Graph failed on {args.model}")
        return step

    def make_predict(self, args: argparse.Namespace, model: nn.Module) -> Callable[[int], float]:
        return make_predict(args, model, self.device)

    def amp_name(self, args: argparse.Namespace) -> str | None:
        amp = str(amp_dtype(self.device)).replace("oneflow.", "")
        return amp if args.precision == "amp" else None

    def facts(self, args: argparse.Namespace, model: nn.Module) -> kit.Facts:
        cpu = self.device.type == "cpu"
        return kit.Facts(
            self.device.type, device_name(self.device), self.amp_name(args),
            args.threads or self.split_threads or kit.omp_threads(),
            params=count_params(model), flops=model_math.flops_per_sample(args),
            practice=APPLIED,
            extra=kit.precision_fields(not cpu),
        )  # fmt: skip

    def sync(self) -> None:
        sync(self.device)


def main(argv: list[str] | None = None) -> int:
    return kit.main(OneFlow(), argv)


if __name__ == "__main__":
    sys.exit(main())
