"""Drive an inference workload with MLPerf LoadGen (`mlperf_loadgen`, PyPI mlcommons-loadgen).

A workload script calls `run(settings, out_dir, predict, batch_size)` after its warm-up:

* `settings`: the JSON object dlperf passes with `--loadgen-settings` (`scenario` plus optional
  `target_qps`, `target_latency_ms`, `min_duration_s`, `max_duration_s`, `min_query_count`,
  `max_query_count`, `samples_per_query`, `performance_sample_count`); what LoadGen must
  expect (rate, latency) is measured first when not given, and an Offline query sized from
  that estimate that ended too soon is run again (`plan`, `run`);
* `out_dir`: where LoadGen writes mlperf_log_summary.txt and mlperf_log_detail.txt (dlperf
  parses them on the host, and `dlperf parse mlperf` reads the same files);
* `predict(n)`: runs the model on n <= batch_size samples of its synthetic data and returns
  only once the device is done (synchronised, a value read back).

The system under test batches what LoadGen has issued, up to `batch_size` samples per call,
on one worker thread, and completes each sample when its batch is done. Imports only the
standard library and mlperf_loadgen.
"""

from __future__ import annotations

import json
import math
import os
import queue
import threading
import time
from collections.abc import Callable

SCENARIOS = {
    "offline": "Offline",
    "server": "Server",
    "singlestream": "SingleStream",
    "multistream": "MultiStream",
}


def test_settings(lg, settings: dict):
    """LoadGen's TestSettings from dlperf's names (only those given override LoadGen's)."""
    ts = lg.TestSettings()
    scenario = settings["scenario"]
    ts.scenario = getattr(lg.TestScenario, SCENARIOS[scenario])
    ts.mode = lg.TestMode.PerformanceOnly
    if "target_qps" in settings:
        qps = float(settings["target_qps"])
        ts.offline_expected_qps = qps
        ts.server_target_qps = qps
    if "target_latency_ms" in settings:
        ns = int(float(settings["target_latency_ms"]) * 1e6)
        ts.server_target_latency_ns = ns
        ts.single_stream_expected_latency_ns = ns
        ts.multi_stream_expected_latency_ns = ns
    if "min_duration_s" in settings:
        ts.min_duration_ms = int(float(settings["min_duration_s"]) * 1000)
    if "max_duration_s" in settings:
        ts.max_duration_ms = int(float(settings["max_duration_s"]) * 1000)
    if "min_query_count" in settings:
        ts.min_query_count = int(settings["min_query_count"])
    if "max_query_count" in settings:
        ts.max_query_count = int(settings["max_query_count"])
    if "samples_per_query" in settings:
        ts.multi_stream_samples_per_query = int(settings["samples_per_query"])
    if "performance_sample_count" in settings:
        ts.performance_sample_count_override = int(settings["performance_sample_count"])
    return ts


# LoadGen's early stopping judges a 99th percentile only from this many queries with none over
# the bound (mlcommons-loadgen 6.0: "Need to process at least 662 queries" in MultiStream, 459
# in Server); fewer make every run INVALID, however well the system under test does.
EARLY_STOPPING_QUERIES = {"server": 459, "multistream": 662}
LOADGEN_MIN_DURATION_S = 10.0  # LoadGen's own default min_duration_ms
OFFLINE_RUNS = 3  # an Offline query that ended before the minimum duration is run again
CALIBRATION_S = 0.5  # predict calls are timed for at least this long (and at least 3 calls)
SERVER_LATENCY_FACTOR = 10  # Server's bound, unless given: this times the slowest measured call


def timed(predict: Callable[[int], None], n: int) -> list[float]:
    """Seconds of predict(n) calls, fastest first: at least 3 calls and CALIBRATION_S seconds
    (at most 50 calls), so the fastest is near what the system does when the host lets it."""
    times: list[float] = []
    while len(times) < 3 or (sum(times) < CALIBRATION_S and len(times) < 50):
        start = time.monotonic()
        predict(n)
        times.append(time.monotonic() - start)
    return sorted(times)


