"""Logs of dlperf's own workloads and of official upstream implementations, made elsewhere (a
single log, or a DLPerf-style tree) -> Results, exactly as a run would make them
(`dlperf parse dlperf`).

Built-in (`ootb`) runs are read from their events files; official runs from their logs with the
manifest's log format. The spec is resolved by `dlperf.spec`, the window, statuses and median
computed by `dlperf.assemble`: the same code as `dlperf run`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dlperf import DlperfError
from dlperf.adapter import Adapter
from dlperf.adapters import get_adapter
from dlperf.assemble import classify, make_repeat
from dlperf.events import parse_events_file
from dlperf.importers import imported_result
from dlperf.official.adapter import OfficialAdapter
from dlperf.official.checkout import source_info
from dlperf.official.manifest import DEFAULT_PROFILE, Manifest, find_manifest, load_manifests
from dlperf.proc import tail as log_tail
from dlperf.schema import RepeatStatus, Result
from dlperf.spec import resolve_spec
from dlperf.store import ResultStore

# DLPerf's tree: <N>n<G>g/<name>_b<batch>_<precision>[_xla]_<repeat>.log
_CONFIG_DIR = re.compile(r"^(?P<nodes>\d+)n(?P<devices>\d+)[gcd]$")
_LOG_NAME = re.compile(
    r"_b(?P<batch>\d+)_(?P<precision>fp32|fp16|amp|mixed|tf32|bf16)(?P<xla>_xla)?"
    r"(?:_(?P<repeat>\d+))?\.(?:log|txt|jsonl)$",
    re.I,
)
_PRECISIONS = {
    "fp32": "fp32",
    "tf32": "fp32",
    "fp16": "amp",
    "amp": "amp",
    "mixed": "amp",
    "bf16": "amp",
}


@dataclass
class LogGroup:
    """Logs of one configuration: each is one repeat."""

    settings: dict[str, object]
    paths: list[Path] = field(default_factory=list)


def path_settings(path: Path) -> dict[str, object]:
    """What a DLPerf-style path says about its run: nodes, devices, batch, precision, xla."""
    found: dict[str, object] = {}
    match = _CONFIG_DIR.match(path.parent.name)
    if match:
        found["nodes"] = int(match["nodes"])
        found["devices_per_node"] = int(match["devices"])
    match = _LOG_NAME.search(path.name)
    if match:
        found["batch_size"] = int(match["batch"])
        found["precision"] = _PRECISIONS[match["precision"].lower()]
        if match["xla"]:
            found["xla"] = True
    return found


def _repeat_key(path: Path) -> tuple[int, str]:
    match = _LOG_NAME.search(path.name)
    return (int(match["repeat"]) if match and match["repeat"] else 0, path.name)


def group_logs(paths: Iterable[Path], overrides: dict[str, object]) -> list[LogGroup]:
    """Log files (folders searched recursively) grouped by configuration; flags win over paths."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".jsonl")
            )
            if not found:
                raise DlperfError(f"{path}: no .log, .txt or .jsonl files in this folder")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise DlperfError(f"{path}: no such file or folder")
    groups: dict[tuple, LogGroup] = {}
    for file in files:
        settings = {**path_settings(file), **{k: v for k, v in overrides.items() if v is not None}}
        key = tuple(sorted(settings.items()))
        groups.setdefault(key, LogGroup(settings)).paths.append(file)
    for group in groups.values():
        group.paths.sort(key=_repeat_key)
    return sorted(groups.values(), key=lambda g: tuple(sorted(g.settings.items())))


def _logged_device(
    framework: str, model: str, impl: str, settings: dict[str, object], first_log: Path
) -> str:
    if impl == "official":
        source, profile = settings.get("source"), settings.get("profile")
        manifest = find_manifest(framework, model, str(source) if source else None,
                                 str(profile) if profile else None)  # fmt: skip
        return manifest.environment.device
    start = parse_events_file(first_log).start
    return "cuda" if str(start.get("device", "cpu")).startswith("cuda") else "cpu"


