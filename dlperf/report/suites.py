"""Other suites' formats of dlperf's own results: SuperBench's metrics (JSON lines) and
FAMBench's result table."""

from __future__ import annotations

import json
from dataclasses import astuple, dataclass
from typing import Any

from dlperf.assemble import micro_score
from dlperf.schema import RepeatStatus, Result
from dlperf.stats import fambench_p95

# SuperBench names the modes "train" and "inference", the precisions by their data type.
_SB_MODES = {"train": "train", "infer": "inference"}
_AMP_TYPES = {"float16": "fp16", "bfloat16": "bf16"}


def superbench_precision(result: Result) -> str:
    if result.spec.precision != "amp":
        return "fp32"
    ok = [r for r in result.repeats if r.status.value == "ok"]
    dtype = ok[0].workload.get("amp_dtype") if ok else None
    return _AMP_TYPES.get(str(dtype), "fp16" if result.spec.device == "cuda" else "bf16")


def superbench_metrics(result: Result) -> dict[str, float]:
    """`model-benchmarks/<framework>-<model>/<precision>_<mode>_<metric>`: SuperBench's names
    for step time (ms, the median repeat's mean step), throughput (samples/s, the median) and
    the step-time percentiles (`..._step_time_<p>`)."""
    s, m = result.spec, result.metrics
    prefix = f"model-benchmarks/{s.framework}-{s.model}/"
    prefix += f"{superbench_precision(result)}_{_SB_MODES[s.mode]}_"
    out: dict[str, float] = {}
    if m.step_time_ms:
        out[prefix + "step_time"] = m.step_time_ms.median
    if m.throughput:
        out[prefix + "throughput"] = m.throughput.median
    for name, value in m.latency_ms.items():  # "p99.9" -> "step_time_99.9"
        out[f"{prefix}step_time_{name[1:]}"] = value
    return out


def superbench_jsonl(results: list[Result]) -> str:
    """One line per result: the node, what was measured (dlperf's configuration and result
    id, so a line can be traced back) and its metrics under SuperBench's names."""
    lines = []
    for result in results:
        metrics = superbench_metrics(result)
        if not metrics:
            continue
        line = {
            "node": result.environment.host,
            "dlperf_config": result.spec.config_key(),
            "dlperf_result_id": result.id,
            **metrics,
        }
        lines.append(json.dumps(line, sort_keys=False))
    return "".join(line + "\n" for line in lines)


FAMBENCH_IMPLS = {"ootb": "OOTB", "official": "Optimized", "micro": "Micro"}
FAMBENCH_MODES = {"train": "train", "infer": "eval"}
# The columns of FAMBench's summary.txt (its result_summarizer's intermediate view), in order.
FAMBENCH_SUMMARY_COLUMNS = (
    "benchmark", "implementation", "mode", "config", "score", "units", "batch_latency_95_sec",
)  # fmt: skip


@dataclass(frozen=True)
class FambenchRow:
    """One row of FAMBench's summary.txt: one log (an imported log, or one of dlperf's
    repeats), scored by FAMBench's rules."""

    benchmark: Any
    implementation: Any
    mode: Any
    config: Any
    score: float
    units: str
    batch_latency_95_sec: float | None


def fambench_labels(result: Result) -> tuple[Any, ...]:
    """(benchmark, implementation, mode, config): an imported log's header as written, else
    dlperf's configuration in FAMBench's words."""
    for r in result.repeats:
        header = r.workload.get("fambench")
        if isinstance(header, dict):
            return tuple(header.get(k) for k in FAMBENCH_SUMMARY_COLUMNS[:4])
    s = result.spec
    config = s.options.get("config") or config_label(result)
    return s.model, FAMBENCH_IMPLS.get(s.impl, s.impl), FAMBENCH_MODES[s.mode], config


