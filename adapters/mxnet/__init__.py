"""MXNet 1.9: Gluon HybridBlocks; --xla hybridizes them (static graph and memory)."""

from __future__ import annotations

from pathlib import Path

from dlperf.adapter import WorkloadScriptAdapter
from dlperf.schema import BenchmarkSpec


class MXNetAdapter(WorkloadScriptAdapter):
    name = "mxnet"
    description = "MXNet 1.9 Gluon (hybridize with --xla); AMP float16 on GPUs only"
    models = ("resnet50", "bert")
    folder = Path(__file__).parent
    python = "3.11"
    verify = "import mxnet as mx; print(mx.__version__)"

    def option_keys(self, model: str) -> dict[str, str]:
        return {
            "threads": "OMP_NUM_THREADS for MXNet's CPU operators (default: MXNet's choice)",
            "seed": "seed for the synthetic data and weights (default 0)",
        }

    def extra_env(self, spec: BenchmarkSpec) -> dict[str, str]:
        threads = spec.options.get("threads")
        # MXNet reads its thread count at start-up, so it must come from the environment.
        return {"OMP_NUM_THREADS": threads} if threads else {}


ADAPTER = MXNetAdapter()
