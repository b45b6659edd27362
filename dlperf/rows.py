"""One result as one flat row: the results index, `dlperf export` and the site all read it.

`COLUMNS` declares each column once with its kind; `result_row` fills them. The index makes its
SQLite table from the kinds, export its pandas dtypes (counts nullable integers, flags nullable
booleans, measurements floats), so a missing value stays missing through SQLite, CSV and
Parquet alike. Mappings (settings, parameters, LoadGen settings) and the compared metric's
repeat values are JSON text: their keys differ between frameworks.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from dlperf.identity import benchmark_id, machine_of, parameters_of, settings_of
from dlperf.schema import Result, utc_time
from dlperf.stats import PERCENTILES, percentile_name

SUMMARY = ("median", "mean", "min", "max", "stdev", "cv", "ci_low", "ci_high", "ci_coverage")
LATENCIES = tuple(percentile_name(q) for q in PERCENTILES)

# (name, kind): kind is text, int, float, bool or json (a JSON text of a list or mapping).
COLUMNS: tuple[tuple[str, str], ...] = (
    # identity (`dlperf.identity`)
    ("benchmark_id", "text"),
    ("machine_id", "text"),
    ("machine", "text"),  # the machine's label
    ("settings", "json"),
    ("id", "text"),
    ("created", "text"),  # as stored in the result
    ("created_utc", "text"),  # ISO 8601 in UTC: sorts and filters as text
    ("origin", "text"),
    ("status", "text"),
    # the benchmark
    ("framework", "text"),
    ("model", "text"),
    ("impl", "text"),
    ("source", "text"),  # an official implementation's manifest
    ("mode", "text"),
    ("scenario", "text"),
    ("loadgen", "json"),
    ("precision", "text"),
    ("xla", "bool"),
    ("device", "text"),
    ("nodes", "int"),
    ("devices_per_node", "int"),
    ("batch_size", "int"),
    ("image_size", "int"),
    ("seq_len", "int"),
    ("skip", "int"),
    ("measure", "int"),
    ("parameters", "json"),
    ("repeats", "int"),  # asked for
    ("preset", "text"),
    ("latency_target_ms", "float"),
    # the compared metric (`metric_values`): what compare, history and score judge
    ("metric", "text"),
    ("unit", "text"),
    ("higher_is_better", "bool"),
    ("median", "float"),  # of the ok repeats' values; empty when none is ok
    ("n", "int"),
    ("values", "json"),
    # the throughput's summary over the ok repeats and the other metrics
    ("repeats_run", "int"),
    ("throughput_n", "int"),  # the ok repeats the summary is over
    *((f"throughput_{name}", "float") for name in SUMMARY),
    ("noisy", "bool"),
    ("mfu", "float"),
    ("achieved_flops", "float"),
    ("peak_flops", "float"),
    ("samples_per_joule", "float"),
    ("loadgen_valid", "bool"),
    ("latency_target_met", "bool"),
    ("score", "float"),
    ("score_unit", "text"),
    *((f"latency_ms_{name}", "float") for name in LATENCIES),
    # the environment and the machine's facts
    ("framework_version", "text"),
    ("python", "text"),
    ("dlperf_version", "text"),
    ("dlperf_commit", "text"),
    ("dlperf_dirty", "bool"),
    ("workdir_commit", "text"),
    ("workdir_dirty", "bool"),
    ("env_kind", "text"),
    ("dists_digest", "text"),
    ("threads", "int"),
    ("source_commit", "text"),  # an official implementation's upstream pin
    ("host", "text"),
    ("os", "text"),
    ("cpu", "text"),
    ("cpu_count", "int"),
    ("gpu", "text"),
    ("gpu_count", "int"),
    ("gpu_memory_mb", "int"),
    ("device_name", "text"),
)
NAMES = tuple(name for name, _ in COLUMNS)
KINDS = dict(COLUMNS)


def utc_iso(created: str) -> str:
    """A result's `created` in UTC, ISO 8601 to the second (`schema.utc_time`, the one reading
    of a result's time; a time without zone is UTC)."""
    try:
        return utc_time(created).isoformat()
    except ValueError:
        return created  # not a time (the schema refuses one on load): kept as written


def metric_values(result: Result) -> tuple[str, list[float], bool]:
    """(metric name, the ok repeats' values, higher is better): a LoadGen stream scenario's
    latency, else samples/s."""
    ok = [r for r in result.repeats if r.status.value == "ok"]
    runs = [r.loadgen for r in ok if r.loadgen]
    if runs and runs[0].unit == "ms":
        return runs[0].metric, [r.value for r in runs], False
    return "samples/s", [r.throughput for r in ok if r.throughput is not None], True


def json_text(value: Any) -> str:
    """A JSON column's text: keys sorted, so equal mappings have equal text."""
    return json.dumps(value, sort_keys=True)


def result_row(result: Result) -> dict[str, Any]:
    """Every column of `COLUMNS` for one result (None where it has no value); mappings and
    lists as JSON text."""
    s, m, env, t = result.spec, result.metrics, result.environment, result.metrics.throughput
    machine = machine_of(result)
    metric, values, higher = metric_values(result)
    row: dict[str, Any] = {
        "benchmark_id": benchmark_id(s),
        "machine_id": machine.id,
        "machine": machine.label,
        "settings": json_text(settings_of(s)),
        "id": result.id,
        "created": result.created,
        "created_utc": utc_iso(result.created),
        "origin": result.origin,
        "status": result.status.value,
        "loadgen": json_text(s.loadgen),
        "parameters": json_text(parameters_of(s)),
        "metric": metric,
        "unit": "samples/s" if higher else "ms",  # metric_values' latencies are LoadGen's ms
        "higher_is_better": higher,
        "median": statistics.median(values) if values else None,
        "n": len(values),
        "values": json_text(values),
        "repeats_run": len(result.repeats),
        "throughput_n": t.n if t else 0,
        "source_commit": result.source.commit if result.source else None,
    }
    for name in ("framework", "model", "impl", "source", "mode", "scenario", "precision", "xla",
                 "device", "nodes", "devices_per_node", "batch_size", "image_size", "seq_len",
                 "skip", "measure", "repeats", "preset", "latency_target_ms"):  # fmt: skip
        row[name] = getattr(s, name)
    for name in SUMMARY:
        row[f"throughput_{name}"] = getattr(t, name) if t else None
    for name in ("noisy", "mfu", "achieved_flops", "peak_flops", "samples_per_joule",
                 "loadgen_valid", "latency_target_met", "score", "score_unit"):  # fmt: skip
        row[name] = getattr(m, name)
    for name in LATENCIES:
        row[f"latency_ms_{name}"] = m.latency_ms.get(name)
    for name in ("framework_version", "python", "dlperf_version", "dlperf_commit",
                 "dlperf_dirty", "workdir_commit", "workdir_dirty", "env_kind", "dists_digest",
                 "threads", "host", "os", "cpu", "cpu_count", "gpu", "gpu_count",
                 "gpu_memory_mb", "device_name"):  # fmt: skip
        row[name] = getattr(env, name)
    return {name: row[name] for name in NAMES}


def rows_frame(rows: list[dict[str, Any]]):  # -> pandas.DataFrame (pandas imported lazily)
    """Rows (`result_row`) as a typed pandas frame, in the given order."""
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(NAMES))
    if frame.empty:
        return frame
    dtypes = {"int": "Int64", "bool": "boolean", "float": "float64"}
    return frame.astype({name: dtypes[kind] for name, kind in COLUMNS if kind in dtypes})
