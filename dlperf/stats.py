"""Pure statistics on plain sequences: measurement windows, summaries, intervals, noise warnings.

Distributions and tests come from scipy.stats (imported inside the functions that need it:
it costs more than half a second, and most commands never need it)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from dlperf.events import Mark
from dlperf.schema import SummaryStats


class TooFewSteps(ValueError):
    """The marks do not reach the end of the requested window."""


class ZeroLengthWindow(ValueError):
    """The window's first and last marks carry the same (or a decreasing) time: no rate."""


@dataclass(frozen=True)
class WindowThroughput:
    throughput: float  # samples / elapsed
    start_step: int  # the mark the window starts at (its samples are not counted)
    end_step: int
    samples: float
    elapsed_s: float
    step_times_s: tuple[float, ...]  # durations between consecutive marks inside the window
    rank_elapsed_s: tuple[float, ...] = ()  # a job's: each rank's own window (job_window)


def window_throughput(marks: Sequence[Mark], skip: int, measure: int) -> WindowThroughput:
    """Throughput over iterations skip+1 .. skip+measure.

    Samples in the window divided by the time between the window's first and last mark,
    never an average of per-step rates. With coarse marks (every k steps), the window is the
    first mark at or after `skip` to the last mark at or before `skip + measure`; the result
    says which marks were used.
    """
    if measure < 1 or skip < 0:
        raise ValueError("measure must be >= 1 and skip >= 0")
    end_target = skip + measure
    last_step = marks[-1].step if marks else None
    if last_step is None or last_step < end_target:
        got = "no step marks" if last_step is None else f"marks up to step {last_step}"
        raise TooFewSteps(
            f"the window needs step {end_target} (skip {skip} + measure {measure}) but the "
            f"run logged {got}"
        )
    starts = [m for m in marks if m.step >= skip]
    ends = [m for m in marks if m.step <= end_target]
    if not ends or ends[-1].step <= starts[0].step:
        raise TooFewSteps(
            f"no two marks lie inside the window steps {skip}..{end_target}: the log's marks "
            "are coarser than the window; use a larger --measure"
        )
    start, end = starts[0], ends[-1]
    inside = [m for m in marks if start.step < m.step <= end.step]
    samples = sum(m.samples for m in inside)
    elapsed = end.time - start.time
    if elapsed <= 0:
        raise ZeroLengthWindow(
            f"the marks of steps {start.step} and {end.step} are {elapsed:g} s apart: the "
            "workload's clock is coarser than the window (or went backwards), so no rate exists"
        )
    times = [b.time - a.time for a, b in zip([start, *inside], inside, strict=False)]
    return WindowThroughput(samples / elapsed, start.step, end.step, samples, elapsed, tuple(times))


def job_window(ranks: Sequence[Sequence[Mark]], skip: int, measure: int) -> WindowThroughput:
    """A job's window from each rank's own marks: every rank's samples over the slowest rank's
    own window, whose steps and step times it keeps.

    Only differences within one rank's clock are used, so ranks on different hosts combine
    safely; a per-step max-reduce across ranks (SuperBench's) would also add up unsynchronised
    jitter. One rank's window is its `window_throughput`.
    """
    if len(ranks) == 1:
        return window_throughput(ranks[0], skip, measure)
    windows: dict[int, WindowThroughput] = {}
    # The rank that reached the fewest steps first: a short job is reported by its shortest rank.
    for rank in sorted(range(len(ranks)), key=lambda r: ranks[r][-1].step if ranks[r] else -1):
        try:
            windows[rank] = window_throughput(ranks[rank], skip, measure)
        except (TooFewSteps, ZeroLengthWindow) as exc:
            raise type(exc)(f"rank {rank}: {exc}") from None
    ordered = [windows[r] for r in range(len(ranks))]
    slowest = max(ordered, key=lambda w: w.elapsed_s)
    samples = sum(w.samples for w in ordered)
    return dataclasses.replace(
        slowest,
        throughput=samples / slowest.elapsed_s,
        samples=samples,
        rank_elapsed_s=tuple(w.elapsed_s for w in ordered),
    )


