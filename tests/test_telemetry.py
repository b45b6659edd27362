"""dlperf.telemetry: the NVML path against a stand-in pynvml with deterministic readings, the
RAPL counter on a stand-in powercap tree, the window arithmetic, and the result fields."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dlperf import system, telemetry
from dlperf.assemble import build_result, samples_per_joule
from dlperf.resultio import load_result
from dlperf.schema import (
    SCHEMA_VERSION,
    BenchmarkSpec,
    Environment,
    Repeat,
    RepeatStatus,
    Telemetry,
    Window,
)
from dlperf.store import ResultStore
from dlperf.telemetry import (
    CpuSource,
    NvmlSource,
    Sample,
    Sampler,
    UnavailableSource,
    WindowTimes,
    place_window,
    rapl_zones,
    summarize,
)

SW_POWER_CAP, HW_THERMAL, GPU_IDLE = 0x4, 0x40, 0x1


# --------------------------------------------------------------------------------------------
# A stand-in NVML: GPUs whose readings are functions of a clock the test sets
# --------------------------------------------------------------------------------------------


class FakeGpu:
    """A GPU whose power is `power(t)` W, its energy counter the exact integral of it
    (`energy(t)` J, reported in mJ), the rest constant unless given as functions of t."""

    def __init__(
        self,
        name: str = "NVIDIA H100 80GB HBM3",
        power: Callable[[float], float] = lambda t: 300.0,
        energy: Callable[[float], float] | None = lambda t: 300.0 * t,
        clock: Callable[[float], float] = lambda t: 1980.0,
        reasons: Callable[[float], int] = lambda t: 0,
        util: float = 97.0,
        memory_mib: float = 40960.0,
        temperature: float = 65.0,
    ) -> None:
        self.name, self.power, self.energy, self.clock, self.reasons = (
            name,
            power,
            energy,
            clock,
            reasons,
        )
        self.util, self.memory_mib, self.temperature = util, memory_mib, temperature


class NVMLError(Exception):
    pass


def fake_pynvml(gpus: list[FakeGpu], now: list[float], uuids: dict[str, int]) -> types.ModuleType:
    """A module with the pynvml functions dlperf.telemetry calls; `now[0]` is the time."""
    nv = types.ModuleType("pynvml")
    nv.NVMLError = NVMLError
    nv.NVML_CLOCK_SM = 1
    nv.NVML_TEMPERATURE_GPU = 0
    nv.state = {"init": 0}

    def init() -> None:
        nv.state["init"] += 1

    def shutdown() -> None:
        nv.state["init"] -= 1

    def energy(h: FakeGpu) -> int:
        if h.energy is None:
            raise NVMLError("Not Supported")
        return round(1000 * h.energy(now[0]))  # mJ

    nv.nvmlInit, nv.nvmlShutdown = init, shutdown
    nv.nvmlDeviceGetCount = lambda: len(gpus)
    nv.nvmlDeviceGetHandleByIndex = lambda i: gpus[i]
    nv.nvmlDeviceGetHandleByUUID = lambda u: gpus[uuids[u]]
    nv.nvmlDeviceGetName = lambda h: h.name
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=h.util, memory=30)
    nv.nvmlDeviceGetClockInfo = lambda h, kind: round(h.clock(now[0]))
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=int(h.memory_mib * 2**20))
    nv.nvmlDeviceGetPowerUsage = lambda h: round(1000 * h.power(now[0]))  # mW
    nv.nvmlDeviceGetTemperature = lambda h, kind: h.temperature
    nv.nvmlDeviceGetTotalEnergyConsumption = energy
    nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: h.reasons(now[0])
    return nv


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., types.ModuleType]]:
    """Install a stand-in pynvml for the given GPUs; returns it (its clock: `.now`)."""

    def install(*gpus: FakeGpu, uuids: dict[str, int] | None = None) -> types.ModuleType:
        now = [0.0]
        module = fake_pynvml(list(gpus), now, uuids or {})
        module.now = now
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    yield install


def read_at(source: telemetry.Source, clock: list[float], times: list[float]) -> list[Sample]:
    """The samples a sampler would take at `times` (the stand-in's clock set to each)."""
    samples = []
    for t in times:
        clock[0] = t
        samples.append(Sample(t, source.read(t)))
    return samples


EVERY_HALF_SECOND = [0.5 * i for i in range(7)]  # 0 .. 3 s


# --------------------------------------------------------------------------------------------
# NVML arithmetic
# --------------------------------------------------------------------------------------------


def test_constant_300_w_for_2_s_is_600_j_from_the_counter(nvml) -> None:
    nv = nvml(FakeGpu())
    source = NvmlSource(None, 1)
    samples = read_at(source, nv.now, EVERY_HALF_SECOND)
    t = summarize(samples, 0.5, 2.5, source, "window", "test")
    assert t.energy_j == pytest.approx(600.0)
    assert (t.energy_source, t.energy_method, t.energy_note) == ("nvml", "counter", None)
    assert t.samples == 5 and t.duration_s == pytest.approx(2.0)
    assert (t.power_w.min, t.power_w.mean, t.power_w.max) == (300.0, 300.0, 300.0)
    assert t.utilization_pct.mean == 97.0 and t.clock_mhz.max == 1980.0
    assert t.memory_mib.mean == 40960.0 and t.temperature_c.mean == 65.0
    assert t.devices == ["0: NVIDIA H100 80GB HBM3"] and t.device == "cuda"
    assert not t.throttled and t.throttle_reasons == []
    source.close()
    assert nv.state["init"] == 0  # every nvmlInit is shut down


def test_without_an_energy_counter_the_power_is_integrated(nvml) -> None:
    nv = nvml(FakeGpu(energy=None))
    source = NvmlSource(None, 1)
    t = summarize(read_at(source, nv.now, EVERY_HALF_SECOND), 0.5, 2.5, source, "window", "")
    assert t.energy_j == pytest.approx(600.0)
    assert (t.energy_source, t.energy_method) == ("nvml", "power integral")


def test_a_window_between_readings_is_interpolated_on_a_ramp(nvml) -> None:
    # P(t) = 100 + 100 t W, so E(t) = 100 t + 50 t^2 J. Over [0.75, 2.25] the counter read
    # every 0.5 s, linear between readings: E(2.25) = (400 + 562.5) / 2 = 481.25,
    # E(0.75) = (62.5 + 150) / 2 = 106.25 -> 375 J; the trapezoid of the (linear) power over the
    # same span is exact: 100 * 1.5 + 50 * (2.25^2 - 0.75^2) = 375 J.
    ramp = FakeGpu(power=lambda t: 100.0 + 100.0 * t, energy=lambda t: 100.0 * t + 50.0 * t * t)
    nv = nvml(ramp)
    source = NvmlSource(None, 1)
    samples = read_at(source, nv.now, EVERY_HALF_SECOND)
    counted = summarize(samples, 0.75, 2.25, source, "window", "")
    assert counted.energy_j == pytest.approx(375.0) and counted.energy_method == "counter"
    # readings at 1.0, 1.5, 2.0 are inside: 200, 250, 300 W
    assert (counted.power_w.min, counted.power_w.mean, counted.power_w.max) == (200, 250, 300)
    assert telemetry.integral(
        [s.time for s in samples], [s.devices[0].power_w for s in samples], 0.75, 2.25
    ) == pytest.approx(375.0)


def test_the_jobs_gpus_follow_cuda_visible_devices_and_add_up(nvml) -> None:
    gpus = [FakeGpu(name=f"GPU{i}", power=lambda t, i=i: 100.0 * (i + 1)) for i in range(4)]
    for g in gpus:
        g.energy = lambda t, g=g: g.power(t) * t
    nv = nvml(*gpus, uuids={"GPU-abc": 3})
    source = telemetry.job_source("cuda", 2, {"CUDA_VISIBLE_DEVICES": "1,GPU-abc,0"})
    assert isinstance(source, NvmlSource)
    assert source.devices == ["1: GPU1", "GPU-abc: GPU3"]  # the first two the job uses
    t = summarize(read_at(source, nv.now, EVERY_HALF_SECOND), 0.5, 2.5, source, "window", "")
    assert t.power_w.mean == 600.0  # 200 W + 400 W at each reading
    assert t.energy_j == pytest.approx(1200.0)  # 600 W x 2 s


def test_a_clock_drop_under_a_power_cap_is_throttling(nvml) -> None:
    # Full clocks at the power cap for a second (normal at full load), then the clock falls
    # to 1500 MHz (76% of 1980) with the cap still the reason.
    gpu = FakeGpu(
        clock=lambda t: 1980.0 if t < 1.6 else 1500.0,
        reasons=lambda t: SW_POWER_CAP,
    )
    nv = nvml(gpu)
    source = NvmlSource(None, 1)
    samples = read_at(source, nv.now, EVERY_HALF_SECOND)
    steady = summarize(samples, 0.0, 1.5, source, "window", "")
    assert not steady.throttled  # the cap alone, clocks at their peak
    dropped = summarize(samples, 0.0, 3.0, source, "window", "")
    assert dropped.throttled and dropped.throttle_reasons == ["SwPowerCap"]
    assert "fell to 1500 MHz (76% of its 1980 MHz peak" in dropped.note


def test_a_thermal_reason_is_throttling_and_idle_is_not(nvml) -> None:
    hot = nvml(FakeGpu(reasons=lambda t: HW_THERMAL if t >= 2.0 else 0))
    source = NvmlSource(None, 1)
    t = summarize(read_at(source, hot.now, EVERY_HALF_SECOND), 0.0, 3.0, source, "window", "")
    assert t.throttled and t.throttle_reasons == ["HwThermalSlowdown"]
    idle = nvml(FakeGpu(clock=lambda t: 300.0 if t > 2 else 1980.0, reasons=lambda t: GPU_IDLE))
    source = NvmlSource(None, 1)
    t = summarize(read_at(source, idle.now, EVERY_HALF_SECOND), 0.0, 3.0, source, "window", "")
    assert not t.throttled


def test_no_nvml_is_said_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    source = telemetry.job_source("cuda", 1, {})
    assert isinstance(source, UnavailableSource)
    t = summarize([Sample(0.0, ()), Sample(1.0, ())], 0.0, 1.0, source, "window", "")
    assert t.energy_j is None and t.energy_note.startswith("NVML not readable: ModuleNotFoundError")
    assert t.samples == 0 and t.utilization_pct is None


def test_the_real_pynvml_without_a_driver_is_a_note() -> None:
    pytest.importorskip("pynvml")
    if system.nvidia_gpu_found():
        pytest.skip("this host has an NVIDIA GPU: NVML loads")
    source = telemetry.job_source("cuda", 1, {})
    assert isinstance(source, UnavailableSource)
    assert source.energy_note.startswith("NVML not readable: NVMLError")  # LibraryNotFound


# --------------------------------------------------------------------------------------------
# RAPL on a stand-in powercap tree
# --------------------------------------------------------------------------------------------


def powercap_tree(
    root: Path, energy_uj: int, max_uj: int = 1_000_000, limits_uw: tuple[int, ...] = ()
) -> Path:
    package = root / "intel-rapl:0"
    package.mkdir(parents=True)
    (package / "name").write_text("package-0\n")
    (package / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (package / "energy_uj").write_text(f"{energy_uj}\n")
    for n, limit in enumerate(limits_uw):  # long-term, short-term (PL1, PL2)
        (package / f"constraint_{n}_power_limit_uw").write_text(f"{limit}\n")
    core = root / "intel-rapl:0:0"  # a sub-zone: part of the package, not added again
    core.mkdir()
    (core / "name").write_text("core\n")
    (core / "energy_uj").write_text("5\n")
    return package / "energy_uj"


def test_rapl_counts_through_the_wraparound(tmp_path: Path) -> None:
    counter = powercap_tree(tmp_path, 900_000)
    source = CpuSource(powercap=tmp_path)
    assert source.energy_source == "rapl"
    assert source.devices[1:] == ["intel-rapl:0 (package-0)"]
    first = source.read(10.0)[0]
    counter.write_text("100000\n")  # wrapped at 1 J: 0.1 J to the top, 0.1 J after it
    second = source.read(12.0)[0]
    assert second.energy_j - first.energy_j == pytest.approx(0.2)
    assert second.power_w == pytest.approx(0.1)  # 0.2 J over 2 s
    assert second.clock_mhz is None or second.clock_mhz > 0


RAPL_MAX_UJ = 262_143_328_850  # a real package's max_energy_range_uj (262 kJ)


def test_a_counter_reset_is_not_taken_for_a_wraparound(tmp_path: Path) -> None:
    # 65 W long-term, 90 W short-term: a reset from 900 J to 1 mJ would be "262 kJ in 3 s"
    counter = powercap_tree(tmp_path, 900_000_000, RAPL_MAX_UJ, (65_000_000, 90_000_000))
    source = CpuSource(powercap=tmp_path)
    assert source.power_limit_w == 90.0
    samples = [Sample(10.0, source.read(10.0))]
    counter.write_text("950000000\n")  # 50 J in 1 s: a package at 50 W
    samples.append(Sample(11.0, source.read(11.0)))
    counter.write_text("1000\n")  # the driver reloaded: the counter restarted
    samples.append(Sample(14.0, source.read(14.0)))
    assert samples[1].devices[0].energy_j == pytest.approx(50.0)
    assert samples[2].devices[0].energy_j is None and source.energy_source is None
    assert "counter reset, not a wraparound" in source.energy_note
    assert "90 W, its highest constraint_N_power_limit_uw" in source.energy_note
    t = summarize(samples, 10.0, 14.0, source, "window", "test")
    assert t.energy_j is None and t.energy_source is None and t.energy_method is None
    assert t.energy_note.startswith("RAPL energy implausible, not stored")
    # the readings before the reset are real: their power is kept
    assert t.power_w is not None and t.power_w.max == pytest.approx(50.0)


def test_a_counter_that_goes_back_with_no_range_is_a_reset_never_negative(tmp_path: Path) -> None:
    counter = powercap_tree(tmp_path, 5_000_000, max_uj=0)  # max_energy_range_uj = 0
    source = CpuSource(powercap=tmp_path)
    samples = [Sample(1.0, source.read(1.0))]
    counter.write_text("2000000\n")
    samples.append(Sample(2.0, source.read(2.0)))
    assert "max_energy_range_uj is 0" in source.energy_note
    t = summarize(samples, 1.0, 2.0, source, "window", "test")
    assert t.energy_j is None and "counter reset" in t.energy_note


def test_without_a_power_limit_a_kilowatt_per_package_bounds_the_energy(tmp_path: Path) -> None:
    counter = powercap_tree(tmp_path, 0, RAPL_MAX_UJ)  # no constraint_N files
    source = CpuSource(powercap=tmp_path)
    assert source.power_limit_w == telemetry.RAPL_FALLBACK_LIMIT_W == 1000.0
    source.read(0.0)
    counter.write_text("400000000\n")  # 400 J in 2 s: 200 W, believed
    assert source.read(2.0)[0].energy_j == pytest.approx(400.0)
    counter.write_text("30000000000\n")  # 29.6 kJ in 1 s: not a CPU package
    assert source.read(3.0)[0].energy_j is None
    assert "1000 W assumed" in source.energy_note


def test_negative_or_impossible_energy_from_any_source_is_not_stored(nvml) -> None:
    # an NVML counter that runs backwards (the driver reloaded mid-run)
    nv = nvml(FakeGpu(energy=lambda t: 5000.0 - 300.0 * t))
    source = NvmlSource(None, 1)
    t = summarize(read_at(source, nv.now, EVERY_HALF_SECOND), 0.5, 2.5, source, "window", "x")
    assert t.energy_j is None and t.energy_source is None
    assert "negative" in t.energy_note and "not stored" in t.energy_note
    # the pure bound: 10 kJ in 2 s over devices limited to 700 W together
    assert "above the devices' power limit of 700 W" in telemetry.implausible_energy(
        10_000.0, 2.0, 700.0
    )
    assert telemetry.implausible_energy(1_400.0, 2.0, 700.0) is None
    assert telemetry.implausible_energy(10_000.0, 2.0, None) is None  # no bound known
    # a file stored before this check, holding a negative energy: no negative samples/J
    window = Window(start_step=5, end_step=25, samples=200.0, elapsed_s=0.4)
    negative = Repeat(index=1, status=RepeatStatus.ok, throughput=1.0, window=window,
                      telemetry=tele(-5.0))  # fmt: skip
    assert samples_per_joule(negative) is None


def test_why_rapl_is_not_readable(tmp_path: Path) -> None:
    zones, why = rapl_zones(tmp_path / "absent")
    assert zones == [] and "does not exist" in why and why.startswith("RAPL not readable")
    (tmp_path / "empty").mkdir()
    zones, why = rapl_zones(tmp_path / "empty")
    assert zones == [] and "no intel-rapl:N package zone" in why


# --------------------------------------------------------------------------------------------
# Placing the window on the host clock, the sampler thread
# --------------------------------------------------------------------------------------------


def test_workload_marks_are_used_only_when_on_the_hosts_clock() -> None:
    host = WindowTimes(marks=(1002.0, 1004.0), observed=(1002.01, 1004.02))
    assert place_window(host, 1000.0, 1010.0)[:2] == (1002.0, 1004.0)
    # an official log's marks count from 0: the host's arrival times of the step lines
    log = WindowTimes(marks=(3.0, 5.0), observed=(1002.01, 1004.02))
    start, end, how = place_window(log, 1000.0, 1010.0)
    assert (start, end) == (1002.01, 1004.02) and "step lines" in how
    assert place_window(WindowTimes(marks=(3.0, 5.0)), 1000.0, 1010.0) is None


class Counting:
    """A source whose n-th reading is n (utilization), for the threaded sampler."""

    kind, devices, energy_source, energy_note, note = "cpu", ["test"], None, "none here", None
    power_limit_w = None

    def __init__(self) -> None:
        self.n = 0
        self.closed = False

    def read(self, now: float) -> tuple[telemetry.DeviceReading, ...]:
        self.n += 1
        return (telemetry.DeviceReading(utilization_pct=float(self.n)),)

    def close(self) -> None:
        self.closed = True


def test_the_sampler_thread_reads_from_start_to_stop() -> None:
    source = Counting()
    sampler = Sampler(lambda: source, "cpu", period_s=0.01)
    sampler.start()
    threading.Event().wait(0.05)
    sampler.stop()
    times = [s.time for s in sampler.samples]
    assert len(times) >= 2 and times == sorted(times)  # at least the first and last reading
    assert sampler.started <= times[0] and times[-1] <= sampler.stopped and source.closed
    whole = sampler.telemetry(None)
    assert whole.span == "repeat" and whole.samples == len(times) and whole.period_s == 0.01
    assert whole.utilization_pct.max == float(len(times))  # every reading, in order
    assert whole.energy_note == "none here"
    # a window inside the span keeps only its readings
    inside = sampler.telemetry(WindowTimes(marks=(times[1], times[-1])))
    assert inside.span == "window" and inside.samples == len(times) - 1


# --------------------------------------------------------------------------------------------
# A stuck sensor: a real FIFO as RAPL's energy file blocks its reader as a hung NVML call does
# --------------------------------------------------------------------------------------------


class StuckCounter:
    """A stand-in powercap tree whose energy file can become a FIFO with no writer: opening
    it blocks until a writer comes. `release` opens it for writing, so no test leaves a thread
    blocked behind it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.counter = powercap_tree(root, 1_000_000, RAPL_MAX_UJ)

    def hang(self) -> None:
        self.counter.unlink()
        os.mkfifo(self.counter)

    def release(self) -> None:
        if not self.counter.is_fifo():
            return
        while True:  # one writer's open lets every reader blocked in open() go
            try:
                fd = os.open(self.counter, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader is waiting any more
                return
            os.close(fd)
            threading.Event().wait(0.05)


@pytest.fixture
def stuck(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StuckCounter]:
    monkeypatch.setattr(telemetry, "_hung_sensors", {})  # what hung here stays here
    counter = StuckCounter(tmp_path / "powercap")
    yield counter
    counter.release()


def test_a_sensor_stuck_from_the_start_is_abandoned_not_waited_for(stuck) -> None:
    stuck.hang()
    sampler = Sampler(lambda: CpuSource(stuck.root), "cpu", period_s=0.05, deadline_s=0.5)
    sampler.start()  # returns: the open of the FIFO is left behind in its thread
    sampler.stop()
    assert sampler.stuck.startswith(telemetry.MISSING)
    assert "opening the sensors (psutil and RAPL) did not return within 0.5 s" in sampler.stuck
    t = sampler.telemetry(WindowTimes(marks=(sampler.started, sampler.stopped)))
    assert t.samples == 0 and t.energy_j is None and t.utilization_pct is None
    assert t.energy_note == t.note == sampler.stuck


def test_a_sensor_that_hangs_mid_repeat_is_abandoned_at_the_end(stuck) -> None:
    sampler = Sampler(lambda: CpuSource(stuck.root), "cpu", period_s=0.05, deadline_s=0.5)
    sampler.start()
    assert sampler.stuck is None and len(sampler.samples) >= 1 and sampler.source.zones
    stuck.hang()  # the next reading, at the latest the closing one, blocks
    sampler.stop()
    assert "reading the sensors (psutil and RAPL) did not return" in sampler.stuck
    t = sampler.telemetry(None)
    assert t.samples == 0 and t.energy_j is None and t.note.startswith(telemetry.MISSING)
    assert t.devices == [system.cpu_model(), "intel-rapl:0 (package-0)"]


def test_a_signal_still_stops_the_wait_on_a_stuck_sensor(stuck) -> None:
    """Ctrl-C / SIGTERM (KeyboardInterrupt, as dlperf.cli.main makes them) while the run waits
    for a stuck sensor: the wait ends then, not at the deadline."""
    stuck.hang()
    sampler = Sampler(lambda: CpuSource(stuck.root), "cpu", deadline_s=600.0)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("SIGALRM")

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            sampler.start()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert sampler.stuck is None  # interrupted inside the wait, long before its deadline


def test_a_hung_sensor_is_not_read_again_in_the_run(stuck) -> None:
    stuck.hang()
    with telemetry.sampling(lambda: CpuSource(stuck.root), "cpu", 0.05, deadline_s=0.3) as s1:
        pass
    assert s1.stuck is not None
    opened: list[int] = []

    def open_again() -> CpuSource:
        opened.append(1)
        return CpuSource(stuck.root)

    with telemetry.sampling(open_again, "cpu", 0.05, deadline_s=0.3) as s2:
        pass
    assert opened == [] and s2.stuck is None  # no second thread left blocked on it
    t = s2.telemetry(None)
    assert t.samples == 0 and t.energy_j is None
    assert t.energy_note.startswith("telemetry missing: not read, the sensors hung earlier")
    # CUDA's sensors are another source: not affected
    assert "cuda" not in telemetry._hung_sensors


def test_a_repeat_with_missing_telemetry_warns_and_keeps_its_throughput() -> None:
    spec = BenchmarkSpec(framework="calibration", model="pace", batch_size=10, repeats=2)
    window = Window(start_step=5, end_step=25, samples=200.0, elapsed_s=0.4)
    why = telemetry.MISSING + "reading the sensors (NVML) did not return within 5 s"
    repeats = [
        Repeat(
            index=i,
            status=RepeatStatus.ok,
            throughput=500.0,
            window=window,
            telemetry=telemetry.missing_telemetry("cuda", [], 0.2, why) if i == 2 else tele(2.0),
        )
        for i in (1, 2)
    ]
    env = Environment(dlperf_version="0.1.0", host="h", os="Linux")
    result = build_result(spec, "20260101T000000Z-abcdef", repeats, environment=env)
    assert result.metrics.throughput.values == [500.0, 500.0]
    assert result.metrics.samples_per_joule == pytest.approx(100.0)  # repeat 1's alone
    (warned,) = [w for w in result.warnings if "telemetry missing" in w]
    assert warned.startswith("telemetry missing for repeat(s) 2: reading the sensors (NVML)")


# --------------------------------------------------------------------------------------------
# In the result
# --------------------------------------------------------------------------------------------


def tele(energy_j: float | None, throttled: bool = False) -> Telemetry:
    return Telemetry(
        device="cuda",
        period_s=0.2,
        samples=10,
        energy_j=energy_j,
        energy_source="nvml" if energy_j else None,
        energy_method="counter" if energy_j else None,
        energy_note=None if energy_j else "no counter",
        throttled=throttled,
        throttle_reasons=["HwThermalSlowdown"] if throttled else [],
        note="throttled (HwThermalSlowdown)" if throttled else None,
    )


def test_samples_per_joule_is_the_median_over_repeats_with_energy(tmp_path: Path) -> None:
    spec = BenchmarkSpec(framework="calibration", model="pace", batch_size=10, repeats=4)
    window = Window(start_step=5, end_step=25, samples=200.0, elapsed_s=0.4)
    energies = [2.0, 4.0, None, 1.0]  # 100, 50, -, 200 samples/J
    repeats = [
        Repeat(
            index=i,
            status=RepeatStatus.ok,
            throughput=500.0,
            window=window,
            telemetry=tele(e, throttled=i == 2),
        )
        for i, e in enumerate(energies, start=1)
    ]
    env = Environment(dlperf_version="0.1.0", host="h", os="Linux")
    result = build_result(spec, "20260101T000000Z-abcdef", repeats, environment=env)
    assert result.metrics.samples_per_joule == pytest.approx(100.0)
    warned = [w for w in result.warnings if "throttled" in w]
    assert len(warned) == 1 and "repeat(s) 2 (HwThermalSlowdown)" in warned[0]
    path = ResultStore(tmp_path).write(result)
    assert load_result(path) == result
    # a version-5 file (before telemetry) loads unchanged
    data = json.loads(path.read_text())
    for r in data["repeats"]:
        del r["telemetry"]
    del data["metrics"]["samples_per_joule"]
    path.write_text(json.dumps({**data, "schema_version": 5}))
    old = load_result(path)
    assert old.schema_version == SCHEMA_VERSION == 9
    assert old.metrics.samples_per_joule is None and old.repeats[0].telemetry is None
