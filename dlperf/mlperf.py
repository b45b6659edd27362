"""MLPerf LoadGen's logs: `mlperf_log_detail.txt` (`:::MLLOG {json}` lines) and
`mlperf_log_summary.txt` (the human form), read into a `LoadGenRun`.

The detail log is authoritative; the summary is the fallback when only it was kept. The same
reader serves `dlperf run --scenario` (the workload's LoadGen run) and `dlperf parse mlperf`
(logs made by anyone). Files are read a line at a time: what is kept is one value per key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dlperf import DlperfError
from dlperf.events import split_lines
from dlperf.schema import LoadGenRun

DETAIL = "mlperf_log_detail.txt"
SUMMARY = "mlperf_log_summary.txt"
PERCENTILES = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")


def read_dir(path: Path) -> LoadGenRun:
    """The LoadGen run whose logs are in `path` (a folder, or one of the two files)."""
    if not path.exists():
        raise DlperfError(f"{path}: no such file or folder")
    folder = path if path.is_dir() else path.parent
    detail, summary = folder / DETAIL, folder / SUMMARY
    if detail.exists():
        with open(detail, encoding="utf-8", errors="replace") as lines:
            run = from_detail_entries(detail_entries(split_lines(lines)))
    elif summary.exists():
        with open(summary, encoding="utf-8", errors="replace") as lines:
            run = from_summary_lines(split_lines(lines))
    else:
        raise DlperfError(f"{folder}: no {DETAIL} or {SUMMARY} (LoadGen's logs) in this folder")
    return run.model_copy(update={"log_dir": str(folder)})


def detail_entries(text: str | Iterable[str]) -> dict[str, Any]:
    """key -> value of every `:::MLLOG` line (a repeated key keeps its last value), from the
    text or its lines."""
    out: dict[str, Any] = {}
    for line in text.splitlines() if isinstance(text, str) else text:
        _, sep, payload = line.partition(":::MLLOG ")
        if not sep:
            continue
        try:
            entry = json.loads(payload)
        except json.JSONDecodeError:
            continue  # a truncated last line
        out[entry.get("key", "")] = entry.get("value")
    return out


def from_detail(text: str) -> LoadGenRun:
    return from_detail_entries(detail_entries(text))


def from_detail_entries(e: dict[str, Any]) -> LoadGenRun:
    """The run the detail log's entries (`detail_entries`) describe."""
    if "result_validity" not in e:
        raise DlperfError(
            "the LoadGen detail log has no result_validity: the test did not finish "
            "(look at the log's error entries)"
        )
    scenario = str(e.get("effective_scenario", "unknown"))
    per_query = scenario == "MultiStream"

    def latency(name: str) -> float | None:
        # MultiStream's headline is per query (all its samples); the others' per sample.
        key = f"result_{name}_per_query_latency_ns" if per_query else ""
        key = key if key in e else f"result_{name}_latency_ns"
        return None if e.get(key) is None else float(e[key]) / 1e6

    latencies = {"min": latency("min"), "mean": latency("mean"), "max": latency("max")}
    for pct in PERCENTILES:
        latencies[f"p{float(pct):g}"] = latency(f"{pct}_percentile")
    rate = e.get("result_samples_per_second", e.get("result_completed_samples_per_sec"))
    if rate is None and scenario == "SingleStream":
        rate = e.get("result_qps_with_loadgen_overhead")  # one sample per query
    if rate is None and per_query and latencies["mean"]:
        # Queries go one after another: a query's samples per its mean latency.
        rate = float(e.get("effective_samples_per_query", 8)) / (latencies["mean"] / 1e3)
    checks = (
        ("result_min_duration_met", "minimum duration not met"),
        ("result_min_queries_met", "minimum query count not met"),
        ("result_perf_constraints_met", "latency constraint not met"),
        ("early_stopping_met", "early stopping not met"),
    )
    reasons = []
    for key, why in checks:
        if e.get(key) is not False:
            continue
        if key == "result_perf_constraints_met" and e.get("result_overlatency_query_count"):
            why += f" ({e['result_overlatency_query_count']} queries over the target)"
        if key == "early_stopping_met" and e.get("early_stopping_result"):
            why += ": " + " ".join(str(e["early_stopping_result"]).replace("*", "").split())
        reasons.append(why)
    for key in ("result_invalid_reason", "error_runtime"):
        if e.get(key):
            reasons.append(" ".join(str(e[key]).split()))
    metric, value, unit = headline(scenario, rate, latencies)
    return LoadGenRun(
        scenario=scenario,
        valid=e["result_validity"] == "VALID",
        reasons=reasons,
        metric=metric,
        value=value,
        unit=unit,
        samples_per_second=None if rate is None else float(rate),
        latency_ms={k: v for k, v in latencies.items() if v is not None},
        query_count=e.get("result_query_count"),
        settings={k[len("effective_") :]: v for k, v in e.items() if k.startswith("effective_")},
        loadgen_version=e.get("loadgen_version"),
    )


