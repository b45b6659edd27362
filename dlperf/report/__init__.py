"""Reports: Markdown per model (DLPerf's table shapes), a PNG chart, and an index.

Renderers are pure; only `write_reports` (and `render_chart`, given a path) write files.
matplotlib is imported lazily inside `render_chart`.
"""

from __future__ import annotations

from dlperf.report.chart import render_chart
from dlperf.report.markdown import render_model_report
from dlperf.report.writer import write_fambench_report, write_reports

__all__ = ["render_chart", "render_model_report", "write_fambench_report", "write_reports"]
