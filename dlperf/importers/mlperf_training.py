"""MLPerf Training result folders (`dlperf parse mlperf-training`) -> Results: one result per
benchmark folder (a system's `result_*.txt` runs of one benchmark), a repeat per run.

MLPerf's own package (mlperf-logging: the compliance checker and the result summarizer MLCommons
publish the results with) judges each run and averages the runs' times into the benchmark's
score; dlperf adds what MLPerf does not define: a throughput from the log's own training marks,
per accelerator too, and the MFU. The system (accelerators, nodes, framework) comes from the
submitter's `systems/<system>.json`, as the summarizer reads it.

The folders are other people's files: each is read once, by dlperf, and only when it is a
regular file within the caps below; mlperf-logging gets the lines dlperf read, never a path
(its own reader globs the folder again, blocks on a FIFO and runs a quadratic regular
expression over every line).
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import json
import logging
import math
import os
import re
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from dlperf import DlperfError
from dlperf.adapters._shared import model_math
from dlperf.importers import imported_result
from dlperf.published import LEFT_OUT, NO_MFU, NO_SCORE, NO_THROUGHPUT, NOT_IMPORTED, SUITE
from dlperf.schema import (
    MAX_DEVICES_PER_NODE,
    MAX_NODES,
    MAX_SIZE,
    BenchmarkSpec,
    Environment,
    Metrics,
    PeerStat,
    Repeat,
    RepeatStatus,
    Result,
    ResultStatus,
    TrainingRun,
)
from dlperf.store import ResultStore

RESULT_FILES = "result_*.txt"
# Caps on what one folder may hold, each well above what MLCommons publishes (v4.0: at most 40
# runs a folder, 3 MB and 21,356 :::MLLOG lines a log, 17.6 KB a line, system files of a few
# KB). Beyond them the input is not an MLPerf submission, and reading it would cost minutes and
# gigabytes: it is refused, saying which file and cap.
MAX_RUNS = 100
MAX_LOG_BYTES = 64 * 2**20
MAX_LOG_RECORDS = 100_000  # per log, and the marks a folder's runs keep (USED_KEYS) together
MAX_LINE_CHARS = 64 * 2**10
MAX_JSON_BYTES = 2**20  # system.json, scaling.json
# No count in an MLPerf log comes near this (Criteo's 4.2e9 samples, GPT-3's 1.4e9 tokens, times
# in ms since 1970 at 1.7e12): beyond it, or not finite, a number is damage, not a measurement.
MAX_COUNT = 1e15
# The lines a run keeps once checked: what its throughput, batch and FLOPs are read from.
USED_KEYS = frozenset((
    "submission_benchmark", "global_batch_size", "train_samples", "max_predictions_per_seq",
    "run_start", "run_stop", "epoch_start", "epoch_stop", "block_start", "block_stop",
    "eval_start", "eval_stop", "eval_accuracy",
))  # fmt: skip
# MLPerf's benchmark names -> dlperf's models (others keep MLPerf's name).
MODELS = {"resnet": "resnet50", "bert": "bert-large"}
# The training set of each benchmark whose log counts progress in epochs (MLPerf's rules fix
# the data set): ImageNet-1k, the OpenImages subset of RetinaNet (`ssd`), COCO 2017 train with
# annotations (Mask R-CNN), KiTS19's 168 training cases (UNet3D). A log's `train_samples` and
# epoch numbers are read against them: submitters log them in their own units.
DATASETS = {
    "resnet": 1_281_167, "ssd": 1_170_301, "retinanet": 1_170_301, "maskrcnn": 117_266,
    "unet3d": 168,
}  # fmt: skip
# BERT's epoch_num and train_samples count sequences. Others: their samples_count marks.
SAMPLE_COUNTED = ("bert",)
# What a log without either gives no throughput for, in words (a run's note, a folder's refusal).
COUNTED = (
    f"dlperf counts the samples of {', '.join([*DATASETS, *SAMPLE_COUNTED])} and of "
    "samples_count marks"
)
NEAR = 0.01  # a logged size within 1% of the data set's is the data set (MosaicML: 1,281,168)
BERT_SEQ_LEN = 512  # MLPerf BERT's max_seq_length (its packed sequences fill up to it)
FRAMEWORKS = (  # system.json's "framework" text -> dlperf's framework name, first match
    ("pytorch", "pytorch"), ("tensorflow", "tensorflow"), ("paddle", "paddle"),
    ("mxnet", "mxnet"), ("oneflow", "oneflow"), ("jax", "jax"), ("mindspore", "mindspore"),
    ("tinygrad", "tinygrad"), ("nemo", "pytorch"), ("megatron", "pytorch"),
)  # fmt: skip
ROUND = re.compile(r"(?:^|[^0-9a-z])v(\d+\.\d+)(?:$|[^0-9])", re.IGNORECASE)
# What submitters write into system.json for a value they never filled in: no value at all.
PLACEHOLDERS = frozenset(("", "todo", "tbd", "tba", "n/a", "na", "none", "null", "-", "unknown"))
# No MLPerf Training run is older (the first round, v0.5, ran in 2018): a log's time before it
# is no date (a clock that was not set), and the result keeps the import's time.
EARLIEST_LOG = datetime(2018, 1, 1, tzinfo=timezone.utc)
DAMAGED = "the file is damaged or not MLPerf's: copy it again from the submission, or move it out"


class LeftOut(Exception):
    """A folder (or a file of one) the import leaves out, and why: the rest is imported, the
    result says so, and the command exits 2."""


class NotCounted(LeftOut):
    """A whole benchmark folder dlperf does not import: its logs count no samples dlperf can
    read. Said as NOT_IMPORTED; the command's exit code stays."""


