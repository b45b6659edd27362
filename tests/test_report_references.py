"""A model page's *Published references (MLPerf Training)* (issue 25, part 2): the real MLPerf
Training fixtures imported beside the user's own results (built as test_report builds them).

The published results get a section of their own, ordered by the user's accelerators first,
and the user's results are held against the best published on the same accelerator model;
nothing else on the page (tables, charts, counts) holds a published result.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from conftest import fixtures_dir
from test_report import make_result
from test_untrusted_text import QUIET_PORT, SHOWN, check_markdown
from untrusted import CLOSE, OPEN, payload

from dlperf.analysis import per_device
from dlperf.importers.mlperf_training import import_folders
from dlperf.published import NO_MFU, is_published_reference
from dlperf.report import render_model_report
from dlperf.report._data import by_machine, chart_files, select
from dlperf.report.markdown import NO_OWN_RESULTS
from dlperf.report.references import TITLE
from dlperf.report.site import render_index_page, render_model_page
from dlperf.report.writer import render_index
from dlperf.schema import Result
from dlperf.store import ResultStore

H200 = "NVIDIA H200"  # as nvidia-smi names it; MLPerf's system says NVIDIA H200-SXM5-141GB
A100 = "NVIDIA A100-SXM4-80GB"
OWN_H200_THROUGHPUT = 2000.0
SECTION = re.compile(r"^## Published references \(MLPerf Training\)\n.*?(?=^## |\Z)", re.M | re.S)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> list[Result]:
    """The four real fixture folders, imported once for the module (about 4 s)."""
    found = fixtures_dir()
    if found is None:
        pytest.skip("no ../shared/fixtures beside the project and DLPERF_FIXTURES is unset")
    folder = tmp_path_factory.mktemp("imported")
    imported = import_folders([found / "mlperf_training"], results_dir=folder)
    return [r for r, _ in imported]


def on_gpu(result: Result, gpu: str, model: str = "resnet50", id_: str = "") -> Result:
    """`result` as run on one `gpu` (its machine: that GPU), of `model`."""
    env = result.environment.model_copy(update={"gpu": gpu, "device_name": gpu, "gpu_count": 1})
    spec = result.spec.model_copy(update={"model": model})
    return result.model_copy(update={"environment": env, "spec": spec, "id": id_ or result.id})


def own_h200(model: str = "resnet50") -> Result:
    run = make_result("pytorch", [OWN_H200_THROUGHPUT] * 3)
    return on_gpu(run, H200, model, "20240601T120000Z-own-h200")


def own_a100(model: str = "bert-large") -> Result:
    return on_gpu(make_result("pytorch", [250.0] * 3), A100, model, "20240601T120000Z-own-a100")


def own_cpu() -> Result:
    return make_result("pytorch", [31.2, 30.85, 31.47], device="cpu")


def section(page: str) -> str:
    found = SECTION.search(page)
    assert found, "no published references section"
    return found.group(0)


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The cells of the rows of the table whose header starts with `header_start`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header_start}"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_fixtures_are_published_references(published: list[Result]) -> None:
    assert len(published) == 4 and all(is_published_reference(r) for r in published)
    assert not is_published_reference(own_h200())


def test_the_section_lists_them_the_users_accelerator_first(published: list[Result]) -> None:
    page = render_model_report([*published, own_h200(), own_cpu()], "resnet50")
    rows = table_rows(section(page), "accelerator")
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("NVIDIA H200-SXM5-141GB (as yours)", "mxnet", "NVIDIA", "v4.0 closed"),
        ("TPU", "jax", "Google", "v1.0 open"),
    ]
    mxnet = next(r for r in published if r.spec.framework == "mxnet")
    assert rows[0][4:7] == ["8 (1 x 8)", f"{per_device(mxnet):,.1f}", f"{mxnet.metrics.score:.2f}"]
    assert rows[1][7] == "— (1)" and "1. MFU: dlperf knows no peak FLOP/s of TPU" in page
    # BERT: the user's A100 puts the A100 row first, though H200's is faster per accelerator
    bert = render_model_report([*published, own_a100()], "bert-large")
    rows = table_rows(section(bert), "accelerator")
    assert [r[0] for r in rows] == [f"{A100} (as yours)", "NVIDIA H200-SXM5-141GB"]
    assert float(rows[0][5].replace(",", "")) < float(rows[1][5].replace(",", ""))
    assert f"MFU: {NO_MFU}" not in bert and "2. MFU: at the 1020 GFLOP per sample" in bert


def test_an_own_result_against_the_best_published_on_its_accelerator(
    published: list[Result],
) -> None:
    page = render_model_report([*published, own_h200(), own_cpu()], "resnet50")
    mxnet = next(r for r in published if r.spec.framework == "mxnet")
    best = mxnet.metrics.throughput.median / mxnet.spec.world_size  # MLPerf's 8 H200s
    assert round(best) == 7823
    ratio = f"{OWN_H200_THROUGHPUT / best:.2f}x"
    assert ratio == "0.26x"
    rows = table_rows(section(page), "your benchmark")
    assert rows == [
        ["`pytorch-resnet50-train-fp32-cuda-1x1-b128-i224`", H200, "2,000.0", "mxnet, NVIDIA, v4.0",
         f"{best:,.1f}", ratio],
    ]  # fmt: skip
    assert "Not compared: your results on CPU (AMD EPYC 7R13 Processor)" in page


def test_a_cpu_only_user_is_told_nothing_is_compared(published: list[Result]) -> None:
    page = render_model_report([*published, own_cpu()], "resnet50")
    assert "| your benchmark" not in page
    assert (
        "None of your results ran on an accelerator model with a published result: yours ran on "
        "CPU (AMD EPYC 7R13 Processor), the published ones on NVIDIA H200-SXM5-141GB, TPU; "
        "numbers from different accelerators are not compared here."
    ) in section(page)


def test_nothing_else_on_the_page_holds_a_published_result(published: list[Result]) -> None:
    """The page with the published results is the page without them plus their section: the
    cross-framework table, framework sections, summary and counts are the user's alone."""
    own = [own_h200(), own_cpu()]
    page = render_model_report([*published, *own], "resnet50")
    assert SECTION.sub("", page) == render_model_report(own, "resnet50")
    assert "2 configurations on 2 machines (2 ok); frameworks: pytorch." in page
    assert "## mxnet" not in page and "## jax" not in page
    assert all(r.id not in page for r in published)
    assert select([*published, *own], "resnet50") == select(own, "resnet50")
    assert TITLE not in render_model_report([*published, *own], "resnet101")
    index = render_index([*published, *own])
    assert (
        "| [resnet50](resnet50.md) | " in index and "| pytorch | 2 | 2 | 2 | 2 | 0 | 0 |" in index
    )
    assert "[bert-large](bert-large.md) (2), [resnet50](resnet50.md) (2)." in index


