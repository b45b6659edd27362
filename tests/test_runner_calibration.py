"""The whole pipeline on the calibration workload: real subprocesses, real files."""

import json
import statistics
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from conftest import throughput_from_marks

from dlperf import DlperfError
from dlperf.resultio import load_result
from dlperf.runner import run_benchmark
from dlperf.schema import SCHEMA_VERSION, RepeatStatus, ResultStatus
from dlperf.spec import check_run, resolve_spec
from dlperf.system import cpu_budget

pytestmark = pytest.mark.multiprocess


def spec(**over):
    base = {"skip": 3, "measure": 10, "repeats": 2, "batch_size": 10}
    base.update(over)
    options = base.pop("options", {"step_ms": "20"})
    return resolve_spec(
        "calibration", "pace", preset="smoke", overrides={**base, "options": options}
    )


def test_paced_run_reports_the_true_throughput(tmp_path):
    result, path = run_benchmark(check_run(spec()), tmp_path)
    assert result.status == ResultStatus.ok
    t = result.metrics.throughput
    assert t.n == 2 and len(t.values) == 2 and t.unit == "samples/s"
    for r in result.repeats:  # the workload's own marks, not the nominal 500/s of a busy host
        assert r.throughput == pytest.approx(throughput_from_marks(r)[0], rel=1e-9)
    assert t.values == [r.throughput for r in result.repeats]
    assert all(r.window.start_step == 3 and r.window.end_step == 13 for r in result.repeats)
    for r in result.repeats:  # the host's own clock on the step log lines agrees
        assert r.observed_elapsed_s == pytest.approx(r.window.elapsed_s, rel=0.5)
    for r in result.repeats:  # the workload's own high-water mark: a Python process's, in MiB
        assert 5 < r.peak_rss_mib < psutil.virtual_memory().total / 2**20
    stored = json.loads(path.read_text())
    assert stored["schema_version"] == SCHEMA_VERSION == 9
    assert stored["spec"]["framework"] == "calibration"
    assert stored["metrics"]["throughput"]["median"] == pytest.approx(t.median)
    assert [r["status"] for r in stored["repeats"]] == ["ok", "ok"]
    assert stored["model"] == {"params": 0, "flops_per_sample": 0.0}
    assert load_result(path) == result
    # A version-1 file (before official implementations) upgrades on load.
    v1 = {k: v for k, v in stored.items() if k not in ("source", "origin")}
    v1["spec"] = {k: v for k, v in stored["spec"].items() if k != "source"}
    path.write_text(json.dumps({**v1, "schema_version": 1}))
    assert load_result(path) == result
    for r in result.repeats:
        assert "step 13/13" in Path(r.log_path).read_text()


@pytest.mark.parametrize(
    "options, status, message",
    [
        ({"crash_at_step": "5"}, RepeatStatus.crashed, "exited with status 3 after 4 of 13"),
        ({"exit_at_step": "8"}, RepeatStatus.too_few_steps, "needs step 13"),
        ({"hang_at_step": "6"}, RepeatStatus.hung, "no output for 1 s after 5 of 13"),
    ],
)
def test_misbehaviour_ends_in_its_status_and_keeps_the_log(tmp_path, options, status, message):
    s = spec(options={"step_ms": "20", **options}, no_output_timeout_s=1.0, repeats=1)
    result, path = run_benchmark(check_run(s), tmp_path)
    assert result.status == ResultStatus.failed
    (repeat,) = result.repeats
    assert repeat.status == status
    assert message in repeat.message
    assert repeat.log_tail  # the tail of the log travels with the result
    assert repeat.throughput is None and result.metrics.throughput is None
    assert load_result(path).repeats[0].status == status


def test_timeout_status(tmp_path):
    s = spec(options={"step_ms": "200"}, timeout_s=1.0, repeats=1)
    result, _ = run_benchmark(check_run(s), tmp_path)
    assert result.repeats[0].status == RepeatStatus.timeout


