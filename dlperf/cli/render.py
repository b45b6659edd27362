"""What the command line shows of runs and their results (`run`, `sweep`, `parse`): the progress
bar over repeats, a result's headline and summary, warnings grouped by kind, scaling against
the 1x1 run, a dry run's node command lines and a sweep's closing table."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from rich.console import Console
from rich.markup import escape as esc
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from dlperf.analysis import per_device
from dlperf.cli.output import console, indented, print_whole, whole_column
from dlperf.published import is_published_reference, per_accelerator_text
from dlperf.stats import ci_text
from dlperf.warning_kinds import group_warnings


def repeat_progress(out: Console, *, transient: bool = False) -> Progress:
    """The progress bar over repeats, with elapsed time and ETA."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} repeats"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=out,
        transient=transient,
        # Redrawing the bar takes CPU from the workload on a small machine: once a second is
        # enough for an ETA counted in minutes.
        refresh_per_second=1,
    )


def repeat_value(r) -> str:
    """A finished repeat's number, or why it has none."""
    return f"{r.throughput:.2f} samples/s" if r.throughput else r.message


def headline(result) -> str:
    """One line: the configuration and its number (score, LoadGen metric or throughput)."""
    s, m = result.spec, result.metrics
    name = f"{s.framework} {s.model} {s.mode} {s.nodes}n{s.devices_per_node}d b{s.batch_size}"
    if m.loadgen_metric:
        valid = "VALID" if m.loadgen_valid else "INVALID"
        run, lg = result.repeats[0].loadgen, m.loadgen_metric
        return f"{name} {run.scenario}: {run.metric} {lg.median:.6g} {lg.unit} ({valid})"
    if m.score is not None and is_published_reference(result):
        per = per_device(result)
        each = f", {per_accelerator_text(per)} samples/s per accelerator" if per else ""
        return f"{name}: MLPerf score {m.score:.6g} {m.score_unit}{each}"
    if m.score is not None:
        return f"{name}: {m.score:.6g} {m.score_unit}"
    if m.throughput:
        t = m.throughput
        return f"{name} {s.precision}: median {t.median:.2f} samples/s over {t.n}"
    return f"{name}: no usable repeat"


def settings_line(
    practice: Mapping[str, str],
    defaults: Mapping[str, str],
    options: Mapping[str, str],
    given: Collection[str],
) -> str:
    """A run's settings, each said as whose it is: the user's (`given`: the keys of their
    `--set` items), beside the framework's default where it has one, or the framework's best
    practice. `practice`: the spec's best practice as run (the user's ablations in it),
    `defaults` the framework's own, `options` the spec's other `--set` keys."""
    said = []
    for key, value in sorted({**options, **practice}.items()):
        if key not in given:
            said.append(f"{key}={value} (best practice)")
        elif key not in defaults:
            said.append(f"{key}={value} (yours)")
        elif defaults[key] == value:
            said.append(f"{key}={value} (yours; also the default)")
        else:
            said.append(f"{key}={value} (yours; default {defaults[key]})")
    return "settings: " + ", ".join(said)


def print_summary(out: Console, result, path: Path) -> None:
    t = result.metrics.throughput
    if t:
        out.print(
            f"[bold]median {t.median:.2f} samples/s[/] over {t.n} repeat(s) "
            f"(min {t.min:.2f}, max {t.max:.2f}, CV {t.cv:.1%}, "
            f"95% CI of the median {ci_text(t)})"
        )
    m = result.metrics
    if m.score is not None:
        out.print(f"[bold]score {m.score:.4g} {m.score_unit}[/] (the op's own rate)")
    if m.mfu is not None:
        out.print(f"MFU {m.mfu:.2%} of {m.peak_flops / 1e12:.3g} TFLOP/s ({esc(m.peak_source)})")
    for w in result.warnings:
        out.print(f"[yellow]warning:[/] {esc(w)}")
    print_whole(out, f"status [bold]{result.status.value}[/]; stored", path)


def print_warnings(out: Console, items: Iterable[tuple[str, str]], of: int) -> None:
    """Warnings of several configurations (`of` of them in all), each kind said once with the
    configurations it applies to (their names whole, as --source and compare take them)."""
    for text, names in group_warnings(items):
        out.print(f"[yellow]warning:[/] {esc(text)}", highlight=False)
        if len(names) == of and of > 1:
            out.print(indented(f"for all {of} configurations"), highlight=False)
        else:
            out.print(indented(f"for {esc('; '.join(names))}"), highlight=False)


def print_scaling(out: Console, result, base, efficiency: float, suspect: float) -> None:
    """A data-parallel run against the stored 1x1 run of its configuration, flagged when it
    scales better than linearly (which a real job cannot)."""
    n = result.spec.world_size
    out.print(
        f"scaling vs the 1x1 result {base.id}: speedup {efficiency * n:.2f} on {n} devices, "
        f"efficiency {efficiency:.1%}",
        highlight=False,
    )
    if efficiency > suspect:
        out.print(
            f"[yellow]suspect:[/] more than linear scaling ({efficiency:.1%} > "
            f"{suspect:.0%}): the 1x1 run or this one was disturbed (a busy machine, "
            "simulated nodes sharing one host's cores); rerun both on an idle machine",
            highlight=False,
        )


def print_nodes(nodes: Iterable) -> None:
    """Each node's command line, as a dry run shows it."""
    for node in nodes:
        console.print(f"[bold]node {node.node_rank}[/] ({esc(node.host)}):", highlight=False)
        console.print(f"  {node.shell_line()}", highlight=False, soft_wrap=True, markup=False)


def results_table(results) -> Table:
    """A sweep's closing table: each configuration (its benchmark id whole, what its hash
    stands for below it), its status and its number."""
    from dlperf.identity import describe, identity_of

    results = sorted(results, key=lambda r: identity_of(r).key)
    names = [describe(r.spec) for r in results]
    table = Table(show_lines=True)
    whole_column(table, "configuration", names)
    table.add_column("status")
    table.add_column("result")
    for r, name in zip(results, names, strict=True):
        colour = "green" if r.status.value == "ok" else "red"
        table.add_row(esc(name), f"[{colour}]{r.status.value}[/]",
                      esc(headline(r).split(": ", 1)[-1]))  # fmt: skip
    return table