def plan(
    settings: dict, predict: Callable[[int], None], batch_size: int, log: Callable[[str], None]
) -> dict:
    """`settings` with what LoadGen plans the test from, where not given: measured (an Offline
    query's size and the Server's arrival rate from the expected QPS, the streams' query counts
    from the expected latency), and the queries early stopping needs."""
    settings = dict(settings)
    scenario = settings["scenario"]
    # Offline asks for twice the fastest call's rate: the one query then lasts past the minimum
    # duration even when the host was busy while measuring and quiet while running (and when
    # it was not enough, `run` runs the query again, sized from the rate LoadGen saw). The
    # Server asks for half of it (the queue stays short) and, unless given, bounds the latency
    # by SERVER_LATENCY_FACTOR times the slowest call: LoadGen's own 100 ms bound is no
    # constraint the user chose, and a busy host makes a CPU's calls 10x slower now and then.
    needs_rate = scenario in ("offline", "server") and "target_qps" not in settings
    needs_bound = scenario == "server" and "target_latency_ms" not in settings
    if needs_rate or needs_bound:
        times = timed(predict, batch_size)
        if needs_rate:
            rate = batch_size / times[0]
            settings["target_qps"] = round(rate * (2.0 if scenario == "offline" else 0.5), 3)
            log(f"loadgen: measured {rate:.2f} samples/s; target_qps {settings['target_qps']}")
        if needs_bound:
            bound = round(times[-1] * 1e3 * SERVER_LATENCY_FACTOR, 3)
            settings["target_latency_ms"] = bound
            log(f"loadgen: slowest call {times[-1] * 1e3:.1f} ms; target_latency_ms {bound}")
    if scenario in ("singlestream", "multistream") and "target_latency_ms" not in settings:
        n = 1 if scenario == "singlestream" else int(settings.get("samples_per_query", 8))
        settings["target_latency_ms"] = round(timed(predict, min(n, batch_size))[1] * 1e3, 3)
        log(f"loadgen: measured {settings['target_latency_ms']} ms per query of {n}")
    if scenario in EARLY_STOPPING_QUERIES and "min_query_count" not in settings:
        settings["min_query_count"] = EARLY_STOPPING_QUERIES[scenario]
        if settings.get("max_query_count", math.inf) < settings["min_query_count"]:
            del settings["min_query_count"]  # the user's cap wins; LoadGen will say why
        else:
            log(f"loadgen: min_query_count {settings['min_query_count']} (early stopping's p99)")
    return settings


def logged(out_dir: str, keys: tuple[str, ...]) -> dict:
    """The values of `keys` in LoadGen's detail log (its `:::MLLOG {json}` lines)."""
    found: dict = {}
    try:
        with open(os.path.join(out_dir, "mlperf_log_detail.txt"), errors="replace") as lines:
            for line in lines:
                _, sep, payload = line.partition(":::MLLOG ")
                try:
                    entry = json.loads(payload) if sep else {}
                except json.JSONDecodeError:
                    continue
                if entry.get("key") in keys:
                    found[entry["key"]] = entry.get("value")
    except OSError:
        pass
    return found


def keep_short_run(out_dir: str, index: int) -> str:
    """Move a too-short run's logs into `short-run-K/` beside the final ones."""
    folder = os.path.join(out_dir, f"short-run-{index}")
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(out_dir):
        if name.startswith("mlperf_log_"):
            os.replace(os.path.join(out_dir, name), os.path.join(folder, name))
    return folder


