"""What the core needs from a framework adapter. Adapters live in `adapters/<name>/`."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dlperf import DlperfError
from dlperf.envs import EnvSpec
from dlperf.events import ParsedRun, parse_events
from dlperf.launch import NodeCommand
from dlperf.schema import BenchmarkSpec, SourceInfo
from dlperf.system import cpu_budget


@dataclass(frozen=True)
class Command:
    """One process to start: argv list (never a shell string), extra env vars, working dir."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None


class Adapter(ABC):
    """A framework (or test double) that can run models from the catalog in `dlperf.models`."""

    name: str
    description: str
    models: tuple[str, ...]
    impls: tuple[str, ...] = ("ootb",)
    micro_models: tuple[str, ...] = ()  # FAMBench-style microbenchmarks (impl "micro")

    def runs(self, model: str) -> bool:
        return model in self.models or model in self.micro_models

    def option_keys(self, model: str) -> dict[str, str]:
        """`--set KEY=VALUE` keys this adapter accepts for `model`, with one-line help."""
        return {}

    def practice(self, spec: BenchmarkSpec) -> dict[str, str]:
        """The framework's own best-practice settings for `spec` (its device, model, precision,
        mode and compiler): each a `--set` key (listed in `option_keys`) with its value here.
        They are stored in `spec.practice`, shown beside every number, and a `--set` of the
        same key overrides one for an ablation."""
        return {}

    @abstractmethod
    def env_spec(self, device: str) -> EnvSpec | None:
        """The isolated environment for `device`; None runs the host interpreter (stdlib only)."""

    @abstractmethod
    def command(self, spec: BenchmarkSpec, python: str) -> Command:
        """The workload command. The runner adds DLPERF_EVENTS=<file> to its environment."""

    def parse(self, spec: BenchmarkSpec, log_text: str, events_text: str) -> ParsedRun:
        """Step marks of one repeat. Built-in workloads write events; official ones override."""
        return parse_events(events_text)

    def node_command(
        self,
        spec: BenchmarkSpec,
        python: str,
        node_rank: int,
        hosts: Sequence[str],
        port: int,
        log_dir: Path | None = None,
    ) -> Command:
        """One node's agent of a data-parallel job: it starts `spec.devices_per_node` ranks and
        joins the group; `hosts` are the nodes' addresses (node 0 is the master) and `port` a
        free port on the master (port + n is node n's, where a framework needs one per node).
        Each process writes the events file named by DLPERF_EVENTS with "{rank}" replaced by
        its first device's global rank, counting the samples of all the devices it drives.
        `log_dir` (the repeat's raw folder) takes logs a launcher writes beside its output."""
        raise DlperfError(
            f"{self.name} has no data-parallel launcher yet; run it with --nodes 1 "
            "--devices-per-node 1"
        )

    def job_commands(
        self,
        spec: BenchmarkSpec,
        python: str,
        hosts: Sequence[str],
        port: int,
        log_dir: Path | None = None,
    ) -> list[NodeCommand]:
        """Every node's command of a data-parallel job (a launcher then starts them)."""
        out = []
        for n, host in enumerate(hosts):
            cmd = self.node_command(spec, python, n, hosts, port, log_dir)
            out.append(NodeCommand(n, host, tuple(cmd.argv), str(cmd.cwd or "."), dict(cmd.env)))
        return out

    def source_info(self) -> SourceInfo | None:
        """The upstream code this adapter runs, recorded in every result (official only)."""
        return None


