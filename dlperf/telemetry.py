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
  package energy counters from the powercap interface (``/sys/class/powercap/intel-rapl:N``,
  or ``$DLPERF_POWERCAP`` where a container mounts the host's tree elsewhere), unwrapped at
  ``max_energy_range_uj``. Where RAPL cannot be read, ``energy_note`` says why. A counter that
  goes backwards is a wraparound only when the energy it implies is plausible: a reset (the
  driver reloaded, ``max_energy_range_uj`` of 0) or energy above the package's power limit
  (``constraint_N_power_limit_uw``) makes the repeat's energy invalid, with a note, never a
  wrong or negative number.

Sensors are read with a deadline: a hung NVML call or sensor file (`READ_DEADLINE_S`) is
abandoned in its thread, never waited for; that repeat's telemetry is missing with a note, and
the run goes on (the runner does not read a stuck sensor again in the same run).

The window is placed on the host's clock by `place_window`: the workload's own step marks are
``time.monotonic()`` of the same machine (CLOCK_MONOTONIC is system-wide on Linux), which is
checked by requiring them to fall within the span the host sampled; marks on another clock
(official logs count from 0) fall back to the times the host saw the ``step N/`` lines, else the
telemetry covers the whole repeat and says so.
"""

from __future__ import annotations

import contextlib
import os
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
POWERCAP_ENV = "DLPERF_POWERCAP"  # another powercap tree (a container's view of the host's)
# A sensor read (an NVML call, a RAPL file) normally takes microseconds to milliseconds; one
# that has not returned after this long is stuck (a hung driver) and is abandoned.
READ_DEADLINE_S = 5.0
MISSING = "telemetry missing: "  # how a repeat's telemetry note starts when a sensor hung
# A RAPL package without a readable power limit: no CPU package draws this much, so energy
# implying more (a counter reset taken for a wraparound) is not believed.
RAPL_FALLBACK_LIMIT_W = 1000.0
# Energy is believed up to this multiple of the power limit over the span, plus this many
# seconds at the limit (a reading's timestamp and the counter's update are not simultaneous;
# the short-term limit lets a package exceed the long-term one for seconds).
PLAUSIBLE_POWER_FACTOR = 2.0
PLAUSIBLE_SLACK_S = 0.5

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
    # The devices' power limit together (W): energy over a span implying more is not
    # believed. None: not known.
    power_limit_w: float | None
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
        limit = getattr(pynvml, "nvmlDeviceGetEnforcedPowerLimit", None)  # mW
        limits = [_nvml_call(limit, h) if limit else None for h in self.handles]
        self.power_limit_w: float | None = (
            sum(limits) / 1000.0 if limits and all(x for x in limits) else None
        )
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


class ImplausibleEnergy(ValueError):
    """A counter's reading implies energy no device could have used (a reset, not a wrap)."""


@dataclass
class RaplZone:
    """One RAPL package counter, unwrapped: the counter restarts at 0 after max_range_uj.

    A backwards step is taken for a wraparound only when the energy that implies fits the
    package's power limit (`limit_w`) over the time since the previous reading; otherwise the
    counter was reset, and `read_j` raises `ImplausibleEnergy`."""

    name: str
    energy_path: Path
    max_range_uj: int
    limit_w: float = RAPL_FALLBACK_LIMIT_W
    limit_source: str = f"no power limit readable, {RAPL_FALLBACK_LIMIT_W:g} W assumed"
    last_uj: int | None = None
    last_time: float | None = None
    total_uj: int = 0

    def read_j(self, now: float) -> float:
        value = int(self.energy_path.read_text().strip())
        if value < 0:
            raise ImplausibleEnergy(f"{self.name}: its counter reads {value} uJ (negative)")
        if self.last_uj is not None and self.last_time is not None:
            delta = value - self.last_uj
            if delta < 0:
                if self.max_range_uj <= 0:
                    raise ImplausibleEnergy(
                        f"{self.name}: its counter went back from {self.last_uj} to {value} uJ "
                        "and its max_energy_range_uj is 0, so this is a counter reset, not a "
                        "wraparound"
                    )
                delta += self.max_range_uj  # wrapped around, if plausible (below)
            elapsed = max(now - self.last_time, 0.0)
            allowed_j = self.limit_w * (PLAUSIBLE_POWER_FACTOR * elapsed + PLAUSIBLE_SLACK_S)
            if delta / 1e6 > allowed_j:
                raise ImplausibleEnergy(
                    f"{self.name}: its counter went from {self.last_uj} to {value} uJ in "
                    f"{elapsed:.3g} s, {delta / 1e6:.6g} J, more than its power limit allows "
                    f"({self.limit_source}): a counter reset, not a wraparound"
                )
            self.total_uj += delta
        self.last_uj, self.last_time = value, now
        return self.total_uj / 1e6


def rapl_power_limit(package: Path) -> tuple[float, str]:
    """(W, where it came from): the highest of the package's power limits (long- and
    short-term constraints), else `RAPL_FALLBACK_LIMIT_W`."""
    limits = []
    for constraint in package.glob("constraint_*_power_limit_uw"):
        try:
            limits.append(int(constraint.read_text().strip()) / 1e6)
        except (OSError, ValueError):
            continue
    limits = [w for w in limits if w > 0]
    if not limits:
        return (
            RAPL_FALLBACK_LIMIT_W,
            f"no power limit readable, {RAPL_FALLBACK_LIMIT_W:g} W assumed",
        )
    return max(limits), f"{max(limits):g} W, its highest constraint_N_power_limit_uw"


def powercap_root() -> Path:
    """Where the powercap tree is: $DLPERF_POWERCAP, else /sys/class/powercap."""
    return Path(os.environ.get(POWERCAP_ENV) or POWERCAP)


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
        limit_w, limit_source = rapl_power_limit(package)
        zones.append(RaplZone(f"{package.name} ({name})", energy, max_range, limit_w, limit_source))
    return zones, None


class CpuSource:
    """This host's CPUs: psutil's machine-wide utilization and frequency, memory used, and
    the RAPL packages' energy where readable (power from its deltas between samples)."""

    kind = "cpu"

    def __init__(self, powercap: Path | None = None) -> None:
        from dlperf.system import cpu_model

        self.zones, self.energy_note = rapl_zones(powercap or powercap_root())
        self.energy_source = "rapl" if self.zones else None
        self.power_limit_w = sum(z.limit_w for z in self.zones) if self.zones else None
        self.devices = [cpu_model()] + [z.name for z in self.zones]
        self.note: str | None = None
        self._times = psutil.cpu_times()
        self._last: tuple[float, float] | None = None  # (time, energy J)

    def read(self, now: float) -> tuple[DeviceReading, ...]:
        freq = psutil.cpu_freq()
        energy = power = None
        if self.zones:
            try:
                energy = sum(z.read_j(now) for z in self.zones)
            except ImplausibleEnergy as exc:  # the energy of this repeat cannot be known
                self.zones, self.energy_source = [], None
                self.energy_note = f"RAPL energy implausible, not stored: {exc}"
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
        self.power_limit_w: float | None = None

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


def source_kind(device: str) -> str:
    """The kind of source that samples a run on `device`: "cuda" (NVML) or "cpu"."""
    return "cuda" if device == "cuda" else "cpu"


SENSOR_NAMES = {"cuda": "NVML", "cpu": "psutil and RAPL"}


class Sampler:
    """Reads a source every `period_s` in a daemon thread from `start` to `stop` (one reading
    at each end, so a window inside the repeat is bracketed by readings).

    The thread also opens the source (`open_source`: NVML's init, RAPL's files): the calling
    thread never touches a sensor, so it stays free to run the workload and to take signals.
    Every call into the source has a deadline (`deadline_s`): `start` waits for the first
    reading and `stop` for the last only while the call in progress is within it. A call past
    it is abandoned with its thread (a daemon, left blocked: a hung driver call cannot be
    cancelled), `stuck` says what hung, and the repeat's telemetry is missing with that note."""

    def __init__(
        self,
        open_source: Callable[[], Source],
        kind: str,
        period_s: float = SAMPLE_PERIOD_S,
        clock: Callable[[], float] = time.monotonic,
        deadline_s: float = READ_DEADLINE_S,
    ) -> None:
        self.open_source, self.kind = open_source, kind
        self.period_s, self.clock, self.deadline_s = period_s, clock, deadline_s
        self.source: Source | None = None
        self.samples: list[Sample] = []
        self.started: float | None = None
        self.stopped: float | None = None
        self.error: str | None = None  # a sensor raised: sampling ended there
        self.stuck: str | None = None  # a sensor call passed its deadline: telemetry missing
        self._lock = threading.Lock()  # samples vs. abandoning them
        self._stop = threading.Event()
        self._first = threading.Event()  # the first reading is in (or the thread gave up)
        self._done = threading.Event()  # the thread has finished, source closed
        self._call: tuple[str, float] | None = None  # what the thread is calling, since when
        self._thread: threading.Thread | None = None

    def _read(self, source: Source) -> bool:
        now = self.clock()
        self._call = ("reading the sensors", now)
        try:
            readings = source.read(now)
        except Exception as exc:  # noqa: BLE001 - a failing sensor ends sampling, not the run
            self.error = f"sampling stopped: {type(exc).__name__}: {exc}"
            return False
        finally:
            self._call = None
        with self._lock:
            if self.stuck is None:  # an abandoned sampler's late readings are not used
                self.samples.append(Sample(now, readings))
        return True

    def _run(self) -> None:
        source = None
        try:
            source = self.open_source()
            self.source = source
            ok = self._read(source)
            self._first.set()
            while ok and not self._stop.wait(self.period_s):
                ok = self._read(source)
            if ok:
                self._read(source)  # the closing reading
        except Exception as exc:  # noqa: BLE001 - a source that cannot open: no telemetry
            self.error = f"sensors not readable: {type(exc).__name__}: {exc}"
        finally:
            self._first.set()
            if source is not None:
                self._call = ("closing the sensors", self.clock())
                with contextlib.suppress(Exception):  # closing is best effort
                    source.close()
            self._call = None
            self._done.set()

    def _wait_for(self, event: threading.Event) -> bool:
        """Wait for `event` while the thread's sensor call is within its deadline; False, with
        `stuck` set and the thread abandoned, once a call is past it."""
        # Between calls the thread only waits on events; even one never scheduled is bounded.
        give_up = self.clock() + 3 * self.deadline_s
        while not event.is_set():
            call, now = self._call, self.clock()
            due = give_up if call is None else min(give_up, call[1] + self.deadline_s)
            if now >= due:
                self._abandon(call[0] if call else "starting the sampling thread")
                return False
            event.wait(min(due - now, 0.05) if call is None else due - now)
        return True

    def _abandon(self, what: str) -> None:
        with self._lock:
            self.stuck = MISSING + (
                f"{what} ({SENSOR_NAMES.get(self.kind, self.kind)}) did not "
                f"return within {self.deadline_s:g} s (a hung driver call or sensor file); "
                "abandoned, the run went on without it"
            )
            self.samples = []

    def start(self) -> None:
        self.started = self.clock()
        self._call = ("opening the sensors", self.started)
        self._thread = threading.Thread(target=self._run, name="dlperf-telemetry", daemon=True)
        self._thread.start()
        self._wait_for(self._first)

    def stop(self, wait: bool = True) -> None:
        """End sampling; `wait`: for the closing reading (within its deadline), else leave
        the thread to finish alone (the repeat's telemetry will not be used)."""
        if self._thread is None:
            return
        self._stop.set()
        if wait and self.stuck is None:
            self._wait_for(self._done)
        self._thread = None
        self.stopped = self.clock()

    def telemetry(self, window: WindowTimes | None) -> Telemetry:
        """The repeat's telemetry over its window placed on the host clock (`place_window`),
        or over the whole repeat when it cannot be placed; missing, with a note, when the
        sensors hung or could not be opened."""
        source = self.source
        if self.stuck is not None or source is None:
            why = self.stuck or self.error or MISSING + "the sensors were not opened"
            return missing_telemetry(
                self.kind,
                list(source.devices) if source else [],
                self.period_s,
                why,
                (self.stopped or 0.0) - (self.started or 0.0),
            )
        placed = place_window(window, self.started, self.stopped)
        if placed is None:
            start, end = self.started or 0.0, self.stopped or 0.0
            how = "the whole repeat: " + (
                "no measured window" if window is None else window.unplaced_reason()
            )
            return summarize(
                self.samples, start, end, source, "repeat", how, self.error, self.period_s
            )
        start, end, how = placed
        return summarize(self.samples, start, end, source, "window", how, self.error, self.period_s)


def missing_telemetry(
    kind: str, devices: list[str], period_s: float, why: str, duration_s: float = 0.0
) -> Telemetry:
    """A repeat's telemetry when its sensors gave no usable readings: no metrics, `why`."""
    return Telemetry(
        device=kind,
        devices=devices,
        period_s=period_s,
        samples=0,
        span="repeat",
        placed_by="no readings",
        duration_s=round(max(duration_s, 0.0), 6),
        energy_note=why,
        note=why,
    )


# What hung in this process, by source kind: the abandoned thread is still blocked in that
# driver or file, so later repeats (and a sweep's later configurations) do not call it again.
_hung_sensors: dict[str, str] = {}


@contextmanager
def sampling(
    open_source: Callable[[], Source] | None,
    kind: str,
    period_s: float = SAMPLE_PERIOD_S,
    deadline_s: float = READ_DEADLINE_S,
) -> Iterator[Sampler | None]:
    """A started sampler of what `open_source` opens (None: nothing to sample), stopped on the
    way out. Sensors of `kind` that hung earlier in this process are not read again: the
    telemetry says so."""
    if open_source is None:
        yield None
        return
    if kind in _hung_sensors:
        earlier = _hung_sensors[kind]
        why = f"{MISSING}not read, the sensors hung earlier in this run ({earlier})"
        open_source = lambda: UnavailableSource(kind, why)  # noqa: E731
    sampler = Sampler(open_source, kind, period_s, deadline_s=deadline_s)
    try:
        sampler.start()
        yield sampler
    except BaseException:
        sampler.stop(wait=False)  # the repeat failed or was interrupted: not worth a wait
        raise
    else:
        sampler.stop()
    finally:
        if sampler.stuck is not None:
            _hung_sensors.setdefault(kind, sampler.stuck.removeprefix(MISSING))


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


def implausible_energy(energy_j: float, duration_s: float, limit_w: float | None) -> str | None:
    """Why `energy_j` over `duration_s` cannot be what the devices used (negative, or above
    their power limit together), or None when it can."""
    if energy_j < 0:
        return (
            f"energy implausible, not stored: {energy_j:.6g} J over {duration_s:.3g} s is "
            "negative (a counter went backwards: a reset)"
        )
    if limit_w and energy_j > limit_w * (PLAUSIBLE_POWER_FACTOR * duration_s + PLAUSIBLE_SLACK_S):
        return (
            f"energy implausible, not stored: {energy_j:.6g} J over {duration_s:.3g} s is "
            f"{energy_j / max(duration_s, 1e-9):.6g} W, above the devices' power limit of "
            f"{limit_w:g} W (a counter reset taken for a wraparound)"
        )
    return None


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
    note = source.energy_note or why
    if source.energy_source is None:  # the source found its energy unreadable or implausible
        energy = method = None
    elif energy is not None:
        implausible = implausible_energy(energy, end - start, source.power_limit_w)
        if implausible is not None:
            energy = method = None
            note = implausible
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
