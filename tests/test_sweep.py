"""Sweeps on the calibration workload: interleaving, resume, failures that do not stop it."""

import re

import pytest
from conftest import throughput_from_marks

from dlperf import DlperfError
from dlperf.schema import ResultStatus
from dlperf.store import load_results
from dlperf.sweep import SweepCallbacks, load_plan, run_sweep

MATRIX = """
[sweep]
preset = "smoke"
frameworks = ["calibration"]
models = ["pace", "resnet50"]
batch_sizes = [10, 20]
repeats = 2
skip = 2
measure = 5
[sweep.set]
step_ms = "10"
"""


def plan_from(tmp_path, text):
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    return load_plan(path)


def test_matrix_expands_and_skips_models_a_framework_lacks(tmp_path):
    plan = plan_from(tmp_path, MATRIX)
    assert [s.batch_size for s in plan.specs] == [10, 20]
    assert all(s.options == {"step_ms": "10"} and s.repeats == 2 for s in plan.specs)
    assert plan.skipped == ["calibration has no resnet50", "calibration has no resnet50"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("[sweep]\nframeworks=['caffe']\nmodels=['pace']", "known frameworks"),
        ("[sweep]\nframeworks=['calibration']\nmodels=['pace']\nbogus=1", "unknown key(s) bogus"),
        ("[sweep]\nframeworks=['calibration']\nmodels=['pace']\nbatch_sizes=[0]", "batch_size"),
        ("[sweep]\nframeworks=['calibration']\nmodels=['pace']\nnode_shapes=['2']", "1x1"),
        ("frameworks = [", "cannot read"),
        ("[other]\nx=1", "needs a [sweep] table"),
    ],
)
def test_bad_sweep_files_are_refused(tmp_path, text, message):
    with pytest.raises(DlperfError, match=re.escape(message)):
        plan_from(tmp_path, text)


@pytest.mark.multiprocess
def test_repeats_interleave_and_a_rerun_skips_finished_configs(tmp_path):
    plan = plan_from(tmp_path, MATRIX)
    order = []
    cb = SweepCallbacks(repeat_started=lambda spec, i: order.append((spec.batch_size, i)))
    outcomes, cannot_run = run_sweep(plan, tmp_path / "results", cb)
    assert order == [(10, 1), (20, 1), (10, 2), (20, 2)]
    assert not cannot_run
    for result, _ in outcomes:  # the workload's own marks (fidelity: benchmarks/)
        for r in result.repeats:
            assert r.throughput == pytest.approx(throughput_from_marks(r)[0], rel=1e-9)
    order.clear()
    again, _ = run_sweep(plan, tmp_path / "results", cb)
    assert again == [] and order == []


@pytest.mark.multiprocess
def test_an_interrupted_sweep_resumes_where_it_stopped(tmp_path):
    plan = plan_from(tmp_path, MATRIX)
    started = []

    def stop_at_third(spec, index):
        started.append((spec.batch_size, index))
        if len(started) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(plan, tmp_path / "results", SweepCallbacks(repeat_started=stop_at_third))
    assert load_results(tmp_path / "results") == []  # nothing half-written
    resumed = []
    cb = SweepCallbacks(repeat_started=lambda spec, i: resumed.append((spec.batch_size, i)))
    outcomes, _ = run_sweep(plan, tmp_path / "results", cb)
    assert resumed == [(10, 2), (20, 2)]
    for result, _ in outcomes:
        assert [r.index for r in result.repeats] == [1, 2]
        assert result.status == ResultStatus.ok


@pytest.mark.multiprocess
def test_a_failing_config_is_stored_and_the_sweep_goes_on(tmp_path):
    text = MATRIX.replace('step_ms = "10"', 'step_ms = "10"\nexit_at_step = ["3", "100"]')
    plan = plan_from(tmp_path, text.replace("batch_sizes = [10, 20]", "batch_sizes = [10]"))
    outcomes, _ = run_sweep(plan, tmp_path / "results")
    statuses = {r.spec.options["exit_at_step"]: r.status for r, _ in outcomes}
    assert statuses == {"3": ResultStatus.failed, "100": ResultStatus.ok}
