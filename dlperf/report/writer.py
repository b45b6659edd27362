"""Write reports/<model>.md, reports/<model>.png and reports/README.md from a results folder."""

from __future__ import annotations

import re
from pathlib import Path

from dlperf.files import atomic_write, check_writable, replaced
from dlperf.gitinfo import last_commit_touching
from dlperf.models import MODELS
from dlperf.report._data import configs, frameworks, scaling_series, select
from dlperf.report.chart import render_chart, render_scaling_chart
from dlperf.report.markdown import GENERATED, render_model_report
from dlperf.report.suites import fambench_summary, fambench_table
from dlperf.schema import Result, ResultStatus
from dlperf.store import ResultStore, newest


def file_stem(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", model)


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
        stem = file_stem(model)
        md = reports_dir / f"{stem}.md"
        atomic_write(md, render_model_report(results, model, commit))
        png = reports_dir / f"{stem}.png"
        with replaced(png) as tmp:
            render_chart(results, model, tmp)
        written += [md, png]
        scaling = reports_dir / f"{stem}-scaling.png"
        if scaling_series(results, model):
            with replaced(scaling) as tmp:
                render_scaling_chart(results, model, tmp)
            written.append(scaling)
        else:
            scaling.unlink(missing_ok=True)
    index = reports_dir / "README.md"
    atomic_write(index, render_index(results))
    written.append(index)
    remove_stale_pages(reports_dir, {file_stem(m) for m in models})
    return written


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
            for path in (page, reports_dir / f"{stem}.png", reports_dir / f"{stem}-scaling.png"):
                if path.exists():
                    path.unlink()
                    removed.append(path)
    return removed


FAMBENCH_SUMMARY_FILE = "fambench_summary.txt"


def write_fambench_report(results_dir: Path, reports_dir: Path) -> tuple[list[Path], str]:
    """Write, for the newest result of each configuration, reports/fambench.md (FAMBench's
    README table, a row per configuration) and reports/fambench_summary.txt (its
    result_summarizer's summary.txt, a row per log); returns the written paths and the table."""
    results = ResultStore(results_dir).newest()
    check_writable(reports_dir, "the reports folder")
    table = fambench_table(results)
    heading = "# Results in FAMBench's format\n\n"
    md = atomic_write(reports_dir / "fambench.md", heading + table)
    summary = atomic_write(reports_dir / FAMBENCH_SUMMARY_FILE, fambench_summary(results))
    return [md, summary], table


def render_index(results: list[Result]) -> str:
    lines = ["# dlperf reports", "", GENERATED, ""]
    models = sorted({r.spec.model for r in results})
    if not models:
        return "\n".join([*lines, "No results yet: run `dlperf run` first.", ""])
    # A configuration is a row of a page's cross-framework table; each framework's result in
    # it counts once as ok, partial or failed, so those three add up to the results.
    lines += [
        "| model | description | frameworks | configurations | results | ok | partial | failed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for model in models:
        chosen = select(results, model)
        desc = MODELS[model].description if model in MODELS else model
        counts = [str(sum(r.status == s for r in chosen)) for s in ResultStatus]
        row = [f"[{model}]({file_stem(model)}.md)", desc, ", ".join(frameworks(chosen))]
        row += [str(len(configs(chosen))), str(len(chosen)), *counts]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines) + "\n"
