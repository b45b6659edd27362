"""Faults of the machine, not of the workload: disks that fill or are read-only, and several
dlperf processes on one results folder at once. Real disks (a small tmpfs mounted for the
test), real processes, the real CLI."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlperf.files import StorageError, atomic_write, try_lock
from dlperf.resultio import load_result
from dlperf.schema import ResultStatus
from dlperf.store import ResultStore

pytestmark = pytest.mark.multiprocess

SLOW_RUN = ["run", "calibration", "pace", "--preset", "smoke", "--set", "step_ms=300",
            "--skip", "1", "--measure", "3", "--repeats", "3"]  # fmt: skip


def dlperf(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dlperf", *args],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def finished(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


class Disk:
    """A 4 MiB tmpfs: a real filesystem that fills up and can be made read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        with open(self.filler, "ab") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def read_only(self) -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)


@pytest.fixture
def disk(tmp_path: Path):
    path = tmp_path / "disk"
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    yield Disk(path)
    subprocess.run(["umount", "-l", str(path)], check=False)


def leftovers(folder: Path) -> list[Path]:
    """Temporary or empty files under `folder`: what a failed write must not leave."""
    return [
        p
        for p in folder.rglob("*")
        if p.is_file() and (p.name.endswith(".tmp") or ".tmp." in p.name or p.stat().st_size == 0)
    ]


def wait_for(predicate, what: str, within_s: float = 120.0) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.05)


def workload_running(results: Path, repeat: int) -> bool:
    return any("\npace: " in p.read_text() for p in results.rglob(f"repeat-{repeat}.log"))


# --------------------------------------------------------------------------------------------
# full and read-only disks


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_a_results_folder_that_cannot_be_written_is_refused_before_running(tmp_path, disk, fault):
    disk.read_only() if fault == "read-only" else disk.fill()
    for command in (SLOW_RUN, ["sweep", str(tmp_path / "s.toml")]):
        (tmp_path / "s.toml").write_text(SWEEP)
        code, _, err = finished(
            dlperf(*command, "--results-dir", str(disk.path / "r"), cwd=tmp_path)
        )
        reason = "Read-only file system" if fault == "read-only" else "No space left on device"
        assert code == 1, err
        assert reason in err and str(disk.path / "r") in err and "Traceback" not in err
    assert not (tmp_path / "results").exists()
    if fault == "full":
        disk.free()
        assert not leftovers(disk.path)


def test_a_disk_that_fills_during_a_run_keeps_the_repeats_measured_before(tmp_path, disk):
    results = disk.path / "results"
    unsaved = tmp_path / "tmp"  # where the result goes when its folder cannot take it
    unsaved.mkdir()
    proc = dlperf(
        *SLOW_RUN, "--results-dir", str(results), cwd=tmp_path, env={"TMPDIR": str(unsaved)}
    )
    wait_for(lambda: workload_running(results, 2), "repeat 2")
    disk.fill()
    code, _, err = finished(proc)
    assert code == 2, err
    assert "No space left on device" in err and "Traceback" not in err
    (saved,) = unsaved.rglob("*.json")
    assert str(saved) in err.replace("\n", "")  # said where the measured result went
    result = load_result(saved)
    statuses = [r.status for r in result.repeats]
    assert statuses[0] == "ok" and statuses[-1] == "interrupted", statuses
    assert result.metrics.throughput is not None and result.metrics.throughput.n >= 1
    disk.free()
    assert not leftovers(results), leftovers(results)
    assert ResultStore(results).results() == []  # nothing half-written where results are read


SWEEP = """
[sweep]
preset = "smoke"
frameworks = ["calibration"]
models = ["pace"]
batch_sizes = [10]
repeats = 3
skip = 1
measure = 3
[sweep.set]
step_ms = "300"
"""


