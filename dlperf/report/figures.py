"""The site's Plotly charts of one machine's results: throughput (or samples per joule) with
the peak memory under it, scaling, inference latency percentiles, and history (a line per
series, a benchmark on one machine, over time or versions). Each figure function returns a
plotly Figure, or None when there is nothing to draw; `Charts` turns them into the page's HTML
with stable ids. plotly is imported when a chart is made.

As the PNGs (`chart`): one colour per framework, noisy and smoke results marked on the bar or
point with a legend key saying what the mark means. Every trace carries
`meta={"select": [...]}`, one `look.select_keys` dict per point drawn, so the page's selectors
can filter it; a legend key draws no point and has none. `Charts.add` lays every chart out
(`layout`) so that its toolbar, title, buttons, axis titles and legend each have a band of
their own: none covers another at any page width (the browser test measures them)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from dlperf.history import HistoryPoint
from dlperf.identity import commit_label, settings_label
from dlperf.printable import printable
from dlperf.published import SUITE
from dlperf.report._data import (
    Config,
    configs,
    cross_framework_grid,
    hardware_label,
    scaling_points,
)
from dlperf.report.cells import DASH
from dlperf.report.chart import (
    MARK_MEANING,
    NOISY,
    SMOKE,
    _x_label,
    mark_text,
    marks_of,
    memory_axis_label,
    peak_memory,
    smoke_shapes,
)
from dlperf.report.look import framework_colour, select_keys
from dlperf.schema import Result, ResultStatus


def _versions(p: HistoryPoint) -> str:
    named = (("framework", p.framework_version), ("python", p.python),
             ("dlperf", p.dlperf_version))  # fmt: skip
    return ", ".join(f"{name} {value}" for name, value in named if value) or DASH


def _commits(p: HistoryPoint) -> str:
    named = (("dlperf", commit_label(p.dlperf_commit, p.dlperf_dirty)),
             ("workdir", commit_label(p.workdir_commit, p.workdir_dirty)))  # fmt: skip
    return ", ".join(f"{name} {value}" for name, value in named if value) or DASH


def _settings(p: HistoryPoint) -> str:
    return settings_label(p.settings_map)


def _plot_time(created: str) -> str:
    """An ISO time as Plotly reads it: UTC, no offset."""
    try:
        moment = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return created
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def plot_text(value: object) -> str:
    """Text from results as a chart shows it: Plotly reads titles, legends and hover labels as
    a little HTML (`<a href>`, `<br>`, entities), so stored text is escaped to be only text,
    its control characters shown (`dlperf.printable`). Stored text never goes into a
    hovertemplate itself (its `%{...}` would be read as a field): it comes in as data."""
    return html.escape(printable(str(value)))


# ---------------------------------------------------------------- charts


@dataclass
class Charts:
    """The charts of one page, numbered in page order (stable ids: same results, same page)."""

    prefix: str
    made: list[str] = field(default_factory=list)

    def add(
        self, figure, name: str, height: int = 480, modebar: bool = True
    ) -> str:  # figure: plotly Figure
        """The chart's HTML, laid out so that nothing covers anything (`layout`); `modebar`:
        Plotly's toolbar (zoom, download) over its top right corner."""
        import plotly.io as pio

        div_id = f"{self.prefix}-{name}-{len(self.made) + 1}"
        self.made.append(div_id)
        height = figure.layout.height or height  # a figure with a memory panel is taller
        layout(figure, height, modebar)
        body = pio.to_html(
            figure,
            include_plotlyjs=False,
            full_html=False,
            div_id=div_id,
            default_height=f"{height}px",
            config={"displaylogo": False, "responsive": True, "displayModeBar": modebar},
            validate=True,
        )
        return f'<div class="chart-box" data-chart="{div_id}">{body}</div>'


