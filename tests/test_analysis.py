"""dlperf.analysis: scaling against the 1x1 and the suspect mark, on hand-made results."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import make_result, sample_results

from dlperf.analysis import (
    SUSPECT_EFFICIENCY,
    baselines_among,
    max_other_share,
    scaling,
    scaling_efficiency,
    speedups,
    suspect_scaling,
)
from dlperf.store import ResultStore


def test_scaling_efficiency_is_speedup_per_device() -> None:
    one = make_result("pytorch", [100.0, 101.0, 99.0])
    two = make_result("pytorch", [190.0, 192.0, 188.0], devices_per_node=2)
    assert scaling_efficiency(two, one) == pytest.approx(190.0 / 100.0 / 2)
    assert scaling_efficiency(two, None) is None
    failed = make_result("pytorch", [("crashed", "exited with status 1")], devices_per_node=2)
    assert scaling_efficiency(failed, one) is None


def test_only_more_than_linear_scaling_is_suspect() -> None:
    found = suspect_scaling(sample_results())
    # The CPU's two simulated nodes on a busy host: 80.1 / 31.2 / 2 = 128%; CUDA's 1x2 is not.
    assert [(r.spec.device, r.spec.nodes) for r, _ in found] == [("cpu", 2)]
    assert found[0][1] == pytest.approx(80.1 / 31.2 / 2) and found[0][1] > SUSPECT_EFFICIENCY


def test_scaling_pairs_each_data_parallel_result_with_its_1x1() -> None:
    results = sample_results()
    found = scaling(results, baselines_among(results))
    # TensorFlow's 1x2 failed: no efficiency; the channels_last=0 ablation has no 1x2.
    assert [(s.result.spec.device, s.result.spec.world_size) for s in found] == [
        ("cuda", 2),
        ("cpu", 2),
    ]
    cuda, cpu = found
    assert cuda.base.spec.world_size == 1 and cuda.base.spec.device == "cuda"
    assert cuda.efficiency == pytest.approx(1985.0 / 1008.9 / 2) and not cuda.suspect
    assert cpu.suspect


def test_scaling_against_the_stores_newest_1x1(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    for r in sample_results():
        store.write(r)
    two = make_result("pytorch", [1985.0, 1990.4, 1979.7], devices_per_node=2)
    (found,) = scaling([two], store.baseline)
    assert found.base.metrics.throughput.median == 1008.9


def test_speedups_are_against_the_groups_1x1() -> None:
    group = [make_result("pytorch", [200.0], devices_per_node=2), make_result("pytorch", [100.0])]
    assert [(d, s) for d, s, _ in speedups(group)] == [(1, 1.0), (2, 2.0)]


def test_max_other_share_is_the_busiest_repeats() -> None:
    assert max_other_share(make_result("pytorch", [1.0, 2.0], busy=0.35)) == 0.35
    assert max_other_share(make_result("pytorch", [("crashed", "boom")])) is None
