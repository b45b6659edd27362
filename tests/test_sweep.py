"""Sweeps on the calibration workload: interleaving, resume, failures that do not stop it."""

import re

import pytest
from conftest import throughput_from_marks

from dlperf import DlperfError
from dlperf.identity import describe, spec_key
from dlperf.schema import ResultStatus
from dlperf.store import ResultStore
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


def test_a_sweep_covers_what_run_covers(tmp_path):
    """Modes, LoadGen scenarios and settings, implementations and shapes are matrix keys; a
    key that does not apply to a configuration (a scenario to training, an image size to BERT)
    leaves it as it is, and it is run once."""
    plan = plan_from(tmp_path, """
[sweep]
preset = "smoke"
frameworks = ["pytorch", "calibration"]
models = ["resnet50", "bert", "pace", "linear"]
modes = ["train", "infer"]
impls = ["ootb", "micro"]
image_sizes = [32, 64]
seq_lens = [16]
scenarios = ["none", "offline"]
[sweep.loadgen]
min_duration_s = 2
""")  # fmt: skip
    keys = sorted(spec_key(s) for s in plan.specs)
    assert len(keys) == len(set(keys))
    r50 = [s for s in plan.specs if s.framework == "pytorch" and s.model == "resnet50"]
    # 2 image sizes x (train, infer, infer + offline)
    assert {(s.image_size, s.mode, s.scenario) for s in r50} == {
        (size, mode, scenario)
        for size in (32, 64)
        for mode, scenario in (("train", None), ("infer", None), ("infer", "offline"))
    } and len(r50) == 6
    # The given minimum duration wins over the smoke preset's; its Offline query count stays.
    assert all(s.loadgen == {"min_duration_s": 2.0, "min_query_count": 1.0}
               for s in r50 if s.scenario)  # fmt: skip
    bert = [s for s in plan.specs if s.model == "bert"]
    assert {s.seq_len for s in bert} == {16} and {s.image_size for s in bert} == {None}
    linear = [s for s in plan.specs if s.model == "linear"]
    assert linear and {s.impl for s in linear} == {"micro"}
    assert "resnet50 does not run with impl micro" in plan.skipped
    assert "linear does not run with impl ootb" in plan.skipped


def test_profiles_pick_each_official_manifest_and_leave_ootb_alone(tmp_path):
    plan = plan_from(tmp_path, """
[sweep]
preset = "smoke"
frameworks = ["pytorch"]
models = ["resnet50"]
impls = ["ootb", "official"]
profiles = ["dlperf-2020"]
""")  # fmt: skip
    by_impl = {s.impl: s for s in plan.specs}
    assert len(plan.specs) == 2 and by_impl["ootb"].source is None
    assert by_impl["official"].source == "pytorch-examples-resnet50"  # the 2020 default


@pytest.mark.parametrize(
    "text, message",
    [
        ("[sweep]\nframeworks=['caffe']\nmodels=['pace']", "known frameworks"),
        ("[sweep]\nframeworks=['calibration']\nmodels=['pace']\nbogus=1", "unknown key(s) bogus"),
        ("[sweep]\nframeworks=['calibration']\nmodels=['pace']\nbatch_sizes=[0]", "batch_size"),
        ("[sweep]\nframeworks=['calibration']\nmodels=['pace']\nnode_shapes=['2']", "1x1"),
        ("frameworks = [", "cannot read"),
        ("[other]\nx=1", "needs a [sweep] table"),
        ("[sweep]\nframeworks=['calibration']\nmodels=['pace']\nprofiles=['2019']", "profiles"),
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
    assert ResultStore(tmp_path / "results").results() == []  # nothing half-written
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


@pytest.mark.multiprocess
def test_the_sweep_command_ends_with_a_table_and_the_warnings(tmp_path):
    from typer.testing import CliRunner

    from dlperf.cli import app

    text = MATRIX.replace('step_ms = "10"', 'step_ms = "10"\nexit_at_step = ["3", "100"]')
    path = tmp_path / "matrix.toml"
    path.write_text(text.replace("batch_sizes = [10, 20]", "batch_sizes = [10]"))
    out = CliRunner().invoke(app, ["sweep", str(path), "--results-dir", str(tmp_path / "r")])
    assert out.exit_code == 2, out.output
    table = out.output.split("result(s) stored in")[1]
    assert "configuration" in table and "status" in table
    assert "exit_at_step=3" in table and "failed" in table and "samples/s" in table
    assert "warning" in table and "too_few_steps" in table  # the failed config's repeats


@pytest.mark.multiprocess
def test_the_sweep_command_shows_scaling_against_the_1x1(tmp_path):
    """A sweep over node shapes prints what `run` prints for each data-parallel result: its
    speedup and efficiency against the stored 1x1 result."""
    from typer.testing import CliRunner

    from dlperf.cli import app

    text = MATRIX.replace('models = ["pace", "resnet50"]', 'models = ["pace"]')
    text = text.replace(
        "batch_sizes = [10, 20]", 'batch_sizes = [10]\nnode_shapes = ["1x1", "1x2"]'
    )
    path = tmp_path / "matrix.toml"
    path.write_text(text.replace("repeats = 2", "repeats = 1"))
    out = CliRunner().invoke(app, ["sweep", str(path), "--results-dir", str(tmp_path / "r")])
    assert out.exit_code == 0, out.output
    stored = {r.spec.world_size: r for r in ResultStore(tmp_path / "r").results()}
    closing = " ".join(out.output.split("result(s) stored in")[1].split())
    assert f"{describe(stored[2].spec)}: scaling vs the 1x1 result {stored[1].id}: " in closing
    assert closing.count("scaling vs the 1x1 result") == 1 and "on 2 devices" in closing


@pytest.mark.multiprocess
def test_a_sweep_of_any_size_needs_a_few_open_files(tmp_path):
    """The sweep holds one lock however many configurations it runs (not one per attempt):
    40 configurations under a real `ulimit -n 32` are all stored."""
    import subprocess
    import sys

    sizes = ", ".join(str(b) for b in range(1, 41))
    (tmp_path / "wide.toml").write_text(
        '[sweep]\npreset = "smoke"\nframeworks = ["calibration"]\nmodels = ["pace"]\n'
        f"batch_sizes = [{sizes}]\nrepeats = 1\nskip = 0\nmeasure = 1\n"
        '[sweep.set]\nstep_ms = "1"\n'
    )
    argv = f"{sys.executable} -m dlperf sweep wide.toml --results-dir results"
    done = subprocess.run(
        ["bash", "-c", f"ulimit -n 32 && exec {argv}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    stored = ResultStore(tmp_path / "results").results()
    assert sorted(r.spec.batch_size for r in stored) == list(range(1, 41))
    assert all(r.status == ResultStatus.ok for r in stored)
    assert "Too many open files" not in done.stdout + done.stderr
    assert list((tmp_path / "results" / ".sweeps").iterdir()) == []  # its lock went with it
