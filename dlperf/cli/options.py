"""The options and arguments that several command groups share, and those of the small groups
(`sweep`, `env`, `sources`, `check-models`, `doctor`), declared once with the path parsers
they use: a command names its parameters with these types, so two commands that take the same
option share its help text, metavar and parser. The larger groups' own are beside them:
`run_options` (made from the spec options' table), `parse_options`, `report_options`,
`compare_options`."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from dlperf.schema import DEVICES
from dlperf.spec_options import OPTIONS


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


# ---------------------------------------------------------------- shared by several groups

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

# --profile as `run` takes it (`dlperf.spec_options`), in the default panel; sources' too
_PROFILE = OPTIONS["profile"]

Profile = Annotated[_PROFILE.cli_type, typer.Option(help=_PROFILE.help)]

OnlyFrameworks = Annotated[
    list[str] | None, typer.Option("--framework", help="Only these (repeatable).")
]

OnlyModels = Annotated[list[str] | None, typer.Option("--model", help="Only these.")]

# ---------------------------------------------------------------- sweep

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

# ---------------------------------------------------------------- env

EnvDevice = Annotated[Literal[DEVICES], typer.Option(help="Variant: cpu or cuda.")]

Rebuild = Annotated[bool, typer.Option(help="Remove and rebuild even if ready.")]

Yes = Annotated[bool, typer.Option("--yes", "-y", help="Remove without asking.")]

# ---------------------------------------------------------------- sources

ManifestNames = Annotated[list[str] | None, typer.Argument(help="Manifests (default: all).")]

Refetch = Annotated[bool, typer.Option(help="Remove and fetch again even if ready.")]

# ---------------------------------------------------------------- doctor

DoctorJson = Annotated[bool, typer.Option("--json", help="JSON output.")]

MeasurePeak = Annotated[
    bool,
    typer.Option(help="Measure the CPU GEMM peak again (MFU on CPUs uses it); do it idle."),
]
