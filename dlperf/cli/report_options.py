"""The options of `dlperf report`, `publish` and `export` (--results-dir is shared, in
`options`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from dlperf.cli.options import file_option, path_parser

# Where a command writes is its --out (report, publish, export, compare); report's older
# spelling --reports-dir still works, hidden from the help.
ReportsOut = Annotated[
    Path | None,
    typer.Option(
        "--out",
        parser=path_parser("folder"),
        metavar="FOLDER",
        help="Where the Markdown reports and their PNG charts go (default: reports/).",
    ),
]

ReportsDirAlias = Annotated[
    Path | None,
    typer.Option("--reports-dir", parser=path_parser("folder"), metavar="FOLDER", hidden=True),
]

SiteDir = Annotated[
    Path,
    typer.Option(
        "--out",
        parser=path_parser("folder"),
        metavar="FOLDER",
        help="Where the HTML site goes (made by publish, or new and empty).",
    ),
]

ReportStyle = Annotated[
    Literal["dlperf", "fambench"],
    typer.Option(
        help="dlperf (per-model reports) or fambench (fambench.md, FAMBench's table by "
        "configuration, and fambench_summary.txt, its summarizer's summary.txt, a row per log)."
    ),
]

# `export` is all machine-readable output already: JSON is one more --format, not a --json flag.
ExportFormat = Annotated[
    Literal["superbench", "csv", "parquet", "json"],
    typer.Option(
        "--format",
        help="superbench (SuperBench's results-summary.jsonl: one line per node, its names "
        "and statistics, for `sb result summary` / `sb result diagnosis`), csv, parquet or "
        "json (one row a "
        "result: spec, status, throughput summary, MFU, latency percentiles, versions; "
        "parquet needs pyarrow and --out; json is an array of the rows as objects).",
    ),
]

OutFile = Annotated[Path | None, file_option("Write here instead of stdout.")]
