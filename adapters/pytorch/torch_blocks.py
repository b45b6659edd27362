"""The PyTorch building blocks that workload.py and zoo.py share: the ResNet trunk (ResNet50-v1.5
and the zoo's ResNets) and BERT-base pretraining written with torch.nn, and the best-practice
helpers (fused optimizer, channels_last) with the record of what they really applied on this
torch and device.

Runs inside the PyTorch env, next to workload.py (which puts adapters/_shared on sys.path).
"""

from __future__ import annotations

import argparse
import contextlib
import math
from typing import Any

import model_math
import torch
import torch.nn.functional as F
from torch import nn

# --sdpa 0 writes attention out as softmax(Q K^T / sqrt(d)) V (the same math, no fused kernel).
USE_SDPA = True

# What the best-practice flags really did here (the installed torch may lack a fused kernel):
# reported in the start event and the log.
APPLIED: dict[str, object] = {}

# --------------------------------------------------------------------------------------------
# ResNet50-v1.5
# --------------------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carries the stride: the v1.5 change), 1x1 expand, plus the shortcut."""

    expansion = model_math.BOTTLENECK_EXPANSION

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

    @property
    def last_bn(self) -> nn.BatchNorm2d:
        return self.bn3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """Stem, four stages of `block` (widths 64..512, stride 2 from stage 2 on), pool, fc, in
    torchvision's layout (zoo.py's ResNet18..152 and ResNet50 below). `block` names its last
    BatchNorm `last_bn`."""

    def __init__(self, block: Any, layers: tuple[int, ...], num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages = []
        in_ch = 64
        for i, (width, count) in enumerate(zip((64, 128, 256, 512), layers, strict=True)):
            stage = []
            for b in range(count):
                stage.append(block(in_ch, width, 2 if (b == 0 and i > 0) else 1))
                in_ch = width * block.expansion
            stages.append(nn.Sequential(*stage))
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
            if isinstance(m, block):
                nn.init.zeros_(m.last_bn.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class ResNet50(ResNet):
    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__(Bottleneck, tuple(n for _, n in model_math.RESNET50_STAGES), num_classes)


# --------------------------------------------------------------------------------------------
# BERT-base pretraining (MLM + NSP heads)
# --------------------------------------------------------------------------------------------


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
        p = model_math.BERT_DROPOUT if self.training else 0.0
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
        self.attn_norm = nn.LayerNorm(hidden, eps=model_math.BERT_LN_EPS)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=model_math.BERT_LN_EPS)
        self.dropout = nn.Dropout(model_math.BERT_DROPOUT)

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
        self.emb_norm = nn.LayerNorm(hidden, eps=model_math.BERT_LN_EPS)
        self.emb_dropout = nn.Dropout(model_math.BERT_DROPOUT)
        self.layers = nn.ModuleList(
            EncoderLayer(hidden, cfg["heads"], cfg["intermediate"]) for _ in range(cfg["layers"])
        )
        self.pooler = nn.Linear(hidden, hidden)
        self.nsp = nn.Linear(hidden, 2)
        self.mlm_transform = nn.Linear(hidden, hidden)
        self.mlm_norm = nn.LayerNorm(hidden, eps=model_math.BERT_LN_EPS)
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


# --------------------------------------------------------------------------------------------
# Best practice and counting
# --------------------------------------------------------------------------------------------


def count_params(model: nn.Module) -> int:
    """Unique parameters: model.parameters() already yields a shared (tied) tensor once."""
    return sum(p.numel() for p in model.parameters())


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
