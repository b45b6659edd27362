"""Launchers: every node's command for ssh, slurm and mpirun (snapshot for 4 nodes x 8 GPUs),
and the quoting checked by a real shell."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dlperf import DlperfError
from dlperf.adapters import get_adapter
from dlperf.launch import NodeCommand, node_commands, through_launcher
from dlperf.runner import resolve_spec

SNAPSHOT = Path(__file__).with_name("snapshots") / "launchers-pytorch-4x8.txt"


def render_4x8() -> str:
    spec = resolve_spec(
        "pytorch", "resnet50",
        overrides={"nodes": 4, "devices_per_node": 8, "device": "cuda", "precision": "amp"},
    )  # fmt: skip
    adapter = get_adapter("pytorch")
    hosts = [f"gpu{i}.cluster" for i in range(4)]
    nodes = node_commands(adapter, spec, "/opt/dlperf/env/bin/python", hosts, 29500)
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
