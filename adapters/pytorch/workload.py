"""PyTorch training workload for dlperf: ResNet50-v1.5 or BERT-base pretraining, synthetic data.

Runs inside the adapter's isolated virtual env and imports only torch and the standard library.
It follows the dlperf events contract: JSON lines written to the file named by $DLPERF_EVENTS
("start", "ready", one "step" per iteration, "end"); a human-readable log goes to stdout.

Usage:
    python workload.py --model resnet50 --batch-size 64 --steps 50 [--precision amp] [--xla]
    python workload.py --model bert --describe   # one JSON line: params, FLOPs; no training
    python workload.py --model resnet50 --mode infer [--loadgen-settings JSON]  # forward only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import torch
import torch.nn.functional as F
from torch import nn

RESNET50_PARAMS = 25_557_032  # at 1000 classes, same as torchvision's resnet50
BERT_BASE_PARAMS = 110_106_428  # BertForPreTraining, tied MLM decoder counted once

# --------------------------------------------------------------------------------------------
# ResNet50-v1.5
# --------------------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carries the stride: the v1.5 change), 1x1 expand, plus the shortcut."""

    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int) -> None:
        super().__init__()
        out_ch = width * self.expansion
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages = []
        in_ch = 64
        for i, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3), strict=True)):
            layers = []
            for b in range(blocks):
                stride = 2 if (b == 0 and i > 0) else 1
                layers.append(Bottleneck(in_ch, width, stride))
                in_ch = width * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        # Zero-init the last BN gamma of each block (as NVIDIA's reference does): every residual
        # branch starts as identity, which helps large-batch training. Cost is unaffected.
        for m in self.modules():
            if isinstance(m, Bottleneck):
                nn.init.zeros_(m.bn3.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50_forward_flops(num_classes: int, image_size: int) -> float:
    """Forward FLOPs of one sample, counting only convolutions and the final fc layer.

    A multiply-add counts as 2 FLOPs. Walks the real architecture with forward hooks on a model
    built on the "meta" device (shapes only, no memory, no arithmetic), so the count follows the
    layer shapes exactly for any image size: conv = 2 * Cin/groups * kh * kw * Cout * Hout * Wout,
    linear = 2 * in * out. BN, ReLU, pooling and the residual adds are ignored (a few percent).
    At 224x224 this is ~4.1 GMACs, i.e. ~8.2 GFLOPs.
    """
    total = 0

    def conv_hook(m: nn.Conv2d, _inp: Any, out: torch.Tensor) -> None:
        nonlocal total
        kh, kw = m.kernel_size
        total += 2 * (m.in_channels // m.groups) * kh * kw * out[0].numel()

    def linear_hook(m: nn.Linear, _inp: Any, out: torch.Tensor) -> None:
        nonlocal total
        total += 2 * m.in_features * out[0].numel()

    with torch.device("meta"):
        model = ResNet50(num_classes).eval()  # eval: BN accepts a 1x1 map of one sample
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            m.register_forward_hook(conv_hook)
        elif isinstance(m, nn.Linear):
            m.register_forward_hook(linear_hook)
    with torch.no_grad():
        model(torch.empty(1, 3, image_size, image_size, device="meta"))
    return float(total)


# --------------------------------------------------------------------------------------------
# BERT-base pretraining (MLM + NSP heads)
# --------------------------------------------------------------------------------------------

BERT_BASE = {
    "vocab": 30522,
    "hidden": 768,
    "layers": 12,
    "heads": 12,
    "intermediate": 3072,
    "max_positions": 512,
    "type_vocab": 2,
}
LN_EPS = 1e-12
DROPOUT = 0.1
# --sdpa 0 writes attention out as softmax(Q K^T / sqrt(d)) V (the same math, no fused kernel).
USE_SDPA = True


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
        b, s, h = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:  # [B, S, H] -> [B, heads, S, H/heads]
            return t.view(b, s, self.heads, h // self.heads).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        p = DROPOUT if self.training else 0.0
        if USE_SDPA:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if attn_mask is not None:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            ctx = F.dropout(scores.softmax(-1), p, self.training) @ v
        return ctx.transpose(1, 2).reshape(b, s, h)


class EncoderLayer(nn.Module):
    """Post-LN transformer layer, as in the original BERT."""

    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=LN_EPS)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=LN_EPS)
        self.dropout = nn.Dropout(DROPOUT)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
        x = self.attn_norm(x + self.dropout(self.attn_out(self.attention(x, attn_mask))))
        y = self.output(F.gelu(self.intermediate(x)))
        return self.out_norm(x + self.dropout(y))


class BertForPreTraining(nn.Module):
    def __init__(self, cfg: dict[str, int]) -> None:
        super().__init__()
        hidden = cfg["hidden"]
        self.word_embeddings = nn.Embedding(cfg["vocab"], hidden)
        self.position_embeddings = nn.Embedding(cfg["max_positions"], hidden)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab"], hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=LN_EPS)
        self.emb_dropout = nn.Dropout(DROPOUT)
        self.layers = nn.ModuleList(
            EncoderLayer(hidden, cfg["heads"], cfg["intermediate"]) for _ in range(cfg["layers"])
        )
        self.pooler = nn.Linear(hidden, hidden)
        self.nsp = nn.Linear(hidden, 2)
        self.mlm_transform = nn.Linear(hidden, hidden)
        self.mlm_norm = nn.LayerNorm(hidden, eps=LN_EPS)
        # The MLM decoder's weight is the word-embedding matrix (tied); only its bias is new.
        self.mlm_bias = nn.Parameter(torch.zeros(cfg["vocab"]))

        for m in self.modules():  # BERT's init: N(0, 0.02) weights, zero biases, unit LN
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        attn_mask: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(token_type_ids)
        )
        x = self.emb_dropout(self.emb_norm(x))
        for layer in self.layers:
            x = layer(x, attn_mask)
        nsp_logits = self.nsp(torch.tanh(self.pooler(x[:, 0])))
        h = self.mlm_norm(F.gelu(self.mlm_transform(x)))
        mlm_logits = F.linear(h, self.word_embeddings.weight, self.mlm_bias)
        return mlm_logits, nsp_logits


