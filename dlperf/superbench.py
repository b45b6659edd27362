"""SuperBench's statistics of a model benchmark, computed from dlperf's stored step marks.

SuperBench (microsoft/superbenchmark, benchmarks/model_benchmarks/model_base.py) times every
step of one run in ms and reports, per precision and mode:

- `<prec>_<mode>_step_time`: the mean of the per-step times;
- `<prec>_<mode>_throughput`: the mean of the per-step throughputs, batch per rank / step
  time, so samples/s per GPU (not the job's, and not samples over the window's time);
- inference only: `..._step_time_<p>` and `..._throughput_<p>` for p in 50, 90, 95, 99,
  99.9, by numpy's `method="nearest"` percentile (benchmarks/base.py). Training has no
  percentiles. A data-parallel training job reduces each step's time to its maximum over
  the ranks before the mean.

dlperf's own numbers differ on purpose (window throughput, the median of repeats, linearly
interpolated percentiles); these are kept beside them in `metrics.peer["superbench"]`, each
with its rule in words, so a SuperBench export says what SuperBench itself would print.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from dlperf.schema import BenchmarkSpec, PeerStat, Repeat, RepeatStatus

SUITE = "superbench"
# SuperBench's percentile set and its names' suffixes ("99.9" -> `..._step_time_99.9`).
SB_PERCENTILES = ("50", "90", "95", "99", "99.9")
_MODES = {"train": "train", "infer": "inference"}
_AMP_TYPES = {"float16": "fp16", "bfloat16": "bf16"}


def nearest_percentile(values: Sequence[float], p: float) -> float:
    """numpy's `percentile(values, p, method="nearest")`, SuperBench's: the order statistic
    at index round((n - 1) * p / 100), a half rounding to the even index (as numpy.around).

    This is neither linear interpolation (dlperf's `stats.percentile`) nor the classic
    nearest-rank ceil(p n / 100): for 11 values p95 is index round(9.5) = 10, the maximum.
    The arithmetic is numpy's own ((n - 1) times p / 100 in floats), so ties round alike.
    """
    if not values:
        raise ValueError("no values for a percentile")
    ordered = sorted(values)
    return ordered[round((len(ordered) - 1) * (p / 100.0))]


def precision_name(spec: BenchmarkSpec, repeats: Sequence[Repeat]) -> str:
    """SuperBench's precision: fp32, or the AMP run's data type (fp16, bf16) as its workload
    reported it (else fp16 on CUDA, bf16 on a CPU: the frameworks' defaults)."""
    if spec.precision != "amp":
        return "fp32"
    ok = [r for r in repeats if r.status == RepeatStatus.ok]
    dtype = ok[0].workload.get("amp_dtype") if ok else None
    return _AMP_TYPES.get(str(dtype), "fp16" if spec.device == "cuda" else "bf16")


def metric_prefix(spec: BenchmarkSpec, repeats: Sequence[Repeat]) -> str:
    """`fp32_train_`, `fp16_inference_`: how SuperBench's metric names start."""
    return f"{precision_name(spec, repeats)}_{_MODES[spec.mode]}_"


def representative_repeat(repeats: Sequence[Repeat]) -> Repeat | None:
    """The ok repeat with step marks whose throughput is the (lower) median, ties to the
    lowest index; None when there is none.

    SuperBench reports one run, so its statistics are one run's. Taking the median repeat
    (rather than pooling every repeat's steps) keeps them the statistics of a run that
    happened, the run dlperf's own headline (the median) points at, and keeps an outlier
    repeat out as the median does; pooled steps would mix the spread between processes into
    percentiles SuperBench computes within one process.
    """
    ok = [r for r in repeats if r.status == RepeatStatus.ok and r.step_times_s]
    if not ok:
        return None
    ordered = sorted(ok, key=lambda r: (r.throughput or 0.0, r.index))
    return ordered[(len(ordered) - 1) // 2]


def per_step_times_ms(repeat: Repeat) -> tuple[list[float], float]:
    """The repeat's step times in ms and the steps each mark interval covers: a log marked
    every k steps gives each interval's mean step (k > 1), as no single step's time is known."""
    times = repeat.step_times_s
    steps = 1.0
    if repeat.window and times:
        steps = max(1.0, (repeat.window.end_step - repeat.window.start_step) / len(times))
    return [1000.0 * t / steps for t in times], steps


def superbench_stats(spec: BenchmarkSpec, repeats: Sequence[Repeat]) -> dict[str, PeerStat]:
    """SuperBench's metrics of one configuration (names without the benchmark part, e.g.
    `fp32_train_throughput`), from the median repeat's step times; {} without step marks
    (LoadGen scenarios, imported logs that keep only totals)."""
    repeat = representative_repeat(repeats)
    if repeat is None:
        return {}
    times, steps = per_step_times_ms(repeat)
    times = [t for t in times if t > 0]
    if not times:
        return {}
    throughputs = [spec.batch_size * 1000.0 / t for t in times]
    n_ok = sum(r.status == RepeatStatus.ok for r in repeats)
    where = f"repeat {repeat.index}, the median of {n_ok} ok"
    if steps > 1:
        where += f"; marks every {steps:g} steps, so each interval's mean step"
    if spec.world_size > 1:
        where += "; the slowest rank's steps (SuperBench: each step's max over the ranks)"
    prefix = metric_prefix(spec, repeats)
    out = {
        prefix + "step_time": PeerStat(
            value=statistics.fmean(times), unit="ms",
            rule=f"SuperBench: mean of per-step times ({where})",
        ),
        prefix + "throughput": PeerStat(
            value=statistics.fmean(throughputs), unit="samples/s per rank",
            rule="SuperBench: mean of per-step throughput, batch per rank / step time "
            f"({where})",
        ),
    }  # fmt: skip
    if spec.mode == "infer":
        for name, values, unit in (
            ("step_time", times, "ms"),
            ("throughput", throughputs, "samples/s per rank"),
        ):
            for p in SB_PERCENTILES:
                out[f"{prefix}{name}_{p}"] = PeerStat(
                    value=nearest_percentile(values, float(p)), unit=unit,
                    rule=f"SuperBench: p{p} of per-step {name.replace('_', ' ')}, numpy "
                    f"'nearest' (index round((n-1) p/100)) ({where})",
                )  # fmt: skip
    return out
