"""`dlperf sources ...`: official upstream implementations, pinned checkouts with tracked
patches."""

from __future__ import annotations

import typer
from rich.markup import escape as esc

import dlperf.cli.options as o
from dlperf.cli.output import console, print_whole
from dlperf.cli.render_setup import print_sources


def sources_list(profile: o.Profile = None) -> None:
    """Every manifest, its pin and its checkout's state.

    By profile: each manifest's name (what --source takes), framework and model, upstream
    commit, log format, environment and checkout state; then each model a framework has no
    official code for, and why."""
    from dlperf.official.checkout import source_states
    from dlperf.official.manifest import (
        DEFAULT_PROFILE,
        load_absences,
        manifests_dir,
        select_manifests,
    )

    chosen = {m.name: m for m in select_manifests(None, profile)}
    print_sources(console, source_states(chosen))
    for absence in load_absences().values():
        if profile in (None, absence.profile):
            console.print(esc(absence.message), highlight=False)
    console.print(
        f"* = the default for its framework, model and profile; --profile {DEFAULT_PROFILE} "
        "is the default profile of `dlperf run --impl official`"
    )
    print_whole(console, "manifests:", manifests_dir())


def sources_fetch(
    names: o.ManifestNames = None,
    profile: o.Profile = None,
    sources_dir: o.SourcesDir = None,
    refetch: o.Refetch = False,
) -> None:
    """Clone each upstream at its pin and apply its patches.

    The pinned commit, then its tracked patches."""
    from dlperf.official.checkout import fetch_source, upstream_patches
    from dlperf.official.manifest import select_manifests

    done: set[str] = set()
    for m in select_manifests(names, profile):
        if m.upstream.name in done:
            continue
        done.add(m.upstream.name)
        path = fetch_source(m.upstream, sources_dir=sources_dir, refetch=refetch)
        patches = upstream_patches(m.upstream)
        head = f"{m.upstream.name} @ {m.upstream.short} + {len(patches)} patch(es):"
        print_whole(console, esc(head), path)


def sources_verify(names: o.ManifestNames = None, profile: o.Profile = None) -> None:
    """Check each fetched checkout against its pin and patches.

    The pinned commit, exactly the tracked patches, nothing else."""
    from dlperf.official.checkout import source_states
    from dlperf.official.manifest import select_manifests

    bad = 0
    for st in source_states({m.name: m for m in select_manifests(names, profile)}):
        m = st.manifest
        if st.state == "missing":
            console.print(f"{m.name}: [yellow]not fetched[/] (dlperf sources fetch {m.name})")
        elif st.state == "ready":
            print_whole(console, f"{esc(m.name)}: [green]ok[/] {m.upstream.short}", st.path)
        else:
            console.print(f"{m.name}: [red]bad[/] {esc(st.state.removeprefix('broken: '))}",
                          highlight=False)  # fmt: skip
        bad += st.state != "ready"
    if bad:
        raise typer.Exit(1)
