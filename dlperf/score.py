"""`dlperf score`: one number for a set of results against a frozen reference, by TorchBench's
score V0 (pytorch/benchmark `torchbenchmark/score/compute_score_v0.py`, last at 3e4aae8e).

`freeze` writes each configuration's median (the newest ok result per configuration) to a
reference file, with the hierarchy its models sit in. `score` compares results with it: every
configuration's speedup is new / ref for a throughput (ref / new for a latency), and the score is

    1000 * exp( sum_i w_i * ln(speedup_i) )

the weighted geometric mean of the speedups, scaled so the reference itself scores 1000. The
weights are V0's: the hierarchy is domain -> task -> model -> configuration, each level split
evenly over what the hierarchy lists (`computer vision` -> `classification` -> `resnet50`).
As in V0:
* a configuration the results lack is left out and its model's weight re-spread over the
  model's configurations that are there;
* a model the results lack entirely keeps its weight at speedup 1, so the score does not rise
  because a slow model was not run;
* a configuration the reference does not hold cannot be scored: V0 stops on it, dlperf names it
  and leaves it out.
Domain and task come from the model catalog (`models.placement`: dlperf's models and TorchBench's
own names), or from a hierarchy file in V0's own `score.yml` format (`--hierarchy`).

A score never mixes machines (`dlperf.identity`): a reference is frozen from the results of one
machine and records it; the results scored against it must be of one machine too (`--machine`
picks one from a folder holding several), the same one unless `--across-machines` is given.
A configuration is a benchmark with its settings (an ablation is frozen, and scored, apart).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from dlperf import DlperfError, NothingComparable, __version__
from dlperf.files import atomic_write
from dlperf.identity import (
    Machine,
    benchmark_id,
    legacy_config_key,
    machine_names,
    machine_of,
    same_machine,
    settings_label,
    settings_of,
)
from dlperf.models import placement
from dlperf.rows import metric_values
from dlperf.schema import IMPLS, Result
from dlperf.store import ResultStore, newest

# 3: entries are keyed by benchmark id and settings; the reference records its machine.
# 2: entries name their model; the reference holds its hierarchy. 1 held a name-derived family.
REFERENCE_VERSION = 3
# Where a model neither the catalog nor TorchBench places goes: V0's own catch-all.
UNPLACED = ("other", "other tasks")

Hierarchy = dict[str, dict[str, list[str]]]  # domain -> task -> models


@dataclass(frozen=True)
class Entry:
    key: str
    model: str
    value: float
    unit: str
    higher_is_better: bool


def entry_key(result: Result) -> str:
    """A configuration's key in a reference: its benchmark id, and its settings in brackets."""
    return f"{benchmark_id(result.spec)} [{settings_label(settings_of(result.spec))}]"


def one_machine(results: list[Result], wanted: str | None = None) -> tuple[list[Result], Machine]:
    """The results of one machine: the only one they hold, or the one `wanted` names (its id or
    a piece of its label); a DlperfError listing the machines otherwise."""
    # One machine is one set of recorded facts, not one id (`same_machine`): ids can collide.
    found = {machine_of(r) for r in results}
    machines = {m for m in found if wanted is None or m.matches(wanted)}
    if len(machines) != 1:
        listed = "; ".join(sorted(f"{m.id} ({m.label})" for m in machines))
        what = (
            f"no machine matches --machine {wanted!r}"
            if not machines
            else (f"these results come from {len(machines)} machines: {listed}")
        )
        raise DlperfError(f"{what}; a score is of one machine: pick it with --machine ID")
    (machine,) = machines
    return [r for r in results if machine_of(r) == machine], machine


def entries_of(results: list[Result], key=entry_key) -> dict[str, Entry]:
    """The newest ok result of each configuration, as reference entries by `key`."""
    out = {}
    for result in newest(results):
        if result.status.value == "failed":
            continue
        metric, values, better_up = metric_values(result)
        if not values:
            continue
        k = key(result)
        out[k] = Entry(k, result.spec.model, statistics.median(values), metric, better_up)
    return out


