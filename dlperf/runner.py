"""Repeats of one benchmark: prepare, measure each repeat, store the result.

Orchestration only: the run comes checked from `dlperf.spec.check_run` (its spec, adapter,
launcher and hosts), each repeat from `dlperf.repeat`, the result from `dlperf.assemble` with
the machine facts of `dlperf.system`.

Each repeat is its own process. Failures are results: a repeat that crashed, hung or logged too
few steps is kept with a typed status and its log tail, and the other repeats still run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlperf import system, telemetry
from dlperf.assemble import build_result, described_workload, new_result_id
from dlperf.envs import Env, InterpreterInfo, adopt_interpreter, describe_interpreter, ensure_env
from dlperf.files import StorageError, check_writable, remove_empty_files, storage_error
from dlperf.repeat import Job, run_single_process
from dlperf.resultio import check_readable
from dlperf.schema import BenchmarkSpec, MachineLoad, Repeat, RepeatStatus, Result
from dlperf.spec import RunPlan
from dlperf.store import ResultStore


@dataclass
class RunCallbacks:
    """How the runner tells the CLI what it is doing (the core never prints)."""

    message: Callable[[str], None] = lambda _: None
    repeat_started: Callable[[int, int], None] = lambda i, n: None
    repeat_done: Callable[[Repeat], None] = lambda r: None


@dataclass
class PreparedRun:
    """One benchmark ready to run repeats: env built (or adopted), raw-log folder chosen."""

    plan: RunPlan  # as checked, with its adapter ready (fetched) and its interpreter built
    env: Env | None
    result_id: str
    raw_dir: Path
    interpreter: InterpreterInfo | None = None  # what runs the workload, and what it has

    @property
    def spec(self) -> BenchmarkSpec:
        return self.plan.spec

    def measure(self, index: int) -> Repeat:
        """Repeat `index`: one process, or the data-parallel job; with the machine's load and
        the devices' telemetry over the measured window."""
        base_env = self.env.run_env() if self.env else dict(os.environ)
        meter = system.LoadMeter()
        windows: list[telemetry.WindowTimes] = []
        kind = telemetry.source_kind(self.spec.device)
        with telemetry.sampling(self._telemetry_source(base_env), kind) as sampler:
            if not self.plan.launch.is_job:
                repeat = run_single_process(
                    self.plan, index, base_env, self.raw_dir, on_window=windows.append
                )
            else:
                # What a remote node needs besides the command: the variables the env sets.
                node_env = self.env.run_env({}) if self.env else {}
                node_env.pop("PATH", None)  # the interpreter is named by its full path
                job = Job(self.plan, base_env, node_env)
                repeat = job.run(index, self.raw_dir, on_window=windows.append)
        return repeat.model_copy(
            update={
                "env_digest": self.interpreter.dists_digest if self.interpreter else None,
                "machine_load": MachineLoad(**meter.stop()),
                "telemetry": sampler.telemetry(windows[0] if windows else None)
                if sampler
                else None,
            }
        )

    def _telemetry_source(self, base_env: dict[str, str]) -> Callable[[], telemetry.Source]:
        """How to open what to sample (the sampler opens it in its own thread, with a deadline:
        NVML's init can hang too): this host's devices, when the workload runs on this host. A
        remote launcher's nodes are not sampled: their telemetry says so."""
        launch, spec = self.plan.launch, self.spec
        if launch.remote:
            why = (
                f"not sampled: the {launch.launcher} launcher runs the nodes on other hosts, "
                "and dlperf samples only the host it runs on"
            )
            return lambda: telemetry.UnavailableSource(spec.device, why)
        gpus = telemetry.gpus_on_this_host(
            spec.device, spec.devices_per_node, spec.nodes, launch.launcher
        )
        return lambda: telemetry.job_source(spec.device, gpus, base_env)

    def finish(self, results_dir: Path, repeats: list[Repeat]) -> tuple[Result, Path]:
        job = self.plan.launch.job_info(self.spec)
        workload = described_workload(repeats)
        result = build_result(
            self.spec,
            self.result_id,
            repeats,
            environment=system.run_environment(workload, self.env, self.interpreter),
            peak=system.run_peak(self.spec, workload, job),
            source=self.plan.adapter.source_info(),
            job=job,
        )
        store = ResultStore(results_dir)
        try:
            return result, store.write(result)
        except StorageError as exc:
            raise store.unsaved(result, exc) from None


