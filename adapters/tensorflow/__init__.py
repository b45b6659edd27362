"""TensorFlow: Keras layers with a custom training step in tf.function; --xla = jit_compile."""

from __future__ import annotations

from pathlib import Path

from dlperf.adapter import WorkloadScriptAdapter
from dlperf.schema import BenchmarkSpec


class TensorFlowAdapter(WorkloadScriptAdapter):
    name = "tensorflow"
    description = "TensorFlow 2 / Keras 3 in tf.function (XLA jit_compile with --xla)"
    models = ("resnet50", "bert")
    folder = Path(__file__).parent
    python = "3.11"
    verify = "import tensorflow as tf; print(tf.__version__)"

    def option_keys(self, model: str) -> dict[str, str]:
        return {
            "threads": "intra-op threads (default: TensorFlow's own choice)",
            "seed": "seed for the synthetic data and weights (default 0)",
        }

    def extra_env(self, spec: BenchmarkSpec) -> dict[str, str]:
        return {"TF_CPP_MIN_LOG_LEVEL": "2"}  # quiet C++ start-up chatter; errors still show


ADAPTER = TensorFlowAdapter()
