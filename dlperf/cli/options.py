"""Every option and argument of the command line, declared once: a command names its
parameters with these types, so two commands that take the same option share its help text,
metavar and parser. `dlperf run`'s are in `run_options`, made from the spec options' table."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from dlperf.schema import DEVICES, IMPLS
from dlperf.spec_options import OPTIONS

# ---------------------------------------------------------------- help as words

_WORDS = {int: "N", float: "NUMBER", str: "TEXT"}


def word_placeholders(params: list[Any]) -> list[Any]:
    """`params` with their help placeholders as words: an argument shows its name (FILE,
    FRAMEWORK) and no type; an option its metavar, else a word for its type (N, NUMBER, TEXT,
    PATH, its name for a choice the help lists), a flag none; never a Python type
    (`<list[str]>`, `<Path>`) as Typer shows by default."""
    for param in params:
        if isinstance(param, TyperArgument):
            if param.metavar is None:
                param.metavar = param.name.upper()
            param.display_type_rich = _no_type  # its name, in the column before, is the word
        elif param.metavar is None:
            param.metavar = "" if getattr(param, "is_flag", False) else _word(param)
    return params


def _no_type(ctx: Any = None) -> None:
    return None


def _word(param: Any) -> str:
    desc = param.type_descriptor
    if desc.is_choice:  # its flag's name (--format: FORMAT); the help lists the choices
        flag = max(param.opts, key=len).lstrip("-")
        return flag.replace("-", "_").upper()
    if desc.is_path:
        return "PATH"
    kind = get_args(desc.annotation)[0] if desc.is_list else desc.annotation
    return _WORDS.get(kind, "VALUE")


def one_line_paragraphs(text: str | None) -> str | None:
    """A docstring as help: each paragraph one line, for rich to wrap at the terminal's width
    (Typer keeps the docstring's own line breaks, which break lines mid-sentence)."""
    if text is None:
        return None
    return "\n\n".join(" ".join(p.split("\n")) for p in inspect.cleandoc(text).split("\n\n"))


class _Words:
    """Help that reads at 80 columns: the docstring's paragraphs one line each, placeholders
    as words."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = one_line_paragraphs(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        return word_placeholders(super().get_params(ctx))


class WordsCommand(_Words, TyperCommand):
    """A command whose help reads at 80 columns, its docstring's first paragraph (one short
    line) its summary in `dlperf --help`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.help and not self.short_help:
            self.short_help = self.help.split("\n\n")[0]


class WordsGroup(_Words, TyperGroup):
    """A group (`dlperf`, `dlperf env`, `dlperf sources`) whose help reads as WordsCommand's."""


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


def file_option(
    help: str, *, exists: bool = False, executable: bool = False
) -> typer.models.OptionInfo:
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
OutFile = Annotated[Path | None, file_option("Write here instead of stdout.")]
ManifestNames = Annotated[list[str] | None, typer.Argument(help="Manifests (default: all).")]

# ---------------------------------------------------------------- parse

# --profile as `run` takes it (`dlperf.spec_options`), in the default panel; sources' too
_PROFILE = OPTIONS["profile"]
Profile = Annotated[_PROFILE.cli_type, typer.Option(help=_PROFILE.help)]

LogSource = Annotated[
    str,
    typer.Argument(
        metavar="SOURCE",
        help="A framework (then MODEL PATH...), or mlperf / mlperf-training / fambench.",
    ),
]
LogArgs = Annotated[
    list[str],
    typer.Argument(
        metavar="ARG", help="MODEL PATH... for a framework; PATH... for the suites' logs."
    ),
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
ParseRound = Annotated[
    str | None,
    typer.Option(
        "--round",
        help="mlperf-training: the round whose rules to check against (4.0), where no folder "
        "name says it (training_results_v4.0/).",
    ),
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
Baseline = Annotated[Path, _existing("A", "Baseline: a results folder or a result file.")]
Candidate = Annotated[Path, _existing("B", "Candidate: a results folder or a result file.")]
Threshold = Annotated[
    float, typer.Option(help="Smallest change that counts, a fraction in [0, 1).")
]
MarkdownOut = Annotated[Path | None, file_option("Also write the Markdown table here.")]
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
