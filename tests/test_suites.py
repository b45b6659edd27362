"""compare, SuperBench export and FAMBench's table, on hand-computed cases."""

from __future__ import annotations

import io
import json
import math
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlperf import DlperfError
from dlperf.assemble import build_result
from dlperf.cli import app
from dlperf.compare import compare
from dlperf.identity import benchmark_id, describe, identity_of, parameters_of, settings_of
from dlperf.report.suites import fambench_table, superbench_metrics, superbench_tags
from dlperf.resultio import load_result
from dlperf.schema import (
    SCHEMA_VERSION,
    BenchmarkSpec,
    Environment,
    JobInfo,
    Repeat,
    RepeatStatus,
    ResultStatus,
    Window,
)
from dlperf.stats import mann_whitney_p, smallest_p
from dlperf.store import ResultStore
from dlperf.superbench import SB_PERCENTILES, nearest_percentile

# A machine with its hardware recorded: compare and score pair only results of one machine,
# and results with none recorded are no machine's twins (they pair with --across-machines).
ENVIRONMENT = Environment(dlperf_version="test", host="test-host", os="linux",
                          cpu="AMD EPYC 7B13", cpu_count=2)  # fmt: skip


def result(model: str, values: list[float], *, batch: int = 8, step_times=(0.01,), **spec):
    s = BenchmarkSpec(framework="pytorch", model=model, batch_size=batch, repeats=len(values),
                      **spec)  # fmt: skip
    repeats = [
        Repeat(
            index=i,
            status=RepeatStatus.ok,
            throughput=v,
            window=Window(start_step=0, end_step=10, samples=10 * batch, elapsed_s=10 * batch / v),
            step_times_s=list(step_times),
            workload={"amp_dtype": None},
        )  # fmt: skip
        for i, v in enumerate(values, 1)
    ]
    return build_result(s, f"id-{model}-{values[0]}", repeats, environment=ENVIRONMENT)


def store(folder: Path, *results) -> Path:
    for r in results:
        ResultStore(folder).write(r)
    return folder


# ---------------------------------------------------------------------------- statistics


def test_exact_mann_whitney_by_hand() -> None:
    # Fully separated samples: only the 2 most extreme of C(6,3) = 20 splits -> p = 0.1.
    assert mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    assert smallest_p(3, 3) == pytest.approx(0.1)  # 3 vs 3 can never reach 0.05
    # 7 vs 7 separated: 2 / C(14,7) = 2 / 3432.
    assert mann_whitney_p(range(10, 17), range(7)) == pytest.approx(2 / 3432)
    # Interleaved samples are not different.
    assert mann_whitney_p([1, 3, 5, 7], [2, 4, 6, 8]) > 0.5


def test_exact_mann_whitney_with_ties_by_hand() -> None:
    # [1, 2] vs [2, 3]: U = 0.5 (the tie counts half), |U - 2| = 1.5. Of the C(4,2) = 6 splits
    # {1,2} {1,2'} {2,3} {2',3} give |U - 2| = 1.5 and {1,3} {2,2'} give 0: p = 4/6.
    assert mann_whitney_p([1, 2], [2, 3]) == pytest.approx(4 / 6)
    # One value against three: 3 is the largest of 4, only its own split is as extreme.
    assert mann_whitney_p([3], [1, 1, 2]) == pytest.approx(1 / 4)
    assert mann_whitney_p([1, 1, 2], [3]) == pytest.approx(1 / 4)


def test_mann_whitney_normal_approximation_for_large_samples() -> None:
    # 12 vs 12 (C(24,12) = 2.7 million splits), no ties: 0.1..11.1 against 8..19 overlap in
    # 4 values, U = 1 + 2 + 3 + 4 = 10; z = (|U - 72| - 0.5) / sqrt(12 * 12 * 25 / 12).
    z = (abs(10 - 72) - 0.5) / math.sqrt(12 * 12 * 25 / 12)
    a, b = [v + 0.1 for v in range(12)], list(range(8, 20))
    assert mann_whitney_p(a, b) == pytest.approx(math.erfc(z / math.sqrt(2)))


def test_run_results_suggest_repeats_and_imported_ones_a_neutral_rerun() -> None:
    ran = result("resnet50", [100.0, 101.0])  # built as `dlperf run` builds it
    assert "only 2 repeat(s) of throughput: too few to judge stability; use --repeats 7" in (
        ran.warnings
    )
    imported = build_result(ran.spec, "id-imported", ran.repeats, environment=ENVIRONMENT,
                            imported=True)  # fmt: skip
    assert not any("--repeats" in w for w in imported.warnings)
    assert any(w.endswith("re-run with 7 repeats") for w in imported.warnings)


# -------------------------------------------------------------------------------- compare


def test_compare_flags_a_significant_regression_and_exits_2(tmp_path: Path) -> None:
    a = store(tmp_path / "a", result("resnet50", [100, 101, 99, 100, 102, 98, 100]),
              result("bert", [50, 51, 49, 50, 50, 51, 49]))  # fmt: skip
    b = store(tmp_path / "b", result("resnet50", [90, 91, 89, 90, 92, 88, 90]),
              result("bert", [50.5, 51, 49.5, 50, 50, 51, 49]))  # fmt: skip
    c = compare(a, b)
    by_model = {r.benchmark.split("-")[1]: r for r in c.rows}
    r = by_model["resnet50"]
    assert r.change == pytest.approx(-0.10) and r.test == "Mann-Whitney U"
    assert r.p == pytest.approx(2 / 3432) and r.verdict == "regression"
    assert by_model["bert"].verdict == "no change" and not c.notes and c.exit_code == 2
    out = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert out.exit_code == 2 and "regression (p 0.00058)" in out.output
    assert CliRunner().invoke(app, ["compare", str(a), str(a)]).exit_code == 0


