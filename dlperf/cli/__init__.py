"""The `dlperf` command line: thin; parses options, calls the core, prints with rich.

This module is the Typer app and `main()` (errors to exit codes, signals). Each command lives
in the module of its group: `run` (run, sweep), `parse`, `report` (report, publish, export),
`compare` (score, compare, history), `env` (list, env ...), `sources`, `checks` (check-models,
doctor). Their options are declared once: those several groups share, and the small groups',
in `options`; a larger group's beside it (`run_options`, `parse_options`, `report_options`,
`compare_options`). `help_text` makes every command's help read at 80 columns. What they
show: `output` (the consoles; names kept whole; text and JSON past rich), `render` (runs and
results), `render_compare` (score and history tables), `render_setup` (frameworks,
environments, sources, checks)."""

from __future__ import annotations

import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape as esc
from typer.exceptions import TyperException

from dlperf import DlperfError, __version__
from dlperf.cli import checks, compare, env, parse, report, run, run_options, sources
from dlperf.cli.help_text import WordsCommand, WordsGroup
from dlperf.cli.output import console, err, said_warnings, show_warning
from dlperf.proc import hurry_kills

app = typer.Typer(
    cls=WordsGroup,
    help="Measure deep-learning framework performance fairly and reproducibly.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
env_app = typer.Typer(
    cls=WordsGroup, help="Isolated per-framework environments.", no_args_is_help=True
)
app.add_typer(env_app, name="env")
sources_app = typer.Typer(
    cls=WordsGroup,
    help="Official upstream implementations, pinned and patched.",
    no_args_is_help=True,
)
app.add_typer(sources_app, name="sources")


def _version(value: bool) -> None:
    if value:
        console.print(f"dlperf {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    said_warnings.clear()  # each command says each warning once (`show_warning`)


# Registration order is the order `dlperf --help` lists them in.
app.command("list", cls=WordsCommand)(env.list_cmd)
env_app.command("create", cls=WordsCommand)(env.env_create)
env_app.command("list", cls=WordsCommand)(env.env_list)
env_app.command("remove", cls=WordsCommand)(env.env_remove)
app.command(cls=run_options.RunCommand)(run.run)
app.command(cls=WordsCommand)(run.sweep)
app.command("check-models", cls=WordsCommand)(checks.check_models_cmd)
sources_app.command("list", cls=WordsCommand)(sources.sources_list)
sources_app.command("fetch", cls=WordsCommand)(sources.sources_fetch)
sources_app.command("verify", cls=WordsCommand)(sources.sources_verify)
app.command(cls=WordsCommand)(parse.parse)
app.command(cls=WordsCommand)(report.report)
app.command(cls=WordsCommand)(report.publish)
app.command(cls=WordsCommand)(report.export)
app.command(cls=WordsCommand)(compare.score)
app.command(cls=WordsCommand)(compare.compare)
app.command(cls=WordsCommand)(compare.history)
app.command(cls=WordsCommand)(checks.doctor)


class _Interrupts:
    """dlperf's handler of SIGINT, SIGTERM and SIGHUP.

    The first signal stops dlperf as Ctrl-C does: a KeyboardInterrupt, on which the workloads
    are killed, the repeats that finished are stored, and `main` says so and exits 130. A later
    one (the user asking again, or `timeout` and a terminal closing at once) must not raise
    again: a second KeyboardInterrupt would cut the storing of the finished repeats short, or
    escape as a traceback while the message prints. It tells proc to kill at once instead
    (`hurry_kills`), and teardown goes on to the same end."""

    def __init__(self) -> None:
        self.signalled = False

    def __call__(self, signum: int, _frame: object) -> None:
        if self.signalled:
            hurry_kills()
            return
        self.signalled = True
        raise KeyboardInterrupt(signal.Signals(signum).name)


# A test hook, unset in use (tests/test_interrupts.py): when dlperf, interrupted, is about to
# print its message, it creates `paused` in the folder this names and waits (at most a minute)
# for a file `go` there, so that a test can send a second signal at exactly that moment.
TEST_PAUSE_ENV = "DLPERF_TEST_PAUSE_BEFORE_INTERRUPTED_MESSAGE"


def _test_pause() -> None:
    folder = os.environ.get(TEST_PAUSE_ENV)
    if not folder:
        return
    Path(folder, "paused").touch()
    deadline = time.monotonic() + 60
    while not Path(folder, "go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _dispatch() -> int:
    """Run the command; its exit code, a DlperfError's or a usage error's said here."""
    try:
        code = app(standalone_mode=False)
    except DlperfError as exc:
        err.print(f"[red]error:[/] {esc(str(exc))}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        return 130
    except typer.BadParameter as exc:
        said = bad_value(exc)
        if said is None:
            exc.show()
        else:
            err.print(f"[red]error:[/] {esc(said)}", highlight=False, soft_wrap=True)
        return 1
    except TyperException as exc:  # bad usage is a user error: exit 1, not click's 2
        exc.show()
        return 1
    return code if isinstance(code, int) else 0


def bad_value(exc: typer.BadParameter) -> str | None:
    """A value Typer refused through pydantic (a choice, a number, a path) in dlperf's words:
    the option, the value, what it takes and the fix (`dlperf.wording`), instead of pydantic's
    "Value error, ..." under click's usage lines; None for any other refusal."""
    from pydantic import ValidationError

    from dlperf.wording import value_problem

    cause, param = exc.__cause__, exc.param
    if not isinstance(cause, ValidationError) or param is None or not cause.errors():
        return None
    error = cause.errors()[0]
    name = max(param.opts, key=len) if param.opts else (param.name or "").upper()
    descriptor = getattr(param, "type_descriptor", None)
    choices = (descriptor.choices or ()) if descriptor is not None else ()
    if error.get("type") == "path":  # the path parsers' own sentence (`options.path_parser`)
        return f"{name}: {error['msg']}"
    return value_problem(name, error, [str(c) for c in choices])


def main() -> None:
    """Exit codes: 0 ok, 1 user error (clear message), 2 some benchmark failed, 130 stopped by
    a signal (Ctrl-C, SIGTERM, SIGHUP), however many came."""
    warnings.showwarning = show_warning
    interrupts = _Interrupts()
    # CI cancelling, `timeout`, `scancel` (SIGTERM) and a closed terminal (SIGHUP) stop dlperf
    # as Ctrl-C does: workloads killed, finished repeats kept. A signal inherited as ignored
    # stays ignored, as Python's own SIGINT handler does: `nohup` ignores SIGHUP so that a
    # sweep outlives its terminal, a shell starts a background job with SIGINT ignored.
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, interrupts)
    try:
        code = _dispatch()
    except KeyboardInterrupt:  # the first signal came while an error was being said
        code = 130
    if code == 130:  # Typer turns Ctrl-C into Exit(130) before we see it
        interrupts.signalled = True  # from here on a signal cannot interrupt the message
        # Teardown is done. Ignored, not handled: Python resets its handlers to the default
        # as it shuts down, and a signal then would end dlperf by it (-15, not 130).
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        _test_pause()
        command = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
        err.print(f"[yellow]interrupted[/]{INTERRUPTED.get(command, '')}")
    sys.exit(code)


# What an interrupted command leaves, said after "interrupted".
_MEASURED = (
    ": workloads stopped; repeats that had finished were stored (the others marked "
    "interrupted); a sweep resumes where it stopped"
)
INTERRUPTED = {
    "run": _MEASURED,
    "sweep": _MEASURED,
    "parse": ": an import stores its results once every log is read; run it again",
}
