"""`dlperf report`, `publish` and `export`: stored results written out for people (Markdown
reports and charts, a static HTML site) and for other tools (SuperBench, CSV, Parquet, JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape as esc

import dlperf.cli.options as o
import dlperf.cli.report_options as rpo
from dlperf import DlperfError
from dlperf.cli.output import (
    console,
    err,
    print_plain,
    print_whole,
    write_data,
    write_json,
    write_text,
)
from dlperf.files import atomic_write
from dlperf.store import DEFAULT_RESULTS_DIR

if TYPE_CHECKING:  # the CLI imports the core when a command runs
    from dlperf.schema import Result


DEFAULT_REPORTS_DIR = Path("reports")


def report(
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    out: rpo.ReportsOut = None,
    style: rpo.ReportStyle = "dlperf",
    reports_dir: rpo.ReportsDirAlias = None,
) -> None:
    """Write the Markdown reports and their charts.

    reports/MODEL.md and its PNG charts for each model, from the results folder."""
    from dlperf.report import write_fambench_report, write_reports
    from dlperf.store import ResultStore

    reports_dir = one_spelling(out, reports_dir, "--out", "--reports-dir") or DEFAULT_REPORTS_DIR
    check_results_folder(results_dir)
    store = ResultStore(results_dir)
    if not store.paths():
        raise DlperfError(f"no results in {results_dir}; run `dlperf run ...` first")
    if style == "fambench":
        paths, table = write_fambench_report(results_dir, reports_dir)
        write_text(table)
        for path in paths:
            print_whole(console, "wrote", path)
        return
    results = store.results()
    for p in write_reports(results_dir, reports_dir, results):
        print_whole(console, "wrote", p)
    _print_suspect_scaling(results)


def one_spelling(value: Path | None, alias: Path | None, name: str, old: str) -> Path | None:
    """An option given by its name or by its older spelling (kept working, hidden from the
    help); both at once only when they agree."""
    if value is not None and alias is not None and value != alias:
        raise DlperfError(f"{old} is the older spelling of {name}: give {name} once")
    return value if value is not None else alias


def check_results_folder(results_dir: Path) -> None:
    """Refuse a results folder that is not there, saying so (an empty one is `no results`)."""
    if not results_dir.exists():
        raise DlperfError(
            f"no such folder: {results_dir}; give the folder your results are in with "
            f"--results-dir (`dlperf run` stores them in {DEFAULT_RESULTS_DIR}/ of the folder "
            "it runs in)"
        )


def _print_suspect_scaling(results: list[Result]) -> None:
    """Each data-parallel result that scales better than linearly against its 1x1 run."""
    from dlperf.analysis import SUSPECT_EFFICIENCY, suspect_scaling
    from dlperf.identity import describe

    for result, efficiency in suspect_scaling(results):
        console.print(
            f"[yellow]suspect:[/] {esc(describe(result.spec))} scales at {efficiency:.1%} of "
            f"linear (> {SUSPECT_EFFICIENCY:.0%}); rerun it and its 1x1 on an idle machine",
            highlight=False,
        )


def publish(
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    out: rpo.SiteDir = Path("site"),
) -> None:
    """Write a static HTML site of the results (works offline).

    An index of models and configurations, a page per model with interactive charts
    (frameworks side by side, scaling, latency percentiles, history, energy), the report's
    tables and every raw result; it opens from disk."""
    from dlperf.report.site import describe_site, write_site

    check_results_folder(results_dir)
    site = write_site(results_dir, out)
    print_plain(console, f"wrote {describe_site(site)}")


def export(
    format_: rpo.ExportFormat,
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    out: rpo.OutFile = None,
) -> None:
    """Results for other tools: SuperBench, CSV, Parquet, JSON.

    SuperBench's results-summary.jsonl (one line per node, its names and statistics), or a
    table (CSV, Parquet, JSON) of the newest result of each configuration."""
    from dlperf.store import ResultStore, newest

    if format_ == "parquet" and out is None:
        raise DlperfError("--format parquet is binary: give --out FILE")
    check_results_folder(results_dir)
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