def test_compare_json_is_every_row_field_and_the_notes(tmp_path: Path) -> None:
    a = store(tmp_path / "a", result("resnet50", [100, 101, 99, 100, 102, 98, 100]),
              result("bert", [50, 51, 49]))  # fmt: skip
    b = store(tmp_path / "b", result("resnet50", [90, 91, 89, 90, 92, 88, 90]),
              result("lstm", [10, 11, 9]))  # fmt: skip
    c = compare(a, b, 0.02)
    out = CliRunner().invoke(app, ["compare", str(a), str(b), "--threshold", "0.02", "--json"])
    assert out.exit_code == 2  # a regression, as without --json
    data = json.loads(out.stdout)  # stdout is the JSON alone; the table went to stderr
    pairs = json.loads(json.dumps([asdict(r) for r in c.rows]))
    assert data == {"threshold": 0.02, "across_machines": False,
                    "machines": {"a": c.machines_a, "b": c.machines_b}, "comparable": True,
                    "reason": None, "pairs": pairs, "only_in_a": c.only_a,
                    "only_in_b": c.only_b, "notes": [], "references_left_out": 0}  # fmt: skip
    (row,) = data["pairs"]
    assert row["a"] == 100 and row["b"] == 90 and row["change"] == pytest.approx(-0.10)
    assert row["p"] == pytest.approx(2 / 3432) and row["verdict"] == "regression"
    assert row["differences"] == [] and row["settings_a"] == row["settings_b"]
    assert [n.split(" on ")[0] for n in data["only_in_a"] + data["only_in_b"]] == [
        "pytorch-bert-train-fp32-cpu-1x1-b8",
        "pytorch-lstm-train-fp32-cpu-1x1-b8",
    ]
    assert "regression (p 0.00058)" in out.stderr


def test_compare_with_three_repeats_falls_back_to_confidence_intervals(tmp_path: Path) -> None:
    a = store(tmp_path / "a", result("resnet50", [100, 101, 99]))
    tight = store(tmp_path / "b", result("resnet50", [80, 81, 79]))
    (r,) = compare(a, tight).rows
    assert r.test == "95% CI overlap" and r.p is None and r.verdict == "regression"
    noisy = store(tmp_path / "c", result("resnet50", [60, 110, 85]))
    (r,) = compare(a, noisy).rows
    assert r.change == pytest.approx(-0.15) and r.verdict == "within noise"
    faster = store(tmp_path / "d", result("resnet50", [120, 121, 119]))
    assert compare(a, faster).rows[0].verdict == "improvement"


def test_compare_fallback_is_the_means_t_interval_from_the_repeats(tmp_path: Path) -> None:
    # 3 vs 3: [100, 101, 99] gives 100 ± t(0.975, 2) s / sqrt(3) = 100 ± 4.303 / 1.732, so
    # 97.52..102.48; [94, 95, 93] gives 91.52..96.48, apart from it: a regression...
    a = store(tmp_path / "a", result("resnet50", [100, 101, 99]))
    apart = store(tmp_path / "b", result("resnet50", [94, 95, 93]))
    (r,) = compare(a, apart, threshold=0.03).rows
    assert r.test == "95% CI overlap" and r.verdict == "regression"
    # ...while [96, 97, 95], 93.52..98.48, overlaps it: within noise, although 4 % lower.
    near = store(tmp_path / "c", result("resnet50", [96, 97, 95]))
    (r,) = compare(a, near, threshold=0.03).rows
    assert r.change == pytest.approx(-0.04) and r.verdict == "within noise"
    # ...and a stored summary's interval (the median's, None for 3 repeats) is not used.
    assert load_result(next((tmp_path / "a").glob("*/*.json"))).metrics.throughput.ci_low is None


def test_a_version_3_file_gets_the_medians_interval_recomputed(tmp_path: Path) -> None:
    seven = result("resnet50", [100.0, 30.0, 101.0, 99.0, 102.0, 98.0, 100.5])
    path = ResultStore(tmp_path).write(seven)
    old = json.loads(path.read_text())
    t = old["metrics"]["throughput"]
    assert (t["ci_low"], t["ci_high"], t["ci_coverage"]) == (30.0, 102.0, 0.984375)
    # What version 3 stored: the mean's t-interval (here reaching down to 68.6), no coverage.
    mean = sum(t["values"]) / 7
    half = 2.4469118 * t["stdev"] / math.sqrt(7)
    del t["ci_coverage"]
    t.update(ci_low=mean - half, ci_high=mean + half)
    path.write_text(json.dumps({**old, "schema_version": 3}))
    loaded = load_result(path)
    assert loaded.schema_version == SCHEMA_VERSION and loaded == seven
    three = result("resnet50", [100.0, 101.0, 99.0])
    path = ResultStore(tmp_path).write(three)
    old = json.loads(path.read_text())
    old["metrics"]["throughput"].update(ci_low=98.5, ci_high=101.5)
    del old["metrics"]["throughput"]["ci_coverage"]
    path.write_text(json.dumps({**old, "schema_version": 3}))
    assert load_result(path).metrics.throughput.ci_low is None  # unavailable, not relabelled


def test_cli_summary_shows_the_interval_or_why_not() -> None:
    from rich.console import Console

    from dlperf.cli.render import print_summary

    cases = [([100.0, 101.0, 99.0], "95% CI of the median n/a (3 < 6 repeats)"),
             ([float(v) for v in range(90, 97)], "95% CI of the median 90.00–96.00")]  # fmt: skip
    for values, shown in cases:
        out = Console(record=True, width=300)
        print_summary(out, result("resnet50", values), Path("x.json"))
        text = out.export_text()
        assert shown in text and "None" not in text


def test_compare_of_nothing_in_common_names_both_sides_and_fails(tmp_path: Path) -> None:
    a = store(tmp_path / "a", result("resnet50", [100]))
    b = store(tmp_path / "b", result("bert", [100]))
    c = compare(a, b)
    assert c.rows == [] and c.exit_code == 3 and c.reason == "A and B have no benchmark in common"
    (only_a,), (only_b,) = c.only_a, c.only_b
    assert "resnet50" in only_a and "bert" in only_b
    out = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert out.exit_code == 3 and "Nothing compared" in out.output