def hierarchy_of(models: list[str]) -> tuple[Hierarchy, list[str]]:
    """The catalog's hierarchy of these models, and the models it does not place (put in
    V0's `other` / `other tasks`)."""
    tree: Hierarchy = {}
    unknown = []
    for model in sorted(set(models)):
        where = placement(model)
        if where is None:
            unknown.append(model)
            where = UNPLACED
        tree.setdefault(where[0], {}).setdefault(where[1], []).append(model)
    return tree, unknown


def flat_hierarchy(models: list[str]) -> Hierarchy:
    return {"all": {"all": sorted(set(models))}}


def load_hierarchy(path: Path) -> Hierarchy:
    """A hierarchy in TorchBench V0's `score.yml` format:
    `hierarchy: model: <domain>: <task>: <model>:` (the models are keys with no value, or a
    list). Needs PyYAML (`pip install pyyaml`) for YAML; a JSON file of the same shape does not."""
    text = path.read_text()
    try:
        data = json.loads(text)
    except ValueError:
        try:
            import yaml
        except ImportError:
            raise DlperfError(
                f"{path}: reading a YAML hierarchy needs PyYAML: pip install pyyaml"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise DlperfError(f"{path}: not YAML: {exc}") from None
    try:
        domains = data["hierarchy"]["model"]
        tree = {
            str(domain): {
                str(task): sorted(map(str, models or [])) for task, models in (tasks or {}).items()
            }
            for domain, tasks in domains.items()
        }
    except (TypeError, KeyError, AttributeError):
        raise DlperfError(
            f"{path}: not a score hierarchy; expected V0's score.yml shape, "
            "hierarchy: {model: {<domain>: {<task>: {<model>: null, ...}}}}"
        ) from None
    for domain, tasks in tree.items():
        for task, models in tasks.items():
            if not models:
                raise DlperfError(f"{path}: {domain} / {task} lists no model")
        if not tasks:
            raise DlperfError(f"{path}: domain {domain!r} lists no task")
    if not tree:
        raise DlperfError(f"{path}: the hierarchy lists no domain")
    return tree


def freeze(
    results_dir: Path,
    out: Path,
    hierarchy: Hierarchy | None = None,
    machine: str | None = None,
) -> tuple[int, list[str], Machine]:
    """Write the reference file with the hierarchy (the catalog's unless one is given) from
    the results of one machine (`machine` picks it); returns how many configurations it
    holds, the models the catalog could not place, and the machine."""
    stored = ResultStore(results_dir).results()
    if not stored:
        raise DlperfError(f"no results in {results_dir} to freeze")
    results, on = one_machine(stored, machine)
    entries = entries_of(results)
    if not entries:
        raise DlperfError(f"no ok results in {results_dir} to freeze")
    unknown: list[str] = []
    if hierarchy is None:
        hierarchy, unknown = hierarchy_of([e.model for e in entries.values()])
    data = {
        "reference_version": REFERENCE_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dlperf_version": __version__,
        "machine": {"id": on.id, "label": on.label, **asdict(on)},
        "hierarchy": hierarchy,
        "entries": [e.__dict__ for e in entries.values()],
    }
    atomic_write(out, json.dumps(data, indent=2) + "\n")
    return len(entries), unknown, on


def model_of_key(key: str) -> str:
    """The model of a configuration key (`<framework>_<model>_<impl>_...`); model names may
    hold underscores (TorchBench's `pytorch_struct`), implementations never do."""
    match = re.match(rf"[^_]+_(.+?)_(?:{'|'.join(IMPLS)})_", key)
    if match:
        return match.group(1)
    parts = key.split("_")
    return parts[1] if len(parts) > 1 else key  # a hand-made key: the whole of it


@dataclass(frozen=True)
class Reference:
    entries: dict[str, Entry]
    hierarchy: Hierarchy
    version: int = REFERENCE_VERSION
    machine: dict | None = None  # {"id", "label", ...}; None before version 3


# A reference is checked whole when it is read, each problem named where it is in the file:
# a hand-edited value of 0, a negative, inf or NaN would divide by zero, take the log of a
# negative or score "inf" or "nan"; a string, a list or a misplaced table would crash on use.
# Strict: "100" or 1 for true is named, not read as a number or a yes.
_STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)
_Name = Annotated[str, Field(min_length=1)]


