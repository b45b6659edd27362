"""What every chart and page of one report or site agrees on: a framework's colour, and the
keys a page's selectors filter a result by.

One colour per framework everywhere (PNG and interactive charts, throughput, latency, scaling,
history), so a reader who learnt that OneFlow is purple on one chart is never misled by the
next. The frameworks dlperf runs have fixed colours; any other name (an imported result's
framework) takes one from the rest of the palette by a stable hash, never by its position on a
page.

`select_keys(result)` is the contract between the charts and the page's selectors: every
Plotly trace carries `meta={"select": [select_keys(r) for each point's result]}`, every table
row the same keys as `data-*` attributes, and the selectors show what matches.
"""

from __future__ import annotations

import hashlib

from dlperf.identity import machine_of, settings_label, settings_of
from dlperf.printable import printable
from dlperf.schema import Result

FRAMEWORK_COLOURS = {
    "pytorch": "#ee4c2c",
    "tensorflow": "#ff8f00",
    "paddle": "#2932e1",
    "mxnet": "#2ca02c",
    "oneflow": "#8e44ad",
    # Teal: 5.3:1 on white, and far (CIELAB) from the five above and the palette below.
    "jax": "#00796b",
}
OTHER_COLOURS = ("#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#1f77b4", "#d62728")

SELECT_KEYS = ("machine", "precision", "mode", "version", "settings")


def framework_colour(framework: str) -> str:
    """The colour of `framework` on every chart."""
    known = FRAMEWORK_COLOURS.get(framework.lower())
    if known:
        return known
    digest = hashlib.sha256(framework.encode("utf-8", "replace")).digest()
    return OTHER_COLOURS[digest[0] % len(OTHER_COLOURS)]


def select_keys(result: Result) -> dict[str, str]:
    """What a page's selectors filter `result` by: its machine's id, precision (with XLA),
    mode (with a LoadGen scenario), framework version and settings label: stored text with
    its control characters shown (`dlperf.printable`), so that a row's data-* attribute and a
    chart point's meta hold the same text."""
    s = result.spec
    mode = s.mode + (f" · {s.scenario}" if s.scenario else "")
    keys = {
        "machine": machine_of(result).id,
        "precision": s.precision + (" + XLA" if s.xla else ""),
        "mode": mode,
        "version": f"{s.framework} {result.environment.framework_version or '?'}",
        "settings": settings_label(settings_of(s)),
    }
    return {k: printable(v) for k, v in keys.items()}