def workload_interpreter(
    plan: RunPlan, rebuild_env: bool = False, log: Callable[[str], None] = lambda _: None
) -> tuple[Env | None, InterpreterInfo]:
    """The env that runs the workload: the user's own interpreter (`plan.adopt`), probed and
    refused with the fix when it lacks something; else the adapter's built env (built on
    first use); else (stdlib-only workloads) this host's Python."""
    spec, launch = plan.spec, plan.adapter.launch
    env_spec = plan.adapter.env_spec(spec.device)
    if plan.adopt is not None:
        log(f"checking {plan.adopt}: {spec.framework} importable")
        pinned = env_spec.requirements if env_spec else ()
        return adopt_interpreter(
            plan.adopt,
            framework=spec.framework,
            verify=launch.verify,
            cuda_check=launch.cuda_check if spec.device == "cuda" else "",
            need_loadgen=bool(spec.scenario),
            install=pinned[0] if pinned else "",
        )
    env = ensure_env(env_spec, rebuild=rebuild_env, log=log) if env_spec else None
    exe = env.python if env else Path(sys.executable)
    return env, describe_interpreter(exe, env.run_env() if env else None)


def prepare_run(
    plan: RunPlan,
    results_dir: Path,
    callbacks: RunCallbacks | None = None,
    rebuild_env: bool = False,
    result_id: str | None = None,
) -> PreparedRun:
    """Everything between the run's check (`check_run`, which made `plan`) and its first
    repeat: the raw-log folder made, the upstream fetched (official), the env built or the
    user's interpreter probed."""
    cb = callbacks or RunCallbacks()
    folder = ResultStore(results_dir).folder(plan.spec)
    check_readable(results_dir)  # every command reads it: a run into one is refused at once
    made = [p for p in (results_dir, folder) if not p.exists()]
    check_writable(results_dir, "the results folder")
    result_id, raw_dir = _claim_raw_dir(folder, result_id)
    try:
        adapter = plan.adapter.for_run(raw_dir / "upstream-output", plan.official.sources_dir)
        plan = dataclasses.replace(plan, adapter=adapter)
        env, interpreter = workload_interpreter(plan, rebuild_env, cb.message)
    except BaseException:
        for folder in [raw_dir, *reversed(made)]:  # those this call made, while still empty
            with contextlib.suppress(OSError):
                folder.rmdir()  # nothing ran: a refused run leaves no trace
        raise
    plan = dataclasses.replace(plan, python=str(env.python) if env else sys.executable)
    return PreparedRun(plan, env, result_id, raw_dir, interpreter)


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
    plan: RunPlan,
    results_dir: Path,
    callbacks: RunCallbacks | None = None,
    rebuild_env: bool = False,
) -> tuple[Result, Path]:
    """Run every repeat of `plan` (`check_run`'s), store the result atomically, return it
    with its path.

    Ctrl-C (and SIGTERM / SIGHUP, which the CLI turns into it) stops the running workload (proc
    kills its process group); the repeats finished before it are stored, the others marked
    `interrupted`, and the interruption propagates.
    """
    cb = callbacks or RunCallbacks()
    run = prepare_run(plan, results_dir, cb, rebuild_env)
    spec = plan.spec
    repeats: list[Repeat] = []
    try:
        for index in range(1, spec.repeats + 1):
            cb.repeat_started(index, spec.repeats)
            repeat = run.measure(index)
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
