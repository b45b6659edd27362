"""`dlperf parse`: logs made elsewhere imported as results. Each source (a framework's DLPerf
logs and dlperf events files, MLPerf LoadGen and Training folders, FAMBench logs) names the
options it takes and a function that calls its importer; an option it does not take is refused
before anything is read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape as esc

import dlperf.cli.options as o
import dlperf.cli.parse_options as po
from dlperf import DlperfError
from dlperf.cli.output import console, err, print_whole, write_json
from dlperf.cli.render import headline, print_warnings
from dlperf.store import DEFAULT_RESULTS_DIR

if TYPE_CHECKING:  # the CLI imports the core when a command runs
    from dlperf.schema import Result

Imported = list[tuple["Result", Path]]
# (source, its arguments, the results folder, the options it takes) -> results and their files
Importer = Callable[..., Imported]

# parse's options by parameter name: the flag a refusal names
FLAGS = {
    "impl": "--impl", "source": "--source", "profile": "--profile", "batch_size": "--batch-size",
    "nodes": "--nodes", "devices_per_node": "--devices-per-node", "amp": "--amp/--fp32",
    "device": "--device", "skip": "--skip", "measure": "--measure", "framework": "--framework",
    "model": "--model", "latency_target_ms": "--latency-target-ms", "round_": "--round",
}  # fmt: skip


def _paths(args: list[str]) -> list[Path]:
    return [Path(a) for a in args]


def _loadgen(
    _source: str,
    args: list[str],
    results_dir: Path,
    *,
    framework: str | None,
    model: str | None,
    batch_size: int | None,
    device: str | None,
) -> Imported:
    from dlperf.importers.loadgen import import_dirs

    return import_dirs(
        _paths(args),
        framework=framework or "external",
        model=model or "sut",
        batch_size=1 if batch_size is None else batch_size,
        device=device or "cpu",
        results_dir=results_dir,
    )


def _mlperf_training(
    _source: str, args: list[str], results_dir: Path, *, round_: str | None
) -> Imported:
    from dlperf.importers.mlperf_training import import_folders

    return import_folders(_paths(args), results_dir=results_dir, round_=round_)


def _fambench(
    _source: str,
    args: list[str],
    results_dir: Path,
    *,
    framework: str | None,
    device: str | None,
    latency_target_ms: float | None,
) -> Imported:
    from dlperf.importers.fambench import import_logs

    return import_logs(
        _paths(args),
        framework=framework or "pytorch",
        device=device or "cpu",
        results_dir=results_dir,
        latency_target_ms=latency_target_ms,
    )


def _framework_logs(
    framework: str, args: list[str], results_dir: Path, *, impl: str | None, **options: Any
) -> Imported:
    """DLPerf-style logs or dlperf events files of FRAMEWORK's MODEL: the options `dlperf run`
    takes override what the paths say."""
    from dlperf.adapters import get_adapter
    from dlperf.importers.dlperf_logs import import_logs
    from dlperf.spec_options import option_overrides

    if len(args) < 2:
        raise DlperfError(f"usage: dlperf parse {framework} MODEL PATH... (logs or folders)")
    model = args[0]
    adapter = get_adapter(framework)
    if not adapter.runs(model):
        known = ", ".join([*adapter.models, *adapter.micro_models])
        raise DlperfError(f"{framework} has no model {model!r}; its models: {known}")
    return import_logs(
        framework,
        model,
        _paths(args[1:]),
        impl=impl or ("micro" if model in adapter.micro_models else "ootb"),
        overrides=option_overrides(options),  # None: read from the path
        results_dir=results_dir,
    )


# Each suite's logs: the options they take (in the order a refusal lists them), their importer.
SUITES: dict[str, tuple[tuple[str, ...], Importer]] = {
    "mlperf": (("framework", "model", "batch_size", "device"), _loadgen),
    "mlperf-training": (("round_",), _mlperf_training),
    "fambench": (("framework", "device", "latency_target_ms"), _fambench),
}
FRAMEWORK_LOGS: tuple[tuple[str, ...], Importer] = (
    ("impl", "source", "profile", "batch_size", "nodes", "devices_per_node", "amp", "device",
     "skip", "measure"),
    _framework_logs,
)  # fmt: skip


def parse(
    what: po.LogSource,
    args: po.LogArgs,
    impl: po.ParseImpl = None,
    source: po.ParseSource = None,
    profile: o.Profile = None,
    batch_size: po.ParseBatchSize = None,
    nodes: po.ParseNodes = None,
    devices_per_node: po.ParseDevicesPerNode = None,
    amp: po.ParseAmp = None,
    device: po.ParseDevice = None,
    skip: po.ParseSkip = None,
    measure: po.ParseMeasure = None,
    framework: po.ParseFramework = None,
    model: po.ParseModel = None,
    latency_target_ms: po.ParseLatencyTarget = None,
    round_: po.ParseRound = None,
    results_dir: o.ResultsDir = DEFAULT_RESULTS_DIR,
    json_out: po.ParseJson = False,
) -> None:
    """Import DLPerf, MLPerf and FAMBench logs as results.

    DLPerf-style logs and dlperf events files (one result per configuration, a repeat per
    log), MLPerf LoadGen log folders, MLPerf Training result folders (scored by MLPerf's
    rules), FAMBench logs."""
    given = {
        "impl": impl, "source": source, "profile": profile, "batch_size": batch_size,
        "nodes": nodes, "devices_per_node": devices_per_node, "amp": amp, "device": device,
        "skip": skip, "measure": measure, "framework": framework, "model": model,
        "latency_target_ms": latency_target_ms, "round_": round_,
    }  # fmt: skip
    takes, importer = _importer_of(what)
    stray = [
        FLAGS[name] for name, value in given.items() if value is not None and name not in takes
    ]
    if stray:
        raise DlperfError(
            f"{', '.join(stray)} not used by `dlperf parse {what}`: it takes "
            f"{', '.join(FLAGS[name] for name in takes)}; leave the others out"
        )
    imported = importer(what, args, results_dir, **{name: given[name] for name in takes})
    _show_imported(imported, json_out)


def _importer_of(source: str) -> tuple[tuple[str, ...], Importer]:
    from dlperf.adapters import adapter_names

    if source in SUITES:
        return SUITES[source]
    if source in adapter_names():
        return FRAMEWORK_LOGS
    from dlperf.wording import did_you_mean

    near = did_you_mean(source, [*adapter_names(), *SUITES])
    raise DlperfError(
        f"unknown log source {source!r}{near}: give a framework ({', '.join(adapter_names())}) "
        f"then MODEL PATH..., or {' / '.join(SUITES)} then PATH..."
    )


def _show_imported(imported: Imported, json_out: bool) -> None:
    """Each imported result's headline and stored file, their warnings by kind, with --json the
    stored files; exit 2 when one of them failed, or the import left some input out."""
    from dlperf.identity import describe
    from dlperf.published import LEFT_OUT

    out = err if json_out else console  # with --json, stdout is the JSON alone
    for result, path in imported:
        head = f"{headline(result)} ({len(result.repeats)} log(s)) ->"
        print_whole(out, esc(head), path, highlight=False)
    warned = [(describe(r.spec), w) for r, _ in imported for w in r.warnings]
    print_warnings(out, warned, of=len(imported))
    if json_out:  # the files as stored, byte for byte; several as one JSON list
        stored = [path.read_text().rstrip("\n") for _, path in imported]
        one = len(stored) == 1
        write_json((stored[0] if one else "[\n" + ",\n".join(stored) + "\n]") + "\n")
    left_out = any(w.startswith(LEFT_OUT) for result, _ in imported for w in result.warnings)
    if left_out or any(result.status.value != "ok" for result, _ in imported):
        raise typer.Exit(2)
