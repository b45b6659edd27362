"""Other suites' formats of dlperf's own results: SuperBench's metrics (JSON lines) and
FAMBench's result table."""

from __future__ import annotations

import ipaddress
import json
import re
from collections import defaultdict
from dataclasses import astuple, dataclass
from typing import Any

from dlperf.assemble import micro_score
from dlperf.identity import describe
from dlperf.report.cells import Markdown, cell
from dlperf.schema import BenchmarkSpec, PeerStat, RepeatStatus, Result
from dlperf.stats import fambench_p95
from dlperf.store import recency
from dlperf.superbench import SUITE, superbench_stats

# SuperBench's model names where dlperf's differ (its registry: pytorch-bert-base, -bert-large,
# -gpt2-small ... -xl, -lstm, -resnet18 ... -resnet152).
_SB_MODELS = {"bert": "bert-base"}
# The benchmark keys of SuperBench's shipped configs (superbench/config/*.yaml), by family;
# a family they do not run gets `<family>_models` in the same style.
_SB_TAGS = {"resnet": "resnet_models", "bert": "bert_models", "gpt2": "gpt_models",
            "lstm": "lstm_models"}  # fmt: skip
# SuperBench's ReturnCode (superbench/benchmarks/return_code.py) for each way a repeat fails.
SB_RETURN_CODES = {
    RepeatStatus.ok: 0,
    RepeatStatus.crashed: 4,  # RUNTIME_EXCEPTION_ERROR
    RepeatStatus.interrupted: 4,
    RepeatStatus.timeout: 124,  # KILLED_BY_TIMEOUT
    RepeatStatus.hung: 124,
    RepeatStatus.too_few_steps: 3,  # INVALID_BENCHMARK_RESULT
    RepeatStatus.bad_output: 3,
    RepeatStatus.inconsistent: 3,
    RepeatStatus.invalid: 3,
    RepeatStatus.unsupported: 1,  # INVALID_ARGUMENT
}
_FAILED = 3  # a result without repeats


def superbench_tag(model: str) -> str:
    """The benchmark key SuperBench's shipped configs run `model` under (`resnet_models`)."""
    family = re.match(r"[a-z]+(?:2(?=-))?", model.lower())
    name = family.group(0) if family else model
    return _SB_TAGS.get(name, f"{name}_models")


def superbench_benchmark(spec: BenchmarkSpec) -> str:
    """`<framework>-<model>` as SuperBench names it: pytorch-bert-base, pytorch-resnet50."""
    return f"{spec.framework}-{_SB_MODELS.get(spec.model, spec.model)}"


def superbench_stats_of(result: Result) -> dict[str, PeerStat]:
    """The stored SuperBench statistics, or (results assembled before they were stored) the
    same computed now from the stored step marks."""
    stored = result.metrics.peer.get(SUITE)
    return dict(stored) if stored is not None else superbench_stats(result.spec, result.repeats)


def superbench_return_code(result: Result) -> int:
    """0 when every repeat was ok, else SuperBench's code for the first failed repeat (as a
    SuperBench run that failed in a later round: its numbers kept, its code non-zero)."""
    for r in result.repeats:
        if r.status != RepeatStatus.ok:
            return SB_RETURN_CODES.get(r.status, _FAILED)
    return 0 if result.repeats else _FAILED


def superbench_metrics(result: Result, tag: str | None = None) -> dict[str, float]:
    """One result's metrics under SuperBench's full names, `<tag>/<framework>-<model>/<metric>`
    (`resnet_models/pytorch-resnet50/fp32_train_throughput`), with its `return_code`."""
    base = f"{tag or superbench_tag(result.spec.model)}/{superbench_benchmark(result.spec)}/"
    out: dict[str, float] = {base + "return_code": superbench_return_code(result)}
    out.update({base + k: v.value for k, v in superbench_stats_of(result).items()})
    return out


