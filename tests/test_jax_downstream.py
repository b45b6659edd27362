"""JAX downstream of the run (issue 31, point 6): the report, charts, site, compare, history,
score, export and the SuperBench and FAMBench formats carry jax as any framework, from one
real, tiny jax ResNet50 run beside one real pytorch run of the same shapes; and MLCommons'
published JAX ResNet50 (Google, 128 TPU v4) imports as jax and sits beside jax's own results,
on its own machine, never pooled with them.

The numbers asserted are the stored results' own (their medians and step marks), never the
wall clock."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import statistics
from pathlib import Path

import pytest
from conftest import ROOT, fixtures_dir
from matplotlib.colors import to_hex

from dlperf import DlperfError
from dlperf.adapters import adapter_names
from dlperf.compare import compare
from dlperf.identity import benchmark_id, machine_of
from dlperf.importers.mlperf_training import import_folders
from dlperf.published import is_published_reference
from dlperf.report._data import select
from dlperf.report.cells import median_text
from dlperf.report.chart import draw_chart
from dlperf.report.export import results_csv
from dlperf.report.figures import throughput_figure
from dlperf.report.look import FRAMEWORK_COLOURS, OTHER_COLOURS, framework_colour
from dlperf.report.markdown import render_model_report
from dlperf.report.site import history, write_site
from dlperf.report.suites import fambench_table, superbench_lines
from dlperf.runner import run_benchmark
from dlperf.schema import Result, ResultStatus
from dlperf.score import freeze, score
from dlperf.spec import check_run, resolve_spec
from dlperf.store import ResultStore
from dlperf.sweep import load_plan

TINY = {"repeats": 1, "skip": 1, "measure": 2, "image_size": 32, "batch_size": 2}
JAX_MLPERF = "v1.0-Google-tpu-v4-256-JAX-Distributed-Shampoo-resnet"
JAX_MLPERF_SCORE = "3.31824"  # the fixture README's, by mlperf-logging's result summarizer


def runnable_frameworks() -> set[str]:
    return set(adapter_names()) - {"calibration"}


# ---------------------------------------------------------------- fast: no framework runs


@pytest.mark.parametrize("name", ["six-frameworks.toml", "smoke-matrix.toml"])
def test_the_example_matrices_name_every_framework(name: str) -> None:
    plan = load_plan(ROOT / "examples" / name)
    assert {spec.framework for spec in plan.specs} == runnable_frameworks()
    assert not (ROOT / "examples" / "five-frameworks.toml").exists()


def test_jax_has_its_own_colour_readable_on_white() -> None:
    colour = framework_colour("jax")
    others = [c for fw, c in FRAMEWORK_COLOURS.items() if fw != "jax"]
    assert FRAMEWORK_COLOURS["jax"] == colour
    assert colour not in others and colour not in OTHER_COLOURS
    assert set(FRAMEWORK_COLOURS) == runnable_frameworks()

    def luminance(hex_colour: str) -> float:  # WCAG 2's relative luminance
        channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    assert 1.05 / (luminance(colour) + 0.05) >= 4.5  # WCAG AA for text on white


def test_mlperf_trainings_jax_submission_imports_as_jax(cli, fixtures: Path) -> None:
    folder = fixtures / "mlperf_training" / JAX_MLPERF
    code, out = cli("parse", "mlperf-training", str(folder), "--results-dir", "results")
    assert code == 0, out
    assert f"jax resnet50 train 32n4d b256: MLPerf score {JAX_MLPERF_SCORE} min" in out
    (result,) = ResultStore(Path("results")).results()
    s = result.spec
    assert (s.framework, s.model, s.mode, s.device) == ("jax", "resnet50", "train", "tpu")
    assert (s.nodes, s.devices_per_node) == (32, 4) and is_published_reference(result)


# ---------------------------------------------------------------- one real run of each


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """One tiny jax ResNet50 run and one pytorch run of the same shapes, in one results folder."""
    folder = tmp_path_factory.mktemp("results")
    for framework in ("jax", "pytorch"):
        spec = resolve_spec(framework, "resnet50", preset="smoke", overrides=TINY)
        result, _ = run_benchmark(check_run(spec), folder)
        assert result.status == ResultStatus.ok, (framework, result.warnings)
    return folder


@pytest.fixture(scope="module")
def runs(store: Path) -> dict[str, Result]:
    return {r.spec.framework: r for r in ResultStore(store).results()}


@pytest.fixture(scope="module")
def with_published(store: Path, tmp_path_factory) -> Path:
    """The same results with MLCommons' JAX ResNet50 imported beside them."""
    found = fixtures_dir()
    if found is None:
        pytest.skip("no ../shared/fixtures beside the project and DLPERF_FIXTURES is unset")
    folder = tmp_path_factory.mktemp("with-published") / "results"
    shutil.copytree(store, folder)
    import_folders([found / "mlperf_training" / JAX_MLPERF], results_dir=folder)
    return folder


