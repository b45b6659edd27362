"""What a number belongs to: a benchmark, a machine, an environment and settings.

* **Benchmark**: what is measured. Framework, model, implementation (and the official
  manifest), mode, LoadGen scenario and settings, precision, compiler, device, shapes, nodes x
  devices per node, batch per device, the window, and the `--set` keys that change what is
  measured (`WorkloadOption.setting` False: the calibration's period, a microbenchmark's sizes).
* **Machine**: the hardware class. CPU model and logical CPU count, GPU model, count and memory,
  the interconnect where known. The host name is recorded but is not the machine: two identical
  nodes of a cluster are one machine.
* **Environment**: the versions. Framework, Python, installed distributions, dlperf and its
  commit, an official upstream's pin.
* **Settings**: what an ablation changes. The best-practice options as run (`spec.practice`) and
  the `--set` keys that are settings (threads, seed, a layout switch).

A stored result is found by benchmark + machine + settings; its environment is shown beside it,
and a changed environment is a new point in the same history, never another benchmark. Nothing
here reads files: every function is a pure function of a spec or a result.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from dlperf import DlperfError
from dlperf.adapters import get_adapter
from dlperf.schema import BenchmarkSpec, Environment, Result, short_revision

ID_CHARS = 64  # a benchmark id names its results folder and stays readable in a table
HASH_CHARS = 6
DLPERF_WINDOW = (20, 100)  # DLPerf's rule: an id names another window only through its hash
COMMIT_CHARS = 12  # how much of a commit hash a label shows
# A machine id is this many hex digits of its fingerprint's SHA-256: 64 bits, so two machines
# share one only by intent (32 bits collided in about a second of search). Ids before were the
# first 8 of these digits, so an old id still names its machine as a prefix (`id_matches`).
MACHINE_ID_CHARS = 16
OLD_MACHINE_ID_CHARS = 8
UNKNOWN = "unknown"


# ---------------------------------------------------------------- settings


@functools.lru_cache(maxsize=256)
def _setting_keys(framework: str, model: str) -> frozenset[str]:
    """The `--set` keys of `framework` `model` that are settings; none for a framework this
    dlperf does not know (an imported suite's), whose options then all count as parameters."""
    try:
        declared = get_adapter(framework).option_declarations(model)
    except (DlperfError, KeyError):
        return frozenset()
    return frozenset(k for k, o in declared.items() if isinstance(o, str) or o.setting)


def settings_of(spec: BenchmarkSpec) -> dict[str, str]:
    """The settings a result ran with: its best practice and the `--set` keys that are
    settings, sorted by key."""
    keys = _setting_keys(spec.framework, spec.model)
    found = {**{k: v for k, v in spec.options.items() if k in keys}, **spec.practice}
    return dict(sorted(found.items()))


def parameters_of(spec: BenchmarkSpec) -> dict[str, str]:
    """The `--set` keys that are part of the benchmark (any key not declared a setting)."""
    keys = _setting_keys(spec.framework, spec.model)
    return {k: v for k, v in sorted(spec.options.items()) if k not in keys}


def settings_label(settings: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "defaults"


def settings_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Each setting that differs, "key old -> new" ("–" where one side does not set it)."""
    keys = sorted(set(before) | set(after))
    return [f"{k} {before.get(k, '–')} -> {after.get(k, '–')}" for k in keys
            if before.get(k) != after.get(k)]  # fmt: skip


# ---------------------------------------------------------------- benchmark


def benchmark_fields(spec: BenchmarkSpec) -> dict[str, Any]:
    """Everything that makes a benchmark, canonical (what its id is made of)."""
    return {
        "framework": spec.framework,
        "model": spec.model,
        "impl": spec.impl,
        "source": spec.source,
        "mode": spec.mode,
        "scenario": spec.scenario,
        "loadgen": dict(sorted(spec.loadgen.items())),
        "precision": spec.precision,
        "xla": spec.xla,
        "device": spec.device,
        "nodes": spec.nodes,
        "devices_per_node": spec.devices_per_node,
        "batch_size": spec.batch_size,
        "image_size": spec.image_size,
        "seq_len": spec.seq_len,
        "skip": spec.skip,
        "measure": spec.measure,
        "parameters": parameters_of(spec),
    }


def _digest(data: Any, chars: int) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:chars]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.") or "x"


def benchmark_id(spec: BenchmarkSpec) -> str:
    """A short readable id, safe as a folder name, at most ID_CHARS characters:
    ``pytorch-resnet50-train-amp-cuda-1x8-b256``, with image / sequence sizes (`-i224`,
    `-s128`) and, where the benchmark has anything those words do not say (an official
    manifest, a LoadGen scenario's settings, another window than DLPerf's, a parameter), a
    short hash of every field after them. Equal benchmarks have equal ids."""
    fields = benchmark_fields(spec)
    words = [spec.framework, spec.model]
    words += [] if spec.impl == "ootb" else [spec.impl]
    words += [spec.mode] + ([spec.scenario] if spec.scenario else [])
    words += [spec.precision] + (["xla"] if spec.xla else []) + [spec.device]
    words += [f"{spec.nodes}x{spec.devices_per_node}", f"b{spec.batch_size}"]
    words += [f"i{spec.image_size}"] if spec.image_size else []
    words += [f"s{spec.seq_len}"] if spec.seq_len else []
    readable = "-".join(_slug(w) for w in words)
    unsaid = (
        spec.source
        or spec.loadgen
        or fields["parameters"]
        or (spec.skip, spec.measure) != DLPERF_WINDOW
        or readable != "-".join(words)  # names with characters a folder name cannot keep
    )
    if not unsaid and len(readable) <= ID_CHARS:
        return readable
    room = ID_CHARS - HASH_CHARS - 1
    return f"{readable[:room].rstrip('-.')}-{_digest(fields, HASH_CHARS)}"


def spec_key(spec: BenchmarkSpec) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A spec's benchmark and settings: one configuration to run (the machine is where it
    runs)."""
    return (benchmark_id(spec), tuple(settings_of(spec).items()))


def describe(spec: BenchmarkSpec) -> str:
    """A spec's name in a terminal line or a table: its benchmark id, the parameters its hash
    stands for in parentheses, its settings in brackets."""
    parameters, settings = parameters_of(spec), settings_of(spec)
    text = benchmark_id(spec)
    text += f" ({settings_label(parameters)})" if parameters else ""
    return text + (f" [{settings_label(settings)}]" if settings else "")


def legacy_config_key(spec: BenchmarkSpec) -> str:
    """The configuration key results and score references used before benchmark ids
    (schema 6 and older): what a reference frozen then is matched by. Nothing else uses it."""
    parts = [
        spec.framework,
        spec.model,
        spec.impl,
        spec.mode,
        spec.device,
        spec.precision + ("-xla" if spec.xla else ""),
        f"{spec.nodes}n{spec.devices_per_node}d",
        f"b{spec.batch_size}",
    ]
    if spec.image_size:
        parts.append(f"img{spec.image_size}")
    if spec.seq_len:
        parts.append(f"seq{spec.seq_len}")
    parts += [f"{k}={v}" for k, v in sorted(spec.options.items())]
    parts += [f"{k}={v}" for k, v in sorted(spec.practice.items())]
    if spec.scenario:
        parts.append(f"lg-{spec.scenario}")
        parts += [f"{k}={v:g}" for k, v in sorted(spec.loadgen.items())]
    if spec.source:
        parts.append(f"src={spec.source}")
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", "_".join(parts))


# ---------------------------------------------------------------- machine


@dataclass(frozen=True)
class Machine:
    """A hardware class: what a number may be compared within."""

    cpu: str | None = None
    cpu_count: int | None = None
    gpu: str | None = None  # model name(s), comma-separated when a host mixes models
    gpu_count: int | None = None
    gpu_memory_gib: int | None = None  # per GPU, rounded (drivers report a few MiB apart)
    interconnect: str | None = None

    @property
    def known(self) -> bool:
        return any(v is not None for v in asdict(self).values())

    @property
    def id(self) -> str:
        """MACHINE_ID_CHARS hex digits of the fingerprint; "unknown" when nothing about it was
        recorded. Equal ids are not proof of one machine: `same_machine` compares the facts."""
        return _digest(asdict(self), MACHINE_ID_CHARS) if self.known else UNKNOWN

    def matches(self, wanted: str) -> bool:
        """Whether `wanted` names this machine: its id (or an older, shorter form of it), or a
        piece of its label (any case)."""
        return id_matches(wanted, self.id) or wanted.lower() in self.label.lower()

    @property
    def label(self) -> str:
        """The machine in words: "AMD EPYC 7B13, 2 CPUs", "8 x NVIDIA H200 140 GiB, Intel Xeon
        Platinum 8480+, 224 CPUs"."""
        if not self.known:
            return "unknown machine"
        parts = []
        if self.gpu:
            gpus = f"{self.gpu_count} x {self.gpu}" if self.gpu_count else self.gpu
            gpus += f" {self.gpu_memory_gib} GiB" if self.gpu_memory_gib else ""
            parts.append(gpus + (f" ({self.interconnect})" if self.interconnect else ""))
        if self.cpu:
            parts.append(self.cpu)
        if self.cpu_count:
            parts.append(f"{self.cpu_count} CPUs")
        return ", ".join(parts)


def id_matches(wanted: str, machine_id: str) -> bool:
    """Whether `wanted` (a `--machine` value) is `machine_id`, or at least its first
    OLD_MACHINE_ID_CHARS digits: the ids reports and scripts recorded before ids grew."""
    if wanted == machine_id:
        return True
    return (
        machine_id != UNKNOWN
        and len(wanted) >= OLD_MACHINE_ID_CHARS
        and machine_id.startswith(wanted.lower())
    )


def same_machine(a: Machine, b: Machine) -> bool:
    """Whether two results ran on one machine: the same recorded facts, not only the same id
    (an id is a hash, and a hash can be made to collide). A machine whose hardware was not
    recorded is nobody's twin, not even another unknown one's: pairing those is asking for
    it (`--across-machines`)."""
    return a.known and a == b


def machine_names(machines: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """How one output names each of these (id, label) machines: its label, with its id beside
    it when another machine there has the same label ("AMD EPYC, 2 CPUs" as a CPU's name and
    "AMD EPYC" with 2 CPUs), so that two machines never read as one. Every output that names
    several machines (compare, history, score) names them here."""
    found = set(machines)
    labels = Counter(label for _, label in found)
    return {
        (mid, label): f"{label} (machine {mid})" if labels[label] > 1 else label
        for mid, label in found
    }


def _gib(memory_mb: int | None) -> int | None:
    return round(memory_mb / 1024) if memory_mb else None


def machine_of_environment(env: Environment, device: str = "cpu") -> Machine:
    """The machine an environment was recorded on. An imported log knows at most the device it
    names (`device_name`), which then stands for the GPU."""
    gpu = env.gpu or (env.device_name if device == "cuda" else None)
    return Machine(
        cpu=" ".join(env.cpu.split()) if env.cpu else None,
        cpu_count=env.cpu_count,
        gpu=gpu,
        gpu_count=env.gpu_count if gpu else None,
        gpu_memory_gib=_gib(env.gpu_memory_mb) if gpu else None,
        interconnect=env.interconnect,
    )


def machine_of(result: Result) -> Machine:
    return machine_of_environment(result.environment, result.spec.device)


@functools.lru_cache(maxsize=4)
def this_machine(device: str = "cpu") -> Machine:
    """The machine dlperf runs on now, as a result measured here will record it."""
    from dlperf.system import hardware_fields

    env = Environment(dlperf_version="", host="", os="", **hardware_fields())
    return machine_of_environment(env, device)


# ---------------------------------------------------------------- environment


def commit_label(commit: str | None, dirty: bool | None) -> str | None:
    """A commit's short form, "+dirty" when dlperf's code differed from it."""
    if commit is None:
        return None
    return short_revision(commit, COMMIT_CHARS) + ("+dirty" if dirty else "")


# What an environment is, as "changed since" lists it: (label, the value it reads from a
# result's row, `dlperf.rows`). The host is recorded here: it is not the machine.
ENVIRONMENT: tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...] = (
    ("framework", lambda r: r["framework_version"]),
    ("python", lambda r: r["python"]),
    ("dlperf", lambda r: r["dlperf_version"]),
    ("dlperf commit", lambda r: commit_label(r["dlperf_commit"], r["dlperf_dirty"])),
    ("workdir commit", lambda r: commit_label(r["workdir_commit"], r["workdir_dirty"])),
    ("upstream", lambda r: commit_label(r["source_commit"], None)),
    ("packages", lambda r: (r["dists_digest"] or "")[:COMMIT_CHARS] or None),
    ("host", lambda r: r["host"]),
)


def environment_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What differs in versions, commits and host between two results' rows."""
    found = []
    for label, read in ENVIRONMENT:
        old, new = read(before), read(after)
        if old != new:
            found.append(f"{label} {old or '–'} -> {new or '–'}")
    return found


def differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Every setting and environment difference between two results' rows ("setting
    channels_last 0 -> 1", "framework 2.1.0 -> 2.2.0"), settings first."""
    changed = settings_changes(json.loads(before["settings"]), json.loads(after["settings"]))
    return [f"setting {c}" for c in changed] + environment_changes(before, after)


# ---------------------------------------------------------------- identity


@dataclass(frozen=True)
class Identity:
    """Where a result belongs: `series` (benchmark + machine id) is a line in history and what
    compare pairs (two results pair only on one machine by `same_machine` too: an id is a
    hash); `key` adds the settings: one stored configuration."""

    benchmark: str
    machine: str
    settings: tuple[tuple[str, str], ...]

    @property
    def series(self) -> tuple[str, str]:
        return (self.benchmark, self.machine)

    @property
    def key(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        return (self.benchmark, self.machine, self.settings)


def identity_of(result: Result) -> Identity:
    return Identity(
        benchmark_id(result.spec),
        machine_of(result).id,
        tuple(settings_of(result.spec).items()),
    )
