"""`dlperf run`'s parameters: the spec options' table (`dlperf.spec_options`) as Typer
parameters, and the options of `run` itself, each in its help panel; `RunCommand` adds the
workloads' `--set` keys to its help."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from copy import copy
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args

import typer
from rich.markup import escape

from dlperf.cli.help_text import WordsCommand
from dlperf.cli.options import ResultsDir, SourcesDir, file_option
from dlperf.launch import LAUNCHERS
from dlperf.spec_options import (
    DISTRIBUTED,
    ENVIRONMENT,
    OFFICIAL,
    OUTPUT,
    PANELS,
    SPEC_OPTIONS,
    SpecOption,
)


def spec_option_type(option: SpecOption) -> Any:
    """A spec option as a Typer parameter's type: Annotated[type, typer.Option(...)]."""
    if option.is_argument:
        return Annotated[option.cli_type, typer.Argument(metavar=option.metavar, help=option.help)]
    info = typer.Option(
        option.flag,
        metavar="" if option.cli_type is bool else option.metavar,  # a flag takes no value
        help=option.help,
        rich_help_panel=option.panel,
    )
    return Annotated[option.cli_type, info]


def in_panel(parameter: Any, panel: str) -> Any:
    """A shared option's type, shown in `panel` of `run`'s help."""
    kind, info = get_args(parameter)
    info = copy(info)
    info.rich_help_panel = panel
    return Annotated[kind, info]


F = TypeVar("F", bound=Callable[..., Any])


def with_spec_options(command: F) -> F:
    """`command(**values)` given the spec options as parameters: Typer reads a command's
    parameters from its signature, so the table's options (positional arguments first) join the
    command's own keyword parameters there, ordered by help panel, the order of `--help`."""
    keyword, positional = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [
        inspect.Parameter(
            option.name,
            positional if option.is_argument else keyword,
            default=inspect.Parameter.empty if option.is_argument else option.default,
            annotation=spec_option_type(option),
        )
        for option in SPEC_OPTIONS
    ]
    own = inspect.signature(command, eval_str=True).parameters.values()
    params += [p for p in own if p.kind is not inspect.Parameter.VAR_KEYWORD]

    def place(p: inspect.Parameter) -> tuple[bool, int]:
        panel = getattr(get_args(p.annotation)[1], "rich_help_panel", None)
        return (p.kind is keyword, PANELS.index(panel) if panel else 0)

    command.__signature__ = inspect.Signature(sorted(params, key=place))  # type: ignore[attr-defined]
    return command


def set_keys_help() -> str:
    """Each framework's `--set` keys with the values they take (rich markup): the epilog of
    `dlperf run --help`. Keys every model of a framework takes come first, then those of some
    of its models; the microbenchmarks' are the same with every framework."""
    from dlperf.adapter import WorkloadOption
    from dlperf.adapters import adapter_names, get_adapter

    def item(key: str, option: WorkloadOption | str) -> str:
        option = option if isinstance(option, WorkloadOption) else WorkloadOption(option)
        takes = "|".join(option.choices) or {int: "INT", float: "NUM"}.get(option.kind, "TEXT")
        return escape(f"{key}={takes}")

    lines = ["[bold]--set KEY=VALUE[/], by framework (an unknown key is refused with the model's "
             "own keys; best practice sets some of them, a --set of one ablates it):"]  # fmt: skip
    micro: dict[tuple[str, str], list[str]] = {}  # (model, its keys) -> frameworks
    for name in adapter_names():
        adapter = get_adapter(name)
        takers: dict[str, list[str]] = {}  # key=values -> the models that take it
        for model in adapter.models:
            for key, option in sorted(adapter.option_declarations(model).items()):
                takers.setdefault(item(key, option), []).append(model)
        groups: dict[tuple[str, ...], list[str]] = {}
        for key, models in takers.items():
            groups.setdefault(tuple(models), []).append(key)
        parts = [
            ("" if models == adapter.models else f"for {', '.join(models)}: ") + " ".join(keys)
            for models, keys in sorted(groups.items(), key=lambda g: -len(g[0]))
        ]
        lines.append(f"[bold]{name}[/]: " + "; ".join(parts))
        for model in adapter.micro_models:
            keys = " ".join(
                item(k, o) for k, o in sorted(adapter.option_declarations(model).items())
            )
            micro.setdefault((model, keys), []).append(name)
    for (model, keys), frameworks in micro.items():
        lines.append(f"[bold]{model}[/] (--impl micro: {', '.join(frameworks)}): {keys}")
    return "\n\n".join(lines)


class RunCommand(WordsCommand):
    """`dlperf run`: its help ends with the workloads' `--set` keys, made only when the help is
    shown (it imports every adapter); `--help` is listed with the output options."""

    @property  # type: ignore[override]
    def epilog(self) -> str:
        return set_keys_help()

    @epilog.setter
    def epilog(self, value: str | None) -> None:
        pass  # the epilog is made from the adapters, never given

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.rich_help_panel, option.metavar = OUTPUT, ""
        return option


# ---------------------------------------------------------------- run's own options

RunResultsDir = in_panel(ResultsDir, OUTPUT)
RunSourcesDir = in_panel(SourcesDir, OFFICIAL)
RunJson = Annotated[
    bool,
    typer.Option(
        "--json", metavar="", help="Print the stored result JSON.", rich_help_panel=OUTPUT
    ),
]
DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        metavar="",
        help="Print each node's command line; run nothing.",
        rich_help_panel=OUTPUT,
    ),
]
Hosts = Annotated[
    str | None,
    typer.Option(
        metavar="HOST,...",
        help="Comma-separated node addresses, node 0 (master) first.",
        rich_help_panel=DISTRIBUTED,
    ),
]
Launcher = Annotated[
    Literal[LAUNCHERS],
    typer.Option(
        metavar="NAME",
        help="local (every node on this host), ssh (one ssh per host; options from "
        "$DLPERF_SSH), slurm (srun in this allocation) or mpirun.",
        rich_help_panel=DISTRIBUTED,
    ),
]
Sbatch = in_panel(
    Annotated[
        Path | None,
        file_option("Write a Slurm batch script that runs this command; run nothing."),
    ],
    DISTRIBUTED,
)
DataDir = Annotated[
    str,
    typer.Option(
        metavar="FOLDER",
        help="With --impl official: a dataset folder, for upstreams that need one.",
        rich_help_panel=OFFICIAL,
    ),
]
Python = in_panel(
    Annotated[
        Path | None,
        file_option(
            "Measure this interpreter's own install of the framework (an NGC container's, "
            "a conda env's) instead of an env dlperf builds; it is probed, never changed.",
            exists=True,
            executable=True,
        ),
    ],
    ENVIRONMENT,
)
RebuildEnv = Annotated[
    bool,
    typer.Option(metavar="", help="Rebuild the environment first.", rich_help_panel=ENVIRONMENT),
]
