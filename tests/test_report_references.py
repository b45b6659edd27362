"""A model page's *Published references (MLPerf Training)* (issue 25, part 2): the real MLPerf
Training fixtures imported beside the user's own results (built as test_report builds them).

The published results get a section of their own, ordered by the user's accelerators first,
and the user's results are held against the best published on the same accelerator model;
nothing else on the page (tables, charts, counts) holds a published result.
"""

from __future__ import annotations

import html
import json
import random
import re
from pathlib import Path

import pytest
from conftest import fixtures_dir
from test_report import make_result
from test_untrusted_text import QUIET_PORT, SHOWN, check_markdown
from untrusted import CLOSE, OPEN, payload

from dlperf.analysis import per_device
from dlperf.identity import machine_of
from dlperf.importers.mlperf_training import import_folders
from dlperf.published import NO_MFU, is_published_reference
from dlperf.report import render_model_report
from dlperf.report._data import by_machine, chart_files, machine_heading, select
from dlperf.report.markdown import NO_OWN_RESULTS
from dlperf.report.references import TITLE
from dlperf.report.site import render_index_page, render_model_page
from dlperf.report.writer import render_index
from dlperf.schema import Result
from dlperf.store import ResultStore

H200 = "NVIDIA H200"  # as nvidia-smi names it; MLPerf's system says NVIDIA H200-SXM5-141GB
A100 = "NVIDIA A100-SXM4-80GB"
RESULTS = "https://github.com/mlcommons/training_results_"  # a round's published results
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
    assert [tuple(r[:5]) for r in rows] == [
        ("NVIDIA H200-SXM5-141GB (as yours)", "mxnet", "NVIDIA", "NVIDIA H200 (8x H200-SXM-141GB)",
         f"[v4.0]({RESULTS}v4.0) closed"),
        ("TPU", "jax", "Google", "tpu-v4-256", f"[v1.0]({RESULTS}v1.0) open"),
    ]  # fmt: skip
    mxnet = next(r for r in published if r.spec.framework == "mxnet")
    assert rows[0][5:8] == ["8 (1 x 8)", f"{per_device(mxnet):,.1f}", f"{mxnet.metrics.score:.2f}"]
    assert rows[1][8] == "— (1)" and "1. MFU: dlperf knows no peak FLOP/s of TPU" in page
    # BERT: the user's A100 puts the A100 row first, though H200's is faster per accelerator
    bert = render_model_report([*published, own_a100()], "bert-large")
    rows = table_rows(section(bert), "accelerator")
    assert [r[0] for r in rows] == [f"{A100} (as yours)", "NVIDIA H200-SXM5-141GB"]
    assert float(rows[0][6].replace(",", "")) < float(rows[1][6].replace(",", ""))
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


def test_the_site_keeps_published_references_out_of_the_selectors(
    published: list[Result], tmp_path: Path
) -> None:
    """Issue 32: the selectors offer the user's machines alone, by name (as the report names
    them), and no framework version of a published result; a published result's rows carry
    no selector keys; each machine's section is one element the machine selector hides whole,
    the published references' section nobody's; the round links its published results."""
    own = [own_h200(), own_cpu()]
    ResultStore(tmp_path).write_all([*published, *own])
    page, _ = render_model_page(ResultStore(tmp_path).load(), "resnet50", {})
    machines = {machine_of(r).id: machine_of(r) for r in own}
    names = json.loads(html.unescape(re.search(r' data-names="([^"]*)"', page).group(1)))
    assert names == {"machine": {i: m.label for i, m in machines.items()}}
    tagged = re.findall(r'<tr data-machine="([^"]+)"[^>]* data-version="([^"]+)"', page)
    assert {m for m, _ in tagged} == set(machines)
    assert {v for _, v in tagged} == {"pytorch 2.3.1"}
    rows = re.findall(r"<tr([^>]*)>((?:(?!</tr>).)*)</tr>", page, flags=re.S)
    for r in published:  # in Raw results, untagged
        expected = [""] if r.spec.model == "resnet50" else []
        assert [attrs for attrs, cells in rows if r.id in cells] == expected, r.id
    heading_ = re.compile(
        r'<section class="machine" data-machine-section="([^"]+)">\n<h2>(.*?)</h2>'
    )
    sections = heading_.findall(page)
    assert sorted(sections) == sorted(
        (i, html.escape(machine_heading(m), quote=False)) for i, m in machines.items()
    )
    assert page.count("<section") == page.count("</section>") == 2
    assert page.index(f"<h2>{TITLE}</h2>") > page.rindex("</section>")
    assert f'<a href="{RESULTS}v4.0">v4.0</a> closed' in page
    assert f'<a href="{RESULTS}v1.0">v1.0</a> open' in page
    assert "<td>tpu-v4-256</td>" in page


