"""`dlperf score`: one number for a set of results against a frozen reference (TorchBench V0).

`freeze` writes each configuration's median (the newest ok result per configuration) to a
reference file. `score` compares results with it: every configuration's speedup is new / ref
for a throughput (ref / new for a latency), and the score is

    1000 * exp( sum_i w_i * ln(speedup_i) )

the weighted geometric mean of the speedups scaled so the reference itself scores 1000. The
weights are TorchBench V0's: split evenly between model families, then evenly between the
configurations of a family. Each family also gets its own subscore the same way. A
configuration of the reference that the results lack is left out and named, and the weights are
renormalised over what is there.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from dlperf import DlperfError, __version__
from dlperf.compare import values_of
from dlperf.files import atomic_write
from dlperf.schema import Result
from dlperf.store import latest_per_config, load_results

REFERENCE_VERSION = 1


def family(model: str) -> str:
    """A model's family: its name up to the size or depth (resnet50 -> resnet, gpt2-xl -> gpt2,
    bert-large -> bert)."""
    match = re.match(r"[a-z]+(?:2(?=-))?", model.lower())
    return match.group(0) if match else model


@dataclass(frozen=True)
class Entry:
    key: str
    family: str
    value: float
    unit: str
    higher_is_better: bool


def entries_of(results: list[Result]) -> dict[str, Entry]:
    out = {}
    for result in latest_per_config(results):
        if result.status.value == "failed":
            continue
        metric, values, better_up = values_of(result)
        if not values:
            continue
        key = result.spec.config_key()
        out[key] = Entry(key, family(result.spec.model), statistics.median(values), metric,
                         better_up)  # fmt: skip
    return out


def freeze(results_dir: Path, out: Path) -> int:
    """Write the reference file; returns how many configurations it holds."""
    entries = entries_of(load_results(results_dir))
    if not entries:
        raise DlperfError(f"no ok results in {results_dir} to freeze")
    data = {
        "reference_version": REFERENCE_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dlperf_version": __version__,
        "entries": [e.__dict__ for e in entries.values()],
    }
    atomic_write(out, json.dumps(data, indent=2) + "\n")
    return len(entries)


def load_reference(path: Path) -> dict[str, Entry]:
    try:
        data = json.loads(path.read_text())
        return {e["key"]: Entry(**e) for e in data["entries"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        why = f"not a reference made by `dlperf score --freeze`: {exc}"
        raise DlperfError(f"{path}: {why}") from None


@dataclass(frozen=True)
class Score:
    total: float
    families: dict[str, float]
    members: dict[str, list[str]]  # family -> its configurations
    speedups: dict[str, float]  # per configuration
    weights: dict[str, float]
    missing: list[str]  # in the reference, not in the results


def weighted_score(reference: dict[str, Entry], current: dict[str, Entry]) -> Score:
    present = [k for k in reference if k in current]
    missing = sorted(k for k in reference if k not in current)
    if not present:
        raise DlperfError("none of the reference's configurations is in these results")
    speedups = {}
    for key in present:
        ref, new = reference[key], current[key]
        speedups[key] = new.value / ref.value if ref.higher_is_better else ref.value / new.value
    by_family: dict[str, list[str]] = {}
    for key in present:
        by_family.setdefault(reference[key].family, []).append(key)
    weights = {key: 1 / len(by_family) / len(keys) for keys in by_family.values() for key in keys}
    total = 1000 * math.exp(sum(weights[k] * math.log(speedups[k]) for k in present))
    families = {
        name: 1000 * math.exp(sum(math.log(speedups[k]) for k in keys) / len(keys))
        for name, keys in sorted(by_family.items())
    }
    return Score(total, families, by_family, speedups, weights, missing)


def score(results_dir: Path, reference: Path) -> Score:
    return weighted_score(load_reference(reference), entries_of(load_results(results_dir)))