def row_of(lines: list[str], start: str) -> list[str]:
    (line,) = [x for x in lines if x.startswith(start)]
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.framework
def test_the_report_has_a_jax_column_beside_pytorch(with_published: Path, runs) -> None:
    results = ResultStore(with_published).results()
    page = render_model_report(results, "resnet50")
    lines = page.splitlines()
    header = row_of(lines, "| mode | precision |")
    assert header[-2:] == ["jax", "pytorch"]
    (row,) = [r for r in lines if r.startswith("| train | fp32 | cpu | 2 | image 32 | 1x1 |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-2:] == [median_text(runs["jax"]), median_text(runs["pytorch"])]
    assert "## jax" in lines and "frameworks: jax, pytorch" in page
    # The TPU submission is in the published references, under jax, its machine said, and
    # counted nowhere else: the page's one machine, two configurations, one row above.
    assert "2 configurations (2 ok); frameworks: jax, pytorch" in page
    assert "Every number on this page is from one machine" in page
    reference = row_of(lines, "| TPU |")
    assert reference[1:6] == ["jax", "Google", "tpu-v4-256",
                              "[v1.0](https://github.com/mlcommons/training_results_v1.0) open",
                              "128 (32 x 4)"]  # fmt: skip
    assert reference[7] == f"{float(JAX_MLPERF_SCORE):.2f}"
    assert "None of your results ran on an accelerator model with a published result" in page
    assert "the published ones on TPU" in page


@pytest.mark.framework
def test_charts_and_site_draw_jax_in_its_colour(with_published: Path, runs, tmp_path) -> None:
    results = ResultStore(with_published).results()
    chosen = select(results, "resnet50")
    assert {r.spec.framework for r in chosen} == {"jax", "pytorch"}  # the TPU run left out
    figure = throughput_figure(chosen, "resnet50")
    jax = next(t for t in figure.data if t.name == "jax")  # the throughput's (memory below)
    assert jax.marker.color == framework_colour("jax")
    assert list(jax.y) == [pytest.approx(runs["jax"].metrics.throughput.median)]
    png = draw_chart(results, "resnet50")
    colours = {to_hex(p.get_facecolor()) for p in png.axes[0].patches}
    assert colours == {framework_colour("jax"), framework_colour("pytorch")}
    site = write_site(with_published, tmp_path / "site")
    page = (site.out_dir / "resnet50.html").read_text(encoding="utf-8")
    assert "<th>jax</th>" in page and framework_colour("jax") in page
    assert "jax (published reference, imported)" in page
    # History: jax's own series is there; the TPU run is no point of it.
    series = {key[0]: points for key, points in history(with_published).items()}
    jax_id = benchmark_id(runs["jax"].spec)
    (point,) = series[jax_id]
    assert point.median == pytest.approx(runs["jax"].metrics.throughput.median)


@pytest.mark.framework
def test_compare_pairs_jax_with_jax_only_on_its_machine(store, with_published, runs) -> None:
    c = compare(store, with_published)
    by = {row.benchmark: row for row in c.rows}
    jax = by[benchmark_id(runs["jax"].spec)]
    assert jax.a == jax.b == pytest.approx(runs["jax"].metrics.throughput.median)
    assert jax.change == 0 and c.exit_code == 0 and len(c.rows) == 2
    # MLCommons' TPU run is a published reference: left out unless asked; asked, it is jax
    # too, but another benchmark on another machine: never paired.
    assert c.only_b == [] and c.references_left_out == 1
    c = compare(store, with_published, include_references=True)
    assert len(c.only_b) == 1 and "jax-resnet50-train" in c.only_b[0] and "tpu" in c.only_b[0]
    # jax against pytorch: another framework is another benchmark, so nothing to compare.
    files = {s.result.spec.framework: store / s.relpath for s in ResultStore(store).load()}
    apart = compare(files["jax"], files["pytorch"])
    assert apart.exit_code == 3 and apart.reason == "A and B have no benchmark in common"


@pytest.mark.framework
def test_score_weighs_jax_as_a_configuration_of_resnet50(with_published, runs, tmp_path) -> None:
    own = machine_of(runs["jax"]).id
    reference = tmp_path / "reference.json"
    count, unplaced, _ = freeze(with_published, reference, machine=own)
    assert count == 2 and unplaced == []
    data = json.loads(reference.read_text())
    (entry,) = [e for e in data["entries"] if e["key"].startswith("jax-")]
    assert entry["value"] == pytest.approx(runs["jax"].metrics.throughput.median)
    entry["value"] /= 2  # jax twice as fast as its reference, pytorch as fast as its own
    reference.write_text(json.dumps(data))
    with pytest.raises(DlperfError, match="2 machines"):  # the TPU run is another machine
        score(with_published, reference)
    s = score(with_published, reference, machine=own)
    assert s.speedups[entry["key"]] == pytest.approx(2.0)
    assert s.weights[entry["key"]] == pytest.approx(0.5)  # V0: half of resnet50's share
    assert s.placement[entry["key"]] == ["computer vision", "classification", "resnet50"]
    assert s.total == pytest.approx(1000 * math.sqrt(2))


@pytest.mark.framework
def test_export_superbench_and_fambench_carry_jax(store, runs) -> None:
    results = ResultStore(store).results()
    jax = runs["jax"]
    median = jax.metrics.throughput.median
    rows = {r["framework"]: r for r in csv.DictReader(io.StringIO(results_csv(results)))}
    assert set(rows) == {"jax", "pytorch"}
    assert float(rows["jax"]["throughput_median"]) == median  # written in full
    assert rows["jax"]["benchmark_id"] == benchmark_id(jax.spec)
    # SuperBench: jax-resnet50 under the shipped configs' key, its throughput the mean of the
    # measured steps' batch / step time (SuperBench's rule), from the workload's own marks.
    (line,) = superbench_lines(results)
    (repeat,) = jax.repeats
    steps = statistics.fmean(jax.spec.batch_size / t for t in repeat.step_times_s)
    assert line["resnet_models/jax-resnet50/fp32_train_throughput"] == pytest.approx(steps)
    assert line["resnet_models/jax-resnet50/return_code"] == 0
    assert "resnet_models/pytorch-resnet50/fp32_train_throughput" in line
    # FAMBench: its README table's row, the configuration named in its one-word style.
    lines = fambench_table(results).splitlines()
    cells = row_of(lines, "| resnet50 | OOTB | train | jax_cpu_fp32_img32 |")
    assert cells[4:7] == ["2", f"{median:.6g}", "ex/s"] and cells[8] == "1"
    assert row_of(lines, "| resnet50 | OOTB | train | pytorch_cpu_fp32_img32 |")
