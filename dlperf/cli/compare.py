"""`dlperf score`, `compare` and `history`: stored results judged against a frozen reference
(TorchBench's score), a baseline (benchmark by benchmark), and their own past."""

from __future__ import annotations

import sys
from dataclasses import asdict

import typer
from rich.markup import escape as esc

import dlperf.cli.compare_options as co
import dlperf.cli.options as o
from dlperf import DlperfError
from dlperf.cli.output import (
    console,
    err,
    print_json,
    print_plain,
    print_whole,
    write_json,
    write_text,
)
from dlperf.cli.render_compare import compare_output, history_tables, score_tables
from dlperf.files import atomic_write
from dlperf.store import DEFAULT_RESULTS_DIR


def score(
    freeze: co.Freeze = None,
    reference: co.Reference = None,
    hierarchy: co.Hierarchy = None,
    flat: co.Flat = False,
    machine: co.OneMachine = None,
    across_machines: co.AcrossMachines = False,
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    json_out: co.ScoreJson = False,
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
                f"[yellow]warning:[/] the catalog does not place {esc(model)}: it goes under "
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
        out.print(f"[yellow]warning:[/] {esc(key)} is in the reference but not in these results")
    for model in s.absent_models:
        out.print(
            f"[yellow]warning:[/] no result for {esc(model)}: it keeps its weight at speedup 1"
        )
    for key in s.extra:
        out.print(f"[yellow]warning:[/] {esc(key)} is not in the reference: not scored")
    for model in s.unplaced:
        out.print(f"[yellow]warning:[/] {esc(model)} is not in the hierarchy: not scored")
    if json_out:
        print_json({"reference": str(reference), **asdict(s)})


def compare(
    a: co.Baseline,
    b: co.Candidate,
    threshold: co.Threshold = 0.05,
    across_machines: co.CompareAcrossMachines = False,
    include_references: co.IncludeReferences = False,
    output_format: co.CompareFormat = "table",
    out: co.MarkdownOut = None,
    json_out: co.CompareJson = False,
) -> None:
    """Compare results B against A, benchmark by benchmark.

    On the same machine, with every setting and environment difference named; a change beyond
    the threshold that is not significant says how many repeats would show one. Exit code 2
    when B regressed, 3 when nothing was comparable (no benchmark in common, or only on other
    machines)."""
    from dlperf.compare import compare as compare_sides
    from dlperf.compare import render_markdown

    c = compare_sides(a, b, threshold, across_machines, include_references)
    shown = err if json_out else console  # with --json, stdout is the JSON alone
    if output_format == "markdown":
        write_text(render_markdown(c), sys.stderr if json_out else sys.stdout)
    else:
        for part in compare_output(c):
            shown.print(part, highlight=False)
    if out is not None:
        atomic_write(out, render_markdown(c))
        print_whole(err, "Markdown written to", out)
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
                "references_left_out": c.references_left_out,
            }
        )
    if c.exit_code:
        raise typer.Exit(c.exit_code)


def history(
    framework: o.OnlyFrameworks = None,
    model: o.OnlyModels = None,
    machine: co.OnlyMachines = None,
    config: co.ConfigContains = None,
    since: co.Since = None,
    until: co.Until = None,
    last: co.HistoryLast = None,
    threshold: co.Threshold = 0.05,
    across_machines: co.HistoryAcrossMachines = False,
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    json_out: co.HistoryJson = False,
) -> None:
    """Each benchmark's results over time, each change judged.

    One line per result on each machine: its median, repeats, change and verdict (`dlperf
    compare`'s test); below, the settings, versions and commits, and what changed between
    points (--json: every field)."""
    from dlperf.history import NOT_JUDGED, HistoryFilters
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
    points, refresh = history_of(
        results_dir, filters, threshold=threshold, last=last, across_machines=across_machines
    )
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
    if any(p.verdict == NOT_JUDGED for p in points):
        print_plain(
            out,
            "machine unknown: results with no hardware recorded are listed, not judged "
            "against each other (they may come from several machines); --across-machines "
            "judges them",
            highlight=False,
        )
    if json_out:
        print_json(
            {
                "threshold": threshold,
                "filters": asdict(filters),
                "across_machines": across_machines,
                "points": [p.as_json() for p in points],
            }
        )
