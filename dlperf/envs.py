"""One isolated virtual environment per framework and variant.

Layout under :func:`envs_root`::

    <name>/                  the venv (``<name>`` = ``<framework>-<variant>-py<X.Y>-<digest>``)
        requirements.txt     what was installed
        build.log            every build command and its output
        .dlperf-env.json     the marker, written last: the env is complete and verified
    <name>.lock              flock held while checking or building <name>
    <name>.failed.log        the build log of the last failed build of <name>

An env directory without a valid marker is half-built (failed, interrupted or corrupted):
:func:`ensure_env` removes and rebuilds it.

An *adopted* interpreter (``--python PATH``: an NGC container's, a conda env's, a cluster
module's) is measured as it is: :func:`adopt_interpreter` probes it (a Python, the framework
importable, CUDA and LoadGen when asked) and refuses it with the fix when something is missing;
dlperf never installs into, repairs or deletes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from dlperf import DlperfError
from dlperf.files import atomic_write, dlperf_home
from dlperf.proc import run_process, tail
from dlperf.redact import stored_argv

# Bump when the on-disk layout or the build recipe changes: every env digest changes with it.
ENV_LAYOUT_VERSION = 1
MARKER = ".dlperf-env.json"
BUILD_LOG = "build.log"
REQUIREMENTS = "requirements.txt"

_PYTHON_RE = re.compile(r"^\d+\.\d+$")
_FRAMEWORK_RE = re.compile(r"^[A-Za-z0-9_.+]+$")  # no "-": names are split on it
_VARIANT_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")
_NAME_RE = re.compile(
    r"^(?P<framework>[^-]+)-(?P<variant>.+)-py(?P<python>\d+\.\d+)-(?P<digest>[0-9a-f]{12})$"
)
_PROBE = "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)"
_LOG_TAIL_LINES = 20
_VERIFY_TIMEOUT_S = 900
_PROBE_TIMEOUT_S = 30

Log = Callable[[str], None]


def _no_log(message: str) -> None:
    pass


# --------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class EnvSpec:
    """What to build: interpreter version, pinned requirements, and how to check the result."""

    framework: str  # "pytorch"
    variant: str  # "cpu" | "cuda" | "host" ...
    python: str  # "3.11" (major.minor)
    requirements: tuple[str, ...]  # pinned pip requirement lines
    verify: str  # code run in the env; exits 0, prints the framework version as its last line
    pip_args: tuple[str, ...] = ()  # extra `pip install` arguments (e.g. --extra-index-url URL)
    lib_dirs: tuple[str, ...] = ()  # site-packages-relative globs prepended to LD_LIBRARY_PATH

    def __post_init__(self) -> None:
        for field_name in ("requirements", "pip_args", "lib_dirs"):
            value = getattr(self, field_name)
            if isinstance(value, str):
                raise DlperfError(
                    f"EnvSpec.{field_name} must be a sequence of strings, not the string "
                    f"{value!r}; wrap it in a tuple"
                )
            object.__setattr__(self, field_name, tuple(str(item) for item in value))
        if not _FRAMEWORK_RE.match(self.framework):
            raise DlperfError(
                f"env framework {self.framework!r} must be letters, digits, '_', '.' or '+' "
                "(no '-'); rename it in the adapter"
            )
        if not _VARIANT_RE.match(self.variant):
            raise DlperfError(
                f"env variant {self.variant!r} must be letters, digits, '_', '.', '+' or '-'; "
                "rename it in the adapter"
            )
        if not _PYTHON_RE.match(self.python):
            raise DlperfError(
                f"env python {self.python!r} must be a major.minor version such as '3.11'; "
                "fix it in the adapter"
            )
        for line in self.requirements:
            if not line.strip() or "\n" in line or line.lstrip().startswith("#"):
                raise DlperfError(
                    f"env requirement {line!r} for {self.framework}-{self.variant} is blank, a "
                    "comment or spans lines; give one requirement per entry"
                )

    @property
    def digest(self) -> str:
        payload = json.dumps(
            [
                ENV_LAYOUT_VERSION,
                self.framework,
                self.variant,
                self.python,
                list(self.requirements),
                list(self.pip_args),
                list(self.lib_dirs),
                self.verify,
            ],
            separators=(",", ":"),
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    @property
    def name(self) -> str:
        return f"{self.framework}-{self.variant}-py{self.python}-{self.digest}"

    @classmethod
    def from_requirements_file(
        cls, framework: str, variant: str, python: str, path: Path, verify: str, **kw: Any
    ) -> EnvSpec:
        """Read pinned requirement lines from `path`, dropping comments and blank lines."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise DlperfError(
                f"cannot read the requirements file for {framework} {variant}: {path} "
                f"({exc.strerror or exc}); create it or pick another variant"
            ) from exc
        return cls(framework, variant, python, parse_requirements(text), verify, **kw)


