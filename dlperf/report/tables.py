"""The tables of one machine's results on a model's page: cross-framework, scaling, ablation
and one section per framework. Each function takes one machine's results (`by_machine`) and
the heading level its section starts at; nothing here mixes machines."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from dlperf.analysis import SUSPECT_EFFICIENCY, max_other_share
from dlperf.identity import identity_of
from dlperf.report._data import (
    ABLATION_THRESHOLD,
    Config,
    ablations,
    configs,
    cross_framework_grid,
    first_failed,
    is_default,
    ok_count,
    one_line,
)
from dlperf.report.cells import (
    DASH,
    Markdown,
    code,
    headline_text,
    loadgen_cell,
    loadgen_details,
    md,
    measured_text,
    median_text,
    per_joule_text,
    table,
    text,
    window_text,
)
from dlperf.schema import Result, ResultStatus
from dlperf.stats import ci_text


def heading(level: int, title: object) -> list[str]:
    """A heading and the blank line after it; `title` as `md` reads it."""
    return [f"{'#' * level} {md(title)}", ""]


def _cells(results: list[Result] | float) -> str:
    """One cross-framework cell: the framework's headline result; several official upstreams
    are all shown, each with its manifest. A grid cell the framework did not run is NaN."""
    if not isinstance(results, list):
        return DASH
    if len(results) == 1:
        return headline_text(results[0])
    return "; ".join(f"{headline_text(r)} ({r.spec.source or r.id})" for r in results)


def cross_framework(results: Sequence[Result], image: str, alt: str, level: int) -> list[str]:
    """The cross-framework table of one machine's results and its chart (`image`)."""
    grid = cross_framework_grid(results)
    header = ["mode", "precision", "device", "batch/device", "shape", "nodes x devices", "impl",
              *grid.columns]  # fmt: skip
    rows = []
    for c, cells in zip(configs(results), grid.map(_cells).itertuples(index=False), strict=True):
        row = [c.mode_label, c.precision_label, c.device, str(c.batch), c.shape_label,
               c.topology]  # fmt: skip
        rows.append([*row, c.impl_label, *cells])
    loadgen = (
        " (a LoadGen configuration: its scenario's metric over the VALID repeats, in its unit, "
        "and whether LoadGen judged every repeat VALID)"
        if any(r.spec.scenario for r in results)
        else ""
    )
    other_settings = " Results with other settings are in *Ablation*." if ablations(results) else ""
    return [
        *heading(level, "Cross-framework"),
        f"Median samples/s per configuration and framework{loadgen}, each framework with its "
        "default best practice (its settings: per-framework sections); `(k/n ok)` marks a "
        f"partial result (statistics over the ok repeats only), {DASH} a configuration not "
        "run. `ootb` is dlperf's own workload, `official` the framework's official upstream "
        "script (which upstream and commit: per-framework sections and *Implementations* "
        f"below).{other_settings}",
        "",
        *table(header, rows),
        f"![{text(alt)}]({image})",
        "",
    ]


def scaling(image: str, alt: str, level: int) -> list[str]:
    return [
        *heading(level, "Scaling"),
        "Speedup vs devices per framework, with the ideal line:",
        "",
        f"![{text(alt)}]({image})",
        "",
    ]


def ablation(results: Sequence[Result], level: int) -> list[str]:
    """Each settings variant of a benchmark against its default (the cross-framework number),
    judged by `dlperf compare`'s test; nothing when no benchmark ran with several settings."""
    found = ablations(results)
    if not found:
        return []
    rows = []
    for a in found:
        v = a.verdict
        change = DASH if v is None else f"{100 * v.change:+.1f}%"
        verdict = "no ok repeats to compare" if v is None else v.verdict
        test = DASH if v is None else v.test + (f", p={v.p:.3g}" if v.p is not None else "")
        rows.append(
            [
                code(identity_of(a.baseline).benchmark),
                Config.of(a.baseline).settings_text,
                Config.of(a.variant).settings_text,
                ", ".join(a.changes),
                measured_text(a.baseline_median, a.unit),
                measured_text(a.variant_median, a.unit),
                change,
                verdict,
                test,
            ]
        )
    header = ["benchmark", "baseline settings", "variant settings", "differs", "baseline median",
              "variant median", "change", "verdict", "test"]  # fmt: skip
    return [
        *heading(level, "Ablation"),
        "The same benchmark on this machine with other settings: each variant against the "
        "baseline (the framework's default best practice where it ran, else the newest "
        "settings), medians of the ok repeats in samples/s. The verdict is `dlperf compare`'s: "
        f"a change beyond {ABLATION_THRESHOLD:.0%} that is significant (exact Mann-Whitney U, "
        "or the means' 95% t-intervals not overlapping for three repeats or fewer) is an "
        "improvement or a regression.",
        "",
        *table(header, rows),
    ]