# ------------------------------------------------------------------- other suites' formats


def sb_result(
    model: str,
    repeats_ms: list[list[float]],
    *,
    batch: int = 10,
    host: str = "node-a",
    hosts: tuple[str, ...] = (),
    statuses=(),
    amp_dtype=None,
    **spec,
):
    """A result whose repeats have these per-step times (ms), every step marked, and dlperf's
    window throughput: all ranks' samples over the window's time."""
    s = BenchmarkSpec(framework="pytorch", model=model, batch_size=batch,
                      repeats=len(repeats_ms) + len(statuses), **spec)  # fmt: skip
    repeats = []
    for i, times in enumerate(repeats_ms, 1):
        elapsed, samples = sum(times) / 1000, s.world_size * batch * len(times)
        repeats.append(Repeat(
            index=i, status=RepeatStatus.ok, throughput=samples / elapsed,
            window=Window(start_step=5, end_step=5 + len(times), samples=samples,
                          elapsed_s=elapsed),
            step_times_s=[t / 1000 for t in times], workload={"amp_dtype": amp_dtype},
        ))  # fmt: skip
    for j, status in enumerate(statuses, len(repeats_ms) + 1):
        repeats.append(Repeat(index=j, status=status, message="boom"))
    job = JobInfo(hosts=list(hosts), world_size=s.world_size, global_batch=s.global_batch)
    env = Environment(dlperf_version="test", host=host, os="linux")
    return build_result(s, f"id-{describe(s)}-{host}", repeats, environment=env, job=job)


def sb_lines(tmp_path: Path, *results) -> list[dict]:
    """`dlperf export --format superbench` of these results, stored, as parsed lines."""
    folder = store(tmp_path / "stored", *results)
    out = CliRunner().invoke(app, ["export", "--format", "superbench",
                                   "--results-dir", str(folder)])  # fmt: skip
    assert out.exit_code == 0, out.output
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_superbench_nearest_percentile_is_numpys() -> None:
    import numpy as np

    # numpy's "nearest": index round((n - 1) p / 100), a half to the even index.
    assert nearest_percentile([1, 2, 3, 4], 50) == 3  # 1.5 -> 2
    assert nearest_percentile([1, 2, 3, 4, 5, 6], 50) == 3  # 2.5 -> 2
    assert nearest_percentile(list(range(11)), 95) == 10  # 9.5 -> 10
    rng = np.random.default_rng(14)
    for n in [*range(1, 40), 100, 128, 1000, 2048]:
        values = list(rng.lognormal(size=n))
        for p in SB_PERCENTILES:
            expected = np.percentile(values, float(p), method="nearest")
            assert nearest_percentile(values, float(p)) == expected, (n, p)


def test_superbench_throughput_is_per_gpu_the_mean_of_per_step_rates() -> None:
    # 2 ranks of batch 50, steps of 80 and 120 ms: dlperf's window throughput is the job's,
    # 2 x 50 x 4 / 0.4 s = 1000 samples/s; SuperBench's is per GPU and the mean of per-step
    # rates, (50 / 0.08 + 50 / 0.12) / 2 = (625 + 416.67) / 2 = 520.83, not 1000 / 2 = 500.
    r = sb_result("resnet50", [[80, 120, 80, 120]], batch=50, devices_per_node=2)
    assert r.metrics.throughput.median == pytest.approx(1000)
    peer = r.metrics.peer["superbench"]
    assert peer["fp32_train_throughput"].value == pytest.approx((625 + 50 / 0.12) / 2)
    assert peer["fp32_train_throughput"].unit == "samples/s per rank"
    assert "per-step throughput" in peer["fp32_train_throughput"].rule
    assert "slowest rank" in peer["fp32_train_throughput"].rule
    assert peer["fp32_train_step_time"].value == pytest.approx(100)
    # Training has no percentiles in SuperBench.
    assert set(peer) == {"fp32_train_step_time", "fp32_train_throughput"}


def test_superbench_inference_percentiles_are_nearest_not_interpolated() -> None:
    # 11 steps: nine of 100 ms, a 299 ms and a 1165 ms stall. p95 sits at index 9.5: dlperf
    # interpolates (299 + 1165) / 2 = 732 ms, SuperBench (numpy "nearest") takes index 10,
    # 1165 ms. p99 (index 9.9): 299 + 0.9 x 866 = 1078.4 against 1165; p90 (index 9) agree.
    r = sb_result("resnet50", [[100] * 9 + [299, 1165]], mode="infer")
    assert r.metrics.latency_ms["p95"] == pytest.approx(732)
    assert r.metrics.latency_ms["p99"] == pytest.approx(1078.4)
    peer = {k: v.value for k, v in r.metrics.peer["superbench"].items()}
    assert peer["fp32_inference_step_time_95"] == 1165
    assert peer["fp32_inference_step_time_99"] == peer["fp32_inference_step_time_99.9"] == 1165
    assert peer["fp32_inference_step_time_90"] == 299 and r.metrics.latency_ms["p90"] == 299
    assert peer["fp32_inference_step_time_50"] == 100
    assert peer["fp32_inference_step_time"] == pytest.approx(2364 / 11)  # 900 + 299 + 1165
    # Throughput per step, batch 10: nine of 100/s, 10 / 0.299 and 10 / 1.165 samples/s.
    assert peer["fp32_inference_throughput"] == pytest.approx((900 + 10 / 0.299 + 10 / 1.165) / 11)
    assert peer["fp32_inference_throughput_50"] == 100  # index 5 of the ascending rates
    assert peer["fp32_inference_throughput_95"] == 100
    assert len(peer) == 2 + 2 * 5
    rule = r.metrics.peer["superbench"]["fp32_inference_step_time_95"].rule
    assert "nearest" in rule and "SuperBench" in rule


