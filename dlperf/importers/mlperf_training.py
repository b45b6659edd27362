"""MLPerf Training result folders (`dlperf parse mlperf-training`) -> Results: one result per
benchmark folder (a system's `result_*.txt` runs of one benchmark), a repeat per run.

MLPerf's own package (mlperf-logging: the compliance checker and the result summarizer MLCommons
publish the results with) judges each run and computes the benchmark's score; dlperf adds what
MLPerf does not define: a throughput from the log's own training marks, per accelerator too,
and the MFU. The system (accelerators, nodes, framework) comes from the submitter's
`systems/<system>.json`, as the summarizer reads it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf import DlperfError
from dlperf.adapters._shared import model_math
from dlperf.importers import imported_result
from dlperf.published import NO_MFU, NO_SCORE, SUITE
from dlperf.schema import (
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
# MLPerf's benchmark names -> dlperf's models (others keep MLPerf's name).
MODELS = {"resnet": "resnet50", "bert": "bert-large"}
# How a benchmark's log counts progress: epochs of `train_samples` (the dataset's size), or
# samples (BERT: epoch_num and train_samples count sequences). Others: samples_count marks.
EPOCH_COUNTED = ("resnet", "ssd", "retinanet", "maskrcnn", "unet3d")
SAMPLE_COUNTED = ("bert",)
BERT_SEQ_LEN = 512  # MLPerf BERT's max_seq_length (its packed sequences fill up to it)
FRAMEWORKS = (  # system.json's "framework" text -> dlperf's framework name, first match
    ("pytorch", "pytorch"), ("tensorflow", "tensorflow"), ("paddle", "paddle"),
    ("mxnet", "mxnet"), ("oneflow", "oneflow"), ("jax", "jax"), ("mindspore", "mindspore"),
    ("tinygrad", "tinygrad"), ("nemo", "pytorch"), ("megatron", "pytorch"),
)  # fmt: skip
ROUND = re.compile(r"(?:^|[^0-9a-z])v(\d+\.\d+)(?:$|[^0-9])", re.IGNORECASE)


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
    A benchmark whose logs give no throughput (progress counted in units dlperf cannot turn
    into samples) is not imported, and every result of the import says so."""
    built, skipped = [], []
    for folder in benchmark_folders(paths, round_):
        result = folder_result(folder)
        if any(r.throughput for r in result.repeats):
            built.append(result)
        else:
            why = next((r.training.note for r in result.repeats if r.training.note), "")
            skipped.append(f"not imported: {folder.path} ({why or 'no throughput'})")
    if not built:
        raise DlperfError("; ".join(skipped) + ": nothing to import")
    built = [r.model_copy(update={"warnings": [*r.warnings, *skipped]}) for r in built]
    # Written once every result is made: a refused folder leaves nothing half-imported.
    return ResultStore(results_dir).write_all(built)


def benchmark_folders(paths: list[Path], round_: str | None = None) -> list[Folder]:
    folders: list[Folder] = []
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
        folders += [describe_folder(f, round_) for f in found]
    return folders


