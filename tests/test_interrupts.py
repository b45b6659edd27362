"""More than one signal (issue 30, row 13): a real `dlperf run` of the calibration workload, a
real SIGTERM once the workload runs, and a second one while dlperf tears down, at the moment it
prints its "interrupted" message (through the test hook `TEST_PAUSE_ENV`) or as a burst of
SIGTERM, SIGINT and SIGHUP until it ends. However many signals came, dlperf ends as after one:
exit 130, its message whole, no traceback, the finished repeat stored, no workload left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dlperf.cli import TEST_PAUSE_ENV

pytestmark = pytest.mark.multiprocess

SLOW_RUN = ["run", "calibration", "pace", "--preset", "smoke", "--set", "step_ms=300",
            "--skip", "1", "--measure", "3", "--repeats", "3"]  # fmt: skip
MESSAGE = (
    "interrupted: workloads stopped; repeats that had finished were stored (the others marked "
    "interrupted); a sweep resumes where it stopped"
)


def wait_for(predicate, what: str, within_s: float = 120.0) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.02)


def start_run(tmp_path: Path, pause: Path | None) -> tuple[subprocess.Popen[str], list]:
    """`dlperf run` in its own process, once the workload of its second repeat prints steps
    (the first repeat finished): the process and its workload (with the guard)."""
    env = {**os.environ, "COLUMNS": "300"}
    if pause is not None:
        env[TEST_PAUSE_ENV] = str(pause)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlperf", *SLOW_RUN, "--results-dir", "results"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        # A background job inherits SIGINT ignored; dlperf keeps it so, and the burst needs it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip

    def second_repeat_runs() -> bool:
        assert proc.poll() is None, proc.communicate()
        logs = list((tmp_path / "results").rglob("repeat-2.log"))
        return any("\npace: " in log.read_text() for log in logs)

    wait_for(second_repeat_runs, "the second repeat's workload")
    return proc, psutil.Process(proc.pid).children(recursive=True)


def ended_as_after_one_signal(tmp_path: Path, proc, workload, out: str, err: str) -> None:
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert " ".join(err.split()).endswith(MESSAGE), err  # whole, and the last thing said
    _, alive = psutil.wait_procs(workload, timeout=60)
    assert not alive, alive
    (stored,) = (tmp_path / "results").glob("*/*.json")  # teardown stored the finished repeat
    statuses = [r["status"] for r in json.loads(stored.read_text())["repeats"]]
    assert statuses == ["ok", "interrupted", "interrupted"]


@pytest.mark.parametrize("signals", [1, 2])
def test_a_second_sigterm_while_the_message_prints_ends_as_one_does(tmp_path, signals):
    """The hook holds dlperf where it prints "interrupted"; the second SIGTERM comes there
    (where it used to escape as a KeyboardInterrupt traceback). One signal: the same end."""
    pause = tmp_path / "pause"
    pause.mkdir()
    proc, workload = start_run(tmp_path, pause)
    try:
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: (pause / "paused").exists(), "the interrupted message's moment")
        if signals == 2:
            proc.send_signal(signal.SIGTERM)
        (pause / "go").touch()
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    ended_as_after_one_signal(tmp_path, proc, workload, out, err)


def test_a_burst_of_signals_during_teardown_ends_as_one_does(tmp_path):
    """No hook: SIGTERM, then SIGTERM, SIGINT and SIGHUP every few milliseconds until dlperf
    has ended, over its whole teardown (killing the workload, storing the result, the
    message). The later ones hurry the kill; none cuts the teardown short."""
    proc, workload = start_run(tmp_path, None)
    sent = 0
    try:
        kinds = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]
        while proc.poll() is None:  # not yet reaped: the pid is still this process's
            proc.send_signal(kinds[sent % 3])
            sent += 1
            time.sleep(0.005)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert sent > 1  # more than one signal reached dlperf while it stopped
    ended_as_after_one_signal(tmp_path, proc, workload, out, err)
