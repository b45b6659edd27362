"""Plain hand-written PyTorch training loops: the reference dlperf's own workload is held against.

No dlperf code: torch (and torchvision / transformers where installed) only, written the way a
careful user writes a training benchmark, with the usual best practice: channels_last and
cudnn.benchmark for the ResNet, SDPA attention, fused optimizers, fp16 + GradScaler (CUDA) or
bf16 autocast (CPU) for AMP, torch.compile for --xla. One process is one repeat: it runs
`skip + measure` steps on one synthetic batch kept on the device, synchronises the device only
at the two ends of the window (no per-step sync: the best a loop can do), and prints one JSON
line: {"throughput": samples/s over the window, "model": ..., "params": ...}.

    python reference_loops.py --model resnet50 --device cuda --amp --batch-size 256
    python reference_loops.py --model bert --device cpu --batch-size 4 --seq-len 32 --threads 2

Diagnostics (`--model-source dlperf --workload PATH`): the same loop around dlperf's own model,
built by adapters/pytorch/workload.py's own `parse_args` and `build_model` (so it is the network
`dlperf run` trains, wherever its classes live), with --bert-mask ones passing an all-ones
attention mask as a typical loop does (SDPA then cannot take its flash kernel). These tell a
slow model from a slow harness.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 30522


# --------------------------------------------------------------------------- models


def resnet50_v15() -> nn.Module:
    """torchvision's resnet50 (v1.5: stride on the 3x3 conv) where installed, else the same
    network written out here."""
    with contextlib.suppress(ImportError):
        from torchvision.models import resnet50

        return resnet50()

    class Block(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(True),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(True), nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout),
            )  # fmt: skip
            self.short = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Identity()
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.relu(self.body(x) + self.short(x))

    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(True),
        nn.MaxPool2d(3, 2, 1),
    ]  # fmt: skip
    cin = 64
    for i, (width, n) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3), strict=True)):
        for b in range(n):
            layers.append(Block(cin, width, 2 if b == 0 and i > 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers)


class Layer(nn.Module):
    """A post-LN BERT encoder layer: fused QKV projection, SDPA attention, GELU MLP."""

    def __init__(self, h: int = 768, heads: int = 12, inner: int = 3072) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(h, 3 * h)
        self.out = nn.Linear(h, h)
        self.norm1 = nn.LayerNorm(h, eps=1e-12)
        self.up = nn.Linear(h, inner)
        self.down = nn.Linear(inner, h)
        self.norm2 = nn.LayerNorm(h, eps=1e-12)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        p = 0.1 if self.training else 0.0
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        x = self.norm1(
            x + F.dropout(self.out(a.transpose(1, 2).reshape(b, s, h)), 0.1, self.training)
        )
        return self.norm2(x + F.dropout(self.down(F.gelu(self.up(x))), 0.1, self.training))


class TorchBert(nn.Module):
    """BERT-base for pretraining written with torch.nn and SDPA (post-LN, GELU, tied MLM
    decoder, NSP head): the fallback where transformers is not installed. (nn.Transformer-
    EncoderLayer measured 1.7x slower than this in training on a CPU.)"""

    def __init__(self) -> None:
        super().__init__()
        h = 768
        self.words = nn.Embedding(VOCAB, h)
        self.positions = nn.Embedding(512, h)
        self.types = nn.Embedding(2, h)
        self.norm = nn.LayerNorm(h, eps=1e-12)
        self.layers = nn.ModuleList(Layer() for _ in range(12))
        self.pooler = nn.Linear(h, h)
        self.nsp = nn.Linear(h, 2)
        self.transform = nn.Linear(h, h)
        self.transform_norm = nn.LayerNorm(h, eps=1e-12)
        self.bias = nn.Parameter(torch.zeros(VOCAB))
        for m in self.modules():  # BERT's (and transformers') init: N(0, 0.02), zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor | None):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.words(ids) + self.positions(pos) + self.types(types))
        x = F.dropout(x, 0.1, self.training)
        keep = None if mask is None else mask.bool()[:, None, None, :]
        for layer in self.layers:
            x = layer(x, keep)
        mlm = F.linear(self.transform_norm(F.gelu(self.transform(x))), self.words.weight, self.bias)
        return mlm, self.nsp(torch.tanh(self.pooler(x[:, 0])))


def bert_base() -> tuple[nn.Module, str]:
    with contextlib.suppress(ImportError):
        from transformers import BertConfig, BertForPreTraining

        model = BertForPreTraining(BertConfig(attn_implementation="sdpa"))
        return model, "transformers BertForPreTraining (sdpa)"
    return TorchBert(), "torch.nn + SDPA BERT-base"


def dlperf_model(args: argparse.Namespace) -> nn.Module:
    """dlperf's own model, for the diagnostic rows only: built by the workload's own entry
    points (`parse_args`, `build_model`), so a refactor of where its classes live cannot break
    this loop, and the loop trains exactly the network `dlperf run` trains."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.workload)))
    spec = importlib.util.spec_from_file_location("dlperf_workload", args.workload)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv = ["--model", args.model, "--device", args.device]
    argv += ["--image-size", str(args.image_size), "--seq-len", str(args.seq_len)]
    return module.build_model(module.parse_args(argv))


