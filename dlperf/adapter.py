"""What the core needs from a framework adapter. Adapters live in `adapters/<name>/`."""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dlperf import DlperfError
from dlperf.envs import EnvSpec
from dlperf.events import ParsedRun, parse_events_file
from dlperf.launch import FrameworkLaunch, NodeCommand
from dlperf.schema import BenchmarkSpec, SourceInfo
from dlperf.system import cpu_budget
from dlperf.wording import did_you_mean


@dataclass(frozen=True)
class Command:
    """One process to start: argv list (never a shell string), extra env vars, working dir."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None


MAX_OPTION_CHARS = 64  # a --set value is a number or a name; it is part of the result's path


@dataclass(frozen=True)
class WorkloadOption:
    """One `--set KEY=VALUE` a workload takes: a one-line help and the values it accepts
    (`kind` int, float or str; `choices` for a str; inclusive bounds `ge` / `le`, `gt` for an
    exclusive lower bound). Checked before anything runs, so a typo never reaches a repeat.

    `setting`: the key changes how the workload runs (a best-practice switch, the thread
    budget, the seed), so another value is an ablation of the same benchmark; False when it
    changes what is measured (the calibration's step period, a microbenchmark's sizes), so
    another value is another benchmark (`dlperf.identity`)."""

    help: str
    kind: type = str
    choices: tuple[str, ...] = ()
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    setting: bool = True

    def accepts(self) -> str:
        """What a valid value looks like, for the error message: "an integer >= 1"."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.kind is str:
            return f"text of at most {MAX_OPTION_CHARS} characters"
        name = "an integer" if self.kind is int else "a number"
        bounds = [f"{sign} {_plain(x)}" for sign, x in ((">=", self.ge), (">", self.gt),
                  ("<=", self.le)) if x is not None]  # fmt: skip
        return " ".join([name, " and ".join(bounds)]).strip()

    def canonical(self, value: str) -> object:
        """The value as the workload reads it: 5 and 5.0 are one number, 5 and 05 one integer
        (text that is no number of the kind stays as it is, for `valid` to refuse)."""
        if self.kind is str or self.choices:
            return value
        try:
            return int(value) if self.kind is int else float(value)
        except ValueError:
            return value

    def valid(self, value: str) -> bool:
        if not value or len(value) > MAX_OPTION_CHARS:
            return False
        if self.choices:
            return value in self.choices
        if self.kind is str:
            return True
        try:
            number = int(value) if self.kind is int else float(value)
        except ValueError:
            return False
        return (
            math.isfinite(number)
            and (self.ge is None or number >= self.ge)
            and (self.gt is None or number > self.gt)
            and (self.le is None or number <= self.le)
        )


def _plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def flag(help: str) -> WorkloadOption:
    """A switch the workload takes as 0 (off) or 1 (on)."""
    return WorkloadOption(help, choices=("0", "1"))


def choice(help: str, *choices: str) -> WorkloadOption:
    return WorkloadOption(help, choices=choices)


def integer(help: str, ge: int = 1, le: int = 2**31 - 1, *, setting: bool = True) -> WorkloadOption:
    return WorkloadOption(help, int, ge=ge, le=le, setting=setting)


def number(help: str, *, gt: float | None = None, ge: float | None = None,
           le: float | None = None, setting: bool = True) -> WorkloadOption:  # fmt: skip
    return WorkloadOption(help, float, gt=gt, ge=ge, le=le, setting=setting)


THREADS_MAX = 4096
SEED_MAX = 2**32 - 1  # numpy's and the frameworks' seeds are 32-bit
# Every workload's --set seed (its synthetic data and weights are drawn from it).
SEED = integer("seed for the synthetic data and weights (default 0)", ge=0, le=SEED_MAX)