def describe_folder(path: Path, round_: str | None) -> Folder:
    system_file = system_description(path)
    try:
        system = json.loads(system_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DlperfError(f"{system_file}: not a readable system description: {exc}") from None
    if not isinstance(system, dict):
        raise DlperfError(f"{system_file}: not a system description (a JSON object)")
    return Folder(path, system_file, system, ruleset_of(path, round_))


def system_description(folder: Path) -> Path:
    """The submitter's description of the system that ran `folder`: `system.json` beside the
    runs, or `<submitter>/systems/<system>.json` of a results tree
    (`<submitter>/results/<system>/<benchmark>/`)."""
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
    raise DlperfError(
        f"{folder}: no system description ({' or '.join(map(str, tried))}): it names the "
        "accelerators and their count, without which the throughput per accelerator cannot be "
        "told; copy the submitter's systems/<system>.json beside the result files"
    )


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
    """A run's verdict by MLPerf's compliance checker, its time to train as the summarizer
    computes it, and its log lines (parsed by mlperf-logging)."""
    from mlperf_logging.compliance_checker import mlp_compliance, mlp_parser
    from mlperf_logging.result_summarizer import result_summarizer

    checker = mlp_compliance.make_checker("training", ruleset, quiet=False, werror=False)
    lines: list[Any] = []
    minutes = None
    crashed = []
    with quiet():
        try:
            compliant = bool(checker.check_file(str(file), f"training_{ruleset}/common.yaml"))
        except Exception as exc:  # noqa: BLE001 - any broken file: that run, with the reason
            compliant = False
            crashed = [f"MLPerf's checker could not read it: {type(exc).__name__}: {exc}"]
        with contextlib.suppress(Exception):  # unreadable: no marks, the checker said why
            lines, _ = mlp_parser.parse_file(str(file), ruleset=ruleset)
        with contextlib.suppress(ValueError):  # no run_start or run_stop: no time to train
            start, stop = result_summarizer._query_run_start_stop(lines)
            minutes = (stop - start) / 60 / 1000
    messages = [*crashed, *checker.not_overwritable, *checker.overwritable.values()]
    status = next((ll.value["metadata"].get("status") for ll in lines if ll.key == "run_stop"), "")
    run = TrainingRun(
        file=str(file),
        ruleset=ruleset,
        compliant=compliant,
        messages=[str(m).strip() for m in messages],
        converged=status == "success",
        time_to_train_min=minutes,
    )
    return run, lines


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
    return next((ll.value["value"] for ll in reversed(lines) if ll.key == key), None)


def trained_samples(benchmark: str, lines: list[Any], kind: str, marks: list) -> float | None:
    """Samples trained over the training marks, by how the benchmark's log counts them."""
    if benchmark in SAMPLE_COUNTED:
        return _number(last_value(lines, "train_samples"))
    counted = [
        ll.value["metadata"]["samples_count"]
        for ll in lines
        if ll.key == "eval_accuracy" and "samples_count" in ll.value["metadata"]
    ]
    if counted:
        return _number(counted[-1])
    dataset = _number(last_value(lines, "train_samples"))
    if benchmark not in EPOCH_COUNTED or dataset is None:
        return None
    if kind == "epoch":
        epochs = len(marks)
    elif kind == "block":
        epochs = sum(_number(a.value["metadata"].get("epoch_count")) or 0 for a, _ in marks)
    else:
        epochs = _number(
            next((ll.value["metadata"].get("epoch_num") for ll in reversed(lines)
                  if ll.key == "eval_accuracy"), None)
        )  # fmt: skip
    return epochs * dataset if epochs else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def with_throughput(run: TrainingRun, benchmark: str, lines: list[Any]) -> TrainingRun:
    """`run` with the samples it trained and the seconds it trained them in: its epoch marks
    (else its blocks', else the whole run) less the evaluations inside them."""
    marks, kind = intervals(lines, "epoch_start", "epoch_stop"), "epoch"
    if not marks:
        marks, kind = intervals(lines, "block_start", "block_stop"), "block"
    if not marks:
        marks, kind = intervals(lines, "run_start", "run_stop"), "run"
    if not marks:
        return run.model_copy(update={"note": "no throughput: the log has no run_stop"})
    evals = [(a.timestamp, b.timestamp) for a, b in intervals(lines, "eval_start", "eval_stop")]
    total_ms = eval_ms = 0.0
    for a, b in marks:
        total_ms += b.timestamp - a.timestamp
        eval_ms += sum(max(0.0, min(b.timestamp, e) - max(a.timestamp, s)) for s, e in evals)
    samples = trained_samples(benchmark, lines, kind, marks)
    notes = [f"samples over the {kind} marks"]
    if not evals:
        notes.append("evaluation time included: the log has no eval_start/eval_stop marks")
    train_s = (total_ms - eval_ms) / 1000
    if samples is None or train_s <= 0:
        if train_s <= 0:
            why = "no throughput: no training time between the marks"
        elif benchmark in EPOCH_COUNTED + SAMPLE_COUNTED:
            why = "no throughput: the log has no train_samples"
        else:
            known = ", ".join(EPOCH_COUNTED + SAMPLE_COUNTED)
            why = f"no throughput: dlperf counts the samples of {known} and of samples_count marks"
        return run.model_copy(update={"intervals": kind, "note": why})
    return run.model_copy(
        update={
            "samples": samples,
            "train_s": round(train_s, 3),
            "eval_s": round(eval_ms / 1000, 3),
            "intervals": kind,
            "note": "; ".join(notes),
        }
    )


def flops_per_sample(benchmark: str, lines: list[Any]) -> float | None:
    """Training FLOPs of one sample (3 x the forward), as dlperf counts its own models:
    ResNet50-v1.5 at 224 px (24.5 GFLOP); BERT-large at MLPerf's 512 tokens with the MLM head
    at its max_predictions_per_seq positions only, as MLPerf's BERT gathers them."""
    if benchmark == "resnet":
        return 3 * model_math.resnet50_forward_flops(1000, 224)
    if benchmark == "bert":
        predictions = _number(last_value(lines, "max_predictions_per_seq"))
        positions = int(predictions) if predictions else None
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
    benchmark: str, folder: Folder, runs: int
) -> tuple[float | None, float, list[str]]:
    """(score in minutes or None, scaling factor, why there is none) by mlperf-logging's result
    summarizer over the folder's `runs` result files, with MLPerf's required number of runs for
    the benchmark."""
    from mlperf_logging.benchmark_meta import get_result_file_counts
    from mlperf_logging.result_summarizer import result_summarizer

    required = get_result_file_counts("training").get(benchmark)
    with quiet():
        try:
            score, _, factor = result_summarizer._compute_strong_score_standalone(
                benchmark, folder.path.name, False, str(folder.path), "training",
                folder.ruleset, desc={"submitter": folder.system.get("submitter")},
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the summarizer's own failure, said
            failed = f"mlperf-logging's summarizer failed: {type(exc).__name__}: {exc}"
            return None, 1.0, [NO_SCORE + failed]
    if required is not None and runs < required:
        return None, factor, [
            f"{NO_SCORE}{runs} run(s), and MLPerf requires {required} for {benchmark} "
            "(its olympic mean drops the fastest and the slowest of them all)"
        ]  # fmt: skip
    if score is None:
        limit = 4 if benchmark == "unet3d" else 1
        return None, factor, [
            f"{NO_SCORE}more than {limit} run(s) failed MLPerf's checks or did not "
            "converge, and its olympic mean may drop only that many"
        ]  # fmt: skip
    return score, factor, []


def folder_result(folder: Folder) -> Result:
    files = sorted(folder.path.glob(RESULT_FILES), key=_run_order)
    checked = [checked_run(f, folder.ruleset) for f in files]
    benchmark = next(
        (str(v) for _, lines in checked if (v := last_value(lines, "submission_benchmark"))),
        folder.path.name,
    )
    system = folder.system
    accelerator = str(system.get("accelerator_model_name") or "unknown accelerator")
    nodes = _count(system, "number_of_nodes", folder)
    per_node = _count(system, "accelerators_per_node", folder)
    global_batch = next(
        (int(v) for _, lines in checked if (v := _number(last_value(lines, "global_batch_size")))),
        None,
    )
    spec = BenchmarkSpec.checked(
        framework=framework_of(system),
        model=MODELS.get(benchmark, benchmark),
        precision="amp",  # MLPerf Training submissions train in reduced precision
        device=device_of(accelerator),
        nodes=nodes,
        devices_per_node=per_node,
        batch_size=max(1, round((global_batch or nodes * per_node) / (nodes * per_node))),
        repeats=len(files),
        options={
            "suite": SUITE,
            "round": folder.round,
            "division": str(system.get("division", "")),
            "submitter": str(system.get("submitter", "")),
            "system": str(system.get("system_name") or folder.path.parent.name),
        },
    )
    repeats = []
    for i, (run, lines) in enumerate(checked, 1):
        workload = {
            "flops_per_sample": flops_per_sample(benchmark, lines),
            "device_name": accelerator,
            "framework_version": str(system.get("framework", "")) or None,
        }
        run = with_throughput(run, benchmark, lines)
        repeats.append(run_repeat(i, run, workload, readable=bool(lines)))
    result = imported_result(spec, repeats)
    score, factor, why_not = mlperf_score(benchmark, folder, len(files))
    return finished(result, folder, score, factor, why_not, global_batch)


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
        f"mlperf-logging {version('mlperf-logging')}'s result summarizer (rules "
        f"{folder.ruleset})"
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


def system_environment(result: Result, folder: Folder) -> Environment:
    """The imported environment with the submitter's system description: its name, OS, host
    CPU, accelerators and interconnect."""
    system = folder.system
    return result.environment.model_copy(
        update={
            "host": str(system.get("system_name") or folder.path.parent.name),
            "os": str(system.get("operating_system") or "unknown"),
            "cpu": system.get("host_processor_model_name") or None,
            "gpu": result.environment.device_name,
            "gpu_count": result.spec.world_size,
            "interconnect": system.get("accelerator_interconnect") or None,
        }
    )


def _run_order(path: Path) -> tuple[int, str]:
    digits = re.findall(r"\d+", path.stem)
    return (int(digits[-1]) if digits else -1, path.name)


def _count(system: dict[str, Any], key: str, folder: Folder) -> int:
    try:
        return max(1, int(str(system.get(key, "")).strip()))
    except ValueError:
        raise DlperfError(
            f"{folder.system_file}: {key} is {system.get(key)!r}, not a whole number"
        ) from None


def framework_of(system: dict[str, Any]) -> str:
    """dlperf's name of the system's framework (`framework` as the submitter wrote it)."""
    written = str(system.get("framework_name") or "") + " " + str(system.get("framework") or "")
    low = written.lower()
    found = next((name for word, name in FRAMEWORKS if word in low), None)
    return found or (low.split() or ["unknown"])[0]


def device_of(accelerator: str) -> str:
    low = accelerator.lower()
    if "nvidia" in low or re.search(r"\b[ahvlb]\d{2,3}\b", low):
        return "cuda"
    return "tpu" if "tpu" in low else "accelerator"
