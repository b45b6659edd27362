"""Per-node command lines for official implementations, built from their manifests.

A manifest's command and knob arguments are templates (`{batch_size}`, `{node_rank}`, ...);
`plan_nodes` fills them once per node, so ranks, host lists and master addresses are derived,
never hand-edited. A manifest whose `scope` is "once" gets one command, on node 0, that spreads
itself (mpirun/horovodrun with a host list). Container environments wrap the command in
`docker run` / `apptainer exec` with the checkout mounted. The launchers that start these
lines (local, ssh, slurm, mpirun) are `dlperf.launch`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dlperf import DlperfError
from dlperf.launch import DEFAULT_MASTER_PORT, NodeCommand, fill, node_values, resolve_hosts
from dlperf.official.manifest import Manifest, UpstreamEnvironment
from dlperf.schema import BenchmarkSpec

CONTAINER_SOURCE = "/workspace/upstream"  # where a container sees the checkout


@dataclass(frozen=True)
class LaunchPlan:
    nodes: tuple[NodeCommand, ...]
    knobs: tuple[str, ...]  # the manifest knobs that applied


def check_manifest(manifest: Manifest, spec: BenchmarkSpec, data_dir: str = "") -> None:
    """Refuse what `manifest`'s upstream cannot run for `spec` (its `unsupported` table)."""
    for knob, value in (("amp", spec.precision == "amp"), ("xla", spec.xla)):
        if value and knob in manifest.unsupported:
            raise DlperfError(
                f"{manifest.name} cannot run with --{knob}: {manifest.unsupported[knob]}"
            )
    if spec.nodes > 1 and "multi_node" in manifest.unsupported:
        raise DlperfError(
            f"{manifest.name} cannot run on several nodes: {manifest.unsupported['multi_node']}"
        )
    if not data_dir and "synthetic" in manifest.unsupported:
        raise DlperfError(
            f"{manifest.name} needs a dataset ({manifest.unsupported['synthetic']}); "
            "pass --data-dir PATH"
        )
    if "steps" in manifest.unsupported and "steps" not in manifest.args:
        raise DlperfError(
            f"{manifest.name} cannot be stopped after {spec.steps} steps: "
            f"{manifest.unsupported['steps']}"
        )


def applied_knobs(manifest: Manifest, spec: BenchmarkSpec, data_dir: str) -> tuple[str, ...]:
    """The manifest knobs that apply to `spec`, in the order their arguments are added."""
    # Synthetic data unless the user gives a dataset: dlperf measures the framework, not I/O.
    knobs = ["batch_size", "steps"] + ([] if data_dir else ["synthetic"])
    knobs.append("amp" if spec.precision == "amp" else "fp32")
    knobs.append("xla" if spec.xla else "no_xla")
    knobs.append("cpu" if spec.device == "cpu" else "cuda")  # --device: for scripts that take it
    if spec.nodes > 1:
        knobs.append("multi_node")
    return tuple(k for k in knobs if k in manifest.args or k in manifest.env_knobs)


def plan_nodes(
    manifest: Manifest,
    spec: BenchmarkSpec,
    *,
    checkout: Path,
    python: str,
    hosts: Sequence[str] | None = None,
    master_port: int = DEFAULT_MASTER_PORT,
    data_dir: str = "",
    out_dir: str = "upstream-output",
) -> LaunchPlan:
    """Every node's command line for `spec` run by `manifest`'s upstream at `checkout`."""
    check_manifest(manifest, spec, data_dir)
    node_hosts = resolve_hosts(spec.nodes, hosts)
    container = manifest.environment.kind == "container"
    source = CONTAINER_SOURCE if container else str(checkout)
    applied = applied_knobs(manifest, spec, data_dir)
    argv_templates = list(manifest.command.argv)
    env_templates = dict(manifest.command.env)
    for knob in applied:
        argv_templates += manifest.args.get(knob, ())
        env_templates.update(manifest.env_knobs.get(knob, {}))
    cwd = str(PurePosixPath(source) / manifest.command.cwd)
    ranks = range(1 if manifest.command.scope == "once" else spec.nodes)
    commands = []
    for rank in ranks:
        values = {
            **node_values(spec, node_hosts, rank, master_port),
            "python": "python" if container else python,
            "source": source,
            "data_dir": data_dir,
            "out_dir": out_dir,
            "image_size": str(spec.image_size or ""),
        }
        argv = [fill(t, values) for t in argv_templates]
        env = {k: fill(v, values) for k, v in env_templates.items()}
        if container:
            argv = container_argv(manifest.environment, checkout, cwd, env, argv, out_dir, data_dir)
            env, cwd_here = {}, str(checkout)
        else:
            cwd_here = cwd
        commands.append(NodeCommand(rank, node_hosts[rank], tuple(argv), cwd_here, env))
    return LaunchPlan(tuple(commands), applied)


def container_argv(
    environment: UpstreamEnvironment,
    checkout: Path,
    cwd: str,
    env: Mapping[str, str],
    argv: Sequence[str],
    out_dir: str,
    data_dir: str,
) -> list[str]:
    """`argv` run inside the manifest's image with the checkout mounted at CONTAINER_SOURCE and
    the output and data folders at their own paths."""
    mounts = [f"{checkout}:{CONTAINER_SOURCE}"]
    mounts += [f"{d}:{d}" for d in (out_dir, data_dir) if d.startswith("/")]
    if environment.runtime == "docker":
        out = ["docker", "run", "--rm", "--network=host", "--ipc=host", "--gpus=all"]
        for mount in mounts:
            out += ["-v", mount]
        out += ["-w", cwd]
        for key, value in sorted(env.items()):
            out += ["-e", f"{key}={value}"]
        return [*out, environment.image, *argv]
    out = ["apptainer", "exec", "--nv", "--bind", ",".join(mounts), "--pwd", cwd]
    for key, value in sorted(env.items()):
        out += ["--env", f"{key}={value}"]
    return [*out, f"docker://{environment.image}", *argv]
