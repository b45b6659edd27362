"""What `dlperf score`, `dlperf history` and `dlperf compare` show: the scored configurations
and domain subscores, each series' points with their verdicts and what changed between them,
and each compared pair with its verdict, what differs and why a change is within noise."""

from __future__ import annotations

from rich import box
from rich.cells import cell_len
from rich.console import RenderableType
from rich.markup import escape as esc
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from dlperf.cli.output import indented, whole_column
from dlperf.printable import figure


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
        domains.add_row(esc(domain), f"{value:.1f}", f"{1 / len(s.domains):.4f}", str(tasks))
    return configs, domains


VERDICT_STYLES = {
    "regression": "bold red",
    "improvement": "bold green",
    "within noise": "yellow",
    "no change": "dim",
    "failed": "red",
    "first": "dim",
    "machine unknown": "dim",
}


def history_tables(points) -> list[RenderableType]:
    """Each series (a benchmark on a machine): a heading, one line per point (its result id,
    median, repeats, change and verdict), then what the first point ran with and what changed
    at each later one, as prose below (`--json` has every field)."""
    from itertools import groupby

    from dlperf.identity import machine_names

    # Two machines with one label ("AMD EPYC, 2 CPUs") get their ids: never two equal headings.
    names = machine_names((p.machine_id, p.machine) for p in points)
    shown: list[RenderableType] = []
    for _series, group in groupby(points, key=lambda p: p.series):
        group = list(group)
        unit = next((p.unit for p in group if p.median is not None), None)
        machine = names[(group[0].machine_id, group[0].machine)]
        heading = f"[bold]{esc(group[0].benchmark_id)}[/] on {esc(machine)}"
        shown.append(Text.from_markup(heading + (f" (medians in {esc(unit)})" if unit else "")))
        table = Table(box=None, padding=(0, 1), pad_edge=False)
        whole_column(table, "result", [p.result_id for p in group], no_wrap=True)
        _figures_and_verdict(table, ("median", "n", "change"))
        for p in group:
            table.add_row(*_history_row(p))
        shown.append(Padding(table, (0, 0, 0, 2), expand=False))
        shown += [indented(line) for line in _history_notes(group)]
    return shown


def _figures_and_verdict(table: Table, figures: tuple[str, ...]) -> None:
    """The columns history and compare share: figures right-aligned and never wrapped, then
    the verdict."""
    for header in figures:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("verdict")


def _verdict(verdict: str, p: float | None) -> str:
    """A verdict in its colour, with its p-value where a test gave one."""
    style = VERDICT_STYLES.get(verdict, "")
    text = f"[{style}]{esc(verdict)}[/]" if style else esc(verdict)
    return text + (f" (p {p:.2g})" if p is not None else "")


def _history_row(p) -> list[str]:
    return [
        esc(p.result_id),
        figure(p.median) if p.median is not None else esc(p.status),
        str(p.n),
        f"{p.change:+.1%}" if p.change is not None else "–",
        _verdict(p.verdict, p.p),
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


def compare_output(c) -> list[RenderableType]:
    """`dlperf compare` on a terminal: the machines, the test, then each benchmark on its
    machine(s) as a heading over a table of its pairs (A's settings, both medians, the change,
    the verdict), with what differs and why a change is "within noise" below; what is only on
    one side; why nothing was comparable. Ids and names whole, numbers never cut: only the
    settings and the prose wrap, between words."""
    from itertools import groupby

    from dlperf.compare import machines_line, noise_note, references_line, test_line

    if c.across_machines:
        shown: list[RenderableType] = [Text("Across machines (asked for with --across-machines):")]
        shown += [indented(f"{side} ran on {esc('; '.join(names))}")
                  for side, names in (("A", c.machines_a), ("B", c.machines_b))]  # fmt: skip
    elif len(c.machines) == 1:
        shown = [Text(machines_line(c))]
    else:  # a folder of several machines: each compared with its own
        shown = [Text("Machines:"), *(indented(esc(name)) for name in c.machines)]
    shown.append(Text(test_line(c)))
    left_out = references_line(c)
    shown += [Text(left_out)] if left_out else []
    rows = sorted(c.rows, key=lambda r: (r.name, r.machine, r.machine_b or "", r.settings_a))
    for (benchmark, machine, machine_b), group in groupby(
        rows, key=lambda r: (r.name, r.machine, r.machine_b)
    ):
        group = list(group)
        where = esc(machine) + (f" -> {esc(machine_b)}" if machine_b else "")
        units = {r.metric for r in group}
        heading = f"[bold]{esc(benchmark)}[/] on {where}"
        heading += f" (medians in {esc(units.pop())})" if len(units) == 1 else ""
        shown += [Text(""), Text.from_markup(heading)]
        table = Table(box=None, padding=(0, 1), pad_edge=False)
        table.add_column("settings (A)")
        _figures_and_verdict(table, ("A", "B", "change"))
        for r in group:
            table.add_row(*_compare_row(r))
        shown.append(Padding(table, (0, 0, 0, 2), expand=False))
        for r in group:
            first = esc(f"[{r.settings_a}] ") if len(group) > 1 else ""
            if r.differences:
                shown.append(indented(f"{first}[dim]differs:[/] {esc('; '.join(r.differences))}"))
            note = noise_note(r, c.threshold)
            if note:
                shown.append(indented(f"{first}[yellow]why within noise:[/] {esc(note)}"))
    for side, names in (("A", c.only_a), ("B", c.only_b)):
        if names:
            shown += [Text(""), Text(f"only in {side} (nothing to pair with in the other side):")]
            shown += [indented(esc(name)) for name in names]
    if c.notes:
        shown.append(Text(""))
    shown += [Text(note) for note in c.notes]
    if c.reason:
        shown += [Text(""), Text.from_markup(f"[bold]Nothing compared:[/] {esc(c.reason)}.")]
    return shown


def _compare_row(r) -> list[str]:
    return [
        esc(r.settings_a),
        figure(r.a),
        figure(r.b),
        f"{r.change:+.1%}",
        _verdict(r.verdict, r.p),
    ]
