"""How workloads are launched: each node's command line, and how the lines are started from the
machine dlperf runs on.

`NodeCommand` is one node's command line. A framework declares how its workload starts in a
`FrameworkLaunch` (its env's check, its GPU check, its variables, its node agent as a template
filled from `node_values`); the official upstream implementations' lines are built from their
manifests in `dlperf.official.commands`, from the same values. `through_launcher` starts a
job's lines as they are (local), with one `ssh` per node, or with one `srun` / `mpirun` that
runs a task per node. `JobLaunch` is the launcher and hosts the user asked for, resolved once
per run into a `ResolvedLaunch`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shlex
import socket
import subprocess
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dlperf import DlperfError
from dlperf.redact import SSH_ENV, redact_value  # SSH_ENV: the ssh program and options
from dlperf.schema import BenchmarkSpec, JobInfo

DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True)
class NodeCommand:
    node_rank: int
    host: str
    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str] = field(default_factory=dict)

    def shell_line(self) -> str:
        """The command as one line a user could paste into a shell on that node."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        cmd = shlex.join(self.argv)
        cd = "" if self.cwd == "." else f"cd {shlex.quote(self.cwd)} && "
        return f"{cd}{env + ' ' if env else ''}{cmd}"


def resolve_hosts(nodes: int, hosts: Sequence[str] | None) -> list[str]:
    hosts = [h for h in (hosts or []) if h]
    if not hosts:
        if nodes == 1:
            return ["localhost"]
        raise DlperfError(
            f"--nodes {nodes} needs the nodes' addresses: pass --hosts HOST1,HOST2,... "
            "(node 0 first; it is also the master)"
        )
    if len(hosts) != nodes:
        raise DlperfError(f"--nodes {nodes} but --hosts lists {len(hosts)}: {', '.join(hosts)}")
    bad = [h for h in hosts if h.startswith("-") or any(c.isspace() for c in h)]
    if bad:  # ssh, srun and mpirun would read "-oProxyCommand=..." as an option
        raise DlperfError(
            f"--hosts: {', '.join(repr(h) for h in bad)} is not a host name (it starts with '-' "
            "or holds a space); give node addresses such as gpu0,gpu1 or 10.0.0.2"
        )
    return hosts


def tf_config(workers: Sequence[str], rank: int) -> str:
    """TensorFlow's multi-worker cluster description for one worker (the TF_CONFIG variable);
    `workers` are "host:port" strings, node 0 first."""
    cluster = {"worker": list(workers)}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": rank}})


def node_values(spec: BenchmarkSpec, hosts: Sequence[str], rank: int, port: int) -> dict[str, str]:
    """What a node's command line may name (`{node_rank}`, `{master_addr}`, ...): the job's
    shape and node `rank`'s place in it, `hosts` node 0 (the master, listening at `port`)
    first. Official manifests and the frameworks' `FrameworkLaunch` agents fill the same."""
    values = {
        "batch_size": spec.batch_size,
        "node_batch": spec.batch_size * spec.devices_per_node,
        "global_batch": spec.global_batch,
        "steps": spec.steps,
        "devices": spec.devices_per_node,
        "gpus": ",".join(str(i) for i in range(spec.devices_per_node)),
        "nodes": spec.nodes,
        "world_size": spec.world_size,
        "node_rank": rank,
        "node_ip": hosts[rank],
        "node_ips": ",".join(hosts),
        "master_addr": hosts[0],
        "master_port": port,
        "hosts_slots": ",".join(f"{h}:{spec.devices_per_node}" for h in hosts),
        "tf_config": tf_config([f"{h}:{port}" for h in hosts], rank),
    }
    return {k: str(v) for k, v in values.items()}


def fill(template: str, values: Mapping[str, str]) -> str:
    return template.format_map(values)


def one_host(hosts: Sequence[str]) -> bool:
    """Whether every node runs on one host (each loopback address is this host)."""
    return len(set(hosts)) == 1 or all(_is_loopback(h) for h in hosts)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


# --------------------------------------------------------------------------- a framework's launch

