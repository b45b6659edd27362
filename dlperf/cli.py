"""The `dlperf` command line: thin; parses options, calls the core, prints with rich."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.markup import escape as esc
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from typer.exceptions import TyperException

from dlperf import DlperfError, __version__
from dlperf.files import atomic_write
from dlperf.launch import LAUNCHERS
from dlperf.models import PRESETS
from dlperf.schema import DEVICES, IMPLS, MODES, SCENARIOS
from dlperf.store import DEFAULT_RESULTS_DIR

app = typer.Typer(
    help="Measure deep-learning framework performance fairly and reproducibly.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
env_app = typer.Typer(help="Isolated per-framework environments.", no_args_is_help=True)
app.add_typer(env_app, name="env")
sources_app = typer.Typer(
    help="Official upstream implementations: pinned checkouts with tracked patches.",
    no_args_is_help=True,
)
app.add_typer(sources_app, name="sources")

console = Console(width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 120)


def _path(kind: str, *, exists: bool = False, executable: bool = False) -> Callable[[Any], Path]:
    """A parser for a path option: `kind` "folder", "file" or "path" (either). It refuses an
    empty value (an unset shell variable would otherwise mean the current folder), a file where
    a folder is expected and the reverse, and, with `exists`, a path that is not there; so a
    wrong path is named before anything runs or is written."""

    def parse(value: Any) -> Path:
        from pydantic_core import PydanticCustomError

        def refuse(why: str) -> PydanticCustomError:
            return PydanticCustomError("path", "{why}", {"why": why})

        if isinstance(value, Path):  # a default
            return value
        text = str(value)
        if not text.strip():
            raise refuse(f"an empty path; give a {kind} (an unset shell variable?)")
        path = Path(text).expanduser()
        if exists and not path.exists():
            raise refuse(f"{text} does not exist; give an existing {kind}")
        if kind == "folder" and path.exists() and not path.is_dir():
            raise refuse(f"{text} is a file; give a folder")
        if kind == "file" and path.is_dir():
            raise refuse(f"{text} is a folder; give a file")
        if executable and not os.access(path, os.X_OK):
            raise refuse(f"{text} is not executable; give a Python interpreter")
        return path

    return parse


SourcesDir = Annotated[
    Path | None,
    typer.Option(
        parser=_path("folder", exists=True),
        metavar="FOLDER",
        help="An existing clone of the upstream to take the pinned commit from (offline use; "
        "`run` takes it with --impl official only).",
    ),
]
ResultsDir = Annotated[
    Path,
    typer.Option(
        "--results-dir",
        parser=_path("folder"),
        metavar="FOLDER",
        help="Where results are stored (JSON + raw logs).",
    ),
]
OutFile = Annotated[
    Path | None,
    typer.Option(parser=_path("file"), metavar="FILE", help="Write here instead of stdout."),
]


def _version(value: bool) -> None:
    if value:
        console.print(f"dlperf {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    pass


@app.command("list")
def list_cmd() -> None:
    """Frameworks x models x implementations, and whether each environment is ready."""
    from dlperf.adapters import adapter_names, get_adapter
    from dlperf.envs import env_status
    from dlperf.models import MODELS
    from dlperf.sources import load_manifests

    official: dict[tuple[str, str], list[str]] = {}
    for m in load_manifests().values():
        official.setdefault((m.framework, m.model), []).append(m.name + ("*" if m.default else ""))
    table = Table("framework", "model", "implementations", "env (cpu)", "description")
    for name in adapter_names():
        adapter = get_adapter(name)
        spec = adapter.env_spec("cpu")
        state = env_status(spec) if spec else "host python"
        for model in adapter.models:
            impls = list(adapter.impls)
            if (name, model) in official:
                impls.append(f"official: {', '.join(sorted(official[name, model]))}")
            table.add_row(name, model, "; ".join(impls), state, MODELS[model].description)
        for model in adapter.micro_models:
            table.add_row(name, model, "micro", state, MODELS[model].description)
    console.print(table)
    console.print("official: upstream scripts (`dlperf sources list`); * = the default one")


@env_app.command("create")
def env_create(
    framework: str,
    device: Annotated[Literal[DEVICES], typer.Option(help="Variant: cpu or cuda.")] = "cpu",
    rebuild: Annotated[bool, typer.Option(help="Remove and rebuild even if ready.")] = False,
) -> None:
    """Create (or verify and reuse) FRAMEWORK's isolated environment."""
    from dlperf.adapters import get_adapter
    from dlperf.envs import ensure_env

    spec = get_adapter(framework).env_spec(device)
    if spec is None:
        console.print(f"{framework} runs on the host interpreter; it needs no environment")
        return
    with console.status(f"preparing {spec.name} (first build can take minutes)"):
        env = ensure_env(spec, rebuild=rebuild, log=lambda m: console.print(f"  {esc(m)}"))
    console.print(f"[green]ready[/] {esc(str(env.path))} ({framework} {env.framework_version})")


@env_app.command("list")
def env_list() -> None:
    """Environments on disk, their state and size."""
    from dlperf.envs import envs_root, list_envs

    records = list_envs()
    if not records:
        console.print(f"no environments in {esc(str(envs_root()))}", markup=False)
        return
    table = Table("name", "state", "framework version", "python", "size", "path")
    for r in records:
        size = f"{r.size_bytes / 2**30:.2f} GiB" if r.size_bytes else "—"
        table.add_row(
            r.name, r.state, r.framework_version or "—", r.python or "—", size, esc(str(r.path))
        )
    console.print(table)


