"""dlperf.proc with real subprocesses: streaming, timeouts, and killing whole process trees."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from dlperf import DlperfError
from dlperf.proc import ProcResult, run_process, tail

pytestmark = pytest.mark.multiprocess

PY = sys.executable


def py(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


def gone(pid: int) -> bool:
    """True once `pid` no longer runs (a zombie waiting for a reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, within_s: float = 2.0) -> bool:
    """Orphans are reparented and reaped asynchronously: allow a moment."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.02)
    return gone(pid)


def pid_lines(lines: list[str], prefix: str) -> list[int]:
    return [int(line.removeprefix(prefix)) for line in lines if line.startswith(prefix)]


def test_exit_zero_streams_lines_in_order(tmp_path: Path) -> None:
    log = tmp_path / "sub" / "dir" / "run.log"
    seen: list[tuple[str, float]] = []
    code = """
        import sys, time
        for i in range(3):
            print(f"line {i}", flush=True)
            time.sleep(0.3)
        print("bad \\xff bytes", end="")
        sys.stdout.flush()
        sys.stdout.buffer.write(b" \\xff\\xfe end\\n")
    """
    start = time.monotonic()
    res = run_process(
        py(code), log_path=log, on_line=lambda s: seen.append((s, time.monotonic() - start))
    )
    assert isinstance(res, ProcResult)
    assert (res.exit_code, res.outcome, res.log_path) == (0, "exited", log)
    assert 0.8 < res.wall_s < 5
    assert [s for s, _ in seen] == ["line 0", "line 1", "line 2", "bad \xff bytes \ufffd\ufffd end"]
    # streamed: line 0 arrived well before the process ended
    assert seen[0][1] < seen[2][1] - 0.4
    text = log.read_text(encoding="utf-8")
    assert text.startswith(f"# dlperf: {PY} -c ")
    assert "line 0\nline 1\nline 2\n" in text
    assert "killed" not in text


def test_exit_code_is_reported_with_custom_env_and_cwd(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "DLPERF_TEST_VAR": "hello"}
    code = """
        import os, sys
        print(os.environ.get("DLPERF_TEST_VAR"), os.getcwd(), "HOME" in os.environ)
        sys.exit(3)
    """
    res = run_process(py(code), log_path=tmp_path / "run.log", env=env, cwd=tmp_path)
    assert (res.exit_code, res.outcome) == (3, "exited")
    assert f"hello {tmp_path} False" in (tmp_path / "run.log").read_text()


def test_total_timeout(tmp_path: Path) -> None:
    code = """
        import time
        while True:
            print("tick", flush=True)
            time.sleep(0.1)
    """
    res = run_process(
        py(code), log_path=tmp_path / "run.log", timeout_s=1.0, no_output_timeout_s=0.5
    )
    assert (res.exit_code, res.outcome) == (None, "timeout")
    assert 1.0 <= res.wall_s < 2.5
    text = (tmp_path / "run.log").read_text()
    assert "tick\n" in text
    assert (
        text.rstrip()
        .splitlines()[-1]
        .startswith("# dlperf: killed process group after total timeout of 1.0 s")
    )


def test_no_output_timeout(tmp_path: Path) -> None:
    code = """
        import time
        print("started", flush=True)
        time.sleep(1000)
    """
    res = run_process(
        py(code), log_path=tmp_path / "run.log", timeout_s=20, no_output_timeout_s=0.6
    )
    assert (res.exit_code, res.outcome) == (None, "no_output")
    assert 0.6 <= res.wall_s < 3
    text = (tmp_path / "run.log").read_text()
    assert "started\n" in text
    assert "# dlperf: killed process group after no output for 0.6 s (SIGTERM)" in text


def test_growing_watched_file_counts_as_progress(tmp_path: Path) -> None:
    progress = tmp_path / "progress.txt"
    code = f"""
        import time
        for i in range(15):
            with open({str(progress)!r}, "a") as f:
                f.write("x")
            time.sleep(0.1)
    """
    res = run_process(
        py(code),
        log_path=tmp_path / "run.log",
        timeout_s=20,
        no_output_timeout_s=0.5,
        watch_paths=[progress, tmp_path / "never-created"],
    )
    assert (res.exit_code, res.outcome) == (0, "exited")
    assert res.wall_s > 1.2  # well past the no-output timeout
    # and the same silent child with the file unwatched is killed
    res = run_process(
        py(code), log_path=tmp_path / "run2.log", timeout_s=20, no_output_timeout_s=0.5
    )
    assert res.outcome == "no_output"


def test_watched_file_keeps_child_alive_until_total_timeout(tmp_path: Path) -> None:
    progress = tmp_path / "progress.txt"
    code = f"""
        import time
        while True:
            with open({str(progress)!r}, "a") as f:
                f.write("x")
            time.sleep(0.1)
    """
    res = run_process(
        py(code),
        log_path=tmp_path / "run.log",
        timeout_s=1.5,
        no_output_timeout_s=0.5,
        watch_paths=[progress],
    )
    assert res.outcome == "timeout"
    assert res.wall_s >= 1.5


GRANDCHILD = """
    import subprocess, sys, time
    kw = {"start_new_session": True} if ESCAPE else {}
    g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"], **kw)
    print(f"grandchild {g.pid}", flush=True)
    if HANG:
        time.sleep(1000)