def test_a_sweep_stopped_by_a_full_disk_resumes_once_there_is_room(tmp_path, disk):
    (tmp_path / "s.toml").write_text(SWEEP)
    results = disk.path / "results"
    proc = dlperf("sweep", "s.toml", "--results-dir", str(results), cwd=tmp_path)
    wait_for(lambda: any(results.rglob("repeat-1.json")), "repeat 1 saved")
    disk.fill()
    code, _, err = finished(proc)
    assert code == 2, err
    assert "No space left on device" in err and "resume" in err and "Traceback" not in err
    disk.free()
    assert not leftovers(results)
    code, out, err = finished(
        dlperf("sweep", "s.toml", "--results-dir", str(results), cwd=tmp_path)
    )
    assert code == 0, err
    assert "resume" in out + err
    (result,) = ResultStore(results).results()
    assert [r.index for r in result.repeats] == [1, 2, 3]
    assert result.status == ResultStatus.ok


def test_a_site_that_does_not_fit_leaves_no_partial_site(tmp_path, disk):
    from test_report import sample_results

    for result in sample_results():
        ResultStore(tmp_path / "results").write(result)
    # The empty 4 MiB disk takes the marker and the style but not plotly.js (4.6 MB); the full
    # one not even the probe. Neither keeps a site/ folder, or its new parent.
    for fill in (False, True):
        if fill:
            disk.fill()
        site = disk.path / "new" / "site"
        code, _, err = finished(dlperf("publish", "--out", str(site), cwd=tmp_path))
        assert code == 1 and "No space left on device" in err and "Traceback" not in err, err
        assert not (disk.path / "new").exists()
        assert sorted(p.name for p in disk.path.iterdir()) == (["filler"] if fill else [])


def test_reports_are_written_whole_or_not_at_all(tmp_path, disk):
    from test_report import sample_results

    for result in sample_results():
        ResultStore(tmp_path / "results").write(result)
    reports = disk.path / "reports"
    code, _, err = finished(dlperf("report", "--reports-dir", str(reports), cwd=tmp_path))
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in reports.iterdir()}
    disk.fill()
    code, _, err = finished(dlperf("report", "--reports-dir", str(reports), cwd=tmp_path))
    assert code == 1 and "No space left on device" in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in reports.iterdir()} == before  # old pages intact
    with pytest.raises(StorageError, match="No space left"):
        atomic_write(reports / "resnet50.md", "x" * (1 << 20))
    assert (reports / "resnet50.md").read_bytes() == before["resnet50.md"]
    disk.free()
    assert not leftovers(reports)
    disk.read_only()
    export = ["export", "--format", "superbench", "--out", str(reports / "sb.jsonl")]
    for args in (["report", "--reports-dir", str(reports)], export):
        code, _, err = finished(dlperf(*args, cwd=tmp_path))
        assert code == 1 and "Read-only file system" in err and "Traceback" not in err, err


# --------------------------------------------------------------------------------------------
# several dlperf processes on one results folder


def test_four_sweeps_of_one_matrix_at_once_each_store_their_own_results(tmp_path):
    (tmp_path / "s.toml").write_text(
        SWEEP.replace("batch_sizes = [10]", "batch_sizes = [10, 20]")
        .replace("repeats = 3", "repeats = 2")
        .replace('"300"', '"20"')
    )
    procs = [dlperf("sweep", "s.toml", cwd=tmp_path) for _ in range(4)]
    for proc in procs:
        code, _, err = finished(proc)
        assert code == 0, err
    stored = ResultStore(tmp_path / "results").results()
    assert len(stored) == 8 and len({r.id for r in stored}) == 8
    for result in stored:
        assert result.status == ResultStatus.ok
        raw = ResultStore(tmp_path / "results").folder(result.spec) / result.id
        for index in (1, 2):
            events = (raw / f"repeat-{index}.events.jsonl").read_text().splitlines()
            starts = [json.loads(line) for line in events if '"start"' in line]
            assert len(starts) == 1  # one workload wrote it
            assert starts[0]["batch_size"] == result.spec.batch_size
        assert not list(raw.glob("sweep-*")) and not list(raw.glob("*.tmp"))


