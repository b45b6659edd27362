"""Device telemetry during a repeat's measured window, sampled in the host process.

A background thread reads the devices at a fixed period (host ``time.monotonic()``) for the
whole repeat; when the repeat ends, the samples inside its measured window are summarised into
the repeat's `Telemetry`: min/mean/max per metric, the energy over the window, and whether the
clocks were throttled.

Sources:

- NVIDIA GPUs through NVML (``pynvml``, from the nvidia-ml-py distribution): utilization, SM
  clock, memory used, power, temperature and the clock event (throttle) reasons of each GPU the
  job uses; energy from each GPU's total-energy counter (mJ, Volta and newer), else the
  integral of the sampled power over the window.
- CPUs through psutil (machine-wide utilization, current frequency, memory used) and RAPL's
  package energy counters from the powercap interface (``/sys/class/powercap/intel-rapl:N``),
  unwrapped at ``max_energy_range_uj``. Where RAPL cannot be read, ``energy_note`` says why.

The window is placed on the host's clock by `place_window`: the workload's own step marks are
``time.monotonic()`` of the same machine (CLOCK_MONOTONIC is system-wide on Linux), which is
checked by requiring them to fall within the span the host sampled; marks on another clock
(official logs count from 0) fall back to the times the host saw the ``step N/`` lines, else the
telemetry covers the whole repeat and says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Protocol

import psutil

from dlperf.schema import MetricRange, Telemetry

SAMPLE_PERIOD_S = 0.2
# A clock below this share of the window's highest SM clock, while NVML gives a reason for
# it, counts as throttled.
THROTTLE_CLOCK_SHARE = 0.90
# Host clock slack when checking that workload marks are on the host's clock (the sampler's
# first and last reading bracket the process; a mark outside them by more is another clock).
CLOCK_SLACK_S = 1.0
POWERCAP = Path("/sys/class/powercap")

# NVML's clock event (throttle) reason bits (nvml.h, stable across driver versions).
NVML_REASONS = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
}
# Reasons that always mean the clocks were pulled down by heat or power delivery. SwPowerCap
# alone is the normal state of a GPU at full load at its power limit: it flags a window only
# when the clock also fell (THROTTLE_CLOCK_SHARE).
HARD_REASONS = 0x8 | 0x20 | 0x40 | 0x80
# Reasons that explain a lower clock without any throttling (idle, the user's clock settings).
BENIGN_REASONS = 0x1 | 0x2 | 0x10 | 0x100


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in NVML_REASONS.items() if mask & bit]


@dataclass(frozen=True)
class DeviceReading:
    """One device at one instant (None: the device does not report it)."""

    utilization_pct: float | None = None
    clock_mhz: float | None = None
    memory_mib: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    energy_j: float | None = None  # a cumulative counter (unwrapped), not a delta
    reasons: int = 0


@dataclass(frozen=True)
class Sample:
    time: float  # host time.monotonic()
    devices: tuple[DeviceReading, ...]


class Source(Protocol):
    """What a sampler reads: a kind ("cuda" / "cpu"), the devices' names, `read` per sample."""

    kind: str
    devices: list[str]
    energy_source: str | None  # "nvml" / "rapl" where a counter or power is readable
    energy_note: str | None  # why there is no energy, when there is none
    note: str | None

    def read(self, now: float) -> tuple[DeviceReading, ...]: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------------------------
# NVML
# --------------------------------------------------------------------------------------------


