"""`dlperf sweep FILE`: a matrix of benchmarks from a TOML file.

Repeats are interleaved across configurations (repeat 1 of every config, then repeat 2, ...)
so that machine drift hits every framework alike. Each finished repeat is saved at once, so a
sweep stopped by Ctrl-C or a crash resumes where it stopped; configurations that already have
a stored result are skipped; a configuration that fails is stored as failed and the sweep goes on.

Example::

    [sweep]
    preset = "smoke"                    # dlperf (default) or smoke
    frameworks = ["pytorch", "tensorflow"]
    models = ["resnet50", "bert"]
    precisions = ["fp32", "amp"]        # default ["fp32"]
    xla = [false, true]                 # default [false]
    batch_sizes = [4, 8]                # default: the preset's, per model and precision
    node_shapes = ["1x1"]               # nodes x devices per node
    repeats = 3                         # optional overrides of the preset
    skip = 2
    measure = 5
    device = "cpu"
    [sweep.set]                         # --set options for every config that accepts them;
    threads = ["1", "2"]                # a list is one more matrix dimension
    [sweep.python]                      # --python per framework: measure that interpreter's
    pytorch = "/opt/conda/bin/python"   # own install instead of a built env
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlperf import DlperfError
from dlperf.adapters import get_adapter
from dlperf.runner import PreparedRun, prepare_run, resolve_spec
from dlperf.schema import BenchmarkSpec, Repeat, Result
from dlperf.store import find_result, result_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

STATE_FILE = "sweep-state.json"
KEYS = {
    "preset", "frameworks", "models", "precisions", "xla", "batch_sizes", "node_shapes",
    "repeats", "skip", "measure", "device", "set", "timeout_s", "no_output_timeout_s", "python",
}  # fmt: skip


@dataclass
class SweepPlan:
    specs: list[BenchmarkSpec]
    skipped: list[str] = field(default_factory=list)  # why some matrix cells are not run
    pythons: dict[str, Path] = field(default_factory=dict)  # framework -> adopted interpreter


def load_plan(path: Path) -> SweepPlan:
    """Expand the matrix and validate every configuration before anything runs."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DlperfError(f"{path}: cannot read the sweep file: {exc}") from None
    table = data.get("sweep")
    if not isinstance(table, dict):
        raise DlperfError(f"{path}: needs a [sweep] table (see `dlperf sweep --help`)")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise DlperfError(
            f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(KEYS))}"
        )
    return expand(table)


def _list(table: dict[str, Any], key: str, default: list[Any]) -> list[Any]:
    value = table.get(key, default)
    return value if isinstance(value, list) else [value]


def _node_shape(text: str) -> tuple[int, int]:
    try:
        nodes, devices = (int(x) for x in str(text).lower().split("x"))
    except ValueError:
        raise DlperfError(f"node shape {text!r} must look like 1x1 (nodes x devices)") from None
    return nodes, devices


def expand(table: dict[str, Any]) -> SweepPlan:
    preset = table.get("preset", "dlperf")
    frameworks = _list(table, "frameworks", [])
    models = _list(table, "models", [])
    if not frameworks or not models:
        raise DlperfError("a sweep needs at least one framework and one model")
    pythons = table.get("python", {})
    if not isinstance(pythons, dict) or not all(isinstance(v, str) for v in pythons.values()):
        raise DlperfError('[sweep.python] maps a framework to an interpreter: pytorch = "/path"')
    unused = sorted(set(pythons) - set(frameworks))
    if unused:
        raise DlperfError(f"[sweep.python] names {', '.join(unused)}, not in the frameworks")
    set_table = table.get("set", {})
    set_keys = sorted(set_table)
    set_values = [[str(v) for v in _list(set_table, k, [])] for k in set_keys]
    plan = SweepPlan([], pythons={k: Path(v).expanduser() for k, v in pythons.items()})
    for fw, model, precision, xla, batch, shape, chosen in itertools.product(
        frameworks,
        models,
        _list(table, "precisions", ["fp32"]),
        _list(table, "xla", [False]),
        _list(table, "batch_sizes", [None]),
        _list(table, "node_shapes", ["1x1"]),
        itertools.product(*set_values),
    ):
        options = dict(zip(set_keys, chosen, strict=True))
        adapter = get_adapter(fw)  # unknown framework: an error listing the known ones
        if not adapter.runs(model):
            plan.skipped.append(f"{fw} has no {model}")
            continue
        nodes, devices = _node_shape(shape)
        accepted = adapter.option_keys(model)
        overrides = {
            "precision": precision,
            "xla": bool(xla),
            "batch_size": batch,
            "nodes": nodes,
            "devices_per_node": devices,
            "device": table.get("device"),
            "repeats": table.get("repeats"),
            "skip": table.get("skip"),
            "measure": table.get("measure"),
            "timeout_s": table.get("timeout_s"),
            "no_output_timeout_s": table.get("no_output_timeout_s"),
            "options": {k: v for k, v in options.items() if k in accepted} or None,
        }
        plan.specs.append(resolve_spec(fw, model, preset=preset, overrides=overrides))
    keys = [s.config_key() for s in plan.specs]
    if len(set(keys)) != len(keys):
        raise DlperfError("the sweep lists the same configuration twice")
    return plan