class _FrozenEntry(BaseModel):
    model_config = _STRICT

    key: _Name
    model: _Name
    value: Annotated[float, Field(gt=0, allow_inf_nan=False)]  # a median: speedups divide by it
    unit: str
    higher_is_better: bool


_FrozenMachine = create_model(  # what `freeze` records: id, label and the identity's fields
    "_FrozenMachine",
    __config__=_STRICT,
    id=(_Name, ...),
    label=(str, ...),
    **{name: (hint, None) for name, hint in get_type_hints(Machine).items()},
)
_Models = Annotated[list[_Name], Field(min_length=1)]


class _FrozenReference(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")  # created, dlperf_version: notes

    reference_version: Annotated[int, Field(ge=1, le=REFERENCE_VERSION)] = 1
    entries: Annotated[list[_FrozenEntry], Field(min_length=1)]
    hierarchy: Annotated[dict[str, Annotated[dict[str, _Models], Field(min_length=1)]],
                         Field(min_length=1)] | None = None  # fmt: skip
    machine: _FrozenMachine | None = None  # type: ignore[valid-type]


_SHOULD = {  # what a value must be, by pydantic's error type, in the file's own terms
    "greater_than": "must be above 0 (a measured median)",
    "finite_number": "must be a finite number",
    "float_type": "must be a number, without quotes",
    "int_type": "must be a whole number, without quotes",
    "bool_type": "must be true or false, without quotes",
    "string_type": "must be a string, in quotes",
    "string_too_short": "must not be empty",
    "too_short": "must not be empty",
    "list_type": "must be a list",
    "dict_type": "must be a table ({...})",
    "model_type": "must be a table ({...})",
    "missing": "is missing",
    "extra_forbidden": "is not a field dlperf writes there",
}


def _where(loc: tuple) -> str:
    """A place in the reference, as `entries[2].value` or `hierarchy["computer vision"]`."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_]\w*", part):
            path += f".{part}" if path else part
        else:
            path += f"[{json.dumps(part)}]"
    return path


def _entry_named(loc: tuple, data: dict) -> str:
    """The key of the entry a place is in, when it has one: what a user searches the file for."""
    entries = data.get("entries")
    if len(loc) < 3 or loc[0] != "entries" or loc[2] == "key" or not isinstance(entries, list):
        return ""
    key = entries[loc[1]].get("key") if isinstance(entries[loc[1]], dict) else None
    return f" (entry {json.dumps(key)})" if isinstance(key, str) else ""


def _shown(value: Any) -> str:
    text = json.dumps(value)  # NaN and Infinity as the file writes them
    return text if len(text) <= 60 else text[:57] + "..."


def _reference_problems(error: ValidationError, data: dict) -> list[str]:
    problems = []
    for e in error.errors():
        where, kind = _where(e["loc"]), e["type"]
        why = _SHOULD.get(kind, e["msg"])
        if e["loc"] == ("reference_version",) and kind == "less_than_equal":
            why = f"made by a newer dlperf (this one reads up to {REFERENCE_VERSION}): upgrade it"
        shown = "" if kind == "missing" else f" = {_shown(e['input'])}"
        problems.append(f"{where}{shown}{_entry_named(e['loc'], data)}: {why}")
    return problems


def _twice(data: dict) -> list[str]:
    """A configuration held twice (the later would silently win), a model placed twice (its
    weight would be counted twice)."""
    problems = []
    first: dict[str, int] = {}
    entries = data.get("entries")
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        key = entry.get("key") if isinstance(entry, dict) else None
        if isinstance(key, str) and first.setdefault(key, i) != i:
            problems.append(f"entries[{i}].key = {_shown(key)}: entries[{first[key]}] has it too")
    placed: dict[str, str] = {}
    tree = data.get("hierarchy")
    for domain, tasks in tree.items() if isinstance(tree, dict) else []:
        for task, models in tasks.items() if isinstance(tasks, dict) else []:
            for model in models if isinstance(models, list) else []:
                here = f"{domain} / {task}"
                if isinstance(model, str) and placed.setdefault(model, here) != here:
                    problems.append(f"hierarchy places {_shown(model)} twice: under "
                                    f"{placed[model]} and {here}")  # fmt: skip
    return problems


def load_reference(path: Path) -> Reference:
    """The reference `freeze` wrote (any version), checked whole: a DlperfError names every
    entry that cannot be scored against (a value that is not a positive finite number, a field
    of the wrong type, a key or a model twice) by its place in the file."""
    what = f"{path}: not a reference made by `dlperf score --freeze`"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DlperfError(f"{what}: {exc}") from None
    if not isinstance(data, dict):
        raise DlperfError(f"{what}: it holds {_shown(data)}, not a table of entries")
    if data.get("reference_version", 1) == 1 and isinstance(data.get("entries"), list):
        # Version 1: a family, no model: the model is read off the key.
        data = {**data, "entries": [
            {k: v for k, v in e.items() if k != "family"} | {"model": model_of_key(e["key"])}
            if isinstance(e, dict) and isinstance(e.get("key"), str) else e
            for e in data["entries"]
        ]}  # fmt: skip
    problems = _twice(data)
    try:
        valid = _FrozenReference.model_validate(data)
    except ValidationError as exc:
        problems = _reference_problems(exc, data) + problems
    if problems:
        raise DlperfError(
            f"{path}: not a usable score reference, {len(problems)} problem(s):\n  "
            + "\n  ".join(problems)
            + "\ncorrect them, or freeze a new reference with `dlperf score --freeze FILE`"
        )
    entries = {e.key: Entry(**e.model_dump()) for e in valid.entries}
    hierarchy = valid.hierarchy or hierarchy_of([e.model for e in entries.values()])[0]
    machine = valid.machine.model_dump() if valid.machine is not None else None
    return Reference(entries, hierarchy, valid.reference_version, machine)


@dataclass(frozen=True)
class Score:
    total: float
    domains: dict[str, float]  # each domain's subscore (its models at their V0 weights)
    placement: dict[str, list[str]]  # configuration -> [domain, task, model]
    speedups: dict[str, float]  # per configuration scored
    weights: dict[str, float]  # V0's effective weight of each configuration scored
    missing: list[str]  # in the reference, not in the results
    absent_models: list[str]  # in the hierarchy, with no configuration in the results
    extra: list[str]  # in the results, not in the reference: not scored
    unplaced: list[str] = field(default_factory=list)  # reference models off the hierarchy
    hierarchy: Hierarchy = field(default_factory=dict)
    machine: str = ""  # the scored results' machine
    reference_machine: str = ""  # the reference's ("" before references recorded it)


def _speedup(key: str, ref: Entry, new: Entry) -> float:
    """One configuration's speedup over the reference (V0: new / reference for a throughput,
    reference / new for a time), refused unless a finite number above 0: a score made of an
    infinite or zero speedup would read as a number (inf, 0) and mean nothing."""
    if not (math.isfinite(new.value) and new.value > 0):
        raise DlperfError(
            f"{key}: this result's {new.unit or 'value'} {new.value!r} cannot be scored (a "
            "finite number above 0 is needed); rerun it, or move its file out of the results folder"
        )
    speedup = new.value / ref.value if ref.higher_is_better else ref.value / new.value
    if not (math.isfinite(speedup) and speedup > 0):
        raise DlperfError(
            f"{key}: the speedup over the reference's {ref.value!r} is {speedup!r}, not a "
            "finite number above 0; check that reference entry (freeze it again with "
            "`dlperf score --freeze`)"
        )
    return speedup


def weighted_score(
    reference: dict[str, Entry], current: dict[str, Entry], hierarchy: Hierarchy
) -> Score:
    where = {
        model: (domain, task)
        for domain, tasks in hierarchy.items()
        for task, models in tasks.items()
        for model in models
    }
    model_weight = {
        model: 1 / len(hierarchy) / len(tasks) / len(models)
        for tasks in hierarchy.values()
        for models in tasks.values()
        for model in models
    }
    present = [k for k in reference if k in current and reference[k].model in where]
    if not present:
        raise NothingComparable("none of the reference's configurations is in these results")
    by_model: dict[str, list[str]] = {}
    for key in present:
        by_model.setdefault(reference[key].model, []).append(key)
    speedups, weights = {}, {}
    for model, keys in by_model.items():
        for key in keys:
            speedups[key] = _speedup(key, reference[key], current[key])
            weights[key] = model_weight[model] / len(keys)  # V0: over the configs that ran
    log_sum = {domain: 0.0 for domain in hierarchy}
    for key in present:
        log_sum[where[reference[key].model][0]] += weights[key] * math.log(speedups[key])
    try:
        # A domain's subscore: its own weighted mean, the absent models at speedup 1 as in the
        # total.
        domains = {d: 1000 * math.exp(s * len(hierarchy)) for d, s in sorted(log_sum.items())}
        total = 1000 * math.exp(sum(log_sum.values()))
    except OverflowError:
        raise DlperfError(
            "the score is beyond any number (speedups of "
            + ", ".join(f"{k}: {v:.3g}" for k, v in sorted(speedups.items()))
            + "): check the reference's values against these results' units"
        ) from None
    return Score(
        total=total,
        domains=domains,
        placement={k: [*where[reference[k].model], reference[k].model] for k in present},
        speedups=speedups,
        weights=weights,
        missing=sorted(k for k in reference if k not in current),
        absent_models=sorted(m for m in where if m not in by_model),
        extra=sorted(k for k in current if k not in reference),
        unplaced=sorted({e.model for e in reference.values() if e.model not in where}),
        hierarchy=hierarchy,
    )


def score(
    results_dir: Path,
    reference: Path,
    hierarchy: Path | None = None,
    flat: bool = False,
    machine: str | None = None,
    across_machines: bool = False,
) -> Score:
    """Score the results of one machine against the reference, in the reference's own
    hierarchy unless a V0 `score.yml` is given, or with every model one equal share (`flat`).
    The reference's machine must be the results' unless `across_machines`."""
    ref = load_reference(reference)
    tree = ref.hierarchy
    if hierarchy is not None:
        tree = load_hierarchy(hierarchy)
    elif flat:
        tree = flat_hierarchy([e.model for e in ref.entries.values()])
    stored = ResultStore(results_dir).results()
    if not stored:
        raise DlperfError(f"no results in {results_dir} to score")
    results, on = one_machine(stored, machine)
    ref_machine = ref.machine or {}
    frozen_on = Machine(**{k: ref_machine.get(k) for k in Machine.__dataclass_fields__})
    # Compared by the recorded facts, not the id: a reference's id may be an older, shorter
    # one, and two machines' ids may collide. Unknown hardware is no one's twin.
    same = same_machine(frozen_on, on)
    ref_key = (on.id, on.label) if same else (str(ref_machine.get("id")), frozen_on.label)
    names = machine_names([ref_key, (on.id, on.label)])
    ref_label = names[ref_key]
    if ref_machine and not same and not across_machines:
        raise NothingComparable(
            f"the reference was frozen on {ref_label} and these results ran on "
            f"{names[(on.id, on.label)]}: a score compares one machine with itself (and a "
            "machine whose hardware was not recorded with nothing); add --across-machines to "
            "score them anyway"
        )
    # References before version 3 keyed configurations by the old configuration key.
    key = entry_key if ref.version >= 3 else (lambda r: legacy_config_key(r.spec))
    scored = weighted_score(ref.entries, entries_of(results, key), tree)
    return replace(scored, machine=names[(on.id, on.label)],
                   reference_machine=ref_label if ref_machine else "")  # fmt: skip
