"""What the command line shows, built from core objects: the consoles, the one progress bar
for repeats (run and sweep), tables, and the lines that summarise a result or a plan."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.markup import escape as esc
from rich.padding import Padding
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from dlperf.printable import printable, printable_json
from dlperf.stats import ci_text
from dlperf.warning_kinds import group_warnings


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


def _width(stream: TextIO) -> int | None:
    """The terminal's width; $COLUMNS where it is set (rich reads it); else 120 columns in a
    pipe or a file, where lines are not shown in a window."""
    return None if stream.isatty() or os.environ.get("COLUMNS", "").isdigit() else 120


console = PrintableConsole(width=_width(sys.stdout))
err = PrintableConsole(stderr=True, width=_width(sys.stderr))


def print_whole(out: Console, before: str, name: object, after: str = "", **kwargs) -> None:
    """A line that names a path or an id (`before` and `after` are rich markup, `name` is
    shown as it is): `name` whole, never broken or cut. Rich moves a word that does not fit to
    the next line; one wider than the console it would fold mid-name, so that one goes on a
    line of its own, unwrapped (a window narrower than it folds it on screen, a copy gives it
    whole)."""
    text = esc(str(name))
    if cell_len(str(name)) + 1 < out.width:
        out.print(f"{before}{' ' if before else ''}{text}{after}", **kwargs)
        return
    if before:
        out.print(before, **kwargs)
    out.print(text, soft_wrap=True, **kwargs)
    if after:
        out.print(after.lstrip(), **kwargs)


def indented(markup: str, indent: int = 2) -> Padding:
    """Rich markup wrapped between words with every line `indent` columns in (the way a note
    under a heading reads)."""
    return Padding(Text.from_markup(markup), (0, 0, 0, indent), expand=False)


def print_plain(out: Console, text: str, **kwargs) -> None:
    """Plain text (no markup) whose words are paths or ids made elsewhere: wrapped between
    words, and a word wider than the console on a line of its own, never broken."""
    line: list[str] = []
    for word in text.split(" "):
        if cell_len(word) + 1 < out.width:
            line.append(word)
            continue
        if line:
            out.print(esc(" ".join(line)), **kwargs)
            line = []
        out.print(esc(word), soft_wrap=True, **kwargs)
    if line:
        out.print(esc(" ".join(line)), **kwargs)


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


def headline(result) -> str:
    """One line: the configuration and its number (score, LoadGen metric or throughput)."""
    s, m = result.spec, result.metrics
    name = f"{s.framework} {s.model} {s.mode} {s.nodes}n{s.devices_per_node}d b{s.batch_size}"
    if m.loadgen_metric:
        valid = "VALID" if m.loadgen_valid else "INVALID"
        run, lg = result.repeats[0].loadgen, m.loadgen_metric
        return f"{name} {run.scenario}: {run.metric} {lg.median:.6g} {lg.unit} ({valid})"
    if m.score is not None and "mlperf-training" in m.peer:
        per = f", {m.throughput.median / s.world_size:.0f} samples/s per accelerator"
        return f"{name}: MLPerf score {m.score:.6g} {m.score_unit}{per if m.throughput else ''}"
    if m.score is not None:
        return f"{name}: {m.score:.6g} {m.score_unit}"
    if m.throughput:
        t = m.throughput
        return f"{name} {s.precision}: median {t.median:.2f} samples/s over {t.n}"
    return f"{name}: no usable repeat"


def whole_column(table: Table, header: str, names: Iterable[str], **kwargs) -> None:
    """A table column of ids or paths as wide as the longest name's longest word, so rich
    never cuts one with "…" nor breaks it mid-name: the other columns wrap instead (a name's
    words after its first, like a configuration's settings, wrap below it)."""
    words = [w for name in names for w in str(name).split()]
    # A fixed width: rich narrows the other columns to fit, never this one.
    width = max(map(cell_len, [*words, header]), default=0)
    table.add_column(header, width=width, **kwargs)


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


def envs_table(records) -> Table:
    """The environments, by name (the folder's name under the envs root, said below it)."""
    table = Table()
    whole_column(table, "name", [r.name for r in records], no_wrap=True)
    for header in ("state", "framework version", "python", "size"):
        table.add_column(header)
    for r in records:
        size = f"{r.size_bytes / 2**30:.2f} GiB" if r.size_bytes else "—"
        table.add_row(esc(r.name), r.state, esc(r.framework_version or "—"), r.python or "—", size)
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


def print_sources(out: Console, states) -> None:
    """Every manifest, by profile: its name whole (what --source takes), what it runs and its
    checkout's state on one line, its pin, log format and environment on the next."""
    states = sorted(states, key=lambda st: (st.manifest.profile, st.manifest.name))
    names = {st.manifest.name: st.manifest.name + (" *" if st.manifest.default else "")
             for st in states}  # fmt: skip
    name_width = max(map(cell_len, names.values()), default=0)
    runs_width = max((len(f"{st.manifest.framework} {st.manifest.model}") for st in states),
                     default=0)  # fmt: skip
    profile = None
    for st in states:
        m = st.manifest
        if m.profile != profile:
            profile = m.profile
            out.print(f"[bold]profile {esc(profile)}[/]", highlight=False)
        env = m.environment
        where = (f"{env.runtime} {env.image}" if env.kind == "container"
                 else f"pip py{env.python}")  # fmt: skip
        runs = f"{m.framework} {m.model}"
        out.print(f"  {esc(names[m.name]):<{name_width}}  {esc(runs):<{runs_width}}  "
                  f"{esc(st.state)}", highlight=False)  # fmt: skip
        detail = f"[dim]pin {esc(m.upstream.short)} · log {esc(m.log_format)} · env {esc(where)}[/]"
        out.print(indented(detail, 6), highlight=False)


def print_frameworks(out: Console, rows) -> None:
    """`dlperf list`: per framework (and its env's state) each model, its implementations
    (official manifests named whole) and what it is, wrapped between words."""
    from itertools import groupby

    for (framework, state), group in groupby(rows, key=lambda r: (r[0], r[1])):
        out.print(f"[bold]{esc(framework)}[/] (env cpu: {esc(state)})", highlight=False)
        table = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False)
        group = list(group)
        table.add_column(min_width=max(len(r[2]) for r in group) + 2, no_wrap=True)
        table.add_column()
        for _, _, model, impls, description in group:
            table.add_row(f"  {esc(model)}", f"{esc(impls)}\n[dim]{esc(description)}[/]")
        out.print(table, highlight=False)


