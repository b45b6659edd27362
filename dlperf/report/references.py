"""A model page's *Published references (MLPerf Training)*: the results MLCommons published for
the model (`dlperf.published`), each from its submitter's system, beside the user's own
results and never pooled with them (`_data.select` leaves them out of everything else).

A user's result is held against a published one only on the same accelerator model: NVIDIA
GPUs by their datasheet model (`system.gpu_model`, so nvidia-smi's "NVIDIA H200" is MLPerf's
"NVIDIA H200-SXM5-141GB"), any other accelerator by its name. A CPU result has no match.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dlperf.analysis import per_device
from dlperf.identity import benchmark_id
from dlperf.published import (
    NO_MFU,
    NO_SCORE,
    NO_THROUGHPUT,
    is_published_reference,
    per_accelerator_text,
    round_results_url,
    system_name,
    why_missing,
)
from dlperf.report._data import file_stem, headlines
from dlperf.report.cells import DASH, Markdown, code, table, text
from dlperf.report.tables import heading
from dlperf.schema import Result
from dlperf.store import newest
from dlperf.system import gpu_model

TITLE = "Published references (MLPerf Training)"
NOTE = (
    "Imported from MLCommons' published MLPerf Training results (`dlperf parse "
    "mlperf-training`): each ran on its submitter's system, other machines than yours, and is "
    "never pooled with your runs (no other table, chart, median or count on this page holds "
    "one). *MLPerf time to train* is MLPerf's score by its rules (mlperf-logging's result "
    "summarizer: the olympic mean of the runs' time to train). *samples/s per accelerator* is "
    "dlperf's, not an MLPerf metric: the median over the runs of the system's samples/s, taken "
    "from the logs' training marks, divided by its accelerators. MFU is dlperf's (achieved "
    "model FLOP/s over the accelerators' peak). Each round links MLCommons' published results "
    "of that round (the submitter's folder there holds the system's logs). Rows on an "
    "accelerator model your results ran on come first, then by samples/s per accelerator."
)


def published_references(results: Iterable[Result], model: str) -> list[Result]:
    """The newest published result of each of `model`'s published benchmarks."""
    return newest(r for r in results if r.spec.model == model and is_published_reference(r))


def accelerator_name(result: Result) -> str:
    """The device a result ran on, as recorded: a CPU with its model, else the GPU's (or
    accelerator's) name."""
    env = result.environment
    if result.spec.device == "cpu":
        return f"CPU ({env.cpu})" if env.cpu else "CPU"
    return env.gpu or env.device_name or result.spec.device


def accelerator(result: Result) -> tuple[str, str] | None:
    """What two results must share to be compared (module docstring); None on a CPU."""
    if result.spec.device == "cpu":
        return None
    name = accelerator_name(result)
    model = gpu_model(name)
    return ("gpu", model) if model else ("name", name.strip().casefold())


def reference_order(published: Sequence[Result], own: Sequence[Result]) -> list[Result]:
    """Published results on an accelerator model of the user's first, then by samples/s per
    accelerator, highest first (those without a throughput last)."""
    yours = {accelerator(r) for r in own} - {None}

    def key(r: Result) -> tuple:
        value = per_device(r)
        return (accelerator(r) not in yours, value is None, -(value or 0.0),
                r.spec.framework, r.spec.options.get("submitter", ""), r.id)  # fmt: skip

    return sorted(published, key=key)


def best_published(result: Result, published: Sequence[Result]) -> Result | None:
    """The published result with the most samples/s per accelerator on `result`'s
    accelerator model; None when none ran on it."""
    mine = accelerator(result)
    same = [p for p in published if mine and accelerator(p) == mine and per_device(p)]
    return max(same, key=lambda p: (per_device(p), p.id), default=None)


def comparable(own: Sequence[Result]) -> list[Result]:
    """The user's results a published (training) one can stand beside: each benchmark's
    headline on its machine (default settings), trained, with a throughput."""
    return [r for r in headlines(own) if r.spec.mode == "train" and per_device(r) is not None]


def references_section(results: Sequence[Result], model: str, own: Sequence[Result]) -> list[str]:
    """The section's Markdown lines (`own`: the page's results, `_data.select`'s); none when
    `model` has no published result."""
    published = reference_order(published_references(results, model), own)
    if not published:
        return []
    yours = {accelerator(r) for r in own} - {None}
    reasons: list[str] = []  # why a cell is a dash, numbered in order
    rows = [_reference_row(r, accelerator(r) in yours, reasons) for r in published]
    header = ["accelerator", "framework", "submitter", "system", "round",
              "accelerators (nodes x each)", "samples/s per accelerator",
              "MLPerf time to train (min)", "MFU"]  # fmt: skip
    lines = [*heading(2, TITLE), *table(header, rows)]
    if reasons:
        lines += ["Why a number is missing:", ""]
        lines += [f"{i}. {text(why)}" for i, why in enumerate(reasons, start=1)] + [""]
    return [*lines, NOTE, "", *_against_yours(comparable(own), published, model)]


