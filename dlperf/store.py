"""The results directory: atomic writes, loading with schema upgrades, a pandas frame.

Layout: ``<results>/<config_key>/<result_id>.json``, raw logs beside it in ``<result_id>/``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dlperf import DlperfError
from dlperf.files import atomic_write
from dlperf.schema import SCHEMA_VERSION, Result, ResultStatus

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
    return data


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


def results_frame(results: Iterable[Result]):  # -> pandas.DataFrame (pandas imported lazily)
    """One row per result: spec fields, status and the throughput summary."""
    import pandas as pd

    rows = []
    for r in results:
        t = r.metrics.throughput
        rows.append(
            {
                **r.spec.model_dump(exclude={"options"}),
                "config_key": r.spec.config_key(),
                "id": r.id,
                "created": r.created,
                "status": r.status.value,
                "median": t.median if t else None,
                "min": t.min if t else None,
                "max": t.max if t else None,
                "cv": t.cv if t else None,
                "n_ok": t.n if t else 0,
                "mfu": r.metrics.mfu,
                "ok": r.status != ResultStatus.failed,
            }
        )
    return pd.DataFrame(rows)
