"""MLPerf LoadGen log folders made by anyone (`dlperf parse mlperf`) -> Results: one result per
scenario and settings, a repeat per folder. The logs are read by `dlperf.mlperf`, the reader
`dlperf run --scenario` uses too.
"""

from __future__ import annotations

from pathlib import Path

from dlperf import DlperfError
from dlperf.importers import imported_result
from dlperf.mlperf import DETAIL, SUMMARY, given_settings, invalid_message, read_dir
from dlperf.schema import BenchmarkSpec, LoadGenRun, Repeat, RepeatStatus, Result
from dlperf.store import ResultStore


def import_dirs(
    paths: list[Path],
    *,
    framework: str,
    model: str,
    batch_size: int,
    device: str,
    results_dir: Path,
) -> list[tuple[Result, Path]]:
    """Results from LoadGen log folders made by anyone: one result per system, benchmark,
    scenario and settings, a repeat per folder (INVALID runs keep their numbers under their own
    status, outside the median). LoadGen's logs do not say what ran: `framework`, `model`,
    `batch_size` and `device` label it; a submission tree's folder names
    (`<system>/<benchmark>/<scenario>[/TEST..]/performance/run_N`) tell its runs apart.
    Accuracy-mode folders hold no performance numbers: they are skipped, and said so."""
    folders = []
    for path in paths:
        if not path.exists():
            raise DlperfError(f"{path}: no such file or folder")
        found = sorted({p.parent for p in path.rglob("mlperf_log_*.txt")}) if path.is_dir() else []
        folders += found or [path]
    groups: dict[tuple, list[LoadGenRun]] = {}
    skipped = []
    for folder in folders:
        if accuracy_mode(folder):
            skipped.append(f"not imported: {folder.resolve()} is an accuracy-mode LoadGen run "
                           "(no performance numbers)")  # fmt: skip
            continue
        run = read_dir(folder)
        identity = tuple(sorted(submission_identity(Path(run.log_dir or folder)).items()))
        key = (identity, run.scenario, *sorted(given_settings(run).items()))
        groups.setdefault(key, []).append(run)
    built = []
    for (identity, scenario, *settings), runs in sorted(groups.items()):
        spec = BenchmarkSpec.checked(
            framework=framework,
            model=model,
            mode="infer",
            device=device,
            batch_size=batch_size,
            scenario=scenario.lower(),
            loadgen=dict(settings),
            options=dict(identity),
            repeats=len(runs),
        )
        repeats = [loadgen_repeat(i, run) for i, run in enumerate(runs, 1)]
        result = imported_result(spec, repeats)
        if skipped:
            result = result.model_copy(update={"warnings": [*result.warnings, *skipped]})
        built.append(result)
    if not built and skipped:
        raise DlperfError("; ".join(skipped) + ": nothing to import")
    # Written once every result is made: a refused log leaves nothing half-imported.
    return ResultStore(results_dir).write_all(built)


def loadgen_repeat(index: int, run: LoadGenRun) -> Repeat:
    """A repeat of one LoadGen run: ok when VALID; `invalid` (numbers kept) otherwise."""
    folder = Path(run.log_dir or ".")
    log = folder / DETAIL if (folder / DETAIL).exists() else folder / SUMMARY
    valid = run.valid
    return Repeat(
        index=index,
        status=RepeatStatus.ok if valid else RepeatStatus.invalid,
        message="" if valid else invalid_message(run),
        throughput=run.samples_per_second,
        loadgen=run,
        log_path=str(log),
    )


def accuracy_mode(folder: Path) -> bool:
    """Whether `folder` holds an accuracy-mode LoadGen run (a submission's `accuracy/`)."""
    if folder.is_file():
        folder = folder.parent
    summary = folder / SUMMARY
    if (folder / "mlperf_log_accuracy.json").exists() and folder.name == "accuracy":
        return True
    if summary.exists():
        with open(summary, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.replace(" ", "").startswith("Mode:"):
                    return "Accuracy" in line
    return folder.name == "accuracy"


def submission_identity(folder: Path) -> dict[str, str]:
    """The system, benchmark and compliance test a submission tree's path names
    (`.../<system>/<benchmark>/<scenario>[/TESTnn]/performance/run_N`); {} elsewhere."""
    parts = folder.parts
    if len(parts) < 5 or parts[-2] != "performance" or not parts[-1].startswith("run_"):
        return {}
    rest = list(parts[:-2])
    test = rest.pop() if rest[-1].upper().startswith("TEST") else None
    if len(rest) < 3:
        return {}
    identity = {"system": rest[-3], "benchmark": rest[-2]}
    if test:
        identity["test"] = test
    return identity