def _reference_row(r: Result, yours: bool, reasons: list[str]) -> list[str]:
    """A published result's row; a missing number is a dash numbered with its reason (added
    to `reasons` once)."""

    def dash(number: str, why: str) -> str:
        why = f"{number}: {why}"
        reasons.extend([why] if why not in reasons else [])
        return f"{DASH} ({reasons.index(why) + 1})"

    s, options, m = r.spec, r.spec.options, r.metrics
    value = per_device(r)
    if value is not None:
        throughput = per_accelerator_text(value, ",.1f")
    else:
        throughput = dash("samples/s", why_missing(r, NO_THROUGHPUT) or "no throughput")
    if m.score is not None:
        score = f"{m.score:.2f}"
    else:
        score = dash("time to train", why_missing(r, NO_SCORE) or f"the result is {r.status.value}")
    if m.mfu is not None:
        mfu = f"{100 * m.mfu:.1f}%"
    elif (said := why_missing(r, NO_MFU)) is not None:
        mfu = dash("MFU", said)
    elif r.model.flops_per_sample is None:
        mfu = dash("MFU", "dlperf counts no FLOPs per sample for this benchmark")
    else:
        mfu = dash("MFU", f"dlperf knows no peak FLOP/s of {accelerator_name(r)}")
    return [
        accelerator_name(r) + (" (as yours)" if yours else ""),
        s.framework,
        options.get("submitter") or DASH,
        system_name(r) or DASH,
        round_cell(r),
        f"{s.world_size} ({s.nodes} x {s.devices_per_node})",
        throughput,
        score,
        mfu,
    ]


def round_cell(r: Result) -> Markdown:
    """The round and division, the round linking its published results (MLCommons' repository
    of the round, where the submitter's folder holds the system's logs)."""
    options = r.spec.options
    division = f" {text(options['division'])}" if options.get("division") else ""
    url = round_results_url(r)
    round_ = text(options.get("round", "?"))
    return Markdown((f"[{round_}]({url})" if url else round_) + division)


def _against_yours(own: Sequence[Result], published: Sequence[Result], model: str) -> list[str]:
    """Each of the user's results against the best published on its accelerator model, or
    why there is nothing to compare."""
    lines = heading(3, "Your results against the best published on the same accelerator")
    if not own:
        return [*lines, f"No training result of your own of {text(model)} to compare yet.", ""]
    pairs = [(r, best_published(r, published)) for r in own]
    theirs = ", ".join(sorted({text(accelerator_name(p)) for p in published}))
    unmatched = sorted({text(accelerator_name(r)) for r, best in pairs if best is None})
    rows = [_comparison_row(r, best) for r, best in pairs if best is not None]
    if not rows:
        return [*lines, f"None of your results ran on an accelerator model with a published "
                f"result: yours ran on {', '.join(unmatched)}, the published ones on {theirs}; "
                "numbers from different accelerators are not compared here.", ""]  # fmt: skip
    header = ["your benchmark", "your accelerator", "your samples/s per device",
              "best published on it", "its samples/s per accelerator", "ratio"]  # fmt: skip
    lines += [
        "Your training results (each benchmark's newest, with its default settings) per "
        "device, against the most samples/s per accelerator published on the same accelerator "
        "model. Batch size, precision, software and scale differ: the ratio says where you "
        "stand, not why.",
        "",
        *table(header, rows),
    ]
    if unmatched:
        lines += [f"Not compared: your results on {', '.join(unmatched)} (no published result "
                  "on their accelerator model).", ""]  # fmt: skip
    return lines


def _comparison_row(r: Result, best: Result) -> list[str]:
    mine, theirs = per_device(r) or 0.0, per_device(best) or 1.0
    o = best.spec.options
    published = f"{best.spec.framework}, {o.get('submitter', '?')}, {o.get('round', '?')}"
    return [code(benchmark_id(r.spec)), accelerator_name(r), f"{mine:,.1f}", published,
            f"{theirs:,.1f}", f"{mine / theirs:.2f}x"]  # fmt: skip


def reference_counts(results: Iterable[Result]) -> dict[str, int]:
    """model -> how many published results (newest of each benchmark) it has."""
    counts: dict[str, int] = {}
    for r in newest(r for r in results if is_published_reference(r)):
        counts[r.spec.model] = counts.get(r.spec.model, 0) + 1
    return dict(sorted(counts.items()))


def references_line(results: Iterable[Result]) -> list[str]:
    """The indexes' line naming the models with published references (each a link to its
    page); nothing when there are none."""
    counts = reference_counts(results)
    if not counts:
        return []
    linked = ", ".join(f"[{text(m)}]({file_stem(m)}.md) ({n})" for m, n in counts.items())
    return [f"{TITLE}, imported and never counted above, on the pages of: {linked}.", ""]
