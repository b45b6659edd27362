"""The results directory: atomic writes, loading with schema upgrades, a pandas frame.

Layout: ``<results>/<config_key>/<result_id>.json``, raw logs beside it in ``<result_id>/``.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dlperf import DlperfError
from dlperf.files import StorageError, atomic_write
from dlperf.schema import SCHEMA_VERSION, Result
from dlperf.stats import CI_LEVEL, median_ci_ranks

DEFAULT_RESULTS_DIR = Path("results")


def result_dir(results_dir: Path, config_key: str) -> Path:
    return results_dir / config_key


def write_result(results_dir: Path, result: Result) -> Path:
    """Write atomically (temp file + rename): an interrupted run leaves no half-written JSON."""
    path = result_dir(results_dir, result.spec.config_key()) / f"{result.id}.json"
    return atomic_write(path, result.model_dump_json(indent=2) + "\n")


def upgrade(data: dict[str, Any], source: str = "<data>") -> dict[str, Any]:
    """Bring an older result up to SCHEMA_VERSION; refuse a newer one."""
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise DlperfError(f"{source}: not a dlperf result (no integer schema_version)")
    if version > SCHEMA_VERSION:
        raise DlperfError(
            f"{source}: schema_version {version} is newer than this dlperf understands "
            f"({SCHEMA_VERSION}); upgrade dlperf (pip install -U dlperf) to read it"
        )
    # Upgrades chain here, one version at a time.
    if version == 1:  # 2 only added optional fields (spec.source, source, origin)
        data = {**data, "schema_version": 2}
    if data["schema_version"] == 2:  # 3 only added optional fields (practice, env kind, load)
        data = {**data, "schema_version": 3}
    if data["schema_version"] == 3:  # 4 redefined the summaries' interval: recomputed
        data = {**data, "schema_version": 4}
        if "metrics" in data:
            data["metrics"] = _median_intervals(data["metrics"])
    if data["schema_version"] == 4:  # 5 only added optional fields (metrics.peer, repeat.peer)
        data = {**data, "schema_version": 5}
    if data["schema_version"] == 5:  # 6 only added optional fields (telemetry, commits)
        data = {**data, "schema_version": 6}
    return data


def _median_intervals(metrics: Any) -> Any:
    """Version 3's summaries held the mean's t-interval under ci_low / ci_high; 4's hold the
    median's. Relabelling would misstate them, so each is recomputed from the summary's own
    stored values (the ok repeats'), exactly as `stats.summarize` computes it today."""
    if not isinstance(metrics, dict):
        return metrics  # not a result's metrics: validation reports it
    out = dict(metrics)
    for name in ("throughput", "step_time_ms", "loadgen_metric"):
        summary = out.get(name)
        if not isinstance(summary, dict) or not isinstance(summary.get("values"), list):
            continue
        try:
            ordered = sorted(float(v) for v in summary["values"])
            ranks = median_ci_ranks(len(ordered), CI_LEVEL) if ordered else None
        except (TypeError, ValueError):
            continue  # malformed values: left as they are for validation to refuse
        out[name] = {
            **summary,
            "ci_level": CI_LEVEL,
            "ci_low": ordered[ranks.low_rank - 1] if ranks else None,
            "ci_high": ordered[ranks.high_rank - 1] if ranks else None,
            "ci_coverage": ranks.coverage if ranks else None,
        }
    return out


class SkippedResult(UserWarning):
    """A file in a results directory that is not a loadable result: skipped, never fatal."""


def load_result(path: Path) -> Result:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DlperfError(f"{path}: cannot read result: {exc}") from None
    if not isinstance(data, dict):
        raise DlperfError(f"{path}: not a dlperf result (a JSON {type(data).__name__})")
    try:
        return Result.model_validate(upgrade(data, str(path)))
    except ValidationError as exc:
        raise DlperfError(f"{path}: invalid result: {exc}") from None


def iter_result_paths(results_dir: Path) -> list[Path]:
    if not results_dir.exists():
        return []
    # Results sit exactly at <results>/<config_key>/<id>.json; deeper files are raw logs.
    return sorted(p for p in results_dir.glob("*/*.json") if not p.name.startswith("."))


def load_results(results_dir: Path) -> list[Result]:
    """Every loadable result under `results_dir`. A file that is not one (bad JSON, not UTF-8,
    another schema, written by a newer dlperf) is skipped with a SkippedResult warning naming
    it: one bad file never makes the rest of the directory unreadable."""
    return _loadable(iter_result_paths(results_dir))


def _loadable(paths: Iterable[Path]) -> list[Result]:
    results = []
    for path in paths:
        try:
            results.append(load_result(path))
        except DlperfError as exc:
            warnings.warn(f"skipped {exc}", SkippedResult, stacklevel=3)
    return results


def latest_per_config(results: Iterable[Result]) -> list[Result]:
    """The newest result for each configuration (results of one config are never merged)."""
    latest: dict[str, Result] = {}
    for result in results:
        key = result.spec.config_key()
        if key not in latest or (result.created, result.id) > (
            latest[key].created,
            latest[key].id,
        ):
            latest[key] = result
    return [latest[k] for k in sorted(latest)]


def find_result(results_dir: Path, config_key: str) -> Result | None:
    """The newest stored result of one configuration, if any."""
    folder = result_dir(results_dir, config_key)
    paths = sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))
    found = latest_per_config(_loadable(paths))
    return found[0] if found else None