@env_app.command("remove")
def env_remove(
    name: str,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Remove without asking.")] = False,
) -> None:
    """Remove environments named NAME or starting with NAME- (e.g. `pytorch`); asks first."""
    from dlperf.envs import list_envs, remove_envs

    matched = [r.name for r in list_envs() if r.name == name or r.name.startswith(f"{name}-")]
    if matched and not yes:
        if not sys.stdin.isatty():
            raise DlperfError(
                f"dlperf env remove {name} would delete {', '.join(matched)}; nobody is at a "
                "terminal to confirm, so nothing was removed: add --yes to remove them"
            )
        if not typer.confirm(f"remove {', '.join(matched)}?"):
            console.print("nothing removed")
            return
    for path in remove_envs(name):
        console.print(f"removed {path}", markup=False)


def _parse_sets(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key:
            raise DlperfError(f"--set expects KEY=VALUE, got {item!r}")
        if key in out and out[key] != value:
            raise DlperfError(f"--set {key} is given twice ({out[key]}, {value}); give it once")
        out[key] = value
    return out


@app.command()
def run(
    framework: Annotated[str, typer.Argument(help="e.g. pytorch, calibration")],
    model: Annotated[str, typer.Argument(help="e.g. resnet50, bert, pace")],
    preset: Annotated[
        Literal[PRESETS], typer.Option(help="dlperf (DLPerf's settings) or smoke.")
    ] = "dlperf",
    batch_size: Annotated[int | None, typer.Option(help="Batch size per device.")] = None,
    amp: Annotated[bool, typer.Option("--amp", help="Mixed precision.")] = False,
    xla: Annotated[bool, typer.Option("--xla", help="Graph compiler (torch.compile...).")] = False,
    device: Annotated[Literal[DEVICES], typer.Option(help="cpu or cuda.")] = "cpu",
    image_size: Annotated[int | None, typer.Option(help="Image side (ResNet).")] = None,
    seq_len: Annotated[int | None, typer.Option(help="Sequence length (BERT).")] = None,
    skip: Annotated[int | None, typer.Option(help="Iterations skipped before the window.")] = None,
    measure: Annotated[int | None, typer.Option(help="Iterations in the window.")] = None,
    repeats: Annotated[int | None, typer.Option(help="Repeats (separate processes).")] = None,
    nodes: Annotated[int | None, typer.Option(help="Nodes.")] = None,
    devices_per_node: Annotated[int | None, typer.Option(help="Devices per node.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Workload option KEY=VALUE (repeatable).")
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds per repeat, total.")] = None,
    no_output_timeout: Annotated[
        float | None, typer.Option(help="Seconds without output before a repeat is 'hung'.")
    ] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS_DIR,
    rebuild_env: Annotated[bool, typer.Option(help="Rebuild the environment first.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the stored result JSON.")] = False,
    impl: Annotated[
        Literal[IMPLS] | None,
        typer.Option(
            help="ootb (dlperf's own workload, the default), official (upstream's script) or "
            "micro (the microbenchmarks: linear, embeddingbag; their default)."
        ),
    ] = None,
    source: Annotated[
        str | None, typer.Option(help="Which official manifest (default: the pair's default).")
    ] = None,
    mode: Annotated[
        Literal[MODES], typer.Option(help="train, or infer (eval, no gradients).")
    ] = "train",
    latency_target_ms: Annotated[
        float | None, typer.Option(help="Inference: p95 batch latency goal; a miss is marked.")
    ] = None,
    scenario: Annotated[
        Literal[SCENARIOS] | None,
        typer.Option(help="MLPerf LoadGen scenario: offline, server, singlestream, multistream."),
    ] = None,
    target_qps: Annotated[
        float | None, typer.Option(help="LoadGen: expected (Offline) or offered (Server) QPS.")
    ] = None,
    target_latency_ms: Annotated[
        float | None, typer.Option(help="LoadGen: Server latency bound / streams' expected.")
    ] = None,
    min_duration_s: Annotated[float | None, typer.Option(help="LoadGen: min test time.")] = None,
    max_duration_s: Annotated[float | None, typer.Option(help="LoadGen: max test time.")] = None,
    min_query_count: Annotated[int | None, typer.Option(help="LoadGen: minimum queries.")] = None,
    max_query_count: Annotated[int | None, typer.Option(help="LoadGen: maximum queries.")] = None,
    samples_per_query: Annotated[
        int | None, typer.Option(help="LoadGen MultiStream: samples per query (default 8).")
    ] = None,
    sources_dir: SourcesDir = None,
    hosts: Annotated[
        str | None, typer.Option(help="Comma-separated node addresses, node 0 (master) first.")
    ] = None,
    data_dir: Annotated[
        str,
        typer.Option(help="With --impl official: a dataset folder, for upstreams that need one."),
    ] = "",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print each node's command line; run nothing.")
    ] = False,
    launcher: Annotated[
        Literal[LAUNCHERS],
        typer.Option(
            help="local (every node on this host), ssh (one ssh per host; options from "
            "$DLPERF_SSH), slurm (srun in this allocation) or mpirun."
        ),
    ] = "local",
    sbatch: Annotated[
        Path | None,
        typer.Option(
            parser=_path("file"),
            metavar="FILE",
            help="Write a Slurm batch script that runs this command; run nothing.",
        ),
    ] = None,
    python: Annotated[
        Path | None,
        typer.Option(
            parser=_path("file", exists=True, executable=True),
            metavar="FILE",
            help="Measure this interpreter's own install of the framework (an NGC container's, "
            "a conda env's) instead of an env dlperf builds; it is probed, never changed.",
        ),
    ] = None,
) -> None:
    """Run one benchmark: every repeat in its own process, median of the repeats."""
    from dlperf.launch import JobLaunch
    from dlperf.runner import RunCallbacks, run_benchmark
    from dlperf.spec import OfficialOptions, resolve_spec

    overrides = {
        "batch_size": batch_size,
        "precision": "amp" if amp else None,
        "xla": xla or None,
        "device": device,
        "image_size": image_size,
        "seq_len": seq_len,
        "skip": skip,
        "measure": measure,
        "repeats": repeats,
        "nodes": nodes,
        "devices_per_node": devices_per_node,
        "options": _parse_sets(set_ or []) or None,
        "timeout_s": timeout,
        "no_output_timeout_s": no_output_timeout,
        "impl": impl,
        "source": source,
        "mode": mode if mode != "train" else None,
        "latency_target_ms": latency_target_ms,
        "scenario": scenario,
    }
    loadgen = {
        "target_qps": target_qps,
        "target_latency_ms": target_latency_ms,
        "min_duration_s": min_duration_s,
        "max_duration_s": max_duration_s,
        "min_query_count": min_query_count,
        "max_query_count": max_query_count,
        "samples_per_query": samples_per_query,
    }
    overrides["loadgen"] = {k: v for k, v in loadgen.items() if v is not None} or None
    spec = resolve_spec(framework, model, preset=preset, overrides=overrides)
    official = OfficialOptions(sources_dir=sources_dir, data_dir=data_dir)
    official.check(spec)
    launch = JobLaunch(launcher, tuple(h.strip() for h in (hosts or "").split(",") if h.strip()))
    if dry_run:
        _print_plan(spec, official, launch, python)
        return
    if sbatch:
        from dlperf.launch import sbatch_script

        argv = _run_argv(spec, results_dir, official, launch.hosts, python)
        atomic_write(sbatch, sbatch_script(spec, argv, str(Path.cwd())))
        console.print(f"wrote {sbatch}; submit it with: sbatch {sbatch}", markup=False)
        return
    out = err if json_out else console
    out.print(
        f"[bold]{spec.config_key()}[/] skip {spec.skip}, measure {spec.measure}, "
        f"{spec.repeats} repeats",
        highlight=False,
    )
    if spec.practice:
        settings = ", ".join(f"{k}={v}" for k, v in sorted(spec.practice.items()))
        out.print(f"best practice: {settings} (ablate one with --set KEY=VALUE)", highlight=False)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} repeats"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=out,
        transient=True,
        # Redrawing the bar takes CPU from the workload on a small machine: once a second is
        # enough for an ETA counted in minutes.
        refresh_per_second=1,
    )
    with progress:
        task = progress.add_task("running", total=spec.repeats)

        def done(r) -> None:
            value = f"{r.throughput:.2f} samples/s" if r.throughput else r.message
            colour = "green" if r.status.value == "ok" else "red"
            progress.console.print(
                f"  repeat {r.index}: [{colour}]{r.status.value}[/] {esc(value)}"
            )
            progress.advance(task)

        callbacks = RunCallbacks(
            message=lambda m: progress.console.print(f"  {esc(m)}"),
            repeat_started=lambda i, n: progress.update(task, description=f"repeat {i}/{n}"),
            repeat_done=done,
        )
        result, path = run_benchmark(
            spec,
            results_dir,
            callbacks,
            rebuild_env=rebuild_env,
            official=official,
            launch=launch,
            python=python,
        )
    _print_summary(out, result, path)
    _print_scaling(out, result, results_dir)
    if json_out:
        sys.stdout.write(path.read_text())
    if result.status.value != "ok":
        raise typer.Exit(2)