# A chart's top, from the top down, each in a band of its own: Plotly's toolbar (the mode bar,
# right), the title (left, two lines: what, and on which machine), the buttons of a chart that
# has them (history's x-axis), then the plot. The legend is at the bottom, under the x-axis
# title: Plotly reserves its height there (a legend placed on the container), and the axes'
# labels push the plot up above it (automargin), so the two never meet, however many rows the
# legend wraps into at a narrow width.
MODEBAR_PX = 30  # the toolbar's band (its buttons are 25 px tall, 2 px from the top)
TITLE_LINE_PX = 19
ASCENT_PX = 13  # Plotly pads a title to its first line's baseline: the text rises above it
BUTTONS_PX = 34  # the updatemenu buttons and the gap under them
GAP_PX = 8


def layout(figure, height: int, modebar: bool = True) -> None:
    """Lay out `figure`'s title, buttons and legend in bands of their own (above)."""
    title = figure.layout.title.text or ""
    lines = title.count("<br>") + 1 if title else 0
    top = (MODEBAR_PX if modebar else 6) + lines * TITLE_LINE_PX + GAP_PX
    menus = bool(figure.layout.updatemenus)
    if menus:
        figure.update_layout(
            updatemenus=[
                {
                    "x": 0,
                    "xanchor": "left",
                    "y": 1,
                    "yanchor": "bottom",
                    "pad": {"t": 0, "b": GAP_PX, "l": 0, "r": 0},
                }
            ]  # fmt: skip
        )
        top += BUTTONS_PX
    figure.update_layout(
        template=_template(),
        height=height,
        margin={"l": 60, "r": 20, "t": top, "b": 10, "autoexpand": True},
        font={"family": "system-ui, sans-serif", "size": 12},
        title={"x": 0, "xref": "container", "xanchor": "left", "y": 1, "yref": "container",
               "yanchor": "top", "pad": {"t": (MODEBAR_PX if modebar else 6) + ASCENT_PX,
                                         "l": 10},
               "font": {"size": 14}},
        legend={"orientation": "h", "x": 0, "xanchor": "left", "xref": "paper", "y": 0,
                "yanchor": "bottom", "yref": "container"},
    )  # fmt: skip


def chart_title(what: str, where: str = "") -> str:
    """A chart's title as Plotly draws it: what it shows, and on its second line, smaller, on
    which machine (`where`); both text, escaped here."""
    if not where:
        return plot_text(what)
    return f"{plot_text(what)}<br><span style='font-size:12px'>on {plot_text(where)}</span>"


def _template():
    """An empty template: Plotly's default one would repeat ~8 kB of styles in every chart."""
    import plotly.graph_objects as go

    return go.layout.Template(
        layout={"colorway": ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                             "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"],
                "plot_bgcolor": "white", "hovermode": "closest",
                "xaxis": {"gridcolor": "#e5e5ea", "automargin": True},
                "yaxis": {"gridcolor": "#e5e5ea", "automargin": True, "rangemode": "tozero"}}
    )  # fmt: skip


def _title(text: str, results: Sequence[Result]) -> str:
    """A chart's title: what it shows and on which machine (a chart is one machine's)."""
    return chart_title(text, hardware_label(results))


def _label(c: Config) -> str:
    return "<br>".join(map(plot_text, _x_label(c).split("\n")))


# ---------------------------------------------------------------- marks and keys

PATTERN = {(NOISY,): "/", (SMOKE,): ".", (NOISY, SMOKE): "x"}  # Plotly's, one per bar


def _select(results: Sequence[Result]) -> dict:
    """A trace's `meta`: what each of its points is, for the page's selectors."""
    return {"select": [select_keys(r) for r in results]}


def _marks_hover(marks: Sequence[str]) -> str:
    return "".join(f"<br>{m}: {MARK_MEANING[m]}" for m in marks)


# A legend key: a trace of one empty point (Plotly hides a trace of none), standing for no
# result: its meta.select is [] (no point to select), so the page's selectors leave it alone.
LEGEND_KEY = {"x": [None], "y": [None], "meta": {"select": []}, "showlegend": True}
KEY_AXES = ("x99", "y99")  # the bar legend keys' own hidden axes


