"""Honest charts (issue 24 points 4 and 5), in the site (Plotly figures) and in the Markdown
report's PNGs (read through matplotlib's objects, not pixels): noisy and smoke results marked
on the bar or point with a legend entry saying what the mark means, one colour per framework,
latency only for inference and LoadGen, peak memory beside the throughput, the history's axis
toggle, min-max band and points that never hide each other, and every trace's meta.select."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest
from matplotlib.colors import to_hex
from test_report import make_result, sample_results
from test_site import site_results

from dlperf.identity import machine_of
from dlperf.report._data import select
from dlperf.report.chart import (
    MARK_MEANING,
    NOISY,
    SMOKE,
    draw_chart,
    draw_scaling_chart,
    marks_of,
    peak_memory,
)
from dlperf.report.figures import (
    BAND,
    KEY_AXES,
    RINGS,
    history_figure,
    latency_figure,
    scaling_figure,
    throughput_figure,
)
from dlperf.report.look import SELECT_KEYS, framework_colour, select_keys
from dlperf.report.site import history
from dlperf.resultio import load_result
from dlperf.schema import Result
from dlperf.store import ResultStore

REAL = Path(__file__).parent / "data" / "real_results"
DEFAULT = "20261127T151322Z-59d9dc"  # pytorch, its default practice at 64 px
TF = "20261127T151447Z-f4cc74"


def real_results() -> list[Result]:
    return [load_result(path) for path in sorted(REAL.glob("*/*.json"))]


def real(result_id: str) -> Result:
    return next(r for r in real_results() if r.id == result_id)


def marked(result: Result, noisy: bool, smoke: bool) -> Result:
    """A copy of a real result that is noisy or not, a smoke run (its 64 px smoke preset) or
    a full-size one (the dlperf preset's 224 px)."""
    spec = result.spec
    if not smoke:
        spec = spec.model_copy(update={"preset": "dlperf", "image_size": 224})
    metrics = result.metrics.model_copy(update={"noisy": noisy})
    return result.model_copy(update={"spec": spec, "metrics": metrics})


def without_memory(result: Result) -> Result:
    repeats = [r.model_copy(update={"telemetry": None}) for r in result.repeats]
    return result.model_copy(update={"repeats": repeats})


def recorded_peak_gib(result_id: str) -> float:
    """The highest memory reading of any ok repeat, read from the JSON file itself."""
    path = next(REAL.glob(f"*/{result_id}.json"))
    repeats = json.loads(path.read_text())["repeats"]
    return max(r["telemetry"]["memory_mib"]["max"] for r in repeats if r["status"] == "ok") / 1024


def drawn(trace) -> int:
    """The points a trace draws (a legend key's one empty point is none)."""
    return sum(x is not None for x in (trace.x or ()))


def check_select(figure, results) -> None:
    """Every trace has meta.select: one dict of `look.select_keys` per point drawn."""
    allowed = [select_keys(r) for r in results]
    for trace in figure.data:
        keys = trace.meta["select"]
        assert len(keys) == drawn(trace), trace.name
        for k in keys:
            assert tuple(k) == SELECT_KEYS and k in allowed, (trace.name, k)


def by_name(figure) -> dict:
    """Traces by name, the first of a name (a framework's memory bars follow its throughput)."""
    out: dict = {}
    for trace in figure.data:
        out.setdefault(html.unescape(trace.name), trace)
    return out


# ---------------------------------------------------------------- the site's figures


def test_noisy_and_smoke_bars_are_marked_with_a_legend_key() -> None:
    """The real results are all noisy smoke runs; copies that are neither, or noisy only,
    show each case: the pattern and the words on the bar, and a legend key per mark drawn."""
    pytorch, tf = real(DEFAULT), real(TF)
    figure = throughput_figure(select([pytorch, marked(tf, False, False)], "resnet50"), "resnet50")
    bars = by_name(figure)
    assert list(bars["pytorch"].marker.pattern.shape) == ["x"]
    assert list(bars["pytorch"].text)[0] == "noisy · smoke"
    assert list(bars["tensorflow"].marker.pattern.shape) == [""]
    assert list(bars["tensorflow"].text)[0] == ""
    (key,) = [name for name, t in bars.items() if drawn(t) == 0 and "pytorch" not in name]
    assert MARK_MEANING[NOISY] in key and MARK_MEANING[SMOKE] in key
    # the memory panel marks the same bars (legend once, by framework)
    assert [list(t.marker.pattern.shape) for t in figure.data if t.yaxis == "y2"] == [["x"], [""]]

    figure = throughput_figure([marked(pytorch, True, False), marked(tf, False, False)], "resnet50")
    bars = by_name(figure)
    assert list(bars["pytorch"].marker.pattern.shape) == ["/"]
    assert list(bars["pytorch"].text) == ["noisy"] and "smoke" not in str(bars["pytorch"].hovertext)
    keys = [name for name, t in bars.items() if drawn(t) == 0]
    assert len(keys) == 1 and keys[0].startswith("noisy (hatched") and SMOKE not in keys[0]
    plain = throughput_figure([marked(r, False, False) for r in (pytorch, tf)], "resnet50")
    assert all(drawn(t) for t in plain.data)  # no mark, no legend key


def test_one_colour_per_framework_on_every_site_chart(tmp_path: Path) -> None:
    results = site_results()
    chosen = select(results, "resnet50")
    for trace in throughput_figure(chosen, "resnet50").data:
        if drawn(trace):
            assert trace.marker.color == framework_colour(html.unescape(trace.name))
    for trace in scaling_figure(chosen, "resnet50").data:
        if drawn(trace):
            assert trace.line.color == framework_colour(trace.name.split()[0])
    latency = latency_figure(chosen, "resnet50")
    for trace in latency.data:
        assert trace.marker.color == framework_colour(trace.name.split()[0])
    folder = tmp_path / "results"
    for r in results:
        ResultStore(folder).write(r)
    points = history(folder)
    lines = {key[0].split("-")[0]: line for key, line in points.items() if len(line) > 1}
    for name, trace in by_name(history_figure("t", lines)).items():
        if name in lines:
            assert trace.line.color == framework_colour(name)
    # the PNG: its bars in the same colours
    fig = draw_chart(results, "resnet50")
    colours = {to_hex(p.get_facecolor()) for p in fig.axes[0].patches}
    assert colours == {framework_colour("pytorch"), framework_colour("tensorflow")}


def test_latency_is_drawn_for_inference_only() -> None:
    """Training steps are not a latency anyone waits for: real training results give no
    latency chart, though their steps' percentiles are recorded; inference results do."""
    train = real_results()
    assert all(r.metrics.latency_ms for r in train)
    assert latency_figure(select(train, "resnet50"), "resnet50") is None
    chosen = select(site_results(), "resnet50")
    figure = latency_figure(chosen, "resnet50")
    inference = [r for r in chosen if r.spec.mode == "infer"]
    assert len(figure.data) == len(inference) == 2
    assert all(" infer " in t.name for t in figure.data)
    assert "inference latency" in figure.layout.title.text
    assert "inference" in figure.layout.yaxis.title.text
    check_select(figure, chosen)


def test_peak_memory_is_drawn_beside_the_throughput() -> None:
    results = real_results()
    chosen = select(results, "resnet50")
    figure = throughput_figure(chosen, "resnet50")
    memory = {html.unescape(t.name): list(t.y) for t in figure.data if t.yaxis == "y2"}
    assert memory == {
        "pytorch": [pytest.approx(recorded_peak_gib(DEFAULT))],
        "tensorflow": [pytest.approx(recorded_peak_gib(TF))],
    }
    # two lines: one would be longer than its panel is high (issue 32)
    assert figure.layout.yaxis2.title.text == "peak GiB used<br>(host RAM, whole machine)"
    assert figure.layout.yaxis.title.text == "median samples/s<br>(error bars: min–max)"
    # nothing recorded memory: no panel, no second axis
    bare = throughput_figure([without_memory(r) for r in chosen], "resnet50")
    drawn = [t for t in bare.data if t.meta["select"]]  # legend keys carry none
    assert all(t.yaxis in (None, "y") for t in drawn) and "yaxis2" not in bare.layout
    # the marks' legend keys sit on hidden axes of their own: on the chart's they would take
    # a slot in every group, and the bars above would no longer line up with those below
    keys = [t for t in figure.data if not t.meta["select"] and t.type == "bar"]
    assert keys and all((t.xaxis, t.yaxis) == KEY_AXES for t in keys)
    assert not figure.layout.xaxis99.visible and not figure.layout.yaxis99.visible
    # the energy chart never grows a memory panel
    assert throughput_figure(chosen, "resnet50", metric="energy") is None


def with_peak_rss(result: Result, mib: float, device: str | None = None) -> Result:
    """A result whose ok repeats reported `mib` as their peak RSS (schema 8; these real results
    are schema 7, measured before it), its telemetry relabelled `device` if given."""
    repeats = []
    for r in result.repeats:
        update: dict = {"peak_rss_mib": mib + r.index}
        if device and r.telemetry:
            update["telemetry"] = r.telemetry.model_copy(update={"device": device})
        repeats.append(r.model_copy(update=update))
    return result.model_copy(update={"repeats": repeats})


def test_a_workloads_own_peak_rss_is_preferred_to_the_machines_ram() -> None:
    """On a CPU the workload's own high-water mark is its memory (the machine's RAM in use
    counts every other program); on a GPU the device's memory is what limits a batch."""
    chosen = select(real_results(), "resnet50")
    own = [with_peak_rss(r, 900.0) for r in chosen]
    figure = throughput_figure(own, "resnet50")
    memory = sorted(y for t in figure.data if t.yaxis == "y2" for y in t.y)
    # each headline's bar: its highest ok repeat's report (900 MiB + the repeat's index)
    peaks = [(900.0 + max(x.index for x in r.repeats if x.status.value == "ok")) / 1024
             for r in own if r.id in (DEFAULT, TF)]  # fmt: skip
    assert memory == pytest.approx(sorted(peaks))
    assert figure.layout.yaxis2.title.text == "peak GiB used<br>(workload process, peak RSS)"
    assert peak_memory(own[0]).device == "process"
    gpu = with_peak_rss(chosen[0], 900.0, device="cuda")
    assert peak_memory(gpu).device == "cuda"
    assert peak_memory(gpu).gib == pytest.approx(
        max(x.telemetry.memory_mib.max for x in gpu.repeats if x.status.value == "ok") / 1024
    )
    # the PNG's memory axis says the same
    fig = draw_chart(own, "resnet50")
    assert fig.axes[1].get_ylabel() == "peak GiB used (workload process, peak RSS)"


def test_every_trace_of_every_figure_carries_select_keys(tmp_path: Path) -> None:
    results = [*site_results(), *real_results()]
    folder = tmp_path / "results"
    for r in results:
        ResultStore(folder).write(r)
    figures = []
    for machine_results in (site_results(), real_results()):
        chosen = select(machine_results, "resnet50")
        figures += [throughput_figure(chosen, "resnet50"), scaling_figure(chosen, "resnet50"),
                    latency_figure(chosen, "resnet50")]  # fmt: skip
    lines = {f"{key[0]} {key[1]}": line for key, line in history(folder).items()}
    figures.append(history_figure("t", lines))
    figures = [f for f in figures if f is not None]
    assert len(figures) == 5  # real results: no scaling, no latency
    for figure in figures:
        check_select(figure, results)
    # a history point's keys are its result's, though read from the index
    (figure,) = figures[-1:]
    ids = {r.id: r for r in results}
    for trace in figure.data:
        if trace.customdata is not None:
            for row, keys in zip(trace.customdata, trace.meta["select"], strict=True):
                assert keys == select_keys(ids[html.unescape(row[0])])


# ---------------------------------------------------------------- history


def _two_frameworks_at_once(folder: Path) -> dict:
    """TensorFlow and OneFlow measured at the same moments, OneFlow 4.26 samples/s where
    TensorFlow made 4.25: two series whose points fall on each other."""
    for fw, values, version in (("tensorflow", [4.25, 4.20, 4.30], "2.16.1"),
                                ("oneflow", [4.26, 4.21, 4.31], "0.9.0")):  # fmt: skip
        for day, scale in (("01", 1.0), ("02", 1.001)):
            r = make_result(fw, [v * scale for v in values], version=version,
                            created=f"2024-06-{day}T12:00:00+00:00")  # fmt: skip
            ResultStore(folder).write(r.model_copy(update={"id": f"202406{day}T120000Z-{fw}"}))
    return {key[0].split("-")[0]: line for key, line in history(folder).items()}


def on_axis(figure, axis: str) -> list:
    """The traces drawn on x-axis `axis` ("x": time, "x2": framework, "x3": dlperf version)."""
    return [t for t in figure.data if (t.xaxis or "x") == axis and drawn(t)]


def test_history_points_never_hide_each_other(tmp_path: Path) -> None:
    lines = _two_frameworks_at_once(tmp_path / "results")
    figure = history_figure("t", dict(sorted(lines.items())))
    one, tf = by_name(figure)["oneflow"], by_name(figure)["tensorflow"]
    assert list(one.x) == list(tf.x)  # the same moments
    assert [round(y, 2) for y in one.y] == [4.26] * 2
    assert [round(y, 2) for y in tf.y] == [4.25] * 2
    # a symbol per series, and the one drawn later smaller: the first still shows around it
    assert one.marker.symbol != tf.marker.symbol
    assert tf.marker.size < one.marker.size
    # on a version axis every point has its own place
    for axis in ("x2", "x3"):
        placed = [x for t in on_axis(figure, axis) if t.customdata is not None for x in t.x]
        assert len(set(placed)) == len(placed) == 4, axis


def test_history_axis_toggles_between_time_and_versions(tmp_path: Path) -> None:
    """Each x-axis has its own traces; a button shows one set (and the legend keys) and its
    axis, and rewrites no data (the page's selectors filter the points meanwhile)."""
    folder = tmp_path / "results"
    for r in site_results():
        ResultStore(folder).write(r)
    points = history(folder)
    lines = {key[0].split("-")[0]: line for key, line in points.items() if len(line) > 1}
    figure = history_figure("t", dict(sorted(lines.items())))
    menu = figure.layout.updatemenus[0]
    assert [b.label for b in menu.buttons] == ["by time", "by framework version",
                                               "by dlperf version"]  # fmt: skip
    axes = ["x", "x2", "x3"]
    axis_of = [t.xaxis or ("key" if not drawn(t) else "x") for t in figure.data]
    sets = [[(t.name, list(t.y)) for t in on_axis(figure, axis)] for axis in axes]
    assert sets[0] == sets[1] == sets[2] and len(sets[0]) == 2 * 2 + 2  # bands, lines, rings
    for m, button in enumerate(menu.buttons):
        assert button.method == "update"
        data, layout = button.args
        assert [axis for axis, shown in zip(axis_of, data["visible"], strict=True) if shown] == [
            axis for axis in axis_of if axis in (axes[m], "key")]  # fmt: skip
        assert layout == {"xaxis.visible": m == 0, "xaxis2.visible": m == 1,
                          "xaxis3.visible": m == 2}  # fmt: skip
        assert set(data) == {"visible"}  # no data rewritten
    assert [t.visible is not False for t in figure.data] == [a in ("x", "key") for a in axis_of]
    assert figure.layout.xaxis.type == "date"
    assert figure.layout.xaxis2.type == "linear" and figure.layout.xaxis2.overlaying == "x"
    # versions in order as numbers, each framework's together
    assert list(figure.layout.xaxis2.ticktext) == [
        "pytorch 2.1.0", "pytorch 2.2.0", "pytorch 2.3.1", "tensorflow 2.15.0",
        "tensorflow 2.16.1",
    ]  # fmt: skip
    assert list(figure.layout.xaxis3.ticktext) == ["dlperf 0.1.0"]
    (line,) = [t for t in on_axis(figure, "x2") if t.name == "pytorch"]
    assert [round(x) for x in line.x] == [0, 1, 2, 2]  # 2.3.1 twice, side by side
    assert len(set(line.x)) == 4


def test_history_band_and_marks_from_real_results(tmp_path: Path) -> None:
    """The real PyTorch series (default, then channels_last=1): its band is each result's
    repeats' min-max; both points noisy smoke runs: hollow, named, and the legend says so."""
    folder = tmp_path / "results"
    shutil.copytree(REAL, folder, ignore=shutil.ignore_patterns("*.md"))
    points = history(folder)
    machine = machine_of(real(DEFAULT)).id
    line = points[("pytorch-resnet50-train-fp32-cpu-1x1-b4-i64-c8a15c", machine)]
    figure = history_figure("t", {"pytorch": line})
    traces = by_name(figure)
    band, main = traces["pytorch: min–max"], traces["pytorch"]
    results = {r.id: r for r in real_results()}
    lows = [results[p.result_id].metrics.throughput.min for p in line]
    highs = [results[p.result_id].metrics.throughput.max for p in line]
    assert list(band.y) == pytest.approx(highs + lows[::-1])
    assert band.fill == "toself" and list(band.x) == list(main.x) + list(main.x)[::-1]
    assert list(main.text) == ["noisy · smoke"] * 2
    assert list(main.marker.color) == ["white"] * 2  # hollow
    assert all(marks_of(results[p.result_id]) == (NOISY, SMOKE) for p in line)
    keys = [name for name, t in traces.items() if drawn(t) == 0]
    assert BAND in keys
    assert any(MARK_MEANING[NOISY] in k and MARK_MEANING[SMOKE] in k for k in keys)
    # the channels_last point changed a setting: ringed, and the ring's legend says so
    ring = traces[RINGS["changed"][2]]
    assert list(ring.y) == [line[1].median] and list(ring.x) == [main.x[1]]


# ---------------------------------------------------------------- the PNGs


def test_png_marks_noisy_and_smoke_bars_and_says_what_they_mean() -> None:
    pytorch, tf = real(DEFAULT), real(TF)
    fig = draw_chart([pytorch, marked(tf, False, False)], "resnet50")
    throughput, memory = fig.axes
    for ax in (throughput, memory):
        assert [p.get_hatch() for p in ax.patches] == ["//..", None]
        assert [to_hex(p.get_facecolor()) for p in ax.patches] == [
            framework_colour("pytorch"), framework_colour("tensorflow")]  # fmt: skip
        assert [t.get_text() for t in ax.texts] == ["noisy · smoke"]
    legend = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert legend == [
        f"noisy (hatched, named on the bar): {MARK_MEANING[NOISY]}",
        f"smoke (hatched, named on the bar): {MARK_MEANING[SMOKE]}",
        "pytorch", "tensorflow",
    ]  # fmt: skip
    fig = draw_chart([marked(pytorch, True, False), marked(tf, False, False)], "resnet50")
    assert [p.get_hatch() for p in fig.axes[0].patches] == ["//", None]
    legend = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert legend == [f"noisy (hatched, named on the bar): {MARK_MEANING[NOISY]}", "pytorch",
                      "tensorflow"]  # fmt: skip


def test_png_memory_panel_only_where_memory_was_recorded() -> None:
    results = real_results()
    fig = draw_chart(results, "resnet50")
    throughput, memory = fig.axes
    assert throughput.get_ylabel() == "samples/s (median; error bars: min–max)"
    assert memory.get_ylabel() == "peak GiB used (host RAM, whole machine)"
    assert [p.get_height() for p in memory.patches] == pytest.approx(
        [recorded_peak_gib(DEFAULT), recorded_peak_gib(TF)]
    )
    assert len(draw_chart([without_memory(r) for r in results], "resnet50").axes) == 1
    assert len(draw_chart(sample_results(), "resnet50").axes) == 1  # none recorded memory


def test_png_scaling_lines_in_framework_colours_and_marks() -> None:
    fig = draw_scaling_chart(sample_results(), "resnet50")
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert to_hex(lines["pytorch cpu fp32 b128"].get_color()) == framework_colour("pytorch")
    assert to_hex(lines["pytorch cuda fp32 b128"].get_color()) == framework_colour("pytorch")
    assert (
        lines["pytorch cpu fp32 b128"].get_linestyle()
        != lines["pytorch cuda fp32 b128"].get_linestyle()
    )
    # the busy 2-node CPU run is noisy: hollow and named beside its point
    assert [t.get_text() for t in ax.texts] == ["noisy"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"noisy (hollow, named beside it): {MARK_MEANING[NOISY]}" in legend


def test_a_history_of_failed_results_draws_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    for day in ("01", "02"):
        r = make_result("tensorflow", [("crashed", "exited with status 134")] * 3,
                        created=f"2024-06-{day}T12:00:00+00:00")  # fmt: skip
        ResultStore(folder).write(r.model_copy(update={"id": f"202406{day}T120000Z-tf"}))
    (line,) = history(folder).values()
    assert [p.median for p in line] == [None, None]
    assert history_figure("t", {"tensorflow": line}) is None
