"""Repeats of one benchmark: command -> launch -> parse -> stats -> store.

Orchestration only: the spec and its adapter come from `dlperf.spec`; each finished process is
classified and the result built by `dlperf.assemble`, with the machine facts probed here.

Each repeat is its own process. Failures are results: a repeat that crashed, hung or logged too
few steps is kept with a typed status and its log tail, and the other repeats still run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlperf import DlperfError, __version__, mlperf, system
from dlperf.adapter import Adapter
from dlperf.adapters import get_adapter
from dlperf.assemble import (
    build_result,
    classify,
    described_workload,
    make_repeat,
    new_result_id,
)
from dlperf.envs import Env, InterpreterInfo, adopt_interpreter, describe_interpreter, ensure_env
from dlperf.events import EVENTS_ENV, ParsedRun, merge_ranks, parse_events_file
from dlperf.files import (
    StorageError,
    atomic_write,
    check_writable,
    remove_empty_files,
    storage_error,
)
from dlperf.launch import LAUNCHERS, resolve_hosts, through_launcher
from dlperf.proc import ProcResult, run_process, tail
from dlperf.redact import redact_value, stored_argv
from dlperf.schema import (
    BenchmarkSpec,
    Environment,
    JobInfo,
    MachineLoad,
    Repeat,
    RepeatStatus,
    Result,
)
from dlperf.spec import OfficialOptions, adapter_for, check_spec
from dlperf.stats import window_throughput
from dlperf.store import result_dir, write_result

STEP_LINE = re.compile(r"step (\d+)/")
LOADGEN_DIR_ENV = "DLPERF_LOADGEN_DIR"  # where a workload's LoadGen run writes its logs
# Host-observed vs workload-timed window: the larger of a relative and an absolute slack, since
# pipe and scheduler jitter (milliseconds on a loaded machine) dominate short windows.
OUTSIDE_CLOCK_TOLERANCE = 0.02
OUTSIDE_CLOCK_SLACK_S = 0.05


@dataclass(frozen=True)
class JobLaunch:
    """How a data-parallel job's nodes are started: `launch.LAUNCHERS`, node addresses."""

    launcher: str = "local"
    hosts: tuple[str, ...] = ()

    def is_job(self, spec: BenchmarkSpec) -> bool:
        """Whether `spec` runs as a launched job (several ranks, or a remote launcher even for
        one: `--launcher ssh --hosts gpu0` measures on gpu0)."""
        return spec.world_size > 1 or self.launcher != "local"

    def node_hosts(self, nodes: int) -> list[str]:
        """Node addresses, node 0 (the master) first; the local launcher's are all this host."""
        if self.launcher == "local":
            if self.hosts:
                raise DlperfError(
                    "--launcher local runs every node on this host; to run on the hosts "
                    f"{', '.join(self.hosts)} pass --launcher ssh, slurm or mpirun"
                )
            return ["127.0.0.1"] * nodes
        if self.launcher == "slurm" and not self.hosts:
            return resolve_hosts(nodes, slurm_hosts())
        return resolve_hosts(nodes, self.hosts)


@dataclass
class RunCallbacks:
    """How the runner tells the CLI what it is doing (the core never prints)."""

    message: Callable[[str], None] = lambda _: None
    repeat_started: Callable[[int, int], None] = lambda i, n: None
    repeat_done: Callable[[Repeat], None] = lambda r: None


@dataclass
class PreparedRun:
    """One benchmark ready to run repeats: env built (or adopted), raw-log folder chosen."""

    spec: BenchmarkSpec
    adapter: Adapter
    env: Env | None
    result_id: str
    raw_dir: Path
    launch: JobLaunch = JobLaunch()
    interpreter: InterpreterInfo | None = None  # what runs the workload, and what it has

    def run_repeat(self, index: int) -> Repeat:
        python = str(self.env.python) if self.env else sys.executable
        base_env = self.env.run_env() if self.env else dict(os.environ)
        meter = system.LoadMeter()
        if not self.launch.is_job(self.spec):
            repeat = run_repeat(self.adapter, self.spec, index, python, base_env, self.raw_dir)
        else:
            # What a remote node needs besides the command: the variables the env sets.
            node_env = self.env.run_env({}) if self.env else {}
            node_env.pop("PATH", None)  # the interpreter is named by its full path
            job = Job(self.adapter, self.spec, self.launch, python, base_env, node_env)
            repeat = job.run_repeat(index, self.raw_dir)
        return repeat.model_copy(
            update={
                "env_digest": self.interpreter.dists_digest if self.interpreter else None,
                "machine_load": MachineLoad(**meter.stop()),
            }
        )

    def finish(self, results_dir: Path, repeats: list[Repeat]) -> tuple[Result, Path]:
        job = job_info(self.spec, self.launch)
        workload = described_workload(repeats)
        result = build_result(
            self.spec,
            self.result_id,
            repeats,
            environment=run_environment(workload, self.env, self.interpreter),
            peak=run_peak(self.spec, workload, job),
            source=self.adapter.source_info(),
            job=job,
        )
        try:
            return result, write_result(results_dir, result)
        except StorageError as exc:
            raise _unsaved(result, results_dir, exc) from None