def _run_argv(
    spec, results_dir: Path, official, hosts: tuple[str, ...], python: Path | None = None
) -> list[str]:
    """The `dlperf run` command (with --launcher slurm) that measures exactly `spec`."""
    argv = [sys.executable, "-m", "dlperf", "run", spec.framework, spec.model]
    argv += ["--batch-size", str(spec.batch_size), "--device", spec.device]
    argv += ["--nodes", str(spec.nodes), "--devices-per-node", str(spec.devices_per_node)]
    argv += ["--skip", str(spec.skip), "--measure", str(spec.measure)]
    argv += ["--repeats", str(spec.repeats), "--impl", spec.impl]
    argv += ["--timeout", f"{spec.timeout_s:g}"]
    argv += ["--no-output-timeout", f"{spec.no_output_timeout_s:g}"]
    argv += ["--results-dir", str(results_dir.resolve())]
    argv += ["--amp"] if spec.precision == "amp" else []
    argv += ["--xla"] if spec.xla else []
    optional = {
        "--preset": spec.preset,
        "--mode": spec.mode if spec.mode != "train" else None,
        "--latency-target-ms": spec.latency_target_ms,
        "--scenario": spec.scenario,
        **{f"--{k.replace('_', '-')}": f"{v:g}" for k, v in spec.loadgen.items()},
        "--image-size": spec.image_size,
        "--seq-len": spec.seq_len,
        "--source": spec.source,
        "--data-dir": official.data_dir,
        "--sources-dir": official.sources_dir,
        "--hosts": ",".join(hosts),
        "--python": python,
    }
    for flag, value in optional.items():
        if value:
            argv += [flag, str(value)]
    for key, value in sorted({**spec.options, **spec.practice}.items()):
        argv += ["--set", f"{key}={value}"]
    return [*argv, "--launcher", "slurm"]