def bert_forward_flops(seq_len: int, cfg: dict[str, int] = BERT_BASE) -> float:
    """Forward FLOPs of one sequence of `seq_len` tokens, counting only matrix multiplications.

    A multiply-add counts as 2 FLOPs. Per token, every dense layer costs 2 * in * out:
      - each encoder layer: Q, K, V and attention-output projections (4 * H * H) plus the
        feed-forward pair (2 * H * I);
      - the MLM head at every position (this model computes logits everywhere, not only at
        masked positions): transform H * H plus the tied decoder H * vocab.
    Attention itself adds, per layer, Q @ K^T and softmax(.) @ V: 2 * S^2 * H MACs = 4 * S^2 * H
    FLOPs. The pooler (H * H) and NSP head (H * 2) run once per sequence, on the [CLS] token.
    Embedding lookups, LayerNorm, GELU, softmax and biases are ignored.
    """
    h, i, v, n = cfg["hidden"], cfg["intermediate"], cfg["vocab"], cfg["layers"]
    macs_per_token = n * (4 * h * h + 2 * h * i) + h * h + h * v
    attention = n * 4 * seq_len * seq_len * h
    heads = 2 * (h * h + h * 2)
    return float(2 * macs_per_token * seq_len + attention + heads)


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------

# zoo.py (GPT-2, BERT-large, LSTM, ResNet18/34/101/152, DLRM) builds on the blocks above and
# imports this module by name: register the running script under it, so it is not loaded twice.
sys.modules.setdefault("workload", sys.modules[__name__])
import zoo  # noqa: E402


def count_params(model: nn.Module) -> int:
    """Unique parameters: model.parameters() already yields a shared (tied) tensor once."""
    return sum(p.numel() for p in model.parameters())


def build_model(args: argparse.Namespace) -> nn.Module:
    if args.model in zoo.MODELS:
        return zoo.build(args)
    if args.model == "resnet50":
        return ResNet50(args.num_classes)
    return BertForPreTraining(BERT_BASE)


