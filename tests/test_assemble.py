"""dlperf.assemble: a Result's numbers from its repeats, checked by hand (no run, no machine)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dlperf.assemble import build_result, imported_environment
from dlperf.schema import (
    BenchmarkSpec,
    JobInfo,
    LoadGenRun,
    MachineLoad,
    Repeat,
    RepeatStatus,
    Result,
    ResultStatus,
    Telemetry,
    Window,
)
from dlperf.telemetry import MISSING


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


# ------------------------------------------------------------- the whole Result, pinned

SNAPSHOT = Path(__file__).with_name("snapshots") / "assemble-results.json"


def window_repeat(index: int, step_s: list[float], start: dict, **fields) -> Repeat:
    """An ok repeat of batch 32 whose window is `step_s`'s steps."""
    elapsed = sum(step_s)
    return Repeat(
        index=index,
        status=fields.pop("status", RepeatStatus.ok),
        throughput=32 * len(step_s) / elapsed,
        window=Window(start_step=2, end_step=2 + len(step_s), samples=32.0 * len(step_s),
                      elapsed_s=elapsed),
        step_times_s=step_s,
        workload=start,
        **fields,
    )  # fmt: skip


def telemetry(**fields) -> Telemetry:
    return Telemetry(device="cpu", period_s=0.1, samples=10, **fields)


def pinned_results() -> dict[str, Result]:
    """Results that pass through every step of `build_result`: failures and an inconsistent
    fingerprint, noise, a busy machine, telemetry (energy, throttling, a hung sensor), the
    latency target, LoadGen, a microbenchmark's score, MFU and its missing CPU peak."""
    start = {"framework_version": "2.1", "device": "cpu", "params": 25, "python": "3.11",
             "flops_per_sample": 4e9}  # fmt: skip
    spec = BenchmarkSpec(framework="pytorch", model="resnet50", mode="infer", batch_size=32,
                         repeats=7, latency_target_ms=20.0)  # fmt: skip
    load = MachineLoad(cpu_count=8, wall_s=10.0, other_cpu_s=40.0, other_share=0.5)
    energy = telemetry(energy_j=400.0, energy_source="rapl", throttled=True,
                       throttle_reasons=["sw_power_cap"], note="clocks at 80%")  # fmt: skip
    hung = telemetry(energy_note=MISSING + "nvidia-smi did not answer in 5 s")
    run_repeats = [
        window_repeat(1, [0.02, 0.021, 0.019, 0.02], start, telemetry=energy),
        window_repeat(2, [0.025, 0.03, 0.028, 0.026], start, machine_load=load),
        window_repeat(3, [0.021, 0.02, 0.022, 0.02], start, telemetry=hung),
        window_repeat(4, [0.02] * 4, {**start, "framework_version": "2.2"}),
        Repeat(index=5, status=RepeatStatus.crashed, message="exited with status 1", workload={}),
    ]
    results = {
        "run": build_result(
            spec, "run", run_repeats, environment=imported_environment(start)
        ),  # fmt: skip
        "imported": build_result(
            spec.model_copy(update={"device": "cuda", "latency_target_ms": 30.0}),
            "imported",
            run_repeats[:3],
            environment=imported_environment(start, {"dlperf_commit": "abc"}),
            peak=(1e13, "a datasheet"),
            imported=True,
            target_p95=(25.0, " (FAMBench's nearest rank)"),
            job=JobInfo(launcher="slurm", world_size=2, global_batch=64),
        ),
    }
    micro = BenchmarkSpec(framework="pytorch", model="embeddingbag", impl="micro", batch_size=8)
    micro_start = {"flops_per_sample": 3e6, "framework_version": "2.1"}
    results["micro"] = build_result(
        micro, "micro", [window_repeat(i, [0.01 * i] * 3, micro_start) for i in (1, 2, 3)],
        environment=imported_environment(micro_start), peak=(2e12, "measured"),
    )  # fmt: skip

    def loadgen(valid: bool, value: float) -> LoadGenRun:
        return LoadGenRun(scenario="Offline", valid=valid, metric="samples per second",
                          value=value, unit="samples/s", samples_per_second=value,
                          latency_ms={"p50": 1.0, "p90": 2.0, "p95": 2.5, "p99": 3.0})  # fmt: skip

    served = BenchmarkSpec(framework="x", model="m", mode="infer", scenario="offline",
                           batch_size=1, repeats=3, latency_target_ms=2.0)  # fmt: skip
    results["loadgen"] = build_result(
        served, "loadgen",
        [repeat(1, 100.0, {}, loadgen=loadgen(True, 100.0)),
         repeat(2, 104.0, {}, loadgen=loadgen(True, 104.0)),
         repeat(3, 300.0, {}, loadgen=loadgen(False, 300.0), status=RepeatStatus.invalid,
                message="LoadGen judged the run INVALID")],
        environment=imported_environment({}),
    )  # fmt: skip
    failed = [Repeat(index=i, status=RepeatStatus.timeout, message="ran past") for i in (1, 2)]
    results["failed"] = build_result(spec, "failed", failed, environment=imported_environment({}))
    return results


def pinned_json(result: Result) -> dict:
    data = json.loads(result.model_dump_json())
    data["created"] = "(now)"
    data["environment"]["dlperf_version"] = "(this)"
    return data


def test_whole_results_are_pinned() -> None:
    """Every stored field and warning of `pinned_results`, as the snapshot has them (written
    before `build_result` was split into steps; regenerate only for a deliberate change with
    DLPERF_UPDATE_SNAPSHOTS=1)."""
    got = {name: pinned_json(r) for name, r in pinned_results().items()}
    if os.environ.get("DLPERF_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(SNAPSHOT.read_text())