def test_a_live_sweeps_attempt_is_never_resumed_by_another(tmp_path):
    from dlperf.sweep import STATE_FILE, SweepLock, _resume_state, load_plan

    (tmp_path / "s.toml").write_text(SWEEP)
    (spec,) = load_plan(tmp_path / "s.toml").specs
    results = tmp_path / "results"
    folder = ResultStore(results).folder(spec)
    running = SweepLock(results)  # a sweep running now, its attempt below
    wanted = json.loads(spec.model_dump_json())
    for name, state in (
        ("20260101T000000Z-aaaaaa", "{half"),
        ("20260101T000001Z-bbbbbb", json.dumps({"spec": wanted, "owner": running.owner})),
        ("20260101T000002Z-cccccc", json.dumps({"spec": wanted, "owner": "../../etc/x"})),
    ):
        (folder / name).mkdir(parents=True)
        (folder / name / STATE_FILE).write_text(state)
    mine, other = SweepLock(results), SweepLock(results)
    assert _resume_state(results, spec, mine) is None  # half-written, live, forged: passed over
    running.close()  # that sweep ended (or died: its flock ends with its process)
    attempt = _resume_state(results, spec, mine)
    assert attempt is not None and attempt.result_id == "20260101T000001Z-bbbbbb"
    state = json.loads((folder / attempt.result_id / STATE_FILE).read_text())
    assert state == {"spec": wanted, "owner": mine.owner}  # and it is ours alone
    assert _resume_state(results, spec, other) is None
    mine.close()
    assert _resume_state(results, spec, other).result_id == attempt.result_id
    other.close()
    assert sorted(p.name for p in (results / ".sweeps").iterdir()) == []  # no lock file left


def test_an_attempt_of_an_older_dlperf_is_resumed_once_its_lock_is_free(tmp_path):
    """Before one lock per sweep, each attempt held `sweep.lock` in its own folder."""
    from dlperf.sweep import LOCK_FILE, STATE_FILE, SweepLock, _resume_state, load_plan

    (tmp_path / "s.toml").write_text(SWEEP)
    (spec,) = load_plan(tmp_path / "s.toml").specs
    results = tmp_path / "results"
    old = ResultStore(results).folder(spec) / "20260101T000001Z-bbbbbb"
    old.mkdir(parents=True)
    (old / STATE_FILE).write_text(json.dumps({"spec": json.loads(spec.model_dump_json())}))
    live = try_lock(old / LOCK_FILE)  # an older dlperf's sweep running now
    sweep = SweepLock(results)
    assert _resume_state(results, spec, sweep) is None
    live.close()
    assert _resume_state(results, spec, sweep).result_id == old.name
    assert json.loads((old / STATE_FILE).read_text())["owner"] == sweep.owner
    assert not (old / LOCK_FILE).exists()
    sweep.close()


def test_a_frozen_sweeps_attempts_are_left_alone_and_a_killed_ones_resumed(tmp_path):
    """Real processes on one results folder: sweep A stopped (SIGSTOP: alive, its one lock
    held) with both its attempts unfinished; sweep B, run meanwhile, measures attempts of its
    own. Once A is killed (-9) and B's results are removed, sweep C resumes A's attempts."""
    import signal

    from dlperf.sweep import STATE_FILE

    (tmp_path / "s.toml").write_text(
        SWEEP.replace("batch_sizes = [10]", "batch_sizes = [10, 20]")
        .replace("repeats = 3", "repeats = 2")
        .replace('"300"', '"100"')
    )
    results = tmp_path / "results"
    a = dlperf("sweep", "s.toml", cwd=tmp_path)
    wait_for(lambda: len(list(results.rglob("repeat-1.json"))) == 2, "A's repeat 1 of both")
    a.send_signal(signal.SIGSTOP)
    try:
        a_attempts = sorted(p.parent.name for p in results.rglob(STATE_FILE))
        assert len(a_attempts) == 2
        code, out, err = finished(dlperf("sweep", "s.toml", cwd=tmp_path))
        assert code == 0, err
        assert "resume" not in out + err  # A lives: its attempts are not B's to take
        b_results = ResultStore(results).results()
        assert len(b_results) == 2 and not {r.id for r in b_results} & set(a_attempts)
    finally:
        a.kill()  # SIGKILL ends a stopped process too; its flock goes with it
        a.communicate()
    for result in b_results:  # no stored result: the next sweep measures these again
        (ResultStore(results).folder(result.spec) / f"{result.id}.json").unlink()
    code, out, err = finished(dlperf("sweep", "s.toml", cwd=tmp_path))
    assert code == 0, err
    assert " ".join((out + err).split()).count("1 repeat(s) already done") == 2
    stored = ResultStore(results).results()
    assert sorted(r.id for r in stored) == a_attempts  # C finished A's attempts
    assert all([x.index for x in r.repeats] == [1, 2] for r in stored)
    assert not list(results.rglob(STATE_FILE)) and not list((results / ".sweeps").iterdir())


