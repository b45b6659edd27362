"""How one number or one table reads in a report: pure text, no ordering or selection.

Text from a result (a framework version, a host name, a warning, a settings value, a machine
label, LoadGen's reasons: anything a workload, a log or a hand-edited file can put there) enters
Markdown through `text` (or `code`), which makes it read as exactly that text wherever the
Markdown is rendered: on GitHub, or as the site's HTML. Markdown that dlperf writes around
such text is a `Markdown` string; `table` and `heading` escape any other string as text.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence

from dlperf.printable import printable
from dlperf.report._data import first_failed, ok_count
from dlperf.schema import Result, ResultStatus

DASH = "—"


class Markdown(str):
    """Markdown written by dlperf, any text from results in it already escaped (`text`,
    `code`): `table` and `heading` take it as it is."""


# What can start a link, an image, a code span, emphasis or strikethrough, or escape the
# escaping; `<` where it can open raw HTML or an autolink (not in "3 < 6"); `&` where it
# makes an entity; `_` only where it is not inside a word (there it is no emphasis, and
# identifiers such as channels_last stay readable). `|` is `cell`'s: a table must see `\|`,
# never `\\|`.
_SPECIAL = re.compile(
    r"[\\`*\[\]~]|<(?=[A-Za-z/!?])|&(?=#?[A-Za-z0-9]+;)|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])"
)
# GitHub links a bare URL or www. address: a backslash before its ':' or '.' keeps it text.
_AUTOLINK = re.compile(r"(?i)(?<=[a-z0-9])(?=://)|(?<=\bwww)(?=\.)")
_BREAKS = re.compile(r"[\r\n\t]+")


def text(value: object) -> Markdown:
    """Text from a result as Markdown that shows exactly that text: no link, image, HTML,
    emphasis or code span comes of it, no bare URL is linked, and no line break can end a
    table row or a list item (new lines read as spaces; control characters, U+2028 and U+2029
    as escapes, `dlperf.printable`)."""
    flat = printable(_BREAKS.sub(" ", str(value)))
    return Markdown(_AUTOLINK.sub("\\\\", _SPECIAL.sub(r"\\\g<0>", flat)))


def code(value: object) -> Markdown:
    """Text from a result as an inline code span (a benchmark id, a configuration). Text a
    code span cannot hold as it is (a backtick, a backslash: a table splits at `\\|` on GitHub,
    a control character) is escaped `text` instead."""
    flat = printable(_BREAKS.sub(" ", str(value)))
    if "`" in flat or "\\" in flat or not flat.strip():
        return text(value)
    return Markdown(f"`{flat}`")


_CODE_SPAN = re.compile(r"`([^`\r\n]+)`")


def prose(value: object) -> Markdown:
    """Text from a result that names commands in backticks (a warning: "rerun when idle
    (`dlperf doctor` shows what runs)") as Markdown that shows that text with each balanced
    `...` as a code span, as the sentence means it; everything else, an unpaired backtick
    among it, is `text`."""
    flat, out, at = str(value), [], 0
    for span in _CODE_SPAN.finditer(flat):
        out += [text(flat[at : span.start()]), code(span.group(1))]
        at = span.end()
    return Markdown("".join([*out, text(flat[at:])]))


def md(value: object) -> Markdown:
    """`value` as Markdown: dlperf's own (`Markdown`) as it is, anything else as `text`."""
    return value if isinstance(value, Markdown) else text(value)


def cell(value: object) -> str:
    """A table cell: `md`, with `|` escaped so that the row keeps its columns."""
    return md(value).replace("|", "\\|")


def table(header: Sequence[object], rows: Sequence[Sequence[object]]) -> list[str]:
    """A Markdown table's lines, and the blank line after it: every cell a `cell`."""
    out = ["| " + " | ".join(map(cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return [*out, ""]


def median_text(result: Result, with_counts: bool = True) -> str:
    """The median samples/s, "failed (why)", and `(k/n ok)` / `(noisy)` where they apply."""
    t = result.metrics.throughput
    if result.status == ResultStatus.failed or t is None:
        failed = first_failed(result)
        return f"failed ({failed.status.value if failed else 'no repeats'})"
    text = f"{t.median:.2f}"
    if with_counts and result.status == ResultStatus.partial:
        text += f" ({ok_count(result)}/{len(result.repeats)} ok)"
    if result.metrics.noisy:
        text += " (noisy)"
    return text


def loadgen_cell(result: Result) -> str:
    """A LoadGen configuration's number: its scenario's metric in its unit over the VALID
    repeats, and how many repeats LoadGen judged VALID."""
    runs = [r.loadgen for r in result.repeats if r.loadgen]
    valid = sum(run.valid for run in runs)
    verdict = (
        "VALID" if runs and valid == len(runs) else f"INVALID ({len(runs) - valid}/{len(runs)})"
    )
    m = result.metrics.loadgen_metric
    if m is None:
        return verdict if runs else median_text(result)
    # The metric's name where the unit does not say it: "scheduled", "early-stopping p90".
    which = (runs[0].metric if runs else "").replace("samples per second", "")
    which = which.replace(" latency", "").strip()
    return f"{m.median:.2f} {m.unit}{f' {which}' if which else ''}, {verdict}"


def loadgen_details(result: Result) -> str:
    """What LoadGen measured beside the headline, medians over the VALID runs (all runs when
    none is VALID): completed and scheduled samples/s, tokens/s, early-stopping estimates."""
    runs = [r.loadgen for r in result.repeats if r.loadgen]
    runs = [run for run in runs if run.valid] or runs
    if not runs:
        return DASH

    parts = []
    for label, pick in (
        ("completed", lambda run: run.samples_per_second if run.scenario == "Server" else None),
        ("scheduled", lambda run: run.scheduled_samples_per_second),
    ):
        values = [v for v in map(pick, runs) if v is not None]
        if values:
            parts.append(f"{label} {statistics.median(values):.2f} samples/s")
    tokens = [run.tokens_per_second for run in runs if run.tokens_per_second is not None]
    if tokens:
        parts.append(f"{statistics.median(tokens):.1f} tokens/s")
    for pct in ("p90", "p99"):
        estimates = [run.early_stopping_ms[pct] for run in runs if pct in run.early_stopping_ms]
        if estimates:
            parts.append(f"early-stopping {pct} {statistics.median(estimates):.2f} ms")
    return "; ".join(parts) or DASH


def headline_text(result: Result) -> str:
    """A result's number in the cross-framework table: LoadGen's metric, else samples/s."""
    return loadgen_cell(result) if result.spec.scenario else median_text(result)


def window_text(result: Result) -> str:
    """The window asked for, and the marks actually used when the log's marks were coarser."""
    s = result.spec
    asked = f"skip {s.skip}, measure {s.measure}"
    used = {(r.window.start_step, r.window.end_step) for r in result.repeats if r.window}
    if not used and result.origin == "parse":
        return DASH  # imported LoadGen or FAMBench logs: their tools' numbers, no step window
    if not used or used == {(s.skip, s.skip + s.measure)}:
        return asked
    steps = ", ".join(f"{a}–{b}" for a, b in sorted(used))
    return f"{asked} (marks used: steps {steps})"


def per_joule_text(result: Result) -> str:
    value = result.metrics.samples_per_joule
    return DASH if value is None else f"{value:.4g}"


def measured_text(value: float | None, unit: str) -> str:
    """A median of the compared metric: samples/s bare (the page's unit), others with theirs."""
    if value is None:
        return "no ok repeat"
    return f"{value:.2f}" + ("" if unit == "samples/s" else f" {unit}")
