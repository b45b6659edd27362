"""TensorFlow: Keras layers with a custom training step in tf.function; --xla = jit_compile."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dlperf import DlperfError
from dlperf.adapter import Command, WorkloadScriptAdapter
from dlperf.launch import tf_config
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

    def node_command(
        self,
        spec: BenchmarkSpec,
        python: str,
        node_rank: int,
        hosts: Sequence[str],
        port: int,
        log_dir: Path | None = None,
    ) -> Command:
        """One MultiWorkerMirroredStrategy worker per node, driving that node's devices;
        TF_CONFIG lists every worker (node n listens on port + n)."""
        if spec.device == "cpu" and spec.devices_per_node > 1:
            raise DlperfError(
                "tensorflow runs one worker per node, and a CPU is one TensorFlow device: use "
                "--devices-per-node 1 with --nodes N on CPU"
            )
        workload = self.command(spec, python)
        workers = [f"{h}:{port + i}" for i, h in enumerate(hosts)]
        env = {**workload.env, "TF_CONFIG": tf_config(workers, node_rank)}
        return Command(workload.argv, env=env, cwd=workload.cwd)


ADAPTER = TensorFlowAdapter()