def test_garbage_lines_are_skipped_and_nothing_is_lost(tmp_path):
    result, _ = run_benchmark(
        check_run(spec(options={"step_ms": "20", "garbage_every": "2"})), tmp_path
    )
    assert result.status == ResultStatus.ok
    for r in result.repeats:
        assert r.throughput == pytest.approx(throughput_from_marks(r)[0], rel=1e-9)
        assert r.window.end_step - r.window.start_step == 10
        assert r.warnings == ["12 malformed event line(s) ignored"]


def test_marks_that_disagree_with_the_host_clock_are_flagged(tmp_path):
    # The marks claim the window took half the time the step lines took to arrive.
    s = spec(options={"step_ms": "20", "clock_scale": "0.5"}, repeats=1)
    result, _ = run_benchmark(check_run(s), tmp_path)
    (r,) = result.repeats
    assert r.throughput == pytest.approx(throughput_from_marks(r)[0], rel=1e-9)
    assert r.observed_elapsed_s > 1.5 * r.window.elapsed_s  # the lines took twice the marks
    assert any("may not wait for the device" in w for w in r.warnings)


def _home_with_a_measured_peak(home: Path, flops: float) -> None:
    """A DLPERF_HOME whose machine.json holds this CPU's peak as `dlperf doctor
    --measure-peak` caches it after measuring on an idle machine."""
    from dlperf import system

    logical = psutil.cpu_count(logical=True)
    key = system._cpu_peak_key(system.cpu_model(), logical)
    entry = {"flops": flops, "source": "measured fp32 GEMM (numpy, n=1024)", "under_load": False}
    home.mkdir(parents=True, exist_ok=True)
    (home / "machine.json").write_text(json.dumps({"cpu_peak": {key: entry}}))


def test_flops_give_achieved_flops_and_mfu_against_the_cpu_peak(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path / "home"))
    _home_with_a_measured_peak(tmp_path / "home", 2.5e11)
    s = spec(options={"step_ms": "20", "flops_per_sample": "1e6"})
    result, _ = run_benchmark(check_run(s), tmp_path)
    m = result.metrics
    assert m.achieved_flops == pytest.approx(1e6 * result.metrics.throughput.median)
    assert m.peak_flops == 2.5e11 and "GEMM" in m.peak_source
    assert m.mfu == pytest.approx(m.achieved_flops / 2.5e11)
    assert not [w for w in result.warnings if "MFU" in w]


@pytest.fixture
def busy_machine():
    """Every CPU busy for real: twice as many spinning processes as there are CPUs, each
    already burning CPU when the fixture returns."""
    count = 2 * (psutil.cpu_count(logical=True) or 1)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        for p in spinners:  # running, not still starting up: each has used CPU time
            proc = psutil.Process(p.pid)
            while sum(proc.cpu_times()[:2]) < 0.05:
                assert p.poll() is None
                proc.cpu_percent(interval=0.05)
        yield count
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def test_a_peak_measured_on_a_busy_machine_is_neither_cached_nor_used(
    tmp_path, monkeypatch, busy_machine
):
    """The CPU peak under real load: measured low, so flagged, never cached, never an MFU's
    denominator; a run then stores no MFU and says why."""
    from dlperf import system

    monkeypatch.setattr(system, "_UNCACHED_PEAKS", {})  # this process measures afresh
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path / "home"))
    peak = system.cpu_peak(cache_dir=tmp_path / "home")
    assert peak["under_load"] and peak["other_share"] > system.BUSY_SHARE, peak
    assert peak["flops"] > 0
    assert not (tmp_path / "home" / "machine.json").exists()
    assert system.peak_flops("cpu", None, "fp32") is None
    s = spec(options={"step_ms": "20", "flops_per_sample": "1e6"}, repeats=1)
    result, _ = run_benchmark(check_run(s), tmp_path)
    m = result.metrics
    assert m.achieved_flops == pytest.approx(1e6 * m.throughput.median)
    assert m.peak_flops is None and m.mfu is None
    assert any("no MFU" in w and "busy" in w for w in result.warnings), result.warnings
    assert not (tmp_path / "home" / "machine.json").exists()


