import os
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
