"""dlperf.envs: isolated per-framework virtual environments (real venvs, tiny requirements)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dlperf import DlperfError, envs
from dlperf.envs import (
    MARKER,
    Env,
    EnvSpec,
    ensure_env,
    env_status,
    envs_root,
    find_interpreter,
    list_envs,
    remove_envs,
)

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
SIX_VERIFY = "import six; print(six.__version__)"
PLAIN_VERIFY = "import sys; print('%d.%d.%d' % sys.version_info[:3])"


def six_spec(**kw) -> EnvSpec:
    return EnvSpec("tiny", "cpu", PY, ("six==1.16.0",), SIX_VERIFY, **kw)


def plain_spec(variant: str = "plain", **kw) -> EnvSpec:
    return EnvSpec("tiny", variant, PY, (), PLAIN_VERIFY, **kw)


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


class Messages(list):
    def __call__(self, message: str) -> None:
        self.append(message)

    def mention(self, word: str) -> bool:
        return any(word in m for m in self)


def test_envs_root(home, monkeypatch):
    assert envs_root() == home / "envs"
    monkeypatch.delenv("DLPERF_HOME")
    assert envs_root() == Path.home() / ".cache" / "dlperf" / "envs"


@pytest.mark.multiprocess
def test_build_then_reuse():
    spec = six_spec()
    assert env_status(spec) == "missing"
    messages = Messages()
    env = ensure_env(spec, log=messages)
    assert messages.mention("building")
    assert env.path == envs_root() / spec.name
    assert env.python == env.path / "bin" / "python"
    assert env.framework_version == "1.16.0"
    assert env_status(spec) == "ready"

    marker = json.loads((env.path / MARKER).read_text())
    assert marker["digest"] == spec.digest
    assert marker["framework_version"] == "1.16.0"
    assert marker["requirements"] == ["six==1.16.0"]
    assert marker["python_version"].startswith(PY + ".")
    assert "six==1.16.0" in marker["pip_freeze"]
    assert marker["created"]
    assert (env.path / "requirements.txt").read_text() == "six==1.16.0\n"
    assert "six" in (env.path / "build.log").read_text()
    assert not (envs_root() / f"{spec.name}.failed.log").exists()

    # The env's python is isolated: its prefix is the env, and six imports from it.
    out = subprocess.run(
        [str(env.python), "-c", "import sys, six; print(sys.prefix); print(six.__file__)"],
        env=env.run_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert Path(out[0]) == env.path
    assert Path(out[1]).is_relative_to(env.path)

    mtime = (env.path / MARKER).stat().st_mtime_ns
    again = Messages()
    started = time.monotonic()
    reused = ensure_env(spec, log=again)
    assert time.monotonic() - started < 3
    assert not again.mention("building")
    assert reused == env
    assert (env.path / MARKER).stat().st_mtime_ns == mtime


def test_digest_and_name(tmp_path):
    spec = six_spec()
    assert re.fullmatch(r"[0-9a-f]{12}", spec.digest)
    assert spec.name == f"tiny-cpu-py{PY}-{spec.digest}"
    assert six_spec().digest == spec.digest  # deterministic
    other = EnvSpec("tiny", "cpu", PY, ("six==1.15.0",), SIX_VERIFY)
    assert other.digest != spec.digest
    assert six_spec(pip_args=("--pre",)).digest != spec.digest
    assert six_spec(lib_dirs=("nvidia/*/lib",)).digest != spec.digest
    assert EnvSpec("tiny", "cpu", PY, ("six==1.16.0",), "import six").digest != spec.digest
    assert EnvSpec("tiny", "cuda", PY, ("six==1.16.0",), SIX_VERIFY).name.startswith("tiny-cuda-")
    # lists are accepted and stored as tuples (the spec stays hashable)
    listed = EnvSpec("tiny", "cpu", PY, ["six==1.16.0"], SIX_VERIFY)
    assert listed.requirements == ("six==1.16.0",)
    assert hash(listed) == hash(spec)

    req = tmp_path / "requirements-cpu.txt"
    req.write_text("# pinned\n\nsix==1.16.0  # tiny\n   \n")
    from_file = EnvSpec.from_requirements_file("tiny", "cpu", PY, req, SIX_VERIFY)
    assert from_file == spec
    with pytest.raises(DlperfError, match="requirements-gpu.txt"):
        EnvSpec.from_requirements_file("tiny", "gpu", PY, tmp_path / "requirements-gpu.txt", "")
    with pytest.raises(DlperfError, match="major.minor"):
        EnvSpec("tiny", "cpu", "3", (), "")
    with pytest.raises(DlperfError, match="no '-'"):
        EnvSpec("ti-ny", "cpu", PY, (), "")


@pytest.mark.multiprocess
def test_repair_half_built_and_corrupted():
    spec = plain_spec()
    env = ensure_env(spec)
    assert env.framework_version == ".".join(map(str, sys.version_info[:3]))

    # Another process holds the lock: ensure_env waits for it, then reuses the env.
    messages = Messages()
    result: list[Env] = []
    with open(envs_root() / f"{spec.name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        waiter = threading.Thread(target=lambda: result.append(ensure_env(spec, log=messages)))
        waiter.start()
        time.sleep(0.5)
        assert waiter.is_alive() and not result
        fcntl.flock(lock, fcntl.LOCK_UN)
    waiter.join(30)
    assert result == [env]
    assert messages.mention("waiting")

    # Half-built (interrupted before the marker was written).
    (env.path / MARKER).unlink()
    assert env_status(spec) == "broken"
    messages = Messages()
    ensure_env(spec, log=messages)
    assert messages.mention(f"rebuilding broken env {spec.name}: no marker")
    assert env_status(spec) == "ready"

    # Corrupted: the venv's python is gone.
    (env.path / "bin" / "python").unlink()
    assert env_status(spec) == "broken"
    messages = Messages()
    rebuilt = ensure_env(spec, log=messages)
    assert messages.mention(f"rebuilding broken env {spec.name}:")
    assert rebuilt.python.exists()
    assert env_status(spec) == "ready"


@pytest.mark.multiprocess
def test_failing_requirement_leaves_no_env():
    spec = EnvSpec("tiny", "bad", PY, ("dlperf-no-such-package-xyz==0.0.1",), SIX_VERIFY)
    with pytest.raises(DlperfError) as info:
        ensure_env(spec)
    failed_log = envs_root() / f"{spec.name}.failed.log"
    message = str(info.value)
    assert str(failed_log) in message
    assert "pip install" in message
    assert "dlperf-no-such-package-xyz" in message  # the log tail shows pip's complaint
    assert not (envs_root() / spec.name).exists()
    assert failed_log.is_file()
    assert "dlperf-no-such-package-xyz" in failed_log.read_text()
    assert env_status(spec) == "missing"
    assert list_envs() == []


@pytest.mark.multiprocess
def test_failing_verify_leaves_no_env():
    spec = EnvSpec("tiny", "noverify", PY, (), "import sys; print('oops'); sys.exit(3)")
    with pytest.raises(DlperfError, match="exited with status 3") as info:
        ensure_env(spec)
    assert "oops" in str(info.value)
    assert not (envs_root() / spec.name).exists()
    assert (envs_root() / f"{spec.name}.failed.log").is_file()


@pytest.mark.multiprocess
def test_a_verify_that_prints_nothing_leaves_no_env():
    spec = EnvSpec("tiny", "silent", PY, (), "pass")
    with pytest.raises(DlperfError, match="printed nothing; it must print the framework version"):
        ensure_env(spec)
    assert not (envs_root() / spec.name).exists()


@pytest.mark.multiprocess
def test_a_full_disk_during_a_build_says_where(monkeypatch):
    spec = plain_spec("full")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(envs, "_write_marker", full)  # the build's own files, not a step's
    with pytest.raises(DlperfError, match="No space left on device; check free disk space") as info:
        ensure_env(spec)
    assert f"under {envs_root()} and run again" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)
    assert not (envs_root() / spec.name).exists()


def test_interrupted_build_is_removed(monkeypatch):
    spec = plain_spec("interrupted")

    def interrupt(*args, **kwargs):
        assert (envs_root() / spec.name / "requirements.txt").exists()
        raise KeyboardInterrupt

    monkeypatch.setattr(envs, "_run_logged", interrupt)
    with pytest.raises(KeyboardInterrupt):
        ensure_env(spec)
    assert not (envs_root() / spec.name).exists()
    assert env_status(spec) == "missing"


def _version_of(exe: Path) -> str:
    return subprocess.run(
        [str(exe), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_find_interpreter(monkeypatch, tmp_path):
    monkeypatch.setattr(envs, "_INTERPRETERS", {})
    exe = find_interpreter(PY)
    assert _version_of(exe) == PY
    assert find_interpreter(PY) == exe  # cached

    # A shim that refuses to run, earlier on PATH, is skipped.
    shims = tmp_path / "shims"
    shims.mkdir()
    for version in ("3.10", PY):
        shim = shims / f"python{version}"
        shim.write_text("#!/bin/sh\necho 'pyenv: version not selected' >&2\nexit 127\n")
        shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(envs, "_INTERPRETERS", {})
    assert _version_of(find_interpreter(PY)) == PY
    try:
        py310 = find_interpreter("3.10")
    except DlperfError:
        pytest.skip("no Python 3.10 on this machine (pyenv install 3.10)")
    assert _version_of(py310) == "3.10"

    with pytest.raises(DlperfError, match=r"2\.5") as info:
        find_interpreter("2.5")
    assert "pyenv install 2.5" in str(info.value)
    assert "uv python install 2.5" in str(info.value)


def test_find_interpreter_via_uv(monkeypatch, tmp_path):
    """No python3.X on PATH and no pyenv: `uv python find` is asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text(f'#!/bin/sh\n[ "$1 $2 $3" = "python find {PY}" ] && echo {sys.executable}\n')
    uv.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setattr(envs, "_INTERPRETERS", {})
    assert _version_of(find_interpreter(PY)) == PY
    with pytest.raises(DlperfError, match="uv python install 3.99"):
        find_interpreter("3.99")


