"""Official upstream implementations as adapters: `--impl official` runs and `dlperf parse`.

`OfficialAdapter` wraps a manifest: its environment (pinned pip requirements, or a container
image), its per-node command lines (`dlperf.launch`), and its log format
(`dlperf.logformats`). The runner drives it like any built-in adapter, so repeats, timeouts,
statuses and statistics are the same code. `import_logs` turns logs made elsewhere (a single
log, or a DLPerf-style tree) into results exactly as a run would.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dlperf import DlperfError
from dlperf.adapter import Adapter, Command
from dlperf.adapters import get_adapter
from dlperf.envs import EnvSpec
from dlperf.events import ParsedRun, parse_events_file
from dlperf.launch import DEFAULT_MASTER_PORT, LaunchPlan, NodeCommand, plan_nodes
from dlperf.logformats import LogContext, parse_file, parse_log
from dlperf.proc import tail as log_tail
from dlperf.schema import BenchmarkSpec, RepeatStatus, Result, SourceInfo
from dlperf.sources import (
    Manifest,
    fetch_source,
    find_manifest,
    source_info,
    upstream_patches,
)
from dlperf.store import write_result

OFFICIAL_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}  # no __pycache__ in the verified checkout


class OfficialAdapter(Adapter):
    """One manifest's upstream implementation, at a verified, patched checkout."""

    impls = ("official",)

    def __init__(
        self,
        manifest: Manifest,
        checkout: Path | None = None,
        *,
        data_dir: str = "",
        out_dir: Path | None = None,
    ) -> None:
        self.manifest = manifest
        self.name = manifest.framework
        self.description = manifest.title
        self.models = (manifest.model,)
        self.checkout = checkout
        self.data_dir = data_dir
        self.out_dir = out_dir

    def env_spec(self, device: str) -> EnvSpec | None:
        env = self.manifest.environment
        if env.kind == "container":
            return None  # the image is the environment; the host only runs docker/apptainer
        verify = getattr(get_adapter(self.manifest.framework), "verify", None)
        return EnvSpec(
            framework=self.manifest.framework,
            variant=f"official-{self.manifest.upstream.name}-{device}",
            python=env.python,
            requirements=env.requirements,
            verify=verify or "import platform; print(platform.python_version())",
        )

    def plan(
        self,
        spec: BenchmarkSpec,
        python: str,
        hosts: Sequence[str] | None = None,
        port: int = DEFAULT_MASTER_PORT,
    ) -> LaunchPlan:
        if self.checkout is None:
            raise DlperfError(f"{self.manifest.name}: no checkout (run `dlperf sources fetch`)")
        return plan_nodes(
            self.manifest,
            spec,
            checkout=self.checkout,
            python=python,
            hosts=hosts,
            master_port=port,
            data_dir=self.data_dir,
            out_dir=str(self.out_dir)
            if self.out_dir
            else "<results>/<config>/<id>/upstream-output",
        )

    def command(self, spec: BenchmarkSpec, python: str) -> Command:
        (node,) = self.job_commands(spec, python, ["localhost"], DEFAULT_MASTER_PORT)
        return Command(list(node.argv), env=node.env, cwd=Path(node.cwd))

    def job_commands(
        self,
        spec: BenchmarkSpec,
        python: str,
        hosts: Sequence[str],
        port: int,
        log_dir: Path | None = None,
    ) -> list[NodeCommand]:
        """The manifest's per-node lines (one line on node 0 for a "once" manifest)."""
        if self.out_dir:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        nodes = self.plan(spec, python, hosts, port).nodes
        return [dataclasses.replace(n, env={**OFFICIAL_ENV, **n.env}) for n in nodes]

    def parse(self, spec: BenchmarkSpec, log_text: str, events_text: str = "") -> ParsedRun:
        return parse_log(self.manifest.log_format, log_text, log_context(spec))

    def parse_files(
        self, spec: BenchmarkSpec, log_path: Path, events_path: Path | None = None
    ) -> ParsedRun:
        if not log_path.exists():
            return self.parse(spec, "")
        return parse_file(log_path, self.manifest.log_format, log_context(spec))

    def source_info(self) -> SourceInfo:
        return source_info(self.manifest.upstream, upstream_patches(self.manifest.upstream))


def log_context(spec: BenchmarkSpec) -> LogContext:
    """What a log leaves out, from the spec; nothing past the window is needed."""
    horizon = spec.skip + spec.measure
    return LogContext(spec.batch_size, spec.devices_per_node, spec.nodes, horizon=horizon)


def prepare_official(
    manifest: Manifest,
    *,
    sources_dir: Path | None = None,
    data_dir: str = "",
    out_dir: Path | None = None,
) -> OfficialAdapter:
    """Fetch (or reuse) the verified checkout and wrap the manifest as an adapter."""
    checkout = fetch_source(manifest.upstream, sources_dir=sources_dir)
    return OfficialAdapter(manifest, checkout, data_dir=data_dir, out_dir=out_dir)


# --------------------------------------------------------------------------- importing logs

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


def _logged_device(framework: str, model: str, impl: str, source: object, first_log: Path) -> str:
    if impl == "official":
        return find_manifest(framework, model, str(source) if source else None).environment.device
    start = parse_events_file(first_log).start
    return "cuda" if str(start.get("device", "cpu")).startswith("cuda") else "cpu"


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
    from dlperf.runner import build_result, classify, make_repeat, new_result_id, resolve_spec

    overrides = dict(overrides or {})
    built = []
    for group in group_logs(paths, overrides):
        settings = {**group.settings, "impl": impl, "repeats": len(group.paths)}
        if "batch_size" not in settings:
            raise DlperfError(
                f"{group.paths[0]}: the batch size is not in the path (DLPerf names logs "
                "<NnMg>/<name>_b<BATCH>_<precision>_<repeat>.log); pass --batch-size"
            )
        if "device" not in settings:  # what the logs ran on: upstream's device, or the events say
            settings["device"] = _logged_device(
                framework, model, impl, settings.get("source"), group.paths[0]
            )
        spec = resolve_spec(framework, model, preset="dlperf", overrides=settings)
        if impl == "official":
            manifest = find_manifest(framework, model, spec.source)
            adapter: Adapter = OfficialAdapter(manifest)
            source = source_info(manifest.upstream, [])
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
        result = build_result(spec, new_result_id(), repeats, None, source=source, imported=True)
        if impl == "official":
            result = result.model_copy(
                update={
                    "warnings": [
                        *result.warnings,
                        f"imported logs: the upstream commit is the manifest's "
                        f"({manifest.upstream.commit[:12]}); the patches they ran with are "
                        "not known",
                    ]
                }
            )
        built.append(result)
    # Written once every result is made: a refused log leaves nothing half-imported.
    return [(result, write_result(results_dir, result)) for result in built]