def _nvml_call(fn: Callable[..., Any], *args: Any) -> Any:
    """A reading, or None where this GPU does not support it (NVML raises NVMLError)."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - pynvml.NVMLError and its many subclasses
        return None


class NvmlSource:
    """The job's GPUs through NVML. `visible`: CUDA_VISIBLE_DEVICES entries (indexes or
    UUIDs) or None for all; `count`: how many of them the job uses."""

    kind = "cuda"

    def __init__(self, visible: Sequence[str] | None, count: int) -> None:
        import pynvml  # nvidia-ml-py: a dependency, but libnvidia-ml is only on GPU hosts

        self.nvml = pynvml
        self.note: str | None = None
        pynvml.nvmlInit()
        try:
            entries = list(visible) if visible else None
            if entries is None:
                entries = [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self.handles = []
            for entry in entries[: max(count, 1)]:
                if entry.isdigit():
                    self.handles.append(pynvml.nvmlDeviceGetHandleByIndex(int(entry)))
                else:
                    self.handles.append(pynvml.nvmlDeviceGetHandleByUUID(entry))
            self.devices = [self._name(h, e) for h, e in zip(self.handles, entries, strict=False)]
            counters = [
                _nvml_call(pynvml.nvmlDeviceGetTotalEnergyConsumption, h) for h in self.handles
            ]
        except BaseException:
            pynvml.nvmlShutdown()
            raise
        self.energy_counter = bool(self.handles) and all(c is not None for c in counters)
        self.energy_source: str | None = "nvml"
        self.energy_note: str | None = None
        reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons = reasons or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons

    def _name(self, handle: Any, entry: str) -> str:
        name = _nvml_call(self.nvml.nvmlDeviceGetName, handle)
        if isinstance(name, bytes):
            name = name.decode()
        return f"{entry}: {name or 'NVIDIA GPU'}"

    def read(self, now: float) -> tuple[DeviceReading, ...]:
        nv = self.nvml
        readings = []
        for h in self.handles:
            util = _nvml_call(nv.nvmlDeviceGetUtilizationRates, h)
            memory = _nvml_call(nv.nvmlDeviceGetMemoryInfo, h)
            power = _nvml_call(nv.nvmlDeviceGetPowerUsage, h)  # mW
            energy = (
                _nvml_call(nv.nvmlDeviceGetTotalEnergyConsumption, h)  # mJ since driver load
                if self.energy_counter
                else None
            )
            readings.append(
                DeviceReading(
                    utilization_pct=None if util is None else float(util.gpu),
                    clock_mhz=_float(_nvml_call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)),
                    memory_mib=None if memory is None else memory.used / 2**20,
                    power_w=None if power is None else power / 1000.0,
                    temperature_c=_float(
                        _nvml_call(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
                    ),
                    energy_j=None if energy is None else energy / 1000.0,
                    reasons=int(_nvml_call(self._reasons, h) or 0),
                )
            )
        return tuple(readings)

    def close(self) -> None:
        _nvml_call(self.nvml.nvmlShutdown)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


# --------------------------------------------------------------------------------------------
# CPU: psutil and RAPL
# --------------------------------------------------------------------------------------------


@dataclass
class RaplZone:
    """One RAPL package counter, unwrapped: the counter restarts at 0 after max_range_uj."""

    name: str
    energy_path: Path
    max_range_uj: int
    last_uj: int | None = None
    total_uj: int = 0

    def read_j(self) -> float:
        value = int(self.energy_path.read_text().strip())
        if self.last_uj is not None:
            delta = value - self.last_uj
            if delta < 0:  # wrapped around
                delta += self.max_range_uj
            self.total_uj += delta
        self.last_uj = value
        return self.total_uj / 1e6


def rapl_zones(root: Path = POWERCAP) -> tuple[list[RaplZone], str | None]:
    """The readable RAPL package zones under `root` (intel-rapl:N; their sub-zones, core and
    uncore, are parts of the package and not added again), or ([], why none can be read)."""
    if not root.is_dir():
        return [], (
            f"RAPL not readable: {root} does not exist (the kernel exposes no powercap "
            "interface here: a VM or container without the intel_rapl driver)"
        )
    packages = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
    if not packages:
        return [], f"RAPL not readable: {root} has no intel-rapl:N package zone"
    zones = []
    for package in packages:
        energy = package / "energy_uj"
        try:
            name = (package / "name").read_text().strip()
            max_range = int((package / "max_energy_range_uj").read_text().strip())
            int(energy.read_text().strip())
        except PermissionError:
            return [], (
                f"RAPL not readable: {energy} is readable by root only (Linux 5.10+, "
                "CVE-2020-8694); run as root or make energy_uj readable"
            )
        except (OSError, ValueError) as exc:
            return [], f"RAPL not readable: {energy}: {exc}"
        zones.append(RaplZone(f"{package.name} ({name})", energy, max_range))
    return zones, None


class CpuSource:
    """This host's CPUs: psutil's machine-wide utilization and frequency, memory used, and
    the RAPL packages' energy where readable (power from its deltas between samples)."""

    kind = "cpu"

    def __init__(self, powercap: Path = POWERCAP) -> None:
        from dlperf.system import cpu_model

        self.zones, self.energy_note = rapl_zones(powercap)
        self.energy_source = "rapl" if self.zones else None
        self.devices = [cpu_model()] + [z.name for z in self.zones]
        self.note: str | None = None
        self._times = psutil.cpu_times()
        self._last: tuple[float, float] | None = None  # (time, energy J)

    def read(self, now: float) -> tuple[DeviceReading, ...]:
        freq = psutil.cpu_freq()
        energy = power = None
        if self.zones:
            try:
                energy = sum(z.read_j() for z in self.zones)
            except (OSError, ValueError) as exc:
                self.zones, self.energy_source = [], None
                self.energy_note = f"RAPL stopped being readable: {exc}"
            if energy is not None and self._last and now > self._last[0]:
                power = (energy - self._last[1]) / (now - self._last[0])
            if energy is not None:
                self._last = (now, energy)
        return (
            DeviceReading(
                utilization_pct=self._utilization(),
                clock_mhz=freq.current if freq and freq.current else None,
                memory_mib=psutil.virtual_memory().used / 2**20,
                power_w=power,
                energy_j=energy,
            ),
        )

    def _utilization(self) -> float | None:
        """The whole machine's busy share (%) since the previous reading, from the kernel's
        CPU times (psutil.cpu_percent's rule, without its shared state)."""
        now = psutil.cpu_times()
        before, self._times = self._times, now
        total = _cpu_total(now) - _cpu_total(before)
        idle = _cpu_idle(now) - _cpu_idle(before)
        if total <= 0:
            return None
        busy = total - idle
        return round(100.0 * min(max(busy / total, 0.0), 1.0), 2)

    def close(self) -> None:
        pass


