"""The result schema: what was measured, how, and what came out. Frozen and validated."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from dlperf import DlperfError
from dlperf.wording import settings_problems

# 2: spec.source, result.source and result.origin (official implementations)
# 3: spec.practice, the environment's kind / interpreter / distributions digest, each repeat's
#    env_digest and machine load (all optional: a version-2 file upgrades unchanged)
# 4: a summary's ci_low / ci_high are the median's distribution-free interval (None below
#    six values) with its achieved ci_coverage; up to 3 they were the mean's t-interval, which
#    store.upgrade recomputes from the summary's own values
# 5: metrics.peer and repeat.peer, the numbers a peer suite (SuperBench, FAMBench) defines, by
#    its own rule, beside dlperf's, for the result and for each repeat (FAMBench scores each log
#    on its own); source.profile, the official manifests' profile (all optional: a version-4
#    file upgrades unchanged, its official results in profile dlperf-2020)
# 6: repeat.telemetry (device utilization, clocks, memory, power, temperature, energy and
#    throttling over the measured window, sampled by the host), metrics.samples_per_joule, and
#    environment.dlperf_commit / dlperf_dirty (dlperf's own checkout, None from a wheel) and
#    workdir_commit / workdir_dirty (the git repository dlperf ran in, if any); all optional:
#    a version-5 file upgrades unchanged
# 7: environment.gpu_count, gpu_memory_mb and interconnect, the machine's GPUs (its identity,
#    `dlperf.identity.Machine`); results are stored under a benchmark id instead of the old
#    configuration key (folders already on disk are read as they are); all optional: a
#    version-6 file upgrades unchanged
# 8: repeat.peak_rss_mib, the workload process's resident-memory high-water mark (a job's:
#    its largest rank's), from its end event; optional: a version-7 file upgrades unchanged
# 9: repeat.training, one MLPerf Training run as MLPerf's checker and its log saw it (imported
#    published results); device "tpu" and "accelerator" for those; optional: a version-8 file
#    upgrades unchanged
SCHEMA_VERSION = 9

MODES = ("train", "infer")
PRECISIONS = ("fp32", "amp")
IMPLS = ("ootb", "official", "micro")
DEVICES = ("cpu", "cuda")  # what dlperf runs on
# What an imported published result may have run on besides: a TPU, or an accelerator dlperf
# knows no device name for (its model is in environment.gpu).
IMPORTED_DEVICES = ("tpu", "accelerator")
SCENARIOS = ("offline", "server", "singlestream", "multistream")  # MLPerf LoadGen's
LOADGEN_SETTINGS = (
    "target_qps",
    "target_latency_ms",
    "min_duration_s",
    "max_duration_s",
    "min_query_count",
    "max_query_count",
    "samples_per_query",
    "performance_sample_count",
)


# Upper bounds of a spec: beyond them a number is a typo, not a benchmark (and a size would
# overflow the frameworks' 32-bit indices).
MAX_SIZE = 2**31 - 1
MAX_STEPS = 1_000_000
MAX_REPEATS = 1000
MAX_NODES = 65_536
MAX_DEVICES_PER_NODE = 1024
LOADGEN_RANGES = (  # (min, max) pairs of LoadGen settings
    ("min_duration_s", "max_duration_s"),
    ("min_query_count", "max_query_count"),
)


def utc_time(text: str) -> datetime:
    """An ISO 8601 time (a `created`, a `--since`) as an aware UTC datetime, to the second:
    a time without a zone is UTC. The one reading of a result's time: "newest" and every
    ordering compare these, never the text, whose offsets (`+09:00`) do not sort. Seconds, as
    dlperf writes `created` and the index orders it; results within one second go by id."""
    when = datetime.fromisoformat(re.sub(r"[zZ]$", "+00:00", text.strip()))  # 3.10: no Z
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).replace(microsecond=0)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BenchmarkSpec(_Frozen):
    """What to measure (FAMBench's Model + Implementation + Mode + Config) and how."""

    framework: str
    model: str
    impl: str = "ootb"
    mode: str = "train"
    precision: str = "fp32"
    xla: bool = False
    device: str = "cpu"
    nodes: int = Field(1, ge=1, le=MAX_NODES)
    devices_per_node: int = Field(1, ge=1, le=MAX_DEVICES_PER_NODE)
    batch_size: int = Field(..., ge=1, le=MAX_SIZE, description="per device")
    image_size: int | None = Field(None, ge=1, le=MAX_SIZE)
    seq_len: int | None = Field(None, ge=1, le=MAX_SIZE)
    skip: int = Field(20, ge=0, le=MAX_STEPS)
    measure: int = Field(100, ge=1, le=MAX_STEPS)
    repeats: int = Field(7, ge=1, le=MAX_REPEATS)
    options: dict[str, str] = Field(default_factory=dict)
    # The framework's best-practice settings as run (defaults for the device and model, then
    # `--set` overrides): named so a reader sees which settings produced a number. Frameworks
    # name them differently, so the cross-framework table compares across them.
    practice: dict[str, str] = Field(default_factory=dict)
    source: str | None = None  # the manifest of an official implementation (impl "official")
    scenario: str | None = None  # MLPerf LoadGen scenario (inference only)
    loadgen: dict[str, float] = Field(default_factory=dict)  # LOADGEN_SETTINGS given
    latency_target_ms: float | None = Field(None, gt=0, allow_inf_nan=False)  # per-batch goal
    preset: str | None = None
    timeout_s: float = Field(1800.0, gt=0, allow_inf_nan=False)
    no_output_timeout_s: float = Field(600.0, gt=0, allow_inf_nan=False)

    @field_validator("mode")
    @classmethod
    def _mode(cls, v: str) -> str:
        return _one_of("mode", v, MODES)

    @field_validator("precision")
    @classmethod
    def _precision(cls, v: str) -> str:
        return _one_of("precision", v, PRECISIONS)

    @field_validator("impl")
    @classmethod
    def _impl(cls, v: str) -> str:
        return _one_of("implementation", v, IMPLS)

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        return _one_of("device", v, DEVICES + IMPORTED_DEVICES)

    @field_validator("scenario")
    @classmethod
    def _scenario(cls, v: str | None) -> str | None:
        return None if v is None else _one_of("LoadGen scenario", v, SCENARIOS)

    @field_validator("loadgen")
    @classmethod
    def _loadgen(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(LOADGEN_SETTINGS))
        if unknown:
            raise ValueError(
                f"unknown LoadGen setting(s) {', '.join(unknown)}; known: "
                + ", ".join(LOADGEN_SETTINGS)
            )
        bad = sorted(k for k, x in v.items() if not (math.isfinite(x) and x > 0))
        if bad:
            raise ValueError(f"LoadGen setting(s) {', '.join(bad)} must be finite numbers > 0")
        for low, high in LOADGEN_RANGES:
            if low in v and high in v and v[low] > v[high]:
                flags = f"--{low.replace('_', '-')} {v[low]:g} > --{high.replace('_', '-')}"
                raise ValueError(f"{flags} {v[high]:g}: the minimum must not exceed the maximum")
        return v

    @model_validator(mode="after")
    def _inference_only(self) -> BenchmarkSpec:
        if self.mode != "infer":
            for name, value in (
                ("--scenario", self.scenario),
                ("--latency-target-ms", self.latency_target_ms),
                ("LoadGen settings", self.loadgen or None),
            ):
                if value is not None:
                    raise ValueError(f"{name} applies to inference: add --mode infer")
        if self.loadgen and not self.scenario:
            raise ValueError("LoadGen settings need --scenario offline|server|...")
        if self.scenario and self.world_size > 1:
            raise ValueError(
                "LoadGen drives one system under test in one process: run --scenario with "
                "--nodes 1 --devices-per-node 1"
            )
        return self

    @classmethod
    def checked(cls, names: Mapping[str, str] | None = None, **fields: Any) -> BenchmarkSpec:
        """A spec from user input, or a DlperfError naming every setting that is wrong, each
        by the name the user gave it (`names`: field -> option or key; default: the option
        named after the field, --batch-size for batch_size)."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise DlperfError(settings_problems(exc.errors(), names)) from None

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def global_batch(self) -> int:
        return self.world_size * self.batch_size

    @property
    def steps(self) -> int:
        """Iterations a workload must run for the window to be complete."""
        return self.skip + self.measure


def _one_of(what: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"unknown {what} {value!r}; choose one of: {', '.join(choices)}")
    return value


class RepeatStatus(str, Enum):
    ok = "ok"
    crashed = "crashed"  # non-zero exit
    timeout = "timeout"  # ran past --timeout
    hung = "hung"  # no output for the no-output timeout
    too_few_steps = "too_few_steps"  # exited before the window was complete
    bad_output = "bad_output"  # no usable events
    interrupted = "interrupted"  # Ctrl-C
    inconsistent = "inconsistent"  # fingerprint differs from the other repeats
    unsupported = "unsupported"  # the configuration cannot run on this device
    invalid = "invalid"  # LoadGen judged the run INVALID: its numbers kept, not in the median


class ResultStatus(str, Enum):
    ok = "ok"  # every repeat ok
    partial = "partial"  # some repeats ok: stats over those, flagged
    failed = "failed"  # no repeat ok


class Window(_Frozen):
    """The iterations a throughput was computed over (effective, as the marks allowed)."""

    start_step: int
    end_step: int
    samples: float
    elapsed_s: float


class LoadGenRun(_Frozen):
    """One MLPerf LoadGen test, as its logs report it."""

    scenario: str  # LoadGen's name: Offline, Server, SingleStream, MultiStream
    valid: bool
    reasons: list[str] = Field(default_factory=list)  # why INVALID (or what LoadGen warned)
    metric: str  # the scenario's headline: samples/s (Offline, Server) or a latency percentile
    value: float
    unit: str
    samples_per_second: float | None = None  # achieved (Server: completed) samples/s
    scheduled_samples_per_second: float | None = None  # Server: the rate queries were issued at
    tokens_per_second: float | None = None  # LLM benchmarks (Offline; Server: completed)
    # MultiStream: per query (all of a query's samples); the other scenarios: per sample
    latency_ms: dict[str, float] = Field(default_factory=dict)  # min, mean, max, p50 ... p99.9
    early_stopping_ms: dict[str, float] = Field(default_factory=dict)  # p90/p99 estimates
    query_count: int | None = None
    settings: dict[str, Any] = Field(default_factory=dict)  # LoadGen's effective_* settings
    loadgen_version: str | None = None
    log_dir: str | None = None


class MachineLoad(_Frozen):
    """What else the machine did while a repeat ran (this host; a remote node's is not seen)."""

    cpu_count: int
    wall_s: float
    # CPU seconds used by processes other than dlperf and the repeat's own processes, and that
    # as a share of the whole machine (cpu_count x wall): 0.5 = half of every core was taken.
    other_cpu_s: float
    other_share: float
    load1_start: float | None = None
    load1_end: float | None = None
    steal_s: float | None = None  # a VM's CPU time taken by its hypervisor


class MetricRange(_Frozen):
    """One telemetry metric over a window's readings."""

    min: float
    mean: float
    max: float


class Telemetry(_Frozen):
    """What the devices did during a repeat's measured window, sampled by the host
    (`dlperf.telemetry`): NVML on NVIDIA GPUs, psutil and RAPL on CPUs."""

    device: str  # "cuda" (NVML) or "cpu" (psutil, RAPL)
    devices: list[str] = Field(default_factory=list)  # what was read: GPUs, CPU model, RAPL zones
    period_s: float  # the sampling period
    samples: int  # readings inside the span
    # "window": the measured window, placed on the host's clock as `placed_by` says;
    # "repeat": the whole repeat, when the window could not be placed (`placed_by` says why)
    span: str = "window"
    placed_by: str = ""
    duration_s: float = 0.0  # the span's length
    # min/mean/max over every device's readings: utilization % (GPU busy time; CPU: the whole
    # machine's), SM clock (GPU) or current CPU frequency, memory used (GPU memory; CPU: the
    # host's RAM), temperature; power is the devices' sum at each reading (CPU: RAPL deltas)
    utilization_pct: MetricRange | None = None
    clock_mhz: MetricRange | None = None
    memory_mib: MetricRange | None = None
    power_w: MetricRange | None = None
    temperature_c: MetricRange | None = None
    energy_j: float | None = None  # over the span, every sampled device together
    energy_source: str | None = None  # "nvml" | "rapl"; None: no energy (energy_note says why)
    energy_method: str | None = None  # "counter" (NVML mJ / RAPL uJ) or "power integral"
    energy_note: str | None = None
    throttled: bool = False  # clocks pulled down by heat or power during the window
    throttle_reasons: list[str] = Field(default_factory=list)  # NVML's reason names
    note: str | None = None  # what else the reader should know (throttling detail, errors)


class PeerStat(_Frozen):
    """One number as a peer suite defines it (SuperBench's mean of per-step throughput,
    FAMBench's nearest-rank p95), kept beside dlperf's own statistic of the same thing."""

    value: float
    unit: str
    rule: str  # how the peer computes it, in words, shown wherever the number is


class TrainingRun(_Frozen):
    """One MLPerf Training run (a `result_*.txt`) as MLPerf's compliance checker and its own
    log marks saw it. Throughput is dlperf's, from the log's marks; MLPerf defines only the
    time to train."""

    file: str
    ruleset: str  # the compliance ruleset it was checked against ("4.0.0")
    compliant: bool  # the checker's verdict: MLPerf scores only compliant runs
    messages: list[str] = Field(default_factory=list)  # the checker's reasons, where it failed
    converged: bool = False  # run_stop's status is "success"
    time_to_train_min: float | None = None  # (run_stop - run_start) in minutes
    samples: float | None = None  # samples trained over the training intervals
    train_s: float | None = None  # seconds in those intervals, evaluation taken out
    eval_s: float | None = None  # seconds of evaluation the marks took out
    intervals: str = ""  # which marks gave the training time: "epoch", "block" or "run"
    note: str | None = None  # how the throughput was derived, or why it was not


class Repeat(_Frozen):
    index: int
    status: RepeatStatus
    throughput: float | None = None
    window: Window | None = None
    step_times_s: list[float] = Field(default_factory=list)
    # The same window timed from outside: when the host saw the workload's `step N/` log lines.
    observed_elapsed_s: float | None = None
    # Data-parallel jobs: each rank's own time over the window (the job's is the max-reduce).
    rank_elapsed_s: list[float] = Field(default_factory=list)
    loadgen: LoadGenRun | None = None  # --scenario runs: what LoadGen measured
    training: TrainingRun | None = None  # an imported MLPerf Training run
    wall_s: float = 0.0
    exit_code: int | None = None
    command: list[str] = Field(default_factory=list)
    log_path: str = ""
    events_path: str = ""
    message: str = ""
    log_tail: str = ""
    warnings: list[str] = Field(default_factory=list)
    workload: dict[str, Any] = Field(default_factory=dict)
    # The installed distributions of the interpreter that ran it (see Environment): repeats
    # with different digests are never pooled into one median.
    env_digest: str | None = None
    machine_load: MachineLoad | None = None
    telemetry: Telemetry | None = None  # the devices during the window (None: not sampled)
    # The workload process's peak resident memory in MiB (a job's: its largest rank's), as the
    # kernel counts it (getrusage's ru_maxrss) at its end event; None: not reported.
    peak_rss_mib: float | None = None
    # Peer suite -> its metric name -> this repeat's number by its rule (FAMBench's score and
    # batch_latency_95_sec of one log; Metrics.peer holds the result's).
    peer: dict[str, dict[str, PeerStat]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ok_has_number(self) -> Repeat:
        if self.status == RepeatStatus.ok and (self.throughput is None or self.throughput <= 0):
            raise ValueError("an ok repeat needs a positive throughput")
        return self


class SummaryStats(_Frozen):
    """Summary of one metric over the ok repeats; `median` is the headline (as DLPerf)."""

    unit: str
    values: list[float]
    n: int
    median: float
    mean: float
    min: float
    max: float
    stdev: float
    cv: float
    ci_level: float  # the confidence asked of the interval (0.95)
    # The median's interval from order statistics (stats.median_ci_ranks): None when too few
    # values reach ci_level, never outside [min, max]. ci_coverage is what it achieves exactly.
    ci_low: float | None
    ci_high: float | None
    ci_coverage: float | None = None

    @model_validator(mode="after")
    def _interval_whole(self) -> SummaryStats:
        if (self.ci_low is None) != (self.ci_high is None):
            raise ValueError("ci_low and ci_high are both set or both None")
        return self


class Metrics(_Frozen):
    throughput: SummaryStats | None = None
    step_time_ms: SummaryStats | None = None
    # Per-step (per-batch in inference) time percentiles over every ok repeat's window, in ms:
    # SuperBench's p50, p90, p95, p99, p99.9, but linearly interpolated (SuperBench's own rule,
    # numpy's "nearest", gives peer["superbench"]).
    latency_ms: dict[str, float] = Field(default_factory=dict)
    latency_target_met: bool | None = None  # p99 within spec.latency_target_ms
    loadgen_metric: SummaryStats | None = None  # the scenario's metric over the repeats
    loadgen_valid: bool | None = None  # every repeat's LoadGen result VALID
    # FAMBench's headline: samples/s ("ex/s") for models, TF/s or GB/s for microbenchmarks.
    score: float | None = None
    score_unit: str | None = None
    achieved_flops: float | None = None  # model FLOPs/s at the median throughput
    peak_flops: float | None = None
    peak_source: str | None = None
    mfu: float | None = None
    # Samples in the window per joule the sampled devices used over it: the median over the ok
    # repeats whose telemetry has an energy (None: no energy readable, see repeats' telemetry).
    samples_per_joule: float | None = None
    # The repeats disagree (CV, outliers) or the machine was busy while they ran: the warnings
    # say which; reports mark the number.
    noisy: bool = False
    # Peer suite ("superbench", "fambench") -> its metric name -> the number by its rule.
    peer: dict[str, dict[str, PeerStat]] = Field(default_factory=dict)


class ModelInfo(_Frozen):
    params: int | None = None
    flops_per_sample: float | None = None


class Environment(_Frozen):
    dlperf_version: str
    host: str
    os: str
    python: str | None = None  # the workload's interpreter
    framework_version: str | None = None
    env_name: str | None = None
    # "built": a venv dlperf made from pinned requirements; "adopted": the user's own
    # interpreter (--python), measured as it is; None: the host interpreter (calibration)
    env_kind: str | None = None
    interpreter: str | None = None
    dists_digest: str | None = None  # sha256 of the sorted name==version of every distribution
    cpu: str | None = None
    cpu_count: int | None = None
    gpu: str | None = None  # the GPU model(s) nvidia-smi lists
    gpu_count: int | None = None  # GPUs on the host (None: no GPU, or not recorded)
    gpu_memory_mb: int | None = None  # each GPU's memory, as nvidia-smi reports it
    interconnect: str | None = None  # between the GPUs or nodes, where known (NVLink, IB...)
    device_name: str | None = None
    threads: int | None = None  # the workload's CPU threads (its start line), where it says
    env_vars: dict[str, str] = Field(default_factory=dict)
    # Git commits (full hashes) of the run's context (gitinfo.provenance): dlperf's own checkout
    # when it ran from one (None from an installed wheel), and the repository of the folder
    # dlperf ran in, if any; *_dirty: tracked files differed from that commit (None: unknown).
    dlperf_commit: str | None = None
    dlperf_dirty: bool | None = None
    workdir_commit: str | None = None
    workdir_dirty: bool | None = None


def short_revision(revision: str, digits: int = 12) -> str:
    """A commit's first hex digits, or `sha256:` and an archive digest's first digits."""
    kind, _, digest = revision.rpartition(":")
    return f"{kind}:{digest[:digits]}" if kind else revision[:digits]


class SourceInfo(_Frozen):
    """The upstream code an official-implementation number came from."""

    name: str
    url: str  # the repository, or the release archive the code was unpacked from
    commit: str  # a full git commit, or "sha256:<hex>" of that release archive
    patches: dict[str, str] = Field(default_factory=dict)  # file name -> sha256, applied in order
    # The manifest's profile (official.manifest.PROFILES): results from before profiles existed
    # all came from the DLPerf reproduction's manifests.
    profile: str = "dlperf-2020"


class JobInfo(_Frozen):
    """How a run was spread: the launcher, its nodes, the ranks and the global batch."""

    launcher: str | None = "local"  # None: imported from logs, started by someone else
    hosts: list[str] = Field(default_factory=list)  # node 0 (the master) first
    world_size: int = 1
    global_batch: int  # samples per step over all ranks: nodes x devices x batch per device


class Result(_Frozen):
    schema_version: int = SCHEMA_VERSION
    id: str
    created: str
    status: ResultStatus
    spec: BenchmarkSpec
    repeats: list[Repeat]
    metrics: Metrics
    model: ModelInfo
    environment: Environment
    warnings: list[str] = Field(default_factory=list)
    source: SourceInfo | None = None
    origin: str = "run"  # "run": measured by dlperf; "parse": imported from logs made elsewhere
    job: JobInfo | None = None  # None in results stored before it was recorded

    @field_validator("created")
    @classmethod
    def _created_in_utc(cls, v: str) -> str:
        # Every reader gets the same UTC text (a result written with +09:00 reads as its UTC
        # time), so a table or page that shows `created` as UTC is right.
        try:
            return utc_time(v).isoformat()
        except ValueError:
            raise ValueError(
                f"created {v!r} is not an ISO 8601 time, such as 2025-01-31T14:00:00+00:00"
            ) from None

    @property
    def created_at(self) -> datetime:
        """When the result was made, in UTC (`utc_time`): what "newest" compares."""
        return utc_time(self.created)
