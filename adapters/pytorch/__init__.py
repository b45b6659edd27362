"""PyTorch: ResNet50-v1.5 and BERT-base training written with torch.nn, synthetic data, plus the
model zoo in zoo.py (GPT-2, BERT-large, LSTM, ResNet18/34/101/152, DLRM)."""

from __future__ import annotations

from pathlib import Path

from dlperf.adapter import SEED, THREADS_MAX, WorkloadScriptAdapter, flag, integer
from dlperf.launch import WORKLOAD, FrameworkLaunch, gpu_check
from dlperf.schema import BenchmarkSpec

CONV_MODELS = ("resnet50", "resnet18", "resnet34", "resnet101", "resnet152")
SDPA_MODELS = ("bert", "bert-large")
SPARSE_MODELS = ("dlrm",)  # sparse embedding gradients: plain SGD, no fused kernel
CPU_CHANNELS_LAST_FROM_PX = 112  # measured on a CPU: slower below, faster from here (practice)


OPTIONS = {
    "threads": integer(
        "torch.set_num_threads(N) (default on a CPU: every CPU dlperf may use)", le=THREADS_MAX
    ),
    "seed": SEED,
    "fused_optimizer": flag(
        "1: the optimizer's fused kernel (fused=True) where the installed torch has one, else "
        "its foreach form; 0: the for-each-parameter loop"
    ),
    "cudnn_benchmark": flag("1: cudnn.benchmark picks the fastest conv algorithms (CUDA)"),
}
CHANNELS_LAST = flag("1: model and images in channels_last (NHWC) memory format")
SDPA = flag("1: F.scaled_dot_product_attention (flash/efficient kernels); 0: math")

LAUNCH = FrameworkLaunch(
    verify="import torch; print(torch.__version__)",
    cuda_check=gpu_check(
        "import torch",
        ("not torch.cuda.is_available()",
         "torch {torch.__version__} (CUDA build: {torch.version.cuda}) sees no usable GPU: "
         "torch.cuda.is_available() is False"),
    ),
    # torchrun as the node agent: static rendezvous at the master, one rank per device.
    agent=(
        "{python}", "-m", "torch.distributed.run",
        "--nnodes={nodes}", "--nproc-per-node={devices}", "--node-rank={node_rank}",
        "--master-addr={master_addr}", "--master-port={master_port}", "--max-restarts=0",
        WORKLOAD,
    ),
)  # fmt: skip


class PyTorchAdapter(WorkloadScriptAdapter):
    name = "pytorch"
    description = "PyTorch eager (torch.compile with --xla), bf16 autocast on CPU / fp16 on CUDA"
    models = (
        "resnet50", "bert",
        # zoo.py: SuperBench's PyTorch model families and FAMBench's DLRM
        "gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "bert-large", "lstm",
        "resnet18", "resnet34", "resnet101", "resnet152", "dlrm",
    )  # fmt: skip
    folder = Path(__file__).parent
    python = "3.11"
    launch = LAUNCH
    options = OPTIONS
    model_options = {
        **{m: {"channels_last": CHANNELS_LAST} for m in CONV_MODELS},
        **{m: {"sdpa": SDPA} for m in SDPA_MODELS},
    }

    def practice(self, spec: BenchmarkSpec) -> dict[str, str]:
        """The settings NVIDIA's and PyTorch's own ResNet50/BERT training scripts use:
        channels_last for convolutions (NVIDIA/DeepLearningExamples
        PyTorch/Classification/ConvNets/main.py `--memory-format nhwc`, the default of its AMP
        configs; pytorch/examples imagenet/main.py `--channels-last`), fused optimizers
        (torch.optim's `fused=True`; DeepLearningExamples' BERT uses apex's FusedLAMB),
        cudnn.benchmark (both scripts) and SDPA's flash/efficient attention kernels.

        On a CPU only where they measured faster, dlperf's own model classes, interleaved A/B,
        2 threads on the project's 2-core Xeon VM: fused SGD 1.08x and fused AdamW 1.26x the
        torch default (ResNet50 b16 64 px, BERT b4 seq 64); channels_last 0.85x at 64 px,
        1.07x at 112 px, 1.26x at 224 px (oneDNN's NHWC kernels pay off on larger maps), so a
        CPU gets channels_last from 112 px up."""
        out: dict[str, str] = {}
        cuda = spec.device == "cuda"
        if spec.model in CONV_MODELS:
            large = (spec.image_size or 224) >= CPU_CHANNELS_LAST_FROM_PX
            out["channels_last"] = "1" if cuda or large else "0"
        if spec.mode == "train" and spec.model not in SPARSE_MODELS:
            out["fused_optimizer"] = "1"
        if cuda:
            out["cudnn_benchmark"] = "1"
        if spec.model in SDPA_MODELS:
            out["sdpa"] = "1"
        return out


ADAPTER = PyTorchAdapter()