# The settings that tell dlperf configurations apart which SuperBench's names do not say
# (its names hold the framework, model, precision and mode): (field, its text in a tag).
def _settings(spec: BenchmarkSpec) -> list[tuple[str, str]]:
    out = [("impl", spec.impl), ("device", spec.device), ("xla", "xla" if spec.xla else "")]
    out += [("ranks", f"{spec.nodes}n{spec.devices_per_node}d"), ("batch", f"b{spec.batch_size}")]
    out += [("image", f"img{spec.image_size}" if spec.image_size else "")]
    out += [("seq", f"seq{spec.seq_len}" if spec.seq_len else "")]
    out += [(f"option {k}", f"{k}={v}") for k, v in sorted(spec.options.items())]
    out += [(f"practice {k}", f"{k}={v}") for k, v in sorted(spec.practice.items())]
    out += [("scenario", f"lg-{spec.scenario}" if spec.scenario else "")]
    out += [(f"loadgen {k}", f"{k}={v:g}") for k, v in sorted(spec.loadgen.items())]
    out += [("source", f"src={spec.source}" if spec.source else "")]
    return out


def superbench_tags(results: list[Result]) -> dict[str, str]:
    """Each configuration's SuperBench tag (`identity.describe(spec)` -> tag), deterministic
    for a set of results.

    A SuperBench benchmark is one set of settings run in several precisions and modes (its
    metric names say which). Where the set holds a benchmark (`pytorch-resnet50`) with
    several sets of settings, SuperBench's analyzer would merge them (a 1-rank and a 2-rank
    run averaged into one number), so each is named with SuperBench's own mechanism for one
    benchmark run with different settings, an annotation after `model-benchmarks:`:
    `model-benchmarks:<tag>-<settings>`, with only the settings that differ, in a fixed
    order (`model-benchmarks:resnet_models-1n1d`, `...-1n2d`). A benchmark with one set of
    settings keeps the shipped configs' plain name (`resnet_models`), so rules and baselines
    written for SuperBench's own results apply to it. Adding a configuration to the set can
    therefore rename the others of its benchmark.
    """
    groups: dict[str, dict[str, BenchmarkSpec]] = defaultdict(dict)
    for r in results:
        groups[superbench_benchmark(r.spec)][describe(r.spec)] = r.spec
    tags: dict[str, str] = {}
    for specs in groups.values():
        settings = {key: dict(_settings(spec)) for key, spec in specs.items()}
        fields = sorted({f for fs in settings.values() for f in fs}, key=_field_order)
        differ = [f for f in fields if len({s.get(f, "") for s in settings.values()}) > 1]
        for key, spec in specs.items():
            plain = superbench_tag(spec.model)
            if not differ:
                tags[key] = plain
                continue
            text = "-".join(v for v in (settings[key].get(f, "") for f in differ) if v)
            text = re.sub(r"[^A-Za-z0-9_.=-]+", "_", text or "default")  # no '/' or ':'
            tags[key] = f"model-benchmarks:{plain}-{text}"
    return tags


_FIXED_FIELDS = ("impl", "device", "xla", "ranks", "batch", "image", "seq")


def _field_order(field: str) -> tuple[int, str]:
    """The fixed settings first, in their order, then the others by name."""
    fixed = _FIXED_FIELDS.index(field) if field in _FIXED_FIELDS else len(_FIXED_FIELDS)
    return fixed, field


