"""`dlperf publish`: the static site (pages, charts, tables, history, raw results, the
regressions page and feed); `test_site_browser.py` opens it in a real browser."""

from __future__ import annotations

import html
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_report import make_result, sample_results

from dlperf import DlperfError
from dlperf.identity import machine_of
from dlperf.report.figures import RINGS, history_figure
from dlperf.report.markdown import render_model_report
from dlperf.report.site import GENERATOR as SITE_GENERATOR
from dlperf.report.site import (
    HISTORY_THRESHOLD,
    PLOTLY_JS,
    history,
    markdown_html,
    render_model_page,
    write_site,
)
from dlperf.schema import Result
from dlperf.store import ResultStore

CUDA_BENCHMARK = "pytorch-resnet50-train-fp32-cuda-1x1-b128-i224"
TF_BENCHMARK = "tensorflow-resnet50-train-fp32-cuda-1x1-b128-i224"
DEFAULT_CUDA = "20240601T120000Z-py1x1cuda"  # PyTorch's default best practice on CUDA, 1x1
ABLATION_CUDA = "20240601T120000Z-py1x1cuda0"  # the same benchmark with channels_last=0
MACHINE = machine_of(make_result("pytorch", [1.0])).id  # every sample result's machine


def load_stored(folder: Path):
    return ResultStore(folder).load()


def _again(result: Result, id_: str, created: str, values: list[float], version: str) -> Result:
    """An older or newer run of `result`'s configuration (another id, time and version)."""
    other = make_result(
        result.spec.framework, values, version=version, created=created,
        practice=result.spec.practice, device=result.spec.device,
        nodes=result.spec.nodes, devices_per_node=result.spec.devices_per_node,
    )  # fmt: skip
    return other.model_copy(update={"id": id_})


def _inference(framework: str, latency: dict[str, float], version: str) -> Result:
    r = make_result(framework, [400.0, 402.0, 398.5], version=version)
    spec = r.spec.model_copy(update={"mode": "infer"})
    metrics = r.metrics.model_copy(update={"latency_ms": latency})
    return r.model_copy(update={"id": f"{r.id}-infer", "spec": spec, "metrics": metrics})


def site_results() -> list[Result]:
    """Several frameworks and versions: the report's sample results (with a channels_last
    ablation of PyTorch's CUDA 1x1), two older PyTorch runs of that benchmark (2.1.0 then
    2.2.0, each faster), a TensorFlow run that got slower, and an inference configuration of
    each framework with latency percentiles."""
    base = sample_results()
    cuda = next(r for r in base if r.id == DEFAULT_CUDA)
    tf = next(r for r in base if r.spec.framework == "tensorflow" and r.spec.world_size == 1)
    return [
        *base,
        _again(cuda, "20240301T120000Z-old1", "2024-03-01T12:00:00+00:00",
               [900.0, 905.0, 898.0], "2.1.0"),
        _again(cuda, "20240401T120000Z-old2", "2024-04-01T12:00:00+00:00",
               [950.0, 948.0, 955.0], "2.2.0"),
        _again(tf, "20240501T120000Z-tfold", "2024-05-01T12:00:00+00:00",
               [1200.0, 1195.0, 1203.0], "2.15.0"),
        _inference("pytorch", {"p50": 2.5, "p90": 2.9, "p95": 3.1, "p99": 3.8, "p99.9": 5.2},
                   "2.3.1"),
        _inference("tensorflow", {"p50": 2.7, "p90": 3.0, "p99": 4.4}, "2.16.1"),
    ]  # fmt: skip


def write_results(folder: Path) -> Path:
    for r in site_results():
        ResultStore(folder).write(r)
    return folder


def _tables(text: str) -> list[str]:
    """The tables, links and the selectors' data-* attributes left out."""
    unlinked = re.sub(r'<a href="[^"]*">(.*?)</a>', r"\1", text)
    unlinked = re.sub(r"<tr(?: data-[a-z]+=\"[^\"]*\")+>", "<tr>", unlinked)
    return re.findall(r"<table>.*?</table>", unlinked, flags=re.S)