# --------------------------------------------------------------------------------------------
# what sits at a lock path is never followed or written (issue 30, row 3)

VICTIM = b"a file of the user's that no sweep may touch\n"


@pytest.fixture(scope="module")
def dead_sweep(tmp_path_factory) -> tuple[Path, str]:
    """A results folder a real sweep left when it was killed (-9) after its first repeat
    (of three): its attempt's state names it as owner, and its `.sweeps/<owner>.lock` outlives
    it. Returns the folder and the attempt's folder, relative to it."""
    import psutil

    from dlperf.sweep import STATE_FILE

    where = tmp_path_factory.mktemp("dead-sweep")
    (where / "s.toml").write_text(SWEEP.replace('"300"', '"100"'))
    results = where / "results"
    proc = dlperf("sweep", "s.toml", cwd=where)
    try:
        wait_for(lambda: any(results.rglob("repeat-1.json")), "repeat 1 saved")
        helpers = psutil.Process(proc.pid).children(recursive=True)  # workload, guard
    finally:
        proc.kill()
        proc.communicate()
    _, alive = psutil.wait_procs(helpers, timeout=120)  # the guard ends the orphaned workload
    assert not alive, alive
    (state,) = results.rglob(STATE_FILE)
    owner = json.loads(state.read_text())["owner"]
    assert owner.endswith(f"-{proc.pid}")  # the dead process
    assert (results / ".sweeps" / f"{owner}.lock").is_file()  # kill -9 left it behind
    return results, str(state.parent.relative_to(results))


def fault_at(path: Path, fault: str, victim: Path) -> None:
    """Put `fault` where a lock file goes: a link to `victim`, a folder, a FIFO (or nothing
    but what is there: "none")."""
    if fault == "none":
        return
    path.unlink(missing_ok=True)
    if fault == "symlink":
        path.symlink_to(victim)
    elif fault == "folder":
        path.mkdir()
        (path / "kept").write_bytes(VICTIM)
    elif fault == "fifo":
        os.mkfifo(path)


def fault_is_intact(path: Path, fault: str, victim: Path) -> bool:
    import stat

    mode = os.lstat(path).st_mode
    return {
        "symlink": stat.S_ISLNK(mode) and os.readlink(path) == str(victim),
        "folder": stat.S_ISDIR(mode) and (path / "kept").read_bytes() == VICTIM,
        "fifo": stat.S_ISFIFO(mode),
    }[fault]


@pytest.mark.parametrize("fault", ["none", "symlink", "folder", "fifo"])
@pytest.mark.parametrize("lock", ["owner", "attempt"])
def test_a_lock_path_holding_a_link_folder_or_fifo_is_passed_over_untouched(
    tmp_path, dead_sweep, lock, fault
):
    """The dead sweep's lock (`.sweeps/<owner>.lock`, or an older dlperf's `sweep.lock` in the
    attempt) replaced by a link to a file of the user's, a folder or a FIFO: the resuming
    `dlperf sweep` neither follows, writes nor waits on it; it warns, leaves that attempt
    alone and measures the configuration anew. "none": the same attempt is resumed."""
    import shutil

    from dlperf.sweep import LOCK_FILE, STATE_FILE

    results = tmp_path / "results"
    shutil.copytree(dead_sweep[0], results, symlinks=True)
    (tmp_path / "s.toml").write_text((dead_sweep[0].parent / "s.toml").read_text())
    attempt = results / dead_sweep[1]
    state = json.loads((attempt / STATE_FILE).read_text())
    if lock == "owner":
        lock_path = results / ".sweeps" / f"{state['owner']}.lock"
    else:  # an attempt of a dlperf that locked the attempt's own folder: its state names none
        (attempt / STATE_FILE).write_text(json.dumps({"spec": state["spec"]}))
        (results / ".sweeps" / f"{state['owner']}.lock").unlink()
        lock_path = attempt / LOCK_FILE
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    fault_at(lock_path, fault, victim)

    proc = dlperf("sweep", "s.toml", cwd=tmp_path)
    try:
        out, err = proc.communicate(timeout=300)  # a FIFO opened for writing used to hang
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    said = " ".join((out + err).split())
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert victim.read_bytes() == VICTIM  # byte for byte: not emptied, nothing written
    (result,) = ResultStore(results).results()
    assert result.status == ResultStatus.ok and [r.index for r in result.repeats] == [1, 2, 3]
    if fault == "none":
        assert result.id == attempt.name and "repeat(s) already done" in said
        assert not lock_path.exists() and not list((results / ".sweeps").iterdir())
        return
    assert fault_is_intact(lock_path, fault, victim)
    named = lock_path.relative_to(tmp_path)  # as the sweep names them: under `results`
    assert f"warning: {named} is a" in said
    assert f"the attempt {attempt.relative_to(tmp_path)} is not resumed" in said
    assert result.id != attempt.name and "already done" not in said  # measured anew
    left = sorted(p.name for p in (results / ".sweeps").iterdir())  # the new sweep's lock went
    assert left == ([lock_path.name] if lock == "owner" else [])


