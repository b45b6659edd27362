"""Official upstream implementations as adapters: `--impl official` runs and `dlperf parse`.

`OfficialAdapter` wraps a manifest: its environment (pinned pip requirements, or a container
image), its per-node command lines (`dlperf.official.commands`), and its log format
(`dlperf.logformats`). The runner drives it like any built-in adapter, so repeats, timeouts,
statuses and statistics are the same code. Logs made elsewhere are imported by
`dlperf.importers.dlperf_logs` through the same adapter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from dlperf import DlperfError
from dlperf.adapter import Adapter, Command
from dlperf.adapters import get_adapter
from dlperf.envs import EnvSpec
from dlperf.events import ParsedRun
from dlperf.launch import DEFAULT_MASTER_PORT, NodeCommand
from dlperf.logformats import LogContext, parse_file, parse_log
from dlperf.official.checkout import fetch_source, source_info, upstream_patches
from dlperf.official.commands import LaunchPlan, check_manifest, plan_nodes
from dlperf.official.manifest import Manifest
from dlperf.schema import BenchmarkSpec, SourceInfo

OFFICIAL_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}  # no __pycache__ in the verified checkout


class OfficialAdapter(Adapter):
    """One manifest's upstream implementation, at a verified, patched checkout (named before
    it is fetched: `for_run` fetches it)."""

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
        # Its framework's checks of an interpreter (its commands come from the manifest).
        self.launch = get_adapter(manifest.framework).launch

    def env_spec(self, device: str) -> EnvSpec | None:
        env = self.manifest.environment
        if env.kind == "container":
            return None  # the image is the environment; the host only runs docker/apptainer
        return EnvSpec(
            framework=self.manifest.framework,
            variant=f"official-{self.manifest.upstream.name}-{device}",
            python=env.python,
            requirements=env.requirements_for(device),
            verify=self.launch.verify,
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

    def check_launch(self, spec: BenchmarkSpec, hosts: Sequence[str]) -> None:
        """What the manifest's upstream cannot run (one process or several nodes alike)."""
        check_manifest(self.manifest, spec, self.data_dir)

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

    def for_run(self, out_dir: Path, sources_dir: Path | None = None) -> OfficialAdapter:
        """At the verified checkout (fetched, from `sources_dir` where given), writing the
        upstream's outputs into `out_dir`, never into the checkout (it must stay verifiable)."""
        checkout = fetch_source(self.manifest.upstream, sources_dir=sources_dir)
        return OfficialAdapter(self.manifest, checkout, data_dir=self.data_dir, out_dir=out_dir)

    def parse_files(
        self, spec: BenchmarkSpec, log_path: Path, events_path: Path | None = None
    ) -> ParsedRun:
        context = log_context(spec)
        if not log_path.exists():
            return parse_log(self.manifest.log_format, "", context)
        return parse_file(log_path, self.manifest.log_format, context)

    def source_info(self) -> SourceInfo:
        m = self.manifest
        return source_info(m.upstream, upstream_patches(m.upstream), m.profile)


def log_context(spec: BenchmarkSpec) -> LogContext:
    """What a log leaves out, from the spec; nothing past the window is needed."""
    horizon = spec.skip + spec.measure
    return LogContext(spec.batch_size, spec.devices_per_node, spec.nodes, horizon=horizon)
