"""A benchmark's spec: resolved from a preset and flags, checked against what its adapter can run.

The one answer to "what would run": `resolve_spec` (preset values, then explicit flags, then the
framework's best practice, validated before anything runs), `adapter_for` (the built-in
adapter, or the official implementation at a verified checkout) and `RunPlan` (that adapter,
the launcher with its nodes and the interpreter: the commands each node starts). The runner,
the sweep, `dlperf run --dry-run`, the model checks and the log importers all start here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dlperf import DlperfError
from dlperf.adapter import MICRO_MODELS, Adapter, check_options
from dlperf.adapters import get_adapter
from dlperf.launch import DEFAULT_MASTER_PORT, JobLaunch, NodeCommand, ResolvedLaunch, resolve_hosts
from dlperf.models import MODELS, PRESETS, get_model, preset_loadgen, preset_values
from dlperf.official.adapter import OfficialAdapter, prepare_official
from dlperf.official.checkout import checkout_dir
from dlperf.official.manifest import find_manifest
from dlperf.schema import BenchmarkSpec


def resolve_spec(
    framework: str,
    model: str,
    *,
    preset: str = "dlperf",
    overrides: Mapping[str, object] | None = None,
) -> BenchmarkSpec:
    """Preset values for (model, precision), then explicit flags; validated before anything runs."""
    adapter = get_adapter(framework)
    if not adapter.runs(model):
        known = ", ".join([*adapter.models, *adapter.micro_models])
        raise DlperfError(f"{framework} has no model {model!r}; its models: {known}")
    kind = get_model(model).kind
    if preset not in PRESETS:
        raise DlperfError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
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
        window = {"skip": manifest.window.skip, "measure": manifest.window.measure}
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
    spec = BenchmarkSpec.checked(**fields)
    spec = with_practice(adapter, spec)
    check_spec(adapter, spec)
    return spec


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


def adapter_for(
    spec: BenchmarkSpec,
    official: OfficialOptions | None = None,
    out_dir: Path | None = None,
    *,
    fetch: bool = True,
) -> Adapter:
    """The built-in adapter, or the spec's official implementation at a verified checkout
    (its outputs go to `out_dir`, never into the checkout, which must stay verifiable).
    `fetch=False` (a dry run) names the checkout's place without fetching or verifying it."""
    if spec.impl != "official":
        return get_adapter(spec.framework)
    opts = official or OfficialOptions()
    if not fetch:
        manifest = find_manifest(spec.framework, spec.model, spec.source)
        checkout = checkout_dir(manifest.upstream)
        return OfficialAdapter(manifest, checkout, data_dir=opts.data_dir, out_dir=out_dir)
    return prepare_official(
        find_manifest(spec.framework, spec.model, spec.source),
        sources_dir=opts.sources_dir,
        data_dir=opts.data_dir,
        out_dir=out_dir,
    )


@dataclass(frozen=True)
class RunPlan:
    """What a run starts: its adapter, the launcher with the nodes' addresses, and the
    interpreter that runs the workload. The runner's repeats start `node_commands` (with a free
    port and the raw-log folder); `dlperf run --dry-run` prints them (`plan_run`)."""

    spec: BenchmarkSpec
    adapter: Adapter
    launch: ResolvedLaunch
    python: str

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


def plan_run(
    spec: BenchmarkSpec,
    official: OfficialOptions | None = None,
    launch: JobLaunch | None = None,
    python: Path | None = None,
) -> RunPlan:
    """The plan of a dry run: nothing is fetched, built or started. The env's interpreter is
    named by its env; with the local launcher, `--hosts` gives the nodes' lines to start by hand
    on those hosts (a real run refuses it)."""
    launch = launch or JobLaunch()
    is_job = launch.is_job(spec)
    hosts = list(launch.hosts)
    if is_job:
        hosts = resolve_hosts(spec.nodes, hosts) if hosts else launch.node_hosts(spec.nodes)
    adapter = adapter_for(spec, official, fetch=False)
    if python is None:
        env = adapter.env_spec(spec.device)
        interpreter = f"<env {env.name}>/bin/python" if env else "python"
    else:
        interpreter = str(python)
    resolved = ResolvedLaunch(launch.launcher if is_job else "local", tuple(hosts), is_job)
    return RunPlan(spec, adapter, resolved, interpreter)
