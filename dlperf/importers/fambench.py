"""FAMBench: its bmlogger JSON-lines logs read into results, scored as its summarizer does.

FAMBench's `bmlogging/result_summarizer.py` (commit 24702680) reads `FOLDER/*.log` (that
folder only, no subfolders, no hidden files; it writes its own `summary.txt` into the same
folder) and gives each log one row:
* the labels as the `header` line writes them (benchmark, implementation, mode, config);
* `score` by the header's `score_metric`:
  - `exps`: num_batches x batch_size / (run_stop - run_start) seconds, from the FIRST
    `run_start` and the FIRST `run_stop` (a log with two passes is scored by its first);
    num_batches and batch_size come from the `num_batches` and `batch_size` lines
    (`record_batch_info`) when the log has both, else from that `run_stop`;
  - `tfps` / `gbps`: the first `run_stop`'s `extra_metadata["TF/s"]` / `["GB/s"]`;
* `batch_latency_95_sec`: the i-th `batch_start` paired with the i-th `batch_stop` over the
  whole log, by `stats.fambench_p95`; None without batches.

dlperf groups the logs of one configuration (labels and batch size) into one result with a
repeat per log. Each repeat keeps its log's FAMBench numbers (`repeat.peer["fambench"]`) and
labels (`repeat.workload["fambench"]`, the header as written); the result's `metrics.score` is
the median of its logs' scores. A repeat's throughput is samples per second: the score for
`exps`; for a microbenchmark, batch_size / ELAP, since its `extra_metadata["ELAP"]` is seconds
per step (FAMBench's ubench drivers divide their loop's time by the steps).
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
from dlperf.schema import BenchmarkSpec, PeerStat, Repeat, RepeatStatus, Result
from dlperf.stats import FAMBENCH_P95_RULE, fambench_p95
from dlperf.store import ResultStore

SUITE = "fambench"  # the key of its numbers in metrics.peer / repeat.peer
IMPLEMENTATIONS = {"ootb": "ootb", "optimized": "official", "ubench": "micro", "micro": "micro"}
MODES = {"eval": "infer", "infer": "infer", "inference": "infer", "train": "train"}
SCORE_UNITS = {"exps": "ex/s", "tfps": "TF/s", "gbps": "GB/s"}
SCORE_RULES = {
    "exps": "FAMBench's exps: num_batches x batch_size / (run_stop - run_start) of the log's "
    "first run_start and run_stop (batch_size and num_batches lines when it has both)",
    "tfps": "FAMBench's tfps: the first run_stop's extra_metadata['TF/s']",
    "gbps": "FAMBench's gbps: the first run_stop's extra_metadata['GB/s']",
}
LABELS = ("benchmark", "implementation", "mode", "config")  # the header's, as FAMBench shows


@dataclass
class BmLog:
    """One bmlogger log, as much of it as FAMBench's summarizer reads."""

    header: dict[str, Any]  # the first header line, without its "key"
    run_starts: list[float] = field(default_factory=list)  # each run_start's time_ms
    run_stops: list[dict[str, Any]] = field(default_factory=list)  # each run_stop line
    batch_size_line: dict[str, Any] | None = None  # the first `batch_size` line
    num_batches_line: dict[str, Any] | None = None  # the first `num_batches` line
    batch_starts: list[float] = field(default_factory=list)
    batch_stops: list[float] = field(default_factory=list)

    @property
    def score_metric(self) -> str:
        return str(self.header.get("score_metric", "exps"))

    @property
    def labels(self) -> dict[str, Any]:
        return {k: self.header.get(k) for k in LABELS}

    def batch_info(self) -> tuple[Any, Any]:
        """(num_batches, batch_size) by FAMBench's rule: the record_batch_info lines when the
        log has both, else the first run_stop's."""
        if self.batch_size_line is not None and self.num_batches_line is not None:
            return self.num_batches_line.get("num_batches"), self.batch_size_line.get("batch_size")
        stop = self.run_stops[0]
        return stop.get("num_batches"), stop.get("batch_size")

    def batch_size(self) -> int | None:
        value = self.batch_info()[1]
        return int(value) if isinstance(value, int | float) and value >= 1 else None

    def score(self) -> tuple[float, str]:
        """(score, unit) as FAMBench's result summarizer computes them."""
        metric = self.score_metric
        if metric not in SCORE_UNITS:
            raise DlperfError(
                f"score_metric {metric!r} is not one FAMBench scores ({', '.join(SCORE_UNITS)})"
            )
        unit = SCORE_UNITS[metric]
        if metric == "exps":
            seconds = (float(self.run_stops[0]["time_ms"]) - self.run_starts[0]) / 1000
            num_batches, batch_size = self.batch_info()
            if not isinstance(num_batches, int | float) or not isinstance(batch_size, int | float):
                raise DlperfError(
                    f"no batch counts (num_batches {num_batches}, batch_size {batch_size}): "
                    "neither record_batch_info lines nor run_stop give both"
                )
            if seconds == 0:  # FAMBench writes the score 'error: runtime is zero'
                raise DlperfError("run_stop at the same time as run_start: no rate (runtime 0)")
            return num_batches * batch_size / seconds, unit
        extra = self.run_stops[0].get("extra_metadata") or {}
        if not isinstance(extra.get(unit), int | float):
            raise DlperfError(f"score_metric {metric!r}: run_stop has no extra_metadata {unit!r}")
        return float(extra[unit]), unit

    def samples_per_second(self) -> float:
        """dlperf's throughput of the log: FAMBench's exps score; a microbenchmark's batch size
        over its seconds per step (ELAP), else over the run's time divided by its batches."""
        if self.score_metric == "exps":
            return self.score()[0]
        num_batches, batch_size = self.batch_info()
        elap = (self.run_stops[0].get("extra_metadata") or {}).get("ELAP")
        if not isinstance(elap, int | float) or elap <= 0:
            elap = None
            if isinstance(num_batches, int | float) and num_batches > 0:
                elap = (self.run_stops[0]["time_ms"] - self.run_starts[0]) / 1000 / num_batches
        if not isinstance(batch_size, int | float) or not elap or elap <= 0:
            raise DlperfError("no samples per second: no batch size, or no ELAP or run time")
        return batch_size / elap

    def batch_latencies_s(self) -> list[float]:
        """Each batch's latency in seconds: the i-th batch_stop minus the i-th batch_start."""
        if len(self.batch_starts) != len(self.batch_stops):
            return []
        return [(b - a) / 1000 for a, b in zip(self.batch_starts, self.batch_stops, strict=True)]

    def notes(self) -> list[str]:
        found = []
        if len(self.run_starts) > 1 or len(self.run_stops) > 1:
            found.append(
                f"{len(self.run_starts)} run_start and {len(self.run_stops)} run_stop lines: "
                "scored by the first pair, as FAMBench's summarizer does"
            )
        if len(self.batch_starts) != len(self.batch_stops):
            found.append(
                f"{len(self.batch_starts)} batch_start but {len(self.batch_stops)} batch_stop "
                "lines: no batch latency (FAMBench's summarizer stops on this log)"
            )
        return found