def single_device_baseline(results_dir: Path, spec) -> Result | None:  # spec: BenchmarkSpec
    """The newest stored 1x1 (one node, one device) result of `spec`'s configuration: what a
    data-parallel run's speedup and scaling efficiency are measured against."""
    if spec.world_size == 1:
        return None
    return find_result(results_dir, single_device_key(spec))


def single_device_key(spec) -> str:  # spec: BenchmarkSpec
    """The configuration key of `spec` on one node with one device."""
    return spec.model_copy(update={"nodes": 1, "devices_per_node": 1}).config_key()


# Spec fields that are counts (nullable where the spec leaves them out: image_size, seq_len).
_INT_COLUMNS = ("nodes", "devices_per_node", "batch_size", "image_size", "seq_len", "skip",
                "measure", "repeats", "repeats_run", "throughput_n")  # fmt: skip
_BOOL_COLUMNS = ("loadgen_valid", "latency_target_met")  # None where not measured
# ci_low / ci_high: the median's 95 % interval, NaN (empty in CSV) below six ok repeats
_SUMMARY = ("median", "mean", "min", "max", "stdev", "cv", "ci_low", "ci_high", "ci_coverage")
_FLOAT_COLUMNS = ("latency_target_ms", "mfu", "achieved_flops", "peak_flops",
                  *(f"throughput_{name}" for name in _SUMMARY))  # fmt: skip
_ENVIRONMENT = ("dlperf_version", "framework_version", "python", "host", "os", "device_name",
                "cpu", "gpu", "env_kind", "dists_digest")  # fmt: skip


def result_row(r: Result) -> dict[str, Any]:
    """One result as flat columns: identity, spec, status, the throughput summary over the ok
    repeats, MFU, latency percentiles (where measured) and the environment's versions. The
    spec's options are one JSON text column (their keys differ between frameworks)."""
    t, m = r.metrics.throughput, r.metrics
    spec = r.spec.model_dump(exclude={"options", "practice", "loadgen"})
    row: dict[str, Any] = {
        "config_key": r.spec.config_key(),
        "id": r.id,
        "created": r.created,
        "origin": r.origin,
        "status": r.status.value,
        **spec,
        "options": json.dumps(r.spec.options, sort_keys=True),
        "repeats_run": len(r.repeats),
        "throughput_n": t.n if t else 0,  # the ok repeats the summary is over
    }
    for name in _SUMMARY:
        row[f"throughput_{name}"] = getattr(t, name) if t else None
    row.update(noisy=m.noisy, mfu=m.mfu, achieved_flops=m.achieved_flops,
               peak_flops=m.peak_flops, loadgen_valid=m.loadgen_valid,
               latency_target_met=m.latency_target_met)  # fmt: skip
    row.update({f"latency_ms_{k}": v for k, v in m.latency_ms.items()})
    row.update({name: getattr(r.environment, name) for name in _ENVIRONMENT})
    return row


def results_frame(results: Iterable[Result]):  # -> pandas.DataFrame (pandas imported lazily)
    """One row per result (`result_row`), in the given order. Counts are nullable integers, the
    optional flags nullable booleans and measurements floats (NaN where missing), whatever
    the results hold, so a missing value stays missing through CSV and Parquet."""
    import pandas as pd

    frame = pd.DataFrame([result_row(r) for r in results])
    if frame.empty:
        return frame
    return frame.astype({**dict.fromkeys(_INT_COLUMNS, "Int64"),
                         **dict.fromkeys(_BOOL_COLUMNS, "boolean"),
                         **dict.fromkeys(_FLOAT_COLUMNS, "float64")})  # fmt: skip


UNSAVED_DIR = Path(tempfile.gettempdir()) / "dlperf-unsaved"
"""Where a measured result goes when its results folder cannot take it (full, read-only)."""


def unsaved_error(result: Result, results_dir: Path, exc: StorageError) -> StorageError:
    """The error for a measured result its folder refused: saved elsewhere, or its numbers
    printed, so that what was measured is never lost (exit code 2: benchmarks ran)."""
    key = result.spec.config_key()
    fallback = UNSAVED_DIR / key / f"{result.id}.json"
    try:
        atomic_write(fallback, result.model_dump_json(indent=2) + "\n")
        kept = (
            f"the result was saved to {fallback} instead: move it to "
            f"{result_dir(results_dir, key)}/ once that folder can be written"
        )
    except StorageError as again:
        t = result.metrics.throughput
        numbers = f"median {t.median:.4g} samples/s over {t.n} repeat(s)" if t else "no throughput"
        kept = f"it could not be saved elsewhere either ({again}); measured: {numbers}"
    return StorageError(f"{exc}; {kept}", exit_code=2)
