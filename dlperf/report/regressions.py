"""The significant changes of a results folder, for the site's regressions page and its Atom
feed (`regressions.xml`, as asv publishes one).

A change is two consecutive results of one series (a benchmark on a machine) that
`dlperf.history` judged an improvement or a regression: the same pairing (each point against the
previous one with ok repeats) and the same test as `dlperf compare` and `dlperf history`
(larger than the threshold AND significant by `stats.significance`). Nothing is judged here.

The feed is deterministic: its times are the results' own (an entry's `updated` is the newer
result's creation time, the feed's the newest result's), its ids are derived from the two
result files, and its links are relative to the site (the feed lives beside `index.html`).
"""

from __future__ import annotations

import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from dlperf.history import HistoryPoint, with_baselines
from dlperf.identity import settings_label
from dlperf.printable import SURROGATES, escaped, printable

REGRESSION = "regression"
IMPROVEMENT = "improvement"
ATOM = "http://www.w3.org/2005/Atom"
FEED_ID = "urn:uuid:" + str(uuid.uuid5(uuid.NAMESPACE_URL, "dlperf-publish/regressions.xml"))
PAGE = "regressions.html"
FEED = "regressions.xml"


@dataclass(frozen=True)
class Change:
    """A significant change: `after`'s median against `before`'s, of one series."""

    before: HistoryPoint
    after: HistoryPoint

    @property
    def kind(self) -> str:
        return self.after.verdict  # "regression" or "improvement"

    @property
    def anchor(self) -> str:
        """The id of its row on the regressions page (and of its feed entry)."""
        return "change-" + str(uuid.uuid5(uuid.NAMESPACE_URL, self.key))[:8]

    @property
    def key(self) -> str:
        return f"{self.before.path}|{self.after.path}"

    @property
    def entry_id(self) -> str:
        return "urn:uuid:" + str(uuid.uuid5(uuid.NAMESPACE_URL, "dlperf-change/" + self.key))

    @property
    def title(self) -> str:
        p = self.after
        change = f"{p.change:+.1%}" if p.change is not None else "?"
        return f"{self.kind}: {p.benchmark_id} on {p.machine} ({change} {p.metric})"


def significant_changes(points: Iterable[HistoryPoint], improvements: bool = True) -> list[Change]:
    """Every regression (and, with `improvements`, every improvement) among history's
    `points` (whole series, in history's order: `history` without `last`), each with the
    result it was judged against; newest first.

    Each point is paired with its baseline by `history.with_baselines`, the function history
    judged it with, so by file: a point's `baseline_id` alone names two files when a result
    was copied, and the change would be drawn against the wrong one (the copy's numbers and
    link)."""
    series: dict[tuple[str, str], list[HistoryPoint]] = {}
    for p in points:
        series.setdefault(p.series, []).append(p)
    kinds = {REGRESSION, IMPROVEMENT} if improvements else {REGRESSION}
    found = []
    for line in series.values():
        for p, before in with_baselines(line):
            if p.verdict not in kinds or not isinstance(before, HistoryPoint):
                continue
            if before.result_id == p.baseline_id:  # else not a whole series: never guessed
                found.append(Change(before, p))  # type: ignore[arg-type]
    return sorted(found, key=lambda c: (c.after.created_utc, c.after.path), reverse=True)


def json_href(relpath: str) -> str:
    """The link to a result's JSON as the site copies it (under results/), from its path in
    the results folder."""
    return "results/" + "/".join(quote(part) for part in relpath.split("/"))


def result_href(point: HistoryPoint) -> str:
    """The link to a point's result JSON in the site."""
    return json_href(point.path)


def versions(point: HistoryPoint) -> str:
    """The framework and dlperf versions of a point's result."""
    framework = f"{point.framework} {point.framework_version or '?'}"
    return f"{framework}, dlperf {point.dlperf_version or '?'}"


def settings(point: HistoryPoint) -> str:
    return settings_label(point.settings_map)


def _summary(change: Change) -> str:
    b, a = change.before, change.after
    unit = a.unit or ""
    lines = [
        f"{change.kind.capitalize()} of {a.benchmark_id} on {a.machine} ({a.machine_id}): "
        f"median {a.metric} {b.median:.4g} -> {a.median:.4g} {unit} "
        f"({a.change:+.1%}; {a.test}" + (f", p = {a.p:.3g}" if a.p is not None else "") + ").",
        f"Before: {b.result_id} ({b.created_utc}), {versions(b)}, settings {settings(b)}.",
        f"After: {a.result_id} ({a.created_utc}), {versions(a)}, settings {settings(a)}.",
    ]
    if a.changes:
        lines.append("What changed: " + "; ".join(a.changes) + ".")
    return "\n".join(lines)


# What XML 1.0 cannot hold beyond the C0 controls (`printable` shows those escaped): the
# non-characters U+FFFE and U+FFFF and surrogates. Not even a character reference (&#xFFFE;)
# may name one, so ElementTree writes them as they are, and a feed holding one is not XML.
_NOT_XML = re.compile(f"[{SURROGATES}\ufffe\uffff]")


def xml_text(text: str, keep_lines: bool = False) -> str:
    """Stored text as an XML 1.0 document may hold it: its control characters shown escaped
    (`dlperf.printable`; `keep_lines` keeps new lines and tabs), and so are the characters XML
    forbids outright (`\\ufffe`)."""
    return escaped(_NOT_XML, printable(text, keep_lines=keep_lines))


def _add(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    """An Atom element; every text and attribute value passes `xml_text`: a feed holding a
    character XML 1.0 forbids is not XML, and feed readers drop it whole."""
    element = ET.SubElement(parent, f"{{{ATOM}}}{tag}", {k: xml_text(v) for k, v in
                                                          attrs.items()})  # fmt: skip
    if text is not None:
        element.text = xml_text(text, keep_lines=True)
    return element


def render_feed(changes: Sequence[Change], updated: str) -> str:
    """The Atom 1.0 feed of `changes` (newest first, as `significant_changes` gives them);
    `updated`: the feed's time when it has no entry (the newest result's creation time)."""
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed")
    _add(feed, "title", "dlperf: significant changes")
    _add(feed, "subtitle", "Regressions and improvements between consecutive results of a "
         "benchmark on a machine, judged by the test of dlperf compare.")  # fmt: skip
    _add(feed, "id", FEED_ID)
    _add(feed, "updated", max([updated, *(c.after.created_utc for c in changes)]))
    _add(feed, "link", rel="self", href=FEED)
    _add(feed, "link", rel="alternate", type="text/html", href=PAGE)
    author = _add(feed, "author")
    _add(author, "name", "dlperf publish")
    _add(feed, "generator", "dlperf publish")
    for change in changes:
        entry = _add(feed, "entry")
        _add(entry, "id", change.entry_id)
        _add(entry, "title", change.title)
        _add(entry, "updated", change.after.created_utc)
        _add(entry, "link", rel="alternate", type="text/html", href=f"{PAGE}#{change.anchor}")
        for point, which in ((change.before, "before"), (change.after, "after")):
            _add(entry, "link", rel="related", type="application/json",
                 href=result_href(point), title=f"{which}: {point.result_id}")  # fmt: skip
        _add(entry, "category", term=change.kind)
        _add(entry, "summary", _summary(change), type="text")
    ET.indent(feed)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, "unicode") + "\n"


__all__ = [
    "IMPROVEMENT",
    "REGRESSION",
    "Change",
    "json_href",
    "render_feed",
    "result_href",
    "significant_changes",
    "xml_text",
]
