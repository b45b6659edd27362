"""The workload scripts keep their own spelling of the host's contract (they run in the
framework's env, without dlperf): every DLPERF_* name they use must be one of the constants
`dlperf.events` holds, and their progress lines must match `events.STEP_LINE`. Read from the
source with `ast`: nothing is imported or run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from dlperf import events

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = ROOT / "adapters"
NAME = re.compile(r"\bDLPERF_[A-Z0-9_]+\b")


def workload_scripts() -> list[Path]:
    """Files run by a framework's interpreter (as tests/test_architecture.py): adapters/_shared/
    and, in each framework folder, everything but its host-side adapter (`__init__.py`)."""
    found = sorted((ADAPTERS / "_shared").glob("*.py"))
    for folder in sorted(p for p in ADAPTERS.iterdir() if p.is_dir() and p.name != "_shared"):
        found += sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
    return found


def trees() -> dict[Path, ast.AST]:
    return {p: ast.parse(p.read_text(), filename=str(p)) for p in workload_scripts()}


def test_every_env_name_a_workload_uses_is_a_host_constant() -> None:
    used: dict[str, set[str]] = {}
    for path, tree in trees().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in NAME.findall(node.value):
                    used.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert {"DLPERF_EVENTS", "DLPERF_LOADGEN_DIR"} <= used.keys()  # the scan finds them
    unknown = {n: sorted(where) for n, where in used.items() if n not in events.WORKLOAD_ENV}
    assert not unknown, f"names missing from dlperf/events.py's constants: {unknown}"


def test_workload_progress_lines_match_the_host_step_line() -> None:
    lines = []
    for path, tree in trees().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.JoinedStr) or not node.values:
                continue
            first = node.values[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith("step "):
                # Rendered with a number in every placeholder, as a run would print it.
                text = "".join(
                    str(v.value) if isinstance(v, ast.Constant) else "7" for v in node.values
                )
                lines.append((path.relative_to(ROOT), node.lineno, text))
    assert lines  # the kit's step line (and the calibration workload's own)
    wrong = [line for line in lines if not events.STEP_LINE.match(line[2])]
    assert not wrong, f"progress lines the host does not read: {wrong}"
