"""A results folder dlperf cannot read, made so for real: root without its DAC capabilities
(`setpriv` drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH), or the unprivileged uid 65534,
against folders of mode 000, rw- (listed but not entered) and -wx (entered and written but not
listed). Every command that reads or writes results must exit 1 naming the folder and the
reason: no traceback, never "no results", nothing written into it.

The commands run through the real CLI (`dlperf.cli.main`), all of one setting in one process
under the dropped privileges, so that the test stays fast."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.multiprocess

NO_DAC = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

# Each command, as a user types it, against the folder D (and the readable folder ok).
COMMANDS = [
    ["run", "calibration", "pace", "--preset", "smoke", "--repeats", "1", "--results-dir", "D"],
    ["sweep", "one.toml", "--results-dir", "D"],
    ["sweep", "one.toml", "--no-resume", "--results-dir", "D"],
    ["history", "--results-dir", "D"],
    ["report", "--results-dir", "D", "--reports-dir", "reports"],
    ["publish", "--results-dir", "D", "--out", "site"],
    ["export", "--format", "csv", "--results-dir", "D"],
    ["score", "--freeze", "reference.json", "--results-dir", "D"],
    ["compare", "ok", "D"],
    ["compare", "D", "ok"],
    ["parse", "calibration", "pace", "EVENTS", "--batch-size", "10", "--results-dir", "D"],
]

# Runs every command given as JSON in argv[1] through dlperf's CLI, in this one process;
# prints [{argv, code, output}] as JSON.
DRIVER = """
import contextlib, io, json, sys
from dlperf.cli import main

outcomes = []
for argv in json.loads(sys.argv[1]):
    sys.argv = ["dlperf", *argv]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # what a user would see as a traceback
            code, _ = "traceback", out.write(f"Traceback: {type(exc).__name__}: {exc}")
    outcomes.append({"argv": argv, "code": code, "output": out.getvalue()})
print(json.dumps(outcomes))
"""


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """A folder every uid can enter (pytest's own tmp is root's alone), with one real result
    in `ok/`, a one-configuration sweep file and the driver."""
    where = Path(tempfile.mkdtemp(prefix="dlperf-unreadable-"))
    where.chmod(0o755)
    subprocess.run(
        [sys.executable, "-m", "dlperf", "run", "calibration", "pace", "--preset", "smoke",
         "--repeats", "1", "--skip", "2", "--measure", "5", "--results-dir", "ok"],
        cwd=where, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (where / "one.toml").write_text(
        '[sweep]\npreset = "smoke"\nframeworks = ["calibration"]\nmodels = ["pace"]\n'
        "repeats = 1\nskip = 2\nmeasure = 5\n"
    )
    (where / "driver.py").write_text(DRIVER)
    subprocess.run(["chmod", "-R", "a+rwX", str(where)], check=True)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def drop_privileges(how: list[str]) -> None:
    """Skip, saying why, where this machine cannot drop them (not root, no setpriv)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges with setpriv (a chmod alone binds a user)")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) on this machine")
    probe = subprocess.run([*how, sys.executable, "-c", "import dlperf"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"{' '.join(how)} cannot run this Python: {probe.stderr.decode()[-300:]}")


@pytest.mark.parametrize(
    "who, mode",
    [
        ("root without DAC capabilities", 0o000),
        ("root without DAC capabilities", 0o600),  # its names listed, no file opened
        ("root without DAC capabilities", 0o300),  # written, not listed
        ("uid 65534", 0o700),  # root's folder
    ],
)
def test_every_command_refuses_a_results_folder_it_cannot_read(workdir, tmp_path, who, mode):
    how = NO_DAC if who.startswith("root") else NOBODY
    drop_privileges(how)
    folder = workdir / "D"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(workdir / "ok", folder)  # results it holds, but cannot show
    folder.chmod(mode)
    before = sorted(str(p) for p in folder.rglob("*"))
    events = next((workdir / "ok").rglob("repeat-1.events.jsonl"))
    commands = [[str(events) if a == "EVENTS" else a for a in argv] for argv in COMMANDS]
    try:
        done = subprocess.run(
            [*how, sys.executable, "driver.py", json.dumps(commands)],
            cwd=workdir, capture_output=True, text=True, timeout=600,
            env={**os.environ, "DLPERF_HOME": str(workdir / "home"), "HOME": str(workdir)},
        )  # fmt: skip
    finally:
        folder.chmod(0o755)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.splitlines()[-1])
    for outcome in outcomes:
        said = " ".join(outcome["output"].split())  # rich wraps long lines
        what = f"{' '.join(outcome['argv'])} ({who}, mode {mode:03o}): {said[-600:]}"
        assert outcome["code"] == 1, what
        assert "Traceback" not in said, what
        assert "cannot read the results folder D: Permission denied" in said, what
        assert "no results" not in said, what
    assert sorted(str(p) for p in folder.rglob("*")) == before  # nothing written into it
    assert not (workdir / "site").exists() and not (workdir / "reports").exists()
