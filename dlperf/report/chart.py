"""PNG charts of one model on one machine: median samples/s per configuration and framework,
and speedup vs devices. The caller passes one machine's results (`by_machine`); the titles
name the machine.

matplotlib is imported when a chart is drawn, never at import time, and only through its
object API with the Agg canvas: no pyplot global state, no backend switch for the caller.
Labels are text from results: drawn as text (`_as_text`), never read as mathtext.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from dlperf.printable import printable
from dlperf.report._data import (
    Config,
    configs,
    cross_framework_grid,
    hardware_label,
    scaling_series,
    select,
)
from dlperf.schema import Result, ResultStatus

FIGSIZE = (10.0, 5.5)
DPI = 100


def _x_label(c: Config) -> str:
    first = f"{c.mode} {c.precision_label} {c.device}"
    second = f"b{c.batch} {c.topology}" + (f" {c.shape_label}" if c.shape_label != "—" else "")
    third = [c.impl_label] if c.impl_label != "ootb" else []
    return "\n".join(printable(line) for line in (first, second, *third))


def _title(text: str, results: Sequence[Result]) -> str:
    hardware = hardware_label(results)
    title = printable(text + (f" on {hardware}" if hardware else ""))
    return title if len(title) <= 110 else title[:109] + "…"


Drawn = TypeVar("Drawn")


def _as_text(draw: Callable[..., Drawn]) -> Callable[..., Drawn]:
    """While a chart is made and saved, `$...$` in a label is text: never matplotlib's
    mathtext, which would draw it as a formula, or raise on one it cannot parse."""

    @functools.wraps(draw)
    def drawing(*args, **kwargs) -> Drawn:
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return drawing


@_as_text
def render_chart(results: Sequence[Result], model: str, path: Path) -> None:
    """Bars = median samples/s of each framework's headline (default settings), error bars =
    min–max; failed configurations show 'failed'."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    chosen = select(results, model)
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title(_title(f"{model} throughput", chosen), fontsize=10)
    ax.set_ylabel("samples/s (median; error bars: min–max)")

    grid = cross_framework_grid(chosen)  # rows: configurations; columns: frameworks
    cols, fws = configs(chosen), list(grid.columns)
    if not cols:
        ax.text(0.5, 0.5, "no results", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
    width = 0.8 / max(len(fws), 1)
    for j, fw in enumerate(fws):
        xs, heights, low, high, failed_xs = [], [], [], [], []
        for i, cell in enumerate(grid[fw]):
            if not isinstance(cell, list):  # not run by this framework
                continue
            r = cell[-1]  # several official upstreams: the bar shows the last
            x = i - 0.4 + width * (j + 0.5)
            t = r.metrics.throughput
            if r.status == ResultStatus.failed or t is None:
                failed_xs.append(x)
                continue
            xs.append(x)
            heights.append(t.median)
            low.append(t.median - t.min)
            high.append(t.max - t.median)
        color = f"C{j % 10}"
        ax.bar(xs, heights, width, yerr=[low, high], capsize=3, label=printable(fw), color=color)
        for x in failed_xs:
            ax.bar([x], [0], width, color=color)
            ax.text(x, 0, "failed", rotation=90, ha="center", va="bottom", fontsize=8, color="red")
    if cols:
        ax.set_xticks(range(len(cols)))
        ax.set_xticklabels([_x_label(c) for c in cols], fontsize=7)
        ax.set_xlim(-0.6, len(cols) - 0.4)
        ax.legend(fontsize=8)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})


@_as_text
def render_scaling_chart(results: Sequence[Result], model: str, path: Path) -> bool:
    """Speedup vs devices per framework with the ideal (linear) line; False when no framework
    has results at more than one topology (nothing is drawn then)."""
    series = scaling_series(results, model)
    if not series:
        return False
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 5.0), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    top = max(d for points in series.values() for d, _ in points)
    ax.plot([1, top], [1, top], linestyle="--", color="grey", label="ideal (linear)")
    for i, (label, points) in enumerate(series.items()):
        ax.plot([d for d, _ in points], [s for _, s in points], marker="o", color=f"C{i % 10}",
                label=printable(label))  # fmt: skip
    ax.set_xlabel("devices (nodes x devices per node)")
    ax.set_ylabel("speedup vs 1 device (median samples/s)")
    ax.set_title(_title(f"{model} scaling", select(results, model)), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})
    return True
