"""Post-run analysis of stored results: scaling against the 1x1 run of the same benchmark, and
the marks of a number that should not be trusted as it stands.

Pure functions of Results (the caller says where a result's 1x1 comes from: the results at
hand, or the store). `dlperf run`, `dlperf sweep`, `dlperf report` and the report's tables and
charts share them, so a run is suspect by one rule wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from dlperf.identity import identity_of, machine_of, spec_key
from dlperf.schema import Result, ResultStatus
from dlperf.store import newest, single_device

# A data-parallel run cannot beat N x one device by more than noise; above this it is suspect
# (a busy machine during the 1x1 run, simulated nodes sharing one host, a wrong sample count).
SUSPECT_EFFICIENCY = 1.05

# A data-parallel result -> the 1x1 result it is measured against (None: there is none).
Baseline = Callable[[Result], Result | None]


def per_device(result: Result) -> float | None:
    """Samples/s per device (accelerator): the whole job's median over its world size; None
    without a throughput."""
    t = result.metrics.throughput
    if t is None or result.status == ResultStatus.failed:
        return None
    return t.median / result.spec.world_size


def scaling_efficiency(result: Result, base: Result | None) -> float | None:
    """Median throughput / (world size x the 1x1 median): 1.0 is linear scaling."""
    t = result.metrics.throughput
    b = base.metrics.throughput if base else None
    if t is None or b is None or result.status == ResultStatus.failed or not b.median:
        return None
    return t.median / b.median / result.spec.world_size


@dataclass(frozen=True)
class Scaling:
    """A data-parallel result against the 1x1 result of its benchmark, machine and settings."""

    result: Result
    base: Result
    efficiency: float  # `scaling_efficiency`

    @property
    def suspect(self) -> bool:
        """Better than linear: the 1x1 run or this one was disturbed."""
        return self.efficiency > SUSPECT_EFFICIENCY


def scaling(results: Iterable[Result], baseline: Baseline) -> list[Scaling]:
    """Each data-parallel result of `results` (in their order) that has a 1x1 `baseline` and
    a scaling efficiency against it (neither failed, both with a throughput)."""
    out = []
    for r in results:
        if r.spec.world_size == 1:
            continue
        base = baseline(r)
        efficiency = scaling_efficiency(r, base)
        if base is not None and efficiency is not None:
            out.append(Scaling(r, base, efficiency))
    return out


def baselines_among(results: Iterable[Result]) -> Baseline:
    """A result's 1x1 among `results` (the last of each benchmark x machine x settings)."""
    ones = {identity_of(r).key: r for r in results if r.spec.world_size == 1}

    def baseline(result: Result) -> Result | None:
        benchmark, settings = spec_key(single_device(result.spec))
        return ones.get((benchmark, machine_of(result).id, settings))

    return baseline


def suspect_scaling(results: Sequence[Result]) -> list[tuple[Result, float]]:
    """(result, scaling efficiency) of every data-parallel result that scales better than
    linearly against the 1x1 result of its configuration (the newest results only)."""
    latest = newest(results)
    found = scaling(latest, baselines_among(latest))
    return [(s.result, s.efficiency) for s in found if s.suspect]


def speedups(group: Sequence[Result]) -> list[tuple[int, float, Result]]:
    """(devices, speedup, result) of one configuration's results at each topology, by devices:
    the speedup is the median throughput against the group's 1x1 result's (it has one)."""
    one = next(r for r in group if r.spec.world_size == 1).metrics.throughput.median
    return sorted(
        ((r.spec.world_size, r.metrics.throughput.median / one, r) for r in group),
        key=lambda point: (point[0], point[1], point[2].id),
    )


def max_other_share(result: Result) -> float | None:
    """The largest share of the machine's CPUs other processes took during a repeat."""
    shares = [r.machine_load.other_share for r in result.repeats if r.machine_load]
    return max(shares) if shares else None