def run_environment(
    workload: dict, env: Env | None, interpreter: InterpreterInfo | None
) -> Environment:
    """Where a run measured: this machine (probed now), the env or interpreter that ran the
    workload, and what the workload itself reported at start-up."""
    info = system.machine_info()
    gpus = info.get("gpus") or []
    return Environment(
        dlperf_version=__version__,
        host=info["host"],
        os=info["os"],
        python=workload.get("python"),
        framework_version=workload.get("framework_version")
        or (env.framework_version if env else None),
        env_name=env.path.name if env and env.kind == "built" else None,
        env_kind=env.kind if env else None,
        interpreter=str(interpreter.python) if interpreter else None,
        dists_digest=interpreter.dists_digest if interpreter else None,
        cpu=info.get("cpu"),
        cpu_count=info.get("cpu_count_logical"),
        gpu=", ".join(sorted({g["name"] for g in gpus})) or None,
        device_name=workload.get("device_name"),
        threads=workload.get("threads") or None,
        env_vars=system.captured_env_vars(),
    )


def run_peak(spec: BenchmarkSpec, workload: dict, job: JobInfo) -> tuple[float, str] | None:
    """The job's peak FLOP/s when the workload reports its FLOPs (the MFU's denominator)."""
    if not workload.get("flops_per_sample"):
        return None
    machines = distinct_machines(job.hosts) if job.hosts else 1
    return system.job_peak_flops(
        spec.device,
        workload.get("device_name"),
        spec.precision,
        gpus=spec.world_size,
        machines=machines,
    )


UNSAVED_DIR = Path(tempfile.gettempdir()) / "dlperf-unsaved"
"""Where a measured result goes when its results folder cannot take it (full, read-only)."""


def _unsaved(result: Result, results_dir: Path, exc: StorageError) -> StorageError:
    """The error for a measured result its folder refused: saved elsewhere, or its numbers
    printed, so that what was measured is never lost (exit code 2: benchmarks ran)."""
    key = result.spec.config_key()
    fallback = UNSAVED_DIR / key / f"{result.id}.json"
    try:
        atomic_write(fallback, result.model_dump_json(indent=2) + "\n")
        kept = (
            f"the result was saved to {fallback} instead: move it to "
            f"{result_dir(results_dir, key)}/ once that folder can be written"
        )
    except StorageError as again:
        t = result.metrics.throughput
        numbers = f"median {t.median:.4g} samples/s over {t.n} repeat(s)" if t else "no throughput"
        kept = f"it could not be saved elsewhere either ({again}); measured: {numbers}"
    return StorageError(f"{exc}; {kept}", exit_code=2)


def check_device(spec: BenchmarkSpec, launch: JobLaunch) -> None:
    """Refuse --device cuda before anything is built when this host, which runs it, has no
    NVIDIA GPU (a remote launcher's nodes are not this host: they are not checked here)."""
    if spec.device == "cuda" and launch.launcher == "local" and not system.nvidia_gpu_found():
        raise DlperfError(
            "--device cuda, but this host has no usable NVIDIA GPU (nvidia-smi lists none and "
            "there is no /dev/nvidia*): run with --device cpu, run dlperf on a GPU host, or "
            "start the nodes there with --launcher ssh|slurm|mpirun --hosts ..."
        )


