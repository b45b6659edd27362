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
    assert out.stderr.startswith("Across machines (asked for with --across-machines):")
    data = json.loads(out.stdout)
    (row,) = data["pairs"]
    assert row["machine"] == machine_of(here).label and row["machine_b"] == machine_of(there).label
    assert row["change"] == pytest.approx(2.0) and row["verdict"] == "improvement"
    assert "host" in " ".join(row["differences"])
    assert f"CPUs {here.environment.cpu_count} -> 224" in row["differences"]
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


def pytorch_result(rid: str, values: list[float], machine: dict | None = None,
                   **options: str) -> Result:  # fmt: skip
    """A stored PyTorch smoke result with these repeat values, on the 2-CPU AMD EPYC machine
    (or `machine`: other environment fields)."""
    spec = resolve_spec("pytorch", "resnet50", preset="smoke",
                        overrides={"options": options or None, "repeats": len(values)})  # fmt: skip
    repeats = [Repeat(index=i, status=RepeatStatus.ok, throughput=v,
                      window=Window(start_step=2, end_step=7, samples=20, elapsed_s=20 / v))
               for i, v in enumerate(values, 1)]  # fmt: skip
    env = Environment(**{"dlperf_version": "0.1.0", "host": "h", "os": "linux",
                         "cpu": "AMD EPYC 7B13", "cpu_count": 2, "framework_version": "2.13.0+cpu",
                         "threads": 2, **(machine or {})})  # fmt: skip
    return build_result(spec, rid, repeats, environment=env)


def published(result: Result) -> Result:
    """`result` as a published reference (an MLPerf result `dlperf parse` imported)."""
    from dlperf.published import SUITE

    spec = result.spec.model_copy(update={"options": {**result.spec.options, "suite": SUITE}})
    return result.model_copy(update={"origin": "parse", "spec": spec, "id": result.id + "-mlperf"})


# The few-repeat case of issue 32 (smoke runs, 3 repeats, a busy machine): -50 % "within noise".
NOISY_A, NOISY_B = [7.0, 32.0, 3.0], [1.5, 3.5, 18.0]
BIG_BOX = {"host": "node2", "cpu": "Intel Xeon Platinum 8480+", "cpu_count": 224, "threads": 112,
           "gpu": "NVIDIA H200", "gpu_count": 8, "gpu_memory_mb": 143771}  # fmt: skip


def compare_folders(root: Path) -> tuple[Path, Path, Path]:
    """Results folders for compare's terminal rows: A and B on the AMD EPYC machine (a quiet
    ablation that regressed, a noisy pair within noise, an MLPerf reference in each), and C,
    A's benchmark measured on the Intel box 3x faster with 2 repeats a side."""
    a, b, c = ResultStore(root / "a"), ResultStore(root / "b"), ResultStore(root / "c")
    base = pytorch_result("quiet-a", [100, 101, 99, 100, 102, 98, 100])
    a.write(base)
    a.write(published(base))
    a.write(pytorch_result("noisy-a", NOISY_A, channels_last="1"))
    b.write(pytorch_result("quiet-b", [80, 81, 79, 80, 82, 78, 80]))
    b.write(published(pytorch_result("quiet-b", [50, 51, 49])))
    b.write(pytorch_result("noisy-b", NOISY_B, channels_last="1"))
    c.write(pytorch_result("big", [300, 303, 297, 305, 295, 299, 301], BIG_BOX))
    return a.root, b.root, c.root


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


