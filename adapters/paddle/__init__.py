"""PaddlePaddle: ResNet50-v1.5 and BERT-base training written with paddle.nn (dygraph),
synthetic data. The host never imports paddle; workload.py runs inside the isolated env."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dlperf.adapter import Command, WorkloadScriptAdapter
from dlperf.schema import BenchmarkSpec

# paddlepaddle-gpu wheels live on Paddle's own index (CUDA 12.6 build); PyPI has the CPU wheel.
CUDA_INDEX = "https://www.paddlepaddle.org.cn/packages/stable/cu126/"

OPTIONS = {
    "threads": "CPU math threads (OMP/MKL) in the workload (default: Paddle's own choice)",
    "seed": "seed for the synthetic data and weights (default 0)",
}


class PaddleAdapter(WorkloadScriptAdapter):
    name = "paddle"
    description = (
        "PaddlePaddle dygraph (paddle.jit.to_static with --xla), bf16 autocast on CPU / "
        "fp16 + GradScaler on CUDA"
    )
    models = ("resnet50", "bert")
    folder = Path(__file__).parent
    python = "3.11"
    verify = "import paddle; print(paddle.__version__)"

    def option_keys(self, model: str) -> dict[str, str]:
        return OPTIONS

    def pip_args(self, device: str) -> tuple[str, ...]:
        return ("--extra-index-url", CUDA_INDEX) if device == "cuda" else ()

    def extra_env(self, spec: BenchmarkSpec) -> dict[str, str]:
        env = {"GLOG_minloglevel": "2"}
        threads = spec.options.get("threads")
        if threads:
            # Paddle's CPU kernels read the thread count from OMP/MKL at import time.
            env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        return env

    def node_command(
        self,
        spec: BenchmarkSpec,
        python: str,
        node_rank: int,
        hosts: Sequence[str],
        port: int,
        log_dir: Path | None = None,
    ) -> Command:
        """paddle.distributed.launch as the node agent (one worker per device, DataParallel;
        gloo on CPU, NCCL on CUDA); every worker's log goes to the repeat's raw folder."""
        workload = self.command(spec, python)
        logs = (log_dir or Path("paddle-logs")) / f"paddle-node{node_rank}"
        launcher = [
            python, "-m", "paddle.distributed.launch",
            "--nnodes", str(spec.nodes), "--master", f"{hosts[0]}:{port}",
            "--rank", str(node_rank), "--nproc_per_node", str(spec.devices_per_node),
            "--log_dir", str(logs), "--max_restart", "0",
        ]  # fmt: skip
        if spec.device == "cuda":
            launcher += ["--devices", ",".join(str(i) for i in range(spec.devices_per_node))]
        return Command([*launcher, *workload.argv[1:]], env=workload.env, cwd=workload.cwd)


ADAPTER = PaddleAdapter()