def _mark_legend(
    figure, marks: set[tuple[str, ...]], bars: bool = True, brief: bool = False
) -> None:
    """A legend key per kind of mark drawn, saying what it means (`brief`: only its name,
    for a small chart whose page says the rest), its swatch the mark."""
    import plotly.graph_objects as go

    for kind in sorted(marks, key=lambda m: (len(m), m)):
        how = f"{'hatched' if bars else 'hollow'}, named on it"
        # a line per mark's meaning: one line of them all is wider than a chart at 1000 px
        lines = [f"{mark_text(kind)} ({how})"] + (
            [] if brief else [f"{m}: {MARK_MEANING[m]}" for m in kind]
        )
        name = "<br>".join(map(plot_text, lines))  # fmt: skip
        if bars:
            # on axes of their own: a bar trace on the chart's axes would take a slot in each
            # group and push the real bars off the panel below them
            swatch = {"shape": PATTERN[kind], "fgcolor": "#333"}
            trace = go.Bar(**LEGEND_KEY, name=name, xaxis=KEY_AXES[0], yaxis=KEY_AXES[1],
                           marker={"color": "white", "line": {"color": "#333", "width": 1},
                                   "pattern": swatch})  # fmt: skip
            hidden = {"visible": False, "fixedrange": True}
            figure.update_layout(
                {f"xaxis{KEY_AXES[0][1:]}": {**hidden, "overlaying": "x"},
                 f"yaxis{KEY_AXES[1][1:]}": {**hidden, "overlaying": "y"}}
            )  # fmt: skip
        else:
            hollow = {"color": "white", "symbol": "circle", "line": {"color": "#333", "width": 2}}
            trace = go.Scatter(**LEGEND_KEY, name=name, mode="markers", marker=hollow)
        figure.add_trace(trace)


# ---------------------------------------------------------------- throughput and memory


@dataclass(frozen=True)
class _Bar:
    result: Result
    x: str
    y: float
    low: float = 0.0
    high: float = 0.0
    text: str = ""  # what is written on it: its marks, or "failed"
    hover: str = ""
    marks: tuple[str, ...] = ()


def _throughput_bar(r: Result, x: str, metric: str) -> _Bar | None:
    """A result's bar: its median with min–max ("throughput"), its samples per joule
    ("energy"); None where it has no such number (a failed result's throughput bar reads
    'failed')."""
    t = r.metrics.throughput
    failed = r.status == ResultStatus.failed or t is None
    version = plot_text(f"{r.spec.framework} {r.environment.framework_version or '?'}")
    marks = marks_of(r)
    if metric == "energy":
        value = getattr(r.metrics, "samples_per_joule", None)
        if value is None or failed:
            return None
        return _Bar(r, x, value, text=mark_text(marks), marks=marks,
                    hover=f"{plot_text(r.id)}<br>{value:.4g} samples/J<br>{version}"
                    + _marks_hover(marks))  # fmt: skip
    if failed:
        return _Bar(r, x, 0.0, text="failed", hover=f"{plot_text(r.id)}: failed<br>{version}")
    hover = (f"{plot_text(r.id)}<br>median {t.median:.2f} {plot_text(t.unit)} (min {t.min:.2f}, "
             f"max {t.max:.2f}, {t.n} ok repeats)<br>{version}<br>settings: "
             f"{plot_text(select_keys(r)['settings'])}" + _marks_hover(marks))  # fmt: skip
    return _Bar(r, x, t.median, t.median - t.min, t.max - t.median, mark_text(marks), hover,
                marks)  # fmt: skip


def _memory_bar(r: Result, x: str) -> _Bar | None:
    m = peak_memory(r)
    if m is None or r.status == ResultStatus.failed:
        return None
    marks = marks_of(r)
    repeats = ", ".join(f"{v:.2f}" for v in m.per_repeat_gib)
    hover = (f"{plot_text(r.id)}<br>peak {m.gib:.2f} GiB {plot_text(m.what)}<br>each ok "
             f"repeat's peak: {repeats} GiB" + _marks_hover(marks))  # fmt: skip
    return _Bar(r, x, m.gib, text=mark_text(marks), hover=hover, marks=marks)