def t_quantile_975(df: int) -> float:
    """The two-sided 95 % Student t quantile t(0.975, df)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


CI_LEVEL = 0.95  # the confidence asked of the median's interval


@dataclass(frozen=True)
class MedianCI:
    """Ranks (1-based, in ascending order) of the order statistics that bound the median's
    interval, and the coverage it achieves exactly: 1 - 2 P(B <= low_rank - 1), B binomial(n,
    1/2)."""

    low_rank: int
    high_rank: int
    coverage: float


def median_ci_ranks(n: int, level: float = CI_LEVEL) -> MedianCI | None:
    """The distribution-free interval for the median of n values: (x(k), x(n+1-k)), with k the
    largest rank whose coverage is still at least `level`; None when even (x(1), x(n)) falls
    short of it.

    Each value lies below the true median with probability 1/2 whatever the distribution
    (continuous), so the count B of values below it is binomial(n, 1/2), and (x(k), x(n+1-k))
    holds the median unless B < k or B > n - k: coverage 1 - 2 P(B <= k - 1) (Conover,
    Practical Nonparametric Statistics, 3rd ed., section 3.2; Hollander & Wolfe, section 3.6).
    The coverage takes only discrete values, so it is reported as achieved (n=7: (x(1), x(7))
    at 1 - 2/128 = 98.4 %) instead of pretending to be exactly `level`.

    The rule is "coverage >= level, else no interval": at 95 % that needs n >= 6, because the
    widest interval for n=5, (x(1), x(5)), covers only 1 - 2/32 = 93.75 %. Printing it as a
    95 % interval would overstate it, so five repeats say "unavailable" too (issue 13 wrote
    n < 5; n = 5 is not enough for the level the interval claims).

    Binomial tail sums are exact integers (the same numbers as scipy.stats.binom.cdf, which the
    tests check): no float rounding at the boundary, and no scipy import (half a second) for
    every summary.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    if not 0 < level < 1:
        raise ValueError("level must lie in (0, 1)")
    # P(B <= k - 1) <= (1 - level) / 2, as integers: tail * 2 * den <= (den - num) * 2**n
    frac = Fraction(level).limit_denominator(10**6)  # 0.95 -> 19/20 exactly
    allowed = (frac.denominator - frac.numerator) * 2**n
    tail, term, k = 0, 1, 0  # tail = sum of C(n, i) for i < k; term = C(n, k)
    while k < n and (tail + term) * 2 * frac.denominator <= allowed:
        tail += term
        term = term * (n - k) // (k + 1)
        k += 1
    if k == 0:  # even B = 0 alone (probability 2**-n) leaves too little for both tails
        return None
    coverage = 1 - 2 * Fraction(tail, 2**n)
    return MedianCI(k, n + 1 - k, float(coverage))


def median_ci_min_n(level: float = CI_LEVEL) -> int:
    """The fewest values for which `median_ci_ranks` gives an interval (6 at 95 %)."""
    n = 1
    while median_ci_ranks(n, level) is None:
        n += 1
    return n


MEDIAN_CI_MIN_N = median_ci_min_n()


def ci_text(s: SummaryStats, digits: int = 2) -> str:
    """The median's interval for people: 'low–high', or why there is none (never 'None')."""
    if s.ci_low is None or s.ci_high is None:
        return f"n/a ({s.n} < {MEDIAN_CI_MIN_N} repeats)"
    return f"{s.ci_low:.{digits}f}–{s.ci_high:.{digits}f}"


def mean_t_interval(values: Sequence[float]) -> tuple[float, float]:
    """The 95 % Student t interval of the mean, mean ± t(0.975, n-1) s / sqrt(n); a single
    value gives the zero-width interval at it. Used by `dlperf compare` only where its repeats
    are too few for any order-statistic interval or rank test (it assumes normal values)."""
    if not values:
        raise ValueError("no values for an interval")
    mean = statistics.fmean(values)
    if len(values) == 1:
        return mean, mean
    half = t_quantile_975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean - half, mean + half


def summarize(values: Sequence[float], unit: str = "") -> SummaryStats:
    """Median, mean, spread and the median's distribution-free 95 % interval, in the stored
    form (`schema.SummaryStats`, one list of the fields); `unit` is the values' unit.

    The interval is the one for the headline, the median (`median_ci_ranks`): order statistics
    of the values themselves, so it never leaves [min, max] (never negative for positive
    values). Below MEDIAN_CI_MIN_N values it is None, with `ci_coverage` None too."""
    if not values:
        raise ValueError("no values to summarize")
    vals = tuple(float(v) for v in values)
    n = len(vals)
    mean = statistics.fmean(vals)
    stdev = statistics.stdev(vals) if n > 1 else 0.0
    ordered = sorted(vals)
    ranks = median_ci_ranks(n, CI_LEVEL)
    return SummaryStats(
        unit=unit,
        values=list(vals),
        n=n,
        median=statistics.median(vals),
        mean=mean,
        min=ordered[0],
        max=ordered[-1],
        stdev=stdev,
        cv=stdev / mean if mean else 0.0,
        ci_level=CI_LEVEL,
        ci_low=ordered[ranks.low_rank - 1] if ranks else None,
        ci_high=ordered[ranks.high_rank - 1] if ranks else None,
        ci_coverage=ranks.coverage if ranks else None,
    )


PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)  # SuperBench's set of percentiles


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between order statistics (numpy's
    and pandas' default method). SuperBench's percentiles are numpy's "nearest" instead
    (`dlperf.superbench.nearest_percentile`), stored apart in `metrics.peer`."""
    if not values:
        raise ValueError("no values for a percentile")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


# FAMBench's `batch_latency_95_sec`, in words (shown wherever the number is).
FAMBENCH_P95_RULE = (
    "FAMBench's batch_latency_95_sec: one log's batch latencies (i-th batch_stop - i-th "
    "batch_start), sorted, at index ceil(0.95 x (n - 1)): the slower one, never interpolated"
)


def fambench_p95(latencies: Sequence[float]) -> float | None:
    """FAMBench's 95th percentile batch latency of one log (its result_summarizer): the sorted
    latencies at index ceil(0.95 * (n - 1)), rounding up to the slower batch; None without
    batches. Its only percentile rule: every FAMBench p95 in dlperf comes from here."""
    if not latencies:
        return None
    ordered = sorted(latencies)
    return ordered[math.ceil(0.95 * (len(ordered) - 1))]


def percentile_name(q: float) -> str:
    return f"p{q:g}"


def latency_percentiles(values: Sequence[float]) -> dict[str, float]:
    return {percentile_name(q): percentile(values, q) for q in PERCENTILES}


# How to get more repeats, in the caller's terms: a warning suggests only what its command has.
RERUN_WITH_REPEATS = "use --repeats 7"  # `dlperf run` (a sweep runs through the same code)
RERUN_NEUTRAL = "re-run with 7 repeats"  # imported logs: `dlperf parse` has no --repeats


def noise_warnings(
    s: SummaryStats,
    what: str = "throughput",
    cv_limit: float = 0.10,
    *,
    more_repeats: str = RERUN_NEUTRAL,
) -> list[str]:
    """pyperf-style warnings: say that a number is unstable instead of hiding it.
    `more_repeats` is the advice for too few repeats, worded for the command that made them."""
    out = []
    if s.n < 3:
        out.append(f"only {s.n} repeat(s) of {what}: too few to judge stability; {more_repeats}")
    if s.cv > cv_limit:
        out.append(
            f"{what} is noisy: the standard deviation is {s.cv:.1%} of the mean "
            f"(limit {cv_limit:.0%}); run `dlperf doctor` and close other programs"
        )
    for label, value in (("maximum", s.max), ("minimum", s.min)):
        if s.median and abs(value - s.median) / s.median > 0.5:
            out.append(
                f"the {label} {what} ({value:.4g}) is {abs(value / s.median - 1):.0%} away from "
                f"the median ({s.median:.4g}): an outlier repeat"
            )
    return out


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test, exact (over every split of the pooled
    values, ties counted as half), so it is valid for the few repeats a benchmark has. Large
    samples (more than 200,000 splits) use scipy's normal approximation (tie-corrected)."""
    import numpy as np
    from scipy import stats

    x, y = np.asarray(list(a), dtype=float), np.asarray(list(b), dtype=float)
    n, m = len(x), len(y)
    if not n or not m:
        raise ValueError("both samples need values")
    if math.comb(n + m, n) > 200_000:
        return float(stats.mannwhitneyu(x, y, method="asymptotic").pvalue)
    ranks = stats.rankdata(np.concatenate([x, y]))  # midranks: a tie counts half, as in U
    if len(np.unique(ranks)) == n + m:
        return float(stats.mannwhitneyu(x, y, method="exact").pvalue)
    # With ties scipy's exact U distribution does not apply (it assumes none); the permutation
    # test over every split of the midranks is the exact test. U is x's rank sum less
    # n(n+1)/2, so |U - nm/2| is |rank sum - n(N+1)/2|.
    mid = (n + m + 1) / 2
    if min(n, m) == 1:  # permutation_test wants two values a side; n + m splits, one per rank
        lone = ranks[0] if n == 1 else ranks[-1]
        return float(np.mean(np.abs(ranks - mid) >= abs(lone - mid) - 1e-9))

    def distance(rx, _ry, axis):  # permutation_test passes both samples
        return np.abs(np.sum(rx, axis=axis) - n * mid)

    test = stats.permutation_test((ranks[:n], ranks[n:]), distance, vectorized=True,
                                  n_resamples=np.inf, alternative="greater")  # fmt: skip
    return float(test.pvalue)


def smallest_p(n: int, m: int) -> float:
    """The smallest two-sided p-value the exact test can give for sample sizes n and m: with
    too few repeats it cannot reach significance at all (3 vs 3: 0.1)."""
    return min(1.0, 2 / math.comb(n + m, n))


# ---------------------------------------------------------------- is a change significant?

ALPHA = 0.05


@dataclass(frozen=True)
class Significance:
    """Whether two sides' repeat values differ, by `significance`."""

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
    """Whether B's values differ from A's (both non-empty): the exact two-sided Mann-Whitney U
    test at ALPHA, or, when the repeat counts are too small for that test to ever reach ALPHA
    (3 vs 3: its smallest p is 0.1), the two 95 % Student t intervals of the means not
    overlapping. The fallback computes the mean's interval from the values here, not the
    stored summaries' median interval, which needs six repeats; it assumes roughly normal
    repeats, a weaker footing than the rank test's, which is why it is only the fallback.
    `dlperf.index` keeps this per pair of result files: bump index.INDEX_FORMAT whenever the
    test changes."""
    if smallest_p(len(va), len(vb)) <= ALPHA:
        p = mann_whitney_p(va, vb)
        return Significance("Mann-Whitney U", p, p <= ALPHA)
    (low_a, high_a), (low_b, high_b) = mean_t_interval(va), mean_t_interval(vb)
    # "95% CI overlap": of the means, recomputed from the values (see `significance`)
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


# ------------------------------------------------- how many repeats would show a change?

REPEATS_SEARCHED = 100  # the most repeats a side `repeats_to_detect` tries
LINEAR_UP_TO = 10  # every count up to here is tried (the test changes at small counts)
FAR = 1e6  # "any change": B this many times faster (or slower) than A


@dataclass(frozen=True)
class Detection:
    """What `significance` can tell with `n_a` vs `n_b` repeats on the noise the repeats showed
    (each side's CV; a side of one repeat borrows the other's): whether any change could be
    significant with these counts at all (`reachable`), whether a change of the threshold's size
    would be (`enough`), and the fewest repeats a side at which it would be (`repeats`; None:
    more than REPEATS_SEARCHED)."""

    n_a: int
    n_b: int
    cv_a: float
    cv_b: float
    reachable: bool
    enough: bool
    repeats: int | None


def ideal_repeats(n: int, centre: float, stdev: float) -> list[float]:
    """n values centred on `centre` whose sample standard deviation is exactly `stdev`: the
    normal distribution's quantiles at (i + 1/2) / n, rescaled. Typical repeats of that noise
    (no draw's luck), on which a test's verdict is its verdict for a typical run."""
    if n < 2 or stdev == 0:
        return [centre] * n
    z = [statistics.NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)]
    scale = stdev / statistics.stdev(z)
    return [centre + scale * v for v in z]


