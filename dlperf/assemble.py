"""Results from repeats: classify a finished process, store it as a repeat, build a Result.

Pure: nothing here probes the machine or reads a file. The caller passes in what it measured
and what it knows about the machine (the `Environment`, the peak FLOP/s of the job), so a run
(`dlperf.runner`) and a log import (`dlperf.importers`) assemble their results with one code.
"""

from __future__ import annotations

import statistics
import uuid
from datetime import datetime, timezone
from typing import Any

from dlperf import __version__
from dlperf.events import ParsedRun
from dlperf.schema import (
    BenchmarkSpec,
    Environment,
    JobInfo,
    Metrics,
    ModelInfo,
    PeerStat,
    Repeat,
    RepeatStatus,
    Result,
    ResultStatus,
    SourceInfo,
    SummaryStats,
    Window,
)
from dlperf.stats import (
    PERCENTILES,
    RERUN_NEUTRAL,
    RERUN_WITH_REPEATS,
    TooFewSteps,
    WindowThroughput,
    ZeroLengthWindow,
    job_window,
    latency_percentiles,
    noise_warnings,
    percentile_name,
    summarize,
)
from dlperf.superbench import SUITE as SUPERBENCH
from dlperf.superbench import superbench_stats
from dlperf.system import BUSY_SHARE  # the share of the CPUs that makes a machine busy
from dlperf.telemetry import MISSING

# Workload facts that must agree across repeats before their numbers may share a median (with
# the digest of the interpreter's installed distributions, Repeat.env_digest).
FINGERPRINT_KEYS = ("framework_version", "device", "device_name", "params", "python")


def new_result_id() -> str:
    now = datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def classify(
    spec: BenchmarkSpec, outcome: str, exit_code: int | None, parsed: ParsedRun
) -> tuple[RepeatStatus, str, WindowThroughput | None]:
    """(status, message, window or None) for one finished process."""
    reached = parsed.marks[-1].step if parsed.marks else 0
    where = f"after {reached} of {spec.steps} steps"
    if outcome == "timeout":
        return RepeatStatus.timeout, f"ran past --timeout {spec.timeout_s:g} s {where}", None
    if outcome == "no_output":
        return (
            RepeatStatus.hung,
            f"no output for {spec.no_output_timeout_s:g} s {where}; killed",
            None,
        )
    if parsed.unsupported:
        return RepeatStatus.unsupported, f"not supported: {parsed.unsupported}", None
    if exit_code != 0:
        why = f": {parsed.failure}" if parsed.failure else ""
        return RepeatStatus.crashed, f"exited with status {exit_code} {where}{why}", None
    if parsed.failure:
        return RepeatStatus.crashed, f"the run failed {where}: {parsed.failure}", None
    if not parsed.start and not parsed.marks:
        return RepeatStatus.bad_output, f"the workload wrote no usable {parsed.what}", None
    try:
        window = job_window(parsed.rank_marks or [parsed.marks], spec.skip, spec.measure)
    except TooFewSteps as exc:
        return RepeatStatus.too_few_steps, f"{exc}; the workload exited cleanly {where}", None
    except ZeroLengthWindow as exc:
        return RepeatStatus.bad_output, str(exc), None
    return RepeatStatus.ok, "", window


def make_repeat(
    index: int,
    status: RepeatStatus,
    message: str,
    window: WindowThroughput | None,
    parsed: ParsedRun,
    **fields: object,
) -> Repeat:
    """The stored repeat for a classified run (launched here or imported from a log)."""
    return Repeat(
        index=index,
        status=status,
        message=message,
        throughput=window.throughput if window else None,
        window=Window(
            start_step=window.start_step,
            end_step=window.end_step,
            samples=window.samples,
            elapsed_s=window.elapsed_s,
        )
        if window
        else None,
        step_times_s=list(window.step_times_s) if window else [],
        workload=parsed.start,
        peak_rss_mib=parsed.peak_rss_mib,
        **{"warnings": list(parsed.notes), **fields},
    )


