"""PyTorch training workload for dlperf: ResNet50-v1.5 or BERT-base pretraining (and the zoo's
models), synthetic data.

Runs inside the adapter's isolated virtual env and imports only torch and the standard library;
the harness (command line, events, timed loop, LoadGen) is adapters/_shared/workload_kit.py.

Usage:
    python workload.py --model resnet50 --batch-size 64 --steps 50 [--precision amp] [--xla]
    python workload.py --model bert --describe   # one JSON line: params, FLOPs; no training
    python workload.py --model resnet50 --mode infer [--loadgen-settings JSON]  # forward only
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))
import model_math  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_blocks as blocks  # noqa: E402
import workload_kit as kit  # noqa: E402
import zoo  # noqa: E402
from torch import nn  # noqa: E402


def build_model(args: argparse.Namespace) -> nn.Module:
    if args.model in zoo.MODELS:
        return zoo.build(args)
    if args.model == "resnet50":
        return blocks.ResNet50(args.num_classes)
    return blocks.BertForPreTraining(model_math.BERT_BASE)


def flops_per_sample(args: argparse.Namespace) -> float:
    """Matmul/conv FLOPs of one sample in the asked mode (training: 3 x the forward)."""
    forward = zoo.forward_flops(args) if args.model in zoo.MODELS else None
    return model_math.flops_per_sample(args, forward)


def amp_dtype(device: torch.device) -> torch.dtype:
    """--precision amp's autocast dtype: fp16 on CUDA (with loss scaling), bf16 on a CPU."""
    return torch.float16 if device.type == "cuda" else torch.bfloat16


def autocast(args: argparse.Namespace, device: torch.device) -> contextlib.AbstractContextManager:
    if args.precision != "amp":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=amp_dtype(device))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


Task = tuple[Callable[[nn.Module], torch.Tensor], torch.optim.Optimizer]


def resnet_task(args: argparse.Namespace, model: nn.Module, device: torch.device,
                g: torch.Generator) -> Task:  # fmt: skip
    """(loss_fn, optimizer): cross entropy of a synthetic batch of images, SGD with momentum."""
    b = args.batch_size
    images = torch.randn(b, 3, args.image_size, args.image_size, generator=g).to(device)
    (images,) = blocks.to_memory_format(args, images)
    labels = torch.randint(0, args.num_classes, (b,), generator=g).to(device)
    optimizer = blocks.make_optimizer(
        torch.optim.SGD, model.parameters(), args, lr=0.1, momentum=0.9, weight_decay=1e-4
    )

    def loss_fn(m: nn.Module) -> torch.Tensor:
        return F.cross_entropy(m(images), labels)

    return loss_fn, optimizer


def bert_task(args: argparse.Namespace, model: nn.Module, device: torch.device,
              g: torch.Generator) -> Task:  # fmt: skip
    """(loss_fn, optimizer): BERT pretraining's MLM + NSP loss on a synthetic batch, AdamW."""
    b, s = args.batch_size, args.seq_len
    vocab = model_math.BERT_BASE["vocab"]
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
    optimizer = blocks.make_optimizer(
        torch.optim.AdamW, model.parameters(), args, lr=1e-4, weight_decay=0.01
    )

    def loss_fn(m: nn.Module) -> torch.Tensor:
        mlm_logits, nsp_logits = m(input_ids, token_types, attn_mask)
        mlm = F.cross_entropy(mlm_logits.view(-1, vocab), mlm_labels.view(-1), ignore_index=-100)
        return mlm + F.cross_entropy(nsp_logits, nsp_labels)

    return loss_fn, optimizer


