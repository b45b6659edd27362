"""What the command line shows, built from core objects: the consoles, the one progress bar
for repeats (run and sweep), tables, and the lines that summarise a result or a plan."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.markup import escape as esc
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from dlperf.printable import printable, printable_json
from dlperf.stats import ci_text


class PrintableConsole(Console):
    """A rich Console that never sends a control character it did not make itself: every piece
    of text it prints (messages, table cells, progress descriptions; stored text among them: a
    workload's reason, a framework version, a host name, a warning) has its control
    characters shown escaped (`dlperf.printable`), while rich's own styles and cursor moves
    (control segments) go out as they are."""

    def render_str(self, text: str, **kwargs) -> Text:  # type: ignore[override]
        # Before rich measures it: tables keep their widths with the escapes in.
        return super().render_str(printable(text, keep_lines=True), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # Whatever reached the buffer another way (a Text built directly): the last gate.
        return super()._render_buffer(map(_printable_segment, buffer))


def _printable_segment(segment: Segment) -> Segment:
    if segment.control:  # rich's own: a cursor move, a screen clear it decided on
        return segment
    return Segment(printable(segment.text, keep_lines=True), segment.style)


console = PrintableConsole(width=None if sys.stdout.isatty() else 120)
err = PrintableConsole(stderr=True, width=None if sys.stderr.isatty() else 120)


def write_text(text: str, stream: TextIO | None = None) -> None:
    """Text made outside rich (Markdown of `compare`, FAMBench's table) on stdout (or
    `stream`), control characters escaped as the consoles do."""
    (stream or sys.stdout).write(printable(text, keep_lines=True))


def write_json(text: str, stream: TextIO | None = None) -> None:
    """A JSON document (a stored result, as stored) on stdout: the same JSON value, with the
    controls JSON lets through raw (C1, DEL, U+2028) written as \\u escapes."""
    (stream or sys.stdout).write(printable_json(text))


def write_data(text: str) -> None:
    """Exported data (CSV) on stdout: byte for byte into a pipe or a file, control characters
    escaped only when stdout is a terminal, where they would act."""
    sys.stdout.write(printable(text, keep_lines=True) if sys.stdout.isatty() else text)


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


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings from the core (a skipped result file) as one line, without source lines."""
    err.print(f"[yellow]warning:[/] {esc(str(message))}", highlight=False, soft_wrap=True)


def print_json(data: object) -> None:
    """One JSON document on stdout, for --json: never through rich, which would wrap it."""
    import json

    write_json(json.dumps(data, indent=2) + "\n")


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
    out.print(f"status [bold]{result.status.value}[/]; stored {esc(str(path))}")


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


def headline(result) -> str:
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


def results_table(results) -> Table:
    """A sweep's closing table: each configuration, its status and its number."""
    from dlperf.identity import describe, identity_of

    table = Table("configuration", "status", "result")
    for r in sorted(results, key=lambda r: identity_of(r).key):
        colour = "green" if r.status.value == "ok" else "red"
        table.add_row(esc(describe(r.spec)), f"[{colour}]{r.status.value}[/]",
                      esc(headline(r).split(": ", 1)[-1]))  # fmt: skip
    return table


def envs_table(records) -> Table:
    table = Table("name", "state", "framework version", "python", "size", "path")
    for r in records:
        size = f"{r.size_bytes / 2**30:.2f} GiB" if r.size_bytes else "—"
        table.add_row(
            r.name, r.state, r.framework_version or "—", r.python or "—", size, esc(str(r.path))
        )
    return table


def model_checks_table(checks) -> Table:
    table = Table("framework", "model", "shape", "params", "expected", "GFLOPs/sample", "check")
    for c in checks:
        flops = f"{c.flops_per_sample / 1e9:.3f}" if c.flops_per_sample else "—"
        verdict = "[green]ok[/]" if c.ok else f"[red]MISMATCH[/] {esc(c.error or '')}"
        params = f"{c.params:,}" if c.params is not None else "—"
        table.add_row(
            c.framework, c.model, c.shape, params, f"{c.expected_params:,}", flops, verdict
        )
    return table


def sources_table(states) -> Table:
    table = Table(
        "profile", "manifest", "framework model", "pin", "log format", "env", "checkout",
        box=None,
    )  # fmt: skip
    for st in sorted(states, key=lambda st: (st.manifest.profile, st.manifest.name)):
        m = st.manifest
        env = m.environment
        if env.kind == "container":
            where = f"{env.runtime} {env.image.rsplit('/', 1)[-1]}"
        else:
            where = f"pip py{env.python}"
        table.add_row(
            m.profile,
            m.name + (" *" if m.default else ""),
            f"{m.framework} {m.model}",
            m.upstream.short,
            m.log_format,
            where,
            st.state,
        )
    return table


def score_tables(s) -> tuple[Table, Table]:
    """Each scored configuration (where V0's hierarchy puts it, its speedup and weight), and
    each domain's subscore."""
    configs = Table("domain / task / model", "configuration", "speedup", "weight")
    for key, (domain, task, model) in sorted(s.placement.items(), key=lambda kv: kv[1]):
        configs.add_row(f"{domain} / {task} / {model}", key, f"{s.speedups[key]:.4f}",
                        f"{s.weights[key]:.4f}")  # fmt: skip
    domains = Table("domain", "subscore", "weight", "tasks")
    for domain, value in s.domains.items():
        tasks = len(s.hierarchy[domain])
        domains.add_row(domain, f"{value:.1f}", f"{1 / len(s.domains):.4f}", str(tasks))
    return configs, domains


def doctor_checks_table(checks) -> Table:
    table = Table("check", "status", "found", "advice")
    colours = {"ok": "green", "warn": "yellow", "info": "blue"}
    for c in checks:
        colour = colours.get(c.status, "white")
        table.add_row(c.name, f"[{colour}]{c.status}[/]", esc(c.value), esc(c.advice))
    return table


def print_peak(info: dict, peak: dict) -> None:
    """The machine and its measured CPU GEMM peak (how, when, how busy the machine was)."""
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


VERDICT_STYLES = {
    "regression": "bold red",
    "improvement": "bold green",
    "within noise": "yellow",
    "no change": "dim",
    "failed": "red",
    "first": "dim",
}


def history_tables(points) -> list[Table]:
    """One table per series (a benchmark on a machine): its points over time, their settings,
    what changed, the verdicts."""
    from itertools import groupby

    from dlperf.identity import commit_label

    tables = []
    for _series, group in groupby(points, key=lambda p: p.series):
        group = list(group)
        rows = [_history_row(p, commit_label) for p in group]
        # Columns no point fills (commits before they were recorded, nothing changed) go.
        names = ["created", "result", "median", "n", "change", "verdict", "settings",
                 "versions", "commits", "changed since"]  # fmt: skip
        keep = [i for i, name in enumerate(names) if i < 6 or any(r[i] != "–" for r in rows)]
        title = f"{group[0].benchmark_id} on {group[0].machine}"
        table = Table(title=esc(title), title_justify="left")
        for i in keep:
            table.add_column(names[i], justify="right" if names[i] in ("median", "n", "change")
                             else "left", overflow="fold")  # fmt: skip
        for row in rows:
            table.add_row(*(row[i] for i in keep))
        tables.append(table)
    return tables


def _history_row(p, commit_label) -> list[str]:
    style = VERDICT_STYLES.get(p.verdict, "")
    verdict = f"[{style}]{esc(p.verdict)}[/]" if style else esc(p.verdict)
    if p.p is not None:
        verdict += f" (p {p.p:.2g})"
    median = f"{p.median:.4g} {p.unit}" if p.median is not None else p.status
    versions = " · ".join(
        f"{name} {value}"
        for name, value in (
            ("fw", p.framework_version),
            ("py", p.python),
            ("dlperf", p.dlperf_version),
        )  # fmt: skip
        if value
    )
    commits = " · ".join(
        f"{name}@{label}"
        for name, label in (
            ("dlperf", commit_label(p.dlperf_commit, p.dlperf_dirty)),
            ("workdir", commit_label(p.workdir_commit, p.workdir_dirty)),
            ("upstream", commit_label(p.source_commit, None)),
        )
        if label
    )
    from dlperf.identity import settings_label

    settings = p.settings_map
    return [
        esc(p.created.replace("T", " ")[:16]),
        esc(p.result_id),
        esc(median),
        str(p.n),
        f"{p.change:+.1%}" if p.change is not None else "–",
        verdict,
        esc(settings_label(settings)) if settings else "–",
        esc(versions) or "–",
        esc(commits) or "–",
        esc("; ".join(p.changes)) or "–",
    ]