def fambench_rows(result: Result) -> list[FambenchRow]:
    """A row per ok repeat: an imported log's own FAMBench numbers (repeat.peer); a dlperf
    repeat's throughput (or its microbenchmark's TF/s, GB/s) with FAMBench's p95 of its
    steps' times."""
    labels = fambench_labels(result)
    rows = []
    for r in result.repeats:
        if r.status != RepeatStatus.ok:
            continue
        peer = r.peer.get("fambench")
        if peer:
            score, unit = peer["score"].value, peer["score"].unit
            p95 = peer["batch_latency_95_sec"].value if "batch_latency_95_sec" in peer else None
        else:
            found = micro_score(r.workload, r.throughput) if result.spec.impl == "micro" else None
            score, unit = found or (r.throughput, "ex/s")
            p95 = fambench_p95(r.step_times_s)
        rows.append(FambenchRow(*labels, score, unit, p95))
    return rows


def fambench_summary(results: list[Result]) -> str:
    """FAMBench's summary.txt (its result_summarizer's table): a space-separated header, then
    a row per log with each value as Python's str() writes it (None for no batch latency).
    Rows follow the results' configuration keys, then the repeats (an import's logs in path
    order), where FAMBench takes its folder's directory order."""
    lines = [" ".join(FAMBENCH_SUMMARY_COLUMNS)]
    for result in sorted(results, key=lambda r: r.spec.config_key()):
        lines += [" ".join(map(str, astuple(row))) for row in fambench_rows(result)]
    return "\n".join(lines) + "\n"


def fambench_score(result: Result) -> tuple[float, str] | None:
    """FAMBench's score: a microbenchmark's TF/s or GB/s (or an imported log's own score), else
    examples per second."""
    m = result.metrics
    if m.score is not None and m.score_unit:
        return m.score, m.score_unit
    return (m.throughput.median, "ex/s") if m.throughput else None


FAMBENCH_NOTES = [
    "Score: FAMBench's score of the configuration's one log (an imported log by FAMBench's "
    "result_summarizer rule; a dlperf run's throughput, or a microbenchmark's TF/s or GB/s). "
    "Where Logs > 1 (repeats), the median of the logs' scores: dlperf's statistic; "
    "fambench_summary.txt has FAMBench's own row per log.",
    "p95 batch latency (s): FAMBench's batch_latency_95_sec of each log (sorted batch "
    "latencies at index ceil(0.95 x (n - 1)), not interpolated); where Logs > 1, the slowest "
    "log's. dlperf's own p95 (interpolated over every log's batches) is in the model reports.",
]


def fambench_table(results: list[Result]) -> str:
    """FAMBench's README table, `Model | Implementation | Mode | Config | Batch Size | Score |
    Units`, then FAMBench's p95 batch latency and the logs behind each row; `*` after a score
    whose run missed its latency target (FAMBench's mark)."""
    lines = [
        "| Model | Implementation | Mode | Config | Batch Size | Score | Units "
        "| p95 batch latency (s) | Logs |",
        "|---|---|---|---|---:|---:|---|---:|---:|",
    ]
    missed = False
    for r in sorted(results, key=lambda r: r.spec.config_key()):
        found = fambench_score(r)
        if found is None:
            continue
        score, unit = found
        rows = fambench_rows(r)
        p95s = [row.batch_latency_95_sec for row in rows if row.batch_latency_95_sec is not None]
        star = "*" if r.metrics.latency_target_met is False else ""
        missed |= bool(star)
        cells = [*map(str, fambench_labels(r)), str(r.spec.batch_size), f"{score:.6g}{star}",
                 unit, f"{max(p95s):.6g}" if p95s else "-", str(len(rows))]  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    notes = list(FAMBENCH_NOTES)
    if missed:
        notes.append(
            "\\* missed its latency target: an imported log's p95 by FAMBench's rule (the "
            "slowest log's), a dlperf run's by dlperf's p95."
        )
    return "\n".join([*lines, "", *notes]) + "\n"


def config_label(result: Result) -> str:
    """dlperf's configuration in FAMBench's one-word style: framework, device, precision,
    shapes, nodes."""
    s = result.spec
    parts = [s.framework, s.device, s.precision + ("-xla" if s.xla else "")]
    parts += [f"img{s.image_size}"] if s.image_size else []
    parts += [f"seq{s.seq_len}"] if s.seq_len else []
    parts += [f"{s.nodes}x{s.devices_per_node}"] if s.world_size > 1 else []
    parts += [f"{s.scenario}"] if s.scenario else []
    return "_".join(parts)