def test_superbench_statistics_come_from_the_median_repeat() -> None:
    # Three repeats at 100, 125 and 80 ms a step: the median throughput is the 100 ms one.
    r = sb_result("bert", [[80, 80], [100, 100], [125, 125]], batch=8)
    peer = r.metrics.peer["superbench"]
    assert peer["fp32_train_step_time"].value == pytest.approx(100)
    assert peer["fp32_train_throughput"].value == pytest.approx(80)
    assert "repeat 2, the median of 3 ok" in peer["fp32_train_step_time"].rule
    # Four repeats: the lower of the middle two (an actual run, not an average of two).
    r = sb_result("bert", [[80], [100], [125], [110]], batch=8)
    assert r.metrics.peer["superbench"]["fp32_train_step_time"].value == pytest.approx(110)


def test_superbench_names_follow_its_registry_and_shipped_configs(tmp_path: Path) -> None:
    cases = [("bert", "bert_models/pytorch-bert-base"),
             ("bert-large", "bert_models/pytorch-bert-large"),
             ("gpt2-large", "gpt_models/pytorch-gpt2-large"),
             ("lstm", "lstm_models/pytorch-lstm"),
             ("resnet101", "resnet_models/pytorch-resnet101")]  # fmt: skip
    for model, name in cases:
        metrics = superbench_metrics(sb_result(model, [[100, 100]]))
        assert set(metrics) == {
            f"{name}/{m}" for m in ("return_code", "fp32_train_step_time", "fp32_train_throughput")
        }
    amp = sb_result("resnet50", [[50, 50]], mode="infer", precision="amp", amp_dtype="bfloat16")
    name = "resnet_models/pytorch-resnet50/bf16_inference_throughput_99.9"
    assert name in superbench_metrics(amp)
    (line,) = sb_lines(tmp_path, amp)
    assert line["resnet_models/pytorch-resnet50/bf16_inference_throughput"] == pytest.approx(200)
    assert list(line)[-1] == "node" and line["node"] == "node-a"


def test_superbench_export_is_one_line_per_node(tmp_path: Path) -> None:
    # Two results on node-a, one on node-b, and the same configuration on both nodes.
    a1 = sb_result("resnet50", [[100, 100]])
    a2 = sb_result("bert", [[50, 50]], batch=4)
    b1 = sb_result("resnet50", [[125, 125]], host="node-b")
    lines = sb_lines(tmp_path, a1, a2, b1)
    assert [line["node"] for line in lines] == ["node-a", "node-b"]  # unique: a pandas index
    a, b = lines
    assert a["resnet_models/pytorch-resnet50/fp32_train_throughput"] == pytest.approx(100)
    assert a["bert_models/pytorch-bert-base/fp32_train_throughput"] == pytest.approx(80)
    assert b["resnet_models/pytorch-resnet50/fp32_train_throughput"] == pytest.approx(80)
    assert "bert_models/pytorch-bert-base/return_code" not in b


def test_superbench_export_keeps_configurations_it_cannot_tell_apart(tmp_path: Path) -> None:
    # 1 rank and 2 ranks of resnet50, 100 ms steps, batch 50: dlperf says 500 and 1000
    # samples/s; SuperBench's names would put both on one metric (its summary: mean 750).
    one = sb_result("resnet50", [[100, 100]], batch=50)
    two = sb_result("resnet50", [[100, 100]], batch=50, devices_per_node=2)
    fp16 = sb_result("resnet50", [[50, 50]], batch=50, precision="amp", amp_dtype="float16")
    bert = sb_result("bert", [[100, 100]])
    (line,) = sb_lines(tmp_path, one, two, fp16, bert)
    single = "model-benchmarks:resnet_models-1n1d/pytorch-resnet50/"
    double = "model-benchmarks:resnet_models-1n2d/pytorch-resnet50/"
    assert line[single + "fp32_train_throughput"] == pytest.approx(500)
    assert line[double + "fp32_train_throughput"] == pytest.approx(500)  # per GPU
    assert line[single + "fp16_train_throughput"] == pytest.approx(1000)  # same settings
    assert line[single + "return_code"] == 0
    assert line[double + "return_code:0"] == line[double + "return_code:1"] == 0
    assert not [k for k in line if k.startswith("resnet_models/")]
    assert line["bert_models/pytorch-bert-base/fp32_train_throughput"] == pytest.approx(100)
    tags = superbench_tags([one, two, bert])
    assert tags[describe(bert.spec)] == "bert_models"
    # Several differing settings, in a fixed order: batch after the ranks, then shapes.
    other = sb_result("resnet50", [[100]], batch=64, devices_per_node=2, image_size=160)
    tags = superbench_tags([one, other])
    assert tags[describe(other.spec)] == "model-benchmarks:resnet_models-1n2d-b64-img160"
    assert tags[describe(one.spec)] == "model-benchmarks:resnet_models-1n1d-b50"


def test_superbench_return_code_flags_failed_runs_only(tmp_path: Path) -> None:
    ok = sb_result("resnet50", [[100, 100]])
    crashed = sb_result("bert", [], statuses=[RepeatStatus.crashed])
    partial = sb_result("lstm", [[100, 100]], statuses=[RepeatStatus.timeout])
    amp_failed = sb_result("resnet50", [], precision="amp", statuses=[RepeatStatus.too_few_steps])
    (line,) = sb_lines(tmp_path, ok, crashed, partial)
    assert line["resnet_models/pytorch-resnet50/return_code"] == 0
    # A failed result is its return code alone (4: SuperBench's RUNTIME_EXCEPTION_ERROR).
    assert line["bert_models/pytorch-bert-base/return_code"] == 4
    assert not [k for k in line if k.startswith("bert_models/") and "return_code" not in k]
    # Some repeats failed: the numbers of the ok ones, and the failure's code (timeout: 124).
    assert line["lstm_models/pytorch-lstm/return_code"] == 124
    assert line["lstm_models/pytorch-lstm/fp32_train_throughput"] == pytest.approx(100)
    # One SuperBench benchmark runs every precision: one code, non-zero when one failed.
    (line,) = sb_lines(tmp_path / "2", ok, amp_failed)
    assert line["resnet_models/pytorch-resnet50/return_code"] == 3
    assert line["resnet_models/pytorch-resnet50/fp32_train_throughput"] == pytest.approx(100)


