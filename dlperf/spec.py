"""A benchmark's spec and a run of it, each resolved and checked once, before anything runs.

The one answer to "what would run": `resolve_spec` (preset values, then explicit flags, then the
framework's best practice; the spec checked against what its adapter can run), then
`check_run` (the official options, the launcher and the nodes' addresses, this host's GPU, the
interpreter, whether the adapter can start it), whose `RunPlan` (the adapter, the launcher
with its nodes and the interpreter: the commands each node starts) the runner and
`dlperf run --dry-run` use. The sweep, the model checks and the log importers start here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dlperf import DlperfError
from dlperf.adapter import MICRO_MODELS, Adapter, check_options
from dlperf.adapters import get_adapter
from dlperf.launch import DEFAULT_MASTER_PORT, JobLaunch, NodeCommand, ResolvedLaunch
from dlperf.models import MODELS, PRESETS, PresetValues, get_model, preset_loadgen, preset_values
from dlperf.official.adapter import OfficialAdapter
from dlperf.official.checkout import checkout_dir
from dlperf.official.manifest import MeasureWindow, find_manifest
from dlperf.schema import BenchmarkSpec
from dlperf.system import nvidia_gpu_found
from dlperf.wording import did_you_mean


def resolve_spec(
    framework: str,
    model: str,
    *,
    preset: str = "dlperf",
    overrides: Mapping[str, object] | None = None,
    names: Mapping[str, str] | None = None,
) -> BenchmarkSpec:
    """Preset values for (model, precision), then explicit flags; validated before anything runs.
    `names`: how the user named each setting, for a refusal (default: the option named after
    each field, --batch-size for batch_size)."""
    adapter = get_adapter(framework)
    if not adapter.runs(model):
        known = [*adapter.models, *adapter.micro_models]
        raise DlperfError(
            f"{framework} has no model {model!r}{did_you_mean(model, known)}; its models: "
            f"{', '.join(known)}"
        )
    kind = get_model(model).kind
    if preset not in PRESETS:
        raise DlperfError(
            f"unknown preset {preset!r}{did_you_mean(preset, PRESETS)}; choose one of: "
            f"{', '.join(PRESETS)}"
        )
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    if kind == "micro":  # a microbenchmark is its own implementation kind
        if given.setdefault("impl", "micro") != "micro":
            raise DlperfError(f"{model} is a microbenchmark: it runs with --impl micro only")
    elif given.get("impl") == "micro":
        raise DlperfError(
            f"--impl micro runs microbenchmarks ({', '.join(MICRO_MODELS)}), not {model}"
        )
    p = preset_values(model, preset)
    for shape, what in (("image_size", "image size"), ("seq_len", "sequence length")):
        if given.get(shape) is not None and getattr(p, shape) is None:
            takers = sorted(m for m, d in MODELS.items() if getattr(d.presets[preset], shape))
            raise DlperfError(
                f"{model} has no {what}: --{shape.replace('_', '-')} applies to "
                f"{', '.join(takers)}; leave it out"
            )
    window = {"skip": p.skip, "measure": p.measure}
    profile = given.pop("profile", None)  # picks the manifest; the manifest's name is kept
    if given.get("impl") == "official":
        # The upstream's own log cadence sets the window DLPerf measured it with.
        manifest = find_manifest(framework, model, given.get("source"), profile)
        given["source"] = manifest.name
        window = official_window(manifest.window, p, preset)
    elif given.get("source") or profile:
        what = "--source names" if given.get("source") else "--profile picks"
        raise DlperfError(f"{what} an official implementation; add --impl official")
    fields = {
        "framework": framework,
        "model": model,
        "preset": preset,
        **window,
        "repeats": p.repeats,
        "image_size": p.image_size,
        "seq_len": p.seq_len,
        "timeout_s": p.timeout_s,
        "no_output_timeout_s": p.no_output_timeout_s,
    }
    fields.update(given)
    if fields.get("scenario"):
        fields["loadgen"] = preset_loadgen(preset, fields["scenario"], fields.get("loadgen") or {})
    if "batch_size" not in given:
        fields["batch_size"] = p.batch_amp if fields.get("precision") == "amp" else p.batch_fp32
    spec = BenchmarkSpec.checked(names, **fields)
    spec = with_practice(adapter, spec)
    check_spec(adapter, spec)
    return spec


def official_window(window: MeasureWindow, p: PresetValues, preset: str) -> dict[str, int]:
    """An upstream's window: the one DLPerf measured it with, from its log cadence. Under the
    smoke preset (a path test), the preset's own skip and measure rounded up to whole report
    intervals, never longer than the upstream's window: the shortest run its marks can time."""
    if preset != "smoke":
        return {"skip": window.skip, "measure": window.measure}
    every = window.log_every
    return {"skip": min(window.skip, -(-p.skip // every) * every),
            "measure": min(window.measure, -(-p.measure // every) * every)}  # fmt: skip


def with_practice(adapter: Adapter, spec: BenchmarkSpec) -> BenchmarkSpec:
    """`spec` with the framework's best-practice settings, named in `spec.practice` (a `--set`
    of the same key wins: an ablation)."""
    if spec.impl != "ootb":
        return spec
    defaults = adapter.practice(spec)
    options = {k: v for k, v in spec.options.items() if k not in defaults}
    practice = {**defaults, **{k: v for k, v in spec.options.items() if k in defaults}}
    return spec.model_copy(update={"options": options, "practice": practice})


def check_spec(adapter: Adapter, spec: BenchmarkSpec) -> None:
    """What the adapter can run; official implementations are checked by their manifest."""
    if spec.impl == "official":
        if spec.options:
            raise DlperfError(
                "--set options belong to dlperf's own workloads; an official implementation "
                "takes its settings from its manifest"
            )
        return
    if spec.impl not in adapter.impls and not (spec.impl == "micro" and adapter.micro_models):
        raise DlperfError(
            f"{adapter.name} has no {spec.impl!r} implementation; "
            f"it has: {', '.join(adapter.impls)}"
        )
    declared = adapter.option_declarations(spec.model)
    check_options(f"{adapter.name} {spec.model}", declared, {**spec.options, **spec.practice})
    adapter.check(spec)


@dataclass(frozen=True)
class OfficialOptions:
    """Where an official implementation's code and data come from."""

    sources_dir: Path | None = None  # a clone (or a folder with the archive), not the network
    data_dir: str = ""

    def check(self, spec: BenchmarkSpec) -> None:
        """Refuse them for dlperf's own workloads, which would silently ignore them."""
        given = [f for f, v in (("--sources-dir", self.sources_dir), ("--data-dir", self.data_dir))
                 if v]  # fmt: skip
        if given and spec.impl != "official":
            raise DlperfError(
                f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to --impl "
                f"official (an upstream's own script) only; {spec.framework} {spec.model} --impl "
                f"{spec.impl} runs dlperf's own workload on synthetic data: leave "
                f"{'them' if len(given) > 1 else 'it'} out, or add --impl official"
            )


def adapter_for(spec: BenchmarkSpec, official: OfficialOptions | None = None) -> Adapter:
    """The built-in adapter, or the spec's official implementation at its checkout's place
    (fetched and verified when the run is prepared: `Adapter.for_run`)."""
    if spec.impl != "official":
        return get_adapter(spec.framework)
    manifest = find_manifest(spec.framework, spec.model, spec.source)
    data_dir = (official or OfficialOptions()).data_dir
    return OfficialAdapter(manifest, checkout_dir(manifest.upstream), data_dir=data_dir)


@dataclass(frozen=True)
class RunPlan:
    """A run resolved and checked once (`check_run`): the spec, its adapter, the launcher with
    the nodes' addresses, where an official implementation's code and data come from, and the
    interpreter that runs the workload. The runner prepares exactly this, and its repeats
    start `node_commands` (with a free port and the raw-log folder); `dlperf run --dry-run`
    prints them."""

    spec: BenchmarkSpec
    adapter: Adapter
    launch: ResolvedLaunch
    # --python's, else the adapter's env's: `<env NAME>/bin/python` until the runner builds it
    python: str
    official: OfficialOptions = field(default_factory=OfficialOptions)
    adopt: Path | None = None  # --python: the user's own interpreter, probed, never built

    def node_commands(
        self, port: int = DEFAULT_MASTER_PORT, log_dir: Path | None = None
    ) -> list[NodeCommand]:
        """Each node's own command, before the launcher wraps it; one local process when the
        run is not a job."""
        if not self.launch.is_job:
            cmd = self.adapter.command(self.spec, self.python)
            return [NodeCommand(0, "localhost", tuple(cmd.argv), str(cmd.cwd or "."), cmd.env)]
        hosts = list(self.launch.hosts)
        return self.adapter.job_commands(self.spec, self.python, hosts, port, log_dir=log_dir)


def check_run(
    spec: BenchmarkSpec,
    official: OfficialOptions | None = None,
    launch: JobLaunch | None = None,
    python: Path | None = None,
    *,
    dry_run: bool = False,
) -> RunPlan:
    """The one check of a run of `spec` (which `resolve_spec` made and checked), before
    anything is fetched, built or started: the official options, the launcher and the nodes'
    addresses, this host's GPU, the interpreter and whether the adapter can start the run.

    A dry run checks no GPU and starts nothing: with the local launcher, `--hosts` name the
    nodes whose lines a user starts by hand, and what the adapter cannot start is refused as
    its commands are built."""
    official = official or OfficialOptions()
    official.check(spec)
    resolved = (launch or JobLaunch()).resolve(spec, dry_run=dry_run)
    if not dry_run:
        check_device(spec, resolved)
    adapter = adapter_for(spec, official)
    if not dry_run:
        adapter.check_launch(spec, resolved.hosts)
    env = adapter.env_spec(spec.device)
    if python is not None and env is None and spec.impl == "official" and not dry_run:
        raise DlperfError(
            f"{spec.source} runs in its container image, which is its environment: "
            "--python applies to implementations that run in a Python environment"
        )
    interpreter = f"<env {env.name}>/bin/python" if env else "python"
    return RunPlan(spec, adapter, resolved, str(python or interpreter), official, python)


def check_device(spec: BenchmarkSpec, launch: ResolvedLaunch) -> None:
    """Refuse --device cuda before anything is built when this host, which runs it, has no
    NVIDIA GPU (a remote launcher's nodes are not this host: they are not checked here)."""
    if spec.device == "cuda" and launch.launcher == "local" and not nvidia_gpu_found():
        raise DlperfError(
            "--device cuda, but this host has no usable NVIDIA GPU (nvidia-smi lists none and "
            "there is no /dev/nvidia*): run with --device cpu, run dlperf on a GPU host, or "
            "start the nodes there with --launcher ssh|slurm|mpirun --hosts ..."
        )