@dataclass
class SweepCallbacks:
    message: Callable[[str], None] = lambda _: None
    planned: Callable[[int], None] = lambda repeats_to_run: None
    repeat_started: Callable[[BenchmarkSpec, int], None] = lambda spec, i: None
    repeat_done: Callable[[BenchmarkSpec, Repeat], None] = lambda spec, r: None
    config_done: Callable[[Result, Path], None] = lambda result, path: None


def _resume_state(results_dir: Path, spec: BenchmarkSpec) -> tuple[str | None, dict[int, Repeat]]:
    """An unfinished earlier attempt at `spec`: its result id and the repeats it finished."""
    folder = result_dir(results_dir, spec.config_key())
    for state in sorted(folder.glob(f"*/{STATE_FILE}"), reverse=True):
        saved = json.loads(state.read_text())
        if saved.get("spec") != json.loads(spec.model_dump_json()):
            continue
        done = {}
        for path in state.parent.glob("repeat-*.json"):
            repeat = Repeat.model_validate_json(path.read_text())
            done[repeat.index] = repeat
        return state.parent.name, done
    return None, {}


def _save_repeat(run: PreparedRun, repeat: Repeat) -> None:
    path = run.raw_dir / f"repeat-{repeat.index}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(repeat.model_dump_json())
    tmp.replace(path)


def run_sweep(
    plan: SweepPlan,
    results_dir: Path,
    callbacks: SweepCallbacks | None = None,
    resume: bool = True,
) -> tuple[list[tuple[Result, Path]], dict[str, str]]:
    """Run the plan; returns the stored results and the configs that could not run at all."""
    cb = callbacks or SweepCallbacks()
    todo = []
    for spec in plan.specs:
        if resume and find_result(results_dir, spec.config_key()) is not None:
            cb.message(f"skip {spec.config_key()}: a result exists (--no-resume to rerun)")
            continue
        todo.append(spec)
    runs: dict[str, PreparedRun] = {}
    done: dict[str, dict[int, Repeat]] = {}
    failed_env: dict[str, str] = {}
    for spec in todo:
        key = spec.config_key()
        result_id, finished = _resume_state(results_dir, spec) if resume else (None, {})
        if finished:
            cb.message(f"resume {key}: {len(finished)} repeat(s) already done")
        try:
            runs[key] = prepare_run(
                spec, results_dir, result_id=result_id, python=plan.pythons.get(spec.framework)
            )
        except DlperfError as exc:  # e.g. an env that cannot be built: the sweep goes on
            failed_env[key] = str(exc)
            cb.message(f"[{key}] cannot run: {exc}")
            continue
        state = runs[key].raw_dir / STATE_FILE
        state.write_text(json.dumps({"spec": json.loads(spec.model_dump_json())}))
        done[key] = finished
    cb.planned(sum(s.repeats - len(done[s.config_key()]) for s in todo if s.config_key() in runs))
    outcomes = []
    for index in range(1, max((s.repeats for s in todo), default=0) + 1):
        for spec in todo:
            key = spec.config_key()
            if key not in runs or index > spec.repeats or index in done[key]:
                continue
            cb.repeat_started(spec, index)
            repeat = runs[key].run_repeat(index)
            _save_repeat(runs[key], repeat)
            done[key][index] = repeat
            cb.repeat_done(spec, repeat)
    for spec in todo:
        key = spec.config_key()
        if key in runs:
            repeats = [done[key][i] for i in sorted(done[key])]
            result, path = runs[key].finish(results_dir, repeats)
            (runs[key].raw_dir / STATE_FILE).unlink(missing_ok=True)
            cb.config_done(result, path)
            outcomes.append((result, path))
    return outcomes, failed_env