def detect_manifest(
    framework: str, model: str, settings: dict[str, object], paths: Sequence[Path]
) -> tuple[Manifest | None, str]:
    """Which official implementation's log format reads these logs, when no --source or
    --profile says: each manifest of (framework, model), the default profile's default first,
    tried on the logs in turn; the first whose parser finds throughput lines in a log wins.
    Returns it (None when none does) and a note saying what matched and what was tried."""
    order = {DEFAULT_PROFILE: 0}
    candidates = sorted(
        (m for m in load_manifests().values() if (m.framework, m.model) == (framework, model)),
        key=lambda m: (order.get(m.profile, 1), m.profile, not m.default, m.name),
    )
    tried = [f"{m.name} ({m.profile}: {m.log_format})" for m in candidates]
    for path in paths:
        for m in candidates:
            given = {"device": m.environment.device, **settings, "source": m.name}
            try:
                spec = resolve_spec(framework, model, preset="dlperf", overrides=given)
            except DlperfError:
                continue  # this implementation cannot run that configuration
            if OfficialAdapter(m).parse_files(spec, path, path).marks:
                others = [t for t in tried if not t.startswith(f"{m.name} ")]
                return m, (
                    f"profile {m.profile} detected from the logs: {m.name}'s log format "
                    f"({m.log_format}) reads {path.name}"
                    + (f"; the other candidates: {', '.join(others)}" if others else "")
                    + "; --profile or --source chooses"
                )
    return None, (
        f"no official implementation's log format found throughput lines in these logs "
        f"(tried: {', '.join(tried) or 'none'}); --profile or --source chooses"
    )


def import_logs(
    framework: str,
    model: str,
    paths: Sequence[Path],
    *,
    impl: str = "official",
    overrides: dict[str, object] | None = None,
    results_dir: Path,
) -> list[tuple[Result, Path]]:
    """Results from logs made elsewhere: one result per configuration, one repeat per log.

    Built-in (`ootb`) runs are imported from their events files; official runs from their
    logs with the manifest's log format. The window, statuses and median are computed by the
    same code as `dlperf run`; the result is marked as imported (origin "parse").
    """
    overrides = dict(overrides or {})
    built = []
    for group in group_logs(paths, overrides):
        settings = {**group.settings, "impl": impl, "repeats": len(group.paths)}
        detected = ""
        if impl == "official" and not settings.get("source") and not settings.get("profile"):
            manifest, detected = detect_manifest(framework, model, settings, group.paths)
            if manifest is not None:
                settings["source"] = manifest.name
        if "batch_size" not in settings:
            raise DlperfError(
                f"{group.paths[0]}: the batch size is not in the path (DLPerf names logs "
                "<NnMg>/<name>_b<BATCH>_<precision>_<repeat>.log); pass --batch-size"
            )
        if "device" not in settings:  # what the logs ran on: upstream's device, or the events say
            settings["device"] = _logged_device(framework, model, impl, settings, group.paths[0])
        spec = resolve_spec(framework, model, preset="dlperf", overrides=settings)
        if impl == "official":
            manifest = find_manifest(framework, model, spec.source)
            adapter: Adapter = OfficialAdapter(manifest)
            source = source_info(manifest.upstream, [], manifest.profile)
        else:
            adapter, source = get_adapter(framework), None
        repeats = []
        for index, path in enumerate(group.paths, 1):
            parsed = adapter.parse_files(spec, path, path)  # the log is read, not held
            status, message, window = classify(spec, "exited", 0, parsed)
            tail = "" if status == RepeatStatus.ok else log_tail(path, lines=20)
            repeats.append(
                make_repeat(
                    index, status, message, window, parsed, log_path=str(path), log_tail=tail
                )
            )
        result = imported_result(spec, repeats, source=source)
        if impl == "official":
            result = result.model_copy(
                update={
                    "warnings": [
                        *result.warnings,
                        *([detected] if detected else []),
                        f"imported logs: the upstream commit is the manifest's "
                        f"({manifest.upstream.short}); the patches they ran with are "
                        "not known",
                    ]
                }
            )
        built.append(result)
    # Written once every result is made: a refused log leaves nothing half-imported.
    return ResultStore(results_dir).write_all(built)
