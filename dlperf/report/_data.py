"""Selecting, ordering and labelling results for the renderers (no I/O, no plotting).

Nothing here pools machines: a configuration (`Config`) is one machine's, `by_machine` splits
a model's results into one group per machine, and every chart, table and series is made from
one group. Settings are not configurations: within a benchmark on a machine, the result with
the framework's default best practice stands for it (`headline`), the other settings are an
ablation of it (`ablations`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from dlperf import DlperfError
from dlperf.adapters import get_adapter

# markdown.py still imports the mark from here (re-exported; it is dlperf.analysis's).
from dlperf.analysis import speedups
from dlperf.identity import (
    Machine,
    identity_of,
    machine_of,
    parameters_of,
    settings_changes,
    settings_label,
    settings_of,
)
from dlperf.published import is_published_reference
from dlperf.rows import metric_values
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
from dlperf.stats import Verdict, judge
from dlperf.store import newest, recency

MESSAGE_CHARS = 120
ABLATION_THRESHOLD = 0.05  # `dlperf compare`'s default threshold, for an ablation's verdict


def _rank(value: str, order: tuple[str, ...]) -> tuple[int, str]:
    return (order.index(value), "") if value in order else (len(order), value)


@dataclass(frozen=True)
class Config:
    """A configuration minus the framework and its settings, on one machine: the unit compared
    across frameworks (a row never holds two machines)."""

    machine: str  # the machine's id (`dlperf.identity.Machine.id`)
    impl: str
    parameters: tuple[tuple[str, str], ...]  # `--set` keys that are part of the benchmark
    settings: tuple[tuple[str, str], ...]  # best practice and `--set` settings
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
            machine=machine_of(result).id,
            impl=s.impl,
            parameters=tuple(parameters_of(s).items()),
            settings=tuple(settings_of(s).items()),
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
        do a framework's settings (each framework names its own best practice; the row shows
        its default, `headline`). The machine stays: a row is one machine's."""
        return replace(self, source="", settings=())

    def group(self) -> tuple:
        """Sort key of the per-framework table this configuration belongs to (its rows are the
        topologies, batch sizes and settings)."""
        return (
            self.machine,
            _rank(self.impl, IMPLS),
            self.profile,
            self.parameters,
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
        return (*self.group(), self.batch, self.nodes, self.devices_per_node, self.settings)

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
        if not self.parameters:
            return label
        return f"{label} ({', '.join(f'{k}={v}' for k, v in self.parameters)})"

    @property
    def settings_text(self) -> str:
        """The settings, "defaults" when there are none."""
        return settings_label(dict(self.settings))

    @property
    def topology(self) -> str:
        return f"{self.nodes}x{self.devices_per_node}"

    def group_title(self) -> str:
        parts = [self.mode_label, self.precision_label, self.device, self.shape_label,
                 self.impl_label]  # fmt: skip
        return " · ".join(parts)


def select(results: Iterable[Result], model: str) -> list[Result]:
    """The user's newest result per benchmark x machine x settings of `model`, in a fixed
    order. Published references (`dlperf.published`) are other people's results on other
    machines: every table, chart and count made from this leaves them out."""
    chosen = newest(r for r in results if r.spec.model == model and not is_published_reference(r))
    return sorted(chosen, key=lambda r: (Config.of(r).sort_key(), r.spec.framework))


def by_machine(results: Sequence[Result]) -> list[tuple[Machine, list[Result]]]:
    """The results of each machine (order kept), machines ordered by label then id."""
    groups: dict[Machine, list[Result]] = {}
    for r in results:
        groups.setdefault(machine_of(r), []).append(r)
    return sorted(groups.items(), key=lambda kv: (kv[0].label, kv[0].id))


def machine_heading(machine: Machine) -> str:
    """A machine as a heading or chart title names it: its label and its id."""
    if not machine.known:
        return f"{machine.label} (no hardware recorded)"
    return f"{machine.label} (machine {machine.id})"


def frameworks(results: Sequence[Result]) -> list[str]:
    return sorted({r.spec.framework for r in results})


@functools.lru_cache(maxsize=512)
def _practice(spec_json: str) -> tuple[tuple[str, str], ...] | None:
    from dlperf.schema import BenchmarkSpec

    spec = BenchmarkSpec.model_validate_json(spec_json)
    if spec.impl != "ootb":  # only dlperf's own workloads take a best practice (spec.py)
        return ()
    try:
        return tuple(sorted(get_adapter(spec.framework).practice(spec).items()))
    except (DlperfError, KeyError):  # a framework this dlperf does not know
        return None


def default_settings(result: Result) -> dict[str, str] | None:
    """The settings `result`'s benchmark runs with when nothing is `--set`: its framework's
    best practice today. None when the framework is not known here."""
    found = _practice(result.spec.model_dump_json())
    return None if found is None else dict(found)


def is_default(result: Result) -> bool:
    """Whether `result` ran with its framework's default settings (no `--set` setting)."""
    return settings_of(result.spec) == default_settings(result)


def headline(results: Sequence[Result]) -> Result:
    """Of one benchmark's results on one machine (one per settings): the one with the default
    settings, else the newest."""
    defaults = [r for r in results if is_default(r)]
    return max(defaults or results, key=recency)


def headlines(results: Sequence[Result]) -> list[Result]:
    """The `headline` of each benchmark x machine, in the order of `results`."""
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault(identity_of(r).series, []).append(r)
    chosen = {id(headline(group)) for group in groups.values()}
    return [r for r in results if id(r) in chosen]


def configs(results: Sequence[Result]) -> list[Config]:
    """The cross-framework rows."""
    return sorted({Config.of(r).row_key() for r in results}, key=Config.sort_key)


def cross_framework_grid(results: Sequence[Result]):  # -> pandas.DataFrame (imported lazily)
    """The cross-framework table as a pandas frame: one row per configuration (`configs`
    order), one column per framework (`frameworks` order), each cell the list of that
    framework's `headline` results for the row (several: official upstreams), NaN where the
    framework did not run the configuration. Other settings are in `ablations`."""
    import pandas as pd

    rows = {c: i for i, c in enumerate(configs(results))}
    shown = headlines(results)
    frame = pd.DataFrame(
        {
            "row": [rows[Config.of(r).row_key()] for r in shown],
            "framework": [r.spec.framework for r in shown],
            "result": shown,
        }
    )
    grid = frame.groupby(["row", "framework"])["result"].agg(list).unstack("framework")
    return grid.reindex(index=range(len(rows)), columns=frameworks(results))


@dataclass(frozen=True)
class Ablation:
    """A settings variant of a benchmark on a machine against its `headline` (the baseline):
    which settings differ and `dlperf compare`'s verdict on the compared metric."""

    baseline: Result
    variant: Result
    changes: list[str]  # "channels_last 1 -> 0"
    unit: str
    baseline_median: float | None  # of the ok repeats' values; None when none is ok
    variant_median: float | None
    verdict: Verdict | None  # None when a side has no ok repeat


def ablations(results: Sequence[Result]) -> list[Ablation]:
    """Every benchmark x machine with more than one settings variant: each variant against
    the headline, ordered by machine, configuration, then the variant's settings."""
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault(identity_of(r).series, []).append(r)
    out = []
    for group in groups.values():
        if len(group) < 2:
            continue
        base = headline(group)
        _, va, higher = metric_values(base)
        unit = "samples/s" if higher else "ms"
        for r in sorted(group, key=lambda r: identity_of(r).key):
            if r is base:
                continue
            _, vb, _ = metric_values(r)
            verdict = judge(va, vb, higher, ABLATION_THRESHOLD) if va and vb else None
            out.append(
                Ablation(
                    baseline=base,
                    variant=r,
                    changes=settings_changes(settings_of(base.spec), settings_of(r.spec)),
                    unit=unit,
                    baseline_median=statistics.median(va) if va else None,
                    variant_median=statistics.median(vb) if vb else None,
                    verdict=verdict,
                )
            )
    return sorted(out, key=_ablation_order)


def _ablation_order(a: Ablation) -> tuple:
    return (Config.of(a.baseline).sort_key(), a.baseline.spec.framework,
            identity_of(a.variant).key)  # fmt: skip


STEM_CHARS = 80  # a page's name and its charts' suffixes stay far below a file name's 255 bytes


def file_stem(model: str) -> str:
    """A model's pages and charts are named after it: its letters, digits, `_.-`; a name
    longer than STEM_CHARS is cut and told apart by a hash of the whole."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", model)
    if len(stem) <= STEM_CHARS:
        return stem
    return f"{stem[: STEM_CHARS - 9]}-{hashlib.sha256(model.encode()).hexdigest()[:8]}"


def chart_file(model: str, machine: str | None = None, kind: str = "throughput") -> str:
    """The PNG of a model's chart (`kind` "throughput" or "scaling"): `<model>.png` and
    `<model>-scaling.png` when the page has one machine, else `<model>-<machine id>.png` and
    `<model>-<machine id>-scaling.png`."""
    name = file_stem(model) + (f"-{machine}" if machine else "")
    return name + ("-scaling" if kind == "scaling" else "") + ".png"


def chart_files(model: str, machines: Sequence[Machine]) -> dict[str, tuple[str, str]]:
    """Every chart file a page of `model` on `machines` may link: file -> (kind, machine id)."""
    several = len(machines) > 1
    return {
        chart_file(model, m.id if several else None, kind): (kind, m.id)
        for m in machines
        for kind in ("throughput", "scaling")
    }


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
    """The machine(s) that produced the numbers, for a chart title (one, as charts are drawn
    per machine): label and id."""
    return ", ".join(machine_heading(m) for m, _ in by_machine(results))


def scaling_series(results: Sequence[Result], model: str) -> dict[str, list[tuple[int, float]]]:
    """Per framework table (label -> [(devices, speedup)]) with at least two topologies, where
    speedup is against the 1x1 result of the same configuration, machine, settings and batch
    per device. A label names the settings where a framework has several in one table."""
    return {
        label: [(devices, speedup) for devices, speedup, _ in points]
        for label, points in scaling_points(results, model).items()
    }


def scaling_points(
    results: Sequence[Result], model: str
) -> dict[str, list[tuple[int, float, Result]]]:
    """`scaling_series` with each point's result (a chart colours and filters by it)."""
    chosen = [r for r in select(results, model) if r.metrics.throughput is not None]
    groups: dict[tuple, list[Result]] = {}
    for r in chosen:
        if r.status == ResultStatus.failed:
            continue
        c = Config.of(r)
        groups.setdefault((r.spec.framework, c.group(), c.batch, c.settings), []).append(r)
    drawn = {
        key: group
        for key, group in sorted(groups.items(), key=lambda kv: str(kv[0]))
        if len(group) > 1 and any(r.spec.world_size == 1 for r in group)
    }
    variants: dict[tuple, int] = {}
    for framework, group_key, batch, _ in drawn:
        variants[(framework, group_key, batch)] = variants.get((framework, group_key, batch), 0) + 1
    several_machines = len(by_machine(chosen)) > 1
    series = {}
    for (framework, group_key, batch, _), group in drawn.items():
        points = speedups(group)
        c = Config.of(group[0])
        label = f"{framework} {c.device} {c.precision_label} b{batch}" + (
            f" ({c.impl_label})" if c.impl_label != "ootb" else ""
        )
        if variants[(framework, group_key, batch)] > 1:
            label += f" [{c.settings_text}]"
        if several_machines:  # the charts draw one machine each; a caller that mixes sees it
            label += f" on {c.machine}"
        series[label] = points
    return series
