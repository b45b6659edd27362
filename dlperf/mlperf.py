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
    """The LoadGen run whose logs are in `path` (a folder, or one of the two files). With both
    files the detail log gives the numbers and the summary, LoadGen's own report, names the
    headline; either alone gives the same run."""
    if not path.exists():
        raise DlperfError(f"{path}: no such file or folder")
    folder = (path if path.is_dir() else path.parent).resolve()
    detail, summary = folder / DETAIL, folder / SUMMARY
    if not detail.exists() and not summary.exists():
        raise DlperfError(f"{folder}: no {DETAIL} or {SUMMARY} (LoadGen's logs) in this folder")
    try:
        from_summary_file = None
        if summary.exists():
            with open(summary, encoding="utf-8", errors="replace") as lines:
                from_summary_file = from_summary_lines(split_lines(lines))
        if detail.exists():
            with open(detail, encoding="utf-8", errors="replace") as lines:
                run = from_detail_entries(detail_entries(split_lines(lines)))
            if from_summary_file is not None:  # the summary says which number LoadGen headlined
                headline_value = {"metric": from_summary_file.metric,
                                  "value": from_summary_file.value}  # fmt: skip
                if from_summary_file.metric == "scheduled samples per second":
                    headline_value["scheduled_samples_per_second"] = from_summary_file.value
                run = run.model_copy(update=headline_value)
        else:
            run = from_summary_file
    except DlperfError as exc:
        raise DlperfError(f"{folder}: {exc}") from None
    return run.model_copy(update={"log_dir": str(folder)})


def detail_entries(lines: Iterable[str]) -> dict[str, Any]:
    """key -> value of every `:::MLLOG` line (a repeated key keeps its last value)."""
    out: dict[str, Any] = {}
    for line in lines:
        _, sep, payload = line.partition(":::MLLOG ")
        if not sep:
            continue
        try:
            entry = json.loads(payload)
        except json.JSONDecodeError:
            continue  # a truncated last line
        out[entry.get("key", "")] = entry.get("value")
    return out


def from_detail_entries(e: dict[str, Any]) -> LoadGenRun:
    """The run the detail log's entries (`detail_entries`) describe."""
    if "result_validity" not in e:
        raise DlperfError(
            "the LoadGen detail log has no result_validity: the test did not finish "
            "(look at the log's error entries)"
        )
    scenario = str(e.get("effective_scenario", "unknown"))
    per_query = scenario == "MultiStream"

    def ms(key: str) -> float | None:
        return None if e.get(key) is None else float(e[key]) / 1e6

    # MultiStream's statistics are per query (all its samples): LoadGen logs them as
    # result_{min,mean,max}_query_latency_ns and result_<pct>_percentile_per_query_latency_ns,
    # beside the per-sample ones, which are not the scenario's.
    middle = "query_" if per_query else ""
    latencies = {name: ms(f"result_{name}_{middle}latency_ns") for name in ("min", "mean", "max")}
    for pct in PERCENTILES:
        kind = "per_query_" if per_query else ""
        latencies[f"p{float(pct):g}"] = ms(f"result_{pct}_percentile_{kind}latency_ns")
    rate = e.get("result_samples_per_second", e.get("result_completed_samples_per_sec"))
    if rate is None and scenario == "SingleStream":
        rate = e.get("result_qps_with_loadgen_overhead")  # one sample per query
    if rate is None and per_query and latencies["mean"]:
        rate = stream_rate(e.get("effective_samples_per_query"), latencies["mean"])
    early = early_stopping_estimates(str(e.get("early_stopping_result") or ""))
    if not early:  # older logs: the estimates only as numbers (0: none was reached)
        ss = ms("early_stopping_latency_ss") or None
        ms_ = ms("early_stopping_latency_ms") or None
        if scenario == "SingleStream":
            early = {k: v for k, v in (("p90", ss), ("p99", ms_)) if v is not None}
        elif per_query and ms_ is not None:
            early = {"p99": ms_}
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
    scheduled = e.get("result_scheduled_samples_per_sec")
    version = str(e.get("loadgen_version") or "")
    return _loadgen_run(
        scenario, e["result_validity"] == "VALID", reasons, rate, latencies, early,
        scheduled=scheduled,
        headline_scheduled=scheduled if _server_headline_is_scheduled(version) else None,
        tokens=e.get("result_tokens_per_second", e.get("result_completed_tokens_per_second")),
        query_count=e.get("result_query_count"),
        settings={k[len("effective_") :]: v for k, v in e.items() if k.startswith("effective_")},
        loadgen_version=e.get("loadgen_version"),
    )  # fmt: skip