@dataclass(frozen=True)
class Folder:
    """A benchmark folder and what surrounds it: the system description and the round."""

    path: Path
    system_file: Path
    system: dict[str, Any]
    ruleset: str  # "4.0.0"

    @property
    def round(self) -> str:
        return "v" + self.ruleset.rsplit(".", 1)[0]


def import_folders(
    paths: list[Path], *, results_dir: Path, round_: str | None = None
) -> list[tuple[Result, Path]]:
    """One result per benchmark folder found under `paths` (a benchmark folder, a system's
    `results/<system>/`, a submitter's tree or a whole round). `round_` ("4.0"): the rules to
    check against where no folder name says (`training_results_v4.0/`, `v4.0-...`).
    A folder without a system description or with runs of two benchmarks is left out: every
    result of the import says which and why (`LEFT_OUT`), and the CLI exits 2. A benchmark
    whose logs count progress in units dlperf cannot turn into samples is not imported, said
    the same way (`NOT_IMPORTED`) without changing the exit code: a known limit, not damage.
    Damaged input (a number that is not finite, a file over a cap) refuses the whole import:
    nothing is stored."""
    built, left_out = [], []
    with noted_interrupts() as stop_if_interrupted:
        for path in result_folders(paths):
            try:
                folder = describe_folder(path, round_)
                built.append(folder_result(folder, stop_if_interrupted))
            except LeftOut as why:
                said = NOT_IMPORTED if isinstance(why, NotCounted) else LEFT_OUT
                left_out.append(f"{said}{path} ({why})")
    if not built:
        raise DlperfError("; ".join(left_out) + ": nothing to import")
    built = [r.model_copy(update={"warnings": [*r.warnings, *left_out]}) for r in built]
    # Written once every result is made: a refused folder leaves nothing half-imported.
    return ResultStore(results_dir).write_all(built)


def result_folders(paths: list[Path]) -> list[Path]:
    """The folders under `paths` that hold `result_*.txt` files, in order."""
    folders: list[Path] = []
    for path in paths:
        if not path.exists():
            raise DlperfError(f"{path}: no such file or folder")
        if not path.is_dir():
            raise DlperfError(
                f"{path}: a file; give its folder (MLPerf scores a benchmark folder of "
                f"{RESULT_FILES} runs together)"
            )
        found = sorted({p.parent for p in path.rglob(RESULT_FILES) if p.is_file()})
        if not found:
            raise DlperfError(
                f"{path}: no {RESULT_FILES} files. An MLPerf Training benchmark folder "
                "(results/<system>/<benchmark>/ in github.com/mlcommons/training_results_vX.Y) "
                "holds one per run: give such a folder, a system's, or a submitter's tree"
            )
        folders += found
    return folders


def describe_folder(path: Path, round_: str | None) -> Folder:
    ruleset = ruleset_of(path, round_)
    system_file = system_description(path)
    system = read_json(system_file, "system description")
    if not isinstance(system, dict):
        raise DlperfError(f"{system_file}: not a system description (a JSON object)")
    return Folder(path, system_file, system, ruleset)


def system_description(folder: Path) -> Path:
    """The submitter's description of the system that ran `folder`: `system.json` beside the
    runs, or `<submitter>/systems/<system>.json` of a results tree
    (`<submitter>/results/<system>/<benchmark>/`). LeftOut where there is none."""
    beside = folder / "system.json"
    if beside.is_file():
        return beside
    tried = [beside]
    parts = folder.resolve().parts
    if len(parts) >= 4 and parts[-3] == "results":
        in_tree = Path(*parts[:-3]) / "systems" / f"{parts[-2]}.json"
        if in_tree.is_file():
            return in_tree
        tried.append(in_tree)
    raise LeftOut(
        f"no system description ({' or '.join(map(str, tried))}): it names the accelerators "
        "and their count, without which the throughput per accelerator cannot be told; copy "
        "the submitter's systems/<system>.json beside the result files"
    )


# --------------------------------------------------------------------------------------------
# Reading other people's files: regular files only, within the caps
# --------------------------------------------------------------------------------------------