def read_bmlog(path: Path) -> BmLog:
    """`parse_bmlog_lines` of a file, read a line at a time."""
    with open(path, encoding="utf-8", errors="replace") as lines:
        return parse_bmlog_lines(split_lines(lines))


def _time_ms(entry: dict[str, Any], number: int) -> float:
    value = entry.get("time_ms")
    if not isinstance(value, int | float):
        raise DlperfError(f"line {number}: {entry.get('key')} has no number time_ms")
    return float(value)


def parse_bmlog_lines(lines: Iterable[str]) -> BmLog:
    """The lines FAMBench's summarizer reads, by their "key"; other lines are skipped as it
    skips them (it looks only for lines with a key it knows)."""
    log = BmLog(header={})
    for number, line in enumerate(lines, 1):
        if '"key"' not in line:
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DlperfError(f"line {number} is not JSON: {exc}") from None
        key = entry.pop("key", None) if isinstance(entry, dict) else None
        if key == "header":
            log.header = log.header or entry
        elif key == "run_start":
            log.run_starts.append(_time_ms(entry, number))
        elif key == "run_stop":
            _time_ms(entry, number)
            log.run_stops.append(entry)
        elif key == "batch_size":
            log.batch_size_line = log.batch_size_line or entry
        elif key == "num_batches":
            log.num_batches_line = log.num_batches_line or entry
        elif key == "batch_start":
            log.batch_starts.append(_time_ms(entry, number))
        elif key == "batch_stop":
            log.batch_stops.append(_time_ms(entry, number))
    if not log.header:
        raise DlperfError("no header line: not a FAMBench bmlogger log")
    if not log.run_starts or not log.run_stops:
        raise DlperfError("no run_start/run_stop: the run did not finish")
    return log


def fambench_files(paths: list[Path]) -> list[Path]:
    """The logs FAMBench's summarizer would read: a folder's `*.log` files (that folder only,
    not hidden ones, in sorted order here where FAMBench takes the directory's order); a file
    named on its own is read whatever its name."""
    files: list[Path] = []
    for path in paths:
        if not path.exists():
            raise DlperfError(f"{path}: no such file or folder")
        if not path.is_dir():
            files.append(path)
            continue
        found = sorted(
            p for p in path.iterdir() if p.name.endswith(".log") and not p.name.startswith(".")
        )
        found = [p for p in found if p.is_file()]
        if not found:
            deeper = next(iter(sorted(path.rglob("*.log"))), None)
            hint = (
                f" (a subfolder has {deeper.relative_to(path)}: give that folder)" if deeper else ""
            )
            raise DlperfError(
                f"{path}: no *.log files; FAMBench's summarizer reads FOLDER/*.log{hint}"
            )
        files += found
    return files


