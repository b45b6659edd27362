"""`dlperf run` (one benchmark, or its dry-run plan, or a Slurm script) and `dlperf sweep`."""

from __future__ import annotations

import sys
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape as esc

import dlperf.cli.options as o
import dlperf.cli.run_options as ro
from dlperf.cli.output import console, err, print_whole, write_json
from dlperf.cli.render import (
    print_nodes,
    print_scaling,
    print_summary,
    print_warnings,
    repeat_progress,
    repeat_value,
    results_table,
    settings_line,
)
from dlperf.files import atomic_write
from dlperf.store import DEFAULT_RESULTS_DIR

if TYPE_CHECKING:  # the CLI imports the core when a command runs
    from dlperf.schema import BenchmarkSpec, Result
    from dlperf.spec import OfficialOptions, RunPlan


@ro.with_spec_options
def run(
    *,
    results_dir: ro.RunResultsDir = DEFAULT_RESULTS_DIR,
    json_out: ro.RunJson = False,
    dry_run: ro.DryRun = False,
    hosts: ro.Hosts = None,
    launcher: ro.Launcher = "local",
    sbatch: ro.Sbatch = None,
    sources_dir: ro.RunSourcesDir = None,
    data_dir: ro.DataDir = "",
    python: ro.Python = None,
    rebuild_env: ro.RebuildEnv = False,
    **spec_options: Any,
) -> None:
    """Run one benchmark: median of its repeats.

    Every repeat runs in its own process; the result is the median of the repeats."""
    from dlperf.launch import JobLaunch
    from dlperf.spec import OfficialOptions, check_run
    from dlperf.spec_options import option_overrides, parse_sets, resolve_overrides

    spec = resolve_overrides(option_overrides(spec_options))
    official = OfficialOptions(sources_dir=sources_dir, data_dir=data_dir)
    launch = JobLaunch(launcher, tuple(h.strip() for h in (hosts or "").split(",") if h.strip()))
    if dry_run:
        print_plan(check_run(spec, official, launch, python, dry_run=True))
        return
    if sbatch:
        from dlperf.launch import sbatch_script

        official.check(spec)  # the launcher and the nodes are checked where the job runs
        argv = run_argv(spec, results_dir, official, launch.hosts, python)
        atomic_write(sbatch, sbatch_script(spec, argv, str(Path.cwd())))
        print_whole(console, "wrote", sbatch, "; submit it with:")
        print_whole(console, "  sbatch", sbatch)
        return
    plan = check_run(spec, official, launch, python)
    out = err if json_out else console
    given = parse_sets(spec_options.get("set_") or ())
    result, path = run_with_progress(out, plan, results_dir, rebuild_env, given)
    print_summary(out, result, path)
    from dlperf.analysis import SUSPECT_EFFICIENCY, scaling_efficiency
    from dlperf.store import ResultStore

    base = ResultStore(results_dir).baseline(result)
    efficiency = scaling_efficiency(result, base)
    if efficiency is not None:
        print_scaling(out, result, base, efficiency, SUSPECT_EFFICIENCY)
    if json_out:
        write_json(path.read_text())
    if result.status.value != "ok":
        raise typer.Exit(2)


def run_with_progress(
    out, plan: RunPlan, results_dir: Path, rebuild_env: bool, given: Collection[str] = ()
) -> tuple[Result, Path]:
    """`run_benchmark` with what it is doing on `out`: the benchmark and its window, its
    settings (the user's, `given` by --set, told from the framework's best practice), a
    progress bar, each repeat's outcome."""
    from dlperf.identity import benchmark_id, this_machine
    from dlperf.runner import RunCallbacks, run_benchmark

    spec = plan.spec
    out.print(
        f"[bold]{benchmark_id(spec)}[/] on {esc(this_machine(spec.device).label)}: skip "
        f"{spec.skip}, measure {spec.measure}, {spec.repeats} repeats",
        highlight=False,
    )
    if spec.practice or spec.options:
        defaults = plan.adapter.practice(spec) if spec.practice else {}
        line = settings_line(spec.practice, defaults, spec.options, given)
        out.print(esc(line), highlight=False)
    with repeat_progress(out, transient=True) as progress:
        task = progress.add_task("running", total=spec.repeats)

        def done(r) -> None:
            colour = "green" if r.status.value == "ok" else "red"
            progress.console.print(
                f"  repeat {r.index}: [{colour}]{r.status.value}[/] {esc(repeat_value(r))}"
            )
            progress.advance(task)

        callbacks = RunCallbacks(
            message=lambda m: progress.console.print(f"  {esc(m)}"),
            repeat_started=lambda i, n: progress.update(task, description=f"repeat {i}/{n}"),
            repeat_done=done,
        )
        return run_benchmark(plan, results_dir, callbacks, rebuild_env=rebuild_env)


