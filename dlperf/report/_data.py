"""Selecting, ordering and labelling results for the renderers (no I/O, no plotting)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from dlperf.identity import identity_of, machine_of, spec_key
from dlperf.schema import (
    DEVICES,
    IMPLS,
    MODES,
    PRECISIONS,
    SCENARIOS,
    Repeat,
    RepeatStatus,
    Result,
    ResultStatus,
    short_revision,
)
from dlperf.store import newest, single_device

MESSAGE_CHARS = 120
# A data-parallel run cannot beat N x one device by more than noise; above this it is suspect
# (a busy machine during the 1x1 run, simulated nodes sharing one host, a wrong sample count).
SUSPECT_EFFICIENCY = 1.05


def _rank(value: str, order: tuple[str, ...]) -> tuple[int, str]:
    return (order.index(value), "") if value in order else (len(order), value)


@dataclass(frozen=True)
class Config:
    """A configuration minus the framework: the unit compared across frameworks."""

    impl: str
    options: tuple[tuple[str, str], ...]
    practice: tuple[tuple[str, str], ...]
    mode: str
    precision: str
    xla: bool
    device: str
    image_size: int | None
    seq_len: int | None
    batch: int
    nodes: int
    devices_per_node: int
    source: str = ""  # official implementations: "<manifest> @ <commit12>"
    # Official implementations' manifest profile: never in one row with another profile.
    profile: str = ""
    scenario: str = ""  # MLPerf LoadGen's scenario ("" without LoadGen)
    loadgen: tuple[tuple[str, float], ...] = ()  # LoadGen's test settings as given

    @classmethod
    def of(cls, result: Result) -> Config:
        s = result.spec
        return cls(
            impl=s.impl,
            options=tuple(sorted(s.options.items())),
            practice=tuple(sorted(s.practice.items())),
            mode=s.mode,
            precision=s.precision,
            xla=s.xla,
            device=s.device,
            image_size=s.image_size,
            seq_len=s.seq_len,
            batch=s.batch_size,
            nodes=s.nodes,
            devices_per_node=s.devices_per_node,
            source=source_label(result),
            profile=result.source.profile if s.impl == "official" and result.source else "",
            scenario=s.scenario or "",
            loadgen=tuple(sorted(s.loadgen.items())),
        )

    def row_key(self) -> Config:
        """The cross-framework row: official implementations of any upstream share it, and so
        do the frameworks' own best-practice settings (each framework names its own)."""
        return replace(self, source="", practice=())

    def group(self) -> tuple:
        """Sort key of the per-framework table this configuration belongs to."""
        return (
            _rank(self.impl, IMPLS),
            self.profile,
            self.options,
            self.practice,
            _rank(self.mode, MODES),
            _rank(self.scenario, ("", *SCENARIOS)),
            self.loadgen,
            _rank(self.precision, PRECISIONS),
            self.xla,
            _rank(self.device, DEVICES),
            self.image_size or 0,
            self.seq_len or 0,
            self.source,
        )

    def sort_key(self) -> tuple:
        return (*self.group(), self.batch, self.nodes, self.devices_per_node)

    @property
    def mode_label(self) -> str:
        """The mode, and a LoadGen run's scenario with the settings it was given."""
        if not self.scenario:
            return self.mode
        settings = ", ".join(f"{k}={v:g}" for k, v in self.loadgen)
        return f"{self.mode} · LoadGen {self.scenario}" + (f" ({settings})" if settings else "")

    @property
    def precision_label(self) -> str:
        return self.precision + (" + XLA" if self.xla else "")

    @property
    def shape_label(self) -> str:
        parts = []
        if self.image_size:
            parts.append(f"image {self.image_size}")
        if self.seq_len:
            parts.append(f"seq {self.seq_len}")
        return ", ".join(parts) or "—"

    @property
    def impl_label(self) -> str:
        label = self.impl + (f" ({self.profile})" if self.profile else "")
        label += f": {self.source}" if self.source else ""
        if not self.options:
            return label
        return f"{label} ({', '.join(f'{k}={v}' for k, v in self.options)})"

    @property
    def practice_label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.practice)

    @property
    def topology(self) -> str:
        return f"{self.nodes}x{self.devices_per_node}"

    def group_title(self) -> str:
        parts = [self.mode_label, self.precision_label, self.device, self.shape_label,
                 self.impl_label]  # fmt: skip
        if self.practice:
            parts.append(f"best practice: {self.practice_label}")
        return " · ".join(parts)


def select(results: Iterable[Result], model: str) -> list[Result]:
    """The newest result per configuration of `model`, in a fixed order."""
    chosen = newest(r for r in results if r.spec.model == model)
    return sorted(chosen, key=lambda r: (Config.of(r).sort_key(), r.spec.framework))