def latency_summary(ok: list[Repeat]) -> dict[str, float]:
    """Per-step time percentiles in ms: over every ok repeat's window steps, or, for LoadGen
    runs, the median over the repeats of LoadGen's own percentiles."""
    runs = [r.loadgen for r in ok if r.loadgen]
    if runs:
        names = [n for n in map(percentile_name, PERCENTILES) if n in runs[0].latency_ms]
        return {k: statistics.median(r.latency_ms[k] for r in runs) for k in names}
    times = [1000.0 * t for r in ok for t in r.step_times_s]
    return latency_percentiles(times) if times else {}


def summary_stats(values: list[float], unit: str) -> SummaryStats:
    """The stored form of `stats.summarize` over the ok repeats' values."""
    return summarize(values, unit)


def _fingerprint(repeat: Repeat) -> tuple:
    return (*(repeat.workload.get(k) for k in FINGERPRINT_KEYS), repeat.env_digest)


def checked_repeats(repeats: list[Repeat]) -> list[Repeat]:
    """`repeats` with every ok repeat whose fingerprint differs from the first ok one's marked
    `inconsistent`: repeats of different software/hardware never share a median."""
    ok = [r for r in repeats if r.status == RepeatStatus.ok]
    if not ok:
        return list(repeats)
    reference = _fingerprint(ok[0])
    checked = []
    for r in repeats:
        if r.status == RepeatStatus.ok and _fingerprint(r) != reference:
            r = r.model_copy(
                update={
                    "status": RepeatStatus.inconsistent,
                    "message": f"fingerprint {_fingerprint(r)} differs from {reference}",
                }
            )
        checked.append(r)
    return checked


def described_workload(repeats: list[Repeat]) -> dict[str, Any]:
    """The workload's start-up facts the result describes: the first consistent ok repeat's,
    else the first repeat's (the caller looks the machine facts up from these)."""
    checked = checked_repeats(repeats)
    ok = [r for r in checked if r.status == RepeatStatus.ok]
    return ok[0].workload if ok else (checked[0].workload if checked else {})


def imported_environment(
    workload: dict[str, Any], commits: dict[str, str | bool | None] | None = None
) -> Environment:
    """A log from another machine: only what the log says, and `commits`, the import's own
    context (gitinfo.provenance: dlperf's checkout and the folder it was imported from)."""
    return Environment(
        dlperf_version=__version__,
        host="unknown (imported log)",
        os="unknown",
        python=workload.get("python"),
        framework_version=workload.get("framework_version"),
        device_name=workload.get("device_name"),
        **(commits or {}),
    )


def samples_per_joule(repeat: Repeat) -> float | None:
    """The window's samples per joule the sampled devices used over it; None without an
    energy over the window itself (a file stored before implausible energy was refused may
    hold a negative one: no number either)."""
    t = repeat.telemetry
    if not repeat.window or t is None or t.span != "window" or not t.energy_j or t.energy_j < 0:
        return None
    return repeat.window.samples / t.energy_j


def median_samples_per_joule(ok: list[Repeat]) -> float | None:
    """The median of `samples_per_joule` over the ok repeats that have one."""
    values = [v for v in map(samples_per_joule, ok) if v is not None]
    return statistics.median(values) if values else None


def throttle_warnings(ok: list[Repeat]) -> list[str]:
    """One warning naming the repeats whose device clocks were throttled in the window."""
    hit = [r for r in ok if r.telemetry and r.telemetry.throttled]
    if not hit:
        return []
    reasons = sorted({name for r in hit for name in r.telemetry.throttle_reasons})
    detail = next((r.telemetry.note for r in hit if r.telemetry.note), "")
    return [
        f"the device was throttled during the window of repeat(s) "
        f"{', '.join(str(r.index) for r in hit)} ({', '.join(reasons)}): the numbers may be "
        f"low; check cooling and power limits (nvidia-smi -q -d PERFORMANCE)"
        + (f"; {detail}" if detail else "")
    ]


def missing_telemetry_warnings(ok: list[Repeat]) -> list[str]:
    """One warning naming the repeats whose telemetry is missing because a sensor hung."""
    hit = [r for r in ok if r.telemetry and (r.telemetry.energy_note or "").startswith(MISSING)]
    if not hit:
        return []
    first = hit[0].telemetry.energy_note.removeprefix(MISSING)
    return [
        f"telemetry missing for repeat(s) {', '.join(str(r.index) for r in hit)}: {first}; "
        "the throughputs are unaffected (check the GPU driver with nvidia-smi, or the powercap "
        "files under /sys/class/powercap)"
    ]


