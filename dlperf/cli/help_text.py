"""How a command shows its help: the docstring's paragraphs one line each, for rich to wrap at
the terminal's width, and placeholders as words (FILE, N, TEXT), never Python types. Every
command and group of the app is one of these classes."""

from __future__ import annotations

import inspect
from typing import Any, get_args

from typer.core import TyperArgument, TyperCommand, TyperGroup

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
