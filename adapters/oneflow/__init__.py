"""OneFlow: ResNet50-v1.5 and BERT-base training written with oneflow.nn (eager), synthetic data.

The host never imports oneflow; workload.py runs inside the isolated env. OneFlow 0.9.0 ships
only a CUDA 11 wheel for CPython 3.10; that one build serves both the cpu and cuda variants, and
needs cuDNN/cuBLAS shared libraries (pip wheels) on LD_LIBRARY_PATH even to run on the CPU.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from pathlib import Path

from dlperf.adapter import Command, WorkloadScriptAdapter
from dlperf.schema import BenchmarkSpec


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


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

    def node_command(
        self,
        spec: BenchmarkSpec,
        python: str,
        node_rank: int,
        hosts: Sequence[str],
        port: int,
        log_dir: Path | None = None,
    ) -> Command:
        """oneflow.distributed.launch as the node agent: one process per device, gradients
        all-reduced by DistributedDataParallel (OneFlow's own ring over its transport on CPU,
        NCCL on CUDA). The launcher kills its process group and exits non-zero when a rank
        fails; a rank whose peer died aborts by itself too (its transport socket breaks, or the
        control heartbeat, every 7-13 s, reports "Machine N lost")."""
        workload = self.command(spec, python)
        launcher = [
            python, "-m", "oneflow.distributed.launch",
            "--nnodes", str(spec.nodes), "--node_rank", str(node_rank),
            "--nproc_per_node", str(spec.devices_per_node),
            "--master_addr", hosts[0], "--master_port", str(port),
            # GLOG_log_dir of each rank (OneFlow's C++ log files, if it writes any)
            "--logdir", str((log_dir or Path("oneflow-logs")) / f"oneflow-node{node_rank}"),
        ]  # fmt: skip
        env = dict(workload.env)
        # OneFlow tells nodes apart by the IP address each rank reaches the master from, never
        # by --node_rank: nodes on one host (every loopback address connects from 127.0.0.1) are
        # one OneFlow node, and the workload must then take its global rank as LOCAL_RANK (see
        # the note at the top of workload.py). Distinct loopback addresses cannot help: the
        # kernel picks 127.0.0.1 as the source of every connection to 127.0.0.0/8.
        if len(set(hosts)) == 1 or all(_is_loopback(h) for h in hosts):
            env["DLPERF_ONEFLOW_SINGLE_HOST"] = "1"
        return Command([*launcher, *workload.argv[1:]], env=env, cwd=workload.cwd)


ADAPTER = OneFlowAdapter()