def test_a_change_within_noise_says_how_many_repeats_would_show_it() -> None:
    from dlperf.compare import noise_note
    from dlperf.stats import repeats_to_detect

    # CV 2 % a side, a 5 % rise. 2 a side: t(0.975, 1) = 12.706, the intervals 1 ± 0.180 and
    # 1.05 (1 ± 0.180) overlap; 3 a side: t(0.975, 2) = 4.303, 1 + 0.0497 > 1.05 (1 - 0.0497);
    # 4 a side: the rank test, and ideal repeats (normal quantiles at 1/8, 3/8...: at most 1.18
    # standard deviations out) are apart, 1.0236 < 1.0252: p = 2 / C(8, 4) = 0.029.
    d = repeats_to_detect([0.98, 1.0, 1.02], [1.078, 1.1, 1.122], 0.05)
    assert (d.n_a, d.n_b, d.repeats) == (3, 3, 4) and d.reachable and not d.enough
    assert d.cv_a == pytest.approx(0.02) and d.cv_b == pytest.approx(0.02)
    # CV 39 % vs 41 % at 3 a side: A's interval 1 ± 4.303 CV / sqrt 3 stays above zero
    # (1 - 0.969) or reaches past it (1 - 1.019): a drop to nothing is significant, or never.
    assert repeats_to_detect([0.61, 1.0, 1.39], [0.2, 0.3, 0.25], 0.05).reachable
    assert not repeats_to_detect([0.59, 1.0, 1.41], [0.2, 0.3, 0.25], 0.05).reachable
    # Issue 32's smoke runs: -50 % within noise, and why (CV 112 % and 117 %).
    (row,) = compare_results([pytorch_result("a", NOISY_A)], [pytorch_result("b", NOISY_B)]).rows
    assert row.verdict == "within noise" and row.change == pytest.approx(-0.5)
    assert noise_note(row, 0.05) == (
        "3 vs 3 repeats at CV 112% and 117%: the 95% CI overlap test cannot reach significance "
        "at n=3/3 at all; a 5% change needs more than 100 repeats a side: quieten the machine"
    )
    # A quiet pair beyond the threshold with too few repeats: how many would show it.
    (row,) = compare_results([pytorch_result("a", [0.98, 1.0, 1.02])],
                             [pytorch_result("b", [1.03, 1.08, 1.13])]).rows  # fmt: skip
    assert row.verdict == "within noise" and row.detection.reachable
    assert noise_note(row, 0.05).startswith("3 vs 3 repeats at CV 2% and 5% are too few to show "
                                            "a 5% change; it needs ")  # fmt: skip
    # Only "within noise" says why.
    (row,) = compare_results([pytorch_result("a", [1.0])], [pytorch_result("b", [1.0])]).rows
    assert row.detection is None and noise_note(row, 0.05) is None


def test_published_references_are_left_out_unless_asked(tmp_path: Path) -> None:
    a, b, _ = compare_folders(tmp_path)
    c = compare(a, b)
    assert c.references_left_out == 2 and not any("mlperf" in n for n in c.only_a + c.only_b)
    assert len(c.rows) == 2 and c.only_a == c.only_b == []
    asked = compare(a, b, include_references=True)
    assert asked.references_left_out == 0 and len(asked.rows) == 3
    # A side of references alone: nothing to compare, and the flag named.
    refs = ResultStore(tmp_path / "refs")
    refs.write(published(pytorch_result("r", [1.0, 1.1])))
    nothing = compare(refs.root, b)
    assert nothing.exit_code == 3 and "--include-references" in nothing.reason


def test_across_machines_names_cpu_gpus_and_threads(tmp_path: Path) -> None:
    a, _, c = compare_folders(tmp_path)
    (row,) = [r for r in compare(a, c, across_machines=True).rows]
    assert row.differences == (
        "CPU AMD EPYC 7B13 -> Intel Xeon Platinum 8480+", "CPUs 2 -> 224",
        "GPUs – -> 8 x NVIDIA H200 140 GiB", "threads 2 -> 112", "host h -> node2",
    )  # fmt: skip
    assert row.change == pytest.approx(2.0) and row.verdict == "improvement"


def test_markdown_on_request(tmp_path: Path) -> None:
    a, b, _ = compare_folders(tmp_path)
    table = CliRunner().invoke(app, ["compare", str(a), str(b)], env={"COLUMNS": "80"})
    assert table.exit_code == 2  # the quiet ablation regressed
    assert "|---" not in table.output and "\\" not in table.output and "**" not in table.output
    out = tmp_path / "comment.md"
    md = CliRunner().invoke(app, ["compare", str(a), str(b), "--format", "markdown",
                                  "--out", str(out)])  # fmt: skip
    assert md.exit_code == 2
    assert "| benchmark | settings | machine |" in md.stdout and "**regression**" in md.stdout
    assert md.stdout.startswith("Machine: AMD EPYC 7B13, 2 CPUs.")
    assert "- pytorch-resnet50" in md.stdout and "needs" in md.stdout  # the noise footnote
    assert out.read_text() == md.stdout
    assert "Markdown written to" in md.stderr