def micro_score(workload: dict[str, Any], samples_per_second: float) -> tuple[float, str] | None:
    """FAMBench scores a microbenchmark by the op's own rate: GB/s from the workload's bytes
    per sample, else TF/s from its FLOPs per sample; None when it states neither."""
    if workload.get("bytes_per_sample"):
        return workload["bytes_per_sample"] * samples_per_second / 1e9, "GB/s"
    if workload.get("flops_per_sample"):
        return workload["flops_per_sample"] * samples_per_second / 1e12, "TF/s"
    return None


# What one step of `build_result` found: Metrics fields by name, and its warnings in order.
Assessed = tuple[dict[str, Any], list[str]]


def busy_warnings(ok: list[Repeat]) -> list[str]:
    """One warning naming the repeats during which other processes took more than BUSY_SHARE
    of the machine's CPUs."""
    busy = [r for r in ok if r.machine_load and r.machine_load.other_share > BUSY_SHARE]
    if not busy:
        return []
    worst = max(r.machine_load.other_share for r in busy)
    return [
        f"the machine was busy: other processes took up to {worst:.0%} of its CPUs "
        f"during repeat(s) {', '.join(str(r.index) for r in busy)}, so these numbers "
        "may be low; rerun when the machine is idle (`dlperf doctor` shows what runs)"
    ]


def assess_statistics(ok: list[Repeat], imported: bool) -> Assessed:
    """The throughput's median and spread, the mean step time, and whether the numbers are
    noisy: the repeats disagree or the machine was busy while they ran."""
    throughput = summarize([r.throughput for r in ok], "samples/s")
    # An imported log's result was made by a command this one does not know: no option to
    # suggest, only what to do.
    more = RERUN_NEUTRAL if imported else RERUN_WITH_REPEATS
    warnings = noise_warnings(throughput, more_repeats=more) + busy_warnings(ok)
    step_means = [
        1000.0 * r.window.elapsed_s / (r.window.end_step - r.window.start_step)
        for r in ok
        if r.window  # imported LoadGen / FAMBench runs have no step window
    ]
    fields = {
        "throughput": throughput,
        "step_time_ms": summary_stats(step_means, "ms") if step_means else None,
        "noisy": bool(warnings),
    }
    return fields, warnings


def assess_telemetry(ok: list[Repeat]) -> Assessed:
    """Samples per joule, and what the devices' sensors said went wrong in the window."""
    warnings = throttle_warnings(ok) + missing_telemetry_warnings(ok)
    return {"samples_per_joule": median_samples_per_joule(ok)}, warnings


def assess_latency(
    spec: BenchmarkSpec, ok: list[Repeat], target_p95: tuple[float, str] | None
) -> Assessed:
    """The latency percentiles, and whether the p95 (the logs' own suite's, else dlperf's)
    is within spec.latency_target_ms."""
    latency = latency_summary(ok)
    fields: dict[str, Any] = {"latency_ms": latency}
    p95, rule = target_p95 or (latency.get("p95"), "")
    if spec.latency_target_ms is None or p95 is None:
        return fields, []
    # FAMBench's criterion: the 95th percentile batch latency within the target.
    fields["latency_target_met"] = met = p95 <= spec.latency_target_ms
    if met:
        return fields, []
    return fields, [
        f"missed the latency target: p95 {p95:.3f} ms{rule} > {spec.latency_target_ms:g} ms"
    ]


def assess_loadgen(repeats: list[Repeat], ok: list[Repeat]) -> dict[str, Any]:
    """LoadGen's metric over the ok repeats' runs and whether every run was VALID."""
    fields: dict[str, Any] = {}
    runs = [r.loadgen for r in ok if r.loadgen]
    if runs:  # VALID runs only: an INVALID one is its own status, outside the median
        fields["loadgen_metric"] = summary_stats([r.value for r in runs], runs[0].unit)
    if any(r.loadgen for r in repeats):  # INVALID repeats included: they are not ok
        fields["loadgen_valid"] = all(r.loadgen.valid for r in repeats if r.loadgen)
    return fields


