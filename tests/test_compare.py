"""Comparisons never mix machines and never pass having compared nothing: compare, history,
score and export over a results folder with two machines made from a real run, and ablations
(the same benchmark with one setting changed) matched and named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlperf.assemble import build_result
from dlperf.cli import app
from dlperf.compare import compare, compare_results
from dlperf.history import history_points
from dlperf.identity import benchmark_id, identity_of, machine_of
from dlperf.resultio import load_result
from dlperf.runner import run_benchmark
from dlperf.schema import Environment, Repeat, RepeatStatus, Result, Window
from dlperf.spec import check_run, resolve_spec
from dlperf.store import ResultStore

ROOT = Path(__file__).resolve().parents[1]
OTHER_MACHINE = {"host": "gpu-box-7", "cpu": "Intel Xeon Platinum 8480+", "cpu_count": 224}


def on_another_machine(result: Result, speedup: float = 3.0) -> Result:
    """`result` as another machine would have measured it: another host, CPU model and count,
    every repeat `speedup` times faster (its window's time divided), the statistics rebuilt."""
    repeats = [
        r.model_copy(update={
            "throughput": r.throughput * speedup,
            "window": r.window.model_copy(update={"elapsed_s": r.window.elapsed_s / speedup}),
            "step_times_s": [t / speedup for t in r.step_times_s],
        }) if r.throughput else r
        for r in result.repeats
    ]  # fmt: skip
    env = result.environment.model_copy(update=OTHER_MACHINE)
    built = build_result(result.spec, result.id + "-other", repeats, environment=env)
    return built.model_copy(update={"created": result.created})


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory) -> Path:
    """A real calibration run (real subprocesses and files) and its copy from another machine,
    in one results folder."""
    folder = tmp_path_factory.mktemp("two-machines") / "results"
    spec = resolve_spec("calibration", "pace", preset="smoke",
                        overrides={"repeats": 3, "options": {"step_ms": "10"}})  # fmt: skip
    result, _ = run_benchmark(check_run(spec), folder)
    ResultStore(folder).write(on_another_machine(result))
    return folder


def only(folder: Path, machine_id: str, into: Path) -> Path:
    """The results of one machine copied into their own folder."""
    store = ResultStore(into)
    for r in ResultStore(folder).results():
        if machine_of(r).id == machine_id:
            store.write(r)
    return into


@pytest.mark.multiprocess
def test_two_machines_are_never_compared_unless_asked(two_machines: Path, tmp_path: Path) -> None:
    here, there = sorted(ResultStore(two_machines).results(), key=lambda r: r.id)
    assert benchmark_id(here.spec) == benchmark_id(there.spec)
    assert machine_of(here).id != machine_of(there).id
    a = only(two_machines, machine_of(here).id, tmp_path / "a")
    b = only(two_machines, machine_of(there).id, tmp_path / "b")
    c = compare(a, b)
    assert c.rows == [] and c.exit_code == 3
    assert "different machines" in c.reason and machine_of(there).label in c.reason
    out = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert out.exit_code == 3 and "--across-machines" in out.output
    # Asked for: the machines come first, every row names both.
    out = CliRunner().invoke(app, ["compare", str(a), str(b), "--across-machines", "--json"])
    assert out.exit_code == 0, out.output
    assert out.stderr.startswith("**Across machines**")
    data = json.loads(out.stdout)
    (row,) = data["pairs"]
    assert row["machine"] == machine_of(here).label and row["machine_b"] == machine_of(there).label
    assert row["change"] == pytest.approx(2.0) and row["verdict"] == "improvement"
    assert "host" in " ".join(row["differences"])
    # One folder holding both: each result is compared with its own machine's only.
    both = compare(two_machines, two_machines)
    assert len(both.rows) == 2 and {r.machine for r in both.rows} == {
        machine_of(here).label, machine_of(there).label}  # fmt: skip
    assert all(r.change == 0 and r.machine_b is None for r in both.rows)