def workload_interpreter(
    spec: BenchmarkSpec,
    adapter: Adapter,
    python: Path | None,
    rebuild_env: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[Env | None, InterpreterInfo]:
    """The env that runs the workload: the user's own interpreter (`python`), probed and
    refused with the fix when it lacks something; else the adapter's built env (built on
    first use); else (stdlib-only workloads) this host's Python."""
    if python is not None:
        env_spec = adapter.env_spec(spec.device)
        if env_spec is None and spec.impl == "official":
            raise DlperfError(
                f"{spec.source} runs in its container image, which is its environment: "
                "--python applies to implementations that run in a Python environment"
            )
        framework = get_adapter(spec.framework)
        # stdlib-only workloads (calibration) need nothing but a Python: its version then
        verify = (
            getattr(framework, "verify", "") or "import platform as p; print(p.python_version())"
        )
        cuda_check = getattr(framework, "cuda_check", "") if spec.device == "cuda" else ""
        log(f"checking {python}: {spec.framework} importable")
        pinned = env_spec.requirements if env_spec else ()
        return adopt_interpreter(
            python,
            framework=spec.framework,
            verify=verify,
            cuda_check=cuda_check,
            need_loadgen=bool(spec.scenario),
            install=pinned[0] if pinned else "",
        )
    env_spec = adapter.env_spec(spec.device)
    env = ensure_env(env_spec, rebuild=rebuild_env, log=log) if env_spec else None
    exe = env.python if env else Path(sys.executable)
    return env, describe_interpreter(exe, env.run_env() if env else None)


def prepare_run(
    spec: BenchmarkSpec,
    results_dir: Path,
    callbacks: RunCallbacks | None = None,
    rebuild_env: bool = False,
    result_id: str | None = None,
    official: OfficialOptions | None = None,
    launch: JobLaunch | None = None,
    python: Path | None = None,
) -> PreparedRun:
    """Everything before the first repeat: the launcher and hosts checked, the device checked,
    the upstream fetched (official), the env built or the user's interpreter (`python`)
    probed, the raw-log folder made."""
    cb = callbacks or RunCallbacks()
    launch = launch or JobLaunch()
    if launch.launcher not in LAUNCHERS:
        raise DlperfError(
            f"unknown launcher {launch.launcher!r}; choose one of: {', '.join(LAUNCHERS)}"
        )
    # --hosts with the local launcher is refused there, even for one process (it runs here)
    hosts = launch.node_hosts(spec.nodes) if launch.is_job(spec) or launch.hosts else []
    check_device(spec, launch)
    made = [p for p in (results_dir, result_dir(results_dir, spec.config_key())) if not p.exists()]
    check_writable(results_dir, "the results folder")
    result_id, raw_dir = _claim_raw_dir(result_dir(results_dir, spec.config_key()), result_id)
    try:
        adapter = adapter_for(spec, official, out_dir=raw_dir / "upstream-output")
        check_spec(adapter, spec)
        if hosts:  # refused before any env is built when there is no launcher
            adapter.job_commands(spec, "python", hosts, 0)
        env, interpreter = workload_interpreter(spec, adapter, python, rebuild_env, cb.message)
    except BaseException:
        for folder in [raw_dir, *reversed(made)]:  # those this call made, while still empty
            with contextlib.suppress(OSError):
                folder.rmdir()  # nothing ran: a refused run leaves no trace
        raise
    return PreparedRun(spec, adapter, env, result_id, raw_dir, launch, interpreter)


def _claim_raw_dir(folder: Path, result_id: str | None) -> tuple[str, Path]:
    """The raw-log folder of a result, made by this process alone: a new id's folder is
    created exclusively (two runs started in the same second never share one); a resumed
    attempt's (`result_id` given, its lock held by the caller) is reused."""
    try:
        if result_id is not None:
            (folder / result_id).mkdir(parents=True, exist_ok=True)
            return result_id, folder / result_id
        folder.mkdir(parents=True, exist_ok=True)
        while True:
            fresh = new_result_id()
            with contextlib.suppress(FileExistsError):
                (folder / fresh).mkdir()
                return fresh, folder / fresh
    except OSError as exc:
        raise storage_error(folder, exc) from None


def run_benchmark(
    spec: BenchmarkSpec,
    results_dir: Path,
    callbacks: RunCallbacks | None = None,
    rebuild_env: bool = False,
    official: OfficialOptions | None = None,
    launch: JobLaunch | None = None,
    python: Path | None = None,
) -> tuple[Result, Path]:
    """Run every repeat, store the result atomically, return it with its path.

    Ctrl-C (and SIGTERM / SIGHUP, which the CLI turns into it) stops the running workload (proc
    kills its process group); the repeats finished before it are stored, the others marked
    `interrupted`, and the interruption propagates.
    """
    cb = callbacks or RunCallbacks()
    run = prepare_run(
        spec, results_dir, cb, rebuild_env, official=official, launch=launch, python=python
    )
    repeats: list[Repeat] = []
    try:
        for index in range(1, spec.repeats + 1):
            cb.repeat_started(index, spec.repeats)
            repeat = run.run_repeat(index)
            repeats.append(repeat)
            cb.repeat_done(repeat)
    except KeyboardInterrupt:
        if repeats:  # what was measured is kept; the rest is marked, not dropped
            why = "dlperf was interrupted (Ctrl-C, SIGTERM or SIGHUP) before this repeat finished"
            run.finish(results_dir, repeats + _not_run(len(repeats), spec.repeats, why))
        raise
    except StorageError as exc:  # a log could not be written: stop, keep what was measured
        remove_empty_files(run.raw_dir)
        if not repeats:
            raise StorageError(str(exc), exit_code=2) from None
        run.finish(results_dir, repeats + _not_run(len(repeats), spec.repeats, f"not run: {exc}"))
        raise StorageError(
            f"{exc}; the {len(repeats)} repeat(s) measured before were stored", exit_code=2
        ) from None
    return run.finish(results_dir, repeats)


def _not_run(done: int, planned: int, why: str) -> list[Repeat]:
    """Repeats done+1..planned, marked `interrupted` with the reason they did not run."""
    return [
        Repeat(index=i, status=RepeatStatus.interrupted, message=why)
        for i in range(done + 1, planned + 1)
    ]


def run_repeat(
    adapter: Adapter,
    spec: BenchmarkSpec,
    index: int,
    python: str,
    base_env: Mapping[str, str],
    raw_dir: Path,
) -> Repeat:
    log_path = raw_dir / f"repeat-{index}.log"
    events_path = raw_dir / f"repeat-{index}.events.jsonl"
    events_path.unlink(missing_ok=True)
    cmd = adapter.command(spec, python)
    child_env = {**base_env, **cmd.env, EVENTS_ENV: str(events_path)}
    loadgen_dir = raw_dir / f"repeat-{index}.loadgen"
    if spec.scenario:
        loadgen_dir.mkdir(exist_ok=True)
        child_env[LOADGEN_DIR_ENV] = str(loadgen_dir)
    seen: dict[int, float] = {}

    def note_step_line(line: str) -> None:
        match = STEP_LINE.match(line)
        if match:
            seen[int(match.group(1))] = time.monotonic()

    proc = run_process(
        cmd.argv,
        on_line=note_step_line,
        log_path=log_path,
        env=child_env,
        cwd=cmd.cwd,
        timeout_s=spec.timeout_s,
        no_output_timeout_s=spec.no_output_timeout_s,
        watch_paths=[events_path],
    )
    parsed = adapter.parse_files(spec, log_path, events_path)
    status, message, window = classify(spec, proc.outcome, proc.exit_code, parsed)
    observed = None
    warnings = list(parsed.notes)
    if window and window.start_step in seen and window.end_step in seen:
        observed = seen[window.end_step] - seen[window.start_step]
        slack = max(OUTSIDE_CLOCK_TOLERANCE * window.elapsed_s, OUTSIDE_CLOCK_SLACK_S)
        if abs(observed - window.elapsed_s) > slack:
            warnings.append(
                f"the workload timed the window at {window.elapsed_s:.4f} s but its log lines "
                f"arrived {observed:.4f} s apart: its step marks may not wait for the device"
            )
    loadgen = None
    if spec.scenario and status == RepeatStatus.ok:
        try:
            loadgen = mlperf.read_dir(loadgen_dir)
        except DlperfError as exc:
            status, message = RepeatStatus.bad_output, f"LoadGen: {exc}"
        else:
            # The repeat's number is LoadGen's; the window was the warm-up.
            window = dataclasses.replace(window, throughput=loadgen.samples_per_second)
    return make_repeat(
        index,
        status,
        message,
        window if status == RepeatStatus.ok else None,
        parsed,
        loadgen=loadgen,
        warnings=warnings,
        wall_s=round(proc.wall_s, 4),
        exit_code=proc.exit_code,
        command=stored_argv(cmd.argv),
        log_path=str(log_path),
        events_path=str(events_path),
        log_tail="" if status == RepeatStatus.ok else tail(log_path),
        observed_elapsed_s=observed,
    )


def free_port() -> int:
    """A TCP port free on this host now, so two jobs on one host do not collide."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def slurm_hosts() -> list[str]:
    """The nodes of the Slurm allocation dlperf runs in, in Slurm's order."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST", "")
    if not nodelist:
        raise DlperfError(
            "--launcher slurm starts the nodes with srun inside an allocation, but "
            "SLURM_JOB_NODELIST is not set: run dlperf under salloc or sbatch (`--sbatch FILE` "
            "writes a batch script), or pass --hosts"
        )
    try:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise DlperfError(f"could not expand SLURM_JOB_NODELIST={nodelist!r}: {exc}") from None
    return out.stdout.split()


def job_info(spec: BenchmarkSpec, launch: JobLaunch) -> JobInfo:
    hosts = launch.node_hosts(spec.nodes) if launch.is_job(spec) else []
    return JobInfo(
        launcher=launch.launcher,
        hosts=[redact_value(h) for h in hosts],  # user:pw@host keeps no password
        world_size=spec.world_size,
        global_batch=spec.global_batch,
    )


JOB_OUTCOME_ORDER = ("timeout", "no_output", "exited", "cancelled")


@dataclass
class Job:
    """A data-parallel job: one agent per node, started through a launcher.

    local starts every node's agent on this host; ssh starts one `ssh` per node; slurm and
    mpirun start one `srun`/`mpirun` that runs a task per node. Every process is watched here
    with the same timeouts; when one fails, the others are stopped at once (no rank is left
    waiting in a collective). Built-in workloads write one events file per rank, so with a
    remote launcher the results folder must be one every node sees at the same path (a shared
    filesystem, as the env folder must be); official implementations are parsed from node 0's
    log.
    """

    adapter: Adapter
    spec: BenchmarkSpec
    launch: JobLaunch
    python: str
    base_env: Mapping[str, str]  # this host's environment for the processes started here
    node_env: Mapping[str, str]  # what each node's command needs from the env (remote nodes)

    def run_repeat(self, index: int, raw_dir: Path) -> Repeat:
        spec, launcher = self.spec, self.launch.launcher
        events_template = raw_dir / f"repeat-{index}.events.rank{{rank}}.jsonl"
        rank_files = [
            Path(str(events_template).replace("{rank}", str(r))) for r in range(spec.world_size)
        ]
        for path in rank_files:
            path.unlink(missing_ok=True)
        hosts = self.launch.node_hosts(spec.nodes)
        port = free_port()  # free here; with a remote launcher dlperf runs on node 0 as a rule
        node_logs = [raw_dir / f"repeat-{index}.node{n}.log" for n in range(spec.nodes)]
        nodes = []
        for node in self.adapter.job_commands(spec, self.python, hosts, port, log_dir=raw_dir):
            on_host = hosts.count(node.host) * spec.devices_per_node
            env = {EVENTS_ENV: str(events_template), "DLPERF_RANKS_ON_HOST": str(on_host)}
            if launcher != "local":
                env.update(self.node_env)
            nodes.append(dataclasses.replace(node, env={**env, **node.env}))
        dispatched = launcher in ("slurm", "mpirun")
        started = through_launcher(
            launcher, nodes, node_logs=[str(p) for p in node_logs] if dispatched else None
        )
        m = spec.devices_per_node
        cancel = threading.Event()
        procs: list[ProcResult | None] = [None] * len(started)
        errors: list[BaseException] = []

        def agent(i: int) -> None:
            cmd = started[i]
            covered = range(spec.nodes) if dispatched else [cmd.node_rank]
            watch = [f for n in covered for f in rank_files[n * m : (n + 1) * m]]
            if dispatched:
                watch += node_logs
            env = dict(self.base_env)
            if launcher == "local":
                env.update(cmd.env)
            try:
                procs[i] = run_process(
                    cmd.argv,
                    log_path=raw_dir / f"repeat-{index}.{launcher}.log"
                    if dispatched
                    else node_logs[cmd.node_rank],
                    env=env,
                    cwd=None if cmd.cwd == "." else Path(cmd.cwd),
                    timeout_s=spec.timeout_s,
                    no_output_timeout_s=spec.no_output_timeout_s,
                    watch_paths=watch,
                    cancel=cancel,
                )
                if procs[i].outcome != "exited" or procs[i].exit_code != 0:
                    cancel.set()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(exc)
                cancel.set()

        threads = [
            threading.Thread(target=agent, args=(i,), daemon=True) for i in range(len(started))
        ]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        except KeyboardInterrupt:
            cancel.set()
            for t in threads:
                t.join()
            raise
        if errors:
            raise errors[0]
        done = [(started[i].node_rank, p) for i, p in enumerate(procs) if p is not None]
        # The job's outcome is its first real failure; nodes stopped because of it are victims.
        failing = [(n, p) for n, p in done if p.outcome != "exited" or p.exit_code != 0]
        # Among exits, the first to end is the cause (the others died of losing it).
        failing.sort(key=lambda np: (JOB_OUTCOME_ORDER.index(np[1].outcome), np[1].wall_s))
        first_bad = next(((n, p) for n, p in failing if p.outcome != "cancelled"), None)
        node, proc = first_bad or done[0]
        if spec.impl == "official":
            runs = [self.adapter.parse_files(spec, node_logs[0])]
        else:
            # A process driving several devices writes one file for all (TensorFlow workers).
            runs = [parse_events_file(p) for p in rank_files if p.exists()] or [ParsedRun()]
        parsed = merge_ranks(runs)
        status, message, window = classify(spec, proc.outcome, proc.exit_code, parsed)
        if first_bad is not None and message and not dispatched:
            message = f"node {node}: {message}"
        if status == RepeatStatus.bad_output and launcher != "local":
            message += (
                f"; no rank wrote to {raw_dir}: with --launcher {launcher} the results "
                "folder must be on a filesystem every node sees at the same path"
            )
        warnings = list(parsed.notes)
        reached = [r.marks[-1].step if r.marks else 0 for r in runs]
        if len(set(reached)) > 1:
            warnings.append(f"ranks reached different steps: {reached}")
        rank_windows = []
        if window and len(runs) > 1:
            # Each rank's own window; the job's takes as long as the slowest of them and counts
            # every rank's samples (a per-step max-reduce would also add up unsynchronised
            # jitter).
            try:
                rank_windows = [window_throughput(r.marks, spec.skip, spec.measure) for r in runs]
            except ValueError as exc:  # one rank's own marks give no window
                status, message, window = RepeatStatus.bad_output, f"a rank: {exc}", None
            else:
                elapsed = max(w.elapsed_s for w in rank_windows)
                samples = sum(w.samples for w in rank_windows)
                window = dataclasses.replace(
                    window, throughput=samples / elapsed, samples=samples, elapsed_s=elapsed
                )
        log = proc.log_path if dispatched or first_bad else node_logs[0]
        others = node_logs if dispatched else []  # the dispatcher's log says little
        return make_repeat(
            index,
            status,
            message,
            window,
            parsed,
            warnings=warnings,
            wall_s=round(max(p.wall_s for _, p in done), 4),
            exit_code=proc.exit_code,
            command=stored_argv(started[0].argv),
            log_path=str(log),
            events_path=str(events_template),
            log_tail="" if status == RepeatStatus.ok else job_tail(proc.log_path, others),
            rank_elapsed_s=[round(w.elapsed_s, 6) for w in rank_windows],
        )


def distinct_machines(hosts: Sequence[str]) -> int:
    """How many machines the node addresses name ("localhost" and 127.0.0.1 are one)."""
    found = set()
    for host in hosts:
        try:
            found.add(socket.gethostbyname(host))
        except OSError:
            found.add(host)
    return len(found)


def job_tail(log: Path, node_logs: list[Path]) -> str:
    """The failing process's log tail, and each node's when a dispatcher wrote them apart."""
    parts = [tail(log)]
    parts += [f"--- {p.name}\n{tail(p)}" for p in node_logs if p != log and p.exists()]
    return "\n".join(part for part in parts if part.strip())