# When a `When` applies, from the run's spec and its nodes' addresses.
CONDITIONS: dict[str, Callable[[BenchmarkSpec, Sequence[str]], bool]] = {
    "cuda": lambda spec, hosts: spec.device == "cuda",
    "cpu_several_devices": lambda spec, hosts: spec.device == "cpu" and spec.devices_per_node > 1,
    # a CPU job whose ranks share each host's cores, as no --set threads says how many each takes
    "cpu_threads_unset": lambda spec, hosts: spec.device == "cpu" and "threads" not in spec.options,
    "one_host": lambda spec, hosts: one_host(hosts),
}
WORKLOAD = "{workload}"  # in an agent: the workload's arguments after its interpreter
PYTHON_VERSION = "import platform as p; print(p.python_version())"


@dataclass(frozen=True)
class When:
    """Words of a `FrameworkLaunch` that hold only when `condition` (a `CONDITIONS` key) does
    for the run: agent arguments, a node variable's value, or a refusal's message."""

    condition: str
    words: tuple[str, ...]

    def holds(self, spec: BenchmarkSpec, hosts: Sequence[str]) -> bool:
        return CONDITIONS[self.condition](spec, hosts)


def when(condition: str, *words: str) -> When:
    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; known: {', '.join(CONDITIONS)}")
    return When(condition, words)


