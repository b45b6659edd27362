"""The PyTorch model zoo beyond ResNet50 and BERT-base: SuperBench's PyTorch model families and
FAMBench's DLRM, written with torch.nn, on synthetic data (nothing is downloaded).

Runs inside the PyTorch env next to `workload.py`, which dispatches the models named in `MODELS`
here and keeps its own step, AMP, torch.compile and DDP code (the harness is the shared kit). It
reuses torch_blocks.py's Bottleneck and BertForPreTraining and model_math's BERT FLOPs formula.

Models (architectures fixed; the shape knobs are `--image-size` and `--seq-len`):

* `gpt2-small|medium|large|xl`: GPT-2 (pre-LN decoder, vocab 50257, 1024 positions, GELU-tanh,
  dropout 0.1) with the LM head tied to the token embedding, trained as a causal LM (next-token
  cross-entropy at every position), AdamW. Sizes as SuperBench's `pytorch-gpt2-*` benchmarks
  (layers/hidden/heads 12/768/12, 24/1024/16, 36/1280/20, 48/1600/25). SuperBench itself puts
  a 100-class linear head on the last token; dlperf trains the language model instead.
* `bert-large`: BERT pretraining (MLM + NSP heads, tied decoder) at SuperBench's `pytorch-bert-
  large` sizes (24 layers, hidden 1024, 16 heads, intermediate 4096); same data, loss and
  optimizer as `bert` in workload.py, whose code path it takes.
* `lstm`: SuperBench's `pytorch-lstm`: nn.LSTM(input 256, hidden 1024, 8 layers, unidirectional,
  batch_first) and a linear 100-class head on the last time step's output (fixed: --num-classes
  is the ResNets'), cross-entropy, SGD with Nesterov momentum. `--seq-len` is the number of
  time steps. bf16 autocast on a CPU without bf16 instructions is reported unsupported (oneDNN
  has no LSTM kernel for it).
* `resnet18|34|101|152`: torchvision's ResNets (v1.5: the stride on the 3x3 conv), BasicBlock
  for 18/34 and torch_blocks.py's Bottleneck for 101/152, SGD + momentum as resnet50.
* `dlrm`: DLRM as facebookresearch/dlrm `dlrm_s_pytorch.py` builds it, at FAMBench's default
  ("tiny") OOTB training config: 512 dense features, bottom MLP 512-512-64, 8 embedding tables
  of 1,000,000 rows x 64 (nn.EmbeddingBag, sum, sparse gradients), dot interaction without
  self-pairs, top MLP 100-1024-1024-1024-1, BCE loss, plain SGD (lr 0.01). `--seq-len` is the
  number of indices per lookup (fixed, where FAMBench draws 1..100 at random). The top MLP
  returns logits and the loss is BCE-with-logits (dlrm: sigmoid, then BCELoss): the same math,
  and safe under autocast. About 2 GB of fp32 weights: runs on a 2-core, 8 GB machine.

Training FLOPs per sample are 3 x the forward matmul/conv FLOPs (multiply-add = 2), as
model_math counts every model; each family's forward formula is documented at its function.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

import model_math
import torch
import torch.nn.functional as F
import torch_blocks as blocks
import workload_kit as kit
from torch import nn

# --------------------------------------------------------------------------------------------
# GPT-2 (causal LM, tied head)
# --------------------------------------------------------------------------------------------

GPT2_VOCAB = 50257
GPT2_POSITIONS = 1024
GPT2_SIZES = {  # layers, hidden, heads: SuperBench's pytorch-gpt2-* registrations
    "gpt2-small": (12, 768, 12),
    "gpt2-medium": (24, 1024, 16),
    "gpt2-large": (36, 1280, 20),
    "gpt2-xl": (48, 1600, 25),
}
GPT2_DROPOUT = 0.1


class GPT2Block(nn.Module):
    """Pre-LN: x + attn(ln_1(x)), then x + mlp(ln_2(x)); fused QKV projection as in GPT-2."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-5)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-5)
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.mlp_proj = nn.Linear(4 * hidden, hidden)
        self.dropout = nn.Dropout(GPT2_DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = (
            t.view(b, s, self.heads, h // self.heads).transpose(1, 2)
            for t in self.c_attn(self.ln_1(x)).split(h, dim=2)
        )
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=GPT2_DROPOUT if self.training else 0.0
        )
        x = x + self.dropout(self.c_proj(y.transpose(1, 2).reshape(b, s, h)))
        mlp = self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x + self.dropout(mlp)


class GPT2LM(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(GPT2_VOCAB, hidden)
        self.wpe = nn.Embedding(GPT2_POSITIONS, hidden)
        self.drop = nn.Dropout(GPT2_DROPOUT)
        self.blocks = nn.ModuleList(GPT2Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
        # GPT-2's init: N(0, 0.02), zero biases; residual output projections scaled by
        # 1/sqrt(2 * layers).
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(positions))
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # LM head tied to the token embedding


def gpt2_forward_flops(name: str, seq_len: int) -> float:
    """Forward FLOPs of one sequence of `seq_len` tokens, matrix multiplications only.

    Per token and layer the dense layers cost 2 * 12 * H^2 (QKV 3H^2, output H^2, MLP 8H^2
    multiply-adds); the tied LM head 2 * H * vocab at every position. Attention adds, per layer
    and sequence, Q @ K^T and softmax(.) @ V: 4 * S^2 * H, counted in full (as BERT's; the
    causal mask would let a kernel skip about half). Embeddings, LayerNorm, GELU, softmax and
    biases are ignored.
    """
    n, h, _ = GPT2_SIZES[name]
    per_token = 2 * (n * 12 * h * h + h * GPT2_VOCAB)
    return float(per_token * seq_len + n * 4 * seq_len * seq_len * h)


# --------------------------------------------------------------------------------------------
# BERT-large pretraining: torch_blocks.py's BertForPreTraining at larger sizes
# --------------------------------------------------------------------------------------------

BERT_LARGE = model_math.BERT_LARGE

# --------------------------------------------------------------------------------------------
# LSTM (SuperBench's pytorch-lstm)
# --------------------------------------------------------------------------------------------

LSTM_INPUT, LSTM_HIDDEN, LSTM_LAYERS, LSTM_BIDIRECTIONAL, LSTM_CLASSES = 256, 1024, 8, False, 100


class LSTMClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(
            LSTM_INPUT, LSTM_HIDDEN, LSTM_LAYERS, batch_first=True, bidirectional=LSTM_BIDIRECTIONAL
        )
        self.fc = nn.Linear(LSTM_HIDDEN * (2 if LSTM_BIDIRECTIONAL else 1), LSTM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_cuda:
            self.lstm.flatten_parameters()  # cuDNN wants one contiguous weight buffer
        out, _ = self.lstm(x)
        return self.fc(out[:, -1, :])  # the last time step's output, as SuperBench


def lstm_forward_flops(seq_len: int) -> float:
    """Forward FLOPs of one sequence: at every time step each layer's four gates multiply the
    input and the hidden state, 2 * 4H * (in + H) (in = 256 for layer 1, H after; x2 for a
    bidirectional LSTM); plus the classifier, 2 * H * classes, once. Gate nonlinearities and the
    cell update are ignored."""
    dirs = 2 if LSTM_BIDIRECTIONAL else 1
    per_step = 0
    for layer in range(LSTM_LAYERS):
        inp = LSTM_INPUT if layer == 0 else LSTM_HIDDEN * dirs
        per_step += dirs * 2 * 4 * LSTM_HIDDEN * (inp + LSTM_HIDDEN)
    return float(per_step * seq_len + 2 * LSTM_HIDDEN * dirs * LSTM_CLASSES)


# --------------------------------------------------------------------------------------------
# ResNet family (torchvision layouts, v1.5)
# --------------------------------------------------------------------------------------------


class BasicBlock(nn.Module):
    """Two 3x3 convs (the first carries the stride), plus the shortcut: ResNet18/34."""

    expansion = 1

    def __init__(self, in_ch: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, width, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_ch != width:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, width, 1, stride=stride, bias=False), nn.BatchNorm2d(width)
            )

    @property
    def last_bn(self) -> nn.BatchNorm2d:
        return self.bn2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


RESNETS: dict[str, tuple[type[nn.Module], tuple[int, int, int, int]]] = {
    "resnet18": (BasicBlock, (2, 2, 2, 2)),
    "resnet34": (BasicBlock, (3, 4, 6, 3)),
    "resnet101": (blocks.Bottleneck, (3, 4, 23, 3)),
    "resnet152": (blocks.Bottleneck, (3, 8, 36, 3)),
}


def conv_linear_forward_flops(model: nn.Module, *inputs: torch.Tensor) -> float:
    """Forward FLOPs of one sample through a model built on the "meta" device, from forward
    hooks: conv = 2 * Cin/groups * kh * kw * Cout * Hout * Wout, linear = 2 * in * out; BN,
    ReLU, pooling and residual adds are ignored (model_math's rule)."""
    total = 0

    def conv_hook(m: nn.Conv2d, _inp: Any, out: torch.Tensor) -> None:
        nonlocal total
        kh, kw = m.kernel_size
        total += 2 * (m.in_channels // m.groups) * kh * kw * out[0].numel()

    def linear_hook(m: nn.Linear, _inp: Any, out: torch.Tensor) -> None:
        nonlocal total
        total += 2 * m.in_features * out[0].numel()

    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            m.register_forward_hook(conv_hook)
        elif isinstance(m, nn.Linear):
            m.register_forward_hook(linear_hook)
    with torch.no_grad():
        model(*inputs)
    return float(total)


def resnet_forward_flops(name: str, num_classes: int, image_size: int) -> float:
    block, layers = RESNETS[name]
    with torch.device("meta"):
        model = blocks.ResNet(
            block, layers, num_classes
        ).eval()  # eval: BN takes a 1x1 map of 1 sample
    image = torch.empty(1, 3, image_size, image_size, device="meta")
    return conv_linear_forward_flops(model, image)


# --------------------------------------------------------------------------------------------
# DLRM (facebookresearch/dlrm dlrm_s_pytorch.py at FAMBench's default OOTB training config)
# --------------------------------------------------------------------------------------------

DLRM_DENSE = 512  # dense features: the bottom MLP's input
DLRM_BOTTOM = (512, 64)  # --arch-mlp-bot=512-512-64
DLRM_TOP = (1024, 1024, 1024, 1)  # --arch-mlp-top=1024-1024-1024-1 (input width derived)
DLRM_TABLES = (1_000_000,) * 8  # --arch-embedding-size=1000000-... (8 tables)
DLRM_DIM = 64  # --arch-sparse-feature-size=64


def dlrm_mlp(sizes: tuple[int, ...], last_relu: bool) -> nn.Sequential:
    """Linear layers with ReLU between (and after the last one if `last_relu`); dlrm's init:
    weights N(0, sqrt(2 / (in + out))), biases N(0, sqrt(1 / out))."""
    layers: list[nn.Module] = []
    for i, (n, m) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        linear = nn.Linear(n, m)
        nn.init.normal_(linear.weight, std=math.sqrt(2 / (m + n)))
        nn.init.normal_(linear.bias, std=math.sqrt(1 / m))
        layers.append(linear)
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        features = len(DLRM_TABLES) + 1  # the bottom MLP's output is one more "feature"
        interactions = features * (features - 1) // 2 + DLRM_BOTTOM[-1]
        self.bottom = dlrm_mlp((DLRM_DENSE, *DLRM_BOTTOM), last_relu=True)
        # dlrm's init, U(-sqrt(1/rows), sqrt(1/rows)), given as the weight: the default N(0, 1)
        # init would be a second pass over the 2 GB of tables.
        self.embeddings = nn.ModuleList(
            nn.EmbeddingBag(
                rows,
                DLRM_DIM,
                mode="sum",
                sparse=True,
                _weight=torch.empty(rows, DLRM_DIM).uniform_(-(rows**-0.5), rows**-0.5),
            )
            for rows in DLRM_TABLES
        )
        self.top = dlrm_mlp((interactions, *DLRM_TOP), last_relu=False)  # logits
        li, lj = torch.tril_indices(features, features, offset=-1)  # i > j: no self-pairs
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        """dense: [B, 512] floats; sparse: [B, tables, L] row indices (L per lookup, summed).
        Returns the click logits [B]."""
        x = self.bottom(dense)
        pooled = [emb(sparse[:, k]) for k, emb in enumerate(self.embeddings)]
        t = torch.cat([x, *pooled], dim=1).view(x.shape[0], -1, DLRM_DIM)
        z = torch.bmm(t, t.transpose(1, 2))  # dot interaction of every pair of features
        return self.top(torch.cat([x, z[:, self.li, self.lj]], dim=1)).squeeze(1)


def dlrm_forward_flops() -> float:
    """Forward FLOPs of one sample: the MLPs' 2 * in * out per layer plus the interaction's
    batched matmul 2 * F^2 * D (F = 9 features of width D = 64; computed in full, as dlrm does,
    before the lower triangle is taken). Embedding-bag gathers and sums are memory traffic,
    not matmul FLOPs, and are not counted, so a DLRM's MFU is small by nature."""
    features = len(DLRM_TABLES) + 1
    sizes_bottom = (DLRM_DENSE, *DLRM_BOTTOM)
    sizes_top = (features * (features - 1) // 2 + DLRM_BOTTOM[-1], *DLRM_TOP)
    mlp = sum(
        n * m
        for sizes in (sizes_bottom, sizes_top)
        for n, m in zip(sizes[:-1], sizes[1:], strict=True)
    )
    return float(2 * mlp + 2 * features * features * DLRM_DIM)


# --------------------------------------------------------------------------------------------
# Dispatch: what workload.py calls
# --------------------------------------------------------------------------------------------

MODELS = (*GPT2_SIZES, "bert-large", "lstm", *RESNETS, "dlrm")


def check_args(args: argparse.Namespace) -> str | None:
    """An error message for shapes the model cannot take, else None."""
    if args.model in GPT2_SIZES and not 2 <= args.seq_len <= GPT2_POSITIONS:
        return f"--seq-len must be in 2..{GPT2_POSITIONS} for {args.model}"
    if args.model == "bert-large" and not 1 <= args.seq_len <= BERT_LARGE["max_positions"]:
        return f"--seq-len must be in 1..{BERT_LARGE['max_positions']}"
    if args.model in ("lstm", "dlrm") and args.seq_len < 1:
        return "--seq-len must be >= 1"
    return None


def build(args: argparse.Namespace) -> nn.Module:
    if args.model in GPT2_SIZES:
        return GPT2LM(*GPT2_SIZES[args.model])
    if args.model == "bert-large":
        return blocks.BertForPreTraining(BERT_LARGE)
    if args.model == "lstm":
        return LSTMClassifier()
    if args.model in RESNETS:
        block, layers = RESNETS[args.model]
        return blocks.ResNet(block, layers, args.num_classes)
    if args.model == "dlrm":
        return DLRM()
    raise ValueError(f"unknown zoo model {args.model!r}")


def forward_flops(args: argparse.Namespace) -> float:
    """Forward matmul/conv FLOPs of one sample at the run's shapes."""
    if args.model in GPT2_SIZES:
        return gpt2_forward_flops(args.model, args.seq_len)
    if args.model == "bert-large":
        return model_math.bert_forward_flops(args.seq_len, BERT_LARGE)
    if args.model == "lstm":
        return lstm_forward_flops(args.seq_len)
    if args.model in RESNETS:
        return resnet_forward_flops(args.model, args.num_classes, args.image_size)
    return dlrm_forward_flops()


# bert-large has no task here: it trains exactly as `bert` in workload.py (same vocabulary,
# data, MLM + NSP loss and AdamW), so workload.make_step's BERT branch runs it.
TASKS = (*GPT2_SIZES, "lstm", *RESNETS, "dlrm")


def make_inputs(
    args: argparse.Namespace, device: torch.device, g: torch.Generator | None = None
) -> tuple[torch.Tensor, ...]:
    """The synthetic model inputs of a TASKS model, made once on the device, batch first (so
    that inference can take the first n rows of each): GPT-2 token ids [B, S]; LSTM features
    [B, S, 256]; ResNet images [B, 3, I, I]; DLRM dense features [B, 512] in [0, 1) and row
    indices [B, tables, S]. `g` (default: seeded with --seed) continues into the labels."""
    cpu_bf16 = args.precision == "amp" and device.type == "cpu"
    if args.model == "lstm" and cpu_bf16 and kit.cpu_native_bf16() is False:
        # Measured on an AVX2-only EPYC: oneDNN cannot create the primitive.
        raise kit.Unsupported("bf16 autocast of nn.LSTM on a CPU without bf16 instructions "
                              "(no AVX512-BF16/AMX): oneDNN has no LSTM kernel for it")  # fmt: skip
    if g is None:
        g = torch.Generator(device="cpu").manual_seed(args.seed)
    b, s = args.batch_size, args.seq_len
    if args.model in GPT2_SIZES:
        inputs: tuple[torch.Tensor, ...] = (torch.randint(0, GPT2_VOCAB, (b, s), generator=g),)
    elif args.model == "lstm":
        inputs = (torch.randn(b, s, LSTM_INPUT, generator=g),)
    elif args.model in RESNETS:
        inputs = (torch.randn(b, 3, args.image_size, args.image_size, generator=g),)
    elif args.model == "dlrm":
        rows = torch.tensor(DLRM_TABLES).view(1, -1, 1)
        sparse = (torch.rand(b, len(DLRM_TABLES), s, generator=g) * rows).long()
        inputs = (torch.rand(b, DLRM_DENSE, generator=g), sparse)
    else:
        raise ValueError(f"{args.model!r} has no zoo task")
    return tuple(t.to(device) for t in inputs)


def make_task(
    args: argparse.Namespace, model: nn.Module, device: torch.device
) -> tuple[Callable[[nn.Module], torch.Tensor], torch.optim.Optimizer]:
    """(loss_fn, optimizer) for workload.make_step: loss_fn(m) runs one training forward of the
    whole synthetic batch through m (the model, or its DDP / torch.compile wrapper) and returns
    the loss, not yet read back; the optimizer is the family's."""
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    inputs = blocks.to_memory_format(args, *make_inputs(args, device, g))
    b = args.batch_size
    params = model.parameters()
    if args.model in GPT2_SIZES:
        (ids,) = inputs
        optimizer = blocks.make_optimizer(
            torch.optim.AdamW, params, args, lr=1e-4, weight_decay=0.01
        )

        def loss_fn(m: nn.Module) -> torch.Tensor:  # next-token prediction at every position
            logits = m(ids)
            return F.cross_entropy(logits[:, :-1].reshape(-1, GPT2_VOCAB), ids[:, 1:].reshape(-1))

        return loss_fn, optimizer
    if args.model == "dlrm":
        clicks = torch.randint(0, 2, (b,), generator=g).float().to(device)
        # Plain SGD, as dlrm: it takes the embedding tables' sparse gradients as they are.
        optimizer = blocks.make_optimizer(torch.optim.SGD, params, args, lr=0.01)

        def bce(m: nn.Module) -> torch.Tensor:
            return F.binary_cross_entropy_with_logits(m(*inputs).float(), clicks)

        return bce, optimizer
    # Classifiers: LSTM (SuperBench's SGD, Nesterov momentum) and the ResNets (as resnet50).
    classes = LSTM_CLASSES if args.model == "lstm" else args.num_classes
    labels = torch.randint(0, classes, (b,), generator=g).to(device)
    if args.model == "lstm":
        optimizer = blocks.make_optimizer(
            torch.optim.SGD, params, args, lr=0.01, momentum=0.9, weight_decay=1e-4, nesterov=True
        )
    else:
        optimizer = blocks.make_optimizer(
            torch.optim.SGD, params, args, lr=0.1, momentum=0.9, weight_decay=1e-4
        )

    def cross_entropy(m: nn.Module) -> torch.Tensor:
        return F.cross_entropy(m(*inputs), labels)

    return cross_entropy, optimizer
