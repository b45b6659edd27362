"""PyTorch: ResNet50-v1.5 and BERT-base training written with torch.nn, synthetic data."""

from __future__ import annotations

from pathlib import Path

from dlperf.adapter import WorkloadScriptAdapter


class PyTorchAdapter(WorkloadScriptAdapter):
    name = "pytorch"
    description = "PyTorch eager (torch.compile with --xla), bf16 autocast on CPU / fp16 on CUDA"
    models = ("resnet50", "bert")
    folder = Path(__file__).parent
    python = "3.11"
    verify = "import torch; print(torch.__version__)"

    def option_keys(self, model: str) -> dict[str, str]:
        return {
            "threads": "torch.set_num_threads(N) in the workload (default: PyTorch's own choice)",
            "seed": "seed for the synthetic data and weights (default 0)",
        }


ADAPTER = PyTorchAdapter()