def test_bad_input_is_refused_before_anything_runs():
    with pytest.raises(DlperfError, match="known frameworks: calibration, .*pytorch"):
        resolve_spec("caffe", "pace")
    with pytest.raises(DlperfError, match="its models: pace"):
        resolve_spec("calibration", "resnet50")
    with pytest.raises(DlperfError, match="--batch-size 0 is below 1"):
        resolve_spec("calibration", "pace", overrides={"batch_size": 0})
    with pytest.raises(DlperfError, match="--measure 0 is below 1"):
        resolve_spec("calibration", "pace", overrides={"measure": 0})
    with pytest.raises(DlperfError, match="valid keys: clock_scale, crash_at_step"):
        resolve_spec("calibration", "pace", overrides={"options": {"nope": "1"}})
    with pytest.raises(DlperfError, match="choose one of: dlperf, smoke"):
        resolve_spec("calibration", "pace", preset="huge")


def test_a_busy_machine_marks_the_result_noisy(tmp_path):
    """Other processes spinning on every CPU while the repeats run: measured, warned, marked."""
    hog = [sys.executable, "-c", "while True: pass"]
    hogs = [subprocess.Popen(hog) for _ in range(cpu_budget())]
    try:
        result, _ = run_benchmark(check_run(spec()), tmp_path)
    finally:
        for p in hogs:
            p.kill()
            p.wait()
    assert result.status == ResultStatus.ok  # the paced workload still keeps its pace
    for r in result.repeats:
        assert r.machine_load.other_share > 0.5 and r.machine_load.cpu_count >= 1
        assert r.machine_load.wall_s == pytest.approx(r.wall_s, rel=0.5)
    assert result.metrics.noisy
    assert any("the machine was busy" in w for w in result.warnings)


def test_a_clock_that_never_moves_is_bad_output_and_the_result_is_stored(tmp_path):
    result, path = run_benchmark(
        check_run(spec(options={"step_ms": "5", "clock_scale": "0"})), tmp_path
    )
    assert result.status == ResultStatus.failed and path.exists()
    assert {r.status for r in result.repeats} == {RepeatStatus.bad_output}
    assert "coarser than the window" in result.repeats[0].message


def test_every_repeat_carries_telemetry_of_its_window(tmp_path):
    """The CPU path for real: psutil's utilization and frequency over the measured window,
    and RAPL's energy or why it cannot be read. Arithmetic, never speed."""
    result, _ = run_benchmark(check_run(spec(measure=40, options={"step_ms": "30"})), tmp_path)
    assert result.status == ResultStatus.ok
    for r in result.repeats:
        t = r.telemetry
        assert t is not None and t.device == "cpu" and t.span == "window"
        assert "host's clock" in t.placed_by  # the workload's marks, on the host's clock
        assert t.duration_s == pytest.approx(r.window.elapsed_s, abs=1e-5)
        assert t.samples >= 1  # a window of at least 1.2 s sampled every 0.2 s, even if starved
        u = t.utilization_pct
        assert u is not None and 0.0 <= u.min <= u.mean <= u.max <= 100.0
        if t.clock_mhz is not None:  # psutil.cpu_freq() is None on some VMs
            assert 0 < t.clock_mhz.min <= t.clock_mhz.mean <= t.clock_mhz.max
        if t.energy_j is None:
            assert t.energy_note and t.energy_note.startswith("RAPL")
            assert t.energy_source is None
        else:
            assert t.energy_j > 0 and t.energy_source == "rapl" and t.energy_note is None
    per_joule = [
        r.window.samples / r.telemetry.energy_j for r in result.repeats if r.telemetry.energy_j
    ]
    if per_joule:
        assert result.metrics.samples_per_joule == pytest.approx(statistics.median(per_joule))
    else:
        assert result.metrics.samples_per_joule is None
