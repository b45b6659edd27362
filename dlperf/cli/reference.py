"""The command reference of the documentation site (docs/reference/commands.md), made from the
Typer app itself by Typer's own docs writer, so that it cannot drift from the CLI.

`python -m dlperf.cli.reference FILE` writes it; `--check FILE` exits 1 when FILE differs from
a fresh generation (`scripts/docs --check`, run by CI through `scripts/test`)."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import typer
import typer.main
from rich.text import Text
from typer.cli import get_docs_for_click
from typer.core import TyperGroup

REFERENCE = Path("docs/reference/commands.md")
_NOTE = (
    "<!-- Generated from dlperf's Typer app by `bash scripts/docs` (dlperf/cli/reference.py): "
    "do not edit by hand. -->\n\n"
)


def command_reference() -> str:
    """Every command's help as Markdown: its summary, usage, arguments, options and epilog.

    Typer's writer is given no markup mode, so the help is written as plain text: in its rich
    mode it exports HTML entities (`&#x27;` for every apostrophe). The one rich markup dlperf's
    help holds is `run`'s epilog (its `--set` keys, made from the adapters), which Typer's
    writer copies as it is: it is turned into Markdown here."""
    from dlperf.cli import app

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="dlperf")
    ctx.obj = {}
    text = get_docs_for_click(obj=root, ctx=ctx, name="dlperf", title="Command reference")
    for command in _commands(root, ctx):
        epilog = command.epilog
        if epilog:
            text = text.replace(f"{epilog}\n", f"{_markdown(epilog)}\n")
    return _NOTE + text.strip() + "\n"


def command_paths() -> list[str]:
    """Every command and group under `dlperf`, as typed: `dlperf run`, `dlperf env create`..."""
    from dlperf.cli import app

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="dlperf")
    return [path for path, _ in _walk(root, ctx, "dlperf")]


def _walk(group: object, ctx: typer.Context, prefix: str) -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    if isinstance(group, TyperGroup):
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None:
                continue
            path = f"{prefix} {name}"
            found.append((path, command))
            found.extend(_walk(command, ctx, path))
    return found


def _commands(root: TyperGroup, ctx: typer.Context) -> list:
    return [root, *(command for _, command in _walk(root, ctx, "dlperf"))]


def _markdown(markup: str) -> str:
    """Rich markup as Markdown: bold spans in `**`, every other style dropped."""
    out = []
    for line in markup.split("\n"):
        text = Text.from_markup(line)
        pieces, at = [], 0
        for span in sorted(text.spans, key=lambda s: s.start):
            if span.start < at:  # nested in a span already written
                continue
            pieces.append(text.plain[at : span.start])
            piece = text.plain[span.start : span.end]
            pieces.append(f"**{piece}**" if "bold" in str(span.style) else piece)
            at = span.end
        pieces.append(text.plain[at:])
        out.append("".join(pieces))
    return "\n".join(out)


def differences(path: Path) -> list[str]:
    """A unified diff of `path` against a fresh generation; empty when it is current."""
    fresh = command_reference()
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    return list(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            fromfile=f"{path} (committed)",
            tofile=f"{path} (from the CLI now)",
        )
    )


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    path = Path(paths[0]) if paths else REFERENCE
    if check:
        diff = differences(path)
        if diff:
            sys.stderr.write("".join(diff[:60]))
            sys.stderr.write(
                f"error: {path} is not what the CLI's help says now. Regenerate it with "
                "`bash scripts/docs` and commit it.\n"
            )
            return 1
        print(f"{path} is current")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(command_reference(), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