def parse_requirements(text: str) -> tuple[str, ...]:
    """Requirement lines of a requirements.txt: comments (`#` at line start or after a space)
    and blank lines removed."""
    lines = []
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line:
            lines.append(line)
    return tuple(lines)


# --------------------------------------------------------------------------- envs


def _site_packages(path: Path, python: str | None) -> list[Path]:
    if python:
        return [path / "lib" / f"python{python}" / "site-packages"]
    return sorted(path.glob("lib/python*/site-packages"))


@dataclass(frozen=True)
class Env:
    """A built, verified env (or one found on disk, with `spec` None when unknown), or an
    adopted interpreter (`kind` "adopted": `path` is its sys.prefix, `python` as given)."""

    spec: EnvSpec | None
    path: Path
    python: Path  # path/bin/python
    framework_version: str
    kind: str = "built"  # "built" | "adopted"

    @property
    def bin_dir(self) -> Path:
        return self.path / "bin"

    def lib_paths(self) -> list[Path]:
        """Directories matched by the spec's lib_dirs globs, in glob order."""
        if self.spec is None or not self.spec.lib_dirs:
            return []
        found: list[Path] = []
        for site in _site_packages(self.path, self.spec.python):
            for pattern in self.spec.lib_dirs:
                for match in sorted(site.glob(pattern)):
                    if match.is_dir() and match not in found:
                        found.append(match)
        return found

    def run_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """A complete environment for running this env's python. An adopted interpreter runs
        in the user's own environment unchanged (its PYTHONPATH or a module's variables may be
        what makes it work)."""
        env = dict(os.environ if base is None else base)
        if self.kind == "adopted":
            return env
        env["VIRTUAL_ENV"] = str(self.path)
        env["PATH"] = os.pathsep.join(p for p in (str(self.bin_dir), env.get("PATH", "")) if p)
        libs = [str(p) for p in self.lib_paths()]
        if libs:
            old = env.get("LD_LIBRARY_PATH", "")
            env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + ([old] if old else []))
        env["PYTHONNOUSERSITE"] = "1"
        env.pop("PYTHONPATH", None)
        env.pop("PYTHONHOME", None)  # would point the venv's python at another stdlib
        return env


@dataclass(frozen=True)
class EnvRecord:
    """An env directory found on disk by :func:`list_envs`."""

    name: str
    path: Path
    state: str  # "ready" | "broken" (half-built, interrupted or corrupted)
    framework: str | None
    variant: str | None
    python: str | None  # major.minor
    framework_version: str | None
    size_bytes: int
    created: str | None  # ISO 8601 (UTC) from the marker; the dir's mtime when broken
    spec: EnvSpec | None = None

    def env(self) -> Env:
        if self.state != "ready" or self.framework_version is None:
            raise DlperfError(
                f"env {self.name} is {self.state}; rebuild it by running the benchmark again "
                "or remove it"
            )
        return Env(self.spec, self.path, self.path / "bin" / "python", self.framework_version)


def envs_root() -> Path:
    """$DLPERF_HOME/envs if DLPERF_HOME is set, else ~/.cache/dlperf/envs."""
    return dlperf_home() / "envs"


# --------------------------------------------------------------------------- interpreters

_INTERPRETERS: dict[str, Path] = {}


