"""PNG charts of one model on one machine: median samples/s per configuration and framework
(with each bar's peak memory in a panel under it, where the telemetry recorded memory), and
speedup vs devices. The caller passes one machine's results (`by_machine`); the titles name
the machine.

The charts say what the tables say: a noisy result (`Metrics.noisy`: repeats that disagree, or
a busy machine) and a smoke run (`smoke_shapes`) are hatched (PNG; a pattern or a hollow point
on the site) and named on the bar or point, the legend saying what each mark means; every
framework has its colour (`look.framework_colour`) on every chart. The site's charts
(`figures`) take the marks, their meanings and the memory readings from here.

matplotlib is imported when a chart is drawn, never at import time, and only through its
object API with the Agg canvas: no pyplot global state, no backend switch for the caller.
Labels are text from results: drawn as text (`_as_text`), never read as mathtext.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from dlperf.models import MODELS
from dlperf.printable import printable
from dlperf.report._data import (
    Config,
    configs,
    cross_framework_grid,
    frameworks,
    hardware_label,
    repeats_in_order,
    scaling_points,
    select,
)
from dlperf.report.look import framework_colour
from dlperf.schema import RepeatStatus, Result, ResultStatus

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


# ---------------------------------------------------------------- what a mark says

NOISY = "noisy"
SMOKE = "smoke"
# What a mark on a bar or point means, as every chart's legend says it (PNG and site).
MARK_MEANING = {
    NOISY: "its repeats disagree or the machine was busy (see its warnings)",
    SMOKE: "tiny shapes and few steps: not comparable to full-size results",
}
HATCH = {NOISY: "//", SMOKE: ".."}  # matplotlib's; a bar with both marks has both
MEMORY_KINDS = {
    "cuda": "GPU memory, the fullest GPU",
    "process": "workload process, peak RSS",
    "cpu": "host RAM, whole machine",
}


def smoke_shapes(model: str, preset: str | None, image_size: int | None,
                 seq_len: int | None) -> bool:  # fmt: skip
    """Whether a run is a smoke run: the smoke preset, or shapes other than the model's dlperf
    preset (the Markdown report's `is_smoke` rule, for one run)."""
    if preset == "smoke":
        return True
    model_def = MODELS.get(model)
    full = model_def.presets.get("dlperf") if model_def else None
    if full is None:
        return False
    pairs = ((image_size, full.image_size), (seq_len, full.seq_len))
    return any(got is not None and want is not None and got != want for got, want in pairs)


def marks_of(result: Result) -> tuple[str, ...]:
    """The marks a chart puts on `result`'s bar or point: noisy, smoke, both or none."""
    s = result.spec
    marks = (NOISY,) if result.metrics.noisy else ()
    if smoke_shapes(s.model, s.preset, s.image_size, s.seq_len):
        marks += (SMOKE,)
    return marks


def mark_text(marks: Sequence[str]) -> str:
    return " · ".join(marks)


@dataclass(frozen=True)
class PeakMemory:
    """The most memory a result used: on a GPU the highest of its ok repeats' telemetry peaks
    (`Telemetry.memory_mib`, the fullest GPU); elsewhere the workload process's own peak
    resident memory (`Repeat.peak_rss_mib`, the largest rank's), else the host's RAM in use
    during the window (telemetry: the whole machine, other programs included)."""

    gib: float
    device: str  # "cuda" (GPU memory), "process" (the workload's RSS) or "cpu" (host RAM used)
    per_repeat_gib: tuple[float, ...]

    @property
    def what(self) -> str:
        return MEMORY_KINDS.get(self.device, f"{self.device} memory")


def peak_memory(result: Result) -> PeakMemory | None:
    """`result`'s `PeakMemory`; None when no ok repeat recorded memory."""
    ok = [r for r in repeats_in_order(result) if r.status == RepeatStatus.ok]
    sampled = [(r.telemetry.device, r.telemetry.memory_mib.max / 1024)
               for r in ok if r.telemetry and r.telemetry.memory_mib]  # fmt: skip
    own = [r.peak_rss_mib / 1024 for r in ok if r.peak_rss_mib]
    if sampled and (sampled[0][0] == "cuda" or not own):
        values = tuple(value for _, value in sampled)
        return PeakMemory(gib=max(values), device=sampled[0][0], per_repeat_gib=values)
    if own:
        return PeakMemory(gib=max(own), device="process", per_repeat_gib=tuple(own))
    return None


def memory_axis_label(results: Sequence[Result]) -> str:
    """The memory panel's axis: what was measured, in GiB, named for the devices drawn."""
    kinds = sorted({m.device for m in map(peak_memory, results) if m is not None})
    what = "; ".join(MEMORY_KINDS.get(k, f"{k} memory") for k in kinds)
    return f"peak GiB used ({what})"


# ---------------------------------------------------------------- PNG charts

Bar = tuple[float, float, float] | None  # (height, below, above) of one bar; None: failed


def _throughput_bar(r: Result) -> Bar:
    t = r.metrics.throughput
    if r.status == ResultStatus.failed or t is None:
        return None
    return (t.median, t.median - t.min, t.max - t.median)


def _memory_bar(r: Result) -> Bar | bool:
    """False: nothing recorded (no bar); None: failed."""
    if r.status == ResultStatus.failed:
        return None
    m = peak_memory(r)
    return False if m is None else (m.gib, 0.0, 0.0)


def _draw_bars(ax, chosen: Sequence[Result], value: Callable[[Result], Bar | bool]) -> set:
    """A bar per configuration and framework (its headline) in the framework's colour, hatched
    and labelled where noisy or smoke; returns the marks drawn."""
    grid = cross_framework_grid(chosen)  # rows: configurations; columns: frameworks
    cols, fws = configs(chosen), list(grid.columns)
    width = 0.8 / max(len(fws), 1)
    drawn: set[str] = set()
    top = 0.0
    placed = []
    for j, fw in enumerate(fws):
        color = framework_colour(fw)
        for i, cell in enumerate(grid[fw]):
            if not isinstance(cell, list):  # not run by this framework
                continue
            r = cell[-1]  # several official upstreams: the bar shows the last
            x = i - 0.4 + width * (j + 0.5)
            bar = value(r)
            if bar is False:
                continue
            if bar is None:
                ax.bar([x], [0], width, color=color)
                ax.text(x, 0, "failed", rotation=90, ha="center", va="bottom", fontsize=8,
                        color="red")  # fmt: skip
                continue
            marks = marks_of(r)
            height, below, above = bar
            ax.bar([x], [height], width, yerr=[[below], [above]] if below or above else None,
                   capsize=3, color=color, hatch="".join(HATCH[m] for m in marks) or None,
                   edgecolor="#333" if marks else color, linewidth=0.6)  # fmt: skip
            top = max(top, height + above)
            if marks:
                drawn.update(marks)
                placed.append((x, height + above, mark_text(marks)))
    for x, y, label in placed:  # after the bars: the axis' height is known
        ax.text(x, y + top * 0.01, label, rotation=90, ha="center", va="bottom", fontsize=7)
    if cols:
        ax.set_xticks(range(len(cols)))
        ax.set_xticklabels([_x_label(c) for c in cols], fontsize=7)
        ax.set_xlim(-0.6, len(cols) - 0.4)
    ax.set_ylim(0, top * 1.25 if top else 1)
    ax.grid(axis="y", alpha=0.3)
    return drawn


def _legend(fig, fws: Sequence[str], marks: set[str]) -> float:
    """Under the chart: a patch per framework, then one per mark drawn saying what it means;
    returns the share of the figure's height it takes."""
    from matplotlib.patches import Patch

    row = 0.035 / (fig.get_figheight() / FIGSIZE[1])  # one line of the legend
    if marks:
        fig.legend(handles=[Patch(facecolor="white", edgecolor="#333", hatch=HATCH[mark],
                                  label=f"{mark} (hatched, named on the bar): "
                                        f"{MARK_MEANING[mark]}") for mark in sorted(marks)],
                   fontsize=7, loc="lower center", ncol=1, frameon=False)  # fmt: skip
    handles = [Patch(color=framework_colour(fw), label=printable(fw)) for fw in fws]
    fig.legend(handles=handles, fontsize=7, loc="lower center", frameon=False,
               ncol=max(len(fws), 1), bbox_to_anchor=(0.5, row * len(marks)))  # fmt: skip
    return row * (1 + len(marks)) + 0.01


def draw_chart(results: Sequence[Result], model: str):  # -> matplotlib Figure
    """The throughput chart, and beside it (below) the peak memory of each bar's result where
    any recorded it: bars = median samples/s of each framework's headline (default settings),
    error bars = min–max; failed configurations show 'failed'; noisy and smoke results
    hatched and labelled, the legend saying what each mark means."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    chosen = select(results, model)
    memory = any(peak_memory(r) for r in chosen)
    fig = Figure(figsize=(FIGSIZE[0], FIGSIZE[1] * (1.8 if memory else 1.0)), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(2 if memory else 1, 1, 1)
    ax.set_title(_title(f"{model} throughput", chosen), fontsize=10)
    ax.set_ylabel("samples/s (median; error bars: min–max)")
    if not configs(chosen):
        ax.text(0.5, 0.5, "no results", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
    marks = _draw_bars(ax, chosen, _throughput_bar)
    if memory:
        below = fig.add_subplot(2, 1, 2, sharex=ax)
        below.set_title(_title(f"{model} peak memory", chosen), fontsize=10)
        below.set_ylabel(printable(memory_axis_label(chosen)), fontsize=7)
        marks |= _draw_bars(below, chosen, _memory_bar)
    bottom = _legend(fig, frameworks(chosen), marks) if configs(chosen) else 0.0
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})


@_as_text
def render_chart(results: Sequence[Result], model: str, path: Path) -> None:
    """Write `draw_chart` as a PNG."""
    _save(draw_chart(results, model), path)


SERIES_STYLES = ("-", "--", "-.", ":")
SERIES_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*")


def draw_scaling_chart(results: Sequence[Result], model: str):  # -> matplotlib Figure | None
    """Speedup vs devices per framework (its colour; a framework's other series another line
    style and marker) with the ideal (linear) line; a point of a noisy or smoke result hollow
    and labelled. None when no framework has results at more than one topology."""
    series = scaling_points(results, model)
    if not series:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 5.0), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    top = max(d for points in series.values() for d, _, _ in points)
    ax.plot([1, top], [1, top], linestyle="--", color="grey", label="ideal (linear)")
    seen: dict[str, int] = {}
    marked = set()
    for label, points in series.items():
        fw = points[0][2].spec.framework
        k = seen[fw] = seen.get(fw, -1) + 1
        color = framework_colour(fw)
        xs, ys = [d for d, _, _ in points], [s for _, s, _ in points]
        ax.plot(xs, ys, color=color, linestyle=SERIES_STYLES[k % len(SERIES_STYLES)],
                label=printable(label))  # fmt: skip
        for x, y, r in points:
            marks = marks_of(r)
            marked |= set(marks)
            ax.plot([x], [y], marker=SERIES_MARKERS[k % len(SERIES_MARKERS)], color=color,
                    markerfacecolor="white" if marks else color, linestyle="none")  # fmt: skip
            if marks:
                ax.annotate(mark_text(marks), (x, y), textcoords="offset points",
                            xytext=(4, 4), fontsize=7)  # fmt: skip
    for kind in sorted(marked):
        ax.plot([], [], marker="o", color="#333", markerfacecolor="white", linestyle="none",
                label=f"{kind} (hollow, named beside it): {MARK_MEANING[kind]}")  # fmt: skip
    ax.set_xlabel("devices (nodes x devices per node)")
    ax.set_ylabel("speedup vs 1 device (median samples/s)")
    ax.set_title(_title(f"{model} scaling", select(results, model)), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


@_as_text
def render_scaling_chart(results: Sequence[Result], model: str, path: Path) -> bool:
    """Write `draw_scaling_chart` as a PNG; False when there is nothing to draw (no file)."""
    fig = draw_scaling_chart(results, model)
    if fig is None:
        return False
    _save(fig, path)
    return True