def test_try_lock_refuses_what_is_not_a_plain_file_of_its_own(tmp_path):
    """Each thing that can sit at a lock path, through the real filesystem: refused before
    anything is written, the victim unchanged; a plain file (new or left behind) is locked."""
    from dlperf.files import NotALockFile
    from dlperf.sweep import SweepLock

    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    cases = [
        ("link", "a symbolic link", lambda p: p.symlink_to(victim)),
        ("dangling", "a symbolic link", lambda p: p.symlink_to(tmp_path / "not-there-yet")),
        ("hardlink", "a file with 2 names", lambda p: os.link(victim, p)),
        ("folder", "a folder", lambda p: p.mkdir()),
        ("fifo", "a FIFO", lambda p: os.mkfifo(p)),
    ]
    for name, kind, make in cases:
        path = tmp_path / f"{name}.lock"
        make(path)
        with pytest.raises(NotALockFile, match=f"{path} is {kind}"):
            try_lock(path)
    assert victim.read_bytes() == VICTIM
    assert not (tmp_path / "not-there-yet").exists()  # a dangling link is not created through
    left = tmp_path / "left.lock"
    left.write_text("held by pid 1 on elsewhere\n")  # a dead owner's, left behind
    for path in (tmp_path / "new.lock", left):
        handle = try_lock(path)
        assert handle is not None and path.read_text().startswith(f"held by pid {os.getpid()}")
        assert try_lock(path) is None  # held
        handle.close()
    # The folder of the sweeps' locks itself a link: the sweep is refused, the target untouched.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / ".sweeps").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StorageError, match="not a folder"):
        SweepLock(tmp_path / "results")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_an_attempt_folder_that_is_a_link_is_passed_over_untouched(tmp_path, dead_sweep):
    """The dead sweep's attempt folder moved out of the results folder and a link left in its
    place: resuming it would write its state, lock and repeats through the link. The sweep
    warns, leaves what the link points to as it was, and measures the configuration anew."""
    import shutil

    from dlperf.sweep import STATE_FILE

    results = tmp_path / "results"
    shutil.copytree(dead_sweep[0], results, symlinks=True)
    (tmp_path / "s.toml").write_text((dead_sweep[0].parent / "s.toml").read_text())
    attempt = results / dead_sweep[1]
    elsewhere = tmp_path / "elsewhere"
    attempt.rename(elsewhere)
    attempt.symlink_to(elsewhere, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir() if p.is_file()}
    assert STATE_FILE in before

    proc = dlperf("sweep", "s.toml", cwd=tmp_path)
    out, err = proc.communicate(timeout=300)
    said = " ".join((out + err).split())
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert f"{attempt.relative_to(tmp_path)} is a symbolic link" in said
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir() if p.is_file()} == before
    assert attempt.is_symlink()
    (result,) = ResultStore(results).results()
    assert result.id != attempt.name and [r.index for r in result.repeats] == [1, 2, 3]