# --------------------------------------------------------------------------- loop


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("resnet50", "bert"), required=True)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--amp", action="store_true")
    p.add_argument("--xla", action="store_true", help="torch.compile")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--skip", type=int, default=20)
    p.add_argument("--measure", type=int, default=100)
    p.add_argument("--threads", type=int)
    p.add_argument("--model-source", choices=("reference", "dlperf"), default="reference")
    p.add_argument("--workload", help="dlperf's adapters/pytorch/workload.py (diagnostics)")
    p.add_argument("--bert-mask", choices=("none", "ones"), default="none")
    p.add_argument(
        "--channels-last",
        type=int,
        choices=(0, 1),
        help="default: 1 on CUDA, 0 on "
        "a CPU (where oneDNN's NHWC path measured slower for ResNet50 here)",
    )
    p.add_argument("--fused", type=int, choices=(0, 1), default=1)
    args = p.parse_args()
    if args.model_source == "dlperf" and not args.workload:
        p.error("--model-source dlperf needs --workload (dlperf's adapters/pytorch/workload.py)")
    return args


Task = tuple[nn.Module, str, torch.optim.Optimizer, Callable[[nn.Module], torch.Tensor]]


def resnet_task(args: argparse.Namespace, device: torch.device, fused: dict) -> Task:
    """ResNet50 with SGD on one batch of random images: model, its name, optimizer, loss."""
    if args.model_source == "dlperf":
        model, what = dlperf_model(args), "dlperf ResNet50 class"
    else:
        model, what = resnet50_v15(), "torchvision-style resnet50"
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(device, memory_format=fmt)
    b = args.batch_size
    images = torch.randn(b, 3, args.image_size, args.image_size, device=device)
    images = images.contiguous(memory_format=fmt)
    labels = torch.randint(0, 1000, (b,), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4, **fused)

    def loss_of(m: nn.Module) -> torch.Tensor:
        return F.cross_entropy(m(images), labels)

    return model, what, opt, loss_of


def bert_task(args: argparse.Namespace, device: torch.device, fused: dict) -> Task:
    """BERT-base pretraining with AdamW on one batch of random tokens (MLM + NSP losses)."""
    b, s = args.batch_size, args.seq_len
    ids = torch.randint(0, VOCAB, (b, s), device=device)
    types = torch.zeros(b, s, dtype=torch.long, device=device)
    mask = torch.ones(b, s, dtype=torch.long, device=device)
    mlm_labels = torch.where(torch.rand(b, s, device=device) < 0.15, ids, -100)
    nsp_labels = torch.randint(0, 2, (b,), device=device)
    given_mask = mask if args.bert_mask == "ones" else None
    if args.model_source == "dlperf":
        model, what = dlperf_model(args), "dlperf BERT class"
        if given_mask is not None:
            given_mask = given_mask.bool()[:, None, None, :]
    else:
        model, what = bert_base()
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, **fused)
    hf = type(model).__module__.startswith("transformers")

    def loss_of(m: nn.Module) -> torch.Tensor:
        if hf:
            out = m(input_ids=ids, token_type_ids=types, attention_mask=given_mask)
            mlm, nsp = out.prediction_logits, out.seq_relationship_logits
        else:
            mlm, nsp = m(ids, types, given_mask)
        return F.cross_entropy(mlm.view(-1, VOCAB), mlm_labels.view(-1)) + F.cross_entropy(
            nsp, nsp_labels
        )

    return model, what, opt, loss_of


def timed(step: Callable[[], torch.Tensor], cuda: bool, skip: int, measure: int) -> float:
    """Seconds for `measure` steps after `skip` warm-up steps, as dlperf's window: it starts
    when step `skip` has finished (its loss read back, the device synchronised)."""

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    for _ in range(skip):
        last = step()
    if skip:
        last.item()
    sync()
    start = time.perf_counter()
    for _ in range(measure):
        last = step()
    last.item()
    sync()
    return time.perf_counter() - start


def main() -> int:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
    if args.channels_last is None:  # on a CPU it pays off from 112 px up (measured)
        args.channels_last = int(cuda or args.image_size >= 112)
    torch.manual_seed(0)
    fused = {"fused": True} if args.fused else {}
    task = resnet_task if args.model == "resnet50" else bert_task
    model, what, opt, loss_of = task(args, device, fused)
    model.train()
    run = torch.compile(model) if args.xla else model
    amp_dtype = torch.float16 if cuda else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda") if args.amp and cuda else None

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        ctx = torch.autocast(device.type, amp_dtype) if args.amp else contextlib.nullcontext()
        with ctx:
            loss = loss_of(run)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    elapsed = timed(step, cuda, args.skip, args.measure)
    facts = {
        "throughput": args.measure * args.batch_size / elapsed,
        "model": what,
        "params": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(facts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
