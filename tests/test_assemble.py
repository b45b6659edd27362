"""dlperf.assemble: a Result's numbers from its repeats, checked by hand (no run, no machine)."""

from __future__ import annotations

import pytest

from dlperf.assemble import build_result, imported_environment
from dlperf.schema import BenchmarkSpec, LoadGenRun, Repeat, RepeatStatus, ResultStatus


def repeat(index: int, throughput: float, workload: dict, **fields) -> Repeat:
    return Repeat(index=index, status=fields.pop("status", RepeatStatus.ok),
                  throughput=throughput, workload=workload, **fields)  # fmt: skip


def test_mfu_and_a_microbenchmark_score_follow_the_median() -> None:
    spec = BenchmarkSpec(framework="pytorch", model="resnet50", batch_size=4, repeats=3)
    start = {"flops_per_sample": 2e9, "framework_version": "2"}
    repeats = [repeat(i, t, start) for i, t in enumerate([10.0, 12.0, 11.0], 1)]
    result = build_result(spec, "r", repeats, environment=imported_environment(start),
                          peak=(1e12, "a datasheet"))  # fmt: skip
    assert result.metrics.achieved_flops == pytest.approx(2e9 * 11.0)
    assert result.metrics.mfu == pytest.approx(2e9 * 11.0 / 1e12)
    assert result.metrics.peak_source == "a datasheet"

    micro = BenchmarkSpec(
        framework="pytorch", model="embeddingbag", impl="micro", batch_size=8, repeats=2
    )
    start = {"bytes_per_sample": 1000, "framework_version": "2"}
    repeats = [repeat(i, t, start) for i, t in enumerate([2e6, 4e6], 1)]
    result = build_result(micro, "m", repeats, environment=imported_environment(start))
    assert (result.metrics.score, result.metrics.score_unit) == (pytest.approx(3.0), "GB/s")


def test_an_invalid_loadgen_repeat_is_kept_outside_the_median() -> None:
    spec = BenchmarkSpec(
        framework="x", model="m", mode="infer", scenario="offline", batch_size=1, repeats=2
    )

    def run(valid: bool, value: float) -> LoadGenRun:
        return LoadGenRun(scenario="Offline", valid=valid, metric="samples per second",
                          value=value, unit="samples/s", samples_per_second=value)  # fmt: skip

    repeats = [
        repeat(1, 100.0, {}, loadgen=run(True, 100.0)),
        repeat(2, 300.0, {}, loadgen=run(False, 300.0), status=RepeatStatus.invalid),
    ]
    result = build_result(spec, "l", repeats, environment=imported_environment({}))
    assert result.status == ResultStatus.partial
    assert result.metrics.loadgen_metric.median == 100.0  # the VALID run only
    assert result.metrics.throughput.median == 100.0
    assert result.metrics.loadgen_valid is False
    assert result.repeats[1].throughput == 300.0  # kept, and shown
