"""compare, SuperBench export and FAMBench's table, on hand-computed cases."""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlperf import DlperfError
from dlperf.assemble import build_result
from dlperf.cli import app
from dlperf.compare import compare
from dlperf.report.suites import fambench_table, superbench_metrics
from dlperf.schema import BenchmarkSpec, Environment, Repeat, RepeatStatus, Window
from dlperf.stats import mann_whitney_p, smallest_p
from dlperf.store import load_result, write_result

ENVIRONMENT = Environment(dlperf_version="test", host="test-host", os="linux")


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
        write_result(folder, r)
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
    rows, notes = compare(a, b)
    by_model = {r.key.split("_")[1]: r for r in rows}
    r = by_model["resnet50"]
    assert r.change == pytest.approx(-0.10) and r.test == "Mann-Whitney U"
    assert r.p == pytest.approx(2 / 3432) and r.verdict == "regression"
    assert by_model["bert"].verdict == "no change" and not notes
    out = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert out.exit_code == 2 and "**regression**" in out.output
    assert CliRunner().invoke(app, ["compare", str(a), str(a)]).exit_code == 0


def test_compare_json_is_every_row_field_and_the_notes(tmp_path: Path) -> None:
    a = store(tmp_path / "a", result("resnet50", [100, 101, 99, 100, 102, 98, 100]),
              result("bert", [50, 51, 49]))  # fmt: skip
    b = store(tmp_path / "b", result("resnet50", [90, 91, 89, 90, 92, 88, 90]),
              result("lstm", [10, 11, 9]))  # fmt: skip
    rows, notes = compare(a, b, 0.02)
    out = CliRunner().invoke(app, ["compare", str(a), str(b), "--threshold", "0.02", "--json"])
    assert out.exit_code == 2  # a regression, as without --json
    data = json.loads(out.stdout)  # stdout is the JSON alone; the table went to stderr
    assert data == {"threshold": 0.02, "rows": [r.__dict__ for r in rows], "notes": notes}
    (row,) = data["rows"]
    assert row["a"] == 100 and row["b"] == 90 and row["change"] == pytest.approx(-0.10)
    assert row["p"] == pytest.approx(2 / 3432) and row["verdict"] == "regression"
    assert len(data["notes"]) == 2 and "**regression**" in out.stderr


def test_compare_with_three_repeats_falls_back_to_confidence_intervals(tmp_path: Path) -> None:
    a = store(tmp_path / "a", result("resnet50", [100, 101, 99]))
    tight = store(tmp_path / "b", result("resnet50", [80, 81, 79]))
    (r,), _ = compare(a, tight)
    assert r.test == "95% CI overlap" and r.p is None and r.verdict == "regression"
    noisy = store(tmp_path / "c", result("resnet50", [60, 110, 85]))
    (r,), _ = compare(a, noisy)
    assert r.change == pytest.approx(-0.15) and r.verdict == "within noise"
    faster = store(tmp_path / "d", result("resnet50", [120, 121, 119]))
    assert compare(a, faster)[0][0].verdict == "improvement"


def test_compare_fallback_is_the_means_t_interval_from_the_repeats(tmp_path: Path) -> None:
    # 3 vs 3: [100, 101, 99] gives 100 ± t(0.975, 2) s / sqrt(3) = 100 ± 4.303 / 1.732, so
    # 97.52..102.48; [94, 95, 93] gives 91.52..96.48, apart from it: a regression...
    a = store(tmp_path / "a", result("resnet50", [100, 101, 99]))
    apart = store(tmp_path / "b", result("resnet50", [94, 95, 93]))
    (r,), _ = compare(a, apart, threshold=0.03)
    assert r.test == "95% CI overlap" and r.verdict == "regression"
    # ...while [96, 97, 95], 93.52..98.48, overlaps it: within noise, although 4 % lower.
    near = store(tmp_path / "c", result("resnet50", [96, 97, 95]))
    (r,), _ = compare(a, near, threshold=0.03)
    assert r.change == pytest.approx(-0.04) and r.verdict == "within noise"
    # ...and a stored summary's interval (the median's, None for 3 repeats) is not used.
    assert load_result(next((tmp_path / "a").glob("*/*.json"))).metrics.throughput.ci_low is None


def test_a_version_3_file_gets_the_medians_interval_recomputed(tmp_path: Path) -> None:
    seven = result("resnet50", [100.0, 30.0, 101.0, 99.0, 102.0, 98.0, 100.5])
    path = write_result(tmp_path, seven)
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
    assert loaded.schema_version == 5 and loaded == seven
    three = result("resnet50", [100.0, 101.0, 99.0])
    path = write_result(tmp_path, three)
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


def test_compare_names_configurations_only_one_side_has(tmp_path: Path) -> None:
    a = store(tmp_path / "a", result("resnet50", [100]))
    b = store(tmp_path / "b", result("bert", [100]))
    rows, notes = compare(a, b)
    assert rows == [] and len(notes) == 2
    (only_a,) = [n for n in notes if "resnet50" in n]
    (only_b,) = [n for n in notes if "bert" in n]
    assert only_a.endswith("only in A") and only_b.endswith("only in B")


# ------------------------------------------------------------------- other suites' formats


def test_superbench_metric_names(tmp_path: Path) -> None:
    r = result("resnet50", [100, 100, 100], mode="infer", step_times=(0.010, 0.020))
    metrics = superbench_metrics(r)
    assert metrics["model-benchmarks/pytorch-resnet50/fp32_inference_throughput"] == 100
    assert metrics["model-benchmarks/pytorch-resnet50/fp32_inference_step_time"] == 80.0
    assert metrics["model-benchmarks/pytorch-resnet50/fp32_inference_step_time_50"] == 15.0
    assert "model-benchmarks/pytorch-resnet50/fp32_inference_step_time_99.9" in metrics
    write_result(tmp_path, r)
    out = CliRunner().invoke(app, ["export", "--format", "superbench",
                                   "--results-dir", str(tmp_path)])  # fmt: skip
    (line,) = out.stdout.splitlines()
    assert json.loads(line)["model-benchmarks/pytorch-resnet50/fp32_inference_throughput"] == 100
    target = tmp_path / "sb.jsonl"
    CliRunner().invoke(app, ["export", "--format", "superbench", "--results-dir", str(tmp_path),
                             "--out", str(target)])  # fmt: skip
    assert target.read_text() == out.stdout


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
    return sorted(results, key=lambda r: r.spec.config_key())


def test_export_csv_round_trips_the_stored_results(tmp_path: Path) -> None:
    import pandas as pd

    results = stored_for_export(tmp_path / "res")
    args = ["export", "--format", "csv", "--results-dir", str(tmp_path / "res")]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    frame = pd.read_csv(io.StringIO(out.stdout))
    assert list(frame["config_key"]) == [r.spec.config_key() for r in results]
    for (_, row), r in zip(frame.iterrows(), results, strict=True):
        assert (row["id"], row["status"], row["framework"], row["model"], row["mode"]) == (
            r.id, r.status.value, r.spec.framework, r.spec.model, r.spec.mode)  # fmt: skip
        assert row["batch_size"] == r.spec.batch_size and row["repeats_run"] == len(r.repeats)
        assert json.loads(row["options"]) == r.spec.options
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

    from dlperf.store import results_frame

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