def _cpu_total(t: Any) -> float:
    # Linux counts guest time inside user and nice already
    return sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def _cpu_idle(t: Any) -> float:
    return t.idle + getattr(t, "iowait", 0.0)


class UnavailableSource:
    """No readable telemetry (NVML missing on a --device cuda run): the note says why."""

    def __init__(self, kind: str, why: str) -> None:
        self.kind, self.devices = kind, []
        self.energy_source, self.energy_note, self.note = None, why, why

    def read(self, now: float) -> tuple[DeviceReading, ...]:
        return ()

    def close(self) -> None:
        pass


def job_source(device: str, gpus: int, env: Mapping[str, str]) -> Source:
    """The source for a run on `device` using `gpus` GPUs of this host, visible as `env`'s
    CUDA_VISIBLE_DEVICES says (NVML counts GPUs in PCI order, as CUDA_DEVICE_ORDER=PCI_BUS_ID
    does)."""
    if device != "cuda":
        return CpuSource()
    visible = env.get("CUDA_VISIBLE_DEVICES")
    entries = [e.strip() for e in visible.split(",") if e.strip()] if visible else None
    try:
        return NvmlSource(entries, gpus)
    except Exception as exc:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, ...
        return UnavailableSource("cuda", f"NVML not readable: {type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------------------------
# The sampler
# --------------------------------------------------------------------------------------------


class Sampler:
    """Reads `source` every `period_s` in a daemon thread from `start` to `stop` (one reading
    at each end, so a window inside the repeat is bracketed by readings)."""

    def __init__(
        self,
        source: Source,
        period_s: float = SAMPLE_PERIOD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source, self.period_s, self.clock = source, period_s, clock
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started: float | None = None
        self.stopped: float | None = None
        self.error: str | None = None

    def _read(self) -> None:
        now = self.clock()
        try:
            self.samples.append(Sample(now, self.source.read(now)))
        except Exception as exc:  # noqa: BLE001 - a failing sensor ends sampling, not the run
            self.error = f"sampling stopped: {type(exc).__name__}: {exc}"
            self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._read()

    def start(self) -> None:
        self.started = self.clock()
        self._read()
        self._thread = threading.Thread(target=self._loop, name="dlperf-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self.error is None:
            self._read()
        self.stopped = self.clock()
        self.source.close()

    def telemetry(self, window: WindowTimes | None) -> Telemetry:
        """The repeat's telemetry over its window placed on the host clock (`place_window`),
        or over the whole repeat when it cannot be placed."""
        placed = place_window(window, self.started, self.stopped)
        if placed is None:
            start, end = self.started or 0.0, self.stopped or 0.0
            how = "the whole repeat: " + (
                "no measured window" if window is None else window.unplaced_reason()
            )
            return summarize(
                self.samples, start, end, self.source, "repeat", how, self.error, self.period_s
            )
        start, end, how = placed
        return summarize(
            self.samples, start, end, self.source, "window", how, self.error, self.period_s
        )


@contextmanager
def sampling(source: Source | None, period_s: float = SAMPLE_PERIOD_S) -> Iterator[Sampler | None]:
    """A started sampler for `source` (None: nothing to sample), stopped on the way out."""
    if source is None:
        yield None
        return
    sampler = Sampler(source, period_s)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()


# --------------------------------------------------------------------------------------------
# Placing the window, summarising it (pure)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowTimes:
    """The measured window's first and last mark: as the workload timed them (its own clock,
    the same as the host's for built-in workloads on this host), and as the host saw their
    ``step N/`` lines arrive (host clock; None where the workload prints none)."""

    marks: tuple[float, float] | None = None
    observed: tuple[float, float] | None = None

    def unplaced_reason(self) -> str:
        if self.marks is None and self.observed is None:
            return "the window's marks have no times"
        return (
            "the window's marks are not on this host's clock (a log's own time origin) and "
            "the host saw no step lines for them"
        )


def place_window(
    window: WindowTimes | None, started: float | None, stopped: float | None
) -> tuple[float, float, str] | None:
    """(start, end, how) of the window on the host clock, or None."""
    if window is None or started is None or stopped is None:
        return None
    if window.marks is not None:
        a, b = window.marks
        if started - CLOCK_SLACK_S <= a <= b <= stopped + CLOCK_SLACK_S:
            return a, b, "the workload's step marks (time.monotonic, the host's clock)"
    if window.observed is not None:
        a, b = window.observed
        return a, b, "the times the host saw the window's step lines"
    return None


def _interpolate(times: Sequence[float], values: Sequence[float], t: float) -> float | None:
    """values at time t, linear between the readings around it; None outside them."""
    if not times or t < times[0] or t > times[-1]:
        return None
    for i in range(1, len(times)):
        if t <= times[i]:
            t0, t1 = times[i - 1], times[i]
            if t1 == t0:
                return values[i]
            return values[i - 1] + (values[i] - values[i - 1]) * (t - t0) / (t1 - t0)
    return values[-1]


def integral(times: Sequence[float], values: Sequence[float], start: float, end: float) -> float:
    """The trapezoid integral of the piecewise-linear values over [start, end] (inside the
    readings' span)."""
    points = [(start, _interpolate(times, values, start))]
    points += [(t, v) for t, v in zip(times, values, strict=True) if start < t < end]
    points += [(end, _interpolate(times, values, end))]
    return sum((t1 - t0) * (v0 + v1) / 2 for (t0, v0), (t1, v1) in pairwise(points))


def _range(values: Sequence[float]) -> MetricRange | None:
    if not values:
        return None
    return MetricRange(
        min=round(min(values), 3),
        mean=round(sum(values) / len(values), 3),
        max=round(max(values), 3),
    )


def _energy(
    samples: Sequence[Sample], start: float, end: float
) -> tuple[float | None, str | None, str | None]:
    """(joules over [start, end], method, why none) from the devices' counters, else from the
    integral of their power."""
    times = [s.time for s in samples]
    if not times or start < times[0] or end > times[-1]:
        return None, None, "the window is not covered by the readings"
    n = len(samples[0].devices)
    if n == 0:
        return None, None, None
    per_device = [[s.devices[d] if d < len(s.devices) else None for s in samples] for d in range(n)]
    if all(r is not None and r.energy_j is not None for dev in per_device for r in dev):
        total = 0.0
        for dev in per_device:
            counter = [r.energy_j for r in dev]
            total += _interpolate(times, counter, end) - _interpolate(times, counter, start)
        return total, "counter", None
    if all(r is not None and r.power_w is not None for dev in per_device for r in dev):
        return (
            sum(integral(times, [r.power_w for r in dev], start, end) for dev in per_device),
            "power integral",
            None,
        )
    return None, None, "neither an energy counter nor power is readable"


def summarize(
    samples: Sequence[Sample],
    start: float,
    end: float,
    source: Source,
    span: str,
    how: str,
    error: str | None = None,
    period_s: float = SAMPLE_PERIOD_S,
) -> Telemetry:
    """The telemetry of the readings in [start, end]: per metric the min/mean/max over every
    device's readings (power: the devices' sum at each reading), the energy over the span,
    and the throttling seen."""
    inside = [s for s in samples if start <= s.time <= end and s.devices]

    def values(attr: str) -> list[float]:
        return [getattr(r, attr) for s in inside for r in s.devices if getattr(r, attr) is not None]

    power = [
        sum(r.power_w for r in s.devices)
        for s in inside
        if all(r.power_w is not None for r in s.devices)
    ]
    energy, method, why = _energy(samples, start, end)
    note = source.energy_note
    if energy is None and note is None:
        note = why
    throttled, reasons, detail = _throttling(inside) if source.kind == "cuda" else (False, [], "")
    notes = [n for n in (source.note if source.note != note else None, error, detail) if n]
    return Telemetry(
        device=source.kind,
        devices=list(source.devices),
        period_s=period_s,
        samples=len(inside),
        span=span,
        placed_by=how,
        duration_s=round(max(end - start, 0.0), 6),
        utilization_pct=_range(values("utilization_pct")),
        clock_mhz=_range(values("clock_mhz")),
        memory_mib=_range(values("memory_mib")),
        power_w=_range(power),
        temperature_c=_range(values("temperature_c")),
        energy_j=None if energy is None else round(energy, 6),
        energy_source=source.energy_source if energy is not None else None,
        energy_method=method,
        energy_note=None if energy is not None else note,
        throttled=throttled,
        throttle_reasons=reasons,
        note="; ".join(notes) or None,
    )


def _throttling(inside: Sequence[Sample]) -> tuple[bool, list[str], str]:
    """(throttled, the reasons behind it, what happened) over the window's GPU readings:
    a thermal or hardware slowdown reason at any reading, or an SM clock below
    THROTTLE_CLOCK_SHARE of that GPU's highest in the window while a non-benign reason is set."""
    flagged = 0
    lowest: tuple[float, float, int] | None = None  # (clock, that GPU's max, device)
    n = max((len(s.devices) for s in inside), default=0)
    for d in range(n):
        readings = [s.devices[d] for s in inside if d < len(s.devices)]
        clocks = [r.clock_mhz for r in readings if r.clock_mhz is not None]
        top = max(clocks, default=None)
        for r in readings:
            flagged |= r.reasons & HARD_REASONS
            if (
                top
                and r.clock_mhz is not None
                and r.clock_mhz < THROTTLE_CLOCK_SHARE * top
                and r.reasons & ~BENIGN_REASONS
            ):
                flagged |= r.reasons & ~BENIGN_REASONS
                if lowest is None or r.clock_mhz / top < lowest[0] / lowest[1]:
                    lowest = (r.clock_mhz, top, d)
    if not flagged:
        return False, [], ""
    names = reason_names(flagged)
    detail = f"throttled ({', '.join(names)})"
    if lowest:
        detail += (
            f": GPU {lowest[2]}'s SM clock fell to {lowest[0]:.0f} MHz "
            f"({lowest[0] / lowest[1]:.0%} of its {lowest[1]:.0f} MHz peak in the window)"
        )
    return True, names, detail


def gpus_on_this_host(device: str, devices_per_node: int, nodes: int, launcher: str) -> int:
    """How many of this host's GPUs a job uses (a local launcher starts every node here)."""
    if device != "cuda":
        return 0
    return devices_per_node * (nodes if launcher == "local" else 1)