def _probe(exe: str | Path, version: str) -> Path | None:
    """The real executable behind `exe` if it runs and is Python `version`; else None."""
    try:
        proc = subprocess.run(
            [str(exe), "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) < 2 or lines[0].strip() != version:
        return None
    real = Path(lines[1].strip())
    return real if real.is_absolute() and real.exists() else Path(exe)


def _path_candidates(version: str) -> Iterator[str]:
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    for folder in dirs:  # python3.X exists wherever python3 is X (system, pyenv, conda, venv)
        exe = os.path.join(folder, f"python{version}")
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            yield exe


def _pyenv_candidates(version: str) -> Iterator[str]:
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    pyenv = shutil.which("pyenv")
    if pyenv is None and (root / "bin" / "pyenv").is_file():
        pyenv = str(root / "bin" / "pyenv")
    names: list[str] = []
    if pyenv:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pyenv, "versions", "--bare"],
                capture_output=True,
                text=True,
                timeout=_PROBE_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            ).stdout
            names = out.split()
    if not names and (root / "versions").is_dir():
        names = [p.name for p in (root / "versions").iterdir()]
    pattern = re.compile(rf"^{re.escape(version)}(?:\.(\d+))?$")
    matches = [(int(m.group(1) or 0), n) for n in names if (m := pattern.match(n))]
    for _, full in sorted(matches, reverse=True):
        prefix: Path | None = None
        if pyenv:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                proc = subprocess.run(
                    [pyenv, "prefix", full],
                    capture_output=True,
                    text=True,
                    timeout=_PROBE_TIMEOUT_S,
                    stdin=subprocess.DEVNULL,
                )
                if proc.returncode == 0 and proc.stdout.strip():
                    prefix = Path(proc.stdout.strip().splitlines()[0])
        if prefix is None:
            prefix = root / "versions" / full
        for name in (f"python{version}", "python3"):
            yield str(prefix / "bin" / name)