@pytest.mark.multiprocess
def test_list_and_remove():
    assert list_envs() == []
    with pytest.raises(DlperfError, match="existing envs: none"):
        remove_envs("tiny")

    spec = plain_spec()
    env = ensure_env(spec)
    half_built = envs_root() / "tiny-gpu-py3.11-0123456789ab"
    (half_built / "bin").mkdir(parents=True)
    stray = envs_root() / "not-an-env"
    stray.mkdir()

    records = {r.name: r for r in list_envs()}
    assert set(records) == {spec.name, half_built.name, stray.name}
    ready = records[spec.name]
    assert ready.state == "ready"
    assert ready.path == env.path
    assert (ready.framework, ready.variant, ready.python) == ("tiny", "plain", PY)
    assert ready.framework_version == env.framework_version
    assert ready.size_bytes > 1000
    assert ready.created
    assert ready.spec == spec
    assert ready.env() == env
    broken = records[half_built.name]
    assert broken.state == "broken"
    assert (broken.framework, broken.variant, broken.python) == ("tiny", "gpu", "3.11")
    assert broken.framework_version is None
    with pytest.raises(DlperfError, match="broken"):
        broken.env()
    assert records[stray.name].state == "broken"
    assert records[stray.name].framework is None

    with pytest.raises(DlperfError) as info:
        remove_envs("pytorch")
    assert spec.name in str(info.value) and half_built.name in str(info.value)
    with pytest.raises(DlperfError):
        remove_envs("../x")
    assert remove_envs("tiny-gpu") == [half_built]
    with pytest.raises(DlperfError):
        remove_envs("ti")  # only whole "-"-separated parts match: "ti" is not "tiny"
    assert remove_envs("tiny") == [env.path]
    assert [r.name for r in list_envs()] == [stray.name]
    assert env_status(spec) == "missing"


