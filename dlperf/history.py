"""`dlperf history`: each benchmark's results over time on each machine, what changed between
them, and whether each change of the median is significant, judged by `dlperf compare`'s test.

A series is one benchmark on one machine (`dlperf.identity`): two machines are never one line.
A change of settings (an ablation, a new best practice) or of environment (framework, Python,
packages, dlperf commit) stays in the series and is marked in the point's `changes`.

Points come from the results folder's index (`dlperf.index`), refreshed first, so the JSON
files stay the truth. Within a series the points are ordered by creation time; each point with
ok repeats is judged against the previous point that had some (its baseline), by `stats.judge`
on the two sides' repeat values: the change must be larger than the threshold and significant
(exact Mann-Whitney U, or the t-intervals' fallback for three repeats or fewer) to be an
improvement or a regression. A point without an ok repeat is "failed"; the first measured
point of a series is "first". Results whose machine's hardware was not recorded (imported logs)
may come from several machines, so they are listed but not judged ("machine unknown") unless
the caller asks for it (`across_machines`, `--across-machines`).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

from dlperf import DlperfError
from dlperf.compare import check_threshold
from dlperf.identity import UNKNOWN, differences, id_matches
from dlperf.index import IndexedResult, Refresh
from dlperf.resultio import SkippedResult
from dlperf.schema import utc_time
from dlperf.stats import Significance, judge, significance
from dlperf.store import ResultStore

FIRST = "first"
FAILED = "failed"
NOT_JUDGED = "machine unknown"  # no hardware recorded: its points are not judged by default


@dataclass(frozen=True)
class HistoryFilters:
    """Which results a history shows: `frameworks`, `models` and `machines` (an id or a piece
    of the machine's label) any of (empty: all), `contains` every one of these substrings of
    the benchmark id and settings, `since` / `until` inclusive bounds on the creation time (ISO
    8601 dates or times; a date without a time is that day, in UTC)."""

    frameworks: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    machines: tuple[str, ...] = ()
    contains: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None


@dataclass(frozen=True)
class HistoryPoint(IndexedResult):
    """One result in its series' history: its index row, and how it compares."""

    # Against the baseline: the previous point with ok repeats (for a failed point, the
    # previous point); None for a series' first point.
    baseline_id: str | None = None
    changes: tuple[str, ...] = ()  # "setting channels_last 0 -> 1", "framework 2.1 -> 2.2"
    change: float | None = None  # median / baseline median - 1
    test: str | None = None
    p: float | None = None
    significant: bool | None = None
    verdict: str = FIRST  # "first", "failed", or compare's: improvement, regression, ...

    @property
    def result_id(self) -> str:
        return self.row["id"]

    def as_json(self) -> dict:
        """The point as `dlperf history --json` prints it: its row (values and settings as
        JSON values), its file and its verdict."""
        row = {**self.row, "values": list(self.values), "settings": self.settings_map}
        for name in ("loadgen", "parameters"):
            row[name] = json.loads(row[name])
        return {
            "path": self.path,
            **row,
            "baseline_id": self.baseline_id,
            "changes": list(self.changes),
            "change": self.change,
            "test": self.test,
            "p": self.p,
            "significant": self.significant,
            "verdict": self.verdict,
        }


def parse_when(text: str, *, end_of_day: bool = False, option: str = "") -> str:
    """`--since` / `--until` text as the index's UTC ISO time: a date (its start, or with
    `end_of_day` its last second) or a date and time (without a zone: UTC)."""
    try:
        when = utc_time(text)  # the reading of results' times, so bounds and times agree
    except ValueError:
        raise DlperfError(
            f"{option + ' ' if option else ''}{text!r} is not a date or time; give ISO 8601, "
            "e.g. 2025-01-31 or 2025-01-31T14:00:00+01:00"
        ) from None
    if len(text.strip()) == 10 and end_of_day:  # a bare date (UTC): the whole day counts
        when = when.replace(hour=23, minute=59, second=59)
    return when.isoformat()


def check_filter_texts(f: HistoryFilters) -> None:
    """Refuse an empty filter, which would match everything (or nothing) unsaid."""
    for option, texts in (("--framework", f.frameworks), ("--model", f.models),
                          ("--machine", f.machines), ("--config", f.contains)):  # fmt: skip
        if any(not text.strip() for text in texts):
            raise DlperfError(f"{option} '': give a name or some text, or leave {option} out")


def check_choices(f: HistoryFilters, rows: Sequence[IndexedResult], results_dir: Path) -> None:
    """Refuse a framework, model or machine that names none of the results (`rows`: all of
    them), naming those there are (and, for an unknown name, those dlperf knows)."""
    from dlperf.adapters import adapter_names
    from dlperf.models import MODELS

    for option, wanted, column, known in (
        ("--framework", f.frameworks, "framework", adapter_names()),
        ("--model", f.models, "model", tuple(MODELS)),
    ):
        there = sorted({str(r.row[column]) for r in rows})
        for name in wanted:
            if name in there:
                continue
            listed = f"{column}s in {results_dir}: {', '.join(there) or 'none'}"
            if name in known:
                raise DlperfError(f"{option} {name!r}: no results of {name}; {listed}")
            raise DlperfError(
                f"{option} {name!r}: dlperf knows no such {column} ({', '.join(known)}); {listed}"
            )
    machines = {str(r.row["machine_id"]): str(r.row["machine"]) for r in rows}
    for piece in f.machines:
        if not any(id_matches(piece, mid) or piece.lower() in label.lower()
                   for mid, label in machines.items()):  # fmt: skip
            listed = "; ".join(f"{mid} ({label})" for mid, label in sorted(machines.items()))
            raise DlperfError(
                f"--machine {piece!r} is no machine id and no piece of a machine's name in "
                f"{results_dir}; machines there: {listed or 'none'}"
            )


def history(
    results_dir: Path,
    filters: HistoryFilters | None = None,
    *,
    threshold: float = 0.05,
    last: int | None = None,
    across_machines: bool = False,
) -> tuple[list[HistoryPoint], Refresh]:
    """Every series' points that pass `filters`, by benchmark, machine, then time, each judged
    against its baseline (see the module docstring); `last`: only each series' newest `last`
    points (still judged against the points before them); `across_machines`: judge results of
    unknown machines against each other too. Also returns what refreshing the index found.
    Files that are not loadable results are skipped with a SkippedResult warning, as
    `ResultStore.load` does."""
    check_threshold(threshold)
    if last is not None and last < 1:
        raise DlperfError(f"--last {last}: give 1 or more points per configuration")
    f = filters or HistoryFilters()
    check_filter_texts(f)
    since = None if f.since is None else parse_when(f.since, option="--since")
    until = None if f.until is None else parse_when(f.until, end_of_day=True, option="--until")
    index, refresh = ResultStore(results_dir).index()
    try:
        machines = f.machines
        if f.frameworks or f.models or f.machines:
            every = index.query()
            check_choices(f, every, results_dir)
            # An older, shorter id (reports, scripts) names its machine: the index matches
            # whole ids, so it is given the ids it stands for.
            ids = {str(r.row["machine_id"]) for r in every}
            machines += tuple(sorted(m for m in ids for p in f.machines if id_matches(p, m)))
        rows = index.query(frameworks=f.frameworks, models=f.models, machines=machines,
                           contains=f.contains, since=since, until=until)  # fmt: skip
        # A point is judged against its own machine's: one id AND one label (the facts it is
        # made of), so machines whose ids collide are never judged against each other.
        rows.sort(key=_machine_series)  # stable: each series stays in time order
        plan = [pair for _key, group in groupby(rows, key=_machine_series)
                for pair in with_baselines(list(group), last, across_machines)]  # fmt: skip
        # compare's test for each pair, kept in the index: a long history is tested once.
        judged = [(base, row) for row, base in plan if row.values and base and base.values]
        known = index.significances(judged)
        new = [(base, row, significance(base.values, row.values)) for base, row in judged
               if (base.path, row.path) not in known]  # fmt: skip
        index.remember_significances(new)
        known.update({(base.path, row.path): sig for base, row, sig in new})
    finally:
        index.close()
    for _path, error in refresh.skipped:
        warnings.warn(f"skipped {error}", SkippedResult, stacklevel=2)
    points = [_point(row, base, threshold, known.get((base.path, row.path)) if base else None,
                     judged=across_machines or _machine_known(row))
              for row, base in plan]  # fmt: skip
    return points, refresh


def _machine_series(row: IndexedResult) -> tuple[str, str, str]:
    return (*row.series, str(row.row["machine"]))


def history_points(
    results_dir: Path,
    filters: HistoryFilters | None = None,
    *,
    threshold: float = 0.05,
    last: int | None = None,
    across_machines: bool = False,
) -> list[HistoryPoint]:
    """`history`'s points alone."""
    return history(
        results_dir, filters, threshold=threshold, last=last, across_machines=across_machines
    )[0]


def _machine_known(row: IndexedResult) -> bool:
    return row.row["machine_id"] != UNKNOWN


def with_baselines(
    rows: Sequence[IndexedResult], last: int | None = None, across_machines: bool = False
) -> list[tuple[IndexedResult, IndexedResult | None]]:
    """One series' rows (in time order), each with its baseline (module docstring); `last`:
    only the newest `last` rows, their baselines found among all. The rows of a machine whose
    hardware was not recorded have none unless `across_machines`: they may be two machines."""
    judged = across_machines or not rows or _machine_known(rows[0])
    pairs: list[tuple[IndexedResult, IndexedResult | None]] = []
    measured: IndexedResult | None = None  # the newest earlier row with ok repeats
    for i, row in enumerate(rows):
        previous = rows[i - 1] if i else None
        base = (measured or previous) if row.values else previous
        pairs.append((row, base if judged else None))
        if row.values:
            measured = row
    return pairs if last is None else pairs[max(0, len(pairs) - last) :]


def _point(
    row: IndexedResult,
    base: IndexedResult | None,
    threshold: float,
    known: Significance | None = None,
    judged: bool = True,
) -> HistoryPoint:
    change = test = p = significant = None
    if not row.values:
        verdict = FAILED
    elif not judged:
        verdict = NOT_JUDGED
    elif base is None or not base.values:
        verdict = FIRST
    else:
        judged = judge(base.values, row.values, row.higher_is_better, threshold, known)
        change, test, p = judged.change, judged.test, judged.p
        significant, verdict = judged.significant, judged.verdict
    return HistoryPoint(
        row.path,
        row.stamp,
        row.row,
        baseline_id=base.id if base else None,
        changes=tuple(differences(base.row, row.row)) if base else (),
        change=change,
        test=test,
        p=p,
        significant=significant,
        verdict=verdict,
    )
