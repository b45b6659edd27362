import os
import signal
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def fixtures_dir() -> Path | None:
    """Real logs from other people's runs: ../shared/fixtures or $DLPERF_FIXTURES."""
    env = os.environ.get("DLPERF_FIXTURES")
    candidate = Path(env) if env else ROOT.parent / "shared" / "fixtures"
    return candidate if candidate.is_dir() else None


@pytest.fixture
def fixtures() -> Path:
    found = fixtures_dir()
    if found is None:
        pytest.skip("no ../shared/fixtures beside the project and DLPERF_FIXTURES is unset")
    return found


@pytest.fixture
def foreground_sigint():
    """SIGINT as a foreground terminal delivers it, for this test and the processes it starts.

    A shell starts a background job (`bash scripts/test &`, a CI runner, nohup) with SIGINT
    ignored; children inherit that, and Python then never turns SIGINT into KeyboardInterrupt,
    rightly: Ctrl-C in the terminal is not meant for a background job. A test that means Ctrl-C
    restores Python's handler here; a child started meanwhile gets SIGINT at its default (a
    handler is reset by exec, an ignored signal is not)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """`dlperf ARGS...` through its real entry point (`dlperf.cli.main`, argv and all), in this
    process, in `tmp_path` with its own DLPERF_HOME; returns (exit code, output with its
    whitespace and table rules folded). A traceback in the output fails the test."""
    from dlperf.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # main() installs handlers
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False, raising=False)

    def invoke(*args: str) -> tuple[int, str]:
        monkeypatch.setattr(sys, "argv", ["dlperf", *args])
        with pytest.raises(SystemExit) as done:
            main()
        out = capsys.readouterr()
        text = " ".join((out.out + out.err).replace("│", " ").split())
        assert "Traceback" not in text, text
        return done.value.code, text

    return invoke


def throughput_from_marks(repeat, cwd: Path | None = None) -> tuple[float, list[float]]:
    """What a repeat's throughput must be, from the workload's own step marks (its events
    files): each rank's window (repeat.window's steps) and the job's (all ranks' samples over
    the slowest rank's elapsed). Returns (throughput, each rank's elapsed seconds). `cwd`: the
    folder a relative log path (a CLI run's) is relative to.

    Tests check dlperf's arithmetic against this, never against the nominal pace: on a busy
    machine a paced workload is late and catches up, so only its marks say what it did."""
    import json

    raw = (cwd or Path.cwd()) / Path(repeat.log_path).parent
    ranked = sorted(raw.glob(f"repeat-{repeat.index}.events.rank*.jsonl"))
    paths = ranked or [raw / f"repeat-{repeat.index}.events.jsonl"]
    paths.sort(key=lambda p: int(p.name.split("rank")[-1].split(".")[0]) if ranked else 0)
    start, end = repeat.window.start_step, repeat.window.end_step
    samples, elapsed = 0.0, []
    for path in paths:
        marks = {}
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == "step":
                marks[event["step"]] = (event["time"], event["samples"])
        samples += sum(marks[s][1] for s in range(start + 1, end + 1))
        elapsed.append(marks[end][0] - marks[start][0])
    return samples / max(elapsed), elapsed


def check_mfu(result) -> None:
    """A CPU run's MFU, or the honest absence of one: dlperf measures a CPU's peak only on an
    idle machine (a busy one measures it low), so on a busy machine `peak_flops` and `mfu` are
    None and the result says why. Either way the arithmetic holds."""
    import pytest

    from dlperf.system import cpu_peak

    m = result.metrics
    assert m.achieved_flops == pytest.approx(result.model.flops_per_sample * m.throughput.median)
    if m.peak_flops is None:
        assert m.mfu is None
        assert any("no MFU" in w and "busy" in w for w in result.warnings), result.warnings
        assert cpu_peak()["under_load"]  # the one measurement this process made was loaded
    else:
        assert "GEMM" in m.peak_source and 0 < m.mfu < 2
        assert m.mfu == pytest.approx(m.achieved_flops / m.peak_flops)


def workload_processes(root: Path, within_s: float = 10.0) -> list[str]:
    """The calibration workloads of one test still running after up to `within_s` seconds.

    Scoped to the test: a process counts only when its command line or environment names a
    path under `root` (its tmp_path), so another test's or another user's runs on a shared
    machine are never mistaken for this test's leftovers."""
    import time

    import psutil

    def mine() -> list[str]:
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            cmd = " ".join(p.info["cmdline"] or [])
            if "pace.py" not in cmd or p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            try:
                env = " ".join(p.environ().values())
            except psutil.Error:
                env = ""
            if str(root) in cmd or str(root) in env:
                found.append(cmd)
        return found

    deadline = time.monotonic() + within_s
    while (found := mine()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def upstream_mirror(repo: str) -> Path:
    """A local git copy of a public upstream (`owner/name`) for tests of the official
    manifests without network: `$DLPERF_TEST_MIRRORS/<owner>+<name>/repo` (a bare or normal
    clone with the pinned commits). Skips, saying what to set, when there is none."""
    root = os.environ.get("DLPERF_TEST_MIRRORS")
    path = Path(root) / repo.replace("/", "+") / "repo" if root else None
    if path is None or not path.is_dir():
        pytest.skip(
            f"no local copy of github.com/{repo}: set DLPERF_TEST_MIRRORS to a folder holding "
            f"{repo.replace('/', '+')}/repo (a clone), as CI machines have no GitHub access"
        )
    return path


@pytest.fixture(scope="session", autouse=True)
def jax_compilation_cache(tmp_path_factory: pytest.TempPathFactory):
    """One XLA compilation cache for every jax process the tests start (JAX reads
    $JAX_COMPILATION_CACHE_DIR): a tiny ResNet50's step compiles once per session instead of
    once per repeat (28 s -> 5 s of start-up on this 2-core VM). Only the start-up changes: the
    step that runs, and so every window, is the same program. The user's own setting wins."""
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        yield
        return
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(tmp_path_factory.mktemp("jax-cache"))
    yield
    os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
