"""Where the command line's output goes and how text reaches it: the two consoles, which never
pass on a control character they did not make; lines and table columns that keep a path or an
id whole; text, JSON and data written past rich; the core's Python warnings as one line."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape as esc
from rich.measure import Measurement
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from dlperf.printable import printable, printable_json


class PrintableConsole(Console):
    """A rich Console that never sends a control character it did not make itself: every piece
    of text it prints (messages, table cells, progress descriptions; stored text among them: a
    workload's reason, a framework version, a host name, a warning) has its control
    characters shown escaped (`dlperf.printable`), while rich's own styles and cursor moves
    (control segments) go out as they are."""

    def render_str(self, text: str, **kwargs) -> Text:  # type: ignore[override]
        # Before rich measures it: tables keep their widths with the escapes in.
        return super().render_str(printable(text, keep_lines=True), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # Whatever reached the buffer another way (a Text built directly): the last gate.
        return super()._render_buffer(map(_printable_segment, buffer))


def _printable_segment(segment: Segment) -> Segment:
    if segment.control:  # rich's own: a cursor move, a screen clear it decided on
        return segment
    return Segment(printable(segment.text, keep_lines=True), segment.style)


def _width(stream: TextIO) -> int | None:
    """The terminal's width; $COLUMNS where it is set (rich reads it); else 120 columns in a
    pipe or a file, where lines are not shown in a window."""
    return None if stream.isatty() or os.environ.get("COLUMNS", "").isdigit() else 120


console = PrintableConsole(width=_width(sys.stdout))
err = PrintableConsole(stderr=True, width=_width(sys.stderr))


def print_whole(out: Console, before: str, name: object, after: str = "", **kwargs) -> None:
    """A line that names a path or an id (`before` and `after` are rich markup, `name` is
    shown as it is): `name` whole, never broken or cut. Rich moves a word that does not fit to
    the next line; one wider than the console it would fold mid-name, so that one goes on a
    line of its own, unwrapped (a window narrower than it folds it on screen, a copy gives it
    whole)."""
    text = esc(str(name))
    if cell_len(str(name)) + 1 < out.width:
        out.print(f"{before}{' ' if before else ''}{text}{after}", **kwargs)
        return
    if before:
        out.print(before, **kwargs)
    out.print(text, soft_wrap=True, **kwargs)
    if after:
        out.print(after.lstrip(), **kwargs)


def print_plain(out: Console, text: str, **kwargs) -> None:
    """Plain text (no markup) whose words are paths or ids made elsewhere: wrapped between
    words, and a word wider than the console on a line of its own, never broken."""
    line: list[str] = []
    for word in text.split(" "):
        if cell_len(word) + 1 < out.width:
            line.append(word)
            continue
        if line:
            out.print(esc(" ".join(line)), **kwargs)
            line = []
        out.print(esc(word), soft_wrap=True, **kwargs)
    if line:
        out.print(esc(" ".join(line)), **kwargs)


def indented(markup: str, indent: int = 2) -> Padding:
    """Rich markup wrapped between words with every line `indent` columns in (the way a note
    under a heading reads)."""
    return Padding(Text.from_markup(markup), (0, 0, 0, indent), expand=False)


def whole_column(table: Table, header: str, names: Iterable[str], **kwargs) -> None:
    """A table column of ids or paths as wide as the longest name's longest word, so rich
    never cuts one with "…" nor breaks it mid-name: the other columns wrap instead (a name's
    words after its first, like a configuration's settings, wrap below it)."""
    words = [w for name in names for w in str(name).split()]
    # A fixed width: rich narrows the other columns to fit, never this one.
    width = max(map(cell_len, [*words, header]), default=0)
    table.add_column(header, width=width, **kwargs)


def print_table(out: Console, table: Table) -> None:
    """A table whose columns of numbers (no_wrap, min_width) must stay whole: at the console's
    width, or wider where even its narrowest layout is wider (a narrow window then wraps the
    lines on screen, a copy gives them whole), never with a number cut by "…"."""
    # Measured unbounded: rich clamps a measurement to the width it is given.
    needed = Measurement.get(out, out.options.update_width(2**16), table).minimum
    if needed <= out.width:
        out.print(table)
        return
    width = out.width  # print(width=) only narrows: the console itself is widened, for this
    out.width = needed
    try:
        out.print(table)
    finally:
        out.width = width


def write_text(text: str, stream: TextIO | None = None) -> None:
    """Text made outside rich (Markdown of `compare`, FAMBench's table) on stdout (or
    `stream`), control characters escaped as the consoles do."""
    (stream or sys.stdout).write(printable(text, keep_lines=True))


def write_json(text: str, stream: TextIO | None = None) -> None:
    """A JSON document (a stored result, as stored) on stdout: the same JSON value, with the
    controls JSON lets through raw (C1, DEL, U+2028) written as \\u escapes."""
    (stream or sys.stdout).write(printable_json(text))


def write_data(text: str) -> None:
    """Exported data (CSV) on stdout: byte for byte into a pipe or a file, control characters
    escaped only when stdout is a terminal, where they would act."""
    sys.stdout.write(printable(text, keep_lines=True) if sys.stdout.isatty() else text)


def print_json(data: object) -> None:
    """One JSON document on stdout, for --json: never through rich, which would wrap it."""
    import json

    write_json(json.dumps(data, indent=2) + "\n")


said_warnings: set[str] = set()  # what `show_warning` said in this command


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings from the core (a skipped result file) as one line, without source lines; each
    text once per command: `publish` and `history` read a folder both through its index and its
    files, and a skipped file or a copied result is one thing to say (Python's own once-per-place
    filter forgets whenever a library sets a filter, and the places differ)."""
    if str(message) in said_warnings:
        return
    said_warnings.add(str(message))
    err.print(f"[yellow]warning:[/] {esc(str(message))}", highlight=False, soft_wrap=True)
