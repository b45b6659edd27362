"""The site's Plotly charts of one machine's results: throughput (or samples per joule),
scaling, latency percentiles, and history (a line per series, a benchmark on one machine).
Each figure function returns a plotly Figure, or None when there is nothing to draw; `Charts`
turns them into the page's HTML with stable ids. plotly is imported when a chart is made."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from dlperf.history import HistoryPoint
from dlperf.identity import commit_label, settings_label
from dlperf.printable import printable
from dlperf.report._data import (
    Config,
    configs,
    cross_framework_grid,
    hardware_label,
    scaling_series,
)
from dlperf.report.cells import DASH
from dlperf.report.chart import _x_label
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

    def add(self, figure, name: str, height: int = 480) -> str:  # figure: plotly Figure
        import plotly.io as pio

        div_id = f"{self.prefix}-{name}-{len(self.made) + 1}"
        self.made.append(div_id)
        figure.update_layout(
            template=_template(),
            height=height,
            margin={"l": 60, "r": 20, "t": 50, "b": 60},
            font={"family": "system-ui, sans-serif", "size": 12},
        )
        body = pio.to_html(
            figure,
            include_plotlyjs=False,
            full_html=False,
            div_id=div_id,
            default_height=f"{height}px",
            config={"displaylogo": False, "responsive": True},
            validate=True,
        )
        return f'<div class="chart-box" data-chart="{div_id}">{body}</div>'


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
    hardware = hardware_label(results)
    return plot_text(text + (f" on {hardware}" if hardware else ""))


def _label(c: Config) -> str:
    return "<br>".join(map(plot_text, _x_label(c).split("\n")))


def throughput_figure(chosen: Sequence[Result], model: str, metric: str = "throughput"):
    """Frameworks side by side on one machine: a bar per configuration and framework (its
    default settings, as the table), the median with min–max error bars (`metric`
    "throughput"), or samples per joule ("energy"); failed cells read 'failed'. None when
    nothing is drawn."""
    import plotly.graph_objects as go

    grid = cross_framework_grid(chosen)
    rows = configs(chosen)
    labels = [_label(c) for c in rows]
    figure = go.Figure()
    drawn = False
    for fw in grid.columns:
        xs, ys, low, high, texts, hover = [], [], [], [], [], []
        for label, cell in zip(labels, grid[fw], strict=True):
            if not isinstance(cell, list):
                continue
            r = cell[-1]  # several official upstreams: the bar shows the last, as the PNG
            t = r.metrics.throughput
            failed = r.status == ResultStatus.failed or t is None
            if metric == "energy":
                value = getattr(r.metrics, "samples_per_joule", None)
                if value is None or failed:
                    continue
                xs.append(label), ys.append(value), low.append(0.0), high.append(0.0)
                texts.append("")
                hover.append(f"{plot_text(r.id)}<br>{value:.4g} samples/J")
                continue
            xs.append(label)
            if failed:
                ys.append(0.0), low.append(0.0), high.append(0.0), texts.append("failed")
                hover.append(f"{plot_text(r.id)}: failed")
                continue
            ys.append(t.median), low.append(t.median - t.min), high.append(t.max - t.median)
            texts.append("")
            hover.append(
                f"{plot_text(r.id)}<br>median {t.median:.2f} {plot_text(t.unit)} (min "
                f"{t.min:.2f}, max {t.max:.2f}, {t.n} ok repeats)<br>"
                + plot_text(f"{r.spec.framework} {r.environment.framework_version or ''}")
            )
        if not xs:
            continue
        drawn = True
        error = None
        if metric == "throughput":
            error = {"type": "data", "symmetric": False, "array": high, "arrayminus": low}
        figure.add_trace(
            go.Bar(
                name=plot_text(fw),
                x=xs,
                y=ys,
                error_y=error,
                text=texts,
                textposition="outside",
                hovertext=hover,
                hoverinfo="text",
            )  # fmt: skip
        )
    if not drawn:
        return None
    what = "samples per joule" if metric == "energy" else "throughput"
    figure.update_layout(
        title=_title(f"{model} {what}", chosen),
        barmode="group",
        yaxis_title="samples/J (median repeat)"
        if metric == "energy"
        else "samples/s (median; error bars: min–max)",
        xaxis={"categoryorder": "array", "categoryarray": labels},
    )
    return figure


def scaling_figure(chosen: Sequence[Result], model: str):
    """Speedup vs devices per framework, with the ideal (linear) line; None without scaling."""
    import plotly.graph_objects as go

    series = scaling_series(chosen, model)
    if not series:
        return None
    top = max(d for points in series.values() for d, _ in points)
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=[1, top],
            y=[1, top],
            mode="lines",
            name="ideal (linear)",
            line={"dash": "dash", "color": "grey"},
        )  # fmt: skip
    )
    for label, points in series.items():
        figure.add_trace(
            go.Scatter(
                x=[d for d, _ in points],
                y=[s for _, s in points],
                mode="lines+markers",
                name=plot_text(label),
                hovertemplate="%{x} devices: speedup %{y:.2f}",
            )  # fmt: skip
        )
    figure.update_layout(
        title=_title(f"{model} scaling", chosen),
        xaxis_title="devices (nodes x devices per node)",
        yaxis_title="speedup vs 1 device (median samples/s)",
    )
    return figure


def _percentile_rank(name: str) -> float | None:
    match = re.fullmatch(r"p(\d+(?:\.\d+)?)", name)
    return float(match.group(1)) if match else None


def latency_figure(chosen: Sequence[Result], model: str):
    """Latency percentiles (p50 ... p99.9, those measured) per configuration; None when no
    result measured latency."""
    import plotly.graph_objects as go

    measured = [r for r in chosen if any(map(_percentile_rank, r.metrics.latency_ms))]
    if not measured:
        return None
    names = sorted(
        {n for r in measured for n in r.metrics.latency_ms if _percentile_rank(n) is not None},
        key=_percentile_rank,
    )
    figure = go.Figure()
    for r in measured:
        c = Config.of(r)
        label = f"{r.spec.framework} {c.mode_label} {c.precision_label} {c.device} b{c.batch}"
        label += f" {c.topology}" + (f" [{c.settings_text}]" if c.settings else "")
        xs = [n for n in names if n in r.metrics.latency_ms]
        figure.add_trace(
            go.Bar(name=plot_text(label), x=xs, y=[r.metrics.latency_ms[n] for n in xs],
                   customdata=[plot_text(r.id)] * len(xs),
                   hovertemplate="%{customdata}<br>%{x}: %{y:.3g} ms<extra></extra>")
        )  # fmt: skip
    figure.update_layout(
        title=_title(f"{model} latency percentiles", chosen),
        barmode="group",
        xaxis={"title": "percentile", "categoryorder": "array", "categoryarray": names},
        yaxis_title="ms per batch (interpolated)",
    )
    return figure


MARKERS = {"regression": ("x", "#d62728"), "improvement": ("triangle-up", "#2ca02c")}
CHANGED = "diamond"  # a point whose settings or environment differ from the one before


def _symbol(p: HistoryPoint) -> str:
    if p.verdict in MARKERS:
        return MARKERS[p.verdict][0]
    return CHANGED if p.changes else "circle"


def history_figure(title: str, lines: dict[str, list[HistoryPoint]]):
    """Medians over time, a line per series (a benchmark on one machine); significant changes
    and changed settings or environment marked. None when no series has more than one
    point. `title`: text, escaped here."""
    import plotly.graph_objects as go

    if not any(len(points) > 1 for points in lines.values()):
        return None
    figure = go.Figure()
    for name, points in lines.items():
        kept = [p for p in points if p.median is not None]
        if not kept:
            continue
        custom = [
            list(map(plot_text, [
                p.result_id, p.created, _versions(p), _commits(p), p.verdict,
                "; ".join(p.changes) or ("first result" if p.baseline_id is None else
                                         "nothing changed"), _settings(p)]))
            for p in kept
        ]  # fmt: skip
        figure.add_trace(
            go.Scatter(
                name=plot_text(name),
                x=[_plot_time(p.created) for p in kept],
                y=[p.median for p in kept],
                mode="lines+markers",
                marker={
                    "symbol": [_symbol(p) for p in kept],
                    "size": [12 if p.verdict in MARKERS or p.changes else 7 for p in kept],
                    "line": {"width": [2 if p.changes else 0 for p in kept], "color": "#333"},
                },
                customdata=custom,
                hovertemplate=(
                    "%{y:.2f} " + plot_text(kept[0].unit) + "<br>result %{customdata[0]}"
                    "<br>created %{customdata[1]}<br>settings: %{customdata[6]}"
                    "<br>versions: %{customdata[2]}<br>commits: %{customdata[3]}"
                    "<br>vs previous: %{customdata[4]}<br>changed: %{customdata[5]}"
                    "<extra>%{fullData.name}</extra>"
                ),
            )
        )
    unit = next(iter(lines.values()))[0].unit
    figure.update_layout(
        title=plot_text(title),
        xaxis_title="created (UTC)",
        yaxis_title=plot_text(f"median {unit}"),
        legend={"orientation": "h", "y": -0.25},
    )
    return figure
