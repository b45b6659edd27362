"""`dlperf sweep FILE`: a matrix of benchmarks from a TOML file.

Repeats are interleaved across configurations (repeat 1 of every config, then repeat 2, ...)
so that machine drift hits every framework alike. Each finished repeat is saved at once, so a
sweep stopped by Ctrl-C or a crash resumes where it stopped; configurations that already have
a stored result are skipped; a configuration that fails is stored as failed and the sweep goes on.

The keys are `dlperf run`'s settings (`dlperf.spec_options`, one table for both); a key that
takes a list (the plural ones, and xla) is one more dimension of the matrix. Example::

    [sweep]
    preset = "smoke"                    # dlperf (default) or smoke
    frameworks = ["pytorch", "tensorflow"]
    models = ["resnet50", "bert"]
    precisions = ["fp32", "amp"]        # default ["fp32"]
    xla = [false, true]                 # default [false]
    modes = ["train", "infer"]          # default ["train"]
    impls = ["ootb", "official"]        # default: ootb (microbenchmarks: micro)
    profiles = ["current", "dlperf-2020"]  # official configs only; default ["current"]
    image_sizes = [224]                 # image models only; default: the preset's
    seq_lens = [128, 384]               # sequence models only; default: the preset's
    scenarios = ["none", "offline"]     # inference only; "none": without LoadGen
    batch_sizes = [4, 8]                # default: the preset's, per model and precision
    node_shapes = ["1x1"]               # nodes x devices per node
    repeats = 3                         # optional overrides of the preset
    skip = 2
    measure = 5
    timeout_s = 600                     # --timeout
    no_output_timeout_s = 120           # --no-output-timeout
    device = "cpu"
    [sweep.set]                         # --set options for every config that accepts them;
    threads = ["1", "2"]                # a list is one more matrix dimension
    [sweep.loadgen]                     # LoadGen's test settings for every scenario config,
    min_duration_s = 10                 # named as run's options: target_qps, min_query_count...
    [sweep.python]                      # --python per framework: measure that interpreter's
    pytorch = "/opt/conda/bin/python"   # own install instead of a built env
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import stat
import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, FilePath, ValidationError, create_model

from dlperf import DlperfError
from dlperf.adapter import WorkloadOption
from dlperf.adapters import get_adapter
from dlperf.assemble import new_result_id
from dlperf.files import (
    NotALockFile,
    StorageError,
    atomic_write,
    atomic_write_json,
    check_writable,
    remove_empty_files,
    storage_error,
    try_lock,
)
from dlperf.identity import describe, identity_of, spec_key, this_machine
from dlperf.models import PresetValues, get_model, preset_values
from dlperf.resultio import check_readable
from dlperf.runner import PreparedRun, prepare_run
from dlperf.schema import BenchmarkSpec, Repeat, Result
from dlperf.spec import check_run
from dlperf.spec_options import (
    SWEEP_KEYS,
    SWEEP_NAMES,
    SweepCell,
    option_overrides,
    resolve_overrides,
)
from dlperf.store import ResultStore

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

STATE_FILE = "sweep-state.json"
LOCK_FILE = "sweep.lock"  # an attempt's own lock, as earlier dlperf held it (still honoured)
SWEEPS_DIR = ".sweeps"  # in the results folder: one `<owner>.lock` per live sweep
OWNER = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,99}")


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _sweep_file() -> type[BaseModel]:
    """The [sweep] table's model: a field per key of the spec options' table (`SWEEP_KEYS`, a
    "table.key" one in a model of its own [sweep.table]), and `python`."""
    tables: dict[str, dict[str, Any]] = {"": {}}
    for name, (key, _) in SWEEP_KEYS.items():
        table, _, sub = name.rpartition(".")
        tables.setdefault(table, {})[sub] = (key.annotation(), key.default)
    fields = tables.pop("")
    for table, keys in tables.items():
        model = create_model(f"Sweep{table.title()}", __base__=_Table, **keys)
        fields[table] = (model, model())
    return create_model(
        "SweepFile",
        __base__=_Table,
        __doc__="The [sweep] table: every key, the type of its value and its default. Values "
        'keep their TOML types: `xla = "no"` is refused, not read as true. Ranges and names '
        "are checked where a single run's are (`resolve_spec`), so a sweep and `dlperf run` "
        "agree.",
        **fields,
        python=(dict[str, FilePath], {}),  # --python per framework: not a spec setting
    )


SweepFile = _sweep_file()
KEYS = frozenset(SweepFile.model_fields)


@dataclass
class SweepPlan:
    specs: list[BenchmarkSpec]
    skipped: list[str] = field(default_factory=list)  # why some matrix cells are not run
    pythons: dict[str, Path] = field(default_factory=dict)  # framework -> adopted interpreter


def load_plan(path: Path) -> SweepPlan:
    """Expand the matrix and validate every configuration before anything runs."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DlperfError(f"{path}: cannot read the sweep file: {exc}") from None
    table = data.get("sweep")
    if not isinstance(table, dict):
        raise DlperfError(f"{path}: needs a [sweep] table (see `dlperf sweep --help`)")
    if set(data) != {"sweep"}:
        others = ", ".join(sorted(set(data) - {"sweep"}))
        raise DlperfError(
            f"{path}: unknown top-level key(s) {others}; everything belongs in the [sweep] table"
        )
    try:
        return expand(table)
    except DlperfError as exc:
        raise DlperfError(f"{path}: {exc}") from None