class BatchingSUT:
    """The system under test's worker: what LoadGen issues is batched, up to `batch_size`
    samples per predict() call, on one thread; each sample completes when its batch is done."""

    def __init__(self, lg, predict: Callable[[int], None], batch_size: int,
                 log: Callable[[str], None]) -> None:  # fmt: skip
        self.lg, self.predict, self.batch_size, self.log = lg, predict, batch_size, log
        self.pending: queue.Queue = queue.Queue()
        self.samples = self.batches = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.work, daemon=True)
        self.thread.start()

    def issue_queries(self, samples) -> None:
        for s in samples:
            self.pending.put(s)

    def next_batch(self) -> list:
        """The samples waiting now, up to a batch (empty when none came in 50 ms)."""
        try:
            batch = [self.pending.get(timeout=0.05)]
        except queue.Empty:
            return []
        while len(batch) < self.batch_size:
            try:
                batch.append(self.pending.get_nowait())
            except queue.Empty:
                break
        return batch

    def work(self) -> None:
        last_note = time.monotonic()
        while not self.stop.is_set():
            batch = self.next_batch()
            if not batch:
                continue
            self.predict(len(batch))
            self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(s.id, 0, 0) for s in batch])
            self.samples += len(batch)
            self.batches += 1
            if time.monotonic() - last_note > 5:  # a sign of life for dlperf's watchdog
                self.log(f"loadgen: {self.samples} samples in {self.batches} batches")
                last_note = time.monotonic()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def log_settings(lg, out_dir: str):
    """LoadGen's logs to `out_dir`, the summary not copied to stdout."""
    out = lg.LogOutputSettings()
    out.outdir = out_dir
    out.copy_summary_to_stdout = False
    settings = lg.LogSettings()
    settings.log_output = out
    return settings


def run_again(settings: dict, given: dict, out_dir: str, attempt: int,
              log: Callable[[str], None]) -> bool:  # fmt: skip
    """Whether the test just run must run again, with `settings`' target_qps raised: an Offline
    query sized by dlperf's estimate that ended before the minimum duration says the estimate
    was low, not that the system missed a constraint. LoadGen's own advice is a larger query,
    so it runs again expecting twice the rate it saw. A target the user gave is theirs: its
    verdict stands."""
    if settings["scenario"] != "offline" or "target_qps" in given:
        return False
    seen = logged(out_dir, ("result_min_duration_met", "result_samples_per_second"))
    rate = seen.get("result_samples_per_second")
    if seen.get("result_min_duration_met") is not False or not rate:
        return False
    min_duration_s = float(settings.get("min_duration_s", LOADGEN_MIN_DURATION_S))
    if attempt == OFFLINE_RUNS:
        log(f"loadgen: still shorter than {min_duration_s:g} s after {attempt} runs")
        return False
    folder = keep_short_run(out_dir, attempt)
    settings["target_qps"] = round(max(2.0 * rate, 2.0 * settings["target_qps"]), 3)
    log(
        f"loadgen: the query ran at {rate:.2f} samples/s and ended before the minimum "
        f"duration ({min_duration_s:g} s; logs kept in {folder}); running it again "
        f"with target_qps {settings['target_qps']}"
    )
    return True


def run(
    settings: dict,
    out_dir: str,
    predict: Callable[[int], None],
    batch_size: int,
    sample_count: int = 1024,
    log: Callable[[str], None] = print,
) -> None:
    import mlperf_loadgen as lg

    given = dict(settings)
    settings = plan(given, predict, batch_size, log)
    worker = BatchingSUT(lg, predict, batch_size, log)
    sut = lg.ConstructSUT(worker.issue_queries, lambda: None)
    count = int(settings.get("performance_sample_count", min(sample_count, 1024)))
    qsl = lg.ConstructQSL(sample_count, count, lambda _: None, lambda _: None)
    logs = log_settings(lg, out_dir)
    log(f"loadgen: {SCENARIOS[settings['scenario']]} scenario, batches of up to {batch_size}")
    try:
        for attempt in range(1, OFFLINE_RUNS + 1):
            lg.StartTestWithLogSettings(sut, qsl, test_settings(lg, settings), logs)
            if not run_again(settings, given, out_dir, attempt, log):
                break
    finally:
        worker.close()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    log(f"loadgen: done, {worker.samples} samples in {worker.batches} batches; logs in {out_dir}")