def _nodes(result: Result) -> list[str]:
    """The nodes a result ran on, node 0 (the one with global rank 0) first, by name. The
    local launcher's nodes are this host's loopback address: that is the machine the result
    names (as every single-process result), not a node of its own."""
    hosts = list(result.job.hosts) if result.job and result.job.hosts else []
    named = [result.environment.host if _is_loopback(h) else h for h in hosts]
    return named or [result.environment.host]


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def superbench_lines(results: list[Result]) -> list[dict[str, float | str]]:
    """SuperBench's results-summary.jsonl as dicts: one per node, holding every benchmark's
    metrics on that node, `node` last (as its runner writes them).

    The newest result of each configuration on each node is used. As in SuperBench, a
    data-parallel training job's metrics are on the line of the node holding global rank
    0, and every node has each local rank's return code (`return_code:<rank>` when a node
    runs several ranks, as SuperBench suffixes a metric that several ranks report)."""
    latest: dict[tuple[str, str], Result] = {}
    for r in results:
        where = (_nodes(r)[0], describe(r.spec))
        if where not in latest or recency(r) > recency(latest[where]):
            latest[where] = r
    chosen = [latest[k] for k in sorted(latest)]
    tags = superbench_tags(chosen)
    by_node: dict[str, dict[str, float | str]] = defaultdict(dict)
    for r in chosen:
        metrics = superbench_metrics(r, tags[describe(r.spec)])
        ((code_name, code),) = [(k, v) for k, v in metrics.items() if k.endswith("/return_code")]
        del metrics[code_name]
        ranks = r.spec.devices_per_node
        codes = {f"{code_name}:{i}": code for i in range(ranks)} if ranks > 1 else {code_name: code}
        nodes = _nodes(r)
        by_node[nodes[0]].update(metrics)
        for node in nodes:  # one code per benchmark run: a precision or mode that failed wins
            line = by_node[node]
            line.update({k: max(v, line.get(k, 0)) for k, v in codes.items()})
    return [{**dict(sorted(m.items())), "node": node} for node, m in sorted(by_node.items())]


def superbench_jsonl(results: list[Result]) -> str:
    """`superbench_lines` as JSON lines: what `sb result summary` and `sb result diagnosis`
    read as their --data-file."""
    return "".join(json.dumps(line) + "\n" for line in superbench_lines(results))


FAMBENCH_IMPLS = {"ootb": "OOTB", "official": "Optimized", "micro": "Micro"}
FAMBENCH_MODES = {"train": "train", "infer": "eval"}
# The columns of FAMBench's summary.txt (its result_summarizer's intermediate view), in order.
FAMBENCH_SUMMARY_COLUMNS = (
    "benchmark", "implementation", "mode", "config", "score", "units", "batch_latency_95_sec",
)  # fmt: skip


@dataclass(frozen=True)
class FambenchRow:
    """One row of FAMBench's summary.txt: one log (an imported log, or one of dlperf's
    repeats), scored by FAMBench's rules."""

    benchmark: Any
    implementation: Any
    mode: Any
    config: Any
    score: float
    units: str
    batch_latency_95_sec: float | None


def fambench_labels(result: Result) -> tuple[Any, ...]:
    """(benchmark, implementation, mode, config): an imported log's header as written, else
    dlperf's configuration in FAMBench's words."""
    for r in result.repeats:
        header = r.workload.get("fambench")
        if isinstance(header, dict):
            return tuple(header.get(k) for k in FAMBENCH_SUMMARY_COLUMNS[:4])
    s = result.spec
    config = s.options.get("config") or config_label(result)
    return s.model, FAMBENCH_IMPLS.get(s.impl, s.impl), FAMBENCH_MODES[s.mode], config


def fambench_rows(result: Result) -> list[FambenchRow]:
    """A row per ok repeat: an imported log's own FAMBench numbers (repeat.peer); a dlperf
    repeat's throughput (or its microbenchmark's TF/s, GB/s) with FAMBench's p95 of its
    steps' times."""
    labels = fambench_labels(result)
    rows = []
    for r in result.repeats:
        if r.status != RepeatStatus.ok:
            continue
        peer = r.peer.get("fambench")
        if peer:
            score, unit = peer["score"].value, peer["score"].unit
            p95 = peer["batch_latency_95_sec"].value if "batch_latency_95_sec" in peer else None
        else:
            found = micro_score(r.workload, r.throughput) if result.spec.impl == "micro" else None
            score, unit = found or (r.throughput, "ex/s")
            p95 = fambench_p95(r.step_times_s)
        rows.append(FambenchRow(*labels, score, unit, p95))
    return rows


