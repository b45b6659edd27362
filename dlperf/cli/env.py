"""`dlperf list` (what can run, and whether its environment is ready) and `dlperf env ...`
(the isolated per-framework environments)."""

from __future__ import annotations

import sys

import typer
from rich.markup import escape as esc

import dlperf.cli.options as o
from dlperf import DlperfError
from dlperf.cli.output import console, print_whole
from dlperf.cli.render_setup import envs_table, print_frameworks


def list_cmd() -> None:
    """What can run, and whether each environment is ready.

    Frameworks x models x implementations (official manifests named as --source takes them)."""
    from dlperf.adapters import adapter_names, get_adapter
    from dlperf.envs import env_status
    from dlperf.models import MODELS
    from dlperf.official.manifest import load_manifests

    official: dict[tuple[str, str], list[str]] = {}
    for m in load_manifests().values():
        official.setdefault((m.framework, m.model), []).append(m.name + ("*" if m.default else ""))
    rows = []
    for name in adapter_names():
        adapter = get_adapter(name)
        spec = adapter.env_spec("cpu")
        state = env_status(spec) if spec else "host python"
        for model in adapter.models:
            impls = list(adapter.impls)
            if (name, model) in official:
                impls.append(f"official: {', '.join(sorted(official[name, model]))}")
            rows.append((name, state, model, "; ".join(impls), MODELS[model].description))
        for model in adapter.micro_models:
            rows.append((name, state, model, "micro", MODELS[model].description))
    print_frameworks(console, rows)
    console.print("official: upstream scripts (`dlperf sources list`); * = the default one")


def env_create(framework: str, device: o.EnvDevice = "cpu", rebuild: o.Rebuild = False) -> None:
    """Create (or verify and reuse) FRAMEWORK's environment."""
    from dlperf.adapters import get_adapter
    from dlperf.envs import ensure_env

    spec = get_adapter(framework).env_spec(device)
    if spec is None:
        console.print(f"{framework} runs on the host interpreter; it needs no environment")
        return
    with console.status(f"preparing {spec.name} (first build can take minutes)"):
        env = ensure_env(spec, rebuild=rebuild, log=lambda m: console.print(f"  {esc(m)}"))
    version = f" ({framework} {esc(env.framework_version)})"
    print_whole(console, "[green]ready[/]", env.path, version)


def env_list() -> None:
    """Environments on disk, their state and size."""
    from dlperf.envs import envs_root, list_envs

    records = list_envs()
    if not records:
        print_whole(console, "no environments in", envs_root())
        return
    console.print(envs_table(records))
    print_whole(console, "each is the folder of its name in", envs_root())


def env_remove(name: str, yes: o.Yes = False) -> None:
    """Remove environments (asks first).

    Those named NAME or starting with NAME- (e.g. `pytorch`)."""
    from dlperf.envs import list_envs, remove_envs

    matched = [r.name for r in list_envs() if r.name == name or r.name.startswith(f"{name}-")]
    if matched and not yes:
        if not sys.stdin.isatty():
            raise DlperfError(
                f"dlperf env remove {name} would delete {', '.join(matched)}; nobody is at a "
                "terminal to confirm, so nothing was removed: add --yes to remove them"
            )
        if not typer.confirm(f"remove {', '.join(matched)}?"):
            console.print("nothing removed")
            return
    for path in remove_envs(name):
        print_whole(console, "removed", path)
