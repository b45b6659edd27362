"""One result file: where results sit in a results folder, reading one (with schema upgrades,
refusing a newer schema), and listing a folder's result files.

Layout: ``<results>/<benchmark_id>/<result_id>.json``, raw logs beside it in ``<result_id>/``
(`dlperf.identity.benchmark_id`; folders named by the configuration keys of older dlperf
versions are read as they are). `dlperf.store.ResultStore` is what the rest of dlperf uses.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dlperf import DlperfError
from dlperf.files import describe
from dlperf.printable import SURROGATES, escaped
from dlperf.schema import SCHEMA_VERSION, Result
from dlperf.stats import CI_LEVEL, median_ci_ranks


def upgrade(data: dict[str, Any], source: str = "<data>") -> dict[str, Any]:
    """Bring an older result up to SCHEMA_VERSION; refuse a newer one."""
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise DlperfError(f"{source}: not a dlperf result (no integer schema_version)")
    if version > SCHEMA_VERSION:
        raise DlperfError(
            f"{source}: schema_version {version} is newer than this dlperf understands "
            f"({SCHEMA_VERSION}); upgrade dlperf (pip install -U dlperf) to read it"
        )
    # Upgrades chain here, one version at a time.
    if version == 1:  # 2 only added optional fields (spec.source, source, origin)
        data = {**data, "schema_version": 2}
    if data["schema_version"] == 2:  # 3 only added optional fields (practice, env kind, load)
        data = {**data, "schema_version": 3}
    if data["schema_version"] == 3:  # 4 redefined the summaries' interval: recomputed
        data = {**data, "schema_version": 4}
        if "metrics" in data:
            data["metrics"] = _median_intervals(data["metrics"])
    if data["schema_version"] == 4:  # 5 only added optional fields (metrics.peer, repeat.peer)
        data = {**data, "schema_version": 5}
    if data["schema_version"] == 5:  # 6 only added optional fields (telemetry, commits)
        data = {**data, "schema_version": 6}
    if data["schema_version"] == 6:  # 7 only added optional fields (the machine's GPUs)
        data = {**data, "schema_version": 7}
    if data["schema_version"] == 7:  # 8 only added an optional field (repeat.peak_rss_mib)
        data = {**data, "schema_version": 8}
    if data["schema_version"] == 8:  # 9 only added an optional field (repeat.training)
        data = {**data, "schema_version": 9}
    return data


def _median_intervals(metrics: Any) -> Any:
    """Version 3's summaries held the mean's t-interval under ci_low / ci_high; 4's hold the
    median's. Relabelling would misstate them, so each is recomputed from the summary's own
    stored values (the ok repeats'), exactly as `stats.summarize` computes it today."""
    if not isinstance(metrics, dict):
        return metrics  # not a result's metrics: validation reports it
    out = dict(metrics)
    for name in ("throughput", "step_time_ms", "loadgen_metric"):
        summary = out.get(name)
        if not isinstance(summary, dict) or not isinstance(summary.get("values"), list):
            continue
        try:
            ordered = sorted(float(v) for v in summary["values"])
            ranks = median_ci_ranks(len(ordered), CI_LEVEL) if ordered else None
        except (TypeError, ValueError):
            continue  # malformed values: left as they are for validation to refuse
        out[name] = {
            **summary,
            "ci_level": CI_LEVEL,
            "ci_low": ordered[ranks.low_rank - 1] if ranks else None,
            "ci_high": ordered[ranks.high_rank - 1] if ranks else None,
            "ci_coverage": ranks.coverage if ranks else None,
        }
    return out


class SkippedResult(UserWarning):
    """A file in a results directory that is not a loadable result: skipped, never fatal."""


class DuplicateResult(UserWarning):
    """Two or more files of a results folder hold a result of one id (a copied result): each
    is still read as a result of its own, paired and linked by its file."""


# JSON may spell half of a UTF-16 surrogate pair on its own ("\ud800"): valid JSON, but no
# Unicode text. Python reads it into a str that no UTF-8 writer takes (SQLite, a terminal, a
# page, the feed, an export), so one such result stopped every command that reads its folder.
# Such a result is READ, each lone surrogate shown as its escape (the six characters `\ud800`,
# as `dlperf.printable` shows a control character), not skipped: its measurements are sound,
# only a text field is not text, and dlperf may have written it itself (Python keeps bytes of a
# host name, path or environment that are not UTF-8 as lone surrogates, and `json.dumps` writes
# them so). Escaped here, where every reader loads a result, no writer downstream sees one.
LONE_SURROGATE = re.compile(f"[{SURROGATES}]")
_SURROGATE_IN_JSON = re.compile(r"\\u[dD][89a-fA-F]")  # only such escapes make one


def surrogate_escaped(text: str) -> str:
    """`text` with each lone surrogate written as its escape (`\\ud800`)."""
    return escaped(LONE_SURROGATE, text)


def _escape_surrogates(value: Any, source: str) -> Any:
    """A JSON value with every lone surrogate in its strings (keys too) escaped."""
    if isinstance(value, str):
        return surrogate_escaped(value)
    if isinstance(value, list):
        return [_escape_surrogates(v, source) for v in value]
    if isinstance(value, dict):
        out = {surrogate_escaped(k): _escape_surrogates(v, source) for k, v in value.items()}
        if len(out) != len(value):  # "\ud800" and "\\ud800" both keys: one would be lost
            raise DlperfError(
                f"{source}: cannot read result: two keys differ only by a lone surrogate "
                "(\\ud800 and its escape); fix the file"
            )
        return out
    return value


def load_result(path: Path) -> Result:
    try:
        text = path.read_bytes().decode("utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DlperfError(f"{path}: cannot read result: {exc}") from None
    if _SURROGATE_IN_JSON.search(text):
        data = _escape_surrogates(data, str(path))
    if not isinstance(data, dict):
        raise DlperfError(f"{path}: not a dlperf result (a JSON {type(data).__name__})")
    try:
        return Result.model_validate(upgrade(data, str(path)))
    except ValidationError as exc:
        raise DlperfError(f"{path}: invalid result: {exc}") from None


def result_paths(root: Path) -> list[Path]:
    """Every result file of a results folder, sorted: exactly ``<root>/<folder>/<id>.json``
    (deeper files are raw logs; names starting with a dot are dlperf's own: the index, a
    temporary file). A folder that does not exist holds none; one that cannot be read is a
    DlperfError naming it and the reason (never "no results"); an unreadable subfolder, and a
    file or folder whose name is not UTF-8 text, are skipped with a SkippedResult warning."""
    top = _listing(Path(root))
    if top is None:
        return []
    found = []
    for entry in top:
        if entry.name.startswith(".") or not _is_dir(entry) or not _named_in_text(entry):
            continue
        try:
            inner = sorted(os.scandir(entry.path), key=lambda e: e.name)
        except OSError as exc:
            warnings.warn(f"skipped {entry.path}: {describe(exc)}", SkippedResult, stacklevel=2)
            continue
        found += [
            Path(e.path)
            for e in inner
            if e.name.endswith(".json")
            and not e.name.startswith(".")
            and _is_file(e)
            and _named_in_text(e)
        ]
    return found


def _named_in_text(entry: os.DirEntry) -> bool:
    """Whether `entry`'s name is UTF-8 text; if not, a SkippedResult warning naming it. A result's
    path is written everywhere (the index, links in the site, messages) and a name of other bytes
    (Python's lone surrogates) cannot be: skipped rather than read, as the path is its identity in
    those places and no escaped form names the file; renaming it is the user's fix."""
    if not LONE_SURROGATE.search(entry.name):
        return True
    shown = os.fsencode(entry.path).decode("utf-8", "backslashreplace")
    warnings.warn(f"skipped {shown}: its name is not UTF-8 text; rename it to read it",
                  SkippedResult, stacklevel=3)  # fmt: skip
    return False


def check_readable(root: Path) -> None:
    """Refuse a results folder that exists but cannot be read (listed, or entered: a folder
    with mode rw- lists its names but opens none of them), naming it and the reason; a folder
    that does not exist yet passes."""
    _listing(Path(root))


def _listing(root: Path) -> list[os.DirEntry] | None:
    """The entries of `root` by name (None: it does not exist), or a DlperfError."""
    try:
        top = sorted(os.scandir(root), key=lambda e: e.name)
        os.stat(os.path.join(root, "."))  # search permission: what reads the listed files
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        if not os.path.lexists(root):  # a file above it: no such folder (a write says why)
            return None
        raise DlperfError(f"{root} is a file, not a results folder; give a folder") from None
    except OSError as exc:
        raise DlperfError(f"cannot read the results folder {root}: {describe(exc)}") from None
    return top


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def load_each(paths: Iterable[Path]) -> list[tuple[Path, Result]]:
    """Each loadable result with its file. A file that is not one (bad JSON, not UTF-8,
    another schema, written by a newer dlperf) is skipped with a SkippedResult warning naming
    it: one bad file never makes the rest of the folder unreadable."""
    found = []
    for path in paths:
        try:
            found.append((path, load_result(path)))
        except DlperfError as exc:
            warnings.warn(f"skipped {exc}", SkippedResult, stacklevel=3)
    return found