def score_tables(s) -> tuple[Table, Table]:
    """Each scored configuration (where V0's hierarchy puts it, its speedup and weight), and
    each domain's subscore."""
    # The keys a reference holds, whole (their settings wrap below), under their place.
    configs = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    whole_column(configs, "configuration", s.placement)
    places = [" / ".join(placement) for placement in s.placement.values()]
    configs.columns[0].width = max([configs.columns[0].width or 0, *map(cell_len, places)])
    configs.add_column("speedup", justify="right")
    configs.add_column("weight", justify="right")
    place = None
    for key, placement in sorted(s.placement.items(), key=lambda kv: kv[1]):
        if placement != place:
            place = placement
            configs.add_row(f"[bold]{esc(' / '.join(placement))}[/]", "", "")
        configs.add_row(esc(key), f"{s.speedups[key]:.4f}", f"{s.weights[key]:.4f}")
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


def history_tables(points) -> list[RenderableType]:
    """Each series (a benchmark on a machine): a heading, one line per point (its result id,
    median, repeats, change and verdict), then what the first point ran with and what changed
    at each later one, as prose below (`--json` has every field)."""
    from itertools import groupby

    shown: list[RenderableType] = []
    for _series, group in groupby(points, key=lambda p: p.series):
        group = list(group)
        unit = next((p.unit for p in group if p.median is not None), None)
        heading = f"[bold]{esc(group[0].benchmark_id)}[/] on {esc(group[0].machine)}"
        shown.append(Text.from_markup(heading + (f" (medians in {esc(unit)})" if unit else "")))
        table = Table(box=None, padding=(0, 1), pad_edge=False)
        whole_column(table, "result", [p.result_id for p in group], no_wrap=True)
        for header in ("median", "n", "change"):
            table.add_column(header, justify="right", no_wrap=True)
        table.add_column("verdict")
        for p in group:
            table.add_row(*_history_row(p))
        shown.append(Padding(table, (0, 0, 0, 2), expand=False))
        shown += [indented(line) for line in _history_notes(group)]
    return shown


def _history_row(p) -> list[str]:
    style = VERDICT_STYLES.get(p.verdict, "")
    verdict = f"[{style}]{esc(p.verdict)}[/]" if style else esc(p.verdict)
    if p.p is not None:
        verdict += f" (p {p.p:.2g})"
    return [
        esc(p.result_id),
        f"{p.median:.4g}" if p.median is not None else esc(p.status),
        str(p.n),
        f"{p.change:+.1%}" if p.change is not None else "–",
        verdict,
    ]


def _history_notes(group) -> list[str]:
    """The first point's settings, versions and commits; each later point's changes."""
    from dlperf.identity import commit_label, settings_label

    first = group[0]
    versions = " · ".join(
        f"{name} {value}"
        for name, value in (
            ("fw", first.framework_version),
            ("py", first.python),
            ("dlperf", first.dlperf_version),
        )  # fmt: skip
        if value
    )
    commits = " · ".join(
        f"{name}@{label}"
        for name, label in (
            ("dlperf", commit_label(first.dlperf_commit, first.dlperf_dirty)),
            ("workdir", commit_label(first.workdir_commit, first.workdir_dirty)),
            ("upstream", commit_label(first.source_commit, None)),
        )
        if label
    )
    settings = first.settings_map
    parts = [f"settings {settings_label(settings)}" if settings else "", versions, commits]
    lines = [f"[dim]{esc(first.result_id)} ran with[/] {esc('; '.join(x for x in parts if x))}"]
    for p in group[1:]:
        if p.changes:
            lines.append(f"[dim]{esc(p.result_id)} changed since the point before:[/] "
                         f"{esc('; '.join(p.changes))}")  # fmt: skip
    return lines
