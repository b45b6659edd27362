import math

import pytest

from dlperf.events import Mark
from dlperf.stats import (
    MEDIAN_CI_MIN_N,
    MedianCI,
    TooFewSteps,
    ci_text,
    job_window,
    mean_t_interval,
    median_ci_ranks,
    noise_warnings,
    summarize,
    t_quantile_975,
    window_throughput,
)


def dense_marks(step_times, batch=10):
    marks, t = [Mark(0, 100.0, 0)], 100.0
    for i, dt in enumerate(step_times, start=1):
        t += dt
        marks.append(Mark(i, t, batch))
    return marks


def test_window_counts_samples_between_first_and_last_mark():
    # steps 1..2 skipped (slow warm-up), steps 3..5 measured: 30 samples in 0.1+0.2+0.3 s
    marks = dense_marks([5.0, 5.0, 0.1, 0.2, 0.3, 9.0])
    w = window_throughput(marks, skip=2, measure=3)
    assert (w.start_step, w.end_step) == (2, 5)
    assert w.samples == 30
    assert w.elapsed_s == pytest.approx(0.6)
    assert w.throughput == pytest.approx(50.0)
    assert w.step_times_s == pytest.approx((0.1, 0.2, 0.3))


def test_a_jobs_window_is_every_ranks_samples_over_the_slowest_ranks_own_window():
    fast = dense_marks([1.0, 0.1, 0.1, 0.1])  # the two ranks' clocks are 50 s apart
    slow = [Mark(m.step, m.time + 50.0, m.samples) for m in dense_marks([1.0, 0.1, 0.4, 0.1])]
    w = job_window([fast, slow], skip=1, measure=3)
    assert (w.start_step, w.end_step) == (1, 4)
    assert w.samples == 60  # 3 steps x 10 samples x 2 ranks
    assert w.elapsed_s == pytest.approx(0.6)  # rank 1's own window
    assert w.throughput == pytest.approx(100.0)
    assert w.step_times_s == pytest.approx((0.1, 0.4, 0.1))  # the slowest rank's steps
    assert w.rank_elapsed_s == pytest.approx((0.3, 0.6))
    # Per-step maxima would time the job at 0.1 + 0.4 + 0.1 = 0.6 here, but 0.4 + 0.4 + 0.4 =
    # 1.2 when each rank is slow on a different step: jitter that is not the job's.
    one = job_window([fast], skip=1, measure=3)
    assert one == window_throughput(fast, 1, 3) and one.rank_elapsed_s == ()


def test_a_jobs_short_rank_names_itself():
    with pytest.raises(TooFewSteps, match="^rank 1: .*marks up to step 2"):
        job_window([dense_marks([0.1] * 5), dense_marks([0.1, 0.1])], skip=1, measure=3)


def test_window_is_not_an_average_of_step_rates():
    # rates 100 and 10 samples/s: mean of rates 55, true throughput 20/1.1 = 18.18
    w = window_throughput(dense_marks([0.1, 1.0]), skip=0, measure=2)
    assert w.throughput == pytest.approx(20 / 1.1)


def test_window_with_coarse_marks_uses_marks_inside_and_records_them():
    # a log that only marks every 100 steps (Keras TimeHistory style), 12800 samples each
    marks = [Mark(0, 0.0, 0)] + [Mark(100 * k, 40.0 * k, 12800) for k in range(1, 7)]
    w = window_throughput(marks, skip=100, measure=500)
    assert (w.start_step, w.end_step) == (100, 600)
    assert w.throughput == pytest.approx(5 * 12800 / 200.0)


def test_too_few_steps_is_an_error_not_a_number():
    with pytest.raises(TooFewSteps, match="needs step 5"):
        window_throughput(dense_marks([0.1] * 4), skip=2, measure=3)
    with pytest.raises(TooFewSteps, match="no step marks"):
        window_throughput([], skip=0, measure=1)


def test_summary_against_hand_computed_values():
    s = summarize([10.0, 12.0, 11.0, 13.0, 9.0])
    assert s.median == 11.0 and s.mean == 11.0
    assert (s.min, s.max, s.n) == (9.0, 13.0, 5)
    # sample variance = (1+1+0+4+4)/4 = 2.5
    assert s.stdev == pytest.approx(math.sqrt(2.5))
    assert s.cv == pytest.approx(math.sqrt(2.5) / 11.0)
    # Five values: even (x(1), x(5)) covers the median only 1 - 2/32 = 93.75 %, short of 95 %.
    assert (s.ci_level, s.ci_low, s.ci_high, s.ci_coverage) == (0.95, None, None, None)


