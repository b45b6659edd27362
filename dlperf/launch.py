"""Launchers: how a job's per-node command lines are started from the machine dlperf runs on.

`NodeCommand` is one node's command line; `through_launcher` starts a job's lines as they are
(local), with one `ssh` per node, or with one `srun` / `mpirun` that runs a task per node.
`JobLaunch` is the launcher and hosts the user asked for, resolved once per run into a
`ResolvedLaunch`. The per-node lines of official upstream implementations are built from their
manifests in `dlperf.official.commands`.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

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

    def resolve(self, spec: BenchmarkSpec) -> ResolvedLaunch:
        """The launcher checked and the nodes' addresses resolved, once for a whole run (under
        Slurm that asks `scontrol`)."""
        if self.launcher not in LAUNCHERS:
            raise DlperfError(
                f"unknown launcher {self.launcher!r}; choose one of: {', '.join(LAUNCHERS)}"
            )
        is_job = self.is_job(spec)
        # --hosts with the local launcher is refused there, even for one process (it runs here)
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