def _env_python(adapter, spec, python: Path | None = None) -> str:
    """The interpreter a run would use, named without building its environment."""
    if python is not None:
        return str(python)
    env = adapter.env_spec(spec.device)
    return f"<env {env.name}>/bin/python" if env else "python"


def _print_plan(spec, official, launch, python: Path | None = None) -> None:
    """What `run` would start on each node, without building or starting anything."""
    from dlperf.adapters import get_adapter
    from dlperf.launch import DEFAULT_MASTER_PORT, NodeCommand, resolve_hosts, through_launcher
    from dlperf.official import OfficialAdapter
    from dlperf.sources import checkout_dir, find_manifest

    # The nodes' own lines (local with --hosts: to start by hand), or the launcher's.
    hosts = list(launch.hosts) if launch.hosts else []
    if launch.is_job(spec):
        hosts = resolve_hosts(spec.nodes, hosts) if hosts else launch.node_hosts(spec.nodes)
    if spec.impl != "official":
        adapter = get_adapter(spec.framework)
        python = _env_python(adapter, spec, python)
        if not launch.is_job(spec):
            cmd = adapter.command(spec, python)
            nodes = [NodeCommand(0, "localhost", tuple(cmd.argv), str(cmd.cwd or "."), cmd.env)]
        else:
            nodes = adapter.job_commands(spec, python, hosts, DEFAULT_MASTER_PORT)
        console.print(
            f"[bold]{spec.config_key()}[/]: {spec.world_size} rank(s), global batch "
            f"{spec.global_batch}; each rank writes $DLPERF_EVENTS with {{rank}} replaced"
        )
    else:
        manifest = find_manifest(spec.framework, spec.model, spec.source)
        checkout = checkout_dir(manifest.upstream)
        adapter = OfficialAdapter(manifest, checkout, data_dir=official.data_dir)
        python = _env_python(adapter, spec, python)
        plan = adapter.plan(spec, python, hosts)
        nodes = list(plan.nodes)
        console.print(
            f"[bold]{manifest.name}[/]: {manifest.upstream.url} @ {manifest.upstream.commit}"
            f"{'' if checkout.exists() else ' (not fetched yet: dlperf sources fetch)'}"
        )
        console.print(
            f"knobs applied: {', '.join(plan.knobs) or 'none'}; log format "
            f"{manifest.log_format}; window skip {spec.skip}, measure {spec.measure}"
        )
        if manifest.command.scope == "once" and spec.nodes > 1:
            console.print(f"(node 0's command starts the processes on all {spec.nodes} nodes)")
    launcher = launch.launcher if launch.is_job(spec) else "local"
    for node in through_launcher(launcher, nodes):
        console.print(f"[bold]node {node.node_rank}[/] ({esc(node.host)}):", highlight=False)
        console.print(f"  {node.shell_line()}", highlight=False, soft_wrap=True, markup=False)


def _print_summary(out: Console, result, path: Path) -> None:
    t = result.metrics.throughput
    if t:
        out.print(
            f"[bold]median {t.median:.2f} samples/s[/] over {t.n} repeat(s) "
            f"(min {t.min:.2f}, max {t.max:.2f}, CV {t.cv:.1%}, "
            f"95% CI {t.ci_low:.2f}–{t.ci_high:.2f})"
        )
    m = result.metrics
    if m.score is not None:
        out.print(f"[bold]score {m.score:.4g} {m.score_unit}[/] (the op's own rate)")
    if m.mfu is not None:
        out.print(f"MFU {m.mfu:.2%} of {m.peak_flops / 1e12:.3g} TFLOP/s ({esc(m.peak_source)})")
    for w in result.warnings:
        out.print(f"[yellow]warning:[/] {esc(w)}")
    out.print(f"status [bold]{result.status.value}[/]; stored {esc(str(path))}")


def _print_scaling(out: Console, result, results_dir: Path) -> None:
    """A data-parallel run against the stored 1x1 run of its configuration, flagged when it
    scales better than linearly (which a real job cannot)."""
    from dlperf.report._data import SUSPECT_EFFICIENCY, scaling_efficiency
    from dlperf.store import single_device_baseline

    base = single_device_baseline(results_dir, result.spec)
    efficiency = scaling_efficiency(result, base)
    if efficiency is None:
        return
    n = result.spec.world_size
    out.print(
        f"scaling vs the 1x1 result {base.id}: speedup {efficiency * n:.2f} on {n} devices, "
        f"efficiency {efficiency:.1%}",
        highlight=False,
    )
    if efficiency > SUSPECT_EFFICIENCY:
        out.print(
            f"[yellow]suspect:[/] more than linear scaling ({efficiency:.1%} > "
            f"{SUSPECT_EFFICIENCY:.0%}): the 1x1 run or this one was disturbed (a busy machine, "
            "simulated nodes sharing one host's cores); rerun both on an idle machine",
            highlight=False,
        )


