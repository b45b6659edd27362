"""How one number or one table reads in a report: pure text, no ordering or selection."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from dlperf.report._data import first_failed, ok_count
from dlperf.schema import Result, ResultStatus

DASH = "—"


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines, and the blank line after it."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return [*out, ""]


def median_text(result: Result, with_counts: bool = True) -> str:
    """The median samples/s, "failed (why)", and `(k/n ok)` / `(noisy)` where they apply."""
    t = result.metrics.throughput
    if result.status == ResultStatus.failed or t is None:
        failed = first_failed(result)
        return f"failed ({failed.status.value if failed else 'no repeats'})"
    text = f"{t.median:.2f}"
    if with_counts and result.status == ResultStatus.partial:
        text += f" ({ok_count(result)}/{len(result.repeats)} ok)"
    if result.metrics.noisy:
        text += " (noisy)"
    return text


def loadgen_cell(result: Result) -> str:
    """A LoadGen configuration's number: its scenario's metric in its unit over the VALID
    repeats, and how many repeats LoadGen judged VALID."""
    runs = [r.loadgen for r in result.repeats if r.loadgen]
    valid = sum(run.valid for run in runs)
    verdict = (
        "VALID" if runs and valid == len(runs) else f"INVALID ({len(runs) - valid}/{len(runs)})"
    )
    m = result.metrics.loadgen_metric
    if m is None:
        return verdict if runs else median_text(result)
    # The metric's name where the unit does not say it: "scheduled", "early-stopping p90".
    which = (runs[0].metric if runs else "").replace("samples per second", "")
    which = which.replace(" latency", "").strip()
    return f"{m.median:.2f} {m.unit}{f' {which}' if which else ''}, {verdict}"


def loadgen_details(result: Result) -> str:
    """What LoadGen measured beside the headline, medians over the VALID runs (all runs when
    none is VALID): completed and scheduled samples/s, tokens/s, early-stopping estimates."""
    runs = [r.loadgen for r in result.repeats if r.loadgen]
    runs = [run for run in runs if run.valid] or runs
    if not runs:
        return DASH

    parts = []
    for label, pick in (
        ("completed", lambda run: run.samples_per_second if run.scenario == "Server" else None),
        ("scheduled", lambda run: run.scheduled_samples_per_second),
    ):
        values = [v for v in map(pick, runs) if v is not None]
        if values:
            parts.append(f"{label} {statistics.median(values):.2f} samples/s")
    tokens = [run.tokens_per_second for run in runs if run.tokens_per_second is not None]
    if tokens:
        parts.append(f"{statistics.median(tokens):.1f} tokens/s")
    for pct in ("p90", "p99"):
        estimates = [run.early_stopping_ms[pct] for run in runs if pct in run.early_stopping_ms]
        if estimates:
            parts.append(f"early-stopping {pct} {statistics.median(estimates):.2f} ms")
    return "; ".join(parts) or DASH


def headline_text(result: Result) -> str:
    """A result's number in the cross-framework table: LoadGen's metric, else samples/s."""
    return loadgen_cell(result) if result.spec.scenario else median_text(result)


def window_text(result: Result) -> str:
    """The window asked for, and the marks actually used when the log's marks were coarser."""
    s = result.spec
    asked = f"skip {s.skip}, measure {s.measure}"
    used = {(r.window.start_step, r.window.end_step) for r in result.repeats if r.window}
    if not used and result.origin == "parse":
        return DASH  # imported LoadGen or FAMBench logs: their tools' numbers, no step window
    if not used or used == {(s.skip, s.skip + s.measure)}:
        return asked
    steps = ", ".join(f"{a}–{b}" for a, b in sorted(used))
    return f"{asked} (marks used: steps {steps})"


def per_joule_text(result: Result) -> str:
    value = result.metrics.samples_per_joule
    return DASH if value is None else f"{value:.4g}"


def measured_text(value: float | None, unit: str) -> str:
    """A median of the compared metric: samples/s bare (the page's unit), others with theirs."""
    if value is None:
        return "no ok repeat"
    return f"{value:.2f}" + ("" if unit == "samples/s" else f" {unit}")
