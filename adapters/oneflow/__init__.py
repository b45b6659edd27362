"""OneFlow: ResNet50-v1.5 and BERT-base training written with oneflow.nn (eager), synthetic data.

The host never imports oneflow; workload.py runs inside the isolated env. OneFlow 0.9.0 ships
only a CUDA 11 wheel for CPython 3.10; that one build serves both the cpu and cuda variants, and
needs cuDNN/cuBLAS shared libraries (pip wheels) on LD_LIBRARY_PATH even to run on the CPU.
"""

from __future__ import annotations

from pathlib import Path

from dlperf.adapter import WorkloadScriptAdapter
from dlperf.schema import BenchmarkSpec


class OneFlowAdapter(WorkloadScriptAdapter):
    name = "oneflow"
    description = (
        "OneFlow eager (oneflow.nn.Graph with --xla), bf16 autocast on CPU / fp16 + GradScaler "
        "on CUDA"
    )
    models = ("resnet50", "bert")
    folder = Path(__file__).parent
    python = "3.10"
    verify = "import oneflow; print(oneflow.__version__)"

    def lib_dirs(self, device: str) -> tuple[str, ...]:
        # site-packages-relative folders of the nvidia-cudnn-cu11 / nvidia-cublas-cu11 wheels
        return ("nvidia/cudnn/lib", "nvidia/cublas/lib")

    def option_keys(self, model: str) -> dict[str, str]:
        return {
            "threads": "CPU intra-op threads (OMP_NUM_THREADS / ONEFLOW_NUM_THREADS-style; "
            "default: OneFlow's own choice)",
            "seed": "seed for the synthetic data and weights (default 0)",
        }

    def extra_env(self, spec: BenchmarkSpec) -> dict[str, str]:
        env = {"GLOG_minloglevel": "2"}
        threads = spec.options.get("threads")
        if threads:
            # OneFlow's CPU kernels (oneDNN/OpenMP) read the thread count at import time.
            env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        return env


ADAPTER = OneFlowAdapter()