def _peer_numbers(log: BmLog) -> dict[str, PeerStat]:
    score, unit = log.score()
    numbers = {"score": PeerStat(value=score, unit=unit, rule=SCORE_RULES[log.score_metric])}
    p95 = fambench_p95(log.batch_latencies_s())
    if p95 is not None:
        numbers["batch_latency_95_sec"] = PeerStat(value=p95, unit="s", rule=FAMBENCH_P95_RULE)
    return numbers


def result_peer(repeats: list[Repeat]) -> dict[str, PeerStat]:
    """The result's FAMBench numbers from its logs': one log's own; several logs' median score
    (FAMBench gives each its own row) and slowest p95 (every log must meet a target)."""
    logs = [r.peer[SUITE] for r in repeats if SUITE in r.peer]
    if len(logs) == 1:
        return dict(logs[0])
    first = logs[0]["score"]
    out = {
        "score": PeerStat(
            value=statistics.median(x["score"].value for x in logs),
            unit=first.unit,
            rule=f"the median of {len(logs)} logs' scores, each by {first.rule}",
        )
    }
    p95s = [x["batch_latency_95_sec"].value for x in logs if "batch_latency_95_sec" in x]
    if p95s:
        out["batch_latency_95_sec"] = PeerStat(
            value=max(p95s),
            unit="s",
            rule=f"the slowest of {len(p95s)} logs' p95, each by {FAMBENCH_P95_RULE}",
        )
    return out


def import_logs(
    paths: list[Path],
    *,
    framework: str,
    device: str,
    results_dir: Path,
    latency_target_ms: float | None = None,
) -> list[tuple[Result, Path]]:
    """One result per FAMBench identity (benchmark, implementation, mode, config, batch
    size), a repeat per log. `latency_target_ms`: the inference results' p95 goal, judged by
    FAMBench's p95 of each log (the slowest must meet it)."""
    groups = _logs_by_identity(paths)
    built = [
        _result_of(identity, runs, framework, device, latency_target_ms)
        for identity, runs in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0])))
    ]
    # Written once every result is made: a refused log leaves nothing half-imported.
    return ResultStore(results_dir).write_all(built)


def _logs_by_identity(paths: list[Path]) -> dict[tuple, list[tuple[Path, BmLog]]]:
    """The logs FAMBench would read, by (benchmark, implementation, mode, config, batch)."""
    groups: dict[tuple, list[tuple[Path, BmLog]]] = {}
    for file in fambench_files(paths):
        try:
            log = read_bmlog(file)
            log.score()  # a log FAMBench cannot score is refused before anything is stored
            log.samples_per_second()
        except DlperfError as exc:
            raise DlperfError(f"{file}: {exc}") from None
        key = (*map(str, log.labels.values()), log.batch_size() or 1)
        groups.setdefault(key, []).append((file, log))
    return groups


def _result_of(
    identity: tuple,
    runs: list[tuple[Path, BmLog]],
    framework: str,
    device: str,
    latency_target_ms: float | None,
) -> Result:
    """The result of one identity's logs, with FAMBench's score and numbers beside dlperf's."""
    benchmark, implementation, mode, config, batch = identity
    mode = MODES.get(mode.lower(), "train")
    spec = BenchmarkSpec.checked(
        framework=framework,
        model=benchmark.lower(),
        impl=IMPLEMENTATIONS.get(implementation.lower(), "ootb"),
        mode=mode,
        device=device,
        batch_size=batch,
        options={"config": config},
        repeats=len(runs),
        latency_target_ms=latency_target_ms if mode == "infer" else None,
    )
    repeats = [
        Repeat(
            index=i,
            status=RepeatStatus.ok,
            throughput=log.samples_per_second(),
            step_times_s=log.batch_latencies_s(),
            log_path=str(file),
            warnings=log.notes(),
            workload={SUITE: log.header},
            peer={SUITE: _peer_numbers(log)},
        )
        for i, (file, log) in enumerate(runs, 1)
    ]
    peer = result_peer(repeats)
    p95 = peer.get("batch_latency_95_sec")
    target = (p95.value * 1000, " (FAMBench's p95, the slowest log's)") if p95 else None
    # dlperf's own percentiles (metrics.latency_ms) pool every log's batches; the target
    # is judged by FAMBench's p95 of each log.
    result = imported_result(spec, repeats, target_p95=target)
    update = {
        "score": peer["score"].value,
        "score_unit": peer["score"].unit,
        "peer": {**result.metrics.peer, SUITE: peer},
    }
    notes = [f"{Path(r.log_path).name}: {note}" for r in repeats for note in r.warnings]
    metrics = result.metrics.model_copy(update=update)
    return result.model_copy(update={"metrics": metrics, "warnings": [*result.warnings, *notes]})