@app.command()
def sweep(
    file: Annotated[
        Path,
        typer.Argument(
            parser=_path("file", exists=True),
            metavar="FILE",
            help="TOML matrix; see the example in dlperf.sweep.",
        ),
    ],
    results_dir: ResultsDir = DEFAULT_RESULTS_DIR,
    resume: Annotated[
        bool, typer.Option(help="Skip configs that have results; continue unfinished ones.")
    ] = True,
) -> None:
    """Run a matrix of benchmarks, repeats interleaved across configs, resumable."""
    from dlperf.sweep import SweepCallbacks, load_plan, run_sweep

    plan = load_plan(file)
    for why in plan.skipped:
        console.print(f"[dim]not in the matrix: {esc(why)}[/]")
    console.print(f"{len(plan.specs)} configuration(s)")
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} repeats"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        refresh_per_second=1,
    )
    failed = []
    with progress:
        task = progress.add_task("sweep", total=None)

        def done(spec, r) -> None:
            value = f"{r.throughput:.2f} samples/s" if r.throughput else r.message
            progress.console.print(
                f"  {spec.config_key()} #{r.index}: {r.status.value} {esc(value)}"
            )
            progress.advance(task)

        def config_done(result, path) -> None:
            if result.status.value != "ok":
                failed.append(result.spec.config_key())

        callbacks = SweepCallbacks(
            message=lambda m: progress.console.print(f"  {esc(m)}"),
            planned=lambda n: progress.update(task, total=n),
            repeat_started=lambda s, i: progress.update(
                task, description=f"{s.framework} {s.model} #{i}"
            ),
            repeat_done=done,
            config_done=config_done,
        )
        outcomes, cannot_run = run_sweep(plan, results_dir, callbacks, resume=resume)
    console.print(f"{len(outcomes)} result(s) stored in {esc(str(results_dir))}")
    for key in failed:
        console.print(f"[red]failed or partial:[/] {key}")
    for key, why in cannot_run.items():
        console.print(f"[red]could not run:[/] {key}: {esc(why)}")
    if failed or cannot_run:
        raise typer.Exit(2)


@app.command("check-models")
def check_models_cmd(
    framework: Annotated[
        list[str] | None, typer.Option("--framework", help="Only these (repeatable).")
    ] = None,
    model: Annotated[list[str] | None, typer.Option("--model", help="Only these.")] = None,
) -> None:
    """Prove every framework builds the same models: parameter counts and FLOPs per sample."""
    from dlperf.checks import check_models

    checks = check_models(framework, model, log=lambda m: err.print(f"  {esc(m)}"))
    table = Table("framework", "model", "shape", "params", "expected", "GFLOPs/sample", "check")
    for c in checks:
        flops = f"{c.flops_per_sample / 1e9:.3f}" if c.flops_per_sample else "—"
        verdict = "[green]ok[/]" if c.ok else f"[red]MISMATCH[/] {esc(c.error or '')}"
        params = f"{c.params:,}" if c.params is not None else "—"
        table.add_row(
            c.framework, c.model, c.shape, params, f"{c.expected_params:,}", flops, verdict
        )
    console.print(table)
    if not all(c.ok for c in checks):
        raise typer.Exit(2)


@sources_app.command("list")
def sources_list() -> None:
    """Every manifest: framework, model, upstream commit, log format, checkout state."""
    from dlperf.sources import load_manifests, manifests_dir, source_states

    states = source_states(load_manifests())
    table = Table(
        "manifest", "framework model", "commit", "log format", "env", "checkout", box=None
    )
    for st in states:
        m = st.manifest
        env = m.environment
        if env.kind == "container":
            where = f"{env.runtime} {env.image.rsplit('/', 1)[-1]}"
        else:
            where = f"pip py{env.python}"
        table.add_row(
            m.name + (" *" if m.default else ""),
            f"{m.framework} {m.model}",
            m.upstream.commit[:12],
            m.log_format,
            where,
            st.state,
        )
    console.print(table)
    console.print("* = the default for its framework and model")
    console.print(f"manifests: {manifests_dir()}", markup=False)


def _selected_manifests(names: list[str] | None):
    from dlperf.sources import load_manifests

    manifests = load_manifests()
    if not names:
        return list(manifests.values())
    unknown = [n for n in names if n not in manifests]
    if unknown:
        raise DlperfError(
            f"unknown manifest(s) {', '.join(unknown)}; known: {', '.join(manifests)}"
        )
    return [manifests[n] for n in names]


