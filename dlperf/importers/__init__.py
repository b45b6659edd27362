"""Logs made elsewhere, read into Results: DLPerf trees and dlperf events files
(`dlperf_logs`), MLPerf LoadGen folders (`loadgen`), FAMBench bmlogger logs (`fambench`).

Importers go through `dlperf.spec` and `dlperf.assemble`, never through the runner: a log's
result is assembled by the same code as a run's, described only by what the log says.
"""

from __future__ import annotations

from dlperf import system
from dlperf.assemble import build_result, described_workload, imported_environment, new_result_id
from dlperf.gitinfo import provenance
from dlperf.schema import BenchmarkSpec, Repeat, Result, SourceInfo


def imported_result(
    spec: BenchmarkSpec,
    repeats: list[Repeat],
    *,
    source: SourceInfo | None = None,
    target_p95: tuple[float, str] | None = None,
) -> Result:
    """The result of repeats read from logs: the environment is the log's, the peak FLOP/s
    (for the MFU) the one known for the device the log names. `target_p95`: see build_result."""
    workload = described_workload(repeats)
    peak = None
    if workload.get("flops_per_sample"):
        peak = system.job_peak_flops(
            spec.device,
            workload.get("device_name"),
            spec.precision,
            gpus=spec.world_size,
            machines=1,
        )
    return build_result(
        spec,
        new_result_id(),
        repeats,
        environment=imported_environment(workload, provenance()),
        peak=peak,
        source=source,
        imported=True,
        target_p95=target_p95,
    )