def _loadgen_run(
    scenario: str,
    valid: bool,
    reasons: list[str],
    rate: float | str | None,
    latencies: dict[str, float | None],
    early: dict[str, float],
    *,
    scheduled: float | str | None,
    headline_scheduled: float | str | None,
    tokens: float | str | None,
    **facts: Any,
) -> LoadGenRun:
    """The run a log's numbers describe (as the log wrote them: a summary's are text), with
    the headline LoadGen gave it (`headline_scheduled`: Server's scheduled rate, where that
    was the headline)."""
    metric, value, unit = headline(scenario, rate, latencies, early, scheduled=headline_scheduled)
    return LoadGenRun(
        scenario=scenario,
        valid=valid,
        reasons=reasons,
        metric=metric,
        value=value,
        unit=unit,
        samples_per_second=None if rate is None else float(rate),
        scheduled_samples_per_second=None if scheduled is None else float(scheduled),
        tokens_per_second=None if tokens is None else float(tokens),
        latency_ms={k: v for k, v in latencies.items() if v is not None},
        early_stopping_ms=early,
        **facts,
    )


def stream_rate(samples_per_query: object, mean_query_ms: float) -> float:
    """MultiStream samples/s: its queries go one after another, each of `samples_per_query`
    samples (LoadGen's default 8), so a query's samples per its mean latency."""
    return float(samples_per_query or 8) / (mean_query_ms / 1e3)


_EARLY = re.compile(r"Early stopping (\d+(?:\.\d+)?)th percentile estimate: (\d+)")


def early_stopping_estimates(text: str) -> dict[str, float]:
    """LoadGen's early-stopping latency estimates (ms) from its result text: MLPerf's official
    SingleStream (p90) and MultiStream (p99) metric since v2.0."""
    return {f"p{float(m.group(1)):g}": int(m.group(2)) / 1e6 for m in _EARLY.finditer(text)}


