"""Drive an inference workload with MLPerf LoadGen (`mlperf_loadgen`, PyPI mlcommons-loadgen).

A workload script calls `run(settings, out_dir, predict, batch_size)` after its warm-up:

* `settings`: the JSON object dlperf passes with `--loadgen-settings` (`scenario` plus optional
  `target_qps`, `target_latency_ms`, `min_duration_s`, `max_duration_s`, `min_query_count`,
  `max_query_count`, `samples_per_query`, `performance_sample_count`); what LoadGen must
  expect (rate, latency) is measured first when not given;
* `out_dir`: where LoadGen writes mlperf_log_summary.txt and mlperf_log_detail.txt (dlperf
  parses them on the host, and `dlperf parse mlperf` reads the same files);
* `predict(n)`: runs the model on n <= batch_size samples of its synthetic data and returns
  only once the device is done (synchronised, a value read back).

The system under test batches what LoadGen has issued, up to `batch_size` samples per call,
on one worker thread, and completes each sample when its batch is done. Imports only the
standard library and mlperf_loadgen.
"""

from __future__ import annotations

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


def timed(predict: Callable[[int], None], n: int) -> list[float]:
    """Seconds of three predict(n) calls, fastest first."""
    times = []
    for _ in range(3):
        start = time.monotonic()
        predict(n)
        times.append(time.monotonic() - start)
    return sorted(times)


def run(
    settings: dict,
    out_dir: str,
    predict: Callable[[int], None],
    batch_size: int,
    sample_count: int = 1024,
    log: Callable[[str], None] = print,
) -> None:
    import mlperf_loadgen as lg

    settings = dict(settings)
    scenario = settings["scenario"]
    # LoadGen plans the test from what it expects: an Offline query's size and the Server's
    # arrival rate from the expected QPS, the streams' query counts from the expected latency.
    # Unless given, measure them (3 calls) and ask for twice the fastest call's rate (Offline:
    # the one query then lasts past the minimum duration even when the host was busy while
    # measuring and quiet while running, where a slow estimate makes the query too short and
    # the run INVALID; 1.5x was not always enough on a shared 2-core machine), half of it
    # (Server: the queue stays short), or the median latency.
    if scenario in ("offline", "server") and "target_qps" not in settings:
        rate = batch_size / timed(predict, batch_size)[0]
        settings["target_qps"] = round(rate * (2.0 if scenario == "offline" else 0.5), 3)
        log(f"loadgen: measured {rate:.2f} samples/s; target_qps {settings['target_qps']}")
    if scenario in ("singlestream", "multistream") and "target_latency_ms" not in settings:
        n = 1 if scenario == "singlestream" else int(settings.get("samples_per_query", 8))
        settings["target_latency_ms"] = round(timed(predict, min(n, batch_size))[1] * 1e3, 3)
        log(f"loadgen: measured {settings['target_latency_ms']} ms per query of {n}")
    pending: queue.Queue = queue.Queue()
    done = {"samples": 0, "batches": 0}
    stop = threading.Event()

    def worker() -> None:
        last_note = time.monotonic()
        while not stop.is_set():
            try:
                first = pending.get(timeout=0.05)
            except queue.Empty:
                continue
            batch = [first]
            while len(batch) < batch_size:
                try:
                    batch.append(pending.get_nowait())
                except queue.Empty:
                    break
            predict(len(batch))
            lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0) for s in batch])
            done["samples"] += len(batch)
            done["batches"] += 1
            if time.monotonic() - last_note > 5:  # a sign of life for dlperf's watchdog
                log(f"loadgen: {done['samples']} samples in {done['batches']} batches")
                last_note = time.monotonic()

    def issue_queries(samples) -> None:
        for s in samples:
            pending.put(s)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    sut = lg.ConstructSUT(issue_queries, lambda: None)
    count = int(settings.get("performance_sample_count", min(sample_count, 1024)))
    qsl = lg.ConstructQSL(sample_count, count, lambda _: None, lambda _: None)
    out = lg.LogOutputSettings()
    out.outdir = out_dir
    out.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = out
    log(f"loadgen: {SCENARIOS[settings['scenario']]} scenario, batches of up to {batch_size}")
    try:
        lg.StartTestWithLogSettings(sut, qsl, test_settings(lg, settings), log_settings)
    finally:
        stop.set()
        thread.join()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    log(f"loadgen: done, {done['samples']} samples in {done['batches']} batches; logs in {out_dir}")
