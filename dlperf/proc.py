"""The one place in dlperf that starts subprocesses.

Why one place: a benchmark workload that hangs, floods its output, or leaves helper processes
behind (data-loader workers, compile servers) must never hang dlperf or leak into the next
measurement. `run_process` therefore always

* starts the child in its own session / process group, so the whole tree can be signalled at
  once and a terminal Ctrl-C reaches only dlperf (which then cleans up deliberately);
* streams merged stdout+stderr into a log file line by line as it arrives, so a crash or a
  kill still leaves a complete log to read with `tail`;
* enforces a total timeout and a no-output timeout (output lines or growth of watched files
  count as progress);
* kills the whole group (SIGTERM, grace period, SIGKILL), plus descendants that escaped it,
  on timeout, on KeyboardInterrupt, and after a normal exit that left stragglers behind
  (dlperf is a child subreaper, so daemons that left the workload's session come back to it);
* holds Ctrl-C/SIGTERM/SIGHUP back for the instant between fork and registration, so a
  signal can never leave a child nobody kills;
* registers every workload with a guard process (`dlperf/_guard.py`) that ends it if dlperf
  itself dies without doing so (kill -9, the OOM killer).
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO

import psutil

from dlperf import DlperfError
from dlperf.files import STORAGE_ERRNOS, storage_error
from dlperf.redact import stored_argv

POLL_S = 0.1
"""Granularity of the wait loop: timeouts fire at most this late, and we never busy-loop."""

_READ_CHUNK = 65536
_MAX_PARTIAL_CHARS = 1 << 20
"""A "line" without newline longer than this is written out anyway (progress bars, binary junk)."""

_READER_DRAIN_S = 2.0
"""After the group is gone, how long the reader may keep draining before we stop it. Only
matters when a process we could not find (e.g. a double-forked daemon) still holds the pipe."""

_KILL_CONFIRM_S = 5.0
"""How long to wait for SIGKILLed processes to disappear before giving up on them."""


@dataclass(frozen=True)
class ProcResult:
    """How one subprocess ended.

    `exit_code` is None when dlperf killed the process (timeouts), so callers never mistake a
    kill for the workload's own verdict. `outcome` is "exited", "timeout", "no_output" or
    "cancelled" ("interrupted" is reserved for callers recording a KeyboardInterrupt, which
    run_process re-raises instead of returning).
    """

    exit_code: int | None
    outcome: str
    wall_s: float
    log_path: Path


def run_process(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float | None = None,
    no_output_timeout_s: float | None = None,
    watch_paths: Sequence[Path] = (),
    kill_grace_s: float = 5.0,
    on_line: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    stdout_path: Path | None = None,
) -> ProcResult:
    """Run `argv` to completion (or until a timeout) with its output streamed to `log_path`.

    `stdout_path`, when given, takes the child's stdout apart (a probe's answer, read back by
    the caller); `log_path` then has its stderr alone.

    `env` is the complete environment of the child (the caller merges `os.environ` if it wants
    to): a benchmark must not silently inherit whatever happens to be set in the shell. The
    program is looked up on the PATH of `env` when given.

    `timeout_s` bounds the total wall time (outcome "timeout"). `no_output_timeout_s` kills a
    child that neither printed a line nor changed the size/mtime of any `watch_paths` file for
    that long (outcome "no_output"); watched files let quiet workloads that write results or
    checkpoints prove they are alive. Killing means SIGTERM to the whole process group and to
    descendants that left it, `kill_grace_s` to exit, then SIGKILL.

    `on_line` is called from the reader thread with each output line (without the newline), in
    order, as it arrives; if it raises, the error is noted in the log and it is not called again,
    because the pipe must keep being drained or the child would block.

    `cancel`, when set by another thread, kills the group too (outcome "cancelled"): the other
    node agents of a multi-node job use it when one of them fails.

    KeyboardInterrupt while waiting kills the group and is re-raised, with the log complete and
    closed. A missing or non-executable program raises DlperfError.
    """
    argv = [os.fspath(a) for a in argv]
    if not argv:
        raise DlperfError("run_process needs a program to run, got an empty argv")
    log_path = Path(log_path)
    watch = [Path(p) for p in watch_paths]
    limits = _Limits(timeout_s, no_output_timeout_s, watch, kill_grace_s, cancel)
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w", encoding="utf-8", errors="replace", newline="") as log:
            log.write(f"# dlperf: {shlex.join(stored_argv(argv))}\n")
            log.flush()
            start = time.monotonic()
            # A Ctrl-C or SIGTERM between fork and the wait would leave the child running:
            # signals wait until it is started and registered, then arrive inside the wait.
            with _SignalsHeld() as held:
                proc = _start(argv, env=env, cwd=cwd, log=log, stdout_path=stdout_path)
                _register(proc.pid)
            reader = _Reader(proc, log, on_line, start)
            reader.start()
            outcome, exit_code, wall_s = _supervise(proc, reader, held, log, start, limits)
    except OSError as exc:  # the log's disk is full, read-only, or gone
        if exc.errno not in STORAGE_ERRNOS:
            raise
        with contextlib.suppress(OSError):
            if log_path.stat().st_size == 0:
                log_path.unlink()
        raise storage_error(log_path, exc) from None
    if reader.write_error is not None:  # the workload ran; its log could not be kept
        raise storage_error(log_path, reader.write_error)
    return ProcResult(exit_code=exit_code, outcome=outcome, wall_s=wall_s, log_path=log_path)


@dataclass(frozen=True)
class _Limits:
    """When `run_process` ends a child, and how (see its arguments)."""

    timeout_s: float | None
    no_output_timeout_s: float | None
    watch: list[Path]
    kill_grace_s: float
    cancel: threading.Event | None


def _supervise(
    proc: subprocess.Popen[bytes],
    reader: _Reader,
    held: _SignalsHeld,
    log: TextIO,
    start: float,
    limits: _Limits,
) -> tuple[str, int | None, float]:
    """(outcome, exit code, wall seconds) of a started, registered child: wait for it under
    `limits`, then leave nothing of it running, whatever happens, with notes at the log's end."""
    pgid = proc.pid  # start_new_session=True: the child leads its own session and group
    grace = limits.kill_grace_s
    notes: list[str] = []
    try:
        try:
            held.deliver()
            outcome, reason = _wait(proc, reader, start, limits)
        except KeyboardInterrupt:
            notes.append(_kill_tree(proc, pgid, grace, "KeyboardInterrupt"))
            raise
        if outcome == "exited":
            note = _reap_stragglers(pgid, grace)
        else:
            note = _kill_tree(proc, pgid, grace, reason)
        if note:
            notes.append(note)
        exit_code = proc.returncode if outcome == "exited" else None
        return outcome, exit_code, time.monotonic() - start
    finally:
        # Every path: make sure nothing we started survives, the reader is done with the
        # file, and our notes land at the end of the log.
        if proc.poll() is None:  # only reachable through an unexpected error above
            with contextlib.suppress(BaseException):
                notes.append(_kill_tree(proc, pgid, 0.0, "an internal error"))
        with contextlib.suppress(BaseException):
            if note := _unregister(proc.pid, grace):
                notes.append(note)
        reader.finish()
        with contextlib.suppress(OSError):  # a full disk: reader.write_error says so
            for note in notes:
                log.write(f"# dlperf: {note}\n")
            log.flush()


