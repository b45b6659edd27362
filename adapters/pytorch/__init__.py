"""PyTorch: ResNet50-v1.5 and BERT-base training written with torch.nn, synthetic data."""

from __future__ import annotations

from pathlib import Path

from dlperf.adapter import Adapter, Command
from dlperf.envs import EnvSpec
from dlperf.schema import BenchmarkSpec

HERE = Path(__file__).parent
SCRIPT = HERE / "workload.py"
PYTHON = "3.11"
VERIFY = "import torch; print(torch.__version__)"

OPTIONS = {
    "threads": "torch.set_num_threads(N) in the workload (default: PyTorch's own choice)",
    "seed": "seed for the synthetic data and weights (default 0)",
}


class PyTorchAdapter(Adapter):
    name = "pytorch"
    description = "PyTorch eager (torch.compile with --xla), bf16 autocast on CPU / fp16 on CUDA"
    models = ("resnet50", "bert")

    def option_keys(self, model: str) -> dict[str, str]:
        return OPTIONS

    def env_spec(self, device: str) -> EnvSpec:
        return EnvSpec.from_requirements_file(
            "pytorch", device, PYTHON, HERE / f"requirements-{device}.txt", VERIFY
        )

    def command(self, spec: BenchmarkSpec, python: str) -> Command:
        argv = [
            python,
            str(SCRIPT),
            "--model", spec.model,
            "--batch-size", str(spec.batch_size),
            "--steps", str(spec.steps),
            "--precision", spec.precision,
            "--device", spec.device,
        ]  # fmt: skip
        if spec.image_size:
            argv += ["--image-size", str(spec.image_size)]
        if spec.seq_len:
            argv += ["--seq-len", str(spec.seq_len)]
        if spec.xla:
            argv.append("--xla")
        for key, value in sorted(spec.options.items()):
            argv += [f"--{key.replace('_', '-')}", value]
        return Command(argv)


ADAPTER = PyTorchAdapter()