@sources_app.command("fetch")
def sources_fetch(
    names: Annotated[list[str] | None, typer.Argument(help="Manifests (default: all).")] = None,
    sources_dir: SourcesDir = None,
    refetch: Annotated[bool, typer.Option(help="Remove and fetch again even if ready.")] = False,
) -> None:
    """Clone each upstream at its pinned commit and apply its tracked patches."""
    from dlperf.sources import fetch_source, upstream_patches

    done: set[str] = set()
    for m in _selected_manifests(names):
        if m.upstream.name in done:
            continue
        done.add(m.upstream.name)
        path = fetch_source(m.upstream, sources_dir=sources_dir, refetch=refetch)
        patches = upstream_patches(m.upstream)
        console.print(
            f"{m.upstream.name} @ {m.upstream.commit[:12]} + {len(patches)} patch(es): {path}"
        )


@sources_app.command("verify")
def sources_verify(
    names: Annotated[list[str] | None, typer.Argument(help="Manifests (default: all).")] = None,
) -> None:
    """Check each fetched checkout: pinned commit, exactly the tracked patches, nothing else."""
    from dlperf.sources import source_states

    bad = 0
    for st in source_states({m.name: m for m in _selected_manifests(names)}):
        m = st.manifest
        if st.state == "missing":
            console.print(f"{m.name}: [yellow]not fetched[/] (dlperf sources fetch {m.name})")
        elif st.state == "ready":
            console.print(f"{m.name}: [green]ok[/] {m.upstream.commit[:12]} {esc(str(st.path))}")
        else:
            console.print(f"{m.name}: [red]bad[/] {esc(st.state.removeprefix('broken: '))}",
                          highlight=False)  # fmt: skip
        bad += st.state != "ready"
    if bad:
        raise typer.Exit(1)


SUITES = ("mlperf", "fambench")  # `dlperf parse` sources that are other suites' logs
PARSE_OPTIONS = {  # the options each `dlperf parse` source uses
    "mlperf": ("--framework", "--model", "--batch-size", "--device"),
    "fambench": ("--framework", "--device"),
    "framework": ("--impl", "--source", "--batch-size", "--nodes", "--devices-per-node",
                  "--amp/--fp32", "--device", "--skip", "--measure"),
}  # fmt: skip


@app.command()
def parse(
    what: Annotated[
        str, typer.Argument(help="A framework (then MODEL PATH...), or mlperf / fambench.")
    ],
    args: Annotated[
        list[str],
        typer.Argument(help="MODEL PATH... for a framework; PATH... for mlperf and fambench."),
    ],
    impl: Annotated[
        Literal[IMPLS] | None,
        typer.Option(
            help="official (upstream logs) or ootb (dlperf events files, the default; micro "
            "for microbenchmarks)."
        ),
    ] = None,
    source: Annotated[str | None, typer.Option(help="Which official manifest.")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Per device (else from the path).")] = None,
    nodes: Annotated[int | None, typer.Option(help="Nodes (else from the path).")] = None,
    devices_per_node: Annotated[int | None, typer.Option(help="Else from the path.")] = None,
    amp: Annotated[bool | None, typer.Option("--amp/--fp32", help="Else from the path.")] = None,
    device: Annotated[
        Literal[DEVICES] | None,
        typer.Option(help="cpu or cuda (default: the upstream's device, or the events file's)."),
    ] = None,
    skip: Annotated[int | None, typer.Option(help="Default: the manifest's window.")] = None,
    measure: Annotated[int | None, typer.Option(help="Default: the manifest's window.")] = None,
    framework: Annotated[
        str | None,
        typer.Option(help="mlperf/fambench: what ran (default: external / pytorch)."),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="mlperf: the model that ran (default: the SUT, 'sut').")
    ] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS_DIR,
) -> None:
    """Import logs made elsewhere as results: DLPerf-style logs and dlperf events files (one
    result per configuration, a repeat per log), MLPerf LoadGen log folders, FAMBench logs."""
    from dlperf.adapters import adapter_names

    if what not in SUITES and what not in adapter_names():
        raise DlperfError(
            f"unknown log source {what!r}: give a framework ({', '.join(adapter_names())}) "
            f"then MODEL PATH..., or {' / '.join(SUITES)} then PATH..."
        )
    given = {
        "--impl": impl, "--source": source, "--batch-size": batch_size, "--nodes": nodes,
        "--devices-per-node": devices_per_node, "--amp/--fp32": amp, "--device": device,
        "--skip": skip, "--measure": measure, "--framework": framework, "--model": model,
    }  # fmt: skip
    applies = PARSE_OPTIONS.get(what, PARSE_OPTIONS["framework"])
    stray = [flag for flag, value in given.items() if value is not None and flag not in applies]
    if stray:
        raise DlperfError(
            f"{', '.join(stray)} not used by `dlperf parse {what}`: it takes "
            f"{', '.join(applies)}; leave the others out"
        )
    if what in SUITES:
        paths = [Path(a) for a in args]
        if what == "mlperf":
            from dlperf.importers.loadgen import import_dirs

            imported = import_dirs(
                paths,
                framework=framework or "external",
                model=model or "sut",
                batch_size=1 if batch_size is None else batch_size,
                device=device or "cpu",
                results_dir=results_dir,
            )
        else:
            from dlperf.importers.fambench import import_logs as import_fambench

            imported = import_fambench(
                paths,
                framework=framework or "pytorch",
                device=device or "cpu",
                results_dir=results_dir,
            )
    else:
        from dlperf.importers.dlperf_logs import import_logs

        if len(args) < 2:
            raise DlperfError(f"usage: dlperf parse {what} MODEL PATH... (logs or folders)")
        from dlperf.adapters import get_adapter

        runs = get_adapter(what)
        if not runs.runs(args[0]):
            known = ", ".join([*runs.models, *runs.micro_models])
            raise DlperfError(f"{what} has no model {args[0]!r}; its models: {known}")
        overrides = {
            "batch_size": batch_size,
            "nodes": nodes,
            "devices_per_node": devices_per_node,
            "precision": None if amp is None else ("amp" if amp else "fp32"),
            "device": device,
            "skip": skip,
            "measure": measure,
            "source": source,
        }
        imported = import_logs(
            what,
            args[0],
            [Path(a) for a in args[1:]],
            impl=impl or ("micro" if args[0] in runs.micro_models else "ootb"),
            overrides=overrides,
            results_dir=results_dir,
        )
    failed = False
    for result, path in imported:
        console.print(
            f"{_headline(result)} ({len(result.repeats)} log(s)) -> {path}",
            highlight=False,
            markup=False,
        )
        for w in result.warnings:
            console.print(f"  [yellow]warning:[/] {esc(w)}", highlight=False)
        failed |= result.status.value != "ok"
    if failed:
        raise typer.Exit(2)


