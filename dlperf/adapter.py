"""What the core needs from a framework adapter. Adapters live in `adapters/<name>/`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from dlperf.envs import EnvSpec
from dlperf.events import ParsedRun, parse_events
from dlperf.schema import BenchmarkSpec


@dataclass(frozen=True)
class Command:
    """One process to start: argv list (never a shell string), extra env vars, working dir."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None


class Adapter(ABC):
    """A framework (or test double) that can run models from the catalog in `dlperf.models`."""

    name: str
    description: str
    models: tuple[str, ...]
    impls: tuple[str, ...] = ("ootb",)

    def option_keys(self, model: str) -> dict[str, str]:
        """`--set KEY=VALUE` keys this adapter accepts for `model`, with one-line help."""
        return {}

    @abstractmethod
    def env_spec(self, device: str) -> EnvSpec | None:
        """The isolated environment for `device`; None runs the host interpreter (stdlib only)."""

    @abstractmethod
    def command(self, spec: BenchmarkSpec, python: str) -> Command:
        """The workload command. The runner adds DLPERF_EVENTS=<file> to its environment."""

    def parse(self, log_text: str, events_text: str) -> ParsedRun:
        """Step marks of one repeat. Built-in workloads write events; official ones override."""
        return parse_events(events_text)
