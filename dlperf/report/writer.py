"""Write reports/<model>.md, its charts and reports/README.md from a results folder.

A model's charts are `<model>.png` (and `<model>-scaling.png`) when its results come from one
machine, else one per machine: `<model>-<machine id>.png` (`_data.chart_file`)."""

from __future__ import annotations

import re
from pathlib import Path

from dlperf.files import atomic_write, check_writable, replaced
from dlperf.gitinfo import last_commit_touching
from dlperf.models import MODELS
from dlperf.published import is_published_reference
from dlperf.report._data import (
    by_machine,
    chart_file,
    configs,
    file_stem,
    frameworks,
    scaling_series,
    select,
)
from dlperf.report.cells import DASH, Markdown, table, text
from dlperf.report.chart import render_chart, render_scaling_chart
from dlperf.report.markdown import GENERATED, render_model_report
from dlperf.report.references import references_line
from dlperf.report.suites import fambench_summary, fambench_table
from dlperf.schema import Result, ResultStatus
from dlperf.store import ResultStore, newest


def write_reports(
    results_dir: Path, reports_dir: Path, loaded: list[Result] | None = None
) -> list[Path]:
    """Regenerate every model's report and chart plus the index; returns the written paths.
    `loaded`: the results of `results_dir` when the caller has read them already.

    Each page is written whole or not at all (a full disk leaves the previous page, never half
    of a new one, and a StorageError naming the file)."""
    results = newest(ResultStore(results_dir).results() if loaded is None else loaded)
    models = sorted({r.spec.model for r in results})
    check_writable(reports_dir, "the reports folder")
    commit = results_commit(results_dir)
    written: list[Path] = []
    for model in models:
        md = reports_dir / f"{file_stem(model)}.md"
        atomic_write(md, render_model_report(results, model, commit))
        written.append(md)
        machines = by_machine(select(results, model))
        for machine, mine in machines:
            name = machine.id if len(machines) > 1 else None
            png = reports_dir / chart_file(model, name)
            with replaced(png) as tmp:
                render_chart(mine, model, tmp)
            written.append(png)
            if scaling_series(mine, model):
                scaling = reports_dir / chart_file(model, name, "scaling")
                with replaced(scaling) as tmp:
                    render_scaling_chart(mine, model, tmp)
                written.append(scaling)
        remove_stale_charts(reports_dir, model, set(written))
    index = reports_dir / "README.md"
    atomic_write(index, render_index(results))
    written.append(index)
    remove_stale_pages(reports_dir, {file_stem(m) for m in models})
    return written


def _charts_of(reports_dir: Path, model: str) -> list[Path]:
    """The chart files `write_reports` may have written for `model` (any machine)."""
    # A machine id: 16 hex digits, or the 8 of charts written before ids grew (stale now).
    machine = r"(-[0-9a-f]{8}(?:[0-9a-f]{8})?|-unknown)?"
    pattern = re.compile(re.escape(file_stem(model)) + machine + r"(-scaling)?\.png")
    return [p for p in sorted(reports_dir.glob("*.png")) if pattern.fullmatch(p.name)]


def remove_stale_charts(reports_dir: Path, model: str, kept: set[Path]) -> list[Path]:
    """Remove `model`'s charts that this run did not write (a machine, or its scaling, gone;
    one machine's `<model>.png` after a second machine came)."""
    removed = [p for p in _charts_of(reports_dir, model) if p not in kept]
    for path in removed:
        path.unlink()
    return removed


def results_commit(results_dir: Path) -> str | None:
    """The last git commit that changed the results folder, when git tracks it (a team that
    commits its results); None when it is not in a repository, untracked or ignored."""
    return last_commit_touching(results_dir)


def remove_stale_pages(reports_dir: Path, kept: set[str]) -> list[Path]:
    """Remove the pages (and their charts) of models that no longer have results: only pages
    this command wrote (they carry the GENERATED line), never a file someone put there."""
    removed = []
    for page in sorted(reports_dir.glob("*.md")):
        stem = page.stem
        if stem in kept or page.name in ("README.md", "fambench.md"):
            continue
        try:
            ours = GENERATED in page.read_text(errors="replace")
        except OSError:
            continue
        if ours:
            for path in [page, *_charts_of(reports_dir, stem)]:
                path.unlink()
                removed.append(path)
    return removed


FAMBENCH_SUMMARY_FILE = "fambench_summary.txt"


def write_fambench_report(results_dir: Path, reports_dir: Path) -> tuple[list[Path], str]:
    """Write, for the newest result of each configuration, reports/fambench.md (FAMBench's
    README table, a row per configuration) and reports/fambench_summary.txt (its
    result_summarizer's summary.txt, a row per log); returns the written paths and the table."""
    stored = ResultStore(results_dir).newest()
    check_writable(reports_dir, "the reports folder")
    # FAMBench's table holds runs of this machine and FAMBench's own logs: a published MLPerf
    # Training result (another system's time to train, in minutes) is no row of it.
    results = [r for r in stored if not is_published_reference(r)]
    table = fambench_table(results) + published_left_out(len(stored) - len(results))
    heading = "# Results in FAMBench's format\n\n"
    md = atomic_write(reports_dir / "fambench.md", heading + table)
    summary = atomic_write(reports_dir / FAMBENCH_SUMMARY_FILE, fambench_summary(results))
    return [md, summary], table


def published_left_out(count: int) -> str:
    """The line under FAMBench's table that says which imported results are not in it."""
    if not count:
        return ""
    return (
        f"\n{count} published MLPerf Training result(s), imported with `dlperf parse "
        "mlperf-training`, are left out: each is another system's time to train (MLPerf's "
        "score, in minutes), not a FAMBench score of a run; the model reports (`dlperf report`) "
        "show them apart, as published references.\n"
    )


def render_index(results: list[Result]) -> str:
    lines = ["# dlperf reports", "", GENERATED, ""]
    models = sorted({r.spec.model for r in results})
    if not models:
        return "\n".join([*lines, "No results yet: run `dlperf run` first.", ""])
    # A configuration is a row of a page's cross-framework tables (one machine's); each
    # result (a framework's, with its settings) counts once as ok, partial or failed, so
    # those three add up to the results.
    rows = []
    for model in models:
        chosen = select(results, model)
        desc = MODELS[model].description if model in MODELS else model
        counts = [str(sum(r.status == s for r in chosen)) for s in ResultStatus]
        row = [Markdown(f"[{text(model)}]({file_stem(model)}.md)"), desc,
               ", ".join(frameworks(chosen)) or DASH]  # fmt: skip
        row += [str(len(by_machine(chosen))), str(len(configs(chosen))), str(len(chosen)), *counts]
        rows.append(row)
    header = ["model", "description", "frameworks", "machines", "configurations", "results", "ok",
              "partial", "failed"]  # fmt: skip
    lines += table(header, rows)
    return "\n".join([*lines, *references_line(results)]).rstrip("\n") + "\n"
