"""Write reports/<model>.md, reports/<model>.png and reports/README.md from a results folder."""

from __future__ import annotations

import re
from pathlib import Path

from dlperf.models import MODELS
from dlperf.report._data import configs, frameworks, select
from dlperf.report.chart import render_chart, render_scaling_chart
from dlperf.report.markdown import GENERATED, render_model_report
from dlperf.schema import Result, ResultStatus
from dlperf.store import latest_per_config, load_results


def file_stem(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", model)


def write_reports(
    results_dir: Path, reports_dir: Path, loaded: list[Result] | None = None
) -> list[Path]:
    """Regenerate every model's report and chart plus the index; returns the written paths.
    `loaded`: the results of `results_dir` when the caller has read them already."""
    results = latest_per_config(load_results(results_dir) if loaded is None else loaded)
    models = sorted({r.spec.model for r in results})
    reports_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for model in models:
        stem = file_stem(model)
        md = reports_dir / f"{stem}.md"
        md.write_text(render_model_report(results, model))
        png = reports_dir / f"{stem}.png"
        render_chart(results, model, png)
        written += [md, png]
        scaling = reports_dir / f"{stem}-scaling.png"
        if render_scaling_chart(results, model, scaling):
            written.append(scaling)
        else:
            scaling.unlink(missing_ok=True)
    index = reports_dir / "README.md"
    index.write_text(render_index(results))
    written.append(index)
    return written


def render_index(results: list[Result]) -> str:
    lines = ["# dlperf reports", "", GENERATED, ""]
    models = sorted({r.spec.model for r in results})
    if not models:
        return "\n".join([*lines, "No results yet: run `dlperf run` first.", ""])
    lines += [
        "| model | description | frameworks | configurations | ok | partial | failed |",
        "|---|---|---|---|---|---|---|",
    ]
    for model in models:
        chosen = select(results, model)
        desc = MODELS[model].description if model in MODELS else model
        counts = [str(sum(r.status == s for r in chosen)) for s in ResultStatus]
        row = [f"[{model}]({file_stem(model)}.md)", desc, ", ".join(frameworks(chosen))]
        row += [str(len(configs(chosen))), *counts]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines) + "\n"
