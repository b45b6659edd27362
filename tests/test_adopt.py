"""Bring your own environment (`--python PATH`): the interpreter is probed and refused with the
fix when it lacks something, measured as it is, never changed, and recorded in the result."""

import json
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

import psutil
import pytest

from dlperf import DlperfError, system
from dlperf.adapters import get_adapter
from dlperf.assemble import build_result
from dlperf.envs import adopt_interpreter, ensure_env
from dlperf.schema import Environment, Repeat, RepeatStatus, ResultStatus, Window
from dlperf.spec import resolve_spec

pytestmark = pytest.mark.multiprocess  # every probe runs the interpreter
ENVIRONMENT = Environment(dlperf_version="test", host="test-host", os="linux")
PYTORCH = get_adapter("pytorch")


def adopt(python, **kw):
    return adopt_interpreter(python, framework="pytorch", verify=PYTORCH.launch.verify, **kw)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A Python with nothing installed: no framework, no LoadGen."""
    where = tmp_path_factory.mktemp("bare")
    venv.create(where, with_pip=False)
    return where / "bin" / "python"


def test_a_path_that_is_not_a_python_is_refused(tmp_path, monkeypatch):
    with pytest.raises(DlperfError, match="no such file"):
        adopt(tmp_path / "nope")
    with pytest.raises(DlperfError, match="is a folder; give the interpreter itself"):
        adopt(tmp_path)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(DlperfError, match="is not executable"):
        adopt(text)
    with pytest.raises(DlperfError, match="did not run as a Python interpreter"):
        adopt("/bin/true")
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho 'segmentation fault' >&2\nexit 139\n")
    script.chmod(0o755)
    with pytest.raises(DlperfError, match="exit 139: segmentation fault"):
        adopt(script)
    monkeypatch.chdir(tmp_path)  # ./python is that file, never a `python` found on PATH
    with pytest.raises(DlperfError, match=f"--python {script} .*exit 139: segmentation fault"):
        adopt("./python")


def fake_python(where: Path, body: str, *, real_describe: bool = False) -> Path:
    """A small executable script standing in for an interpreter; `real_describe`: the real
    Python answers dlperf's description probe (the one that reads importlib.metadata), the
    script itself every other check."""
    script = where / "python"
    forward = f'case "$2" in *metadata*) exec {sys.executable} "$@";; esac\n'
    script.write_text("#!/bin/bash\n" + (forward if real_describe else "") + body)
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(
    "version", ['"three.eleven"', "3.11", '"3.11"', '"3.11.7\\u001b[2J"', "null"]
)
def test_a_probe_reporting_a_non_numeric_version_is_refused(tmp_path, version):
    answer = f'{{"version": {version}, "executable": "/x/python", "prefix": "/x", "dists": []}}'
    python = fake_python(tmp_path, f"echo '{answer}'\n")
    with pytest.raises(DlperfError) as err:
        adopt(python)
    message = str(err.value)
    assert message.startswith(f"--python {python} did not run as a Python interpreter (it ")
    assert "reported the Python version" in message and "not X.Y.Z" in message
    assert "\x1b" not in message  # quoted as repr: an escape is never sent to the terminal


def test_a_probe_answering_with_the_wrong_shapes_is_refused(tmp_path):
    answer = '{"version": "3.11.7", "executable": "/x/python", "prefix": "/x", "dists": 5}'
    with pytest.raises(DlperfError, match="distributions in another form"):
        adopt(fake_python(tmp_path, f"echo '{answer}'\n"))


def test_a_probe_printing_50_mb_on_one_line_is_quoted_by_its_tail(tmp_path):
    flood = "head -c 50000000 /dev/zero | tr '\\0' x >&2\necho ' the end' >&2\nexit 3\n"
    with pytest.raises(DlperfError) as err:
        adopt(fake_python(tmp_path, flood))
    message = str(err.value)
    assert len(message) < 4000  # a few KB, not 50 MB
    assert "exit 3: …xxxx" in message and message.count("x") > 500
    # the framework check, the real Python having described itself: stdout and stderr floods
    python = fake_python(tmp_path, "head -c 50000000 /dev/zero | tr '\\0' 7\n", real_describe=True)
    with pytest.raises(DlperfError) as err:
        adopt(python)
    assert "printed …7777" in str(err.value) and "not a version" in str(err.value)
    assert len(str(err.value)) < 4000


def test_a_probe_that_hangs_is_ended_with_every_process_it_started(tmp_path, monkeypatch):
    from dlperf import envs

    pids = tmp_path / "pids"
    body = (
        f"sleep 600 & echo $! >> {pids}\n"
        f"setsid sleep 600 & echo $! >> {pids}\n"  # one that left the process group
        f"echo $$ >> {pids}\n"
        "sleep 600\n"
    )
    monkeypatch.setattr(envs, "_PROBE_TIMEOUT_S", 1.0)
    with pytest.raises(DlperfError) as err:
        adopt(fake_python(tmp_path, body))
    assert "did not finish within 1 s; it was stopped with every process it started" in str(
        err.value
    )
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == 3
    assert all(wait_gone(pid) for pid in started), [p for p in started if not gone(p)]
    # the framework check has its own, longer deadline, ended the same way
    pids.unlink()
    monkeypatch.setattr(envs, "_VERIFY_TIMEOUT_S", 1.0)
    with pytest.raises(DlperfError, match="cannot run pytorch: it did not finish within 1 s"):
        adopt(fake_python(tmp_path, body, real_describe=True))
    assert all(wait_gone(int(pid)) for pid in pids.read_text().split())


def gone(pid: int) -> bool:
    """True once `pid` no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, within_s: float = 10.0) -> bool:
    """A killed process disappears asynchronously: allow a moment."""
    deadline = time.monotonic() + within_s
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return gone(pid)


