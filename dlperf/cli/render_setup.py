"""What the command line shows of what is set up on this machine: frameworks and models
(`list`), environments (`env list`), upstream sources (`sources list`), the model checks
(`check-models`) and the machine's checks and CPU peak (`doctor`)."""

from __future__ import annotations

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape as esc
from rich.table import Table

from dlperf.cli.output import console, indented, whole_column


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


def model_checks_table(checks) -> Table:
    """The model checks, a row per (framework, model) with its shape below the model: the
    numbers the command exists to check (parameter counts, the catalog's, FLOPs per sample)
    always whole, in columns as wide as their widest number, never wrapped; the names give way
    instead. Why a row failed is said below the table (`model_check_problems`), not in it."""
    rows = []
    for c in checks:
        flops = f"{c.flops_per_sample / 1e9:.3f}" if c.flops_per_sample else "—"
        params = f"{c.params:,}" if c.params is not None else "—"
        verdict = "[green]ok[/]" if c.ok else "[red]MISMATCH[/]"
        rows.append((esc(c.framework), f"{esc(c.model)}\n[dim]{esc(c.shape)}[/]", params,
                     f"{c.expected_params:,}", flops, verdict))  # fmt: skip
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("framework", overflow="fold")
    table.add_column("model", overflow="fold")
    for i, header in enumerate(("params", "expected", "GFLOPs\nper sample"), start=2):
        width = max(cell_len(line) for line in [*(r[i] for r in rows), *header.split("\n")])
        table.add_column(header, justify="right", no_wrap=True, min_width=width)
    table.add_column("check", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def model_check_problems(checks) -> list[str]:
    """Each failed check's reason, one line each (rich markup), for below the table."""
    said = []
    for c in checks:
        if c.ok:
            continue
        if c.error:
            why = esc(c.error)
        elif c.params != c.expected_params:
            got = "none" if c.params is None else f"{c.params:,}"
            why = f"{got} parameters; the catalog's model has {c.expected_params:,}"
        elif c.flops_per_sample and c.reference_flops:
            why = (f"{c.flops_per_sample / 1e9:.3f} GFLOPs per sample; the frameworks' median "
                   f"is {c.reference_flops / 1e9:.3f}")  # fmt: skip
        else:
            why = "the workload reported no FLOPs per sample"
        said.append(f"[red]MISMATCH[/] {esc(c.framework)} {esc(c.model)}: {why}")
    return said


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