def assess_compute(
    spec: BenchmarkSpec, start: dict[str, Any], median: float, peak: tuple[float, str] | None
) -> Assessed:
    """At the median throughput: a microbenchmark's score, the model FLOP/s achieved and the
    MFU against `peak`."""
    fields: dict[str, Any] = {}
    if spec.impl == "micro":
        fields["score"], fields["score_unit"] = micro_score(start, median) or (None, None)
    flops = start.get("flops_per_sample") or None
    if not flops:
        return fields, []
    fields["achieved_flops"] = achieved = flops * median
    warnings = []
    if peak is None and spec.device == "cpu":
        warnings.append(
            "no MFU: the CPU peak could only be measured while the machine was busy, "
            "which would overstate it; run `dlperf doctor --measure-peak` when idle"
        )
    if peak:
        fields["peak_flops"], fields["peak_source"] = peak
        fields["mfu"] = achieved / peak[0]
    return fields, warnings


def peer_numbers(spec: BenchmarkSpec, repeats: list[Repeat]) -> dict[str, dict[str, PeerStat]]:
    """Peer suites' numbers by their own rules, beside dlperf's (a suite without any: absent)."""
    peer = {SUPERBENCH: superbench_stats(spec, repeats)}
    return {suite: stats for suite, stats in peer.items() if stats}


def assess(
    spec: BenchmarkSpec,
    repeats: list[Repeat],
    start: dict[str, Any],
    peak: tuple[float, str] | None,
    imported: bool,
    target_p95: tuple[float, str] | None,
) -> tuple[Metrics, list[str]]:
    """The Metrics of checked `repeats` and the warnings of each step, in the steps' order;
    without an ok repeat, only what the failed ones tell (LoadGen's verdict, peers' numbers)."""
    ok = [r for r in repeats if r.status == RepeatStatus.ok]
    fields = assess_loadgen(repeats, ok)
    if not ok:
        return Metrics(**fields, peer=peer_numbers(spec, repeats)), []
    found, warnings = assess_statistics(ok, imported)
    median = found["throughput"].median
    for more, said in (
        assess_telemetry(ok),
        assess_latency(spec, ok, target_p95),
        assess_compute(spec, start, median, peak),
    ):
        found |= more
        warnings += said
    fields |= found
    return Metrics(**fields, peer=peer_numbers(spec, repeats)), warnings


def build_result(
    spec: BenchmarkSpec,
    result_id: str,
    repeats: list[Repeat],
    *,
    environment: Environment,
    peak: tuple[float, str] | None = None,
    source: SourceInfo | None = None,
    imported: bool = False,
    job: JobInfo | None = None,
    target_p95: tuple[float, str] | None = None,
) -> Result:
    """The Result of `repeats`: statuses, the median and its spread, latency, LoadGen, MFU,
    and the peer suites' statistics by their own rules (`metrics.peer`).

    `environment` describes where it ran; `peak` is the whole job's peak FLOP/s with its source
    (None when unknown), from which the MFU follows. `target_p95`: the p95 batch latency (ms)
    that decides spec.latency_target_ms, with the rule's name, when the logs' own suite defines
    it (FAMBench's per log); None: dlperf's p95, interpolated over every ok repeat's batches.
    """
    repeats = checked_repeats(repeats)
    failed = [r for r in repeats if r.status != RepeatStatus.ok]
    start = described_workload(repeats)
    metrics, warnings = assess(spec, repeats, start, peak, imported, target_p95)
    return Result(
        id=result_id,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        status=result_status(len(repeats), len(failed)),
        spec=spec,
        repeats=repeats,
        metrics=metrics,
        model=ModelInfo(params=start.get("params"), flops_per_sample=start.get("flops_per_sample")),
        environment=environment,
        warnings=[f"repeat {r.index} {r.status.value}: {r.message}" for r in failed] + warnings,
        source=source,
        origin="parse" if imported else "run",
        job=job or local_job(spec, imported),
    )


def result_status(repeats: int, failed: int) -> ResultStatus:
    """ok: no repeat failed; partial: some did; failed: all did."""
    if not failed:
        return ResultStatus.ok
    return ResultStatus.partial if failed < repeats else ResultStatus.failed


def local_job(spec: BenchmarkSpec, imported: bool) -> JobInfo:
    """The job of a result whose caller named none: a local run's, or an imported log's
    (launched by a tool unknown here)."""
    launcher = None if imported else "local"
    return JobInfo(launcher=launcher, world_size=spec.world_size, global_batch=spec.global_batch)
