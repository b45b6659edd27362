"""MLPerf LoadGen log folders made by anyone (`dlperf parse mlperf`) -> Results: one result per
scenario and settings, a repeat per folder. The logs are read by `dlperf.mlperf`, the reader
`dlperf run --scenario` uses too.
"""

from __future__ import annotations

from pathlib import Path

from dlperf import DlperfError
from dlperf.importers import imported_result
from dlperf.mlperf import DETAIL, given_settings, read_dir
from dlperf.schema import BenchmarkSpec, LoadGenRun, Repeat, RepeatStatus, Result
from dlperf.store import write_result


def import_dirs(
    paths: list[Path],
    *,
    framework: str,
    model: str,
    batch_size: int,
    device: str,
    results_dir: Path,
) -> list[tuple[Result, Path]]:
    """Results from LoadGen log folders made by anyone: one result per scenario, a repeat per
    folder. LoadGen's logs do not say what ran: `framework`, `model`, `batch_size` and
    `device` label it."""
    folders = []
    for path in paths:
        if not path.exists():
            raise DlperfError(f"{path}: no such file or folder")
        found = sorted({p.parent for p in path.rglob("mlperf_log_*.txt")}) if path.is_dir() else []
        folders += found or [path]
    groups: dict[tuple, list[LoadGenRun]] = {}
    for folder in folders:
        run = read_dir(folder)
        groups.setdefault((run.scenario, *sorted(given_settings(run).items())), []).append(run)
    built = []
    for (scenario, *settings), runs in sorted(groups.items()):
        spec = BenchmarkSpec.checked(
            framework=framework,
            model=model,
            mode="infer",
            device=device,
            batch_size=batch_size,
            scenario=scenario.lower(),
            loadgen=dict(settings),
            repeats=len(runs),
        )
        repeats = [
            Repeat(
                index=i,
                status=RepeatStatus.ok,
                throughput=run.samples_per_second,
                loadgen=run,
                log_path=str(Path(run.log_dir or ".") / DETAIL),
            )
            for i, run in enumerate(runs, 1)
        ]
        built.append(imported_result(spec, repeats))
    # Written once every result is made: a refused log leaves nothing half-imported.
    return [(result, write_result(results_dir, result)) for result in built]