def test_machines_whose_names_collide_are_offered_with_their_ids(tmp_path: Path) -> None:
    """Two machines with one label ("AMD EPYC, 2 CPUs" as a CPU's name, and "AMD EPYC" with
    2 CPUs): the selector names each with its id beside (`identity.machine_names`)."""
    one = own_cpu()
    env = one.environment
    other = one.model_copy(update={"id": f"{one.id}-b", "environment": env.model_copy(
        update={"cpu": f"{env.cpu}, {env.cpu_count} CPUs", "cpu_count": None})})  # fmt: skip
    assert machine_of(one).label == machine_of(other).label
    ResultStore(tmp_path).write_all([one, other])
    page, _ = render_model_page(ResultStore(tmp_path).load(), "resnet50", {})
    names = json.loads(html.unescape(re.search(r' data-names="([^"]*)"', page).group(1)))
    label = machine_of(one).label
    assert names["machine"] == {
        m.id: f"{label} (machine {m.id})" for m in (machine_of(one), machine_of(other))
    }


def test_a_chart_over_time_draws_a_submission_at_its_logs_time_and_marks_it(
    published: list[Result], tmp_path: Path
) -> None:
    """Issue 32: a published result's point is at the time its runs started (2021 for the
    v1.0 submission, not the day of the import), framed by a diamond whose legend key says it
    is a published reference; an imported log of the user's its own key; a result dlperf
    measured none."""
    from dlperf.report.figures import IMPORTS, history_figure, plot_text
    from dlperf.report.site import history

    jax = next(r for r in published if r.spec.framework == "jax")
    again = jax.model_copy(update={"id": f"{jax.id}-again", "created": "2022-06-01T00:00:00+00:00"})
    later = own_h200().model_copy(  # an imported log of the user's (not a published result)
        update={"id": "20240701T120000Z-own-h200", "created": "2024-07-01T12:00:00+00:00",
                "origin": "parse"}
    )  # fmt: skip
    ResultStore(tmp_path).write_all([jax, again, own_h200(), later])
    lines = history(tmp_path)
    (theirs,) = [line for line in lines.values() if line[0].framework == "jax"]
    (mine,) = [line for line in lines.values() if line[0].framework == "pytorch"]
    figure = history_figure("jax", {"jax": theirs})
    key = plot_text(IMPORTS["published"][2])
    (framed,) = [t for t in figure.data if t.name == key and t.visible]  # on the time axis
    assert list(framed.x) == ["2021-05-19 04:39:57", "2022-06-01 00:00:00"]
    assert framed.marker.symbol == "diamond-open" and len(framed.meta["select"]) == 2
    ours = history_figure("pytorch", {"pytorch": mine})
    framed = {t.name: list(t.x) for t in ours.data if t.visible and t.name in (
        plot_text(IMPORTS["published"][2]), plot_text(IMPORTS["imported"][2]))}  # fmt: skip
    assert framed == {plot_text(IMPORTS["imported"][2]): ["2024-07-01 12:00:00"]}
