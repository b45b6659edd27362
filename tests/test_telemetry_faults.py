"""A stuck sensor during a real `dlperf run`: RAPL's energy file is a real FIFO with no writer,
so opening it blocks as a hung NVML call does. The run must finish with its throughputs, the
repeats' telemetry missing with a note, and SIGTERM must still stop it with the finished
repeats kept. The stand-in powercap tree is named by $DLPERF_POWERCAP, or mounted over
/sys/class in a private mount namespace for the default path."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlperf.resultio import load_result
from dlperf.schema import RepeatStatus
from dlperf.store import ResultStore
from dlperf.telemetry import MISSING

pytestmark = pytest.mark.multiprocess

# A generous bound for a whole run: the sensors' deadline is 5 s; a hang is forever.
RUN_BOUND_S = 300
RUN = ["run", "calibration", "pace", "--preset", "smoke", "--skip", "2", "--measure", "5"]


class PowercapTree:
    """A stand-in /sys/class/powercap with one package; its energy file can become a FIFO.
    `release` opens the FIFO for writing so no reader stays blocked after the test."""

    def __init__(self, root: Path) -> None:
        self.root = root
        package = root / "intel-rapl:0"
        package.mkdir(parents=True)
        (package / "name").write_text("package-0\n")
        (package / "max_energy_range_uj").write_text("262143328850\n")
        (package / "constraint_0_power_limit_uw").write_text("65000000\n")
        self.counter = package / "energy_uj"
        self.counter.write_text("1000000\n")

    def hang(self) -> None:
        """Swap the counter for a FIFO in one step (a rename), so a reading in between finds
        no missing file."""
        fifo = self.counter.with_name("energy_uj.fifo")
        os.mkfifo(fifo)
        os.replace(fifo, self.counter)

    def release(self) -> None:
        while self.counter.is_fifo():
            try:
                fd = os.open(self.counter, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader waiting
                return
            os.close(fd)
            time.sleep(0.05)


@pytest.fixture
def powercap(tmp_path: Path) -> Iterator[PowercapTree]:
    tree = PowercapTree(tmp_path / "powercap")
    yield tree
    tree.release()


def start(*args: str, cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    """`dlperf ARGS`, its output going to a file the test can watch."""
    out = cwd / "dlperf.out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlperf", *args],
        cwd=cwd,
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
    )
    return proc, out


def ended(proc: subprocess.Popen[str], out: Path) -> tuple[int, str]:
    """The exit code and output; a run still going after RUN_BOUND_S hangs (a failure)."""
    try:
        proc.wait(timeout=RUN_BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"dlperf still running after {RUN_BOUND_S} s: hung\n{out.read_text()}")
    return proc.returncode, out.read_text()


def printed(out: Path, text: str, proc: subprocess.Popen[str]) -> None:
    """Wait until `text` appears in the output (the run is not over before it does)."""
    while text not in out.read_text():
        assert proc.poll() is None, f"dlperf ended before printing {text!r}:\n{out.read_text()}"
        time.sleep(0.05)


def stored(results: Path):
    (result,) = ResultStore(results).results()
    return result


def test_a_sensor_stuck_from_the_start_leaves_the_run_its_throughputs(tmp_path, powercap):
    powercap.hang()
    proc, out = start(
        *RUN, "--repeats", "2", "--results-dir", str(tmp_path / "r"),
        cwd=tmp_path, env={"DLPERF_POWERCAP": str(powercap.root)},
    )  # fmt: skip
    code, text = ended(proc, out)
    assert code == 0, text
    assert "telemetry missing for repeat(s) 1, 2: opening the sensors" in text.replace("\n", " ")
    result = stored(tmp_path / "r")
    assert [r.status for r in result.repeats] == [RepeatStatus.ok] * 2
    assert all(r.throughput > 0 for r in result.repeats)
    first, second = (r.telemetry for r in result.repeats)
    assert first.energy_note.startswith(MISSING + "opening the sensors (psutil and RAPL)")
    assert first.samples == 0 and first.energy_j is None and first.note == first.energy_note
    # not read again (a second thread would block behind the first)
    assert second.energy_note.startswith(MISSING + "not read, the sensors hung earlier")
    assert result.metrics.samples_per_joule is None


def test_a_sensor_that_hangs_mid_run_is_abandoned_and_the_run_goes_on(tmp_path, powercap):
    proc, out = start(
        *RUN, "--set", "step_ms=100", "--repeats", "4", "--results-dir", str(tmp_path / "r"),
        cwd=tmp_path, env={"DLPERF_POWERCAP": str(powercap.root)},
    )  # fmt: skip
    printed(out, "repeat 1: ok", proc)  # repeat 1's sampler has stopped before this line
    powercap.hang()
    code, text = ended(proc, out)
    assert code == 0, text
    result = stored(tmp_path / "r")
    assert [r.status for r in result.repeats] == [RepeatStatus.ok] * 4
    telemetry = [r.telemetry for r in result.repeats]
    one = telemetry[0]
    assert one.samples > 0 and one.energy_source == "rapl" and one.energy_j == 0.0
    # Repeat 2 has usually started when the test swaps the file: the read that hangs is in
    # repeat 2, or in repeat 3 on a machine busy enough to delay the test past repeat 2.
    hung = next(i for i, t in enumerate(telemetry) if t.samples == 0)
    assert hung in (1, 2), [t.energy_note for t in telemetry]
    assert all(t.energy_note is None and t.samples > 0 for t in telemetry[:hung])
    assert telemetry[hung].energy_note.startswith(MISSING)
    assert "did not return within 5 s" in telemetry[hung].energy_note
    assert all(t.energy_note.startswith(MISSING + "not read") for t in telemetry[hung + 1 :])


def test_sigterm_with_a_stuck_sensor_keeps_the_finished_repeats(tmp_path, powercap):
    powercap.hang()
    proc, out = start(
        *RUN, "--set", "step_ms=200", "--repeats", "4", "--results-dir", str(tmp_path / "r"),
        cwd=tmp_path, env={"DLPERF_POWERCAP": str(powercap.root)},
    )  # fmt: skip
    printed(out, "repeat 1: ok", proc)
    proc.send_signal(signal.SIGTERM)
    code, text = ended(proc, out)
    assert code == 130, text
    assert "Traceback" not in text
    result = stored(tmp_path / "r")
    assert result.repeats[0].status == RepeatStatus.ok and result.repeats[0].throughput > 0
    assert result.repeats[0].telemetry.energy_note.startswith(MISSING)
    assert [r.status for r in result.repeats[1:]] == [RepeatStatus.interrupted] * 3
    assert load_result(next((tmp_path / "r").rglob("*.json"))) == result


def test_a_stuck_sensor_at_the_default_path_in_a_private_mount_namespace(tmp_path, powercap):
    """/sys/class/powercap itself, without $DLPERF_POWERCAP: a stand-in /sys/class (holding
    the FIFO tree as powercap/) bind-mounted over the real one in a private mount namespace."""
    for tool in ("unshare", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool} on this machine: the default path cannot be replaced")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here (needs root): {probe.stderr.strip()}")
    stand_in = tmp_path / "class"
    stand_in.mkdir()
    powercap.root.rename(stand_in / "powercap")
    powercap.counter = stand_in / "powercap" / "intel-rapl:0" / "energy_uj"
    powercap.hang()
    env = {k: v for k, v in os.environ.items() if k != "DLPERF_POWERCAP"}
    argv = [sys.executable, "-m", "dlperf", *RUN, "--repeats", "2",
            "--results-dir", str(tmp_path / "r")]  # fmt: skip
    script = 'mount --bind "$1" /sys/class && ls /sys/class/powercap && exec "${@:2}"'
    try:
        done = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "bash", "-c", script, "-",
             str(stand_in), *argv],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_BOUND_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"dlperf still running after {RUN_BOUND_S} s: hung\n{exc.stdout}")
    if done.returncode != 0 and "intel-rapl:0" not in done.stdout:
        pytest.skip(f"cannot bind-mount over /sys/class here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stdout + done.stderr
    result = stored(tmp_path / "r")
    assert all(r.status == RepeatStatus.ok and r.throughput > 0 for r in result.repeats)
    note = result.repeats[0].telemetry.energy_note
    assert note.startswith(MISSING + "opening the sensors (psutil and RAPL)")
    assert str(stand_in) not in Path("/proc/self/mountinfo").read_text()  # this namespace's