@pytest.mark.multiprocess
def test_history_score_and_export_keep_machines_apart(two_machines: Path, tmp_path: Path) -> None:
    here, there = sorted(ResultStore(two_machines).results(), key=lambda r: r.id)
    points = history_points(two_machines)
    assert len({p.series for p in points}) == 2  # one series per machine
    assert all(p.verdict == "first" for p in points)
    assert {p.machine for p in points} == {machine_of(here).label, machine_of(there).label}
    out = CliRunner().invoke(app, ["history", "--results-dir", str(two_machines),
                                   "--machine", "Platinum 8480", "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    (point,) = json.loads(out.stdout)["points"]
    assert point["machine"] == machine_of(there).label and point["cpu_count"] == 224
    # A score is of one machine: a folder with two asks which.
    ref = tmp_path / "ref.json"
    freeze = ["score", "--freeze", str(ref), "--results-dir", str(two_machines)]
    out = CliRunner().invoke(app, freeze)
    assert out.exit_code == 1 and "from 2 machines" in str(out.exception)
    assert CliRunner().invoke(app, [*freeze, "--machine", machine_of(here).id]).exit_code == 0
    assert json.loads(ref.read_text())["machine"]["id"] == machine_of(here).id
    scored = ["score", "--reference", str(ref), "--results-dir", str(two_machines)]
    out = CliRunner().invoke(app, [*scored, "--machine", machine_of(here).id])
    assert out.exit_code == 0 and "score 1000.0" in out.output
    out = CliRunner().invoke(app, [*scored, "--machine", "Platinum 8480"])
    assert out.exception.exit_code == 3 and "frozen on" in str(out.exception)  # main() exits 3
    out = CliRunner().invoke(app, [*scored, "--machine", "Platinum 8480", "--across-machines"])
    assert out.exit_code == 0 and "score 3000.0" in out.output and "across machines" in out.output
    # Export: one row per machine, each saying which.
    out = CliRunner().invoke(app, ["export", "--format", "json", "--results-dir",
                                   str(two_machines)])  # fmt: skip
    rows = json.loads(out.stdout)
    assert sorted((r["machine"], r["cpu_count"]) for r in rows) == sorted(
        [(machine_of(here).label, here.environment.cpu_count), (machine_of(there).label, 224)]
    )


def pytorch_result(rid: str, values: list[float], **options: str) -> Result:
    spec = resolve_spec("pytorch", "resnet50", preset="smoke",
                        overrides={"options": options or None, "repeats": len(values)})  # fmt: skip
    repeats = [Repeat(index=i, status=RepeatStatus.ok, throughput=v,
                      window=Window(start_step=2, end_step=7, samples=20, elapsed_s=20 / v))
               for i, v in enumerate(values, 1)]  # fmt: skip
    env = Environment(dlperf_version="0.1.0", host="h", os="linux", cpu="AMD EPYC 7B13",
                      cpu_count=2, framework_version="2.13.0+cpu")  # fmt: skip
    return build_result(spec, rid, repeats, environment=env)


def test_an_ablation_is_a_pair_with_its_setting_named() -> None:
    default = pytorch_result("a", [100, 101, 99, 100, 102, 98, 100])
    channels_last = pytorch_result("b", [80, 81, 79, 80, 82, 78, 80], channels_last="1")
    assert identity_of(default).series == identity_of(channels_last).series
    c = compare_results([default], [channels_last])
    (row,) = c.rows
    assert row.differences == ("setting channels_last 0 -> 1",)
    assert row.verdict == "regression" and c.exit_code == 2
    assert row.settings_a == "channels_last=0, fused_optimizer=1"
    # Equal settings are paired before differing ones.
    c = compare_results([default, channels_last], [channels_last, default])
    assert [r.differences for r in c.rows] == [(), ()]


def test_nothing_comparable_fails_the_gate(tmp_path: Path) -> None:
    ResultStore(tmp_path / "a").write(pytorch_result("a", [100, 101, 99]))
    failed = pytorch_result("b", [100, 101, 99]).model_copy(
        update={"repeats": [Repeat(index=1, status=RepeatStatus.crashed, message="boom")]}
    )
    ResultStore(tmp_path / "b").write(failed)
    c = compare(tmp_path / "a", tmp_path / "b")
    assert c.exit_code == 3 and c.reason == "no pair had ok repeats on both sides"
    assert len(c.notes) == 1 and "no ok repeat on one side" in c.notes[0]


@pytest.mark.framework
def test_a_real_pytorch_ablation_is_compared_with_its_setting_named(tmp_path: Path) -> None:
    """PyTorch for real, on the smoke preset: the default (channels_last=0 at 64 px on a CPU)
    and --set channels_last=1 are one benchmark with one setting changed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name, extra in (("default", []), ("nhwc", ["--set", "channels_last=1"])):
        done = subprocess.run(
            [sys.executable, "-m", "dlperf", "run", "pytorch", "resnet50", "--preset", "smoke",
             "--repeats", "2", "--results-dir", str(tmp_path / name), *extra],
            capture_output=True, text=True, env=env, timeout=900, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    (a,) = ResultStore(tmp_path / "default").results()
    (b,) = ResultStore(tmp_path / "nhwc").results()
    assert load_result(next((tmp_path / "nhwc").glob("*/*.json"))) == b
    done = subprocess.run(
        [sys.executable, "-m", "dlperf", "compare", str(tmp_path / "default"),
         str(tmp_path / "nhwc"), "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 2), done.stderr  # matched: a verdict, never "nothing"
    data = json.loads(done.stdout)
    (row,) = data["pairs"]
    assert row["benchmark"] == benchmark_id(a.spec) == benchmark_id(b.spec)
    assert "setting channels_last 0 -> 1" in row["differences"]
    assert data["only_in_a"] == data["only_in_b"] == []