def open_regular(path: Path, limit: int, what: str) -> int:
    """A read descriptor of `path`, a regular file of at most `limit` bytes. Opened without
    blocking, then checked: a FIFO or a device (a symlink to /dev/zero) is never read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise DlperfError(f"{path}: the {what} cannot be opened: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise LeftOut(f"{path}: {file_kind(info.st_mode)}, not a regular file: not read")
    if info.st_size > limit:
        os.close(fd)
        raise DlperfError(
            f"{path}: the {what} is {info.st_size:,} bytes, and dlperf reads at most {limit:,} "
            f"(MLCommons' are far smaller): {DAMAGED}"
        )
    return fd


def file_kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISDIR, "a folder"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "a special file")


def read_json(path: Path, what: str) -> Any:
    """A small JSON file (`what` names it in a refusal)."""
    fd = open_regular(path, MAX_JSON_BYTES, what)
    with open(fd, "rb") as f:
        data = f.read(MAX_JSON_BYTES + 1)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise DlperfError(f"{path}: not a readable {what}: nested too deep") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise DlperfError(f"{path}: not a readable {what}: {exc}") from None


def run_files(folder: Path) -> tuple[list[Path], list[str]]:
    """The folder's result files that are regular files, in run order, and what was left out
    (FIFOs, devices). More than MAX_RUNS: refused before any is read."""
    named = sorted(folder.glob(RESULT_FILES), key=_run_order)
    if len(named) > MAX_RUNS:
        raise DlperfError(
            f"{folder}: {len(named):,} {RESULT_FILES} files, and an MLPerf benchmark folder "
            f"holds at most {max_required_runs()} runs (dlperf reads up to {MAX_RUNS}): give "
            "the folder of one benchmark's runs"
        )
    files, left_out = [], []
    for path in named:
        try:
            info = path.stat()
        except OSError as exc:  # a dangling symlink
            left_out.append(f"{LEFT_OUT}{path}: cannot be read ({exc.strerror})")
            continue
        if stat.S_ISREG(info.st_mode):
            files.append(path)
        else:
            left_out.append(f"{LEFT_OUT}{path}: {file_kind(info.st_mode)}, not a regular file")
    return files, left_out


@functools.cache
def max_required_runs() -> int:
    from mlperf_logging.benchmark_meta import get_result_file_counts

    return max(get_result_file_counts("training").values())


@dataclass(frozen=True)
class Log:
    """A result file as dlperf read it: mlperf-logging's parsed lines, and the lines that could
    not be read (the checker fails a run with any)."""

    lines: list[Any]
    unread: list[str]


def read_log(file: Path, ruleset: str) -> Log:
    """`file`'s :::MLLOG lines, parsed by mlperf-logging's parser of `ruleset` one line at a
    time. A line over MAX_LINE_CHARS is skipped unread, before any parser sees it."""
    parser = log_parser(ruleset)
    fd = open_regular(file, MAX_LOG_BYTES, "result file")
    lines: list[Any] = []
    unread: list[str] = []
    chars = records = 0
    # latin-1 and universal newlines, as mlperf-logging opens a log
    with open(fd, encoding="latin-1") as f:
        for number in itertools.count(1):
            text = f.readline(MAX_LINE_CHARS + 1)
            if not text:
                break
            chars += len(text)
            too_long = len(text) > MAX_LINE_CHARS and not text.endswith("\n")
            if too_long:
                chars += _skip_line(f, MAX_LOG_BYTES - chars)
                unread.append(f"line {number}: over {MAX_LINE_CHARS:,} characters, not read")
            if chars > MAX_LOG_BYTES:
                raise DlperfError(f"{file}: grew past {MAX_LOG_BYTES:,} bytes while read")
            at = text.rfind(parser.TOKEN)  # the last token on the line, as mlperf-logging takes
            if too_long or at < 0:
                continue
            records += 1
            try:
                line = parser.string_to_logline(records - 1, text[at:].strip())
            except (ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
                unread.append(f"line {number}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            _check_number(file, f"line {number} ({line.key}): time_ms", line.timestamp)
            lines.append(line)
            if len(lines) > MAX_LOG_RECORDS:
                raise DlperfError(
                    f"{file}: more than {MAX_LOG_RECORDS:,} :::MLLOG lines (MLCommons' logs "
                    f"hold tens of thousands at most): {DAMAGED}"
                )
    return Log(lines, unread)


def _skip_line(f: io.TextIOBase, budget: int) -> int:
    """Reads the rest of an over-long line in bounded pieces (never more than `budget`
    characters and one piece); the characters read."""
    skipped = 0
    while skipped <= budget:
        piece = f.readline(MAX_LINE_CHARS)
        skipped += len(piece)
        if not piece or piece.endswith("\n"):
            break
    return skipped


@functools.cache
def log_parser(ruleset: str) -> Any:
    """mlperf-logging's line parser of `ruleset` ("4.0.0" -> its `ruleset_400` module)."""
    import importlib

    name = "ruleset_" + ruleset.replace(".", "")
    return importlib.import_module(f"mlperf_logging.compliance_checker.mlp_parser.{name}")


def _check_number(file: Path, field: str, value: float) -> float:
    if not math.isfinite(value) or abs(value) > MAX_COUNT:
        raise DlperfError(f"{file}: {field} is {value!r}, not a finite count or time: {DAMAGED}")
    return value