def framework_section(
    framework: str, results: Sequence[Result], footnotes: dict[str, int], level: int
) -> list[str]:
    """One framework's tables: one per configuration group, a row per topology, batch size
    and settings."""
    mine = [r for r in results if r.spec.framework == framework]  # already in config order
    variants: dict[tuple[str, str], int] = {}
    for r in mine:
        series = identity_of(r).series
        variants[series] = variants.get(series, 0) + 1
    lines = heading(level, framework)
    for _, group in groupby(mine, key=lambda r: Config.of(r).group()):
        group = list(group)
        lines += heading(level + 1, Config.of(group[0]).group_title())
        # Speedup and scaling efficiency compare topologies of this one configuration: a table
        # with a single topology has nothing to compare.
        scaled = len({(r.spec.nodes, r.spec.devices_per_node) for r in group}) > 1
        base = {
            (r.spec.batch_size, Config.of(r).settings): r.metrics.throughput.median
            for r in group
            if scaled
            and r.spec.world_size == 1
            and r.metrics.throughput is not None
            and r.status != ResultStatus.failed
        }
        config = Config.of(group[0])
        columns = ["nodes", "devices/node", "batch/device", "settings", "median samples/s"]
        if any(r.metrics.samples_per_joule is not None for r in group):
            columns += ["samples/J"]
        columns += ["speedup", "scaling efficiency"] if scaled else []
        if config.scenario:
            columns += ["LoadGen metric", "LoadGen details"]
        elif config.mode == "infer":
            columns += ["latency p50 / p99 (ms, interpolated)"]
        if any(r.metrics.score is not None for r in group):
            columns += ["score"]
        columns += ["min–max", "95% CI", "CV", "repeats ok", "MFU", "busy", "window"]
        rows, notes = [], []
        for r in group:
            c = Config.of(r)
            cells = framework_row(r, base.get((r.spec.batch_size, c.settings)), footnotes)
            several = variants[identity_of(r).series] > 1
            cells["settings"] = (c.settings_text if c.settings else DASH) + (
                " (default)" if several and is_default(r) else ""
            )
            rows.append([cells[name] for name in columns])
            failed = first_failed(r)
            if failed is not None:
                what = f"{r.spec.nodes}x{r.spec.devices_per_node}, batch {r.spec.batch_size}"
                what += f", {c.settings_text}" if several else ""
                message = one_line(failed.message) or "no message"
                notes.append(
                    f"- {text(what)}: {r.status.value}; repeat {failed.index} "
                    f"{failed.status.value}: {text(message)}"
                )
        lines += table(columns, rows)
        if notes:
            lines += [*notes, ""]
    return lines


def framework_row(result: Result, base: float | None, footnotes: dict[str, int]) -> dict[str, str]:
    """Every column a per-framework table may show, by name (each table picks those that
    apply to its configuration); "settings" is the caller's."""
    s, t, m = result.spec, result.metrics.throughput, result.metrics
    ok = result.status != ResultStatus.failed and t is not None
    speedup = f"{t.median / base:.2f}" if ok and base else DASH
    efficiency = DASH
    if ok and base:
        ratio = t.median / base / s.world_size
        efficiency = f"{100 * ratio:.1f}%" + (" (suspect)" if ratio > SUSPECT_EFFICIENCY else "")
    busy = max_other_share(result)
    mfu = DASH
    if ok and m.mfu is not None:
        mfu = f"{100 * m.mfu:.2f}%"
        if m.peak_source in footnotes:
            mfu = Markdown(f"{mfu}[^{footnotes[m.peak_source]}]")
    latency = DASH
    if "p50" in m.latency_ms and "p99" in m.latency_ms:
        latency = f"{m.latency_ms['p50']:.3g} / {m.latency_ms['p99']:.3g}"
    return {
        "nodes": str(s.nodes),
        "devices/node": str(s.devices_per_node),
        "batch/device": str(s.batch_size),
        "settings": DASH,
        "median samples/s": median_text(result, with_counts=False),
        "samples/J": per_joule_text(result),
        "speedup": speedup,
        "scaling efficiency": efficiency,
        "LoadGen metric": loadgen_cell(result) if s.scenario else DASH,
        "LoadGen details": loadgen_details(result),
        "latency p50 / p99 (ms, interpolated)": latency,
        "score": DASH if m.score is None else f"{m.score:.4g} {m.score_unit or ''}".rstrip(),
        "min–max": f"{t.min:.2f}–{t.max:.2f}" if ok else DASH,
        "95% CI": ci_text(t) if ok else DASH,
        "CV": f"{100 * t.cv:.1f}%" if ok else DASH,
        "repeats ok": f"{ok_count(result)}/{len(result.repeats)}",
        "MFU": mfu,
        "busy": DASH if busy is None else f"{100 * busy:.0f}%",
        "window": window_text(result),
    }