def test_summary_of_one_value_and_even_count():
    one = summarize([5.0])
    assert (one.stdev, one.cv, one.ci_low, one.ci_high) == (0.0, 0.0, None, None)
    assert summarize([1.0, 2.0, 3.0, 10.0]).median == 2.5


# Hand-computed from binomial(n, 1/2) tails, P(B <= j) = sum of C(n, i), i <= j, over 2**n; the
# interval (x(k), x(n+1-k)) needs P(B <= k-1) <= 0.025 and covers 1 - 2 P(B <= k-1).
#   n=5:  P(B<=0) = 1/32 = 0.031 > 0.025: none
#   n=6:  P(B<=0) = 1/64 = 0.016, P(B<=1) = 7/64 = 0.109: k=1, 1 - 2/64 = 96.875 %
#   n=7:  P(B<=0) = 1/128, P(B<=1) = 8/128 = 0.0625: k=1, 1 - 2/128 = 98.4375 %
#   n=10: P(B<=1) = 11/1024 = 0.011, P(B<=2) = 56/1024 = 0.055: k=2, 1 - 22/1024 = 97.85 %
#   n=20: P(B<=5) = (1+20+190+1140+4845+15504)/2**20 = 21700/1048576 = 0.0207,
#         P(B<=6) = 60460/1048576 = 0.0577: k=6, (x(6), x(15)), 1 - 43400/1048576 = 95.86 %
# (Conover's table A3 gives the same ranks for n = 6..20.)
@pytest.mark.parametrize(
    "n, expected",
    [
        (1, None),
        (4, None),
        (5, None),
        (6, MedianCI(1, 6, 1 - 2 / 64)),
        (7, MedianCI(1, 7, 1 - 2 / 128)),
        (10, MedianCI(2, 9, 1 - 22 / 1024)),
        (20, MedianCI(6, 15, 1 - 43400 / 1048576)),
    ],
)
def test_median_interval_ranks_against_hand_computed_binomial_tails(n, expected):
    assert median_ci_ranks(n) == expected