def test_superbench_multi_node_metrics_on_node_0_codes_on_every_node(tmp_path: Path) -> None:
    job = sb_result("resnet50", [[100, 100]], nodes=2, hosts=("node-b", "node-a"), host="node-b")
    a, b = sb_lines(tmp_path, job)
    assert (a["node"], b["node"]) == ("node-a", "node-b")
    assert b["resnet_models/pytorch-resnet50/fp32_train_throughput"] == pytest.approx(100)
    assert a == {"resnet_models/pytorch-resnet50/return_code": 0, "node": "node-a"}


@pytest.mark.multiprocess
def test_superbench_node_of_a_local_job_is_the_host_not_its_loopback(tmp_path: Path) -> None:
    # A real local 2-rank job (its ranks meet at 127.0.0.1) and a single process on this host:
    # one machine, so one SuperBench node, named as every other result names its host.
    from dlperf.runner import run_benchmark
    from dlperf.spec import check_run, resolve_spec

    def pace(devices: int):
        return resolve_spec("calibration", "pace", preset="smoke", overrides={
            "devices_per_node": devices, "skip": 2, "measure": 5, "repeats": 1,
            "batch_size": 10, "options": {"step_ms": "10"}})  # fmt: skip

    job, _ = run_benchmark(check_run(pace(2)), tmp_path / "results")
    single, _ = run_benchmark(check_run(pace(1)), tmp_path / "results")
    assert job.status == single.status == ResultStatus.ok, job.warnings
    assert job.job.hosts == ["127.0.0.1"]  # the address its ranks met at, as recorded
    out = CliRunner().invoke(app, ["export", "--format", "superbench",
                                   "--results-dir", str(tmp_path / "results")])  # fmt: skip
    assert out.exit_code == 0, out.output
    (line,) = [json.loads(text) for text in out.stdout.splitlines()]
    assert line["node"] == single.environment.host == job.environment.host
    assert "127.0.0.1" not in out.stdout
    assert line["model-benchmarks:pace_models-1n2d/calibration-pace/return_code:1"] == 0


def test_superbench_export_uses_stored_statistics_or_recomputes_them(tmp_path: Path) -> None:
    r = sb_result("resnet50", [[80, 120]], batch=50)
    path = ResultStore(tmp_path / "stored").write(r)
    name = "resnet_models/pytorch-resnet50/fp32_train_throughput"
    export = ["export", "--format", "superbench", "--results-dir", str(tmp_path / "stored")]
    assert json.loads(CliRunner().invoke(app, export).stdout)[name] == pytest.approx(520.8333333)
    data = json.loads(path.read_text())
    data["metrics"]["peer"]["superbench"]["fp32_train_throughput"]["value"] = 123.0
    path.write_text(json.dumps(data))
    assert json.loads(CliRunner().invoke(app, export).stdout)[name] == 123.0  # the stored one
    del data["metrics"]["peer"]  # a version-4 file: computed from its step marks
    path.write_text(json.dumps({**data, "schema_version": 4}))
    assert json.loads(CliRunner().invoke(app, export).stdout)[name] == pytest.approx(520.8333333)


def stored_for_export(folder: Path) -> list:
    """A train result, an inference result with latency percentiles, and a failed one."""
    failed_spec = BenchmarkSpec(framework="tensorflow", model="bert", batch_size=2, seq_len=128,
                                repeats=2, options={"xla_jit": "1"})  # fmt: skip
    crashed = [Repeat(index=i, status=RepeatStatus.crashed, message="boom") for i in (1, 2)]
    failed = build_result(failed_spec, "id-failed", crashed, environment=ENVIRONMENT)
    results = [result("resnet50", [100.5, 97.25, 103.125], image_size=224),
               result("bert", [40.1, 41.7, 39.9], mode="infer", step_times=(0.010, 0.020)),
               failed]  # fmt: skip
    store(folder, *results)
    return sorted(results, key=lambda r: identity_of(r).key)


def test_export_csv_round_trips_the_stored_results(tmp_path: Path) -> None:
    import pandas as pd

    results = stored_for_export(tmp_path / "res")
    args = ["export", "--format", "csv", "--results-dir", str(tmp_path / "res")]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    frame = pd.read_csv(io.StringIO(out.stdout))
    assert list(frame["benchmark_id"]) == [benchmark_id(r.spec) for r in results]
    for (_, row), r in zip(frame.iterrows(), results, strict=True):
        assert (row["id"], row["status"], row["framework"], row["model"], row["mode"]) == (
            r.id, r.status.value, r.spec.framework, r.spec.model, r.spec.mode)  # fmt: skip
        assert row["batch_size"] == r.spec.batch_size and row["repeats_run"] == len(r.repeats)
        assert json.loads(row["settings"]) == settings_of(r.spec)
        assert json.loads(row["parameters"]) == parameters_of(r.spec)
        assert row["host"] == r.environment.host
        t = r.metrics.throughput
        if t is None:  # the failed result: no throughput, nothing invented
            assert row["throughput_n"] == 0 and pd.isna(row["throughput_median"])
            continue
        for name in ("median", "mean", "min", "max", "stdev", "cv"):
            assert row[f"throughput_{name}"] == getattr(t, name), name  # exact: floats in full
        # Three repeats have no 95 % interval of the median: empty cells, never "None"
        assert row["throughput_n"] == t.n == 3 and t.ci_low is None
        assert all(pd.isna(row[f"throughput_{n}"]) for n in ("ci_low", "ci_high", "ci_coverage"))
        for key, value in r.metrics.latency_ms.items():
            assert row[f"latency_ms_{key}"] == value
    resnet, bert = (frame.set_index("id").loc[f"id-{m}"] for m in ("resnet50-100.5", "bert-40.1"))
    assert resnet["image_size"] == 224 and resnet["throughput_median"] == 100.5
    assert bert["latency_ms_p50"] == 15.0 and pd.isna(bert["mfu"])  # p50 of 10 and 20 ms
    assert "None" not in out.stdout
    target = tmp_path / "results.csv"
    assert CliRunner().invoke(app, [*args, "--out", str(target)]).exit_code == 0
    assert target.read_text() == out.stdout