class WorkloadScriptAdapter(Adapter):
    """An adapter whose built-in workloads are one script following the common workload CLI:

    ``workload.py --model M --batch-size B --steps N --precision P --device D
    [--image-size S] [--seq-len L] [--xla] [--mode infer [--loadgen-settings JSON]]
    [--<option> V ...] [--describe]``

    In inference mode a step is one batch through the model in eval mode without gradients.
    With `--loadgen-settings` the workload warms up for its steps, then hands the model to
    MLPerf LoadGen (`adapters/_shared/loadgen_run.py`), which writes its logs to the folder
    named by $DLPERF_LOADGEN_DIR.

    A framework folder sets the class attributes and, if needed, `extra_env`.
    """

    folder: Path  # the adapter's folder: workload.py and requirements-<variant>.txt live there
    python: str  # the framework's Python version, e.g. "3.11"
    verify: str  # code that prints the framework version inside the env
    # Code that exits non-zero, printing why on its last line, when the framework in an
    # interpreter cannot use an NVIDIA GPU (checked before a --device cuda run with --python).
    cuda_check: str = ""

    @property
    def micro_models(self) -> tuple[str, ...]:  # type: ignore[override]
        """Microbenchmarks, where the folder has a micro.py (same CLI and events contract)."""
        return MICRO_MODELS if (self.folder / "micro.py").exists() else ()

    def pip_args(self, device: str) -> tuple[str, ...]:
        return ()

    def lib_dirs(self, device: str) -> tuple[str, ...]:
        return ()

    def extra_env(self, spec: BenchmarkSpec) -> dict[str, str]:
        return {}

    def env_spec(self, device: str) -> EnvSpec:
        return EnvSpec.from_requirements_file(
            self.name,
            device,
            self.python,
            self.folder / f"requirements-{device}.txt",
            self.verify,
            pip_args=self.pip_args(device),
            lib_dirs=self.lib_dirs(device),
        )

    def command(self, spec: BenchmarkSpec, python: str) -> Command:
        if spec.impl == "micro":
            return self.micro_command(spec, python)
        argv = [
            python,
            str(self.folder / "workload.py"),
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
        argv += mode_args(spec)
        options = dict(spec.options)
        if (
            spec.device == "cpu"
            and spec.world_size == 1  # several ranks on a host split its cores themselves
            and "threads" in self.option_keys(spec.model)
        ):
            # The same thread budget for every framework (the workload records what it used).
            options.setdefault("threads", str(cpu_budget()))
        for key, value in sorted({**options, **spec.practice}.items()):
            argv += [f"--{key.replace('_', '-')}", value]
        return Command(argv, env=self.extra_env(spec.model_copy(update={"options": options})))

    def micro_command(self, spec: BenchmarkSpec, python: str) -> Command:
        """micro.py --model M --batch-size B --steps N --precision P --device D --mode MODE
        --threads T [--<shape option> V ...]: every framework gets the same thread budget
        unless --set threads says otherwise (some would default to one)."""
        options = {"threads": str(cpu_budget()), **spec.options}
        argv = [
            python,
            str(self.folder / "micro.py"),
            "--model", spec.model,
            "--batch-size", str(spec.batch_size),
            "--steps", str(spec.steps),
            "--precision", spec.precision,
            "--device", spec.device,
            "--mode", spec.mode,
        ]  # fmt: skip
        for key, value in sorted(options.items()):
            argv += [f"--{key.replace('_', '-')}", value]
        return Command(argv, env=self.extra_env(spec.model_copy(update={"options": {}})))


MICRO_MODELS = ("linear", "embeddingbag")
MICRO_OPTIONS = {
    "linear": {
        "in_features": "the first layer's input width (default 1024)",
        "out_features": "every layer's output width (default 1024)",
        "layers": "how many Linear layers (default 4; FAMBench's full depth is 20)",
    },
    "embeddingbag": {
        "num_embeddings": "table rows (default 4,800,000: 1.07 GB in fp32)",
        "embedding_dim": "row width (default 56)",
        "bag_size": "rows pooled per sample (default 34)",
    },
}
MICRO_COMMON = {
    "threads": "CPU threads (default: every CPU dlperf may use)",
    "seed": "seed for the synthetic data and weights (default 0)",
}


def mode_args(spec: BenchmarkSpec) -> list[str]:
    """The workload CLI's inference arguments (none for training, so those commands stay as
    they were)."""
    if spec.mode != "infer":
        return []
    argv = ["--mode", "infer"]
    if spec.scenario:
        settings = {"scenario": spec.scenario, **spec.loadgen}
        argv += ["--loadgen-settings", json.dumps(settings, sort_keys=True)]
    return argv
