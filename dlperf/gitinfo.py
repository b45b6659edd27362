"""The git commits a result's context was at: dlperf's own checkout and the user's working
repository (where dlperf ran), and the last commit that touched a results folder.

Everything here asks `git` in a subprocess with a short timeout and answers None when git is
missing, slow, or the folder is not in a repository: provenance never fails a run.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path

GIT_TIMEOUT_S = 5.0
# dlperf's source tree when it runs from a checkout (an editable install, PYTHONPATH): the
# folder that holds the `dlperf` package.
DLPERF_ROOT = Path(__file__).resolve().parent.parent
# What of dlperf's checkout is the code that measures: a change elsewhere (the committed
# reports/ that `scripts/quickstart` rewrites, results, a site, the README) is not a change to
# how a number was measured, so it does not make a result "dirty".
DLPERF_CODE = ("dlperf", "adapters", "third_party_scripts", "patches", "pyproject.toml",
               "setup.py")  # fmt: skip
# In the repository dlperf runs in: dlperf's own output folders (by their default names) are
# not the user's code either.
OUTPUT_FOLDERS = ("results", "reports", "site")


def git(args: list[str], cwd: Path, timeout: float = GIT_TIMEOUT_S) -> str | None:
    """git's stdout (stripped) for `args` run in `cwd`; None when git is missing, fails, hangs
    or `cwd` is not there."""
    try:
        done = subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip()


@dataclass(frozen=True)
class Checkout:
    """A repository's HEAD commit (full hash) and whether tracked files differ from it (None
    when git could not tell in time)."""

    root: Path
    commit: str
    dirty: bool | None


def checkout_of(folder: Path, pathspec: tuple[str, ...] = ()) -> Checkout | None:
    """The repository `folder` is in (its HEAD and dirtiness), or None outside any repository
    or in one without a commit yet. `pathspec`: only these paths count towards dirtiness
    (git pathspecs, from the repository's top)."""
    root = git(["rev-parse", "--show-toplevel"], folder)
    commit = git(["rev-parse", "--verify", "-q", "HEAD"], folder) if root else None
    if not root or not commit:
        return None
    # Untracked files do not count: new results and logs in a tracked tree are not a change
    # to the code that made them.
    spec = [f":(top){p}" if not p.startswith(":") else p for p in pathspec]
    args = ["status", "--porcelain", "--untracked-files=no"]
    status = git([*args, "--", *spec] if spec else args, folder)
    return Checkout(Path(root), commit, None if status is None else bool(status))


def source_checkout(root: Path) -> Checkout | None:
    """The checkout rooted exactly at `root`, else None: a wheel's site-packages may sit inside
    some repository (a project's .venv), which is not the installed package's source."""
    found = checkout_of(root, DLPERF_CODE)
    if found is None or found.root.resolve() != root.resolve():
        return None
    return found


@functools.lru_cache(maxsize=1)
def dlperf_checkout() -> Checkout | None:
    """dlperf's own checkout when it runs from one; None when it runs from an installed wheel.
    Cached: dlperf's source does not change while it runs."""
    return source_checkout(DLPERF_ROOT)


def provenance(workdir: Path | None = None) -> dict[str, str | bool | None]:
    """The Environment's commit fields: dlperf's checkout, and the repository of `workdir`
    (default: the current directory, where the user ran dlperf)."""
    own = dlperf_checkout()
    try:
        here = checkout_of(workdir if workdir is not None else Path.cwd())
    except OSError:  # the current directory was removed
        here = None
    if here is not None and own is not None and here.root.resolve() == own.root.resolve():
        here = own  # dlperf run inside its own checkout: its code is what counts
    elif here is not None:
        outputs = tuple(f":(top,exclude){name}" for name in OUTPUT_FOLDERS)
        here = checkout_of(here.root, outputs)
    return {
        "dlperf_commit": own.commit if own else None,
        "dlperf_dirty": own.dirty if own else None,
        "workdir_commit": here.commit if here else None,
        "workdir_dirty": here.dirty if here else None,
    }


def last_commit_touching(folder: Path) -> str | None:
    """The last git commit (short hash) that changed `folder`, when git tracks it (a team that
    commits its results); None when it is not in a repository, untracked or ignored."""
    return git(["log", "-1", "--format=%h", "--", "."], folder, timeout=10) or None