def make_step(
    args: argparse.Namespace, model: nn.Module, device: torch.device
) -> Callable[[], float]:
    """The synthetic batch (made once, on the device), the optimizer and step(): one
    forward/backward/update, returning the loss once the device has finished the step."""
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    if args.model in zoo.TASKS:  # its own data, loss and optimizer (bert-large: BERT's below)
        loss_fn, optimizer = zoo.make_task(args, model, device)
    elif args.model == "resnet50":
        loss_fn, optimizer = resnet_task(args, model, device, g)
    else:
        loss_fn, optimizer = bert_task(args, model, device, g)
    # torch.compile (the "--xla" flag: PyTorch's graph compiler, inductor backend). Compilation
    # happens lazily inside step 1, so step 1 is slow; the harness's warm-up window absorbs it.
    run_model = torch.compile(model) if args.xla else model
    # fp16 needs loss scaling to keep small gradients from underflowing; bf16 does not.
    amp_on_cuda = args.precision == "amp" and device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda") if amp_on_cuda else None

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        with autocast(args, device):
            loss = loss_fn(run_model)
        kit.backward_and_update(loss, optimizer, scaler)
        sync(device)
        # .item() copies the loss back to the host, so the step has truly finished (on CPU it
        # also forces any deferred work) before the timestamp is taken.
        return loss.item()

    return step


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
        inputs = blocks.to_memory_format(args, *zoo.make_inputs(args, device))
    elif args.model == "resnet50":
        inputs: tuple[torch.Tensor | None, ...] = (
            torch.randn(b, 3, args.image_size, args.image_size, generator=g).to(device),
        )
        inputs = blocks.to_memory_format(args, *inputs)
    else:
        s = args.seq_len
        input_ids = torch.randint(0, model_math.BERT_BASE["vocab"], (b, s), generator=g)
        token_types = torch.zeros(b, s, dtype=torch.long)
        token_types[:, s // 2 :] = 1
        inputs = (input_ids.to(device), token_types.to(device), None)  # all-ones mask: none
    model.eval()
    # torch.compile specialises on shapes, so the compiled model always gets the full batch
    # (the rows past n are wasted work) instead of recompiling for each batch LoadGen forms.
    run_model = torch.compile(model) if args.xla else model

    def predict(n: int) -> float:
        rows = b if args.xla else n
        with torch.inference_mode(), autocast(args, device):
            out = run_model(*(t if t is None or rows == b else t[:rows] for t in inputs))
        sync(device)
        return (out[0] if isinstance(out, tuple) else out).reshape(-1)[0].item()

    return predict


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = kit.model_parser(
        __doc__, models=("resnet50", "bert", *zoo.MODELS),
        xla_help="wrap the model in torch.compile", threads_help="torch.set_num_threads(N)",
    )  # fmt: skip
    # Best practice, each switchable (the adapter passes its defaults for the device and model):
    flag = {"type": int, "choices": (0, 1), "default": 0}
    p.add_argument("--channels-last", **flag, help="channels_last (NHWC) model and images")
    p.add_argument("--fused-optimizer", **flag, help="fused (else foreach) optimizer kernels")
    p.add_argument("--cudnn-benchmark", **flag, help="torch.backends.cudnn.benchmark")
    p.add_argument("--sdpa", type=int, choices=(0, 1), default=1, help="BERT attention: SDPA")
    zoo_check = lambda a: zoo.check_args(a) if a.model in zoo.MODELS else None  # noqa: E731
    return kit.parse_model_args(p, argv, model_math.BERT_BASE["max_positions"], zoo_check)


class PyTorch(kit.Hooks):
    """This framework's parts of the worker sequence (kit.main runs them)."""

    framework, version, compiler = "pytorch", torch.__version__, "torch.compile"
    warn_bf16 = True
    device = torch.device("cpu")
    rank, world = 0, 1

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        return parse_args(argv)

    def threads(self, args: argparse.Namespace) -> None:
        if args.threads:
            torch.set_num_threads(args.threads)

    def describe(self, args: argparse.Namespace) -> dict[str, object]:
        # Shapes only: building on "meta" allocates nothing and skips the random init.
        with torch.device("meta"):
            model = build_model(args)
        return {"params": blocks.count_params(model), "flops_per_sample": flops_per_sample(args)}

    def cuda_missing(self) -> str | None:
        if torch.cuda.is_available():
            return None
        return (f"torch.cuda.is_available() is False (torch {torch.__version__}, "
                f"CUDA build: {torch.version.cuda})")  # fmt: skip

    def place(self, args: argparse.Namespace) -> kit.Place:
        # Data parallel when a launcher (torchrun) started several ranks: one process per
        # device, gradients all-reduced every step (gloo on CPU, NCCL on CUDA), batch = per
        # device.
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        return kit.Place(self.rank, self.world)

    def setup(self, args: argparse.Namespace) -> None:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if self.world > 1:
            import torch.distributed as dist

            dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
            if args.device == "cpu" and not args.threads:  # ranks on one host share its cores
                local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
                torch.set_num_threads(kit.cores_per_rank(kit.ranks_on_host(local_world)))
        self.device = torch.device(f"cuda:{local_rank}" if args.device == "cuda" else "cpu")
        if args.device == "cuda":
            torch.cuda.set_device(self.device)
            # Honest fp32: no silent TF32 for matmuls/convolutions (it also keeps AMP runs'
            # fp32 ops in true fp32). cudnn.benchmark picks the fastest conv algorithms for the
            # fixed shapes, as every reference training script does.
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cudnn.benchmark = bool(args.cudnn_benchmark)
        blocks.USE_SDPA = bool(args.sdpa)

    def build(self, args: argparse.Namespace) -> nn.Module:
        torch.manual_seed(args.seed)  # the same initial weights on every rank
        model = build_model(args).to(self.device)
        if args.channels_last:
            model = model.to(memory_format=torch.channels_last)
        model.train()
        if self.world > 1 and args.mode == "train":  # inference: each rank runs its own model
            from torch.nn.parallel import DistributedDataParallel

            cuda = self.device.type == "cuda"
            model = DistributedDataParallel(model, device_ids=[self.device.index] if cuda else None)
            args.seed += self.rank  # each rank its own synthetic batch
        return model

    def make_step(self, args: argparse.Namespace, model: nn.Module) -> Callable[[], float]:
        return make_step(args, model, self.device)

    def make_predict(self, args: argparse.Namespace, model: nn.Module) -> Callable[[int], float]:
        return make_predict(args, model, self.device)

    def facts(self, args: argparse.Namespace, model: nn.Module) -> kit.Facts:
        cuda = self.device.type == "cuda"
        practice = {**blocks.APPLIED, "channels_last": bool(args.channels_last)}
        if cuda:
            practice["cudnn_benchmark"] = torch.backends.cudnn.benchmark
        if args.model in ("bert", "bert-large"):
            practice["sdpa"] = blocks.USE_SDPA
        amp = str(amp_dtype(self.device)).replace("torch.", "")
        return kit.Facts(
            self.device.type, torch.cuda.get_device_name(self.device) if cuda else kit.cpu_name(),
            amp if args.precision == "amp" else None, torch.get_num_threads(),
            params=blocks.count_params(model), flops=flops_per_sample(args), practice=practice,
            extra={"tf32": False if cuda else None,
                   "cpu_capability": None if cuda else torch.backends.cpu.get_cpu_capability(),
                   "cpu_native_bf16": None if cuda else kit.cpu_native_bf16()},
        )  # fmt: skip

    def sync(self) -> None:
        sync(self.device)

    def teardown(self) -> None:
        if self.world > 1:
            torch.distributed.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    return kit.main(PyTorch(), argv)


if __name__ == "__main__":
    sys.exit(main())