def fambench_summary(results: list[Result]) -> str:
    """FAMBench's summary.txt (its result_summarizer's table): a space-separated header, then
    a row per log with each value as Python's str() writes it (None for no batch latency).
    Rows follow the results' benchmark ids and settings, then the repeats (an import's logs in path
    order), where FAMBench takes its folder's directory order."""
    lines = [" ".join(FAMBENCH_SUMMARY_COLUMNS)]
    for result in sorted(results, key=lambda r: describe(r.spec)):
        lines += [" ".join(map(str, astuple(row))) for row in fambench_rows(result)]
    return "\n".join(lines) + "\n"


def fambench_score(result: Result) -> tuple[float, str] | None:
    """FAMBench's score: a microbenchmark's TF/s or GB/s (or an imported log's own score), else
    examples per second."""
    m = result.metrics
    if m.score is not None and m.score_unit:
        return m.score, m.score_unit
    return (m.throughput.median, "ex/s") if m.throughput else None


FAMBENCH_NOTES = [
    "Score: FAMBench's score of the configuration's one log (an imported log by FAMBench's "
    "result_summarizer rule; a dlperf run's throughput, or a microbenchmark's TF/s or GB/s). "
    "Where Logs > 1 (repeats), the median of the logs' scores: dlperf's statistic; "
    "fambench_summary.txt has FAMBench's own row per log.",
    "p95 batch latency (s): FAMBench's batch_latency_95_sec of each log (sorted batch "
    "latencies at index ceil(0.95 x (n - 1)), not interpolated); where Logs > 1, the slowest "
    "log's. dlperf's own p95 (interpolated over every log's batches) is in the model reports.",
]


def fambench_table(results: list[Result]) -> str:
    """FAMBench's README table, `Model | Implementation | Mode | Config | Batch Size | Score |
    Units`, then FAMBench's p95 batch latency and the logs behind each row; `*` after a score
    whose run missed its latency target (FAMBench's mark)."""
    lines = [
        "| Model | Implementation | Mode | Config | Batch Size | Score | Units "
        "| p95 batch latency (s) | Logs |",
        "|---|---|---|---|---:|---:|---|---:|---:|",
    ]
    missed = False
    for r in sorted(results, key=lambda r: describe(r.spec)):
        found = fambench_score(r)
        if found is None:
            continue
        score, unit = found
        rows = fambench_rows(r)
        p95s = [row.batch_latency_95_sec for row in rows if row.batch_latency_95_sec is not None]
        star = "*" if r.metrics.latency_target_met is False else ""
        missed |= bool(star)
        score_cell = Markdown(f"{score:.6g}{star}")  # the star is FAMBench's mark, not text
        cells = [*map(str, fambench_labels(r)), str(r.spec.batch_size), score_cell,
                 unit, f"{max(p95s):.6g}" if p95s else "-", str(len(rows))]  # fmt: skip
        lines.append("| " + " | ".join(map(cell, cells)) + " |")
    notes = list(FAMBENCH_NOTES)
    if missed:
        notes.append(
            "\\* missed its latency target: an imported log's p95 by FAMBench's rule (the "
            "slowest log's), a dlperf run's by dlperf's p95."
        )
    return "\n".join([*lines, "", *notes]) + "\n"


def config_label(result: Result) -> str:
    """dlperf's configuration in FAMBench's one-word style: framework, device, precision,
    shapes, nodes."""
    s = result.spec
    parts = [s.framework, s.device, s.precision + ("-xla" if s.xla else "")]
    parts += [f"img{s.image_size}"] if s.image_size else []
    parts += [f"seq{s.seq_len}"] if s.seq_len else []
    parts += [f"{s.nodes}x{s.devices_per_node}"] if s.world_size > 1 else []
    parts += [f"{s.scenario}"] if s.scenario else []
    return "_".join(parts)