def check_options(
    what: str, declared: Mapping[str, WorkloadOption | str], given: Mapping[str, str]
) -> None:
    """Refuse `--set` keys `what` does not declare and values outside their declaration, with
    the valid keys or values named. A declaration given as a plain help string takes any text."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        valid = ", ".join(sorted(declared)) or "(none)"
        named = ", ".join(k + did_you_mean(k, declared) for k in unknown)
        raise DlperfError(f"unknown --set key(s) for {what}: {named}; valid keys: {valid}")
    for key, value in sorted(given.items()):
        option = declared[key]
        if isinstance(option, str):
            option = WorkloadOption(option)
        if not option.valid(value):
            shown = value if len(value) <= MAX_OPTION_CHARS else value[:MAX_OPTION_CHARS] + "..."
            raise DlperfError(
                f"--set {key}={shown!r} is not valid for {what}: {key} takes "
                f"{option.accepts()} ({option.help})"
            )


class Adapter(ABC):
    """A framework (or test double) that can run models from the catalog in `dlperf.models`:
    every capability the core asks of one is declared here, with its default."""

    name: str
    description: str
    models: tuple[str, ...]
    impls: tuple[str, ...] = ("ootb",)
    micro_models: tuple[str, ...] = ()  # FAMBench-style microbenchmarks (impl "micro")
    # How its workload starts: the env's check, the GPU check, variables, the node agent.
    launch: FrameworkLaunch = FrameworkLaunch()

    def runs(self, model: str) -> bool:
        return model in self.models or model in self.micro_models

    def option_declarations(self, model: str) -> Mapping[str, WorkloadOption | str]:
        """Every `--set` key this adapter takes for `model` (a microbenchmark's included),
        each with the values it accepts."""
        if model in self.micro_models:
            return {**MICRO_COMMON, **MICRO_OPTIONS[model]}
        return self.option_keys(model)

    def option_keys(self, model: str) -> Mapping[str, WorkloadOption | str]:
        """`--set KEY=VALUE` keys this adapter accepts for `model`, each with its one-line help
        and the values it takes (a plain help string: any text)."""
        return {}

    def check(self, spec: BenchmarkSpec) -> None:
        """Refuse (DlperfError) what `spec`'s options ask beyond each value's own range, such
        as a rank the run does not have; `check_options` has checked the values."""
        return None

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

    def parse_files(
        self, spec: BenchmarkSpec, log_path: Path, events_path: Path | None = None
    ) -> ParsedRun:
        """Step marks of one repeat, from its files (a missing one reads as empty), streaming,
        so that memory does not grow with their size. Built-in workloads write events;
        official ones override this to read their logs."""
        return (
            parse_events_file(events_path) if events_path and events_path.exists() else ParsedRun()
        )

    def check_launch(self, spec: BenchmarkSpec, hosts: Sequence[str]) -> None:
        """Refuse (DlperfError) a run this adapter cannot start, before anything is built:
        `hosts` are a data-parallel job's nodes (none: one local process)."""
        if hosts:
            self.launch.check_job(self.name, spec, hosts)

    def job_commands(
        self,
        spec: BenchmarkSpec,
        python: str,
        hosts: Sequence[str],
        port: int,
        log_dir: Path | None = None,
    ) -> list[NodeCommand]:
        """Every node's command of a data-parallel job (a launcher then starts them): the
        workload started by `launch.agent`, which starts `spec.devices_per_node` ranks and
        joins the group. `hosts` are the nodes' addresses (node 0 is the master) and `port` a
        free port on the master. Each process writes the events file named by DLPERF_EVENTS
        with "{rank}" replaced by its first device's global rank, counting the samples of all
        the devices it drives. `log_dir` (the repeat's raw folder) takes an agent's logs."""
        self.launch.check_job(self.name, spec, hosts)
        cmd = self.command(spec, python)
        argv, cwd = tuple(cmd.argv), str(cmd.cwd or ".")
        alone = [NodeCommand(n, host, argv, cwd, dict(cmd.env)) for n, host in enumerate(hosts)]
        return [self.launch.node_command(spec, node, hosts, port, log_dir) for node in alone]

    def for_run(self, out_dir: Path, sources_dir: Path | None = None) -> Adapter:
        """This adapter ready to run a repeat: an official implementation fetches (from
        `sources_dir`, a clone, where given) and verifies its upstream checkout, and writes
        what the upstream writes into `out_dir`; a built-in one needs nothing."""
        return self

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

    A framework folder sets the class attributes: its `launch` declaration, and its `--set`
    keys as `options` (every model's) and `model_options` (one model's, added to those).
    """

    folder: Path  # the adapter's folder: workload.py and requirements-<variant>.txt live there
    python: str  # the framework's Python version, e.g. "3.11"
    options: Mapping[str, WorkloadOption] = {}
    model_options: Mapping[str, Mapping[str, WorkloadOption]] = {}

    @property
    def micro_models(self) -> tuple[str, ...]:  # type: ignore[override]
        """Microbenchmarks, where the folder has a micro.py (same CLI and events contract)."""
        return MICRO_MODELS if (self.folder / "micro.py").exists() else ()

    def option_keys(self, model: str) -> dict[str, WorkloadOption]:
        return {**self.options, **self.model_options.get(model, {})}

    def pip_args(self, device: str) -> tuple[str, ...]:
        return ()

    def lib_dirs(self, device: str) -> tuple[str, ...]:
        return ()

    def env_spec(self, device: str) -> EnvSpec:
        return EnvSpec.from_requirements_file(
            self.name,
            device,
            self.python,
            self.folder / f"requirements-{device}.txt",
            self.launch.verify,
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
        return Command(argv, env=self.launch.process_env(options))

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
        return Command(argv, env=self.launch.process_env({}))


MICRO_MODELS = ("linear", "embeddingbag")
MICRO_OPTIONS = {  # sizes: what a microbenchmark measures, so not settings
    "linear": {
        "in_features": integer("the first layer's input width (default 1024)", setting=False),
        "out_features": integer("every layer's output width (default 1024)", setting=False),
        "layers": integer(
            "how many Linear layers (default 4; FAMBench's full depth is 20)", setting=False
        ),
    },
    "embeddingbag": {
        "num_embeddings": integer("table rows (default 4,800,000: 1.07 GB in fp32)", setting=False),
        "embedding_dim": integer("row width (default 56)", setting=False),
        "bag_size": integer("rows pooled per sample (default 34)", setting=False),
    },
}
MICRO_COMMON = {
    "threads": integer("CPU threads (default: every CPU dlperf may use)", le=THREADS_MAX),
    "seed": SEED,
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