def test_the_page_holds_the_markdown_reports_tables(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results")
    stored = load_stored(results)
    page, charts = render_model_page(stored, "resnet50", history(tmp_path / "results"))
    report = render_model_report([s.result for s in stored], "resnet50")
    expected = _tables(markdown_html(report))
    assert len(expected) >= 6
    got = _tables(page)
    for table in expected:
        assert table in got
    # throughput, scaling, latency, then a history chart per cross-framework row with more
    # than one point: PyTorch's and TensorFlow's CUDA 1x1 share theirs, a line each
    assert [c.split("-")[1] for c in charts] == ["throughput", "scaling", "latency", "history"]
    assert len(re.findall(r'class="plotly-graph-div"', page)) == len(charts)
    assert "resnet50.png" not in page  # the report's PNGs are replaced by the charts


def test_every_link_resolves_and_nothing_comes_from_the_network(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results")
    site = write_site(results, tmp_path / "site")
    assert sorted(site.pages) == ["index.html", "regressions.html", "resnet50.html"]
    js = (tmp_path / "site" / PLOTLY_JS).read_bytes()
    import plotly.offline

    assert js == plotly.offline.get_plotlyjs().encode()
    for name in site.pages:
        text = (tmp_path / "site" / name).read_text()
        assert f'<script src="{PLOTLY_JS}"></script>' in text
        assert not re.search(r'(src|href)="(https?:)?//', text), "nothing from the network"
        for href in re.findall(r'(?:src|href)="([^"#]+)"', text):
            from urllib.parse import unquote

            assert (tmp_path / "site" / unquote(href)).is_file(), href
    umask = os.umask(0)
    os.umask(umask)
    for path in (tmp_path / "site").rglob("*"):  # readable as the umask allows, not private
        if path.is_file():
            assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
    copies = sorted((tmp_path / "site" / "results").rglob("*.json"))
    assert len(copies) == site.copied == len(site_results())
    for copy in copies:
        source = results / copy.relative_to(tmp_path / "site" / "results")
        assert copy.read_bytes() == source.read_bytes()
    index = (tmp_path / "site" / "index.html").read_text()
    assert '<a href="resnet50.html">resnet50</a>' in index
    # one row per benchmark x machine x settings, under its machine: the default has 3
    # results, the ablation 1
    machine = "NVIDIA H100 80GB HBM3, AMD EPYC 7R13 Processor, 48 CPUs"
    assert f"<h2>{machine} (machine {MACHINE})</h2>" in index
    row = f"<td><code>{CUDA_BENCHMARK}</code></td>\n<td>channels_last={{}}, cudnn_benchmark=1, "
    row += "fused_optimizer=1</td>\n<td>pytorch</td>\n<td>{}</td>"
    assert row.format(1, 3) in index and row.format(0, 1) in index


def test_a_file_left_untouched_still_gets_the_shared_mode(tmp_path: Path) -> None:
    """Publishing again leaves a file holding the same bytes alone (same inode), but a file
    someone made private is readable by others again, as the umask allows."""
    from dlperf.files import shared_mode

    results = write_results(tmp_path / "results")
    write_site(results, tmp_path / "site")
    page = tmp_path / "site" / "resnet50.html"
    page.chmod(0o600)
    inode = page.stat().st_ino
    write_site(results, tmp_path / "site")
    assert page.stat().st_ino == inode  # not rewritten
    assert page.stat().st_mode & 0o777 == shared_mode()


def test_the_site_is_deterministic(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results")
    write_site(results, tmp_path / "a")
    write_site(results, tmp_path / "b")
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*"))
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*"))
    assert files_a == files_b
    for rel in files_a:
        if (tmp_path / "a" / rel).is_file():
            assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    stored = load_stored(results)
    points = history(results)
    shuffled = list(stored)
    random.Random(7).shuffle(shuffled)
    assert render_model_page(shuffled, "resnet50", points) == render_model_page(
        stored, "resnet50", points
    )


def test_history_keeps_one_series_through_settings_and_versions(tmp_path: Path) -> None:
    """A series is a benchmark on a machine: PyTorch's CUDA 1x1 on 2.1.0, 2.2.0, 2.3.1 and
    then with channels_last off is one line, each point judged against the one before, and
    what changed (a version, a setting) is on the point."""
    points = history(write_results(tmp_path / "results"))
    cuda = points[(CUDA_BENCHMARK, MACHINE)]
    assert [p.result_id for p in cuda] == [
        "20240301T120000Z-old1", "20240401T120000Z-old2", DEFAULT_CUDA, ABLATION_CUDA,
    ]  # fmt: skip
    assert [p.median for p in cuda] == [900.0, 950.0, 1008.9, 702.0]
    # 3 vs 3 repeats: the means' 95% t-intervals do not overlap, beyond 5 %
    assert [p.verdict for p in cuda] == ["first", "improvement", "improvement", "regression"]
    assert [p.framework_version for p in cuda] == ["2.1.0", "2.2.0", "2.3.1", "2.3.1"]
    assert cuda[3].changes == ("setting channels_last 1 -> 0",)
    tf = points[(TF_BENCHMARK, MACHINE)]
    assert [p.verdict for p in tf] == ["first", "regression"]  # 1200 -> 992.7 (2 ok repeats)
    failed = points[("tensorflow-resnet50-train-fp32-cuda-1x2-b128-i224", MACHINE)]
    assert [p.median for p in failed] == [None]

    figure = history_figure("t", {"pytorch": cuda})
    traces = {html.unescape(t.name): t for t in figure.data if (t.xaxis or "x") == "x"}
    trace = traces["pytorch"]  # drawn over time (the version axes' traces start hidden)
    assert list(trace.y) == [900.0, 950.0, 1008.9, 702.0]
    assert list(trace.x) == ["2024-03-01 12:00:00", "2024-04-01 12:00:00",
                             "2024-06-01 12:00:00", "2024-06-01 12:00:00"]  # fmt: skip
    # hover data is escaped text (Plotly reads it as HTML): unescaped, it reads as written
    first, second, last = ([html.unescape(v) for v in trace.customdata[i]] for i in (0, 1, 3))
    assert first[0] == "20240301T120000Z-old1" and first[5] == "first result"
    assert second[2] == "framework 2.2.0, python 3.11.9, dlperf 0.1.0"
    assert second[4] == "improvement" and second[5] == "framework 2.1.0 -> 2.2.0"
    assert last[5] == "setting channels_last 1 -> 0"
    assert last[6] == "channels_last=0, cudnn_benchmark=1, fused_optimizer=1"
    # significant changes ringed over their points, each ring's legend entry saying what it is
    assert list(traces[RINGS["improvement"][2]].y) == [950.0, 1008.9]
    assert list(traces[RINGS["regression"][2]].y) == [702.0]
    assert RINGS["changed"][2] not in traces  # every change here moved the median

    # a change that moved nothing beyond noise: ringed as changed, the change in its hover
    ablation = next(r for r in sample_results() if r.id == ABLATION_CUDA)
    same = _again(ablation, "20240701T120000Z-new", "2024-07-01T12:00:00+00:00",
                  [701.0, 703.5, 702.5], "2.4.0")  # fmt: skip
    ResultStore(tmp_path / "results").write(same)
    line = history(tmp_path / "results")[(CUDA_BENCHMARK, MACHINE)]
    assert line[-1].verdict == "no change"
    figure = history_figure("t", {"pytorch": line})
    traces = {html.unescape(t.name): t for t in figure.data if (t.xaxis or "x") == "x"}
    assert list(traces[RINGS["changed"][2]].y) == [702.5]
    trace = traces["pytorch"]
    assert html.unescape(trace.customdata[-1][5]) == "framework 2.3.1 -> 2.4.0"


def test_publish_refuses_a_foreign_folder_and_prunes_its_own(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results")
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(DlperfError, match="holds other files"):
        write_site(results, foreign)
    with pytest.raises(DlperfError, match="overlaps the results folder"):
        write_site(results, tmp_path)
    site = tmp_path / "site"
    write_site(results, site)
    gone = next((site / "results").glob("tensorflow-*/*.json"))
    (results / gone.relative_to(site / "results")).unlink()
    write_site(results, site)
    assert not gone.exists()
    with pytest.raises(DlperfError, match="no results"):
        write_site(tmp_path / "empty", tmp_path / "site2")


def _tree(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `folder` with its bytes and mode (links not followed)."""
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mode)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.multiprocess
def test_publish_never_follows_a_symlink_out_of_its_site(tmp_path: Path) -> None:
    """Issue 23 row 1: a link in the site (to another results folder's configuration, to a
    file, to nowhere; in place of the site's own results/, assets/, a configuration folder or a
    page) is never followed: the other folder's files keep their bytes and modes, publish
    succeeds, and the links are removed as links or left as they are."""
    results = write_results(tmp_path / "results")
    other = tmp_path / "other"
    other_results = write_results(other / "results")
    (other / "notes.html").write_text(f"<html><head>{SITE_GENERATOR}</head></html>\n")
    (other / "assets").mkdir()
    (other / "assets" / "theirs.css").write_text("body {}\n")
    (other / "assets" / "plotly.min.js").write_text("theirs\n")
    before = _tree(other)
    other_config = max(
        (p for p in other_results.iterdir() if p.is_dir()), key=lambda p: len(list(p.iterdir()))
    )
    assert len(list(other_config.glob("*.json"))) >= 2  # as the probe's: two JSONs

    site = tmp_path / "site"
    write_site(results, site)
    ours = next(p for p in sorted((site / "results").iterdir()) if p.is_dir())
    (site / "results" / "x").symlink_to(other_config)  # the probe's link
    (site / "results" / "dangling").symlink_to(tmp_path / "nowhere")
    (site / "results" / ours.name / "gone.json").symlink_to(next(other_config.glob("*.json")))
    (site / "results" / ours.name / "loop.json").symlink_to("loop.json")
    (site / "stale.html").symlink_to(other / "notes.html")  # a "page of ours" elsewhere
    shutil.rmtree(site / "assets")
    (site / "assets").symlink_to(other / "assets")
    write_site(results, site)
    assert _tree(other) == before
    assert (site / "results" / "x").is_symlink() and (site / "stale.html").is_symlink()
    assert not (site / "assets").is_symlink()  # the site's own folder took its place
    assert (site / "assets" / "plotly.min.js").read_bytes() != b"theirs\n"

    # The site's own results/ folder, then one of its configurations, are links elsewhere.
    for link, target in ((site / "results", other_results), (ours, other_config)):
        shutil.rmtree(link)
        link.symlink_to(target)
        write_site(results, site)
        assert _tree(other) == before
        assert not link.is_symlink() and link.is_dir()
    assert _tree(site / "results") == {
        k: v for k, v in _tree(results).items() if not k.startswith(".")
    }

    # From the command line, with the probe's link again: no traceback, exit 0.
    (site / "results" / "y").symlink_to(other_config)
    done = subprocess.run(
        [sys.executable, "-m", "dlperf", "publish", "--results-dir", str(results),
         "--out", str(site)], capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert _tree(other) == before


def test_a_page_shows_the_telemetry_table_and_the_samples_per_joule_chart(
    tmp_path: Path,
) -> None:
    from dlperf.schema import MetricRange, Telemetry

    r = make_result("pytorch", [100.0, 102.0, 101.0])
    power = MetricRange(min=250.0, mean=300.0, max=320.0)
    repeats = [
        rep.model_copy(update={"telemetry": Telemetry(
            device="cuda", devices=["GPU 0"], period_s=0.2, samples=50, power_w=power,
            energy_j=40.0, energy_source="nvml", energy_method="counter")})
        for rep in r.repeats
    ]  # fmt: skip
    metrics = r.metrics.model_copy(update={"samples_per_joule": 312.5})
    measured = r.model_copy(update={"repeats": repeats, "metrics": metrics})
    ResultStore(tmp_path / "results").write(measured)
    stored = load_stored(tmp_path / "results")
    page, charts = render_model_page(stored, "resnet50", history(tmp_path / "results"))
    report = render_model_report([s.result for s in stored], "resnet50")
    assert "## Telemetry" in report  # the report's own table, converted on the page
    assert "<h2>Energy: samples per joule</h2>" in page
    assert "<summary>Telemetry: utilization, clocks, power and energy per result</summary>" in page
    assert any(c.split("-")[1] == "energy" for c in charts)


# ---------------------------------------------------------------- overview, changes, selectors


def _cells(table_html: str) -> list[list[str]]:
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table_html, flags=re.S)
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[dh]>(.*?)</t[dh]>", r, re.S)]
            for r in rows]  # fmt: skip


def test_the_index_counts_agree(tmp_path: Path) -> None:
    """Issue 24: the models table's configurations and stored results are the rows of the
    machines' configuration tables and the sum of their `stored results` (the reports' index
    counted the newest result of each configuration, the configuration table every one)."""
    results = write_results(tmp_path / "results")
    write_site(results, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    models, *machines = re.findall(r"<table>.*?</table>", index, flags=re.S)
    header, row = _cells(models)
    model = dict(zip(header, row, strict=True))
    assert model["model"] == "resnet50"
    (configurations,) = machines  # one machine
    header, *rows = _cells(configurations)
    column = header.index("stored results")
    assert int(model["configurations"]) == len(rows) == 9
    assert int(model["stored results"]) == sum(int(r[column]) for r in rows) == 12
    assert sorted(int(r[column]) for r in rows) == [1] * 7 + [2, 3]


def test_significant_changes_are_compares_verdicts_newest_first(tmp_path: Path) -> None:
    """Stored results whose changes are known: PyTorch's CUDA 1x1 improved twice (2.1.0 ->
    2.2.0 -> 2.3.1) then regressed with channels_last off; TensorFlow's regressed (1200 ->
    992.7). Each is history's verdict, the one `dlperf compare`'s test gives the two results."""
    from dlperf.report.regressions import significant_changes
    from dlperf.stats import judge

    points = history(write_results(tmp_path / "results"))
    changes = significant_changes(p for line in points.values() for p in line)
    assert [(c.kind, c.before.result_id, c.after.result_id) for c in changes] == [
        ("regression", "20240501T120000Z-tfold", "20240601T120000Z-te1x1cuda"),
        ("regression", DEFAULT_CUDA, ABLATION_CUDA),
        ("improvement", "20240401T120000Z-old2", DEFAULT_CUDA),
        ("improvement", "20240301T120000Z-old1", "20240401T120000Z-old2"),
    ]
    for c in changes:
        assert judge(c.before.values, c.after.values, True, HISTORY_THRESHOLD).verdict == c.kind
    only = significant_changes((p for line in points.values() for p in line), improvements=False)
    assert [c.kind for c in only] == ["regression", "regression"]


def test_the_feed_stays_xml_whatever_the_results_hold(tmp_path: Path) -> None:
    """Stored text with control characters (an imported log's framework version, say) is
    shown escaped in the feed: XML 1.0 cannot hold most of them, and a feed with one would not
    parse in any reader."""
    import xml.etree.ElementTree as ET
    from dataclasses import replace

    from dlperf.report.regressions import Change, render_feed, significant_changes

    points = history(write_results(tmp_path / "results"))
    changes = significant_changes(p for line in points.values() for p in line)
    hostile = "framework 2.1 -> \x1b]52;c;aGk=\x07\x00\x1b[2J"
    feed = render_feed([Change(c.before, replace(c.after, changes=(hostile,))) for c in changes],
                       "2024-06-01T12:00:00+00:00")  # fmt: skip
    root = ET.fromstring(feed)
    summaries = [e.text for e in root.iter("{http://www.w3.org/2005/Atom}summary")]
    assert len(summaries) == len(changes) == 4
    assert all("\\x1b]52;c;aGk=\\x07\\x00\\x1b[2J" in s for s in summaries)
    assert all("\n" in s for s in summaries)  # its lines kept


def test_the_regressions_page_and_feed(tmp_path: Path) -> None:
    """regressions.html: a row per change, newest first, with both results' JSON, versions
    and settings; regressions.xml: Atom 1.0 with an entry per change (ids, the newer result's
    time, links relative to the site that resolve); the index lists them, labelled."""
    import xml.etree.ElementTree as ET
    from urllib.parse import unquote

    atom = "{http://www.w3.org/2005/Atom}"
    write_site(write_results(tmp_path / "results"), tmp_path / "site")
    site = tmp_path / "site"
    page = (site / "regressions.html").read_text()
    rows = re.findall(r'<tr id="(change-[0-9a-f]{8})">(.*?)</tr>', page, flags=re.S)
    assert len(rows) == 4
    first = rows[0][1]
    assert '<span class="regression">regression</span><br>-17.3% samples/s' in first
    assert "tensorflow 2.15.0, dlperf 0.1.0" in first and "tensorflow 2.16.1" in first
    assert "data_format=channels_first, gpu_thread_mode=gpu_private" in first
    assert "framework 2.15.0 -&gt; 2.16.1" in first
    for href in re.findall(r'href="(results/[^"]+)"', page):
        assert (site / unquote(href)).is_file()
    root = ET.parse(site / "regressions.xml").getroot()
    assert root.tag == f"{atom}feed" and root.findtext(f"{atom}id").startswith("urn:uuid:")
    assert root.findtext(f"{atom}author/{atom}name") == "dlperf publish"
    entries = root.findall(f"{atom}entry")
    assert [e.find(f"{atom}link").get("href") for e in entries] == [
        f"regressions.html#{anchor}" for anchor, _ in rows
    ]
    assert len({e.findtext(f"{atom}id") for e in entries}) == 4
    assert [e.findtext(f"{atom}updated") for e in entries] == [
        "2024-06-01T12:00:00+00:00"] * 3 + ["2024-04-01T12:00:00+00:00"]  # fmt: skip
    assert root.findtext(f"{atom}updated") == "2024-06-01T12:00:00+00:00"
    for entry in entries:
        related = [x.get("href") for x in entry.findall(f"{atom}link") if x.get("rel") == "related"]
        assert len(related) == 2 and all((site / unquote(h)).is_file() for h in related)
    index = (site / "index.html").read_text()
    assert index.count('<span class="regression">regression</span>') == 2
    assert index.count('<span class="improvement">improvement</span>') == 2
    # the machine in full, on the index as on the regressions page (issue 32)
    named = f"on {html.escape(machine_of(site_results()[0]).label)} (<code>{MACHINE}</code>)"
    assert index.count(named) == page.count(named) == 4


def test_a_model_page_reads_and_carries_the_selectors_keys(tmp_path: Path) -> None:
    """The method text is collapsed (closed <details>), the selectors come before it, the
    page loads assets/select.js, and each result's rows carry its `look.select_keys`."""
    from dlperf.report.look import select_keys

    write_site(write_results(tmp_path / "results"), tmp_path / "site")
    page = (tmp_path / "site" / "resnet50.html").read_text()
    assert '<div class="selectors" id="selectors"' in page
    assert page.index('id="selectors"') < page.index('<details class="method">')
    assert "<summary>How these numbers were measured</summary>" in page
    assert "<details open" not in page and "<h2>How these numbers were measured</h2>" not in page
    assert '<script src="assets/select.js" defer></script>' in page
    assert (tmp_path / "site" / "assets" / "select.js").is_file()
    for r in site_results():
        keys = select_keys(r)
        attributes = "".join(f' data-{k}="{html.escape(v)}"' for k, v in keys.items())
        rows = re.findall(r"<tr([^>]*)>((?:(?!</tr>).)*)</tr>", page, flags=re.S)
        mine = [attrs for attrs, cells in rows if f">{r.id}</a></td>" in cells]
        # its row in All results (the newest of each configuration) and in Raw results
        older = r.id.endswith(("-old1", "-old2", "-tfold"))
        assert mine == [attributes] * (1 if older else 2), r.id