def _toml(value: Any) -> str:
    return json.dumps(value, default=str)


def _problem(error: Any) -> str:
    """One pydantic error about the [sweep] table, in the file's own terms."""
    loc = error["loc"]
    where = ".".join(str(x) for x in loc if not isinstance(x, int))
    kind, msg = error["type"], error["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":  # every unknown key of one table, in one line
        table = ".".join(str(x) for x in loc[:-1])
        model = SweepFile.model_fields[table].annotation if table else SweepFile
        known = sorted(f"{table}.{k}" if table else k for k in model.model_fields)
        return f"unknown key(s) {loc[-1]}; known: {', '.join(known)}"
    if kind == "missing":
        return f"{where} is missing: a sweep needs at least one framework and one model"
    if kind == "too_short":
        return f"{where} is an empty list: give at least one value"
    hint = {
        "bool_type": ": write true or false, without quotes",
        "int_type": ": write a whole number, without quotes",
        "float_type": ": write a number, without quotes",
        "string_type": ': write it in quotes, such as "1"',
        "dict_type": ": write it as a table, such as [sweep.set] followed by KEY = VALUE lines",
        "model_type": ": write it as a table, such as [sweep.loadgen] followed by KEY = VALUE "
        "lines",
        "path_not_file": ": give the path of an existing Python interpreter",
    }.get(kind, "")
    return f"{where} = {_toml(error['input'])}: {msg}{hint}"


def _overrides(given: dict[str, Any], shape: PresetValues) -> dict[str, Any]:
    """The overrides of one configuration of the matrix, from its value of each key. A key that
    does not apply to it (`SweepKey.applies`) leaves it as it is: the same configuration then
    comes up more than once, and is kept once."""

    def option_values(names: Iterable[str]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in names:
            values.update(SWEEP_KEYS[name][1].sweep_values(given[name]))
        return values

    present = [name for name, value in given.items() if value is not None]
    cell = SweepCell(shape, option_overrides(option_values(present)))
    return option_overrides(option_values(n for n in present if SWEEP_KEYS[n][0].applies_to(cell)))


def expand(table: dict[str, Any]) -> SweepPlan:
    """Every configuration of the matrix in `table` (the [sweep] table), checked."""
    sweep = _validated(table)
    declared = _declared_options(sweep)
    plan = SweepPlan([], pythons={k: v.expanduser() for k, v in sweep.python.items()})
    specs: dict[tuple, BenchmarkSpec] = {}
    dimensions = _dimensions(sweep)
    for chosen in itertools.product(*dimensions.values()):
        given = dict(zip(dimensions, chosen, strict=True))
        spec = _cell_spec(given, declared, sweep.preset, plan.skipped)
        if spec is not None:
            specs.setdefault(spec_key(spec), spec)
    plan.specs = list(specs.values())
    if not plan.specs:
        raise DlperfError(
            "the sweep has no configuration to run: "
            + "; ".join(sorted(set(plan.skipped)))
            + "; `dlperf list` shows which framework has which model"
        )
    return plan


def _validated(table: dict[str, Any]) -> Any:  # a SweepFile: a model made at import
    """The [sweep] table as a SweepFile, its problems said in the file's own terms; a list
    that names a value twice is refused (the sweep would run a configuration twice)."""
    try:
        sweep = SweepFile.model_validate(table)
    except ValidationError as exc:
        errors = exc.errors()
        extra: dict[tuple, list[str]] = {}  # table -> its unknown keys: typos first, one line
        for e in errors:
            if e["type"] == "extra_forbidden":
                extra.setdefault(e["loc"][:-1], []).append(".".join(map(str, e["loc"])))
        if extra:
            errors = [{"type": "extra_forbidden", "loc": (*loc, ", ".join(keys)), "msg": ""}
                      for loc, keys in extra.items()]  # fmt: skip
        raise DlperfError("[sweep] " + "; ".join(_problem(e) for e in errors)) from None
    for name in SweepFile.model_fields:
        values = getattr(sweep, name)
        lists = values.values() if isinstance(values, dict) else [values]
        for many in (v for v in lists if isinstance(v, list)):
            twice = next((v for i, v in enumerate(many) if v in many[:i]), None)
            if twice is not None:
                raise DlperfError(
                    f"[sweep] {name} lists {_toml(twice)} twice: the sweep would run the same "
                    "configuration twice"
                )
    return sweep


def _declared_options(sweep: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """(framework, model) -> the workload options it declares, for every pair of the sweep a
    framework runs; the frameworks, models, [sweep.python] and [sweep.set] keys checked."""
    adapters = {fw: get_adapter(fw) for fw in sweep.frameworks}  # unknown: names the known
    for model in sweep.models:
        get_model(model)  # unknown: names the known
    unused = sorted(set(sweep.python) - set(sweep.frameworks))
    if unused:
        raise DlperfError(f"[sweep.python] names {', '.join(unused)}, not in the frameworks")
    pairs = [(fw, m) for fw in sweep.frameworks for m in sweep.models if adapters[fw].runs(m)]
    declared = {(fw, m): adapters[fw].option_declarations(m) for fw, m in pairs}
    takers = {key for options in declared.values() for key in options}
    unknown = sorted(set(sweep.set) - takers)
    if unknown:
        raise DlperfError(
            f"[sweep.set] key(s) {', '.join(unknown)} are taken by none of the sweep's "
            f"workloads; their keys: {', '.join(sorted(takers)) or '(none)'}"
        )
    for key, values in sorted(sweep.set.items()):
        for (fw, model), options in declared.items():
            if isinstance(options.get(key), WorkloadOption):
                _check_distinct(options[key], key, values, f"{fw} {model}")
    return declared


def _check_distinct(option: WorkloadOption, key: str, values: list, workload: str) -> None:
    """ "5" and "5.0" are one value of a number: a [sweep.set] list may not give both."""
    seen: dict[object, str] = {}
    for value in values:
        same = seen.setdefault(option.canonical(value), value)
        if same != value:
            kind = "integer" if option.kind is int else "number"
            raise DlperfError(
                f"[sweep.set] {key} lists {same} and {value}: one {kind} to {workload}, "
                "so the sweep would run the same configuration twice"
            )


def _dimensions(sweep: Any) -> dict[str, list]:
    """Each key's values (a list key's list, any other key's one value): the matrix is their
    product; a [sweep.set] key given as a list is one more dimension."""
    dimensions = {}
    for name, (key, _) in SWEEP_KEYS.items():
        value = sweep
        for part in name.split("."):
            value = getattr(value, part)
        dimensions[name] = value if key.many and value is not None else [value]
    set_keys = sorted(sweep.set)
    set_values = [[str(v) for v in sweep.set[k]] for k in set_keys]
    dimensions["set"] = [dict(zip(set_keys, chosen, strict=True))
                         for chosen in itertools.product(*set_values)]  # fmt: skip
    return dimensions


def _cell_spec(
    given: dict[str, Any],
    declared: dict[tuple[str, str], dict[str, Any]],
    preset: str,
    skipped: list[str],
) -> BenchmarkSpec | None:
    """The spec of one cell of the matrix (`given`: each dimension's value), or None, with
    the reason added to `skipped`, when the cell is not a configuration dlperf runs."""
    fw, model, impl = given["frameworks"], given["models"], given["impls"]
    if (fw, model) not in declared:
        skipped.append(f"{fw} has no {model}")
        return None
    micro = get_model(model).kind == "micro"
    if impl is not None and (impl == "micro") != micro:
        skipped.append(f"{model} does not run with impl {impl}")
        return None
    given = {**given, "set": {k: v for k, v in given["set"].items() if k in declared[fw, model]}}
    overrides = _overrides(given, preset_values(model, preset))
    if impl != "official":
        return resolve_overrides(overrides, SWEEP_NAMES)
    try:
        return resolve_overrides(overrides, SWEEP_NAMES)
    except DlperfError as exc:  # no official implementation of this pair
        skipped.append(f"{fw} {model} official: {exc}")
        return None


@dataclass
class SweepCallbacks:
    message: Callable[[str], None] = lambda _: None
    planned: Callable[[int], None] = lambda repeats_to_run: None
    repeat_started: Callable[[BenchmarkSpec, int], None] = lambda spec, i: None
    repeat_done: Callable[[BenchmarkSpec, Repeat], None] = lambda spec, r: None
    config_done: Callable[[Result, Path], None] = lambda result, path: None


class SweepLock:
    """A running sweep's one lock: ``<results>/.sweeps/<owner>.lock``, an `flock` held from the
    sweep's start to its end (and ended with its process, kill -9 included).

    Each attempt the sweep runs names `owner` in its state file, so one descriptor covers every
    configuration however large the matrix: an attempt is a live sweep's while its owner's lock
    is held, and free to resume once it is not."""

    def __init__(self, results_dir: Path) -> None:
        self.dir = Path(results_dir) / SWEEPS_DIR
        self.owner = f"{new_result_id()}-{os.getpid()}"
        self.path = self.dir / f"{self.owner}.lock"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            mode = os.lstat(self.dir).st_mode
        except OSError as exc:
            raise storage_error(self.dir, exc) from None
        if not stat.S_ISDIR(mode):  # a link there would put (and remove) locks elsewhere
            raise StorageError(
                f"{self.dir} is not a folder (a symbolic link?): dlperf keeps its sweeps' locks "
                "in a folder of its own there; remove it and run the sweep again"
            )
        handle = try_lock(self.path)  # NotALockFile: refused, never followed
        if handle is None:  # a fresh name: only another process with the same name and pid
            raise StorageError(f"cannot lock {self.path}: another process holds it")
        self.handle: IO[bytes] | None = handle

    def owner_lock(self, owner: str | None, attempt: Path) -> Path:
        """The lock that says whether `owner` (None: a sweep of an older dlperf, which locked
        the attempt's own LOCK_FILE) is alive."""
        return attempt / LOCK_FILE if owner is None else self.dir / f"{owner}.lock"

    def close(self) -> None:
        """End the sweep's claim: its unfinished attempts are free to resume at once. The file
        goes before the lock, so no other sweep ever takes a new file for this owner's."""
        if self.handle is not None:
            with contextlib.suppress(OSError):  # a folder put there since: left to the user
                self.path.unlink(missing_ok=True)
            self.handle.close()
            self.handle = None


@dataclass
class _Attempt:
    """An unfinished earlier attempt at a configuration, now claimed by this sweep."""

    result_id: str
    finished: dict[int, Repeat]


def _read_state(state: Path, wanted: dict[str, Any]) -> dict[str, Any] | None:
    """The attempt's state when it is one of `wanted`'s, with a well-formed owner (or none)."""
    try:
        saved = json.loads(state.read_bytes())
    except (OSError, ValueError):  # finished while we looked, or half-written: passed over
        return None
    if not isinstance(saved, dict) or saved.get("spec") != wanted:
        return None
    owner = saved.get("owner")
    if owner is not None and not (isinstance(owner, str) and OWNER.fullmatch(owner)):
        return None  # not a name dlperf gives: never a path to follow
    return saved


def _resume_state(results_dir: Path, spec: BenchmarkSpec, sweep: SweepLock) -> _Attempt | None:
    """The newest unfinished attempt at `spec` that no live sweep holds, claimed for `sweep`.

    An attempt's state names the sweep that owns it; that sweep holds its `SweepLock` from
    start to finish, so the attempt of a sweep running right now is never taken for an
    abandoned one (the lock dies with its process, kill -9 included). To claim one, a sweep
    takes the dead owner's lock (created anew if the owner removed it), reads the state again
    and, if the owner is still the same, writes itself in: two sweeps never claim one attempt.
    Unreadable state or repeat files are passed over, and so is an attempt whose lock path holds
    anything but a lock file (a link, a folder, a FIFO) or whose folder is a link: it is warned
    about and left as it is, never followed or written, and the sweep measures that
    configuration anew.
    """
    folder = ResultStore(results_dir).folder(spec)
    wanted = json.loads(spec.model_dump_json())
    for state in sorted(folder.glob(f"*/{STATE_FILE}"), reverse=True):
        if state.parent.is_symlink():  # its state, lock and repeats would be written there
            warnings.warn(
                f"{state.parent} is a symbolic link, not an attempt's folder: the attempt is not "
                "resumed (remove the link to stop this warning)",
                stacklevel=2,
            )
            continue
        saved = _read_state(state, wanted)
        if saved is None or saved.get("owner") == sweep.owner:
            continue
        owner = saved.get("owner")
        lock_path = sweep.owner_lock(owner, state.parent)
        try:
            lock = try_lock(lock_path)
        except NotALockFile as exc:
            warnings.warn(f"{exc}; the attempt {state.parent} is not resumed", stacklevel=2)
            continue
        if lock is None:
            continue  # a live sweep's
        try:
            again = _read_state(state, wanted)
            if again is None or again.get("owner") != owner:
                continue  # finished, or claimed by another sweep while we looked
            atomic_write_json(state, {"spec": wanted, "owner": sweep.owner})
        finally:  # the dead owner's lock file: its claim is over
            with contextlib.suppress(OSError):  # unlink never follows a link swapped in since
                lock_path.unlink(missing_ok=True)
            lock.close()
        done = {}
        for path in state.parent.glob("repeat-*.json"):
            try:
                repeat = Repeat.model_validate_json(path.read_bytes())
            except (OSError, ValueError):
                continue
            done[repeat.index] = repeat
        return _Attempt(state.parent.name, done)
    return None


def _save_repeat(run: PreparedRun, repeat: Repeat) -> None:
    atomic_write(run.raw_dir / f"repeat-{repeat.index}.json", repeat.model_dump_json())


def run_sweep(
    plan: SweepPlan,
    results_dir: Path,
    callbacks: SweepCallbacks | None = None,
    resume: bool = True,
) -> tuple[list[tuple[Result, Path]], dict[str, str]]:
    """Run the plan; returns the stored results and the configs that could not run at all."""
    cb = callbacks or SweepCallbacks()
    todo = _not_measured(plan.specs, results_dir, cb) if resume else list(plan.specs)
    if not todo:
        cb.planned(0)  # nothing left to measure
        return [], {}
    # A folder that cannot take the sweep is refused before its lock is made there.
    check_readable(results_dir)
    check_writable(results_dir, "the results folder")
    sweep = SweepLock(results_dir)  # one lock for every attempt it runs
    try:
        runs, done, failed_env = _prepare(todo, plan, results_dir, sweep, resume, cb)
        cb.planned(sum(s.repeats - len(done[describe(s)]) for s in todo if describe(s) in runs))
        _measure_interleaved(todo, runs, done, cb)
        outcomes = []
        for spec in todo:
            key = describe(spec)
            if key in runs:
                repeats = [done[key][i] for i in sorted(done[key])]
                result, path = runs[key].finish(results_dir, repeats)
                (runs[key].raw_dir / STATE_FILE).unlink(missing_ok=True)
                cb.config_done(result, path)
                outcomes.append((result, path))
    finally:  # an interrupted attempt is free to resume at once
        sweep.close()
    return outcomes, failed_env


def _not_measured(
    specs: list[BenchmarkSpec], results_dir: Path, cb: SweepCallbacks
) -> list[BenchmarkSpec]:
    """The specs this machine has no stored result of (a result of another machine is not
    this one's)."""
    stored = {identity_of(r).key for r in ResultStore(results_dir).newest()}
    todo = []
    for spec in specs:
        benchmark, settings = spec_key(spec)
        if (benchmark, this_machine(spec.device).id, settings) in stored:
            cb.message(f"skip {describe(spec)}: a result exists (--no-resume to rerun)")
            continue
        todo.append(spec)
    return todo


def _prepare(
    todo: list[BenchmarkSpec],
    plan: SweepPlan,
    results_dir: Path,
    sweep: SweepLock,
    resume: bool,
    cb: SweepCallbacks,
) -> tuple[dict[str, PreparedRun], dict[str, dict[int, Repeat]], dict[str, str]]:
    """Each configuration prepared (an abandoned attempt at it resumed) and claimed by `sweep`:
    its run, the repeats it already has, and why the others cannot run, by configuration."""
    runs: dict[str, PreparedRun] = {}
    done: dict[str, dict[int, Repeat]] = {}
    failed_env: dict[str, str] = {}
    for spec in todo:
        key = describe(spec)
        attempt = _resume_state(results_dir, spec, sweep) if resume else None
        if attempt and attempt.finished:
            cb.message(f"resume {key}: {len(attempt.finished)} repeat(s) already done")
        try:
            runs[key] = prepare_run(
                check_run(spec, python=plan.pythons.get(spec.framework)),
                results_dir,
                result_id=attempt.result_id if attempt else None,
            )
        except StorageError:
            raise  # the results folder itself: no other configuration can be stored either
        except DlperfError as exc:  # e.g. an env that cannot be built: the sweep goes on
            failed_env[key] = str(exc)
            cb.message(f"[{key}] cannot run: {exc}")
            continue
        atomic_write_json(
            runs[key].raw_dir / STATE_FILE,
            {"spec": json.loads(spec.model_dump_json()), "owner": sweep.owner},
        )
        done[key] = attempt.finished if attempt else {}
    return runs, done, failed_env


def _measure_interleaved(
    todo: list[BenchmarkSpec],
    runs: dict[str, PreparedRun],
    done: dict[str, dict[int, Repeat]],
    cb: SweepCallbacks,
) -> None:
    """Repeat 1 of every configuration, then repeat 2, ...: each saved as it ends (`done`)."""
    for index in range(1, max((s.repeats for s in todo), default=0) + 1):
        for spec in todo:
            key = describe(spec)
            if key not in runs or index > spec.repeats or index in done[key]:
                continue
            cb.repeat_started(spec, index)
            try:
                repeat = runs[key].measure(index)
                _save_repeat(runs[key], repeat)
            except StorageError as exc:  # the results disk: no later repeat could be kept
                remove_empty_files(runs[key].raw_dir)
                raise StorageError(
                    f"{exc}; the sweep stopped there: the repeats saved before resume with the "
                    "same `dlperf sweep` command once the folder can be written",
                    exit_code=2,
                ) from None
            done[key][index] = repeat
            cb.repeat_done(spec, repeat)