def _server_headline_is_scheduled(version: str) -> bool:
    """Whether LoadGen `version` headlined Server runs by the scheduled samples/s: up to 4.0.
    MLPerf made the completed samples/s the Server metric for v4.1 (LoadGen's summary leads
    with it since, the scheduled rate listed as an additional stat; the submission checker's
    v4.1 result field is result_completed_samples_per_sec). With both files the summary
    itself decides (`read_dir`)."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return bool(match) and (int(match.group(1)), int(match.group(2))) < (4, 1)


def headline(
    scenario: str,
    rate: float | None,
    latencies: dict[str, float | None],
    early: dict[str, float] | None = None,
    *,
    scheduled: float | None = None,
) -> tuple[str, float, str]:
    """The number MLPerf reports for the scenario: Offline's samples/s; Server's scheduled
    samples/s where LoadGen headlines it, else completed; SingleStream's 90th and
    MultiStream's 99th percentile latency, as LoadGen's early-stopping estimate where it gave
    one (MLPerf's metric since v2.0), else the percentile itself."""
    if scenario in ("Offline", "Server"):
        if scheduled is not None:
            return "scheduled samples per second", float(scheduled), "samples/s"
        if rate is None:
            raise DlperfError(f"the LoadGen {scenario} log has no samples-per-second result")
        name = "samples per second" if scenario == "Offline" else "completed samples per second"
        return name, float(rate), "samples/s"
    pct = "p90" if scenario == "SingleStream" else "p99"
    if early and pct in early:
        return f"early-stopping {pct} latency", early[pct], "ms"
    value = latencies.get(pct)
    if value is None:
        raise DlperfError(f"the LoadGen {scenario} log has no {pct} latency")
    return f"{pct} latency", value, "ms"


_SUMMARY_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(.+?)\s*$")


_PARAMETERS = "Test Parameters Used"
_UNIT_SUFFIX = re.compile(r"\s*\((ns|ms)\)$")


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def from_summary_lines(lines: Iterable[str]) -> LoadGenRun:
    """The run a summary's lines describe (for folders where the detail log was not kept),
    read as they come: the headline LoadGen printed first, the statistics (MultiStream's per
    query), the early-stopping estimates and the "Test Parameters Used" under the detail log's
    names (`target_latency (ns)` -> `target_latency_ns`), so a summary alone gives the run the
    detail log would."""
    fields: dict[str, str] = {}
    settings: dict[str, Any] = {}
    first_rate: str | None = None
    text: list[str] = []
    in_parameters = False
    for line in lines:
        text.append(line)
        if line.strip() == _PARAMETERS:
            in_parameters = True
        match = _SUMMARY_LINE.match(line)
        if not match:
            continue
        key, value = match.group(1), match.group(2)
        if in_parameters:
            settings[_UNIT_SUFFIX.sub(lambda m: "_" + m.group(1), key)] = _number(value)
            continue
        if first_rate is None and key.endswith("samples per second"):
            first_rate = key  # LoadGen's headline comes first; Server's second rate after it
        fields.setdefault(key, value)
    if "Result is" not in fields:
        raise DlperfError("the LoadGen summary has no 'Result is' line: the test did not finish")
    scenario = fields.get("Scenario", "unknown")

    def ms(key: str) -> float | None:
        return float(fields[key]) / 1e6 if key in fields else None

    latencies = {name: ms(f"{name.title()} latency (ns)") for name in ("min", "mean", "max")}
    for pct in PERCENTILES:
        latencies[f"p{float(pct):g}"] = ms(f"{pct} percentile latency (ns)")
    if scenario in ("SingleStream", "MultiStream"):
        pct = "90.0" if scenario == "SingleStream" else "99.0"
        headline_pct = ms(f"{pct}th percentile latency (ns)")
        if headline_pct is not None:
            latencies["p90" if scenario == "SingleStream" else "p99"] = headline_pct
    rate = fields.get("Samples per second", fields.get("Completed samples per second"))
    if rate is None and scenario == "SingleStream":
        rate = fields.get("QPS w/ loadgen overhead")
    if rate is None and scenario == "MultiStream" and latencies["mean"]:
        rate = stream_rate(settings.get("samples_per_query"), latencies["mean"])
    scheduled = fields.get("Scheduled samples per second")
    tokens = fields.get("Tokens per second", fields.get("Completed tokens per second"))
    checks = (
        ("Min duration satisfied", "minimum duration not met"),
        ("Min queries satisfied", "minimum query count not met"),
        ("Performance constraints satisfied", "latency constraint not met"),
        ("Early stopping satisfied", "early stopping not met"),
    )
    reasons = [why for key, why in checks if fields.get(key, "Yes").upper().startswith("NO")]
    return _loadgen_run(
        scenario, fields["Result is"] == "VALID", reasons, rate, latencies,
        early_stopping_estimates("\n".join(text)),
        scheduled=scheduled,
        headline_scheduled=scheduled if first_rate == "Scheduled samples per second" else None,
        tokens=tokens,
        settings={**settings, "scenario": scenario} if settings else {},
    )  # fmt: skip


def invalid_message(run: LoadGenRun) -> str:
    """A repeat's message when LoadGen judged its run INVALID (a run's or an imported log's)."""
    return f"LoadGen judged the run INVALID: {'; '.join(run.reasons) or 'no reason logged'}"


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