def test_export_json_is_the_csv_rows_as_objects(tmp_path: Path) -> None:
    import pandas as pd

    stored_for_export(tmp_path / "res")
    args = ["export", "--results-dir", str(tmp_path / "res"), "--format"]
    csv = pd.read_csv(io.StringIO(CliRunner().invoke(app, [*args, "csv"]).stdout))
    out = CliRunner().invoke(app, [*args, "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert [list(row) for row in rows] == [list(csv.columns)] * len(csv)
    for row, (_, expected) in zip(rows, csv.iterrows(), strict=True):
        for column, value in row.items():
            if value is None:  # missing, as in the CSV: no value invented
                assert pd.isna(expected[column]), column
            else:
                assert value == expected[column], column  # floats in full, as in the CSV
    resnet = next(row for row in rows if row["model"] == "resnet50")
    assert resnet["throughput_median"] == 100.5 and resnet["throughput_n"] == 3
    assert resnet["latency_target_met"] is None and resnet["noisy"] is False
    target = tmp_path / "results.json"
    assert CliRunner().invoke(app, [*args, "json", "--out", str(target)]).exit_code == 0
    assert target.read_text() == out.stdout


def test_export_parquet_keeps_the_frame(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    import pandas as pd

    from dlperf.report.export import results_frame

    results = stored_for_export(tmp_path / "res")
    target = tmp_path / "results.parquet"
    args = ["export", "--format", "parquet", "--results-dir", str(tmp_path / "res")]
    out = CliRunner().invoke(app, [*args, "--out", str(target)])
    assert out.exit_code == 0, out.output
    pd.testing.assert_frame_equal(pd.read_parquet(target), results_frame(results),
                                  check_dtype=False)  # fmt: skip


def test_export_parquet_needs_out_and_names_pyarrow(tmp_path: Path, monkeypatch) -> None:
    stored_for_export(tmp_path / "res")
    args = ["export", "--format", "parquet", "--results-dir", str(tmp_path / "res")]
    out = CliRunner().invoke(app, args)  # main() prints a DlperfError and exits 1
    assert isinstance(out.exception, DlperfError) and "give --out FILE" in str(out.exception)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    target = tmp_path / "results.parquet"
    out = CliRunner().invoke(app, [*args, "--out", str(target)])
    assert isinstance(out.exception, DlperfError) and "pip install pyarrow" in str(out.exception)
    assert not target.exists() and not list(tmp_path.glob(".results.parquet*"))


def test_fambench_table_marks_a_missed_latency_target() -> None:
    met = result("resnet50", [100], mode="infer", latency_target_ms=50.0)
    missed = result("bert", [40], mode="infer", latency_target_ms=5.0)
    table = fambench_table([met, missed])
    assert "| Model | Implementation | Mode | Config | Batch Size | Score | Units |" in table
    assert "| resnet50 | OOTB | eval | pytorch_cpu_fp32 | 8 | 100 | ex/s |" in table
    assert "| bert | OOTB | eval | pytorch_cpu_fp32 | 8 | 40* | ex/s |" in table
    assert "missed its latency target" in table


# ------------------------------------------- FAMBench logs scored by FAMBench's own rules
# fambench_logger/: logs written by FAMBench's bmlogger and summary.txt written beside them by
# its result_summarizer.py (the truth: a row per log).

SUMMARY_COLUMNS = "benchmark implementation mode config score units batch_latency_95_sec"


def summary_rows(text: str) -> list[tuple]:
    """summary.txt's rows as (labels..., score, units, p95 or None), header checked."""
    header, *lines = text.splitlines()
    assert header == SUMMARY_COLUMNS
    rows = []
    for line in lines:
        *labels, score, units, p95 = line.split(" ")
        rows.append((*labels, float(score), units, None if p95 == "None" else float(p95)))
    return rows


def import_fambench_logs(folder: Path, results: Path, *extra: str) -> list[dict]:
    out = CliRunner().invoke(app, ["parse", "fambench", str(folder), "--json",
                                   "--results-dir", str(results), *extra])  # fmt: skip
    assert out.exit_code == 0, out.output
    printed = json.loads(out.stdout)
    return printed if isinstance(printed, list) else [printed]


def fambench_result(results: list[dict], config: str, mode: str = "infer") -> dict:
    """The DLRM result of a configuration and mode."""
    wanted = ("dlrm", config, mode)
    (found,) = [
        r for r in results
        if (r["spec"]["model"], r["spec"]["options"]["config"], r["spec"]["mode"]) == wanted
    ]  # fmt: skip
    return found


@pytest.fixture
def fambench_logger(fixtures: Path) -> Path:
    return fixtures / "fambench_logger"


def test_fambench_every_summary_row_is_reproduced(fambench_logger: Path, tmp_path: Path) -> None:
    # The folder as FAMBench's run_all.sh leaves it: the logs and summary.txt, parsed whole.
    import_fambench_logs(fambench_logger, tmp_path / "results")
    reports = tmp_path / "reports"
    args = ["--results-dir", str(tmp_path / "results"), "--reports-dir", str(reports)]
    out = CliRunner().invoke(app, ["report", "--style", "fambench", *args])
    assert out.exit_code == 0, out.output
    truth_text = (fambench_logger / "summary.txt").read_text()
    ours_text = (reports / "fambench_summary.txt").read_text()
    truth, ours = summary_rows(truth_text), summary_rows(ours_text)
    assert len(truth) == len(ours) == len(list(fambench_logger.glob("*.log"))) == 10
    # FAMBench lists its folder in directory order (glob, unsorted); dlperf in a fixed order:
    # the same rows, and each row's text the same as the summarizer's, byte for byte.
    assert sorted(ours_text.splitlines()[1:]) == sorted(truth_text.splitlines()[1:])
    key = lambda row: tuple(map(str, row))  # noqa: E731
    for mine, theirs in zip(sorted(ours, key=key), sorted(truth, key=key), strict=True):
        assert mine[:4] == theirs[:4] and mine[5] == theirs[5]  # labels, units
        assert mine[4] == pytest.approx(theirs[4], rel=1e-9)  # score
        if theirs[6] is None:  # batch_latency_95_sec, None included
            assert mine[6] is None
        else:
            assert mine[6] == pytest.approx(theirs[6], rel=1e-9)


def test_fambench_reads_only_a_folders_own_log_files(fambench_logger: Path, tmp_path: Path) -> None:
    # FAMBench's summarizer globs FOLDER/*.log: not summary.txt, not subfolders, not dot-files.
    folder = tmp_path / "results"
    (folder / "older").mkdir(parents=True)
    log = (fambench_logger / "rnnt_ootb_infer_tiny.log").read_text()
    (folder / "rnnt.log").write_text(log)
    (folder / "summary.txt").write_text((fambench_logger / "summary.txt").read_text())
    (folder / "older" / "train.log").write_text(
        (fambench_logger / "dlrm_ootb_train_tiny.log").read_text()
    )
    (folder / ".hidden.log").write_text("not a log")
    (folder / "notes.md").write_text("# not a log")
    results = import_fambench_logs(folder, tmp_path / "stored")
    assert [r["spec"]["model"] for r in results] == ["rnn-t"]
    assert [Path(r["log_path"]).name for r in results[0]["repeats"]] == ["rnnt.log"]
    only_deeper = tmp_path / "deeper"
    (only_deeper / "run1").mkdir(parents=True)
    (only_deeper / "run1" / "a.log").write_text(log)
    out = CliRunner().invoke(app, ["parse", "fambench", str(only_deeper),
                                   "--results-dir", str(tmp_path / "x")])  # fmt: skip
    assert isinstance(out.exception, DlperfError)  # main() prints it and exits 1
    assert "no *.log files" in str(out.exception)
    assert "run1/a.log: give that folder" in str(out.exception)


def test_fambench_microbenchmark_throughput_is_batch_over_seconds_per_step(
    fambench_logger: Path, tmp_path: Path
) -> None:
    results = import_fambench_logs(fambench_logger, tmp_path / "results")
    linear = fambench_result(results, "linear_A_float", "train")
    # ELAP is seconds per step (FAMBench's ubench drivers divide by the steps): 256 / 0.0123.
    assert linear["repeats"][0]["throughput"] == pytest.approx(20813.008130, rel=1e-9)
    assert linear["metrics"]["throughput"]["median"] == pytest.approx(256 / 0.0123)
    assert (linear["metrics"]["score"], linear["metrics"]["score_unit"]) == (
        pytest.approx(2.3569942478048778), "TF/s")  # fmt: skip
    emb = fambench_result(results, "emb_B", "train")
    assert emb["metrics"]["throughput"]["median"] == pytest.approx(65536 / 0.0232)
    # What export, compare and score see.
    out = CliRunner().invoke(app, ["export", "--format", "csv", "--results-dir",
                                   str(tmp_path / "results")])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "20813.00813" in out.stdout and "2081300" not in out.stdout


def test_fambench_record_batch_info_with_run_stop_none(fambench_logger: Path) -> None:
    from dlperf.importers.fambench import read_bmlog

    log = read_bmlog(fambench_logger / "dlrm_ootb_eval_batchinfo.log")
    assert log.batch_info() == (50, 32)  # record_batch_info's lines, not run_stop's None
    assert log.score() == (1600.0, "ex/s")  # 50 x 32 / 1 s


def test_fambench_scores_the_first_of_two_passes(fambench_logger: Path, tmp_path: Path) -> None:
    results = import_fambench_logs(fambench_logger, tmp_path / "results")
    twopass = fambench_result(results, "twopass")
    assert twopass["metrics"]["score"] == 640.0  # 10 x 64 / 1 s, not the second pass's 1280
    assert "scored by the first pair" in twopass["repeats"][0]["warnings"][0]
    assert any(w.startswith("dlrm_ootb_eval_twopass.log: 2 run_start") for w in twopass["warnings"])


def test_fambench_p95_is_the_nearest_rank_rounded_up() -> None:
    from dlperf.stats import fambench_p95

    assert fambench_p95([]) is None
    assert fambench_p95([7.0]) == 7.0
    # 20 values: index ceil(0.95 x 19) = ceil(18.05) = 19, the largest (numpy would say 19.05).
    assert fambench_p95(list(range(20, 0, -1))) == 20
    # 21 values: 0.95 x 20 = 19 exactly -> index 19, the 20th.
    assert fambench_p95(list(range(1, 22))) == 20
    # 3 values: ceil(1.9) = 2, the slowest.
    assert fambench_p95([0.2, 0.1, 0.3]) == 0.3


def test_fambench_latency_target_is_judged_by_fambenchs_p95(
    fambench_logger: Path, tmp_path: Path
) -> None:
    # tiny_r1..r3: each log's slowest batch is 30 ms, its next 25 ms. FAMBench's p95 of each
    # log is 30 ms; dlperf's interpolated p95 over the 60 pooled batches is 25 + 5 x 0.05.
    results = import_fambench_logs(fambench_logger, tmp_path / "results",
                                   "--latency-target-ms", "28")  # fmt: skip
    tiny = fambench_result(results, "tiny")
    m = tiny["metrics"]
    assert m["latency_ms"]["p95"] == pytest.approx(25.25)  # dlperf's own, kept
    p95 = m["peer"]["fambench"]["batch_latency_95_sec"]
    assert (p95["value"], p95["unit"]) == (pytest.approx(0.03), "s")
    assert "ceil(0.95 x (n - 1))" in p95["rule"] and "slowest of 3 logs" in p95["rule"]
    assert m["latency_target_met"] is False  # 30 ms > 28 ms, though dlperf's 25.25 is within
    assert any("p95 30.000 ms (FAMBench's p95" in w for w in tiny["warnings"])
    assert fambench_result(results, "tiny", "train")["spec"]["latency_target_ms"] is None
    reports = tmp_path / "reports"
    CliRunner().invoke(app, ["report", "--style", "fambench", "--results-dir",
                             str(tmp_path / "results"), "--reports-dir", str(reports)])  # fmt: skip
    table = (reports / "fambench.md").read_text()
    assert "| DLRM | OOTB | eval | tiny | 64 | 4450.63* | ex/s | 0.03 | 3 |" in table
    assert "missed its latency target: an imported log's p95 by FAMBench's rule" in table


def test_fambench_labels_are_kept_as_the_header_writes_them(
    fambench_logger: Path, tmp_path: Path
) -> None:
    import_fambench_logs(fambench_logger, tmp_path / "results")
    out = CliRunner().invoke(app, ["report", "--style", "fambench", "--results-dir",
                                   str(tmp_path / "results"), "--reports-dir",
                                   str(tmp_path / "reports")])  # fmt: skip
    assert out.exit_code == 0, out.output
    table = (tmp_path / "reports" / "fambench.md").read_text()
    assert ("| Model | Implementation | Mode | Config | Batch Size | Score | Units "
            "| p95 batch latency (s) | Logs |") in table  # fmt: skip
    for row in (
        "| DLRM | UBENCH | train | linear_A_float | 256 | 2.35699 | TF/s | - | 1 |",
        "| DLRM | OOTB | eval | clock | 16 | 1429.94 | ex/s | 0.0142629 | 1 |",
        "| DLRM | OOTB | eval | batchinfo | 32 | 1600 | ex/s | - | 1 |",
        "| RNN-T | OOTB | infer | tiny | 1 | 20 | ex/s | - | 1 |",
    ):
        assert row in table
    assert "the median of the logs' scores: dlperf's statistic" in table
    assert "fambench_summary.txt" in out.output


def test_fambench_repeats_are_one_result_with_each_logs_own_numbers(
    fambench_logger: Path, tmp_path: Path
) -> None:
    results = import_fambench_logs(fambench_logger, tmp_path / "results")
    assert len(results) == 8  # 10 logs, the three tiny eval repeats grouped
    tiny = fambench_result(results, "tiny")
    per_log = [r["peer"]["fambench"]["score"]["value"] for r in tiny["repeats"]]
    truth = [row[4] for row in summary_rows((fambench_logger / "summary.txt").read_text())
             if row[:4] == ("DLRM", "OOTB", "eval", "tiny")]  # fmt: skip
    assert sorted(per_log) == pytest.approx(sorted(truth), rel=1e-9)
    assert [r["workload"]["fambench"]["config"] for r in tiny["repeats"]] == ["tiny"] * 3
    m = tiny["metrics"]
    assert m["score"] == pytest.approx(4450.626247071862, rel=1e-9) == m["throughput"]["median"]
    assert "median of 3 logs' scores" in m["peer"]["fambench"]["score"]["rule"]
    one = fambench_result(results, "clock")["metrics"]["peer"]["fambench"]
    assert one["score"]["value"] == pytest.approx(1429.9366809654516, rel=1e-9)
    assert one["score"]["rule"].startswith("FAMBench's exps")


def test_fambench_summary_rows_from_dlperfs_own_runs() -> None:
    from dlperf.report.suites import fambench_summary

    run = result("resnet50", [100.0, 120.0], mode="infer", step_times=(0.01, 0.03, 0.02))
    text = fambench_summary([run])
    assert text.splitlines() == [
        SUMMARY_COLUMNS,
        "resnet50 OOTB eval pytorch_cpu_fp32 100.0 ex/s 0.03",
        "resnet50 OOTB eval pytorch_cpu_fp32 120.0 ex/s 0.03",
    ]


def test_fambench_imports_flow_through_report_export_compare_score(
    fambench_logger: Path, tmp_path: Path
) -> None:
    stored = str(tmp_path / "results")
    import_fambench_logs(fambench_logger, Path(stored))
    run = CliRunner().invoke
    assert run(app, ["report", "--results-dir", stored, "--reports-dir",
                     str(tmp_path / "reports")]).exit_code == 0  # fmt: skip
    for fmt in ("csv", "json", "superbench"):
        out = run(app, ["export", "--format", fmt, "--results-dir", stored])
        assert out.exit_code == 0, out.output
    # FAMBench's logs record no hardware: such results pair only when asked.
    out = run(app, ["compare", stored, stored])
    assert out.exit_code == 3 and "hardware was not recorded" in out.output, out.output
    out = run(app, ["compare", stored, stored, "--across-machines"])
    assert out.exit_code == 0, out.output
    reference = tmp_path / "reference.json"
    assert run(app, ["score", "--freeze", str(reference), "--results-dir", stored]).exit_code == 0
    out = run(app, ["score", "--reference", str(reference), "--results-dir", stored,
                    "--across-machines"])  # fmt: skip
    assert out.exit_code == 0 and "score 1000.0" in out.output, out.output


def test_a_version_4_result_loads_as_the_current_version(tmp_path: Path) -> None:
    path = ResultStore(tmp_path).write(result("resnet50", [100.0]))
    data = json.loads(path.read_text())
    for r in data["repeats"]:
        del r["peer"]
    del data["metrics"]["peer"]
    path.write_text(json.dumps({**data, "schema_version": 4}))
    assert load_result(path).schema_version == SCHEMA_VERSION