def test_run_env(tmp_path):
    spec = plain_spec(lib_dirs=("nvidia/*/lib", "missing/lib"))
    path = tmp_path / "env"
    site = path / "lib" / f"python{PY}" / "site-packages"
    cudnn = site / "nvidia" / "cudnn" / "lib"
    cublas = site / "nvidia" / "cublas" / "lib"
    cudnn.mkdir(parents=True)
    cublas.mkdir(parents=True)
    (site / "nvidia" / "notadir").mkdir()
    env = Env(spec, path, path / "bin" / "python", "0")
    base = {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/old", "PYTHONPATH": "/x", "HOME": "/h"}
    result = env.run_env(base)
    assert result["LD_LIBRARY_PATH"].split(os.pathsep) == [str(cublas), str(cudnn), "/old"]
    assert result["PATH"] == f"{path / 'bin'}{os.pathsep}/usr/bin"
    assert result["VIRTUAL_ENV"] == str(path)
    assert result["PYTHONNOUSERSITE"] == "1"
    assert "PYTHONPATH" not in result
    assert result["HOME"] == "/h"
    assert base["PYTHONPATH"] == "/x"  # the base is not modified

    bare = Env(plain_spec(), path, path / "bin" / "python", "0").run_env({"PATH": "/bin"})
    assert "LD_LIBRARY_PATH" not in bare