def _uv_candidates(version: str) -> Iterator[str]:
    uv = shutil.which("uv")
    if not uv:
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        proc = subprocess.run(
            [uv, "python", "find", version],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            yield proc.stdout.strip().splitlines()[-1]


def find_interpreter(version: str) -> Path:
    """A real Python `version` (major.minor) executable: PATH first, then pyenv, then uv.

    Every candidate is run once to check its version, so shims that refuse to run (pyenv shims
    for a version not selected) are skipped. The result is cached for the process.
    """
    if not _PYTHON_RE.match(version):
        raise DlperfError(f"Python version {version!r} must be major.minor, such as '3.11'")
    cached = _INTERPRETERS.get(version)
    if cached is not None:
        return cached
    seen: set[str] = set()
    for source in (_path_candidates, _pyenv_candidates, _uv_candidates):
        for exe in source(version):
            key = os.path.realpath(exe)
            if key in seen:
                continue
            seen.add(key)
            found = _probe(exe, version)
            if found is not None:
                _INTERPRETERS[version] = found
                return found
    raise DlperfError(
        f"no Python {version} interpreter found (looked on PATH for python{version}, "
        f"in pyenv, and with `uv python find {version}`); install one with "
        f"`pyenv install {version}` or `uv python install {version}` and run again"
    )


# --------------------------------------------------------------------------- locking


@contextlib.contextmanager
def _env_lock(name: str, log: Log) -> Iterator[None]:
    root = envs_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{name}.lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another dlperf process to finish with env {name}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- checking


def _read_marker(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _check(spec: EnvSpec, path: Path) -> tuple[str, str, dict[str, Any] | None]:
    """(state, reason, marker) with state "ready" | "missing" | "broken"."""
    if not path.exists():
        return "missing", "not built", None
    if not (path / MARKER).exists():
        return "broken", "no marker (half-built or interrupted build)", None
    marker = _read_marker(path)
    if marker is None:
        return "broken", "unreadable marker", None
    if marker.get("digest") != spec.digest:
        return "broken", f"marker digest {marker.get('digest')!r} != {spec.digest!r}", None
    if not isinstance(marker.get("framework_version"), str):
        return "broken", "marker has no framework_version", None
    python = path / "bin" / "python"
    if not python.exists():
        return "broken", f"{python} is missing", None
    try:
        proc = subprocess.run(
            [str(python), "-c", "import sys"],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            env=Env(spec, path, python, "").run_env(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return "broken", f"{python} does not run ({exc})", None
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or [""])[-1]
        return "broken", f"{python} does not run (exit {proc.returncode}: {detail})", None
    return "ready", "", marker


# --------------------------------------------------------------------------- adopted interpreters

# Runs in the adopted interpreter (any Python 3): what it is and what is installed in it.
_DESCRIBE = r"""
import json, sys
sys.path = [p for p in sys.path if p]  # `-c` puts the working folder first: not the install
try:
    from importlib import metadata
    dists = sorted({"%s==%s" % (d.metadata["Name"], d.version) for d in metadata.distributions()
                    if d.metadata["Name"]})
except Exception:
    dists = []
print(json.dumps({"version": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
                  "prefix": sys.prefix, "dists": dists}))
"""
ADOPTED_MIN_PYTHON = (3, 10)  # the workload scripts use 3.10 syntax (zip strict, X | Y)
_LOADGEN_CHECK = "import mlperf_loadgen"


@dataclass(frozen=True)
class InterpreterInfo:
    """What an interpreter is: version, real executable, prefix and installed distributions."""

    python: Path  # as given (a venv's bin/python must not be resolved past the venv)
    version: str
    executable: str
    prefix: Path
    dists: tuple[str, ...]

    @property
    def dists_digest(self) -> str:
        """sha256 (first 16 hex) of the sorted name==version lines: same digest, same install."""
        return hashlib.sha256("\n".join(self.dists).encode()).hexdigest()[:16]


# What a refusal quotes of a probe's stderr: its last line, at most this long (a probe may print
# a 50 MB line); and the most of its stdout that is read back (the last line is its answer).
_QUOTE_CHARS = 1000
_ANSWER_CHARS = 4 << 20  # _DESCRIBE's list of installed distributions can be long
_PROBE_KILL_GRACE_S = 2.0


@dataclass(frozen=True)
class _Probed:
    """How a probe of an interpreter ended: `exit_code` None when it was killed (timeout),
    `answer` its stdout's last line, `said` its stderr's last line (both cut to a tail)."""

    exit_code: int | None
    outcome: str
    timeout_s: float
    answer: str
    said: str

    @property
    def ended(self) -> str:
        """How it ended, in words: its exit code and last stderr line, or the timeout."""
        if self.exit_code is None:
            return (
                f"it did not finish within {self.timeout_s:g} s; it was stopped with every "
                "process it started"
            )
        return f"exit {self.exit_code}: {self.said or 'no output'}"


def _run_in(
    python: Path, code: str, env: Mapping[str, str] | None = None, timeout: float = 120
) -> _Probed:
    """Run `code` in `python` through dlperf.proc (its own process group, ended whole with
    anything it started on the timeout or after it exits); stdout and stderr kept apart, in
    files, and read back as tails: a probe's output never floods dlperf's memory or messages."""
    with tempfile.TemporaryDirectory(prefix="dlperf-probe-") as tmp:
        out, log = Path(tmp) / "stdout", Path(tmp) / "stderr.log"
        done = run_process(
            [str(python), "-c", code],
            log_path=log,
            stdout_path=out,
            env=dict(env) if env is not None else None,
            timeout_s=timeout,
            kill_grace_s=_PROBE_KILL_GRACE_S,
        )
        stderr = "\n".join(
            line for line in tail(log, 20, 4 * _QUOTE_CHARS).splitlines()
            if not line.startswith("# dlperf:")  # run_process's own notes
        )  # fmt: skip
        return _Probed(
            exit_code=done.exit_code,
            outcome=done.outcome,
            timeout_s=timeout,
            answer=_last_line(tail(out, 1, _ANSWER_CHARS)),
            said=_cut(_last_line(stderr), _QUOTE_CHARS),
        )


def _cut(text: str, limit: int) -> str:
    """`text`, or its last `limit` characters after an ellipsis: a quote stays a quote."""
    return text if len(text) <= limit else "…" + text[-limit:]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)[0-9A-Za-z.+_-]{0,20}")  # 3.13.0rc1, 3.12.0+
# A framework's version as it prints it: 2.13.0+cpu, 3.3.1, 1.9.1, 0.9.0.dev20230216+cpu.
_FRAMEWORK_VERSION_RE = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,99}")


def _interpreter_facts(info: Any) -> dict[str, Any] | str:
    """_DESCRIBE's answer checked field by field, or why it is not one."""
    if not isinstance(info, dict):
        return "it exited 0 but did not run the Python code given to it"
    version = info.get("version")
    if not isinstance(version, str) or not _VERSION_RE.fullmatch(version):
        return f"it reported the Python version {_cut(repr(version), 100)}, not X.Y.Z"
    for key in ("executable", "prefix"):
        if not isinstance(info.get(key), str | None):
            return f"it reported a {key} that is not a path ({_cut(repr(info[key]), 100)})"
    dists = info.get("dists") or []
    if not isinstance(dists, list) or not all(isinstance(d, str) for d in dists):
        return "it reported its installed distributions in another form than name==version"
    return info


def describe_interpreter(
    python: Path | str, env: Mapping[str, str] | None = None
) -> InterpreterInfo:
    """Run `python` once to learn what it is; a DlperfError naming the fix when it is not a
    Python that can run the workloads."""
    python = Path(python).expanduser().absolute()  # ./python: never looked up on PATH
    if not python.exists():
        raise DlperfError(f"--python {python}: no such file; give the path of a Python interpreter")
    if python.is_dir():
        raise DlperfError(
            f"--python {python} is a folder; give the interpreter itself, such as "
            f"{python / 'bin' / 'python'}"
        )
    if not os.access(python, os.X_OK):
        raise DlperfError(f"--python {python} is not executable; give a Python interpreter")
    facts: dict[str, Any] | str
    try:
        probed = _run_in(python, _DESCRIBE, env, timeout=_PROBE_TIMEOUT_S)
    except (OSError, DlperfError) as exc:  # cannot start it, too many open files, ...
        facts = _cut(str(exc), _QUOTE_CHARS)
    else:
        facts = probed.ended
        if probed.exit_code == 0:
            answer: Any = None
            with contextlib.suppress(ValueError):
                answer = json.loads(probed.answer)
            facts = _interpreter_facts(answer)
    if isinstance(facts, str):
        raise DlperfError(
            f"--python {python} did not run as a Python interpreter ({facts}); give the path "
            "of the python executable of the environment to measure"
        )
    info = facts
    version = tuple(int(x) for x in _VERSION_RE.fullmatch(info["version"]).groups()[:2])
    if version < ADOPTED_MIN_PYTHON:
        need = ".".join(map(str, ADOPTED_MIN_PYTHON))
        raise DlperfError(
            f"--python {python} is Python {info['version']}; dlperf's workloads need Python "
            f">= {need}: use an environment with a newer Python"
        )
    return InterpreterInfo(
        python=python,
        version=info["version"],
        executable=str(info.get("executable") or python),
        prefix=Path(info.get("prefix") or python.parent.parent),
        dists=tuple(info.get("dists") or ()),
    )


def adopt_interpreter(
    python: Path | str,
    *,
    framework: str,
    verify: str,
    cuda_check: str = "",
    need_loadgen: bool = False,
    install: str = "",
) -> tuple[Env, InterpreterInfo]:
    """The user's own interpreter as an env, after checking that it can run the benchmark:
    `verify` prints the framework version, `cuda_check` (when given) exits 0 only if the
    framework sees a GPU, and mlperf_loadgen imports when `need_loadgen`. Nothing is installed,
    repaired or removed; a DlperfError names what is missing and how to add it (`install`: the
    requirement dlperf's own env pins, suggested to the user)."""
    info = describe_interpreter(python)
    python = info.python
    pip = f"{python} -m pip install"
    proc = _check_in(python, verify, _VERIFY_TIMEOUT_S, f"checking {framework}")
    version = proc.answer
    if proc.exit_code != 0 or not version:
        why = proc.said or "the check printed no version"
        if proc.exit_code is None:
            why = proc.ended
        raise DlperfError(
            f"--python {python} (Python {info.version}) cannot run {framework}: {why}. Install "
            f"{framework} into that environment (for example `{pip} {install or framework}`), "
            "point --python at an environment that has it, or leave --python out to let dlperf "
            "build its own env"
        )
    if not _FRAMEWORK_VERSION_RE.fullmatch(version):
        raise DlperfError(
            f"--python {python}: checking {framework} printed {_cut(repr(version), 100)}, not a "
            f"version; point --python at an environment where `{verify}` prints {framework}'s "
            "version"
        )
    if cuda_check:
        proc = _check_in(python, cuda_check, _VERIFY_TIMEOUT_S, f"checking {framework}'s GPU")
        if proc.exit_code != 0:
            why = proc.said or _cut(proc.answer, _QUOTE_CHARS) or proc.ended
            if proc.exit_code is None:
                why = proc.ended
            raise DlperfError(
                f"--python {python}: {framework} {version} cannot use a GPU there ({why}); "
                "install its CUDA build in that environment, or run with --device cpu"
            )
    if need_loadgen:
        proc = _check_in(python, _LOADGEN_CHECK, _PROBE_TIMEOUT_S, "checking mlperf_loadgen")
        if proc.exit_code != 0:
            why = proc.said if proc.exit_code is not None else proc.ended
            raise DlperfError(
                f"--python {python}: --scenario runs MLPerf LoadGen, but `import mlperf_loadgen` "
                f"fails there ({why}); install it with "
                f"`{pip} mlcommons-loadgen` (or from a wheel: `{pip} --no-index --find-links "
                "DIR mlcommons-loadgen`), or run without --scenario"
            )
    return Env(None, info.prefix, python, version, kind="adopted"), info


def _check_in(python: Path, code: str, timeout: float, what: str) -> _Probed:
    """`_run_in`, a probe that cannot start (or keep its files) refused in words."""
    try:
        return _run_in(python, code, timeout=timeout)
    except (OSError, DlperfError) as exc:
        raise DlperfError(
            f"--python {python}: {what} failed ({_cut(str(exc), _QUOTE_CHARS)})"
        ) from None


def env_status(spec: EnvSpec) -> str:
    """ "ready" | "missing" | "broken"; builds nothing. (An env being built right now by
    another process reads as "broken" until its marker is written.)"""
    return _check(spec, envs_root() / spec.name)[0]


# --------------------------------------------------------------------------- building


def _run_logged(
    argv: Sequence[str],
    log_file: IO[bytes],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float | None = None,
    capture_stdout: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """Run `argv`, its output (stderr always, stdout unless captured) appended to the log."""
    log_file.write(f"\n$ {' '.join(stored_argv(argv))}\n".encode())
    log_file.flush()
    proc = subprocess.run(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if capture_stdout else log_file,
        stderr=log_file,
        env=dict(env),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    if capture_stdout:
        log_file.write(proc.stdout or b"")
    log_file.write(f"[exit {proc.returncode}]\n".encode())
    log_file.flush()
    return proc


class _StepFailed(Exception):
    def __init__(self, argv: Sequence[str], why: str) -> None:
        super().__init__(why)
        self.argv = list(argv)
        self.why = why


def _step(
    argv: Sequence[str], log_file: IO[bytes], **kw: Any
) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = _run_logged(argv, log_file, **kw)
    except subprocess.TimeoutExpired as exc:
        log_file.write(f"[timed out after {exc.timeout:.0f} s]\n".encode())
        raise _StepFailed(argv, f"timed out after {exc.timeout:.0f} s") from exc
    except OSError as exc:
        log_file.write(f"[could not start: {exc}]\n".encode())
        raise _StepFailed(argv, f"could not start ({exc})") from exc
    if proc.returncode != 0:
        raise _StepFailed(argv, f"exited with status {proc.returncode}")
    return proc


def _write_marker(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path / MARKER, json.dumps(data, indent=2) + "\n")


def _build(spec: EnvSpec, path: Path, log: Log) -> Env:
    failed_log = envs_root() / f"{spec.name}.failed.log"
    interpreter = find_interpreter(spec.python)
    env = Env(spec, path, path / "bin" / "python", "")
    path.mkdir(parents=True)
    try:
        (path / REQUIREMENTS).write_text("".join(f"{line}\n" for line in spec.requirements))
        with open(path / BUILD_LOG, "ab", buffering=0) as log_file:
            started = datetime.now(timezone.utc).isoformat(timespec="seconds")
            log_file.write(f"# dlperf env {spec.name}, build started {started}\n".encode())
            _install(spec, env, interpreter, log_file, log)
            log("verifying")
            version, py_version = _verify(spec, env, log_file)
            freeze = _pip_freeze(env, log_file) if spec.requirements else ""
            _write_marker(path, _marker(spec, interpreter, version, py_version, freeze))
    except BaseException as exc:
        # Keep the log where the user can read it, then leave no half-built env behind.
        with contextlib.suppress(OSError):
            shutil.copyfile(path / BUILD_LOG, failed_log)
        shutil.rmtree(path, ignore_errors=True)
        error = _build_error(spec, exc, failed_log)
        if error is None:
            raise
        raise error from (None if isinstance(exc, _StepFailed) else exc)
    failed_log.unlink(missing_ok=True)
    log(f"env {spec.name} ready ({spec.framework} {version})")
    return Env(spec, path, env.python, version)


def _install(spec: EnvSpec, env: Env, interpreter: Path, log_file: IO[bytes], log: Log) -> None:
    """Create the venv with `interpreter`, then pip-install the spec's requirements into it."""
    log(f"creating venv with {interpreter}")
    # The host's Python settings must not reach the new venv's interpreter.
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    host_env = {k: v for k, v in os.environ.items() if k not in drop}
    venv = [str(interpreter), "-m", "venv", str(env.path)]
    if not spec.requirements:
        venv.append("--without-pip")  # nothing to install; ensurepip costs seconds
    _step(venv, log_file, env=host_env, cwd=env.path)
    if spec.requirements:
        log(f"installing {len(spec.requirements)} requirement(s) (log: {env.path / BUILD_LOG})")
        pip = [str(env.python), "-m", "pip", "install", "--disable-pip-version-check"]
        pip += ["--no-input", "-r", str(env.path / REQUIREMENTS), *spec.pip_args]
        _step(pip, log_file, env=env.run_env(), cwd=env.path)


def _verify(spec: EnvSpec, env: Env, log_file: IO[bytes]) -> tuple[str, str]:
    """The framework version the spec's verify code prints on its last line, and the env's
    Python version."""
    verify = [str(env.python), "-c", spec.verify]
    proc = _step(verify, log_file, env=env.run_env(), cwd=env.path, timeout=_VERIFY_TIMEOUT_S,
                 capture_stdout=True)  # fmt: skip
    out = proc.stdout.decode(errors="replace").strip().splitlines()
    if not out or not out[-1].strip():
        raise _StepFailed(
            verify, "printed nothing; it must print the framework version on its last line"
        )
    probe = [str(env.python), "-c", "import platform; print(platform.python_version())"]
    python = _step(probe, log_file, env=env.run_env(), cwd=env.path, capture_stdout=True)
    return out[-1].strip(), python.stdout.decode().strip()


def _pip_freeze(env: Env, log_file: IO[bytes]) -> str:
    freeze = [str(env.python), "-m", "pip", "freeze", "--disable-pip-version-check"]
    proc = _step(freeze, log_file, env=env.run_env(), cwd=env.path, capture_stdout=True)
    return proc.stdout.decode(errors="replace")


def _marker(
    spec: EnvSpec, interpreter: Path, version: str, py_version: str, freeze: str
) -> dict[str, Any]:
    """The marker of a built env: its spec, what the build verified, and when it ended."""
    return {
        "layout_version": ENV_LAYOUT_VERSION,
        "name": spec.name,
        "digest": spec.digest,
        "framework": spec.framework,
        "variant": spec.variant,
        "python": spec.python,
        "requirements": list(spec.requirements),
        "pip_args": list(spec.pip_args),
        "lib_dirs": list(spec.lib_dirs),
        "verify": spec.verify,
        "framework_version": version,
        "python_version": py_version,
        "interpreter": str(interpreter),
        "pip_freeze": freeze.splitlines(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _build_error(spec: EnvSpec, exc: BaseException, failed_log: Path) -> DlperfError | None:
    """What a user can act on when a build failed with `exc` (None: `exc` goes up as it is)."""
    if isinstance(exc, _StepFailed):
        last = tail(failed_log, _LOG_TAIL_LINES) or "(no build log)"
        return DlperfError(
            f"building env {spec.name} failed: `{' '.join(stored_argv(exc.argv))}` {exc.why}.\n"
            f"Last lines of the build log:\n{last}\n"
            f"Full build log: {failed_log}\n"
            "Fix the cause shown in the log (for example a requirement pin that does not "
            "exist on PyPI, or no network access to PyPI) and run again."
        )
    if isinstance(exc, OSError):
        return DlperfError(
            f"building env {spec.name} failed: {exc}; check free disk space and "
            f"permissions under {failed_log.parent} and run again (build log: {failed_log})"
        )
    return None


def ensure_env(spec: EnvSpec, *, rebuild: bool = False, log: Log | None = None) -> Env:
    """The env for `spec`: reused when complete and working, else (re)built and verified."""
    log = log if log is not None else _no_log
    path = envs_root() / spec.name
    with _env_lock(spec.name, log):
        state, reason, marker = _check(spec, path)
        if state == "ready" and not rebuild and marker is not None:
            return Env(spec, path, path / "bin" / "python", marker["framework_version"])
        if state == "broken":
            log(f"rebuilding broken env {spec.name}: {reason}")
        elif state == "ready":
            log(f"rebuilding env {spec.name} (rebuild requested)")
        if path.exists():
            shutil.rmtree(path)
        log(f"building env {spec.name}")
        return _build(spec, path, log)


# --------------------------------------------------------------------------- listing


def _dir_size(path: Path) -> int:
    total = 0
    stack = [path]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


def _spec_from_marker(marker: dict[str, Any]) -> EnvSpec | None:
    try:
        spec = EnvSpec(
            framework=marker["framework"],
            variant=marker["variant"],
            python=marker["python"],
            requirements=tuple(marker["requirements"]),
            verify=marker["verify"],
            pip_args=tuple(marker.get("pip_args", ())),
            lib_dirs=tuple(marker.get("lib_dirs", ())),
        )
    except (KeyError, TypeError, DlperfError):
        return None
    return spec if spec.digest == marker.get("digest") else None


def list_envs() -> list[EnvRecord]:
    """Every env directory under :func:`envs_root`, sorted by name. Cheap: runs nothing."""
    root = envs_root()
    if not root.is_dir():
        return []
    records = []
    for path in sorted(root.iterdir()):
        if not path.is_dir() or path.name.startswith("."):
            continue
        marker = _read_marker(path)
        parsed = _NAME_RE.match(path.name)
        ready = (
            marker is not None
            and (path / "bin" / "python").exists()
            and isinstance(marker.get("framework_version"), str)
            and (parsed is None or parsed["digest"] == marker.get("digest"))
        )
        info: dict[str, Any] = marker if (ready and marker) else {}
        fallback = parsed.groupdict() if parsed else {}
        created = info.get("created")
        if not created:
            with contextlib.suppress(OSError):
                mtime = path.stat().st_mtime
                created = datetime.fromtimestamp(mtime, timezone.utc).isoformat(timespec="seconds")
        records.append(
            EnvRecord(
                name=path.name,
                path=path,
                state="ready" if ready else "broken",
                framework=info.get("framework") or fallback.get("framework"),
                variant=info.get("variant") or fallback.get("variant"),
                python=info.get("python") or fallback.get("python"),
                framework_version=info.get("framework_version"),
                size_bytes=_dir_size(path),
                created=created,
                spec=_spec_from_marker(info) if info else None,
            )
        )
    return records


def remove_envs(prefix_or_name: str) -> list[Path]:
    """Remove envs named `prefix_or_name` or starting with `prefix_or_name-`."""
    arg = prefix_or_name.strip()
    if not arg or "/" in arg or arg.startswith("."):
        raise DlperfError(
            f"{prefix_or_name!r} is not an env name or prefix; give one such as 'pytorch' "
            "or 'pytorch-cpu'"
        )
    existing = list_envs()
    matched = [r for r in existing if r.name == arg or r.name.startswith(f"{arg}-")]
    if not matched:
        names = ", ".join(r.name for r in existing) or "none"
        raise DlperfError(
            f"no env named {arg!r} or starting with '{arg}-' under {envs_root()}; "
            f"existing envs: {names}. Pass one of those names or a prefix of them."
        )
    removed = []
    for record in matched:
        with _env_lock(record.name, _no_log):
            if record.path.exists():
                shutil.rmtree(record.path)
                removed.append(record.path)
    return removed


__all__ = [
    "ENV_LAYOUT_VERSION",
    "Env",
    "EnvRecord",
    "EnvSpec",
    "InterpreterInfo",
    "adopt_interpreter",
    "describe_interpreter",
    "ensure_env",
    "env_status",
    "envs_root",
    "find_interpreter",
    "list_envs",
    "parse_requirements",
    "remove_envs",
]