def log_count(file: Path, key: str, value: Any) -> float | None:
    """A count a log gives for `key` (a sample count, a batch, an epoch number): None where it
    gives none, or zero, or not a number; refused (naming the file and the field) where it is
    not finite, negative or beyond any real count (`Infinity`, `1e999`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if (isinstance(value, float) and not math.isfinite(value)) or not 0 <= value <= MAX_COUNT:
        raise DlperfError(f"{file}: {key} is {value!r}, not a count dlperf can use: {DAMAGED}")
    return float(value) or None


@contextlib.contextmanager
def noted_interrupts() -> Iterator[Callable[[], None]]:
    """Ctrl-C and SIGTERM stop an import at once. mlperf-logging's checks catch everything
    with bare `except:`, KeyboardInterrupt included, so a signal that lands inside one would be
    swallowed: each is also noted here (then passed on to the handler that was there, the
    CLI's), and the function this yields raises KeyboardInterrupt once one was noted."""
    noted: list[int] = []
    previous: dict[int, Any] = {}

    def note(signum: int, frame: Any) -> None:
        noted.append(signum)
        previous[signum](signum, frame)

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(sig)
            if callable(handler):  # a Python handler that stops the program (else: the default)
                previous[sig] = handler
                signal.signal(sig, note)

    def stop_if_interrupted() -> None:
        if noted:
            raise KeyboardInterrupt(signal.Signals(noted[0]).name)

    try:
        yield stop_if_interrupted
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def ruleset_of(folder: Path, round_: str | None) -> str:
    """The compliance ruleset of `folder`'s round: `round_` where given, else the nearest
    folder name that says it (`training_results_v4.0`, `v4.0-NVIDIA-...`)."""
    if round_ is None:
        names = [folder.name, *(p.name for p in folder.resolve().parents)]
        found = next((m.group(1) for n in names if (m := ROUND.search(n))), None)
        if found is None:
            raise DlperfError(
                f"{folder}: no folder name says which MLPerf Training round it is from (as "
                "training_results_v4.0/ does): give it, e.g. --round 4.0"
            )
        round_ = found
    ruleset = round_.lower().removeprefix("v") + ".0"
    known = supported_rulesets()
    if ruleset not in known:
        rounds = ", ".join(r.rsplit(".", 1)[0] for r in known)
        raise DlperfError(
            f"{folder}: MLPerf Training round {round_!r} is not one mlperf-logging checks "
            f"(it knows {rounds}); give the round with --round, or update mlperf-logging"
        )
    return ruleset


@functools.cache
def supported_rulesets() -> tuple[str, ...]:
    """The training rulesets mlperf-logging's checker has rules for (asked once: a round's
    tree holds hundreds of benchmark folders)."""
    from mlperf_logging import compliance_checker

    here = Path(compliance_checker.__file__).parent
    found = [p.name.removeprefix("training_") for p in here.glob("training_*.*.*")]
    return tuple(sorted((r for r in found if re.fullmatch(r"\d+\.\d+\.\d+", r)), key=_version))


def _version(ruleset: str) -> tuple[int, ...]:
    return tuple(int(x) for x in ruleset.split("."))


# --------------------------------------------------------------------------------------------
# One run: MLPerf's verdict and time to train, dlperf's throughput from the log's marks
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """mlperf-logging prints its notices and logs its checks' failures: they are collected
    into the result instead, not printed over dlperf's output."""
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logging.disable(logging.NOTSET)


def checked_run(file: Path, ruleset: str) -> tuple[TrainingRun, list[Any]]:
    """A run's verdict by MLPerf's compliance checker (over the lines dlperf read, as its
    `check_file` checks a file's), its time to train as the summarizer computes it, and its
    parsed log lines."""
    from mlperf_logging.compliance_checker import mlp_compliance
    from mlperf_logging.result_summarizer import result_summarizer

    log = read_log(file, ruleset)
    checker = mlp_compliance.make_checker("training", ruleset, quiet=False, werror=False)
    crashed, minutes = [], None
    if log.unread:  # check_file's verdict on a log with lines it cannot parse, with which
        more = f" (and {len(log.unread) - 3:,} more)" if len(log.unread) > 3 else ""
        checker.put_message(f"Log lines had parsing errors: {'; '.join(log.unread[:3])}{more}")
    with quiet():
        mlp_compliance.enqueued_configs.clear()  # a check that raised leaves its queue behind
        try:
            checker.check_loglines(log.lines, f"training_{ruleset}/common.yaml")
        except Exception as exc:  # noqa: BLE001 - any broken file: that run, with the reason
            crashed = [f"MLPerf's checker could not read it: {type(exc).__name__}: {exc}"]
        with contextlib.suppress(ValueError):  # no run_start or run_stop: no time to train
            start, stop = result_summarizer._query_run_start_stop(log.lines)
            minutes = (stop - start) / 60 / 1000
    messages = [*crashed, *checker.not_overwritable, *checker.overwritable.values()]
    status = next((_meta(ll).get("status") for ll in log.lines if ll.key == "run_stop"), "")
    run = TrainingRun(
        file=str(file),
        ruleset=ruleset,
        compliant=not messages,
        messages=[str(m).strip() for m in messages],
        converged=status == "success",
        time_to_train_min=minutes,
    )
    return run, log.lines


def _meta(line: Any) -> dict[str, Any]:
    """A parsed line's metadata (a damaged line may hold anything there)."""
    meta = line.value.get("metadata") if isinstance(line.value, dict) else None
    return meta if isinstance(meta, dict) else {}


def intervals(lines: list[Any], start: str, stop: str) -> list[tuple[Any, Any]]:
    """The (start, stop) log lines of each closed interval of one kind, in order."""
    pairs, opened = [], None
    for ll in lines:
        if ll.key == start:
            opened = ll
        elif ll.key == stop and opened is not None:
            pairs.append((opened, ll))
            opened = None
    return pairs


def last_value(lines: list[Any], key: str) -> Any:
    return next((ll.value.get("value") for ll in reversed(lines) if ll.key == key), None)


def trained_samples(
    benchmark: str, lines: list[Any], marks: tuple[str, list], global_batch: int | None, file: Path
) -> tuple[float | None, str]:
    """(samples trained over the training `marks`, how they were counted), by how the
    benchmark's log counts them; (None, why) where its units cannot be told."""
    if benchmark in SAMPLE_COUNTED:
        samples = log_count(file, "train_samples", last_value(lines, "train_samples"))
        return (samples, "train_samples sequences") if samples else (None, "no train_samples")
    if benchmark in DATASETS:
        return epoch_samples(benchmark, lines, marks, global_batch, file)
    counted = [m["samples_count"] for ll in lines if ll.key == "eval_accuracy"
               and "samples_count" in (m := _meta(ll))]  # fmt: skip
    if not counted:
        return None, COUNTED
    samples = log_count(file, "eval_accuracy's samples_count", counted[-1])
    if samples and global_batch and samples < global_batch:  # a count of steps, not samples
        return None, (
            f"samples_count {samples:,.0f} is less than one global batch ({global_batch:,}): "
            "not a count of samples"
        )
    return (samples, "samples_count of the last evaluation") if samples else (None, "none")


def epoch_samples(
    benchmark: str, lines: list[Any], marks: tuple[str, list], global_batch: int | None, file: Path
) -> tuple[float | None, str]:
    """Samples of a benchmark whose log counts epochs: the epochs over the marks times the
    samples of one epoch, each read in the submitter's units (see `samples_per_epoch`; epoch
    numbers that are all whole multiples of the data set are counts of samples, as NVIDIA's
    UNet3D logs `first_epoch_num` and `epoch_count`: 168, 3360, 6720...)."""
    dataset = DATASETS[benchmark]
    logged = log_count(file, "train_samples", last_value(lines, "train_samples"))
    per_epoch, how = samples_per_epoch(benchmark, logged, global_batch)
    if per_epoch is None:
        return None, how
    kind, pairs = marks
    if kind == "epoch":
        return len(pairs) * per_epoch, f"{len(pairs)} epoch marks of {how}"
    if kind == "block":
        counts = [log_count(file, "block_start's epoch_count", _meta(a).get("epoch_count"))
                  or 0.0 for a, _ in pairs]  # fmt: skip
        firsts = [log_count(file, "block_start's first_epoch_num",
                            _meta(a).get("first_epoch_num")) or 0.0 for a, _ in pairs]  # fmt: skip
        numbers, epochs = counts + firsts, sum(counts)
    else:
        numbers = [log_count(file, "eval_accuracy's epoch_num", _meta(ll).get("epoch_num"))
                   or 0.0 for ll in lines if ll.key == "eval_accuracy"]  # fmt: skip
        epochs = numbers[-1] if numbers else 0.0
    if not epochs:
        return None, f"the {kind} marks give no epoch count"
    if all_multiples(numbers, dataset):
        return epochs, (
            f"the {kind} marks' epoch numbers read as samples (each a whole multiple of "
            f"{benchmark}'s {dataset:,}-sample data set)"
        )
    return epochs * per_epoch, f"{epochs:g} epochs ({kind} marks) of {how}"


def samples_per_epoch(
    benchmark: str, logged: float | None, global_batch: int | None
) -> tuple[float | None, str]:
    """(samples in one epoch, how told) by the log's `train_samples` (`logged`) against the
    benchmark's data set: the data set's size (within 1%), or its steps per epoch at the
    global batch (Lenovo's RetinaNet logs 4,572 = 1,170,301 / 256); (None, why) if neither."""
    dataset = DATASETS[benchmark]
    if logged is None:
        return dataset, f"{benchmark}'s data set ({dataset:,} samples; no train_samples)"
    if abs(logged - dataset) <= NEAR * dataset:
        return logged, f"train_samples {logged:,.0f}"
    steps_off = abs(logged * global_batch - dataset) if global_batch else math.inf
    if steps_off <= max(NEAR * dataset, 2 * (global_batch or 0)):
        return dataset, (
            f"{dataset:,} samples ({benchmark}'s data set; the log's train_samples "
            f"{logged:,.0f} is its steps per epoch at global batch {global_batch:,})"
        )
    batch = f"at global batch {global_batch:,}" if global_batch else "(no global_batch_size)"
    return None, (
        f"train_samples {logged:,.0f} is neither {benchmark}'s data set ({dataset:,} samples) "
        f"nor its steps per epoch {batch}: the log's unit cannot be told"
    )


def all_multiples(numbers: list[float], dataset: int) -> bool:
    given = [n for n in numbers if n]
    return bool(given) and max(given) >= dataset and all(n % dataset == 0 for n in given)


def with_throughput(
    run: TrainingRun, benchmark: str, lines: list[Any], global_batch: int | None
) -> TrainingRun:
    """`run` with the samples it trained and the seconds it trained them in: its epoch marks
    (else its blocks', else the whole run) less the evaluations inside them."""
    file = Path(run.file)
    marks, kind = intervals(lines, "epoch_start", "epoch_stop"), "epoch"
    if not marks:
        marks, kind = intervals(lines, "block_start", "block_stop"), "block"
    if not marks:
        marks, kind = intervals(lines, "run_start", "run_stop"), "run"
    if not marks:
        return run.model_copy(update={"note": f"{NO_THROUGHPUT}the log has no run_stop"})
    evals = [(a.timestamp, b.timestamp) for a, b in intervals(lines, "eval_start", "eval_stop")]
    total_ms = eval_ms = 0.0
    for a, b in marks:
        total_ms += b.timestamp - a.timestamp
        eval_ms += sum(max(0.0, min(b.timestamp, e) - max(a.timestamp, s)) for s, e in evals)
    train_s = (total_ms - eval_ms) / 1000
    if train_s <= 0:
        why = "no training time between the marks"
        return run.model_copy(update={"intervals": kind, "note": NO_THROUGHPUT + why})
    samples, how = trained_samples(benchmark, lines, (kind, marks), global_batch, file)
    if samples is None:
        return run.model_copy(update={"intervals": kind, "note": NO_THROUGHPUT + how})
    notes = [f"samples: {how}"]
    if not evals:
        notes.append("evaluation time included: the log has no eval_start/eval_stop marks")
    return run.model_copy(
        update={
            "samples": samples,
            "train_s": round(train_s, 3),
            "eval_s": round(eval_ms / 1000, 3),
            "intervals": kind,
            "note": "; ".join(notes),
        }
    )


def flops_per_sample(benchmark: str, lines: list[Any], file: Path) -> float | None:
    """Training FLOPs of one sample (3 x the forward), as dlperf counts its own models:
    ResNet50-v1.5 at 224 px (24.5 GFLOP); BERT-large at MLPerf's 512 tokens with the MLM head
    at its max_predictions_per_seq positions only, as MLPerf's BERT gathers them."""
    if benchmark == "resnet":
        return 3 * model_math.resnet50_forward_flops(1000, 224)
    if benchmark == "bert":
        logged = last_value(lines, "max_predictions_per_seq")
        predictions = log_count(file, "max_predictions_per_seq", logged)
        positions = int(predictions) if predictions and predictions <= BERT_SEQ_LEN else None
        return 3 * model_math.bert_forward_flops(BERT_SEQ_LEN, model_math.BERT_LARGE, positions)
    return None


def run_repeat(index: int, run: TrainingRun, workload: dict[str, Any], readable: bool) -> Repeat:
    """A repeat of one run: ok when MLPerf's checker passes it (the runs its score counts);
    `invalid` (numbers kept, outside the median) when it does not; `bad_output` when no
    :::MLLOG line in the file could be read (`readable` False)."""
    per_s = run.samples / run.train_s if run.samples and run.train_s else None
    if run.compliant and per_s:
        status, message = RepeatStatus.ok, ""
    elif run.compliant:
        status, message = RepeatStatus.bad_output, run.note or "no throughput"
    else:
        status = RepeatStatus.invalid if readable else RepeatStatus.bad_output
        first = (run.messages or ["failed MLPerf's compliance check"])[0].splitlines()
        message = f"{Path(run.file).name} fails MLPerf's {run.ruleset} compliance check: " + (
            first[0] if first else "no reason given"
        )
        if run.time_to_train_min is None:
            message += " (no run_start/run_stop: the log ends early or is not MLPerf's)"
        elif not run.converged:
            message += " (did not converge)"
    return Repeat(
        index=index,
        status=status,
        throughput=per_s,
        wall_s=(run.time_to_train_min or 0.0) * 60,
        log_path=run.file,
        message=message,
        workload=workload,
        training=run,
    )


# --------------------------------------------------------------------------------------------
# One benchmark folder: the runs, MLPerf's score, the result
# --------------------------------------------------------------------------------------------


def mlperf_score(
    benchmark: str, folder: Folder, runs: list[TrainingRun]
) -> tuple[float | None, float, list[str]]:
    """(score in minutes or None, scaling factor, why there is none): mlperf-logging's result
    summarizer's olympic mean over the runs' times to train, a run its checker fails or without
    run_start/run_stop dropped as the summarizer drops it, times scaling.json's factor; none
    with fewer runs than MLPerf requires for the benchmark."""
    from mlperf_logging.benchmark_meta import get_result_file_counts
    from mlperf_logging.result_summarizer import result_summarizer

    required = get_result_file_counts("training").get(benchmark)
    factor = scaling_factor(folder)
    times = [r.time_to_train_min for r in runs if r.compliant and r.time_to_train_min is not None]
    dropped, most = len(runs) - len(times), 4 if benchmark == "unet3d" else 1
    if required is not None and len(runs) < required:
        return None, factor, [
            f"{NO_SCORE}{len(runs)} run(s), and MLPerf requires {required} for {benchmark} "
            "(its olympic mean drops the fastest and the slowest of them all)"
        ]  # fmt: skip
    mean = None
    if dropped <= most:
        mean = result_summarizer._compute_olympic_average(sorted(times), dropped, most)
    if mean is None:
        return None, factor, [
            f"{NO_SCORE}more than {most} run(s) failed MLPerf's checks or did not "
            "converge, and its olympic mean may drop only that many"
        ]  # fmt: skip
    return mean * factor, factor, []


def scaling_factor(folder: Folder) -> float:
    """scaling.json's factor (MLPerf's reviewers scale a score by it), 1 without the file."""
    path = folder.path / "scaling.json"
    if not path.is_file():  # as the summarizer: only a regular file is a scaling file
        return 1.0
    data = read_json(path, "scaling file")
    value = data.get("scaling_factor") if isinstance(data, dict) else None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not 0 < value <= 1e6:  # NaN and Infinity fail the comparison
        raise DlperfError(
            f"{path}: scaling_factor is {value!r}, not a positive finite number: {DAMAGED}"
        )
    return float(value)


def folder_result(folder: Folder, stop_if_interrupted: Callable[[], None] = lambda: None) -> Result:
    """The folder's runs as one result. LeftOut: no regular result file, or runs of more than
    one benchmark; NotCounted: a benchmark dlperf counts no samples of."""
    system = folder.system  # its counts refused before any log is read
    nodes = _count(system, "number_of_nodes", folder, MAX_NODES)
    per_node = _count(system, "accelerators_per_node", folder, MAX_DEVICES_PER_NODE)
    files, unread = run_files(folder.path)
    checked, readable, kept = [], [], 0
    for file in files:
        try:
            run, lines = checked_run(file, folder.ruleset)
        except LeftOut as why:  # replaced by a FIFO or a device since it was listed
            unread.append(f"{LEFT_OUT}{why}")
            continue
        finally:
            stop_if_interrupted()
        # Only the marks stay: a folder's worth of whole logs is gigabytes within the caps.
        marks = [ll for ll in lines if isinstance(ll.key, str) and ll.key in USED_KEYS]
        kept += len(marks)
        if kept > MAX_LOG_RECORDS:
            raise DlperfError(
                f"{folder.path}: its runs hold more than {MAX_LOG_RECORDS:,} training marks "
                f"(MLCommons' hold thousands at most): {DAMAGED}"
            )
        checked.append((run, marks))
        readable.append(bool(lines))
    if not checked:
        raise LeftOut(f"none of its {RESULT_FILES} is a regular file")
    benchmark = benchmark_of(folder, checked)
    if not counts_samples(benchmark, checked):
        raise NotCounted(f"{NO_THROUGHPUT}{COUNTED}, and {benchmark}'s logs have none")
    accelerator = _text(system.get("accelerator_model_name")) or "unknown accelerator"
    global_batch = global_batch_of(checked)
    spec = BenchmarkSpec.checked(
        framework=framework_of(system),
        model=MODELS.get(benchmark, benchmark),
        precision="amp",  # MLPerf Training submissions train in reduced precision
        device=device_of(accelerator),
        nodes=nodes,
        devices_per_node=per_node,
        batch_size=max(1, round((global_batch or nodes * per_node) / (nodes * per_node))),
        repeats=len(checked),
        options={
            "suite": SUITE,
            "round": folder.round,
            "division": _text(system.get("division")) or "",
            "submitter": _text(system.get("submitter")) or "",
            "system": system_name(folder),
        },
    )
    repeats = []
    for i, ((run, lines), any_line) in enumerate(zip(checked, readable, strict=True), 1):
        workload = {
            "flops_per_sample": flops_per_sample(benchmark, lines, Path(run.file)),
            "device_name": accelerator,
            "framework_version": _text(system.get("framework")),
        }
        run = with_throughput(run, benchmark, lines, global_batch)
        repeats.append(run_repeat(i, run, workload, readable=any_line))
    result = imported_result(spec, repeats)
    score, factor, why_not = mlperf_score(benchmark, folder, [r.training for r in repeats])
    if not any(r.throughput for r in repeats):  # the score stays; the reason is said
        notes = (r.training.note or "" for r in repeats)
        why_not.append(next((n for n in notes if n.startswith(NO_THROUGHPUT)), NO_THROUGHPUT))
    result = finished(result, folder, score, factor, [*why_not, *unread], global_batch)
    return when_run(result, checked)


def benchmark_of(folder: Folder, checked: list[tuple[TrainingRun, list[Any]]]) -> str:
    """The benchmark the folder's runs name (`submission_benchmark`), else the folder's name.
    LeftOut when they name more than one: MLPerf scores one benchmark's runs together."""
    named: dict[str, list[str]] = {}
    for run, lines in checked:
        if value := last_value(lines, "submission_benchmark"):
            named.setdefault(str(value), []).append(Path(run.file).name)
    if len(named) > 1:
        each = "; ".join(f"{b} in {', '.join(files)}" for b, files in sorted(named.items()))
        raise LeftOut(
            f"its runs are of {len(named)} benchmarks ({each}), and MLPerf scores one "
            "benchmark's runs together: give each benchmark's runs a folder of their own"
        )
    return next(iter(named), folder.path.name)


def counts_samples(benchmark: str, checked: list[tuple[TrainingRun, list[Any]]]) -> bool:
    """Whether dlperf can count the samples of the benchmark's runs at all."""
    if benchmark in DATASETS or benchmark in SAMPLE_COUNTED:
        return True
    return any(
        ll.key == "eval_accuracy" and "samples_count" in _meta(ll)
        for _, lines in checked
        for ll in lines
    )


def global_batch_of(checked: list[tuple[TrainingRun, list[Any]]]) -> int | None:
    """The runs' global batch (the first that logs one; each one's checked)."""
    found = None
    for run, lines in checked:
        logged = last_value(lines, "global_batch_size")
        value = log_count(Path(run.file), "global_batch_size", logged)
        if value and value > MAX_SIZE:
            raise DlperfError(
                f"{run.file}: global_batch_size is {value:,.0f}, larger than any batch: {DAMAGED}"
            )
        found = found or (round(value) if value else None)
    return found


def finished(
    result: Result,
    folder: Folder,
    score: float | None,
    factor: float,
    why_not: list[str],
    global_batch: int | None,
) -> Result:
    """`result` with MLPerf's score, the system's description in its environment, and its
    status by MLPerf's rules: ok when MLPerf gives the benchmark a score."""
    ok = any(r.status == RepeatStatus.ok for r in result.repeats)
    metrics, no_mfu = plausible_mfu(result)
    peer = dict(metrics.peer)
    if score is not None:
        rule = score_rule(folder, factor)
        peer[SUITE] = {"score": PeerStat(value=score, unit="min", rule=rule)}
    metrics = metrics.model_copy(
        update={"score": score, "score_unit": "min" if score is not None else None, "peer": peer}
    )
    status = ResultStatus.ok if score is not None else (
        ResultStatus.partial if ok else ResultStatus.failed
    )  # fmt: skip
    job = result.job.model_copy(update={"global_batch": global_batch or result.spec.global_batch})
    return result.model_copy(
        update={
            "status": status,
            "metrics": metrics,
            "environment": system_environment(result, folder),
            "warnings": [*result.warnings, *why_not, *no_mfu],
            "job": job,
        }
    )


def score_rule(folder: Folder, factor: float) -> str:
    """How MLPerf's score was computed, in words, shown wherever the score is."""
    from importlib.metadata import version

    scaled = (
        f" x scaling.json's factor {factor:.6g}"
        if (folder.path / "scaling.json").is_file()
        else " (no scaling.json: unscaled)"
    )
    return (
        f"MLPerf Training's score: the olympic mean of the runs' time to train "
        f"(run_start to run_stop), the fastest and the slowest dropped{scaled}, by "
        f"mlperf-logging {version('mlperf-logging')}'s compliance checker and result "
        f"summarizer (rules {folder.ruleset})"
    )


def plausible_mfu(result: Result) -> tuple[Metrics, list[str]]:
    """The metrics without an MFU above 100%, and the warning that says why it went. BERT at
    MLPerf's 512 tokens: submissions drop the padding (over half the tokens of MLPerf's BERT
    data), and the log does not say how many tokens they computed."""
    m = result.metrics
    if m.mfu is None or m.mfu <= 1:
        return m, []
    why = (
        f"{NO_MFU}at the {result.model.flops_per_sample / 1e9:.4g} GFLOP per sample dlperf "
        f"counts it would be {m.mfu:.0%} of {m.peak_source}; the submission computed less "
        "than that per sample (it skips padding), and its log does not say how much"
    )
    return m.model_copy(update={"mfu": None, "achieved_flops": None}), [why]


def when_run(result: Result, checked: list[tuple[TrainingRun, list[Any]]]) -> Result:
    """`result` created when its runs started, not when it was imported: the earliest
    run_start of its logs (each :::MLLOG line carries its `time_ms`), else their earliest
    line. A submission of 2021 is drawn in 2021 on a chart over time, and orders before the
    results measured since. Logs whose times are no plausible date keep the import's time,
    and the result says so."""
    starts = [ll.timestamp for _, lines in checked for ll in lines if ll.key == "run_start"]
    stamps = starts or [ll.timestamp for _, lines in checked for ll in lines]
    if not stamps:
        return result
    started = datetime.fromtimestamp(min(stamps) / 1000, timezone.utc) if min(stamps) > 0 else None
    imported = result.created_at
    if started is None or not EARLIEST_LOG <= started <= imported + timedelta(days=1):
        said = f"{min(stamps):.0f} ms" if started is None else started.isoformat()
        note = (
            f"created is the import's time: the logs' first time_ms ({said}) is no plausible "
            "date of an MLPerf run"
        )
        return result.model_copy(update={"warnings": [*result.warnings, note]})
    return result.model_copy(update={"created": started.isoformat(timespec="seconds")})


def system_name(folder: Folder) -> str:
    """The submitter's name of the system (`system_name`), else its results folder's."""
    return _text(folder.system.get("system_name")) or folder.path.parent.name


def system_environment(result: Result, folder: Folder) -> Environment:
    """The imported environment with the submitter's system description: its name, OS, host
    CPU, accelerators and interconnect (a placeholder such as "TODO" is no value)."""
    system = folder.system
    return result.environment.model_copy(
        update={
            "host": system_name(folder),
            "os": _text(system.get("operating_system")) or "unknown",
            "cpu": _text(system.get("host_processor_model_name")),
            "gpu": result.environment.device_name,
            "gpu_count": result.spec.world_size,
            "interconnect": _text(system.get("accelerator_interconnect")),
        }
    )


def _text(value: Any) -> str | None:
    """A value of the submitter's system description as text; None for a placeholder
    (`PLACEHOLDERS`: "TODO", "N/A", empty), which would otherwise name the machine."""
    if value is None:
        return None
    text = " ".join(str(value).split())
    return None if text.casefold() in PLACEHOLDERS else text


def _run_order(path: Path) -> tuple[int, str]:
    digits = re.findall(r"\d+", path.stem)
    return (int(digits[-1]) if digits else -1, path.name)


def _count(system: dict[str, Any], key: str, folder: Folder, most: int) -> int:
    """A count of the system description (nodes, accelerators per node): a whole number in
    any JSON spelling (`1`, `1.0`, `"1"`: submitters write all three), from 1 to `most`."""
    value = system.get(key)
    whole = whole_number(value)
    if whole is None:
        said = f"{key} is {value!r}, not a whole number" if key in system else f"no {key}"
        raise DlperfError(f'{folder.system_file}: {said}; write the count, e.g. "{key}": 1')
    if not 1 <= whole <= most:
        raise DlperfError(
            f"{folder.system_file}: {key} is {value!r}; a count of {key.replace('_', ' ')} "
            f"is from 1 to {most:,}"
        )
    return whole


def whole_number(value: Any) -> int | None:
    """`value` as a whole number, however JSON spells it (1, 1.0, "1", "1.0"); None when it
    is not one (8.5, "eight", true, Infinity)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 20:  # no count is that long; int() of a huge text is slow
            return None
        try:
            return int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def framework_of(system: dict[str, Any]) -> str:
    """dlperf's name of the system's framework (`framework` as the submitter wrote it)."""
    written = [_text(system.get("framework_name")), _text(system.get("framework"))]
    low = " ".join(w for w in written if w).lower()
    found = next((name for word, name in FRAMEWORKS if word in low), None)
    return found or (low.split() or ["unknown"])[0]


def device_of(accelerator: str) -> str:
    low = accelerator.lower()
    if "nvidia" in low or re.search(r"\b[ahvlb]\d{2,3}\b", low):
        return "cuda"
    return "tpu" if "tpu" in low else "accelerator"
