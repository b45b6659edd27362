"""Other suites' formats of dlperf's own results: SuperBench's metrics (JSON lines) and
FAMBench's result table."""

from __future__ import annotations

import json

from dlperf.schema import Result

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


def fambench_score(result: Result) -> tuple[float, str] | None:
    """FAMBench's score: a microbenchmark's TF/s or GB/s (or an imported log's own score), else
    examples per second."""
    m = result.metrics
    if m.score is not None and m.score_unit:
        return m.score, m.score_unit
    return (m.throughput.median, "ex/s") if m.throughput else None


def fambench_table(results: list[Result]) -> str:
    """`Model | Implementation | Mode | Config | Batch Size | Score | Units`, with `*` after a
    score whose run missed its latency target (FAMBench's mark)."""
    lines = [
        "| Model | Implementation | Mode | Config | Batch Size | Score | Units |",
        "|---|---|---|---|---:|---:|---|",
    ]
    missed = False
    for r in sorted(results, key=lambda r: r.spec.config_key()):
        found = fambench_score(r)
        if found is None:
            continue
        score, unit = found
        s = r.spec
        config = s.options.get("config") or config_label(r)
        star = "*" if r.metrics.latency_target_met is False else ""
        missed |= bool(star)
        lines.append(
            f"| {s.model} | {FAMBENCH_IMPLS.get(s.impl, s.impl)} | {FAMBENCH_MODES[s.mode]} | "
            f"{config} | {s.batch_size} | {score:.6g}{star} | {unit} |"
        )
    if missed:
        lines += ["", "\\* missed its latency target (p95 batch latency above the target)."]
    return "\n".join(lines) + "\n"


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
