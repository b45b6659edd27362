"""MXNet 1.9: Gluon HybridBlocks; --xla hybridizes them (static graph and memory)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dlperf.adapter import Command, WorkloadScriptAdapter
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

    def node_command(
        self,
        spec: BenchmarkSpec,
        python: str,
        node_rank: int,
        hosts: Sequence[str],
        port: int,
        log_dir: Path | None = None,
    ) -> Command:
        """dist_node.py as the node agent: the ps-lite scheduler (node 0, at `port`), one
        server per node and one worker per device, gradients summed by kvstore dist_sync."""
        workload = self.command(spec, python)
        agent = [
            python, str(self.folder / "dist_node.py"),
            "--node-rank", str(node_rank), "--hosts", ",".join(hosts), "--port", str(port),
            "--workers", str(spec.devices_per_node),
        ]  # fmt: skip
        if spec.device == "cpu" and not spec.options.get("threads"):
            agent.append("--split-threads")  # ranks on one host share its cores
        if spec.device == "cuda":
            agent.append("--gpus")
        return Command([*agent, "--", *workload.argv], env=workload.env, cwd=workload.cwd)


ADAPTER = MXNetAdapter()