def _cv(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / abs(mean) if mean else 0.0


def repeats_to_detect(va: Sequence[float], vb: Sequence[float], threshold: float) -> Detection:
    """How many repeats a side `significance` needs to find a change of `threshold` (a fraction
    of A's median, in the direction B moved) significant on the noise of these repeats: each
    side's relative spread (CV) kept, ideal repeats of it (`ideal_repeats`) judged by the same
    test compare uses at each count. The answer is for a typical run: a run as likely to be
    luckier as not. With `n_a` vs `n_b` repeats as noisy as these, even an unbounded change
    may never be significant (3 vs 3 at a CV of 40 % or more: the t interval of the mean then
    reaches past zero); `reachable` says so."""
    cv_a, cv_b = _cv(va), _cv(vb)
    cv_a = cv_a if cv_a is not None else cv_b or 0.0
    cv_b = cv_b if cv_b is not None else cv_a
    up = statistics.median(vb) >= statistics.median(va)
    size = 1 + threshold if up else 1 - threshold

    def detects(n_a: int, n_b: int, factor: float) -> bool:
        a = ideal_repeats(n_a, 1.0, cv_a)
        b = ideal_repeats(n_b, factor, cv_b * factor)
        return significance(a, b).significant

    n_a, n_b = len(va), len(vb)
    reachable = detects(n_a, n_b, FAR if up else 1 / FAR)
    enough = detects(n_a, n_b, size)
    needed = next((n for n in range(2, LINEAR_UP_TO + 1) if detects(n, n, size)), None)
    if needed is None and detects(REPEATS_SEARCHED, REPEATS_SEARCHED, size):
        # Beyond the small counts the rank test's power only grows with n: bisect.
        low, high = LINEAR_UP_TO, REPEATS_SEARCHED
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if detects(mid, mid, size) else (mid, high)
        needed = high
    return Detection(n_a, n_b, cv_a, cv_b, reachable, enough, needed)
