"""`dlperf compare A B`: configuration by configuration, did B get faster or slower than A?

Each side's number is the median of its ok repeats. A change counts only when it is larger
than the threshold (default 5 %) AND it is significant: the exact two-sided Mann-Whitney U
test on the repeats at alpha 0.05, or, when the repeat counts are too small for that test to
ever reach alpha (3 vs 3 repeats: its smallest p is 0.1), the two 95 % Student t confidence
intervals of the mean not overlapping. A significant drop beyond the threshold is a regression.

That fallback computes the mean's t-interval from each side's repeat values here; it does not
use the stored summaries' interval, which is the median's distribution-free one and needs six
repeats (`stats.median_ci_ranks`): the test only falls back when one side has three repeats or
fewer, where no such interval exists. The t-interval assumes roughly normal repeats, a weaker
footing than the rank test's, which is why it is only the fallback.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dlperf import DlperfError
from dlperf.schema import Result
from dlperf.stats import mann_whitney_p, mean_t_interval, smallest_p
from dlperf.store import latest_per_config, load_result, load_results

ALPHA = 0.05


@dataclass(frozen=True)
class Row:
    key: str
    metric: str
    higher_is_better: bool
    a: float
    b: float
    change: float  # b / a - 1
    test: str  # how significance was judged
    p: float | None
    significant: bool
    verdict: str  # "regression", "improvement", "no change", "within noise"


def load_side(path: Path) -> dict[str, Result]:
    """A results folder (newest result per configuration) or one result file."""
    if path.is_file():
        result = load_result(path)
        return {result.spec.config_key(): result}
    if not path.is_dir():
        raise DlperfError(f"{path}: no such results folder or result file")
    results = latest_per_config(load_results(path))
    if not results:
        raise DlperfError(f"{path}: no results in this folder")
    return {r.spec.config_key(): r for r in results}


def values_of(result: Result) -> tuple[str, list[float], bool]:
    """(metric name, the ok repeats' values, higher is better) for one result."""
    ok = [r for r in result.repeats if r.status.value == "ok"]
    runs = [r.loadgen for r in ok if r.loadgen]
    if runs and runs[0].unit == "ms":  # LoadGen's stream scenarios: a latency
        return runs[0].metric, [r.value for r in runs], False
    return "samples/s", [r.throughput for r in ok if r.throughput is not None], True


@dataclass(frozen=True)
class Significance:
    """Whether two sides' repeat values differ, by the test of this module's docstring."""

    test: str
    p: float | None
    significant: bool


@dataclass(frozen=True)
class Verdict:
    """B's repeats against A's: the change of the medians and whether it counts."""

    change: float  # median(b) / median(a) - 1
    test: str  # how significance was judged
    p: float | None
    significant: bool
    verdict: str  # "regression", "improvement", "no change", "within noise"


def significance(va: Sequence[float], vb: Sequence[float]) -> Significance:
    """The exact Mann-Whitney U test, or the t-intervals' fallback when the repeat counts are
    too small for it to reach ALPHA (both sides non-empty). `dlperf.index` keeps this per pair
    of result files: bump index.INDEX_FORMAT whenever the test changes."""
    if smallest_p(len(va), len(vb)) <= ALPHA:
        p = mann_whitney_p(va, vb)
        return Significance("Mann-Whitney U", p, p <= ALPHA)
    (low_a, high_a), (low_b, high_b) = mean_t_interval(va), mean_t_interval(vb)
    # "95% CI overlap": of the means (module docstring)
    return Significance("95% CI overlap", None, high_a < low_b or high_b < low_a)


def judge(
    va: Sequence[float],
    vb: Sequence[float],
    higher_is_better: bool,
    threshold: float,
    known: Significance | None = None,
) -> Verdict:
    """B's values against A's (both non-empty): a change beyond `threshold` that is significant
    is an improvement or a regression. `known`: `significance(va, vb)` computed earlier."""
    sig = known or significance(va, vb)
    change = statistics.median(vb) / statistics.median(va) - 1
    worse = change < 0 if higher_is_better else change > 0
    if abs(change) <= threshold:
        verdict = "no change"
    elif not sig.significant:
        verdict = "within noise"
    else:
        verdict = "regression" if worse else "improvement"
    return Verdict(change, sig.test, sig.p, sig.significant, verdict)


def compare_results(a: Result, b: Result, threshold: float) -> Row | None:
    metric, va, better_up = values_of(a)
    _, vb, _ = values_of(b)
    if not va or not vb:
        return None
    v = judge(va, vb, better_up, threshold)
    return Row(a.spec.config_key(), metric, better_up, statistics.median(va),
               statistics.median(vb), v.change, v.test, v.p, v.significant,
               v.verdict)  # fmt: skip


def check_threshold(threshold: float) -> None:
    if not (math.isfinite(threshold) and 0 <= threshold < 1):
        raise DlperfError(
            f"--threshold {threshold} must be a fraction in [0, 1), such as 0.05 for 5 %"
        )


def compare(a: Path, b: Path, threshold: float = 0.05) -> tuple[list[Row], list[str]]:
    """Rows for the configurations both sides have, and notes on the ones only one has."""
    check_threshold(threshold)
    import pandas as pd

    sides = [pd.DataFrame({"key": list(side), "result": list(side.values())})
             for side in (load_side(a), load_side(b))]  # fmt: skip
    joined = pd.merge(*sides, on="key", how="outer", suffixes=("_a", "_b"), indicator="side")
    rows, notes = [], []
    for key, result_a, result_b, side in joined.sort_values("key").itertuples(index=False):
        if side != "both":
            notes.append(f"{key}: only in {'A' if side == 'left_only' else 'B'}")
            continue
        row = compare_results(result_a, result_b, threshold)
        if row is None:
            notes.append(f"{key}: no ok repeat on one side")
        else:
            rows.append(row)
    return rows, notes


def render_markdown(rows: list[Row], notes: list[str], threshold: float) -> str:
    lines = [
        f"Threshold {threshold:.0%}; significance: exact Mann-Whitney U at alpha {ALPHA}, or 95% "
        "Student t confidence intervals of the means that do not overlap when there are too few "
        "repeats for it.",
        "",
        "| configuration | metric | A | B | change | test | p | verdict |",
        "|---|---|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        p = f"{r.p:.3g}" if r.p is not None else "–"
        mark = "**" if r.verdict == "regression" else ""
        lines.append(
            f"| {r.key} | {r.metric} | {r.a:.4g} | {r.b:.4g} | {r.change:+.1%} | {r.test} | "
            f"{p} | {mark}{r.verdict}{mark} |"
        )
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
