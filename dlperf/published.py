"""Published references: results other people measured on their own systems and published
(MLCommons' MLPerf Training results, imported by `dlperf parse mlperf-training`).

They are anchors for the user's own results, never part of them: a report shows them in a
section of their own and keeps them out of every table, chart, median and count of the user's
runs. `is_published_reference` is the one test every reader uses to tell them apart.
"""

from __future__ import annotations

import re

from dlperf.schema import Result

SUITE = "mlperf-training"  # spec.options["suite"] and metrics.peer's key of these results
# How the importer's warnings that say why a number is missing begin (the report shows the rest
# as the reason).
NO_SCORE = "no MLPerf score: "
NO_MFU = "no MFU: "
NO_THROUGHPUT = "no throughput: "
# How the warning of an input the importer left out begins (a folder with no system
# description, a FIFO among the result files): `dlperf parse` then exits 2.
LEFT_OUT = "left out: "
# How the warning of a benchmark the importer does not take begins: its input is whole, but its
# logs count progress in units dlperf cannot turn into samples (MLPerf's DLRM, GNN, GPT-3). A
# known limit, not a fault of the input: the command's exit code does not change.
NOT_IMPORTED = "not imported: "


def is_published_reference(result: Result) -> bool:
    """Whether `result` is an imported published result (not one of the user's runs)."""
    return result.origin == "parse" and result.spec.options.get("suite") == SUITE


# MLCommons publishes each round's MLPerf Training results in a repository of its own.
ROUND_RESULTS = "https://github.com/mlcommons/training_results_{round}"
ROUND = re.compile(r"v\d{1,3}\.\d{1,3}")


def round_results_url(result: Result) -> str | None:
    """The published results of `result`'s round (the round recorded at import, "v4.0");
    None when no round of MLPerf's form was recorded."""
    round_ = str(result.spec.options.get("round", ""))
    return ROUND_RESULTS.format(round=round_) if ROUND.fullmatch(round_) else None


def system_name(result: Result) -> str | None:
    """The submission's system as its submitter named it (`system_name` of its system.json,
    recorded at import)."""
    return result.spec.options.get("system") or None


def why_missing(result: Result, prefix: str) -> str | None:
    """Why `result` has no number of a kind (`prefix`: NO_SCORE, NO_MFU), as its importer
    said; None when it said nothing."""
    said = next((w for w in result.warnings if w.startswith(prefix)), None)
    return said[len(prefix) :] if said else None


def per_accelerator_text(value: float, large: str = ".0f") -> str:
    """Samples/s per accelerator with the digits that matter: from 100 up in the `large`
    format (7823), below it three significant digits (70.3, and 0.256 where an LLM's
    fine-tuning trains a fraction of a sample per second on each accelerator, not "0")."""
    return format(value, large) if value >= 100 else f"{value:.3g}"
