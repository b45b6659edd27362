"""The options and arguments of `dlperf score`, `compare` and `history` (--results-dir is
shared, in `options`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from dlperf.cli.options import file_option, path_parser


def _existing(metavar: str, help: str) -> typer.models.ArgumentInfo:
    return typer.Argument(parser=path_parser("path", exists=True), metavar=metavar, help=help)


Freeze = Annotated[Path | None, file_option("Write these results' medians as the reference here.")]

Reference = Annotated[
    Path | None, file_option("Score these results against this reference (= 1000).", exists=True)
]

Hierarchy = Annotated[
    Path | None,
    file_option(
        "Weight by this hierarchy: TorchBench V0's score.yml (domain -> task -> model); "
        "default: the catalog's placement, frozen into the reference.",
        exists=True,
    ),
]

Flat = Annotated[
    bool,
    typer.Option(help="Give every model of the reference one equal share (no domain/task)."),
]

OneMachine = Annotated[
    str | None,
    typer.Option(
        "--machine",
        metavar="ID",
        help="The machine whose results count, where they come from several: its id or a "
        "piece of its name.",
    ),
]

AcrossMachines = Annotated[
    bool,
    typer.Option(
        "--across-machines",
        help="Compare results of different machines, or of machines whose hardware was not "
        "recorded (they are never compared otherwise); the machines are printed first.",
    ),
]

CompareAcrossMachines = Annotated[
    bool,
    typer.Option(
        "--across-machines",
        help="Compare results of different machines, or of machines whose hardware was not "
        "recorded (they are never compared otherwise); the machines are printed first, and "
        "each pair names what differs: CPU model and count, GPUs, the workload's threads.",
    ),
]

HistoryAcrossMachines = Annotated[
    bool,
    typer.Option(
        "--across-machines",
        help="Judge the results of machines whose hardware was not recorded (imported logs) "
        "against each other; by default they are listed as 'machine unknown', not judged: "
        "they may come from several machines.",
    ),
]

ScoreJson = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the score, its domain subscores and each configuration's speedup and "
        "weight as JSON on stdout (with --freeze: the reference); the rest on stderr.",
    ),
]

Baseline = Annotated[Path, _existing("A", "Baseline: a results folder or a result file.")]

Candidate = Annotated[Path, _existing("B", "Candidate: a results folder or a result file.")]

Threshold = Annotated[
    float, typer.Option(help="Smallest change that counts, a fraction in [0, 1).")
]

MarkdownOut = Annotated[
    Path | None, file_option("Also write the comparison as Markdown here (a CI comment).")
]

CompareFormat = Annotated[
    Literal["table", "markdown"],
    typer.Option(
        "--format",
        help="table (for a terminal: fits its width) or markdown (for a CI comment).",
    ),
]

IncludeReferences = Annotated[
    bool,
    typer.Option(
        "--include-references",
        help="Compare published references too (MLPerf results imported by `dlperf parse "
        "mlperf-training`); they are left out by default: other people's systems.",
    ),
]

CompareJson = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the pairs and notes as JSON on stdout; the table (or Markdown) on stderr.",
    ),
]

OnlyMachines = Annotated[
    list[str] | None,
    typer.Option(
        "--machine",
        metavar="ID",
        help="Only these machines: a machine id or a piece of its name (repeatable).",
    ),
]

ConfigContains = Annotated[
    list[str] | None,
    typer.Option(
        "--config",
        metavar="TEXT",
        help="Only benchmarks whose id or settings contain this text (repeatable: all of them).",
    ),
]

Since = Annotated[
    str | None,
    typer.Option(
        metavar="WHEN",
        help="Only results created at or after this ISO 8601 date or time (no zone: UTC).",
    ),
]

Until = Annotated[
    str | None,
    typer.Option(
        metavar="WHEN",
        help="Only results created up to this date (the whole day) or time.",
    ),
]

HistoryLast = Annotated[
    int | None,
    typer.Option(
        metavar="N",
        help="Show each series' newest N points (judged against the points before).",
    ),
]

HistoryJson = Annotated[
    bool,
    typer.Option("--json", help="Print the points as JSON on stdout; the tables on stderr."),
]
