"""Launchers: every node's command for ssh, slurm and mpirun (snapshot for 4 nodes x 8 GPUs),
and the quoting checked by a real shell."""

from __future__ import annotations

import contextlib
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import throughput_from_marks, workload_processes

from dlperf import DlperfError
from dlperf.adapters import get_adapter
from dlperf.launch import NodeCommand, through_launcher
from dlperf.spec import check_run, resolve_spec

SNAPSHOT = Path(__file__).with_name("snapshots") / "launchers-pytorch-4x8.txt"


def render_4x8() -> str:
    spec = resolve_spec(
        "pytorch", "resnet50",
        overrides={"nodes": 4, "devices_per_node": 8, "device": "cuda", "precision": "amp"},
    )  # fmt: skip
    adapter = get_adapter("pytorch")
    hosts = [f"gpu{i}.cluster" for i in range(4)]
    nodes = adapter.job_commands(spec, "/opt/dlperf/env/bin/python", hosts, 29500)
    out = []
    for launcher in ("ssh", "slurm", "mpirun"):
        out.append(f"== {launcher}")
        for n in through_launcher(launcher, nodes):
            out.append(n.shell_line().replace(str(adapter.folder), "<adapter>"))
    return "\n".join(out) + "\n"


def test_dry_run_commands_for_4_nodes_x_8_gpus_match_the_snapshot() -> None:
    assert render_4x8() == SNAPSHOT.read_text()


# A word with every character a shell would otherwise interpret.
NASTY = 'it\'s "quoted" $HOME `id` ; rm -rf / &'


def nodes_echoing() -> list[NodeCommand]:
    return [NodeCommand(n, f"h{n}", ("printf", "%s|", f"node{n}", NASTY), ".") for n in range(3)]


@pytest.mark.parametrize(("launcher", "var"), [("slurm", "SLURM_NODEID"),
                                                ("mpirun", "OMPI_COMM_WORLD_RANK")])  # fmt: skip