"""


@pytest.mark.parametrize("escape", [False, True], ids=["in-group", "setsid"])
def test_hung_grandchild_is_killed_on_timeout(tmp_path: Path, escape: bool) -> None:
    lines: list[str] = []
    code = GRANDCHILD.replace("ESCAPE", str(escape)).replace("HANG", "True")
    res = run_process(py(code), log_path=tmp_path / "run.log", timeout_s=1.0, on_line=lines.append)
    assert res.outcome == "timeout"
    (gpid,) = pid_lines(lines, "grandchild ")
    assert wait_gone(gpid)
    assert res.wall_s < 4


@pytest.mark.parametrize("escape", [False, True], ids=["in-group", "setsid"])
def test_grandchild_left_behind_after_normal_exit_is_killed(tmp_path: Path, escape: bool) -> None:
    lines: list[str] = []
    code = GRANDCHILD.replace("ESCAPE", str(escape)).replace("HANG", "False")
    res = run_process(py(code), log_path=tmp_path / "run.log", timeout_s=20, on_line=lines.append)
    assert (res.exit_code, res.outcome) == (0, "exited")
    (gpid,) = pid_lines(lines, "grandchild ")
    assert wait_gone(gpid)
    assert res.wall_s < 4  # the grandchild holding the pipe open did not stall us
    expected = "in sessions of their own" if escape else "left running in the group after"
    assert expected in (tmp_path / "run.log").read_text()


def test_a_signal_while_a_child_starts_is_held_until_it_can_be_killed() -> None:
    """The window between fork and registration: the signal waits, then acts as usual."""
    from dlperf.proc import _SignalsHeld

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        with _SignalsHeld() as held:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # a handler would have run by now; it was held
        assert signal.getsignal(signal.SIGTERM) is interrupt
        with pytest.raises(KeyboardInterrupt):
            held.deliver()
        held.deliver()  # delivered once only
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_child_ignoring_sigterm_is_sigkilled_after_grace(tmp_path: Path) -> None:
    lines: list[str] = []
    code = """
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(f"child {os.getpid()}", flush=True)
        time.sleep(1000)
    """
    res = run_process(
        py(code),
        log_path=tmp_path / "run.log",
        timeout_s=1.0,
        kill_grace_s=0.5,
        on_line=lines.append,
    )
    assert (res.exit_code, res.outcome) == (None, "timeout")
    assert 1.5 <= res.wall_s < 4
    (pid,) = pid_lines(lines, "child ")
    assert gone(pid)
    assert "(SIGTERM, then SIGKILL after 0.5 s)" in (tmp_path / "run.log").read_text()


def test_keyboard_interrupt_kills_group_and_reraises(tmp_path: Path, foreground_sigint) -> None:
    log = tmp_path / "run.log"
    lines: list[str] = []
    code = """
        import os, subprocess, sys, time
        g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"])
        print(f"child {os.getpid()}", flush=True)
        print(f"grandchild {g.pid}", flush=True)
        time.sleep(1000)
    """
    # Send SIGINT once the child has printed its pids (not on a fixed timer that could fire
    # while the test itself is still outside run_process).
    started = threading.Event()

    def on_line(line: str) -> None:
        lines.append(line)
        if line.startswith("grandchild "):
            started.set()

    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    waiter = threading.Thread(target=lambda: started.wait(10) and timer.start(), daemon=True)
    waiter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_process(py(code), log_path=log, timeout_s=30, kill_grace_s=1.0, on_line=on_line)
    finally:
        started.set()
        waiter.join()
        timer.cancel()
        if timer.is_alive():
            timer.join()
    pids = pid_lines(lines, "child ") + pid_lines(lines, "grandchild ")
    assert len(pids) == 2
    assert all(wait_gone(p) for p in pids)
    text = log.read_text()
    assert text.splitlines()[-1].startswith(
        "# dlperf: killed process group after KeyboardInterrupt"
    )
    # closed: nothing of ours still holds the log open
    assert not any(f.path == str(log) for f in psutil.Process().open_files())


def test_missing_executable_raises_dlperf_error(tmp_path: Path) -> None:
    with pytest.raises(DlperfError, match="dlperf-no-such-program.*not found"):
        run_process(["dlperf-no-such-program", "--flag"], log_path=tmp_path / "run.log")
    with pytest.raises(DlperfError, match="not found"):
        run_process([str(tmp_path / "nope")], log_path=tmp_path / "run2.log")
    assert "not found" in tail(tmp_path / "run.log")


def test_tail(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert tail(log, lines=3) == "line 97\nline 98\nline 99"
    assert tail(log, lines=1000).splitlines()[0] == "line 0"
    assert len(tail(log, lines=1000, max_chars=50)) <= 50
    assert tail(log, lines=1000, max_chars=50).endswith("line 99")
    assert tail(tmp_path / "missing.log") == ""
    binary = tmp_path / "b.log"
    binary.write_bytes(b"ok\n\xff\xfe\x00\x80\nlast\n")
    assert tail(binary, lines=2) == "\ufffd\ufffd\x00\ufffd\nlast"