def run_argv(
    spec: BenchmarkSpec,
    results_dir: Path,
    official: OfficialOptions,
    hosts: tuple[str, ...],
    python: Path | None = None,
) -> list[str]:
    """The `dlperf run` command (with --launcher slurm) that measures exactly `spec`: its
    settings from the spec options' table, then where it stores and runs."""
    from dlperf.spec_options import spec_argv

    argv = [sys.executable, "-m", "dlperf", "run", *spec_argv(spec)]
    argv += ["--results-dir", str(results_dir.resolve())]
    for flag, value in (
        ("--data-dir", official.data_dir),
        ("--sources-dir", official.sources_dir),
        ("--hosts", ",".join(hosts)),
        ("--python", python),
    ):
        if value:
            argv += [flag, str(value)]
    return [*argv, "--launcher", "slurm"]


def print_plan(plan: RunPlan) -> None:
    """What `run` would start on each node, without building or starting anything."""
    from dlperf.launch import through_launcher
    from dlperf.official.adapter import OfficialAdapter

    spec = plan.spec
    if not isinstance(plan.adapter, OfficialAdapter):
        from dlperf.identity import describe

        console.print(
            f"[bold]{esc(describe(spec))}[/]: {spec.world_size} rank(s), global batch "
            f"{spec.global_batch}; each rank writes $DLPERF_EVENTS with {{rank}} replaced"
        )
    else:
        manifest, checkout = plan.adapter.manifest, plan.adapter.checkout
        knobs = plan.adapter.plan(spec, plan.python, list(plan.launch.hosts)).knobs
        console.print(
            f"[bold]{manifest.name}[/] ({manifest.profile}): "
            f"{manifest.upstream.archive or manifest.upstream.url} @ {manifest.upstream.revision}"
            f"{'' if checkout.exists() else ' (not fetched yet: dlperf sources fetch)'}",
            soft_wrap=True,  # a URL broken across lines cannot be copied
        )
        console.print(
            f"knobs applied: {', '.join(knobs) or 'none'}; log format "
            f"{manifest.log_format}; window skip {spec.skip}, measure {spec.measure}"
        )
        if manifest.command.scope == "once" and spec.nodes > 1:
            console.print(f"(node 0's command starts the processes on all {spec.nodes} nodes)")
    print_nodes(through_launcher(plan.launch.launcher, plan.node_commands()))


def sweep(
    file: o.SweepFile,
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    resume: o.Resume = True,
) -> None:
    """Run a matrix of benchmarks (resumable).

    Repeats are interleaved across configurations; a stopped sweep resumes where it stopped."""
    from dlperf.analysis import SUSPECT_EFFICIENCY, scaling
    from dlperf.identity import describe
    from dlperf.store import ResultStore
    from dlperf.sweep import SweepCallbacks, load_plan, run_sweep

    plan = load_plan(file)
    for why in plan.skipped:
        console.print(f"[dim]not in the matrix: {esc(why)}[/]")
    console.print(f"{len(plan.specs)} configuration(s)")
    failed = []
    with repeat_progress(console) as progress:
        task = progress.add_task("sweep", total=None)

        def done(spec, r) -> None:
            progress.console.print(
                f"  {esc(describe(spec))} #{r.index}: {r.status.value} {esc(repeat_value(r))}"
            )
            progress.advance(task)

        def config_done(result, path) -> None:
            if result.status.value != "ok":
                failed.append(describe(result.spec))

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
    print_whole(console, f"{len(outcomes)} result(s) stored in", results_dir)
    if outcomes:
        console.print(results_table(result for result, _ in outcomes))
    ordered = sorted(outcomes, key=lambda o: describe(o[0].spec))
    warned = [(describe(r.spec), w) for r, _ in ordered for w in r.warnings]
    print_warnings(console, warned, of=len(outcomes))
    for found in scaling((r for r, _ in ordered), ResultStore(results_dir).baseline):
        console.print(f"{esc(describe(found.result.spec))}:", highlight=False)
        print_scaling(console, found.result, found.base, found.efficiency, SUSPECT_EFFICIENCY)
    for key in failed:
        console.print(f"[red]failed or partial:[/] {esc(key)}")
    for key, why in cannot_run.items():
        console.print(f"[red]could not run:[/] {key}: {esc(why)}")
    if failed or cannot_run:
        raise typer.Exit(2)