def training_flops_per_sample(args: argparse.Namespace) -> float:
    """Training FLOPs per sample = 3 x forward (the backward pass costs ~2x the forward:
    gradients with respect to both activations and weights). Only matmul/conv FLOPs count."""
    if args.model in zoo.MODELS:
        return zoo.training_flops(args)
    if args.model == "resnet50":
        return 3.0 * resnet50_forward_flops(args.num_classes, args.image_size)
    return 3.0 * bert_forward_flops(args.seq_len)


def cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_native_bf16() -> bool | None:
    """Whether the CPU has bf16 matmul instructions (x86 AVX512-BF16/AMX, Arm BF16); None if
    /proc/cpuinfo cannot tell. Without them oneDNN emulates bf16 and autocast is far slower
    than fp32 (measured ~20x for BERT on an AVX2-only EPYC), which a report should explain."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith(("flags", "Features")):
                flags = set(line.split(":", 1)[1].split())
                return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    return None


# What the best-practice flags really did here (the installed torch may lack a fused kernel):
# reported in the start event and the log.
APPLIED: dict[str, object] = {}


def make_optimizer(
    cls: type[torch.optim.Optimizer], params: Any, args: argparse.Namespace, **kw: Any
) -> torch.optim.Optimizer:
    """`cls(params, **kw)` in its fastest form when --fused-optimizer 1: fused=True where this
    torch has a fused kernel for the device (AdamW since 2.0, SGD since 2.2 on CUDA; both on CPU
    since 2.4), else foreach=True (one multi-tensor kernel per group of parameters); 0: torch's
    own default (foreach on CUDA, the per-parameter loop on a CPU)."""
    params = list(params)
    if not args.fused_optimizer:
        APPLIED["fused_optimizer"] = "torch default"
        return cls(params, **kw)
    with contextlib.suppress(TypeError, RuntimeError, ValueError):
        optimizer = cls(params, fused=True, **kw)
        APPLIED["fused_optimizer"] = "fused"
        return optimizer
    APPLIED["fused_optimizer"] = "foreach (no fused kernel in this torch for this device)"
    return cls(params, foreach=True, **kw)


def to_memory_format(args: argparse.Namespace, *tensors: Any) -> tuple[Any, ...]:
    """Images (4-D tensors) in channels_last when --channels-last 1; everything else as is."""
    if not args.channels_last:
        return tensors
    return tuple(
        t.contiguous(memory_format=torch.channels_last)
        if isinstance(t, torch.Tensor) and t.dim() == 4
        else t
        for t in tensors
    )


def make_step(
    args: argparse.Namespace, model: nn.Module, device: torch.device
) -> tuple[Callable[[], torch.Tensor], torch.optim.Optimizer, torch.nn.Module]:
    """Create the synthetic batch (once, on the device), the optimizer and the step function.

    Returns (step, optimizer, model_to_run); step() runs one forward/backward/update and returns
    the loss tensor, not yet read back.
    """
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    b = args.batch_size
    if args.model in zoo.TASKS:  # its own data, loss and optimizer (bert-large: BERT's below)
        loss_fn, optimizer = zoo.make_task(args, model, device)
    elif args.model == "resnet50":
        images = torch.randn(b, 3, args.image_size, args.image_size, generator=g).to(device)
        (images,) = to_memory_format(args, images)
        labels = torch.randint(0, args.num_classes, (b,), generator=g).to(device)
        optimizer: torch.optim.Optimizer = make_optimizer(
            torch.optim.SGD, model.parameters(), args, lr=0.1, momentum=0.9, weight_decay=1e-4
        )

        def loss_fn(m: nn.Module) -> torch.Tensor:
            return F.cross_entropy(m(images), labels)

    else:
        s = args.seq_len
        vocab = BERT_BASE["vocab"]
        input_ids = torch.randint(0, vocab, (b, s), generator=g)
        token_types = torch.zeros(b, s, dtype=torch.long)
        token_types[:, s // 2 :] = 1
        attention_mask = torch.ones(b, s, dtype=torch.long)
        # MLM labels at ~15% of positions (at least one per batch), -100 (ignored) elsewhere.
        masked = torch.rand(b, s, generator=g) < 0.15
        masked[:, min(1, s - 1)] = True
        mlm_labels = torch.where(masked, torch.randint(0, vocab, (b, s), generator=g), -100)
        nsp_labels = torch.randint(0, 2, (b,), generator=g)
        input_ids, token_types, mlm_labels, nsp_labels = (
            t.to(device) for t in (input_ids, token_types, mlm_labels, nsp_labels)
        )
        # The mask is all ones, so attention needs none; passing an explicit mask would only
        # steer SDPA away from its fastest (flash) kernels. Kept general for a padded batch.
        attn_mask = None
        if not bool(attention_mask.all()):
            attn_mask = attention_mask.bool()[:, None, None, :].to(device)
        optimizer = make_optimizer(
            torch.optim.AdamW, model.parameters(), args, lr=1e-4, weight_decay=0.01
        )

        def loss_fn(m: nn.Module) -> torch.Tensor:
            mlm_logits, nsp_logits = m(input_ids, token_types, attn_mask)
            mlm = F.cross_entropy(
                mlm_logits.view(-1, vocab), mlm_labels.view(-1), ignore_index=-100
            )
            return mlm + F.cross_entropy(nsp_logits, nsp_labels)

    # torch.compile (the "--xla" flag: PyTorch's graph compiler, inductor backend). Compilation
    # happens lazily inside step 1, so step 1 is slow; the harness's warm-up window absorbs it.
    run_model = torch.compile(model) if args.xla else model

    amp = args.precision == "amp"
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    # fp16 needs loss scaling to keep small gradients from underflowing; bf16 does not.
    scaler = torch.amp.GradScaler("cuda") if amp and device.type == "cuda" else None

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        ctx = torch.autocast(device.type, dtype=amp_dtype) if amp else contextlib.nullcontext()
        with ctx:
            loss = loss_fn(run_model)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss

    return step, optimizer, run_model


def make_predict(
    args: argparse.Namespace, model: nn.Module, device: torch.device
) -> Callable[[int], float]:
    """Inference (--mode infer) on make_step's synthetic inputs (same seed, same shapes): the
    model in eval mode (BatchNorm's running statistics, no dropout), no autograd, the training's
    autocast and torch.compile. BERT's forward gives the MLM and NSP logits, no loss.

    predict(n) runs one forward on the first n rows, synchronises the device and reads one logit
    back to the host, so the batch has truly finished when it returns.
    """
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    b = args.batch_size
    if args.model in zoo.TASKS:  # batch first; bert-large takes BERT's below
        inputs = to_memory_format(args, *zoo.make_inputs(args, device))
    elif args.model == "resnet50":
        inputs: tuple[torch.Tensor | None, ...] = (
            torch.randn(b, 3, args.image_size, args.image_size, generator=g).to(device),
        )
        inputs = to_memory_format(args, *inputs)
    else:
        s = args.seq_len
        input_ids = torch.randint(0, BERT_BASE["vocab"], (b, s), generator=g)
        token_types = torch.zeros(b, s, dtype=torch.long)
        token_types[:, s // 2 :] = 1
        inputs = (input_ids.to(device), token_types.to(device), None)  # all-ones mask: none
    model.eval()
    # torch.compile specialises on shapes, so the compiled model always gets the full batch
    # (the rows past n are wasted work) instead of recompiling for each batch LoadGen forms.
    run_model = torch.compile(model) if args.xla else model
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16

    def predict(n: int) -> float:
        rows = b if args.xla else n
        amp = args.precision == "amp"
        ctx = torch.autocast(device.type, dtype=amp_dtype) if amp else contextlib.nullcontext()
        with torch.inference_mode(), ctx:
            out = run_model(*(t if t is None or rows == b else t[:rows] for t in inputs))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return (out[0] if isinstance(out, tuple) else out).reshape(-1)[0].item()

    return predict


def run_loadgen(
    args: argparse.Namespace, predict: Callable[[int], float], emit: Callable[..., None]
) -> None:
    """Hand the warmed-up model to MLPerf LoadGen (the shared driver in adapters/_shared),
    which writes its logs to $DLPERF_LOADGEN_DIR."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, os.pardir, "_shared"))
    import loadgen_run

    out_dir = os.environ.get("DLPERF_LOADGEN_DIR", "mlperf-logs")
    os.makedirs(out_dir, exist_ok=True)
    loadgen_run.run(json.loads(args.loadgen_settings), out_dir, predict, args.batch_size)
    emit(event="loadgen", dir=out_dir)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", choices=("resnet50", "bert", *zoo.MODELS), required=True)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--precision", choices=("fp32", "amp"), default="fp32")
    p.add_argument("--xla", action="store_true", help="wrap the model in torch.compile")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="torch.set_num_threads(N)")
    # Best practice, each switchable (the adapter passes its defaults for the device and model):
    flag = {"type": int, "choices": (0, 1), "default": 0}
    p.add_argument("--channels-last", **flag, help="channels_last (NHWC) model and images")
    p.add_argument("--fused-optimizer", **flag, help="fused (else foreach) optimizer kernels")
    p.add_argument("--cudnn-benchmark", **flag, help="torch.backends.cudnn.benchmark")
    p.add_argument("--sdpa", type=int, choices=(0, 1), default=1, help="BERT attention: SDPA")
    p.add_argument("--mode", choices=("train", "infer"), default="train")
    p.add_argument("--loadgen-settings", help="infer: after the steps, run MLPerf LoadGen (JSON)")
    p.add_argument("--describe", action="store_true", help="print params/FLOPs JSON and exit")
    args = p.parse_args(argv)
    if args.batch_size < 1 or args.steps < 0:
        p.error("--batch-size must be >= 1 and --steps >= 0")
    if args.loadgen_settings and args.mode != "infer":
        p.error("--loadgen-settings needs --mode infer")
    if args.model in zoo.MODELS and (problem := zoo.check_args(args)):
        p.error(problem)
    if args.model == "bert" and not 1 <= args.seq_len <= BERT_BASE["max_positions"]:
        p.error(f"--seq-len must be in 1..{BERT_BASE['max_positions']}")
    return args