def gpu_check(setup: str, *refusals: tuple[str, str]) -> str:
    """A `FrameworkLaunch.cuda_check`: `setup` (imports) then, for each (condition, message)
    in order, an exit with the f-string message when the condition is true."""
    lines = ["import sys", *setup.splitlines()]
    for condition, message in refusals:
        lines += [f"if {condition}:", f"    sys.exit(f{message!r})"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class FrameworkLaunch:
    """How the host starts a framework's workload, declared once per framework (the core
    turns it into each process's variables and each node's command line).

    `verify` prints the framework's version in an interpreter (checks its env, and a
    `--python`); `cuda_check` exits non-zero, printing why on its last line, when the framework
    there cannot use an NVIDIA GPU (checked before a --device cuda run with --python). `env`:
    variables every workload process gets; `thread_env`: those set to `--set threads`, for
    frameworks that read their thread count at start-up. `agent`: the node agent of a
    data-parallel job (None: the framework has no launcher), placeholders from `node_values`
    plus `{python}`, `{log_dir}` and `{tf_config_ports}`, a `Path` word taken as it is, and
    `WORKLOAD` where the workload's arguments go; `node_env`: each node's extra variables;
    `refuse`: jobs it cannot run, with why."""

    verify: str = PYTHON_VERSION  # stdlib-only workloads: the interpreter's own version
    cuda_check: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    thread_env: tuple[str, ...] = ()
    agent: tuple[str | Path | When, ...] | None = None
    node_env: Mapping[str, str | When] = field(default_factory=dict)
    refuse: tuple[When, ...] = ()

    def process_env(self, options: Mapping[str, str]) -> dict[str, str]:
        """The variables of a workload process run with `options` (its `--set` values)."""
        threads = options.get("threads")
        return {**self.env, **dict.fromkeys(self.thread_env, threads)} if threads else {**self.env}

    def check_job(self, name: str, spec: BenchmarkSpec, hosts: Sequence[str]) -> None:
        """Refuse a data-parallel job of `spec` on `hosts` that `name` cannot start."""
        if self.agent is None:
            raise DlperfError(
                f"{name} has no data-parallel launcher yet; run it with --nodes 1 "
                "--devices-per-node 1"
            )
        for refusal in self.refuse:
            if refusal.holds(spec, hosts):
                raise DlperfError(" ".join(refusal.words))

    def __post_init__(self) -> None:
        if self.agent is not None and WORKLOAD not in self.agent:
            raise ValueError("a node agent starts the workload: put WORKLOAD in its words")

    def node_command(
        self,
        spec: BenchmarkSpec,
        workload: NodeCommand,
        hosts: Sequence[str],
        port: int,
        log_dir: Path | None = None,
    ) -> NodeCommand:
        """Node `workload.node_rank`'s agent starting `workload` (its one process's command):
        `log_dir` (the repeat's raw folder) takes the logs an agent writes beside its output."""
        rank, python = workload.node_rank, workload.argv[0]
        values = {
            **node_values(spec, hosts, rank, port),
            "python": python,
            "log_dir": str(log_dir or f"{spec.framework}-logs"),
            # node n at port + n: nodes that share a host cannot share a port
            "tf_config_ports": tf_config([f"{h}:{port + i}" for i, h in enumerate(hosts)], rank),
        }
        argv: list[str] = []
        for word in self._holding(self.agent or (), spec, hosts):
            if word == WORKLOAD:
                argv += workload.argv[1:]
            else:
                argv.append(str(word) if isinstance(word, Path) else fill(word, values))
        env = dict(workload.env)
        for key, value in self.node_env.items():
            held = self._holding([value], spec, hosts)
            if held:  # a `When` that does not hold leaves the variable unset
                env[key] = fill(str(held[0]), values)
        return NodeCommand(rank, hosts[rank], tuple(argv), workload.cwd, env)

    @staticmethod
    def _holding(
        words: Sequence[str | Path | When], spec: BenchmarkSpec, hosts: Sequence[str]
    ) -> list[str | Path]:
        """`words` with each `When` replaced by its words where it holds, dropped elsewhere."""
        out: list[str | Path] = []
        for word in words:
            if not isinstance(word, When):
                out.append(word)
            elif word.holds(spec, hosts):
                out += word.words
        return out


# --------------------------------------------------------------------------- launchers

LAUNCHERS = ("local", "ssh", "slurm", "mpirun")
# What tells the dispatch script which node it runs on, per launcher.
NODE_INDEX_VAR = {"slurm": "SLURM_NODEID", "mpirun": "OMPI_COMM_WORLD_RANK"}


def ssh_program() -> list[str]:
    """`ssh` plus the user's options from $DLPERF_SSH (a jump host, a key, a config file)."""
    return shlex.split(os.environ.get(SSH_ENV, "")) or ["ssh"]


def through_launcher(
    launcher: str, nodes: Sequence[NodeCommand], node_logs: Sequence[str] | None = None
) -> list[NodeCommand]:
    """How each node's command is started from the machine dlperf runs on.

    local: as is. ssh: one `ssh -tt HOST 'cd ... && ...'` per node, every word shell-quoted;
    the forced terminal makes sshd hang up the remote processes when the local ssh is killed
    (without it they would run on, orphaned). slurm / mpirun: one command that starts a task
    per node, each running a dispatch script that picks its node's line by the launcher's node
    index (quoted the same way) and, given `node_logs`, sends that node's output to its log.
    """
    if launcher not in LAUNCHERS:
        raise DlperfError(f"unknown launcher {launcher!r}; choose one of: {', '.join(LAUNCHERS)}")
    if launcher == "local":
        return list(nodes)
    if launcher == "ssh":
        ssh = [*ssh_program(), "-tt", "-o", "BatchMode=yes"]
        ssh += ["-o", "StrictHostKeyChecking=accept-new"]
        return [
            NodeCommand(n.node_rank, n.host, (*ssh, n.host, n.shell_line()), ".") for n in nodes
        ]
    var = NODE_INDEX_VAR[launcher]
    cases = ""
    for i, n in enumerate(nodes):
        redirect = f"exec >{shlex.quote(node_logs[i])} 2>&1; " if node_logs else ""
        cases += f"  {n.node_rank}) {redirect}{n.shell_line()} ;;\n"
    script = f'case "${var}" in\n{cases}  *) echo "no command for node ${var}" >&2; exit 2 ;;\nesac'
    count = str(len(nodes))
    if launcher == "slurm":
        argv = ("srun", f"--nodes={count}", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                "--nodelist=" + ",".join(n.host for n in nodes), "bash", "-c", script)  # fmt: skip
    else:
        # One slot per node on each host; simulated nodes sharing a host get one slot each
        # there, and ranks fill the hosts in order, so rank n lands on node n's host.
        slots = Counter(n.host for n in nodes)
        if [h for h, c in slots.items() for _ in range(c)] != [n.host for n in nodes]:
            raise DlperfError("mpirun: list the nodes that share a host next to each other")
        argv = ("mpirun", "-np", count, "-H", ",".join(f"{h}:{c}" for h, c in slots.items()),
                "--map-by", "slot", "bash", "-c", script)  # fmt: skip
    return [NodeCommand(0, nodes[0].host, argv, ".")]


@dataclass(frozen=True)
class JobLaunch:
    """How a data-parallel job's nodes are started, as the user asked: one of `LAUNCHERS`, and
    node addresses (none: this host, or under Slurm the allocation's nodes)."""

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

    def resolve(self, spec: BenchmarkSpec, *, dry_run: bool = False) -> ResolvedLaunch:
        """The launcher checked and the nodes' addresses resolved, once for a whole run (under
        Slurm that asks `scontrol`). A dry run with the local launcher keeps `--hosts` (the
        nodes whose lines a user starts by hand); a run refuses them."""
        if self.launcher not in LAUNCHERS:
            raise DlperfError(
                f"unknown launcher {self.launcher!r}; choose one of: {', '.join(LAUNCHERS)}"
            )
        is_job = self.is_job(spec)
        if dry_run and self.hosts:
            hosts = resolve_hosts(spec.nodes, self.hosts) if is_job else list(self.hosts)
        else:  # --hosts with the local launcher: refused even for one process (it runs here)
            hosts = self.node_hosts(spec.nodes) if is_job or self.hosts else []
        return ResolvedLaunch(self.launcher, tuple(hosts), is_job)


@dataclass(frozen=True)
class ResolvedLaunch:
    """A run's launcher and its nodes' addresses (node 0 first; none for one local process)."""

    launcher: str = "local"
    hosts: tuple[str, ...] = ()
    is_job: bool = False

    @property
    def remote(self) -> bool:
        """Whether the nodes' commands run in another process tree than this host's."""
        return self.launcher != "local"

    @property
    def dispatched(self) -> bool:
        """Whether one command (srun, mpirun) starts a task per node, rather than one each."""
        return self.launcher in ("slurm", "mpirun")

    def start(self, nodes: Sequence[NodeCommand], node_logs: Sequence[str]) -> list[NodeCommand]:
        """`through_launcher`: a dispatcher sends each node's output to its log in `node_logs`."""
        return through_launcher(self.launcher, nodes, node_logs if self.dispatched else None)

    def job_info(self, spec: BenchmarkSpec) -> JobInfo:
        return JobInfo(
            launcher=self.launcher,
            hosts=[redact_value(h) for h in self.hosts],  # user:pw@host keeps no password
            world_size=spec.world_size,
            global_batch=spec.global_batch,
        )


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


def free_port() -> int:
    """A TCP port free on this host now, so two jobs on one host do not collide."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sbatch_script(spec: BenchmarkSpec, dlperf_argv: Sequence[str], cwd: str) -> str:
    """A Slurm batch script that asks for the job's nodes and runs `dlperf_argv` (a `dlperf
    run` command with `--launcher slurm`) inside the allocation."""
    # Every repeat may use its whole timeout; an hour on top for envs and sources.
    minutes = int(spec.repeats * spec.timeout_s / 60) + 60
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=dlperf-{spec.framework}-{spec.model}",
        f"#SBATCH --nodes={spec.nodes}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        f"#SBATCH --time={minutes // 60}:{minutes % 60:02d}:00",
        "#SBATCH --output=dlperf-%j.out",
    ]
    if spec.device == "cuda":
        lines.append(f"#SBATCH --gpus-per-node={spec.devices_per_node}")
    lines += [
        "# Written by `dlperf run --sbatch`: the results and env folders must be on a",
        "# filesystem every node sees at the same path.",
        "set -euo pipefail",
        f"cd {shlex.quote(cwd)}",
        f"exec {shlex.join(dlperf_argv)}",
    ]
    return "\n".join(lines) + "\n"
