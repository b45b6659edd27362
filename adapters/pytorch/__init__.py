"""PyTorch: ResNet50-v1.5 and BERT-base training written with torch.nn, synthetic data, plus the
model zoo in zoo.py (GPT-2, BERT-large, LSTM, ResNet18/34/101/152, DLRM)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dlperf.adapter import Command, WorkloadScriptAdapter
from dlperf.schema import BenchmarkSpec


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
    verify = "import torch; print(torch.__version__)"

    def option_keys(self, model: str) -> dict[str, str]:
        return {
            "threads": "torch.set_num_threads(N) in the workload (default: PyTorch's own choice)",
            "seed": "seed for the synthetic data and weights (default 0)",
        }

    def node_command(
        self,
        spec: BenchmarkSpec,
        python: str,
        node_rank: int,
        hosts: Sequence[str],
        port: int,
        log_dir: Path | None = None,
    ) -> Command:
        """torchrun as the node agent: static rendezvous at the master, one rank per device."""
        workload = self.command(spec, python)
        launcher = [
            python, "-m", "torch.distributed.run",
            f"--nnodes={spec.nodes}", f"--nproc-per-node={spec.devices_per_node}",
            f"--node-rank={node_rank}", f"--master-addr={hosts[0]}",
            f"--master-port={port}", "--max-restarts=0",
        ]  # fmt: skip
        return Command([*launcher, *workload.argv[1:]], env=workload.env, cwd=workload.cwd)


ADAPTER = PyTorchAdapter()