def test_median_interval_ranks_agree_with_scipys_binomial():
    from scipy import stats

    for n in range(1, 301):
        got = median_ci_ranks(n)
        # the largest k with P(B <= k-1) <= 0.025, from scipy's cdf (k = 0: none)
        k = sum(1 for j in range(n // 2 + 1) if stats.binom.cdf(j, n, 0.5) <= 0.025)
        if k == 0:
            assert got is None, n
            continue
        assert (got.low_rank, got.high_rank) == (k, n + 1 - k), n
        assert got.coverage == pytest.approx(1 - 2 * stats.binom.cdf(k - 1, n, 0.5), abs=1e-12)
        assert got.coverage >= 0.95, n
        # one rank further in would fall short: k is the narrowest interval that reaches 95 %
        assert 1 - 2 * stats.binom.cdf(k, n, 0.5) < 0.95, n


def test_median_interval_threshold_and_other_levels():
    assert MEDIAN_CI_MIN_N == 6  # the coverage >= 95 % rule: n=5 reaches only 93.75 %
    assert median_ci_ranks(5, level=0.90) == MedianCI(1, 5, 1 - 2 / 32)  # 93.75 % >= 90 %
    assert median_ci_ranks(4, level=0.90) is None  # 1 - 2/16 = 87.5 %
    with pytest.raises(ValueError):
        median_ci_ranks(0)
    with pytest.raises(ValueError):
        median_ci_ranks(7, level=1.0)


def test_summary_interval_is_the_medians_order_statistics():
    s = summarize([105.0, 98.0, 101.0, 99.0, 100.0, 97.0, 103.0])  # n=7: (x(1), x(7))
    assert (s.ci_low, s.ci_high, s.ci_coverage) == (97.0, 105.0, pytest.approx(0.984375))
    s = summarize([float(v) for v in (7, 3, 9, 1, 10, 5, 2, 8, 4, 6)])  # n=10: (x(2), x(9))
    assert (s.ci_low, s.ci_high) == (2.0, 9.0)
    s = summarize([float(v) for v in range(20, 0, -1)])  # n=20: (x(6), x(15))
    assert (s.ci_low, s.ci_high, s.median) == (6.0, 15.0, 10.5)
    s = summarize([4.0, 1.0, 6.0, 2.0, 5.0, 3.0])  # n=6: (x(1), x(6))
    assert (s.ci_low, s.ci_high, s.ci_coverage) == (1.0, 6.0, pytest.approx(0.96875))


def test_median_interval_is_never_negative_on_skewed_data():
    # One slow-start outlier in seven: the mean's t-interval would reach below zero
    # (mean 15.14, s 37.42, t(0.975, 6) = 2.447: 15.14 - 34.61 < 0), the median's cannot.
    skewed = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 100.0]
    assert mean_t_interval(skewed)[0] < 0
    s = summarize(skewed)
    assert (s.ci_low, s.ci_high) == (1.0, 100.0) and s.ci_low > 0
    for n in range(6, 60):  # heavy right tail: the interval stays inside [min, max]
        values = [0.5 + 1.7**i % 97 for i in range(n)]
        s = summarize(values)
        assert s.min <= s.ci_low <= s.median <= s.ci_high <= s.max and s.ci_low > 0


def test_mean_t_interval_against_hand_computed_values():
    # compare's fallback: mean 11, s = sqrt(2.5), t(0.975, 4) = 2.776 in printed tables
    half = 2.7764451 * math.sqrt(2.5) / math.sqrt(5)
    assert mean_t_interval([10.0, 12.0, 11.0, 13.0, 9.0]) == pytest.approx((11 - half, 11 + half))
    assert mean_t_interval([5.0]) == (5.0, 5.0)
    with pytest.raises(ValueError):
        mean_t_interval([])


def test_ci_text_says_why_there_is_no_interval():
    assert ci_text(summarize([3.0, 1.0, 2.0])) == "n/a (3 < 6 repeats)"
    assert ci_text(summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])) == "1.00–7.00"


def test_t_quantiles_agree_with_the_printed_table():
    # Student t table, two-sided 95 % (3 decimals): df 1, 6, 30; the normal 1.96 far out.
    assert t_quantile_975(1) == pytest.approx(12.706, abs=5e-4)
    assert t_quantile_975(6) == pytest.approx(2.447, abs=5e-4)
    assert t_quantile_975(30) == pytest.approx(2.042, abs=5e-4)
    assert t_quantile_975(500) == pytest.approx(1.965, abs=5e-4)
    assert t_quantile_975(10**7) == pytest.approx(1.960, abs=5e-4)
    with pytest.raises(ValueError):
        t_quantile_975(0)


def test_noise_warnings_flag_unstable_numbers():
    assert noise_warnings(summarize([100.0, 101.0, 99.0])) == []
    noisy = noise_warnings(summarize([100.0, 130.0, 70.0]))
    assert any("noisy" in w and "30.0%" in w for w in noisy)
    outlier = noise_warnings(summarize([100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 300.0]))
    assert any("maximum" in w and "outlier" in w for w in outlier)
    assert any("too few" in w for w in noise_warnings(summarize([1.0, 1.0])))


def test_too_few_repeats_advice_names_only_what_the_caller_has():
    (neutral,) = noise_warnings(summarize([1.0, 1.0]))  # a core default: no command's option
    assert neutral.endswith("too few to judge stability; re-run with 7 repeats")
    (run,) = noise_warnings(summarize([1.0, 1.0]), more_repeats="use --repeats 7")
    assert run.endswith("; use --repeats 7")


def test_marks_that_all_lie_after_the_window_are_too_few_steps():
    marks = [Mark(150, 1.0, 0.0), Mark(200, 2.0, 100.0)]  # a log that starts late
    with pytest.raises(TooFewSteps, match="no two marks lie inside the window steps 20..120"):
        window_throughput(marks, 20, 100)


def test_a_zero_length_window_is_its_own_error():
    from dlperf.stats import ZeroLengthWindow

    marks = [Mark(i, 5.0, 0.0 if i == 0 else 8.0) for i in range(6)]  # a clock that never moves
    with pytest.raises(ZeroLengthWindow, match="0 s apart"):
        window_throughput(marks, skip=1, measure=3)
