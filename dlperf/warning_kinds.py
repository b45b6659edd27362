"""Warnings of many results said once per kind, for the terminal and the reports alike.

Two warnings are of one kind when their texts differ only in their numbers (a busy share, a
count, a list of repeats); the kind is said once, each number that differs written over all of
them (a range, or the union of lists), with the names of what it applies to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# A number in a warning (a share, a count, a list of repeats). Digits inside a word (resnet50,
# p95, b128) are part of the text: resnet50 and resnet101 are two kinds, not a range.
NUMBERS = re.compile(r"(?<![\w.])\d+(?:\.\d+)?%?(?:, \d+(?:\.\d+)?%?)*(?![\w])")


def group_warnings(items: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(what it applies to, warning) pairs as (warning, the names it applies to) per kind, in
    the order the kinds first appear, each name once."""
    kinds: dict[str, tuple[list[str], list[list[str]]]] = {}
    for name, said in items:
        names, values = kinds.setdefault(NUMBERS.sub("\0", said), ([], []))
        if name not in names:
            names.append(name)
        values.append(NUMBERS.findall(said))
    grouped = []
    for template, (names, values) in kinds.items():
        pieces = template.split("\0")
        said = pieces[0] + "".join(
            spread([v[i] for v in values]) + piece for i, piece in enumerate(pieces[1:])
        )
        grouped.append((said, names))
    return grouped


def spread(values: Sequence[str]) -> str:
    """One number of a kind over its warnings: the value where they agree; single numbers as
    their range ("81–83%"); lists ("repeat(s) 1, 2" and "2, 3") as their union ("1, 2, 3")."""
    seen = list(dict.fromkeys(values))
    if len(seen) == 1:
        return seen[0]
    percent = {v.endswith("%") for n in seen for v in n.split(", ")}
    if len(percent) != 1:  # shares and counts mixed: each as it was
        return " / ".join(seen)
    unit = "%" if percent == {True} else ""
    numbers = sorted({v.rstrip("%") for n in seen for v in n.split(", ")}, key=float)
    if all(", " not in v for v in seen):
        return f"{numbers[0]}–{numbers[-1]}{unit}"
    return ", ".join(n + unit for n in numbers)
