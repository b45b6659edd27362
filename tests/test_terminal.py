"""The terminal at 80 columns (and 120): paths and ids printed whole, warnings said once per
kind, `history` one line per point, `compare` as tables in a real pseudo-terminal, full names in
the listings, help placeholders as words and one-line command summaries; `dlperf --help` and
`dlperf list` import no numeric library."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlperf.cli import app

REAL = Path(__file__).parent / "data" / "real_results"
HEAVY = ("numpy", "pandas", "scipy", "matplotlib", "plotly")


def dlperf(*args: str, cwd: Path, columns: int = 80, **env: str) -> subprocess.CompletedProcess:
    """A real `dlperf` in a pipe, told the terminal is `columns` wide (as $COLUMNS)."""
    return subprocess.run(
        [sys.executable, "-m", "dlperf", *args], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, "COLUMNS": str(columns), **env},
    )  # fmt: skip


def in_terminal(*args: str, cwd: Path, columns: int = 80) -> tuple[int, str]:
    """A real `dlperf` whose stdout and stderr are a pseudo-terminal `columns` wide (its window
    size, no $COLUMNS): (exit code, what it showed, colours and carriage returns taken out)."""
    import fcntl
    import pty
    import struct
    import termios

    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "dlperf", *args], cwd=cwd, stdin=child,
                            stdout=child, stderr=child, env={**env, "TERM": "xterm"})  # fmt: skip
    os.close(child)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", shown.decode())
    return proc.wait(), text.replace("\r\n", "\n")


def fits(text: str, columns: int, *whole: str) -> None:
    """Every line within `columns`, except a line that is one of `whole` (a path wider than
    the terminal, on its own line); nothing cut with an ellipsis."""
    assert "…" not in text, text
    for line in text.splitlines():
        assert len(line.rstrip()) <= columns or line.strip() in whole, line


# ------------------------------------------------------------------- paths and ids whole


@pytest.mark.multiprocess
def test_run_prints_the_stored_path_whole_at_80_columns(tmp_path: Path) -> None:
    # A path wider than 80 (and than the 120 a pipe used to get) goes on a line of its own.
    results = tmp_path / "a-results-folder-whose-name-alone-takes-half-of-an-80-column-line"
    out = dlperf("run", "calibration", "pace", "--preset", "smoke", "--set", "step_ms=1",
                 "--measure", "5", "--results-dir", str(results), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    (path,) = results.rglob("*.json")
    assert len(str(path)) > 120
    assert str(path) in out.stdout.splitlines()  # whole, on its own line
    fits(out.stdout, 80, str(path))


@pytest.mark.multiprocess
def test_a_sweep_names_every_configuration_whole_and_each_warning_once(tmp_path: Path) -> None:
    (tmp_path / "m.toml").write_text(
        '[sweep]\npreset = "smoke"\nframeworks = ["calibration"]\nmodels = ["pace"]\n'
        'batch_sizes = [4, 8, 16]\nrepeats = 2\nmeasure = 5\n[sweep.set]\nstep_ms = "1"\n'
    )
    out = dlperf("sweep", "m.toml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ids = sorted(p.parent.name for p in (tmp_path / "results").glob("*/*.json"))
    assert len(ids) == 3
    table = out.stdout[out.stdout.index("result(s) stored in") :]
    for benchmark in ids:
        assert re.search(rf"│ {benchmark} ", table), benchmark  # the id whole in its cell
    # Two repeats each: the same warning for the three, said once, naming them all.
    assert table.count("only 2 repeat(s) of throughput") == 1
    assert "for all 3 configurations" in table
    fits(table, 80)


@pytest.mark.multiprocess
def test_report_export_and_publish_name_their_files_whole(tmp_path: Path) -> None:
    shutil.copytree(REAL, tmp_path / "results")
    deep = tmp_path / "an-export-folder-with-a-name-long-enough-to-need-its-own-line-at-80"
    deep.mkdir()
    target = deep / "newest-result-of-each-configuration.csv"
    out = dlperf("export", "--format", "csv", "--out", str(target), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert str(target) in out.stderr.splitlines()
    fits(out.stderr, 80, str(target))
    out = dlperf("report", "--reports-dir", str(deep / "reports"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    written = sorted(str(p) for p in (deep / "reports").iterdir())
    assert set(written) <= set(out.stdout.split())  # each path a whole word
    fits(out.stdout, 80, *written)
    out = dlperf("publish", "--out", str(deep / "site"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    index = str(deep / "site" / "index.html")
    assert index in out.stdout.splitlines()
    fits(out.stdout, 80, index)


@pytest.mark.multiprocess
def test_score_names_each_configuration_whole(tmp_path: Path) -> None:
    shutil.copytree(REAL, tmp_path / "results")
    out = dlperf("score", "--freeze", "ref.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    out = dlperf("score", "--reference", "ref.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ids = {p.name for p in (tmp_path / "results").iterdir() if p.is_dir()}
    assert ids <= set(out.stdout.split()), out.stdout
    fits(out.stdout, 80)


# ------------------------------------------------------------------------------- history


@pytest.mark.multiprocess
@pytest.mark.parametrize("columns", [80, 120])
def test_history_is_one_line_per_point(tmp_path: Path, columns: int) -> None:
    shutil.copytree(REAL, tmp_path / "results")
    out = dlperf("history", cwd=tmp_path, columns=columns)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for path in (tmp_path / "results").rglob("*.json"):
        # One row each: the id whole, its median, repeats, change and verdict.
        row = rf"  {path.stem} +[\d.]+ +3 +(–|[+-][\d.]+%) +\w[\w ]*"
        assert len([line for line in lines if re.fullmatch(row, line.rstrip())]) == 1, out.stdout
    assert "changed since the point before: setting channels_last 0 -> 1" in " ".join(
        out.stdout.split()
    )
    fits(out.stdout, columns)


# ------------------------------------------------------------------------------- compare


@pytest.mark.multiprocess
def test_compare_is_tables_that_fit_a_terminal(tmp_path: Path) -> None:
    from test_compare import compare_folders

    a, b, c = compare_folders(tmp_path)
    code, shown = in_terminal("compare", str(a), str(b), cwd=tmp_path)
    assert code == 2, shown  # the quiet ablation regressed: exit codes as before
    fits(shown, 80)
    assert "\\" not in shown and "|" not in shown and "**" not in shown  # no Markdown
    lines = shown.splitlines()
    assert lines[0] == "Machine: AMD EPYC 7B13, 2 CPUs."  # one machine, named in full
    words = " ".join(shown.split())  # a word broken across lines would read as two here
    # Each pair a row: its settings, both medians and the change whole on one line.
    assert re.search(r"^  channels_last=0, fused_optimizer=1 +100 +80 +-20\.0% +regression "
                     r"\(p 0\.00058\) *$", shown, re.M), shown  # fmt: skip
    assert re.search(r"^  channels_last=1, fused_optimizer=1 +7 +3\.5 +-50\.0% +within noise *$",
                     shown, re.M), shown  # fmt: skip
    # Why within noise, and what would show a change: the repeats a side, or that none can.
    assert ("why within noise: 3 vs 3 repeats at CV 112% and 117%: the 95% CI overlap test "
            "cannot reach significance at n=3/3 at all; a 5% change needs more than 100 "
            "repeats a side") in words  # fmt: skip
    # Imported MLPerf references stay out unless asked.
    assert "mlperf" not in shown.lower().replace("imported mlperf results", "")
    assert "2 published reference(s) (imported MLPerf results) left out" in words
    code, shown = in_terminal("compare", str(a), str(b), "--include-references", cwd=tmp_path)
    assert code == 2 and "suite=mlperf-training" in " ".join(shown.split()), shown
    fits(shown, 80)
    # Across machines: the machines first, each row naming CPU model and count, GPUs, threads.
    code, shown = in_terminal("compare", str(a), str(c), "--across-machines", cwd=tmp_path)
    assert code == 0, shown
    fits(shown, 80)
    lines, words = shown.splitlines(), " ".join(shown.split())
    assert lines[:3] == [
        "Across machines (asked for with --across-machines):",
        "  A ran on AMD EPYC 7B13, 2 CPUs",
        "  B ran on 8 x NVIDIA H200 140 GiB, Intel Xeon Platinum 8480+, 224 CPUs",
    ]
    assert re.search(r"^  channels_last=0, fused_optimizer=1 +100 +300 +\+200\.0% +improvement",
                     shown, re.M), shown  # fmt: skip
    assert ("differs: CPU AMD EPYC 7B13 -> Intel Xeon Platinum 8480+; CPUs 2 -> 224; GPUs – -> "
            "8 x NVIDIA H200 140 GiB; threads 2 -> 112; host h -> node2") in words  # fmt: skip
    # Not asked: two machines, named as such, and nothing compared (exit 3).
    code, shown = in_terminal("compare", str(a), str(c), cwd=tmp_path)
    assert code == 3 and shown.startswith("Machines:\n  8 x NVIDIA H200"), shown
    fits(shown, 80)


# ----------------------------------------------------------------------- full names listed


@pytest.mark.multiprocess
def test_sources_list_env_list_and_list_show_full_names(tmp_path: Path) -> None:
    from dlperf.official.manifest import load_manifests

    names = [m.name for m in load_manifests().values()]
    assert max(map(len, names)) > 30
    out = dlperf("sources", "list", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    words = set(out.stdout.split())
    assert set(names) <= words
    fits(out.stdout, 80)
    listed = dlperf("list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert {w.rstrip("*,") for w in listed.stdout.split()} >= set(names)
    fits(listed.stdout, 80)
    home = tmp_path / "home"
    envs = ["tensorflow-cuda-py3.11-01b150707bbe", "oneflow-cpu-py3.10-4003988b3852"]
    for name in envs:
        (home / "envs" / name).mkdir(parents=True)
    out = dlperf("env", "list", cwd=tmp_path, DLPERF_HOME=str(home))
    assert out.returncode == 0, out.stderr
    assert all(re.search(rf"│ {name} +│ broken", out.stdout) for name in envs), out.stdout
    fits(out.stdout, 80)


def test_warnings_are_grouped_by_kind_with_their_numbers_as_ranges() -> None:
    from dlperf.warning_kinds import group_warnings

    busy = ("the machine was busy: other processes took up to {}% of its CPUs during "
            "repeat(s) {}, so these numbers may be low")  # fmt: skip
    groups = group_warnings([
        ("a", busy.format(81, "1, 2")), ("b", busy.format(83, "2, 3")),
        ("a", "only 2 repeat(s) of throughput: too few"), ("c", busy.format(82, "2")),
    ])  # fmt: skip
    assert groups == [
        (busy.format("81–83", "1, 2, 3"), ["a", "b", "c"]),
        ("only 2 repeat(s) of throughput: too few", ["a"]),
    ]


# ---------------------------------------------------------------------------------- help

COMMANDS = [[], ["run"], ["sweep"], ["parse"], ["report"], ["publish"], ["export"], ["score"],
            ["compare"], ["history"], ["doctor"], ["list"], ["check-models"], ["env"],
            ["env", "create"], ["env", "list"], ["env", "remove"], ["sources"],
            ["sources", "list"], ["sources", "fetch"], ["sources", "verify"]]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "dlperf")
def test_help_shows_words_as_placeholders_within_80_columns(command: list[str]) -> None:
    out = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    # No Python type (<str>, <list[str]>, <Path>, <bool>, <superbench|csv|...>) anywhere.
    assert not re.search(r"<[A-Za-z][^>\s]*>?", out.output), out.output
    assert not re.search(r"\b[A-Z]+_ ", out.output), out.output  # a parameter's own name
    fits(out.output, 80)


def commands_panel(text: str) -> list[str]:
    """The lines inside a help's Commands panel."""
    lines = text[text.index("─ Commands ─") :].splitlines()[1:]
    return lines[: next(i for i, line in enumerate(lines) if line.startswith("╰"))]


def test_top_level_help_lists_each_command_on_one_line() -> None:
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"})
    panel = commands_panel(out.output)
    names = [line.strip("│ ").split()[0] for line in panel]
    assert names == ["list", "run", "sweep", "check-models", "parse", "report", "publish",
                     "export", "score", "compare", "history", "doctor", "env",
                     "sources"]  # fmt: skip
    for group in ("env", "sources"):
        out = CliRunner().invoke(app, [group, "--help"], env={"COLUMNS": "80"})
        assert len(commands_panel(out.output)) == 3, out.output


# ------------------------------------------------------------------------- import weight


@pytest.mark.multiprocess
@pytest.mark.parametrize("command", [["--help"], ["list"]])
def test_help_and_list_import_no_numeric_library(tmp_path: Path, command: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dlperf", *command],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    modules = {line.rsplit("|", 1)[-1].strip().split(".")[0]
               for line in out.stderr.splitlines() if line.startswith("import time:")}  # fmt: skip
    assert "dlperf" in modules and "typer" in modules  # the list is read right
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
