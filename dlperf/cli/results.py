"""Commands over stored results: parse (import logs made elsewhere), report, export, score,
compare, history."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import typer
from rich.markup import escape as esc

import dlperf.cli.options as o
from dlperf import DlperfError
from dlperf.cli.render import (
    console,
    err,
    headline,
    history_tables,
    print_json,
    print_plain,
    print_warnings,
    print_whole,
    score_tables,
    write_data,
    write_json,
    write_text,
)
from dlperf.files import atomic_write
from dlperf.store import DEFAULT_RESULTS_DIR

# `dlperf parse` sources that are other suites' logs
SUITES = ("mlperf", "mlperf-training", "fambench")
PARSE_OPTIONS = {  # the options each `dlperf parse` source uses
    "mlperf": ("--framework", "--model", "--batch-size", "--device"),
    "mlperf-training": ("--round",),
    "fambench": ("--framework", "--device", "--latency-target-ms"),
    "framework": ("--impl", "--source", "--profile", "--batch-size", "--nodes",
                  "--devices-per-node", "--amp/--fp32", "--device", "--skip", "--measure"),
}  # fmt: skip


def parse(
    what: o.LogSource,
    args: o.LogArgs,
    impl: o.ParseImpl = None,
    source: o.ParseSource = None,
    profile: o.Profile = None,
    batch_size: o.ParseBatchSize = None,
    nodes: o.ParseNodes = None,
    devices_per_node: o.ParseDevicesPerNode = None,
    amp: o.ParseAmp = None,
    device: o.ParseDevice = None,
    skip: o.ParseSkip = None,
    measure: o.ParseMeasure = None,
    framework: o.ParseFramework = None,
    model: o.ParseModel = None,
    latency_target_ms: o.ParseLatencyTarget = None,
    round_: o.ParseRound = None,
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    json_out: o.ParseJson = False,
) -> None:
    """Import DLPerf, MLPerf and FAMBench logs as results.

    DLPerf-style logs and dlperf events files (one result per configuration, a repeat per
    log), MLPerf LoadGen log folders, MLPerf Training result folders (scored by MLPerf's
    rules), FAMBench logs."""
    from dlperf.adapters import adapter_names

    if what not in SUITES and what not in adapter_names():
        raise DlperfError(
            f"unknown log source {what!r}: give a framework ({', '.join(adapter_names())}) "
            f"then MODEL PATH..., or {' / '.join(SUITES)} then PATH..."
        )
    given = {
        "--impl": impl, "--source": source, "--profile": profile, "--batch-size": batch_size,
        "--nodes": nodes,
        "--devices-per-node": devices_per_node, "--amp/--fp32": amp, "--device": device,
        "--skip": skip, "--measure": measure, "--framework": framework, "--model": model,
        "--latency-target-ms": latency_target_ms, "--round": round_,
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
        elif what == "mlperf-training":
            from dlperf.importers.mlperf_training import import_folders

            imported = import_folders(paths, results_dir=results_dir, round_=round_)
        else:
            from dlperf.importers.fambench import import_logs as import_fambench

            imported = import_fambench(
                paths,
                framework=framework or "pytorch",
                device=device or "cpu",
                results_dir=results_dir,
                latency_target_ms=latency_target_ms,
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
        from dlperf.spec_options import option_overrides

        overrides = option_overrides({  # as `dlperf run` takes them; None: read from the path
            "batch_size": batch_size, "nodes": nodes, "devices_per_node": devices_per_node,
            "amp": amp, "device": device, "skip": skip, "measure": measure, "source": source,
            "profile": profile,
        })  # fmt: skip
        imported = import_logs(
            what,
            args[0],
            [Path(a) for a in args[1:]],
            impl=impl or ("micro" if args[0] in runs.micro_models else "ootb"),
            overrides=overrides,
            results_dir=results_dir,
        )
    out = err if json_out else console  # with --json, stdout is the JSON alone
    failed = False
    from dlperf.identity import describe

    for result, path in imported:
        head = f"{headline(result)} ({len(result.repeats)} log(s)) ->"
        print_whole(out, esc(head), path, highlight=False)
        failed |= result.status.value != "ok"
    warned = [(describe(r.spec), w) for r, _ in imported for w in r.warnings]
    print_warnings(out, warned, of=len(imported))
    if json_out:  # the files as stored, byte for byte; several as one JSON list
        stored = [path.read_text().rstrip("\n") for _, path in imported]
        one = len(stored) == 1
        write_json((stored[0] if one else "[\n" + ",\n".join(stored) + "\n]") + "\n")
    if failed:
        raise typer.Exit(2)


def report(
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    reports_dir: o.ReportsDir = Path("reports"),
    style: o.ReportStyle = "dlperf",
) -> None:
    """Write the Markdown reports and their charts.

    reports/MODEL.md and its PNG charts for each model, from the results folder."""
    from dlperf.report import write_fambench_report, write_reports
    from dlperf.store import ResultStore

    store = ResultStore(results_dir)
    if not store.paths():
        raise DlperfError(f"no results in {results_dir}; run `dlperf run ...` first")
    if style == "fambench":
        paths, table = write_fambench_report(results_dir, reports_dir)
        write_text(table)
        for path in paths:
            print_whole(console, "wrote", path)
        return
    from dlperf.analysis import SUSPECT_EFFICIENCY, suspect_scaling
    from dlperf.identity import describe

    results = store.results()
    for p in write_reports(results_dir, reports_dir, results):
        print_whole(console, "wrote", p)
    for result, efficiency in suspect_scaling(results):
        console.print(
            f"[yellow]suspect:[/] {esc(describe(result.spec))} scales at {efficiency:.1%} of "
            f"linear (> {SUSPECT_EFFICIENCY:.0%}); rerun it and its 1x1 on an idle machine",
            highlight=False,
        )


def publish(
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    out: o.SiteDir = Path("site"),
) -> None:
    """Write a static HTML site of the results (works offline).

    An index of models and configurations, a page per model with interactive charts
    (frameworks side by side, scaling, latency percentiles, history, energy), the report's
    tables and every raw result; it opens from disk."""
    from dlperf.report.site import describe_site, write_site

    site = write_site(results_dir, out)
    print_plain(console, f"wrote {describe_site(site)}")


def export(
    format_: o.ExportFormat,
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    out: o.OutFile = None,
) -> None:
    """Results for other tools: SuperBench, CSV, Parquet, JSON.

    SuperBench's results-summary.jsonl (one line per node, its names and statistics), or a
    table (CSV, Parquet, JSON) of the newest result of each configuration."""
    from dlperf.store import ResultStore, newest

    if format_ == "parquet" and out is None:
        raise DlperfError("--format parquet is binary: give --out FILE")
    stored = ResultStore(results_dir).results()
    results = newest(stored)
    if format_ == "json":
        from dlperf.report.export import results_json

        if not results:
            raise DlperfError(f"no results in {results_dir}")
        data, what = results_json(results), f"{len(results)} result(s)"
    elif format_ == "superbench":
        from dlperf.report.suites import superbench_jsonl

        # The newest result of each configuration on each node: one line per node.
        data: str | bytes = superbench_jsonl(stored)
        if not data:
            raise DlperfError(f"no results in {results_dir}")
        what = f"{data.count(chr(10))} node line(s)"
    else:
        from dlperf.report.export import results_csv, results_parquet

        if not results:
            raise DlperfError(f"no results in {results_dir}")
        data = results_csv(results) if format_ == "csv" else results_parquet(results)
        what = f"{len(results)} result(s)"
    if out is None:
        write_data(data) if format_ == "csv" else write_json(data)  # text: json, superbench
    else:
        atomic_write(out, data)
        print_whole(err, f"wrote {what} to", out)


def score(
    freeze: o.Freeze = None,
    reference: o.Reference = None,
    hierarchy: o.Hierarchy = None,
    flat: o.Flat = False,
    machine: o.OneMachine = None,
    across_machines: o.AcrossMachines = False,
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    json_out: o.ScoreJson = False,
) -> None:
    """TorchBench V0's score against a frozen reference (= 1000).

    The weighted geometric mean of speedups over a frozen reference, weights split evenly by
    domain, task, model, then configuration; 1000 = the reference."""
    from dlperf import score as scoring

    if (freeze is None) == (reference is None):
        raise DlperfError("give one of --freeze FILE (make a reference) or --reference FILE")
    if flat and hierarchy is not None:
        raise DlperfError("give --flat or --hierarchy, not both")
    out = err if json_out else console  # with --json, stdout is the JSON alone
    if freeze is not None:
        tree = scoring.load_hierarchy(hierarchy) if hierarchy is not None else None
        n, unknown, on = scoring.freeze(results_dir, freeze, tree, machine)
        print_whole(out, f"froze {n} configuration(s) of {esc(on.label)} into", freeze)
        for model in unknown:
            out.print(
                f"[yellow]warning:[/] the catalog does not place {model}: it goes under "
                "other / other tasks; freeze with --hierarchy score.yml to place it"
            )
        if json_out:
            write_json(freeze.read_text())
        return
    s = scoring.score(results_dir, reference, hierarchy, flat, machine, across_machines)
    if s.reference_machine and s.reference_machine != s.machine:
        out.print(f"[bold]across machines:[/] reference {esc(s.reference_machine)}; results "
                  f"{esc(s.machine)}", highlight=False)  # fmt: skip
    else:
        out.print(f"machine: {esc(s.machine)}", highlight=False)
    for table in score_tables(s):
        out.print(table)
    out.print(f"[bold]score {s.total:.1f}[/] (reference = 1000)")
    for key in s.missing:
        out.print(f"[yellow]warning:[/] {key} is in the reference but not in these results")
    for model in s.absent_models:
        out.print(f"[yellow]warning:[/] no result for {model}: it keeps its weight at speedup 1")
    for key in s.extra:
        out.print(f"[yellow]warning:[/] {key} is not in the reference: not scored")
    for model in s.unplaced:
        out.print(f"[yellow]warning:[/] {model} is not in the hierarchy: not scored")
    if json_out:
        print_json({"reference": str(reference), **asdict(s)})


def compare(
    a: o.Baseline,
    b: o.Candidate,
    threshold: o.Threshold = 0.05,
    across_machines: o.AcrossMachines = False,
    out: o.MarkdownOut = None,
    json_out: o.CompareJson = False,
) -> None:
    """Compare results B against A, benchmark by benchmark.

    On the same machine, with every setting and environment difference named. Exit code 2
    when B regressed, 3 when nothing was comparable (no benchmark in common, or only on other
    machines)."""
    from dlperf.compare import compare as compare_sides
    from dlperf.compare import render_markdown

    c = compare_sides(a, b, threshold, across_machines)
    text = render_markdown(c)
    write_text(text, sys.stderr if json_out else sys.stdout)
    if json_out:
        print_json(
            {
                "threshold": threshold,
                "across_machines": across_machines,
                "machines": {"a": c.machines_a, "b": c.machines_b},
                "comparable": c.reason is None,
                "reason": c.reason,
                "pairs": [asdict(r) for r in c.rows],
                "only_in_a": c.only_a,
                "only_in_b": c.only_b,
                "notes": c.notes,
            }
        )
    if out is not None:
        atomic_write(out, text)
    if c.exit_code:
        raise typer.Exit(c.exit_code)


def history(
    framework: o.OnlyFrameworks = None,
    model: o.OnlyModels = None,
    machine: o.OnlyMachines = None,
    config: o.ConfigContains = None,
    since: o.Since = None,
    until: o.Until = None,
    last: o.HistoryLast = None,
    threshold: o.Threshold = 0.05,
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    json_out: o.HistoryJson = False,
) -> None:
    """Each benchmark's results over time, each change judged.

    One line per result on each machine: its median, repeats, change and verdict (`dlperf
    compare`'s test); below, the settings, versions and commits, and what changed between
    points (--json: every field)."""
    from dlperf.history import HistoryFilters
    from dlperf.history import history as history_of
    from dlperf.store import ResultStore

    if not ResultStore(results_dir).paths():
        raise DlperfError(f"no results in {results_dir}; run `dlperf run ...` first")
    filters = HistoryFilters(
        frameworks=tuple(framework or ()),
        models=tuple(model or ()),
        machines=tuple(machine or ()),
        contains=tuple(config or ()),
        since=since,
        until=until,
    )
    points, refresh = history_of(results_dir, filters, threshold=threshold, last=last)
    if not points:
        raise DlperfError(f"no results in {results_dir} match these filters")
    out = err if json_out else console  # with --json, stdout is the JSON alone
    for shown in history_tables(points):
        out.print(shown, highlight=False)
    series = len({p.series for p in points})
    machines = len({p.machine_id for p in points})
    flagged = [p for p in points if p.verdict in ("regression", "improvement")]
    print_plain(
        out,
        f"{len(points)} point(s) of {series} series on {machines} machine(s); "
        f"{len(flagged)} significant "
        f"change(s) beyond {threshold:.0%} (compare's test); index {refresh.location}: "
        f"{refresh.files} file(s), {refresh.added} added, {refresh.changed} re-read, "
        f"{refresh.removed} removed",
        highlight=False,
    )
    if json_out:
        print_json(
            {
                "threshold": threshold,
                "filters": asdict(filters),
                "points": [p.as_json() for p in points],
            }
        )