def test_the_section_is_deterministic(published: list[Result]) -> None:
    results = [*published, own_h200(), own_cpu()]
    page = render_model_report(results, "resnet50")
    assert render_model_report(results, "resnet50") == page
    for seed in range(3):
        shuffled = results[:]
        random.Random(seed).shuffle(shuffled)
        assert render_model_report(shuffled, "resnet50") == page


def test_a_model_with_only_published_results(published: list[Result]) -> None:
    page = render_model_report([*published, own_h200()], "bert-large")
    assert NO_OWN_RESULTS in page and "Made from" not in page and "## Cross-framework" not in page
    assert len(table_rows(section(page), "accelerator")) == 2
    assert "No training result of your own of bert-large to compare yet." in page


def test_the_site_pages_show_the_section(published: list[Result], tmp_path: Path) -> None:
    own = [own_h200(), own_cpu()]
    ResultStore(tmp_path).write_all([*published, *own])
    stored = ResultStore(tmp_path).load()
    page, charts = render_model_page(stored, "resnet50", {})
    assert f"<h2>{TITLE}</h2>" in page and "<td>0.26x</td>" in page
    assert "<td>NVIDIA H200-SXM5-141GB (as yours)</td>" in page
    assert "<td>mxnet (published reference, imported)</td>" in page  # in the raw results
    _, own_charts = render_model_page(
        [s for s in stored if not is_published_reference(s.result)], "resnet50", {}
    )
    assert charts == own_charts  # the charts draw the user's results alone
    bert, bert_charts = render_model_page(stored, "bert-large", {})
    assert f"<h2>{TITLE}</h2>" in bert and bert_charts == []
    assert NO_OWN_RESULTS in bert
    index, _ = render_index_page(stored)
    assert (
        "2 configurations (a benchmark on a machine with its settings) on 2 machines, 2 " in index
    )
    assert '<a href="bert-large.html">bert-large</a> (2)' in index


def test_published_text_is_only_text(published: list[Result]) -> None:
    """The submitter, round, division, accelerator and a reason, hostile: escaped."""
    hostile = []
    for i, r in enumerate(published):
        options = {**r.spec.options, **{k: payload(f"{k}{i}", QUIET_PORT)
                                         for k in ("submitter", "round", "division")}}  # fmt: skip
        env = r.environment.model_copy(update={"gpu": payload(f"gpu{i}", QUIET_PORT)})
        update = {"spec": r.spec.model_copy(update={"options": options}), "environment": env}
        if r.metrics.mfu is None:
            update["warnings"] = [NO_MFU + payload(f"why{i}", QUIET_PORT)]
        hostile.append(r.model_copy(update=update))
    mxnet = next(r for r in hostile if r.spec.framework == "mxnet")
    own = on_gpu(own_h200(), mxnet.environment.gpu)  # the same accelerator: a name match
    results = [*hostile, own]
    page = render_model_report(results, "resnet50")
    assert "| your benchmark" in page and OPEN in section(page) and CLOSE in section(page)
    machines = [m for m, _ in by_machine(select(results, "resnet50"))]
    check_markdown(page, set(chart_files("resnet50", machines)))
    assert SHOWN.replace("\\", "\\\\").replace("[", "\\[") in section(page)