def _headline(result) -> str:
    """One line: the configuration and its number (score, LoadGen metric or throughput)."""
    s, m = result.spec, result.metrics
    name = f"{s.framework} {s.model} {s.mode} {s.nodes}n{s.devices_per_node}d b{s.batch_size}"
    if m.loadgen_metric:
        valid = "VALID" if m.loadgen_valid else "INVALID"
        run, lg = result.repeats[0].loadgen, m.loadgen_metric
        return f"{name} {run.scenario}: {run.metric} {lg.median:.6g} {lg.unit} ({valid})"
    if m.score is not None:
        return f"{name}: {m.score:.6g} {m.score_unit}"
    if m.throughput:
        t = m.throughput
        return f"{name} {s.precision}: median {t.median:.2f} samples/s over {t.n}"
    return f"{name}: no usable repeat"


@app.command()
def report(
    results_dir: ResultsDir = DEFAULT_RESULTS_DIR,
    reports_dir: Annotated[
        Path,
        typer.Option(parser=_path("folder"), metavar="FOLDER", help="Where Markdown + PNG go."),
    ] = Path("reports"),
    style: Annotated[
        Literal["dlperf", "fambench"],
        typer.Option(help="dlperf (per-model reports) or fambench (FAMBench's table)."),
    ] = "dlperf",
) -> None:
    """Regenerate reports/<model>.md (and charts) from the results directory."""
    from dlperf.report import write_reports
    from dlperf.store import iter_result_paths

    if not iter_result_paths(results_dir):
        raise DlperfError(f"no results in {results_dir}; run `dlperf run ...` first")
    if style == "fambench":
        from dlperf.report.suites import fambench_table
        from dlperf.store import latest_per_config, load_results

        table = fambench_table(latest_per_config(load_results(results_dir)))
        heading = "# Results in FAMBench's format\n\n"
        path = atomic_write(reports_dir / "fambench.md", heading + table)
        sys.stdout.write(table)
        console.print(f"wrote {path}", markup=False)
        return
    from dlperf.report._data import SUSPECT_EFFICIENCY, suspect_scaling
    from dlperf.store import load_results

    results = load_results(results_dir)
    for p in write_reports(results_dir, reports_dir, results):
        console.print(f"wrote {p}", markup=False)
    for result, efficiency in suspect_scaling(results):
        console.print(
            f"[yellow]suspect:[/] {result.spec.config_key()} scales at {efficiency:.1%} of "
            f"linear (> {SUSPECT_EFFICIENCY:.0%}); rerun it and its 1x1 on an idle machine",
            highlight=False,
        )


@app.command()
def export(
    format_: Annotated[
        Literal["superbench", "csv", "parquet"],
        typer.Option(
            "--format",
            help="superbench (SuperBench's metrics, JSON lines), csv or parquet (one row a "
            "result: spec, status, throughput summary, MFU, latency percentiles, versions; "
            "parquet needs pyarrow and --out).",
        ),
    ],
    results_dir: ResultsDir = DEFAULT_RESULTS_DIR,
    out: OutFile = None,
) -> None:
    """Results for other tools: SuperBench's metric names, or a table (CSV, Parquet) of the
    newest result of each configuration."""
    from dlperf.store import latest_per_config, load_results

    if format_ == "parquet" and out is None:
        raise DlperfError("--format parquet is binary: give --out FILE")
    results = latest_per_config(load_results(results_dir))
    if format_ == "superbench":
        from dlperf.report.suites import superbench_jsonl

        data: str | bytes = superbench_jsonl(results)
        if not data:
            raise DlperfError(f"no results with a throughput in {results_dir}")
        what = f"{data.count(chr(10))} line(s)"
    else:
        from dlperf.report.export import results_csv, results_parquet

        if not results:
            raise DlperfError(f"no results in {results_dir}")
        data = results_csv(results) if format_ == "csv" else results_parquet(results)
        what = f"{len(results)} result(s)"
    if out is None:
        sys.stdout.write(data)  # csv or superbench: text
    else:
        atomic_write(out, data)
        err.print(f"wrote {what} to {out}", markup=False)