def headline(
    scenario: str, rate: float | None, latencies: dict[str, float | None]
) -> tuple[str, float, str]:
    """The number MLPerf reports for the scenario: throughput for Offline and Server, the
    90th (SingleStream) or 99th (MultiStream, per query) percentile latency otherwise."""
    if scenario in ("Offline", "Server"):
        if rate is None:
            raise DlperfError(f"the LoadGen {scenario} log has no samples-per-second result")
        name = "samples per second" if scenario == "Offline" else "completed samples per second"
        return name, float(rate), "samples/s"
    pct = "p90" if scenario == "SingleStream" else "p99"
    value = latencies.get(pct)
    if value is None:
        raise DlperfError(f"the LoadGen {scenario} log has no {pct} latency")
    return f"{pct} latency", value, "ms"


_SUMMARY_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(.+?)\s*$")


def from_summary(text: str) -> LoadGenRun:
    """The summary's own lines, for folders where the detail log was not kept."""
    return from_summary_lines(text.splitlines())


def from_summary_lines(lines: Iterable[str]) -> LoadGenRun:
    """`from_summary` of the summary's lines, read as they come."""
    fields: dict[str, str] = {}
    for line in lines:
        match = _SUMMARY_LINE.match(line)
        if match and match.group(1) not in fields:
            fields[match.group(1)] = match.group(2)
    if "Result is" not in fields:
        raise DlperfError("the LoadGen summary has no 'Result is' line: the test did not finish")
    scenario = fields.get("Scenario", "unknown")
    latencies: dict[str, float | None] = {}
    for name, key in (("min", "Min latency (ns)"), ("mean", "Mean latency (ns)"),
                      ("max", "Max latency (ns)")):  # fmt: skip
        latencies[name] = float(fields[key]) / 1e6 if key in fields else None
    for pct in PERCENTILES:
        key = f"{pct} percentile latency (ns)"
        latencies[f"p{float(pct):g}"] = float(fields[key]) / 1e6 if key in fields else None
    rate = fields.get("Samples per second", fields.get("Completed samples per second"))
    if rate is None and scenario == "SingleStream":
        rate = fields.get("QPS w/ loadgen overhead")
    if scenario in ("SingleStream", "MultiStream"):
        pct = "90.0" if scenario == "SingleStream" else "99.0"
        key = f"{pct}th percentile latency (ns)"
        if key in fields:
            latencies["p90" if scenario == "SingleStream" else "p99"] = float(fields[key]) / 1e6
    checks = (
        ("Min duration satisfied", "minimum duration not met"),
        ("Min queries satisfied", "minimum query count not met"),
        ("Performance constraints satisfied", "latency constraint not met"),
        ("Early stopping satisfied", "early stopping not met"),
    )
    reasons = [why for key, why in checks if fields.get(key, "Yes").upper().startswith("NO")]
    metric, value, unit = headline(scenario, None if rate is None else float(rate), latencies)
    return LoadGenRun(
        scenario=scenario,
        valid=fields["Result is"] == "VALID",
        reasons=reasons,
        metric=metric,
        value=value,
        unit=unit,
        samples_per_second=None if rate is None else float(rate),
        latency_ms={k: v for k, v in latencies.items() if v is not None},
    )


def given_settings(run: LoadGenRun) -> dict[str, float]:
    """The run's test settings under dlperf's names (runs that differ in them are different
    configurations)."""
    e = run.settings
    out = {
        "target_qps": e.get("target_qps"),
        "target_latency_ms": (e.get("target_latency_ns") or 0) / 1e6 or None,
        "min_duration_s": (e.get("min_duration_ms") or 0) / 1e3 or None,
        "min_query_count": e.get("min_query_count"),
    }
    if run.scenario == "MultiStream":
        out["samples_per_query"] = e.get("samples_per_query")
    return {k: float(v) for k, v in out.items() if v}
