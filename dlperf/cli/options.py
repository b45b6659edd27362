"""Every option and argument of the command line, declared once: a command names its
parameters with these types, so two commands that take the same option share its help text,
metavar and parser."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from dlperf.launch import LAUNCHERS
from dlperf.models import PRESETS
from dlperf.schema import DEVICES, IMPLS, MODES, SCENARIOS


def path_parser(
    kind: str, *, exists: bool = False, executable: bool = False
) -> Callable[[Any], Path]:
    """A parser for a path option: `kind` "folder", "file" or "path" (either). It refuses an
    empty value (an unset shell variable would otherwise mean the current folder), a file where
    a folder is expected and the reverse, and, with `exists`, a path that is not there; so a
    wrong path is named before anything runs or is written."""

    def parse(value: Any) -> Path:
        from pydantic_core import PydanticCustomError

        def refuse(why: str) -> PydanticCustomError:
            return PydanticCustomError("path", "{why}", {"why": why})

        if isinstance(value, Path):  # a default
            return value
        text = str(value)
        if not text.strip():
            raise refuse(f"an empty path; give a {kind} (an unset shell variable?)")
        path = Path(text).expanduser()
        if exists and not path.exists():
            raise refuse(f"{text} does not exist; give an existing {kind}")
        if kind == "folder" and path.exists() and not path.is_dir():
            raise refuse(f"{text} is a file; give a folder")
        if kind == "file" and path.is_dir():
            raise refuse(f"{text} is a folder; give a file")
        if executable and not os.access(path, os.X_OK):
            raise refuse(f"{text} is not executable; give a Python interpreter")
        return path

    return parse


def _file(help: str, *, exists: bool = False, executable: bool = False) -> typer.models.OptionInfo:
    parser = path_parser("file", exists=exists, executable=executable)
    return typer.Option(parser=parser, metavar="FILE", help=help)


def _existing(metavar: str, help: str) -> typer.models.ArgumentInfo:
    return typer.Argument(parser=path_parser("path", exists=True), metavar=metavar, help=help)


# ---------------------------------------------------------------- shared by several commands

ResultsDir = Annotated[
    Path,
    typer.Option(
        "--results-dir",
        parser=path_parser("folder"),
        metavar="FOLDER",
        help="Where results are stored (JSON + raw logs).",
    ),
]
SourcesDir = Annotated[
    Path | None,
    typer.Option(
        parser=path_parser("folder", exists=True),
        metavar="FOLDER",
        help="An existing clone of the upstream to take the pinned commit from, or for an "
        "upstream pinned to a release archive a folder holding that archive (offline use; "
        "`run` takes it with --impl official only).",
    ),
]
OutFile = Annotated[Path | None, _file("Write here instead of stdout.")]
ManifestNames = Annotated[list[str] | None, typer.Argument(help="Manifests (default: all).")]

# ---------------------------------------------------------------- run
# `dlperf parse` has options of the same names whose help differs (their default is read from
# the log's path): they are declared below, with the other parse options.

Framework = Annotated[str, typer.Argument(help="e.g. pytorch, calibration")]
Model = Annotated[str, typer.Argument(help="e.g. resnet50, bert, pace")]
Preset = Annotated[Literal[PRESETS], typer.Option(help="dlperf (DLPerf's settings) or smoke.")]
Device = Annotated[Literal[DEVICES], typer.Option(help="cpu or cuda.")]
BatchSize = Annotated[int | None, typer.Option(help="Batch size per device.")]
Amp = Annotated[bool, typer.Option("--amp", help="Mixed precision.")]
Xla = Annotated[bool, typer.Option("--xla", help="Graph compiler (torch.compile...).")]
ImageSize = Annotated[int | None, typer.Option(help="Image side (ResNet).")]
SeqLen = Annotated[int | None, typer.Option(help="Sequence length (BERT).")]
Skip = Annotated[int | None, typer.Option(help="Iterations skipped before the window.")]
Measure = Annotated[int | None, typer.Option(help="Iterations in the window.")]
Repeats = Annotated[int | None, typer.Option(help="Repeats (separate processes).")]
Nodes = Annotated[int | None, typer.Option(help="Nodes.")]
DevicesPerNode = Annotated[int | None, typer.Option(help="Devices per node.")]
Sets = Annotated[
    list[str] | None, typer.Option("--set", help="Workload option KEY=VALUE (repeatable).")
]
Timeout = Annotated[float | None, typer.Option(help="Seconds per repeat, total.")]
NoOutputTimeout = Annotated[
    float | None, typer.Option(help="Seconds without output before a repeat is 'hung'.")
]
RebuildEnv = Annotated[bool, typer.Option(help="Rebuild the environment first.")]
RunJson = Annotated[bool, typer.Option("--json", help="Print the stored result JSON.")]
RunImpl = Annotated[
    Literal[IMPLS] | None,
    typer.Option(
        help="ootb (dlperf's own workload, the default), official (upstream's script) or "
        "micro (the microbenchmarks: linear, embeddingbag; their default)."
    ),
]
Profile = Annotated[
    Literal["current", "dlperf-2020"] | None,
    typer.Option(
        help="Official manifests' profile: current (default; recent upstream commits and "
        "stacks) or dlperf-2020 (DLPerf's commits and stacks: its reproduction)."
    ),
]
RunSource = Annotated[
    str | None, typer.Option(help="Which official manifest (default: the pair's default).")
]
Mode = Annotated[Literal[MODES], typer.Option(help="train, or infer (eval, no gradients).")]
LatencyTarget = Annotated[
    float | None, typer.Option(help="Inference: p95 batch latency goal; a miss is marked.")
]
Scenario = Annotated[
    Literal[SCENARIOS] | None,
    typer.Option(help="MLPerf LoadGen scenario: offline, server, singlestream, multistream."),
]
TargetQps = Annotated[
    float | None, typer.Option(help="LoadGen: expected (Offline) or offered (Server) QPS.")
]
TargetLatency = Annotated[
    float | None, typer.Option(help="LoadGen: Server latency bound / streams' expected.")
]
MinDuration = Annotated[float | None, typer.Option(help="LoadGen: min test time.")]
MaxDuration = Annotated[float | None, typer.Option(help="LoadGen: max test time.")]
MinQueries = Annotated[int | None, typer.Option(help="LoadGen: minimum queries.")]
MaxQueries = Annotated[int | None, typer.Option(help="LoadGen: maximum queries.")]
SamplesPerQuery = Annotated[
    int | None, typer.Option(help="LoadGen MultiStream: samples per query (default 8).")
]
Hosts = Annotated[
    str | None, typer.Option(help="Comma-separated node addresses, node 0 (master) first.")
]
DataDir = Annotated[
    str, typer.Option(help="With --impl official: a dataset folder, for upstreams that need one.")
]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Print each node's command line; run nothing.")
]
Launcher = Annotated[
    Literal[LAUNCHERS],
    typer.Option(
        help="local (every node on this host), ssh (one ssh per host; options from "
        "$DLPERF_SSH), slurm (srun in this allocation) or mpirun."
    ),
]
Sbatch = Annotated[
    Path | None, _file("Write a Slurm batch script that runs this command; run nothing.")
]
Python = Annotated[
    Path | None,
    _file(
        "Measure this interpreter's own install of the framework (an NGC container's, "
        "a conda env's) instead of an env dlperf builds; it is probed, never changed.",
        exists=True,
        executable=True,
    ),
]

# ---------------------------------------------------------------- parse

LogSource = Annotated[
    str, typer.Argument(help="A framework (then MODEL PATH...), or mlperf / fambench.")
]
LogArgs = Annotated[
    list[str],
    typer.Argument(help="MODEL PATH... for a framework; PATH... for mlperf and fambench."),
]
ParseImpl = Annotated[
    Literal[IMPLS] | None,
    typer.Option(
        help="official (upstream logs) or ootb (dlperf events files, the default; micro "
        "for microbenchmarks)."
    ),
]
ParseSource = Annotated[str | None, typer.Option(help="Which official manifest.")]
ParseBatchSize = Annotated[int | None, typer.Option(help="Per device (else from the path).")]
ParseNodes = Annotated[int | None, typer.Option(help="Nodes (else from the path).")]
ParseDevicesPerNode = Annotated[int | None, typer.Option(help="Else from the path.")]
ParseAmp = Annotated[bool | None, typer.Option("--amp/--fp32", help="Else from the path.")]
ParseDevice = Annotated[
    Literal[DEVICES] | None,
    typer.Option(help="cpu or cuda (default: the upstream's device, or the events file's)."),
]
ParseSkip = Annotated[int | None, typer.Option(help="Default: the manifest's window.")]
ParseMeasure = Annotated[int | None, typer.Option(help="Default: the manifest's window.")]
ParseFramework = Annotated[
    str | None, typer.Option(help="mlperf/fambench: what ran (default: external / pytorch).")
]
ParseLatencyTarget = Annotated[
    float | None,
    typer.Option(
        help="fambench: the inference p95 batch latency goal (ms), judged by FAMBench's p95 "
        "of each log; a miss is marked."
    ),
]
ParseJson = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the stored result JSON on stdout (a list if several); the rest on stderr.",
    ),
]
ParseModel = Annotated[
    str | None, typer.Option(help="mlperf: the model that ran (default: the SUT, 'sut').")
]

# ---------------------------------------------------------------- the other commands

SweepFile = Annotated[
    Path,
    typer.Argument(
        parser=path_parser("file", exists=True),
        metavar="FILE",
        help="TOML matrix; see the example in dlperf.sweep.",
    ),
]
Resume = Annotated[
    bool, typer.Option(help="Skip configs that have results; continue unfinished ones.")
]
ReportsDir = Annotated[
    Path,
    typer.Option(parser=path_parser("folder"), metavar="FOLDER", help="Where Markdown + PNG go."),
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
Freeze = Annotated[Path | None, _file("Write these results' medians as the reference here.")]
Reference = Annotated[
    Path | None, _file("Score these results against this reference (= 1000).", exists=True)
]
Hierarchy = Annotated[
    Path | None,
    _file(
        "Weight by this hierarchy: TorchBench V0's score.yml (domain -> task -> model); "
        "default: the catalog's placement, frozen into the reference.",
        exists=True,
    ),
]
Flat = Annotated[
    bool,
    typer.Option(help="Give every model of the reference one equal share (no domain/task)."),
]
Baseline = Annotated[Path, _existing("A", "Baseline: a results folder or a result file.")]
Candidate = Annotated[Path, _existing("B", "Candidate: a results folder or a result file.")]
Threshold = Annotated[
    float, typer.Option(help="Smallest change that counts, a fraction in [0, 1).")
]
MarkdownOut = Annotated[Path | None, _file("Also write the Markdown table here.")]
ScoreJson = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the score, its domain subscores and each configuration's speedup and "
        "weight as JSON on stdout (with --freeze: the reference); the rest on stderr.",
    ),
]
CompareJson = Annotated[
    bool,
    typer.Option("--json", help="Print the rows and notes as JSON on stdout; the table on stderr."),
]
DoctorJson = Annotated[bool, typer.Option("--json", help="JSON output.")]
MeasurePeak = Annotated[
    bool,
    typer.Option(help="Measure the CPU GEMM peak again (MFU on CPUs uses it); do it idle."),
]
OnlyFrameworks = Annotated[
    list[str] | None, typer.Option("--framework", help="Only these (repeatable).")
]
OnlyModels = Annotated[list[str] | None, typer.Option("--model", help="Only these.")]
OnlyMachines = Annotated[
    list[str] | None,
    typer.Option(
        "--machine",
        metavar="ID",
        help="Only these machines: a machine id or a piece of its name (repeatable).",
    ),
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
        help="Compare results of different machines (they are never compared otherwise); "
        "the machines are printed first.",
    ),
]
EnvDevice = Annotated[Literal[DEVICES], typer.Option(help="Variant: cpu or cuda.")]
Rebuild = Annotated[bool, typer.Option(help="Remove and rebuild even if ready.")]
Refetch = Annotated[bool, typer.Option(help="Remove and fetch again even if ready.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Remove without asking.")]
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