def _bar_trace(fw: str, bars: Sequence[_Bar], error: bool, legend: bool = True):
    """One framework's bars, in its colour, each mark's pattern on its bar."""
    import plotly.graph_objects as go

    return go.Bar(
        name=plot_text(fw),
        legendgroup=plot_text(fw),
        showlegend=legend,
        x=[b.x for b in bars],
        y=[b.y for b in bars],
        error_y={"type": "data", "symmetric": False, "array": [b.high for b in bars],
                 "arrayminus": [b.low for b in bars]} if error else None,
        marker={"color": framework_colour(fw), "line": {"color": "#333", "width": 0.5},
                "pattern": {"shape": [PATTERN.get(b.marks, "") for b in bars],
                            "fgcolor": "#333", "fillmode": "overlay", "solidity": 0.3}},
        text=[b.text for b in bars],
        textposition="outside",
        textfont={"size": 10},
        hovertext=[b.hover for b in bars],
        hoverinfo="text",
        meta=_select([b.result for b in bars]),
    )  # fmt: skip


def throughput_figure(
    chosen: Sequence[Result], model: str, metric: str = "throughput", small: bool = False
):
    """Frameworks side by side on one machine: a bar per configuration and framework (its
    default settings, as the table) in the framework's colour, the median with min–max error
    bars (`metric` "throughput"), or samples per joule ("energy"); failed cells read
    'failed'; noisy and smoke results patterned and named on the bar. Under the throughput,
    a panel of each bar's peak memory where any result recorded memory. `small`: the index's
    overview, throughput only, the marks' legend keys brief. None when nothing is drawn."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    grid = cross_framework_grid(chosen)
    labels = [_label(c) for c in configs(chosen)]
    memory = not small and metric == "throughput" and any(peak_memory(r) for r in chosen)
    figure = (make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                            row_heights=[0.62, 0.38]) if memory else go.Figure())  # fmt: skip
    top = {"row": 1, "col": 1} if memory else {}
    marks: set[tuple[str, ...]] = set()
    for fw in grid.columns:
        cells = [
            (x, cell[-1])
            for x, cell in zip(labels, grid[fw], strict=True)
            if isinstance(cell, list)
        ]  # several official upstreams: the last, as the PNG
        bars = [b for x, r in cells if (b := _throughput_bar(r, x, metric)) is not None]
        if not bars:
            continue
        marks |= {b.marks for b in bars if b.marks}
        figure.add_trace(_bar_trace(fw, bars, error=metric == "throughput"), **top)
        peaks = [b for x, r in cells if (b := _memory_bar(r, x)) is not None] if memory else []
        if peaks:
            marks |= {b.marks for b in peaks if b.marks}
            figure.add_trace(_bar_trace(fw, peaks, error=False, legend=False), row=2, col=1)
    if not figure.data:
        return None
    _mark_legend(figure, marks, brief=small)
    what = "samples per joule" if metric == "energy" else "throughput"
    figure.update_layout(
        title=_title(f"{model} {what}", chosen),
        barmode="group",
    )
    figure.update_xaxes(categoryorder="array", categoryarray=labels)
    figure.update_yaxes(title_text="samples/J (median repeat)" if metric == "energy" else
                        "samples/s" if small else "median samples/s<br>(error bars: min–max)",
                        **top)  # fmt: skip
    if memory:
        label = plot_text(memory_axis_label(chosen)).replace(" (", "<br>(", 1)  # two lines
        figure.update_yaxes(title_text=label, row=2, col=1)
        figure.update_layout(height=760)
    return figure


# ---------------------------------------------------------------- scaling and latency

SCALING_DASH = ("solid", "dash", "dot", "dashdot")
SERIES_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "triangle-down", "pentagon",
                  "hexagon", "star")  # fmt: skip


def scaling_figure(chosen: Sequence[Result], model: str):
    """Speedup vs devices per framework (its colour; a framework's other series another dash
    and symbol), the ideal (linear) line drawn as a shape (no result is its point); a point
    of a noisy or smoke result hollow and named. None without scaling."""
    import plotly.graph_objects as go

    series = scaling_points(chosen, model)
    if not series:
        return None
    top = max(d for points in series.values() for d, _, _ in points)
    figure = go.Figure()
    figure.add_shape(type="line", x0=1, y0=1, x1=top, y1=top, name="ideal (linear)",
                     showlegend=True, line={"dash": "dash", "color": "grey"})  # fmt: skip
    seen: dict[str, int] = {}
    marked: set[tuple[str, ...]] = set()
    for label, points in series.items():
        results = [r for _, _, r in points]
        fw = results[0].spec.framework
        k = seen[fw] = seen.get(fw, -1) + 1
        marks = [marks_of(r) for r in results]
        marked |= {m for m in marks if m}
        colour = framework_colour(fw)
        figure.add_trace(
            go.Scatter(
                x=[d for d, _, _ in points], y=[s for _, s, _ in points],
                mode="lines+markers+text", name=plot_text(label),
                line={"color": colour, "dash": SCALING_DASH[k % len(SCALING_DASH)]},
                marker={"symbol": SERIES_SYMBOLS[k % len(SERIES_SYMBOLS)], "size": 9,
                        "color": ["white" if m else colour for m in marks],
                        "line": {"color": colour, "width": 2}},
                text=[mark_text(m) for m in marks], textposition="top center",
                customdata=[plot_text(r.id) + _marks_hover(m) for r, m in zip(results, marks,
                                                                              strict=True)],
                hovertemplate="%{x} devices: speedup %{y:.2f}<br>%{customdata}",
                meta=_select(results),
            )
        )  # fmt: skip
    _mark_legend(figure, marked, bars=False)
    figure.update_layout(
        title=_title(f"{model} scaling", chosen),
        xaxis_title="devices (nodes x devices per node)",
        yaxis_title="speedup vs 1 device<br>(median samples/s)",
    )
    # whole devices on the x-axis; room above the highest point for the mark named over it
    devices = sorted({d for points in series.values() for d, _, _ in points})
    highest = max([top, *(s for points in series.values() for _, s, _ in points)])
    figure.update_xaxes(tickmode="array", tickvals=devices)
    figure.update_yaxes(range=[0, highest * 1.15])
    return figure


def _percentile_rank(name: str) -> float | None:
    match = re.fullmatch(r"p(\d+(?:\.\d+)?)", name)
    return float(match.group(1)) if match else None


def serves(result: Result) -> bool:
    """Whether `result` measured serving latency: an inference run, or a LoadGen scenario
    (a training step's time is not a latency a user waits for)."""
    return result.spec.mode == "infer" or bool(result.spec.scenario)


def latency_figure(chosen: Sequence[Result], model: str):
    """Inference and LoadGen results' per-batch latency percentiles (p50 ... p99.9, those
    measured), a bar per percentile and result in its framework's colour, noisy and smoke
    results patterned and named; None when no such result measured latency (training runs
    are never drawn here)."""
    import plotly.graph_objects as go

    measured = [r for r in chosen if serves(r) and any(map(_percentile_rank, r.metrics.latency_ms))]
    if not measured:
        return None
    names = sorted(
        {n for r in measured for n in r.metrics.latency_ms if _percentile_rank(n) is not None},
        key=_percentile_rank,
    )
    figure = go.Figure()
    marked: set[tuple[str, ...]] = set()
    for r in measured:
        c = Config.of(r)
        label = f"{r.spec.framework} {c.mode_label} {c.precision_label} {c.device} b{c.batch}"
        label += f" {c.topology}" + (f" [{c.settings_text}]" if c.settings else "")
        xs = [n for n in names if n in r.metrics.latency_ms]
        marks = marks_of(r)
        if marks:
            marked.add(marks)
            label += f" ({mark_text(marks)})"
        hover = plot_text(r.id) + _marks_hover(marks)
        figure.add_trace(
            go.Bar(name=plot_text(label), x=xs, y=[r.metrics.latency_ms[n] for n in xs],
                   marker={"color": framework_colour(r.spec.framework),
                           "line": {"color": "#333", "width": 0.5},
                           "pattern": {"shape": PATTERN.get(marks, ""), "fgcolor": "#333",
                                       "fillmode": "overlay", "solidity": 0.3}},
                   text=[mark_text(marks)] * len(xs), textposition="outside",
                   textfont={"size": 9}, customdata=[hover] * len(xs),
                   hovertemplate="%{customdata}<br>%{x}: %{y:.3g} ms<extra></extra>",
                   meta=_select([r] * len(xs)))
        )  # fmt: skip
    _mark_legend(figure, marked)
    figure.update_layout(
        title=_title(f"{model} inference latency percentiles", chosen),
        barmode="group",
        xaxis={"title": "percentile", "categoryorder": "array", "categoryarray": names},
        yaxis_title="ms per batch<br>(inference steps, interpolated)",
    )
    return figure


# ---------------------------------------------------------------- history

# Rings drawn over a point: (symbol, colour, what it means), in the legend as written here.
RINGS = {
    "regression": ("x-thin-open", "#d62728", "significant regression vs the point before"),
    "improvement": ("triangle-up-open", "#2ca02c", "significant improvement vs the point before"),
    "changed": ("circle-open", "#333333", "settings or environment changed since the point before"),
}  # fmt: skip
# Imported results, framed by a diamond: (symbol, colour, what it means), in the legend so.
IMPORTS = {
    "published": ("diamond-open", "#6a3d9a",
                  "published reference (imported, at the time of its logs)"),
    "imported": ("diamond-open", "#b15928", "imported log (dlperf parse)"),
}  # fmt: skip
BAND = "shaded band: min–max of each result's repeats"
X_MODES = ("time", "framework version", "dlperf version")


def _point_keys(p: HistoryPoint) -> dict[str, str]:
    """`look.select_keys` of a point's result, from its index row (the same text)."""
    return {
        "machine": p.machine_id,
        "precision": p.precision + (" + XLA" if p.xla else ""),
        "mode": p.mode + (f" · {p.scenario}" if p.scenario else ""),
        "version": f"{p.framework} {p.framework_version or '?'}",
        "settings": settings_label(p.settings_map),
    }


def _point_marks(p: HistoryPoint) -> tuple[str, ...]:
    marks = (NOISY,) if p.noisy else ()
    return marks + ((SMOKE,) if smoke_shapes(p.model, p.preset, p.image_size, p.seq_len) else ())


def _natural(text: str) -> tuple:
    """Sorts versions as numbers where they are numbers: 2.10 after 2.9."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", text) if part)  # fmt: skip


def _category(p: HistoryPoint, mode: str) -> tuple[tuple, str]:
    """(sort key, tick label) of a point on a version axis."""
    if mode == "framework version":
        version = p.framework_version or "?"
        return (p.framework, _natural(version)), f"{p.framework} {version}"
    commit = commit_label(p.dlperf_commit, p.dlperf_dirty)
    label = f"dlperf {p.dlperf_version}" + (f" {commit}" if commit else "")
    return (_natural(p.dlperf_version or ""), commit or ""), label


Ref = tuple[int, int]  # (series, point) of `history_figure`'s lines


def _positions(lines: list[list[HistoryPoint]], mode: str) -> tuple[dict[Ref, object], dict]:
    """Every point's x on the axis `mode`, and that axis. On a version axis
    the points of one version are spread over its slot (series, then time): none hides
    another."""
    refs = [(k, i) for k, points in enumerate(lines) for i in range(len(points))]
    if mode == "time":
        layout = {"type": "date", "title": {"text": "created (UTC)"}}
        return {(k, i): _plot_time(lines[k][i].created) for k, i in refs}, layout
    cats = {ref: _category(lines[ref[0]][ref[1]], mode) for ref in refs}
    order = sorted(set(cats.values()))
    slot = {label: n for n, (_, label) in enumerate(order)}
    members: dict[str, list[Ref]] = {}
    for ref in refs:  # series order, then time order
        members.setdefault(cats[ref][1], []).append(ref)
    pos: dict[Ref, object] = {}
    for label, group in members.items():
        for j, ref in enumerate(group):
            spread = -0.3 + 0.6 * j / (len(group) - 1) if len(group) > 1 else 0.0
            pos[ref] = round(slot[label] + spread, 6)
    layout = {"type": "linear", "tickmode": "array", "tickvals": list(range(len(order))),
              "ticktext": [plot_text(label) for _, label in order], "zeroline": False,
              "title": {"text": f"{mode} (one slot each; its results in time order)"}}  # fmt: skip
    return pos, layout


def _rgba(colour: str, alpha: float) -> str:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _hover_rows(points: Sequence[HistoryPoint]) -> list[list[str]]:
    return [
        list(map(plot_text, [
            p.result_id, p.created, _versions(p), _commits(p), p.verdict,
            "; ".join(p.changes) or ("first result" if p.baseline_id is None else
                                     "nothing changed"), _settings(p)]))
        + [_marks_hover(_point_marks(p))]
        for p in points
    ]  # fmt: skip


HOVER = (
    "%{y:.2f} UNIT<br>result %{customdata[0]}<br>created %{customdata[1]}"
    "<br>settings: %{customdata[6]}<br>versions: %{customdata[2]}<br>commits: %{customdata[3]}"
    "<br>vs previous: %{customdata[4]}<br>changed: %{customdata[5]}%{customdata[7]}"
    "<extra>%{fullData.name}</extra>"
)


def _series_traces(k: int, name: str, points: Sequence[HistoryPoint]) -> list:
    """A series' min–max band and its line: the framework's colour, the series' own symbol
    (smaller for each later series, so one drawn over another leaves it showing), a noisy or
    smoke point hollow and named."""
    import plotly.graph_objects as go

    colour = framework_colour(points[0].framework)
    keys = [_point_keys(p) for p in points]
    lows = [min(p.values) if p.values else p.median for p in points]
    highs = [max(p.values) if p.values else p.median for p in points]
    marks = [_point_marks(p) for p in points]
    band = go.Scatter(name=plot_text(f"{name}: min–max"), legendgroup=plot_text(name),
                      showlegend=False, y=highs + lows[::-1], fill="toself", mode="lines",
                      fillcolor=_rgba(colour, 0.15), line={"width": 0}, hoverinfo="skip",
                      meta={"select": keys + keys[::-1]})  # fmt: skip
    line = go.Scatter(
        name=plot_text(name), legendgroup=plot_text(name), y=[p.median for p in points],
        mode="lines+markers+text", line={"color": colour, "width": 1.5},
        marker={"symbol": SERIES_SYMBOLS[k % len(SERIES_SYMBOLS)], "size": max(13 - 2 * k, 7),
                "color": ["white" if m else colour for m in marks],
                "line": {"color": colour, "width": 2}},
        text=[mark_text(m) for m in marks], textposition="top center", textfont={"size": 9},
        customdata=_hover_rows(points), meta={"select": keys},
        hovertemplate=HOVER.replace("UNIT", plot_text(points[0].unit)),
    )  # fmt: skip
    return [band, line]


def _imported(p: HistoryPoint) -> str | None:
    """ "published" for a published reference (`dlperf.published`), "imported" for another
    imported log, None for a result dlperf measured."""
    if p.origin != "parse":
        return None
    suite = json.loads(p.row.get("parameters") or "{}").get("suite")
    return "published" if suite == SUITE else "imported"


def _ring(p: HistoryPoint) -> str | None:
    if p.verdict in ("regression", "improvement"):
        return p.verdict
    return "changed" if p.changes else None


def _history_traces(kept: list[tuple[str, list[HistoryPoint]]], mode: int) -> tuple[list, dict]:
    """The band, line and rings of every series on the x-axis of `X_MODES[mode]` (drawn
    only while that axis is chosen), and that axis."""
    import plotly.graph_objects as go

    series = [points for _, points in kept]
    pos, axis = _positions(series, X_MODES[mode])
    xaxis = "x" if mode == 0 else f"x{mode + 1}"
    traces = []
    for k, (name, points) in enumerate(kept):
        band, line = _series_traces(k, name, points)
        own = [pos[(k, i)] for i in range(len(points))]
        band.update(x=own + own[::-1], legendgroup=f"{mode}:{band.legendgroup}")
        line.update(x=own, legendgroup=f"{mode}:{line.legendgroup}")
        traces += [band, line]
    # Rings over changed points (size 20), then diamonds framing imported ones (size 24).
    marks = [(RINGS, _ring, 20), (IMPORTS, _imported, 24)]
    for kinds, kind_of, size in marks:
        for kind, (symbol, colour, meaning) in kinds.items():
            marked = [(k, i) for k, points in enumerate(series) for i, p in enumerate(points)
                      if kind_of(p) == kind]  # fmt: skip
            if marked:
                traces.append(go.Scatter(
                    name=plot_text(meaning), x=[pos[ref] for ref in marked],
                    y=[series[k][i].median for k, i in marked], mode="markers",
                    hoverinfo="skip", marker={"symbol": symbol, "size": size, "color": colour,
                                              "line": {"width": 2, "color": colour}},
                    meta={"select": [_point_keys(series[k][i]) for k, i in marked]}))  # fmt: skip
    for trace in traces:
        trace.update(xaxis=xaxis, visible=mode == 0)
    return traces, {**axis, "visible": mode == 0, **({"overlaying": "x"} if mode else {})}


def history_figure(title: str, lines: dict[str, list[HistoryPoint]], where: str = ""):
    """Medians of each series (a benchmark on one machine), a line each in its framework's
    colour, over time or over framework or dlperf versions, each with its repeats' min–max
    band; significant changes and changed settings or environment ringed, noisy and smoke
    points hollow and named; an imported result (a published reference, an imported log)
    framed by a diamond of its own, at its own time (an MLPerf Training submission at its
    logs'). None when no series has more than one point. `title` and `where` (the machine,
    the title's second line): text, escaped here.

    Buttons in the chart choose the x-axis: each axis has its own traces, the buttons only
    show one set and hide the others (no data is rewritten, so the page's selectors, which
    filter each trace's points, and the buttons never undo each other)."""
    import plotly.graph_objects as go

    if not any(len(points) > 1 for points in lines.values()):
        return None
    kept = [(name, [p for p in points if p.median is not None]) for name, points in lines.items()]
    kept = [(name, points) for name, points in kept if points]
    if not kept:  # every point failed: no median to draw
        return None
    figure = go.Figure()
    sets = []
    for mode in range(len(X_MODES)):
        traces, axis = _history_traces(kept, mode)
        sets.append(range(len(figure.data), len(figure.data) + len(traces)))
        figure.add_traces(traces)
        figure.update_layout({"xaxis" if mode == 0 else f"xaxis{mode + 1}": axis})
    keys = len(figure.data)  # the legend keys: shown whatever the axis
    figure.add_trace(go.Scatter(**LEGEND_KEY, name=BAND, mode="markers",
                                marker={"symbol": "square", "size": 14,
                                        "color": "rgba(120,120,120,0.25)"}))  # fmt: skip
    marked = {_point_marks(p) for _, points in kept for p in points} - {()}
    _mark_legend(figure, marked, bars=False)
    shown = [[i in drawn or i >= keys for i in range(len(figure.data))] for drawn in sets]
    buttons = [{"label": f"by {mode}", "method": "update",
                "args": [{"visible": shown[m]},
                         {f"xaxis{j + 1 if j else ''}.visible": j == m for j in range(len(sets))}]}
               for m, mode in enumerate(X_MODES)]  # fmt: skip
    figure.update_layout(
        title=chart_title(title, where),
        updatemenus=[
            {
                "type": "buttons",
                "direction": "right",
                "buttons": buttons,
                "showactive": True,
                "active": 0,
            }
        ],  # fmt: skip; placed by `layout`, above the plot and under the title
        # the band is the legend's key (BAND): the axis' title stays short enough to be whole
        yaxis_title=plot_text(f"median {kept[0][1][0].unit}"),
    )
    return figure