def frameworks(results: Sequence[Result]) -> list[str]:
    return sorted({r.spec.framework for r in results})


def configs(results: Sequence[Result]) -> list[Config]:
    """The cross-framework rows."""
    return sorted({Config.of(r).row_key() for r in results}, key=Config.sort_key)


def cross_framework_grid(results: Sequence[Result]):  # -> pandas.DataFrame (imported lazily)
    """The cross-framework table as a pandas frame: one row per configuration (`configs`
    order), one column per framework (`frameworks` order), each cell the list of that
    framework's results for the row (several: official upstreams, or a best-practice
    ablation), NaN where the framework did not run the configuration."""
    import pandas as pd

    rows = {c: i for i, c in enumerate(configs(results))}
    frame = pd.DataFrame(
        {
            "row": [rows[Config.of(r).row_key()] for r in results],
            "framework": [r.spec.framework for r in results],
            "result": list(results),
        }
    )
    grid = frame.groupby(["row", "framework"])["result"].agg(list).unstack("framework")
    return grid.reindex(index=range(len(rows)), columns=frameworks(results))


def source_label(result: Result) -> str:
    if result.spec.impl != "official":
        return ""
    name = result.spec.source or (result.source.name if result.source else "?")
    return f"{name} @ {short_revision(result.source.commit)}" if result.source else name


def repeats_in_order(result: Result) -> list[Repeat]:
    return sorted(result.repeats, key=lambda r: r.index)


def first_failed(result: Result) -> Repeat | None:
    return next((r for r in repeats_in_order(result) if r.status != RepeatStatus.ok), None)


def ok_count(result: Result) -> int:
    return sum(r.status == RepeatStatus.ok for r in result.repeats)


def one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def hardware_label(results: Sequence[Result]) -> str:
    """The devices that produced the numbers, for a chart title."""
    names = set()
    for r in results:
        env = r.environment
        if r.spec.device == "cuda":
            names.add(env.device_name or env.gpu or "GPU")
        else:
            names.add(env.cpu or env.device_name or "CPU")
    return ", ".join(sorted(names))


def scaling_series(results: Sequence[Result], model: str) -> dict[str, list[tuple[int, float]]]:
    """Per framework table (label -> [(devices, speedup)]) with at least two topologies, where
    speedup is against the 1x1 result of the same configuration and batch per device."""
    chosen = [r for r in select(results, model) if r.metrics.throughput is not None]
    groups: dict[tuple, list[Result]] = {}
    for r in chosen:
        if r.status == ResultStatus.failed:
            continue
        c = Config.of(r)
        groups.setdefault((r.spec.framework, c.group(), c.batch), []).append(r)
    series = {}
    for (framework, _, batch), group in sorted(groups.items(), key=lambda kv: str(kv[0])):
        base = [r for r in group if r.spec.world_size == 1]
        if not base or len(group) < 2:
            continue
        one = base[0].metrics.throughput.median
        points = sorted((r.spec.world_size, r.metrics.throughput.median / one) for r in group)
        c = Config.of(group[0])
        label = f"{framework} {c.device} {c.precision_label} b{batch}" + (
            f" ({c.impl_label})" if c.impl_label != "ootb" else ""
        )
        if c.practice:
            label += f" [{c.practice_label}]"
        series[label] = points
    return series


def scaling_efficiency(result: Result, base: Result | None) -> float | None:
    """Median throughput / (world size x the 1x1 median): 1.0 is linear scaling."""
    t = result.metrics.throughput
    b = base.metrics.throughput if base else None
    if t is None or b is None or result.status == ResultStatus.failed or not b.median:
        return None
    return t.median / b.median / result.spec.world_size


def max_other_share(result: Result) -> float | None:
    """The largest share of the machine's CPUs other processes took during a repeat."""
    shares = [r.machine_load.other_share for r in result.repeats if r.machine_load]
    return max(shares) if shares else None


def suspect_scaling(results: Sequence[Result]) -> list[tuple[Result, float]]:
    """(result, scaling efficiency) of every data-parallel result that scales better than
    linearly against the 1x1 result of its configuration."""
    latest = newest(results)
    ones = {identity_of(r).key: r for r in latest if r.spec.world_size == 1}
    out = []
    for r in latest:
        if r.spec.world_size > 1:
            benchmark, settings = spec_key(single_device(r.spec))
            base = ones.get((benchmark, machine_of(r).id, settings))
            efficiency = scaling_efficiency(r, base)
            if efficiency is not None and efficiency > SUSPECT_EFFICIENCY:
                out.append((r, efficiency))
    return out
