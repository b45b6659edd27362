"""The documentation site: its command reference is the CLI's own help, current and complete,
and the site builds strictly (a broken link, anchor or page fails). `scripts/test` also runs
`scripts/docs --check` before pytest, so CI says so first."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf.cli import app
from dlperf.cli.reference import REFERENCE, command_paths, command_reference, main

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / REFERENCE


def test_the_committed_reference_is_a_fresh_generation(tmp_path: Path) -> None:
    fresh = tmp_path / "commands.md"
    assert main([str(fresh)]) == 0
    assert fresh.read_text(encoding="utf-8") == COMMITTED.read_text(encoding="utf-8"), (
        "docs/reference/commands.md is stale: run `bash scripts/docs` and commit it"
    )
    assert main(["--check", str(COMMITTED)]) == 0


def test_a_stale_reference_is_refused_with_what_to_do(tmp_path: Path, capsys) -> None:
    stale = tmp_path / "commands.md"
    stale.write_text(command_reference().replace("--results-dir", "--results-folder"))
    assert main(["--check", str(stale)]) == 1
    err = capsys.readouterr().err
    assert "+* `--results-dir FOLDER`" in err
    assert "bash scripts/docs" in err


def test_every_command_and_option_has_its_place() -> None:
    text = COMMITTED.read_text(encoding="utf-8")
    paths = command_paths()
    # What the app registers (a command without a name is named after its function)
    registered = {
        c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands
    } | {g.name for g in app.registered_groups}
    assert {p.split()[1] for p in paths} == registered
    assert {"dlperf run", "dlperf env create", "dlperf sources verify"} <= set(paths)
    sections = dict(_sections(text))
    for path in paths:
        assert path in sections, f"{path} has no section in the reference"
    # run's options and its epilog's --set keys, made from the adapters, as Markdown
    assert "* `--preset NAME`" in sections["dlperf run"]
    assert "**pytorch**: " in sections["dlperf run"]
    assert "[bold]" not in text and "&#x27;" not in text


def _sections(text: str) -> list[tuple[str, str]]:
    """(`dlperf env create`, its text) for every heading of a command."""
    parts = re.split(r"^#+ `(dlperf[^`]*)`$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed: pip install -e '.[docs]' (scripts/_host_env.sh does)",
)
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    assert (tmp_path / "reference" / "commands.html").is_file()
    assert (tmp_path / "getting-started" / "index.html").is_file()
