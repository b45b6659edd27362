"""One repeat: a single process, or a data-parallel job of many ranks.

Each is started, watched with the spec's timeouts, parsed and classified into a `Repeat`; a
job's ranks are combined by one rule (`events.merge_ranks` for the facts, `stats.job_window`
for the window: every rank's samples over the slowest rank's own window).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dlperf import DlperfError, mlperf
from dlperf.adapter import Adapter
from dlperf.assemble import classify, make_repeat
from dlperf.events import (
    EVENTS_ENV,
    LOADGEN_DIR_ENV,
    RANKS_ON_HOST_ENV,
    STEP_LINE,
    ParsedRun,
    merge_ranks,
    parse_events_file,
)
from dlperf.launch import NodeCommand, ResolvedLaunch, free_port
from dlperf.proc import ProcResult, run_process, tail
from dlperf.redact import stored_argv
from dlperf.schema import BenchmarkSpec, LoadGenRun, Repeat, RepeatStatus
from dlperf.spec import RunPlan
from dlperf.stats import WindowThroughput
from dlperf.telemetry import WindowTimes

# Host-observed vs workload-timed window: the larger of a relative and an absolute slack, since
# pipe and scheduler jitter (milliseconds on a loaded machine) dominate short windows.
OUTSIDE_CLOCK_TOLERANCE = 0.02
OUTSIDE_CLOCK_SLACK_S = 0.05
JOB_OUTCOME_ORDER = ("timeout", "no_output", "exited", "cancelled")


def run_single_process(
    plan: RunPlan,
    index: int,
    base_env: Mapping[str, str],
    raw_dir: Path,
    on_window: Callable[[WindowTimes], None] = lambda _: None,
) -> Repeat:
    """Repeat `index` as one workload process on this host, its step lines timed as they
    arrive (an outside check on the workload's clock). `on_window` is told when the measured
    window ran (for the telemetry sampler), once the window is known."""
    log_path = raw_dir / f"repeat-{index}.log"
    events_path = raw_dir / f"repeat-{index}.events.jsonl"
    events_path.unlink(missing_ok=True)
    spec, adapter = plan.spec, plan.adapter
    (cmd,) = plan.node_commands()
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
    observed, warnings = None, list(parsed.notes)
    if window:
        on_window(window_times(parsed, window.start_step, window.end_step, seen))
        observed = outside_clock(window, seen, warnings)
    loadgen = None
    if spec.scenario and status == RepeatStatus.ok:
        status, message, window, loadgen = loadgen_outcome(loadgen_dir, window)
    return make_repeat(
        index,
        status,
        message,
        window if status in (RepeatStatus.ok, RepeatStatus.invalid) else None,
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


def outside_clock(
    window: WindowThroughput, seen: Mapping[int, float], warnings: list[str]
) -> float | None:
    """The window's length by the host's clock (when its step lines arrived), where both its
    ends were seen; a warning joins `warnings` when the workload's own timing disagrees."""
    if window.start_step not in seen or window.end_step not in seen:
        return None
    observed = seen[window.end_step] - seen[window.start_step]
    slack = max(OUTSIDE_CLOCK_TOLERANCE * window.elapsed_s, OUTSIDE_CLOCK_SLACK_S)
    if abs(observed - window.elapsed_s) > slack:
        warnings.append(
            f"the workload timed the window at {window.elapsed_s:.4f} s but its log lines "
            f"arrived {observed:.4f} s apart: its step marks may not wait for the device"
        )
    return observed


def loadgen_outcome(
    loadgen_dir: Path, window: WindowThroughput
) -> tuple[RepeatStatus, str, WindowThroughput, LoadGenRun | None]:
    """A repeat whose workload ran cleanly, judged by the LoadGen logs in `loadgen_dir`: its
    number is LoadGen's (the window was the warm-up); an INVALID run keeps its numbers, outside
    the median."""
    try:
        loadgen = mlperf.read_dir(loadgen_dir)
    except DlperfError as exc:
        return RepeatStatus.bad_output, f"LoadGen: {exc}", window, None
    window = dataclasses.replace(window, throughput=loadgen.samples_per_second)
    if not loadgen.valid:
        return RepeatStatus.invalid, mlperf.invalid_message(loadgen), window, loadgen
    return RepeatStatus.ok, "", window, loadgen


def window_times(
    parsed: ParsedRun, start_step: int, end_step: int, seen: Mapping[int, float]
) -> WindowTimes:
    """When the window's first and last marks happened: the workload's own times (rank 0's in
    a job) and the host's arrival times of their step lines, where it has both."""
    times = {m.step: m.time for m in parsed.marks}
    marks = (times[start_step], times[end_step]) if {start_step, end_step} <= times.keys() else None
    observed = (seen[start_step], seen[end_step]) if {start_step, end_step} <= seen.keys() else None
    return WindowTimes(marks=marks, observed=observed)


@dataclass
class Job:
    """A data-parallel job: one agent per node, started through the run's launcher.

    local starts every node's agent on this host; ssh starts one `ssh` per node; slurm and
    mpirun start one `srun`/`mpirun` that runs a task per node. Every process is watched here
    with the same timeouts; when one fails, the others are stopped at once (no rank is left
    waiting in a collective). Built-in workloads write one events file per rank, so with a
    remote launcher the results folder must be one every node sees at the same path (a shared
    filesystem, as the env folder must be); official implementations are parsed from node 0's
    log.
    """

    plan: RunPlan  # the adapter, the launcher and the nodes' addresses, resolved once
    base_env: Mapping[str, str]  # this host's environment for the processes started here
    node_env: Mapping[str, str]  # what each node's command needs from the env (remote nodes)

    @property
    def spec(self) -> BenchmarkSpec:
        return self.plan.spec

    @property
    def launch(self) -> ResolvedLaunch:
        return self.plan.launch

    @property
    def adapter(self) -> Adapter:
        return self.plan.adapter

    def run(
        self,
        index: int,
        raw_dir: Path,
        on_window: Callable[[WindowTimes], None] = lambda _: None,
    ) -> Repeat:
        """Repeat `index` of the job: start every node, watch them, choose the failure that
        ended the job (if any), combine the ranks. `on_window` is told when the window ran by
        rank 0's marks (for the telemetry sampler)."""
        spec, launch = self.spec, self.launch
        events_template = raw_dir / f"repeat-{index}.events.rank{{rank}}.jsonl"
        rank_files = [
            Path(str(events_template).replace("{rank}", str(r))) for r in range(spec.world_size)
        ]
        for path in rank_files:
            path.unlink(missing_ok=True)
        node_logs = [raw_dir / f"repeat-{index}.node{n}.log" for n in range(spec.nodes)]
        started = self._start(events_template, raw_dir, node_logs)
        done = self._watch(started, index, raw_dir, rank_files, node_logs)
        node, proc, failed = chosen_outcome(done)
        if spec.impl == "official":
            runs = [self.adapter.parse_files(spec, node_logs[0])]
        else:
            # A process driving several devices writes one file for all (TensorFlow workers).
            runs = [parse_events_file(p) for p in rank_files if p.exists()] or [ParsedRun()]
        parsed = merge_ranks(runs)
        status, message, window = classify(spec, proc.outcome, proc.exit_code, parsed)
        if failed and message and not launch.dispatched:
            message = f"node {node}: {message}"
        if status == RepeatStatus.bad_output and launch.remote:
            message += (
                f"; no rank wrote to {raw_dir}: with --launcher {launch.launcher} the results "
                "folder must be on a filesystem every node sees at the same path"
            )
        if window:
            on_window(window_times(parsed, window.start_step, window.end_step, {}))
        warnings = list(parsed.notes)
        reached = [r.marks[-1].step if r.marks else 0 for r in runs]
        if len(set(reached)) > 1:
            warnings.append(f"ranks reached different steps: {reached}")
        log = proc.log_path if launch.dispatched or failed else node_logs[0]
        others = node_logs if launch.dispatched else []  # the dispatcher's log says little
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
            rank_elapsed_s=[round(e, 6) for e in window.rank_elapsed_s] if window else [],
        )

    def _start(
        self, events_template: Path, raw_dir: Path, node_logs: list[Path]
    ) -> list[NodeCommand]:
        """Every node's command, as the launcher starts it from this host."""
        spec, hosts = self.spec, list(self.launch.hosts)
        port = free_port()  # free here; with a remote launcher dlperf runs on node 0 as a rule
        nodes = []
        for node in self.plan.node_commands(port, log_dir=raw_dir):
            on_host = hosts.count(node.host) * spec.devices_per_node
            env = {EVENTS_ENV: str(events_template), RANKS_ON_HOST_ENV: str(on_host)}
            if self.launch.remote:
                env.update(self.node_env)
            nodes.append(dataclasses.replace(node, env={**env, **node.env}))
        return self.launch.start(nodes, [str(p) for p in node_logs])

    def _watch(
        self,
        started: list[NodeCommand],
        index: int,
        raw_dir: Path,
        rank_files: list[Path],
        node_logs: list[Path],
    ) -> list[tuple[int, ProcResult]]:
        """(node rank, how it ended) of every started process, each run in its own thread;
        the first to fail stops the others. Ctrl-C stops them all and propagates."""
        spec, launch, m = self.spec, self.launch, self.spec.devices_per_node
        cancel = threading.Event()
        procs: list[ProcResult | None] = [None] * len(started)
        errors: list[BaseException] = []

        def agent(i: int) -> None:
            cmd = started[i]
            covered = range(spec.nodes) if launch.dispatched else [cmd.node_rank]
            watch = [f for n in covered for f in rank_files[n * m : (n + 1) * m]]
            if launch.dispatched:
                watch += node_logs
            env = dict(self.base_env)
            if not launch.remote:
                env.update(cmd.env)
            try:
                procs[i] = run_process(
                    cmd.argv,
                    log_path=raw_dir / f"repeat-{index}.{launch.launcher}.log"
                    if launch.dispatched
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
        return [(started[i].node_rank, p) for i, p in enumerate(procs) if p is not None]


def chosen_outcome(done: list[tuple[int, ProcResult]]) -> tuple[int, ProcResult, bool]:
    """(node, process, whether it failed) that speaks for the job: its first real failure
    (nodes stopped because of it are victims), else node 0's clean exit."""
    failing = [(n, p) for n, p in done if p.outcome != "exited" or p.exit_code != 0]
    # Among exits, the first to end is the cause (the others died of losing it).
    failing.sort(key=lambda np: (JOB_OUTCOME_ORDER.index(np[1].outcome), np[1].wall_s))
    first_bad = next(((n, p) for n, p in failing if p.outcome != "cancelled"), None)
    node, proc = first_bad or done[0]
    return node, proc, first_bad is not None


def job_tail(log: Path, node_logs: list[Path]) -> str:
    """The failing process's log tail, and each node's when a dispatcher wrote them apart."""
    parts = [tail(log)]
    parts += [f"--- {p.name}\n{tail(p)}" for p in node_logs if p != log and p.exists()]
    return "\n".join(part for part in parts if part.strip())