def main(argv: list[str] | None = None) -> int:
    t_launch = time.monotonic()
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.describe:
        # Shapes only: building on "meta" allocates nothing and skips the random init.
        with torch.device("meta"):
            model = build_model(args)
        info = {
            "params": count_params(model),
            "flops_per_sample": training_flops_per_sample(args),
            "framework_version": torch.__version__,
        }
        print(json.dumps(info), flush=True)
        return 0

    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda asked for, but torch.cuda.is_available() is False "
              f"(torch {torch.__version__}, CUDA build: {torch.version.cuda})",
              file=sys.stderr, flush=True)  # fmt: skip
        return 2
    # Data parallel when a launcher (torchrun) started several ranks: one process per device,
    # gradients all-reduced every step (gloo on CPU, NCCL on CUDA), batch = per device.
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
        if args.device == "cpu" and not args.threads:  # ranks on one host share its cores
            on_host = int(os.environ.get("DLPERF_RANKS_ON_HOST", local_world))
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // on_host))
    device = torch.device(f"cuda:{local_rank}" if args.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        # Honest fp32: no silent TF32 for matmuls/convolutions (it also keeps AMP runs' fp32
        # ops in true fp32). cudnn.benchmark picks the fastest conv algorithms for the fixed
        # shapes, as every reference training script does.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = bool(args.cudnn_benchmark)
    global USE_SDPA
    USE_SDPA = bool(args.sdpa)

    # One events file per rank: the runner gives a path with "{rank}" in it for multi-rank jobs.
    path = os.environ.get("DLPERF_EVENTS", "").replace("{rank}", str(rank))
    events: TextIO | None = open(path, "a", buffering=1) if path else None  # noqa: SIM115

    def emit(**event: object) -> None:
        if events is not None:
            events.write(json.dumps(event) + "\n")
            events.flush()

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = build_model(args).to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    if world > 1 and args.mode == "train":  # inference: each rank runs its own model
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(
            model, device_ids=[local_rank] if device.type == "cuda" else None
        )
        args.seed += rank  # each rank its own synthetic batch
    params = count_params(model)
    flops = training_flops_per_sample(args)
    if args.mode == "infer":
        flops /= 3.0  # the forward alone: the training count is 3 x forward
    amp_dtype = None
    if args.precision == "amp":
        amp_dtype = "float16" if device.type == "cuda" else "bfloat16"
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    native_bf16 = cpu_native_bf16() if device.type == "cpu" else None
    if args.mode == "infer":
        predict = make_predict(args, model, device)
    else:
        step, _optimizer, _run_model = make_step(args, model, device)
    APPLIED["channels_last"] = bool(args.channels_last)
    if device.type == "cuda":
        APPLIED["cudnn_benchmark"] = torch.backends.cudnn.benchmark
    if args.model in ("bert", "bert-large"):
        APPLIED["sdpa"] = USE_SDPA

    emit(
        event="start",
        framework="pytorch",
        framework_version=torch.__version__,
        python=platform.python_version(),
        device=device.type,
        device_name=device_name,
        model=args.model,
        params=params,
        flops_per_sample=flops,
        precision=args.precision,
        amp_dtype=amp_dtype,
        xla=args.xla,
        mode=args.mode,
        batch_size=args.batch_size,
        threads=torch.get_num_threads(),
        tf32=False if device.type == "cuda" else None,
        cpu_capability=torch.backends.cpu.get_cpu_capability() if device.type == "cpu" else None,
        cpu_native_bf16=native_bf16,
        rank=rank,
        world_size=world,
        practice=APPLIED,
    )
    image = args.model.startswith("resnet")
    shape = f"image {args.image_size}" if image else f"seq_len {args.seq_len}"
    print(
        f"pytorch {torch.__version__} {args.model}: {params:,} params, "
        f"{flops / 1e9:.2f} GFLOPs/sample ({args.mode}), batch {args.batch_size}, {shape}, "
        f"{args.precision}{f' ({amp_dtype})' if amp_dtype else ''}"
        f"{', torch.compile' if args.xla else ''}, {device.type} ({device_name}), "
        f"{torch.get_num_threads()} threads, {args.steps} steps",
        flush=True,
    )
    print("best practice: " + ", ".join(f"{k} {v}" for k, v in sorted(APPLIED.items())),
          flush=True)  # fmt: skip

    if amp_dtype == "bfloat16" and native_bf16 is False:
        print("warning: this CPU has no bf16 matmul instructions (no AVX512-BF16/AMX); bf16 "
              "autocast is emulated and usually much slower than fp32", flush=True)  # fmt: skip

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    sync()
    ready = time.monotonic()
    emit(event="ready", time=ready)
    print(f"ready after {ready - t_launch:.2f}s (import, build, data, optimizer)", flush=True)

    prev = ready
    for i in range(1, args.steps + 1):
        if args.mode == "infer":  # predict() returns once the device is done; no loss
            predict(args.batch_size)
            now = time.monotonic()
            emit(event="step", step=i, time=now, samples=args.batch_size)
            print(f"step {i}/{args.steps} time {now - prev:.3f}s", flush=True)
            prev = now
            continue
        loss_t = step()
        sync()
        # .item() copies the loss back to the host, so the step has truly finished (on CPU it
        # also forces any deferred work) before the timestamp is taken.
        loss = loss_t.item()
        now = time.monotonic()
        emit(event="step", step=i, time=now, samples=args.batch_size,
             loss=loss if math.isfinite(loss) else None)  # fmt: skip
        print(f"step {i}/{args.steps} loss {loss:.4f} time {now - prev:.3f}s", flush=True)
        prev = now

    if args.loadgen_settings and rank == 0:  # the warm-up is done; one LoadGen run per job
        run_loadgen(args, predict, emit)
    end = time.monotonic()
    emit(event="end", time=end)
    if world > 1:
        torch.distributed.destroy_process_group()
    if args.steps:
        print(f"done: {args.steps} steps in {end - ready:.2f}s", flush=True)
    if events is not None:
        events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