def tail(path: Path, lines: int = 40, max_chars: int = 8000) -> str:
    """The last `lines` lines of a log (at most `max_chars` characters), for error messages.

    Never raises for a missing or unreadable file ("" then) or binary content (replaced
    characters), because it is used while reporting some other failure.
    """
    if lines <= 0 or max_chars <= 0:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            # 4 bytes per char covers any UTF-8; the line limit is applied after decoding.
            f.seek(max(0, size - max_chars * 4))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    kept = text.splitlines()[-lines:]
    out = "\n".join(kept)
    if len(out) > max_chars:
        out = out[-max_chars:]
    return out


# --------------------------------------------------------------------------------------------
# internals


def _start(
    argv: list[str],
    *,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    log: TextIO,
    stdout_path: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Popen with our fixed policy; turns "cannot start" into an actionable DlperfError."""
    if cwd is not None and not Path(cwd).is_dir():
        msg = f"cannot run {argv[0]!r}: working directory {str(cwd)!r} does not exist"
        _note_failure(log, msg)
        raise DlperfError(msg)
    with contextlib.ExitStack() as files:
        stdout: int | IO[bytes] = subprocess.PIPE
        if stdout_path is not None:  # the child's own descriptor; ours closes once it runs
            stdout = files.enter_context(open(stdout_path, "wb"))  # noqa: SIM115
        return _popen(argv, env=env, cwd=cwd, log=log, stdout=stdout)


def _popen(
    argv: list[str],
    *,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    log: TextIO,
    stdout: int | IO[bytes],
) -> subprocess.Popen[bytes]:
    """The child in its own session; stderr joins stdout in the pipe unless stdout is a file."""
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT if stdout == subprocess.PIPE else subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    except FileNotFoundError as e:
        search = env.get("PATH") if env is not None else os.environ.get("PATH")
        where = "" if os.sep in argv[0] else f" on PATH={search or os.defpath!r}"
        msg = (
            f"cannot run {argv[0]!r}: program not found{where}. Install it, or give its full "
            "path, or fix PATH in the environment passed to the run"
        )
        _note_failure(log, msg)
        raise DlperfError(msg) from e
    except PermissionError as e:
        msg = f"cannot run {argv[0]!r}: permission denied ({e}). Check that it is executable"
        _note_failure(log, msg)
        raise DlperfError(msg) from e
    except OSError as e:
        msg = f"cannot run {argv[0]!r}: {e}"
        _note_failure(log, msg)
        raise DlperfError(msg) from e


_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _SignalsHeld:
    """Holds SIGINT, SIGTERM and SIGHUP back while a child is being started (main thread only).

    A signal that arrives in the meantime is recorded; `deliver` hands it to the handler that
    was installed before (dlperf's turn it into KeyboardInterrupt) once the caller is inside
    the block that kills the child on KeyboardInterrupt. Other threads cannot install handlers,
    and Python runs handlers in the main thread anyway, so there this does nothing.
    """

    def __init__(self) -> None:
        self._previous: dict[int, object] = {}
        self._pending: int | None = None

    def __enter__(self) -> _SignalsHeld:
        if threading.current_thread() is threading.main_thread():
            for sig in _HELD_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._record)
        return self

    def _record(self, signum: int, frame: object) -> None:
        if self._pending is None:
            self._pending = signum

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        if exc_type is not None:
            self.deliver()

    def deliver(self) -> None:
        """Act on the signal held back, as if it arrived now (usually: KeyboardInterrupt)."""
        signum, self._pending = self._pending, None
        if signum is None:
            return
        handler = self._previous.get(signum)
        if callable(handler):
            handler(signum, None)
        elif handler != signal.SIG_IGN:  # SIG_DFL: die of it; the guard ends the child
            signal.raise_signal(signum)


# Workloads started by this process and not yet ended, and the guard that ends them if this
# process dies without doing so (see dlperf/_guard.py).
_registry_lock = threading.Lock()
_running: set[int] = set()
_guard: subprocess.Popen[bytes] | None = None
_PR_SET_CHILD_SUBREAPER = 36


def _register(pid: int) -> None:
    """Note a started workload, and tell the guard, which ends it should dlperf die first."""
    global _guard
    with _registry_lock:
        if not _running and _guard is None:
            _become_subreaper()
        _running.add(pid)
        if _guard is None or _guard.poll() is not None:
            _guard = _start_guard()
        _tell_guard(f"+{pid}")


def _unregister(pid: int, grace_s: float) -> str:
    """The workload is ended. The last one to end also ends what its kind left behind."""
    with _registry_lock:
        _running.discard(pid)
        _tell_guard(f"-{pid}")
        if _running:
            return ""  # an orphan now may belong to a workload that still runs
    return _end_orphans(grace_s)


def _start_guard() -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "dlperf._guard"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return None  # workloads still end on every exit dlperf lives through


def _tell_guard(line: str) -> None:
    if _guard is None or _guard.stdin is None:
        return
    with contextlib.suppress(OSError, ValueError):
        _guard.stdin.write(f"{line}\n".encode())
        _guard.stdin.flush()


def _become_subreaper() -> None:
    """Orphans of our workloads (daemons that left the workload's session) become our children
    instead of init's, so `_end_orphans` can find them after the workload exits. Linux only."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _end_orphans(grace_s: float) -> str:
    """End the processes our workloads left behind in sessions of their own.

    With no workload running, a child of ours that is in another session and is neither the
    guard nor a process we started is a workload's orphan: ended (with its descendants) and
    reaped. Children in our own session are dlperf's own helpers (pip, nvidia-smi) and stay.
    """
    own_sid = os.getsid(0)
    keep = {_guard.pid} if _guard is not None else set()
    orphans: dict[int, psutil.Process] = {}
    for child in _own_children():
        try:
            if child.pid in keep or os.getsid(child.pid) == own_sid:
                continue
            orphans[child.pid] = child
            for grandchild in child.children(recursive=True):
                orphans[grandchild.pid] = grandchild
        except (OSError, psutil.Error):
            continue
    if not orphans:
        return ""
    live = _alive(list(orphans.values()))
    names = ", ".join(sorted({_name(p) for p in live}))
    _signal_procs(live, signal.SIGTERM)
    _, still = psutil.wait_procs(live, timeout=grace_s)
    _signal_procs(still, signal.SIGKILL)
    psutil.wait_procs(still, timeout=_KILL_CONFIRM_S)
    for pid in orphans:  # our children now: reap them, zombies included
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    if not live:
        return ""
    return (
        f"killed {len(live)} process(es) the workload left running in sessions of their own: "
        f"{names}"
    )


def _own_children() -> list[psutil.Process]:
    try:
        return psutil.Process().children()
    except psutil.Error:
        return []


def _signal_procs(procs: Sequence[psutil.Process], sig: signal.Signals) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.send_signal(sig)


def _note_failure(log: TextIO, msg: str) -> None:
    log.write(f"# dlperf: {msg}\n")
    log.flush()


class _Reader(threading.Thread):
    """Drains the child's pipe into the log, line by line, as output arrives.

    Uses select + os.read on the raw fd rather than readline so that `finish` can stop it even
    if some unknown process keeps the pipe's write end open forever.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        log: TextIO,
        on_line: Callable[[str], None] | None,
        start: float,
    ) -> None:
        super().__init__(name=f"dlperf-reader-{proc.pid}", daemon=True)
        pipe = proc.stdout or proc.stderr  # stderr alone when stdout goes to a file
        assert pipe is not None
        self._pipe = pipe
        self._fd = pipe.fileno()
        self._log = log
        self._on_line = on_line
        self._stop_requested = threading.Event()
        self.last_output = start
        """time.monotonic() of the last bytes read; a float assignment is atomic in CPython."""
        self.write_error: OSError | None = None
        """Why the log stopped being written (a full disk), if it did."""

    def run(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        partial = ""
        try:
            while True:
                ready, _, _ = select.select([self._fd], [], [], POLL_S)
                if not ready:
                    if self._stop_requested.is_set():
                        break
                    continue
                chunk = os.read(self._fd, _READ_CHUNK)
                if not chunk:
                    break
                self.last_output = time.monotonic()
                partial += decoder.decode(chunk)
                *complete, partial = partial.split("\n")
                for line in complete:
                    self._emit(line)
                if len(partial) > _MAX_PARTIAL_CHARS:
                    self._emit(partial)
                    partial = ""
            partial += decoder.decode(b"", final=True)
            if partial:
                self._emit(partial)
        except Exception as e:  # a broken log disk must not leave the child blocked on the pipe
            with contextlib.suppress(Exception):
                self._log.write(f"# dlperf: output reader failed: {e!r}\n")
        finally:
            with contextlib.suppress(Exception):
                self._log.flush()

    def _emit(self, line: str) -> None:
        if self.write_error is None:
            try:
                self._log.write(line + "\n")
                self._log.flush()
            except OSError as exc:  # a full disk: keep draining, or the child would block
                self.write_error = exc
        if self._on_line is not None:
            try:
                self._on_line(line.removesuffix("\r"))
            except Exception as e:
                self._on_line = None
                self._log.write(f"# dlperf: on_line callback failed, no longer called: {e!r}\n")
                self._log.flush()

    def finish(self) -> None:
        """Join the thread (draining what is left) and close the pipe. Safe to call twice."""
        self.join(_READER_DRAIN_S)
        if self.is_alive():
            self._stop_requested.set()
            self.join()
        with contextlib.suppress(OSError):
            self._pipe.close()


def _watch_signature(paths: Sequence[Path]) -> tuple[tuple[int, int] | None, ...]:
    sig: list[tuple[int, int] | None] = []
    for p in paths:
        try:
            st = p.stat()
            sig.append((st.st_size, st.st_mtime_ns))
        except OSError:
            sig.append(None)
    return tuple(sig)


def _wait(
    proc: subprocess.Popen[bytes], reader: _Reader, start: float, limits: _Limits
) -> tuple[str, str]:
    """Wait for the child to exit or a timeout to fire. Returns (outcome, reason for the log)."""
    timeout_s, no_output_timeout_s = limits.timeout_s, limits.no_output_timeout_s
    watch, cancel = limits.watch, limits.cancel
    last_sig = _watch_signature(watch) if watch else ()
    last_watch_change = start
    while True:
        try:
            proc.wait(POLL_S)
            return "exited", ""
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if cancel is not None and cancel.is_set():
            return "cancelled", "another part of the job failed"
        if timeout_s is not None and now - start >= timeout_s:
            return "timeout", f"total timeout of {timeout_s:.1f} s"
        if no_output_timeout_s is not None:
            if watch:
                sig = _watch_signature(watch)
                if sig != last_sig:
                    last_sig, last_watch_change = sig, now
            last_activity = max(reader.last_output, last_watch_change)
            if now - last_activity >= no_output_timeout_s:
                return "no_output", f"no output for {no_output_timeout_s:.1f} s"


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes in process group `pgid`."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    members = []
    for p in psutil.process_iter(["status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(p)
        except (OSError, psutil.Error):
            continue
    return members


def _alive(procs: Sequence[psutil.Process]) -> list[psutil.Process]:
    """Those still running and not zombies (psutil guards against pid reuse)."""
    alive = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.Error:
            continue
    return alive


def _signal_all(pgid: int, extra: Sequence[psutil.Process], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    _signal_procs(extra, sig)


# Set once the user has asked twice (a second Ctrl-C, SIGTERM or SIGHUP while dlperf stops):
# workloads being ended get SIGKILL at once instead of the rest of their grace. The CLI sets it
# rather than raising a second KeyboardInterrupt, which would cut its teardown short.
_hurry = threading.Event()


def hurry_kills() -> None:
    """End the workloads being killed now, and any killed later in this process, without
    waiting out their grace period (safe to call from a signal handler: it only sets a flag)."""
    _hurry.set()


def _terminate(
    pgid: int,
    extra: Sequence[psutil.Process],
    grace_s: float,
    gone: Callable[[], bool],
    reap: Callable[[], object] = lambda: None,
) -> bool:
    """SIGTERM, wait up to grace_s for `gone()`, then SIGKILL. Returns True if SIGKILL was needed.

    A second KeyboardInterrupt during the grace period, or `hurry_kills`, skips straight to
    SIGKILL.
    """
    _signal_all(pgid, extra, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    try:
        while time.monotonic() < deadline and not _hurry.is_set():
            reap()
            if gone():
                return False
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        reap()
        if gone():
            return False
    finally:
        # Runs on the normal path (grace over) and on a KeyboardInterrupt during the grace.
        if not gone():
            _signal_all(pgid, extra, signal.SIGKILL)
    deadline = time.monotonic() + _KILL_CONFIRM_S
    while time.monotonic() < deadline and not gone():
        reap()
        time.sleep(0.02)
    return True


def _kill_tree(proc: subprocess.Popen[bytes], pgid: int, grace_s: float, reason: str) -> str:
    """Kill the child's group and escaped descendants; reap the child. Returns the log note."""
    escaped = _descendants(proc.pid)  # before killing: once the child dies they are orphans

    def gone() -> bool:
        return proc.poll() is not None and not _group_members(pgid) and not _alive(escaped)

    try:
        killed = _terminate(pgid, escaped, grace_s, gone, reap=proc.poll)
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(_KILL_CONFIRM_S)
    return f"killed process group after {reason} ({_how(killed, grace_s)})"


def _reap_stragglers(pgid: int, grace_s: float) -> str:
    """After a normal exit: kill what the workload left running in its group."""
    left = _group_members(pgid)
    if not left:
        return ""
    names = ", ".join(sorted({_name(p) for p in left}))
    killed = _terminate(pgid, (), grace_s, lambda: not _group_members(pgid))
    return (
        f"killed {len(left)} process(es) left running in the group after the main process "
        f"exited: {names} ({_how(killed, grace_s)})"
    )


def _how(killed: bool, grace_s: float) -> str:
    """How a group was ended, for its log: hurried kills (a second signal) did not wait."""
    if not killed:
        return "SIGTERM"
    if _hurry.is_set():
        return "SIGTERM, then SIGKILL at once: asked again to stop"
    return f"SIGTERM, then SIGKILL after {grace_s:.1f} s"


def _name(p: psutil.Process) -> str:
    try:
        return f"{p.name()}[{p.pid}]"
    except psutil.Error:
        return f"[{p.pid}]"