def test_dispatch_scripts_pick_their_node_and_keep_words_intact(launcher: str, var: str) -> None:
    (cmd,) = through_launcher(launcher, nodes_echoing())
    script = cmd.argv[cmd.argv.index("-c") + 1]
    out = subprocess.run(["bash", "-c", script], env={var: "2", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True)  # fmt: skip
    assert out.stdout == f"node2|{NASTY}|"
    bad = subprocess.run(["bash", "-c", script], env={var: "7", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and "no command for node 7" in bad.stderr


def test_ssh_remote_commands_survive_the_remote_shell() -> None:
    commands = through_launcher("ssh", nodes_echoing())
    assert [c.argv[-2] for c in commands] == ["h0", "h1", "h2"]
    remote = commands[1].argv[-1]  # sshd hands this string to the user's shell
    out = subprocess.run(["bash", "-c", remote], capture_output=True, text=True)
    assert out.stdout == f"node1|{NASTY}|"


def test_unknown_launcher_and_missing_hosts() -> None:
    with pytest.raises(DlperfError, match="choose one of: local, ssh, slurm, mpirun"):
        through_launcher("pbs", nodes_echoing())
    from dlperf.launch import resolve_hosts

    with pytest.raises(DlperfError, match="pass --hosts"):
        resolve_hosts(4, None)


def test_recorded_launch_commands_keep_no_ssh_options_and_no_secrets(monkeypatch) -> None:
    from dlperf.redact import SSH_OPTIONS_HIDDEN, stored_argv

    ssh = "env SSHPASS=s3cr3t-pass ssh -i /keys/s3cr3t-id -o ProxyCommand=s3cr3t-proxy"
    monkeypatch.setenv("DLPERF_SSH", ssh)
    nodes = [
        NodeCommand(n, f"gpu{n}", ("python", "train.py", "--db-password", "s3cr3t-arg"), "/w",
                    {"OMP_NUM_THREADS": "4", "NCCL_AUTH_TOKEN": "s3cr3t-env",
                     "HOROVOD_GLOO_RENDEZVOUS_ADDR": "user:s3cr3t-gloo@gpu0"})
        for n in range(2)
    ]  # fmt: skip
    for launcher in ("ssh", "slurm", "mpirun"):
        started = through_launcher(launcher, nodes, node_logs=["/l/n0.log", "/l/n1.log"])
        for cmd in started:
            stored = stored_argv(cmd.argv)
            text = " ".join(stored)
            assert "s3cr3t" not in text and "/keys/" not in text and "SSHPASS" not in text
            assert "OMP_NUM_THREADS=4" in text  # ordinary settings stay
            if launcher == "ssh":
                assert stored[:3] == ["env", SSH_OPTIONS_HIDDEN, "-tt"]
                assert cmd.argv[: len(ssh.split())] == tuple(ssh.split())  # what runs is intact
            else:
                assert stored[0] == ("srun" if launcher == "slurm" else "mpirun")


# ------------------------------------------------------------------ real launchers, live
# A private sshd on a free loopback port and Open MPI's mpirun start the nodes for real; the
# two "nodes" are this host twice (the results folder is trivially shared).


def pace_spec(**options: str):
    return resolve_spec(
        "calibration", "pace", preset="smoke",
        overrides={"nodes": 2, "devices_per_node": 1, "skip": 3, "measure": 10, "repeats": 1,
                   "batch_size": 10, "no_output_timeout_s": 5.0, "timeout_s": 60.0,
                   "options": {"step_ms": "20", **options}},
    )  # fmt: skip


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory):
    import shutil
    import time

    sshd = shutil.which("sshd") or next(
        (p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if Path(p).exists()), None
    )
    if not sshd or not shutil.which("ssh"):
        pytest.skip("no OpenSSH server here (apt-get install openssh-server; .ci/run does)")
    d = tmp_path_factory.mktemp("sshd")
    for key in ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)],
                       check=True)  # fmt: skip
    (d / "authorized_keys").write_text((d / "user.pub").read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n"
        f"PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nPidFile {d}/sshd.pid\n"
    )
    (d / "ssh_config").write_text(
        f"Host *\n  Port {port}\n  IdentityFile {d}/user\n  UserKnownHostsFile {d}/known_hosts\n"
        "  LogLevel ERROR\n  StrictHostKeyChecking accept-new\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
    server = subprocess.Popen([sshd, "-D", "-f", str(d / "sshd_config"), "-E", str(d / "log")])
    for _ in range(50):
        if subprocess.run(["ssh", "-F", str(d / "ssh_config"), "-o", "BatchMode=yes",
                           "127.0.0.1", "true"], capture_output=True).returncode == 0:  # fmt: skip
            break
        time.sleep(0.1)
    else:
        server.kill()
        pytest.skip(f"the test sshd did not accept a login: {(d / 'log').read_text()[-500:]}")
    yield f"ssh -F {d / 'ssh_config'}"
    server.terminate()
    server.wait()


@pytest.mark.multiprocess
def test_ssh_launcher_runs_a_two_node_job(sshd, tmp_path, monkeypatch) -> None:
    from dlperf.launch import JobLaunch
    from dlperf.runner import run_benchmark
    from dlperf.schema import ResultStatus

    monkeypatch.setenv("DLPERF_SSH", sshd)
    launch = JobLaunch("ssh", ("127.0.0.1", "localhost"))
    result, _ = run_benchmark(check_run(pace_spec(), launch=launch), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    (r,) = result.repeats
    assert r.throughput == pytest.approx(throughput_from_marks(r)[0], rel=1e-9)  # both ranks
    # $DLPERF_SSH's options (here -F CONFIG) are never stored, only the program
    assert r.command[:3] == ["ssh", "<options from $DLPERF_SSH not stored>", "-tt"]
    assert result.job.launcher == "ssh" and result.job.hosts == ["127.0.0.1", "localhost"]
    assert result.job.world_size == 2 and result.job.global_batch == 20
    raw = Path(r.log_path).parent
    assert "step 13/13" in (raw / "repeat-1.node1.log").read_text()
    # The nodes ran elsewhere: the repeat's telemetry says it was not sampled, and why.
    assert r.telemetry is not None and r.telemetry.samples == 0
    assert r.telemetry.energy_note.startswith("not sampled: the ssh launcher runs the nodes")


@pytest.mark.multiprocess
def test_ssh_launcher_runs_even_a_single_rank_on_the_named_host(sshd, tmp_path, monkeypatch):
    from dlperf.launch import JobLaunch
    from dlperf.runner import run_benchmark
    from dlperf.schema import ResultStatus

    monkeypatch.setenv("DLPERF_SSH", sshd)
    spec = pace_spec().model_copy(update={"nodes": 1})
    result, _ = run_benchmark(check_run(spec, launch=JobLaunch("ssh", ("localhost",))), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    (r,) = result.repeats
    assert r.command[0] == "ssh"
    assert r.throughput == pytest.approx(throughput_from_marks(r)[0], rel=1e-9)
    assert result.job.hosts == ["localhost"] and result.job.world_size == 1


@pytest.mark.multiprocess
def test_ssh_launcher_hangs_up_remote_ranks_when_one_node_fails(sshd, tmp_path, monkeypatch):
    from dlperf.launch import JobLaunch
    from dlperf.runner import run_benchmark
    from dlperf.schema import RepeatStatus

    monkeypatch.setenv("DLPERF_SSH", sshd)
    launch = JobLaunch("ssh", ("127.0.0.1", "127.0.0.1"))
    result, _ = run_benchmark(
        check_run(pace_spec(hang_at_step="4", fault_rank="1"), launch=launch), tmp_path
    )
    (r,) = result.repeats
    assert r.status == RepeatStatus.hung and r.message.startswith("node 1: no output for 5 s")
    assert not workload_processes(tmp_path)  # killing the local ssh hung up the remote ranks


# The same, with jax: two processes joined by jax.distributed.initialize (coordinator, process
# count and id from dlperf's launch plan) and gloo, a tiny ResNet50 whose gradients really cross
# the loopback between the two "nodes".
JAX_TINY = {"nodes": 2, "devices_per_node": 1, "image_size": 32, "batch_size": 2, "skip": 1,
            "measure": 2, "repeats": 1}  # fmt: skip


def jax_spec():
    return resolve_spec("jax", "resnet50", preset="smoke", overrides=JAX_TINY)


def check_jax_job(r, raw: Path, cwd: Path | None = None) -> None:
    """A two-node jax repeat: both nodes stepped to the end, each wrote its rank's events, and
    the throughput is the marks' arithmetic (both ranks' samples over the slower window)."""
    steps = JAX_TINY["skip"] + JAX_TINY["measure"]
    for n in (0, 1):
        assert f"step {steps}/{steps}" in (raw / f"repeat-1.node{n}.log").read_text()
    assert sorted(p.name for p in raw.glob("repeat-1.events.rank*.jsonl")) == [
        "repeat-1.events.rank0.jsonl", "repeat-1.events.rank1.jsonl"
    ]  # fmt: skip
    expected, elapsed = throughput_from_marks(r, cwd)
    assert r.throughput == pytest.approx(expected, rel=1e-9) and len(elapsed) == 2
    assert r.window.samples == 2 * JAX_TINY["batch_size"] * JAX_TINY["measure"]
    assert r.workload["world_size"] == 2  # jax.device_count() across the joined processes


@pytest.mark.multiprocess
@pytest.mark.framework
def test_ssh_launcher_runs_a_two_node_jax_job(sshd, tmp_path, monkeypatch) -> None:
    from dlperf.launch import JobLaunch
    from dlperf.runner import run_benchmark
    from dlperf.schema import ResultStatus

    monkeypatch.setenv("DLPERF_SSH", sshd)
    launch = JobLaunch("ssh", ("127.0.0.1", "localhost"))
    result, _ = run_benchmark(check_run(jax_spec(), launch=launch), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    (r,) = result.repeats
    assert r.command[0] == "ssh" and result.job.launcher == "ssh"
    check_jax_job(r, Path(r.log_path).parent)


def mpirun_env(monkeypatch) -> None:
    import os
    import shutil

    if not shutil.which("mpirun"):
        pytest.skip("no mpirun here (apt-get install openmpi-bin; .ci/run does)")
    if os.geteuid() == 0:  # Open MPI refuses root unless told it is meant
        monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
        monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


@pytest.mark.multiprocess
def test_mpirun_launcher_runs_a_two_node_job(tmp_path, monkeypatch) -> None:
    from dlperf.launch import JobLaunch
    from dlperf.runner import run_benchmark
    from dlperf.schema import ResultStatus

    mpirun_env(monkeypatch)
    launch = JobLaunch("mpirun", ("127.0.0.1", "127.0.0.1"))
    result, _ = run_benchmark(check_run(pace_spec(), launch=launch), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    (r,) = result.repeats
    assert r.throughput == pytest.approx(throughput_from_marks(r)[0], rel=1e-9)
    assert r.command[0] == "mpirun" and result.job.launcher == "mpirun"
    raw = Path(r.log_path).parent
    for n in (0, 1):  # the dispatch script sent each node's output to its own log
        assert "step 13/13" in (raw / f"repeat-1.node{n}.log").read_text()


@pytest.mark.multiprocess
@pytest.mark.framework
def test_mpirun_launcher_runs_a_two_node_jax_job(tmp_path, monkeypatch) -> None:
    from dlperf.launch import JobLaunch
    from dlperf.runner import run_benchmark
    from dlperf.schema import ResultStatus

    mpirun_env(monkeypatch)
    launch = JobLaunch("mpirun", ("127.0.0.1", "127.0.0.1"))
    result, _ = run_benchmark(check_run(jax_spec(), launch=launch), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    (r,) = result.repeats
    assert r.command[0] == "mpirun" and result.job.launcher == "mpirun"
    check_jax_job(r, Path(r.log_path).parent)


@pytest.mark.multiprocess
def test_mpirun_launcher_tears_the_job_down_when_a_rank_crashes(tmp_path, monkeypatch) -> None:
    from dlperf.launch import JobLaunch
    from dlperf.runner import run_benchmark
    from dlperf.schema import RepeatStatus

    mpirun_env(monkeypatch)
    launch = JobLaunch("mpirun", ("127.0.0.1", "127.0.0.1"))
    spec = pace_spec(crash_at_step="4", fault_rank="0")
    result, _ = run_benchmark(check_run(spec, launch=launch), tmp_path)
    (r,) = result.repeats
    assert r.status == RepeatStatus.crashed, r.message
    assert "crashing at step 4" in r.log_tail
    assert not workload_processes(tmp_path)


def test_slurm_outside_an_allocation_says_what_to_do(tmp_path, monkeypatch) -> None:
    from dlperf.launch import JobLaunch
    from dlperf.runner import run_benchmark

    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    with pytest.raises(DlperfError, match="run dlperf under salloc or sbatch"):
        run_benchmark(check_run(pace_spec(), launch=JobLaunch("slurm")), tmp_path)


def test_slurm_hosts_are_resolved_once_per_run(tmp_path, monkeypatch) -> None:
    from unittest import mock

    from dlperf.launch import JobLaunch
    from dlperf.runner import prepare_run

    nodes = mock.Mock(return_value=["127.0.0.1", "127.0.0.1"])  # scontrol's answer
    monkeypatch.setattr("dlperf.launch.slurm_hosts", nodes)
    run = prepare_run(check_run(pace_spec(), launch=JobLaunch("slurm")), tmp_path)
    launch = run.plan.launch
    assert launch.hosts == ("127.0.0.1", "127.0.0.1") and launch.dispatched
    assert launch.job_info(run.spec).hosts == ["127.0.0.1", "127.0.0.1"]
    assert nodes.call_count == 1  # not once more per repeat, nor for the stored result


def test_sbatch_script_reruns_the_same_benchmark_inside_the_allocation(tmp_path) -> None:
    from typer.testing import CliRunner

    from dlperf.cli import app

    script = tmp_path / "job.sbatch"
    out = CliRunner().invoke(app, [
        "run", "pytorch", "resnet50", "--nodes", "4", "--devices-per-node", "8", "--device",
        "cuda", "--amp", "--results-dir", str(tmp_path / "r"), "--sbatch", str(script),
    ])  # fmt: skip
    assert out.exit_code == 0, out.output
    text = script.read_text()
    assert "#SBATCH --nodes=4" in text and "#SBATCH --gpus-per-node=8" in text
    exec_line = text.strip().splitlines()[-1]
    assert exec_line.endswith("--launcher slurm") and "--amp" in exec_line
    assert "--nodes 4 --devices-per-node 8" in exec_line and "--batch-size 256" in exec_line
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


# The nodes' names, in Slurm's (sorted) order. A job's master address is node 0's name, as on
# a real cluster, where node names resolve: a framework that connects to it (jax's coordinator)
# needs a name this host resolves, so node 0 is named as this host is (Slurm refuses the name
# localhost), and node 1 after it, so that it sorts second.
SLURM_NODES = (socket.gethostname(), f"{socket.gethostname()}-peer")

SLURM_CONF = """\
ClusterName=dlperf-test
SlurmctldHost=localhost
SlurmctldPort={port}
SlurmdPort={port1}
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={n0} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port2} CPUs=2 State=UNKNOWN
NodeName={n1} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port3} CPUs=2 State=UNKNOWN
PartitionName=test Nodes={n0},{n1} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    """A two-node Slurm cluster on this host: munged, slurmctld and one slurmd per node."""
    import os
    import shutil
    import time

    import psutil

    if not all(shutil.which(p) for p in ("slurmctld", "slurmd", "salloc", "munged")):
        pytest.skip("no Slurm here (apt-get install slurm-wlm; .ci/run does)")
    if os.geteuid() != 0:
        pytest.skip("the test Slurm cluster runs its daemons as root")
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    ports = []
    for _ in range(4):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    conf = d / "slurm.conf"
    n0, n1 = SLURM_NODES
    conf.write_text(SLURM_CONF.format(d=d, port=ports[0], port1=ports[1], port2=ports[2],
                                      port3=ports[3], n0=n0, n1=n1))  # fmt: skip
    env = {**os.environ, "SLURM_CONF": str(conf)}
    Path("/run/munge").mkdir(exist_ok=True)
    munge_pid = d / "munged.pid"
    munge_socket = d / "munge.socket"
    subprocess.run(["munged", "--force", f"--socket={munge_socket}", f"--pid-file={munge_pid}"],
                   check=True, capture_output=True)  # fmt: skip
    # Slurm's munge plugin finds the socket through AuthInfo.
    conf.write_text(conf.read_text() + f"AuthInfo=socket={munge_socket}\n")
    subprocess.run(["slurmctld", "-c"], env=env, check=True)
    for node in SLURM_NODES:
        subprocess.run(["slurmd", "-N", node], env=env, check=True)
    for _ in range(100):
        out = subprocess.run(["sinfo", "-h", "-o", "%T %D"], env=env, capture_output=True,
                             text=True).stdout.split()  # fmt: skip
        if out == ["idle", "2"]:
            break
        time.sleep(0.2)
    else:
        pytest.skip(f"the test Slurm cluster did not come up: {out}")
    daemons = [psutil.Process(int(f.read_text())) for f in [munge_pid, *d.glob("slurm*.pid")]]
    yield env
    for proc in daemons:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(daemons, timeout=10)
    for proc in alive:
        proc.kill()


def salloc_run(slurm_env, results: Path, *options: str) -> subprocess.CompletedProcess:
    run = ["calibration", "pace", "--preset", "smoke", "--nodes", "2", "--devices-per-node", "1",
           "--skip", "3", "--measure", "10", "--repeats", "1", "--batch-size", "10",
           "--no-output-timeout", "5", "--set", "step_ms=20", *options]  # fmt: skip
    return salloc_dlperf_run(slurm_env, results, run, timeout_s=120)


def salloc_dlperf_run(
    slurm_env, results: Path, run: list[str], timeout_s: float
) -> subprocess.CompletedProcess:
    """`salloc -N 2 dlperf run RUN... --launcher slurm` in the test cluster, as JSON."""
    import sys

    dlperf = [sys.executable, "-m", "dlperf", "run", *run, "--launcher", "slurm",
              "--results-dir", str(results), "--json"]  # fmt: skip
    return subprocess.run(["salloc", "-N", "2", *dlperf], env=slurm_env, capture_output=True,
                          text=True, timeout=timeout_s)  # fmt: skip


@pytest.mark.multiprocess
def test_slurm_launcher_runs_a_two_node_job_in_an_allocation(slurm, tmp_path) -> None:
    import json

    out = salloc_run(slurm, tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    (r,) = result["repeats"]
    from dlperf.schema import Repeat

    marks = throughput_from_marks(Repeat.model_validate(r))[0]
    assert r["throughput"] == pytest.approx(marks, rel=1e-9)
    assert r["command"][0] == "srun" and f"--nodelist={','.join(SLURM_NODES)}" in r["command"]
    assert result["job"]["hosts"] == list(SLURM_NODES) and result["job"]["launcher"] == "slurm"
    raw = Path(r["log_path"]).parent
    for n in (0, 1):
        assert "step 13/13" in (raw / f"repeat-1.node{n}.log").read_text()


@pytest.mark.multiprocess
def test_slurm_launcher_cancels_every_task_when_a_node_hangs(slurm, tmp_path) -> None:
    import json

    out = salloc_run(slurm, tmp_path, "--set", "hang_at_step=4", "--set", "fault_rank=1")
    assert out.returncode == 2, out.stderr
    (r,) = json.loads(out.stdout)["repeats"]
    assert r["status"] == "hung" and "hanging at step 4" in r["log_tail"]
    assert not workload_processes(tmp_path)


@pytest.mark.multiprocess
@pytest.mark.framework
def test_slurm_launcher_runs_a_two_node_jax_job_in_an_allocation(slurm, tmp_path) -> None:
    import json

    from dlperf.schema import Repeat

    options = [f"--{k.replace('_', '-')}={v}" for k, v in JAX_TINY.items()]
    out = salloc_dlperf_run(slurm, tmp_path, ["jax", "resnet50", "--preset", "smoke", *options],
                            timeout_s=900)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert result["status"] == "ok", result["warnings"]
    (r,) = result["repeats"]
    assert r["command"][0] == "srun" and result["job"]["launcher"] == "slurm"
    check_jax_job(Repeat.model_validate(r), Path(r["log_path"]).parent)