def test_a_python_without_the_framework_is_refused_with_the_install_line(bare_python):
    with pytest.raises(DlperfError) as err:
        adopt(bare_python, install="torch==2.13.0")
    message = str(err.value)
    assert "cannot run pytorch" in message and "No module named 'torch'" in message
    assert f"{bare_python} -m pip install torch==2.13.0" in message
    # dlperf installed nothing into it
    assert not list(bare_python.parent.parent.glob("lib/python*/site-packages/*torch*"))


def test_loadgen_is_checked_only_when_a_scenario_needs_it(bare_python):
    verify = "import platform; print(platform.python_version())"
    env, info = adopt_interpreter(bare_python, framework="calibration", verify=verify)
    assert env.kind == "adopted" and env.python == bare_python and info.dists == ()
    with pytest.raises(DlperfError, match="pip install mlcommons-loadgen"):
        adopt_interpreter(bare_python, framework="calibration", verify=verify, need_loadgen=True)


def test_an_old_python_is_refused(tmp_path):
    old = next((p for p in Path.home().glob(".pyenv/versions/3.[6-9]*/bin/python3")), None)
    if old is None:
        pytest.skip("no Python older than 3.10 under ~/.pyenv")
    with pytest.raises(DlperfError, match="need Python >= 3.10"):
        adopt(old)


def test_the_host_python_runs_the_calibration_workload_as_adopted(tmp_path):
    """A whole run through --python, and what the result records."""
    out = subprocess.run(
        [
            sys.executable, "-m", "dlperf", "run", "calibration", "pace", "--preset", "smoke",
            "--repeats", "2", "--set", "step_ms=10", "--python", sys.executable, "--json",
        ],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    env = result["environment"]
    assert env["env_kind"] == "adopted" and env["interpreter"] == sys.executable
    assert env["env_name"] is None and len(env["dists_digest"]) == 16
    assert {r["env_digest"] for r in result["repeats"]} == {env["dists_digest"]}


def _repeat(index: int, digest: str) -> Repeat:
    window = Window(start_step=2, end_step=7, samples=50.0, elapsed_s=0.1)
    return Repeat(
        index=index,
        status=RepeatStatus.ok,
        throughput=500.0,
        window=window,
        workload={"framework_version": "2.13.0"},
        env_digest=digest,
    )


def test_repeats_from_different_installs_are_never_pooled():
    spec = resolve_spec("calibration", "pace", preset="smoke")
    result = build_result(
        spec, "id", [_repeat(1, "aaaa"), _repeat(2, "bbbb")], environment=ENVIRONMENT
    )
    assert [r.status for r in result.repeats] == [RepeatStatus.ok, RepeatStatus.inconsistent]
    assert result.status == ResultStatus.partial and result.metrics.throughput.n == 1


@pytest.mark.skipif(system.nvidia_gpu_found(), reason="this host has an NVIDIA GPU")
def test_device_cuda_without_a_gpu_is_refused_before_any_env_is_built(tmp_path):
    env = {**os.environ, "DLPERF_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, "-m", "dlperf", "run", "pytorch", "resnet50", "--device", "cuda"],
        cwd=tmp_path, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert out.returncode == 1
    assert "no usable NVIDIA GPU" in out.stderr and "--device cpu" in out.stderr
    assert not (tmp_path / "home" / "envs").exists()  # nothing was built
    # A dry run only prints what would run, for a GPU cluster: not refused.
    dry = subprocess.run(
        [sys.executable, "-m", "dlperf", "run", "pytorch", "resnet50", "--device", "cuda",
         "--dry-run"],
        cwd=tmp_path, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert dry.returncode == 0 and "--channels-last 1" in dry.stdout


@pytest.mark.framework
def test_the_built_pytorch_env_adopted_as_if_it_were_foreign(tmp_path):
    built = ensure_env(PYTORCH.env_spec("cpu"))
    marker = built.path / ".dlperf-env.json"
    before = (marker.read_bytes(), sorted(p.name for p in built.path.iterdir()))
    home = tmp_path / "home"
    env = {**os.environ, "DLPERF_HOME": str(home)}
    argv = [sys.executable, "-m", "dlperf", "run", "pytorch", "resnet50", "--preset", "smoke"]
    argv += ["--repeats", "2", "--python", str(built.python), "--json"]
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "ok"
    environment = result["environment"]
    assert environment["env_kind"] == "adopted"
    assert environment["interpreter"] == str(built.python)
    assert environment["framework_version"] == built.framework_version
    assert not (home / "envs").exists()  # dlperf built nothing of its own
    assert (marker.read_bytes(), sorted(p.name for p in built.path.iterdir())) == before
    # The same install as the built env: the same digest as a run through the built env.
    _, info = adopt(built.python)
    assert environment["dists_digest"] == info.dists_digest
    with pytest.raises(DlperfError, match="cannot use a GPU there.*is_available\\(\\) is False"):
        adopt(built.python, cuda_check=PYTORCH.launch.cuda_check)


def test_dry_runs_name_the_adopted_interpreter_for_built_in_and_official_code(tmp_path):
    python = tmp_path / "site" / "bin" / "python3"  # there, but a dry run does not probe it
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    for impl in ("ootb", "official"):
        out = subprocess.run(
            [sys.executable, "-m", "dlperf", "run", "pytorch", "resnet50", "--impl", impl,
             "--python", str(python), "--dry-run"],
            cwd=tmp_path, capture_output=True, text=True,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert f"{python} " in out.stdout, out.stdout