@app.command()
def score(
    freeze: Annotated[
        Path | None,
        typer.Option(
            parser=_path("file"),
            metavar="FILE",
            help="Write these results' medians as the reference here.",
        ),
    ] = None,
    reference: Annotated[
        Path | None,
        typer.Option(
            parser=_path("file", exists=True),
            metavar="FILE",
            help="Score these results against this reference (= 1000).",
        ),
    ] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS_DIR,
) -> None:
    """TorchBench V0's score: the weighted geometric mean of speedups over a frozen reference,
    weights split evenly by model family, then by configuration; 1000 = the reference."""
    from dlperf import score as scoring

    if (freeze is None) == (reference is None):
        raise DlperfError("give one of --freeze FILE (make a reference) or --reference FILE")
    if freeze is not None:
        n = scoring.freeze(results_dir, freeze)
        console.print(f"froze {n} configuration(s) into {freeze}", markup=False)
        return
    s = scoring.score(results_dir, reference)
    table = Table("family", "subscore", "configurations")
    for name, value in s.families.items():
        table.add_row(name, f"{value:.1f}", str(len(s.members[name])))
    console.print(table)
    console.print(f"[bold]score {s.total:.1f}[/] (reference = 1000)")
    for key in s.missing:
        console.print(f"[yellow]warning:[/] {key} is in the reference but not in these results")


@app.command()
def compare(
    a: Annotated[
        Path,
        typer.Argument(
            parser=_path("path", exists=True),
            metavar="A",
            help="Baseline: a results folder or a result file.",
        ),
    ],
    b: Annotated[
        Path,
        typer.Argument(
            parser=_path("path", exists=True),
            metavar="B",
            help="Candidate: a results folder or a result file.",
        ),
    ],
    threshold: Annotated[
        float, typer.Option(help="Smallest change that counts, a fraction in [0, 1).")
    ] = 0.05,
    out: Annotated[
        Path | None,
        typer.Option(
            parser=_path("file"), metavar="FILE", help="Also write the Markdown table here."
        ),
    ] = None,
) -> None:
    """Configuration by configuration, B against A; exit code 2 when B regressed."""
    from dlperf.compare import compare as compare_dirs
    from dlperf.compare import render_markdown

    rows, notes = compare_dirs(a, b, threshold)
    text = render_markdown(rows, notes, threshold)
    sys.stdout.write(text)
    if out is not None:
        atomic_write(out, text)
    if any(r.verdict == "regression" for r in rows):
        raise typer.Exit(2)


@app.command()
def doctor(
    json_out: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
    measure_peak: Annotated[
        bool,
        typer.Option(help="Measure the CPU GEMM peak again (MFU on CPUs uses it); do it idle."),
    ] = False,
) -> None:
    """What on this machine threatens a stable number (TorchBench V0's controls)."""
    from dlperf.doctor import checks_as_dicts, run_checks
    from dlperf.system import cpu_peak, machine_info

    checks = run_checks()
    info = machine_info()
    peak = cpu_peak(refresh=measure_peak)
    if json_out:
        payload = {"machine": info, "cpu_peak": peak, "checks": checks_as_dicts(checks)}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    console.print(
        f"{info.get('host')}: {info.get('cpu')} x{info.get('cpu_count_logical')}, "
        f"measured fp32 GEMM peak {peak['flops'] / 1e9:.1f} GFLOP/s",
        highlight=False,
    )
    share = peak.get("other_share")
    console.print(
        f"  how: {peak.get('source')}; when: {peak.get('measured')}; other processes took "
        f"{'an unknown share' if share is None else f'{share:.0%}'} of the CPUs meanwhile",
        highlight=False,
    )
    if peak.get("under_load"):
        console.print(
            "  [yellow]measured under load: not cached and not used for MFU[/]; run "
            "`dlperf doctor --measure-peak` again when the machine is idle"
        )
    table = Table("check", "status", "found", "advice")
    colours = {"ok": "green", "warn": "yellow", "info": "blue"}
    for c in checks:
        colour = colours.get(c.status, "white")
        table.add_row(c.name, f"[{colour}]{c.status}[/]", esc(c.value), esc(c.advice))
    console.print(table)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings from the core (a skipped result file) as one line, without source lines."""
    err.print(f"[yellow]warning:[/] {esc(str(message))}", highlight=False, soft_wrap=True)


def main() -> None:
    """Exit codes: 0 ok, 1 user error (clear message), 2 some benchmark failed, 130 Ctrl-C."""
    import signal
    import warnings

    warnings.showwarning = _show_warning

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    # CI cancelling, `timeout`, `scancel` (SIGTERM) and a closed terminal (SIGHUP) stop dlperf
    # as Ctrl-C does: workloads killed, finished repeats kept.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    try:
        code = app(standalone_mode=False)
    except DlperfError as exc:
        err.print(f"[red]error:[/] {esc(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        code = 130
    except TyperException as exc:  # bad usage is a user error: exit 1, not click's 2
        exc.show()
        sys.exit(1)
    if code == 130:  # Typer turns Ctrl-C into Exit(130) before we see it
        err.print(
            "[yellow]interrupted[/]: workloads stopped; repeats that had finished were stored "
            "(the others marked interrupted); a sweep resumes where it stopped"
        )
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
