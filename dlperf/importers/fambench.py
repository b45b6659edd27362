"""FAMBench: its bmlogger JSON-lines logs read into results, scored as its summarizer does.

A log is a `header` line (benchmark, implementation, mode, config, score_metric), `run_start`,
optional `batch_start`/`batch_stop` pairs, and `run_stop` (num_batches, batch_size, and for
microbenchmarks `extra_metadata` with the score, e.g. {"TF/s": 7.08}). Scores:
* `exps`: examples per second = num_batches x batch_size / (run_stop - run_start), with the
  batches' latencies (stop - start) as the latency distribution (FAMBench reports the p95);
* `tfps` / `gbps`: the number the microbenchmark put in `extra_metadata`.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlperf import DlperfError
from dlperf.events import split_lines
from dlperf.importers import imported_result
from dlperf.schema import BenchmarkSpec, Repeat, RepeatStatus, Result
from dlperf.store import write_result

IMPLEMENTATIONS = {"ootb": "ootb", "optimized": "official", "ubench": "micro", "micro": "micro"}
MODES = {"eval": "infer", "infer": "infer", "inference": "infer", "train": "train"}
SCORE_UNITS = {"exps": "ex/s", "tfps": "TF/s", "gbps": "GB/s"}


@dataclass
class BmRun:
    header: dict[str, Any]
    start_ms: float
    stop_ms: float
    num_batches: int
    batch_size: int
    batch_ms: list[float] = field(default_factory=list)  # each batch's latency
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def score_metric(self) -> str:
        return str(self.header.get("score_metric", "exps")).lower()

    def score(self) -> tuple[float, str]:
        """(score, unit) as FAMBench's result summarizer computes it."""
        metric = self.score_metric
        if metric == "exps":
            seconds = (self.stop_ms - self.start_ms) / 1000.0
            if seconds <= 0:
                raise DlperfError("run_stop is not after run_start: no time to divide by")
            return self.num_batches * self.batch_size / seconds, SCORE_UNITS[metric]
        unit = SCORE_UNITS.get(metric, metric)
        if unit not in self.extra:
            raise DlperfError(f"score metric {metric!r}: run_stop has no extra_metadata {unit!r}")
        return float(self.extra[unit]), unit


def parse_bmlog(text: str) -> BmRun:
    return parse_bmlog_lines(text.splitlines())


def read_bmlog(path: Path) -> BmRun:
    """`parse_bmlog` of a file, read a line at a time."""
    with open(path, encoding="utf-8", errors="replace") as lines:
        return parse_bmlog_lines(split_lines(lines))


def parse_bmlog_lines(lines: Iterable[str]) -> BmRun:
    header: dict[str, Any] = {}
    start = stop = None
    batches: list[float] = []
    opened: float | None = None
    last: dict[str, Any] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DlperfError(f"line {number} is not JSON: {exc}") from None
        key = entry.get("key")
        if key == "header":
            header = entry
        elif key == "run_start":
            start = float(entry["time_ms"])
        elif key == "batch_start":
            opened = float(entry["time_ms"])
        elif key == "batch_stop" and opened is not None:
            batches.append(float(entry["time_ms"]) - opened)
            opened = None
        elif key == "run_stop":
            stop, last = float(entry["time_ms"]), entry
    if not header:
        raise DlperfError("no header line: not a FAMBench bmlogger log")
    if start is None or stop is None:
        raise DlperfError("no run_start/run_stop: the run did not finish")
    return BmRun(
        header=header,
        start_ms=start,
        stop_ms=stop,
        num_batches=int(last.get("num_batches") or len(batches)),
        batch_size=int(last.get("batch_size") or 1),
        batch_ms=batches,
        extra=dict(last.get("extra_metadata") or {}),
    )


def import_logs(
    paths: list[Path], *, framework: str, device: str, results_dir: Path
) -> list[tuple[Result, Path]]:
    """One result per FAMBench identity (benchmark, implementation, mode, config, batch
    size), a repeat per log; the score is stored as the result's `metrics.score`."""
    files: list[Path] = []
    for path in paths:
        if not path.exists():
            raise DlperfError(f"{path}: no such file or folder")
        files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    groups: dict[tuple, list[tuple[Path, BmRun]]] = {}
    for file in files:
        try:
            run = read_bmlog(file)
        except DlperfError as exc:
            raise DlperfError(f"{file}: {exc}") from None
        h = run.header
        key = (h.get("benchmark"), h.get("implementation"), h.get("mode"), h.get("config"),
               run.batch_size)  # fmt: skip
        groups.setdefault(key, []).append((file, run))
    built = []
    for (benchmark, implementation, mode, config, batch), runs in sorted(
        groups.items(), key=lambda kv: tuple(map(str, kv[0]))
    ):
        spec = BenchmarkSpec.checked(
            framework=framework,
            model=str(benchmark).lower(),
            impl=IMPLEMENTATIONS.get(str(implementation).lower(), "ootb"),
            mode=MODES.get(str(mode).lower(), "train"),
            device=device,
            batch_size=batch,
            options={"config": str(config)},
            repeats=len(runs),
        )
        repeats, scores = [], []
        for i, (file, run) in enumerate(runs, 1):
            score, unit = run.score()
            scores.append(score)
            # A microbenchmark times its own loop (ELAP); a model run spans run_start..stop.
            seconds = float(run.extra.get("ELAP") or (run.stop_ms - run.start_ms) / 1000.0)
            repeats.append(
                Repeat(
                    index=i,
                    status=RepeatStatus.ok,
                    throughput=run.num_batches * run.batch_size / seconds,
                    step_times_s=[ms / 1000.0 for ms in run.batch_ms],
                    log_path=str(file),
                )
            )
        # The batches' latencies become the result's percentiles (build_result pools them).
        result = imported_result(spec, repeats)
        update = {"score": statistics.median(scores), "score_unit": unit}
        built.append(
            result.model_copy(update={"metrics": result.metrics.model_copy(update=update)})
        )
    # Written once every result is made: a refused log leaves nothing half-imported.
    return [(result, write_result(results_dir, result)) for result in built]
